#include "models/zoo/mlp.h"

#include "core/error.h"
#include "models/activation.h"
#include "models/linear.h"

namespace strata::nn::zoo {

std::shared_ptr<Module> make_activation(const std::string& name, const char* who) {
  if (name == "relu") return std::make_shared<ReLU>();
  if (name == "tanh") return std::make_shared<Tanh>();
  if (name == "sigmoid") return std::make_shared<Sigmoid>();
  if (name == "gelu") return std::make_shared<GELU>();
  STRATA_FAIL(who, ": unknown activation '", name, "' (expected relu, tanh, sigmoid or gelu)");
}

MLP::MLP(const std::vector<int64_t>& widths, const std::string& activation, const std::string& last_activation,
         Generator* gen)
    : widths_(widths) {
  set_type_name("MLP");
  STRATA_CHECK(widths.size() >= 2, "MLP: needs at least an input and an output width, got ", widths.size(),
               " width(s)");
  for (std::size_t i = 0; i < widths.size(); ++i)
    STRATA_CHECK(widths[i] >= 1, "MLP: width ", i, " must be positive, got ", widths[i]);
  make_activation(activation, "MLP");  // validate even for a single layer
  for (std::size_t i = 0; i + 1 < widths.size(); ++i) {
    push_back(std::make_shared<Linear>(widths[i], widths[i + 1], true, gen));
    if (i + 2 < widths.size()) push_back(make_activation(activation, "MLP"));
  }
  if (!last_activation.empty()) push_back(make_activation(last_activation, "MLP"));
}

}  // namespace strata::nn::zoo
