#include "models/normalization.h"

#include "core/factories.h"
#include "ops/normalization.h"

namespace strata::nn {

BatchNorm::BatchNorm(std::string type_name, int64_t num_features, double eps, std::optional<double> momentum,
                     bool affine, bool track_running_stats, bool bias)
    : Module(std::move(type_name)),
      num_features_(num_features),
      eps_(eps),
      momentum_(momentum),
      affine_(affine),
      track_running_stats_(track_running_stats) {
  STRATA_CHECK(num_features > 0, this->type_name(), ": num_features must be positive, got ", num_features);
  STRATA_CHECK(eps >= 0, this->type_name(), ": eps must be non-negative, got ", eps);
  STRATA_CHECK(!momentum || (*momentum >= 0 && *momentum <= 1), this->type_name(),
               ": momentum must lie in [0, 1] (or be None), got ", momentum.value_or(0));
  register_parameter("weight", affine ? ones({num_features}) : Tensor());
  register_parameter("bias", affine && bias ? zeros({num_features}) : Tensor());
  register_buffer("running_mean", track_running_stats ? zeros({num_features}) : Tensor());
  register_buffer("running_var", track_running_stats ? ones({num_features}) : Tensor());
  register_buffer("num_batches_tracked", track_running_stats ? zeros({}, {DType::i64, nullptr}) : Tensor());
}

Tensor BatchNorm::forward(const Tensor& input) {
  STRATA_CHECK(input.defined(), type_name(), ": the input is undefined");
  check_input(input);
  double factor = momentum_.value_or(0.0);
  if (is_training() && track_running_stats_) {
    Tensor& count = buffer("num_batches_tracked");
    if (count.defined()) {
      count.fill_(static_cast<double>(count.item<int64_t>() + 1));
      if (!momentum_) factor = 1.0 / static_cast<double>(count.item<int64_t>());
    }
  }
  const Tensor& running_mean = buffer("running_mean");
  const Tensor& running_var = buffer("running_var");
  const bool use_batch_stats = is_training() || (!running_mean.defined() && !running_var.defined());
  const bool pass_running = !is_training() || track_running_stats_;
  return batch_norm(input, pass_running ? running_mean : Tensor(), pass_running ? running_var : Tensor(),
                    parameter("weight"), parameter("bias"), use_batch_stats, factor, eps_);
}

std::string BatchNorm::extra_repr() const {
  return std::to_string(num_features_) + ", eps=" + py_float_repr(eps_) +
         ", momentum=" + (momentum_ ? py_float_repr(*momentum_) : std::string("None")) +
         ", affine=" + py_bool(affine_) + ", bias=" + py_bool(parameter("bias").defined()) +
         ", track_running_stats=" + py_bool(track_running_stats_);
}

BatchNorm1d::BatchNorm1d(int64_t num_features, double eps, std::optional<double> momentum, bool affine,
                         bool track_running_stats, bool bias)
    : BatchNorm("BatchNorm1d", num_features, eps, momentum, affine, track_running_stats, bias) {}

void BatchNorm1d::check_input(const Tensor& input) const {
  STRATA_CHECK((input.dim() == 2 || input.dim() == 3) && input.size(1) == num_features_,
               "BatchNorm1d: expected a 2-D input [N, C] or 3-D input [N, C, L] with C = ", num_features_, ", got ",
               input.sizes());
}

BatchNorm2d::BatchNorm2d(int64_t num_features, double eps, std::optional<double> momentum, bool affine,
                         bool track_running_stats, bool bias)
    : BatchNorm("BatchNorm2d", num_features, eps, momentum, affine, track_running_stats, bias) {}

void BatchNorm2d::check_input(const Tensor& input) const {
  STRATA_CHECK(input.dim() == 4 && input.size(1) == num_features_,
               "BatchNorm2d: expected a 4-D input [N, C, H, W] with C = ", num_features_, ", got ", input.sizes());
}

LayerNorm::LayerNorm(std::vector<int64_t> normalized_shape, double eps, bool elementwise_affine, bool bias)
    : Module("LayerNorm"),
      normalized_shape_(std::move(normalized_shape)),
      eps_(eps),
      elementwise_affine_(elementwise_affine) {
  STRATA_CHECK(!normalized_shape_.empty(), "LayerNorm: normalized_shape must not be empty");
  for (int64_t s : normalized_shape_) {
    STRATA_CHECK(s > 0, "LayerNorm: normalized_shape must be positive, got ", IntArrayRef(normalized_shape_));
  }
  STRATA_CHECK(eps >= 0, "LayerNorm: eps must be non-negative, got ", eps);
  register_parameter("weight", elementwise_affine ? ones(normalized_shape_) : Tensor());
  register_parameter("bias", elementwise_affine && bias ? zeros(normalized_shape_) : Tensor());
}

Tensor LayerNorm::forward(const Tensor& input) {
  STRATA_CHECK(input.defined(), "LayerNorm: the input is undefined");
  const auto k = static_cast<int64_t>(normalized_shape_.size());
  bool ok = input.dim() >= k;
  for (int64_t i = 0; ok && i < k; ++i) ok = input.size(input.dim() - k + i) == normalized_shape_[i];
  STRATA_CHECK(ok, "LayerNorm: expected an input whose trailing dimensions are ", IntArrayRef(normalized_shape_),
               ", got ", input.sizes());
  return layer_norm(input, normalized_shape_, parameter("weight"), parameter("bias"), eps_);
}

std::string LayerNorm::extra_repr() const {
  std::string shape = "(";
  for (std::size_t i = 0; i < normalized_shape_.size(); ++i) {
    shape += (i ? ", " : "") + std::to_string(normalized_shape_[i]);
  }
  shape += normalized_shape_.size() == 1 ? ",)" : ")";
  return shape + ", eps=" + py_float_repr(eps_) + ", elementwise_affine=" + py_bool(elementwise_affine_) +
         ", bias=" + py_bool(parameter("bias").defined());
}

GroupNorm::GroupNorm(int64_t num_groups, int64_t num_channels, double eps, bool affine, bool bias)
    : Module("GroupNorm"), num_groups_(num_groups), num_channels_(num_channels), eps_(eps), affine_(affine) {
  STRATA_CHECK(num_groups > 0 && num_channels > 0, "GroupNorm: num_groups and num_channels must be positive, got ",
               num_groups, " and ", num_channels);
  STRATA_CHECK(num_channels % num_groups == 0, "GroupNorm: num_channels (", num_channels,
               ") must be divisible by num_groups (", num_groups, ")");
  STRATA_CHECK(eps >= 0, "GroupNorm: eps must be non-negative, got ", eps);
  register_parameter("weight", affine ? ones({num_channels}) : Tensor());
  register_parameter("bias", affine && bias ? zeros({num_channels}) : Tensor());
}

Tensor GroupNorm::forward(const Tensor& input) {
  STRATA_CHECK(input.defined(), "GroupNorm: the input is undefined");
  STRATA_CHECK(input.dim() >= 2 && input.size(1) == num_channels_,
               "GroupNorm: expected an input [N, C, *] with C = ", num_channels_, ", got ", input.sizes());
  return group_norm(input, num_groups_, parameter("weight"), parameter("bias"), eps_);
}

std::string GroupNorm::extra_repr() const {
  return std::to_string(num_groups_) + ", " + std::to_string(num_channels_) + ", eps=" + py_float_repr(eps_) +
         ", affine=" + py_bool(affine_) + ", bias=" + py_bool(parameter("bias").defined());
}

}  // namespace strata::nn
