#pragma once
/// @file
/// Embedding-bag lookups and the DLRM dot interaction (differentiable; f32 and f64).

#include <optional>
#include <vector>

#include "core/tensor.h"

namespace strata {

/// How embedding_bag reduces the rows of a bag.
enum class EmbeddingBagMode { Sum, Mean };

/// Reduces bags of rows of `weight` [num_rows, dim] (torch.nn.functional.embedding_bag with
/// 1-D input and offsets): bag b holds indices[offsets[b] .. offsets[b + 1]) (the last bag runs to
/// the end of `indices`, or, with `include_last_offset`, offsets' last entry is the end of the last
/// bag and there is one bag fewer than offsets). Returns [num_bags, dim].
///
/// `indices` and `offsets` are 1-D i64 or i32; offsets start at 0, never decrease and never pass
/// indices.numel(); every index lies in [0, num_rows). Empty bags give zeros (also in Mean mode).
/// `per_sample_weights` (optional, same shape as indices, weight's dtype) scales each row before
/// the sum; Sum mode only.
///
/// Backward: a dense gradient for `weight`, computed deterministically (each row's gradient summed
/// in bag order, rows in parallel), and the gradient for `per_sample_weights`.
Tensor embedding_bag(const Tensor& weight, const Tensor& indices, const Tensor& offsets,
                     EmbeddingBagMode mode = EmbeddingBagMode::Sum, const Tensor& per_sample_weights = Tensor(),
                     bool include_last_offset = false);

/// Rows of `weight` [num_rows, dim] picked by `indices` (i64 or i32, any shape, values in
/// [0, num_rows)): torch.nn.functional.embedding, output indices.sizes() + [dim]. Backward: a
/// dense weight gradient, each row's gradient summed in index order (deterministic), none for row
/// `padding_idx` (optional; negative counts from the end, as PyTorch's).
Tensor embedding(const Tensor& weight, const Tensor& indices, std::optional<int64_t> padding_idx = std::nullopt);

/// PyTorch's embedding max_norm renormalization, in place and not recorded: every row of `weight`
/// named in `indices` whose `norm_type`-norm exceeds `max_norm` is scaled to norm
/// max_norm / (norm + 1e-7) · norm. Bumps weight's version. max_norm > 0, norm_type > 0.
void embedding_renorm_(const Tensor& weight, const Tensor& indices, double max_norm, double norm_type = 2.0);

/// The DLRM dot interaction (dlrm_s_pytorch.py `interact_features`, arch-interaction-op=dot).
/// `features[0]` is the dense (bottom-MLP) output x [B, d], `features[1..]` the embedding outputs,
/// each [B, d]. With T = stack(features, 1) [B, F, d] and Z = T Tᵀ [B, F, F], the output is
/// cat([x, Zflat], 1) where Zflat lists Z[:, i, j] for i in [0, F), j in [0, i) — or j in [0, i]
/// with `self_interaction` — so [B, d + F(F-1)/2] (or [B, d + F(F+1)/2]). Backward to every feature.
Tensor dot_interaction(const std::vector<Tensor>& features, bool self_interaction = false);

}  // namespace strata
