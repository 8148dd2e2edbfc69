#include "models/conv.h"

#include <cmath>

#include "core/factories.h"
#include "ops/conv.h"
#include "ops/resample.h"

namespace strata::nn {

namespace {

/// The checks every conv module shares (PyTorch's _ConvNd constructor's).
void check_conv_args(const char* type, int64_t in_channels, int64_t out_channels, int64_t groups) {
  STRATA_CHECK(in_channels > 0 && out_channels > 0, type, ": in_channels and out_channels must be positive, got ",
               in_channels, " and ", out_channels);
  STRATA_CHECK(groups > 0, type, ": groups must be positive, got ", groups);
  STRATA_CHECK(in_channels % groups == 0, type, ": in_channels (", in_channels, ") must be divisible by groups (",
               groups, ")");
  STRATA_CHECK(out_channels % groups == 0, type, ": out_channels (", out_channels, ") must be divisible by groups (",
               groups, ")");
}

/// Uniform in ±1/sqrt(fan_in) (PyTorch's kaiming_uniform_(a=√5) and bias init).
Tensor conv_init(Dims sizes, int64_t fan_in, Generator* gen) {
  const double bound = 1.0 / std::sqrt(static_cast<double>(fan_in));
  return uniform(sizes, -bound, bound, {}, gen);
}

}  // namespace

Conv2d::Conv2d(int64_t in_channels, int64_t out_channels, Size2 kernel_size, Size2 stride, Size2 padding,
               Size2 dilation, int64_t groups, bool bias, const std::string& padding_mode, Generator* gen)
    : Module("Conv2d"),
      in_channels_(in_channels),
      out_channels_(out_channels),
      kernel_size_(kernel_size.h, kernel_size.w),
      stride_(stride.h, stride.w),
      padding_(padding.h, padding.w),
      dilation_(dilation.h, dilation.w),
      groups_(groups) {
  STRATA_CHECK(padding_mode == "zeros", "Conv2d: padding_mode '", padding_mode, "' is not supported (only 'zeros')");
  check_conv_args("Conv2d", in_channels, out_channels, groups);
  STRATA_CHECK(kernel_size_.h > 0 && kernel_size_.w > 0, "Conv2d: kernel_size must be positive, got ",
               kernel_size_.tuple_repr());
  STRATA_CHECK(stride_.h > 0 && stride_.w > 0, "Conv2d: stride must be positive, got ", stride_.tuple_repr());
  STRATA_CHECK(padding_.h >= 0 && padding_.w >= 0, "Conv2d: padding must be non-negative, got ", padding_.tuple_repr());
  STRATA_CHECK(dilation_.h > 0 && dilation_.w > 0, "Conv2d: dilation must be positive, got ", dilation_.tuple_repr());
  const int64_t fan_in = in_channels / groups * kernel_size_.h * kernel_size_.w;
  register_parameter("weight",
                     conv_init({out_channels, in_channels / groups, kernel_size_.h, kernel_size_.w}, fan_in, gen));
  register_parameter("bias", bias ? conv_init({out_channels}, fan_in, gen) : Tensor());
}

void Conv2d::check_input(const Tensor& input) const {
  STRATA_CHECK(input.defined(), "Conv2d: the input is undefined");
  const bool ok =
      (input.dim() == 4 && input.size(1) == in_channels_) || (input.dim() == 3 && input.size(0) == in_channels_);
  STRATA_CHECK(ok, "Conv2d: expected a 4-D input [N, C, H, W] (or 3-D [C, H, W]) with C = ", in_channels_, ", got ",
               input.sizes());
}

Tensor Conv2d::forward(const Tensor& input) {
  check_input(input);
  return conv2d(input, parameter("weight"), parameter("bias"), stride_.vec(), padding_.vec(), dilation_.vec(), groups_);
}

int64_t Conv2d::append_remat_steps(int64_t input, std::vector<remat::GraphStep>& steps) const {
  // Note [Conv backward in two steps]: the data step, then the weight step reading its output and
  // the conv's input.
  auto self = std::static_pointer_cast<const Conv2d>(shared_from_this());
  const int64_t y = append_remat_step(
      [self](const autograd::TensorList& in) -> Tensor {
        self->check_input(in[0]);
        return conv2d_data_step(in[0], self->parameter("weight"), self->parameter("bias"), self->stride_.vec(),
                                self->padding_.vec(), self->dilation_.vec(), self->groups_);
      },
      {input}, to_string() + " data", steps);
  return append_remat_step(
      [self](const autograd::TensorList& in) -> Tensor {
        return conv2d_weight_step(in[0], in[1], self->parameter("weight"), self->parameter("bias"), self->stride_.vec(),
                                  self->padding_.vec(), self->dilation_.vec(), self->groups_);
      },
      {y, input}, to_string() + " weight", steps);
}

std::string Conv2d::extra_repr() const {
  std::string s = std::to_string(in_channels_) + ", " + std::to_string(out_channels_) +
                  ", kernel_size=" + kernel_size_.tuple_repr() + ", stride=" + stride_.tuple_repr();
  if (padding_.h != 0 || padding_.w != 0) s += ", padding=" + padding_.tuple_repr();
  if (dilation_.h != 1 || dilation_.w != 1) s += ", dilation=" + dilation_.tuple_repr();
  if (groups_ != 1) s += ", groups=" + std::to_string(groups_);
  if (!parameter("bias").defined()) s += ", bias=False";
  return s;
}

// ---- Conv1d --------------------------------------------------------------------------------------

Conv1d::Conv1d(int64_t in_channels, int64_t out_channels, int64_t kernel_size, int64_t stride, Padding1d padding,
               int64_t dilation, int64_t groups, bool bias, const std::string& padding_mode, Generator* gen)
    : Module("Conv1d"),
      in_channels_(in_channels),
      out_channels_(out_channels),
      kernel_size_(kernel_size),
      stride_(stride),
      padding_(std::move(padding)),
      dilation_(dilation),
      groups_(groups),
      padding_mode_(padding_mode) {
  check_conv_args("Conv1d", in_channels, out_channels, groups);
  STRATA_CHECK(
      padding_mode == "zeros" || padding_mode == "reflect" || padding_mode == "replicate" || padding_mode == "circular",
      "Conv1d: padding_mode must be one of 'zeros', 'reflect', 'replicate', 'circular', got '", padding_mode, "'");
  STRATA_CHECK(kernel_size > 0 && stride > 0 && dilation > 0,
               "Conv1d: kernel_size, stride and dilation must be "
               "positive, got ",
               kernel_size, ", ", stride, " and ", dilation);
  STRATA_CHECK(padding_.mode.empty() || padding_.mode == "same" || padding_.mode == "valid",
               "Conv1d: invalid padding string '", padding_.mode, "', should be one of {'valid', 'same'}");
  STRATA_CHECK(padding_.mode != "same" || stride == 1,
               "Conv1d: padding='same' is not supported for strided "
               "convolutions");
  STRATA_CHECK(padding_.amount >= 0, "Conv1d: padding must be non-negative, got ", padding_.amount);
  if (padding_.mode == "same") {
    const int64_t total = dilation * (kernel_size - 1);
    pad_left_ = total / 2, pad_right_ = total - total / 2;
  } else {
    pad_left_ = pad_right_ = padding_.amount;
  }
  const int64_t fan_in = in_channels / groups * kernel_size;
  register_parameter("weight", conv_init({out_channels, in_channels / groups, kernel_size}, fan_in, gen));
  register_parameter("bias", bias ? conv_init({out_channels}, fan_in, gen) : Tensor());
}

Tensor Conv1d::forward(const Tensor& input) {
  STRATA_CHECK(input.defined(), "Conv1d: the input is undefined");
  const bool ok =
      (input.dim() == 3 && input.size(1) == in_channels_) || (input.dim() == 2 && input.size(0) == in_channels_);
  STRATA_CHECK(ok, "Conv1d: expected a 3-D input [N, C, L] (or 2-D [C, L]) with C = ", in_channels_, ", got ",
               input.sizes());
  const Tensor& w = parameter("weight");
  const Tensor& b = parameter("bias");
  if (padding_mode_ != "zeros")
    return conv1d(pad(input, {pad_left_, pad_right_}, padding_mode_), w, b, {stride_}, IntArrayRef{0}, {dilation_},
                  groups_);
  if (!padding_.mode.empty()) return conv1d(input, w, b, {stride_}, padding_.mode, {dilation_}, groups_);
  return conv1d(input, w, b, {stride_}, IntArrayRef{padding_.amount}, {dilation_}, groups_);
}

std::string Conv1d::extra_repr() const {
  std::string s = std::to_string(in_channels_) + ", " + std::to_string(out_channels_) + ", kernel_size=(" +
                  std::to_string(kernel_size_) + ",), stride=(" + std::to_string(stride_) + ",)";
  if (!padding_.mode.empty())
    s += ", padding=" + padding_.mode;
  else if (padding_.amount != 0)
    s += ", padding=(" + std::to_string(padding_.amount) + ",)";
  if (dilation_ != 1) s += ", dilation=(" + std::to_string(dilation_) + ",)";
  if (groups_ != 1) s += ", groups=" + std::to_string(groups_);
  if (!parameter("bias").defined()) s += ", bias=False";
  if (padding_mode_ != "zeros") s += ", padding_mode=" + padding_mode_;
  return s;
}

// ---- ConvTranspose2d -----------------------------------------------------------------------------

ConvTranspose2d::ConvTranspose2d(int64_t in_channels, int64_t out_channels, Size2 kernel_size, Size2 stride,
                                 Size2 padding, Size2 output_padding, int64_t groups, bool bias, Size2 dilation,
                                 const std::string& padding_mode, Generator* gen)
    : Module("ConvTranspose2d"),
      in_channels_(in_channels),
      out_channels_(out_channels),
      kernel_size_(kernel_size.h, kernel_size.w),
      stride_(stride.h, stride.w),
      padding_(padding.h, padding.w),
      output_padding_(output_padding.h, output_padding.w),
      groups_(groups),
      dilation_(dilation.h, dilation.w) {
  STRATA_CHECK(padding_mode == "zeros", "ConvTranspose2d: only 'zeros' padding mode is supported, got '", padding_mode,
               "'");
  check_conv_args("ConvTranspose2d", in_channels, out_channels, groups);
  STRATA_CHECK(kernel_size_.h > 0 && kernel_size_.w > 0, "ConvTranspose2d: kernel_size must be positive, got ",
               kernel_size_.tuple_repr());
  const int64_t fan_in = out_channels / groups * kernel_size_.h * kernel_size_.w;
  register_parameter("weight",
                     conv_init({in_channels, out_channels / groups, kernel_size_.h, kernel_size_.w}, fan_in, gen));
  register_parameter("bias", bias ? conv_init({out_channels}, fan_in, gen) : Tensor());
}

Tensor ConvTranspose2d::forward(const Tensor& input) {
  STRATA_CHECK(input.defined(), "ConvTranspose2d: the input is undefined");
  const bool ok =
      (input.dim() == 4 && input.size(1) == in_channels_) || (input.dim() == 3 && input.size(0) == in_channels_);
  STRATA_CHECK(ok, "ConvTranspose2d: expected a 4-D input [N, C, H, W] (or 3-D [C, H, W]) with C = ", in_channels_,
               ", got ", input.sizes());
  return conv_transpose2d(input, parameter("weight"), parameter("bias"), stride_.vec(), padding_.vec(),
                          output_padding_.vec(), groups_, dilation_.vec());
}

std::string ConvTranspose2d::extra_repr() const {
  std::string s = std::to_string(in_channels_) + ", " + std::to_string(out_channels_) +
                  ", kernel_size=" + kernel_size_.tuple_repr() + ", stride=" + stride_.tuple_repr();
  if (padding_.h != 0 || padding_.w != 0) s += ", padding=" + padding_.tuple_repr();
  if (dilation_.h != 1 || dilation_.w != 1) s += ", dilation=" + dilation_.tuple_repr();
  if (output_padding_.h != 0 || output_padding_.w != 0) s += ", output_padding=" + output_padding_.tuple_repr();
  if (groups_ != 1) s += ", groups=" + std::to_string(groups_);
  if (!parameter("bias").defined()) s += ", bias=False";
  return s;
}

}  // namespace strata::nn
