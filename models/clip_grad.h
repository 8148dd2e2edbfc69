#pragma once
/// @file
/// Gradient clipping — torch.nn.utils.clip_grad_norm_ and clip_grad_value_.

#include <vector>

#include "core/tensor.h"

namespace strata::nn {

/// Scales the gradients of `params` in place so that their total norm is at most `max_norm`
/// (PyTorch's algorithm: the norm of every gradient, then the norm of those norms; every gradient
/// is multiplied by min(1, max_norm / (total + 1e-6)), computed in the gradients' dtype).
/// `norm_type` is any p of a vector norm: inf (the largest |g|), -inf, 0 (count of non-zeros) or a
/// real p. Parameters without a gradient are skipped. Returns the total norm as a 0-d tensor of the
/// first gradient's dtype (0-d f32 0.0 when no parameter has a gradient). With
/// `error_if_nonfinite`, a NaN or infinite total norm throws PyTorch's message and changes nothing.
/// Gradients must be f32 or f64. Not recorded by autograd.
Tensor clip_grad_norm_(const std::vector<Tensor>& params, double max_norm, double norm_type = 2.0,
                       bool error_if_nonfinite = false);

/// Clamps every defined gradient of `params` in place to [-clip_value, clip_value] (PyTorch's
/// clamp: a negative clip_value sets every element to clip_value). Not recorded by autograd.
void clip_grad_value_(const std::vector<Tensor>& params, double clip_value);

/// The p-norm of all elements of `t` (f32/f64) in f64 (torch.linalg.vector_norm's definition,
/// including inf, -inf and 0).
double vector_norm(const Tensor& t, double p);

}  // namespace strata::nn
