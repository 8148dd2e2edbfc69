// CachedTable (dissertation §5.4, Figure 5.7, Table 5.4) on one thread: caching, counters,
// pointer-table bits, back-edges, cachelower/cacheslack, flush_clean/flush_dirty, retention and
// admission, a randomized shadow-copy check in f32 and bf16, bad input; and visit_table.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <functional>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "embeddings/cached_table.h"
#include "embeddings/detail/visit.h"
#include "memory/heap.h"
#include "memory/slow_tier_model.h"
#include "tests/cpp/embeddings/heaps.h"
#include "tests/cpp/error_text.h"

using namespace strata;
using namespace strata::emb;
using ::testing::HasSubstr;

namespace {

using strata::testing_util::message_of;

struct Heaps : testing_util::Heaps {
  explicit Heaps(std::size_t fast_bytes = 1 << 20, std::size_t slow_bytes = 4 << 20)
      : testing_util::Heaps(fast_bytes, slow_bytes) {}
};

// Bytes of one page of `rows` slots of `stride` bytes.
std::size_t pages_of(int n, int64_t rows, std::size_t stride) { return n * rows * (stride + 8); }

float value_of(int64_t row, int64_t col, int version) {
  return static_cast<float>(row) * 0.5f + static_cast<float>(col) * 0.125f - static_cast<float>(version) * 3.0f;
}

std::vector<float> row_values(int64_t row, int64_t d, int version) {
  std::vector<float> v(static_cast<std::size_t>(d));
  for (int64_t c = 0; c < d; ++c) v[static_cast<std::size_t>(c)] = value_of(row, c, version);
  return v;
}

// The element type's rounding of a float (what a table stores).
float stored(float x, ElemType t) { return t == ElemType::F32 ? x : static_cast<float>(BFloat16(x)); }

std::vector<float> read_home(const CachedTable& t, int64_t row) {
  std::vector<float> out(static_cast<std::size_t>(t.featuresize()));
  const std::byte* p = t.home(row);
  for (int64_t c = 0; c < t.featuresize(); ++c) {
    if (t.elem_type() == ElemType::F32) {
      std::memcpy(&out[static_cast<std::size_t>(c)], p + c * 4, 4);
    } else {
      uint16_t b;
      std::memcpy(&b, p + c * 2, 2);
      out[static_cast<std::size_t>(c)] = static_cast<float>(BFloat16::from_bits(b));
    }
  }
  return out;
}

}  // namespace

TEST(CachedTable, GeometryPadsRowsToEightBytes) {
  Heaps h;
  struct Case {
    int64_t d;
    ElemType t;
    std::size_t row_bytes, stride;
  };
  for (const Case& c : {Case{1, ElemType::BF16, 2, 8}, Case{3, ElemType::F32, 12, 16}, Case{4, ElemType::BF16, 8, 8},
                        Case{16, ElemType::F32, 64, 64}, Case{5, ElemType::BF16, 10, 16}}) {
    CachedTable t(10, c.d, c.t, h.slow_mem(), h.fast_mem(), {.cachelower = 1024, .cacheslack = 0, .page_rows = 4});
    EXPECT_EQ(t.row_bytes(), c.row_bytes) << c.d;
    EXPECT_EQ(t.row_stride(), c.stride) << c.d;
    EXPECT_EQ(t.page_bytes(), 4 * (c.stride + 8));
    EXPECT_EQ(t.kind(), "cached");
    for (int64_t r = 0; r < 10; ++r) {
      EXPECT_EQ(t.pointer_entry(r), reinterpret_cast<std::uintptr_t>(t.home(r)));  // home, no flag bits
      EXPECT_EQ(reinterpret_cast<std::uintptr_t>(t.home(r)) & CachedTable::kFlagMask, 0u);
      EXPECT_TRUE(t.in_slow(t.home(r)));
    }
  }
  // Automatic page size: (cachelower + cacheslack) / 32 rows.
  CachedTable a(1000, 16, ElemType::F32, h.slow_mem(), h.fast_mem(), {.cachelower = 64 * 72 * 32, .cacheslack = 0});
  EXPECT_EQ(a.page_rows(), 64);
}

