#pragma once
/// @file
/// nn::Conv2d.

#include "core/rng.h"
#include "models/module.h"
#include "models/remat.h"

namespace strata::nn {

/// 2-D convolution over [N, C, H, W] or unbatched [C, H, W] inputs (torch.nn.Conv2d with
/// padding_mode "zeros"; other padding modes and string paddings are refused). weight
/// [out, in / groups, kh, kw] and bias [out] start uniform in ±1/sqrt(fan_in), fan_in =
/// in / groups · kh · kw, like PyTorch.
/// Planned per op by Auto as two steps (Note [Conv backward in two steps] in ops/conv.h):
/// append_remat_steps appends conv2d_data_step and conv2d_weight_step.
class Conv2d : public Module, public RematGraphModule {
 public:
  Conv2d(int64_t in_channels, int64_t out_channels, Size2 kernel_size, Size2 stride = 1, Size2 padding = 0,
         Size2 dilation = 1, int64_t groups = 1, bool bias = true, const std::string& padding_mode = "zeros",
         Generator* gen = nullptr);
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;
  int64_t append_remat_steps(int64_t input, std::vector<remat::GraphStep>& steps) const override;
  int64_t in_channels() const { return in_channels_; }
  int64_t out_channels() const { return out_channels_; }
  Tensor& weight() { return parameter("weight"); }
  Tensor& bias() { return parameter("bias"); }

 private:
  void check_input(const Tensor& input) const;
  int64_t in_channels_, out_channels_;
  Size2 kernel_size_, stride_, padding_, dilation_;
  int64_t groups_;
};

}  // namespace strata::nn
