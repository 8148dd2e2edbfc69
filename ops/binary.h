#pragma once
/// @file
/// Element-wise binary ops with NumPy broadcasting and PyTorch's type promotion (Note [Type
/// promotion] in core/type_promotion.h): the operands are converted to their result type, which
/// the op computes in and returns (`i32 + f32` is f32, `f32 + f64` f64, `i64 + 1.5` f32). Every
/// dtype is supported where PyTorch supports it (bf16 and f16 compute in f32); integers wrap
/// around on overflow. Outputs are contiguous. Differentiable for floating results; gradients are
/// summed over broadcast dims back to each input's shape and converted back to its dtype.

#include "core/scalar.h"
#include "core/tensor.h"

namespace strata {

/// a + alpha * b. An integral result refuses a floating alpha; bool + bool is logical or.
Tensor add(const Tensor& a, const Tensor& b, Scalar alpha = 1);
/// a + s.
Tensor add(const Tensor& a, Scalar s);

/// a - alpha * b. Refuses bool operands (PyTorch's rule: use logical_xor or logical_not).
Tensor sub(const Tensor& a, const Tensor& b, Scalar alpha = 1);
/// a - s.
Tensor sub(const Tensor& a, Scalar s);
/// s - a (torch.rsub).
Tensor sub(Scalar s, const Tensor& a);

/// a * b (bool * bool is logical and).
Tensor mul(const Tensor& a, const Tensor& b);
/// a * s.
Tensor mul(const Tensor& a, Scalar s);

/// a / b, true division: integer and bool operands compute in the default float dtype (f32).
Tensor div(const Tensor& a, const Tensor& b);
/// a / s.
Tensor div(const Tensor& a, Scalar s);
/// s / a.
Tensor div(Scalar s, const Tensor& a);

/// floor(a / b) (Python's //). Integers: an integer quotient rounded toward -inf; a zero divisor is
/// an error (PyTorch's ZeroDivisionError). Floats: PyTorch's rounding (through fmod, so
/// floor_divide(5.5, 2) is 2), ±inf or NaN for a zero divisor. Bool is refused. Not
/// differentiable: the result requires grad, but backward through it is an error, as in PyTorch.
Tensor floor_divide(const Tensor& a, const Tensor& b);
Tensor floor_divide(const Tensor& a, Scalar s);
Tensor floor_divide(Scalar s, const Tensor& a);

/// a - floor_divide(a, b) * b (Python's %: the sign of the divisor). A zero integer divisor is an
/// error; a zero float divisor gives NaN. Bool is refused. Backward: grad to a, -grad *
/// floor(a / b) to b (PyTorch's rule).
Tensor remainder(const Tensor& a, const Tensor& b);
Tensor remainder(const Tensor& a, Scalar s);
Tensor remainder(Scalar s, const Tensor& a);

/// Element-wise maximum (NaN propagates). Backward: the gradient goes to the larger operand; on
/// ties each gets half (PyTorch's rule).
Tensor maximum(const Tensor& a, const Tensor& b);
/// Element-wise minimum (NaN propagates); the gradient goes to the smaller operand, half each on
/// ties.
Tensor minimum(const Tensor& a, const Tensor& b);

/// cond ? a : b element-wise; `cond` is bool or u8, and cond, a and b broadcast together; a and b
/// are promoted to their result type. Differentiable in a and b.
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
/// where with a number on one side or both, taken as PyTorch takes a Python number (its result
/// type counts it as a number, not as a tensor: where(c, i64 tensor, 1.5) is f32).
Tensor where(const Tensor& cond, const Tensor& a, Scalar b);
Tensor where(const Tensor& cond, Scalar a, const Tensor& b);
Tensor where(const Tensor& cond, Scalar a, Scalar b);

}  // namespace strata
