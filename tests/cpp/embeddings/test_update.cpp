// Embedding backward fused with the sparse optimizers (embeddings/kernels.h update, update_ensemble)
// against the naive reference, hand-computed steps and the dense RowWiseAdagrad; determinism;
// slow-tier charging; validation messages.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <tbb/task_arena.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <random>
#include <set>
#include <vector>

#include "core/error.h"
#include "core/factories.h"
#include "core/tensor.h"
#include "embeddings/detail/kernels.h"
#include "embeddings/kernels.h"
#include "embeddings/reference.h"
#include "memory/heap.h"
#include "models/optim/adagrad.h"
#include "models/optim/rowwise_adagrad.h"
#include "tests/cpp/bitwise.h"
#include "tests/cpp/error_text.h"

using namespace strata;
using namespace strata::emb;
using ::testing::HasSubstr;
namespace ref = strata::emb::reference;

namespace {

using strata::testing_util::message_of;

using strata::testing_util::bitwise_equal;

/// The table's rows as floats (SimpleTable: straight from its memory, which keeps the large-table
/// tests fast under the sanitizers; other tables through Table::copy_to).
std::vector<float> contents(Table& t) {
  auto* s = dynamic_cast<SimpleTable*>(&t);
  if (s == nullptr) return ref::snapshot(t).w;
  const std::size_t n = static_cast<std::size_t>(t.nvectors() * t.featuresize());
  std::vector<float> w(n);
  if (t.elem_type() == ElemType::F32) {
    std::memcpy(w.data(), s->data(), n * sizeof(float));
  } else {
    const auto* b = reinterpret_cast<const uint16_t*>(s->data());
    for (std::size_t i = 0; i < n; ++i) w[i] = static_cast<float>(BFloat16::from_bits(b[i]));
  }
  return w;
}

/// A table that is not SimpleTable (virtual rowpointer), counting Update calls per row.
class CountingTable final : public Table {
 public:
  CountingTable(int64_t rows, int64_t d, ElemType type, int64_t slow_from)
      : Table(rows, d, type, {nullptr, nullptr}),
        data_(static_cast<std::size_t>(rows) * row_bytes()),
        slow_from_(slow_from),
        calls_(static_cast<std::size_t>(rows)) {}
  std::string_view kind() const override { return "counting"; }
  std::byte* rowpointer(int64_t row, AccessContext ctx) override {
    if (ctx == AccessContext::Forward) forward_.fetch_add(1);
    if (ctx == AccessContext::Update) calls_[static_cast<std::size_t>(row)].fetch_add(1);
    return data_.data() + static_cast<std::size_t>(row) * row_bytes();
  }
  bool in_slow(const std::byte* p) const override {
    return (p - data_.data()) / static_cast<std::ptrdiff_t>(row_bytes()) >= slow_from_;
  }
  void reset_calls() {
    for (auto& c : calls_) c = 0;
    forward_ = 0;
  }
  std::vector<int64_t> update_calls() const {
    std::vector<int64_t> v;
    for (const auto& c : calls_) v.push_back(c.load());
    return v;
  }
  std::atomic<int64_t> forward_{0};

 private:
  std::vector<std::byte> data_;
  int64_t slow_from_;
  std::vector<std::atomic<int64_t>> calls_;
};

enum class Mode { Sum, Mean, Weighted };
Pooling pooling_of(Mode m) { return m == Mode::Mean ? Pooling::Mean : Pooling::Sum; }

const SparseOptimizer kSgd{SparseOptimizer::Kind::SGD, 0.05f};
const SparseOptimizer kAdagrad{SparseOptimizer::Kind::RowWiseAdagrad, 0.1f, 1e-8f, 0.01f};
const SparseOptimizer kElementwise{SparseOptimizer::Kind::Adagrad, 0.1f, 1e-8f, 0.01f};

/// `steps` updates of `t` and of the reference with fresh random bags and gradients each step;
/// requires exact equality of the rows and accumulators after every step.
void check_steps(Table& t, ref::DenseTable& dense, Mode mode, const SparseOptimizer& opt, uint32_t seed, int steps = 3,
                 int64_t batch = 41, int64_t max_bag = 9, int64_t hot = 4) {
  std::mt19937 rng(seed);
  SparseOptimizerState state(t, opt);
  UpdateWorkspace ws;
  const int64_t d = t.featuresize(), stride = d + 5;
  for (int s = 0; s < steps; ++s) {
    const ref::BagSet bags = ref::random_bags(rng, batch, max_bag, t.nvectors(), mode == Mode::Weighted, hot);
    const auto grad = ref::random_floats(rng, static_cast<std::size_t>(batch * stride));
    update(t, bags.view(), pooling_of(mode), {const_cast<float*>(grad.data()), stride}, opt, state, ws);
    ref::update(dense, bags.view(), pooling_of(mode), grad.data(), stride, opt);
    ASSERT_TRUE(bitwise_equal(contents(t), dense.w))
        << "step " << s << " d=" << d << " type=" << elem_name(t.elem_type()) << " mode=" << static_cast<int>(mode)
        << " opt=" << optimizer_name(opt.kind) << " rows=" << t.nvectors();
    if (opt.kind != SparseOptimizer::Kind::SGD) {
      const auto acc = state.accumulators();
      ASSERT_TRUE(bitwise_equal(std::vector<float>(acc.begin(), acc.end()), dense.accum)) << "step " << s;
    }
    std::set<int64_t> distinct(bags.indices.begin(), bags.indices.end());
    ASSERT_EQ(ws.last_unique_rows(), static_cast<int64_t>(distinct.size()));
  }
  EXPECT_EQ(state.steps(), steps);
}

}  // namespace

