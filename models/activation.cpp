#include "models/activation.h"

#include "core/text.h"
#include "ops/softmax_loss.h"
#include "ops/unary.h"

namespace strata::nn {

namespace {
const Tensor& defined_input(const Module& m, const Tensor& input) {
  STRATA_CHECK(input.defined(), m.type_name(), ": the input is undefined");
  return input;
}
}  // namespace

Tensor ReLU::forward(const Tensor& input) { return relu(defined_input(*this, input)); }

Tensor LeakyReLU::forward(const Tensor& input) { return leaky_relu(defined_input(*this, input), negative_slope_); }

std::string LeakyReLU::extra_repr() const { return "negative_slope=" + py_float_repr(negative_slope_); }

Tensor Sigmoid::forward(const Tensor& input) { return sigmoid(defined_input(*this, input)); }

Tensor Tanh::forward(const Tensor& input) { return strata::tanh(defined_input(*this, input)); }

GELU::GELU(const std::string& approximate) : Module("GELU"), approximate_(approximate) {
  STRATA_CHECK(approximate == "none" || approximate == "tanh", "GELU: approximate must be 'none' or 'tanh', got ",
               quote_field(approximate));
}

Tensor GELU::forward(const Tensor& input) { return gelu(defined_input(*this, input), approximate_ == "tanh"); }

std::string GELU::extra_repr() const { return "approximate='" + approximate_ + "'"; }

Tensor SiLU::forward(const Tensor& input) { return silu(defined_input(*this, input)); }

namespace {
/// `dim`, or PyTorch's legacy implicit softmax dim for `x`.
int64_t softmax_dim(std::optional<int64_t> dim, const Tensor& x) {
  return dim ? *dim : (x.dim() == 0 || x.dim() == 1 || x.dim() == 3 ? 0 : 1);
}
std::string dim_repr(std::optional<int64_t> dim) { return "dim=" + (dim ? std::to_string(*dim) : std::string("None")); }
}  // namespace

Tensor Softmax::forward(const Tensor& input) {
  const Tensor& x = defined_input(*this, input);
  return softmax(x, softmax_dim(dim_, x));
}

std::string Softmax::extra_repr() const { return dim_repr(dim_); }

Tensor LogSoftmax::forward(const Tensor& input) {
  const Tensor& x = defined_input(*this, input);
  return log_softmax(x, softmax_dim(dim_, x));
}

std::string LogSoftmax::extra_repr() const { return dim_repr(dim_); }

}  // namespace strata::nn
