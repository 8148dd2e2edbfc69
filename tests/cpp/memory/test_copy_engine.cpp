#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <future>
#include <limits>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "core/threading.h"
#include "memory/copy_engine.h"
#include "memory/slow_tier_model.h"

namespace strata::memory {
namespace {

using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;

constexpr unsigned char kCanary = 0xEE;
constexpr CopyKind kAllKinds[] = {CopyKind::Normal, CopyKind::ToSlow, CopyKind::FromSlow};

// Pseudo-random bytes (splitmix64, eight bytes per step): no two 8-byte words alike, so a byte
// copied to the wrong place shows.
std::vector<unsigned char> random_bytes(std::size_t n, unsigned seed) {
  std::vector<unsigned char> v(n);
  std::uint64_t x = 0x9E3779B97F4A7C15ull * (seed + 1);
  for (std::size_t i = 0; i < n; i += 8) {
    std::uint64_t z = (x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    std::memcpy(v.data() + i, &z, std::min<std::size_t>(8, n - i));
  }
  return v;
}

// 64-byte-aligned storage with room for offsets on both sides.
struct AlignedBuf {
  std::vector<unsigned char> raw;
  unsigned char* base;
  explicit AlignedBuf(std::size_t n) : raw(n + 128) {
    auto p = reinterpret_cast<std::uintptr_t>(raw.data());
    base = reinterpret_cast<unsigned char*>((p + 63) & ~std::uintptr_t{63});
  }
};

// Restores the global thread count at scope exit.
struct ThreadCountGuard {
  int saved = get_num_threads();
  ~ThreadCountGuard() { set_num_threads(saved); }
};

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// ---- copy_bytes: byte-exactness ------------------------------------------------------------------

// Every size 0..kMax at every destination alignment within a cache line (which decides the
// non-temporal head, body and tail), for each kind and each non-temporal kernel, against every
// source alignment for destination offsets 0, 1 and 63 and eight spread ones otherwise (the source
// side is only ever read with unaligned loads). The bytes around the destination stay untouched.
TEST(CopyBytes, ExactForEverySmallSizeAndAlignment) {
  constexpr std::size_t kMax = 300;  // > head (63) + four whole lines + a partial tail
  const auto src_bytes = random_bytes(kMax + 64, 1);
  AlignedBuf src(kMax + 64), dst(kMax + 64);
  std::memcpy(src.base, src_bytes.data(), src_bytes.size());
  std::memset(dst.base, kCanary, kMax + 128);
  const std::vector<unsigned char> canary(kMax + 128, kCanary);

  // The three kinds through copy_bytes, then each kernel this CPU has, streaming and ordinary.
  const std::vector<std::string_view> isas = detail::available_copy_isas();
  ASSERT_FALSE(isas.empty());
  const int variants = 3 + 2 * static_cast<int>(isas.size());
  for (int variant = 0; variant < variants; ++variant) {
    for (std::size_t doff = 0; doff < 64; ++doff) {
      const bool all_src = doff == 0 || doff == 1 || doff == 63;
      for (std::size_t soff = 0; soff < 64; soff += all_src ? 1 : 8) {
        for (std::size_t n = 0; n <= kMax; ++n) {
          unsigned char* d = dst.base + doff;
          const unsigned char* s = src.base + (all_src ? soff : (soff + doff) % 64);
          if (variant < 3)
            copy_bytes(d, s, n, kAllKinds[variant]);
          else
            detail::copy_with(isas[(variant - 3) / 2], (variant - 3) % 2 == 0, d, s, n);
          const bool ok = std::memcmp(d, s, n) == 0 && std::memcmp(dst.base, canary.data(), doff) == 0 &&
                          std::memcmp(d + n, canary.data(), 64) == 0;
          if (!ok) {
            FAIL() << (variant < 3 ? copy_kind_name(kAllKinds[variant]) : isas[(variant - 3) / 2])
                   << (variant >= 3 && (variant - 3) % 2 == 0 ? " streaming" : "") << " dst offset " << doff
                   << " src offset " << soff << " n " << n;
          }
          std::memset(d, kCanary, n);
        }
      }
    }
  }
}

// The four-page block loop of every kernel, streaming and ordinary (16 KiB blocks), and the line
// loop after it: every size within 70 bytes of one and of three blocks, at several alignments.
TEST(CopyBytes, EveryKernelIsExactAroundPageBlocks) {
  constexpr std::size_t kBlock = 4 * 4096, kMax = 3 * kBlock + 70;
  const auto bytes = random_bytes(kMax + 64, 11);
  AlignedBuf src(kMax + 64), dst(kMax + 64);
  std::memcpy(src.base, bytes.data(), kMax + 64);
  std::memset(dst.base, kCanary, kMax + 128);
  const std::vector<unsigned char> canary(64, kCanary);
  const std::pair<std::size_t, std::size_t> offsets[] = {{0, 0}, {1, 5}, {63, 0}, {32, 33}};
  for (std::string_view isa : detail::available_copy_isas()) {
    for (bool streaming : {true, false}) {
      for (std::size_t base : {kBlock, 3 * kBlock}) {
        for (std::size_t n = base - 70; n <= base + 70; ++n) {
          for (auto [doff, soff] : offsets) {
            unsigned char* d = dst.base + doff;
            const unsigned char* s = src.base + soff;
            detail::copy_with(isa, streaming, d, s, n);
            const bool ok = std::memcmp(d, s, n) == 0 && std::memcmp(dst.base, canary.data(), doff) == 0 &&
                            std::memcmp(d + n, canary.data(), 64) == 0;
            if (!ok)
              FAIL() << isa << (streaming ? " streaming" : " ordinary") << " n " << n << " dst offset " << doff
                     << " src offset " << soff;
            std::memset(d, kCanary, n);
          }
        }
      }
    }
  }
}

// Copies n random bytes between buffers at the given offsets from 64-byte alignment with every
// (thread count, offsets, kind) combination; checks the copy and the canaries around it.
void check_large_copies(std::size_t n, std::initializer_list<int> thread_counts) {
  ThreadCountGuard guard;
  const auto bytes = random_bytes(n, static_cast<unsigned>(n));
  AlignedBuf src(n + 64), dst(n + 64);
  const std::pair<std::size_t, std::size_t> offsets[] = {{0, 0}, {1, 0}, {63, 17}, {8, 40}};
  for (int threads : thread_counts) {
    set_num_threads(threads);
    for (auto [doff, soff] : offsets) {
      std::memcpy(src.base + soff, bytes.data(), n);
      for (CopyKind kind : kAllKinds) {
        SCOPED_TRACE(::testing::Message() << "n=" << n << " threads=" << threads << " dst+" << doff << " src+" << soff
                                          << " " << copy_kind_name(kind));
        std::memset(dst.base, kCanary, n + 128);
        copy_bytes(dst.base + doff, src.base + soff, n, kind);
        ASSERT_EQ(std::memcmp(dst.base + doff, bytes.data(), n), 0);
        for (std::size_t i = 0; i < doff; ++i) ASSERT_EQ(dst.base[i], kCanary) << "before, at " << i;
        for (std::size_t i = 0; i < 64; ++i) ASSERT_EQ(dst.base[doff + n + i], kCanary) << "after, at " << i;
      }
    }
  }
}

// Sizes around the single-thread/parallel switch and chunk boundaries, at several thread counts
// (the parallel split and its aligned inner boundaries must not lose or duplicate a byte).
TEST(CopyBytes, ExactForLargeBuffersAtEveryThreadCount) {
  check_large_copies(2 * kParallelChunkBytes - 1, {2});  // just under two chunks: one thread
  check_large_copies(2 * kParallelChunkBytes + 63, {1, 2, 3, 8});
  check_large_copies(3 * kParallelChunkBytes + 4097, {2, 3, 8});
  check_large_copies((std::size_t{6} << 20) + 63, {1, 2, 8});  // above the non-temporal threshold
}

// Normal and FromSlow copies switch to streaming stores just above the threshold.
TEST(CopyBytes, ExactAboveTheNonTemporalThreshold) {
  check_large_copies(detail::nontemporal_threshold_bytes() + 4099, {2});
}

TEST(CopyBytes, ZeroBytesAcceptsNullPointers) {
  EXPECT_NO_THROW(copy_bytes(nullptr, nullptr, 0, CopyKind::ToSlow));
  EXPECT_NO_THROW(copy_bytes_modeled(nullptr, nullptr, 0, CopyKind::FromSlow, nullptr));
}

TEST(CopyBytes, NullPointerWithBytesRaises) {
  char buf[16] = {};
  try {
    copy_bytes(nullptr, buf, 8, CopyKind::Normal);
    FAIL() << "expected strata::Error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("copy_bytes: null destination pointer with a size of 8 bytes"));
  }
  try {
    copy_bytes(buf, nullptr, 8, CopyKind::ToSlow);
    FAIL() << "expected strata::Error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("copy_bytes: null source pointer"));
  }
  SlowTierThrottle throttle(SlowTierModel::custom(1, 1, 0));
  EXPECT_THROW(copy_bytes_modeled(buf, nullptr, 4, CopyKind::FromSlow, &throttle), Error);
  EXPECT_EQ(throttle.counters().bytes_read, 0u);  // nothing charged for a rejected copy
  EXPECT_THROW(detail::stream_copy(nullptr, buf, 1), Error);
}

TEST(CopyBytes, OverlappingRangesRaise) {
  char buf[64] = {};
  try {
    copy_bytes(buf + 8, buf, 16, CopyKind::Normal);
    FAIL() << "expected strata::Error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("overlap"));
  }
  EXPECT_NO_THROW(copy_bytes(buf + 16, buf, 16, CopyKind::Normal));  // adjacent is fine
}

TEST(CopyBytes, ReportsItsStoreIsa) {
  EXPECT_THAT(std::string(detail::stream_store_isa()), ::testing::AnyOf("avx512", "avx", "sse2", "none"));
  EXPECT_EQ(detail::available_copy_isas().front(), detail::stream_store_isa());  // widest is used
  char a[8] = {}, b[8] = {};
  try {
    detail::copy_with("mmx", true, a, b, 8);
    FAIL() << "expected strata::Error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("copy_with: no 'mmx' kernel on this CPU (available: "));
  }
  EXPECT_EQ(copy_kind_name(CopyKind::ToSlow), "ToSlow");
  static_assert(copy_kind_between(Tier::Fast, Tier::Slow) == CopyKind::ToSlow);
  static_assert(copy_kind_between(Tier::Slow, Tier::Fast) == CopyKind::FromSlow);
  static_assert(copy_kind_between(Tier::Fast, Tier::Fast) == CopyKind::Normal);
  static_assert(copy_kind_between(Tier::Slow, Tier::Slow) == CopyKind::Normal);
}

// ---- Mover ---------------------------------------------------------------------------------------

TEST(Mover, RunsJobsInSubmissionOrder) {
  Mover mover;
  std::vector<int> order;  // only touched by the mover thread until wait_all
  std::vector<MoveHandle> handles;
  for (int i = 0; i < 200; ++i) handles.push_back(mover.submit([&order, i] { order.push_back(i); }));
  mover.wait_all();
  ASSERT_EQ(order.size(), 200u);
  for (int i = 0; i < 200; ++i) EXPECT_EQ(order[i], i);
  for (auto& h : handles) EXPECT_TRUE(h.done());
  EXPECT_EQ(mover.pending(), 0u);
  EXPECT_EQ(mover.completed(), 200u);
}

TEST(Mover, HandlesReportPendingDoneAndDuration) {
  Mover mover;
  std::promise<void> gate;
  std::shared_future<void> open = gate.get_future().share();
  std::atomic<int64_t> inner_ns{0};
  MoveHandle first = mover.submit([open] { open.wait(); });
  MoveHandle second = mover.submit([&inner_ns] {
    const auto t0 = Clock::now();
    volatile double x = 0;
    for (int i = 0; i < 200000; ++i) x = x + std::sqrt(static_cast<double>(i));
    inner_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count();
  });
  EXPECT_FALSE(first.done());
  EXPECT_FALSE(second.done());  // queued behind a job that cannot finish yet
  EXPECT_EQ(mover.pending(), 2u);
  gate.set_value();
  second.wait();
  EXPECT_TRUE(first.done());  // FIFO: the first finished before the second started
  EXPECT_TRUE(second.done());
  // The reported duration covers the job's body (measured inside it).
  EXPECT_GE(second.duration().count(), inner_ns.load());
  EXPECT_GE(second.queued().count(), 0);
  MoveHandle empty;
  EXPECT_FALSE(empty.valid());
  EXPECT_FALSE(empty.done());
  EXPECT_THROW(empty.wait(), Error);
}

TEST(Mover, WaitRethrowsTheJobsExceptionAndTheMoverKeepsRunning) {
  Mover mover;
  MoveHandle bad = mover.submit([] { throw std::runtime_error("disk on fire"); });
  std::atomic<bool> ran{false};
  MoveHandle good = mover.submit([&] { ran = true; });
  try {
    bad.wait();
    FAIL() << "expected the job's exception";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "disk on fire");
  }
  EXPECT_THROW(bad.wait(), std::runtime_error);  // every wait rethrows
  EXPECT_NO_THROW(bad.duration());
  EXPECT_NO_THROW(good.wait());
  EXPECT_TRUE(ran.load());
  EXPECT_NO_THROW(mover.wait_all());  // wait_all does not rethrow job errors
}

TEST(Mover, RejectsEmptyJobsAndSelfWaits) {
  Mover mover;
  try {
    mover.submit(std::function<void()>());
    FAIL() << "expected strata::Error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("Mover::submit: empty job"));
  }
  // A job that waits for a job queued behind it, or for all jobs, would deadlock: both raise.
  std::promise<MoveHandle> later_promise;
  auto later_future = later_promise.get_future();
  std::string wait_error, wait_all_error;
  MoveHandle waiter = mover.submit([&] {
    MoveHandle later = later_future.get();
    try {
      later.wait();
    } catch (const Error& e) {
      wait_error = e.what();
    }
    try {
      mover.wait_all();
    } catch (const Error& e) {
      wait_all_error = e.what();
    }
  });
  later_promise.set_value(mover.submit([] {}));
  mover.wait_all();
  EXPECT_THAT(wait_error, HasSubstr("would wait for itself"));
  EXPECT_THAT(wait_all_error, HasSubstr("Mover::wait_all: called from a job on the mover thread"));
}

TEST(Mover, DestructorDrainsTheQueueIncludingNestedSubmissions) {
  std::atomic<int> count{0};
  std::vector<MoveHandle> handles;
  {
    Mover mover;
    for (int i = 0; i < 50; ++i) {
      handles.push_back(mover.submit([&, i] {
        count.fetch_add(1);
        if (i % 10 == 0) mover.submit([&] { count.fetch_add(100); });  // from the mover thread
      }));
    }
  }
  EXPECT_EQ(count.load(), 50 + 5 * 100);
  for (auto& h : handles) EXPECT_TRUE(h.done());
}

TEST(Mover, JobsCanRunParallelCopies) {
  Mover mover;
  const std::size_t n = std::size_t{3} << 20;
  const auto bytes = random_bytes(n, 7);
  std::vector<unsigned char> dst(n, 0);
  MoveHandle h = mover.submit([&] { copy_bytes(dst.data(), bytes.data(), n, CopyKind::ToSlow); });
  h.wait();
  EXPECT_EQ(std::memcmp(dst.data(), bytes.data(), n), 0);
}

// Many threads submit to one Mover and charge one throttle at once (run under ThreadSanitizer).
// Checks: every job ran exactly once, each submitter's jobs ran in its submission order, the copies
// are exact, and the throttle's counters add up.
TEST(MoverStress, ManyThreadsSubmitAndChargeConcurrently) {
  constexpr int kThreads = 8, kJobs = 150;
  constexpr std::size_t kBytes = 4096 + 17;
  Mover mover;
  SlowTierThrottle throttle(SlowTierModel::custom(50.0, 20.0, 100.0));
  std::vector<std::vector<int>> ran(kThreads);  // written only by the mover thread
  std::atomic<int> total{0};
  std::vector<std::thread> threads;
  std::atomic<bool> copies_ok{true};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const auto src = random_bytes(kBytes, static_cast<unsigned>(t));
      std::vector<std::vector<unsigned char>> dst(kJobs, std::vector<unsigned char>(kBytes));
      std::vector<MoveHandle> handles;
      for (int j = 0; j < kJobs; ++j) {
        handles.push_back(mover.submit([&, t, j] {
          ran[t].push_back(j);
          copy_bytes_modeled(dst[j].data(), src.data(), kBytes, j % 2 ? CopyKind::ToSlow : CopyKind::FromSlow,
                             &throttle);
          total.fetch_add(1, std::memory_order_relaxed);
        }));
        throttle.charge_read(100 + j);  // direct slow-tier accesses from this thread
        throttle.charge_write(64);
        if (j % 16 == 0) handles[j / 2].wait();
        (void)handles.back().done();
      }
      for (int j = 0; j < kJobs; ++j) {
        handles[j].wait();
        if (std::memcmp(dst[j].data(), src.data(), kBytes) != 0) copies_ok = false;
      }
    });
  }
  for (auto& th : threads) th.join();
  mover.wait_all();
  EXPECT_TRUE(copies_ok.load());
  EXPECT_EQ(total.load(), kThreads * kJobs);
  EXPECT_EQ(mover.completed(), static_cast<std::size_t>(kThreads * kJobs));
  for (int t = 0; t < kThreads; ++t) {
    ASSERT_EQ(ran[t].size(), static_cast<std::size_t>(kJobs));
    for (int j = 0; j < kJobs; ++j) EXPECT_EQ(ran[t][j], j) << "submitter " << t;
  }
  const SlowTierCounters c = throttle.counters();
  std::uint64_t direct_reads = 0;
  for (int j = 0; j < kJobs; ++j) direct_reads += 100 + j;
  const std::uint64_t half = kJobs / 2;
  EXPECT_EQ(c.bytes_read, kThreads * (direct_reads + half * kBytes));
  EXPECT_EQ(c.bytes_written, kThreads * (kJobs * 64 + half * kBytes));
  EXPECT_EQ(c.reads, static_cast<std::uint64_t>(kThreads * (kJobs + half)));
  EXPECT_EQ(c.writes, static_cast<std::uint64_t>(kThreads * (kJobs + half)));
}