TEST(CachedTable, AccessAndCacheMovesRowsIntoPagesWithBackEdges) {
  Heaps h;
  const int64_t d = 16;
  CachedTable t(100, d, ElemType::F32, h.slow_mem(), h.fast_mem(),
                {.cachelower = pages_of(4, 8, 64), .cacheslack = 0, .page_rows = 8});
  t.set_name("table 7");
  for (int64_t r = 0; r < 100; ++r) t.write_row(r, row_values(r, d, 0).data());
  t.reset_counters();
  EXPECT_EQ(t.cache_counters().update_misses, 100u);
  t.reset_cache_counters();

  std::byte* p = t.access_and_cache(42);
  EXPECT_NE(p, t.home(42));
  EXPECT_FALSE(t.in_slow(p));
  EXPECT_TRUE(t.is_cached(42));
  EXPECT_FALSE(t.is_dirty(42));
  EXPECT_FALSE(t.is_locked(42));
  EXPECT_EQ(t.pointer_entry(42), reinterpret_cast<std::uintptr_t>(p) | CachedTable::kCachedBit);
  EXPECT_EQ(t.npages(), 1u);
  EXPECT_EQ(t.slot_address(0, 0), p);
  EXPECT_EQ(t.backedge(0, 0), t.home(42));
  EXPECT_EQ(t.backedge(0, 1), nullptr);  // not filled
  std::vector<float> got(d);
  std::memcpy(got.data(), p, d * 4);
  EXPECT_EQ(got, row_values(42, d, 0));

  // A second lookup hits the same slot; another row takes the next slot (bump pointer).
  EXPECT_EQ(t.access_and_cache(42), p);
  std::byte* q = t.access_and_cache(7);
  EXPECT_EQ(q, p + t.row_stride());
  EXPECT_EQ(t.backedge(0, 1), t.home(7));
  EXPECT_EQ(t.rowpointer(7, AccessContext::Forward), q);
  auto c = t.cache_counters();
  EXPECT_EQ(c.hits, 2u);
  EXPECT_EQ(c.misses, 2u);
  EXPECT_EQ(c.rows_cached, 2u);
  EXPECT_EQ(c.pages_allocated, 1u);
  EXPECT_DOUBLE_EQ(c.hit_rate(), 0.5);
  EXPECT_EQ(t.cached_rows(), 2);
  // The moves are slow-tier reads of row_bytes each, charged in batches.
  t.settle_charges();
  EXPECT_EQ(t.counters().slow_bytes_read, 2u * 64u);

  // Update marks the cached copy dirty; Read does not; neither moves a row.
  EXPECT_EQ(t.access(7, AccessContext::Read), q);
  EXPECT_FALSE(t.is_dirty(7));
  EXPECT_EQ(t.access(7, AccessContext::Update), q);
  EXPECT_TRUE(t.is_dirty(7));
  EXPECT_EQ(t.pointer_entry(7), reinterpret_cast<std::uintptr_t>(q) | CachedTable::kCachedBit | CachedTable::kDirtyBit);
  EXPECT_EQ(t.rowpointer(7, AccessContext::Forward), q);  // the dirty bit is not part of the address
  EXPECT_EQ(t.access(9, AccessContext::Update), t.home(9));
  EXPECT_EQ(t.access(9, AccessContext::Read), t.home(9));
  EXPECT_FALSE(t.is_cached(9));
  c = t.cache_counters();
  EXPECT_EQ(c.update_hits, 1u);
  EXPECT_EQ(c.update_misses, 1u);
}

