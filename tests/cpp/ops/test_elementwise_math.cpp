// ops/elementwise_math.h on the dtypes the harness does not run (it runs f32 and f64): Note
// [Element-wise math dtypes]. Expected values and dtypes are PyTorch 2.13's
// (tests/python/test_math_ops.py compares the same against torch itself).

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "autograd/engine.h"
#include "core/factories.h"
#include "ops/elementwise_math.h"
#include "ops/operators.h"
#include "ops/reduction.h"
#include "tests/cpp/core/test_util.h"

namespace strata {
namespace {

using strata_test::values;
using D = std::vector<double>;

TEST(ElementwiseMath, IntegerAndBoolInputsComputeInTheDefaultFloat) {
  const Tensor i = tensor(std::vector<int64_t>{0, 1, -2});
  EXPECT_EQ(sin(i).dtype(), DType::f32);
  EXPECT_EQ(values(sin(i))[1], static_cast<double>(std::sin(1.0f)));
  EXPECT_EQ(reciprocal(i).dtype(), DType::f32);
  EXPECT_TRUE(std::isinf(values(reciprocal(i))[0]));
  EXPECT_EQ(rsqrt(tensor(std::vector<bool>{true, false})).dtype(), DType::f32);
  EXPECT_EQ(atan2(i, tensor(std::vector<int32_t>{1, 1, 1})).dtype(), DType::f32);
  EXPECT_EQ(atan2(i, tensor(std::vector<double>{1, 1, 1})).dtype(), DType::f64);
}

TEST(ElementwiseMath, RoundingSignAndSquareKeepIntegers) {
  const Tensor i = tensor(std::vector<int32_t>{-3, 0, 5});
  for (const Tensor& r : {floor(i), ceil(i), trunc(i), round(i)}) {
    EXPECT_EQ(r.dtype(), DType::i32);
    EXPECT_EQ(values(r), (D{-3, 0, 5}));
  }
  EXPECT_EQ(values(sign(i)), (D{-1, 0, 1}));
  EXPECT_EQ(sign(i).dtype(), DType::i32);
  EXPECT_EQ(values(sign(tensor(std::vector<uint8_t>{0, 7}))), (D{0, 1}));
  EXPECT_EQ(sign(tensor(std::vector<bool>{true, false})).dtype(), DType::boolean);
  EXPECT_EQ(values(square(i)), (D{9, 0, 25}));
  const Tensor sq_bool = square(tensor(std::vector<bool>{true, false}));
  EXPECT_EQ(sq_bool.dtype(), DType::i64);
  EXPECT_EQ(values(sq_bool), (D{1, 0}));
}

TEST(ElementwiseMath, SignOfZeroAndNaNIsZero) {
  const Tensor x = tensor(std::vector<float>{-0.0f, NAN, -2.0f, INFINITY});
  EXPECT_EQ(values(sign(x)), (D{0, 0, -1, 1}));
}

TEST(ElementwiseMath, RoundHalvesToEvenWithDecimals) {
  EXPECT_EQ(values(round(tensor(std::vector<float>{2.5f, -0.5f, 1.5f}))), (D{2, -0.0, 2}));
  EXPECT_EQ(values(round(tensor(std::vector<double>{0.125, 1234.5}), 2))[0], 0.12);
  EXPECT_EQ(values(round(tensor(std::vector<double>{1250, 1350}), -2)), (D{1200, 1400}));
}

TEST(ElementwiseMath, HalfComputesInF32AndKeepsItsDtype) {
  Tensor x = tensor(std::vector<float>{0.5f, 1.0f}).to(DType::f16);
  x.set_requires_grad(true);
  Tensor y = cos(x);
  EXPECT_EQ(y.dtype(), DType::f16);
  EXPECT_NEAR(values(y)[0], std::cos(0.5f), 1e-3);
  sum(y).backward();
  ASSERT_TRUE(x.grad().defined());
  EXPECT_EQ(x.grad().dtype(), DType::f16);
  EXPECT_NEAR(values(x.grad())[1], -std::sin(1.0f), 1e-3);
}

TEST(ElementwiseMath, RoundingGradientIsZero) {
  Tensor x = tensor(std::vector<double>{0.3, -1.7});
  x.set_requires_grad(true);
  sum(floor(x) + sign(x) + round(x, 1)).backward();
  EXPECT_EQ(values(x.grad()), (D{0, 0}));
}

}  // namespace
}  // namespace strata
