// What the harness cannot express for ops/embedding.h: determinism across thread counts, edge
// cases (no bags, all-empty bags, unused trailing indices), the DLRM output layout.

#include <gtest/gtest.h>

#include "autograd/engine.h"
#include "core/factories.h"
#include "core/threading.h"
#include "ops/embedding.h"
#include "tests/cpp/ops/harness/op_harness.h"

namespace strata {
namespace {

using testing::from_indices;
using testing::values_of;

TEST(Embedding, BagWeightGradientIsDeterministicAcrossThreadCounts) {
  const int saved = get_num_threads();
  Generator g(21);
  Tensor w = testing::randn32({300, 16}, g);
  Tensor idx = testing::randint64(0, 30, {5000}, g);  // many duplicates per row
  std::vector<int64_t> off;
  for (int64_t b = 0; b < 250; ++b) off.push_back(b * 20);
  Tensor offsets = from_indices(off, {250});
  Tensor psw = testing::randn32({5000}, g);
  Tensor go = testing::randn32({250, 16}, g);
  auto run = [&](int threads, EmbeddingBagMode mode, bool with_psw) {
    set_num_threads(threads);
    Tensor ww = w.clone();
    ww.set_requires_grad(true);
    Tensor pp = psw.clone();
    pp.set_requires_grad(true);
    Tensor out = embedding_bag(ww, idx, offsets, mode, with_psw ? pp : Tensor());
    out.backward(go);
    auto r = values_of(ww.grad());
    if (with_psw) {
      const auto p = values_of(pp.grad());
      r.insert(r.end(), p.begin(), p.end());
    }
    return r;
  };
  for (auto [mode, with_psw] : {std::pair{EmbeddingBagMode::Sum, false}, std::pair{EmbeddingBagMode::Mean, false},
                                std::pair{EmbeddingBagMode::Sum, true}}) {
    const auto a = run(1, mode, with_psw);
    const auto b = run(std::max(2, saved), mode, with_psw);
    ASSERT_EQ(a.size(), b.size());
    for (std::size_t i = 0; i < a.size(); ++i) ASSERT_EQ(a[i], b[i]) << i;
  }
  set_num_threads(saved);
}

TEST(Embedding, NoBagsAndAllEmptyBags) {
  Tensor w = ones({4, 3}, {DType::f64, nullptr});
  w.set_requires_grad(true);
  Tensor none = embedding_bag(w, from_indices({1, 2}, {2}), zeros({0}, {DType::i64, nullptr}));
  EXPECT_EQ(none.sizes(), Dims({0, 3}));
  Tensor empty_bags =
      embedding_bag(w, zeros({0}, {DType::i64, nullptr}), from_indices({0, 0, 0}, {3}), EmbeddingBagMode::Mean);
  EXPECT_EQ(empty_bags.sizes(), Dims({3, 3}));
  for (double v : values_of(empty_bags)) EXPECT_EQ(v, 0.0);
  empty_bags.backward(ones({3, 3}, {DType::f64, nullptr}));
  for (double v : values_of(w.grad())) EXPECT_EQ(v, 0.0);
}

TEST(Embedding, IncludeLastOffsetIgnoresTrailingIndices) {
  Generator g(4);
  Tensor w = testing::uniform64({5, 2}, g);
  w.set_requires_grad(true);
  Tensor psw = testing::uniform64({4}, g);
  psw.set_requires_grad(true);
  // One bag [0, 2); indices 2 and 3 lie past the last offset and are not used.
  Tensor out =
      embedding_bag(w, from_indices({1, 3, 4, 4}, {4}), from_indices({0, 2}, {2}), EmbeddingBagMode::Sum, psw, true);
  ASSERT_EQ(out.sizes(), Dims({1, 2}));
  out.backward(ones({1, 2}, {DType::f64, nullptr}));
  const auto gw = values_of(w.grad());
  EXPECT_EQ(gw[8], 0.0);  // row 4 unused
  const auto gp = values_of(psw.grad());
  EXPECT_EQ(gp[2], 0.0);
  EXPECT_EQ(gp[3], 0.0);
  EXPECT_DOUBLE_EQ(gp[0], w.at({1, 0}) + w.at({1, 1}));
}

TEST(Embedding, DotInteractionLayoutMatchesReferenceOrder) {
  // F = 3 features of [1, 1]: x = 2, e1 = 3, e2 = 5.
  auto f = [](double v) { return full({1, 1}, v, {DType::f64, nullptr}); };
  Tensor a = dot_interaction({f(2), f(3), f(5)});
  EXPECT_EQ(values_of(a), (std::vector<double>{2, 6, 10, 15}));  // x, (1,0), (2,0), (2,1)
  Tensor b = dot_interaction({f(2), f(3), f(5)}, true);
  EXPECT_EQ(values_of(b), (std::vector<double>{2, 4, 6, 9, 10, 15, 25}));  // (0,0), (1,0), (1,1), (2,0), (2,1), (2,2)
}

TEST(Embedding, DotInteractionSingleFeatureAndLongRows) {
  Generator g(8);
  Tensor x = testing::uniform64({3, 37}, g);
  Tensor y = dot_interaction({x});
  EXPECT_EQ(values_of(y), values_of(x));
  Tensor e = testing::uniform64({3, 37}, g);
  Tensor z = dot_interaction({x, e});
  ASSERT_EQ(z.sizes(), Dims({3, 38}));
  for (int b = 0; b < 3; ++b) {
    double s = 0;
    for (int k = 0; k < 37; ++k) s += x.at({b, k}) * e.at({b, k});
    EXPECT_NEAR(z.at({b, 37}), s, 1e-12);
  }
}

}  // namespace
}  // namespace strata
