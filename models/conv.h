#pragma once
/// @file
/// nn::Conv2d.

#include "core/rng.h"
#include "models/module.h"

namespace strata::nn {

/// 2-D convolution over [N, C, H, W] or unbatched [C, H, W] inputs (torch.nn.Conv2d with
/// padding_mode "zeros"; other padding modes and string paddings are refused). weight
/// [out, in / groups, kh, kw] and bias [out] start uniform in ±1/sqrt(fan_in), fan_in =
/// in / groups · kh · kw, like PyTorch.
class Conv2d : public Module {
 public:
  Conv2d(int64_t in_channels, int64_t out_channels, Size2 kernel_size, Size2 stride = 1, Size2 padding = 0,
         Size2 dilation = 1, int64_t groups = 1, bool bias = true, const std::string& padding_mode = "zeros",
         Generator* gen = nullptr);
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;
  int64_t in_channels() const { return in_channels_; }
  int64_t out_channels() const { return out_channels_; }
  Tensor& weight() { return parameter("weight"); }
  Tensor& bias() { return parameter("bias"); }

 private:
  int64_t in_channels_, out_channels_;
  Size2 kernel_size_, stride_, padding_, dilation_;
  int64_t groups_;
};

}  // namespace strata::nn
