// Factories: empty/zeros/ones/full, *_like, arange, random factories (shapes, ranges, dtype
// checks), from_blob, from_buffer, tensor<T>, scalar_tensor, item().

#include "core/factories.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <new>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "test_util.h"

namespace {

using namespace strata;
using strata_test::iota;
using strata_test::Mentions;
using strata_test::raw_values;
using strata_test::V;
using strata_test::values;
using strata_test::vec;
using ::testing::AllOf;
using ::testing::AnyOf;
using ::testing::HasSubstr;
using D = std::vector<double>;

constexpr DType kAll[] = {DType::f32, DType::f64, DType::bf16,    DType::i32,
                          DType::i64, DType::u8,  DType::boolean, DType::f16};
constexpr DType kFloating[] = {DType::f32, DType::f64, DType::bf16, DType::f16};
constexpr DType kIntegral[] = {DType::i32, DType::i64, DType::u8};

TensorOptions opt(DType dt) { return {dt, nullptr}; }

// ---- empty / zeros / ones / full ---------------------------------------------------------------

TEST(Factories, EmptyLayoutForEveryDType) {
  for (DType dt : kAll) {
    SCOPED_TRACE(dtype_name(dt));
    Tensor t = empty({2, 3, 4}, opt(dt));
    ASSERT_TRUE(t.defined());
    EXPECT_EQ(t.dtype(), dt);
    EXPECT_LAYOUT(t, ({2, 3, 4}), ({12, 4, 1}), 0);
    EXPECT_EQ(t.numel(), 24);
    EXPECT_TRUE(t.is_contiguous());
    EXPECT_EQ(t.itemsize(), itemsize(dt));
    EXPECT_GE(t.storage().nbytes(), 24 * itemsize(dt));
    EXPECT_EQ(t.nbytes(), 24 * itemsize(dt));
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(t.data_ptr()) % Allocator::kAlignment, 0u);
    std::memset(t.data_ptr(), 0, t.nbytes());  // whole range writable
  }
  EXPECT_EQ(empty({}).dim(), 0);
  EXPECT_EQ(empty({}).numel(), 1);
  EXPECT_EQ(empty({0, 5}).numel(), 0);
  EXPECT_EQ(empty({2}).dtype(), DType::f32);  // default dtype
}

TEST(Factories, ZerosOnesFullForEveryDType) {
  for (DType dt : kAll) {
    SCOPED_TRACE(dtype_name(dt));
    Tensor z = zeros({3, 2}, opt(dt));
    EXPECT_EQ(z.dtype(), dt);
    EXPECT_EQ(values(z), D(6, 0.0));
    Tensor o = ones({2, 3}, opt(dt));
    EXPECT_EQ(values(o), D(6, 1.0));
    EXPECT_EQ(raw_values(o), D(6, 1.0));
    Tensor f = full({4}, 5.0, opt(dt));
    EXPECT_EQ(values(f), D(4, dt == DType::boolean ? 1.0 : 5.0));
  }
  EXPECT_EQ(values(full({2}, 2.7, opt(DType::i32))), D(2, 2.0));
  EXPECT_EQ(values(full({2}, 300, opt(DType::u8))), D(2, 255.0));
  EXPECT_EQ(values(full({2}, 0.0, opt(DType::boolean))), D(2, 0.0));
  EXPECT_EQ(values(full({2}, 1.00390625, opt(DType::bf16))), D(2, 1.0));
  EXPECT_EQ(full({}, 3.0).item<float>(), 3.0f);
  EXPECT_EQ(zeros({0}).numel(), 0);
  EXPECT_EQ(ones({}).item<double>(), 1.0);
}

TEST(Factories, NegativeSizesAreErrors) {
  EXPECT_THAT(ERROR_MESSAGE(empty({2, -1})), AllOf(HasSubstr("empty"), HasSubstr("[2, -1]")));
  EXPECT_THAT(ERROR_MESSAGE(zeros({-3})), AllOf(HasSubstr("zeros"), HasSubstr("-3")));
  EXPECT_THAT(ERROR_MESSAGE(ones({4, -2})), AllOf(HasSubstr("ones"), HasSubstr("-2")));
  EXPECT_THAT(ERROR_MESSAGE(full({-5}, 1.0)), AllOf(HasSubstr("full"), HasSubstr("-5")));
  EXPECT_THAT(ERROR_MESSAGE(rand({-1})), AllOf(HasSubstr("rand"), HasSubstr("-1")));
  EXPECT_THAT(ERROR_MESSAGE(randn({2, -7})), AllOf(HasSubstr("randn"), HasSubstr("-7")));
  EXPECT_THAT(ERROR_MESSAGE(uniform({-4}, 0, 1)), AllOf(HasSubstr("uniform"), HasSubstr("-4")));
  EXPECT_THAT(ERROR_MESSAGE(normal({-4}, 0, 1)), AllOf(HasSubstr("normal"), HasSubstr("-4")));
  EXPECT_THAT(ERROR_MESSAGE(randint(0, 5, {-6})), AllOf(HasSubstr("randint"), HasSubstr("-6")));
  float buf[4] = {};
  EXPECT_THAT(ERROR_MESSAGE(from_blob(buf, {-2}, DType::f32)), AllOf(HasSubstr("from_blob"), HasSubstr("-2")));
  EXPECT_THAT(ERROR_MESSAGE(from_buffer(buf, sizeof buf, {-1, 4}, DType::f32)),
              AllOf(HasSubstr("from_buffer"), HasSubstr("-1")));
}