TEST(CachedTable, CachelowerAndCacheslackBoundTheCache) {
  Heaps h;
  const int64_t d = 4, rows_per_page = 4;
  const std::size_t page = pages_of(1, rows_per_page, 16);
  CachedTable t(64, d, ElemType::F32, h.slow_mem(), h.fast_mem(),
                {.cachelower = 2 * page, .cacheslack = page, .page_rows = rows_per_page});
  EXPECT_EQ(t.cachelower(), 2 * page);
  EXPECT_EQ(t.cacheslack(), page);
  for (int64_t r = 0; r < 12; ++r) {
    EXPECT_FALSE(t.is_full()) << r;
    EXPECT_NE(t.access_and_cache(r), t.home(r)) << r;
  }
  // Three pages = cachelower + cacheslack: full, the next row stays home.
  EXPECT_TRUE(t.is_full());
  EXPECT_EQ(t.cache_bytes(), 3 * page);
  EXPECT_EQ(t.access_and_cache(12), t.home(12));
  EXPECT_FALSE(t.is_cached(12));
  EXPECT_EQ(t.cache_counters().rows_cached, 12u);

  // flush_clean retires the oldest page until the cache is at most cachelower: rows 0-3 go home.
  EXPECT_EQ(t.flush_clean(), 1u);
  EXPECT_EQ(t.cache_bytes(), 2 * page);
  for (int64_t r = 0; r < 4; ++r) {
    EXPECT_FALSE(t.is_cached(r));
    EXPECT_EQ(t.pointer_entry(r), reinterpret_cast<std::uintptr_t>(t.home(r)));
  }
  for (int64_t r = 4; r < 12; ++r) EXPECT_TRUE(t.is_cached(r));
  EXPECT_EQ(t.backedge(0, 0), t.home(4));  // the old second page is now the oldest
  EXPECT_FALSE(t.is_full());
  EXPECT_EQ(t.cache_counters().rows_dropped, 4u);
  EXPECT_EQ(t.cache_counters().pages_flushed, 1u);
  EXPECT_EQ(t.cache_counters().rows_written_back, 0u);

  // Growing the slack lets the cache grow further; lowering cachelower makes the next flush deeper.
  t.set_cacheslack(3 * page);
  for (int64_t r = 12; r < 24; ++r) EXPECT_NE(t.access_and_cache(r), t.home(r)) << r;
  EXPECT_TRUE(t.is_full());
  EXPECT_EQ(t.access_and_cache(24), t.home(24));
  EXPECT_EQ(t.cache_bytes(), 5 * page);
  t.set_cachelower(page);
  EXPECT_EQ(t.flush_clean(), 4u);
  EXPECT_EQ(t.cache_bytes(), page);
  EXPECT_EQ(t.cached_rows(), 4);
  for (int64_t r = 20; r < 24; ++r) EXPECT_TRUE(t.is_cached(r));
  t.set_cachelower(0);
  EXPECT_EQ(t.flush_clean(), 1u);
  EXPECT_EQ(t.npages(), 0u);
  EXPECT_EQ(t.cached_rows(), 0);

  // Caching switched off (the static policy): misses stay home, hits still hit.
  t.access_and_cache(1);
  t.set_caching(false);
  EXPECT_EQ(t.access_and_cache(2), t.home(2));
  EXPECT_TRUE(t.is_cached(1));
  EXPECT_NE(t.access_and_cache(1), t.home(1));
}

TEST(CachedTable, FlushCleanDropsCleanRowsWithoutWriting) {
  Heaps h;
  const int64_t d = 8;
  CachedTable t(16, d, ElemType::F32, h.slow_mem(), h.fast_mem(),
                {.cachelower = 0, .cacheslack = pages_of(2, 4, 32), .page_rows = 4});
  for (int64_t r = 0; r < 16; ++r) t.write_row(r, row_values(r, d, 0).data());
  t.reset_counters();
  std::byte* p = t.access_and_cache(3);
  // Scribble on the cached copy behind the table's back: a clean flush must not write it home.
  std::vector<float> junk(d, -99.0f);
  std::memcpy(p, junk.data(), d * 4);
  EXPECT_EQ(t.flush_clean(), 1u);
  EXPECT_EQ(read_home(t, 3), row_values(3, d, 0));
  EXPECT_EQ(t.counters().slow_bytes_written, 0u);
  EXPECT_EQ(t.cache_counters().rows_dropped, 1u);
}

