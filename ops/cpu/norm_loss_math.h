#pragma once
// Small vectorizable building blocks shared by ops/normalization.cpp and ops/softmax_loss.cpp
// (internal to ops/).
//
// Note [Lane reductions]
// We build without -ffast-math, so the compiler may not reorder a plain `s += x[i]` loop and
// leaves it scalar. The reductions below keep kLanes independent partial sums (one or two AVX
// registers) that the compiler vectorizes, and fold them at the end. The order is fixed by the
// data length only, so results do not depend on the thread count.

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

namespace strata::ops::detail {

template <typename T>
inline constexpr int kLanes = 64 / static_cast<int>(sizeof(T));  // two 256-bit registers

/// Σ_{i<n} f(i) with kLanes partial sums (Note [Lane reductions]).
template <typename T, typename F>
inline T lane_sum(int64_t n, F&& f) {
  constexpr int L = kLanes<T>;
  T acc[L] = {};
  int64_t i = 0;
  for (; i + L <= n; i += L)
    for (int j = 0; j < L; ++j) acc[j] += f(i + j);
  T tail = 0;
  for (; i < n; ++i) tail += f(i);
  for (int w = L / 2; w > 0; w /= 2)
    for (int j = 0; j < w; ++j) acc[j] += acc[j + w];
  return acc[0] + tail;
}

/// max_{i<n} x[i] (n >= 1). NaNs are skipped here; callers that go on to sum exp(x - max) still
/// produce NaN for a row holding one (as PyTorch does).
template <typename T>
inline T lane_max(const T* x, int64_t n) {
  constexpr int L = kLanes<T>;
  T acc[L];
  for (int j = 0; j < L; ++j) acc[j] = -std::numeric_limits<T>::infinity();
  int64_t i = 0;
  for (; i + L <= n; i += L)
    for (int j = 0; j < L; ++j) acc[j] = acc[j] < x[i + j] ? x[i + j] : acc[j];
  T m = -std::numeric_limits<T>::infinity();
  for (; i < n; ++i) m = m < x[i] ? x[i] : m;
  for (int j = 0; j < L; ++j) m = m < acc[j] ? acc[j] : m;
  return m;
}

#if defined(__AVX2__)
/// f32: GCC does not vectorize the select above (Note [Branch-free f32 math]), so use AVX directly.
template <>
inline float lane_max<float>(const float* x, int64_t n) {
  __m256 a0 = _mm256_set1_ps(-std::numeric_limits<float>::infinity()), a1 = a0;
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    a0 = _mm256_max_ps(a0, _mm256_loadu_ps(x + i));
    a1 = _mm256_max_ps(a1, _mm256_loadu_ps(x + i + 8));
  }
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, _mm256_max_ps(a0, a1));
  float m = -std::numeric_limits<float>::infinity();
  for (; i < n; ++i) m = m < x[i] ? x[i] : m;
  for (float v : lanes) m = m < v ? v : m;
  return m;
}
#endif

// Note [Branch-free f32 math]
// Under the default -ftrapping-math GCC will not if-convert `c ? f(x) : y` (it may not evaluate
// f(x) speculatively), and std::floor is not inlined, so a single such select keeps a whole loop
// scalar; ordered comparisons (<) may trap too, so they are not if-converted either. The functions
// below therefore use clamps (min/max), bit tricks, integer comparisons and selects between
// already-computed values only; special values come out of the arithmetic itself.

/// exp for f32 that the compiler vectorizes (Cephes polynomial, ~1 ulp; underflows gracefully to
/// denormals and 0, overflows to +inf, NaN stays NaN). f64 uses std::exp.
/// n = round(x / ln 2) comes from the 1.5 * 2^23 trick, and 2^n is applied as two factors so that
/// every n from -150 to 128 works (Note [Branch-free f32 math]).
inline float fast_exp(float x) {
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
inline double fast_exp(double x) { return std::exp(x); }

/// log for f32 that the compiler vectorizes (Cephes polynomial, ~1 ulp for normal x > 0; 0 gives
/// -inf, negative x and NaN give NaN, +inf gives NaN; denormals count as the smallest normal).
/// f64 uses std::log.
inline float fast_log(float x) {
  // Denormals, zero and negative x (NaN-ed below) are clamped to the smallest normal's bits.
  const int32_t bits = std::max(std::bit_cast<int32_t>(x), 0x00800000);
  float e = static_cast<float>((bits >> 23) - 126);
  const int32_t mbits = (bits & 0x007fffff) | 0x3f000000;
  float m = std::bit_cast<float>(mbits);  // mantissa in [0.5, 1)
  const float small = static_cast<float>(-((mbits - 0x3f3504f3) >> 31));  // m < sqrt(1/2): 1, else 0
  e -= small;
  m = std::fma(small, m, m - 1.0f);  // 2m - 1 when small, m - 1 otherwise
  const float z = m * m;
  float p = 7.0376836292e-2f;
  p = std::fma(p, m, -1.1514610310e-1f);
  p = std::fma(p, m, 1.1676998740e-1f);
  p = std::fma(p, m, -1.2420140846e-1f);
  p = std::fma(p, m, 1.4249322787e-1f);
  p = std::fma(p, m, -1.6668057665e-1f);
  p = std::fma(p, m, 2.0000714765e-1f);
  p = std::fma(p, m, -2.4999993993e-1f);
  p = std::fma(p, m, 3.3333331174e-1f);
  float y = p * m * z;
  y = std::fma(e, -2.12194440e-4f, y);
  y = std::fma(z, -0.5f, y);
  float r = m + y;
  r = std::fma(e, 0.693359375f, r);
  // Special values through masks (all ones where the condition holds).
  const int32_t xb = std::bit_cast<int32_t>(x);
  const int32_t zero = ((xb & 0x7fffffff) - 1) >> 31;   // x == ±0
  const int32_t neg = (xb >> 31) & ~zero;                 // x < 0
  int32_t rb = std::bit_cast<int32_t>(r);
  rb = (rb & ~zero) | (zero & static_cast<int32_t>(0xff800000u));  // -inf
  rb |= neg & 0x7fc00000;                                            // NaN
  return std::bit_cast<float>(rb) + (x - x);  // NaN for NaN and inf
}
inline double fast_log(double x) { return std::log(x); }

/// log1p(exp(-|x|)) for f32 vectorized; f64 exact.
inline float softplus_neg_abs(float x) {
  const float t = fast_exp(-std::abs(x));  // in [0, 1]
  // log1p(t) = log(u) * t / (u - 1) with u = 1 + t corrects u's rounding (the classic trick);
  // when u rounds to 1, log(u) = 0 and log1p(t) = t to f32 precision.
  const float u = 1.0f + t;
  const float d = u - 1.0f;
  const float v = fast_log(u) * (t / std::max(d, 1e-30f));
  const int32_t d_zero = (std::bit_cast<int32_t>(d) - 1) >> 31;  // d >= 0; all ones iff d == 0
  return v + std::bit_cast<float>(std::bit_cast<int32_t>(t) & d_zero);
}
inline double softplus_neg_abs(double x) { return std::log1p(std::exp(-std::abs(x))); }

}  // namespace strata::ops::detail