TEST(Factories, HugeSizesAreErrorsNotCrashes) {
  const int64_t big = int64_t{1} << 40;
  EXPECT_THAT(ERROR_MESSAGE(empty({big, big})), HasSubstr("empty"));
  // Fits in int64 elements but not in bytes (times itemsize): must not wrap around to a small
  // allocation.
  EXPECT_THAT(ERROR_MESSAGE(empty({int64_t{1} << 62}, opt(DType::f64))), HasSubstr("empty"));
  EXPECT_THAT(ERROR_MESSAGE(zeros({int64_t{1} << 61, 4}, opt(DType::i32))), HasSubstr("zeros"));
}

TEST(Factories, Like) {
  Tensor base = arange(0, 6, 1, opt(DType::i32)).view({2, 3}).t();  // non-contiguous i32
  for (const Tensor& t : {empty_like(base), zeros_like(base), ones_like(base)}) {
    EXPECT_EQ(vec(t.sizes()), (V{3, 2}));
    EXPECT_EQ(t.dtype(), DType::i32);
    EXPECT_FALSE(t.shares_storage(base));
  }
  EXPECT_EQ(values(zeros_like(base)), D(6, 0.0));
  EXPECT_EQ(values(ones_like(base)), D(6, 1.0));
  Tensor s = zeros_like(scalar_tensor(3.0, DType::bf16));
  EXPECT_EQ(s.dim(), 0);
  EXPECT_EQ(s.dtype(), DType::bf16);
  // Expanded input: the result has real storage for every element.
  Tensor e = ones_like(arange(0, 3, 1, opt(DType::f32)).expand({4, 3}));
  EXPECT_EQ(vec(e.sizes()), (V{4, 3}));
  e.select(0, 0).fill_(5);
  EXPECT_EQ(e.at({1, 0}), 1.0);
  EXPECT_THAT(ERROR_MESSAGE(zeros_like(Tensor())), HasSubstr("undefined"));
}

// ---- arange ------------------------------------------------------------------------------------

TEST(Arange, IntegralArgumentsGiveI64) {
  Tensor a = arange(5);
  EXPECT_EQ(a.dtype(), DType::i64);
  EXPECT_EQ(vec(a.sizes()), (V{5}));
  EXPECT_EQ(values(a), iota(5));
  Tensor b = arange(1, 4);
  EXPECT_EQ(b.dtype(), DType::i64);
  EXPECT_EQ(values(b), (D{1, 2, 3}));
  Tensor c = arange(5, 0, -1);
  EXPECT_EQ(c.dtype(), DType::i64);
  EXPECT_EQ(values(c), (D{5, 4, 3, 2, 1}));
  EXPECT_EQ(values(arange(0, 10, 3)), (D{0, 3, 6, 9}));
  EXPECT_EQ(values(arange(-3, 3, 2)), (D{-3, -1, 1}));
  EXPECT_EQ(arange(0, 0).numel(), 0);
  EXPECT_EQ(arange(3, 3).numel(), 0);
  EXPECT_EQ(arange(0).numel(), 0);
}

TEST(Arange, FractionalArgumentsGiveF32) {
  Tensor a = arange(0, 1, 0.25);
  EXPECT_EQ(a.dtype(), DType::f32);
  EXPECT_EQ(values(a), (D{0, 0.25, 0.5, 0.75}));
  Tensor b = arange(2.5);
  EXPECT_EQ(b.dtype(), DType::f32);
  EXPECT_EQ(values(b), (D{0, 1, 2}));
  Tensor c = arange(0, 1, 0.3);  // ceil(1 / 0.3) = 4 elements, like torch.arange
  EXPECT_EQ(c.numel(), 4);
  EXPECT_NEAR(c.at({3}), 0.9, 1e-6);
  Tensor d = arange(1, -1, -0.5);
  EXPECT_EQ(values(d), (D{1, 0.5, 0, -0.5}));
  Tensor e = arange(0.5, 3);
  EXPECT_EQ(e.dtype(), DType::f32);
  EXPECT_EQ(values(e), (D{0.5, 1.5, 2.5}));
}

TEST(Arange, ExplicitDType) {
  for (DType dt : {DType::f32, DType::f64, DType::bf16, DType::i32, DType::i64, DType::u8}) {
    SCOPED_TRACE(dtype_name(dt));
    Tensor a = arange(0, 5, 1, opt(dt));
    EXPECT_EQ(a.dtype(), dt);
    EXPECT_EQ(values(a), iota(5));
  }
  Tensor f = arange(0, 1, 0.1, opt(DType::f64));
  EXPECT_EQ(f.numel(), 10);
  EXPECT_NEAR(f.at({9}), 0.9, 1e-12);
  // Element i is start + i * step computed in double, not an accumulated sum.
  Tensor g = arange(0, 1000, 0.1, opt(DType::f64));
  EXPECT_EQ(g.numel(), 10000);
  EXPECT_DOUBLE_EQ(g.at({9999}), 9999 * 0.1);
  Tensor l = arange(0, 3e9, 1e9, opt(DType::i64));
  EXPECT_EQ(values(l), (D{0, 1e9, 2e9}));
}

