#pragma once
/// @file
/// nn::BatchNorm1d, nn::BatchNorm2d, nn::LayerNorm and nn::GroupNorm.

#include <optional>
#include <vector>

#include "models/module.h"

namespace strata::nn {

/// Batch normalization (torch.nn.BatchNorm*d). Parameters weight (ones) and bias (zeros; only with
/// `bias`, PyTorch 2.13's keyword) when `affine`; buffers running_mean (zeros), running_var (ones)
/// and num_batches_tracked (0-d i64)
/// when `track_running_stats`, otherwise registered as undefined (absent from state_dict, as in
/// PyTorch). In training mode the batch statistics normalize and update the running ones with
/// `momentum`, or with the cumulative average 1 / num_batches_tracked when momentum is nullopt;
/// num_batches_tracked counts the training batches. In eval mode the running statistics normalize
/// (the batch ones when they are not tracked). A state_dict without num_batches_tracked loads
/// (PyTorch's older format), leaving the counter as it was.
class BatchNorm : public Module {
 public:
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;
  int64_t num_features() const { return num_features_; }

 protected:
  BatchNorm(std::string type_name, int64_t num_features, double eps, std::optional<double> momentum, bool affine,
            bool track_running_stats, bool bias);
  /// Throws unless `input` has a rank this module accepts and num_features channels.
  virtual void check_input(const Tensor& input) const = 0;
  bool missing_key_ok(const std::string& name) const override { return name == "num_batches_tracked"; }

  int64_t num_features_;
  double eps_;
  std::optional<double> momentum_;
  bool affine_, track_running_stats_;
};

/// Batch normalization over [N, C] or [N, C, L] inputs.
class BatchNorm1d : public BatchNorm {
 public:
  explicit BatchNorm1d(int64_t num_features, double eps = 1e-5, std::optional<double> momentum = 0.1,
                       bool affine = true, bool track_running_stats = true, bool bias = true);

 protected:
  void check_input(const Tensor& input) const override;
};

/// Batch normalization over [N, C, H, W] inputs.
class BatchNorm2d : public BatchNorm {
 public:
  explicit BatchNorm2d(int64_t num_features, double eps = 1e-5, std::optional<double> momentum = 0.1,
                       bool affine = true, bool track_running_stats = true, bool bias = true);

 protected:
  void check_input(const Tensor& input) const override;
};

/// Layer normalization over the trailing dims `normalized_shape` (torch.nn.LayerNorm); weight
/// (ones) and bias (zeros, only when `bias`) of that shape when `elementwise_affine`.
class LayerNorm : public Module {
 public:
  explicit LayerNorm(std::vector<int64_t> normalized_shape, double eps = 1e-5, bool elementwise_affine = true,
                     bool bias = true);
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;

 private:
  std::vector<int64_t> normalized_shape_;
  double eps_;
  bool elementwise_affine_;
};

/// Group normalization over [N, C, *] inputs (torch.nn.GroupNorm): `num_groups` must divide
/// `num_channels`; weight (ones) and bias (zeros, only with `bias`, PyTorch 2.13's keyword), shape
/// [num_channels], when `affine`.
class GroupNorm : public Module {
 public:
  GroupNorm(int64_t num_groups, int64_t num_channels, double eps = 1e-5, bool affine = true, bool bias = true);
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;
  int64_t num_groups() const { return num_groups_; }
  int64_t num_channels() const { return num_channels_; }

 private:
  int64_t num_groups_, num_channels_;
  double eps_;
  bool affine_;
};

}  // namespace strata::nn
