#pragma once
/// @file
/// Adam and AdamW (with AMSGrad and maximize) — torch.optim.Adam / AdamW's algorithm and defaults.

#include <vector>

#include "models/optim/optimizer.h"

namespace strata::optim {

/// Adam's hyperparameters (PyTorch's defaults; AdamW uses weight_decay = 1e-2). PyTorch's
/// `betas` are the options beta1 and beta2.
struct AdamOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0;
  bool amsgrad = false;
  bool maximize = false;
  /// As an Options map (lr, beta1, beta2, eps, weight_decay, amsgrad, maximize).
  Options to_map() const;
};

/// Adam. Per element, in PyTorch's order (t = the parameter's step count after incrementing):
///   g = maximize ? -grad : grad;  g += weight_decay * p   (AdamW instead: p *= 1 - lr * weight_decay)
///   exp_avg = lerp(exp_avg, g, 1 - beta1);  exp_avg_sq = beta2 * exp_avg_sq + (1 - beta2) * g * g
///   v = amsgrad ? (max_exp_avg_sq = max(max_exp_avg_sq, exp_avg_sq)) : exp_avg_sq
///   denom = sqrt(v) / sqrt(1 - beta2^t) + eps;  p -= (lr / (1 - beta1^t)) * exp_avg / denom
/// State: "step", "exp_avg", "exp_avg_sq", and "max_exp_avg_sq" with amsgrad.
class Adam : public Optimizer {
 public:
  explicit Adam(std::vector<Tensor> params, const AdamOptions& options = {});
  explicit Adam(std::vector<ParamGroup> groups, const AdamOptions& defaults = {});

 protected:
  Adam(const char* name, bool decoupled_weight_decay, std::vector<ParamGroup> groups, const AdamOptions& defaults);
  void check_options(const Options& options) const override;
  std::vector<std::string> buffer_names(const Options& options) const override;
  void init_state(const Tensor& param, const Options& options, ParamState& state) const override;
  void update(const Tensor& param, const Tensor& grad, const Options& options, ParamState& state) override;

 private:
  bool decoupled_;
};

/// AdamW: Adam with decoupled weight decay (p *= 1 - lr * weight_decay before the moment updates).
class AdamW final : public Adam {
 public:
  /// AdamW's default weight decay (PyTorch's).
  static AdamOptions default_options() {
    AdamOptions o;
    o.weight_decay = 1e-2;
    return o;
  }
  explicit AdamW(std::vector<Tensor> params, const AdamOptions& options = default_options());
  explicit AdamW(std::vector<ParamGroup> groups, const AdamOptions& defaults = default_options());
};

}  // namespace strata::optim
