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

/// max_{i<n} x[i] (n >= 1); a NaN sticks (softmax of a row with a NaN is NaN, as in PyTorch).
template <typename T>
inline T lane_max(const T* x, int64_t n) {
  constexpr int L = kLanes<T>;
  T acc[L];
  for (int j = 0; j < L; ++j) acc[j] = -std::numeric_limits<T>::infinity();
  int64_t i = 0;
  for (; i + L <= n; i += L)
    for (int j = 0; j < L; ++j) acc[j] = (x[i + j] > acc[j] || x[i + j] != x[i + j]) ? x[i + j] : acc[j];
  T m = -std::numeric_limits<T>::infinity();
  for (; i < n; ++i) m = (x[i] > m || x[i] != x[i]) ? x[i] : m;
  for (int j = 0; j < L; ++j) m = (acc[j] > m || acc[j] != acc[j]) ? acc[j] : m;
  return m;
}

/// exp for f32 that the compiler vectorizes (Cephes polynomial, ~1 ulp on the normal range;
/// inputs below -87.3 give 0, above 88.37 give +inf). f64 uses std::exp.
inline float fast_exp(float x) {
  const float xc = std::min(std::max(x, -87.33654f), 88.37626f);
  const float n = std::floor(std::fma(xc, 1.44269504088896341f, 0.5f));
  float r = std::fma(n, -0.693359375f, xc);
  r = std::fma(n, 2.12194440e-4f, r);
  float p = 1.9875691500e-4f;
  p = std::fma(p, r, 1.3981999507e-3f);
  p = std::fma(p, r, 8.3334519073e-3f);
  p = std::fma(p, r, 4.1665795894e-2f);
  p = std::fma(p, r, 1.6666665459e-1f);
  p = std::fma(p, r, 5.0000001201e-1f);
  p = std::fma(p, r * r, r + 1.0f);
  const int32_t e = (static_cast<int32_t>(n) + 127) << 23;
  float result = p * std::bit_cast<float>(e);
  result = x < -87.33654f ? 0.0f : result;
  result = x > 88.37626f ? std::numeric_limits<float>::infinity() : result;
  return x == x ? result : x;
}
inline double fast_exp(double x) { return std::exp(x); }

/// log for f32 that the compiler vectorizes (Cephes polynomial; x > 0 and normal; 0 → -inf is
/// handled, denormals are flushed to the smallest normal). f64 uses std::log.
inline float fast_log(float x) {
  const float xin = x;
  x = std::max(x, std::numeric_limits<float>::min());
  int32_t bits = std::bit_cast<int32_t>(x);
  float e = static_cast<float>((bits >> 23) - 126);
  float m = std::bit_cast<float>((bits & 0x007fffff) | 0x3f000000);  // mantissa in [0.5, 1)
  const bool small = m < 0.707106781186547524f;
  e = small ? e - 1.0f : e;
  m = small ? m + m - 1.0f : m - 1.0f;
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
  r = xin == 0.0f ? -std::numeric_limits<float>::infinity() : r;
  r = xin < 0.0f ? std::numeric_limits<float>::quiet_NaN() : r;
  r = xin == std::numeric_limits<float>::infinity() ? xin : r;
  return xin == xin ? r : xin;
}
inline double fast_log(double x) { return std::log(x); }

/// log1p(exp(-|x|)) for f32 vectorized; f64 exact.
inline float softplus_neg_abs(float x) {
  const float t = fast_exp(-std::abs(x));  // in (0, 1]
  // log1p(t) = log(1 + t) loses nothing relevant here: 1 + t is in (1, 2], and the absolute
  // error of fast_log near 1 is ~1e-8, well below the f32 loss's own rounding.
  const float u = 1.0f + t;
  // Correct 1 + t's rounding (the classic log1p trick): log1p(t) ≈ log(u) * t / (u - 1).
  const float d = u - 1.0f;
  return d == 0.0f ? t : fast_log(u) * (t / d);
}
inline double softplus_neg_abs(double x) { return std::log1p(std::exp(-std::abs(x))); }

}  // namespace strata::ops::detail
