// Accuracy sweeps of the f32 array kernels (ops/detail/cpu/vec_math.h) against f64 references: every
// kernel table this CPU can run (the portable one always, AVX-512 where present), over dense grids,
// random inputs across the whole exponent range, special values and every tail length.

#include "ops/detail/cpu/vec_math.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace strata {
namespace {

using ops::cpu::vec::Kernels;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

std::vector<const Kernels*> tables() {
  std::vector<const Kernels*> t = {&ops::cpu::vec::generic_kernels()};
  if (ops::cpu::vec::avx512_kernels() != nullptr) t.push_back(ops::cpu::vec::avx512_kernels());
  return t;
}

/// Error of `got` against the f64 reference in units of the f32 ulp at the reference (denormal
/// spacing below FLT_MIN).
double ulp_err(float got, double ref) {
  const double a = std::max(std::abs(ref), static_cast<double>(std::numeric_limits<float>::min()));
  const double ulp = std::ldexp(1.0, std::ilogb(a) - 23);
  return std::abs(static_cast<double>(got) - ref) / ulp;
}

std::vector<float> grid(double lo, double hi, int n) {
  std::vector<float> v;
  for (int i = 0; i < n; ++i) v.push_back(static_cast<float>(lo + (hi - lo) * i / (n - 1)));
  return v;
}

/// Random floats with uniformly distributed bit patterns of either sign and |x| in [lo, hi].
std::vector<float> random_floats(float lo, float hi, int n, uint32_t seed) {
  std::mt19937 gen(seed);
  const uint32_t blo = std::bit_cast<uint32_t>(lo), bhi = std::bit_cast<uint32_t>(hi);
  std::uniform_int_distribution<uint32_t> bits(blo, bhi);
  std::vector<float> v;
  for (int i = 0; i < n; ++i) {
    const float f = std::bit_cast<float>(bits(gen));
    v.push_back(i % 2 ? -f : f);
  }
  return v;
}

struct Worst {
  double err = 0;
  float at = 0;
  void update(double e, float x) {
    if (e > err || std::isnan(e)) {
      err = std::isnan(e) ? kInf : e;
      at = x;
    }
  }
};

/// Max ulp error of kernel `k` over x against `ref` (references that are NaN or inf are skipped:
/// the special-value tests cover them).
template <typename Ref>
Worst sweep_ulp(ops::cpu::vec::UnaryFn k, const std::vector<float>& x, Ref ref) {
  std::vector<float> y(x.size());
  k(x.data(), y.data(), static_cast<int64_t>(x.size()));
  Worst w;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double r = ref(static_cast<double>(x[i]));
    if (!std::isfinite(r)) continue;
    w.update(ulp_err(y[i], r), x[i]);
  }
  return w;
}

/// Max relative error of `k` over x against `ref`, with |ref| floored at `floor`.
template <typename Ref>
Worst sweep_rel(ops::cpu::vec::UnaryFn k, const std::vector<float>& x, Ref ref, double floor) {
  std::vector<float> y(x.size());
  k(x.data(), y.data(), static_cast<int64_t>(x.size()));
  Worst w;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double r = ref(static_cast<double>(x[i]));
    w.update(std::abs(static_cast<double>(y[i]) - r) / std::max(std::abs(r), floor), x[i]);
  }
  return w;
}

double gelu_ref(double x) { return 0.5 * x * std::erfc(-x / std::sqrt(2.0)); }
double gelu_grad_ref(double x) {
  return 0.5 * std::erfc(-x / std::sqrt(2.0)) + x * std::exp(-0.5 * x * x) / std::sqrt(2.0 * M_PI);
}
double sigmoid_ref(double x) { return 1.0 / (1.0 + std::exp(-x)); }

