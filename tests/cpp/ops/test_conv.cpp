// conv2d and pooling beyond the harness: both conv2d implementations (oneDNN primitives and the
// own im2col + GEMM kernels) on every harness case, the size dispatch, empty batches.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>

#include "ops/conv.h"
#include "ops/detail/cpu/dnnl_engine.h"
#include "ops/pooling.h"
#include "tests/cpp/bitwise.h"
#include "tests/cpp/core/test_util.h"
#include "tests/cpp/ops/harness/op_harness.h"

namespace strata::testing {
namespace {

using ops::cpu::DnnlPrimitives;

using ModeGuard = ops::cpu::DnnlPrimitivesGuard;

void expect_near_all(const Tensor& a, const Tensor& b, double rtol, double atol, const std::string& what) {
  ASSERT_TRUE(a.defined() && b.defined()) << what;
  ASSERT_EQ(a.sizes(), b.sizes()) << what;
  const auto x = values_of(a), y = values_of(b);
  int bad = 0;
  for (std::size_t i = 0; i < x.size(); ++i)
    if (std::abs(x[i] - y[i]) > atol + rtol * std::abs(y[i]) && bad++ < 5)
      ADD_FAILURE() << what << ": element " << i << " is " << x[i] << ", expected " << y[i];
}

/// Output and input gradients of case `c` run in f32 under `mode`.
TensorList run_f32(const OpCase& c, const TensorList& inputs64, const Tensor& gy64, DnnlPrimitives mode) {
  ModeGuard guard(mode);
  TensorList in;
  for (const Tensor& t : inputs64) in.push_back(t.to(DType::f32, true).set_requires_grad(true));
  TensorList out = c.run(in);
  out[0].backward(gy64.to(DType::f32, true));
  TensorList result{out[0].detach()};
  for (const Tensor& t : in) result.push_back(t.grad());
  return result;
}

TEST(Conv2d, PrimitivePathMatchesOwnKernelsOnEveryCase) {
  int cases = 0;
  for (const OpCase& c : op_cases()) {
    if (c.op != OpKind::conv2d) continue;
    ++cases;
    Generator gen(42);
    const TensorList inputs = c.inputs(gen);
    const Tensor ref = c.reference(inputs)[0];
    const Tensor gy = uniform64(ref.sizes(), gen);
    const TensorList prim = run_f32(c, inputs, gy, DnnlPrimitives::Always);
    const TensorList own = run_f32(c, inputs, gy, DnnlPrimitives::Never);
    expect_near_all(prim[0], ref, 1e-4, 1e-5, c.name + " primitive forward vs f64 reference");
    expect_near_all(own[0], ref, 1e-4, 1e-5, c.name + " own forward vs f64 reference");
    for (std::size_t i = 1; i < prim.size(); ++i)
      expect_near_all(prim[i], own[i], 1e-4, 1e-4, c.name + " grad " + std::to_string(i - 1) + " primitive vs own");
  }
  EXPECT_GE(cases, 10);
}

TEST(Conv2d, TypicalCnnLayersUsePrimitivesTinyOnesDoNot) {
  ModeGuard guard(DnnlPrimitives::Auto);
  const auto f32 = TensorOptions{DType::f32, nullptr};
  EXPECT_TRUE(ops::conv2d_uses_primitives(empty({32, 64, 32, 32}, f32), empty({64, 64, 3, 3}, f32), {1}, {1}));
  EXPECT_TRUE(ops::conv2d_uses_primitives(empty({128, 256, 16, 16}, f32), empty({256, 256, 3, 3}, f32), {1}, {1}));
  EXPECT_TRUE(ops::conv2d_uses_primitives(empty({64, 128, 8, 8}, f32), empty({128, 128, 3, 3}, f32), {2}, {1}));
  // Measured faster on im2col + sgemm (ops/conv.cpp): first layers with 3 input channels.
  EXPECT_FALSE(ops::conv2d_uses_primitives(empty({128, 3, 32, 32}, f32), empty({64, 3, 3, 3}, f32), {1}, {1}));
  EXPECT_FALSE(ops::conv2d_uses_primitives(empty({2, 4, 5, 5}, f32), empty({6, 4, 3, 3}, f32)));
  // f64 never uses primitives.
  const auto f64 = TensorOptions{DType::f64, nullptr};
  EXPECT_FALSE(ops::conv2d_uses_primitives(empty({32, 64, 32, 32}, f64), empty({64, 64, 3, 3}, f64), {1}, {1}));
  ModeGuard never(DnnlPrimitives::Never);
  EXPECT_FALSE(ops::conv2d_uses_primitives(empty({32, 64, 32, 32}, f32), empty({64, 64, 3, 3}, f32), {1}, {1}));
}

TEST(Conv2d, MediumLayerBothPathsAgree) {
  Generator gen(7);
  const Tensor x = randn32({4, 16, 12, 12}, gen), w = randn32({32, 16, 3, 3}, gen), b = randn32({32}, gen);
  const Tensor gy = randn32({4, 32, 6, 6}, gen);
  TensorList res[2];
  for (int path = 0; path < 2; ++path) {
    ModeGuard guard(path == 0 ? DnnlPrimitives::Always : DnnlPrimitives::Never);
    Tensor xx = x.clone().set_requires_grad(true), ww = w.clone().set_requires_grad(true);
    Tensor bb = b.clone().set_requires_grad(true);
    Tensor y = conv2d(xx, ww, bb, {2}, {1});
    y.backward(gy);
    res[path] = {y.detach(), xx.grad(), ww.grad(), bb.grad()};
  }
  for (int i = 0; i < 4; ++i) expect_near_all(res[0][i], res[1][i], 1e-4, 1e-3, "output/grad " + std::to_string(i));
}

TEST(Conv2d, EmptyBatch) {
  for (auto mode : {DnnlPrimitives::Always, DnnlPrimitives::Never}) {
    ModeGuard guard(mode);
    Tensor x = zeros({0, 3, 5, 5}, {DType::f32, nullptr}).set_requires_grad(true);
    Tensor w = ones({4, 3, 3, 3}, {DType::f32, nullptr}).set_requires_grad(true);
    Tensor y = conv2d(x, w, Tensor(), {1}, {1});
    EXPECT_EQ(y.sizes(), (Dims{0, 4, 5, 5}));
    y.backward(zeros({0, 4, 5, 5}, {DType::f32, nullptr}));
    EXPECT_EQ(x.grad().sizes(), x.sizes());
    EXPECT_EQ(w.grad().at({0, 0, 0, 0}), 0.0);
  }
}

TEST(Conv2d, DoesNotModifyInputs) {
  Generator gen(3);
  const Tensor x = randn32({2, 8, 6, 6}, gen), w = randn32({8, 8, 3, 3}, gen);
  const auto xv = values_of(x), wv = values_of(w);
  ModeGuard guard(DnnlPrimitives::Always);
  conv2d(x, w, Tensor(), {1}, {1});
  EXPECT_EQ(values_of(x), xv);
  EXPECT_EQ(values_of(w), wv);
}

TEST(MaxPool2d, GradientGoesToTheArgmaxOnly) {
  // One window [[1, 5], [3, 2]]: the gradient lands on the 5.
  Tensor x = from_values({1, 5, 3, 2}, {1, 1, 2, 2}).set_requires_grad(true);
  Tensor y = max_pool2d(x, {2});
  EXPECT_EQ(y.item<double>(), 5.0);
  y.backward(full({1, 1, 1, 1}, 2.0, {DType::f64, nullptr}));
  EXPECT_EQ(values_of(x.grad()), (std::vector<double>{0, 2, 0, 0}));
}

TEST(MaxPool2d, OverlappingWindowsAccumulate) {
  // Stride 1: the centre maximum wins all four 2x2 windows.
  Tensor x = from_values({0, 0, 0, 0, 9, 0, 0, 0, 0}, {1, 1, 3, 3}).set_requires_grad(true);
  Tensor y = max_pool2d(x, {2}, {1});
  y.backward(ones({1, 1, 2, 2}, {DType::f64, nullptr}));
  EXPECT_EQ(x.grad().at({0, 0, 1, 1}), 4.0);
}

TEST(MaxPool2d, NanPropagates) {
  Tensor x = from_values({1, NAN, 3, 2}, {1, 2, 2});
  EXPECT_TRUE(std::isnan(max_pool2d(x, {2}).item<double>()));
}

TEST(Pooling, EmptyBatch) {
  const Tensor x = zeros({0, 3, 4, 4}, {DType::f32, nullptr});
  EXPECT_EQ(max_pool2d(x, {2}).sizes(), (Dims{0, 3, 2, 2}));
  EXPECT_EQ(avg_pool2d(x, {2}).sizes(), (Dims{0, 3, 2, 2}));
  EXPECT_EQ(adaptive_avg_pool2d(x, {1}).sizes(), (Dims{0, 3, 1, 1}));
}

// Note [Conv backward in two steps]: the data step and the weight step give conv2d's output and
// gradients bit for bit (the same kernels on the same operands), on the oneDNN path and the own
// one; a weight step with nothing to differentiate returns its input and keeps nothing.
using testing_util::same_bits;

TEST(Conv2dSplit, StepsEqualConv2dBitwise) {
  for (bool big : {true, false}) {
    SCOPED_TRACE(big ? "oneDNN-sized" : "small");
    const Dims xs = big ? Dims{8, 32, 16, 16} : Dims{2, 4, 5, 5};
    const Dims ws = big ? Dims{32, 32, 3, 3} : Dims{3, 4, 3, 3};
    Tensor x0 = randn(xs), w0 = randn(ws), b0 = randn({ws[0]});
    auto run = [&](bool split) {
      Tensor x = x0.detach().set_requires_grad(), w = w0.detach().set_requires_grad(),
             b = b0.detach().set_requires_grad();
      Tensor y = split ? conv2d_weight_step(conv2d_data_step(x, w, b, {1}, {1}), x, w, b, {1}, {1})
                       : conv2d(x, w, b, {1}, {1});
      Generator gen(11);  // the same output gradient for both
      Tensor g = randn(y.sizes(), {}, &gen);
      y.backward(g);
      return TensorList{y.detach(), x.grad(), w.grad(), b.grad()};
    };
    const TensorList plain = run(false), split = run(true);
    for (std::size_t i = 0; i < plain.size(); ++i) EXPECT_TRUE(same_bits(plain[i], split[i])) << "tensor " << i;
  }
  // Frozen weights: the weight step is the identity on y and records nothing.
  Tensor x = randn({2, 4, 5, 5}).set_requires_grad();
  Tensor w = randn({3, 4, 3, 3}), b = randn({3});
  Tensor y = conv2d_data_step(x, w, b, {1}, {1});
  Tensor z = conv2d_weight_step(y, x, w, b, {1}, {1});
  EXPECT_EQ(z.grad_fn(), y.grad_fn());
  EXPECT_EQ(z.data_ptr(), y.data_ptr());
}

TEST(Conv2dSplit, BadInput) {
  Tensor x = randn({2, 4, 5, 5}), w = randn({3, 4, 3, 3});
  Tensor y = conv2d_data_step(x, w, Tensor(), {1}, {1});
  EXPECT_THAT(ERROR_MESSAGE(conv2d_weight_step(y, x, w, Tensor(), {1}, {0})),
              ::testing::HasSubstr("is not conv2d's for input"));
  EXPECT_THAT(ERROR_MESSAGE(conv2d_weight_step(Tensor(), x, w)), ::testing::HasSubstr("the output is undefined"));
  EXPECT_THAT(ERROR_MESSAGE(conv2d_data_step(x, randn({3, 5, 3, 3}))), ::testing::HasSubstr("conv2d"));
}

}  // namespace
}  // namespace strata::testing
