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

#include "ops/detail/cpu/f32_math.h"

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
/// f32: GCC does not vectorize the select above (Note [Branch-free f32 math] in ops/detail/cpu/f32_math.h),
/// so use AVX directly.
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

/// exp / log: f32 through the one vectorizable copy in ops/detail/cpu/f32_math.h, f64 through libm.
inline float fast_exp(float x) { return cpu::exp_f32(x); }
inline double fast_exp(double x) { return std::exp(x); }
inline float fast_log(float x) { return cpu::log_f32(x); }
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
