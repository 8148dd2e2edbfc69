// Many threads hammering one CachedTable (Note [CachedTable phases]): concurrent Forward lookups of
// shared rows (threads race to cache the same rows), lookups and updates of each thread's own
// rows, page allocation under contention, the cache filling up; flushes between rounds; data
// checked against expected values throughout and at the end. Runs under ThreadSanitizer in CI, so
// the sizes are small (well under 10 s there).
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <latch>
#include <random>
#include <thread>
#include <vector>

#include "core/dtype.h"
#include "embeddings/cached_table.h"
#include "memory/heap.h"
#include "memory/slow_tier_model.h"
#include "tests/cpp/embeddings/heaps.h"

using namespace strata;
using namespace strata::emb;

namespace {

struct Heaps : testing_util::Heaps {
  explicit Heaps(std::size_t fast_bytes = 8 << 20, std::size_t slow_bytes = 8 << 20)
      : testing_util::Heaps(fast_bytes, slow_bytes) {}
};

// Values are small integers plus quarters, exact in bf16 as well as f32.
float value_of(int64_t row, int64_t col, int version) {
  return static_cast<float>((row * 7 + col * 3 + version * 11) % 200) * 0.25f;
}

bool row_matches(const std::byte* p, ElemType type, int64_t row, int64_t d, int version) {
  for (int64_t c = 0; c < d; ++c) {
    float x;
    if (type == ElemType::F32) {
      std::memcpy(&x, p + c * 4, 4);
    } else {
      uint16_t b;
      std::memcpy(&b, p + c * 2, 2);
      x = static_cast<float>(BFloat16::from_bits(b));
    }
    if (x != value_of(row, c, version)) return false;
  }
  return true;
}

std::vector<float> row_values(int64_t row, int64_t d, int version) {
  std::vector<float> v(static_cast<std::size_t>(d));
  for (int64_t c = 0; c < d; ++c) v[static_cast<std::size_t>(c)] = value_of(row, c, version);
  return v;
}

}  // namespace

