#pragma once
/// @file
/// Adagrad (learning-rate decay, weight decay, maximize) — torch.optim.Adagrad's algorithm and
/// defaults.

#include <vector>

#include "models/optim/optimizer.h"

namespace strata::optim {

/// Adagrad's hyperparameters (PyTorch's defaults).
struct AdagradOptions {
  double lr = 1e-2;
  double lr_decay = 0;
  double weight_decay = 0;
  double initial_accumulator_value = 0;
  double eps = 1e-10;
  bool maximize = false;
  /// As an Options map (lr, lr_decay, weight_decay, initial_accumulator_value, eps, maximize).
  Options to_map() const;
};

/// Adagrad. Per element, in PyTorch's order (t = the step count after incrementing):
///   g = maximize ? -grad : grad;  g += weight_decay * p;  clr = lr / (1 + (t - 1) * lr_decay)
///   sum += g * g;  p -= clr * g / (sqrt(sum) + eps)
/// State: "step" and "sum" (initial_accumulator_value), created when the parameter is added, as
/// PyTorch does.
class Adagrad final : public Optimizer {
 public:
  explicit Adagrad(std::vector<Tensor> params, const AdagradOptions& options = {});
  explicit Adagrad(std::vector<ParamGroup> groups, const AdagradOptions& defaults = {});

 protected:
  void check_options(const Options& options) const override;
  std::vector<std::string> buffer_names(const Options& options) const override { return {"sum"}; }
  bool eager_state() const override { return true; }
  void init_state(const Tensor& param, const Options& options, ParamState& state) const override;
  void update(const Tensor& param, const Tensor& grad, const Options& options, ParamState& state) override;
};

}  // namespace strata::optim
