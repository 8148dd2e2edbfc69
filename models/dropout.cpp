#include "models/dropout.h"

#include "ops/unary.h"

namespace strata::nn {

Dropout::Dropout(double p, Generator* gen) : Module("Dropout"), p_(p), gen_(gen) {
  STRATA_CHECK(p >= 0 && p <= 1, "Dropout: probability p must lie in [0, 1], got ", p);
}

Tensor Dropout::forward(const Tensor& input) {
  STRATA_CHECK(input.defined(), "Dropout: the input is undefined");
  if (!is_training() || p_ == 0) return input;
  return dropout(input, p_, true, gen_);
}

std::string Dropout::extra_repr() const { return "p=" + py_float_repr(p_) + ", inplace=False"; }

}  // namespace strata::nn