TEST(EmbeddingUpdate, HandComputedSgdWithDuplicatesInAndAcrossBags) {
  memory::DramHeap heap(1 << 16);
  SimpleTable t(4, 2, ElemType::F32, {&heap, nullptr});
  const std::vector<float> w = {1, 1, 2, 2, 3, 3, 4, 4};
  t.copy_from(w.data());
  ref::BagSet bags;
  bags.add({1, 1, 3});  // row 1 twice in a bag
  bags.add({3});        // row 3 again in another bag
  bags.add({});
  const std::vector<float> grad = {1, 2, 10, 20, 100, 200};  // rows of dL/d(pooled bag)
  const SparseOptimizer sgd{SparseOptimizer::Kind::SGD, 0.5f};
  SparseOptimizerState state(t, sgd);
  UpdateWorkspace ws;
  update(t, bags.view(), Pooling::Sum, {const_cast<float*>(grad.data()), 2}, sgd, state, ws);
  // row 1: g = 2 * (1, 2) -> 2 - 0.5 * (2, 4); row 3: g = (1, 2) + (10, 20) -> 4 - 0.5 * (11, 22).
  EXPECT_EQ(contents(t), (std::vector<float>{1, 1, 1, 0, 3, 3, -1.5f, -7}));
  EXPECT_EQ(ws.last_unique_rows(), 2);
  EXPECT_TRUE(state.accumulators().empty());
  // Mean pooling divides by the bag size: bag 0 has 3 rows.
  t.copy_from(w.data());
  update(t, bags.view(), Pooling::Mean, {const_cast<float*>(grad.data()), 2}, sgd, state, ws);
  const float third = 1.0f / 3.0f;
  const float r1a = std::fma(third, 1.0f, std::fma(third, 1.0f, 0.0f)),
              r1b = std::fma(third, 2.0f, std::fma(third, 2.0f, 0.0f));
  const float r3a = std::fma(1.0f, 10.0f, third * 1.0f), r3b = std::fma(1.0f, 20.0f, third * 2.0f);
  EXPECT_EQ(contents(t), (std::vector<float>{1, 1, std::fma(-0.5f, r1a, 2.0f), std::fma(-0.5f, r1b, 2.0f), 3, 3,
                                             std::fma(-0.5f, r3a, 4.0f), std::fma(-0.5f, r3b, 4.0f)}));
}

TEST(EmbeddingUpdate, HandComputedRowWiseAdagradAndWeights) {
  memory::DramHeap heap(1 << 16);
  SimpleTable t(3, 2, ElemType::F32, {&heap, nullptr});
  const std::vector<float> w = {1, 1, 2, 2, 3, 3};
  t.copy_from(w.data());
  ref::BagSet bags;
  bags.add({2, 0}, {2.0f, 1.0f});
  bags.add({2}, {-1.0f});
  const std::vector<float> grad = {3, 4, 1, 0};
  const SparseOptimizer opt{SparseOptimizer::Kind::RowWiseAdagrad, 0.5f, 0.0f, 1.0f};
  SparseOptimizerState state(t, opt);
  EXPECT_EQ(std::vector<float>(state.accumulators().begin(), state.accumulators().end()),
            (std::vector<float>{1, 1, 1}));
  UpdateWorkspace ws;
  update(t, bags.view(), Pooling::Sum, {const_cast<float*>(grad.data()), 2}, opt, state, ws);
  // row 0: g = (3, 4), mean g^2 = 12.5, acc = 13.5; row 2: g = 2*(3,4) - (1,0) = (5, 8), mean 44.5, acc 45.5.
  const std::vector<float> acc(state.accumulators().begin(), state.accumulators().end());
  EXPECT_EQ(acc, (std::vector<float>{13.5f, 1.0f, 45.5f}));
  const float m0 = 0.5f / std::sqrt(13.5f), m2 = 0.5f / std::sqrt(45.5f);
  EXPECT_EQ(contents(t), (std::vector<float>{std::fma(-m0, 3.0f, 1.0f), std::fma(-m0, 4.0f, 1.0f), 2, 2,
                                             std::fma(-m2, 5.0f, 3.0f), std::fma(-m2, 8.0f, 3.0f)}));
}

