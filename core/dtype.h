#pragma once
/// @file
/// Element types, bfloat16 and float16.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <ostream>
#include <string_view>
#include <type_traits>

#include "core/error.h"

namespace strata {

/// bfloat16: the upper 16 bits of an IEEE float. Conversion from float rounds to nearest even and
/// keeps NaN a NaN.
struct BFloat16 {
  uint16_t bits = 0;

  BFloat16() = default;
  BFloat16(float f) : bits(round_from_float(f)) {}  // NOLINT: implicit like a float type
  operator float() const {                          // NOLINT
    uint32_t u = static_cast<uint32_t>(bits) << 16;
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
  }
  static BFloat16 from_bits(uint16_t b) {
    BFloat16 x;
    x.bits = b;
    return x;
  }
  static uint16_t round_from_float(float f) {
    uint32_t u;
    std::memcpy(&u, &f, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);  // quiet NaN
    const uint32_t rounding_bias = 0x7fffu + ((u >> 16) & 1u);
    return static_cast<uint16_t>((u + rounding_bias) >> 16);
  }
};

/// IEEE 754 binary16 (PyTorch's float16 / half): 1 sign, 5 exponent and 10 mantissa bits.
/// Conversion from float rounds to nearest even (values from 65520 up become inf; values below the
/// smallest subnormal round to ±0) and keeps NaN a NaN; to float is exact. Arithmetic goes
/// through float, as PyTorch's CPU kernels compute half values.
struct Half {
  uint16_t bits = 0;

