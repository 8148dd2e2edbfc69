#pragma once
/// @file
/// Scalar: a plain number operand (`t + 1`, `t * 0.5`, `t == true`) with its kind, as PyTorch's
/// c10::Scalar; the kind decides the result dtype (Note [Type promotion] in core/type_promotion.h).

#include <cstdint>
#include <ostream>
#include <type_traits>

#include "core/dtype.h"

namespace strata {

/// A bool, an integer (held as int64) or a floating value (held as double). Implicit from every
/// C++ arithmetic type, so `add(t, 1)` is an integer operand and `add(t, 1.0)` a floating one.
class Scalar {
 public:
  enum class Kind : uint8_t { Bool, Int, Float };

  template <typename T, std::enable_if_t<std::is_arithmetic_v<T>, int> = 0>
  Scalar(T v) {  // NOLINT: implicit, like a number
    if constexpr (std::is_same_v<T, bool>) {
      kind_ = Kind::Bool;
      i_ = v ? 1 : 0;
    } else if constexpr (std::is_integral_v<T>) {
      kind_ = Kind::Int;
      i_ = static_cast<int64_t>(v);
    } else {
      kind_ = Kind::Float;
      d_ = static_cast<double>(v);
    }
  }

  Kind kind() const { return kind_; }
  bool is_floating() const { return kind_ == Kind::Float; }
  bool is_integral() const { return kind_ == Kind::Int; }
  bool is_bool() const { return kind_ == Kind::Bool; }
  /// The dtype PyTorch gives the number as a tensor: bool, i64 or f64.
  DType dtype() const { return kind_ == Kind::Float ? DType::f64 : kind_ == Kind::Int ? DType::i64 : DType::boolean; }

  /// The value converted to the element type T (convert_element's rules).
  template <typename T>
  T to() const {
    if (kind_ == Kind::Float) return convert_element<T>(d_);
    if (kind_ == Kind::Bool) return convert_element<T>(i_ != 0);
    return convert_element<T>(i_);
  }
  double to_double() const { return kind_ == Kind::Float ? d_ : static_cast<double>(i_); }

 private:
  Kind kind_ = Kind::Int;
  int64_t i_ = 0;
  double d_ = 0.0;
};

inline std::ostream& operator<<(std::ostream& os, const Scalar& s) {
  if (s.is_bool()) return os << (s.to<bool>() ? "True" : "False");
  if (s.is_integral()) return os << s.to<int64_t>();
  return os << s.to_double();
}

}  // namespace strata