// ---- Slow-tier model and throttle ----------------------------------------------------------------

TEST(SlowTierModel, DefaultsApplyTheOptaneRatiosToTheMeasuredBandwidth) {
  const SlowTierModel m = SlowTierModel::defaults(22.0);
  EXPECT_TRUE(m.enabled);
  EXPECT_DOUBLE_EQ(m.read_gbps, 22.0 * 30.0 / 110.0);
  EXPECT_DOUBLE_EQ(m.write_gbps, 22.0 * 11.0 / 110.0);
  EXPECT_DOUBLE_EQ(m.latency_ns, 300.0);
  EXPECT_LT(m.write_gbps, m.read_gbps);  // Optane's read/write asymmetry survives the scaling
  EXPECT_EQ(m.describe(),
            "modeled slow tier: read 6 GB/s, write 2.2 GB/s, latency 300 ns (Optane ratios vs "
            "measured DRAM 22 GB/s)");
  EXPECT_EQ(SlowTierModel::off().describe(), "real device / model off");
  EXPECT_FALSE(SlowTierModel::off().enabled);
  EXPECT_THAT(SlowTierModel::custom(3, 1, 50).describe(), HasSubstr("read 3 GB/s, write 1 GB/s, latency 50 ns"));
}

// Note [Slow-tier model]: random rows get Table 5.3's read ratio and the write ratio of the
// measured DRAM gather bandwidth, never more than the sequential rates.
TEST(SlowTierModel, DefaultsWithAGatherFigureModelRandomRows) {
  const SlowTierModel m = SlowTierModel::defaults(22.0, 5.0);
  EXPECT_DOUBLE_EQ(m.read_gbps, 22.0 * 30.0 / 110.0);
  EXPECT_DOUBLE_EQ(m.random_read_gbps, 5.0 * 25.0 / 103.6);
  EXPECT_DOUBLE_EQ(m.random_write_gbps, 5.0 * 11.0 / 110.0);
  EXPECT_DOUBLE_EQ(m.reference_dram_gather_gbps, 5.0);
  EXPECT_EQ(m.describe(),
            "modeled slow tier: read 6 GB/s, write 2.2 GB/s, latency 300 ns (Optane ratios vs "
            "measured DRAM 22 GB/s); random rows: read 1.21 GB/s, write 0.5 GB/s (vs measured DRAM gather 5 GB/s)");
  // A gather figure above the copy figure is capped by the sequential rates.
  const SlowTierModel capped = SlowTierModel::defaults(10.0, 100.0);
  EXPECT_DOUBLE_EQ(capped.random_read_gbps, capped.read_gbps);
  EXPECT_DOUBLE_EQ(capped.random_write_gbps, capped.write_gbps);
  // Without one, random rows cost what streamed bytes cost.
  EXPECT_EQ(SlowTierModel::defaults(22.0).random_read_gbps, 0.0);
  for (double bad : {-1.0, std::nan(""), std::numeric_limits<double>::infinity()}) {
    try {
      SlowTierModel::defaults(22.0, bad);
      FAIL() << "expected strata::Error for " << bad;
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr("measured DRAM gather bandwidth must be a non-negative number"));
    }
  }
  SlowTierModel neg = SlowTierModel::custom(1.0, 1.0, 0.0);
  neg.random_write_gbps = -1.0;
  try {
    SlowTierThrottle{neg};
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("random-write bandwidth must be a non-negative number of GB/s"));
  }
}

