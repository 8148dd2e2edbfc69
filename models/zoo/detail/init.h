#pragma once
/// @file
/// Weight initializations the model zoo uses to match torchvision's models (which re-initialize
/// after construction): Kaiming-normal convolutions, constant batch-norm affine parameters,
/// normal linear layers.

#include "core/rng.h"
#include "models/module.h"

namespace strata::nn::zoo {

/// Replaces `module`'s parameter `name` with N(mean, std) values of the same shape and dtype.
void init_normal(Module& module, const std::string& name, double mean, double std, Generator* gen);
/// Replaces `module`'s parameter `name` (if defined) with `value` everywhere.
void init_constant(Module& module, const std::string& name, double value);
/// Kaiming-normal for a ReLU network: std = sqrt(2 / fan), fan = fan_in (in / groups · kh · kw)
/// or fan_out (out · kh · kw) of a [out, in / groups, kh, kw] (or [out, in]) weight.
void init_kaiming_normal(Module& module, const std::string& name, bool fan_out, Generator* gen);

/// torchvision's ResNet/VGG/DenseNet initialization over every module of `root`: Conv2d weights
/// Kaiming-normal (`conv_fan_out` picks the mode) and biases 0; batch norms weight 1, bias 0;
/// Linear layers N(0, `linear_std`) with bias 0 when `linear_std` > 0, left as constructed
/// otherwise.
void init_torchvision(Module& root, bool conv_fan_out, double linear_std, Generator* gen);

}  // namespace strata::nn::zoo
