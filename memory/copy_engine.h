#pragma once
/// @file
/// The copy engine: multithreaded byte copies between tiers (non-temporal stores into the slow
/// tier), the slow-tier model's charging, and an asynchronous mover thread so migrations overlap
/// compute.
///
/// Note [Copy kinds]
/// `ToSlow` copies always use non-temporal stores: data going to the slow tier is not about to be
/// used and should not evict the working set, and on Optane a cached store costs a
/// read-for-ownership from PM plus a write-back in LLC eviction order; the dissertation found
/// non-temporal stores critical for PM write bandwidth (§2.3.3, §4.7.1). `Normal` and `FromSlow`
/// copies use ordinary (cached) stores up to detail::nontemporal_threshold_bytes() (2 x L2), since
/// their destination is about to be used, and non-temporal stores beyond, where those are faster
/// (no read-for-ownership of each destination line) and a cached copy would only flush the caches
/// that concurrent compute is using. Every copy is byte-exact for every size and alignment: heads
/// and tails that do not cover a whole aligned cache line use ordinary stores, and each thread
/// fences (sfence) its non-temporal stores before copy_bytes returns. The kernels are described in
/// Note [Four-page interleaved copy] (copy_engine.cpp).

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string_view>
#include <thread>
#include <vector>

#include "memory/slow_tier_model.h"
#include "memory/tier.h"

namespace strata::memory {

/// Where a copy goes (Note [Copy kinds]).
enum class CopyKind {
  Normal,    ///< fast to fast: cached stores up to 2 x L2, non-temporal beyond
  ToSlow,    ///< fast to slow tier: non-temporal stores
  FromSlow,  ///< slow tier to fast: cached stores up to 2 x L2, non-temporal beyond
};

/// "Normal", "ToSlow" or "FromSlow".
std::string_view copy_kind_name(CopyKind kind);

/// The kind of a copy between two tiers: into the slow tier is ToSlow, out of it FromSlow, anything
/// else (fast to fast, slow to slow) Normal. For DataManager::set_copy_function.
constexpr CopyKind copy_kind_between(Tier from, Tier to) {
  if (to == Tier::Slow && from != Tier::Slow) return CopyKind::ToSlow;
  if (from == Tier::Slow && to != Tier::Slow) return CopyKind::FromSlow;
  return CopyKind::Normal;
}

/// Copies n bytes from src to dst with the stores Note [Copy kinds] describes. Copies of at least
/// 2 x kParallelChunkBytes run on strata::parallel_for (at most get_num_threads() threads) in chunks
/// of at least kParallelChunkBytes; smaller ones run on the calling thread. n == 0 does nothing.
/// Throws strata::Error if n > 0 and either pointer is null, or if the ranges overlap.
void copy_bytes(void* dst, const void* src, std::size_t n, CopyKind kind = CopyKind::Normal);

/// copy_bytes, charged to `throttle` when it is non-null and enabled: ToSlow is charged as a
/// slow-tier write, FromSlow as a slow-tier read, Normal is not charged. The reservation is taken
/// before the copy and completed after it, so the call lasts max(real copy, modeled) time.
void copy_bytes_modeled(void* dst, const void* src, std::size_t n, CopyKind kind, SlowTierThrottle* throttle);

/// Minimum bytes per parallel chunk of copy_bytes.
inline constexpr std::size_t kParallelChunkBytes = std::size_t{256} << 10;

/// DRAM copy bandwidth of this machine at the current thread count (strata::get_num_threads), in
/// GB/s counted like STREAM's Copy: bytes read plus bytes written per second. A quick measurement
/// (<= ~0.3 s: buffers 1.5x the last-level cache, the best of a few parallel copies with the C
/// library's memcpy and with non-temporal stores), cached per thread count after the first call.
/// On a shared machine the figure moves with the load of the other tenants.
double measure_dram_copy_gbps();

/// Random-gather bandwidth of DRAM at the current thread count, in GB/s of row bytes read: rows of
/// `row_bytes` (a multiple of 64) at uniformly random positions of a buffer 1.5x the last-level
/// cache, summed as embedding lookups read them (8 rows in flight per thread). The best of a few
/// short passes (<= ~0.2 s in all), cached per (thread count, row size) after the first call. The
/// slow-tier model scales its random-row bandwidths to it (Note [Slow-tier model]).
double measure_dram_gather_gbps(std::size_t row_bytes = 256);

namespace detail {
/// The vector width of the copy kernels copy_bytes uses on this machine: "avx512", "avx", "sse2",
/// or "none" (not x86: plain memcpy). Reported by benchmarks.
std::string_view stream_store_isa();
/// Bytes above which Normal/FromSlow copies use non-temporal stores (Note [Copy kinds]).
std::size_t nontemporal_threshold_bytes();
/// Single-threaded non-temporal copy (the ToSlow kernel), exposed for tests and benchmarks.
void stream_copy(void* dst, const void* src, std::size_t n);
/// The kernel sets this CPU can run, widest first (a subset of avx512, avx, sse2; "none" off x86).
std::vector<std::string_view> available_copy_isas();
/// Single-threaded copy with one ISA's kernel (from available_copy_isas(); strata::Error
/// otherwise), with non-temporal or ordinary stores, so tests cover every kernel, not only the one
/// this machine picks.
void copy_with(std::string_view isa, bool nontemporal, void* dst, const void* src, std::size_t n);
struct MoveState;
}  // namespace detail

/// Completion handle of a job submitted to a Mover. Copyable; all copies refer to the same job.
class MoveHandle {
 public:
  /// An empty handle (valid() is false).
  MoveHandle() = default;

