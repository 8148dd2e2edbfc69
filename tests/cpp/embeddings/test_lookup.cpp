// Pooled embedding lookups (embeddings/kernels.h) against the naive reference (embeddings/reference.h)
// and hand-computed values; validation messages.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <tbb/task_arena.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <functional>
#include <random>
#include <vector>

#include "core/error.h"
#include "core/threading.h"
#include "embeddings/detail/kernels.h"
#include "embeddings/kernels.h"
#include "embeddings/reference.h"
#include "memory/heap.h"
#include "tests/cpp/bitwise.h"
#include "tests/cpp/error_text.h"

using namespace strata;
using namespace strata::emb;
using ::testing::HasSubstr;
namespace ref = strata::emb::reference;

namespace {

using strata::testing_util::message_of;

using strata::testing_util::bitwise_equal;

/// A table that is not SimpleTable: the kernels reach it through virtual rowpointer. Counts calls
/// per context (atomically: kernels call from several threads) and reports rows >= slow_from as
/// slow-tier rows.
class CountingTable final : public Table {
 public:
  CountingTable(int64_t rows, int64_t d, ElemType type, int64_t slow_from)
      : Table(rows, d, type, {nullptr, nullptr}),
        data_(static_cast<std::size_t>(rows) * row_bytes()),
        slow_from_(slow_from),
        calls_(static_cast<std::size_t>(rows)) {}
  std::string_view kind() const override { return "counting"; }
  std::byte* rowpointer(int64_t row, AccessContext ctx) override {
    if (ctx == AccessContext::Forward) forward_.fetch_add(1, std::memory_order_relaxed);
    if (ctx == AccessContext::Update) update_.fetch_add(1, std::memory_order_relaxed);
    if (ctx != AccessContext::Read) calls_[static_cast<std::size_t>(row)].fetch_add(1, std::memory_order_relaxed);
    return data_.data() + static_cast<std::size_t>(row) * row_bytes();
  }
  bool in_slow(const std::byte* p) const override {
    return (p - data_.data()) / static_cast<std::ptrdiff_t>(row_bytes()) >= slow_from_;
  }
  void reset_calls() {
    forward_ = 0;
    update_ = 0;
    for (auto& c : calls_) c = 0;
  }
  std::atomic<int64_t> forward_{0}, update_{0};
  std::vector<int64_t> data_calls() const {
    std::vector<int64_t> v;
    for (const auto& c : calls_) v.push_back(c.load());
    return v;
  }

 private:
  std::vector<std::byte> data_;
  int64_t slow_from_;
  std::vector<std::atomic<int64_t>> calls_;
};

enum class Mode { Sum, Mean, Weighted };
Pooling pooling_of(Mode m) { return m == Mode::Mean ? Pooling::Mean : Pooling::Sum; }

/// Runs lookup on `t` and the reference on `dense` for random bags, writing into a wider buffer
/// at a column offset; checks exact equality and that nothing outside the slice was written.
void check_against_reference(Table& t, const ref::DenseTable& dense, Mode mode, uint32_t seed, int64_t batch = 37,
                             int64_t max_bag = 9) {
  std::mt19937 rng(seed);
  const ref::BagSet bags = ref::random_bags(rng, batch, max_bag, t.nvectors(), mode == Mode::Weighted, 5);
  const int64_t d = t.featuresize(), col = 3, stride = d + 7;
  std::vector<float> got(static_cast<std::size_t>(batch * stride), -77.0f), want = got;
  lookup(t, bags.view(), pooling_of(mode), {got.data() + col, stride});
  ref::lookup(dense, bags.view(), pooling_of(mode), want.data() + col, stride);
  ASSERT_TRUE(bitwise_equal(got, want)) << "d=" << d << " type=" << elem_name(t.elem_type())
                                        << " mode=" << static_cast<int>(mode);
}

}  // namespace

