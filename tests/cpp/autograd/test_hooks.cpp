// Gradient hooks on tensors (Note [Tensor hooks]): leaves and non-leaves, replacement, order,
// removal, retain_grad, grad() capture, and bad input.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "autograd/engine.h"
#include "autograd/grad_mode.h"
#include "tests/cpp/autograd/graph_util.h"
#include "tests/cpp/error_text.h"

namespace strata_test {
namespace {

using namespace strata;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(TensorHooks, LeafHookSeesTheSummedGradientAndCanReplaceIt) {
  Tensor x = f64({1, 2}).set_requires_grad();
  std::vector<double> seen;
  x.register_hook([&](const Tensor& g) {
    seen = vals(g);
    return tmul(g, f64({10, 10}));
  });
  tadd(tmul(x, x), x).backward(f64({1, 1}));  // d/dx (x^2 + x) = 2x + 1
  EXPECT_THAT(seen, ElementsAre(3, 5));
  EXPECT_THAT(vals(x.grad()), ElementsAre(30, 50));
}

TEST(TensorHooks, NonLeafHookChangesWhatFlowsOnInRegistrationOrder) {
  Tensor x = f64({1, 2}).set_requires_grad();
  Tensor y = tmul(x, x);
  std::vector<int> order;
  y.register_hook([&](const Tensor& g) {
    order.push_back(1);
    return tadd(g, g);  // doubles
  });
  y.register_hook([&](const Tensor& g) {
    order.push_back(2);
    EXPECT_THAT(vals(g), ElementsAre(2, 2));  // sees the first hook's result
    return Tensor();                          // keeps it
  });
  y.backward(f64({1, 1}));
  EXPECT_THAT(order, ElementsAre(1, 2));
  EXPECT_THAT(vals(x.grad()), ElementsAre(4, 8));  // 2 * 2x
}

TEST(TensorHooks, RemovedHookDoesNotRun) {
  Tensor x = f64({3}).set_requires_grad();
  int calls = 0;
  const uint64_t id = x.register_hook([&](const Tensor&) {
    ++calls;
    return Tensor();
  });
  EXPECT_TRUE(x.remove_hook(id));
  EXPECT_FALSE(x.remove_hook(id));
  tmul(x, x).backward();
  EXPECT_EQ(calls, 0);
  EXPECT_THAT(vals(x.grad()), ElementsAre(6));
}

TEST(TensorHooks, RetainGradKeepsTheNonLeafGradientAfterHooks) {
  Tensor x = f64({1, 2}).set_requires_grad();
  Tensor y = tmul(x, x);
  Tensor z = tmul(y, f64({3, 4}));
  y.retain_grad();
  y.register_hook([](const Tensor& g) { return tadd(g, g); });  // registered after retain_grad: still first
  EXPECT_TRUE(y.retains_grad());
  EXPECT_FALSE(x.retains_grad());
  z.backward(f64({1, 1}), /*retain_graph=*/true);  // y's graph is used again below
  EXPECT_THAT(vals(y.grad()), ElementsAre(6, 8));
  z = tmul(y, f64({3, 4}));
  z.backward(f64({1, 1}));  // a second backward through y accumulates
  EXPECT_THAT(vals(y.grad()), ElementsAre(12, 16));
}

TEST(TensorHooks, GradCapturesWhatTheHookReturns) {
  Tensor x = f64({2}).set_requires_grad();
  x.register_hook([](const Tensor& g) { return tadd(g, g); });
  const TensorList g = autograd::grad({tmul(x, x)}, {x});
  EXPECT_THAT(vals(g[0]), ElementsAre(8));
  EXPECT_FALSE(x.grad().defined());
}

TEST(TensorHooks, BadInput) {
  Tensor plain = f64({1});
  EXPECT_ERROR_HAS(plain.register_hook([](const Tensor& g) { return g; }),
                   "cannot register a hook on a tensor that doesn't require gradient");
  EXPECT_ERROR_HAS(plain.retain_grad(), "can't retain_grad on a tensor that has requires_grad=False");
  Tensor x = f64({1, 2}).set_requires_grad();
  EXPECT_ERROR_HAS(x.register_hook(Tensor::GradHook()), "the hook is empty");
  x.register_hook([](const Tensor&) { return f64({1, 2, 3}); });
  EXPECT_ERROR_HAS(tmul(x, x).backward(f64({1, 1})), "must not change the gradient's shape or dtype");
}

TEST(InferenceMode, GuardTurnsGradModeOffAndRestoresBoth) {
  EXPECT_FALSE(autograd::InferenceMode::is_enabled());
  Tensor x = f64({1}).set_requires_grad();
  {
    autograd::InferenceModeGuard guard;
    EXPECT_TRUE(autograd::InferenceMode::is_enabled());
    EXPECT_FALSE(autograd::GradMode::is_enabled());
    EXPECT_FALSE(tmul(x, x).requires_grad());
    {
      autograd::InferenceModeGuard off(false);  // changes nothing but the flag
      EXPECT_FALSE(autograd::InferenceMode::is_enabled());
      EXPECT_FALSE(autograd::GradMode::is_enabled());
    }
  }
  EXPECT_FALSE(autograd::InferenceMode::is_enabled());
  EXPECT_TRUE(autograd::GradMode::is_enabled());
}

}  // namespace
}  // namespace strata_test
