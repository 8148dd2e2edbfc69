#pragma once
/// @file
/// Element-wise unary ops (differentiable; f32 and f64 unless noted; any strides; outputs
/// contiguous). Names and semantics follow PyTorch (`torch.*` / `torch.nn.functional.*`).

#include <optional>

#include "core/rng.h"
#include "core/scalar.h"
#include "core/tensor.h"

namespace strata {

/// max(x, 0). Backward: grad where the output is positive.
Tensor relu(const Tensor& x);

/// x where x > 0, negative_slope * x elsewhere. Backward: grad, or negative_slope * grad where x <= 0.
Tensor leaky_relu(const Tensor& x, double negative_slope = 0.01);

/// 1 / (1 + e^-x). Backward: grad * y * (1 - y).
Tensor sigmoid(const Tensor& x);

/// Hyperbolic tangent. Backward: grad * (1 - y^2).
Tensor tanh(const Tensor& x);

/// Gaussian error linear unit: x * Φ(x) = 0.5 x (1 + erf(x / √2)) by default; with
/// `tanh_approximation` (PyTorch's approximate="tanh") 0.5 x (1 + tanh(√(2/π) (x + 0.044715 x³))).
Tensor gelu(const Tensor& x, bool tanh_approximation = false);

/// Sigmoid linear unit x · sigmoid(x) (torch.nn.functional.silu). Backward:
/// grad · s · (1 + x · (1 - s)) with s = sigmoid(x).
Tensor silu(const Tensor& x);
/// e^x.
Tensor exp(const Tensor& x);

/// Natural logarithm (log 0 = -inf, log of a negative value = NaN, like PyTorch).
Tensor log(const Tensor& x);

/// Square root (NaN for negative values, like PyTorch).
Tensor sqrt(const Tensor& x);

/// x^exponent in the result type of x and the number (Note [Type promotion] in
/// core/type_promotion.h): an integer tensor to an integer power stays integer (a negative integer
/// power is an error, as in PyTorch), to a floating power it computes in f32; bf16 and f16 compute
/// in f32. Backward: grad * exponent * x^(exponent - 1) (0 where exponent == 0).
Tensor pow(const Tensor& x, Scalar exponent);

/// x^exponent element-wise, with NumPy broadcasting and type promotion of x and exponent. Integer
/// results follow PyTorch: a negative exponent gives 0 except for bases 1 and -1. Differentiable in
/// both; d/d exponent = y * log(x) (0 where x == 0 and exponent >= 0, as PyTorch).
Tensor pow(const Tensor& x, const Tensor& exponent);
/// base^exponent for a number base (torch.pow(number, tensor)), in their result type.
Tensor pow(Scalar base, const Tensor& exponent);

/// -x, every dtype but bool (PyTorch refuses negating a mask); integers wrap (-INT_MIN is INT_MIN).
/// Backward: -grad.
Tensor neg(const Tensor& x);

/// |x|, every dtype but bool; integers wrap (|INT_MIN| is INT_MIN, as in PyTorch). Backward: grad *
/// sign(x) (0 at 0 and at NaN, PyTorch's rule).
Tensor abs(const Tensor& x);

/// min(max(x, min), max); at least one bound must be given. Like PyTorch, min > max is allowed
/// and then every element becomes `max`. A NaN element stays NaN; a NaN bound is an error (PyTorch
/// would return NaN everywhere). Backward: grad where min <= x <= max (so 0 everywhere when
/// min > max), PyTorch's rule.
Tensor clamp(const Tensor& x, std::optional<double> min, std::optional<double> max);

/// Dropout (torch.nn.functional.dropout): while `training`, zeroes each element with probability
/// `p` and scales the kept ones by 1 / (1 - p). p must lie in [0, 1]; p == 1 gives zeros. When not
/// training or p == 0 the result is a copy of x. The mask is drawn from `gen` (default_generator()
/// when null) through Philox: element i uses word i % 4 of the (i / 4)-th reserved block, so the
/// result depends only on the seed and the generator's offset, never on the thread count. The
/// backward pass reuses the saved mask.
Tensor dropout(const Tensor& x, double p, bool training, Generator* gen = nullptr);

}  // namespace strata