TEST(EmbeddingLookup, HandComputedSumMeanAndWeights) {
  memory::DramHeap heap(1 << 16);
  SimpleTable t(5, 2, ElemType::F32, {&heap, nullptr});
  const std::vector<float> w = {1, 2, 10, 20, 100, 200, 1000, 2000, 0.5f, -0.25f};
  t.copy_from(w.data());
  ref::BagSet bags;
  bags.add({0, 3, 4});  // dissertation Figure 5.2: A_3 = M_1 + M_4 + M_5 (0-based rows 0, 3, 4)
  bags.add({});         // empty bag
  bags.add({2, 2});     // a row twice in one bag
  std::vector<float> out(6, -1.0f);
  lookup(t, bags.view(), Pooling::Sum, {out.data(), 2});
  EXPECT_EQ(out, (std::vector<float>{1001.5f, 2001.75f, 0, 0, 200, 400}));
  lookup(t, bags.view(), Pooling::Mean, {out.data(), 2});
  EXPECT_EQ(out, (std::vector<float>{1001.5f / 3, 2001.75f / 3, 0, 0, 100, 200}));
  ref::BagSet weighted;
  weighted.add({1, 4}, {2.0f, -4.0f});
  weighted.add({1}, {0.5f});
  std::vector<float> out2(4);
  lookup(t, weighted.view(), Pooling::Sum, {out2.data(), 2});
  EXPECT_EQ(out2, (std::vector<float>{18.0f, 41.0f, 5.0f, 10.0f}));
}

TEST(EmbeddingLookup, Bf16RowsAccumulateInF32) {
  memory::DramHeap heap(1 << 16);
  SimpleTable t(3, 16, ElemType::BF16, {&heap, nullptr});
  std::vector<float> w(48);
  for (int j = 0; j < 16; ++j) {
    w[j] = 1.0f;                // row 0
    w[16 + j] = 1.0f / 256.0f;  // row 1: exact in bf16, lost if 1 + 1/256 were rounded to bf16
    w[32 + j] = 3.0f;
  }
  t.copy_from(w.data());
  ref::BagSet bags;
  bags.add({0, 1, 1});
  std::vector<float> out(16);
  lookup(t, bags.view(), Pooling::Sum, {out.data(), 16});
  for (float x : out) EXPECT_EQ(x, 1.0f + 2.0f / 256.0f);
}

TEST(EmbeddingLookup, MatchesReferenceForEveryFeatureSizeTypeAndPooling) {
  memory::DramHeap heap(64 << 20);
  uint32_t seed = 1;
  for (int64_t d : {1, 3, 16, 24, 32, 64, 100, 128, 256, 1100}) {
    for (ElemType type : {ElemType::F32, ElemType::BF16}) {
      SimpleTable t(50, d, type, {&heap, nullptr});
      const ref::DenseTable dense = ref::fill_random(t, seed++);
      for (Mode mode : {Mode::Sum, Mode::Mean, Mode::Weighted}) check_against_reference(t, dense, mode, seed++);
    }
  }
}

TEST(EmbeddingLookup, LongBagsAndLargeBatchesSplitIntoChunks) {
  memory::DramHeap heap(64 << 20);
  SimpleTable t(10000, 64, ElemType::F32, {&heap, nullptr});
  const ref::DenseTable dense = ref::fill_random(t, 5);
  for (Mode mode : {Mode::Sum, Mode::Mean, Mode::Weighted}) check_against_reference(t, dense, mode, 9, 2048, 100);
}

TEST(EmbeddingLookup, OtherTableTypesGoThroughVirtualRowpointerOncePerIndex) {
  CountingTable t(40, 24, ElemType::F32, /*slow_from=*/30);
  const ref::DenseTable dense = ref::fill_random(t, 3);
  t.reset_calls();
  for (Mode mode : {Mode::Sum, Mode::Mean, Mode::Weighted}) check_against_reference(t, dense, mode, 11);
  EXPECT_EQ(t.update_, 0);
  // Once per index: compare the calls with the bags' row counts.
  t.reset_calls();
  t.reset_counters();
  std::mt19937 rng(4);
  const ref::BagSet bags = ref::random_bags(rng, 300, 12, 40, false, 4);
  std::vector<float> out(static_cast<std::size_t>(300 * 24));
  lookup(t, bags.view(), Pooling::Sum, {out.data(), 24});
  std::vector<int64_t> want(40);
  int64_t slow = 0;
  for (int64_t r : bags.indices) {
    ++want[static_cast<std::size_t>(r)];
    slow += r >= 30;
  }
  EXPECT_EQ(t.data_calls(), want);
  EXPECT_EQ(t.forward_, static_cast<int64_t>(bags.indices.size()));
  // Slow rows are charged (Note [Slow-tier charging of row accesses]), fast ones are not.
  EXPECT_GT(slow, 0);
  EXPECT_EQ(t.counters().slow_bytes_read, static_cast<uint64_t>(slow) * t.row_bytes());
  EXPECT_EQ(t.counters().slow_bytes_written, 0u);
}

