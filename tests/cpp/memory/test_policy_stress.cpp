// Concurrency stress of the data manager and LRU policy. Runs under ThreadSanitizer in CI.
//
// Shared objects carry a version; a writer pins an object exclusively, rewrites all of its bytes
// with the pattern of version+1 and publishes the version; a reader pins it shared and checks that
// every byte matches the published version. Meanwhile other threads prefetch, evict and softevict
// the same objects and allocate/free private objects under forced allocation, so migrations race
// with kernels all the time. A torn write (Listing 6.1) or a lost/stale copy shows up as a
// mismatching byte.

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <random>
#include <thread>
#include <vector>

#include "memory/policy.h"
#include "memory_test_util.h"

namespace strata::memory {
namespace {
using test::fill_pattern;
using test::first_mismatch;

struct Shared {
  Object* object = nullptr;
  std::atomic<uint32_t> version{0};  // written only by a pinned writer
};

TEST(PolicyStress, KernelsMigrationsAndAllocationsRace) {
  constexpr std::size_t kObj = 24 * 1024;
  constexpr int kShared = 24;
  constexpr int kThreads = 6;
  constexpr int kOps = 1500;
  auto dm = test::make_manager(8 * kObj, 256 * kObj);  // the fast tier holds a third of the shared set
  LruPolicy policy(*dm);

  std::vector<Shared> shared(kShared);
  for (int i = 0; i < kShared; ++i) {
    Object* o = policy.alloc_fast(kObj, true);
    ASSERT_NE(o, nullptr);
    fill_pattern(dm->primary(o)->data(), kObj, static_cast<uint32_t>(i) << 16);
    policy.write_use(o);
    shared[static_cast<std::size_t>(i)].object = o;
  }
  auto seed_of = [](int i, uint32_t v) { return (static_cast<uint32_t>(i) << 16) + v; };

  std::atomic<int> mismatches{0};
  std::atomic<int> reads{0}, writes{0}, moves{0}, allocs{0};
  auto worker = [&](int t) {
    std::mt19937 rng(static_cast<unsigned>(1234 + t));
    std::vector<std::pair<Object*, uint32_t>> mine;
    for (int op = 0; op < kOps; ++op) {
      const int i = static_cast<int>(rng() % kShared);
      Shared& s = shared[static_cast<std::size_t>(i)];
      switch (rng() % 8) {
        case 0:
        case 1: {  // read kernel
          policy.read_use(s.object);
          s.object->pin_read();
          const uint32_t v = s.version.load(std::memory_order_relaxed);
          if (first_mismatch(dm->primary(s.object)->data(), kObj, seed_of(i, v)) != kObj) ++mismatches;
          s.object->unpin_read();
          ++reads;
          break;
        }
        case 2: {  // write kernel
          policy.write_use(s.object);
          s.object->pin_write();
          const uint32_t v = s.version.load(std::memory_order_relaxed) + 1;
          fill_pattern(dm->primary(s.object)->data(), kObj, seed_of(i, v));
          s.version.store(v, std::memory_order_relaxed);
          s.object->unpin_write();
          ++writes;
          break;
        }
        case 3:
          policy.prefetch(s.object, rng() % 2 == 0);
          ++moves;
          break;
        case 4:
          policy.evict(s.object);
          ++moves;
          break;
        case 5: policy.softevict(s.object); break;
        case 6: {  // private allocation, written, later checked and freed
          if (Object* o = policy.alloc_fast(kObj / 2, true)) {
            const uint32_t seed = 0x80000000u + static_cast<uint32_t>(t * kOps + op);
            o->pin_write();
            fill_pattern(dm->primary(o)->data(), kObj / 2, seed);
            o->unpin_write();
            policy.write_use(o);
            mine.emplace_back(o, seed);
            ++allocs;
          }
          break;
        }
        case 7: {
          if (!mine.empty()) {
            auto [o, seed] = mine.back();
            mine.pop_back();
            o->pin_read();
            if (first_mismatch(dm->primary(o)->data(), kObj / 2, seed) != kObj / 2) ++mismatches;
            o->unpin_read();
            policy.unsafe_free(o);
          }
          break;
        }
      }
    }
    for (auto [o, seed] : mine) {
      o->pin_read();
      if (first_mismatch(dm->primary(o)->data(), kObj / 2, seed) != kObj / 2) ++mismatches;
      o->unpin_read();
      policy.unsafe_free(o);
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back(worker, t);
  for (auto& th : threads) th.join();

  EXPECT_EQ(mismatches.load(), 0);
  EXPECT_GT(reads.load(), 0);
  EXPECT_GT(writes.load(), 0);
  EXPECT_GT(moves.load(), 0);
  EXPECT_GT(allocs.load(), 0);
  EXPECT_GT(dm->stats().snapshot().moved_to_fast.bytes, 0u);
  EXPECT_GT(dm->stats().snapshot().moved_to_slow.bytes, 0u);
  EXPECT_LE(dm->fast().peak(), dm->fast().capacity());
  for (int i = 0; i < kShared; ++i) {
    Shared& s = shared[static_cast<std::size_t>(i)];
    EXPECT_EQ(s.object->access(), Object::Access::NotBusy);
    EXPECT_EQ(first_mismatch(dm->primary(s.object)->data(), kObj, seed_of(i, s.version.load())), kObj) << i;
    // The invariant: a fast region, when there is one, is the primary.
    Region* p = dm->primary(s.object);
    if (!dm->in(p, dm->fast())) {
      EXPECT_EQ(dm->getlinked(p, dm->fast()), nullptr) << i;
    }
    policy.unsafe_free(s.object);
  }
  EXPECT_EQ(dm->live_objects(), 0u);
  EXPECT_EQ(dm->fast().used(), 0u);
  EXPECT_EQ(dm->slow().used(), 0u);
}

}  // namespace
// Note [Unmanaged regions]: the embedding tables allocate and free regions of the same fast heap
// from their own threads, under their own locks, while the policy's forced allocations walk the
// heap evicting objects. The walk must never touch an unmanaged region (its bytes stay as written,
// it is never moved) nor read one that another thread is freeing or allocating.
TEST(PolicyStress, UnmanagedRegionsRaceWithEvictionWalks) {
  constexpr std::size_t kObj = 16 * 1024;
  constexpr int kThreads = 4;
  constexpr int kOps = 1200;
  auto dm = test::make_manager(16 * kObj, 256 * kObj);
  LruPolicy policy(*dm);
  std::atomic<int> mismatches{0}, unmanaged{0}, managed{0};
  auto worker = [&](int t) {
    std::mt19937 rng(static_cast<unsigned>(77 + t));
    std::vector<std::pair<Region*, uint32_t>> regions;  // unmanaged: this thread's
    std::vector<std::pair<Object*, uint32_t>> objects;
    for (int op = 0; op < kOps; ++op) {
      const uint32_t seed = static_cast<uint32_t>(t * kOps + op);
      switch (rng() % 4) {
        case 0: {  // a table's cache page
          if (Region* r = dm->fast().allocate(kObj / 4 * (1 + rng() % 3), nullptr)) {
            fill_pattern(r->data(), r->size(), seed);
            regions.emplace_back(r, seed);
            ++unmanaged;
          }
          break;
        }
        case 1: {  // a flushed page
          if (regions.empty()) break;
          auto [r, s] = regions[rng() % regions.size()];
          if (first_mismatch(r->data(), r->size(), s) != r->size()) ++mismatches;
          std::erase_if(regions, [&](const auto& e) { return e.first == r; });
          dm->fast().free(r);
          break;
        }
        case 2: {  // a tensor, allocated forced: walks the heap evicting others
          if (Object* o = policy.alloc_fast(kObj, true)) {
            o->pin_write();
            fill_pattern(dm->primary(o)->data(), kObj, seed | 0x80000000u);
            o->unpin_write();
            policy.write_use(o);
            objects.emplace_back(o, seed | 0x80000000u);
            ++managed;
          }
          break;
        }
        case 3: {
          if (objects.empty()) break;
          auto [o, s] = objects.back();
          objects.pop_back();
          o->pin_read();
          if (first_mismatch(dm->primary(o)->data(), kObj, s) != kObj) ++mismatches;
          o->unpin_read();
          policy.unsafe_free(o);
          break;
        }
      }
    }
    for (auto [r, s] : regions) {
      if (first_mismatch(r->data(), r->size(), s) != r->size()) ++mismatches;
      dm->fast().free(r);
    }
    for (auto [o, s] : objects) policy.unsafe_free(o);
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back(worker, t);
  for (auto& th : threads) th.join();
  EXPECT_EQ(mismatches.load(), 0);
  EXPECT_GT(unmanaged.load(), 100);
  EXPECT_GT(managed.load(), 100);
  EXPECT_GT(dm->stats().snapshot().moved_to_slow.bytes, 0u);  // the walks did evict tensors
  EXPECT_EQ(dm->fast().used(), 0u);
  EXPECT_EQ(dm->slow().used(), 0u);
}

}  // namespace strata::memory