TEST(CachedTable, FlushCleanRefusesDirtyRowsAndChangesNothing) {
  Heaps h;
  const int64_t d = 8;
  CachedTable t(16, d, ElemType::F32, h.slow_mem(), h.fast_mem(),
                {.cachelower = 0, .cacheslack = pages_of(2, 4, 32), .page_rows = 4});
  t.set_name("table 2");
  t.access_and_cache(1);
  t.access_and_cache(5);
  t.write_row(5, row_values(5, d, 1).data());
  EXPECT_THAT(message_of([&] { t.flush_clean(); }),
              HasSubstr("embedding table 2: flush_clean would drop row 5, whose cached copy was updated (dirty)"));
  EXPECT_TRUE(t.is_cached(1));
  EXPECT_TRUE(t.is_cached(5));
  EXPECT_TRUE(t.is_dirty(5));
  EXPECT_EQ(t.npages(), 1u);
  std::vector<float> back(d);
  t.read_row(5, back.data());
  EXPECT_EQ(back, row_values(5, d, 1));
  // A flush after the failed one works (the flag and the lock were released).
  EXPECT_EQ(t.flush_dirty(), 1u);
  EXPECT_EQ(read_home(t, 5), row_values(5, d, 1));
}

TEST(CachedTable, FlushDirtyWritesDirtyRowsHome) {
  for (ElemType type : {ElemType::F32, ElemType::BF16}) {
    // Several strides: 8 (head/tail 8-byte streams only), 40, 64, 264 (32-byte body + tails).
    for (int64_t d : {2, 10, 16, 66}) {
      Heaps h;
      const int64_t rows_per_page = 3;
      CachedTable t(20, d, type, h.slow_mem(), h.fast_mem(),
                    {.cachelower = 0, .cacheslack = 1 << 16, .page_rows = rows_per_page});
      for (int64_t r = 0; r < 20; ++r) t.write_row(r, row_values(r, d, 0).data());
      t.reset_counters();
      h.throttle.reset_counters();
      for (int64_t r : {4, 8, 15, 16, 19}) t.access_and_cache(r);
      // Update two of them through the cache: home keeps the old values until the flush.
      t.write_row(8, row_values(8, d, 1).data());
      t.write_row(19, row_values(19, d, 2).data());
      EXPECT_TRUE(t.is_dirty(8));
      EXPECT_FALSE(t.is_dirty(4));
      EXPECT_EQ(t.counters().slow_bytes_written, 0u);
      std::vector<float> old8 = row_values(8, d, 0), new8 = row_values(8, d, 1), new19 = row_values(19, d, 2);
      for (auto* v : {&old8, &new8, &new19})
        for (float& x : *v) x = stored(x, type);
      EXPECT_EQ(read_home(t, 8), old8);
      EXPECT_EQ(t.flush_dirty(), 2u);  // both pages (cachelower 0)
      EXPECT_EQ(read_home(t, 8), new8) << d;
      EXPECT_EQ(read_home(t, 19), new19) << d;
      for (int64_t r : {4, 8, 15, 16, 19}) {
        EXPECT_FALSE(t.is_cached(r));
        EXPECT_EQ(t.pointer_entry(r), reinterpret_cast<std::uintptr_t>(t.home(r)));
      }
      // The padding beyond row_bytes never disturbs a neighbour.
      std::vector<float> r9 = row_values(9, d, 0);
      for (float& x : r9) x = stored(x, type);
      EXPECT_EQ(read_home(t, 9), r9);
      const auto c = t.cache_counters();
      EXPECT_EQ(c.rows_written_back, 2u);
      EXPECT_EQ(c.rows_dropped, 3u);
      EXPECT_EQ(c.pages_flushed, 2u);
      EXPECT_EQ(t.counters().slow_bytes_written, 2 * t.row_bytes());
      EXPECT_EQ(h.throttle.counters().bytes_written, 2 * t.row_bytes());
    }
  }
}