TEST(EmbeddingLookup, SlowTierTableGivesTheSameNumbersAndIsCharged) {
  const auto dir = std::filesystem::temp_directory_path();
  memory::PmHeap slow_heap({.capacity = 8 << 20, .dir = dir.string(), .backend = memory::PmBackend::Mmap});
  memory::DramHeap fast_heap(8 << 20);
  memory::SlowTierThrottle throttle(memory::SlowTierModel::custom(100.0, 50.0, 0.0));
  for (ElemType type : {ElemType::F32, ElemType::BF16}) {
    SimpleTable slow(1000, 64, type, {&slow_heap, &throttle});
    SimpleTable fast(1000, 64, type, {&fast_heap, nullptr});
    ASSERT_TRUE(slow.slow());
    ref::fill_random(slow, 21);
    ref::fill_random(fast, 21);
    std::mt19937 rng(8);
    const ref::BagSet bags = ref::random_bags(rng, 500, 20, 1000, false, 10);
    std::vector<float> a(500 * 64), b(500 * 64);
    const uint64_t before = throttle.counters().bytes_read;
    lookup(slow, bags.view(), Pooling::Mean, {a.data(), 64});
    lookup(fast, bags.view(), Pooling::Mean, {b.data(), 64});
    EXPECT_TRUE(bitwise_equal(a, b));
    const uint64_t bytes = bags.indices.size() * slow.row_bytes();
    EXPECT_EQ(slow.counters().slow_bytes_read, bytes);
    EXPECT_EQ(throttle.counters().bytes_read - before, bytes);
    EXPECT_EQ(fast.counters().slow_bytes_read, 0u);
  }
}

TEST(EmbeddingLookup, EnsembleWritesEachTableAtItsColumnOffset) {
  // A DLRM-like interaction input [B, d_dense + sum d_t]: the tables write next to dense columns.
  memory::DramHeap heap(64 << 20);
  const int64_t batch = 129, dense_cols = 16;
  std::vector<std::unique_ptr<SimpleTable>> owned;
  std::vector<ref::DenseTable> dense;
  const std::vector<std::pair<int64_t, int64_t>> shapes = {{7, 16}, {5000, 16}, {300, 64}, {1, 3}, {2000, 256}};
  int64_t width = dense_cols;
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    owned.push_back(std::make_unique<SimpleTable>(shapes[i].first, shapes[i].second,
                                                  i % 2 ? ElemType::BF16 : ElemType::F32, TableMemory{&heap, nullptr}));
    owned.back()->set_name("table" + std::to_string(i));
    dense.push_back(ref::fill_random(*owned.back(), 100 + static_cast<uint32_t>(i)));
    width += shapes[i].second;
  }
  std::mt19937 rng(12);
  std::vector<ref::BagSet> bag_sets;
  for (auto& [rows, d] : shapes) bag_sets.push_back(ref::random_bags(rng, batch, 30, rows, false, 3));
  std::vector<Table*> tables;
  std::vector<Bags> bags;
  std::vector<OutputSlice> outs;
  std::vector<float> got(static_cast<std::size_t>(batch * width), 9.0f), want = got;
  int64_t col = dense_cols;
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    tables.push_back(owned[i].get());
    bags.push_back(bag_sets[i].view());
    outs.push_back({got.data() + col, width});
    ref::lookup(dense[i], bags.back(), Pooling::Sum, want.data() + col, width);
    col += shapes[i].second;
  }
  lookup_ensemble(tables, bags, Pooling::Sum, outs);
  EXPECT_TRUE(bitwise_equal(got, want));  // including the untouched dense columns
}

