#pragma once
/// @file
/// Operators on tensors, so C++ code reads like math: `loss = (y - t) * (y - t)`, `(pred == y)`,
/// `(a > 0) & (b < 1)`. Each is the op of ops/binary.h, ops/comparison.h or ops/unary.h
/// (broadcasting and type promotion included); numbers are Scalars, so `t + 1` and `t + 1.0` follow
/// PyTorch's rules for an integer and a floating number.

#include "core/scalar.h"
#include "core/tensor.h"
#include "ops/binary.h"
#include "ops/comparison.h"
#include "ops/unary.h"

namespace strata {

inline Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
inline Tensor operator+(const Tensor& a, Scalar s) { return add(a, s); }
inline Tensor operator+(Scalar s, const Tensor& a) { return add(a, s); }

inline Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
inline Tensor operator-(const Tensor& a, Scalar s) { return sub(a, s); }
inline Tensor operator-(Scalar s, const Tensor& a) { return sub(s, a); }

inline Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
inline Tensor operator*(const Tensor& a, Scalar s) { return mul(a, s); }
inline Tensor operator*(Scalar s, const Tensor& a) { return mul(a, s); }

inline Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
inline Tensor operator/(const Tensor& a, Scalar s) { return div(a, s); }
inline Tensor operator/(Scalar s, const Tensor& a) { return div(s, a); }

/// Python's %: remainder with the sign of the divisor.
inline Tensor operator%(const Tensor& a, const Tensor& b) { return remainder(a, b); }
inline Tensor operator%(const Tensor& a, Scalar s) { return remainder(a, s); }

/// -a (refused for bool, as in PyTorch).
inline Tensor operator-(const Tensor& a) { return neg(a); }

inline Tensor operator==(const Tensor& a, const Tensor& b) { return eq(a, b); }
inline Tensor operator==(const Tensor& a, Scalar s) { return eq(a, s); }
inline Tensor operator!=(const Tensor& a, const Tensor& b) { return ne(a, b); }
inline Tensor operator!=(const Tensor& a, Scalar s) { return ne(a, s); }
inline Tensor operator<(const Tensor& a, const Tensor& b) { return lt(a, b); }
inline Tensor operator<(const Tensor& a, Scalar s) { return lt(a, s); }
inline Tensor operator<=(const Tensor& a, const Tensor& b) { return le(a, b); }
inline Tensor operator<=(const Tensor& a, Scalar s) { return le(a, s); }
inline Tensor operator>(const Tensor& a, const Tensor& b) { return gt(a, b); }
inline Tensor operator>(const Tensor& a, Scalar s) { return gt(a, s); }
inline Tensor operator>=(const Tensor& a, const Tensor& b) { return ge(a, b); }
inline Tensor operator>=(const Tensor& a, Scalar s) { return ge(a, s); }

/// Bitwise on integers, logical on bool (PyTorch's &, |, ^, ~).
inline Tensor operator&(const Tensor& a, const Tensor& b) { return bitwise_and(a, b); }
inline Tensor operator&(const Tensor& a, Scalar s) { return bitwise_and(a, s); }
inline Tensor operator|(const Tensor& a, const Tensor& b) { return bitwise_or(a, b); }
inline Tensor operator|(const Tensor& a, Scalar s) { return bitwise_or(a, s); }
inline Tensor operator^(const Tensor& a, const Tensor& b) { return bitwise_xor(a, b); }
inline Tensor operator^(const Tensor& a, Scalar s) { return bitwise_xor(a, s); }
inline Tensor operator~(const Tensor& a) { return bitwise_not(a); }

}  // namespace strata
