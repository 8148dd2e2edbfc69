#include "core/finite.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <sstream>

#include "core/pin_set.h"

namespace strata {

namespace {

/// f(value as double, row-major index) over a contiguous copy of `t`'s floating elements; f returns
/// false to stop.
template <typename F>
void for_each_float(const Tensor& t, F f) {
  if (!t.defined() || !is_floating(t.dtype()) || t.numel() == 0) return;
  const Tensor c = t.contiguous();
  PinSet pins;
  pins.add(c, AccessMode::Read);
  pins.acquire();
  const int64_t n = c.numel();
  auto scan = [&](auto tag) {
    using T = decltype(tag);
    const T* p = c.data<T>();
    for (int64_t i = 0; i < n; ++i)
      if (!f(static_cast<double>(static_cast<float>(p[i])), i)) return;
  };
  switch (c.dtype()) {
    case DType::f32: scan(float{}); break;
    case DType::f64: {
      const double* p = c.data<double>();
      for (int64_t i = 0; i < n; ++i)
        if (!f(p[i], i)) return;
      break;
    }
    case DType::bf16: scan(BFloat16{}); break;
    case DType::f16: scan(Half{}); break;
    default: break;
  }
}

}  // namespace

std::string NonFinite::describe() const {
  std::ostringstream os;
  os << nan << " NaN and " << inf << " inf of " << numel << " elements";
  if (any()) os << ", the first at element " << first << " (" << first_value << ")";
  return os.str();
}

NonFinite find_non_finite(const Tensor& t) {
  NonFinite r;
  r.numel = t.defined() ? t.numel() : 0;
  for_each_float(t, [&](double v, int64_t i) {
    if (std::isfinite(v)) return true;
    if (std::isnan(v))
      ++r.nan;
    else
      ++r.inf;
    if (r.first < 0) r.first = i, r.first_value = v;
    return true;
  });
  return r;
}

namespace {

/// No element of p[0, n) has an all-ones exponent (NaN or ±inf): an integer OR over blocks, which
/// vectorizes, stopping after the first block that holds one.
template <typename Bits, Bits kExponent>
bool exponents_finite(const void* data, int64_t n) {
  const Bits* p = static_cast<const Bits*>(data);
  constexpr int64_t kBlock = 4096;
  for (int64_t b = 0; b < n; b += kBlock) {
    const int64_t e = std::min(n, b + kBlock);
    unsigned bad = 0;
    for (int64_t i = b; i < e; ++i) bad |= static_cast<unsigned>((p[i] & kExponent) == kExponent);
    if (bad != 0) return false;
  }
  return true;
}

}  // namespace

bool all_finite(const Tensor& t) {
  if (!t.defined() || !is_floating(t.dtype()) || t.numel() == 0) return true;
  const Tensor c = t.contiguous();
  PinSet pins;
  pins.add(c, AccessMode::Read);
  pins.acquire();
  switch (c.dtype()) {
    case DType::f32: return exponents_finite<uint32_t, 0x7f800000u>(c.data_ptr(), c.numel());
    case DType::f64: return exponents_finite<uint64_t, 0x7ff0000000000000ull>(c.data_ptr(), c.numel());
    case DType::bf16: return exponents_finite<uint16_t, 0x7f80u>(c.data_ptr(), c.numel());
    case DType::f16: return exponents_finite<uint16_t, 0x7c00u>(c.data_ptr(), c.numel());
    default: return true;
  }
}

}  // namespace strata
