#include "memory/copy_engine.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>
#include <utility>

#include "core/error.h"
#include "core/threading.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define STRATA_COPY_X86 1
#else
#define STRATA_COPY_X86 0
#endif

#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define STRATA_COPY_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer)
#define STRATA_COPY_SANITIZED 1
#endif
#endif
#ifndef STRATA_COPY_SANITIZED
#define STRATA_COPY_SANITIZED 0
#endif

namespace strata::memory {

namespace {

constexpr std::size_t kLine = 64;

// ---- Kernels -------------------------------------------------------------------------------------
// Note [Four-page interleaved copy]
// A body copies `lines` whole 64-byte lines to a 64-byte-aligned dst from any src, with unaligned
// loads and either streaming (non-temporal) or ordinary stores; copy_lines() adds the unaligned
// head and tail and the fence. The bulk is copied in blocks of four 4 KiB pages, taking the next
// 128 bytes (64 for SSE2, which has only 16 registers) of each of the four pages in turn, with a
// software prefetch 512 bytes ahead in each. Four concurrent page streams keep more memory
// requests in flight than one linear stream (hardware prefetchers track streams per page); glibc's
// large memcpy uses the same layout. Measured on the development VM (Sapphire Rapids class,
// 2 vCPUs, 2 MiB L2, interleaved medians), one thread, against glibc memcpy on the same buffers:
//  * streaming stores: 18-34% faster than a linear streaming loop (4-160 MiB); 0.62-0.86x
//    memcpy's time from 2 MiB to 256 MiB (bench/RESULTS.md);
//  * ordinary stores: ~2x memcpy (rep movsb) at 256-512 KiB, 1.1-1.5x at 1-3 MiB, behind it from
//    ~4 MiB; streaming stores overtake them at ~4 MiB = 2 x L2, for one thread and for two.
// Hence nontemporal_threshold_bytes() = 2 x L2: above it Normal/FromSlow copies stream too (the
// nominal 105 MiB shared L3 of that VM did not act as a cache for copies). Copies under 64 KiB with
// ordinary stores are left to memcpy. The build targets baseline x86-64 (SSE2), so the wider
// variants are compiled with target attributes and picked at run time (copy_kernels()).

using Body = void (*)(char*, const char*, std::size_t);

struct KernelSet {
  std::string_view isa;
  Body stream;  // non-temporal stores
  Body store;   // ordinary stores
};

#if STRATA_COPY_X86
constexpr std::size_t kPage = 4096, kPages = 4, kBlock = kPage * kPages, kPrefetch = 512;

// Defines `name`, a Body: VEC is the vector type, W its width in bytes, STEP the bytes taken from
// each page per round, LOAD the unaligned load, STORE the (streaming or ordinary) aligned store.
#define STRATA_COPY_BODY(ATTR, name, VEC, W, STEP, LOAD, STORE)                                 \
  ATTR void name(char* d, const char* s, std::size_t lines) {                                   \
    constexpr std::size_t kVecs = (STEP) / (W);                                                 \
    const std::size_t n = lines * kLine;                                                        \
    std::size_t i = 0;                                                                          \
    for (; i + kBlock <= n; i += kBlock) {                                                      \
      const char* sb = s + i;                                                                   \
      char* db = d + i;                                                                         \
      for (std::size_t o = 0; o < kPage; o += (STEP)) {                                         \
        VEC v[kPages][kVecs];                                                                   \
        for (std::size_t p = 0; p < kPages; ++p)                                                \
          for (std::size_t q = 0; q < (STEP); q += kLine)                                       \
            _mm_prefetch(sb + p * kPage + o + q + kPrefetch, _MM_HINT_T0);                      \
        for (std::size_t p = 0; p < kPages; ++p)                                                \
          for (std::size_t k = 0; k < kVecs; ++k) v[p][k] = LOAD(sb + p * kPage + o + k * (W)); \
        for (std::size_t p = 0; p < kPages; ++p)                                                \
          for (std::size_t k = 0; k < kVecs; ++k) STORE(db + p * kPage + o + k * (W), v[p][k]); \
      }                                                                                         \
    }                                                                                           \
    for (; i < n; i += kLine)                                                                   \
      for (std::size_t k = 0; k < kLine; k += (W)) STORE(d + i + k, LOAD(s + i + k));           \
  }

#define STRATA_LOAD128(p) _mm_loadu_si128(reinterpret_cast<const __m128i*>(p))
#define STRATA_STREAM128(p, v) _mm_stream_si128(reinterpret_cast<__m128i*>(p), v)
#define STRATA_STORE128(p, v) _mm_store_si128(reinterpret_cast<__m128i*>(p), v)
STRATA_COPY_BODY(, stream_sse2, __m128i, 16, 64, STRATA_LOAD128, STRATA_STREAM128)
STRATA_COPY_BODY(, store_sse2, __m128i, 16, 64, STRATA_LOAD128, STRATA_STORE128)

#if defined(__GNUC__) || defined(__clang__)
#define STRATA_COPY_DISPATCH 1
#define STRATA_LOAD256(p) _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))
#define STRATA_STREAM256(p, v) _mm256_stream_si256(reinterpret_cast<__m256i*>(p), v)
#define STRATA_STORE256(p, v) _mm256_store_si256(reinterpret_cast<__m256i*>(p), v)
#define STRATA_LOAD512(p) _mm512_loadu_si512(p)
#define STRATA_STREAM512(p, v) _mm512_stream_si512(reinterpret_cast<__m512i*>(p), v)
#define STRATA_STORE512(p, v) _mm512_store_si512(p, v)
#define STRATA_AVX __attribute__((target("avx")))
#define STRATA_AVX512 __attribute__((target("avx512f")))
STRATA_COPY_BODY(STRATA_AVX, stream_avx_body, __m256i, 32, 128, STRATA_LOAD256, STRATA_STREAM256)
STRATA_COPY_BODY(STRATA_AVX, store_avx_body, __m256i, 32, 128, STRATA_LOAD256, STRATA_STORE256)
STRATA_COPY_BODY(STRATA_AVX512, stream_avx512_body, __m512i, 64, 128, STRATA_LOAD512, STRATA_STREAM512)
STRATA_COPY_BODY(STRATA_AVX512, store_avx512_body, __m512i, 64, 128, STRATA_LOAD512, STRATA_STORE512)
// vzeroupper after the wide bodies so that SSE code afterwards pays no transition penalty.
STRATA_AVX void stream_avx(char* d, const char* s, std::size_t lines) {
  stream_avx_body(d, s, lines);
  _mm256_zeroupper();
}
STRATA_AVX void store_avx(char* d, const char* s, std::size_t lines) {
  store_avx_body(d, s, lines);
  _mm256_zeroupper();
}
STRATA_AVX512 void stream_avx512(char* d, const char* s, std::size_t lines) {
  stream_avx512_body(d, s, lines);
  _mm256_zeroupper();
}
STRATA_AVX512 void store_avx512(char* d, const char* s, std::size_t lines) {
  store_avx512_body(d, s, lines);
  _mm256_zeroupper();
}
#else
#define STRATA_COPY_DISPATCH 0
#endif

// Every kernel set this CPU can run, widest first; the first is the one copy_bytes uses.
std::vector<KernelSet> supported_kernels() {
  std::vector<KernelSet> v;
#if STRATA_COPY_DISPATCH
  __builtin_cpu_init();
#if defined(__AVX512F__)
  v.push_back({"avx512", stream_avx512, store_avx512});
#else
  if (__builtin_cpu_supports("avx512f")) v.push_back({"avx512", stream_avx512, store_avx512});
#endif
#if defined(__AVX__)
  v.push_back({"avx", stream_avx, store_avx});
#else
  if (__builtin_cpu_supports("avx")) v.push_back({"avx", stream_avx, store_avx});
#endif
#endif
  v.push_back({"sse2", stream_sse2, store_sse2});
  return v;
}

void fence_streaming_stores() { _mm_sfence(); }
#else  // not x86: memcpy throughout
void memcpy_lines(char* d, const char* s, std::size_t lines) { std::memcpy(d, s, lines * kLine); }
std::vector<KernelSet> supported_kernels() { return {{"none", memcpy_lines, memcpy_lines}}; }
void fence_streaming_stores() {}
#endif

const std::vector<KernelSet>& copy_kernels() {
  static const std::vector<KernelSet> kernels = supported_kernels();
  return kernels;
}

// Any n, any alignment: ordinary stores up to dst's first line boundary, `body` over the whole
// lines, ordinary stores for the tail; then a fence if the body streams.
void copy_lines(char* d, const char* s, std::size_t n, Body body, bool streaming) {
  const std::size_t head = (kLine - (reinterpret_cast<std::uintptr_t>(d) & (kLine - 1))) & (kLine - 1);
  if (n < head + kLine) {  // no whole aligned line
    std::memcpy(d, s, n);
    return;
  }
  std::memcpy(d, s, head);
  d += head;
  s += head;
  n -= head;
  const std::size_t lines = n / kLine;
  body(d, s, lines);
  const std::size_t done = lines * kLine;
  std::memcpy(d + done, s + done, n - done);
  // This thread's streaming stores are ordered before anything it does next (in particular the
  // release that ends its share of a parallel copy).
  if (streaming) fence_streaming_stores();
}

constexpr std::size_t kCachedKernelMinBytes = std::size_t{64} << 10;

void stream_copy_impl(char* d, const char* s, std::size_t n) {
  copy_lines(d, s, n, copy_kernels().front().stream, true);
}

void cached_copy_impl(char* d, const char* s, std::size_t n) {
  if (n < kCachedKernelMinBytes)
    std::memcpy(d, s, n);
  else
    copy_lines(d, s, n, copy_kernels().front().store, false);
}

void memcpy_impl(char* d, const char* s, std::size_t n) { std::memcpy(d, s, n); }

using Kernel = void (*)(char*, const char*, std::size_t);

// Splits [0, n) at dst's line boundaries into chunks of kParallelChunkBytes (the first also takes
// the unaligned head, the last the remainder, so none is smaller). One parallel_for task per thread
// claims chunks from a shared counter until none are left, so a worker that is descheduled (these
// machines are shared) delays the copy by at most the chunk it holds, and one that never starts
// costs nothing: the others take its share. Copies under two chunks stay on this thread.
// Note [Mover copies stay on the mover]
// A copy made by a Mover's job (a spill or prefetch overlapping compute) runs on the mover thread
// alone. Split over the TBB arena like a synchronous copy, its chunks would run on the compute
// threads — the very work the move was meant to hide behind — and the mover thread, waiting in
// the arena, would take a worker's slot: on a 2-core machine every spill stalled a parallel
// region of the forward. Alone, the copy takes one core's bandwidth (enough: the slow tier's is
// lower) and the compute threads keep theirs.
thread_local bool serial_copies = false;  // true on a Mover's thread

void run_copy(char* d, const char* s, std::size_t n, Kernel kernel) {
  const std::size_t head = (kLine - (reinterpret_cast<std::uintptr_t>(d) & (kLine - 1))) & (kLine - 1);
  const int threads = get_num_threads();
  if (threads == 1 || serial_copies || n < head + 2 * kParallelChunkBytes) {
    kernel(d, s, n);
    return;
  }
  const std::size_t chunks = (n - head) / kParallelChunkBytes;
  auto bound = [&](std::size_t c) { return c == 0 ? 0 : c >= chunks ? n : head + c * kParallelChunkBytes; };
  std::atomic<std::size_t> next{0};
  const auto workers = static_cast<int64_t>(std::min<std::size_t>(static_cast<std::size_t>(threads), chunks));
  parallel_for(workers, 1, [&](int64_t, int64_t) {
    for (;;) {
      const std::size_t c = next.fetch_add(1, std::memory_order_relaxed);
      if (c >= chunks) break;
      const std::size_t lo = bound(c), hi = bound(c + 1);
      kernel(d + lo, s + lo, hi - lo);
    }
  });
}

std::size_t compute_nontemporal_threshold() {
  // Note [Four-page interleaved copy]: streaming stores win above ~2 x L2. Unknown L2: 2 MiB.
  const long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
  const std::size_t cache = l2 > 0 ? static_cast<std::size_t>(l2) : std::size_t{2} << 20;
  return std::max<std::size_t>(2 * cache, std::size_t{1} << 20);
}

void check_args(const char* op, const void* dst, const void* src, std::size_t n) {
  STRATA_CHECK(dst != nullptr && src != nullptr, op, ": null ", dst == nullptr ? "destination" : "source",
               " pointer with a size of ", n, " bytes (null is only allowed when n == 0)");
  const auto d = reinterpret_cast<std::uintptr_t>(dst);
  const auto s = reinterpret_cast<std::uintptr_t>(src);
  STRATA_CHECK(n <= UINTPTR_MAX - std::max(d, s), op, ": a size of ", n,
               " bytes runs past the end of the address space");
  STRATA_CHECK(d + n <= s || s + n <= d, op, ": source [", src, ", +", n, ") and destination [", dst, ", +", n,
               ") overlap");
}

}  // namespace

std::string_view copy_kind_name(CopyKind kind) {
  switch (kind) {
    case CopyKind::Normal: return "Normal";
    case CopyKind::ToSlow: return "ToSlow";
    case CopyKind::FromSlow: return "FromSlow";
  }
  return "?";
}

namespace detail {

std::string_view stream_store_isa() { return copy_kernels().front().isa; }

std::size_t nontemporal_threshold_bytes() {
  static const std::size_t t = compute_nontemporal_threshold();
  return t;
}

void stream_copy(void* dst, const void* src, std::size_t n) {
  if (n == 0) return;
  check_args("stream_copy", dst, src, n);
  stream_copy_impl(static_cast<char*>(dst), static_cast<const char*>(src), n);
}

std::vector<std::string_view> available_copy_isas() {
  std::vector<std::string_view> v;
  for (const auto& k : copy_kernels()) v.push_back(k.isa);
  return v;
}

void copy_with(std::string_view isa, bool nontemporal, void* dst, const void* src, std::size_t n) {
  for (const auto& k : copy_kernels()) {
    if (k.isa != isa) continue;
    if (n == 0) return;
    check_args("copy_with", dst, src, n);
    copy_lines(static_cast<char*>(dst), static_cast<const char*>(src), n, nontemporal ? k.stream : k.store,
               nontemporal);
    return;
  }
  std::string available;
  for (auto i : available_copy_isas()) available += (available.empty() ? "" : ", ") + std::string(i);
  STRATA_FAIL("copy_with: no '", isa, "' kernel on this CPU (available: ", available, ")");
}

}  // namespace detail

void copy_bytes(void* dst, const void* src, std::size_t n, CopyKind kind) {
  if (n == 0) return;
  check_args("copy_bytes", dst, src, n);
  const bool stream = kind == CopyKind::ToSlow || n >= detail::nontemporal_threshold_bytes();
  run_copy(static_cast<char*>(dst), static_cast<const char*>(src), n, stream ? stream_copy_impl : cached_copy_impl);
}

void copy_bytes_modeled(void* dst, const void* src, std::size_t n, CopyKind kind, SlowTierThrottle* throttle) {
  if (n == 0) return;
  check_args("copy_bytes_modeled", dst, src, n);
  SlowTierThrottle::Reservation r;
  if (throttle != nullptr) {
    if (kind == CopyKind::ToSlow) r = throttle->reserve_write(n);
    if (kind == CopyKind::FromSlow) r = throttle->reserve_read(n);
  }
  copy_bytes(dst, src, n, kind);
  if (throttle != nullptr) throttle->complete(r);
}

// ---- DRAM copy bandwidth -------------------------------------------------------------------------

namespace {

struct MappedBuffer {
  void* p = nullptr;
  std::size_t n = 0;
  explicit MappedBuffer(std::size_t bytes) : n(bytes) {
    p = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    STRATA_CHECK(p != MAP_FAILED, "measure_dram_copy_gbps: cannot map ", n, " bytes");
#ifdef MADV_HUGEPAGE
    madvise(p, n, MADV_HUGEPAGE);  // fewer faults to populate; failure is harmless
#endif
  }
  ~MappedBuffer() { munmap(p, n); }
  MappedBuffer(const MappedBuffer&) = delete;
  MappedBuffer& operator=(const MappedBuffer&) = delete;
  char* data() const { return static_cast<char*>(p); }
};

double measure_now() {
  using clock = std::chrono::steady_clock;
  const auto t_start = clock::now();
  // Each buffer 1.5x the last-level cache (64-192 MiB) so that the copy streams from DRAM; at 1x the
  // development VM measured 10-25% lower than at 1.5x. Sanitized builds only check that the code
  // runs: their figure is meaningless anyway.
  const long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
  std::size_t bytes = std::clamp<std::size_t>(l3 > 0 ? static_cast<std::size_t>(l3) / 2 * 3 : 0, std::size_t{64} << 20,
                                              std::size_t{192} << 20);
  if (STRATA_COPY_SANITIZED) bytes = std::size_t{4} << 20;
  bytes &= ~(std::size_t{2 << 20} - 1);
  MappedBuffer a(bytes), b(bytes);
  // Populate both in parallel (first touch), then copy alternately with each kernel.
  parallel_for(static_cast<int64_t>(bytes / kParallelChunkBytes), 1, [&](int64_t lo, int64_t hi) {
    const std::size_t o = static_cast<std::size_t>(lo) * kParallelChunkBytes;
    const std::size_t len = static_cast<std::size_t>(hi - lo) * kParallelChunkBytes;
    std::memset(a.data() + o, 1, len);
    std::memset(b.data() + o, 2, len);
  });
  double best = 1e30;
  const Kernel kernels[2] = {memcpy_impl, stream_copy_impl};
  constexpr double kBudgetSeconds = 0.28;
  for (int rep = 0; rep < 8; ++rep) {
    const auto t0 = clock::now();
    run_copy(b.data(), a.data(), bytes, kernels[rep % 2]);
    const auto t1 = clock::now();
    best = std::min(best, std::chrono::duration<double>(t1 - t0).count());
    const double elapsed = std::chrono::duration<double>(t1 - t_start).count();
    // Stop when one more round of both kernels would exceed the budget (but try each kernel once).
    const double last = std::chrono::duration<double>(t1 - t0).count();
    if (rep % 2 == 1 && elapsed + 2 * last > kBudgetSeconds) break;
  }
  return 2.0 * static_cast<double>(bytes) / best / 1e9;  // STREAM counts read + written bytes
}

}  // namespace

double measure_dram_copy_gbps() {
  static std::mutex mutex;
  static std::map<int, double> cache;  // by thread count
  const int threads = get_num_threads();
  std::lock_guard<std::mutex> lock(mutex);
  auto it = cache.find(threads);
  if (it != cache.end()) return it->second;
  const double gbps = measure_now();
  cache.emplace(threads, gbps);
  return gbps;
}

namespace {

double measure_gather_now(std::size_t row_bytes) {
  using clock = std::chrono::steady_clock;
  const long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
  std::size_t bytes = std::clamp<std::size_t>(l3 > 0 ? static_cast<std::size_t>(l3) / 2 * 3 : 0, std::size_t{64} << 20,
                                              std::size_t{192} << 20);
  if (STRATA_COPY_SANITIZED) bytes = std::size_t{4} << 20;
  bytes &= ~(std::size_t{2 << 20} - 1);
  MappedBuffer a(bytes);
  parallel_for(static_cast<int64_t>(bytes / kParallelChunkBytes), 1, [&](int64_t lo, int64_t hi) {
    const std::size_t o = static_cast<std::size_t>(lo) * kParallelChunkBytes;
    std::memset(a.data() + o, 1, static_cast<std::size_t>(hi - lo) * kParallelChunkBytes);
  });
  const std::size_t nrows = bytes / row_bytes;
  const std::size_t words = row_bytes / sizeof(std::uint64_t);
  // Row numbers from a fixed LCG, drawn per pass and block so the passes are reproducible.
  constexpr int64_t kBlock = 4096;
  // 64 MiB of 256-byte rows per pass (sanitized builds only check that the code runs).
  const int64_t kRowsPerPass = STRATA_COPY_SANITIZED ? kBlock : int64_t{1} << 18;
  std::atomic<std::uint64_t> sink{0};
  double best = 1e30;
  const auto t_start = clock::now();
  for (int pass = 0; pass < 6; ++pass) {
    const auto t0 = clock::now();
    parallel_for(kRowsPerPass / kBlock, 1, [&](int64_t lo, int64_t hi) {
      std::uint64_t acc = 0;
      for (int64_t blk = lo; blk < hi; ++blk) {
        std::uint64_t x = 0x9E3779B97F4A7C15ull * static_cast<std::uint64_t>(blk + 1 + pass * 7919);
        std::size_t rows[kBlock];
        for (auto& r : rows) {
          x = x * 6364136223846793005ull + 1442695040888963407ull;
          r = static_cast<std::size_t>((x >> 17) % nrows);
        }
        constexpr int kAhead = 8;
        for (int64_t i = 0; i < kBlock; ++i) {
          if (i + kAhead < kBlock) {
            const char* q = a.data() + rows[i + kAhead] * row_bytes;
            for (std::size_t off = 0; off < row_bytes; off += 64) __builtin_prefetch(q + off, 0, 3);
          }
          const auto* w = reinterpret_cast<const std::uint64_t*>(a.data() + rows[i] * row_bytes);
          for (std::size_t k = 0; k < words; ++k) acc += w[k];
        }
      }
      sink.fetch_add(acc, std::memory_order_relaxed);
    });
    const auto t1 = clock::now();
    best = std::min(best, std::chrono::duration<double>(t1 - t0).count());
    if (pass >= 2 && std::chrono::duration<double>(t1 - t_start).count() > 0.2) break;
  }
  return static_cast<double>(kRowsPerPass) * static_cast<double>(row_bytes) / best / 1e9;
}

}  // namespace

double measure_dram_gather_gbps(std::size_t row_bytes) {
  STRATA_CHECK(row_bytes >= 64 && row_bytes % 64 == 0 && row_bytes <= (std::size_t{1} << 20),
               "measure_dram_gather_gbps: row_bytes must be a multiple of 64 in [64, 1 MiB], got ", row_bytes);
  static std::mutex mutex;
  static std::map<std::pair<int, std::size_t>, double> cache;  // by (threads, row bytes)
  const auto key = std::make_pair(get_num_threads(), row_bytes);
  std::lock_guard<std::mutex> lock(mutex);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  const double gbps = measure_gather_now(row_bytes);
  cache.emplace(key, gbps);
  return gbps;
}

// ---- Mover ---------------------------------------------------------------------------------------

namespace detail {

struct MoveState {
  std::function<void()> job;
  std::thread::id mover;
  std::mutex mutex;
  std::condition_variable cv;
  std::atomic<bool> done{false};
  std::atomic<bool> running{false};  // set when the mover takes the job
  std::exception_ptr error;          // written before done is set, read after
  std::chrono::steady_clock::time_point submitted, started, finished;
};

}  // namespace detail

bool MoveHandle::done() const { return state_ != nullptr && state_->done.load(std::memory_order_acquire); }

bool MoveHandle::started() const { return state_ != nullptr && state_->running.load(std::memory_order_acquire); }

void MoveHandle::wait_quietly() const {
  STRATA_CHECK(state_ != nullptr, "MoveHandle::wait: empty handle (it was never returned by Mover::submit)");
  if (state_->done.load(std::memory_order_acquire)) return;
  STRATA_CHECK(std::this_thread::get_id() != state_->mover,
               "MoveHandle::wait: called on the mover thread for a job queued behind the current one; "
               "it would wait for itself forever");
  std::unique_lock<std::mutex> lock(state_->mutex);
  state_->cv.wait(lock, [&] { return state_->done.load(std::memory_order_acquire); });
}

void MoveHandle::wait() const {
  wait_quietly();
  if (state_->error) std::rethrow_exception(state_->error);
}

std::chrono::nanoseconds MoveHandle::duration() const {
  wait_quietly();
  return std::chrono::duration_cast<std::chrono::nanoseconds>(state_->finished - state_->started);
}

std::chrono::nanoseconds MoveHandle::queued() const {
  wait_quietly();
  return std::chrono::duration_cast<std::chrono::nanoseconds>(state_->started - state_->submitted);
}

Mover::Mover() {
  std::lock_guard<std::mutex> lock(mutex_);  // publishes thread_id_ to the mover thread
  thread_ = std::thread([this] { run(); });
  thread_id_ = thread_.get_id();
}

Mover::~Mover() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  work_cv_.notify_all();
  thread_.join();
}

