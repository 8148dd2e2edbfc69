// Copies: contiguous(), clone(), to(dtype) for every pair of dtypes, copy_ (broadcasting, dtype
// conversion, overlap) and fill_.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "core/factories.h"
#include "core/tensor.h"
#include "test_util.h"

namespace {

using namespace strata;
using strata_test::iota;
using strata_test::raw_values;
using strata_test::V;
using strata_test::values;
using strata_test::vec;
using ::testing::AllOf;
using ::testing::HasSubstr;
using D = std::vector<double>;

constexpr DType kAll[] = {DType::f32, DType::f64, DType::bf16,    DType::i32,
                          DType::i64, DType::u8,  DType::boolean, DType::f16};
constexpr TensorOptions kF32{DType::f32, nullptr};

template <typename T>
double as_double(T v) {
  if constexpr (std::is_same_v<T, BFloat16>)
    return static_cast<double>(static_cast<float>(v));
  else
    return static_cast<double>(v);
}

bool same_value(double a, double b) { return (std::isnan(a) && std::isnan(b)) || a == b; }

void expect_same_values(const D& actual, const D& expected, const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  for (std::size_t i = 0; i < actual.size(); ++i) {
    EXPECT_TRUE(same_value(actual[i], expected[i]))
        << what << ": element " << i << " is " << actual[i] << ", expected " << expected[i];
  }
}

/// 12 source values covering zero, signs, fractions, out-of-range values, NaN and infinity.
const D kSourceValues = {0.0,
                         1.0,
                         -1.0,
                         2.5,
                         -2.7,
                         300.5,
                         0.5,
                         255.0,
                         70000.25,
                         -1e10,
                         std::numeric_limits<double>::quiet_NaN(),
                         std::numeric_limits<double>::infinity()};

/// A [3, 4] tensor of dtype `from` holding kSourceValues converted to that dtype, and the values
/// it actually holds (as From), converted to `to` with convert_element's rules.
struct ConversionCase {
  Tensor src;
  D expected;
};

ConversionCase make_case(DType from, DType to) {
  return dispatch_dtype(from, [&](auto ftag) {
    using F = decltype(ftag);
    std::vector<F> fv;
    for (double d : kSourceValues) fv.push_back(convert_element<F>(d));
    const std::vector<int64_t> shape{3, 4};
    ConversionCase c;
    c.src = tensor<F>(fv, IntArrayRef(shape));
    for (std::size_t i = 0; i < fv.size(); ++i) {
      const F f = fv[i];
      c.expected.push_back(dispatch_dtype(to, [&](auto ttag) {
        using T = decltype(ttag);
        return as_double(convert_element<T>(f));
      }));
    }
    return c;
  });
}

/// Row-major values of the transpose of a [3, 4] row-major list.
D transposed(const D& v) {
  D out;
  for (int j = 0; j < 4; ++j)
    for (int i = 0; i < 3; ++i) out.push_back(v[static_cast<std::size_t>(i * 4 + j)]);
  return out;
}

// ---- to(dtype) ---------------------------------------------------------------------------------

TEST(To, EveryPairOfDTypes) {
  for (DType from : kAll) {
    for (DType to : kAll) {
      const std::string what = std::string(dtype_name(from)) + " -> " + std::string(dtype_name(to));
      SCOPED_TRACE(what);
      ConversionCase c = make_case(from, to);
      ASSERT_EQ(c.src.dtype(), from);
      Tensor r = c.src.to(to);
      EXPECT_EQ(r.dtype(), to);
      EXPECT_EQ(vec(r.sizes()), (V{3, 4}));
      EXPECT_TRUE(r.is_contiguous());
      if (from == to) {
        EXPECT_TRUE(r.shares_storage(c.src)) << "to() with the same dtype must return *this";
      } else {
        EXPECT_FALSE(r.shares_storage(c.src));
      }
      expect_same_values(values(r), c.expected, what);
      expect_same_values(raw_values(r), c.expected, what + " (raw)");

      // Forced copy.
      Tensor rc = c.src.to(to, /*copy=*/true);
      EXPECT_FALSE(rc.shares_storage(c.src));
      EXPECT_EQ(rc.dtype(), to);
      expect_same_values(values(rc), c.expected, what + " copy=true");

      // Non-contiguous source.
      Tensor rt = c.src.t().to(to);
      EXPECT_EQ(vec(rt.sizes()), (V{4, 3}));
      expect_same_values(values(rt), transposed(c.expected), what + " transposed");
    }
  }
}

TEST(To, HandPickedConversions) {
  Tensor f = tensor<float>({-2.7f, 2.7f, 300.5f, -1.0f, 0.5f, 1.00390625f});
  EXPECT_EQ(values(f.to(DType::i32)), (D{-2, 2, 300, -1, 0, 1}));
  EXPECT_EQ(values(f.to(DType::u8)), (D{0, 2, 255, 0, 0, 1}));
  EXPECT_EQ(values(f.to(DType::boolean)), (D{1, 1, 1, 1, 1, 1}));
  EXPECT_EQ(values(f.to(DType::bf16)), (D{-2.703125, 2.703125, 300.0, -1.0, 0.5, 1.0}));
  Tensor i = tensor<int32_t>({-1, 256, 0, 7});
  EXPECT_EQ(values(i.to(DType::u8)), (D{255, 0, 0, 7}));
  EXPECT_EQ(values(i.to(DType::boolean)), (D{1, 1, 0, 1}));
  EXPECT_EQ(values(i.to(DType::f64)), (D{-1, 256, 0, 7}));
  Tensor b = tensor<bool>({true, false});
  EXPECT_EQ(values(b.to(DType::f32)), (D{1, 0}));
  EXPECT_EQ(values(b.to(DType::bf16)), (D{1, 0}));
  Tensor big = tensor<int64_t>({int64_t{1} << 40, -(int64_t{1} << 33) - 3});
  EXPECT_EQ(values(big.to(DType::i32)), (D{0, -3}));
  EXPECT_EQ(values(big.to(DType::f64)), (D{1099511627776.0, -8589934595.0}));
}

TEST(To, SameDTypeReturnsSelfEvenWhenNonContiguous) {
  Tensor a = arange(0, 12, 1, kF32).view({3, 4}).t();
  Tensor r = a.to(DType::f32);
  EXPECT_TRUE(r.shares_storage(a));
  EXPECT_EQ(vec(r.strides()), vec(a.strides()));
  Tensor c = a.to(DType::f32, true);
  EXPECT_FALSE(c.shares_storage(a));
  EXPECT_EQ(values(c), values(a));
  c.fill_(0);
  EXPECT_EQ(a.at({1, 1}), 5.0);
}

// ---- contiguous / clone ------------------------------------------------------------------------

TEST(Contiguous, ReturnsSelfWhenContiguous) {
  Tensor a = arange(0, 12, 1, kF32).view({3, 4});
  Tensor c = a.contiguous();
  EXPECT_TRUE(c.shares_storage(a));
  EXPECT_EQ(c.data_ptr(), a.data_ptr());
  Tensor row = a.select(0, 1);  // contiguous with an offset
  Tensor rc = row.contiguous();
  EXPECT_TRUE(rc.shares_storage(a));
  EXPECT_EQ(rc.offset(), 4);
}

TEST(Contiguous, CopiesNonContiguous) {
  Tensor a = arange(0, 24, 1, kF32).view({2, 3, 4});
  for (const Tensor& v : {a.transpose(0, 2), a.slice(2, 0, 4, 2), a.narrow(1, 1, 2).permute({2, 0, 1}),
                          a.select(1, 0).unsqueeze(1).expand({2, 5, 4})}) {
    ASSERT_FALSE(v.is_contiguous());
    Tensor c = v.contiguous();
    EXPECT_TRUE(c.is_contiguous());
    EXPECT_FALSE(c.shares_storage(a));
    EXPECT_EQ(vec(c.sizes()), vec(v.sizes()));
    EXPECT_EQ(vec(c.strides()), vec(contiguous_strides(v.sizes())));
    EXPECT_EQ(c.offset(), 0);
    EXPECT_EQ(values(c), values(v));
    EXPECT_EQ(raw_values(c), values(v));
    EXPECT_EQ(c.dtype(), DType::f32);
  }
}

TEST(Clone, AlwaysCopies) {
  Tensor a = arange(0, 6, 1, {DType::i64, nullptr}).view({2, 3});
  Tensor c = a.clone();
  EXPECT_FALSE(c.shares_storage(a));
  EXPECT_EQ(c.dtype(), DType::i64);
  EXPECT_TRUE(c.is_contiguous());
  EXPECT_EQ(values(c), iota(6));
  c.fill_(9);
  EXPECT_EQ(values(a), iota(6));

  Tensor t = a.t().clone();
  EXPECT_LAYOUT(t, ({3, 2}), ({2, 1}), 0);
  EXPECT_EQ(values(t), (D{0, 3, 1, 4, 2, 5}));

  Tensor s = a.select(0, 1).clone();
  EXPECT_LAYOUT(s, ({3}), ({1}), 0);
  EXPECT_EQ(values(s), (D{3, 4, 5}));

  Tensor z = zeros({0, 4}).clone();
  EXPECT_EQ(vec(z.sizes()), (V{0, 4}));
  Tensor sc = scalar_tensor(2.5, DType::bf16).clone();
  EXPECT_EQ(sc.dim(), 0);
  EXPECT_EQ(sc.item<float>(), 2.5f);
  EXPECT_EQ(sc.dtype(), DType::bf16);
}

TEST(Clone, LargeNonContiguousAllDTypes) {
  // Big enough (257 rows of 300) to take the parallel path of the strided copy.
  for (DType dt : kAll) {
    SCOPED_TRACE(dtype_name(dt));
    Tensor a = arange(0, 300 * 257, 1, {DType::i64, nullptr}).view({300, 257}).to(dt);
    Tensor c = a.t().clone();  // [257, 300]
    ASSERT_TRUE(c.is_contiguous());
    ASSERT_EQ(strata_test::vec(c.sizes()), (V{257, 300}));
    const int64_t wrong = dispatch_dtype(dt, [&](auto tag) {
      using T = decltype(tag);
      const T* p = c.data<T>();
      int64_t bad = 0;
      for (int64_t i = 0; i < 257; ++i)
        for (int64_t j = 0; j < 300; ++j) {
          const T expect = convert_element<T>(j * 257 + i);
          bad += std::memcmp(&p[i * 300 + j], &expect, sizeof(T)) != 0;
        }
      return bad;
    });
    EXPECT_EQ(wrong, 0);
  }
}

// ---- copy_ -------------------------------------------------------------------------------------

TEST(Copy, SameShapeAndReturnsSelf) {
  Tensor dst = zeros({2, 3});
  Tensor src = arange(0, 6, 1, kF32).view({2, 3});
  Tensor& r = dst.copy_(src);
  EXPECT_EQ(&r, &dst);
  EXPECT_EQ(values(dst), iota(6));
  EXPECT_FALSE(dst.shares_storage(src));
  src.fill_(0);
  EXPECT_EQ(values(dst), iota(6));
}

TEST(Copy, EveryPairOfDTypesIntoNonContiguousDst) {
  for (DType from : kAll) {
    for (DType to : kAll) {
      const std::string what = std::string(dtype_name(from)) + " -> " + std::string(dtype_name(to));
      SCOPED_TRACE(what);
      ConversionCase c = make_case(from, to);
      Tensor storage = zeros({4, 3}, {to, nullptr});
      Tensor dst = storage.t();  // [3, 4], strides [1, 3]
      dst.copy_(c.src);
      EXPECT_EQ(dst.dtype(), to);
      expect_same_values(values(dst), c.expected, what);
      expect_same_values(values(storage), transposed(c.expected), what + " (through base)");
    }
  }
}

TEST(Copy, Broadcasting) {
  Tensor dst = zeros({2, 3});
  dst.copy_(tensor<float>({1, 2, 3}));
  EXPECT_EQ(values(dst), (D{1, 2, 3, 1, 2, 3}));
  dst.copy_(tensor<float>({10, 20}, IntArrayRef({2, 1})));
  EXPECT_EQ(values(dst), (D{10, 10, 10, 20, 20, 20}));
  dst.copy_(scalar_tensor(5.0));
  EXPECT_EQ(values(dst), D(6, 5.0));
  dst.copy_(tensor<int32_t>({7}));  // [1] -> [2, 3], with conversion
  EXPECT_EQ(values(dst), D(6, 7.0));
  dst.copy_(tensor<double>({1, 2, 3}, IntArrayRef({1, 3})));
  EXPECT_EQ(values(dst), (D{1, 2, 3, 1, 2, 3}));

  Tensor d3 = zeros({2, 3, 4}, {DType::i64, nullptr});
  d3.copy_(arange(0, 3, 1, kF32).view({3, 1}));
  EXPECT_EQ(d3.at({1, 2, 3}), 2.0);
  EXPECT_EQ(d3.at({0, 1, 0}), 1.0);
  // Into a non-contiguous destination
  Tensor base = zeros({4, 3});
  base.t().copy_(tensor<float>({1, 2, 3, 4}));  // every row of the [3, 4] view is [1, 2, 3, 4]
  EXPECT_EQ(values(base), (D{1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4}));
  // From an expanded (stride-0) source
  Tensor e = arange(0, 3, 1, kF32).expand({2, 3});
  Tensor d = zeros({2, 3});
  d.copy_(e);
  EXPECT_EQ(values(d), (D{0, 1, 2, 0, 1, 2}));
  // Empty into empty
  Tensor z = zeros({0, 3});
  z.copy_(zeros({0, 3}));
  z.copy_(zeros({3}));
  EXPECT_EQ(z.numel(), 0);
}

TEST(Copy, Errors) {
  Tensor dst = zeros({2, 3});
  EXPECT_THAT(ERROR_MESSAGE(dst.copy_(zeros({4}))), AllOf(HasSubstr("copy_"), HasSubstr("[2, 3]"), HasSubstr("[4]")));
  EXPECT_THAT(ERROR_MESSAGE(dst.copy_(zeros({3, 2}))),
              AllOf(HasSubstr("copy_"), HasSubstr("[2, 3]"), HasSubstr("[3, 2]")));
  EXPECT_THAT(ERROR_MESSAGE(dst.copy_(zeros({1, 2, 3}))),
              AllOf(HasSubstr("copy_"), HasSubstr("[2, 3]"), HasSubstr("[1, 2, 3]")));
  Tensor col = zeros({2, 1});
  EXPECT_THAT(ERROR_MESSAGE(col.copy_(zeros({2, 3}))),
              AllOf(HasSubstr("copy_"), HasSubstr("[2, 1]"), HasSubstr("[2, 3]")));
  EXPECT_THAT(ERROR_MESSAGE(scalar_tensor(1.0).copy_(zeros({2}))),
              AllOf(HasSubstr("copy_"), HasSubstr("[]"), HasSubstr("[2]")));
  // A failed copy leaves the destination as it was.
  Tensor keep = arange(0, 6, 1, kF32).view({2, 3});
  EXPECT_THROW(keep.copy_(zeros({6})), Error);
  EXPECT_EQ(values(keep), iota(6));
  EXPECT_THAT(ERROR_MESSAGE(dst.copy_(Tensor())), AllOf(HasSubstr("copy_"), HasSubstr("undefined")));
  // A destination whose elements alias each other (expanded) cannot be written element-wise.
  Tensor row = zeros({3});
  EXPECT_THAT(ERROR_MESSAGE(row.expand({2, 3}).copy_(ones({2, 3}))), AllOf(HasSubstr("copy_"), HasSubstr("[2, 3]")));
  EXPECT_EQ(values(row), D(3, 0.0));
}

TEST(Copy, OverlappingShiftRight) {
  Tensor x = arange(0, 10, 1, kF32);
  x.slice(0, 1, 10).copy_(x.slice(0, 0, 9));
  EXPECT_EQ(values(x), (D{0, 0, 1, 2, 3, 4, 5, 6, 7, 8}));
}

TEST(Copy, OverlappingShiftLeft) {
  Tensor x = arange(0, 10, 1, kF32);
  x.slice(0, 0, 9).copy_(x.slice(0, 1, 10));
  EXPECT_EQ(values(x), (D{1, 2, 3, 4, 5, 6, 7, 8, 9, 9}));
}

TEST(Copy, OverlappingTransposeInPlace) {
  Tensor m = arange(0, 9, 1, kF32).view({3, 3});
  m.copy_(m.t());
  EXPECT_EQ(values(m), (D{0, 3, 6, 1, 4, 7, 2, 5, 8}));
  // Large enough for a parallel kernel.
  Tensor big = arange(0, 200 * 200, 1, {DType::f64, nullptr}).view({200, 200});
  big.copy_(big.t());
  for (int64_t i : {0, 1, 57, 199})
    for (int64_t j : {0, 3, 100, 199}) EXPECT_EQ(big.at({i, j}), static_cast<double>(j * 200 + i));
}

TEST(Copy, OverlappingReverseViaBroadcastAndSelf) {
  Tensor x = arange(0, 6, 1, kF32);
  x.copy_(x);
  EXPECT_EQ(values(x), iota(6));
  // Broadcast a row of the tensor onto the whole tensor (the source is overwritten mid-copy if the
  // copy is not buffered).
  Tensor m = arange(0, 12, 1, kF32).view({3, 4});
  m.copy_(m.select(0, 1));
  EXPECT_EQ(values(m), (D{4, 5, 6, 7, 4, 5, 6, 7, 4, 5, 6, 7}));
  Tensor n = arange(0, 12, 1, kF32).view({3, 4});
  n.copy_(n.select(1, 3).unsqueeze(1));  // each row filled with its last element
  EXPECT_EQ(values(n), (D{3, 3, 3, 3, 7, 7, 7, 7, 11, 11, 11, 11}));
}

TEST(Copy, LargeStridedBothSides) {
  Tensor src = arange(0, 256 * 300, 1, {DType::i32, nullptr}).view({256, 300});
  Tensor dst_base = zeros({300, 512}, {DType::f64, nullptr});
  Tensor dst = dst_base.slice(1, 0, 512, 2).t();  // [256, 300], strides [2, 512]
  dst.copy_(src);
  for (int64_t i : {0, 1, 128, 255})
    for (int64_t j : {0, 1, 150, 299}) EXPECT_EQ(dst.at({i, j}), static_cast<double>(i * 300 + j));
  EXPECT_EQ(dst_base.at({5, 1}), 0.0);  // odd columns untouched
  EXPECT_EQ(dst_base.at({5, 2}), static_cast<double>(300 + 5));
}

TEST(Copy, BoolBytesAreCanonical) {
  // from_buffer normalizes any non-zero byte to true, so converting reads well-defined bools.
  const uint8_t raw[4] = {0, 1, 2, 255};
  Tensor b = from_buffer(raw, 4, {4}, DType::boolean);
  EXPECT_EQ(values(b.to(DType::f32)), (D{0, 1, 1, 1}));
  EXPECT_EQ(values(b.to(DType::u8)), (D{0, 1, 1, 1}));
  const auto* p = static_cast<const uint8_t*>(b.data_ptr());
  EXPECT_EQ(p[2], 1);
  EXPECT_EQ(p[3], 1);
}

// ---- fill_ -------------------------------------------------------------------------------------

TEST(Fill, ConvertsValueToDType) {
  auto filled = [](DType dt, double v) {
    Tensor t = zeros({3}, {dt, nullptr});
    Tensor& r = t.fill_(v);
    EXPECT_EQ(&r, &t);
    return values(t);
  };
  EXPECT_EQ(filled(DType::f32, 2.5), D(3, 2.5));
  EXPECT_EQ(filled(DType::f64, 0.1), D(3, 0.1));
  EXPECT_EQ(filled(DType::bf16, 1.00390625), D(3, 1.0));
  EXPECT_EQ(filled(DType::bf16, 3.14159265), D(3, 3.140625));
  EXPECT_EQ(filled(DType::i32, 2.7), D(3, 2.0));
  EXPECT_EQ(filled(DType::i32, -2.7), D(3, -2.0));
  EXPECT_EQ(filled(DType::i64, -3.9), D(3, -3.0));
  EXPECT_EQ(filled(DType::i64, 1e18), D(3, 1e18));
  EXPECT_EQ(filled(DType::u8, 300), D(3, 255.0));
  EXPECT_EQ(filled(DType::u8, -1), D(3, 0.0));
  EXPECT_EQ(filled(DType::boolean, 0.5), D(3, 1.0));
  EXPECT_EQ(filled(DType::boolean, 0.0), D(3, 0.0));
  EXPECT_EQ(filled(DType::i32, std::nan("")), D(3, 0.0));
  for (double v : values(zeros({3}, {DType::f64, nullptr}).fill_(std::nan("")))) EXPECT_TRUE(std::isnan(v));
  for (double v : values(zeros({3}, {DType::bf16, nullptr}).fill_(-std::numeric_limits<double>::infinity())))
    EXPECT_EQ(v, -std::numeric_limits<double>::infinity());
}

TEST(Fill, ViewsEmptyScalarAndLarge) {
  Tensor a = zeros({4, 5});
  a.t().narrow(0, 1, 2).fill_(3);  // columns 1 and 2 of a
  for (int64_t i = 0; i < 4; ++i) {
    EXPECT_EQ(a.at({i, 0}), 0.0);
    EXPECT_EQ(a.at({i, 1}), 3.0);
    EXPECT_EQ(a.at({i, 2}), 3.0);
    EXPECT_EQ(a.at({i, 3}), 0.0);
  }
  Tensor e = zeros({0, 7});
  e.fill_(1);
  EXPECT_EQ(e.numel(), 0);
  Tensor s = scalar_tensor(0.0, DType::i64);
  s.fill_(42);
  EXPECT_EQ(s.item<int64_t>(), 42);
  Tensor big = empty({1 << 16}, {DType::u8, nullptr});
  big.fill_(7);
  const uint8_t* p = big.data<uint8_t>();
  int64_t bad = 0;
  for (int64_t i = 0; i < big.numel(); ++i) bad += p[i] != 7;
  EXPECT_EQ(bad, 0);
  Tensor z = ones({10, 10}, {DType::i32, nullptr});
  z.zero_();
  EXPECT_EQ(values(z), D(100, 0.0));
}

// Transposed layouts take the tiled path (copy_transposed_tiles); every permutation of a 3-D
// tensor, odd sizes that leave partial tiles, and each element size must land every element.
TEST(Copy, TransposedLayoutsCopyEveryElement) {
  const std::vector<std::vector<int64_t>> perms = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
  for (DType dt : {DType::f32, DType::f64, DType::bf16, DType::u8}) {
    Tensor base = arange(0, 3 * 37 * 70, 1, {DType::f64, nullptr}).view({3, 37, 70});
    for (const auto& p : perms) {
      Tensor src = base.to(dt, true).permute(p);
      Tensor c = src.contiguous();
      ASSERT_TRUE(c.is_contiguous());
      for (int64_t i = 0; i < c.size(0); i += 1)
        for (int64_t j = 0; j < c.size(1); j += 3)
          for (int64_t k = 0; k < c.size(2); k += 5)
            ASSERT_EQ(c.at({i, j, k}), src.at({i, j, k})) << dt << " perm " << p[0] << p[1] << p[2];
      // And into a transposed destination.
      Tensor dst = zeros({src.size(1), src.size(0), src.size(2)}, {dt, nullptr}).transpose(0, 1);
      dst.copy_(src);
      for (int64_t i = 0; i < c.size(0); ++i)
        for (int64_t j = 0; j < c.size(1); j += 7)
          for (int64_t k = 0; k < c.size(2); k += 3) ASSERT_EQ(dst.at({i, j, k}), src.at({i, j, k}));
    }
  }
}

}  // namespace
