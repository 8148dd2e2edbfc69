#include "models/linear.h"

#include <cmath>

#include "core/factories.h"
#include "ops/linalg.h"

namespace strata::nn {

Linear::Linear(int64_t in_features, int64_t out_features, bool bias, Generator* gen)
    : Module("Linear"), in_features_(in_features), out_features_(out_features) {
  STRATA_CHECK(in_features >= 0 && out_features >= 0, "Linear: in_features and out_features must be non-negative, got ",
               in_features, " and ", out_features);
  // kaiming_uniform_(a = sqrt(5)): gain sqrt(2 / (1 + 5)), bound gain * sqrt(3 / fan_in) = 1 / sqrt(fan_in).
  const double bound = in_features > 0 ? 1.0 / std::sqrt(static_cast<double>(in_features)) : 0.0;
  register_parameter("weight", uniform({out_features, in_features}, -bound, bound, {}, gen));
  register_parameter("bias", bias ? uniform({out_features}, -bound, bound, {}, gen) : Tensor());
}

Tensor Linear::forward(const Tensor& input) {
  STRATA_CHECK(input.defined(), "Linear: the input is undefined");
  STRATA_CHECK(input.dim() >= 1 && input.size(-1) == in_features_, "Linear: expected an input [..., ", in_features_,
               "] (last dimension = in_features), got ", input.sizes());
  return linear(input, parameter("weight"), parameter("bias"));
}

std::string Linear::extra_repr() const {
  return "in_features=" + std::to_string(in_features_) + ", out_features=" + std::to_string(out_features_) +
         ", bias=" + py_bool(parameter("bias").defined());
}

Tensor Identity::forward(const Tensor& input) { return input; }

}  // namespace strata::nn
