#pragma once
/// @file
/// Row-wise Adagrad (DLRM's embedding optimizer; fbgemm's rowwise_adagrad): one accumulator per
/// row instead of one per element.

#include <vector>

#include "models/optim/optimizer.h"

namespace strata::optim {

/// Row-wise Adagrad's hyperparameters.
struct RowWiseAdagradOptions {
  double lr = 1e-2;
  double eps = 1e-10;
  double weight_decay = 0;
  /// As an Options map (lr, eps, weight_decay).
  Options to_map() const;
};

/// Row-wise Adagrad. A parameter of rank >= 2 has one accumulator per row (dimension 0; the other
/// dimensions form the row); a parameter of rank 0 or 1 has one accumulator for the whole tensor.
/// Per row r with elements j (D of them), t = the step count after incrementing:
///   g_j = grad_j + weight_decay * p_j;  sum_r += mean_j(g_j^2);  p_j -= lr * g_j / (sqrt(sum_r) + eps)
/// (the mean is accumulated in double). State: "step" and "sum" of shape [rows] (rank >= 2) or [1].
class RowWiseAdagrad final : public Optimizer {
 public:
  explicit RowWiseAdagrad(std::vector<Tensor> params, const RowWiseAdagradOptions& options = {});
  explicit RowWiseAdagrad(std::vector<ParamGroup> groups, const RowWiseAdagradOptions& defaults = {});

 protected:
  void check_options(const Options& options) const override;
  std::vector<std::string> buffer_names(const Options& options) const override { return {"sum"}; }
  Dims buffer_shape(const Tensor& param, const std::string& name) const override;
  void init_state(const Tensor& param, const Options& options, ParamState& state) const override;
  void update(const Tensor& param, const Tensor& grad, const Options& options, ParamState& state) override;
};

}  // namespace strata::optim
