#pragma once
/// @file
/// Scalar f32 math written so that loops calling it auto-vectorize (internal to ops/): the one copy
/// of f32 exp / log / tanh / sigmoid / erfc that the element-wise, normalization and loss kernels
/// use, and the portable fallback of the array kernels in ops/detail/cpu/vec_math.h.
///
/// Note [Branch-free f32 math]
/// Every floating-point operation runs unconditionally and only *values* are selected: GCC does
/// not if-convert a select whose arm computes (`c ? x * k : x`; write `x * (c ? k : 1)`), nor one
/// that needs a libm call, so a single such select keeps a whole loop scalar. Min/max clamps are
/// written `k < x ? k : x` so that they become vminps/vmaxps with a NaN `x` passing through. The
/// including targets are compiled with -fno-trapping-math -fno-math-errno (Note [No trapping math
/// in element-wise kernels] in ops/unary.cpp).
///
/// Accuracy: exp and log ~1 ulp (Cephes' polynomials), tanh ~2 ulp, sigmoid ~2.5 ulp, erfc relative
/// error ~3e-7 (erfcx_f32). Special values: exp overflows to +inf and underflows gracefully through
/// the denormals to 0; log(0) = -inf, log(x < 0) = NaN, log(+inf) = +inf, denormal x is rescaled;
/// NaN stays NaN everywhere.

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

namespace strata::ops::cpu {

/// e^x (~1 ulp). n = round(x / ln 2) comes from the 1.5 * 2^23 trick and 2^n is applied as two
/// factors, so every n from -150 to 128 works; x is clamped to [-104, 89] first (NaN passes).
inline float exp_f32(float x) {
  float xc = -104.0f > x ? -104.0f : x;  // vmaxps(lo, x): NaN passes through
  xc = 89.0f < xc ? 89.0f : xc;
  const float t = std::fma(xc, 1.44269504088896341f, 12582912.0f);
  const float n = t - 12582912.0f;
  const int32_t ni = std::bit_cast<int32_t>(t) - 0x4B400000;
  float r = std::fma(n, -0.693359375f, xc);
  r = std::fma(n, 2.12194440e-4f, r);
  float p = 1.9875691500e-4f;
  p = std::fma(p, r, 1.3981999507e-3f);
  p = std::fma(p, r, 8.3334519073e-3f);
  p = std::fma(p, r, 4.1665795894e-2f);
  p = std::fma(p, r, 1.6666665459e-1f);
  p = std::fma(p, r, 5.0000001201e-1f);
  p = std::fma(p, r * r, r + 1.0f);
  const int32_t h = ni >> 1;
  const float s1 = std::bit_cast<float>((h + 127) << 23);
  const float s2 = std::bit_cast<float>((ni - h + 127) << 23);
  return p * s1 * s2;
}

/// e^(hi + lo) for |lo| << |hi|: exp_f32's scheme with the low part added after the reduction, so
/// the rounding of a large argument stays out of the result.
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

/// |x| clamped to 20 (NaN passes): e^(-x^2/2) is 0 in f32 from |x| = 14.4, and the clamp keeps x^2
/// finite, so its fma residual below is never inf - inf.
inline float clamp_abs20_f32(float x) {
  const float ax = std::fabs(x);
  return 20.0f < ax ? 20.0f : ax;
}

/// e^(-x^2 / 2) with x^2 formed exactly (fma), so the result keeps ~1 ulp for large |x|.
inline float exp_neg_half_sq_f32(float x) {
  const float ax = clamp_abs20_f32(x);
  const float sq = ax * ax;
  const float sq_lo = std::fma(ax, ax, -sq);
  return exp_hilo_f32(-0.5f * sq, -0.5f * sq_lo);
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
  const float l = 1.0f - 2.0f / (e + 1.0f);
  return std::copysign(ax < 0.625f ? p : l, x);  // odd, -0 included
}

/// 1 / (1 + e^-x), as 1 / (1 + u) for x >= 0 and u / (1 + u) for x < 0 with u = e^-|x|: no
/// overflow, one rounding division, and the negative side keeps e^x's gradual underflow.
inline float sigmoid_f32(float x) {
  const float u = exp_f32(-std::fabs(x));
  return (x < 0.0f ? u : 1.0f) / (1.0f + u);
}

/// e^{z^2} erfc(z) for z = |x| / √2 (|x| clamped to 20), as t Q(t) with t = 1 / (1 + z/2) and Q a
/// degree-8 polynomial (a minimax fit of e^{z^2} erfc(z) / t for z <= 9.8, relative error 5e-8,
/// ~2.5e-7 in f32 arithmetic; Q(1) = 1 exactly, so erfc(0) = 1). Evaluated by Estrin's scheme, as
/// the AVX-512 kernel does.
inline float erfcx_f32(float x) {
  const float t = 1.0f / std::fma(clamp_abs20_f32(x), 0.353553390593273762f, 1.0f);
  const float t2 = t * t;
  const float t4 = t2 * t2;
  const float q0 = std::fma(0.282336056f, t, 0.282088399f);
  const float q1 = std::fma(0.201274723f, t, 0.243423223f);
  const float q2 = std::fma(0.272084236f, t, -0.0229085349f);
  const float q3 = std::fma(0.281518012f, t, -0.481430978f);
  const float r0 = std::fma(q1, t2, q0);
  const float r1 = std::fma(q3, t2, q2);
  return t * std::fma(t4 * t4, -0.0583851524f, std::fma(r1, t4, r0));
}

/// 1 + erf(x / √2) = erfc(-x / √2) (= 2 Φ(x)) given e = e^{-x^2/2} (exp_neg_half_sq_f32(x)):
/// accurate in relative terms for negative x too (no cancellation).
inline float one_plus_erf_scaled_f32(float x, float e) {
  const float c = erfcx_f32(x) * e;  // erfc(|x| / √2)
  return x >= 0.0f ? 2.0f - c : c;
}
inline float one_plus_erf_scaled_f32(float x) { return one_plus_erf_scaled_f32(x, exp_neg_half_sq_f32(x)); }

}  // namespace strata::ops::cpu
