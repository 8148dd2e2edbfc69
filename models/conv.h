#pragma once
/// @file
/// nn::Conv2d, nn::Conv1d and nn::ConvTranspose2d.

#include <concepts>
#include <string>

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

/// Conv1d's padding: an amount, or PyTorch's "same" / "valid".
struct Padding1d {
  int64_t amount = 0;
  std::string mode;  // empty: `amount`; else "same" or "valid"
  template <std::integral I>
  Padding1d(I v) : amount(static_cast<int64_t>(v)) {}  // NOLINT: implicit like PyTorch's int-or-str (0 too)
  Padding1d(const char* m) : mode(m) {}                // NOLINT
  Padding1d(std::string m) : mode(std::move(m)) {}     // NOLINT
};

/// 1-D convolution over [N, C, L] or unbatched [C, L] inputs (torch.nn.Conv1d). weight
/// [out, in / groups, k] and bias [out] start uniform in ±1/sqrt(fan_in), fan_in = in / groups · k.
/// padding_mode "zeros" pads inside conv1d; "reflect", "replicate" and "circular" pad the input
/// with pad() first (as PyTorch). padding "same" needs stride 1.
class Conv1d : public Module {
 public:
  Conv1d(int64_t in_channels, int64_t out_channels, int64_t kernel_size, int64_t stride = 1, Padding1d padding = 0,
         int64_t dilation = 1, int64_t groups = 1, bool bias = true, const std::string& padding_mode = "zeros",
         Generator* gen = nullptr);
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;
  int64_t in_channels() const { return in_channels_; }
  int64_t out_channels() const { return out_channels_; }

 private:
  int64_t in_channels_, out_channels_, kernel_size_, stride_;
  Padding1d padding_;
  int64_t dilation_, groups_;
  std::string padding_mode_;
  int64_t pad_left_ = 0, pad_right_ = 0;  // the input padding of the amount or of "same"
};

/// 2-D transposed convolution (torch.nn.ConvTranspose2d, padding_mode "zeros"): weight
/// [in, out / groups, kh, kw] and bias [out] start uniform in ±1/sqrt(fan_in), fan_in =
/// out / groups · kh · kw (PyTorch computes it from the weight's second dim).
class ConvTranspose2d : public Module {
 public:
  ConvTranspose2d(int64_t in_channels, int64_t out_channels, Size2 kernel_size, Size2 stride = 1, Size2 padding = 0,
                  Size2 output_padding = 0, int64_t groups = 1, bool bias = true, Size2 dilation = 1,
                  const std::string& padding_mode = "zeros", Generator* gen = nullptr);
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;
  int64_t in_channels() const { return in_channels_; }
  int64_t out_channels() const { return out_channels_; }

 private:
  int64_t in_channels_, out_channels_;
  Size2 kernel_size_, stride_, padding_, output_padding_;
  int64_t groups_;
  Size2 dilation_;
};

}  // namespace strata::nn
