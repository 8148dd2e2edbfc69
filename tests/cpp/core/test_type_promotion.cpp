// Type promotion (Note [Type promotion] in core/type_promotion.h): promote_types and can_cast over
// every dtype pair, result_type over tensors with dims, zero-dim tensors and numbers, and Scalar.

#include "core/type_promotion.h"

#include <gtest/gtest.h>

#include "core/factories.h"

namespace {

using namespace strata;

// In DType's enum order.
constexpr DType kOrder[] = {DType::f32, DType::f64, DType::bf16,    DType::i32,
                            DType::i64, DType::u8,  DType::boolean, DType::f16};

// torch.promote_types(row, column) from PyTorch 2.13, rows and columns in kOrder.
constexpr DType kPromoted[8][8] = {
    {DType::f32, DType::f64, DType::f32, DType::f32, DType::f32, DType::f32, DType::f32, DType::f32},       // f32
    {DType::f64, DType::f64, DType::f64, DType::f64, DType::f64, DType::f64, DType::f64, DType::f64},       // f64
    {DType::f32, DType::f64, DType::bf16, DType::bf16, DType::bf16, DType::bf16, DType::bf16, DType::f32},  // bf16
    {DType::f32, DType::f64, DType::bf16, DType::i32, DType::i64, DType::i32, DType::i32, DType::f16},      // i32
    {DType::f32, DType::f64, DType::bf16, DType::i64, DType::i64, DType::i64, DType::i64, DType::f16},      // i64
    {DType::f32, DType::f64, DType::bf16, DType::i32, DType::i64, DType::u8, DType::u8, DType::f16},        // u8
    {DType::f32, DType::f64, DType::bf16, DType::i32, DType::i64, DType::u8, DType::boolean, DType::f16},   // bool
    {DType::f32, DType::f64, DType::f32, DType::f16, DType::f16, DType::f16, DType::f16, DType::f16},       // f16
};

// torch.can_cast(row, column) from PyTorch 2.13.
constexpr bool kCanCast[8][8] = {
    {true, true, true, false, false, false, false, true},  // f32
    {true, true, true, false, false, false, false, true},  // f64
    {true, true, true, false, false, false, false, true},  // bf16
    {true, true, true, true, true, true, false, true},     // i32
    {true, true, true, true, true, true, false, true},     // i64
    {true, true, true, true, true, true, false, true},     // u8
    {true, true, true, true, true, true, true, true},      // bool
    {true, true, true, false, false, false, false, true},  // f16
};

TEST(TypePromotion, PromoteTypesMatchesPyTorchsTable) {
  for (int a = 0; a < 8; ++a)
    for (int b = 0; b < 8; ++b) {
      EXPECT_EQ(promote_types(kOrder[a], kOrder[b]), kPromoted[a][b]) << kOrder[a] << " with " << kOrder[b];
      EXPECT_EQ(promote_types(kOrder[a], kOrder[b]), promote_types(kOrder[b], kOrder[a]));
    }
}

TEST(TypePromotion, CanCastMatchesPyTorchsTable) {
  for (int a = 0; a < 8; ++a)
    for (int b = 0; b < 8; ++b)
      EXPECT_EQ(can_cast(kOrder[a], kOrder[b]), kCanCast[a][b]) << kOrder[a] << " to " << kOrder[b];
}

Tensor t1(DType d) { return zeros({2}, {d, nullptr}); }
Tensor t0(DType d) { return zeros({}, {d, nullptr}); }

TEST(TypePromotion, ResultTypeGroups) {
  // Tensors with dims promote among themselves.
  EXPECT_EQ(result_type(t1(DType::f32), t1(DType::f64)), DType::f64);
  EXPECT_EQ(result_type(t1(DType::i32), t1(DType::u8)), DType::i32);
  // A zero-dim tensor of the same category does not widen a tensor with dims...
  EXPECT_EQ(result_type(t1(DType::f32), t0(DType::f64)), DType::f32);
  EXPECT_EQ(result_type(t1(DType::u8), t0(DType::i64)), DType::u8);
  EXPECT_EQ(result_type(t1(DType::f16), t0(DType::f64)), DType::f16);
  // ... but one of a higher category sets the result with its own dtype.
  EXPECT_EQ(result_type(t1(DType::i32), t0(DType::f64)), DType::f64);
  EXPECT_EQ(result_type(t1(DType::boolean), t0(DType::u8)), DType::u8);
  // Two zero-dim tensors promote like tensors with dims.
  EXPECT_EQ(result_type(t0(DType::f32), t0(DType::f64)), DType::f64);
  // Numbers: a float is the default dtype (f32), an int i64, a bool bool.
  EXPECT_EQ(result_type(t1(DType::i32), Scalar(1.5)), DType::f32);
  EXPECT_EQ(result_type(t1(DType::i64), Scalar(1.5)), DType::f32);
  EXPECT_EQ(result_type(t1(DType::f64), Scalar(1.5)), DType::f64);
  EXPECT_EQ(result_type(t1(DType::bf16), Scalar(1.5)), DType::bf16);
  EXPECT_EQ(result_type(t1(DType::u8), Scalar(1000)), DType::u8);
  EXPECT_EQ(result_type(t1(DType::boolean), Scalar(1)), DType::i64);
  EXPECT_EQ(result_type(t1(DType::boolean), Scalar(true)), DType::boolean);
  EXPECT_EQ(result_type(Scalar(2), t1(DType::i32)), DType::i32);
  // A zero-dim tensor beats a number of the same category; a number of a higher one wins.
  EXPECT_EQ(result_type(t0(DType::i32), Scalar(7)), DType::i32);
  EXPECT_EQ(result_type(t0(DType::i32), Scalar(0.5)), DType::f32);
  EXPECT_EQ(ResultType().add(Scalar(1)).add(Scalar(2.0)).get(), DType::f32);
}

TEST(TypePromotion, BadInput) {
  EXPECT_THROW(ResultType().get(), Error);
  EXPECT_THROW(result_type(Tensor(), t1(DType::f32)), Error);
}

TEST(Scalar, KindsAndConversions) {
  EXPECT_TRUE(Scalar(1).is_integral());
  EXPECT_TRUE(Scalar(int64_t{1} << 40).is_integral());
  EXPECT_TRUE(Scalar(1.0f).is_floating());
  EXPECT_TRUE(Scalar(true).is_bool());
  EXPECT_EQ(Scalar(true).dtype(), DType::boolean);
  EXPECT_EQ(Scalar(3).dtype(), DType::i64);
  EXPECT_EQ(Scalar(0.25).dtype(), DType::f64);
  EXPECT_EQ(Scalar(-2.75).to<int32_t>(), -2);
  EXPECT_EQ(Scalar(300).to<uint8_t>(), 44);  // integer to integer wraps, as a C++ conversion
  EXPECT_EQ(Scalar((int64_t{1} << 53) + 1).to<int64_t>(), (int64_t{1} << 53) + 1);  // exact
  EXPECT_EQ(Scalar(true).to<float>(), 1.0f);
  EXPECT_EQ(Scalar(7).to_double(), 7.0);
}

}  // namespace
