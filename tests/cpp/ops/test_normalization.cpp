// What the op harness cannot express for ops/normalization.h: the running-statistics update,
// saved values that survive later updates, determinism across thread counts, empty inputs.

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "autograd/grad_mode.h"
#include "core/factories.h"
#include "core/threading.h"
#include "ops/normalization.h"
#include "tests/cpp/ops/harness/op_harness.h"

namespace strata {
namespace {

std::vector<double> vals(const Tensor& t) { return testing::values_of(t); }

template <typename T>
Tensor make(const std::vector<double>& v, IntArrayRef sizes) {
  std::vector<T> tv(v.begin(), v.end());
  return tensor<T>(tv, sizes);
}

TEST(BatchNorm, RunningStatsUpdateMatchesHandComputedValues) {
  // Channel 0: {1, 2, 3, 4}: mean 2.5, biased var 1.25, unbiased 5/3.
  // Channel 1: {0, 0, 2, 2}: mean 1, biased var 1, unbiased 4/3.
  Tensor x = make<double>({1, 0, 2, 0, 3, 2, 4, 2}, {4, 2});
  Tensor rm = make<double>({0, 0}, {2});
  Tensor rv = make<double>({1, 1}, {2});
  const uint64_t vm = rm.version(), vv = rv.version();
  x.set_requires_grad(true);
  Tensor y = batch_norm(x, rm, rv, Tensor(), Tensor(), /*training=*/true, 0.1, 0.0);
  EXPECT_GT(rm.version(), vm);
  EXPECT_GT(rv.version(), vv);
  EXPECT_FALSE(rm.requires_grad());
  EXPECT_FALSE(rv.requires_grad());
  const auto m = vals(rm), v = vals(rv);
  EXPECT_NEAR(m[0], 0.25, 1e-15);
  EXPECT_NEAR(m[1], 0.1, 1e-15);
  EXPECT_NEAR(v[0], 0.9 + 0.1 * 5.0 / 3.0, 1e-15);
  EXPECT_NEAR(v[1], 0.9 + 0.1 * 4.0 / 3.0, 1e-15);
  const auto yv = vals(y);
  EXPECT_NEAR(yv[0], -1.5 / std::sqrt(1.25), 1e-12);
  EXPECT_NEAR(yv[1], -1.0, 1e-12);
  EXPECT_NEAR(yv[7], 1.0, 1e-12);
}

/// PyTorch's rule, step by step: r = (1 - m) r + m s, with s the batch mean / unbiased variance.
template <typename T>
void check_repeated_updates(IntArrayRef shape, double momentum) {
  const int64_t N = shape[0], C = shape[1];
  int64_t S = 1;
  for (std::size_t d = 2; d < shape.size(); ++d) S *= shape[d];
  Generator gen(7);
  Tensor rm = zeros({C}, {dtype_of<T>(), nullptr});
  Tensor rv = ones({C}, {dtype_of<T>(), nullptr});
  std::vector<double> em(C, 0.0), ev(C, 1.0);
  for (int step = 0; step < 3; ++step) {
    Tensor x = normal(shape, 0.5 * step, 1.0 + step, {dtype_of<T>(), nullptr}, &gen);
    batch_norm(x, rm, rv, Tensor(), Tensor(), true, momentum, 1e-5);
    const auto xv = vals(x);
    for (int64_t c = 0; c < C; ++c) {
      double s = 0, q = 0;
      for (int64_t n = 0; n < N; ++n)
        for (int64_t i = 0; i < S; ++i) s += xv[(n * C + c) * S + i];
      const double mean = s / (N * S);
      for (int64_t n = 0; n < N; ++n)
        for (int64_t i = 0; i < S; ++i) q += std::pow(xv[(n * C + c) * S + i] - mean, 2);
      em[c] = (1 - momentum) * em[c] + momentum * mean;
      ev[c] = (1 - momentum) * ev[c] + momentum * q / (N * S - 1);
    }
  }
  const double tol = std::is_same_v<T, float> ? 1e-5 : 1e-12;
  const auto m = vals(rm), v = vals(rv);
  for (int64_t c = 0; c < C; ++c) {
    EXPECT_NEAR(m[c], em[c], tol * (1 + std::abs(em[c]))) << "channel " << c;
    EXPECT_NEAR(v[c], ev[c], tol * (1 + std::abs(ev[c]))) << "channel " << c;
  }
}

TEST(BatchNorm, RepeatedUpdatesFollowPyTorchFormula) {
  check_repeated_updates<double>({4, 3, 5, 6}, 0.1);
  check_repeated_updates<float>({4, 3, 5, 6}, 0.3);
  check_repeated_updates<double>({9, 70}, 0.2);  // [N, C]: more than one column block
  check_repeated_updates<float>({5, 4, 7}, 1.0);
}

TEST(BatchNorm, MomentumZeroKeepsAndEvalNeverTouchesRunningStats) {
  Generator gen(3);
  Tensor x = randn({6, 3, 4}, {DType::f32, nullptr}, &gen);
  Tensor rm = make<float>({0.5, -0.5, 1}, {3});
  Tensor rv = make<float>({2, 3, 4}, {3});
  batch_norm(x, rm, rv, Tensor(), Tensor(), true, 0.0);
  EXPECT_EQ(vals(rm), (std::vector<double>{0.5, -0.5, 1}));
  EXPECT_EQ(vals(rv), (std::vector<double>{2, 3, 4}));
  const uint64_t vm = rm.version();
  Tensor y = batch_norm(x, rm, rv, Tensor(), Tensor(), false);
  EXPECT_EQ(rm.version(), vm);
  EXPECT_EQ(vals(rm), (std::vector<double>{0.5, -0.5, 1}));
  // eval: (x - rm) / sqrt(rv + eps)
  const auto xv = vals(x), yv = vals(y);
  EXPECT_NEAR(yv[0], (xv[0] - 0.5) / std::sqrt(2 + 1e-5), 1e-6);
  EXPECT_NEAR(yv[4], (xv[4] + 0.5) / std::sqrt(3 + 1e-5), 1e-6);
}

TEST(BatchNorm, StridedRunningStatsAreUpdatedInPlace) {
  Tensor big_m = zeros({3, 2}, {DType::f64, nullptr});
  Tensor big_v = ones({3, 2}, {DType::f64, nullptr});
  Tensor rm = big_m.select(1, 1);  // stride 2
  Tensor rv = big_v.select(1, 0);
  Tensor x = make<double>({1, 2, 3, 3, 4, 5}, {2, 3});
  batch_norm(x, rm, rv, Tensor(), Tensor(), true, 0.5);
  EXPECT_EQ(vals(big_m), (std::vector<double>{0, 1, 0, 1.5, 0, 2}));
  EXPECT_EQ(vals(big_v), (std::vector<double>{0.5 + 0.5 * 2, 1, 0.5 + 0.5 * 2, 1, 0.5 + 0.5 * 2, 1}));
}

TEST(BatchNorm, BackwardSurvivesLaterRunningStatUpdates) {
  // Eval mode normalizes with the running statistics; a training step that updates them before
  // backward must not break (or change) the eval node's gradient.
  Generator gen(5);
  Tensor x = randn({4, 3, 2}, {DType::f64, nullptr}, &gen).set_requires_grad(true);
  Tensor w = make<double>({1, 2, 3}, {3}).set_requires_grad(true);
  Tensor rm = make<double>({0.1, 0.2, 0.3}, {3});
  Tensor rv = make<double>({1, 2, 3}, {3});
  Tensor y = batch_norm(x, rm, rv, w, Tensor(), false);
  {
    autograd::NoGradGuard ng;
    batch_norm(x.detach(), rm, rv, Tensor(), Tensor(), true);
  }
  y.backward(ones_like(y));
  const auto gx = vals(x.grad());
  EXPECT_NEAR(gx[0], 1.0 / std::sqrt(1 + 1e-5), 1e-12);
  EXPECT_NEAR(gx[2], 2.0 / std::sqrt(2 + 1e-5), 1e-12);
  const auto gw = vals(w.grad());
  const auto xv = vals(x);
  double expect = 0;
  for (int n = 0; n < 4; ++n)
    for (int s = 0; s < 2; ++s) expect += (xv[n * 6 + s] - 0.1) / std::sqrt(1 + 1e-5);
  EXPECT_NEAR(gw[0], expect, 1e-12);
}

TEST(BatchNorm, SameResultOnOneAndTwoThreads) {
  Generator gen(11);
  Tensor x = randn({8, 16, 16, 16}, {DType::f32, nullptr}, &gen).set_requires_grad(true);
  Tensor g = randn({8, 16, 16, 16}, {DType::f32, nullptr}, &gen);
  const int before = get_num_threads();
  std::vector<std::vector<double>> outs;
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    Tensor rm = zeros({16}), rv = ones({16});
    x.set_grad(Tensor());
    Tensor y = batch_norm(x, rm, rv, Tensor(), Tensor(), true);
    y.backward(g);
    std::vector<double> all = vals(y);
    for (const Tensor& t : {x.grad(), rm, rv}) {
      const auto v = vals(t);
      all.insert(all.end(), v.begin(), v.end());
    }
    outs.push_back(all);
  }
  set_num_threads(before);
  EXPECT_EQ(outs[0], outs[1]);
}

TEST(BatchNorm, EmptyBatchInEvalMode) {
  Tensor y = batch_norm(zeros({0, 3, 2}), zeros({3}), ones({3}), Tensor(), Tensor(), false);
  EXPECT_EQ(y.sizes(), (Dims{0, 3, 2}));
}

TEST(LayerNorm, SameResultOnOneAndTwoThreads) {
  Generator gen(12);
  Tensor x = randn({64, 1024}, {DType::f32, nullptr}, &gen).set_requires_grad(true);
  Tensor w = ones({1024}).set_requires_grad(true);
  Tensor g = randn({64, 1024}, {DType::f32, nullptr}, &gen);
  const int before = get_num_threads();
  std::vector<std::vector<double>> outs;
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    x.set_grad(Tensor());
    w.set_grad(Tensor());
    Tensor y = layer_norm(x, {1024}, w);
    y.backward(g);
    std::vector<double> all = vals(y);
    for (const Tensor& t : {x.grad(), w.grad()}) {
      const auto v = vals(t);
      all.insert(all.end(), v.begin(), v.end());
    }
    outs.push_back(all);
  }
  set_num_threads(before);
  EXPECT_EQ(outs[0], outs[1]);
}

TEST(LayerNorm, RowsHaveZeroMeanAndUnitVariance) {
  Generator gen(13);
  Tensor x = normal({3, 500}, 100.0, 5.0, {DType::f32, nullptr}, &gen);
  const auto y = vals(layer_norm(x, {500}, Tensor(), Tensor(), 0.0));
  for (int r = 0; r < 3; ++r) {
    double m = 0, v = 0;
    for (int i = 0; i < 500; ++i) m += y[r * 500 + i];
    m /= 500;
    for (int i = 0; i < 500; ++i) v += (y[r * 500 + i] - m) * (y[r * 500 + i] - m);
    EXPECT_NEAR(m, 0.0, 1e-5);
    EXPECT_NEAR(v / 500, 1.0, 1e-4);
  }
}

TEST(LayerNorm, EmptyInput) {
  Tensor y = layer_norm(zeros({0, 4}), {4});
  EXPECT_EQ(y.sizes(), (Dims{0, 4}));
}

}  // namespace
}  // namespace strata
