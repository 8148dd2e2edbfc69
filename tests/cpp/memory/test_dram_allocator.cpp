#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <thread>
#include <vector>

#include "core/factories.h"
#include "memory/detail/dram_allocator.h"

namespace strata::memory {

TEST(DramAllocator, AlignsEveryBlockToACacheLine) {
  DramAllocator alloc;
  for (std::size_t n : {1u, 3u, 63u, 64u, 65u, 1000u, 1u << 20}) {
    auto a = alloc.allocate(n);
    ASSERT_NE(a->data(), nullptr) << n;
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(a->data()) % Allocator::kAlignment, 0u) << n;
    EXPECT_EQ(a->nbytes(), n);
    std::memset(a->data(), 0xab, n);  // the whole request is writable (ASan checks the bounds)
  }
}

TEST(DramAllocator, ZeroBytesGivesAnEmptyAllocation) {
  DramAllocator alloc;
  auto a = alloc.allocate(0);
  EXPECT_EQ(a->nbytes(), 0u);
  EXPECT_EQ(alloc.stats().current_bytes, 0u);
}

TEST(DramAllocator, TracksCurrentAndPeakBytes) {
  DramAllocator alloc;
  {
    auto a = alloc.allocate(100);
    auto b = alloc.allocate(50);
    EXPECT_EQ(alloc.stats().current_bytes, 150u);
    EXPECT_EQ(alloc.stats().allocations, 2u);
  }
  EXPECT_EQ(alloc.stats().current_bytes, 0u);
  EXPECT_EQ(alloc.stats().peak_bytes, 150u);
  auto c = alloc.allocate(10);
  alloc.reset_peak();
  EXPECT_EQ(alloc.stats().peak_bytes, 10u);
  EXPECT_EQ(alloc.stats().allocations, 0u);
}

TEST(DramAllocator, ImpossibleRequestRaisesWithTheSize) {
  DramAllocator alloc;
  try {
    alloc.allocate(std::size_t{1} << 62);
    FAIL() << "expected strata::Error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("out of memory allocating 4611686018427387904 bytes"));
  }
  EXPECT_EQ(alloc.stats().current_bytes, 0u);
}

TEST(DramAllocator, TensorsCanAllocateThroughIt) {
  const auto before = dram_allocator().stats().current_bytes;
  {
    Tensor t = zeros({256, 4}, {DType::f32, &dram_allocator()});
    EXPECT_EQ(dram_allocator().stats().current_bytes, before + 256 * 4 * sizeof(float));
    Tensor v = t.t();  // a view allocates nothing
    EXPECT_EQ(dram_allocator().stats().current_bytes, before + 256 * 4 * sizeof(float));
  }
  EXPECT_EQ(dram_allocator().stats().current_bytes, before);
}

// Stress: many threads allocate, write and free concurrently; the counters must balance and the
// peak can never be below any single thread's live bytes. Runs under ThreadSanitizer in CI.
TEST(DramAllocatorStress, ConcurrentAllocateFreeBalances) {
  DramAllocator alloc;
  constexpr int kThreads = 8;
  constexpr int kIters = 2000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&alloc, t] {
      std::vector<std::unique_ptr<Allocation>> live;
      for (int i = 0; i < kIters; ++i) {
        const std::size_t n = 1 + static_cast<std::size_t>((i * 7919 + t * 104729) % 4096);
        live.push_back(alloc.allocate(n));
        static_cast<char*>(live.back()->data())[n - 1] = static_cast<char>(i);
        if (live.size() > 16) live.erase(live.begin());
      }
    });
  }
  for (auto& th : threads) th.join();
  const auto s = alloc.stats();
  EXPECT_EQ(s.current_bytes, 0u);
  EXPECT_EQ(s.allocations, static_cast<std::size_t>(kThreads) * kIters);
  EXPECT_GT(s.peak_bytes, 0u);
  EXPECT_LE(s.peak_bytes, static_cast<std::size_t>(kThreads) * 17 * 4096);
}

}  // namespace strata::memory
