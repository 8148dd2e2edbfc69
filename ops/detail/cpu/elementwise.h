#pragma once
/// @file
/// The strided element-wise engine shared by the unary, binary and reduction families (internal to
/// ops/). The vectorizable f32 math those kernels use is in ops/detail/cpu/f32_math.h.
///
/// Note [Element-wise engine]
/// `map1` / `map2` / `map3` compute out[i] = f(in...[i]) where `out` is a fresh contiguous tensor
/// and every input is *broadcast* to out's shape through its strides (stride 0 in broadcast dims;
/// see `broadcast_byte_strides`). They ride on detail::for_each_row (core/detail/strided_loop.h): dims are
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

#include "core/detail/strided_loop.h"
#include "core/tensor.h"
#include "ops/detail/cpu/f32_math.h"

namespace strata::ops::cpu {

/// relu(v) as PyTorch computes it, v < 0 ? 0 : v: NaN, +-inf and -0 pass through (Note [ReLU and
/// NaN] in ops/unary.cpp). One compare and one select: vectorizes like the max it replaces.
template <typename T>
inline T relu_value(T v) {
  return v < T(0) ? T(0) : v;
}

/// Whether relu's gradient passes at output y: PyTorch's threshold_backward, !(y <= 0), so it
/// passes at NaN too (Note [ReLU and NaN] in ops/unary.cpp).
template <typename T>
inline bool relu_passes_grad(T y) {
  return !(y <= T(0));
}

/// Byte strides of `t` broadcast to `shape` (leading dims and expanded size-1 dims get stride 0).
/// The caller has checked that `t` broadcasts to `shape`.
inline Dims broadcast_byte_strides(const Tensor& t, IntArrayRef shape) {
  const std::size_t rank = shape.size();
  const std::size_t lead = rank - static_cast<std::size_t>(t.dim());
  Dims s(rank, 0);
  for (std::size_t d = 0; d < static_cast<std::size_t>(t.dim()); ++d)
    s[lead + d] = t.size(static_cast<int64_t>(d)) == 1
                      ? 0
                      : t.stride(static_cast<int64_t>(d)) * static_cast<int64_t>(t.itemsize());
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
