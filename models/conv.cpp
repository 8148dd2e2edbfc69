#include "models/conv.h"

#include <cmath>

#include "core/factories.h"
#include "ops/conv.h"

namespace strata::nn {

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
  STRATA_CHECK(padding_mode == "zeros", "Conv2d: padding_mode '", padding_mode,
               "' is not supported (only 'zeros')");
  STRATA_CHECK(in_channels > 0 && out_channels > 0, "Conv2d: in_channels and out_channels must be positive, got ",
               in_channels, " and ", out_channels);
  STRATA_CHECK(groups > 0, "Conv2d: groups must be positive, got ", groups);
  STRATA_CHECK(in_channels % groups == 0, "Conv2d: in_channels (", in_channels, ") must be divisible by groups (",
               groups, ")");
  STRATA_CHECK(out_channels % groups == 0, "Conv2d: out_channels (", out_channels,
               ") must be divisible by groups (", groups, ")");
  STRATA_CHECK(kernel_size_.h > 0 && kernel_size_.w > 0, "Conv2d: kernel_size must be positive, got ",
               kernel_size_.tuple_repr());
  STRATA_CHECK(stride_.h > 0 && stride_.w > 0, "Conv2d: stride must be positive, got ", stride_.tuple_repr());
  STRATA_CHECK(padding_.h >= 0 && padding_.w >= 0, "Conv2d: padding must be non-negative, got ",
               padding_.tuple_repr());
  STRATA_CHECK(dilation_.h > 0 && dilation_.w > 0, "Conv2d: dilation must be positive, got ",
               dilation_.tuple_repr());
  const int64_t fan_in = in_channels / groups * kernel_size_.h * kernel_size_.w;
  const double bound = 1.0 / std::sqrt(static_cast<double>(fan_in));
  register_parameter("weight",
                     uniform({out_channels, in_channels / groups, kernel_size_.h, kernel_size_.w}, -bound, bound, {}, gen));
  register_parameter("bias", bias ? uniform({out_channels}, -bound, bound, {}, gen) : Tensor());
}

void Conv2d::check_input(const Tensor& input) const {
  STRATA_CHECK(input.defined(), "Conv2d: the input is undefined");
  const bool ok = (input.dim() == 4 && input.size(1) == in_channels_) ||
                  (input.dim() == 3 && input.size(0) == in_channels_);
  STRATA_CHECK(ok, "Conv2d: expected a 4-D input [N, C, H, W] (or 3-D [C, H, W]) with C = ", in_channels_, ", got ",
               input.sizes());
}

Tensor Conv2d::forward(const Tensor& input) {
  check_input(input);
  return conv2d(input, parameter("weight"), parameter("bias"), stride_.vec(), padding_.vec(), dilation_.vec(),
                groups_);
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

}  // namespace strata::nn
