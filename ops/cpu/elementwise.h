#pragma once
/// @file
/// The strided element-wise engine shared by the unary, binary and reduction families (internal to
/// ops/), and the vectorizable f32 math those kernels use.
///
/// Note [Element-wise engine]
/// `map1` / `map2` / `map3` compute out[i] = f(in...[i]) where `out` is a fresh contiguous tensor
/// and every input is *broadcast* to out's shape through its strides (stride 0 in broadcast dims;
/// see `broadcast_byte_strides`). They ride on detail::for_each_row (core/strided_loop.h): dims are
/// coalesced, rows run in parallel above a grain. Inside a row every input is classified once:
/// contiguous (inner stride == itemsize), broadcast scalar (inner stride 0) or strided. The common
/// combinations (all contiguous; one operand a scalar; a row-vector operand, which after coalescing
/// is contiguous along the row) run loops with unit-stride pointers that GCC vectorizes; only the
/// rest pay the strided loop. Callers pin every operand before calling.
/// Two things keep those loops vectorized: each row works on a local copy of the functor (captures
/// reached through a reference may alias the output, and a capture loaded only in one arm of a
/// select blocks if-conversion), so wrap functors by value, not `[&]`; and the including .cpp is
/// compiled without trapping math (Note [No trapping math in element-wise kernels] in
/// ops/unary.cpp) — otherwise GCC leaves any loop with a computed select arm scalar.

#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#if defined(__AVX__)
#include <immintrin.h>
#endif

#include "core/strided_loop.h"
#include "core/tensor.h"

