// Note [In-place backward] (autograd/engine.h): pointwise unary ops and batch norm write their
// input gradient over the incoming one when nothing else holds it. Checked here: in place happens
// then (the input gradient is the seed's buffer), the bits equal the out-of-place backward's, and
// a gradient someone else holds — a root the caller passes, one add hands to two operands — is
// never overwritten.

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "autograd/engine.h"
#include "autograd/tape.h"
#include "core/factories.h"
#include "ops/binary.h"
#include "ops/conv.h"
#include "ops/normalization.h"
#include "ops/shape_ops.h"
#include "ops/unary.h"
#include "tests/cpp/bitwise.h"
#include "tests/cpp/ops/harness/op_harness.h"

namespace strata {
namespace {

using autograd::TensorList;
using testing_util::same_bits;

struct Case {
  std::string name;
  std::function<Tensor(const Tensor&)> f;
};

std::vector<Case> cases() {
  Tensor rm = zeros({6}), rv = ones({6}), w = randn({6}), b = randn({6});
  return {
      {"relu", [](const Tensor& x) { return relu(x); }},
      {"leaky_relu", [](const Tensor& x) { return leaky_relu(x, 0.1); }},
      {"sigmoid", [](const Tensor& x) { return sigmoid(x); }},
      {"tanh", [](const Tensor& x) { return tanh(x); }},
      {"gelu", [](const Tensor& x) { return gelu(x); }},
      {"exp", [](const Tensor& x) { return exp(x); }},
      {"batch_norm", [=](const Tensor& x) { return batch_norm(x, rm.clone(), rv.clone(), w, b, true); }},
  };
}

// d f(x) / dx · seed, with the seed handed over (and nothing else holding it) or held by the caller.
TensorList input_grad(const Case& c, const Tensor& x0, const Tensor& seed_values, bool hand_over, Tensor* held,
                      const void** seed_data) {
  Tensor x = x0.detach().set_requires_grad();
  Tensor y = c.f(x);
  TensorList seeds;
  seeds.push_back(seed_values.clone());
  *seed_data = seeds[0].data_ptr();
  if (!hand_over) {
    *held = seeds[0];
    return autograd::grad({y}, {x}, seeds);
  }
  return autograd::grad_consuming({y}, {x}, std::move(seeds));
}

TEST(InPlaceBackward, ReusesAHandedOverGradientWithTheSameBits) {
  const Tensor x0 = randn({4, 6, 5, 3});
  const Tensor seed = randn({4, 6, 5, 3});
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    Tensor held;
    const void* data = nullptr;
    const TensorList in_place = input_grad(c, x0, seed, true, &held, &data);
    EXPECT_EQ(in_place[0].data_ptr(), data) << "the input gradient is not the handed-over seed's buffer";
    const TensorList out_of_place = input_grad(c, x0, seed, false, &held, &data);
    EXPECT_NE(out_of_place[0].data_ptr(), data) << "a seed the caller holds was written over";
    EXPECT_TRUE(same_bits(held, seed)) << "a seed the caller holds changed";
    EXPECT_TRUE(same_bits(in_place[0], out_of_place[0]));
  }
}

TEST(InPlaceBackward, RootGradientsPassedToBackwardAreNeverOverwritten) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    Tensor x = randn({4, 6, 5, 3}).set_requires_grad();
    Tensor g = randn({4, 6, 5, 3});
    const Tensor before = g.clone();
    c.f(x).backward(g);
    EXPECT_TRUE(same_bits(g, before));
    // A temporary root list: the caller's braced list still holds the tensor during the call.
    Tensor x2 = x.detach().set_requires_grad();
    autograd::backward({c.f(x2)}, {g});
    EXPECT_TRUE(same_bits(g, before));
    EXPECT_TRUE(same_bits(x.grad(), x2.grad()));
  }
}

TEST(InPlaceBackward, AGradientAddSharesIsNotOverwrittenByTheFirstConsumer) {
  // y = relu(a) + b·1 where both operands of the add get the add's one incoming gradient: relu's
  // backward must not write over it while b's path still has to read it.
  const Tensor a0 = randn({64, 32}), b0 = randn({64, 32}), seed = randn({64, 32});
  auto run = [&](bool hand_over) {
    Tensor a = a0.detach().set_requires_grad(), b = b0.detach().set_requires_grad();
    Tensor y = add(relu(a), mul(b, 1.0));
    TensorList seeds{seed.clone()};
    Tensor held = hand_over ? Tensor() : seeds[0];
    return hand_over ? autograd::grad_consuming({y}, {a, b}, std::move(seeds)) : autograd::grad({y}, {a, b}, seeds);
  };
  const TensorList shared = run(true), reference = run(false);
  EXPECT_TRUE(same_bits(shared[0], reference[0]));
  EXPECT_TRUE(same_bits(shared[1], reference[1]));
  EXPECT_TRUE(same_bits(shared[1], seed)) << "b's gradient (seed · 1) was overwritten by relu's backward";
}

TEST(InPlaceBackward, ChainsReuseOneBufferAcrossSteps) {
  // relu → sigmoid → tanh → batch norm: every backward step works in place on the one seed buffer.
  Tensor rm = zeros({6}), rv = ones({6});
  Tensor x = randn({4, 6, 8, 8}).set_requires_grad();
  Tensor y = tanh(sigmoid(relu(batch_norm(x, rm, rv, Tensor(), Tensor(), true))));
  TensorList seeds{randn({4, 6, 8, 8})};
  const void* data = seeds[0].data_ptr();
  const TensorList g = autograd::grad_consuming({y}, {x}, std::move(seeds));
  EXPECT_EQ(g[0].data_ptr(), data);
}