TEST(Arange, HugeLengthIsAnErrorNotAHeapOverflow) {
  // 2^61 f64 elements are 2^64 bytes: a byte count computed in size_t wraps to 0.
  EXPECT_STRATA_ERROR_ISOLATED(arange(0, 0x1.0p61, 1, opt(DType::f64)), "arange|empty");
  EXPECT_STRATA_ERROR_ISOLATED(arange(0, 0x1.0p62, 1, opt(DType::i32)), "arange|empty");
}

TEST(Arange, Errors) {
  EXPECT_THAT(ERROR_MESSAGE(arange(0, 5, 0)), AllOf(HasSubstr("arange"), HasSubstr("step")));
  EXPECT_THAT(ERROR_MESSAGE(arange(0, 5, -1)), HasSubstr("arange"));  // like torch.arange
  EXPECT_THAT(ERROR_MESSAGE(arange(5, 0, 1)), HasSubstr("arange"));
  EXPECT_THAT(ERROR_MESSAGE(arange(0, std::numeric_limits<double>::infinity())), HasSubstr("arange"));
  EXPECT_THAT(ERROR_MESSAGE(arange(std::nan(""), 5)), HasSubstr("arange"));
  EXPECT_THAT(ERROR_MESSAGE(arange(0, 5, std::nan(""))), HasSubstr("arange"));
  EXPECT_THAT(ERROR_MESSAGE(arange(0, 2, 1, opt(DType::boolean))), AllOf(HasSubstr("arange"), HasSubstr("bool")));
  EXPECT_THAT(ERROR_MESSAGE(arange(0, 1e30, 1e-30)), HasSubstr("arange"));  // absurd length
  // Values that do not fit the requested dtype.
  EXPECT_THAT(ERROR_MESSAGE(arange(0, 300, 1, opt(DType::u8))), AllOf(HasSubstr("arange"), HasSubstr("u8")));
}

// ---- rand / uniform ----------------------------------------------------------------------------

TEST(Rand, ShapeDTypeAndRange) {
  manual_seed(1);
  for (DType dt : kFloating) {
    SCOPED_TRACE(dtype_name(dt));
    Tensor r = rand({256, 256}, opt(dt));
    EXPECT_EQ(r.dtype(), dt);
    EXPECT_LAYOUT(r, ({256, 256}), ({256, 1}), 0);
    double lo = 1, hi = 0, sum = 0;
    for (double v : raw_values(r)) {
      lo = std::min(lo, v);
      hi = std::max(hi, v);
      sum += v;
    }
    EXPECT_GE(lo, 0.0);
    EXPECT_LT(hi, 1.0) << "rand must never return 1.0 (also after rounding to the dtype)";
    EXPECT_LT(lo, 0.001);
    EXPECT_GT(hi, 0.99);
    EXPECT_NEAR(sum / r.numel(), 0.5, 0.01);
  }
  EXPECT_EQ(rand({}).dim(), 0);
  EXPECT_EQ(rand({0, 3}).numel(), 0);
  EXPECT_EQ(rand({3}).dtype(), DType::f32);
}

TEST(Rand, UniformHistogramIsFlat) {
  Generator g(99);
  Tensor r = rand({100000}, {}, &g);
  std::vector<int> bins(10, 0);
  const float* p = r.data<float>();
  for (int64_t i = 0; i < r.numel(); ++i) bins[static_cast<std::size_t>(p[i] * 10)]++;
  for (int b : bins) EXPECT_NEAR(b, 10000, 500);  // ~5 sigma
}

TEST(Uniform, Range) {
  Generator g(5);
  for (DType dt : kFloating) {
    SCOPED_TRACE(dtype_name(dt));
    Tensor u = uniform({50000}, -2.0, 3.0, opt(dt), &g);
    EXPECT_EQ(u.dtype(), dt);
    double lo = 10, hi = -10, sum = 0;
    for (double v : raw_values(u)) {
      lo = std::min(lo, v);
      hi = std::max(hi, v);
      sum += v;
    }
    EXPECT_GE(lo, -2.0);
    EXPECT_LT(hi, 3.0);
    EXPECT_LT(lo, -1.9);
    EXPECT_GT(hi, 2.9);
    EXPECT_NEAR(sum / u.numel(), 0.5, 0.05);
  }
  Tensor narrow_range = uniform({1000}, 1.0, 1.0 + 1e-3, opt(DType::f64), &g);
  for (double v : values(narrow_range)) {
    EXPECT_GE(v, 1.0);
    EXPECT_LT(v, 1.001);
  }
  // One-ulp ranges: [1, next float after 1) holds only 1.0 in that dtype; rounding low + u * span
  // to the dtype must not produce `high`.
  int64_t f32_not_one = 0, f64_not_one = 0;
  for (double v : values(uniform({1000}, 1.0, 1.0 + 0x1.0p-23, opt(DType::f32), &g))) f32_not_one += v != 1.0;
  for (double v : values(uniform({1000}, 1.0, 1.0 + 0x1.0p-52, opt(DType::f64), &g))) f64_not_one += v != 1.0;
  EXPECT_EQ(f32_not_one, 0) << "f32 values in [1, 1 + 2^-23) can only be 1.0";
  EXPECT_EQ(f64_not_one, 0) << "f64 values in [1, 1 + 2^-52) can only be 1.0";
  // Near-1 bf16: [1, 1.0078125) contains just 1.0 in bf16.
  int64_t not_one = 0;
  for (double v : values(uniform({1000}, 1.0, 1.0078125, opt(DType::bf16), &g))) not_one += v != 1.0;
  EXPECT_EQ(not_one, 0) << "bf16 values in [1, 1.0078125) can only be 1.0";
}

