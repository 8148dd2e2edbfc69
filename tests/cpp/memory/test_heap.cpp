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
  EXPECT_THAT(message_of([] { DramHeap h(std::size_t{1} << 60); }), HasSubstr("larger than this machine's physical memory"));
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

INSTANTIATE_TEST_SUITE_P(Backends, PmHeapBackends, ::testing::Values(PmBackend::Auto, PmBackend::Mmap, PmBackend::Memkind),
                         [](const auto& info) {
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
  EXPECT_THAT(message_of([] { PmHeap h(PmHeapOptions{1 << 20, "/proc", PmBackend::Mmap, -1}); }),
              HasSubstr("/proc"));
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
        for (auto& x : rs) if (x == r) x = nullptr;
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

}  // namespace
}  // namespace strata::memory
