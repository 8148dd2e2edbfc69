// Custom functions (Note [Custom functions] in ops/custom_function.h): the node calling a user
// backward, saved values, dirty and non-differentiable outputs, and the checks on the returned
// gradients.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "ops/binary.h"
#include "ops/custom_function.h"
#include "ops/unary.h"
#include "tests/cpp/autograd/graph_util.h"
#include "tests/cpp/error_text.h"

namespace strata_test {
namespace {

using namespace strata;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A custom "scale by k" of x with the backward given.
Tensor scale(const Tensor& x, double k, CustomBackward backward, TensorList save = {}) {
  Tensor y;
  {
    autograd::NoGradGuard no_grad;
    y = mul(x, k);
  }
  CustomFunctionSpec spec;
  spec.name = "ScaleBackward";
  spec.inputs = {x, Tensor()};  // (x, k): k is not a tensor
  spec.to_save = std::move(save);
  TensorList outs{y};
  record_custom_function(spec, outs, std::move(backward));
  return outs[0];
}

TEST(CustomFunction, RecordsOneNodeCallingTheUserBackward) {
  Tensor x = f64({1, 2}).set_requires_grad();
  Tensor y = scale(x, 3, [](const TensorList& g) -> TensorList { return {mul(g[0], 3.0), Tensor()}; });
  ASSERT_TRUE(y.grad_fn());
  EXPECT_EQ(y.grad_fn()->name(), "ScaleBackward");
  EXPECT_TRUE(y.grad_fn()->needs_input_grad(0));
  EXPECT_FALSE(y.grad_fn()->needs_input_grad(1));
  y.backward(f64({1, 10}));
  EXPECT_THAT(vals(x.grad()), ElementsAre(3, 30));
}

TEST(CustomFunction, NothingRecordedWithoutGrad) {
  Tensor x = f64({1, 2});
  EXPECT_FALSE(scale(x, 3, [](const TensorList&) -> TensorList { return {}; }).grad_fn());
  EXPECT_THAT(custom_function_needs_input_grad({x, Tensor()}), ElementsAre(false, false));
  x.set_requires_grad();
  EXPECT_THAT(custom_function_needs_input_grad({x, Tensor()}), ElementsAre(true, false));
  autograd::NoGradGuard no_grad;
  EXPECT_THAT(custom_function_needs_input_grad({x}), ElementsAre(false));
}

TEST(CustomFunction, SavedValueIsVersionChecked) {
  Tensor x = f64({1, 2}).set_requires_grad();
  Tensor a = x.detach().clone();
  Tensor y = scale(x, 2, [](const TensorList& g) -> TensorList { return {g[0], Tensor()}; }, {a});
  EXPECT_EQ(y.grad_fn()->saved_values().size(), 1u);
  a.fill_(5);
  EXPECT_ERROR_HAS(y.grad_fn()->saved(0), "modified by an inplace operation");
}

TEST(CustomFunction, GradientShapesAndDtypesAreAdjustedOrRejected) {
  Tensor x = f64({1, 2}).set_requires_grad();
  // Broadcastable: summed down. Other floating dtype: converted. Extra trailing undefined: fine.
  scale(x, 1, [](const TensorList&) -> TensorList {
    return {f64({1, 1, 1, 1}).view({2, 2}), Tensor(), Tensor()};
  }).backward(f64({1, 1}));
  EXPECT_THAT(vals(x.grad()), ElementsAre(2, 2));
  x.set_grad(Tensor());
  scale(x, 1, [](const TensorList& g) -> TensorList { return {g[0].to(DType::f32), Tensor()}; }).backward(f64({1, 1}));
  EXPECT_EQ(x.grad().dtype(), DType::f64);
  EXPECT_ERROR_HAS(scale(x, 1, [](const TensorList& g) -> TensorList { return {g[0]}; }).backward(f64({1, 1})),
                   "function ScaleBackward returned an incorrect number of gradients (expected 2, got 1)");
  EXPECT_ERROR_HAS(
      scale(x, 1, [](const TensorList& g) -> TensorList { return {g[0], Tensor(), g[0]}; }).backward(f64({1, 1})),
      "incorrect number of gradients (expected 2, got 3)");
  EXPECT_ERROR_HAS(scale(x, 1, [](const TensorList& g) -> TensorList { return {g[0], g[0]}; }).backward(f64({1, 1})),
                   "returned a gradient different than None at position 2, but the corresponding forward input was "
                   "not a Variable");
  EXPECT_ERROR_HAS(
      scale(x, 1, [](const TensorList&) -> TensorList { return {f64({1, 2, 3}), Tensor()}; }).backward(f64({1, 1})),
      "Function ScaleBackward returned an invalid gradient at index 0 - got [3] but expected shape compatible with "
      "[2]");
}

TEST(CustomFunction, DirtyInputGetsTheNewHistoryItself) {
  Tensor leaf = f64({1, 2}).set_requires_grad();
  Tensor a = tmul(leaf, f64({1, 1}));  // a non-leaf
  {
    autograd::NoGradGuard no_grad;
    a.fill_(4);
  }
  CustomFunctionSpec spec;
  spec.name = "FillBackward";
  spec.inputs = {a};
  spec.dirty = {a};
  TensorList outs{a};
  record_custom_function(spec, outs, [](const TensorList& g) -> TensorList { return {mul(g[0], 2.0)}; });
  EXPECT_TRUE(outs[0].is_same(a));
  EXPECT_EQ(a.grad_fn()->name(), "FillBackward");
  a.backward(f64({1, 1}));
  EXPECT_THAT(vals(leaf.grad()), ElementsAre(2, 2));
}

TEST(CustomFunction, NonDifferentiableOutputsGetZeroGradients) {
  Tensor x = f64({1, 2}).set_requires_grad();
  Tensor y = x.detach().clone(), idx = f64({0});
  CustomFunctionSpec spec;
  spec.name = "TwoBackward";
  spec.inputs = {x};
  spec.non_differentiable = {idx};
  TensorList outs{y, idx};
  std::vector<double> second;
  record_custom_function(spec, outs, [&](const TensorList& g) -> TensorList {
    second = vals(g[1]);
    return {g[0]};
  });
  EXPECT_TRUE(outs[0].requires_grad());
  EXPECT_FALSE(outs[1].requires_grad());
  outs[0].backward(f64({1, 1}));
  EXPECT_THAT(second, ElementsAre(0));
}

TEST(CustomFunction, BadSpecs) {
  Tensor x = f64({1, 2}).set_requires_grad();
  Tensor other = f64({3});
  CustomFunctionSpec spec;
  spec.name = "BadBackward";
  spec.inputs = {x};
  TensorList outs{x.detach().clone()};
  auto none = [](const TensorList&) -> TensorList { return {}; };
  spec.dirty = {other};
  EXPECT_ERROR_HAS(record_custom_function(spec, outs, none), "mark_dirty only accepts input tensors");
  spec.dirty = {x};
  EXPECT_ERROR_HAS(record_custom_function(spec, outs, none), "were not returned as output");
  TensorList self{x};
  EXPECT_ERROR_HAS(record_custom_function(spec, self, none), "a leaf Variable that requires grad");
  spec.dirty = {};
  spec.non_differentiable = {other};
  EXPECT_ERROR_HAS(record_custom_function(spec, outs, none), "mark_non_differentiable only accepts output tensors");
  spec.non_differentiable = {};
  TensorList undefined{Tensor()};
  EXPECT_ERROR_HAS(record_custom_function(spec, undefined, none), "output 0 of the forward is undefined");
}

}  // namespace
}  // namespace strata_test
