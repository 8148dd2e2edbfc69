#pragma once
/// @file
/// Fused scaled dot-product attention (torch.nn.functional.scaled_dot_product_attention;
/// differentiable; f32 and f64).

#include <optional>

#include "core/rng.h"
#include "core/tensor.h"

namespace strata {

/// softmax(query · keyᵀ · scale + mask) · value over the last two dims, the leading (batch) dims
/// taken pairwise: query [..., L, E], key [..., S, E], value [..., S, Ev] → [..., L, Ev]. All three
/// have the same rank (at least 2), the same batch sizes and one floating dtype.
///
/// - `scale` defaults to 1 / √E.
/// - `attn_mask` (optional) broadcasts to [..., L, S]: a bool mask keeps the positions that are
///   true, a floating mask (query's dtype) is added to the scores. It gets no gradient (a floating
///   mask that requires grad is an error).
/// - `is_causal` keeps key j for query i only when j <= i (PyTorch's top-left aligned tril); with
///   an `attn_mask` it is an error, as PyTorch documents.
/// - A query row whose keys are all masked gives zeros (and zero gradients), as PyTorch 2.13 does.
/// - `dropout_p` in [0, 1] drops attention probabilities and scales the kept ones by 1/(1 - p),
///   with a mask that depends only on `gen`'s (default_generator() when null) seed and offset,
///   never on the thread count (Note [Blocked attention] in ops/attention.cpp).
///
/// The output keeps query's dim order (a query that is a transposed view of [B, L, H, E], as
/// MultiheadAttention makes, gives an output that is the same view of [B, L, H, Ev]); gradients
/// keep their input's. The op saves query, key, value, the output and one log-sum-exp per query
/// row, never the [L, S] probabilities.
Tensor scaled_dot_product_attention(const Tensor& query, const Tensor& key, const Tensor& value,
                                    const Tensor& attn_mask = Tensor(), double dropout_p = 0.0, bool is_causal = false,
                                    std::optional<double> scale = std::nullopt, Generator* gen = nullptr);

}  // namespace strata
