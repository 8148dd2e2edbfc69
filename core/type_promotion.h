#pragma once
/// @file
/// PyTorch's type promotion: the dtype an op computes and returns when its operands' dtypes
/// differ (torch.promote_types, torch.result_type, torch.can_cast).
///
/// Note [Type promotion]
/// Dtypes fall in three categories, bool < integer (u8, i32, i64) < floating (bf16, f16, f32,
/// f64). promote_types(a, b) is the smallest dtype both convert to without leaving the higher
/// category: within integers and within floats the wider wins (u8 with i32 gives i32), across
/// categories the higher one's dtype wins (i64 with f16 gives f16), and bf16 with f16 gives f32.
/// result_type() of an op's operands looks at three groups, strongest first: tensors with dims,
/// zero-dim tensors, and plain numbers (Scalar; a floating number counts as the default dtype
/// f32, an integer as i64). Each group's dtypes are promoted together; a weaker group changes the
/// result only when it is of a higher category (`i32 tensor + 1.5` is f32, `f32 tensor + 0-dim
/// f64 tensor` stays f32, `u8 tensor + 1000` stays u8 and wraps, `bool tensor + 1` is i64).
/// Ops convert their operands to the result type and compute in it; true division of integers
/// computes in the default float dtype. can_cast() is the rule in-place ops apply to write a
/// result into an existing tensor: never floating into integer or bool, never non-bool into bool.

#include <initializer_list>

#include "core/dtype.h"
#include "core/scalar.h"
#include "core/tensor.h"

namespace strata {

/// The dtype a floating Python number takes (PyTorch's default dtype).
inline constexpr DType kDefaultFloat = DType::f32;

/// The dtype both convert to (torch.promote_types).
DType promote_types(DType a, DType b);

/// True when a value of `from` may be written into a tensor of `to` (torch.can_cast).
bool can_cast(DType from, DType to);

/// The result dtype of an op over tensors and numbers (PyTorch's ResultTypeState).
class ResultType {
 public:
  ResultType& add(const Tensor& t);
  ResultType& add(const Scalar& s);
  /// The result; throws if nothing was added.
  DType get() const;

 private:
  bool has_dim_ = false, has_zero_dim_ = false, has_number_ = false;
  DType dim_ = DType::boolean, zero_dim_ = DType::boolean, number_ = DType::boolean;
};

/// torch.result_type for two operands.
DType result_type(const Tensor& a, const Tensor& b);
DType result_type(const Tensor& a, const Scalar& b);
DType result_type(const Scalar& a, const Tensor& b);

}  // namespace strata