MoveHandle Mover::submit(std::function<void()> job) {
  STRATA_CHECK(static_cast<bool>(job), "Mover::submit: empty job (a default-constructed std::function)");
  auto state = std::make_shared<detail::MoveState>();
  state->job = std::move(job);
  state->mover = thread_id_;
  state->submitted = std::chrono::steady_clock::now();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(state);
    ++pending_;
  }
  work_cv_.notify_one();
  return MoveHandle(std::move(state));
}

void Mover::wait_all() {
  STRATA_CHECK(!on_mover_thread(),
               "Mover::wait_all: called from a job on the mover thread; it would "
               "wait for itself forever");
  std::unique_lock<std::mutex> lock(mutex_);
  idle_cv_.wait(lock, [&] { return pending_ == 0; });
}

std::size_t Mover::pending() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return pending_;
}

std::size_t Mover::completed() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return completed_;
}

void Mover::run() {
#if !defined(__SANITIZE_THREAD__)
  // (Under ThreadSanitizer parallel_for runs on plain threads and every copied line is
  // instrumented: a serial copy there only doubles the suites' time, and performance is not tested.)
  serial_copies = true;
#endif
  for (;;) {
    std::shared_ptr<detail::MoveState> s;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      work_cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and everything submitted has run
      s = std::move(queue_.front());
      queue_.pop_front();
    }
    s->started = std::chrono::steady_clock::now();
    s->running.store(true, std::memory_order_release);
    try {
      s->job();
    } catch (...) {
      s->error = std::current_exception();
    }
    s->finished = std::chrono::steady_clock::now();
    s->job = nullptr;  // release the job's captures on the mover thread, before completion
    {
      std::lock_guard<std::mutex> lock(s->mutex);
      s->done.store(true, std::memory_order_release);
    }
    s->cv.notify_all();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      --pending_;
      ++completed_;
      if (pending_ == 0) idle_cv_.notify_all();
    }
  }
}

}  // namespace strata::memory