  bool valid() const { return state_ != nullptr; }
  /// True once the job has finished (successfully or not). Never blocks.
  bool done() const;
  /// True once the mover has begun running the job (and ever after). Never blocks.
  bool started() const;
  /// Blocks until the job has finished; rethrows the job's exception if it threw (every call).
  /// Throws strata::Error on an empty handle, or when called from the mover thread itself for a job
  /// that has not run yet (that would deadlock).
  void wait() const;
  /// The job's running time (excluding time spent queued). Waits for the job first; does not
  /// rethrow its exception.
  std::chrono::nanoseconds duration() const;
  /// Time the job spent in the queue before it started. Waits for the job first.
  std::chrono::nanoseconds queued() const;

 private:
  friend class Mover;
  explicit MoveHandle(std::shared_ptr<detail::MoveState> s) : state_(std::move(s)) {}
  void wait_quietly() const;
  std::shared_ptr<detail::MoveState> state_;
};

/// One asynchronous mover thread with a FIFO request queue: jobs run one at a time, in submission
/// order, on the mover thread (a job may itself use strata::parallel_for, e.g. via copy_bytes).
/// submit() is thread-safe. A job that throws does not stop the mover; its handle rethrows.
class Mover {
 public:
  Mover();
  /// Drains the queue (runs every job already submitted), then joins the thread.
  ~Mover();
  Mover(const Mover&) = delete;
  Mover& operator=(const Mover&) = delete;

  /// Enqueues a job. Throws strata::Error for an empty std::function.
  MoveHandle submit(std::function<void()> job);
  /// Blocks until every job submitted so far (by any thread) has finished. Throws strata::Error when
  /// called from the mover thread (it would wait for itself).
  void wait_all();
  /// Jobs queued or running right now.
  std::size_t pending() const;
  /// Jobs finished since construction.
  std::size_t completed() const;
  /// True on the mover thread (inside a job).
  bool on_mover_thread() const { return std::this_thread::get_id() == thread_id_; }

 private:
  void run();

  mutable std::mutex mutex_;
  std::condition_variable work_cv_;  // mover waits for jobs / shutdown
  std::condition_variable idle_cv_;  // wait_all waits for pending_ == 0
  std::deque<std::shared_ptr<detail::MoveState>> queue_;
  std::size_t pending_ = 0;  // queued + running
  std::size_t completed_ = 0;
  bool stopping_ = false;
  std::thread::id thread_id_;
  std::thread thread_;
};

}  // namespace strata::memory
