#pragma once
/// @file
/// Element-wise unary ops (differentiable; f32 and f64; any strides; outputs contiguous).

#include "core/tensor.h"

namespace strata {

/// max(x, 0). Backward: grad where the output is positive.
Tensor relu(const Tensor& x);

}  // namespace strata