  Half() = default;
  Half(float f) : bits(round_from_float(f)) {}       // NOLINT: implicit like a float type
  operator float() const { return to_float(bits); }  // NOLINT
  static Half from_bits(uint16_t b) {
    Half x;
    x.bits = b;
    return x;
  }
  static uint16_t round_from_float(float f) {
    uint32_t u;
    std::memcpy(&u, &f, sizeof u);
    const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return sign | 0x7e00u;   // NaN: a quiet NaN
    if (a >= 0x477ff000u) return sign | 0x7c00u;  // >= 65520 (or inf): inf
    if (a < 0x38800000u) {
      // Below 2^-14: a subnormal half (or zero). Adding 0.5f, whose ulp is 2^-24 (the subnormal
      // step), rounds to nearest even; the low bits of the sum are the half's bits (a carry into
      // 0x400 is the smallest normal, also right).
      float mag;
      std::memcpy(&mag, &a, sizeof mag);
      const float sum = mag + 0.5f;
      uint32_t s;
      std::memcpy(&s, &sum, sizeof s);
      return sign | static_cast<uint16_t>(s - 0x3f000000u);
    }
    // Normal: rebias the exponent (127 -> 15) and round the 13 dropped bits to nearest even.
    a += 0xc8000fffu + ((a >> 13) & 1u);
    return sign | static_cast<uint16_t>(a >> 13);
  }
  static float to_float(uint16_t h) {
    const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
    const uint32_t exponent = (h >> 10) & 0x1fu, mantissa = h & 0x3ffu;
    uint32_t u;
    if (exponent == 0x1f) {
      u = sign | 0x7f800000u | (mantissa << 13);  // inf, NaN
    } else if (exponent == 0) {
      const float mag = static_cast<float>(mantissa) * 5.9604644775390625e-8f;  // 2^-24
      return sign != 0 ? -mag : mag;
    } else {
      u = sign | ((exponent + 112u) << 23) | (mantissa << 13);
    }
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
  }
};

/// Element type of a tensor. (f16 comes last so that the numbers stored in files stay valid.)
enum class DType : uint8_t { f32, f64, bf16, i32, i64, u8, boolean, f16 };

inline constexpr int kNumDTypes = 8;

/// Bytes per element.
constexpr std::size_t itemsize(DType t) {
  switch (t) {
    case DType::f32: return 4;
    case DType::f64: return 8;
    case DType::bf16: return 2;
    case DType::i32: return 4;
    case DType::i64: return 8;
    case DType::u8: return 1;
    case DType::boolean: return 1;
    case DType::f16: return 2;
  }
  return 0;
}

/// "f32", "f64", "bf16", "i32", "i64", "u8", "bool", "f16".
std::string_view dtype_name(DType t);
/// Parses a dtype name (also accepts PyTorch/NumPy spellings: float32, float, double, bfloat16,
/// float16, half, int32, int, int64, long, uint8, bool). Throws strata::Error on an unknown name.
DType dtype_from_name(std::string_view name);
std::ostream& operator<<(std::ostream& os, DType t);

constexpr bool is_floating(DType t) {
  return t == DType::f32 || t == DType::f64 || t == DType::bf16 || t == DType::f16;
}
/// The 16-bit floating dtypes, stored narrow and computed in f32.
constexpr bool is_reduced_float(DType t) { return t == DType::bf16 || t == DType::f16; }
constexpr bool is_integral(DType t, bool include_bool = false) {
  return t == DType::i32 || t == DType::i64 || t == DType::u8 || (include_bool && t == DType::boolean);
}

/// The C++ type stored for each dtype (bool is stored as one byte, `bool`).
template <DType T>
struct DTypeTraits;
template <>
struct DTypeTraits<DType::f32> {
  using type = float;
};
template <>
struct DTypeTraits<DType::f64> {
  using type = double;
};
template <>
struct DTypeTraits<DType::bf16> {
  using type = BFloat16;
};
template <>
struct DTypeTraits<DType::i32> {
  using type = int32_t;
};
template <>
struct DTypeTraits<DType::i64> {
  using type = int64_t;
};
template <>
struct DTypeTraits<DType::u8> {
  using type = uint8_t;
};
template <>
struct DTypeTraits<DType::boolean> {
  using type = bool;
};
template <>
struct DTypeTraits<DType::f16> {
  using type = Half;
};

/// The dtype of a C++ element type.
template <typename T>
constexpr DType dtype_of();
template <>
constexpr DType dtype_of<float>() {
  return DType::f32;
}
template <>
constexpr DType dtype_of<double>() {
  return DType::f64;
}
template <>
constexpr DType dtype_of<BFloat16>() {
  return DType::bf16;
}
template <>
constexpr DType dtype_of<int32_t>() {
  return DType::i32;
}
template <>
constexpr DType dtype_of<int64_t>() {
  return DType::i64;
}
template <>
constexpr DType dtype_of<uint8_t>() {
  return DType::u8;
}
template <>
constexpr DType dtype_of<bool>() {
  return DType::boolean;
}
template <>
constexpr DType dtype_of<Half>() {
  return DType::f16;
}

/// True for the 16-bit float element types (BFloat16, Half).
template <typename T>
inline constexpr bool is_reduced_float_v = std::is_same_v<T, BFloat16> || std::is_same_v<T, Half>;
/// The type an element of type T is computed in: float for the 16-bit floats, T otherwise.
template <typename T>
using compute_type_t = std::conditional_t<is_reduced_float_v<T>, float, T>;

/// Calls `fn(T{})` with T the C++ element type of `t` (a value of that type as a tag).
template <typename Fn>
decltype(auto) dispatch_dtype(DType t, Fn&& fn) {
  switch (t) {
    case DType::f32: return fn(float{});
    case DType::f64: return fn(double{});
    case DType::bf16: return fn(BFloat16{});
    case DType::i32: return fn(int32_t{});
    case DType::i64: return fn(int64_t{});
    case DType::u8: return fn(uint8_t{});
    case DType::boolean: return fn(bool{});
    case DType::f16: return fn(Half{});
  }
  STRATA_ASSERT(false, "unknown dtype ", static_cast<int>(t));
}

/// Converts between element types with C++/PyTorch semantics: to bool is `x != 0`, float to
/// integer truncates toward zero (out-of-range values are undefined in C++; Strata saturates
/// instead, and NaN becomes 0).
template <typename To, typename From>
inline To convert_element(From x) {
  if constexpr (std::is_same_v<To, From>) {
    return x;
  } else if constexpr (std::is_same_v<To, bool>) {
    return static_cast<double>(x) != 0.0;
  } else if constexpr (is_reduced_float_v<To>) {
    return To(static_cast<float>(x));
  } else if constexpr (std::is_integral_v<To> && (std::is_floating_point_v<From> || is_reduced_float_v<From>)) {
    const double d = static_cast<double>(x);
    constexpr double lo = static_cast<double>(std::numeric_limits<To>::min());
    constexpr double hi = static_cast<double>(std::numeric_limits<To>::max());
    if (d != d) return To{0};
    if (d <= lo) return std::numeric_limits<To>::min();
    if (d >= hi) return std::numeric_limits<To>::max();
    return static_cast<To>(d);
  } else if constexpr (is_reduced_float_v<From>) {
    return static_cast<To>(static_cast<float>(x));
  } else {
    return static_cast<To>(x);
  }
}

}  // namespace strata
