// Tests of the unary / binary / reduction families beyond the harness: dropout's randomness,
// accuracy of the f32 fast math and of long sums, ties, edge cases, operators.

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "autograd/engine.h"
#include "autograd/grad_mode.h"
#include "core/factories.h"
#include "core/threading.h"
#include "ops/binary.h"
#include "ops/operators.h"
#include "ops/reduction.h"
#include "ops/unary.h"

namespace strata {
namespace {

std::vector<double> vals(const Tensor& t) {
  Tensor c = t.to(DType::f64).contiguous();
  return {c.data<double>(), c.data<double>() + c.numel()};
}

/// Restores the thread count at scope exit.
struct ThreadsGuard {
  int saved = get_num_threads();
  ~ThreadsGuard() { set_num_threads(saved); }
};

TEST(Dropout, MaskFractionIsAboutP) {
  for (double p : {0.1, 0.5, 0.8}) {
    Generator gen(7);
    Tensor y = dropout(ones({1000, 100}), p, true, &gen);
    const auto v = vals(y);
    int64_t zeros_n = 0;
    for (double e : v) {
      if (e == 0)
        ++zeros_n;
      else
        EXPECT_NEAR(e, 1.0 / (1.0 - p), 1e-6);
    }
    EXPECT_NEAR(static_cast<double>(zeros_n) / static_cast<double>(v.size()), p, 0.01) << "p = " << p;
  }
}

TEST(Dropout, SameMaskOnOneAndTwoThreads) {
  ThreadsGuard guard;
  Tensor x = randn({513, 1031});
  set_num_threads(1);
  Generator g1(99);
  const auto a = vals(dropout(x, 0.4, true, &g1));
  set_num_threads(2);
  Generator g2(99);
  const auto b = vals(dropout(x, 0.4, true, &g2));
  EXPECT_EQ(a, b);
}

TEST(Dropout, ConsecutiveDrawsDiffer) {
  Generator gen(3);
  Tensor x = ones({64, 64});
  EXPECT_NE(vals(dropout(x, 0.5, true, &gen)), vals(dropout(x, 0.5, true, &gen)));
}

TEST(Dropout, EvalIsIdentityAndACopy) {
  Tensor x = randn({8, 9});
  Tensor y = dropout(x, 0.7, false);
  EXPECT_EQ(vals(x), vals(y));
  EXPECT_FALSE(y.shares_storage(x));
  x.set_requires_grad(true);
  Tensor z = dropout(x, 0.7, false);
  sum(z).backward();
  for (double g : vals(x.grad())) EXPECT_EQ(g, 1.0);
}

TEST(Dropout, PEqualOneGivesZerosAndZeroGrad) {
  Tensor x = randn({4, 5});
  x.set_requires_grad(true);
  Tensor y = dropout(x, 1.0, true);
  for (double v : vals(y)) EXPECT_EQ(v, 0.0);
  sum(y).backward();
  for (double g : vals(x.grad())) EXPECT_EQ(g, 0.0);
}

TEST(Dropout, BackwardUsesTheForwardMask) {
  Tensor x = uniform({50, 40}, 1.0, 2.0);
  x.set_requires_grad(true);
  Generator gen(5);
  Tensor y = dropout(x, 0.3, true, &gen);
  sum(y).backward();
  const auto yv = vals(y), gv = vals(x.grad());
  for (std::size_t i = 0; i < yv.size(); ++i) EXPECT_EQ(yv[i] == 0.0, gv[i] == 0.0) << i;
}

TEST(Dropout, DefaultGeneratorIsSeeded) {
  Tensor x = ones({32, 32});
  manual_seed(11);
  const auto a = vals(dropout(x, 0.5, true));
  manual_seed(11);
  const auto b = vals(dropout(x, 0.5, true));
  EXPECT_EQ(a, b);
}

/// Max relative error of an f32 op against its f64 version over a dense sweep.
template <typename F>
double max_rel_err_f32(F op, double lo, double hi, int n, double floor = 1e-30) {
  std::vector<double> xs;
  for (int i = 0; i < n; ++i) xs.push_back(lo + (hi - lo) * i / (n - 1));
  Tensor x64 = from_buffer(xs.data(), xs.size() * sizeof(double), {static_cast<int64_t>(xs.size())}, DType::f64);
  Tensor x32 = x64.to(DType::f32);
  // Reference on the f32-rounded inputs, so only the op's own error counts.
  const auto r = vals(op(x32.to(DType::f64)));
  const auto y = vals(op(x32));
  double worst = 0;
  for (std::size_t i = 0; i < r.size(); ++i) {
    const double err = std::abs(y[i] - r[i]) / std::max(std::abs(r[i]), floor);
    worst = std::max(worst, err);
  }
  return worst;
}

TEST(FastMath, F32AccuracyAgainstF64) {
  EXPECT_LT(max_rel_err_f32([](const Tensor& x) { return exp(x); }, -87, 88, 200001), 3e-7);
  EXPECT_LT(max_rel_err_f32([](const Tensor& x) { return log(x); }, 1e-6, 1e4, 200001), 3e-7);
  EXPECT_LT(max_rel_err_f32([](const Tensor& x) { return log(x); }, 0.5, 2.0, 200001, 1e-3), 3e-7);
  EXPECT_LT(max_rel_err_f32([](const Tensor& x) { return tanh(x); }, -10, 10, 200001), 5e-7);
  EXPECT_LT(max_rel_err_f32([](const Tensor& x) { return sigmoid(x); }, -80, 30, 200001), 5e-7);
  // gelu's far negative tail (|value| < 1e-6 below x = -5) is relative-accurate to 1e-5 only:
  // the f32 rounding of x^2 / 2 inside erfc's exponent is amplified by |x^2 / 2|. (PyTorch's f32
  // gelu computes 1 + erf(z) there, which cancels completely.)
  EXPECT_LT(max_rel_err_f32([](const Tensor& x) { return gelu(x); }, -3, 8, 200001), 1e-6);
  EXPECT_LT(max_rel_err_f32([](const Tensor& x) { return gelu(x); }, -8, 8, 200001), 1e-5);
  EXPECT_LT(max_rel_err_f32([](const Tensor& x) { return gelu(x, true); }, -3, 8, 200001), 1e-6);
  EXPECT_LT(max_rel_err_f32([](const Tensor& x) { return gelu(x, true); }, -8, 8, 200001), 1e-5);
}

/// The f32 gradients of the transcendental ops (contiguous f32 runs the array kernels of
/// ops/detail/cpu/vec_math.h, strided f32 the scalar fallback) against the f64 ones on the same inputs.
TEST(FastMath, F32GradientsMatchF64ContiguousAndStrided) {
  Generator gen(13);
  const Tensor base = uniform({64, 33}, -6.0, 6.0, {DType::f32, nullptr}, &gen);
  const Tensor gout = uniform({64, 33}, -1.0, 1.0, {DType::f32, nullptr}, &gen);
  using Op = Tensor (*)(const Tensor&);
  const std::vector<std::pair<const char*, Op>> ops = {
      {"exp", [](const Tensor& x) { return exp(x); }},
      {"sigmoid", [](const Tensor& x) { return sigmoid(x); }},
      {"tanh", [](const Tensor& x) { return tanh(x); }},
      {"gelu", [](const Tensor& x) { return gelu(x); }},
  };
  for (const auto& [name, op] : ops) {
    for (bool strided : {false, true}) {
      auto grad_of = [&](DType dt) {
        Tensor x = base.to(dt, /*copy=*/true);  // a fresh leaf per op
        Tensor g = gout.to(dt);
        if (strided) {  // the same values, laid out transposed
          x = x.t().contiguous().t();
          g = g.t().contiguous().t();
        }
        x.set_requires_grad(true);
        Tensor y = op(x);
        y.backward(g);
        return std::make_pair(vals(y), vals(x.grad()));
      };
      const auto [y32, g32] = grad_of(DType::f32);
      const auto [y64, g64] = grad_of(DType::f64);
      for (std::size_t i = 0; i < y64.size(); ++i) {
        EXPECT_NEAR(y32[i], y64[i], 1e-6 * std::abs(y64[i]) + 1e-30) << name << " strided " << strided << " at " << i;
        // sigmoid's and tanh's gradients come from the saved f32 output, whose rounding (~6e-8)
        // 1 - y and 1 - y^2 turn into an absolute error.
        EXPECT_NEAR(g32[i], g64[i], 2e-6 * std::abs(g64[i]) + 5e-7) << name << " strided " << strided << " at " << i;
      }
    }
  }
}

TEST(FastMath, SpecialValues) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  Tensor x = tensor<float>({0.0f, -0.0f, inf, -inf, nan, -1.0f, 1e-40f, 100.0f, -200.0f});
  const auto e = vals(exp(x));
  EXPECT_EQ(e[0], 1.0);
  EXPECT_EQ(e[2], INFINITY);
  EXPECT_EQ(e[3], 0.0);
  EXPECT_TRUE(std::isnan(e[4]));
  EXPECT_EQ(e[7], INFINITY);
  EXPECT_EQ(e[8], 0.0);
  const auto l = vals(log(x));
  EXPECT_EQ(l[0], -INFINITY);
  EXPECT_EQ(l[2], INFINITY);
  EXPECT_TRUE(std::isnan(l[3]));
  EXPECT_TRUE(std::isnan(l[4]));
  EXPECT_TRUE(std::isnan(l[5]));
  EXPECT_NEAR(l[6], std::log(1e-40), 1e-5 * 92);
  const auto t = vals(tanh(x));
  EXPECT_EQ(t[2], 1.0);
  EXPECT_EQ(t[3], -1.0);
  EXPECT_TRUE(std::isnan(t[4]));
  const auto s = vals(sigmoid(x));
  EXPECT_EQ(s[2], 1.0);
  EXPECT_EQ(s[3], 0.0);
  EXPECT_EQ(s[0], 0.5);
}

TEST(Sum, LongF32SumIsAccurate) {
  Generator gen(1);
  Tensor x = uniform({1 << 20}, 0.0, 1.0, {DType::f32, nullptr}, &gen);
  double exact = 0;
  for (double v : vals(x)) exact += v;
  const double got = sum(x).item<double>();
  EXPECT_NEAR(got, exact, 1e-6 * exact);
  EXPECT_NEAR(mean(x).item<double>(), exact / (1 << 20), 1e-6 * exact / (1 << 20));
}

TEST(Sum, LargeShapesMatchNaiveAndAreThreadIndependent) {
  ThreadsGuard guard;
  Generator gen(2);
  Tensor x = randn({300, 257}, {DType::f32, nullptr}, &gen);
  const auto v = vals(x);
  for (int64_t dim : {0, 1}) {
    set_num_threads(1);
    const auto a = vals(sum(x, {dim}));
    set_num_threads(2);
    const auto b = vals(sum(x, {dim}));
    EXPECT_EQ(a, b);
    const int64_t n_out = dim == 0 ? 257 : 300;
    for (int64_t o = 0; o < n_out; ++o) {
      double s = 0;
      for (int64_t r = 0; r < (dim == 0 ? 300 : 257); ++r) s += dim == 0 ? v[r * 257 + o] : v[o * 257 + r];
      EXPECT_NEAR(a[o], s, 1e-5 * (1 + std::abs(s)));
    }
  }
  // A tall skinny outer reduction (few outputs, many rows) and a long row.
  Tensor t = randn({100000, 3}, {DType::f64, nullptr}, &gen);
  const auto tv = vals(t);
  const auto r = vals(sum(t, {0}));
  for (int c = 0; c < 3; ++c) {
    double s = 0;
    for (int64_t i = 0; i < 100000; ++i) s += tv[i * 3 + c];
    EXPECT_NEAR(r[c], s, 1e-9);
  }
  Tensor row = randn({2, 200000}, {DType::f64, nullptr}, &gen);
  const auto rv = vals(row);
  const auto rs = vals(amax(row, {1}));
  for (int o = 0; o < 2; ++o) {
    double m = -INFINITY;
    for (int64_t i = 0; i < 200000; ++i) m = std::max(m, rv[o * 200000 + i]);
    EXPECT_EQ(rs[o], m);
  }
}

TEST(Sum, NonContiguousAndEmpty) {
  Tensor x = randn({6, 8}, {DType::f64, nullptr});
  Tensor xt = x.t();
  const auto a = vals(sum(xt, {1}));
  const auto b = vals(sum(x, {0}));
  for (int i = 0; i < 8; ++i) EXPECT_NEAR(a[i], b[i], 1e-12);
  Tensor e = zeros({0, 4});
  EXPECT_EQ(vals(sum(e, {0})), std::vector<double>(4, 0.0));
  EXPECT_TRUE(std::isnan(mean(e).item<double>()));
  EXPECT_EQ(sum(e, {1}).sizes(), Dims({0}));
}

TEST(Amax, ThreeWayTiesSplitEvenly) {
  Tensor x = tensor<double>({1.0, 3.0, 3.0, 3.0, -1.0}, std::vector<int64_t>{5});
  x.set_requires_grad(true);
  Tensor m = max(x);
  EXPECT_EQ(m.item<double>(), 3.0);
  m.backward();
  const auto g = vals(x.grad());
  EXPECT_EQ(g[0], 0.0);
  EXPECT_NEAR(g[1], 1.0 / 3, 1e-15);
  EXPECT_NEAR(g[2], 1.0 / 3, 1e-15);
  EXPECT_NEAR(g[3], 1.0 / 3, 1e-15);
  EXPECT_EQ(g[4], 0.0);
}

TEST(Amax, NanPropagates) {
  Tensor x = tensor<float>({1.0f, NAN, 2.0f});
  EXPECT_TRUE(std::isnan(max(x).item<double>()));
  EXPECT_TRUE(std::isnan(vals(maximum(x, zeros({3})))[1]));
}

TEST(Clamp, MinAboveMaxGivesMaxLikePyTorch) {
  Tensor x = tensor<double>({-2.0, 0.0, 0.7, 3.0});
  x.set_requires_grad(true);
  Tensor y = clamp(x, 1.0, 0.5);
  for (double v : vals(y)) EXPECT_EQ(v, 0.5);
  sum(y).backward();
  for (double g : vals(x.grad())) EXPECT_EQ(g, 0.0);
}

TEST(Clamp, GradientPassesAtTheBounds) {
  Tensor x = tensor<double>({-1.0, -0.5, 0.0, 0.5, 1.0});
  x.set_requires_grad(true);
  sum(clamp(x, -0.5, 0.5)).backward();
  EXPECT_EQ(vals(x.grad()), (std::vector<double>{0, 1, 1, 1, 0}));
}

TEST(Operators, ComposeWithAutograd) {
  Tensor y = tensor<double>({1.0, 2.0, 3.0});
  Tensor t = tensor<double>({0.5, 2.5, 1.0});
  y.set_requires_grad(true);
  Tensor loss = sum((y - t) * (y - t));
  EXPECT_NEAR(loss.item<double>(), 0.25 + 0.25 + 4.0, 1e-15);
  loss.backward();
  EXPECT_EQ(vals(y.grad()), (std::vector<double>{1.0, -1.0, 4.0}));
  const auto v = vals(2.0 * y + 1.0 - y / 2.0 - (-y) + 1.0 / y - 3.0);
  const std::vector<double> yv = {1, 2, 3};
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(v[i], 2 * yv[i] + 1 - yv[i] / 2 + yv[i] + 1 / yv[i] - 3, 1e-14);
}

TEST(Binary, BroadcastGradientShapesAndMixedStrides) {
  Tensor a = randn({4, 1, 3}, {DType::f64, nullptr});
  Tensor b = randn({5, 1}, {DType::f64, nullptr});
  a.set_requires_grad(true);
  b.set_requires_grad(true);
  Tensor y = mul(a, b);
  EXPECT_EQ(y.sizes(), Dims({4, 5, 3}));
  sum(y).backward();
  EXPECT_EQ(a.grad().sizes(), a.sizes());
  EXPECT_EQ(b.grad().sizes(), b.sizes());
  const auto av = vals(a), bv = vals(b), ga = vals(a.grad()), gb = vals(b.grad());
  double sb = 0;
  for (double v : bv) sb += v;
  for (int i = 0; i < 12; ++i) EXPECT_NEAR(ga[i], sb, 1e-12);
  double sa = 0;
  for (double v : av) sa += v;
  for (int j = 0; j < 5; ++j) EXPECT_NEAR(gb[j], sa, 1e-12);
  // A transposed operand broadcast against a row.
  Tensor m = randn({6, 4}, {DType::f64, nullptr}).t();
  Tensor r = randn({6}, {DType::f64, nullptr});
  const auto out = vals(add(m, r));
  const auto mv = vals(m), rv = vals(r);
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 6; ++j) EXPECT_EQ(out[i * 6 + j], mv[i * 6 + j] + rv[j]);
}

TEST(Binary, EmptyTensors) {
  EXPECT_EQ(add(zeros({0, 3}), zeros({3})).sizes(), Dims({0, 3}));
  EXPECT_EQ(exp(zeros({2, 0})).numel(), 0);
}

}  // namespace
}  // namespace strata
