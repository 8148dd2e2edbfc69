#pragma once
/// @file
/// Pooling modules: MaxPool2d, AvgPool2d, AdaptiveAvgPool2d (inputs [N, C, H, W] or [C, H, W]).

#include <optional>

#include "models/module.h"

namespace strata::nn {

/// torch.nn.MaxPool2d; stride defaults to kernel_size.
class MaxPool2d : public Module {
 public:
  explicit MaxPool2d(Size2 kernel_size, std::optional<Size2> stride = std::nullopt, Size2 padding = 0,
                     Size2 dilation = 1, bool ceil_mode = false);
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;

 private:
  Size2 kernel_size_, stride_, padding_, dilation_;
  bool ceil_mode_;
};

/// torch.nn.AvgPool2d; stride defaults to kernel_size.
class AvgPool2d : public Module {
 public:
  explicit AvgPool2d(Size2 kernel_size, std::optional<Size2> stride = std::nullopt, Size2 padding = 0,
                     bool ceil_mode = false, bool count_include_pad = true);
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;

 private:
  Size2 kernel_size_, stride_, padding_;
  bool ceil_mode_, count_include_pad_;
};

/// torch.nn.AdaptiveAvgPool2d.
class AdaptiveAvgPool2d : public Module {
 public:
  explicit AdaptiveAvgPool2d(Size2 output_size);
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;

 private:
  Size2 output_size_;
};

}  // namespace strata::nn