TEST(CachedTableStress, ThreadsLookUpAndUpdateWhileRowsAreCached) {
  for (ElemType type : {ElemType::F32, ElemType::BF16}) {
    Heaps h;
    constexpr int kThreads = 6;
    constexpr int kRounds = 12;
    constexpr int kOpsPerRound = 1500;
    const int64_t n = 4096, d = 16, shared = 512, page_rows = 300;
    const std::size_t page_bytes = static_cast<std::size_t>(page_rows) * ((d * elem_size(type) + 7) / 8 * 8 + 8);
    // At most five pages (1500 rows, ~37 % of the table): the cache fills during a round, so the
    // full path and page allocation under contention both run.
    CachedTable t(n, d, type, {&h.slow, &h.throttle}, {&h.fast, nullptr},
                  {.cachelower = 2 * page_bytes, .cacheslack = 3 * page_bytes, .page_rows = page_rows});
    t.set_name("stress table");
    for (int64_t r = 0; r < n; ++r) t.write_row(r, row_values(r, d, 0).data());
    t.reset_cache_counters();

    // Rows [0, shared) are only looked up, by everybody; row r >= shared belongs to thread
    // r % kThreads, which looks it up and updates it.
    std::vector<int> version(static_cast<std::size_t>(n), 0);  // written only by the owner
    std::atomic<int64_t> bad_lookups{0}, forward_accesses{0};
    for (int round = 0; round < kRounds; ++round) {
      std::latch start(kThreads);
      std::vector<std::thread> threads;
      for (int tid = 0; tid < kThreads; ++tid) {
        threads.emplace_back([&, tid] {
          std::mt19937_64 rng(static_cast<uint64_t>(round * 1000 + tid));
          std::vector<int64_t> mine;
          for (int64_t r = shared + tid; r < n; r += kThreads) mine.push_back(r);
          int64_t bad = 0, forwards = 0;
          start.arrive_and_wait();
          for (int op = 0; op < kOpsPerRound; ++op) {
            const int kind = static_cast<int>(rng() % 10);
            if (kind < 4) {  // a shared row: all threads race to cache the same hot few
              const auto r = static_cast<int64_t>(rng() % (rng() % 2 ? 32 : shared));
              bad += !row_matches(t.rowpointer(r, AccessContext::Forward), type, r, d, 0);
              ++forwards;
            } else if (kind < 7) {  // one of mine, looked up
              const int64_t r = mine[rng() % mine.size()];
              bad += !row_matches(t.rowpointer(r, AccessContext::Forward), type, r, d,
                                  version[static_cast<std::size_t>(r)]);
              ++forwards;
            } else if (kind < 9) {  // one of mine, updated
              const int64_t r = mine[rng() % mine.size()];
              const int v = ++version[static_cast<std::size_t>(r)];
              t.write_row(r, row_values(r, d, v).data());
            } else {  // one of mine, read without side effects
              const int64_t r = mine[rng() % mine.size()];
              bad +=
                  !row_matches(t.rowpointer(r, AccessContext::Read), type, r, d, version[static_cast<std::size_t>(r)]);
            }
          }
          bad_lookups += bad;
          forward_accesses += forwards;
        });
      }
      for (auto& th : threads) th.join();
      ASSERT_EQ(bad_lookups.load(), 0) << "round " << round;
      ASSERT_FALSE(t.is_locked(0));
      // Between rounds: a flush (dirty rows home), sometimes to a different cachelower; every
      // third round a full check of the data.
      if (round % 3 == 2) {
        std::vector<float> all(static_cast<std::size_t>(n * d));
        t.copy_to(all.data());
        for (int64_t r = 0; r < n; ++r)
          for (int64_t c = 0; c < d; ++c)
            ASSERT_EQ(all[static_cast<std::size_t>(r * d + c)], value_of(r, c, version[static_cast<std::size_t>(r)]))
                << "row " << r << " round " << round;
      }
      t.set_cachelower(static_cast<std::size_t>(round % 3) * page_bytes);
      t.flush_dirty();
    }
    const auto c = t.cache_counters();
    EXPECT_EQ(c.hits + c.misses, static_cast<uint64_t>(forward_accesses.load()));  // exact per-thread counting
    EXPECT_GT(c.hits, 0u);
    EXPECT_GT(c.rows_cached, 1000u);
    EXPECT_GT(c.rows_written_back, 100u);
    EXPECT_GT(c.pages_flushed, static_cast<uint64_t>(kRounds));
    // Everything home: the base rows hold every update.
    t.set_cachelower(0);
    t.flush_dirty();
    EXPECT_EQ(t.npages(), 0u);
    for (int64_t r = 0; r < n; ++r)
      ASSERT_TRUE(row_matches(t.home(r), type, r, d, version[static_cast<std::size_t>(r)])) << r;
    t.settle_charges();
    EXPECT_EQ(t.counters().slow_bytes_read % t.row_bytes(), 0u);
  }
}

// More threads than counter shards: the threads beyond the owned shards share one updated with
// atomic RMWs; counts stay exact and slots are recycled when threads exit.
TEST(CachedTableStress, CountsStayExactWithMoreThreadsThanShards) {
  Heaps h;
  constexpr int kThreads = emb::detail::kCounterShards + 16;
  constexpr int kAccesses = 300;
  CachedTable t(512, 8, ElemType::F32, {&h.slow, &h.throttle}, {&h.fast, nullptr},
                {.cachelower = 256 * 40, .cacheslack = 0, .page_rows = 16});
  for (int64_t r = 0; r < 512; ++r) t.write_row(r, row_values(r, 8, 0).data());
  t.reset_cache_counters();
  for (int wave = 0; wave < 2; ++wave) {  // the second wave reuses the slots the first returned
    std::latch start(kThreads);
    std::atomic<int64_t> bad{0};
    std::vector<std::thread> threads;
    for (int tid = 0; tid < kThreads; ++tid) {
      threads.emplace_back([&, tid] {
        std::mt19937 rng(static_cast<unsigned>(tid + wave * 7919));
        start.arrive_and_wait();
        for (int i = 0; i < kAccesses; ++i) {
          const auto r = static_cast<int64_t>(rng() % 512);
          bad += !row_matches(t.access_and_cache(r), ElemType::F32, r, 8, 0);
        }
      });
    }
    for (auto& th : threads) th.join();
    EXPECT_EQ(bad.load(), 0);
    const auto c = t.cache_counters();
    EXPECT_EQ(c.hits + c.misses, static_cast<uint64_t>((wave + 1) * kThreads * kAccesses));
    EXPECT_EQ(static_cast<int64_t>(c.rows_cached), t.cached_rows());
  }
}
