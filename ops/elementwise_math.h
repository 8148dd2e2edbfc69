#pragma once
/// @file
/// Element-wise math (issue 26 part 4): trigonometric and hyperbolic functions, rounding, sign and
/// the numerically careful variants (expm1, log1p, rsqrt, ...), with PyTorch's names, dtypes and
/// derivatives. Any strides; outputs contiguous.
///
/// Note [Element-wise math dtypes]
/// PyTorch's rules, which every op here follows:
///  - The transcendental ops (sin ... reciprocal, and atan2 after promoting its two operands) give
///    a floating result: integer and bool inputs compute in the default float dtype (f32;
///    torch.sin(int tensor) is f32), bf16 and f16 compute in f32 and round once to their dtype
///    (recorded conversions, so the gradient flows through them), f32 and f64 compute in
///    themselves.
///  - floor, ceil, trunc and round keep integer dtypes (the result is a copy) and refuse bool;
///    round with `decimals` != 0 refuses integers (PyTorch: "not implemented for 'Long'").
///  - sign keeps every dtype (bool included); square keeps integer dtypes (wrapping like integer
///    multiplication) and makes bool i64, as torch.square = torch.pow(x, 2).
/// The rounding ops and sign have a zero gradient (PyTorch's), so they may sit in a graph.

#include "core/tensor.h"

namespace strata {

/// sin(x). Backward: grad * cos(x).
Tensor sin(const Tensor& x);
/// cos(x). Backward: -grad * sin(x).
Tensor cos(const Tensor& x);
/// tan(x). Backward: grad * (1 + tan(x)^2).
Tensor tan(const Tensor& x);
/// arcsin(x) (NaN outside [-1, 1]). Backward: grad / sqrt(1 - x^2).
Tensor asin(const Tensor& x);
/// arccos(x) (NaN outside [-1, 1]). Backward: -grad / sqrt(1 - x^2).
Tensor acos(const Tensor& x);
/// arctan(x). Backward: grad / (1 + x^2).
Tensor atan(const Tensor& x);
/// The angle of the point (other, input) in (-pi, pi], element-wise with broadcasting and type
/// promotion (integers compute in the default float dtype). Backward: grad * other / r^2 for input,
/// -grad * input / r^2 for other, with r^2 = input^2 + other^2.
Tensor atan2(const Tensor& input, const Tensor& other);
/// sinh(x). Backward: grad * cosh(x).
Tensor sinh(const Tensor& x);
/// cosh(x). Backward: grad * sinh(x).
Tensor cosh(const Tensor& x);

/// Rounding towards -inf, +inf and 0. Zero gradient.
Tensor floor(const Tensor& x);
Tensor ceil(const Tensor& x);
Tensor trunc(const Tensor& x);
/// Rounding to the nearest integer, halves to even (torch.round: 2.5 -> 2, -0.5 -> -0). With
/// `decimals` d > 0, nearbyint(x * 10^d) / 10^d; with d < 0, nearbyint(x / 10^-d) * 10^-d (PyTorch's
/// formulas, so round(0.125, decimals=2) is 0.12). Zero gradient.
Tensor round(const Tensor& x, int64_t decimals = 0);
/// -1, 0 or 1 by the sign of x (0 for ±0 and NaN, as PyTorch); bool stays itself. Zero gradient.
Tensor sign(const Tensor& x);

/// e^x - 1, accurate for small x. Backward: grad * (y + 1).
Tensor expm1(const Tensor& x);
/// log(1 + x), accurate for small x. Backward: grad / (1 + x).
Tensor log1p(const Tensor& x);
/// 1 / sqrt(x) (inf at 0, NaN below). Backward: -grad * y^3 / 2.
Tensor rsqrt(const Tensor& x);
/// The error function. Backward: grad * 2 / sqrt(pi) * e^(-x^2).
Tensor erf(const Tensor& x);
/// x * x (see the dtype rules above). Backward: 2 * grad * x.
Tensor square(const Tensor& x);
/// 1 / x (inf at 0). Backward: -grad * y^2.
Tensor reciprocal(const Tensor& x);

}  // namespace strata