TEST(CachedTable, AdmissionFlagsAndRetention) {
  Heaps h;
  const int64_t d = 4;
  CachedTable t(32, d, ElemType::F32, h.slow_mem(), h.fast_mem(),
                {.cachelower = 0, .cacheslack = pages_of(2, 4, 16), .page_rows = 4});
  for (int64_t r = 0; r < 32; ++r) t.write_row(r, row_values(r, d, 0).data());
  // Admission: (count, flag) byte pairs; a miss caches only rows whose flag equals the value or
  // whose count reaches the minimum.
  std::vector<std::uint8_t> meta(64, 0);
  meta[2 * 1 + 1] = 3;  // flag
  meta[2 * 2 + 1] = 4;
  meta[2 * 6] = 9;  // count
  meta[2 * 7] = 8;
  meta[2 * 20 + 1] = 3;
  t.set_admission({.flags = meta.data() + 1, .counts = meta.data(), .stride = 2, .flag_value = 3, .min_count = 9});
  EXPECT_EQ(t.access_and_cache(0), t.home(0));
  EXPECT_NE(t.access_and_cache(1), t.home(1));
  EXPECT_EQ(t.access_and_cache(2), t.home(2));
  EXPECT_NE(t.access_and_cache(6), t.home(6));
  EXPECT_EQ(t.access_and_cache(7), t.home(7));
  EXPECT_EQ(t.cache_counters().misses, 5u);
  t.set_admission({.flags = meta.data() + 1, .stride = 2, .flag_value = 4});  // flags only
  EXPECT_NE(t.access_and_cache(2), t.home(2));
  EXPECT_EQ(t.access_and_cache(7), t.home(7));
  t.flush_clean();
  t.reset_cache_counters();
  t.set_admission({});                                   // admits everything again
  for (int64_t r : {1, 2, 3, 4}) t.access_and_cache(r);  // page 0: rows 1, 2, 3, 4
  t.write_row(2, row_values(2, d, 5).data());            // dirty
  t.write_row(3, row_values(3, d, 6).data());            // dirty
  const std::byte* old_slot_2 = t.rowpointer(2, AccessContext::Read);

  // Retention: retiring page 0 moves rows 1 and 2 to a fresh page, keeping row 2's dirty bit;
  // row 3 (dirty) is written home, row 4 (clean) dropped.
  std::vector<int64_t> asked;
  EXPECT_EQ(t.retire_oldest(1, true,
                            [&](int64_t r) {
                              asked.push_back(r);
                              return r == 1 || r == 2;
                            }),
            1u);
  EXPECT_EQ(asked, (std::vector<int64_t>{1, 2, 3, 4}));
  EXPECT_TRUE(t.is_cached(1));
  EXPECT_TRUE(t.is_cached(2));
  EXPECT_TRUE(t.is_dirty(2));
  EXPECT_FALSE(t.is_dirty(1));
  EXPECT_NE(t.rowpointer(2, AccessContext::Read), old_slot_2);
  EXPECT_FALSE(t.is_cached(3));
  EXPECT_FALSE(t.is_cached(4));
  EXPECT_EQ(read_home(t, 3), row_values(3, d, 6));
  EXPECT_EQ(read_home(t, 2), row_values(2, d, 0));  // still only in the cache
  EXPECT_EQ(t.npages(), 1u);
  EXPECT_EQ(t.backedge(0, 0), t.home(1));
  EXPECT_EQ(t.backedge(0, 1), t.home(2));
  EXPECT_EQ(t.free_slots(), 2 + 4);  // two slots of the retention page, one more page
  const auto c = t.cache_counters();
  EXPECT_EQ(c.rows_retained, 2u);
  EXPECT_EQ(c.rows_written_back, 1u);
  EXPECT_EQ(c.rows_dropped, 1u);
  std::vector<float> back(d);
  t.read_row(2, back.data());
  EXPECT_EQ(back, row_values(2, d, 5));
  // New misses go to the retention page's free slots.
  EXPECT_NE(t.access_and_cache(20), t.home(20));
  EXPECT_EQ(t.backedge(0, 2), t.home(20));
  // flush_dirty never retains: everything is retired.
  EXPECT_EQ(t.flush_dirty(), 1u);
  EXPECT_EQ(read_home(t, 2), row_values(2, d, 5));
  EXPECT_EQ(t.free_slots(), 8);
  EXPECT_THAT(message_of([&] { t.set_admission({.flags = meta.data(), .stride = 0}); }),
              HasSubstr("the stride must be >= 1"));
}