// Note [Conv input gradient in place]: conv2d's backward (and the data step's) writes the input
// gradient over a handed-over output gradient of the input's shape, chunk by chunk through a
// staging buffer, with the bits of the batched out-of-place call — on the oneDNN path and the own
// one, for batches that the chunks divide and that they do not, with and without the split steps.
// A held output gradient is left alone, and shapes that differ (a strided conv) never go in place.
TEST(InPlaceBackward, ConvInputGradientOverwritesTheOutputGradientWithTheBatchedBits) {
  struct Shape {
    const char* name;
    Dims x, w;
    int64_t stride, pad;
  };
  const Shape shapes[] = {
      {"oneDNN-sized, 10 images", {10, 32, 16, 16}, {32, 32, 3, 3}, 1, 1},
      {"oneDNN-sized, 8 images", {8, 16, 16, 16}, {16, 16, 3, 3}, 1, 1},
      {"own kernel, 3 images", {3, 4, 5, 5}, {4, 4, 3, 3}, 1, 1},
      {"pointwise, 9 images", {9, 8, 6, 6}, {8, 8, 1, 1}, 1, 0},
      {"strided (shapes differ)", {4, 8, 8, 8}, {8, 8, 3, 3}, 2, 1},
  };
  for (const Shape& sh : shapes) {
    for (bool split : {false, true}) {
      SCOPED_TRACE(std::string(sh.name) + (split ? ", split steps" : ", conv2d"));
      const Tensor x0 = randn(sh.x), w0 = randn(sh.w), b0 = randn({sh.w[0]});
      SCOPED_TRACE(ops::conv2d_uses_primitives(x0, w0, {sh.stride}, {sh.pad}) ? "oneDNN" : "own kernel");
      auto run = [&](bool hand_over, Tensor* held, const void** seed_data) {
        Tensor x = x0.detach().set_requires_grad(), w = w0.detach().set_requires_grad(),
               b = b0.detach().set_requires_grad();
        Tensor y =
            split ? conv2d_weight_step(conv2d_data_step(x, w, b, {sh.stride}, {sh.pad}), x, w, b, {sh.stride}, {sh.pad})
                  : conv2d(x, w, b, {sh.stride}, {sh.pad});
        Generator gen(5);
        TensorList seeds{randn(y.sizes(), {}, &gen)};
        *seed_data = seeds[0].data_ptr();
        if (!hand_over) {
          *held = seeds[0];
          return autograd::grad({y}, {x, w, b}, seeds);
        }
        return autograd::grad_consuming({y}, {x, w, b}, std::move(seeds));
      };
      Tensor held;
      const void* data = nullptr;
      const TensorList in_place = run(true, &held, &data);
      const bool same_shape = sh.stride == 1;
      if (same_shape)
        EXPECT_EQ(in_place[0].data_ptr(), data) << "the input gradient is not the seed's buffer";
      else
        EXPECT_NE(in_place[0].data_ptr(), data);
      const TensorList out_of_place = run(false, &held, &data);
      EXPECT_NE(out_of_place[0].data_ptr(), data) << "a seed the caller holds was written over";
      Generator gen(5);
      EXPECT_TRUE(same_bits(held, randn(held.sizes(), {}, &gen))) << "a seed the caller holds changed";
      for (std::size_t i = 0; i < 3; ++i) EXPECT_TRUE(same_bits(in_place[i], out_of_place[i])) << "gradient " << i;
    }
  }
}

// Note [ReLU saves a bit mask]: one bit per element, and the gradient is g where the output is
// positive or NaN (PyTorch's threshold_backward, Note [ReLU and NaN]) — also at -0, 0, NaN and ±inf
// inputs, for a length that is not a multiple of 8, a non-contiguous input and both float dtypes
// relu takes.
TEST(ReluMask, SavesOneBitPerElementAndGivesTheSameGradient) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> xs{1.5f, -0.0f, 0.0f, nan, inf, -inf, -2.0f, 3.0f, 1e-30f, -1e-30f, 7.0f, -7.0f, 0.25f};
  const std::vector<float> gs{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13};
  for (DType dt : {DType::f32, DType::f64}) {
    SCOPED_TRACE(std::string(dtype_name(dt)));
    Tensor x = tensor<float>(xs, IntArrayRef{13}).to(dt).set_requires_grad();
    Tensor y = relu(x);
    const auto nodes = autograd::recorded_nodes({y});
    ASSERT_EQ(nodes.size(), 1u);
    ASSERT_EQ(nodes[0].saved.size(), 1u);
    EXPECT_EQ(nodes[0].saved[0].dtype, DType::u8);
    EXPECT_EQ(nodes[0].saved[0].bytes, 2u);  // 13 bits
    y.backward(tensor<float>(gs, IntArrayRef{13}).to(dt));
    const std::vector<double> got = testing::values_of(x.grad());
    for (std::size_t i = 0; i < xs.size(); ++i)
      EXPECT_EQ(got[i], xs[i] > 0 || std::isnan(xs[i]) ? gs[i] : 0.0) << "element " << i;
  }
  // A transposed (non-contiguous) input: the mask follows the output's (row-major) order.
  Tensor base = randn({5, 7});
  Tensor xt = base.detach().set_requires_grad();
  Tensor g = randn({7, 5});
  relu(transpose(xt, 0, 1)).backward(g);
  Tensor xr = base.detach().set_requires_grad();
  relu(mul(transpose(xr, 0, 1), 1.0)).backward(g);  // a contiguous copy
  EXPECT_TRUE(same_bits(xt.grad(), xr.grad()));
}

}  // namespace
}  // namespace strata
