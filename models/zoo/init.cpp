#include "models/zoo/detail/init.h"

#include <cmath>

#include "core/error.h"
#include "core/factories.h"
#include "models/conv.h"
#include "models/linear.h"
#include "models/normalization.h"

namespace strata::nn::zoo {

void init_normal(Module& module, const std::string& name, double mean, double std, Generator* gen) {
  const Tensor old = module.parameter(name);
  STRATA_CHECK(old.defined(), module.type_name(), ": parameter '", name, "' is undefined");
  module.register_parameter(name, normal(old.sizes(), mean, std, {old.dtype()}, gen), old.requires_grad());
}

void init_constant(Module& module, const std::string& name, double value) {
  const Tensor old = module.parameter(name);
  if (!old.defined()) return;
  module.register_parameter(name, full(old.sizes(), value, {old.dtype()}), old.requires_grad());
}

void init_kaiming_normal(Module& module, const std::string& name, bool fan_out, Generator* gen) {
  const Tensor& w = module.parameter(name);
  STRATA_CHECK(w.defined() && w.dim() >= 2, module.type_name(), ": Kaiming init needs a weight of rank >= 2");
  int64_t receptive = 1;
  for (int64_t d = 2; d < w.dim(); ++d) receptive *= w.sizes()[static_cast<std::size_t>(d)];
  const int64_t fan = (fan_out ? w.sizes()[0] : w.sizes()[1]) * receptive;
  init_normal(module, name, 0.0, std::sqrt(2.0 / static_cast<double>(fan)), gen);
}

// Recurses through named_children() rather than named_modules(): the zoo calls this from
// constructors, where the root is not yet owned by a shared_ptr.
void init_torchvision(Module& root, bool conv_fan_out, double linear_std, Generator* gen) {
  if (dynamic_cast<Conv2d*>(&root) != nullptr) {
    init_kaiming_normal(root, "weight", conv_fan_out, gen);
    init_constant(root, "bias", 0.0);
  } else if (dynamic_cast<BatchNorm*>(&root) != nullptr) {
    if (root.has_parameter("weight")) init_constant(root, "weight", 1.0);
    if (root.has_parameter("bias")) init_constant(root, "bias", 0.0);
  } else if (dynamic_cast<Linear*>(&root) != nullptr && linear_std > 0) {
    init_normal(root, "weight", 0.0, linear_std, gen);
    init_constant(root, "bias", 0.0);
  }
  for (auto& [name, child] : root.named_children()) init_torchvision(*child, conv_fan_out, linear_std, gen);
}

}  // namespace strata::nn::zoo
