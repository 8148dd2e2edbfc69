#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <thread>
#include <vector>

#include "core/factories.h"
#include "core/threading.h"
#include "memory/tiered_memory.h"
#include "memory_test_util.h"

using ::testing::HasSubstr;

namespace strata::memory {
namespace {

using test::message_of;

TieredConfig small_config(std::size_t fast, std::size_t slow) {
  TieredConfig c;
  c.fast_bytes = fast;
  c.slow_bytes = slow;
  c.slow_dir = "/tmp";
  c.backend = PmBackend::Mmap;
  return c;
}

TEST(TieredMemory, IsTheDefaultAllocatorAndEveryTensorIsAnObject) {
  ASSERT_EQ(std::getenv("STRATA_MEMORY"), nullptr) << "this test checks the default configuration";
  EXPECT_EQ(default_allocator().name(), "tiered");
  Tensor t = ones({16, 16});
  Object* o = tiered_memory().object_of(t.storage().allocation());
  ASSERT_NE(o, nullptr);
  EXPECT_EQ(o->size(), 16u * 16u * sizeof(float));
  EXPECT_TRUE(tiered_memory().policy().in_fast(o));
}

TEST(TieredMemory, TensorsKeepTheirValuesThroughForcedEvictions) {
  TieredMemory mem(small_config(1 << 20, 64 << 20));
  TensorOptions opts{DType::f32, &mem};
  std::vector<Tensor> ts;
  for (int i = 0; i < 12; ++i) {  // 12 x 256 KiB through a 1 MiB fast tier
    ts.push_back(full({256, 256}, static_cast<double>(i), opts));
    EXPECT_LE(mem.manager().fast().peak(), mem.manager().fast().capacity());
  }
  int in_slow = 0;
  for (int i = 0; i < 12; ++i) {
    Object* o = mem.object_of(ts[static_cast<std::size_t>(i)].storage().allocation());
    in_slow += !mem.policy().in_fast(o);
    EXPECT_EQ(ts[static_cast<std::size_t>(i)].at({255, 255}), i);
    EXPECT_EQ(ts[static_cast<std::size_t>(i)].at({0, 0}), i);
  }
  EXPECT_GE(in_slow, 8);
  // A copy reads a slow tensor and writes a fast one; views keep working after their base moved.
  Tensor c = ts[0].t().clone();
  EXPECT_EQ(c.at({3, 4}), 0);
  Tensor v = ts[1].narrow(0, 10, 2);
  for (int i = 0; i < 4; ++i) ts.push_back(zeros({256, 256}, opts));  // churn
  EXPECT_EQ(v.at({1, 7}), 1);
  EXPECT_GT(mem.manager().stats().snapshot().moved_to_slow.bytes, 0u);
  EXPECT_LE(mem.manager().fast().peak(), mem.manager().fast().capacity());
}

TEST(TieredMemory, TensorsLargerThanTheFastTierLiveInTheSlowTier) {
  TieredMemory mem(small_config(1 << 20, 64 << 20));
  Tensor big = arange(0, 1 << 20, 1, {DType::i32, &mem});  // 4 MiB
  EXPECT_FALSE(mem.policy().in_fast(mem.object_of(big.storage().allocation())));
  EXPECT_EQ(big.at({(1 << 20) - 1}), (1 << 20) - 1);
}

// Note [Slow placement]: inside the scope, allocations of exactly its size on this thread go to the
// slow tier (a kernel then writes and reads them there, charged as direct accesses); other sizes,
// another thread, and everything after the scope stay fast-first; an inner scope rules, the outer
// one comes back when it closes.
TEST(TieredMemory, SlowPlacementPlacesAllocationsOfItsSizeInTheSlowTier) {
  TieredMemory mem(small_config(1 << 20, 64 << 20));
  TensorOptions opts{DType::f32, &mem};
  auto in_fast = [&](const Tensor& t) { return mem.policy().in_fast(mem.object_of(t.storage().allocation())); };
  const std::size_t before = mem.manager().stats().snapshot().direct_slow_write_bytes;
  Tensor placed, other, inner, after_inner, from_thread;
  {
    SlowPlacement scope(64 * 64 * sizeof(float));
    EXPECT_EQ(SlowPlacement::current(), 64u * 64u * sizeof(float));
    placed = full({64, 64}, 3.0, opts);
    other = full({32, 64}, 4.0, opts);
    std::thread([&] { from_thread = full({64, 64}, 5.0, opts); }).join();
    {
      SlowPlacement nested(32 * 64 * sizeof(float));
      inner = full({32, 64}, 6.0, opts);
      EXPECT_TRUE(in_fast(full({64, 64}, 7.0, opts)));
    }
    after_inner = full({64, 64}, 8.0, opts);
  }
  EXPECT_EQ(SlowPlacement::current(), 0u);
  EXPECT_FALSE(in_fast(placed));
  EXPECT_TRUE(in_fast(other));
  EXPECT_TRUE(in_fast(from_thread));
  EXPECT_FALSE(in_fast(inner));
  EXPECT_FALSE(in_fast(after_inner));
  EXPECT_TRUE(in_fast(full({64, 64}, 9.0, opts)));
  // The fills wrote the placed tensors in place in the slow tier, and their values read back.
  EXPECT_GE(mem.manager().stats().snapshot().direct_slow_write_bytes - before, 3u * 32 * 64 * sizeof(float));
  EXPECT_EQ(placed.at({63, 63}), 3.0);
  EXPECT_EQ(inner.at({31, 0}), 6.0);
  EXPECT_EQ(placed.clone().at({5, 5}), 3.0);
  // AllocationLog records this thread's allocation sizes while open (the innermost log).
  {
    AllocationLog outer;
    Tensor a = zeros({16}, opts);
    {
      AllocationLog inner;
      Tensor b = zeros({8}, opts), c = zeros({8}, opts);
      EXPECT_EQ(inner.sizes(), (std::vector<std::size_t>{32, 32}));
      EXPECT_EQ(AllocationLog::current(), &inner);
    }
    std::thread([&] { Tensor d = zeros({4}, opts); }).join();
    EXPECT_EQ(outer.sizes(), (std::vector<std::size_t>{64}));
  }
  EXPECT_EQ(AllocationLog::current(), nullptr);
}

TEST(TieredMemory, FreedTensorsReturnTheirSpace) {
  TieredMemory mem(small_config(1 << 20, 8 << 20));
  {
    Tensor a = zeros({1024}, {DType::f32, &mem});
    EXPECT_GT(mem.manager().fast().used(), 0u);
  }
  EXPECT_EQ(mem.manager().fast().used(), 0u);
  EXPECT_EQ(mem.manager().live_objects(), 0u);
}

TEST(TieredMemory, BadConfigurationIsAClearError) {
  EXPECT_THAT(message_of([] { TieredMemory m(small_config(0, 1 << 20)); }), HasSubstr("budget is zero"));
  EXPECT_THAT(message_of([] { TieredMemory m(small_config(std::size_t{1} << 60, std::size_t{1} << 61)); }),
              HasSubstr("larger than this machine's memory"));
  EXPECT_THAT(message_of([] { TieredMemory m(small_config(4 << 20, 0)); }), HasSubstr("slow-tier capacity is zero"));
  // Tiers too small for the heaps name the variable that sets them, not the heap's arena.
  EXPECT_THAT(message_of([] { TieredMemory m(small_config(1, 4 << 20)); }),
              HasSubstr("the fast-tier budget of 1 bytes is below the minimum of 1 MiB (set STRATA_FAST_BYTES"));
  EXPECT_THAT(message_of([] { TieredMemory m(small_config(4 << 20, 1)); }),
              HasSubstr("the slow-tier capacity of 1 bytes is below the minimum of 1 MiB (set STRATA_SLOW_BYTES"));
  TieredConfig c = small_config(1 << 20, 4 << 20);
  c.slow_dir = "/proc";
  EXPECT_THAT(message_of([&] { TieredMemory m(c); }), HasSubstr("/proc"));
  c.slow_dir = "/definitely/not/here";
  EXPECT_THAT(message_of([&] { TieredMemory m(c); }), HasSubstr("does not exist"));
}

TEST(TieredMemory, ConfigFromEnvironment) {
  setenv("STRATA_FAST_BYTES", "64M", 1);
  setenv("STRATA_SLOW_BYTES", "1G", 1);
  setenv("STRATA_SLOW_DIR", "/var/tmp", 1);
  setenv("STRATA_SLOW_BACKEND", "mmap", 1);
  TieredConfig c = TieredConfig::from_env();
  EXPECT_EQ(c.fast_bytes, 64ull << 20);
  EXPECT_EQ(c.slow_bytes, 1ull << 30);
  EXPECT_EQ(c.slow_dir, "/var/tmp");
  EXPECT_EQ(c.backend, PmBackend::Mmap);
  EXPECT_THAT(c.describe(), HasSubstr("fast tier 64.0 MiB"));
  setenv("STRATA_SLOW_BACKEND", "floppy", 1);
  EXPECT_THAT(message_of([] { TieredConfig::from_env(); }),
              HasSubstr("STRATA_SLOW_BACKEND: expected auto, memkind, mmap or numa, got 'floppy'"));
  setenv("STRATA_FAST_BYTES", "lots", 1);
  EXPECT_THAT(message_of([] { TieredConfig::from_env(); }), HasSubstr("STRATA_FAST_BYTES"));
  for (const char* v : {"STRATA_FAST_BYTES", "STRATA_SLOW_BYTES", "STRATA_SLOW_DIR", "STRATA_SLOW_BACKEND"})
    unsetenv(v);
}

TEST(TieredMemory, DefaultHeapsGrowFromASmallFirstSegment) {
  // The defaults: heaps that grow from a small first segment (Note [Heaps grow on demand]).
  const TieredConfig d = TieredConfig::from_env();
  EXPECT_EQ(d.fast_initial, TieredConfig::kDefaultFastInitial);
  EXPECT_EQ(d.slow_initial, TieredConfig::kDefaultSlowInitial);
  setenv("STRATA_FAST_BYTES", "64M", 1);
  EXPECT_EQ(TieredConfig::from_env().fast_initial, 0u);  // an explicit budget is mapped at once
  unsetenv("STRATA_FAST_BYTES");
  TieredMemory mem(d);
  EXPECT_EQ(mem.manager().fast().mapped(), TieredConfig::kDefaultFastInitial);
  EXPECT_EQ(mem.manager().slow().mapped(), TieredConfig::kDefaultSlowInitial);
}

TEST(TieredMemory, SlowTierModelChargesMigrationsAndDirectAccess) {
  TieredConfig c = small_config(1 << 20, 64 << 20);
  c.model = SlowTierModelSpec::custom(50, 20, 100, "test");
  TieredMemory mem(c);
  EXPECT_THAT(mem.slow_tier_mode(), AllOf(HasSubstr("modeled slow tier: read 50"), HasSubstr("DRAM-backed")));
  Tensor big = full({1 << 19}, 3.0, {DType::f32, &mem});                          // 2 MiB: lives in the slow tier
  EXPECT_EQ(mem.manager().stats().snapshot().direct_slow_write_bytes, 2u << 20);  // full() wrote it in place
  EXPECT_EQ(big.at({12345}), 3.0);  // a direct read of one slow element is charged as 4 bytes
  EXPECT_EQ(mem.manager().stats().snapshot().direct_slow_read_bytes, 4u);
  Tensor half = big.narrow(0, 0, 1 << 18).clone();  // a kernel reading half of it: 1 MiB
  EXPECT_EQ(mem.manager().stats().snapshot().direct_slow_read_bytes, 4u + (1u << 20));
  EXPECT_GE(mem.throttle().counters().bytes_read, 4u + (1u << 20));
  EXPECT_GE(mem.throttle().counters().bytes_written, 2u << 20);
  // Migrations pay the model too.
  std::vector<Tensor> ts;
  for (int i = 0; i < 8; ++i) ts.push_back(zeros({256, 256}, {DType::f32, &mem}));
  EXPECT_GT(mem.manager().stats().snapshot().moved_to_slow.bytes, 0u);
  EXPECT_THAT(mem.manager().stats().describe(), HasSubstr("modeled slow tier"));
}

// Note [Moves copy outside the policy lock]: a spill or prefetch on the mover thread lasts as long
// as the slow tier's bandwidth says; the compute thread's allocations, frees and use notifications
// must not wait for it. The model makes one 2 MiB move last ~0.4 s (5 MB/s), so "the allocations
// finished while the move was still running" fails if they queue behind the copy.
TEST(TieredMemory, AllocationsDoNotWaitForAMoveInProgress) {
  TieredConfig c = small_config(16 << 20, 64 << 20);
  c.model = SlowTierModelSpec::custom(0.005, 0.005, 0, "test");
  TieredMemory mem(c);
  Tensor big = full({1 << 19}, 2.0, {DType::f32, &mem});  // 2 MiB, fast
  ASSERT_TRUE(mem.in_fast(big.storage()));
  auto churn = [&] {
    for (int i = 0; i < 50; ++i) {
      Tensor t = full({1024}, static_cast<double>(i), {DType::f32, &mem});  // alloc, write, free
      ASSERT_EQ(t.at({7}), static_cast<double>(i));
    }
  };
  MoveHandle out = mem.evict_async(big.storage());
  while (!out.started()) std::this_thread::yield();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // past the allocation: copying now
  churn();
  EXPECT_FALSE(out.done()) << "50 allocations waited for a 0.4 s eviction";
  out.wait();
  EXPECT_FALSE(mem.in_fast(big.storage()));
  MoveHandle in = mem.prefetch_async(big.storage());
  while (!in.started()) std::this_thread::yield();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  churn();
  EXPECT_FALSE(in.done()) << "50 allocations waited for a 0.4 s prefetch";
  in.wait();
  EXPECT_TRUE(mem.in_fast(big.storage()));
  EXPECT_EQ(big.at({(1 << 19) - 1}), 2.0);  // the moves kept the bytes
}

TEST(TieredMemory, ModelOffAndAutoOnADramBackedTier) {
  TieredConfig c = small_config(1 << 20, 8 << 20);
  c.model = SlowTierModelSpec::off();
  TieredMemory off(c);
  EXPECT_THAT(off.manager().stats().describe(), HasSubstr("model off"));  // named before any slow use
  EXPECT_THAT(off.slow_tier_mode(), HasSubstr("model off"));
  EXPECT_FALSE(off.throttle().enabled());
  c.model = SlowTierModelSpec{};
  c.dram_gbps = 40;  // no measurement needed
  TieredMemory automatic(c);
  EXPECT_THAT(automatic.manager().stats().describe(), HasSubstr("modeled slow tier"));
  EXPECT_TRUE(automatic.throttle().enabled());  // /tmp is not a real slow device
  EXPECT_THAT(automatic.slow_tier_mode(), HasSubstr("Optane ratios vs measured DRAM 40"));
}

// model_for is the one place a spec becomes a model (the tiered memory's own and --slow-tier-model's).
TEST(TieredMemory, ModelForResolvesEverySpecAgainstTheConfiguration) {
  TieredConfig c = small_config(1 << 20, 8 << 20);
  c.dram_gbps = 40;
  c.dram_gather_gbps = 8;
  TieredMemory mem(c);
  const SlowTierModel d = mem.model_for(SlowTierModelSpec::defaults());
  EXPECT_TRUE(d.enabled);
  EXPECT_EQ(d.reference_dram_gbps, 40);
  EXPECT_EQ(d.reference_dram_gather_gbps, 8);
  EXPECT_DOUBLE_EQ(d.read_gbps, 40 * SlowTierModel::kOptaneReadRatio);
  const SlowTierModel a = mem.model_for(SlowTierModelSpec{});  // auto: default on a DRAM-backed tier
  EXPECT_EQ(a.read_gbps, d.read_gbps);
  EXPECT_EQ(a.random_read_gbps, d.random_read_gbps);
  EXPECT_FALSE(mem.model_for(SlowTierModelSpec::off()).enabled);
  const SlowTierModel custom = mem.model_for(SlowTierModelSpec::custom(5, 2, 300, "test"));
  EXPECT_EQ(custom.read_gbps, 5);
  EXPECT_EQ(custom.write_gbps, 2);
  EXPECT_EQ(custom.latency_ns, 300);
}

TEST(TieredMemory, ModelFromEnvironment) {
  setenv("STRATA_SLOW_MODEL", "read=8,write=2.5,latency=300", 1);
  setenv("STRATA_DRAM_GBPS", "55", 1);
  TieredConfig c = TieredConfig::from_env();
  EXPECT_EQ(c.model.mode, SlowTierModelSpec::Mode::Custom);
  EXPECT_EQ(c.model.read_gbps, 8);
  EXPECT_EQ(c.model.write_gbps, 2.5);
  EXPECT_EQ(c.model.latency_ns, 300);
  EXPECT_EQ(c.dram_gbps, 55);
  setenv("STRATA_SLOW_MODEL", "off", 1);
  EXPECT_EQ(TieredConfig::from_env().model.mode, SlowTierModelSpec::Mode::Off);
  setenv("STRATA_SLOW_MODEL", "fast please", 1);
  EXPECT_THAT(message_of([] { TieredConfig::from_env(); }), HasSubstr("STRATA_SLOW_MODEL"));
  setenv("STRATA_SLOW_MODEL", "read=0,write=1,latency=1", 1);
  EXPECT_THAT(message_of([] { TieredConfig::from_env(); }), HasSubstr("bandwidth"));
  unsetenv("STRATA_SLOW_MODEL");
  setenv("STRATA_DRAM_GBPS", "-3", 1);
  EXPECT_THAT(message_of([] { TieredConfig::from_env(); }), HasSubstr("STRATA_DRAM_GBPS"));
  unsetenv("STRATA_DRAM_GBPS");
}

TEST(TieredMemory, AsyncPrefetchAndEvictOverlapTheCaller) {
  TieredMemory mem(small_config(1 << 20, 16 << 20));
  TensorOptions opts{DType::f32, &mem};
  Tensor a = full({256, 256}, 7.0, opts);  // 256 KiB
  MoveHandle e = mem.evict_async(a.storage());
  e.wait();
  EXPECT_FALSE(mem.in_fast(a.storage()));
  MoveHandle p = mem.prefetch_async(a.storage());
  Tensor b = full({64}, 1.0, opts);  // the caller keeps working meanwhile
  p.wait();
  EXPECT_TRUE(mem.in_fast(a.storage()));
  EXPECT_EQ(a.at({255, 255}), 7.0);
  EXPECT_EQ(b.at({63}), 1.0);
  // The queued job keeps the storage alive even if every tensor is dropped first.
  Tensor c = full({256, 256}, 2.0, opts);
  MoveHandle e2 = mem.evict_async(c.storage());
  c = Tensor();
  e2.wait();
  mem.mover().wait_all();
  EXPECT_THAT(message_of([&] { mem.prefetch_async(Storage()); }), HasSubstr("prefetch_async"));
  Tensor foreign = zeros({4}, {DType::f32, nullptr});  // the process-wide allocator
  EXPECT_THAT(message_of([&] { mem.evict_async(foreign.storage()); }), HasSubstr("not allocated by this"));
}

// Kernels (copy_, fill_, clone) on some threads while other threads' allocations force
// evictions of the very tensors those kernels use. PinSet must keep every kernel's operands in
// place, so all values stay exact. Runs under ThreadSanitizer in CI.
TEST(TieredMemoryStress, KernelsRaceWithEvictions) {
  TieredMemory mem(small_config(2 << 20, 256 << 20));
  TensorOptions opts{DType::f32, &mem};
  constexpr int kTensors = 16;  // 16 x 256 KiB = 2x the fast tier
  std::vector<Tensor> ts;
  for (int i = 0; i < kTensors; ++i) ts.push_back(full({64, 1024}, i, opts));
  std::atomic<int> bad{0};
  auto kernel_thread = [&](int t) {
    for (int it = 0; it < 60; ++it) {
      const int i = (t * 7 + it) % kTensors;
      Tensor copy = ts[static_cast<std::size_t>(i)].clone();  // reads i, writes a new tensor
      if (copy.at({63, 1023}) != i || copy.at({0, 0}) != i) ++bad;
      Tensor scratch = empty({64, 1024}, opts);
      scratch.copy_(copy);  // and back through another tensor
      if (scratch.at({17, 500}) != i) ++bad;
    }
  };
  auto churn_thread = [&] {
    for (int it = 0; it < 80; ++it) {
      Tensor junk = zeros({64, 1024}, opts);  // forces evictions
      junk.fill_(-1);
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t) threads.emplace_back(kernel_thread, t);
  threads.emplace_back(churn_thread);
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0);
  for (int i = 0; i < kTensors; ++i) EXPECT_EQ(ts[static_cast<std::size_t>(i)].at({5, 5}), i);
  EXPECT_LE(mem.manager().fast().peak(), mem.manager().fast().capacity());
  EXPECT_GT(mem.manager().stats().snapshot().moved_to_slow.bytes, 0u);
}

}  // namespace
}  // namespace strata::memory
