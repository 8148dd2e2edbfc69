#pragma once
/// @file
/// Reductions that return indices (PyTorch's argmax, argmin, max(dim), min(dim), topk, sort), for
/// every dtype where PyTorch has them (bf16 and f16 compare in f32). Indices are i64. NaN counts as
/// larger than every number (PyTorch's rule): it is the maximum and, for argmin and min(dim), the
/// minimum too; sort puts it last ascending and first descending. Ties go to the first index;
/// sort and topk are stable (equal values keep their order). The values are differentiable for
/// floating inputs: the gradient goes to the selected elements.

#include <cstdint>
#include <optional>

#include "core/tensor.h"

namespace strata {

/// values and indices (PyTorch's named tuples torch.return_types.max, topk, sort).
struct ValuesIndices {
  Tensor values;
  Tensor indices;
};

/// Index of the maximum over `dim`, or of the flattened input when `dim` is empty (a 0-dim
/// result; with keepdim every dim stays as size 1). bool is refused, as in PyTorch.
Tensor argmax(const Tensor& x, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);
/// Index of the minimum (a NaN is the minimum, PyTorch's rule).
Tensor argmin(const Tensor& x, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);

/// Maximum over `dim` and its index (torch.max(x, dim)). Backward: the gradient goes to the index.
ValuesIndices max(const Tensor& x, int64_t dim, bool keepdim = false);
/// Minimum over `dim` and its index (torch.min(x, dim)).
ValuesIndices min(const Tensor& x, int64_t dim, bool keepdim = false);

/// The k largest (or smallest) elements along `dim` and their indices, sorted (a sorted result is
/// also what sorted=false may return). 0 <= k <= x.size(dim); bool is refused, as in PyTorch.
ValuesIndices topk(const Tensor& x, int64_t k, int64_t dim = -1, bool largest = true, bool sorted = true);

/// x sorted along `dim` (ascending, or descending) and the indices of the sorted elements. Always
/// stable, which is what stable=true asks and a valid result of stable=false.
ValuesIndices sort(const Tensor& x, int64_t dim = -1, bool descending = false);

}  // namespace strata