// Any sequence of accesses, updates, flushes and limit changes keeps the table equal to a shadow
// copy, in f32 and bf16.
TEST(CachedTable, RandomSequencesMatchAShadowCopy) {
  for (ElemType type : {ElemType::F32, ElemType::BF16}) {
    for (uint64_t seed : {1u, 2u, 3u}) {
      Heaps h;
      const int64_t n = 200, d = 6;
      std::mt19937_64 rng(seed);
      CachedTable t(n, d, type, h.slow_mem(), h.fast_mem(),
                    {.cachelower = pages_of(3, 5, 16), .cacheslack = pages_of(2, 5, 16), .page_rows = 5});
      std::vector<float> shadow(static_cast<std::size_t>(n * d));
      for (int64_t r = 0; r < n; ++r) {
        auto v = row_values(r, d, 0);
        t.write_row(r, v.data());
        for (int64_t c = 0; c < d; ++c) shadow[static_cast<std::size_t>(r * d + c)] = stored(v[c], type);
      }
      std::vector<float> got(d);
      int refused = 0;
      for (int step = 0; step < 4000; ++step) {
        const int op = static_cast<int>(rng() % 100);
        const auto r = static_cast<int64_t>(rng() % n);
        if (op < 45) {  // lookup (Forward) and read through the returned pointer
          const std::byte* p = t.rowpointer(r, AccessContext::Forward);
          for (int64_t c = 0; c < d; ++c) {
            float x;
            if (type == ElemType::F32) {
              std::memcpy(&x, p + c * 4, 4);
            } else {
              uint16_t b;
              std::memcpy(&b, p + c * 2, 2);
              x = static_cast<float>(BFloat16::from_bits(b));
            }
            ASSERT_EQ(x, shadow[static_cast<std::size_t>(r * d + c)]) << "step " << step << " row " << r;
          }
        } else if (op < 75) {  // update
          auto v = row_values(r, d, step);
          t.write_row(r, v.data());
          for (int64_t c = 0; c < d; ++c) shadow[static_cast<std::size_t>(r * d + c)] = stored(v[c], type);
        } else if (op < 85) {  // read
          t.read_row(r, got.data());
          ASSERT_EQ(got, std::vector<float>(shadow.begin() + r * d, shadow.begin() + (r + 1) * d));
        } else if (op < 90) {
          t.flush_dirty();
        } else if (op < 94) {
          try {
            t.flush_clean();
          } catch (const Error& e) {
            ++refused;
            EXPECT_THAT(e.what(), HasSubstr("flush_clean would drop row"));
          }
        } else if (op < 97) {
          t.set_cachelower(static_cast<std::size_t>(rng() % 6) * pages_of(1, 5, 16));
        } else {
          t.set_cacheslack(static_cast<std::size_t>(rng() % 4) * pages_of(1, 5, 16));
        }
      }
      EXPECT_GT(refused, 0);
      std::vector<float> all(shadow.size());
      t.copy_to(all.data());
      EXPECT_EQ(all, shadow);
      // Everything home: the base rows themselves equal the shadow.
      t.set_cachelower(0);
      t.flush_dirty();
      EXPECT_EQ(t.npages(), 0u);
      for (int64_t r = 0; r < n; ++r)
        ASSERT_EQ(read_home(t, r), std::vector<float>(shadow.begin() + r * d, shadow.begin() + (r + 1) * d)) << r;
      const auto c = t.cache_counters();
      EXPECT_GT(c.hits, 0u);
      EXPECT_GT(c.rows_written_back, 0u);
      EXPECT_GT(c.rows_dropped, 0u);
    }
  }
}