TEST(SlowTierThrottle, RandomRowsAreChargedAtTheRandomRates) {
  SlowTierModel m = SlowTierModel::custom(1000.0, 1000.0, 0.0);  // streamed: 1 TB/s, i.e. free
  m.random_read_gbps = 1.0;
  m.random_write_gbps = 0.5;
  SlowTierThrottle throttle(m);
  constexpr std::size_t kBytes = std::size_t{8} << 20;
  auto t0 = Clock::now();
  throttle.charge_read(kBytes);  // sequential: ~8 µs
  throttle.charge_write(kBytes);
  const double sequential = seconds_since(t0);
  t0 = Clock::now();
  throttle.charge_read(kBytes, SlowTierAccess::Random);
  EXPECT_GE(seconds_since(t0), 0.9 * static_cast<double>(kBytes) / 1e9);  // at 1 GB/s
  t0 = Clock::now();
  throttle.charge_write(kBytes, SlowTierAccess::Random);
  EXPECT_GE(seconds_since(t0), 0.9 * static_cast<double>(kBytes) / 0.5e9);  // at 0.5 GB/s
  EXPECT_LT(sequential, static_cast<double>(kBytes) / 1e9);
  const SlowTierCounters c = throttle.counters();
  EXPECT_EQ(c.bytes_read, 2 * kBytes);
  EXPECT_EQ(c.bytes_written, 2 * kBytes);
}

