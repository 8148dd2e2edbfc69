#pragma once
/// @file
/// Reductions (differentiable; f32 and f64; any strides). `dims` may be negative (counting from the
/// end); repeating a dim is an error; an empty `dims` list reduces every dim (like PyTorch). With
/// `keepdim` the reduced dims stay as size 1. Sums accumulate in f64 (also for f32 inputs), so long
/// f32 sums are accurate; results do not depend on the thread count.

#include "core/tensor.h"

namespace strata {

/// Sum of all elements (a 0-D tensor).
Tensor sum(const Tensor& x);
/// Sum over `dims`.
Tensor sum(const Tensor& x, IntArrayRef dims, bool keepdim = false);

/// Mean of all elements (a 0-D tensor; NaN for an empty tensor, like PyTorch).
Tensor mean(const Tensor& x);
/// Mean over `dims`.
Tensor mean(const Tensor& x, IntArrayRef dims, bool keepdim = false);

/// Maximum over `dims` (NaN propagates). Backward: the gradient goes to the elements equal to the
/// maximum, split evenly among ties (PyTorch's amax rule). Reducing an empty dim is an error.
Tensor amax(const Tensor& x, IntArrayRef dims, bool keepdim = false);

/// Maximum of all elements (a 0-D tensor), torch.max(x); gradient split evenly among ties.
Tensor max(const Tensor& x);

}  // namespace strata
