#pragma once
/// @file
/// Reductions (differentiable for floating inputs; every dtype where PyTorch has one; any strides).
/// `dims` may be negative (counting from the end); repeating a dim is an error; an empty `dims`
/// list reduces every dim (like PyTorch). With `keepdim` the reduced dims stay as size 1. Sums
/// accumulate in f64 (also for f32 inputs), so long f32 sums are accurate; integer and bool inputs
/// sum (and multiply) into i64, wrapping around like PyTorch's; bf16 and f16 compute in f32 and
/// return their own dtype. Results do not depend on the thread count.

#include "core/tensor.h"

namespace strata {

/// Sum of all elements (a 0-D tensor).
Tensor sum(const Tensor& x);
/// Sum over `dims`.
Tensor sum(const Tensor& x, IntArrayRef dims, bool keepdim = false);

/// Mean of all elements (a 0-D tensor; NaN for an empty tensor, like PyTorch). Floating inputs
/// only (PyTorch: "could not infer output dtype" for integers).
Tensor mean(const Tensor& x);
/// Mean over `dims`.
Tensor mean(const Tensor& x, IntArrayRef dims, bool keepdim = false);

/// Maximum over `dims` (NaN propagates). Backward: the gradient goes to the elements equal to the
/// maximum, split evenly among ties (PyTorch's amax rule). Reducing an empty dim is an error.
Tensor amax(const Tensor& x, IntArrayRef dims, bool keepdim = false);

/// Minimum over `dims`, amax's mirror (NaN propagates; ties split the gradient).
Tensor amin(const Tensor& x, IntArrayRef dims, bool keepdim = false);

/// Maximum of all elements (a 0-D tensor), torch.max(x); gradient split evenly among ties.
/// (max over one dim, with indices, is in ops/index_reduction.h.)
Tensor max(const Tensor& x);
/// Minimum of all elements (a 0-D tensor), torch.min(x).
Tensor min(const Tensor& x);

/// Product of all elements (a 0-D tensor; 1 for an empty tensor). Backward: PyTorch's rule, grad *
/// result / x when the input holds no zero, else grad times the product of the other elements
/// (from prefix and suffix products, exact with zeros).
Tensor prod(const Tensor& x);
/// Product over one dim.
Tensor prod(const Tensor& x, int64_t dim, bool keepdim = false);

/// Whether any element (over `dims`; empty: all) is non-zero (NaN counts as non-zero). Returns
/// bool, or u8 for a u8 input (PyTorch's rule). Not differentiable. any over nothing is false.
Tensor any(const Tensor& x, IntArrayRef dims = {}, bool keepdim = false);
/// Whether every element is non-zero; all over nothing is true.
Tensor all(const Tensor& x, IntArrayRef dims = {}, bool keepdim = false);

}  // namespace strata
