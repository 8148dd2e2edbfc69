#pragma once
/// @file
/// Comparisons, logical and bitwise ops (PyTorch's eq/ne/lt/le/gt/ge, logical_*, bitwise_*), with
/// NumPy broadcasting. Comparisons promote their operands to the result type (Note [Type
/// promotion] in core/type_promotion.h) and compare there; they return bool tensors (NaN compares
/// unequal to everything, ne true). Logical ops take any dtypes (non-zero is true, NaN too) and
/// return bool. Bitwise ops take integer and bool tensors only, promote them and return the result
/// type (on bool they are the logical ops). None is differentiable: outputs never require grad.

#include "core/scalar.h"
#include "core/tensor.h"

namespace strata {

Tensor eq(const Tensor& a, const Tensor& b);
Tensor eq(const Tensor& a, Scalar b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, Scalar b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, Scalar b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, Scalar b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, Scalar b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, Scalar b);

Tensor logical_and(const Tensor& a, const Tensor& b);
Tensor logical_or(const Tensor& a, const Tensor& b);
Tensor logical_xor(const Tensor& a, const Tensor& b);
Tensor logical_not(const Tensor& a);

Tensor bitwise_and(const Tensor& a, const Tensor& b);
Tensor bitwise_and(const Tensor& a, Scalar b);
Tensor bitwise_or(const Tensor& a, const Tensor& b);
Tensor bitwise_or(const Tensor& a, Scalar b);
Tensor bitwise_xor(const Tensor& a, const Tensor& b);
Tensor bitwise_xor(const Tensor& a, Scalar b);
/// ~a: bitwise not of integers, logical not of bool; floating tensors are refused.
Tensor bitwise_not(const Tensor& a);

}  // namespace strata
