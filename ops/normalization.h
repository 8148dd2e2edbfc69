#pragma once
/// @file
/// Normalization ops (torch.nn.functional semantics; f32 and f64; any strides; outputs
/// contiguous): batch_norm and layer_norm, with backward for the input, weight and bias.

#include "core/tensor.h"

namespace strata {

/// Batch normalization over the channel dim 1 of `x` ([N, C], [N, C, L], [N, C, H, W], any rank
/// >= 2), like `torch.nn.functional.batch_norm`.
///
/// `running_mean`, `running_var` ([C], same dtype as x) may be undefined in training mode;
/// `weight`, `bias` ([C]) may be undefined (1 and 0).
///  - training: normalizes with the batch statistics (biased variance) and, when the running
///    statistics are defined, updates them in place: `r = (1 - momentum) * r + momentum * s` with
///    the batch mean and the unbiased batch variance. Their version is bumped; no autograd is
///    ever recorded for them. Needs more than one value per channel.
///  - inference (`training == false`): normalizes with the running statistics (required).
/// Backward: gradients for x, weight and bias (in training mode, through the batch statistics).
/// Throws on `eps < 0` or `momentum` outside [0, 1].
Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight,
                  const Tensor& bias, bool training, double momentum = 0.1, double eps = 1e-5);

/// Layer normalization over the trailing dims `normalized_shape` of `x`, like
/// `torch.nn.functional.layer_norm`: `(x - mean) / sqrt(var + eps) * weight + bias` with the
/// biased variance of each row. `weight` and `bias` (shape `normalized_shape`) may be undefined.
/// Backward: gradients for x, weight and bias.
Tensor layer_norm(const Tensor& x, IntArrayRef normalized_shape, const Tensor& weight = {}, const Tensor& bias = {},
                  double eps = 1e-5);

/// Group normalization like torch.nn.functional.group_norm: `x` is (N, C, *) (rank >= 2),
/// `num_groups` divides C; each sample's channels are split into num_groups groups normalized
/// with their own mean and biased variance, then scaled by `weight` and shifted by `bias` (each
/// (C), may be undefined). Composed of layer_norm over each group (a recorded reshape to
/// (N, num_groups, C/num_groups · S)) and a per-channel multiply-add: gradients for x, weight
/// and bias are theirs.
Tensor group_norm(const Tensor& x, int64_t num_groups, const Tensor& weight = {}, const Tensor& bias = {},
                  double eps = 1e-5);

/// Lp normalization along `dim` like torch.nn.functional.normalize: x / max(‖x‖_p, eps), the
/// norm over `dim` broadcast back. Composed of norm, clamp and div (PyTorch's own composition):
/// the gradient flows through the norm as well.
Tensor normalize(const Tensor& x, double p = 2.0, int64_t dim = 1, double eps = 1e-12);

}  // namespace strata
