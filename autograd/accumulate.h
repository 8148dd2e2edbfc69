#pragma once
/// @file
/// The two additions the engine needs (summing gradients that meet at one input, and adding into a
/// leaf's `.grad`), here so autograd does not depend on ops/.

#include "core/tensor.h"

namespace strata::autograd::detail {

/// a + b for same-shape, same-dtype floating tensors (any strides); a new contiguous tensor.
Tensor sum_gradients(const Tensor& a, const Tensor& b);
/// acc += g in place (same shape and dtype); bumps acc's version.
void accumulate_into(const Tensor& acc, const Tensor& g);

}  // namespace strata::autograd::detail
