#pragma once
/// @file
/// Differentiable shape and indexing ops: the recorded counterparts of core's raw views
/// (Note [Autograd metadata] in core/tensor.h) plus cat/split and the index gathers.
///
/// View ops (reshape when possible, flatten, transpose, permute, split, slice) return views that
/// share the input's storage (no data movement) and record a node when the input requires grad.
/// The data-moving ops (cat, index_select, gather) return fresh contiguous tensors. All of them
/// move elements without arithmetic, so they accept every dtype; gradients exist for f32/f64.
/// Index tensors are i64 or i32; index values must lie in [0, size) (no negative indices).

#include <optional>
#include <vector>

#include "core/tensor.h"

namespace strata {

/// `x` with new sizes (one entry may be -1): a view when the strides allow it, else a copy.
/// Backward: the gradient reshaped back to x's sizes.
Tensor reshape(const Tensor& x, IntArrayRef sizes);

/// Merges dims [start_dim, end_dim] into one (negative dims count from the end); a 0-dim tensor
/// becomes [1]. Implemented with reshape (and recorded as a reshape).
Tensor flatten(const Tensor& x, int64_t start_dim = 0, int64_t end_dim = -1);

/// Swaps dims `dim0` and `dim1` (a view). Backward: the same transpose of the gradient.
Tensor transpose(const Tensor& x, int64_t dim0, int64_t dim1);

/// Reorders the dims (a view): output dim i is input dim `dims[i]`. Every dim exactly once.
/// Backward: the inverse permutation of the gradient.
Tensor permute(const Tensor& x, IntArrayRef dims);

/// Concatenates along `dim`; all tensors have the same rank, dtype and sizes except in `dim`
/// (1-D empty tensors are skipped, as in PyTorch). Backward: slices (views) of the gradient.
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim = 0);

/// Splits into views of `split_size` elements along `dim` (the last one may be smaller);
/// split_size > 0. One node with several outputs; backward concatenates the pieces' gradients
/// (zeros for pieces nobody used). Note that `split(x, {2}, 0)` picks this overload (size 2).
std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim = 0);

/// Splits into views with the given sizes along `dim` (non-negative, summing to x.size(dim)).
std::vector<Tensor> split(const Tensor& x, IntArrayRef split_sizes, int64_t dim);

/// Python-style slice x[start:end:step] along `dim` (a view): start/end may be negative or
/// omitted and are clamped to the dim; step > 0. Backward: zeros with the gradient in the slice.
Tensor slice(const Tensor& x, int64_t dim, std::optional<int64_t> start = std::nullopt,
             std::optional<int64_t> end = std::nullopt, int64_t step = 1);

/// Entries `index` (1-D or 0-D, i64/i32, values in [0, x.size(dim))) of `x` along `dim`;
/// the output has x's sizes with size(dim) = index.numel(). Backward: deterministic scatter-add
/// (duplicate indices accumulate in index order).
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index);

/// out[i][j][k] = x[index[i][j][k]][j][k] for dim 0 (and likewise for other dims): `index` has
/// x's rank, index.size(d) <= x.size(d) for every d != dim, values in [0, x.size(dim)); the output
/// has index's sizes. Backward: deterministic scatter-add into zeros of x's shape.
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index);

}  // namespace strata
