// Module hooks (Note [Module hooks] in models/module_hooks.cpp): forward pre-hooks, forward
// hooks, full backward hooks, through containers, removal, and bad input.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/factories.h"
#include "models/activation.h"
#include "models/container.h"
#include "models/linear.h"
#include "models/module.h"
#include "ops/binary.h"
#include "ops/reduction.h"
#include "tests/cpp/error_text.h"

namespace strata::nn {
namespace {

using ::testing::ElementsAre;

std::vector<double> values(const Tensor& t) {
  Tensor c = t.to(DType::f64).contiguous();
  return std::vector<double>(c.data<double>(), c.data<double>() + c.numel());
}

// y = 2x as a module (no parameters), so the gradients are easy to state.
class Double : public Module {
 public:
  Double() : Module("Double") {}
  Tensor forward(const Tensor& x) override { return mul(x, 2.0); }
};

TEST(ModuleHooks, ForwardHooksRunThroughSequentialInOrderAndAreRemovable) {
  auto first = std::make_shared<Double>();
  auto seq =
      std::make_shared<Sequential>(std::initializer_list<std::shared_ptr<Module>>{first, std::make_shared<Double>()});
  std::vector<std::string> calls;
  const uint64_t pre = first->register_forward_pre_hook([&](Module& m, const Tensor& x) {
    calls.push_back("pre " + m.type_name());
    return add(x, 1.0);  // (x + 1)
  });
  std::vector<double> inputs;
  first->register_forward_hook([&](Module&, const Tensor& in, const Tensor&) {
    calls.push_back("fwd");
    inputs.push_back(values(in)[0]);
    return Tensor();  // keeps the output
  });
  first->register_forward_hook(
      [&](Module&, const Tensor&, const Tensor&) {
        calls.push_back("first");
        return Tensor();
      },
      /*prepend=*/true);
  EXPECT_THAT(values((*seq)(full({1}, 1.0, {DType::f64, nullptr}))), ElementsAre(8));  // 2 * 2 * (1 + 1)
  EXPECT_THAT(calls, ElementsAre("pre Double", "first", "fwd"));
  EXPECT_THAT(values(first->forward(full({1}, 1.0, {DType::f64, nullptr}))), ElementsAre(2));  // forward(): no hooks
  EXPECT_TRUE(first->remove_hook(pre));
  EXPECT_FALSE(first->remove_hook(pre));
  EXPECT_THAT(values((*seq)(full({1}, 1.0, {DType::f64, nullptr}))), ElementsAre(4));
  EXPECT_THAT(inputs, ElementsAre(2, 1));  // the pre-hook's input, then (removed) the caller's
}

TEST(ModuleHooks, FullBackwardHookSeesAndReplacesTheInputGradient) {
  Double d;
  std::vector<double> grad_in, grad_out;
  d.register_full_backward_hook([&](Module&, const std::vector<Tensor>& gi, const std::vector<Tensor>& go) {
    grad_in = values(gi[0]);
    grad_out = values(go[0]);
    return std::vector<Tensor>{mul(gi[0], 10.0)};
  });
  Tensor x = tensor<double>({1, 2}).set_requires_grad();
  sum(mul(d(x), 3.0)).backward();
  EXPECT_THAT(grad_out, ElementsAre(3, 3));
  EXPECT_THAT(grad_in, ElementsAre(6, 6));
  EXPECT_THAT(values(x.grad()), ElementsAre(60, 60));
}

TEST(ModuleHooks, BackwardHookOfAModuleWhoseInputNeedsNoGradient) {
  Linear lin(2, 1);
  int calls = 0;
  lin.register_full_backward_hook([&](Module&, const std::vector<Tensor>& gi, const std::vector<Tensor>& go) {
    ++calls;
    EXPECT_FALSE(gi[0].defined());
    EXPECT_TRUE(go[0].defined());
    return std::vector<Tensor>{};
  });
  sum(lin(ones({3, 2}))).backward();
  EXPECT_EQ(calls, 1);
  EXPECT_TRUE(lin.weight().grad().defined());
}

TEST(ModuleHooks, BadInput) {
  Double d;
  EXPECT_ERROR_HAS(d.register_forward_hook(Module::ForwardHook()), "register_forward_hook: the hook is empty");
  d.register_full_backward_hook([](Module&, const std::vector<Tensor>&, const std::vector<Tensor>&) {
    return std::vector<Tensor>{Tensor(), Tensor()};
  });
  Tensor x = tensor<double>({1}).set_requires_grad();
  EXPECT_ERROR_HAS(sum(d(x)).backward(), "Double: backward hook");
  EXPECT_FALSE(d.remove_hook(12345));
}

}  // namespace
}  // namespace strata::nn