TEST(EmbeddingLookup, EmptyBatchAndAllEmptyBags) {
  memory::DramHeap heap(1 << 16);
  SimpleTable t(4, 16, ElemType::F32, {&heap, nullptr});
  ref::fill_random(t, 1);
  ref::BagSet none;  // batch 0: offsets = {0}
  lookup(t, none.view(), Pooling::Sum, {nullptr, 16});
  ref::BagSet empties;
  empties.add({});
  empties.add({});
  std::vector<float> out(32, 5.0f);
  lookup(t, empties.view(), Pooling::Mean, {out.data(), 16});
  EXPECT_EQ(out, std::vector<float>(32, 0.0f));
}

TEST(EmbeddingLookup, SameBitsWithOneAndTwoThreadsAndAnyChunking) {
  memory::DramHeap heap(64 << 20);
  SimpleTable t(20000, 32, ElemType::F32, {&heap, nullptr});
  ref::fill_random(t, 2);
  std::mt19937 rng(3);
  const ref::BagSet bags = ref::random_bags(rng, 1000, 40, 20000, true, 50);
  auto run = [&](int threads, int64_t chunk) {
    std::vector<float> out(1000 * 32);
    const int64_t saved = emb::detail::chunk_rows().exchange(chunk);
    tbb::task_arena arena(threads);
    arena.execute([&] { lookup(t, bags.view(), Pooling::Sum, {out.data(), 32}); });
    emb::detail::chunk_rows().store(saved);
    return out;
  };
  const auto one = run(1, 2048);
  EXPECT_TRUE(bitwise_equal(one, run(2, 2048)));
  EXPECT_TRUE(bitwise_equal(one, run(2, 7)));
  EXPECT_TRUE(bitwise_equal(one, run(2, 1 << 20)));
}

TEST(EmbeddingLookup, PrefetchDistanceDoesNotChangeResults) {
  CountingTable t(100, 16, ElemType::F32, 1000);
  const ref::DenseTable dense = ref::fill_random(t, 4);
  const int saved = emb::detail::prefetch_distance().load();
  for (int pf : {0, 1, 3, 8, emb::detail::kMaxPrefetch}) {
    emb::detail::prefetch_distance().store(pf);
    check_against_reference(t, dense, Mode::Weighted, 40 + static_cast<uint32_t>(pf), 64, 40);
  }
  emb::detail::prefetch_distance().store(saved);
}

// ---- bad input ----

TEST(EmbeddingLookupErrors, MalformedOffsetsAndWeights) {
  memory::DramHeap heap(1 << 16);
  SimpleTable t(10, 4, ElemType::F32, {&heap, nullptr});
  t.set_name("emb_users");
  std::vector<float> out(16, 3.0f);
  const std::vector<int64_t> idx = {1, 2, 3};
  auto run = [&](std::vector<int64_t> off, std::vector<float> w = {}) {
    return message_of([&] { lookup(t, Bags{idx, off, w}, Pooling::Sum, {out.data(), 4}); });
  };
  EXPECT_THAT(run({}), HasSubstr("embedding emb_users: offsets must hold batch + 1 >= 1 entries, got none"));
  EXPECT_THAT(run({1, 3}), HasSubstr("embedding emb_users: offsets[0] must be 0, got 1"));
  EXPECT_THAT(run({0, 2, 1, 3}),
              HasSubstr("embedding emb_users: offsets must be non-decreasing, but offsets[2] = 1 < offsets[1] = 2"));
  EXPECT_THAT(run({0, 2}),
              HasSubstr("embedding emb_users: offsets[1] (the last offset) must equal the 3 indices, got 2"));
  EXPECT_THAT(run({0, 3}, {1.0f}),
              HasSubstr("embedding emb_users: per-sample weights must be empty or one per index (3), got 1"));
  EXPECT_EQ(out, std::vector<float>(16, 3.0f));  // nothing written
}

