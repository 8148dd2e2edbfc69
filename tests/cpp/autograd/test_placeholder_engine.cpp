#include <gtest/gtest.h>
#include "autograd/engine.h"
#include "ops/unary.h"
#include "core/factories.h"
TEST(Tmp, Relu) {
  using namespace strata;
  Tensor x = tensor<float>({-1.f, 2.f});
  x.set_requires_grad();
  Tensor y = relu(x);
  autograd::backward({y}, {ones({2})});
  EXPECT_EQ(x.grad().at({0}), 0.0);
  EXPECT_EQ(x.grad().at({1}), 1.0);
}
