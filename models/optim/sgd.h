#pragma once
/// @file
/// SGD with momentum, Nesterov momentum, weight decay and maximize — torch.optim.SGD's algorithm
/// and defaults.

#include <vector>

#include "models/optim/optimizer.h"

namespace strata::optim {

/// SGD's hyperparameters (PyTorch's defaults).
struct SGDOptions {
  double lr = 1e-3;
  double momentum = 0;
  double dampening = 0;
  double weight_decay = 0;
  bool nesterov = false;
  bool maximize = false;
  /// As an Options map (lr, momentum, dampening, weight_decay, nesterov, maximize).
  Options to_map() const;
};

/// Stochastic gradient descent. Per element, in PyTorch's order:
///   g = maximize ? -grad : grad;  g += weight_decay * p;
///   buf = first step ? g : momentum * buf + (1 - dampening) * g;  g = nesterov ? g + momentum * buf : buf;
///   p -= lr * g
/// State: "momentum_buffer" (when momentum != 0).
class SGD final : public Optimizer {
 public:
  explicit SGD(std::vector<Tensor> params, const SGDOptions& options = {});
  explicit SGD(std::vector<ParamGroup> groups, const SGDOptions& defaults = {});
  bool counts_steps() const override { return false; }

 protected:
  void check_options(const Options& options) const override;
  std::vector<std::string> buffer_names(const Options& options) const override;
  bool buffer_optional(const std::string& name) const override { return true; }
  void init_state(const Tensor& param, const Options& options, ParamState& state) const override;
  void update(const Tensor& param, const Tensor& grad, const Options& options, ParamState& state) override;
};

}  // namespace strata::optim
