// In-place ops under autograd (ops/inplace.h, Note [In-place ops]; view tracking and CopySlices in
// autograd/view.h): gradients through in-place writes into views checked by finite differences,
// the rebased histories, and PyTorch's errors (a leaf, a view of a leaf, a saved value modified,
// an expanded destination, shape and dtype mismatches).

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "autograd/engine.h"
#include "autograd/grad_mode.h"
#include "autograd/view.h"
#include "core/factories.h"
#include "core/rng.h"
#include "ops/binary.h"
#include "ops/comparison.h"
#include "ops/indexing.h"
#include "ops/inplace.h"
#include "ops/reduction.h"
#include "ops/scatter.h"
#include "ops/shape_ops.h"
#include "ops/unary.h"
#include "tests/cpp/error_text.h"

namespace strata {
namespace {

using autograd::TensorList;
using indexing::Slice;

Tensor randn64(IntArrayRef sizes, Generator& gen) { return randn(sizes, {DType::f64, nullptr}, &gen); }

Tensor from_values(const std::vector<double>& values, IntArrayRef sizes) {
  Tensor t = empty(sizes, {DType::f64, nullptr});
  std::copy(values.begin(), values.end(), t.data<double>());
  return t;
}

Tensor from_indices(const std::vector<int64_t>& values, IntArrayRef sizes) {
  Tensor t = empty(sizes, {DType::i64, nullptr});
  std::copy(values.begin(), values.end(), t.data<int64_t>());
  return t;
}

std::vector<double> values_of(const Tensor& t) {
  const Tensor c = t.to(DType::f64).contiguous();
  return {c.data<double>(), c.data<double>() + c.numel()};
}

/// A graph built from leaves (f64); it may write in place into anything but the leaves.
using Graph = std::function<Tensor(const TensorList& leaves)>;

/// sum(f(leaves) * w) for a fixed random w (so a gradient in the wrong element shows).
double weighted_loss(const Graph& f, const TensorList& leaves, const Tensor& w) {
  return sum(mul(f(leaves), w)).item<double>();
}

/// Checks autograd's gradient of sum(f(leaves) * w) against central differences.
void expect_fd_gradients(const Graph& f, const std::vector<Dims>& shapes, uint64_t seed = 7) {
  Generator gen(seed);
  TensorList leaves;
  for (const Dims& s : shapes) leaves.push_back(randn64(s, gen).set_requires_grad());
  const Tensor out = f(leaves);
  const Tensor w = randn64(out.sizes(), gen);
  const TensorList grads = autograd::grad({sum(mul(out, w))}, leaves);
  autograd::NoGradGuard no_grad;
  const double eps = 1e-6;
  for (std::size_t i = 0; i < leaves.size(); ++i) {
    const std::vector<double> analytic = values_of(grads[i]);
    for (int64_t k = 0; k < leaves[i].numel(); ++k) {
      TensorList plus, minus;
      for (const Tensor& l : leaves) plus.push_back(l.detach().clone()), minus.push_back(l.detach().clone());
      Tensor p = plus[i].reshape({-1}), m = minus[i].reshape({-1});
      Tensor pk = p.narrow(0, k, 1), mk = m.narrow(0, k, 1);
      add_(pk, eps);
      add_(mk, -eps);
      const double numeric = (weighted_loss(f, plus, w) - weighted_loss(f, minus, w)) / (2 * eps);
      EXPECT_NEAR(analytic[static_cast<std::size_t>(k)], numeric, 1e-6) << "leaf " << i << " element " << k;
    }
  }
}

// `x = a * 1` as in the Python scripts: a non-leaf copy of a leaf that may be written in place.
Tensor copy_of(const Tensor& a) { return mul(a, 1.0); }

TEST(InPlaceAutograd, AddIntoASliceRebasesTheBase) {  // x = a * 1; x[1:3] += y
  expect_fd_gradients(
      [](const TensorList& l) {
        Tensor x = copy_of(l[0]);
        Tensor v = index(x, {Slice{1, 3}});
        add_(v, l[1]);
        return mul(x, x);
      },
      {{5, 3}, {2, 3}});
}

TEST(InPlaceAutograd, MulIntoANarrowedViewSavesTheOldValue) {  // x.narrow(1, 1, 2).mul_(z)
  expect_fd_gradients(
      [](const TensorList& l) {
        Tensor x = copy_of(l[0]);
        Tensor v = slice(x, 1, 1, 3);
        mul_(v, l[1]);
        return x;
      },
      {{3, 4}, {3, 2}});
}

TEST(InPlaceAutograd, TwoWritesIntoOverlappingViews) {
  expect_fd_gradients(
      [](const TensorList& l) {
        Tensor x = copy_of(l[0]);
        Tensor v1 = slice(x, 0, 0, 3), v2 = slice(x, 0, 2, 5);
        mul_(v1, l[1]);
        mul_(v2, l[2]);          // v2's history was stale after the first write: it is regenerated from x's
        return cat({x, v1}, 0);  // v1 read after the second write: its history is regenerated too
      },
      {{5}, {3}, {3}});
}

TEST(InPlaceAutograd, AViewOfAViewWritesIntoTheRootBase) {
  expect_fd_gradients(
      [](const TensorList& l) {
        Tensor x = reshape(copy_of(l[0]), {4, 5});
        Tensor rows = slice(x, 0, 1, 3);
        Tensor v = transpose(slice(rows, 1, 2, 4), 0, 1);
        div_(v, l[1]);
        if (autograd::GradMode::is_enabled()) {
          EXPECT_TRUE(autograd::view_base(v).is_same(autograd::view_base(rows)));
        }
        return x;
      },
      {{20}, {2, 2}});
}

TEST(InPlaceAutograd, CopyIntoAViewOfATensorThatNeedsNoGrad) {  // x = zeros; x[1:3] = y (broadcast)
  expect_fd_gradients(
      [](const TensorList& l) {
        Tensor x = zeros({4, 3}, {DType::f64, nullptr});
        Tensor v = slice(x, 0, 1, 3);
        copy_(v, l[0]);
        Tensor last = index(x, {3});  // a basic index of a tensor that needs no grad is tracked too
        mul_(last, reshape(l[0], {3}));
        if (autograd::GradMode::is_enabled()) {
          EXPECT_EQ(x.grad_fn()->name(), "CopySlices");
        }
        return mul(x, x);
      },
      {{1, 3}});
}

TEST(InPlaceAutograd, SetIndexBasicAndAdvanced) {
  expect_fd_gradients(
      [](const TensorList& l) {
        Tensor x = copy_of(l[0]);
        set_index(x, {1}, l[1]);  // x[1] = y
        const Tensor idx = from_indices({0, 3}, {2});
        Tensor picked = index(x, {idx});  // x[[0, 3]] += z, as Python runs it
        add_(picked, l[2]);
        set_index(x, {idx}, picked);
        return x;
      },
      {{4, 2}, {2}, {2, 2}});
}

TEST(InPlaceAutograd, SetIndexWithANumberZeroesTheGradientThere) {
  expect_fd_gradients(
      [](const TensorList& l) {
        Tensor x = copy_of(l[0]);
        set_index(x, {Slice{}, 0}, Scalar(2.5));
        Tensor col = index(x, {Slice{}, 1});
        fill_(col, 1);
        return mul(x, x);
      },
      {{3, 3}});
}

TEST(InPlaceAutograd, IndexedWritesIntoViews) {
  expect_fd_gradients(
      [](const TensorList& l) {
        Tensor x = copy_of(l[0]);
        Tensor v = slice(x, 0, 1, 4);
        const Tensor idx = from_indices({2, 0}, {2});
        index_add_(v, 0, idx, l[1]);
        const Tensor mask = gt(l[0].detach(), Scalar(0));
        masked_fill_(x, mask, l[2]);
        Tensor w = slice(x, 1, 0, 2);
        scatter_add_(w, 1, from_indices({1, 0, 1, 1, 0, 0, 1, 0, 1, 1}, {5, 2}), l[3]);
        return x;
      },
      {{5, 3}, {2, 3}, {}, {5, 2}});
}

TEST(InPlaceAutograd, UnaryAndClampInPlaceOnAView) {
  expect_fd_gradients(
      [](const TensorList& l) {
        Tensor x = copy_of(l[0]);
        Tensor v = slice(x, 0, 0, 4);
        clamp_(v, -0.5, 0.7);
        Tensor u = slice(x, 0, 3, 6);
        apply_in_place(u, {"tanh_", [](const Tensor& a) { return tanh(a); }, false, false, {}});
        sub_(x, l[1], 0.5);
        return x;
      },
      {{6}, {6}}, 11);
}

TEST(InPlaceAutograd, AStaleViewReadOutOfPlaceFollowsTheBase) {
  Tensor a = from_values({1, 2, 3, 4}, {4});
  a.set_requires_grad();
  Tensor x = copy_of(a);
  Tensor v = slice(x, 0, 1, 3);
  EXPECT_EQ(v.grad_fn()->name(), "SliceBackward");
  mul_(x, 3.0);  // not through v: v's recorded history is stale
  EXPECT_EQ(v.grad_fn()->name(), "AsStridedBackward");
  sum(v).backward();
  EXPECT_EQ(values_of(a.grad()), (std::vector<double>{0, 3, 3, 0}));
}

TEST(InPlaceAutograd, HistoriesAreRebasedAsPyTorchs) {
  Tensor a = from_values({1, 2, 3}, {3});
  a.set_requires_grad();
  Tensor x = copy_of(a);
  const uint64_t before = x.version();
  add_(x, 1.0);
  EXPECT_EQ(x.version(), before + 1);
  EXPECT_EQ(x.grad_fn()->name(), "AddBackward");
  Tensor v = slice(x, 0, 0, 2);
  mul_(v, 2.0);
  EXPECT_EQ(x.grad_fn()->name(), "CopySlices");
  EXPECT_EQ(v.grad_fn()->name(), "AsStridedBackward");
  EXPECT_EQ(values_of(x), (std::vector<double>{4, 6, 4}));
  sum(x).backward();
  EXPECT_EQ(values_of(a.grad()), (std::vector<double>{2, 2, 1}));
}

TEST(InPlaceAutograd, NothingIsRecordedWithoutGrad) {
  Tensor a = from_values({1, 2, 3}, {3});
  a.set_requires_grad();
  {
    autograd::NoGradGuard no_grad;
    mul_(a, 2.0);  // an optimizer's update of a parameter
    Tensor v = slice(a, 0, 0, 1);
    add_(v, 1.0);
  }
  EXPECT_TRUE(a.is_leaf());
  EXPECT_EQ(values_of(a), (std::vector<double>{3, 4, 6}));
  Tensor b = from_values({1, 2}, {2});
  add_(b, 1.0);
  EXPECT_FALSE(b.requires_grad());
}

// ---- errors ---------------------------------------------------------------------------------------

TEST(InPlaceAutogradErrors, ALeafThatRequiresGrad) {
  Tensor a = from_values({1, 2, 3}, {3});
  a.set_requires_grad();
  EXPECT_ERROR_HAS(add_(a, 1.0), "a leaf Variable that requires grad is being used in an in-place operation.");
  EXPECT_ERROR_HAS(set_index(a, {from_indices({0}, {1})}, Scalar(1)), "a leaf Variable that requires grad");
  Tensor v = slice(a, 0, 0, 2);
  EXPECT_ERROR_HAS(mul_(v, 2.0),
                   "a view of a leaf Variable that requires grad is being used in an in-place operation.");
  EXPECT_ERROR_HAS(set_index(a, {0}, Scalar(1)), "a view of a leaf Variable that requires grad");
  EXPECT_EQ(values_of(a), (std::vector<double>{1, 2, 3}));
}

TEST(InPlaceAutogradErrors, ASavedValueModifiedInPlace) {
  Tensor a = from_values({1, 2, 3}, {3});
  a.set_requires_grad();
  Tensor y = sigmoid(a);  // saves its output
  add_(y, 1.0);
  EXPECT_ERROR_HAS(sum(y).backward(),
                   "one of the variables needed for gradient computation has been modified by an inplace operation");
  Tensor b = from_values({1, 2, 3}, {3});
  b.set_requires_grad();
  Tensor x = copy_of(b);
  Tensor z = mul(x, b);  // saves x for b's gradient
  Tensor v = slice(x, 0, 1, 2);
  fill_(v, 0);  // through a view: the version is shared
  EXPECT_ERROR_HAS(sum(z).backward(), "; expected version ");
}

TEST(InPlaceAutogradErrors, BadDestinations) {
  Tensor x = from_values({1, 2, 3}, {3});
  Tensor e = x.expand({2, 3});
  EXPECT_ERROR_HAS(add_(e, 1.0), "more than one element of the written-to tensor refers to a single memory location");
  EXPECT_ERROR_HAS(add_(x, zeros({2, 3}, {DType::f64, nullptr})),
                   "output with shape [3] doesn't match the broadcast shape [2, 3]");
  Tensor i = zeros({3}, {DType::i64, nullptr});
  EXPECT_ERROR_HAS(add_(i, 1.5), "can't be cast to the desired output type i64");
  Tensor undefined;
  EXPECT_ERROR_HAS(add_(undefined, 1.0), "add_");
  EXPECT_ERROR_HAS(copy_(x, Tensor()), "copy_");
}

}  // namespace
}  // namespace strata
