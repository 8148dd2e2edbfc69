#pragma once
/// @file
/// Element types and bfloat16.

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

/// Element type of a tensor.
enum class DType : uint8_t { f32, f64, bf16, i32, i64, u8, boolean };

inline constexpr int kNumDTypes = 7;

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
  }
  return 0;
}

/// "f32", "f64", "bf16", "i32", "i64", "u8", "bool".
std::string_view dtype_name(DType t);
/// Parses a dtype name (also accepts PyTorch/NumPy spellings: float32, float, double, bfloat16,
/// int32, int, int64, long, uint8, bool). Throws strata::Error on an unknown name.
DType dtype_from_name(std::string_view name);
std::ostream& operator<<(std::ostream& os, DType t);

constexpr bool is_floating(DType t) { return t == DType::f32 || t == DType::f64 || t == DType::bf16; }
constexpr bool is_integral(DType t, bool include_bool = false) {
  return t == DType::i32 || t == DType::i64 || t == DType::u8 || (include_bool && t == DType::boolean);
}

/// The C++ type stored for each dtype (bool is stored as one byte, `bool`).
template <DType T> struct DTypeTraits;
template <> struct DTypeTraits<DType::f32> { using type = float; };
template <> struct DTypeTraits<DType::f64> { using type = double; };
template <> struct DTypeTraits<DType::bf16> { using type = BFloat16; };
template <> struct DTypeTraits<DType::i32> { using type = int32_t; };
template <> struct DTypeTraits<DType::i64> { using type = int64_t; };
template <> struct DTypeTraits<DType::u8> { using type = uint8_t; };
template <> struct DTypeTraits<DType::boolean> { using type = bool; };

/// The dtype of a C++ element type.
template <typename T> constexpr DType dtype_of();
template <> constexpr DType dtype_of<float>() { return DType::f32; }
template <> constexpr DType dtype_of<double>() { return DType::f64; }
template <> constexpr DType dtype_of<BFloat16>() { return DType::bf16; }
template <> constexpr DType dtype_of<int32_t>() { return DType::i32; }
template <> constexpr DType dtype_of<int64_t>() { return DType::i64; }
template <> constexpr DType dtype_of<uint8_t>() { return DType::u8; }
template <> constexpr DType dtype_of<bool>() { return DType::boolean; }

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
  } else if constexpr (std::is_same_v<To, BFloat16>) {
    return BFloat16(static_cast<float>(x));
  } else if constexpr (std::is_integral_v<To> &&
                       (std::is_floating_point_v<From> || std::is_same_v<From, BFloat16>)) {
    const double d = static_cast<double>(x);
    constexpr double lo = static_cast<double>(std::numeric_limits<To>::min());
    constexpr double hi = static_cast<double>(std::numeric_limits<To>::max());
    if (d != d) return To{0};
    if (d <= lo) return std::numeric_limits<To>::min();
    if (d >= hi) return std::numeric_limits<To>::max();
    return static_cast<To>(d);
  } else if constexpr (std::is_same_v<From, BFloat16>) {
    return static_cast<To>(static_cast<float>(x));
  } else {
    return static_cast<To>(x);
  }
}

}  // namespace strata
