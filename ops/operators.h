#pragma once
/// @file
/// Arithmetic operators on tensors, so C++ code reads like math: `loss = (y - t) * (y - t)`.
/// Each is the differentiable op of ops/binary.h (broadcasting, same-dtype rules included).

#include "core/tensor.h"
#include "ops/binary.h"

namespace strata {

inline Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
inline Tensor operator+(const Tensor& a, double s) { return add(a, s); }
inline Tensor operator+(double s, const Tensor& a) { return add(a, s); }

inline Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
inline Tensor operator-(const Tensor& a, double s) { return sub(a, s); }
inline Tensor operator-(double s, const Tensor& a) { return sub(s, a); }

inline Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
inline Tensor operator*(const Tensor& a, double s) { return mul(a, s); }
inline Tensor operator*(double s, const Tensor& a) { return mul(a, s); }

inline Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
inline Tensor operator/(const Tensor& a, double s) { return div(a, s); }
inline Tensor operator/(double s, const Tensor& a) { return div(s, a); }

/// -a (as a * -1).
inline Tensor operator-(const Tensor& a) { return mul(a, -1.0); }

}  // namespace strata