std::vector<float> concat(std::vector<float> a, const std::vector<float>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Measured maxima (generic / AVX-512): exp 1.23 / 0.86 ulp (0.77 / 0.83 denormal ulp below
// FLT_MIN), sigmoid 2.37 / 2.17 ulp, tanh 1.27 / 1.37 ulp, gelu 4.5e-7 relative (both), gelu's
// gradient 4.4e-7 (both) relative to its cancelling terms.

TEST(VecMath, ExpIsWithinOneAndAHalfUlp) {
  // Normal results, then results in the denormal range (graded in denormal ulps).
  const auto x = concat(grid(-87.3, 88.7, 400001), random_floats(1e-30f, 88.7f, 200000, 1));
  const auto sub = grid(-103.9, -87.4, 100001);
  for (const Kernels* k : tables()) {
    const Worst w = sweep_ulp(k->exp, x, [](double v) { return std::exp(v); });
    EXPECT_LT(w.err, 1.5) << k->isa << " at x = " << w.at;
    const Worst s = sweep_ulp(k->exp, sub, [](double v) { return std::exp(v); });
    EXPECT_LT(s.err, 1.5) << k->isa << " at x = " << s.at;
  }
}

TEST(VecMath, SigmoidIsRelativeAccurate) {
  const auto x = concat(grid(-87, 40, 400001), random_floats(1e-30f, 80.0f, 200000, 2));
  for (const Kernels* k : tables()) {
    const Worst w = sweep_ulp(k->sigmoid, x, sigmoid_ref);
    EXPECT_LT(w.err, 2.5) << k->isa << " at x = " << w.at;
  }
}

TEST(VecMath, TanhIsWithinTwoUlps) {
  const auto x = concat(grid(-12, 12, 400001), random_floats(1e-30f, 20.0f, 200000, 3));
  for (const Kernels* k : tables()) {
    const Worst w = sweep_ulp(k->tanh, x, [](double v) { return std::tanh(v); });
    EXPECT_LE(w.err, 2.0) << k->isa << " at x = " << w.at;
  }
}

TEST(VecMath, GeluErfIsRelativeAccurate) {
  // To 1e-6 relative (measured: 5e-7) from x = -13, where the value turns denormal, upwards:
  // erfc's exponent -x^2/2 is formed exactly, so the far negative tail keeps its accuracy.
  const auto x = concat(grid(-13, 10, 400001), random_floats(1e-30f, 13.0f, 100000, 4));
  const auto pos = random_floats(13.0f, 1e30f, 100000, 5);
  std::vector<float> pos_only;
  for (float v : pos) pos_only.push_back(std::abs(v));
  for (const Kernels* k : tables()) {
    Worst w = sweep_rel(k->gelu_erf, x, gelu_ref, 1e-30);
    EXPECT_LT(w.err, 1e-6) << k->isa << " at x = " << w.at;
    w = sweep_rel(k->gelu_erf, pos_only, gelu_ref, 1e-30);
    EXPECT_LT(w.err, 1e-6) << k->isa << " at x = " << w.at;
  }
}

TEST(VecMath, GeluErfGradIsAccurate) {
  // Φ(x) + x φ(x) has a root near x = -0.75, so the error is measured relative to
  // max(|value|, Φ(x)) there (the size of the terms that cancel).
  const auto x = concat(grid(-8, 8, 200001), random_floats(1e-30f, 8.0f, 100000, 6));
  for (const Kernels* k : tables()) {
    std::vector<float> g(x.size()), out(x.size());
    std::mt19937 gen(7);
    std::uniform_real_distribution<float> u(-2.0f, 2.0f);
    for (float& v : g) v = u(gen);
    k->gelu_erf_grad(g.data(), x.data(), out.data(), static_cast<int64_t>(x.size()));
    Worst w;
    for (std::size_t i = 0; i < x.size(); ++i) {
      const double xd = x[i], ref = g[i] * gelu_grad_ref(xd);
      const double terms = std::max(std::abs(gelu_grad_ref(xd)), 0.5 * std::erfc(-xd / std::sqrt(2.0)));
      const double scale = std::abs(g[i]) * terms;
      w.update(std::abs(out[i] - ref) / std::max(scale, 1e-30), x[i]);
    }
    EXPECT_LT(w.err, 1e-6) << k->isa << " at x = " << w.at;
  }
}

TEST(VecMath, SpecialValues) {
  const std::vector<float> x = {0.0f, -0.0f, kInf, -kInf, kNaN, 1e-40f, -1e-40f, 100.0f, -200.0f, 89.0f, -104.5f};
  const auto n = static_cast<int64_t>(x.size());
  for (const Kernels* k : tables()) {
    SCOPED_TRACE(k->isa);
    std::vector<float> y(x.size());
    k->exp(x.data(), y.data(), n);
    EXPECT_EQ(y[0], 1.0f);
    EXPECT_EQ(y[1], 1.0f);
    EXPECT_EQ(y[2], kInf);
    EXPECT_EQ(y[3], 0.0f);
    EXPECT_TRUE(std::isnan(y[4]));
    EXPECT_EQ(y[5], 1.0f);
    EXPECT_EQ(y[7], kInf);
    EXPECT_EQ(y[8], 0.0f);
    EXPECT_EQ(y[9], kInf);
    EXPECT_EQ(y[10], 0.0f);
    k->sigmoid(x.data(), y.data(), n);
    EXPECT_EQ(y[0], 0.5f);
    EXPECT_EQ(y[2], 1.0f);
    EXPECT_EQ(y[3], 0.0f);
    EXPECT_TRUE(std::isnan(y[4]));
    EXPECT_EQ(y[7], 1.0f);
    EXPECT_EQ(y[8], 0.0f);
    k->tanh(x.data(), y.data(), n);
    EXPECT_EQ(y[0], 0.0f);
    EXPECT_TRUE(std::signbit(y[1]));
    EXPECT_EQ(y[2], 1.0f);
    EXPECT_EQ(y[3], -1.0f);
    EXPECT_TRUE(std::isnan(y[4]));
    EXPECT_EQ(y[5], 1e-40f);
    EXPECT_EQ(y[6], -1e-40f);
    EXPECT_EQ(y[7], 1.0f);
    EXPECT_EQ(y[8], -1.0f);
    k->gelu_erf(x.data(), y.data(), n);
    EXPECT_EQ(y[0], 0.0f);
    EXPECT_EQ(y[2], kInf);
    EXPECT_TRUE(std::isnan(y[3]));  // -inf * 0, as in PyTorch
    EXPECT_TRUE(std::isnan(y[4]));
    EXPECT_EQ(y[7], 100.0f);
    EXPECT_EQ(y[8], 0.0f);
    const std::vector<float> ones(x.size(), 1.0f);
    k->gelu_erf_grad(ones.data(), x.data(), y.data(), n);
    EXPECT_EQ(y[0], 0.5f);
    EXPECT_TRUE(std::isnan(y[4]));
    EXPECT_EQ(y[7], 1.0f);
    EXPECT_EQ(y[8], 0.0f);
    // Reductions: NaN poisons the sum; -inf terms add 0; max of nothing is -inf.
    EXPECT_TRUE(std::isnan(k->exp_shift_sum(x.data(), 0.0f, nullptr, n)));
    const std::vector<float> r = {-kInf, 0.0f, -kInf};
    EXPECT_EQ(k->exp_shift_sum(r.data(), 0.0f, nullptr, 3), 1.0f);
    EXPECT_EQ(k->max(r.data(), 3), 0.0f);
    EXPECT_EQ(k->max(r.data(), 0), -kInf);
    EXPECT_EQ(k->exp_shift_sum(r.data(), 0.0f, nullptr, 0), 0.0f);
  }
}

/// Every kernel gives each element the same value whatever the length and offset of the call
/// (vector body, masked or scalar tail), and may run in place.
TEST(VecMath, ResultsDoNotDependOnLengthOrPosition) {
  std::vector<float> x = grid(-9, 9, 77);
  std::vector<float> g = grid(-1, 2, 77);
  for (const Kernels* k : tables()) {
    SCOPED_TRACE(k->isa);
    for (ops::cpu::vec::UnaryFn f : {k->exp, k->sigmoid, k->tanh, k->gelu_erf}) {
      std::vector<float> full(x.size());
      f(x.data(), full.data(), static_cast<int64_t>(x.size()));
      for (int64_t len = 0; len <= 40; ++len)
        for (int64_t off : {0, 1, 5, 17}) {
          std::vector<float> y(x.begin() + off, x.begin() + off + len);
          f(y.data(), y.data(), len);  // in place
          for (int64_t i = 0; i < len; ++i) ASSERT_EQ(y[i], full[off + i]) << "len " << len << " off " << off;
        }
    }
    std::vector<float> full(x.size());
    k->gelu_erf_grad(g.data(), x.data(), full.data(), static_cast<int64_t>(x.size()));
    for (int64_t len = 0; len <= 40; ++len) {
      std::vector<float> out(g.begin() + 3, g.begin() + 3 + len);
      k->gelu_erf_grad(out.data(), x.data() + 3, out.data(), len);  // out aliases g
      for (int64_t i = 0; i < len; ++i) ASSERT_EQ(out[i], full[3 + i]) << "len " << len;
    }
  }
}

TEST(VecMath, RowReductionsMatchF64) {
  std::mt19937 gen(9);
  std::normal_distribution<float> nd(0.0f, 4.0f);
  for (const Kernels* k : tables()) {
    SCOPED_TRACE(k->isa);
    for (int64_t n : {1, 2, 15, 16, 17, 31, 32, 33, 100, 1000, 1037}) {
      std::vector<float> x(static_cast<std::size_t>(n));
      for (float& v : x) v = nd(gen);
      EXPECT_EQ(k->max(x.data(), n), *std::max_element(x.begin(), x.end())) << n;
      const float m = k->max(x.data(), n);
      double ref = 0;
      for (float v : x) ref += std::exp(static_cast<double>(v) - m);
      std::vector<float> y(x.size(), -1.0f);
      const float s = k->exp_shift_sum(x.data(), m, y.data(), n);
      EXPECT_NEAR(s, ref, 1e-6 * ref) << n;
      EXPECT_EQ(k->exp_shift_sum(x.data(), m, nullptr, n), s) << n;
      std::vector<float> e(x.size());
      std::vector<float> shifted(x.size());
      for (std::size_t i = 0; i < x.size(); ++i) shifted[i] = x[i] - m;
      k->exp(shifted.data(), e.data(), n);
      EXPECT_EQ(y, e) << n;
    }
  }
}

TEST(VecMath, DispatchPicksTheBestAvailableTable) {
  const Kernels& k = ops::cpu::vec::kernels();
  if (ops::cpu::vec::avx512_kernels() != nullptr)
    EXPECT_EQ(std::string(k.isa), "avx512");
  else
    EXPECT_EQ(std::string(k.isa), "generic");
}

}  // namespace
}  // namespace strata
