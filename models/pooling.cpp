#include "models/pooling.h"

#include "ops/pooling.h"

namespace strata::nn {

namespace {
void check_pool_input(const char* name, const Tensor& input) {
  STRATA_CHECK(input.defined(), name, ": the input is undefined");
  STRATA_CHECK(input.dim() == 3 || input.dim() == 4, name,
               ": expected a 4-D input [N, C, H, W] (or 3-D [C, H, W]), got ", input.sizes());
}
void check_positive(const char* name, const char* what, const Size2& s) {
  STRATA_CHECK(s.h > 0 && s.w > 0, name, ": ", what, " must be positive, got ", s.repr());
}
}  // namespace

MaxPool2d::MaxPool2d(Size2 kernel_size, std::optional<Size2> stride, Size2 padding, Size2 dilation, bool ceil_mode)
    : Module("MaxPool2d"),
      kernel_size_(kernel_size),
      stride_(stride.value_or(kernel_size)),
      padding_(padding),
      dilation_(dilation),
      ceil_mode_(ceil_mode) {
  check_positive("MaxPool2d", "kernel_size", kernel_size_);
  check_positive("MaxPool2d", "stride", stride_);
  check_positive("MaxPool2d", "dilation", dilation_);
  STRATA_CHECK(
      padding_.h >= 0 && padding_.w >= 0 && 2 * padding_.h <= kernel_size_.h && 2 * padding_.w <= kernel_size_.w,
      "MaxPool2d: padding must be non-negative and at most half the kernel size, got padding ", padding_.repr(),
      " for kernel_size ", kernel_size_.repr());
}

Tensor MaxPool2d::forward(const Tensor& input) {
  check_pool_input("MaxPool2d", input);
  return max_pool2d(input, kernel_size_.vec(), stride_.vec(), padding_.vec(), dilation_.vec(), ceil_mode_);
}

std::string MaxPool2d::extra_repr() const {
  return "kernel_size=" + kernel_size_.repr() + ", stride=" + stride_.repr() + ", padding=" + padding_.repr() +
         ", dilation=" + dilation_.repr() + ", ceil_mode=" + py_bool(ceil_mode_);
}

AvgPool2d::AvgPool2d(Size2 kernel_size, std::optional<Size2> stride, Size2 padding, bool ceil_mode,
                     bool count_include_pad)
    : Module("AvgPool2d"),
      kernel_size_(kernel_size),
      stride_(stride.value_or(kernel_size)),
      padding_(padding),
      ceil_mode_(ceil_mode),
      count_include_pad_(count_include_pad) {
  check_positive("AvgPool2d", "kernel_size", kernel_size_);
  check_positive("AvgPool2d", "stride", stride_);
  STRATA_CHECK(
      padding_.h >= 0 && padding_.w >= 0 && 2 * padding_.h <= kernel_size_.h && 2 * padding_.w <= kernel_size_.w,
      "AvgPool2d: padding must be non-negative and at most half the kernel size, got padding ", padding_.repr(),
      " for kernel_size ", kernel_size_.repr());
}

Tensor AvgPool2d::forward(const Tensor& input) {
  check_pool_input("AvgPool2d", input);
  return avg_pool2d(input, kernel_size_.vec(), stride_.vec(), padding_.vec(), ceil_mode_, count_include_pad_);
}

std::string AvgPool2d::extra_repr() const {
  return "kernel_size=" + kernel_size_.repr() + ", stride=" + stride_.repr() + ", padding=" + padding_.repr();
}

AdaptiveAvgPool2d::AdaptiveAvgPool2d(Size2 output_size) : Module("AdaptiveAvgPool2d"), output_size_(output_size) {
  check_positive("AdaptiveAvgPool2d", "output_size", output_size_);
}

Tensor AdaptiveAvgPool2d::forward(const Tensor& input) {
  check_pool_input("AdaptiveAvgPool2d", input);
  return adaptive_avg_pool2d(input, output_size_.vec());
}

std::string AdaptiveAvgPool2d::extra_repr() const { return "output_size=" + output_size_.repr(); }

}  // namespace strata::nn