TEST(EmbeddingUpdate, MatchesReferenceForEveryFeatureSizeTypePoolingAndOptimizer) {
  memory::DramHeap heap(64 << 20);
  uint32_t seed = 1;
  for (int64_t d : {1, 3, 16, 24, 32, 64, 100, 128, 256, 1100}) {
    for (ElemType type : {ElemType::F32, ElemType::BF16}) {
      for (const SparseOptimizer& opt : {kSgd, kAdagrad, kElementwise}) {
        for (Mode mode : {Mode::Sum, Mode::Mean, Mode::Weighted}) {
          SimpleTable t(60, d, type, {&heap, nullptr});
          ref::DenseTable dense = ref::fill_random(t, seed);
          check_steps(t, dense, mode, opt, seed++);
        }
      }
    }
  }
}

TEST(EmbeddingUpdate, RadixPassesForEveryTableSize) {
  // 1 row (no pass), up to 2^11 rows (one pass: the histogram over rows), 2^11+1 .. 2^22 rows (two
  // passes), above 2^22 rows (three passes). Big batches with many duplicates.
  memory::DramHeap heap(64 << 20);
  uint32_t seed = 70;
  for (int64_t rows :
       {int64_t{1}, int64_t{2}, int64_t{2048}, int64_t{2049}, int64_t{70000}, int64_t{4194304}, int64_t{4194305}}) {
    SimpleTable t(rows, 1, ElemType::F32, {&heap, nullptr});
    ref::DenseTable dense = ref::fill_random(t, seed);
    check_steps(t, dense, Mode::Weighted, kAdagrad, seed++, 2, 3000, 30, 100);
  }
}

TEST(EmbeddingUpdate, OtherTableTypesAreUpdatedOncePerDistinctRowAndCharged) {
  CountingTable t(50, 24, ElemType::F32, /*slow_from=*/40);
  ref::DenseTable dense = ref::fill_random(t, 9);
  check_steps(t, dense, Mode::Sum, kSgd, 10);
  t.reset_calls();
  t.reset_counters();
  std::mt19937 rng(5);
  const ref::BagSet bags = ref::random_bags(rng, 200, 10, 50, false, 6);
  const auto grad = ref::random_floats(rng, 200 * 24);
  SparseOptimizerState state(t, kSgd);
  UpdateWorkspace ws;
  update(t, bags.view(), Pooling::Sum, {const_cast<float*>(grad.data()), 24}, kSgd, state, ws);
  std::vector<int64_t> want(50);
  int64_t slow = 0;
  for (int64_t r : std::set<int64_t>(bags.indices.begin(), bags.indices.end())) {
    want[static_cast<std::size_t>(r)] = 1;
    slow += r >= 40;
  }
  EXPECT_EQ(t.update_calls(), want);
  EXPECT_EQ(t.forward_, 0);
  EXPECT_GT(slow, 0);
  EXPECT_EQ(t.counters().slow_bytes_read, static_cast<uint64_t>(slow) * t.row_bytes());
  EXPECT_EQ(t.counters().slow_bytes_written, static_cast<uint64_t>(slow) * t.row_bytes());
}

