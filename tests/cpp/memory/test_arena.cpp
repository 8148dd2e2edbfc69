#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "core/error.h"
#include "memory/detail/arena.h"

namespace strata::memory {
namespace {

TEST(Arena, AllocatesRoundedAlignedBlocksAndTracksUse) {
  Arena a(1024, 64);
  auto x = a.allocate(1, nullptr);
  auto y = a.allocate(100, nullptr);
  ASSERT_TRUE(x && y);
  EXPECT_EQ(*x % 64, 0u);
  EXPECT_EQ(*y % 64, 0u);
  EXPECT_EQ(a.used(), 64u + 128u);
  EXPECT_EQ(a.peak(), 192u);
  a.free(*x);
  EXPECT_EQ(a.used(), 128u);
  EXPECT_EQ(a.peak(), 192u);
  a.reset_peak();
  EXPECT_EQ(a.peak(), 128u);
}

TEST(Arena, RefusesWhatDoesNotFitAndNeverExceedsCapacity) {
  Arena a(1024, 64);
  EXPECT_FALSE(a.allocate(1025, nullptr));
  std::vector<std::size_t> got;
  while (auto o = a.allocate(100, nullptr)) got.push_back(*o);
  EXPECT_EQ(got.size(), 8u);  // 8 x 128 bytes
  EXPECT_EQ(a.used(), 1024u);
  EXPECT_LE(a.peak(), a.capacity());
  EXPECT_FALSE(a.allocate(1, nullptr));
}

TEST(Arena, CoalescesFreedNeighboursInEitherOrder) {
  Arena a(64 * 8, 64);
  std::vector<std::size_t> b;
  for (int i = 0; i < 8; ++i) b.push_back(*a.allocate(64, nullptr));
  EXPECT_EQ(a.block_count(), 8u);
  a.free(b[1]);
  a.free(b[3]);
  EXPECT_EQ(a.largest_free(), 64u);
  a.free(b[2]);  // joins 1..3
  EXPECT_EQ(a.largest_free(), 192u);
  EXPECT_EQ(a.block_count(), 6u);
  // A 192-byte request fits exactly in the coalesced hole.
  auto c = a.allocate(192, nullptr);
  ASSERT_TRUE(c);
  EXPECT_EQ(*c, b[1]);
  for (int i : {0, 4, 5, 6, 7}) a.free(b[static_cast<std::size_t>(i)]);
  a.free(*c);
  EXPECT_EQ(a.block_count(), 1u);
  EXPECT_EQ(a.largest_free(), a.capacity());
  EXPECT_EQ(a.used(), 0u);
}

TEST(Arena, BestFitPrefersTheSmallestHole) {
  Arena a(64 * 10, 64);
  std::vector<std::size_t> b;
  for (int i = 0; i < 10; ++i) b.push_back(*a.allocate(64, nullptr));
  a.free(b[1]);  // hole of 1 unit
  a.free(b[4]);
  a.free(b[5]);  // hole of 2 units
  EXPECT_EQ(*a.allocate(64, nullptr), b[1]);
  EXPECT_EQ(*a.allocate(128, nullptr), b[4]);
}

TEST(Arena, WalkSeesEveryBlockInAddressOrder) {
  Arena a(64 * 6, 64);
  int tag[3];
  auto x = *a.allocate(64, &tag[0]);
  auto y = *a.allocate(128, &tag[1]);
  a.free(x);
  std::vector<Arena::Block> seen;
  for (std::size_t off = 0; off < a.capacity();) {
    seen.push_back(a.block_containing(off));
    off = seen.back().offset + seen.back().size;
  }
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_TRUE(seen[0].free);
  EXPECT_EQ(seen[1].offset, y);
  EXPECT_FALSE(seen[1].free);
  EXPECT_EQ(seen[1].owner, &tag[1]);
  EXPECT_TRUE(seen[2].free);
  EXPECT_EQ(a.block_containing(y + 70).offset, y);  // an interior offset maps to its block
}

TEST(Arena, RandomAllocFreeKeepsInvariants) {
  Arena a(1 << 20, 64);
  std::mt19937 rng(7);
  std::vector<std::pair<std::size_t, std::size_t>> live;  // offset, rounded size
  std::size_t expect_used = 0;
  for (int i = 0; i < 5000; ++i) {
    if (live.empty() || rng() % 3 != 0) {
      const std::size_t n = 1 + rng() % 20000;
      if (auto o = a.allocate(n, nullptr)) {
        for (auto& [off, sz] : live) ASSERT_TRUE(*o + a.round(n) <= off || off + sz <= *o) << "overlap";
        live.emplace_back(*o, a.round(n));
        expect_used += a.round(n);
      }
    } else {
      const std::size_t k = rng() % live.size();
      a.free(live[k].first);
      expect_used -= live[k].second;
      live.erase(live.begin() + static_cast<long>(k));
    }
    ASSERT_EQ(a.used(), expect_used);
  }
  for (auto& [off, sz] : live) a.free(off);
  EXPECT_EQ(a.block_count(), 1u);
}

TEST(Arena, SegmentsNeverShareABlock) {
  Arena a(256);
  EXPECT_EQ(a.extend(512), 256u);
  EXPECT_EQ(a.capacity(), 768u);
  EXPECT_TRUE(a.is_segment_start(0));
  EXPECT_TRUE(a.is_segment_start(256));
  EXPECT_FALSE(a.is_segment_start(128));
  EXPECT_EQ(a.largest_segment(), 512u);
  EXPECT_EQ(a.largest_free(), 512u);       // two free blocks, not one of 768
  EXPECT_FALSE(a.allocate(600, nullptr));  // fits the sum, not one segment
  const auto x = a.allocate(256, nullptr);
  const auto y = a.allocate(512, nullptr);
  ASSERT_TRUE(x && y);
  EXPECT_EQ(*x, 0u);
  EXPECT_EQ(*y, 256u);
  a.free(*x);
  a.free(*y);  // freed neighbours across the boundary stay two blocks
  EXPECT_EQ(a.block_count(), 2u);
  EXPECT_EQ(a.used(), 0u);
  EXPECT_THROW(a.extend(10), Error);  // less than one unit
}

TEST(Arena, BadConfigurationIsAnError) {
  EXPECT_THROW(Arena(1024, 48), Error);
  EXPECT_THROW(Arena(10, 64), Error);
}

}  // namespace
}  // namespace strata::memory
