// What the op harness cannot express for ops/softmax_loss.h: infinities and NaNs, the fused
// cross entropy against its composition, all-ignored targets, i32 targets, empty inputs and
// determinism across thread counts.

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "autograd/grad_mode.h"
#include "core/factories.h"
#include "core/threading.h"
#include "ops/softmax_loss.h"
#include "tests/cpp/ops/harness/op_harness.h"

namespace strata {
namespace {

std::vector<double> vals(const Tensor& t) { return testing::values_of(t); }

template <typename T>
Tensor make(const std::vector<double>& v, IntArrayRef sizes) {
  std::vector<T> tv(v.begin(), v.end());
  return tensor<T>(tv, sizes);
}

constexpr double kInf = std::numeric_limits<double>::infinity();

TEST(Softmax, Float32MatchesFloat64AcrossTheExpRange) {
  // Rows spanning the whole range the f32 exp sees (down to underflow).
  std::vector<double> v;
  for (int i = 0; i < 400; ++i) v.push_back(-120.0 + 0.3 * i);
  for (int64_t dim : {0, -1}) {
    // The f64 reference sees the f32-rounded inputs, so only the kernel's own error is measured.
    Tensor x64 = make<float>(v, {400}).to(DType::f64);
    const auto y64 = vals(softmax(x64, dim)), l64 = vals(log_softmax(x64, dim));
    const auto y32 = vals(softmax(x64.to(DType::f32), dim)), l32 = vals(log_softmax(x64.to(DType::f32), dim));
    for (std::size_t i = 0; i < v.size(); ++i) {
      // x - max rounds in f32 (|error| <= ulp(|x|) / 2), which exp turns into a relative error.
      EXPECT_NEAR(y32[i], y64[i], (2e-6 + 1.2e-7 * std::abs(v[i])) * y64[i] + 2e-38) << i;
      EXPECT_NEAR(l32[i], l64[i], 1e-5 * (1 + std::abs(l64[i]))) << i;
    }
  }
}

TEST(Softmax, InfinitiesAndNaNs) {
  for (DType dt : {DType::f32, DType::f64}) {
    Tensor x = make<double>({0, -kInf, 1, 2}, {2, 2}).to(dt);
    const auto y = vals(softmax(x, 1));
    EXPECT_EQ(y[0], 1.0);
    EXPECT_EQ(y[1], 0.0);
    const auto l = vals(log_softmax(x, 1));
    EXPECT_EQ(l[0], 0.0);
    EXPECT_EQ(l[1], -kInf);
    Tensor xn = make<double>({0, std::nan(""), 1, 2, 3, 4}, {2, 3}).to(dt);
    const auto yn = vals(softmax(xn, -1));
    for (int i = 0; i < 3; ++i) EXPECT_TRUE(std::isnan(yn[i])) << i;
    for (int i = 3; i < 6; ++i) EXPECT_FALSE(std::isnan(yn[i])) << i;
  }
}

TEST(Softmax, ZeroDimInputIsOne) {
  Tensor x = make<double>({3.5}, {1}).reshape({});
  EXPECT_EQ(vals(softmax(x, 0)), std::vector<double>{1.0});
  EXPECT_EQ(vals(log_softmax(x, -1)), std::vector<double>{0.0});
}

TEST(CrossEntropy, MatchesNllOfLogSoftmaxWithGradients) {
  Generator gen(21);
  for (DType dt : {DType::f32, DType::f64}) {
    Tensor logits = randn({7, 5, 3}, {dt, nullptr}, &gen);
    Tensor target = randint(0, 5, {7, 3}, {DType::i64, nullptr}, &gen);
    Tensor w = uniform({5}, 0.5, 2.0, {dt, nullptr}, &gen);
    Tensor a = logits.clone().set_requires_grad(true);
    Tensor b = logits.clone().set_requires_grad(true);
    Tensor la = cross_entropy(a, target, w, Reduction::Mean, 1);
    Tensor lb = nll_loss(log_softmax(b, 1), target, w, Reduction::Mean, 1);
    const double tol = dt == DType::f32 ? 1e-5 : 1e-12;
    EXPECT_NEAR(vals(la)[0], vals(lb)[0], tol);
    la.backward();
    lb.backward();
    const auto ga = vals(a.grad()), gb = vals(b.grad());
    for (std::size_t i = 0; i < ga.size(); ++i) EXPECT_NEAR(ga[i], gb[i], tol) << i;
  }
}

TEST(CrossEntropy, AllTargetsIgnored) {
  Tensor logits = make<double>({1, 2, 3, 4, 5, 6}, {2, 3}).set_requires_grad(true);
  Tensor target = tensor<int64_t>({-100, -100});
  Tensor mean = cross_entropy(logits, target);
  EXPECT_TRUE(std::isnan(vals(mean)[0]));  // 0 / 0, as in PyTorch
  mean.backward();
  for (double g : vals(logits.grad())) EXPECT_EQ(g, 0.0);
  EXPECT_EQ(vals(cross_entropy(logits, target, Tensor(), Reduction::Sum))[0], 0.0);
  EXPECT_EQ(vals(nll_loss(logits, target, Tensor(), Reduction::Sum))[0], 0.0);
}

TEST(NllLoss, Int32TargetsAndSingleSample) {
  Tensor lp = make<float>({-1, -2, -3, -4, -5, -6}, {2, 3});
  Tensor t32 = tensor<int32_t>({2, 0});
  EXPECT_FLOAT_EQ(vals(nll_loss(lp, t32))[0], 3.5f);
  EXPECT_FLOAT_EQ(vals(cross_entropy(lp, t32, Tensor(), Reduction::Sum))[0],
                  vals(cross_entropy(lp, tensor<int64_t>({2, 0}), Tensor(), Reduction::Sum))[0]);
  Tensor single = make<float>({-1, -2, -3}, {3});
  EXPECT_FLOAT_EQ(vals(nll_loss(single, tensor<int64_t>({1}, IntArrayRef{})))[0], 2.0f);
}

TEST(Losses, WeightsThatRequireGradAreRefused) {
  Tensor x = make<double>({0.5, 0.5}, {2});
  Tensor w = make<double>({1, 1}, {2}).set_requires_grad(true);
  EXPECT_THROW(binary_cross_entropy(x, x, w), Error);
  EXPECT_THROW(nll_loss(make<double>({-1, -2}, {1, 2}), tensor<int64_t>({0}), w), Error);
  autograd::NoGradGuard ng;  // fine without grad mode: nothing is recorded
  EXPECT_NO_THROW(binary_cross_entropy(x, x, w));
}

TEST(Losses, BceWithLogitsFloat32IsStableAtExtremes) {
  const std::vector<double> xs = {-100, -30, -5, -1e-3, 0, 1e-3, 5, 30, 100};
  std::vector<double> ts;
  for (std::size_t i = 0; i < xs.size(); ++i) ts.push_back(i % 2 == 0 ? 1.0 : 0.0);
  Tensor x64 = make<double>(xs, {9}), t64 = make<double>(ts, {9});
  const auto l64 = vals(binary_cross_entropy_with_logits(x64, t64, Tensor(), Tensor(), Reduction::None));
  Tensor x32 = x64.to(DType::f32).set_requires_grad(true);
  Tensor l = binary_cross_entropy_with_logits(x32, t64.to(DType::f32), Tensor(), Tensor(), Reduction::None);
  const auto l32 = vals(l);
  for (std::size_t i = 0; i < xs.size(); ++i) EXPECT_NEAR(l32[i], l64[i], 1e-6 * (1 + l64[i])) << xs[i];
  l.backward(ones_like(l));
  const auto g = vals(x32.grad());
  for (std::size_t i = 0; i < xs.size(); ++i) {
    const double expect = 1 / (1 + std::exp(-xs[i])) - ts[i];
    EXPECT_NEAR(g[i], expect, 1e-6) << xs[i];
  }
}

TEST(Losses, EmptyInputs) {
  Tensor e = zeros({0, 3});
  EXPECT_TRUE(std::isnan(vals(mse_loss(e, e))[0]));
  EXPECT_EQ(vals(mse_loss(e, e, Reduction::Sum))[0], 0.0);
  EXPECT_EQ(mse_loss(e, e, Reduction::None).sizes(), (Dims{0, 3}));
}

TEST(Losses, SameResultOnOneAndTwoThreads) {
  Generator gen(31);
  Tensor x = randn({300, 1000}, {DType::f32, nullptr}, &gen);
  Tensor t = randn({300, 1000}, {DType::f32, nullptr}, &gen);
  Tensor target = randint(0, 1000, {300}, {DType::i64, nullptr}, &gen);
  const int before = get_num_threads();
  std::vector<std::vector<double>> outs;
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    Tensor xr = x.clone().set_requires_grad(true);
    Tensor a = mse_loss(xr, t, Reduction::Sum);
    Tensor b = binary_cross_entropy_with_logits(xr, t);
    Tensor c = cross_entropy(xr, target, Tensor(), Reduction::Mean, -100, 0.1);
    Tensor d = softmax(xr, 0);
    std::vector<double> all{vals(a)[0], vals(b)[0], vals(c)[0]};
    const auto dv = vals(d);
    all.insert(all.end(), dv.begin(), dv.end());
    c.backward();
    const auto gv = vals(xr.grad());
    all.insert(all.end(), gv.begin(), gv.end());
    outs.push_back(all);
  }
  set_num_threads(before);
  EXPECT_EQ(outs[0], outs[1]);
}

}  // namespace
}  // namespace strata