TEST(Rand, DTypeAndArgumentErrors) {
  for (DType dt : {DType::i32, DType::i64, DType::u8, DType::boolean}) {
    SCOPED_TRACE(dtype_name(dt));
    const std::string name(dtype_name(dt));
    EXPECT_THAT(ERROR_MESSAGE(rand({2}, opt(dt))), AllOf(HasSubstr("rand"), HasSubstr(name)));
    EXPECT_THAT(ERROR_MESSAGE(randn({2}, opt(dt))), AllOf(HasSubstr("randn"), HasSubstr(name)));
    EXPECT_THAT(ERROR_MESSAGE(uniform({2}, 0, 1, opt(dt))), AllOf(HasSubstr("uniform"), HasSubstr(name)));
    EXPECT_THAT(ERROR_MESSAGE(normal({2}, 0, 1, opt(dt))), AllOf(HasSubstr("normal"), HasSubstr(name)));
  }
  EXPECT_THAT(ERROR_MESSAGE(uniform({2}, 3.0, -2.0)), AllOf(HasSubstr("uniform"), HasSubstr("3"), HasSubstr("-2")));
  EXPECT_THAT(ERROR_MESSAGE(uniform({2}, 0.0, std::numeric_limits<double>::infinity())), HasSubstr("uniform"));
  EXPECT_THAT(ERROR_MESSAGE(uniform({2}, std::nan(""), 1.0)), HasSubstr("uniform"));
  EXPECT_THAT(ERROR_MESSAGE(normal({2}, 0.0, -1.0)), AllOf(HasSubstr("normal"), HasSubstr("std"), HasSubstr("-1")));
  EXPECT_THAT(ERROR_MESSAGE(normal({2}, 0.0, std::nan(""))), HasSubstr("normal"));
}

// ---- randn / normal ----------------------------------------------------------------------------

struct Moments {
  double mean, std, frac_within_1sd;
};
Moments moments(const D& v, double mu = 0, double sigma = 1) {
  double s = 0, s2 = 0;
  int64_t within = 0;
  for (double x : v) {
    s += x;
    if (std::abs(x - mu) < sigma) ++within;
  }
  const double m = s / static_cast<double>(v.size());
  for (double x : v) s2 += (x - m) * (x - m);
  return {m, std::sqrt(s2 / static_cast<double>(v.size() - 1)),
          static_cast<double>(within) / static_cast<double>(v.size())};
}

TEST(Randn, Moments) {
  // n = 2^16: the standard error of the mean is 0.0039, of the std 0.0028 and of the 1-sigma
  // fraction 0.0018; tolerances are ~5 standard errors.
  for (DType dt : kFloating) {
    SCOPED_TRACE(dtype_name(dt));
    Generator g(2024);
    Tensor r = randn({1 << 16}, opt(dt), &g);
    EXPECT_EQ(r.dtype(), dt);
    const D v = raw_values(r);
    for (double x : v) ASSERT_TRUE(std::isfinite(x));
    const Moments m = moments(v);
    EXPECT_NEAR(m.mean, 0.0, 0.02);
    EXPECT_NEAR(m.std, 1.0, 0.014);
    EXPECT_NEAR(m.frac_within_1sd, 0.6827, 0.009);
    const double max_abs =
        std::max(std::abs(*std::min_element(v.begin(), v.end())), *std::max_element(v.begin(), v.end()));
    EXPECT_GT(max_abs, 3.3);  // tails exist (P(|x| > 3.3) = 1e-3)
    EXPECT_LT(max_abs, 7.0);
  }
}

TEST(Normal, MeanAndStd) {
  Generator g(7);
  Tensor r = normal({1 << 16}, 3.0, 2.0, opt(DType::f64), &g);
  const Moments m = moments(values(r), 3.0, 2.0);
  EXPECT_NEAR(m.mean, 3.0, 0.04);
  EXPECT_NEAR(m.std, 2.0, 0.03);
  EXPECT_NEAR(m.frac_within_1sd, 0.6827, 0.01);
  // std == 0 is allowed and gives the mean.
  EXPECT_EQ(values(normal({4}, 1.5, 0.0, {}, &g)), D(4, 1.5));
}

/// Hands out memory filled with 0xff bytes (NaN for floats, -1 / 255 / invalid bool for integers), so
/// that an element a factory forgets to write is visible.
class PoisonAllocation final : public Allocation {
 public:
  explicit PoisonAllocation(std::size_t n)
      : n_(n), p_(::operator new(n == 0 ? 1 : n, std::align_val_t{Allocator::kAlignment})) {
    std::memset(p_, 0xff, n == 0 ? 1 : n);
  }
  ~PoisonAllocation() override { ::operator delete(p_, std::align_val_t{Allocator::kAlignment}); }
  void* data() override { return p_; }
  std::size_t nbytes() const override { return n_; }