TEST(EmbeddingUpdate, SlowTierTableGivesTheSameNumbersAndIsCharged) {
  const auto dir = std::filesystem::temp_directory_path();
  memory::PmHeap slow_heap({.capacity = 8 << 20, .dir = dir.string(), .backend = memory::PmBackend::Mmap});
  memory::DramHeap fast_heap(8 << 20);
  memory::SlowTierThrottle throttle(memory::SlowTierModel::custom(100.0, 50.0, 0.0));
  SimpleTable slow(3000, 32, ElemType::F32, {&slow_heap, &throttle});
  SimpleTable fast(3000, 32, ElemType::F32, {&fast_heap, nullptr});
  ref::fill_random(slow, 6);
  ref::fill_random(fast, 6);
  std::mt19937 rng(1);
  const ref::BagSet bags = ref::random_bags(rng, 400, 20, 3000, false, 30);
  const auto grad = ref::random_floats(rng, 400 * 32);
  SparseOptimizerState s1(slow, kAdagrad), s2(fast, kAdagrad);
  UpdateWorkspace w1, w2;
  const uint64_t throttled_before = throttle.counters().bytes_written;  // fill_random's writes
  update(slow, bags.view(), Pooling::Sum, {const_cast<float*>(grad.data()), 32}, kAdagrad, s1, w1);
  update(fast, bags.view(), Pooling::Sum, {const_cast<float*>(grad.data()), 32}, kAdagrad, s2, w2);
  EXPECT_TRUE(bitwise_equal(contents(slow), contents(fast)));
  const uint64_t bytes = static_cast<uint64_t>(w1.last_unique_rows()) * slow.row_bytes();
  EXPECT_GT(bytes, 0u);
  EXPECT_EQ(slow.counters().slow_bytes_written, bytes);
  EXPECT_EQ(slow.counters().slow_bytes_read, bytes);
  EXPECT_EQ(throttle.counters().bytes_written - throttled_before, bytes);
  EXPECT_EQ(fast.counters().slow_bytes_written, 0u);
}

namespace {

/// Four fused sparse steps of `opt` against `dense_opt` (a models/optim optimizer over `p`, which
/// starts as the table's values) on the materialized gradient: equal up to float rounding (the two
/// sum in different orders); rows that do not occur have a zero gradient, which leaves them and
/// their accumulators unchanged there too.
void expect_dense_equivalent(SimpleTable& t, Tensor& p, optim::Optimizer& dense_opt, const SparseOptimizer& opt,
                             uint32_t seed) {
  const int64_t rows = t.nvectors(), d = t.featuresize();
  SparseOptimizerState state(t, opt);
  UpdateWorkspace ws;
  std::mt19937 rng(seed);
  for (int step = 0; step < 4; ++step) {
    const ref::BagSet bags = ref::random_bags(rng, 20, 6, rows, true, 3);
    const auto grad = ref::random_floats(rng, static_cast<std::size_t>(20 * d));
    update(t, bags.view(), Pooling::Sum, {const_cast<float*>(grad.data()), d}, opt, state, ws);
    std::vector<double> g(static_cast<std::size_t>(rows * d), 0.0);
    for (int64_t b = 0; b < 20; ++b)
      for (int64_t k = bags.offsets[b]; k < bags.offsets[b + 1]; ++k)
        for (int64_t j = 0; j < d; ++j)
          g[bags.indices[k] * d + j] += static_cast<double>(bags.weights[k]) * grad[b * d + j];
    p.set_grad(tensor(std::vector<float>(g.begin(), g.end()), Dims{rows, d}));
    dense_opt.step();
  }
  const auto got = contents(t);
  const float* want = p.data<float>();
  for (int64_t i = 0; i < rows * d; ++i) ASSERT_NEAR(got[i], want[i], 2e-6f * (1.0f + std::fabs(want[i]))) << i;
  // Row-wise: one accumulator per row; element-wise: one per element, as the dense optimizer's.
  const Tensor& sum = dense_opt.state(0).buffers.at("sum");
  const auto acc = state.accumulators();
  ASSERT_EQ(static_cast<int64_t>(acc.size()), sum.numel());
  for (std::size_t i = 0; i < acc.size(); ++i)
    ASSERT_NEAR(acc[i], sum.data<float>()[i], 1e-5f * (1.0f + sum.data<float>()[i])) << i;
}

}  // namespace

TEST(EmbeddingUpdate, MatchesTheDenseRowWiseAdagradOptimizer) {
  memory::DramHeap heap(1 << 20);
  SimpleTable t(30, 16, ElemType::F32, {&heap, nullptr});
  Tensor p = tensor(ref::fill_random(t, 17).w, Dims{30, 16});
  optim::RowWiseAdagrad dense_opt({p}, optim::RowWiseAdagradOptions{.lr = 0.1, .eps = 1e-8});
  expect_dense_equivalent(t, p, dense_opt, {SparseOptimizer::Kind::RowWiseAdagrad, 0.1f, 1e-8f, 0.0f}, 2);
}

TEST(EmbeddingUpdate, ElementwiseAdagradMatchesTheDenseAdagradOptimizer) {
  // torch.optim.Adagrad's rule (models/optim Adagrad): per-element state.
  memory::DramHeap heap(1 << 20);
  SimpleTable t(30, 16, ElemType::F32, {&heap, nullptr});
  Tensor p = tensor(ref::fill_random(t, 19).w, Dims{30, 16});
  optim::Adagrad dense_opt({p}, optim::AdagradOptions{.lr = 0.1, .eps = 1e-10});
  expect_dense_equivalent(t, p, dense_opt, {SparseOptimizer::Kind::Adagrad, 0.1f, 1e-10f, 0.0f}, 4);
}

