#pragma once
/// @file
/// The scatter family (torch.scatter, scatter_add, scatter_reduce): the writes that gather
/// (ops/shape_ops.h) reads. For dim 0, out[index[i][j]][j] op= src[i][j] (likewise for other dims).
///
/// Shared rules, as PyTorch's: index (i64 or i32) has x's rank, index.size(k) <= src.size(k) for
/// every k and <= x.size(k) for k != dim; only the first index.sizes() elements of src are used;
/// index values lie in [0, x.size(dim)) (out of range is an error naming the value and the dim);
/// src has x's dtype. Outputs are fresh contiguous tensors with x's shape and dtype. Updates run in
/// index order, so duplicates are deterministic (scatter: the last one wins, which PyTorch leaves
/// unspecified; the reductions combine them all). The in-place forms are recorded through
/// Note [In-place ops] (ops/inplace.h).

#include <string_view>

#include "core/scalar.h"
#include "core/tensor.h"

namespace strata {

/// x with src's elements written at `index` along `dim`. Backward: to x, the gradient with the
/// written elements zeroed; to src, the gradient gathered at index.
Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);
/// x with `value` (converted to x's dtype) written at `index` along `dim`.
Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, Scalar value);
Tensor& scatter_(Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);
Tensor& scatter_(Tensor& x, int64_t dim, const Tensor& index, Scalar value);

/// x with src's elements added at `index` along `dim`. Backward: the gradient to x, the gradient
/// gathered at index to src.
Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);
Tensor& scatter_add_(Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);

/// x with src's elements reduced into it at `index` along `dim`: `reduce` is "sum", "prod",
/// "mean", "amax" or "amin"; with include_self = false, x's elements at the scattered positions are
/// left out of the reduction (positions nothing is scattered to keep x's value). "mean" of integers
/// rounds toward -inf (PyTorch's rule). Backward (floating): sum and mean spread the gradient (mean
/// divided by the count); prod gives each factor the product of the others (exact with zeros);
/// amax and amin split it evenly between the elements equal to the result.
Tensor scatter_reduce(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src, std::string_view reduce,
                      bool include_self = true);

}  // namespace strata
