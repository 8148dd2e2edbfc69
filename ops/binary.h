#pragma once
/// @file
/// Element-wise binary ops with NumPy broadcasting (differentiable; f32 and f64; any strides;
/// outputs contiguous). Both tensor operands must have the same floating dtype (mixing f32 and f64
/// is an error: Strata does not promote). Gradients are summed over broadcast dims back to each
/// input's shape.

#include "core/tensor.h"

namespace strata {

/// a + alpha * b.
Tensor add(const Tensor& a, const Tensor& b, double alpha = 1.0);
/// a + s.
Tensor add(const Tensor& a, double s);

/// a - alpha * b.
Tensor sub(const Tensor& a, const Tensor& b, double alpha = 1.0);
/// a - s.
Tensor sub(const Tensor& a, double s);
/// s - a (torch.rsub).
Tensor sub(double s, const Tensor& a);

/// a * b.
Tensor mul(const Tensor& a, const Tensor& b);
/// a * s.
Tensor mul(const Tensor& a, double s);

/// a / b (true division).
Tensor div(const Tensor& a, const Tensor& b);
/// a / s.
Tensor div(const Tensor& a, double s);
/// s / a.
Tensor div(double s, const Tensor& a);

/// Element-wise maximum (NaN propagates). Backward: the gradient goes to the larger operand; on
/// ties each gets half (PyTorch's rule).
Tensor maximum(const Tensor& a, const Tensor& b);

/// cond ? a : b element-wise; `cond` is bool or u8, and cond, a and b broadcast together.
/// Differentiable in a and b.
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);

}  // namespace strata