TEST(EmbeddingUpdate, LearnedPoolingWeightsMatchTheReferenceBitwise) {
  // The per-row pooling weights v step with the rows: dL/dv_r = Σ dot(grad_out[bag], w_r) before the
  // row's own step; SGD with SGD, element-wise Adagrad with both Adagrads. Ensemble and single update.
  memory::DramHeap heap(8 << 20);
  uint32_t seed = 40;
  for (int64_t d : {3, 16}) {
    for (const SparseOptimizer& opt : {kSgd, kAdagrad, kElementwise}) {
      SimpleTable t(50, d, ElemType::F32, {&heap, nullptr});
      t.set_name("t");
      ref::DenseTable dense = ref::fill_random(t, seed);
      std::mt19937 rng(seed++);
      LearnedPoolingWeights lw, lw_ref;
      lw.v = ref::random_floats(rng, 50);
      lw.sum.assign(50, 0.0f);
      lw_ref = lw;
      const std::vector<float> v0 = lw.v;
      std::set<int64_t> seen;
      SparseOptimizerState state(t, opt);
      UpdateWorkspace ws;
      for (int s = 0; s < 3; ++s) {
        ref::BagSet bags = ref::random_bags(rng, 30, 6, 50, false, 4);
        bags.weights.clear();
        for (int64_t i : bags.indices) bags.weights.push_back(lw.v[static_cast<std::size_t>(i)]);
        seen.insert(bags.indices.begin(), bags.indices.end());
        const auto grad = ref::random_floats(rng, static_cast<std::size_t>(30 * d));
        const Bags view = bags.view();
        if (s % 2 == 0) {
          update(t, view, Pooling::Sum, {const_cast<float*>(grad.data()), d}, opt, state, ws, &lw);
        } else {
          Table* tables[] = {&t};
          const OutputSlice grads[] = {{const_cast<float*>(grad.data()), d}};
          SparseOptimizerState* states[] = {&state};
          UpdateWorkspace* wss[] = {&ws};
          LearnedPoolingWeights* learned[] = {&lw};
          update_ensemble(tables, std::span(&view, 1), Pooling::Sum, grads, opt, states, wss, Indices::Unchecked,
                          learned);
        }
        ref::update(dense, view, Pooling::Sum, grad.data(), d, opt, &lw_ref);
        ASSERT_TRUE(bitwise_equal(contents(t), dense.w)) << "step " << s << " opt " << optimizer_name(opt.kind);
        ASSERT_TRUE(bitwise_equal(lw.v, lw_ref.v)) << "step " << s << " opt " << optimizer_name(opt.kind);
        ASSERT_TRUE(bitwise_equal(lw.sum, lw_ref.sum)) << "step " << s;
      }
      // The weights of rows that occurred moved; the others kept theirs.
      for (int64_t r = 0; r < 50; ++r) {
        const auto i = static_cast<std::size_t>(r);
        if (seen.count(r) == 0) EXPECT_EQ(lw.v[i], v0[i]) << r;
      }
      EXPECT_NE(lw.v, v0);
    }
  }
  // Bad learned weights are refused before anything changes.
  SimpleTable t(5, 2, ElemType::F32, {&heap, nullptr});
  t.set_name("t5");
  LearnedPoolingWeights lw;
  lw.v.assign(4, 1.0f);
  SparseOptimizerState state(t, kSgd);
  UpdateWorkspace ws;
  ref::BagSet bags;
  bags.add({1, 2});
  bags.weights = {1.0f, 1.0f};
  const std::vector<float> grad(2, 1.0f);
  EXPECT_THAT(message_of([&] {
                update(t, bags.view(), Pooling::Sum, {const_cast<float*>(grad.data()), 2}, kSgd, state, ws, &lw);
              }),
              HasSubstr("embedding t5: the learned pooling weights hold 4 weights and 0 accumulators for 5 rows"));
}