TEST(SlowTierModel, BadParametersRaiseNamingTheField) {
  for (double bad : {0.0, -4.0, std::nan(""), std::numeric_limits<double>::infinity()}) {
    try {
      SlowTierModel::defaults(bad);
      FAIL() << "expected strata::Error for " << bad;
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr("measured DRAM bandwidth must be a positive number of GB/s"));
    }
  }
  try {
    SlowTierModel::custom(0.0, 1.0, 0.0);
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("read bandwidth must be a positive number of GB/s, got 0"));
  }
  try {
    SlowTierModel::custom(1.0, -2.0, 0.0);
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("write bandwidth must be a positive number of GB/s, got -2"));
  }
  try {
    SlowTierModel::custom(1.0, 1.0, -5.0);
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("latency must be a non-negative number of ns, got -5"));
  }
  SlowTierModel hand_made;  // filled in field by field, then handed to a throttle
  hand_made.enabled = true;
  hand_made.read_gbps = 1.0;
  hand_made.write_gbps = 0.0;
  EXPECT_THROW(SlowTierThrottle{hand_made}, Error);
  hand_made.enabled = false;  // a disabled model's numbers are not used
  EXPECT_NO_THROW(SlowTierThrottle{hand_made});
}

// The throttle's correctness: 64 MiB charged at 2 GB/s cannot finish in less than 33.5 ms, whether
// one thread charges it or four share it (a loose lower bound: 0.9x), for reads and for writes.
TEST(SlowTierThrottle, EnforcesTheModelBandwidthAcrossThreads) {
  constexpr std::size_t kTotal = std::size_t{64} << 20, kChunk = std::size_t{1} << 20;
  const double model_s = static_cast<double>(kTotal) / 2e9;
  for (bool write : {false, true}) {
    for (int threads : {1, 4}) {
      SlowTierThrottle throttle(SlowTierModel::custom(2.0, 2.0, 0.0));
      const auto t0 = Clock::now();
      std::vector<std::thread> pool;
      for (int t = 0; t < threads; ++t) {
        pool.emplace_back([&, t] {
          for (std::size_t b = static_cast<std::size_t>(t) * kChunk; b < kTotal; b += threads * kChunk)
            write ? throttle.charge_write(kChunk) : throttle.charge_read(kChunk);
        });
      }
      for (auto& th : pool) th.join();
      const double elapsed = seconds_since(t0);
      EXPECT_GE(elapsed, 0.9 * model_s) << threads << " threads, " << (write ? "writes" : "reads");
      const SlowTierCounters c = throttle.counters();
      EXPECT_EQ(write ? c.bytes_written : c.bytes_read, kTotal);
      EXPECT_EQ(write ? c.writes : c.reads, kTotal / kChunk);
      EXPECT_GT(c.stall_ns, 0u);
    }
  }
}