TEST(EmbeddingLookupErrors, OutOfRangeAndNegativeRowsNameTableBagPositionAndRow) {
  CountingTable t(10, 4, ElemType::F32, 100);
  t.set_name("emb_items");
  std::vector<float> out(16, 3.0f);
  const std::vector<int64_t> off = {0, 2, 2, 5};
  std::vector<int64_t> idx = {1, 2, 3, 4, 10};
  auto run = [&] { return message_of([&] { lookup(t, Bags{idx, off}, Pooling::Sum, {out.data(), 4}); }); };
  EXPECT_THAT(run(), HasSubstr("embedding emb_items: bag 2, position 2 (index 4): row 10 is out of range [0, 10)"));
  idx = {1, -1, 3, -5, 77};  // the first bad one is reported
  EXPECT_THAT(run(), HasSubstr("embedding emb_items: bag 0, position 1 (index 1): row -1 is out of range [0, 10)"));
  EXPECT_EQ(t.forward_, 0);  // validated before any row was touched
  EXPECT_EQ(out, std::vector<float>(16, 3.0f));
  // validate() on its own says the same.
  EXPECT_THAT(message_of([&] { validate(t, Bags{idx, off}); }), HasSubstr("row -1 is out of range"));
  // A bad row far into a large batch (the parallel scan) is still the first one.
  std::vector<int64_t> big(100000, 3), big_off(100001);
  for (std::size_t i = 0; i < big_off.size(); ++i) big_off[i] = static_cast<int64_t>(i);
  big[70001] = 12;
  big[90000] = -3;
  EXPECT_THAT(message_of([&] { validate(t, Bags{big, big_off}); }),
              HasSubstr("bag 70001, position 0 (index 70001): row 12 is out of range [0, 10)"));
}

TEST(EmbeddingLookupErrors, WeightsNeedSumAndTheOutputMustFit) {
  memory::DramHeap heap(1 << 16);
  SimpleTable t(10, 4, ElemType::F32, {&heap, nullptr});
  ref::BagSet bags;
  bags.add({1, 2}, {1.0f, 2.0f});
  bags.add({3}, {1.0f});
  std::vector<float> out(8);
  EXPECT_THAT(message_of([&] { lookup(t, bags.view(), Pooling::Mean, {out.data(), 4}); }),
              HasSubstr("embedding table: lookup with per-sample weights needs sum pooling, got mean"));
  EXPECT_THAT(message_of([&] { lookup(t, bags.view(), Pooling::Sum, {nullptr, 4}); }),
              HasSubstr("embedding table: lookup: the output slice has no data for a batch of 2"));
  EXPECT_THAT(message_of([&] { lookup(t, bags.view(), Pooling::Sum, {out.data(), 3}); }),
              HasSubstr("embedding table: lookup: the output row stride 3 is smaller than the feature size 4"));
}

TEST(EmbeddingLookupErrors, EnsembleChecksEveryTableFirst) {
  memory::DramHeap heap(1 << 16);
  SimpleTable a(10, 4, ElemType::F32, {&heap, nullptr}), b(5, 4, ElemType::F32, {&heap, nullptr});
  a.set_name("t0");
  b.set_name("t1");
  ref::BagSet good, bad;
  good.add({9});
  bad.add({5});
  std::vector<float> out(8, 1.0f);
  std::vector<Table*> tables = {&a, &b};
  std::vector<Bags> bags = {good.view(), bad.view()};
  std::vector<OutputSlice> outs = {{out.data(), 8}, {out.data() + 4, 8}};
  EXPECT_THAT(message_of([&] { lookup_ensemble(tables, bags, Pooling::Sum, outs); }),
              HasSubstr("embedding t1: bag 0, position 0 (index 0): row 5 is out of range [0, 5)"));
  EXPECT_EQ(out, std::vector<float>(8, 1.0f));  // table t0 was not looked up either
  EXPECT_THAT(message_of([&] { lookup_ensemble(tables, std::span(bags).first(1), Pooling::Sum, outs); }),
              HasSubstr("lookup_ensemble: got 2 tables, 1 bag sets and 2 outputs; expected one of each per table"));
  std::vector<Table*> with_null = {&a, nullptr};
  EXPECT_THAT(message_of([&] { lookup_ensemble(with_null, bags, Pooling::Sum, outs); }),
              HasSubstr("lookup_ensemble: table 1 is null"));
}