TEST(EmbeddingUpdate, SameBitsWithOneAndTwoThreadsAndAnyChunking) {
  memory::DramHeap heap(64 << 20);
  std::mt19937 rng(3);
  const ref::BagSet bags = ref::random_bags(rng, 1500, 60, 100000, true, 200);
  const auto grad = ref::random_floats(rng, 1500 * 16);
  auto run = [&](int threads, int64_t chunk) {
    SimpleTable t(100000, 16, ElemType::F32, {&heap, nullptr});
    ref::fill_random(t, 4);
    SparseOptimizerState state(t, kAdagrad);
    UpdateWorkspace ws;
    const int64_t saved = emb::detail::chunk_rows().exchange(chunk);
    tbb::task_arena arena(threads);
    arena.execute([&] {
      for (int s = 0; s < 2; ++s)
        update(t, bags.view(), Pooling::Sum, {const_cast<float*>(grad.data()), 16}, kAdagrad, state, ws);
    });
    emb::detail::chunk_rows().store(saved);
    auto w = contents(t);
    w.insert(w.end(), state.accumulators().begin(), state.accumulators().end());
    return w;
  };
  const auto one = run(1, 2048);
  EXPECT_TRUE(bitwise_equal(one, run(2, 2048)));
  EXPECT_TRUE(bitwise_equal(one, run(2, 5)));
  EXPECT_TRUE(bitwise_equal(one, run(2, 1 << 20)));
}

TEST(EmbeddingUpdate, EnsembleEqualsSeparateUpdates) {
  memory::DramHeap heap(64 << 20);
  const int64_t batch = 300;
  const std::vector<std::pair<int64_t, int64_t>> shapes = {{5, 16}, {100000, 16}, {3000, 64}, {1, 3}, {2049, 256}};
  std::vector<std::unique_ptr<SimpleTable>> tabs;
  std::vector<ref::DenseTable> dense;
  std::vector<ref::BagSet> bag_sets;
  std::mt19937 rng(8);
  int64_t width = 0;
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    tabs.push_back(std::make_unique<SimpleTable>(shapes[i].first, shapes[i].second,
                                                 i % 2 ? ElemType::BF16 : ElemType::F32, TableMemory{&heap, nullptr}));
    dense.push_back(ref::fill_random(*tabs.back(), 50 + static_cast<uint32_t>(i)));
    bag_sets.push_back(ref::random_bags(rng, batch, 25, shapes[i].first, false, 5));
    width += shapes[i].second;
  }
  // One gradient buffer shaped like the interaction input's gradient: table i at its column offset.
  const auto grad = ref::random_floats(rng, static_cast<std::size_t>(batch * width));
  std::vector<Table*> tables;
  std::vector<Bags> bags;
  std::vector<OutputSlice> grads;
  std::vector<std::unique_ptr<SparseOptimizerState>> states;
  std::vector<std::unique_ptr<UpdateWorkspace>> wss;
  std::vector<SparseOptimizerState*> state_ptrs;
  std::vector<UpdateWorkspace*> ws_ptrs;
  int64_t col = 0;
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    tables.push_back(tabs[i].get());
    bags.push_back(bag_sets[i].view());
    grads.push_back({const_cast<float*>(grad.data()) + col, width});
    states.push_back(std::make_unique<SparseOptimizerState>(*tabs[i], kAdagrad));
    wss.push_back(std::make_unique<UpdateWorkspace>());
    state_ptrs.push_back(states.back().get());
    ws_ptrs.push_back(wss.back().get());
    col += shapes[i].second;
  }
  for (int step = 0; step < 2; ++step) {
    update_ensemble(tables, bags, Pooling::Mean, grads, kAdagrad, state_ptrs, ws_ptrs);
    col = 0;
    for (std::size_t i = 0; i < shapes.size(); ++i) {
      ref::update(dense[i], bags[i], Pooling::Mean, grad.data() + col, width, kAdagrad);
      col += shapes[i].second;
    }
  }
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    EXPECT_TRUE(bitwise_equal(contents(*tabs[i]), dense[i].w)) << "table " << i;
    EXPECT_TRUE(bitwise_equal(std::vector<float>(states[i]->accumulators().begin(), states[i]->accumulators().end()),
                              dense[i].accum))
        << "table " << i;
    EXPECT_EQ(states[i]->steps(), 2);
  }
}