TEST(SlowTierThrottle, ChargesTheLatencyOncePerCall) {
  SlowTierThrottle throttle(SlowTierModel::custom(1000.0, 1000.0, 20'000.0));  // 20 µs per access
  const auto t0 = Clock::now();
  for (int i = 0; i < 500; ++i) throttle.charge_read(64);
  EXPECT_GE(seconds_since(t0), 0.9 * 500 * 20e-6);
  EXPECT_EQ(throttle.counters().reads, 500u);
}

TEST(SlowTierThrottle, ModeledCopiesChargeTheRightDirection) {
  const std::size_t n = std::size_t{8} << 20;
  const auto src = random_bytes(n, 3);
  std::vector<unsigned char> dst(n);
  SlowTierThrottle throttle(SlowTierModel::custom(4.0, 1.0, 0.0));
  const auto t0 = Clock::now();
  copy_bytes_modeled(dst.data(), src.data(), n, CopyKind::ToSlow, &throttle);
  EXPECT_GE(seconds_since(t0), 0.9 * static_cast<double>(n) / 1e9);  // written at 1 GB/s
  EXPECT_EQ(std::memcmp(dst.data(), src.data(), n), 0);
  copy_bytes_modeled(dst.data(), src.data(), n, CopyKind::FromSlow, &throttle);
  copy_bytes_modeled(dst.data(), src.data(), n, CopyKind::Normal, &throttle);
  const SlowTierCounters c = throttle.counters();
  EXPECT_EQ(c.bytes_written, n);
  EXPECT_EQ(c.bytes_read, n);
  EXPECT_EQ(c.writes, 1u);
  EXPECT_EQ(c.reads, 1u);
  throttle.reset_counters();
  EXPECT_EQ(throttle.counters().bytes_written, 0u);
  EXPECT_EQ(throttle.counters().stall_ns, 0u);
}

TEST(SlowTierThrottle, OffCountsButNeverStalls) {
  SlowTierThrottle throttle(SlowTierModel::off());
  EXPECT_FALSE(throttle.enabled());
  for (int i = 0; i < 1000; ++i) throttle.charge_write(std::size_t{1} << 30);
  const SlowTierCounters c = throttle.counters();
  EXPECT_EQ(c.bytes_written, 1000ull << 30);
  EXPECT_EQ(c.writes, 1000u);
  EXPECT_EQ(c.stall_ns, 0u);
  EXPECT_FALSE(throttle.reserve_read(100).active);
}

TEST(SlowTierThrottle, SetModelAppliesToLaterChargesAndKeepsCounting) {
  SlowTierThrottle throttle(SlowTierModel::off());
  throttle.charge_read(std::size_t{1} << 30);  // off: free
  const SlowTierModel& old = throttle.model();
  throttle.set_model(SlowTierModel::custom(1.0, 1.0, 0.0));
  EXPECT_TRUE(throttle.enabled());
  EXPECT_FALSE(old.enabled);  // a reference to the retired model stays valid
  const auto t0 = Clock::now();
  throttle.charge_read(std::size_t{20} << 20);  // 21 MB at 1 GB/s
  EXPECT_GE(seconds_since(t0), 0.9 * 0.021);
  EXPECT_EQ(throttle.counters().reads, 2u);
  SlowTierModel bad = SlowTierModel::custom(1.0, 1.0, 0.0);
  bad.read_gbps = -1;
  EXPECT_THROW(throttle.set_model(bad), Error);
  EXPECT_EQ(throttle.model().read_gbps, 1.0);  // a bad model leaves the current one
}

// Charges on many threads while another replaces the model: each charge reads one whole model
// (ThreadSanitizer in CI checks the publication).
TEST(SlowTierThrottle, SetModelRacesWithCharges) {
  SlowTierThrottle throttle(SlowTierModel::custom(1000.0, 1000.0, 0.0));
  std::atomic<bool> stop{false};
  std::vector<std::thread> pool;
  for (int t = 0; t < 3; ++t)
    pool.emplace_back([&] {
      while (!stop.load(std::memory_order_relaxed)) {
        throttle.charge_read(4096, SlowTierAccess::Random);
        throttle.charge_write(4096);
      }
    });
  for (int i = 0; i < 200; ++i) {
    while (throttle.counters().reads < static_cast<std::uint64_t>(5 * i))
      std::this_thread::yield();  // charges in between
    throttle.set_model(i % 2 == 0 ? SlowTierModel::off() : SlowTierModel::custom(500.0 + i, 400.0, 0.0));
  }
  stop = true;
  for (auto& th : pool) th.join();
  EXPECT_GE(throttle.counters().reads, 5u * 199);
  EXPECT_GT(throttle.counters().writes, 0u);
  EXPECT_EQ(throttle.model().read_gbps, 699.0);
}

TEST(DramGatherBandwidth, IsPositiveCachedAndChecksTheRowSize) {
  const double a = measure_dram_gather_gbps(256);
  EXPECT_TRUE(std::isfinite(a));
  EXPECT_GT(a, 0.0);
  EXPECT_EQ(measure_dram_gather_gbps(256), a);  // cached per (threads, row size)
  for (std::size_t bad : {std::size_t{0}, std::size_t{100}, std::size_t{32}}) {
    try {
      measure_dram_gather_gbps(bad);
      FAIL() << bad;
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr("row_bytes must be a multiple of 64"));
    }
  }
}

TEST(DramCopyBandwidth, IsPositiveAndCachedPerThreadCount) {
  const double a = measure_dram_copy_gbps();
  EXPECT_TRUE(std::isfinite(a));
  EXPECT_GT(a, 0.0);
  EXPECT_EQ(measure_dram_copy_gbps(), a);  // cached: the identical value, not a new measurement
  EXPECT_NO_THROW(SlowTierModel::defaults(a));
}

}  // namespace
}  // namespace strata::memory