TEST(CachedTable, BadInputGetsClearErrors) {
  Heaps h(4096, 1 << 20);
  EXPECT_THAT(message_of([&] { CachedTable t(4, 4, ElemType::F32, {nullptr, nullptr}, h.fast_mem()); }),
              HasSubstr("no slow heap"));
  EXPECT_THAT(message_of([&] { CachedTable t(4, 4, ElemType::F32, h.slow_mem(), {nullptr, nullptr}); }),
              HasSubstr("no fast heap"));
  EXPECT_THAT(message_of([&] { CachedTable t(0, 4, ElemType::F32, h.slow_mem(), h.fast_mem()); }),
              HasSubstr("nvectors must be positive, got 0"));
  EXPECT_THAT(message_of([&] { CachedTable t(4, 4, ElemType::F32, h.slow_mem(), h.fast_mem(), {.page_rows = -2}); }),
              HasSubstr("page_rows must be >= 0 (0: automatic), got -2"));
  // The pointer table (8 bytes a row) does not fit a 4 KiB fast heap.
  EXPECT_THAT(message_of([&] { CachedTable t(1000, 4, ElemType::F32, h.slow_mem(), h.fast_mem()); }),
              HasSubstr("heap has no room for the pointer table of 1000 rows (8 bytes each, 8000 bytes asked"));
  EXPECT_THAT(message_of([&] { CachedTable t(1 << 20, 64, ElemType::F32, h.slow_mem(), h.fast_mem()); }),
              HasSubstr("has no room for the base rows of 1048576 rows (256 bytes each"));
  EXPECT_EQ(h.slow.used(), 0u);  // nothing leaked by the failed constructions
  EXPECT_EQ(h.fast.used(), 0u);
  CachedTable t(8, 4, ElemType::F32, h.slow_mem(), h.fast_mem(), {.cachelower = 1024, .page_rows = 2});
  t.set_name("table 5");
  std::vector<float> row(4);
  EXPECT_THAT(message_of([&] { t.read_row(8, row.data()); }), HasSubstr("embedding table 5: row 8 is out of range"));
  EXPECT_THAT(message_of([&] { t.backedge(0, 0); }), HasSubstr("table 5: page 0 is out of range [0, 0)"));
  t.access_and_cache(1);
  EXPECT_THAT(message_of([&] { t.backedge(0, 2); }), HasSubstr("slot 2 is out of range [0, 2)"));
  // A fast heap that runs out before the limit makes the cache full instead of failing.
  Heaps tiny(4096, 1 << 20);
  CachedTable u(64, 64, ElemType::F32, tiny.slow_mem(), tiny.fast_mem(),
                {.cachelower = 1 << 20, .cacheslack = 0, .page_rows = 8});
  int cached = 0;
  for (int64_t r = 0; r < 64; ++r) cached += u.access_and_cache(r) != u.home(r);
  EXPECT_EQ(cached, 8);  // one page of 8 × 264 bytes fits beside the 512-byte pointer table
  EXPECT_TRUE(u.is_full());
}

namespace {
class OddTable final : public Table {
 public:
  OddTable() : Table(1, 1, ElemType::F32, {}) {}
  std::string_view kind() const override { return "odd"; }
  std::byte* rowpointer(int64_t, AccessContext) override { return reinterpret_cast<std::byte*>(&x_); }
  bool in_slow(const std::byte*) const override { return false; }

 private:
  float x_ = 0;
};
}  // namespace

TEST(VisitTable, DispatchesToTheConcreteType) {
  Heaps h;
  SimpleTable s(4, 4, ElemType::F32, h.fast_mem());
  CachedTable c(4, 4, ElemType::F32, h.slow_mem(), h.fast_mem(), {.cachelower = 1024, .page_rows = 2});
  auto which = [](auto& t) -> std::string {
    using T = std::decay_t<decltype(t)>;
    if constexpr (std::is_same_v<T, SimpleTable>) return "simple:" + std::to_string(t.row(1) - t.data());
    if constexpr (std::is_same_v<T, CachedTable>) return "cached:" + std::to_string(t.access_and_cache(1) != t.home(1));
    return "?";
  };
  Table& ts = s;
  Table& tc = c;
  EXPECT_EQ(visit_table(ts, which), "simple:16");
  EXPECT_EQ(visit_table(tc, which), "cached:1");
  const Table& cs = s;
  EXPECT_EQ(visit_table(cs, [](const auto& t) { return t.featuresize(); }), 4);
  OddTable odd;
  odd.set_name("table 9");
  EXPECT_THAT(message_of([&] { visit_table(odd, which); }),
              HasSubstr("visit_table: embedding table 9 is a 'odd' table, which no kernel is specialized for"));
}
