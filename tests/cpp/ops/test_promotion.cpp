// The ops on every dtype (the harness runs f32 and f64 only): PyTorch's type promotion through the
// binary ops, integer and bool arithmetic (wrap-around, floor division, remainder, powers),
// comparisons, logical and bitwise ops, float16, reductions into i64, and the index reductions.
// Expected values and dtypes are PyTorch 2.13's (tests/python/test_semantics.py compares the
// same against torch itself).

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "autograd/engine.h"
#include "core/factories.h"
#include "core/type_promotion.h"
#include "ops/binary.h"
#include "ops/comparison.h"
#include "ops/index_reduction.h"
#include "ops/operators.h"
#include "ops/reduction.h"
#include "ops/unary.h"
#include "tests/cpp/error_text.h"

namespace strata {
namespace {

template <typename T>
std::vector<T> values(const Tensor& t) {
  const Tensor c = t.to(dtype_of<T>()).contiguous();
  return std::vector<T>(c.data<T>(), c.data<T>() + c.numel());
}

Tensor i64(std::vector<int64_t> v) { return tensor(v); }
Tensor i32(std::vector<int32_t> v) { return tensor(v); }
Tensor f32(std::vector<float> v) { return tensor(v); }
Tensor f64(std::vector<double> v) { return tensor(v); }
Tensor b8(std::vector<bool> v) { return tensor(v); }
Tensor u8(std::vector<uint8_t> v) { return tensor(v); }

TEST(Promotion, BinaryOpsReturnTheResultType) {
  EXPECT_EQ((i32({1, 2}) + f32({0.5f, 0.5f})).dtype(), DType::f32);
  EXPECT_EQ(values<float>(i32({1, 2}) + f32({0.5f, 0.5f})), (std::vector<float>{1.5f, 2.5f}));
  EXPECT_EQ((f32({1}) + f64({1})).dtype(), DType::f64);
  EXPECT_EQ((f32({1}) + scalar_tensor(1.0, DType::f64)).dtype(), DType::f32);  // zero-dim: same category
  EXPECT_EQ((i64({1}) + scalar_tensor(1.0, DType::f64)).dtype(), DType::f64);  // zero-dim: higher category
  EXPECT_EQ((i64({3}) + 1.5).dtype(), DType::f32);
  EXPECT_EQ(values<float>(i64({3}) * 1.5), (std::vector<float>{4.5f}));
  EXPECT_EQ((i32({3}) + 1).dtype(), DType::i32);
  EXPECT_EQ((b8({true, false}) + 1).dtype(), DType::i64);
  EXPECT_EQ(values<int64_t>(b8({true, false}) + 1), (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(values<bool>(b8({true, false}) + b8({true, false})), (std::vector<bool>{true, false}));  // or
  EXPECT_EQ(values<bool>(b8({true, false}) * b8({true, true})), (std::vector<bool>{true, false}));   // and
  EXPECT_EQ((u8({200}) + i32({1})).dtype(), DType::i32);
  EXPECT_EQ(values<float>(maximum(i64({1, 5}), f32({2.5f, 2.5f}))), (std::vector<float>{2.5f, 5.0f}));
  EXPECT_EQ(where(b8({true, false}), i64({1, 2}), 1.5).dtype(), DType::f32);
  EXPECT_EQ(where(b8({true, false}), 1, 2).dtype(), DType::i64);
  EXPECT_EQ(where(b8({true, false}), f32({1, 2}), f64({3, 4})).dtype(), DType::f64);
}

TEST(Promotion, TrueDivisionOfIntegersIsDefaultFloat) {
  const Tensor q = div(i64({7, -7}), i64({2, 2}));
  EXPECT_EQ(q.dtype(), DType::f32);
  EXPECT_EQ(values<float>(q), (std::vector<float>{3.5f, -3.5f}));
  EXPECT_EQ(div(b8({true}), b8({true})).dtype(), DType::f32);
  EXPECT_EQ(values<float>(div(i32({1}), 0)), (std::vector<float>{std::numeric_limits<float>::infinity()}));
  EXPECT_EQ(values<float>(div(1, i32({4}))), (std::vector<float>{0.25f}));
}

TEST(IntegerArithmetic, WrapsAroundLikePyTorch) {
  const int32_t max32 = std::numeric_limits<int32_t>::max();
  EXPECT_EQ(values<int32_t>(i32({max32}) + 1), (std::vector<int32_t>{std::numeric_limits<int32_t>::min()}));
  EXPECT_EQ(values<uint8_t>(u8({3, 7}) - 5), (std::vector<uint8_t>{254, 2}));
  EXPECT_EQ(values<uint8_t>(u8({3, 7}) * 100), (std::vector<uint8_t>{44, 188}));
  EXPECT_EQ(values<uint8_t>(u8({1}) + 1000), (std::vector<uint8_t>{233}));  // the number wraps into u8
  EXPECT_EQ(values<int64_t>(add(i64({1, 2}), i64({10, 10}), 3)), (std::vector<int64_t>{31, 32}));
  EXPECT_EQ(values<int32_t>(neg(i32({std::numeric_limits<int32_t>::min(), 5}))),
            (std::vector<int32_t>{std::numeric_limits<int32_t>::min(), -5}));
  EXPECT_EQ(values<int32_t>(abs(i32({-128, std::numeric_limits<int32_t>::min()}))),
            (std::vector<int32_t>{128, std::numeric_limits<int32_t>::min()}));
  EXPECT_EQ(values<uint8_t>(neg(u8({3}))), (std::vector<uint8_t>{253}));
}

TEST(IntegerArithmetic, FloorDivisionAndRemainderFollowPython) {
  EXPECT_EQ(values<int64_t>(floor_divide(i64({-7, 7, -7, 7}), i64({2, 2, -2, -2}))),
            (std::vector<int64_t>{-4, 3, 3, -4}));
  EXPECT_EQ(values<int64_t>(remainder(i64({-7, 7, -7, 7}), i64({2, 2, -2, -2}))), (std::vector<int64_t>{1, 1, -1, -1}));
  EXPECT_EQ(values<int64_t>(floor_divide(i64({std::numeric_limits<int64_t>::min()}), -1)),
            (std::vector<int64_t>{std::numeric_limits<int64_t>::min()}));
  EXPECT_EQ(values<int64_t>(floor_divide(7, i64({2, -2}))), (std::vector<int64_t>{3, -4}));
  EXPECT_EQ(values<uint8_t>(remainder(u8({7}), u8({3}))), (std::vector<uint8_t>{1}));
  // Floats: floor_divide(5.5, 2) is 2; -0 keeps its sign; a zero divisor gives inf / NaN.
  EXPECT_EQ(values<float>(floor_divide(f32({5.5f, -5.5f, 1.0f}), f32({2.0f, 2.0f, 0.0f}))),
            (std::vector<float>{2.0f, -3.0f, std::numeric_limits<float>::infinity()}));
  EXPECT_EQ(values<float>(remainder(f32({-5.5f, 5.5f}), f32({2.0f, -2.0f}))), (std::vector<float>{0.5f, -0.5f}));
  EXPECT_TRUE(std::isnan(values<float>(remainder(f32({1.0f}), 0.0))[0]));
  EXPECT_EQ(floor_divide(i64({1}), 1.5).dtype(), DType::f32);
  EXPECT_ERROR_HAS(floor_divide(i64({1, 2}), i64({1, 0})), "ZeroDivisionError");
  EXPECT_ERROR_HAS(remainder(i32({1}), 0), "ZeroDivisionError");
  EXPECT_ERROR_HAS(remainder(5, i32({0})), "ZeroDivisionError");
}

TEST(IntegerArithmetic, Powers) {
  EXPECT_EQ(values<int64_t>(pow(i64({2, 3, -2}), 3)), (std::vector<int64_t>{8, 27, -8}));
  EXPECT_EQ(pow(i64({2}), 0.5).dtype(), DType::f32);
  EXPECT_EQ(values<int64_t>(pow(i64({-1, 1, 3, -1}), i64({-3, -2, -1, -2}))), (std::vector<int64_t>{-1, 1, 0, 1}));
  EXPECT_EQ(values<int64_t>(pow(2, i64({0, 10}))), (std::vector<int64_t>{1, 1024}));
  EXPECT_EQ(values<float>(pow(2.0, i64({-1}))), (std::vector<float>{0.5f}));
  EXPECT_EQ(pow(b8({true}), 2).dtype(), DType::i64);
  EXPECT_ERROR_HAS(pow(i64({2}), -1), "negative integer powers");
}

TEST(Comparison, PromotesAndReturnsBool) {
  const Tensor r = i64({1, 2, 3}) < 2.5;
  EXPECT_EQ(r.dtype(), DType::boolean);
  EXPECT_EQ(values<bool>(r), (std::vector<bool>{true, true, false}));
  EXPECT_EQ(values<bool>(f32({1.5f}) == i64({1})), (std::vector<bool>{false}));
  EXPECT_EQ(values<bool>(f32({1, 2}) == f64({1, 3})), (std::vector<bool>{true, false}));
  const double nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_EQ(values<bool>(eq(f64({nan}), f64({nan}))), (std::vector<bool>{false}));
  EXPECT_EQ(values<bool>(ne(f64({nan}), nan)), (std::vector<bool>{true}));
  // The (pred == y).sum() habit: a count in i64.
  const Tensor hits = sum(eq(i64({0, 1, 2, 1}), i64({0, 2, 2, 1})));
  EXPECT_EQ(hits.dtype(), DType::i64);
  EXPECT_EQ(hits.item<int64_t>(), 3);
  Tensor x = f32({1, 2});
  x.set_requires_grad(true);
  EXPECT_FALSE((x > 1.0).requires_grad());
  EXPECT_ERROR_HAS(eq(f32({1, 2}), f32({1, 2, 3})), "cannot broadcast");
}

TEST(Logical, AnyDtypeToBool) {
  EXPECT_EQ(values<bool>(logical_and(f32({0.5f, 0.0f}), i64({1, 1}))), (std::vector<bool>{true, false}));
  EXPECT_EQ(values<bool>(logical_or(u8({0, 0}), b8({false, true}))), (std::vector<bool>{false, true}));
  EXPECT_EQ(values<bool>(logical_xor(b8({true, true}), f64({0, 2}))), (std::vector<bool>{true, false}));
  EXPECT_EQ(values<bool>(logical_not(f32({std::nanf(""), 0.0f}))), (std::vector<bool>{false, true}));
  const Tensor m = (f32({-1, 0.5f, 2}) > 0.0) & (f32({0, 0, 3}) < 1.0);
  EXPECT_EQ(m.dtype(), DType::boolean);
  EXPECT_EQ(values<bool>(m), (std::vector<bool>{false, true, false}));
}

TEST(Bitwise, IntegersAndBool) {
  EXPECT_EQ(values<int64_t>(i64({12, 10}) & i64({10, 6})), (std::vector<int64_t>{8, 2}));
  EXPECT_EQ(values<int64_t>(i64({12}) | 3), (std::vector<int64_t>{15}));
  EXPECT_EQ(values<int32_t>(i32({12}) ^ i32({10})), (std::vector<int32_t>{6}));
  EXPECT_EQ(values<int64_t>(~i64({3, -7})), (std::vector<int64_t>{-4, 6}));
  EXPECT_EQ(values<uint8_t>(~u8({3})), (std::vector<uint8_t>{252}));
  EXPECT_EQ(values<bool>(~b8({true, false})), (std::vector<bool>{false, true}));
  EXPECT_EQ((i64({1}) & b8({true})).dtype(), DType::i64);
  EXPECT_EQ((b8({true}) & true).dtype(), DType::boolean);
  EXPECT_ERROR_HAS(bitwise_and(f32({1}), f32({1})), "only integer and bool");
  EXPECT_ERROR_HAS(bitwise_and(i64({1}), 1.0), "only integer and bool");
  EXPECT_ERROR_HAS(bitwise_not(f64({1})), "only integer and bool");
}

TEST(BoolRules, RefusedLikePyTorch) {
  EXPECT_ERROR_HAS(b8({true}) - b8({true}), "bool");
  EXPECT_ERROR_HAS(i64({1}) - b8({true}), "bool");
  EXPECT_ERROR_HAS(-b8({true}), "logical_not");
  EXPECT_ERROR_HAS(abs(b8({true})), "bool");
  EXPECT_ERROR_HAS(floor_divide(b8({true}), b8({true})), "bool");
  EXPECT_ERROR_HAS(add(i64({1}), i64({1}), 0.5), "alpha");
  EXPECT_ERROR_HAS(mean(i64({1, 2})), "could not infer output dtype");
}

TEST(Float16, ComputesInF32AndRoundsOnStore) {
  const Tensor h = f32({1.0f, 2049.0f, 65504.0f}).to(DType::f16);
  EXPECT_EQ(values<float>(h), (std::vector<float>{1.0f, 2048.0f, 65504.0f}));
  const Tensor s = h + h;
  EXPECT_EQ(s.dtype(), DType::f16);
  EXPECT_EQ(values<float>(s), (std::vector<float>{2.0f, 4096.0f, std::numeric_limits<float>::infinity()}));
  EXPECT_EQ((h + f32({1, 1, 1})).dtype(), DType::f32);
  EXPECT_EQ((h + 1.5).dtype(), DType::f16);
  EXPECT_EQ((h + i64({1, 1, 1})).dtype(), DType::f16);
  EXPECT_EQ((h + ones({3}, {DType::bf16, nullptr})).dtype(), DType::f32);
  EXPECT_EQ(sum(h.narrow(0, 0, 2)).dtype(), DType::f16);
  EXPECT_EQ(sum(h.narrow(0, 0, 2)).item<float>(), 2048.0f);  // 2049 in f32, rounded to f16 once
  EXPECT_EQ(values<bool>(h > 2.0), (std::vector<bool>{false, true, true}));
  EXPECT_EQ(argmax(h).item<int64_t>(), 2);
  // Gradients flow in f16 (computed in f32).
  Tensor x = f32({1, 2}).to(DType::f16);
  x.set_requires_grad(true);
  sum(x * 3.0).backward();
  EXPECT_EQ(x.grad().dtype(), DType::f16);
  EXPECT_EQ(values<float>(x.grad()), (std::vector<float>{3.0f, 3.0f}));
}

TEST(Promotion, GradientsComeBackInEachInputsDtype) {
  Tensor a = f32({1, 2}), b = f64({3, 4});
  a.set_requires_grad(true);
  b.set_requires_grad(true);
  Tensor y = mul(a, b);
  EXPECT_EQ(y.dtype(), DType::f64);
  sum(y).backward();
  EXPECT_EQ(a.grad().dtype(), DType::f32);
  EXPECT_EQ(values<float>(a.grad()), (std::vector<float>{3, 4}));
  EXPECT_EQ(b.grad().dtype(), DType::f64);
  EXPECT_EQ(values<double>(b.grad()), (std::vector<double>{1, 2}));
  Tensor c = f32({2, 4});
  c.set_requires_grad(true);
  sum(div(c, i64({2, 2}))).backward();  // the integer divisor needs no gradient
  EXPECT_EQ(values<float>(c.grad()), (std::vector<float>{0.5f, 0.5f}));
}

TEST(Reductions, IntegersAndBoolSumIntoI64) {
  const Tensor s = sum(i32({1, 2, 3}));
  EXPECT_EQ(s.dtype(), DType::i64);
  EXPECT_EQ(s.item<int64_t>(), 6);
  EXPECT_EQ(sum(b8({true, true, false})).item<int64_t>(), 2);
  EXPECT_EQ(sum(u8({200, 200})).item<int64_t>(), 400);
  EXPECT_EQ(values<int64_t>(sum(tensor(std::vector<int64_t>{1, 2, 3, 4}, IntArrayRef{2, 2}), {0})),
            (std::vector<int64_t>{4, 6}));
  const int64_t big = int64_t{1} << 62;
  EXPECT_EQ(sum(i64({big, big})).item<int64_t>(), std::numeric_limits<int64_t>::min());  // wraps, as PyTorch
  EXPECT_EQ(prod(i32({-3, 7})).dtype(), DType::i64);
  EXPECT_EQ(prod(i32({-3, 7})).item<int64_t>(), -21);
  EXPECT_EQ(prod(b8({true, false})).item<int64_t>(), 0);
  EXPECT_EQ(prod(f32({})).item<float>(), 1.0f);
  EXPECT_EQ(values<int64_t>(prod(tensor(std::vector<int64_t>{1, 2, 3, 4}, IntArrayRef{2, 2}), 1)),
            (std::vector<int64_t>{2, 12}));
  EXPECT_EQ(max(i64({3, -7})).item<int64_t>(), 3);
  EXPECT_EQ(min(u8({3, 7})).item<int64_t>(), 3);
  EXPECT_EQ(max(b8({false, true})).dtype(), DType::boolean);
  EXPECT_TRUE(max(b8({false, true})).item<bool>());
  EXPECT_EQ(values<int32_t>(amin(tensor(std::vector<int32_t>{4, -2, 9, 1}, IntArrayRef{2, 2}), {1})),
            (std::vector<int32_t>{-2, 1}));
}

TEST(Reductions, AnyAndAll) {
  EXPECT_TRUE(any(f32({0, 0.5f})).item<bool>());
  EXPECT_FALSE(all(f32({0, 0.5f})).item<bool>());
  EXPECT_TRUE(any(f32({std::nanf("")})).item<bool>());
  EXPECT_FALSE(any(f32({})).item<bool>());
  EXPECT_TRUE(all(f32({})).item<bool>());
  EXPECT_EQ(any(u8({0, 3})).dtype(), DType::u8);  // PyTorch's rule for u8
  EXPECT_EQ(any(u8({0, 3})).item<int64_t>(), 1);
  EXPECT_EQ(values<bool>(all(tensor(std::vector<int64_t>{1, 0, 2, 3}, IntArrayRef{2, 2}), {1})),
            (std::vector<bool>{false, true}));
  EXPECT_EQ(values<bool>(any(zeros({2, 0}), {1}, true)), (std::vector<bool>{false, false}));
}

TEST(IndexReductions, EveryDtypeAndPyTorchsOrder) {
  EXPECT_EQ(argmax(i64({3, 9, 9, 1})).item<int64_t>(), 1);  // the first of ties
  EXPECT_EQ(argmin(u8({3, 9, 0, 0})).item<int64_t>(), 2);
  const float nan = std::nanf("");
  EXPECT_EQ(argmax(f32({1, nan, 5, nan})).item<int64_t>(), 1);  // NaN is the maximum...
  EXPECT_EQ(argmin(f32({1, nan, -5})).item<int64_t>(), 1);      // ...and the minimum
  const auto mx = max(tensor(std::vector<float>{1, 3, 3, 2, nan, 5}, IntArrayRef{2, 3}), 1);
  EXPECT_EQ(values<int64_t>(mx.indices), (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(mx.indices.dtype(), DType::i64);
  const auto s = sort(f32({3, nan, 1, 3, -INFINITY}), 0, true);
  EXPECT_EQ(values<int64_t>(s.indices), (std::vector<int64_t>{1, 0, 3, 2, 4}));
  const auto sb = sort(b8({true, false, true}));
  EXPECT_EQ(sb.values.dtype(), DType::boolean);
  EXPECT_EQ(values<int64_t>(sb.indices), (std::vector<int64_t>{1, 0, 2}));
  const auto t = topk(i32({5, 1, 9, 7}), 2);
  EXPECT_EQ(values<int32_t>(t.values), (std::vector<int32_t>{9, 7}));
  EXPECT_EQ(values<int64_t>(t.indices), (std::vector<int64_t>{2, 3}));
  const auto t16 = topk(f32({0.5f, 2.0f, -1.0f}).to(DType::f16), 1, 0, false);
  EXPECT_EQ(t16.values.dtype(), DType::f16);
  EXPECT_EQ(t16.values.item<float>(), -1.0f);
  EXPECT_EQ(argmax(ones({2, 3}), std::nullopt, true).sizes(), (Dims{1, 1}));
  EXPECT_EQ(max(scalar_tensor(5.0), 0).indices.dim(), 0);
  EXPECT_ERROR_HAS(argmax(b8({true})), "bool");
  EXPECT_ERROR_HAS(topk(f32({1, 2}), 3), "k out of range");
}

TEST(IndexReductions, GradientGoesToTheSelectedElements) {
  Tensor x = tensor(std::vector<double>{1, 7, 3, 9, 2, 4}, IntArrayRef{2, 3});
  x.set_requires_grad(true);
  const auto r = max(x, 1);
  EXPECT_FALSE(r.indices.requires_grad());
  sum(mul(r.values, f64({10, 20}))).backward();
  EXPECT_EQ(values<double>(x.grad()), (std::vector<double>{0, 10, 0, 20, 0, 0}));
  Tensor y = f64({4, 1, 3});
  y.set_requires_grad(true);
  sum(mul(sort(y, 0, true).values, f64({1, 2, 3}))).backward();  // sorted: 4, 3, 1
  EXPECT_EQ(values<double>(y.grad()), (std::vector<double>{1, 3, 2}));
}

}  // namespace
}  // namespace strata