 private:
  std::size_t n_;
  void* p_;
};
class PoisonAllocator final : public Allocator {
 public:
  std::unique_ptr<Allocation> allocate(std::size_t nbytes) override {
    return std::make_unique<PoisonAllocation>(nbytes);
  }
  std::string_view name() const override { return "poison"; }
};

TEST(Factories, EveryElementIsWritten) {
  // Odd sizes catch generators that produce pairs or blocks of 4 and skip the tail.
  PoisonAllocator poison;
  for (int64_t n : {1, 2, 3, 5, 7, 9, 13, 1001}) {
    SCOPED_TRACE("n=" + std::to_string(n));
    for (DType dt : kFloating) {
      SCOPED_TRACE(dtype_name(dt));
      const TensorOptions o{dt, &poison};
      Generator g(11);
      for (const Tensor& t : {rand({n}, o, &g), randn({n}, o, &g), uniform({n}, -1, 1, o, &g), normal({n}, 0, 1, o, &g),
                              zeros({n}, o), ones({n}, o), full({n}, 2, o)}) {
        for (double v : raw_values(t)) ASSERT_TRUE(std::isfinite(v));
      }
      for (double v : raw_values(arange(0, static_cast<double>(n), 1, o))) ASSERT_TRUE(std::isfinite(v));
    }
    for (DType dt : kIntegral) {
      SCOPED_TRACE(dtype_name(dt));
      const TensorOptions o{dt, &poison};
      Generator g(12);
      for (double v : raw_values(randint(0, 10, {n}, o, &g))) {
        ASSERT_GE(v, 0);
        ASSERT_LT(v, 10);
      }
      for (double v : raw_values(zeros({n}, o))) ASSERT_EQ(v, 0);
    }
    const TensorOptions b{DType::boolean, &poison};
    const Tensor zb = zeros({n}, b);
    const Tensor ob = ones({n}, b);
    const Tensor fb = full({n}, 0.5, b);
    const auto* z = static_cast<const uint8_t*>(zb.data_ptr());
    const auto* o = static_cast<const uint8_t*>(ob.data_ptr());
    const auto* f = static_cast<const uint8_t*>(fb.data_ptr());
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_EQ(z[i], 0);
      ASSERT_EQ(o[i], 1) << "bool must be stored as 0/1";
      ASSERT_EQ(f[i], 1) << "bool must be stored as 0/1";
    }
  }
}

// ---- randint -----------------------------------------------------------------------------------

TEST(Randint, RangeAndCoverage) {
  Generator g(3);
  Tensor r = randint(0, 10, {2000}, {DType::i64, nullptr}, &g);
  EXPECT_EQ(r.dtype(), DType::i64);
  std::set<int64_t> seen;
  for (double v : values(r)) {
    EXPECT_GE(v, 0);
    EXPECT_LT(v, 10);
    EXPECT_EQ(v, std::floor(v));
    seen.insert(static_cast<int64_t>(v));
  }
  EXPECT_EQ(seen.size(), 10u);
  EXPECT_EQ(randint(0, 10, {3}).dtype(), DType::i64);  // default dtype

  for (DType dt : kIntegral) {
    SCOPED_TRACE(dtype_name(dt));
    const int64_t lo = dt == DType::u8 ? 250 : -5;
    const int64_t hi = dt == DType::u8 ? 256 : 5;
    Tensor t = randint(lo, hi, {1000}, opt(dt), &g);
    EXPECT_EQ(t.dtype(), dt);
    std::set<int64_t> s;
    for (double v : values(t)) {
      EXPECT_GE(v, lo);
      EXPECT_LT(v, hi);
      s.insert(static_cast<int64_t>(v));
    }
    EXPECT_EQ(static_cast<int64_t>(s.size()), hi - lo);
  }
  // A single value.
  EXPECT_EQ(values(randint(7, 8, {5}, {DType::i64, nullptr}, &g)), D(5, 7.0));
}

TEST(Randint, WideRangesUseAll64Bits) {
  Generator g(4);
  const int64_t hi = int64_t{1} << 40;
  Tensor r = randint(0, hi, {1000}, {DType::i64, nullptr}, &g);
  const int64_t* p = r.data<int64_t>();
  int64_t above_32_bits = 0;
  for (int64_t i = 0; i < 1000; ++i) {
    EXPECT_GE(p[i], 0);
    EXPECT_LT(p[i], hi);
    above_32_bits += p[i] >= (int64_t{1} << 32);
  }
  EXPECT_GT(above_32_bits, 900);
  const int64_t lo2 = -(int64_t{1} << 62), hi2 = int64_t{1} << 62;
  Tensor w = randint(lo2, hi2, {1000}, {DType::i64, nullptr}, &g);
  int64_t negative = 0;
  for (int64_t i = 0; i < 1000; ++i) {
    const int64_t v = w.data<int64_t>()[i];
    EXPECT_GE(v, lo2);
    EXPECT_LT(v, hi2);
    negative += v < 0;
  }
  EXPECT_NEAR(negative, 500, 100);
  // The full int64 range minus one must not overflow the range computation.
  Tensor full_range = randint(std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(), {100},
                              {DType::i64, nullptr}, &g);
  EXPECT_EQ(full_range.numel(), 100);
}