namespace strata::ops::cpu {

/// Byte strides of `t` broadcast to `shape` (leading dims and expanded size-1 dims get stride 0).
/// The caller has checked that `t` broadcasts to `shape`.
inline Dims broadcast_byte_strides(const Tensor& t, IntArrayRef shape) {
  const std::size_t rank = shape.size();
  const std::size_t lead = rank - static_cast<std::size_t>(t.dim());
  Dims s(rank, 0);
  for (std::size_t d = 0; d < static_cast<std::size_t>(t.dim()); ++d)
    s[lead + d] = t.size(static_cast<int64_t>(d)) == 1 ? 0 : t.stride(static_cast<int64_t>(d)) * static_cast<int64_t>(t.itemsize());
  return s;
}

/// Default grain (elements per parallel task) for cheap element-wise ops.
inline constexpr int64_t kCheapGrain = 32768;
/// Grain for ops that cost tens of cycles per element (exp, log, tanh, erf, pow, ...).
inline constexpr int64_t kCostlyGrain = 4096;

template <typename T>
inline T load(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

/// out[i] = f(a[i]); `a` broadcasts to out.sizes().
template <typename TO, typename TA, typename F>
void map1(const Tensor& out, const Tensor& a, F f, int64_t grain = kCheapGrain) {
  ::strata::detail::StridedOperands<2> o;
  o.sizes = out.sizes();
  o.strides = {broadcast_byte_strides(out, out.sizes()), broadcast_byte_strides(a, out.sizes())};
  o.base = {static_cast<char*>(out.data_ptr()), static_cast<char*>(a.data_ptr())};
  ::strata::detail::for_each_row<2>(
      o,
      [&](const std::array<char*, 2>& p, const std::array<int64_t, 2>& st, int64_t n) {
        const F fn = f;  // a local copy: its captures live in registers, not behind a pointer that may alias y
        TO* __restrict y = reinterpret_cast<TO*>(p[0]);
        if (st[1] == static_cast<int64_t>(sizeof(TA))) {
          const TA* __restrict x = reinterpret_cast<const TA*>(p[1]);
          for (int64_t i = 0; i < n; ++i) y[i] = fn(x[i]);
        } else if (st[1] == 0) {
          const TO v = fn(*reinterpret_cast<const TA*>(p[1]));
          for (int64_t i = 0; i < n; ++i) y[i] = v;
        } else {
          const char* x = p[1];
          for (int64_t i = 0; i < n; ++i) y[i] = fn(load<TA>(x + i * st[1]));
        }
      },
      grain);
}

/// out[i] = f(a[i], b[i]); `a` and `b` broadcast to out.sizes().
template <typename TO, typename TA, typename TB, typename F>
void map2(const Tensor& out, const Tensor& a, const Tensor& b, F f, int64_t grain = kCheapGrain) {
  ::strata::detail::StridedOperands<3> o;
  o.sizes = out.sizes();
  o.strides = {broadcast_byte_strides(out, out.sizes()), broadcast_byte_strides(a, out.sizes()),
               broadcast_byte_strides(b, out.sizes())};
  o.base = {static_cast<char*>(out.data_ptr()), static_cast<char*>(a.data_ptr()), static_cast<char*>(b.data_ptr())};
  ::strata::detail::for_each_row<3>(
      o,
      [&](const std::array<char*, 3>& p, const std::array<int64_t, 3>& st, int64_t n) {
        const F fn = f;
        TO* __restrict y = reinterpret_cast<TO*>(p[0]);
        const bool ca = st[1] == static_cast<int64_t>(sizeof(TA)), cb = st[2] == static_cast<int64_t>(sizeof(TB));
        const bool za = st[1] == 0, zb = st[2] == 0;
        if (ca && cb) {
          const TA* __restrict x = reinterpret_cast<const TA*>(p[1]);
          const TB* __restrict z = reinterpret_cast<const TB*>(p[2]);
          for (int64_t i = 0; i < n; ++i) y[i] = fn(x[i], z[i]);
        } else if (ca && zb) {
          const TA* __restrict x = reinterpret_cast<const TA*>(p[1]);
          const TB z = *reinterpret_cast<const TB*>(p[2]);
          for (int64_t i = 0; i < n; ++i) y[i] = fn(x[i], z);
        } else if (za && cb) {
          const TA x = *reinterpret_cast<const TA*>(p[1]);
          const TB* __restrict z = reinterpret_cast<const TB*>(p[2]);
          for (int64_t i = 0; i < n; ++i) y[i] = fn(x, z[i]);
        } else {
          for (int64_t i = 0; i < n; ++i) y[i] = fn(load<TA>(p[1] + i * st[1]), load<TB>(p[2] + i * st[2]));
        }
      },
      grain);
}

/// out[i] = f(a[i], b[i], c[i]); all three broadcast to out.sizes().
template <typename TO, typename TA, typename TB, typename TC, typename F>
void map3(const Tensor& out, const Tensor& a, const Tensor& b, const Tensor& c, F f, int64_t grain = kCheapGrain) {
  ::strata::detail::StridedOperands<4> o;
  o.sizes = out.sizes();
  o.strides = {broadcast_byte_strides(out, out.sizes()), broadcast_byte_strides(a, out.sizes()),
               broadcast_byte_strides(b, out.sizes()), broadcast_byte_strides(c, out.sizes())};
  o.base = {static_cast<char*>(out.data_ptr()), static_cast<char*>(a.data_ptr()), static_cast<char*>(b.data_ptr()),
            static_cast<char*>(c.data_ptr())};
  ::strata::detail::for_each_row<4>(
      o,
      [&](const std::array<char*, 4>& p, const std::array<int64_t, 4>& st, int64_t n) {
        const F fn = f;
        TO* __restrict y = reinterpret_cast<TO*>(p[0]);
        if (st[1] == static_cast<int64_t>(sizeof(TA)) && st[2] == static_cast<int64_t>(sizeof(TB)) &&
            st[3] == static_cast<int64_t>(sizeof(TC))) {
          const TA* __restrict x = reinterpret_cast<const TA*>(p[1]);
          const TB* __restrict z = reinterpret_cast<const TB*>(p[2]);
          const TC* __restrict w = reinterpret_cast<const TC*>(p[3]);
          for (int64_t i = 0; i < n; ++i) y[i] = fn(x[i], z[i], w[i]);
        } else {
          for (int64_t i = 0; i < n; ++i)
            y[i] = fn(load<TA>(p[1] + i * st[1]), load<TB>(p[2] + i * st[2]), load<TC>(p[3] + i * st[3]));
        }
      },
      grain);
}

// ---- vectorizable f32 math ------------------------------------------------------------------------
// Branch-free so that loops calling them vectorize: every floating-point operation runs
// unconditionally and only *values* are selected (with the default -ftrapping-math GCC will not
// if-convert a select whose arm computes, e.g. `c ? x * k : x`; write `x * (c ? k : 1)`). Accuracy: exp and log ~1 ulp
// (Cephes' polynomials), tanh ~2 ulp, erfc relative error ~2e-7 (Numerical Recipes' Chebyshev fit, < 1.2e-7 in exact
// arithmetic).

/// e^(hi + lo) for |lo| << |hi|: Cephes expf (Cody-Waite reduction, degree-6 polynomial) with the
/// scale 2^n applied in two halves (correct overflow to inf and gradual underflow to denormals/0).
/// Passing the argument as hi + lo keeps the rounding of a large argument out of the result.
inline float exp_hilo_f32(float hi, float lo) {
  const float x = hi + lo;
  const bool nan = x != x;
  float xc = x > 89.0f ? 89.0f : x;
  xc = xc < -104.0f ? -104.0f : xc;
  xc = nan ? 0.0f : xc;
  float fx = xc * 1.44269504088896341f;
  fx = (fx + 12582912.0f) - 12582912.0f;  // round to nearest (|fx| < 2^22)
  const bool clamped = xc != x;
  float r = (clamped ? xc : hi) - fx * 0.693359375f;
  r = r - fx * -2.12194440e-4f;
  r = r + (clamped ? 0.0f : lo);
  const float z = r * r;
  float y = 1.9875691500e-4f;
  y = y * r + 1.3981999507e-3f;
  y = y * r + 8.3334519073e-3f;
  y = y * r + 4.1665795894e-2f;
  y = y * r + 1.6666665459e-1f;
  y = y * r + 5.0000001201e-1f;
  y = y * z + r + 1.0f;
  const int32_t n = static_cast<int32_t>(fx);
  const int32_t n1 = n >> 1;
  const int32_t n2 = n - n1;
  const float s1 = std::bit_cast<float>((n1 + 127) << 23);
  const float s2 = std::bit_cast<float>((n2 + 127) << 23);
  const float out = (y * s1) * s2;
  return nan ? x : out;
}

/// e^x (~1 ulp): exp_hilo_f32 without the low part (~40% fewer instructions, the hot path of exp,
/// sigmoid and tanh).
inline float exp_f32(float x) {
  const bool nan = x != x;
  float xc = x < -104.0f ? -104.0f : x;
  xc = xc > 89.0f ? 89.0f : xc;
  xc = nan ? 0.0f : xc;
  float fx = xc * 1.44269504088896341f;
  fx = (fx + 12582912.0f) - 12582912.0f;
  float r = xc - fx * 0.693359375f;
  r = r - fx * -2.12194440e-4f;
  const float z = r * r;
  float y = 1.9875691500e-4f;
  y = y * r + 1.3981999507e-3f;
  y = y * r + 8.3334519073e-3f;
  y = y * r + 4.1665795894e-2f;
  y = y * r + 1.6666665459e-1f;
  y = y * r + 5.0000001201e-1f;
  y = y * z + r + 1.0f;
  const int32_t n = static_cast<int32_t>(fx);
  const int32_t n1 = n >> 1;
  const float s1 = std::bit_cast<float>((n1 + 127) << 23);
  const float s2 = std::bit_cast<float>((n - n1 + 127) << 23);
  const float out = (y * s1) * s2;
  return nan ? x : out;
}

/// e^(-x^2 / 2) with x^2 formed exactly (fma), so the result keeps ~1 ulp for large |x|.
inline float exp_neg_half_sq_f32(float x, float extra = 0.0f) {
  const float sq = x * x;
  const float sq_lo = std::fma(x, x, -sq);
  return exp_hilo_f32(-0.5f * sq, -0.5f * sq_lo + extra);
}

/// Natural log: Cephes logf (subnormals rescaled; 0 → -inf, negative → NaN, inf → inf).
inline float log_f32(float x) {
  const bool sub = x < 1.17549435e-38f;
  const float xs = x * (sub ? 8388608.0f : 1.0f);
  const int32_t bits = std::bit_cast<int32_t>(xs);
  int32_t e = ((bits >> 23) & 0xff) - 126;
  e = sub ? e - 23 : e;
  float m = std::bit_cast<float>((bits & 0x007fffff) | 0x3f000000);  // [0.5, 1)
  const bool small = m < 0.707106781186547524f;
  const float fe = static_cast<float>(e) - (small ? 1.0f : 0.0f);
  m = (m + (small ? m : 0.0f)) - 1.0f;
  const float z = m * m;
  float y = 7.0376836292e-2f;
  y = y * m - 1.1514610310e-1f;
  y = y * m + 1.1676998740e-1f;
  y = y * m - 1.2420140846e-1f;
  y = y * m + 1.4249322787e-1f;
  y = y * m - 1.6668057665e-1f;
  y = y * m + 2.0000714765e-1f;
  y = y * m - 2.4999993993e-1f;
  y = y * m + 3.3333331174e-1f;
  y = y * m * z;
  y += -2.12194440e-4f * fe;
  y += -0.5f * z;
  float r = m + y;
  r += 0.693359375f * fe;
  r = x == 0.0f ? -std::numeric_limits<float>::infinity() : r;
  r = x < 0.0f ? std::numeric_limits<float>::quiet_NaN() : r;
  r = x == std::numeric_limits<float>::infinity() ? x : r;
  return x != x ? x : r;
}

/// tanh: Cephes' odd polynomial below 0.625, 1 - 2 / (e^{2|x|} + 1) above.
inline float tanh_f32(float x) {
  const float ax = std::fabs(x);
  const float s = x * x;
  float p = -5.70498872745e-3f;
  p = p * s + 2.06390887954e-2f;
  p = p * s - 5.37397155531e-2f;
  p = p * s + 1.33314422036e-1f;
  p = p * s - 3.33332819422e-1f;
  p = p * s * x + x;
  const float e = exp_f32(2.0f * ax);
  const float l = std::copysign(1.0f - 2.0f / (e + 1.0f), x);
  return ax < 0.625f ? p : l;
}

/// 1 / (1 + e^-x).
inline float sigmoid_f32(float x) { return 1.0f / (1.0f + exp_f32(-x)); }

/// 1 + erf(x / √2) = erfc(-x / √2) (= 2 Φ(x)), accurate in relative terms for negative x too (no
/// cancellation); the exponent -x^2/2 is formed exactly.
inline float one_plus_erf_scaled_f32(float x) {
  const float z = std::fabs(x) * 0.707106781186547524f;
  const float t = 1.0f / (1.0f + 0.5f * z);
  float p = 0.17087277f;
  p = p * t - 0.82215223f;
  p = p * t + 1.48851587f;
  p = p * t - 1.13520398f;
  p = p * t + 0.27886807f;
  p = p * t - 0.18628806f;
  p = p * t + 0.09678418f;
  p = p * t + 0.37409196f;
  p = p * t + 1.00002368f;
  p = p * t - 1.26551223f;
  const float c = t * exp_neg_half_sq_f32(x, p);
  return x >= 0.0f ? 2.0f - c : c;
}

// ---- explicit-SIMD kernels (what GCC will not vectorize from scalar code) ------------------------

/// y[i] = sqrt(x[i]) over contiguous arrays. std::sqrt keeps a libm call for errno (-fmath-errno)
/// and so never vectorizes; vsqrtps/vsqrtpd is correctly rounded like std::sqrt.
template <typename T>
inline void sqrt_contig(T* __restrict y, const T* __restrict x, int64_t n) {
  int64_t i = 0;
#if defined(__AVX__)
  if constexpr (std::is_same_v<T, float>) {
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_sqrt_ps(_mm256_loadu_ps(x + i)));
  } else {
    for (; i + 4 <= n; i += 4) _mm256_storeu_pd(y + i, _mm256_sqrt_pd(_mm256_loadu_pd(x + i)));
  }
#endif
  for (; i < n; ++i) y[i] = std::sqrt(x[i]);
}

/// max of n contiguous values (-inf for n == 0); NaN if any value is NaN. (GCC vectorizes a float
/// max reduction only under -ffinite-math-only.)
template <typename T>
inline T max_contig(const T* x, int64_t n) {
  T m = -std::numeric_limits<T>::infinity();
  bool nan = false;
  int64_t i = 0;
#if defined(__AVX__)
  if constexpr (std::is_same_v<T, float>) {
    __m256 a0 = _mm256_set1_ps(m), a1 = a0, u0 = _mm256_setzero_ps(), u1 = u0;
    for (; i + 16 <= n; i += 16) {
      const __m256 v0 = _mm256_loadu_ps(x + i), v1 = _mm256_loadu_ps(x + i + 8);
      a0 = _mm256_max_ps(a0, v0);
      a1 = _mm256_max_ps(a1, v1);
      u0 = _mm256_or_ps(u0, _mm256_cmp_ps(v0, v0, _CMP_UNORD_Q));
      u1 = _mm256_or_ps(u1, _mm256_cmp_ps(v1, v1, _CMP_UNORD_Q));
    }
    alignas(32) float buf[8];
    _mm256_store_ps(buf, _mm256_max_ps(a0, a1));
    for (float b : buf) m = b > m ? b : m;
    nan = _mm256_movemask_ps(_mm256_or_ps(u0, u1)) != 0;
  } else {
    __m256d a0 = _mm256_set1_pd(m), a1 = a0, u0 = _mm256_setzero_pd(), u1 = u0;
    for (; i + 8 <= n; i += 8) {
      const __m256d v0 = _mm256_loadu_pd(x + i), v1 = _mm256_loadu_pd(x + i + 4);
      a0 = _mm256_max_pd(a0, v0);
      a1 = _mm256_max_pd(a1, v1);
      u0 = _mm256_or_pd(u0, _mm256_cmp_pd(v0, v0, _CMP_UNORD_Q));
      u1 = _mm256_or_pd(u1, _mm256_cmp_pd(v1, v1, _CMP_UNORD_Q));
    }
    alignas(32) double buf[4];
    _mm256_store_pd(buf, _mm256_max_pd(a0, a1));
    for (double b : buf) m = b > m ? b : m;
    nan = _mm256_movemask_pd(_mm256_or_pd(u0, u1)) != 0;
  }
#endif
  for (; i < n; ++i) {
    nan = nan || x[i] != x[i];
    m = x[i] > m ? x[i] : m;
  }
  return nan ? std::numeric_limits<T>::quiet_NaN() : m;
}

}  // namespace strata::ops::cpu
