// Anomaly detection (Note [Anomaly detection], autograd/anomaly_mode.h): the flag, and the errors
// naming the first op or backward step that produced NaN or inf.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "autograd/anomaly_mode.h"
#include "autograd/engine.h"
#include "tests/cpp/autograd/graph_util.h"
#include "tests/cpp/error_text.h"

namespace strata_test {
namespace {

using namespace strata;
using autograd::AnomalyMode;
using autograd::DetectAnomalyGuard;
using ::testing::HasSubstr;
using ::testing::Not;
using testing_util::error_of;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

/// Test-local op: sqrt(x), whose gradient g / (2 sqrt(x)) is inf at 0 while the value is finite.
Tensor tsqrt(const Tensor& x) {
  Tensor y = map2(x, x, [](double v, double) { return std::sqrt(v); });
  if (autograd::needs_grad({&x})) {
    auto node = autograd::make_node("TSqrtBackward", {&x}, [](Node& n, const TensorList& g) -> TensorList {
      return {map2(g[0], n.saved(0), [](double gv, double yv) { return gv / (2 * yv); })};
    });
    node->save(y);
    autograd::set_history({&y}, node);
  }
  return y;
}

TEST(AnomalyMode, OffByDefaultAndTheGuardRestoresIt) {
  EXPECT_FALSE(AnomalyMode::is_enabled());
  EXPECT_FALSE(AnomalyMode::should_check_nan());
  {
    DetectAnomalyGuard on;
    EXPECT_TRUE(AnomalyMode::is_enabled());
    EXPECT_TRUE(AnomalyMode::should_check_nan());
    {
      DetectAnomalyGuard no_nan_check(true, /*check_nan=*/false);
      EXPECT_TRUE(AnomalyMode::is_enabled());
      EXPECT_FALSE(AnomalyMode::should_check_nan());
    }
    EXPECT_TRUE(AnomalyMode::should_check_nan());
  }
  EXPECT_FALSE(AnomalyMode::is_enabled());
  AnomalyMode::set_enabled(true);
  EXPECT_TRUE(AnomalyMode::is_enabled());
  AnomalyMode::set_enabled(false);
  EXPECT_FALSE(AnomalyMode::is_enabled());
}

TEST(AnomalyMode, ForwardNamesTheOpAndTheInputThatHeldNaN) {
  DetectAnomalyGuard on;
  Tensor x = f64({1, 2, 3}).set_requires_grad();
  Tensor data = f64({1, kNaN, 3});
  const std::string msg = error_of([&] { tmul(x, data); });
  EXPECT_THAT(msg, HasSubstr("anomaly detected: the forward of 'TMulBackward' produced nan values in its 0th output"));
  EXPECT_THAT(msg, HasSubstr("1 NaN and 0 inf of 3 elements, the first at element 1"));
  EXPECT_THAT(msg, HasSubstr("input 1 (Tensor[3] f64, not computed by a recorded op: data) already held 1 NaN"));
  // A parameter holding NaN is named as one.
  Tensor p = f64({kNaN, 1, 1}).set_requires_grad();
  EXPECT_THAT(error_of([&] { tmul(p, data); }),
              HasSubstr("input 0 (Tensor[3] f64, a leaf that requires grad: a parameter)"));
}

TEST(AnomalyMode, ForwardFromFiniteInputsSaysTheOpProducedThem) {
  DetectAnomalyGuard on;
  Tensor x = f64({1e200, 1}).set_requires_grad();
  Tensor h = tadd(x, x);                                  // finite
  const std::string msg = error_of([&] { tmul(h, h); });  // 4e400: inf
  EXPECT_THAT(msg, HasSubstr("the forward of 'TMulBackward' produced inf values in its 0th output"));
  EXPECT_THAT(msg, HasSubstr("its inputs were finite, so this op produced them"));
}

TEST(AnomalyMode, BackwardNamesTheNodeAndTheParameterWhoseGradientWentNonFinite) {
  Tensor x = f64({4, 0, 1}).set_requires_grad();
  {
    DetectAnomalyGuard on;
    Tensor y = tsqrt(x);  // forward finite: sqrt(0) = 0
    const std::string msg = error_of([&] { y.backward(f64({1, 1, 1})); });
    EXPECT_THAT(msg, HasSubstr("anomaly detected: Function 'TSqrtBackward' returned inf values in its 0th output"));
    EXPECT_THAT(msg, HasSubstr("the gradient w.r.t. its input 0, Tensor[3] f64: 0 NaN and 1 inf of 3 elements, the "
                               "first at element 1"));
    EXPECT_THAT(msg, HasSubstr("that input is a leaf that requires grad (a parameter, Tensor[3] f64)"));
    EXPECT_FALSE(x.grad().defined()) << "the non-finite gradient must not reach .grad";
  }
  // Between ops (not a leaf): no parameter is named.
  {
    DetectAnomalyGuard on;
    Tensor y = tsqrt(tmul(x, f64({1, 1, 1})));
    const std::string msg = error_of([&] { y.backward(f64({1, 1, 1})); });
    EXPECT_THAT(msg, HasSubstr("Function 'TSqrtBackward' returned inf values in its 0th output"));
    EXPECT_THAT(msg, Not(HasSubstr("leaf")));
  }
  // Off (and on without check_nan), the same backward runs and gives inf silently, as PyTorch.
  for (bool enabled : {false, true}) {
    DetectAnomalyGuard mode(enabled, /*check_nan=*/false);
    Tensor z = f64({4, 0, 1}).set_requires_grad();
    tsqrt(z).backward(f64({1, 1, 1}));
    EXPECT_TRUE(std::isinf(vals(z.grad())[1]));
  }
}

TEST(AnomalyMode, RootGradientAndOverflowingLeafSum) {
  DetectAnomalyGuard on;
  Tensor x = f64({1, 2}).set_requires_grad();
  Tensor y = tmul(x, f64({1, 1}));
  EXPECT_THAT(error_of([&] { y.backward(f64({kNaN, 1})); }),
              HasSubstr("anomaly detected: backward: the gradient given for tensor 0 (Tensor[2] f64) holds nan"));
  // Two finite gradients of 1e308 meet at x's AccumulateGrad: their sum is inf.
  Tensor a = tmul(x, f64({1e308, 1}));
  Tensor b = tmul(x, f64({1e308, 1}));
  const std::string msg = error_of([&] { autograd::backward({a, b}, {f64({1, 1}), f64({1, 1})}); });
  EXPECT_THAT(msg, HasSubstr("the gradient of a leaf that requires grad (a parameter, Tensor[2] f64), summed from "
                             "finite parts, holds inf values"));
}

}  // namespace
}  // namespace strata_test
