// nn::init (models/init.h) and gradient clipping (models/clip_grad.h): hand-computed norms and
// clipped values, the distributions' moments and bounds, determinism under a seed, orthogonality,
// and PyTorch's errors. (pytest compares both with torch: tests/python/test_init_clip.py.)

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "core/factories.h"
#include "core/rng.h"
#include "models/clip_grad.h"
#include "models/init.h"
#include "tests/cpp/error_text.h"

namespace strata::nn {
namespace {

std::vector<double> values_of(const Tensor& t) {
  const Tensor c = t.contiguous().to(DType::f64, /*copy=*/true);
  return std::vector<double>(c.data<double>(), c.data<double>() + c.numel());
}

Tensor param_with_grad(const std::vector<double>& g, DType dtype = DType::f32) {
  Tensor p = zeros({static_cast<int64_t>(g.size())}, {dtype});
  p.set_requires_grad(true);
  p.set_grad(tensor<double>(g).to(dtype, /*copy=*/true));
  return p;
}

TEST(ClipGradNorm, ScalesEveryGradientByTheTotalNorm) {
  std::vector<Tensor> ps = {param_with_grad({3, 0}), param_with_grad({0, 4}), zeros({2})};
  const Tensor total = clip_grad_norm_(ps, 1.0);
  EXPECT_EQ(total.dtype(), DType::f32);
  EXPECT_NEAR(total.item<double>(), 5.0, 1e-6);
  const double coef = 1.0 / (5.0 + 1e-6);
  EXPECT_NEAR(values_of(ps[0].grad())[0], 3 * coef, 1e-6);
  EXPECT_NEAR(values_of(ps[1].grad())[1], 4 * coef, 1e-6);
  EXPECT_FALSE(ps[2].grad().defined());  // skipped
}

TEST(ClipGradNorm, InfinityZeroAndFractionalNorms) {
  auto run = [](double p) {
    std::vector<Tensor> ps = {param_with_grad({-3, 1}, DType::f64), param_with_grad({0, 2}, DType::f64)};
    return clip_grad_norm_(ps, 100.0, p).item<double>();
  };
  EXPECT_DOUBLE_EQ(run(std::numeric_limits<double>::infinity()), 3.0);
  EXPECT_DOUBLE_EQ(run(-std::numeric_limits<double>::infinity()), 0.0);
  EXPECT_DOUBLE_EQ(run(0), 2.0);  // the count of non-zero per-tensor counts (2 and 1), as PyTorch's
  EXPECT_NEAR(run(1), 6.0, 1e-12);
  EXPECT_NEAR(run(3), std::cbrt(27 + 1 + 8), 1e-12);
}

TEST(ClipGradNorm, NoGradientsGiveZeroAndNonFiniteNormsAreNamed) {
  EXPECT_EQ(clip_grad_norm_({zeros({2})}, 1.0).item<double>(), 0.0);
  std::vector<Tensor> ps = {param_with_grad({std::nan(""), 1})};
  EXPECT_ERROR_HAS(clip_grad_norm_(ps, 1.0, 2.0, true),
                   "The total norm of order 2.0 for gradients from `parameters` is non-finite");
  EXPECT_EQ(values_of(ps[0].grad())[1], 1.0);  // nothing scaled
  Tensor ints = zeros({2}, {DType::i64});
  ints.set_grad(zeros({2}, {DType::i64}));
  EXPECT_ERROR_HAS(clip_grad_norm_({ints}, 1.0), "the gradient of parameter 0 must be f32 or f64");
  EXPECT_ERROR_HAS(clip_grad_norm_({Tensor()}, 1.0), "clip_grad_norm_: parameter 0 is undefined");
}

TEST(ClipGradValue, ClampsInPlace) {
  std::vector<Tensor> ps = {param_with_grad({-3, 0.5, 2})};
  clip_grad_value_(ps, 1.0);
  EXPECT_EQ(values_of(ps[0].grad()), (std::vector<double>{-1, 0.5, 1}));
  clip_grad_value_(ps, -0.25);  // PyTorch's clamp with min > max: every element becomes max
  EXPECT_EQ(values_of(ps[0].grad()), (std::vector<double>{-0.25, -0.25, -0.25}));
}

void moments(const Tensor& t, double& mean, double& sd, double& lo, double& hi) {
  const auto v = values_of(t);
  mean = 0, sd = 0, lo = v[0], hi = v[0];
  for (double x : v) mean += x, lo = std::min(lo, x), hi = std::max(hi, x);
  mean /= static_cast<double>(v.size());
  for (double x : v) sd += (x - mean) * (x - mean);
  sd = std::sqrt(sd / static_cast<double>(v.size()));
}

TEST(Init, DistributionsHaveTheirMomentsAndBounds) {
  Tensor w = empty({400, 300});  // fan_in 300, fan_out 400
  double mean, sd, lo, hi;
  init::kaiming_uniform_(w, std::sqrt(5.0));
  const double bound = 1.0 / std::sqrt(300.0);  // Linear's default
  moments(w, mean, sd, lo, hi);
  EXPECT_GE(lo, -bound);
  EXPECT_LE(hi, bound);
  EXPECT_NEAR(sd, bound / std::sqrt(3.0), 0.01 * bound);
  init::xavier_normal_(w, 2.0);
  moments(w, mean, sd, lo, hi);
  EXPECT_NEAR(sd, 2.0 * std::sqrt(2.0 / 700), 0.01 * sd);
  EXPECT_NEAR(mean, 0.0, 5 * sd / std::sqrt(120000.0));
  init::kaiming_normal_(w, 0, "fan_out", "relu");
  moments(w, mean, sd, lo, hi);
  EXPECT_NEAR(sd, std::sqrt(2.0 / 400), 0.01 * sd);
  init::trunc_normal_(w, 0.5, 1.0, 0.0, 1.0);
  moments(w, mean, sd, lo, hi);
  EXPECT_GE(lo, 0.0);
  EXPECT_LE(hi, 1.0);
  EXPECT_NEAR(mean, 0.5, 0.01);    // symmetric truncation keeps the mean
  EXPECT_NEAR(sd, 0.2822, 0.005);  // sd of N(0.5, 1) on [0, 1]: sqrt(1 - 2·φ(.5)/(Φ(.5) - Φ(-.5)) · .5)
}

TEST(Init, SeededDrawsRepeatAndDeterministicFillsAreExact) {
  Generator g1(5), g2(5);
  Tensor a = empty({7, 3}), b = empty({7, 3});
  init::orthogonal_(a, 1.0, &g1);
  init::orthogonal_(b, 1.0, &g2);
  EXPECT_EQ(values_of(a), values_of(b));
  Tensor e = empty({2, 3}, {DType::f64});
  init::eye_(e);
  EXPECT_EQ(values_of(e), (std::vector<double>{1, 0, 0, 0, 1, 0}));
  init::constant_(e, 0.5);
  EXPECT_EQ(values_of(e), std::vector<double>(6, 0.5));
  EXPECT_DOUBLE_EQ(init::calculate_gain("leaky_relu", 0.2), std::sqrt(2.0 / 1.04));
  EXPECT_DOUBLE_EQ(init::calculate_gain("tanh"), 5.0 / 3);
}

TEST(Init, OrthogonalRowsOrColumnsAreOrthonormal) {
  for (Dims shape : {Dims{5, 3}, Dims{3, 5}, Dims{4, 2, 2}}) {
    Tensor t = empty(shape, {DType::f64});
    init::orthogonal_(t, 1.0);
    const int64_t r = shape[0], c = t.numel() / r;
    const auto q = values_of(t);
    const int64_t n = std::min(r, c);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double dot = 0;
        for (int64_t k = 0; k < std::max(r, c); ++k)
          dot += r >= c ? q[k * c + i] * q[k * c + j] : q[i * c + k] * q[j * c + k];
        EXPECT_NEAR(dot, i == j ? 1.0 : 0.0, 1e-12) << shape;
      }
  }
}

TEST(Init, BadArgumentsUsePyTorchsMessages) {
  Tensor v = empty({5});
  Tensor m = empty({3, 3});
  EXPECT_ERROR_HAS(init::xavier_uniform_(v), "Fan in and fan out can not be computed for tensor with fewer than 2");
  EXPECT_ERROR_HAS(init::kaiming_normal_(m, 0, "fan_avg"), "Mode fan_avg not supported, please use one of");
  EXPECT_ERROR_HAS(init::kaiming_normal_(m, 0, "fan_in", "softplus"), "Unsupported nonlinearity softplus");
  EXPECT_ERROR_HAS(init::eye_(v), "Only tensors with 2 dimensions are supported");
  EXPECT_ERROR_HAS(init::orthogonal_(v), "Only tensors with 2 or more dimensions are supported");
  Tensor ints = zeros({3}, {DType::i64});
  EXPECT_ERROR_HAS(init::normal_(ints), "normal_: expected a floating-point tensor");
  EXPECT_ERROR_HAS(init::uniform_(m, 1.0, 0.0), "but found from=1 > to=0");
  EXPECT_ERROR_HAS(init::trunc_normal_(m, 0, 1, 2, 1), "the bounds must satisfy a < b");
  Tensor none = empty({0, 3});
  EXPECT_NO_THROW(init::kaiming_uniform_(none));  // PyTorch: a warning and no change
}

}  // namespace
}  // namespace strata::nn
