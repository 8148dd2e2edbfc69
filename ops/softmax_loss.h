#pragma once
/// @file
/// Softmax and the loss functions (torch.nn.functional semantics; f32 and f64; any strides;
/// outputs contiguous). Class-index targets are i64 (i32 accepted).

#include <cstdint>

#include "core/tensor.h"

namespace strata {

/// How a loss combines its per-element values: kept as they are, averaged, or summed (0-D result).
enum class Reduction { None, Mean, Sum };

/// exp(x - max) / Σ exp(x - max) along `dim` (negative counts from the end). Backward for x.
Tensor softmax(const Tensor& x, int64_t dim);

/// x - max - log Σ exp(x - max) along `dim` (negative counts from the end). Backward for x.
Tensor log_softmax(const Tensor& x, int64_t dim);

/// (input - target)², reduced. `input` and `target` have the same shape. Gradients for both.
Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean);

/// |input - target|, reduced. `input` and `target` have the same shape. Gradients for both
/// (sign(input - target), 0 where they are equal, as PyTorch's).
Tensor l1_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean);

/// -weight · (target · log(input) + (1 - target) · log(1 - input)), each log clamped to >= -100 as in
/// PyTorch. `input` in [0, 1] (checked) and `target` have the same shape; `weight` (optional)
/// broadcasts to it. Gradients for input and target (not weight).
Tensor binary_cross_entropy(const Tensor& input, const Tensor& target, const Tensor& weight = {},
                            Reduction reduction = Reduction::Mean);

/// binary_cross_entropy(sigmoid(input), target) in the numerically stable form
/// `(1 - t) · x + (1 + (p - 1) · t) · softplus(-x)` times `weight`, where `p` is `pos_weight`
/// (optional, broadcast along the last dim, e.g. [C] for input [N, C]). `weight` (optional)
/// broadcasts to the input. Gradients for input and target (not weight / pos_weight).
Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target, const Tensor& weight = {},
                                        const Tensor& pos_weight = {}, Reduction reduction = Reduction::Mean);

/// Negative log likelihood: -weight[t] · log_probs[n, t, d...] for `log_probs` [N, C] or
/// [N, C, d1, ...] (or [C] with a 0-D target) and class-index `target` [N] / [N, d1, ...].
/// Targets equal to `ignore_index` contribute nothing; Mean divides by the summed weight of the
/// other targets. Other targets must lie in [0, C). Gradient for log_probs.
Tensor nll_loss(const Tensor& log_probs, const Tensor& target, const Tensor& weight = {},
                Reduction reduction = Reduction::Mean, int64_t ignore_index = -100);

/// nll_loss(log_softmax(logits, 1), target, ...) fused into one op and one autograd node, with
/// PyTorch's label smoothing: `(1 - ε) · nll + ε / C · Σ_c weight[c] · (-log_softmax_c)`.
/// Class-index targets only. Gradient for logits.
Tensor cross_entropy(const Tensor& logits, const Tensor& target, const Tensor& weight = {},
                     Reduction reduction = Reduction::Mean, int64_t ignore_index = -100, double label_smoothing = 0.0);

}  // namespace strata