TEST(Randint, Errors) {
  EXPECT_THAT(ERROR_MESSAGE(randint(5, 5, {2})), AllOf(HasSubstr("randint"), HasSubstr("5")));
  EXPECT_THAT(ERROR_MESSAGE(randint(5, 1, {2})), AllOf(HasSubstr("randint"), HasSubstr("5"), HasSubstr("1")));
  for (DType dt : kFloating) {
    EXPECT_THAT(ERROR_MESSAGE(randint(0, 5, {2}, opt(dt))),
                AllOf(HasSubstr("randint"), HasSubstr(std::string(dtype_name(dt)))));
  }
  // Bounds that the dtype cannot represent.
  EXPECT_THAT(ERROR_MESSAGE(randint(0, 300, {2}, opt(DType::u8))), AllOf(HasSubstr("randint"), HasSubstr("u8")));
  EXPECT_THAT(ERROR_MESSAGE(randint(-1, 3, {2}, opt(DType::u8))), AllOf(HasSubstr("randint"), HasSubstr("u8")));
  EXPECT_THAT(ERROR_MESSAGE(randint(0, int64_t{1} << 40, {2}, opt(DType::i32))),
              AllOf(HasSubstr("randint"), HasSubstr("i32")));
}

// ---- eye / linspace / randperm (issue 26 part 4; tests/python/test_math_ops.py compares with torch)

TEST(Eye, SquareRectangularAndEveryDType) {
  EXPECT_EQ(values(eye(2)), (std::vector<double>{1, 0, 0, 1}));
  EXPECT_EQ(vec(eye(2, 3).sizes()), (V{2, 3}));
  EXPECT_EQ(values(eye(2, 3)), (std::vector<double>{1, 0, 0, 0, 1, 0}));
  EXPECT_EQ(values(eye(3, 1)), (std::vector<double>{1, 0, 0}));
  EXPECT_EQ(eye(0).numel(), 0);
  for (DType dt : {DType::f64, DType::i32, DType::boolean, DType::f16}) {
    EXPECT_EQ(eye(2, std::nullopt, opt(dt)).dtype(), dt);
    EXPECT_EQ(values(eye(2, std::nullopt, opt(dt))), (std::vector<double>{1, 0, 0, 1}));
  }
  EXPECT_THAT(ERROR_MESSAGE(eye(-1)), AllOf(HasSubstr("eye"), HasSubstr("-1")));
  EXPECT_THAT(ERROR_MESSAGE(eye(2, -3)), AllOf(HasSubstr("eye"), HasSubstr("-3")));
}

