// Tensor::set_data and nn::convert_floating (models/module_dtype.h): a module's floating state
// changes dtype in place, every handle sees it, integer buffers and autograd identity stay.

#include <gtest/gtest.h>

#include <memory>

#include "core/factories.h"
#include "models/linear.h"
#include "models/module_dtype.h"
#include "models/normalization.h"
#include "tests/cpp/error_text.h"

namespace strata::nn {
namespace {

TEST(SetData, KeepsIdentityGradFlagAndRefusesIntegerDataForGradTensors) {
  Tensor w = ones({2, 2});
  w.set_requires_grad(true);
  Tensor alias = w;  // another handle (an optimizer's, a Python Parameter's)
  w.set_data(zeros({3}, {DType::f64}));
  EXPECT_EQ(alias.dtype(), DType::f64);
  EXPECT_EQ(alias.sizes(), (Dims{3}));
  EXPECT_TRUE(alias.requires_grad());
  EXPECT_ERROR_HAS(w.set_data(zeros({2}, {DType::i64})), "data set to a tensor that requires gradients must be");
  EXPECT_ERROR_HAS(w.set_data(Tensor()), "set_data: the new data of");
}

TEST(ConvertFloating, ConvertsParametersGradsAndFloatingBuffersOnly) {
  Linear lin(3, 2);
  BatchNorm1d bn(2);
  Tensor weight = lin.weight();
  weight.set_grad(ones({2, 3}));
  convert_floating(lin, DType::f64);
  EXPECT_EQ(weight.dtype(), DType::f64);
  EXPECT_EQ(weight.grad().dtype(), DType::f64);
  EXPECT_EQ(lin.forward(ones({4, 3}, {DType::f64})).dtype(), DType::f64);
  convert_floating(bn, DType::bf16);
  EXPECT_EQ(bn.buffer("running_mean").dtype(), DType::bf16);
  EXPECT_EQ(bn.buffer("num_batches_tracked").dtype(), DType::i64);
  EXPECT_ERROR_HAS(convert_floating(lin, DType::i32), "Linear.to: nn.Module.to only accepts floating point dtypes");
}

}  // namespace
}  // namespace strata::nn