TEST(EmbeddingUpdate, EmptyBatchesAndWorkspaceReuse) {
  memory::DramHeap heap(1 << 20);
  SimpleTable t(100, 16, ElemType::F32, {&heap, nullptr});
  const auto before = ref::fill_random(t, 1).w;
  SparseOptimizerState state(t, kSgd);
  UpdateWorkspace ws;
  ref::BagSet none;
  update(t, none.view(), Pooling::Sum, {nullptr, 16}, kSgd, state, ws);
  ref::BagSet empties;
  empties.add({});
  empties.add({});
  std::vector<float> grad(32, 1.0f);
  update(t, empties.view(), Pooling::Mean, {grad.data(), 16}, kSgd, state, ws);
  EXPECT_EQ(contents(t), before);
  EXPECT_EQ(ws.last_unique_rows(), 0);
  EXPECT_EQ(state.steps(), 2);
  // The scratch grows to the largest batch and is then reused without growing.
  std::mt19937 rng(2);
  const ref::BagSet big = ref::random_bags(rng, 64, 30, 100, false);
  std::vector<float> g(64 * 16, 0.5f);
  update(t, big.view(), Pooling::Sum, {g.data(), 16}, kSgd, state, ws);
  const std::size_t cap = ws.capacity_bytes();
  EXPECT_GT(cap, 0u);
  for (int i = 0; i < 3; ++i) {
    const ref::BagSet smaller = ref::random_bags(rng, 64, 20, 100, false);
    update(t, smaller.view(), Pooling::Sum, {g.data(), 16}, kSgd, state, ws);
    EXPECT_EQ(ws.capacity_bytes(), cap);
  }
}

// ---- bad input ----

TEST(EmbeddingUpdateErrors, BadIndicesLeaveTheTableUnchanged) {
  CountingTable t(10, 4, ElemType::F32, 100);
  t.set_name("emb_ads");
  const auto before = ref::fill_random(t, 3).w;
  t.reset_calls();
  SparseOptimizerState state(t, kAdagrad);
  UpdateWorkspace ws;
  const std::vector<int64_t> idx = {1, 2, -4}, off = {0, 2, 3};
  std::vector<float> grad(8, 1.0f);
  EXPECT_THAT(message_of([&] { update(t, Bags{idx, off}, Pooling::Sum, {grad.data(), 4}, kAdagrad, state, ws); }),
              HasSubstr("embedding emb_ads: bag 1, position 0 (index 2): row -4 is out of range [0, 10)"));
  EXPECT_EQ(t.update_calls(), std::vector<int64_t>(10, 0));
  EXPECT_EQ(contents(t), before);
  EXPECT_EQ(state.steps(), 0);
  EXPECT_EQ(state.accumulators()[1], kAdagrad.initial_accumulator);
}

TEST(EmbeddingUpdateErrors, OptimizerAndStateMismatches) {
  memory::DramHeap heap(1 << 16);
  SimpleTable t(10, 4, ElemType::F32, {&heap, nullptr}), other(12, 4, ElemType::F32, {&heap, nullptr});
  t.set_name("emb_geo");
  ref::BagSet bags;
  bags.add({1});
  std::vector<float> grad(4, 1.0f);
  UpdateWorkspace ws;
  SparseOptimizerState sgd_state(t, kSgd), other_state(other, kAdagrad);
  auto run = [&](const SparseOptimizer& opt, SparseOptimizerState& st) {
    return message_of([&] { update(t, bags.view(), Pooling::Sum, {grad.data(), 4}, opt, st, ws); });
  };
  EXPECT_THAT(
      run(kAdagrad, sgd_state),
      HasSubstr("embedding emb_geo: the optimizer state was built for sgd, but the update uses rowwise_adagrad"));
  EXPECT_THAT(run(kAdagrad, other_state),
              HasSubstr("embedding emb_geo: the optimizer state holds 12 rows, but the table has 10"));
  SparseOptimizer bad = kSgd;
  bad.lr = -1.0f;
  EXPECT_THAT(run(bad, sgd_state), HasSubstr("embedding emb_geo: sgd learning rate must be finite and >= 0, got -1"));
  bad.lr = std::nanf("");
  EXPECT_THAT(run(bad, sgd_state), HasSubstr("sgd learning rate must be finite and >= 0, got nan"));
  SparseOptimizer bad_eps = kAdagrad;
  bad_eps.eps = -1e-3f;
  EXPECT_THAT(message_of([&] { SparseOptimizerState s(t, bad_eps); }),
              HasSubstr("embedding emb_geo: rowwise_adagrad eps must be finite and >= 0, got -0.001"));
  SparseOptimizer bad_init = kAdagrad;
  bad_init.initial_accumulator = -1.0f;
  EXPECT_THAT(message_of([&] { SparseOptimizerState s(t, bad_init); }),
              HasSubstr("rowwise_adagrad initial_accumulator must be finite and >= 0, got -1"));
  // Gradient slice checks.
  EXPECT_THAT(message_of([&] { update(t, bags.view(), Pooling::Sum, {nullptr, 4}, kSgd, sgd_state, ws); }),
              HasSubstr("embedding emb_geo: update: the gradient slice has no data for a batch of 1"));
  ref::BagSet two;
  two.add({1}, {1.0f});
  two.add({2}, {1.0f});
  std::vector<float> g2(8);
  EXPECT_THAT(message_of([&] { update(t, two.view(), Pooling::Sum, {g2.data(), 2}, kSgd, sgd_state, ws); }),
              HasSubstr("embedding emb_geo: update: the gradient row stride 2 is smaller than the feature size 4"));
  EXPECT_THAT(message_of([&] { update(t, two.view(), Pooling::Mean, {g2.data(), 4}, kSgd, sgd_state, ws); }),
              HasSubstr("embedding emb_geo: update with per-sample weights needs sum pooling, got mean"));
}

