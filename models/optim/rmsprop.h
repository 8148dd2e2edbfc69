#pragma once
/// @file
/// RMSprop (smoothing constant alpha, momentum, centered, weight decay, maximize) —
/// torch.optim.RMSprop's algorithm and defaults.

#include <vector>

#include "models/optim/optimizer.h"

namespace strata::optim {

/// RMSprop's hyperparameters (PyTorch's defaults).
struct RMSpropOptions {
  double lr = 1e-2;
  double alpha = 0.99;
  double eps = 1e-8;
  double weight_decay = 0;
  double momentum = 0;
  bool centered = false;
  bool maximize = false;
  /// As an Options map (lr, alpha, eps, weight_decay, momentum, centered, maximize).
  Options to_map() const;
};

/// RMSprop. Per element, in PyTorch's order:
///   g = maximize ? -grad : grad;  g += weight_decay * p
///   square_avg = alpha * square_avg + (1 - alpha) * g * g
///   avg = centered ? sqrt(square_avg - grad_avg^2) (grad_avg = lerp(grad_avg, g, 1 - alpha))
///                  : sqrt(square_avg);  avg += eps
///   momentum > 0:  buf = momentum * buf + g / avg;  p -= lr * buf
///   otherwise:     p -= lr * g / avg
/// State (created at the first step, as PyTorch does): "step", "square_avg", "momentum_buffer"
/// (momentum > 0) and "grad_avg" (centered).
class RMSprop final : public Optimizer {
 public:
  explicit RMSprop(std::vector<Tensor> params, const RMSpropOptions& options = {});
  explicit RMSprop(std::vector<ParamGroup> groups, const RMSpropOptions& defaults = {});

 protected:
  void check_options(const Options& options) const override;
  std::vector<std::string> buffer_names(const Options& options) const override;
  void init_state(const Tensor& param, const Options& options, ParamState& state) const override;
  void update(const Tensor& param, const Tensor& grad, const Options& options, ParamState& state) override;
};

}  // namespace strata::optim
