#include "core/dtype.h"

#include <string>

#include "core/text.h"

namespace strata {

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "f32";
    case DType::f64: return "f64";
    case DType::bf16: return "bf16";
    case DType::i32: return "i32";
    case DType::i64: return "i64";
    case DType::u8: return "u8";
    case DType::boolean: return "bool";
    case DType::f16: return "f16";
  }
  return "unknown";
}

DType dtype_from_name(std::string_view name) {
  struct Alias {
    std::string_view name;
    DType dtype;
  };
  static constexpr Alias kAliases[] = {
      {"f32", DType::f32},      {"float32", DType::f32}, {"float", DType::f32},   {"f64", DType::f64},
      {"float64", DType::f64},  {"double", DType::f64},  {"bf16", DType::bf16},   {"bfloat16", DType::bf16},
      {"i32", DType::i32},      {"int32", DType::i32},   {"int", DType::i32},     {"i64", DType::i64},
      {"int64", DType::i64},    {"long", DType::i64},    {"u8", DType::u8},       {"uint8", DType::u8},
      {"bool", DType::boolean}, {"f16", DType::f16},     {"float16", DType::f16}, {"half", DType::f16},
  };
  for (const auto& a : kAliases)
    if (a.name == name) return a.dtype;
  STRATA_FAIL("dtype_from_name: unknown dtype ", quote_field(name),
              " (expected one of f32, f64, bf16, f16, i32, i64, u8, bool)");
}

std::ostream& operator<<(std::ostream& os, DType t) { return os << dtype_name(t); }

}  // namespace strata