TEST(EmbeddingUpdateErrors, TablesOfMoreThan2To32RowsAreRefused) {
  // A table claiming 2^32 + 1 rows without storage: update must refuse it before touching a row.
  class Huge final : public Table {
   public:
    Huge() : Table((int64_t{1} << 32) + 1, 4, ElemType::F32, {nullptr, nullptr}) {}
    std::string_view kind() const override { return "huge"; }
    std::byte* rowpointer(int64_t, AccessContext) override {
      ADD_FAILURE() << "rowpointer called";
      return nullptr;
    }
    bool in_slow(const std::byte*) const override { return false; }
  } t;
  t.set_name("emb_huge");
  ref::BagSet bags;
  bags.add({(int64_t{1} << 32) - 5});
  std::vector<float> grad(4, 1.0f);
  SparseOptimizerState state(t, kSgd);
  UpdateWorkspace ws;
  EXPECT_THAT(message_of([&] { update(t, bags.view(), Pooling::Sum, {grad.data(), 4}, kSgd, state, ws); }),
              HasSubstr("embedding emb_huge: update supports tables of at most 2^32 rows, got 4294967297"));
}

TEST(EmbeddingUpdateErrors, EnsembleChecksEveryEntryFirst) {
  memory::DramHeap heap(1 << 16);
  SimpleTable a(10, 4, ElemType::F32, {&heap, nullptr}), b(5, 4, ElemType::F32, {&heap, nullptr});
  a.set_name("t0");
  b.set_name("t1");
  const auto a0 = ref::fill_random(a, 1).w;
  ref::BagSet good, bad, good_b;
  good.add({9});
  bad.add({7});
  good_b.add({4});
  std::vector<float> grad(8, 1.0f);
  SparseOptimizerState sa(a, kSgd), sb(b, kSgd);
  UpdateWorkspace wa, wb;
  std::vector<Table*> tables = {&a, &b};
  std::vector<Bags> bags = {good.view(), bad.view()};
  std::vector<OutputSlice> grads = {{grad.data(), 8}, {grad.data() + 4, 8}};
  std::vector<SparseOptimizerState*> states = {&sa, &sb};
  std::vector<UpdateWorkspace*> wss = {&wa, &wb};
  auto run = [&] { return message_of([&] { update_ensemble(tables, bags, Pooling::Sum, grads, kSgd, states, wss); }); };
  EXPECT_THAT(run(), HasSubstr("embedding t1: bag 0, position 0 (index 0): row 7 is out of range [0, 5)"));
  EXPECT_EQ(contents(a), a0);  // t0 was not updated either
  bags[1] = good.view();
  tables[1] = &a;
  states[1] = &sa;
  EXPECT_THAT(run(), HasSubstr("update_ensemble: table t0 appears twice (entries 0 and 1)"));
  tables[1] = &b;
  bags[1] = good_b.view();
  EXPECT_THAT(run(), HasSubstr("embedding t1: the optimizer state holds 10 rows, but the table has 5"));
  states[1] = &sb;
  wss[1] = &wa;
  EXPECT_THAT(run(), HasSubstr("update_ensemble: entries 0 and 1 share one workspace"));
  wss[1] = &wb;
  EXPECT_EQ(run(), "(no error)");
  // Two tables of the same size sharing one optimizer state.
  SimpleTable c(10, 4, ElemType::F32, {&heap, nullptr});
  c.set_name("t2");
  tables[1] = &c;
  bags[1] = good.view();
  states[1] = &sa;
  EXPECT_THAT(run(), HasSubstr("update_ensemble: entries 0 and 1 share one optimizer state"));
  wss[1] = nullptr;
  EXPECT_THAT(run(), HasSubstr("update_ensemble: entry 1 has a null table, optimizer state or workspace"));
  EXPECT_THAT(
      message_of([&] { update_ensemble(tables, std::span(bags).first(1), Pooling::Sum, grads, kSgd, states, wss); }),
      HasSubstr("update_ensemble: got 2 tables, 1 bag sets, 2 gradients, 2 optimizer states and 2 workspaces"));
}