TEST(Linspace, BothEndsExactAndIntegerTruncation) {
  EXPECT_EQ(values(linspace(0, 1, 5)), (std::vector<double>{0, 0.25, 0.5, 0.75, 1}));
  const auto v = values(linspace(-2.5, 7, 11, opt(DType::f64)));
  EXPECT_EQ(v.front(), -2.5);
  EXPECT_EQ(v.back(), 7.0);
  EXPECT_EQ(values(linspace(3, 3, 1)), (std::vector<double>{3}));
  EXPECT_EQ(linspace(0, 1, 0).numel(), 0);
  // PyTorch's integer linspace: the ends converted first, then start + i * step (or end - ...).
  EXPECT_EQ(values(linspace(-2.5, 7, 11, opt(DType::i64))), (std::vector<double>{-2, -1, 0, 0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_THAT(ERROR_MESSAGE(linspace(0, 1, -1)), AllOf(HasSubstr("linspace"), HasSubstr("-1")));
  EXPECT_THAT(ERROR_MESSAGE(linspace(0, std::numeric_limits<double>::infinity(), 3)), HasSubstr("linspace"));
}

TEST(Randperm, IsASeededPermutation) {
  for (int64_t n : {0, 1, 2, 17, 1000}) {
    const auto v = values(randperm(n));
    std::vector<double> sorted = v;
    std::sort(sorted.begin(), sorted.end());
    EXPECT_EQ(sorted, iota(n)) << n;
  }
  Generator a(11), b(11);
  const auto first = values(randperm(500, opt(DType::i64), &a));
  EXPECT_EQ(values(randperm(500, opt(DType::i64), &b)), first);
  EXPECT_NE(values(randperm(500, opt(DType::i64), &a)), first);  // the generator moved on
  EXPECT_EQ(randperm(5, opt(DType::f32)).dtype(), DType::f32);
  EXPECT_THAT(ERROR_MESSAGE(randperm(-2)), AllOf(HasSubstr("randperm"), HasSubstr("-2")));
  EXPECT_THAT(ERROR_MESSAGE(randperm(300, opt(DType::u8))), AllOf(HasSubstr("randperm"), HasSubstr("u8")));
  EXPECT_THAT(ERROR_MESSAGE(randperm(3, opt(DType::boolean))), AllOf(HasSubstr("randperm"), HasSubstr("bool")));
}

// ---- from_blob ---------------------------------------------------------------------------------

TEST(FromBlob, WrapsWithoutCopying) {
  float buf[6] = {0, 1, 2, 3, 4, 5};
  Tensor t = from_blob(buf, {2, 3}, DType::f32);
  EXPECT_EQ(t.data_ptr(), static_cast<void*>(buf));
  EXPECT_LAYOUT(t, ({2, 3}), ({3, 1}), 0);
  EXPECT_EQ(t.dtype(), DType::f32);
  EXPECT_EQ(values(t), iota(6));
  buf[4] = 40;
  EXPECT_EQ(t.at({1, 1}), 40.0);
  t.select(0, 0).fill_(-1);
  EXPECT_EQ(buf[0], -1.0f);
  EXPECT_EQ(buf[2], -1.0f);
  EXPECT_EQ(buf[3], 3.0f);
}

TEST(FromBlob, CustomStrides) {
  int32_t buf[6] = {0, 1, 2, 3, 4, 5};
  const std::vector<int64_t> strides{1, 2};
  Tensor t = from_blob(buf, {2, 3}, DType::i32, {}, IntArrayRef(strides));
  EXPECT_LAYOUT(t, ({2, 3}), ({1, 2}), 0);
  EXPECT_FALSE(t.is_contiguous());
  EXPECT_EQ(values(t), (D{0, 2, 4, 1, 3, 5}));
  const std::vector<int64_t> bad{1};
  EXPECT_THAT(ERROR_MESSAGE(from_blob(buf, {2, 3}, DType::i32, {}, IntArrayRef(bad))),
              AllOf(HasSubstr("from_blob"), HasSubstr("[2, 3]"), HasSubstr("[1]")));
}

TEST(FromBlob, DeleterRunsExactlyOnceWhenLastViewDies) {
  int calls = 0;
  void* freed = nullptr;
  auto* buf = new double[8]();
  {
    Tensor view;
    {
      Tensor t = from_blob(buf, {8}, DType::f64, [&](void* p) {
        ++calls;
        freed = p;
        delete[] static_cast<double*>(p);
      });
      Tensor copy = t;
      view = t.view({2, 4}).select(0, 1);
      Tensor another = t.slice(0, 2, 6);
      EXPECT_EQ(calls, 0);
    }
    EXPECT_EQ(calls, 0) << "a view is still alive";
    view.fill_(3.0);  // memory must still be valid (ASan checks)
    EXPECT_EQ(values(view), D(4, 3.0));
  }
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(freed, static_cast<void*>(buf));
}

TEST(FromBlob, DeleterNotCalledForCopies) {
  int calls = 0;
  float buf[4] = {1, 2, 3, 4};
  Tensor c;
  {
    Tensor t = from_blob(buf, {4}, DType::f32, [&](void*) { ++calls; });
    c = t.clone();
    Tensor d = t.to(DType::f64);
  }
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(values(c), (D{1, 2, 3, 4}));
  EXPECT_FALSE(c.storage().allocation() == nullptr);
}

TEST(FromBlob, DeleterRunsOnceEvenIfConstructionFails) {
  // If from_blob rejects its arguments it must not have taken ownership twice or leaked a
  // double-delete: the deleter may run at most once.
  int calls = 0;
  float buf[4] = {};
  const std::vector<int64_t> bad{1};
  EXPECT_THROW(from_blob(buf, {2, 2}, DType::f32, [&](void*) { ++calls; }, IntArrayRef(bad)), Error);
  EXPECT_LE(calls, 1);
}

TEST(FromBlob, NullDataIsAnErrorUnlessEmpty) {
  EXPECT_THAT(ERROR_MESSAGE(from_blob(nullptr, {3}, DType::f32)), AllOf(HasSubstr("from_blob"), HasSubstr("null")));
  Tensor e = from_blob(nullptr, {0}, DType::f32);
  EXPECT_EQ(e.numel(), 0);
}

// ---- from_buffer / tensor<T> / scalar_tensor ---------------------------------------------------

TEST(FromBuffer, Copies) {
  std::vector<int16_t> raw{1, 2, 3, 4};  // 8 bytes
  Tensor t = from_buffer(raw.data(), 8, {2}, DType::i32);
  EXPECT_EQ(t.dtype(), DType::i32);
  EXPECT_NE(t.data_ptr(), static_cast<void*>(raw.data()));
  int32_t expect0;
  std::memcpy(&expect0, raw.data(), 4);
  EXPECT_EQ(t.at({0}), expect0);
  raw[0] = 99;
  EXPECT_EQ(t.at({0}), expect0);
  std::vector<double> d{1.5, 2.5, 3.5, 4.5, 5.5, 6.5};
  Tensor m = from_buffer(d.data(), d.size() * sizeof(double), {3, 2}, DType::f64);
  EXPECT_LAYOUT(m, ({3, 2}), ({2, 1}), 0);
  EXPECT_EQ(values(m), d);
  Tensor e = from_buffer(nullptr, 0, {0, 4}, DType::f32);
  EXPECT_EQ(e.numel(), 0);
}

TEST(FromBuffer, SizeMismatchIsAnError) {
  float buf[5] = {};
  EXPECT_THAT(ERROR_MESSAGE(from_buffer(buf, sizeof buf, {2, 3}, DType::f32)),
              AllOf(HasSubstr("from_buffer"), HasSubstr("[2, 3]"), HasSubstr("20"), HasSubstr("24")));
  EXPECT_THAT(ERROR_MESSAGE(from_buffer(buf, sizeof buf, {3}, DType::f64)),
              AllOf(HasSubstr("from_buffer"), HasSubstr("f64")));
  EXPECT_THAT(ERROR_MESSAGE(from_buffer(nullptr, 16, {4}, DType::f32)), HasSubstr("from_buffer"));
}

TEST(TensorT, FromVectors) {
  Tensor f = tensor<float>({1.5f, -2.0f, 3.25f});
  EXPECT_EQ(f.dtype(), DType::f32);
  EXPECT_LAYOUT(f, ({3}), ({1}), 0);
  EXPECT_EQ(values(f), (D{1.5, -2.0, 3.25}));
  Tensor i = tensor<int64_t>({1, 2, 3, 4, 5, 6}, IntArrayRef({2, 3}));
  EXPECT_EQ(i.dtype(), DType::i64);
  EXPECT_LAYOUT(i, ({2, 3}), ({3, 1}), 0);
  EXPECT_EQ(i.at({1, 0}), 4.0);
  Tensor b = tensor<bool>({true, false, true});
  EXPECT_EQ(b.dtype(), DType::boolean);
  EXPECT_EQ(values(b), (D{1, 0, 1}));
  EXPECT_EQ(b.data<bool>()[2], true);
  Tensor u = tensor<uint8_t>({0, 255});
  EXPECT_EQ(values(u), (D{0, 255}));
  Tensor h = tensor<BFloat16>({BFloat16(1.0f), BFloat16(-0.5f)});
  EXPECT_EQ(h.dtype(), DType::bf16);
  EXPECT_EQ(values(h), (D{1.0, -0.5}));
  Tensor d = tensor<double>({0.1});
  EXPECT_EQ(d.at({0}), 0.1);
  Tensor i32 = tensor<int32_t>({-7});
  EXPECT_EQ(i32.dtype(), DType::i32);
  Tensor empty_vec = tensor<float>({});
  EXPECT_EQ(vec(empty_vec.sizes()), (V{0}));
  Tensor s = tensor<float>({4.0f}, IntArrayRef());
  EXPECT_EQ(s.dim(), 0);
  EXPECT_EQ(s.item<float>(), 4.0f);
}

TEST(TensorT, SizeMismatchIsAnError) {
  EXPECT_THAT(ERROR_MESSAGE(tensor<float>({1, 2, 3}, IntArrayRef({2, 2}))), HasSubstr("[2, 2]"));
  EXPECT_THAT(ERROR_MESSAGE(tensor<bool>({true, false, true}, IntArrayRef({2}))), HasSubstr("[2]"));
}

TEST(ScalarTensor, AllDTypes) {
  Tensor s = scalar_tensor(2.5);
  EXPECT_EQ(s.dim(), 0);
  EXPECT_EQ(s.numel(), 1);
  EXPECT_EQ(s.dtype(), DType::f32);
  EXPECT_EQ(s.item<float>(), 2.5f);
  EXPECT_EQ(s.item<double>(), 2.5);
  EXPECT_EQ(s.item<int>(), 2);
  EXPECT_EQ(s.item<bool>(), true);
  EXPECT_EQ(scalar_tensor(-3, DType::i64).item<int64_t>(), -3);
  EXPECT_EQ(scalar_tensor(3.7, DType::i32).item<int32_t>(), 3);
  EXPECT_EQ(scalar_tensor(256, DType::u8).item<int>(), 255);
  EXPECT_EQ(scalar_tensor(0.25, DType::boolean).item<bool>(), true);
  EXPECT_EQ(scalar_tensor(1.00390625, DType::bf16).item<float>(), 1.0f);
  EXPECT_EQ(scalar_tensor(2, DType::f64).item<BFloat16>().bits, BFloat16(2.0f).bits);
  EXPECT_EQ(scalar_tensor(1e10).item<int32_t>(), std::numeric_limits<int32_t>::max());
}

TEST(Item, OneElementTensorsOnly) {
  EXPECT_EQ(ones({1, 1, 1}).item<float>(), 1.0f);
  EXPECT_EQ(arange(0, 6, 1).view({2, 3}).select(0, 1).select(0, 2).item<int64_t>(), 5);
  EXPECT_THAT(ERROR_MESSAGE(zeros({2}).item<float>()), AllOf(HasSubstr("item"), HasSubstr("[2]")));
  EXPECT_THAT(ERROR_MESSAGE(zeros({2, 3}).item<double>()), AllOf(HasSubstr("item"), HasSubstr("[2, 3]")));
  EXPECT_THAT(ERROR_MESSAGE(zeros({0}).item<float>()), AllOf(HasSubstr("item"), HasSubstr("[0]")));
  // i64 values beyond 2^53 survive item<int64_t>() exactly.
  const int64_t big = (int64_t{1} << 60) + 1;
  EXPECT_EQ(tensor<int64_t>({big}).item<int64_t>(), big);
}

}  // namespace
