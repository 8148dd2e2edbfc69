#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <set>
#include <vector>

#include "core/error.h"
#include "memory/heap.h"
#include "memory_test_util.h"

using ::testing::HasSubstr;

namespace strata::memory {
namespace {

using test::message_of;

TEST(DramHeap, EnforcesItsBudget) {
  DramHeap h(1 << 20);
  EXPECT_EQ(h.tier(), Tier::Fast);
  EXPECT_EQ(h.capacity(), 1u << 20);
  std::vector<Region*> rs;
  while (Region* r = h.allocate(100000, nullptr)) {
    std::memset(r->data(), 0x5a, r->size());  // the memory is real and writable
    rs.push_back(r);
  }
  EXPECT_EQ(rs.size(), 10u);
  EXPECT_LE(h.peak(), h.capacity());
  for (Region* r : rs) h.free(r);
  EXPECT_EQ(h.used(), 0u);
}

TEST(DramHeap, RejectsZeroAndMoreThanTheMachine) {
  EXPECT_THAT(message_of([] { DramHeap h(0); }), HasSubstr("capacity must be positive"));
  EXPECT_THAT(message_of([] { DramHeap h(std::size_t{1} << 60); }),
              HasSubstr("larger than this machine's physical memory"));
}

class PmHeapBackends : public ::testing::TestWithParam<PmBackend> {};

TEST_P(PmHeapBackends, AllocatesWritableMemoryInTheDirectory) {
  PmHeapOptions o;
  o.capacity = 4 << 20;
  o.dir = ::testing::TempDir();
  o.backend = GetParam();
  PmHeap h(o);
  EXPECT_EQ(h.tier(), Tier::Slow);
  EXPECT_THAT(h.name(), HasSubstr("pm:"));
  Region* a = h.allocate(1 << 20, nullptr);
  Region* b = h.allocate(1 << 20, nullptr);
  ASSERT_TRUE(a && b);
  std::memset(a->data(), 1, a->size());
  std::memset(b->data(), 2, b->size());
  EXPECT_EQ(static_cast<unsigned char*>(a->data())[a->size() - 1], 1);
  EXPECT_EQ(static_cast<unsigned char*>(b->data())[0], 2);
  h.free(a);
  h.free(b);
}

INSTANTIATE_TEST_SUITE_P(Backends, PmHeapBackends,
                         ::testing::Values(PmBackend::Auto, PmBackend::Mmap, PmBackend::Memkind), [](const auto& info) {
                           switch (info.param) {
                             case PmBackend::Auto: return std::string("Auto");
                             case PmBackend::Mmap: return std::string("Mmap");
                             case PmBackend::Memkind: return std::string("Memkind");
                             default: return std::string("Other");
                           }
                         });

TEST(PmHeap, MmapBackendLeavesNoFileBehind) {
  const std::string dir = ::testing::TempDir() + "/strata_pm_test_dir";
  std::filesystem::create_directories(dir);
  {
    PmHeapOptions o{1 << 20, dir, PmBackend::Mmap, -1};
    PmHeap h(o);
    EXPECT_FALSE(h.is_real_device());
  }
  EXPECT_TRUE(std::filesystem::is_empty(dir));
  std::filesystem::remove_all(dir);
}

TEST(PmHeap, BadConfigurationNamesTheProblem) {
  EXPECT_THAT(message_of([] { PmHeap h(PmHeapOptions{0, "/tmp", PmBackend::Mmap, -1}); }),
              HasSubstr("capacity must be positive"));
  EXPECT_THAT(message_of([] { PmHeap h(PmHeapOptions{1 << 20, "/no/such/dir", PmBackend::Mmap, -1}); }),
              AllOf(HasSubstr("/no/such/dir"), HasSubstr("does not exist")));
  EXPECT_THAT(message_of([] { PmHeap h(PmHeapOptions{1 << 20, "/proc", PmBackend::Mmap, -1}); }), HasSubstr("/proc"));
  EXPECT_THAT(message_of([] { PmHeap h(PmHeapOptions{1 << 20, "/tmp", PmBackend::Numa, 4096}); }),
              AnyOf(HasSubstr("NUMA node 4096 does not exist"), HasSubstr("NUMA is not available"),
                    HasSubstr("no NUMA support")));
}

TEST(Heap, EvictfromCoalescesASpanThroughTheCallback) {
  DramHeap h(64 * 8);
  std::vector<Region*> rs;
  for (int i = 0; i < 8; ++i) rs.push_back(h.allocate(64, nullptr));
  h.free(rs[2]);
  rs[2] = nullptr;
  std::set<Region*> evicted;
  // Need 3 units starting at region 1: regions 1 and 3 must go, 2 is already free.
  const bool ok = h.evictfrom(
      [&](Region* r) {
        evicted.insert(r);
        for (auto& x : rs)
          if (x == r) x = nullptr;
        h.free(r);
        return true;
      },
      rs[1], 3 * 64);
  EXPECT_TRUE(ok);
  EXPECT_EQ(evicted.size(), 2u);
  EXPECT_GE(h.largest_free(), 3u * 64);
  EXPECT_NE(h.allocate(3 * 64, nullptr), nullptr);
}

TEST(Heap, EvictfromSkipsRefusedRegionsAndWraps) {
  DramHeap h(64 * 4);
  std::vector<Region*> rs;
  for (int i = 0; i < 4; ++i) rs.push_back(h.allocate(64, nullptr));
  // Region 2 refuses (pinned); starting at region 2 the walk must skip it, take 3, wrap to 0..1.
  int calls = 0;
  const bool ok = h.evictfrom(
      [&](Region* r) {
        ++calls;
        if (r == rs[2]) return false;
        h.free(r);
        return true;
      },
      rs[2], 2 * 64);
  EXPECT_TRUE(ok);
  EXPECT_GE(h.largest_free(), 2u * 64);
  // With every region refusing, no span can be made and the walk ends after one lap.
  DramHeap g(64 * 4);
  for (int i = 0; i < 4; ++i) g.allocate(64, nullptr);
  EXPECT_FALSE(g.evictfrom([](Region*) { return false; }, nullptr, 64));
  EXPECT_FALSE(g.evictfrom([](Region*) { return true; }, nullptr, 64 * 5));  // larger than the heap
}

TEST(DramHeap, GrowsOnDemandUpToItsLimit) {
  constexpr std::size_t kMiB = std::size_t{1} << 20;
  DramHeap h(20 * kMiB, 2 * kMiB);  // Note [Heaps grow on demand]
  EXPECT_EQ(h.capacity(), 20 * kMiB);
  EXPECT_EQ(h.mapped(), 2 * kMiB);
  Region* a = h.allocate(kMiB, nullptr);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(h.mapped(), 2 * kMiB);  // fits the first segment
  Region* b = h.allocate(3 * kMiB, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(h.mapped(), 6 * kMiB);  // a segment of max(request, mapped) = 4 MiB
  Region* c = h.allocate(10 * kMiB, nullptr);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(h.mapped(), 16 * kMiB);
  for (Region* r : {a, b, c}) std::memset(r->data(), 0x33, r->size());  // each segment is real memory
  // 4 MiB of limit remain; 5 MiB can be neither found nor mapped, and the message says why.
  EXPECT_EQ(h.allocate(5 * kMiB, nullptr), nullptr);
  EXPECT_THAT(h.no_room_message(5 * kMiB), AllOf(HasSubstr("the fast tier 'dram'"), HasSubstr("limit of 20.0 MiB")));
  Region* d = h.allocate(4 * kMiB, nullptr);
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(h.mapped(), 20 * kMiB);
  EXPECT_EQ(h.largest_possible(), 10 * kMiB);
  for (Region* r : {a, b, c, d}) h.free(r);
  EXPECT_EQ(h.used(), 0u);
}

TEST(PmHeap, GrowsOnDemandAndReservesTheFileSpace) {
  constexpr std::size_t kMiB = std::size_t{1} << 20;
  PmHeapOptions o{64 * kMiB, ::testing::TempDir(), PmBackend::Mmap, -1, 2 * kMiB};
  PmHeap h(o);
  EXPECT_EQ(h.mapped(), 2 * kMiB);
  std::vector<Region*> rs;
  for (int i = 0; i < 12; ++i) {
    rs.push_back(h.allocate(kMiB, nullptr));
    ASSERT_NE(rs.back(), nullptr);
    std::memset(rs.back()->data(), i, kMiB);
  }
  EXPECT_GE(h.mapped(), 12 * kMiB);
  EXPECT_LE(h.mapped(), 32 * kMiB);  // doubling, not the whole limit
  for (int i = 0; i < 12; ++i)
    EXPECT_EQ(static_cast<unsigned char*>(rs[static_cast<std::size_t>(i)]->data())[kMiB - 1], i);
  for (Region* r : rs) h.free(r);
}

TEST(PmHeap, ReserveGrowsByExactlyTheRequestInOneSegment) {
  constexpr std::size_t kMiB = std::size_t{1} << 20;
  PmHeapOptions o{64 * kMiB, ::testing::TempDir(), PmBackend::Mmap, -1, 2 * kMiB};
  PmHeap h(o);
  EXPECT_TRUE(h.reserve(kMiB));  // fits the first segment: nothing mapped
  EXPECT_EQ(h.mapped(), 2 * kMiB);
  EXPECT_TRUE(h.reserve(30 * kMiB));
  EXPECT_EQ(h.mapped(), 32 * kMiB);  // 30 MiB more, not doubled
  std::vector<Region*> rs;
  for (int i = 0; i < 6; ++i) {  // six 5 MiB tables land in the reserved segment
    rs.push_back(h.allocate(5 * kMiB, nullptr));
    ASSERT_NE(rs.back(), nullptr);
  }
  EXPECT_EQ(h.mapped(), 32 * kMiB);
  EXPECT_FALSE(h.reserve(40 * kMiB));  // past the limit: refused, and said why
  EXPECT_THAT(h.no_room_message(40 * kMiB), HasSubstr("limit of 64.0 MiB"));
  for (Region* r : rs) h.free(r);
}

TEST(Heap, EvictfromNeverMakesASpanAcrossSegments) {
  DramHeap h(std::size_t{4} << 20, std::size_t{2} << 20);
  Region* a = h.allocate(std::size_t{2} << 20, nullptr);  // fills segment 1
  Region* b = h.allocate(std::size_t{2} << 20, nullptr);  // maps and fills segment 2
  ASSERT_TRUE(a && b);
  EXPECT_EQ(h.mapped(), std::size_t{4} << 20);
  int evicted = 0;
  auto evict = [&](Region* r) {
    ++evicted;
    h.free(r);
    return true;
  };
  EXPECT_FALSE(h.evictfrom(evict, a, std::size_t{3} << 20));  // larger than any segment: nothing evicted
  EXPECT_EQ(evicted, 0);
  EXPECT_TRUE(h.evictfrom(evict, a, std::size_t{1} << 20));
  EXPECT_EQ(evicted, 1);
  EXPECT_NE(h.allocate(std::size_t{1} << 20, nullptr), nullptr);
}

}  // namespace
}  // namespace strata::memory
