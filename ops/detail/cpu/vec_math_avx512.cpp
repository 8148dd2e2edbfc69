// The AVX-512 f32 array kernels (Note [Run-time ISA dispatch] in ops/detail/cpu/vec_math.h). This file is
// compiled with AVX-512 enabled (ops/CMakeLists.txt) and must include nothing but intrinsics and
// vec_math.h: an inline function from any other header, compiled here for AVX-512, could be the
// copy the linker keeps for every caller. Everything below is internal and always inlined into
// the table's functions. The formulas follow ops/detail/cpu/f32_math.h (same polynomials, same special
// values); 2^n is applied with vscalefps, which overflows to inf and rounds denormals once.

#include "ops/detail/cpu/vec_math.h"

#if defined(__x86_64__) && defined(__AVX512F__) && defined(__AVX512DQ__)

#include <immintrin.h>

// GCC 12's AVX-512 intrinsics start several results from _mm512_undefined_ps() and then warn about
// it once inlined (a known false positive of the header).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#define STRATA_AVX512_INLINE inline __attribute__((always_inline))

namespace strata::ops::cpu::vec {

namespace {

using V = __m512;
using M = __mmask16;

STRATA_AVX512_INLINE V set1(float v) { return _mm512_set1_ps(v); }

/// Mask of the first `n` lanes (0 < n < 16).
STRATA_AVX512_INLINE M tail_mask(int64_t n) { return static_cast<M>((1u << n) - 1u); }

/// Cephes' expf polynomial on the reduced argument r (|r| <= ln2 / 2), e^r = 1 + r + r^2 P(r),
/// evaluated as one Horner chain of 7 fmas.
STRATA_AVX512_INLINE V exp_poly(V r) {
  V p = set1(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, set1(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, set1(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, set1(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, set1(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, set1(5.0000001201e-1f));
  p = _mm512_fmadd_ps(p, r, set1(1.0f));
  return _mm512_fmadd_ps(p, r, set1(1.0f));
}

/// round(v / ln 2) for |v| < 2^21 (the 1.5 * 2^23 trick: one fma and one subtraction).
STRATA_AVX512_INLINE V exp_n(V v) {
  return _mm512_sub_ps(_mm512_fmadd_ps(v, set1(1.44269504088896341f), set1(12582912.0f)), set1(12582912.0f));
}

/// e^x (~1 ulp; +inf above 88.72, gradual underflow to 0, NaN passes).
STRATA_AVX512_INLINE V exp16(V x) {
  V xc = _mm512_max_ps(set1(-104.0f), x);  // vmaxps returns its second operand for NaN
  xc = _mm512_min_ps(set1(89.0f), xc);
  const V n = exp_n(xc);
  V r = _mm512_fnmadd_ps(n, set1(0.693359375f), xc);
  r = _mm512_fnmadd_ps(n, set1(-2.12194440e-4f), r);
  return _mm512_scalef_ps(exp_poly(r), n);
}

/// e^(hi + lo) for hi + lo in [-210, 1] (gelu's arguments): n = round((hi + lo) / ln 2) >= -303
/// keeps n ln2's Cody-Waite split exact, and vscalefps rounds results below 2^-149 to 0 itself, so
/// no clamp is needed.
STRATA_AVX512_INLINE V exp_hilo_neg16(V hi, V lo) {
  const V n = exp_n(_mm512_add_ps(hi, lo));
  V r = _mm512_fnmadd_ps(n, set1(0.693359375f), hi);
  r = _mm512_fnmadd_ps(n, set1(-2.12194440e-4f), r);
  return _mm512_scalef_ps(exp_poly(_mm512_add_ps(r, lo)), n);
}

/// 1 / d for d in [1, 16]: vrcp14ps (relative error < 2^-14) and one Newton step (~2^-28 before
/// the final rounding); shorter latency than vdivps.
STRATA_AVX512_INLINE V rcp_nr(V d) {
  const V y = _mm512_rcp14_ps(d);
  return _mm512_fmadd_ps(y, _mm512_fnmadd_ps(d, y, set1(1.0f)), y);
}

/// 1 / (1 + e^-x) as (x < 0 ? u : 1) / (1 + u), u = e^-|x| (f32_math.h's sigmoid_f32).
STRATA_AVX512_INLINE V sigmoid16(V x) {
  const V u = exp16(_mm512_sub_ps(_mm512_setzero_ps(), _mm512_abs_ps(x)));
  const V num = _mm512_mask_mov_ps(set1(1.0f), _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_LT_OQ), u);
  return _mm512_div_ps(num, _mm512_add_ps(set1(1.0f), u));
}

/// The magnitude of a with the sign of b (one vpternlogd: bits of b under the sign mask, else a).
STRATA_AVX512_INLINE V copysign16(V a, V b) {
  const __m512i m = _mm512_set1_epi32(static_cast<int>(0x80000000u));
  return _mm512_castsi512_ps(_mm512_ternarylogic_epi32(m, _mm512_castps_si512(b), _mm512_castps_si512(a), 0xCA));
}

STRATA_AVX512_INLINE V tanh16(V x) {
  const V ax = _mm512_abs_ps(x);
  const V s = _mm512_mul_ps(x, x);
  V p = set1(-5.70498872745e-3f);
  p = _mm512_fmadd_ps(p, s, set1(2.06390887954e-2f));
  p = _mm512_fmadd_ps(p, s, set1(-5.37397155531e-2f));
  p = _mm512_fmadd_ps(p, s, set1(1.33314422036e-1f));
  p = _mm512_fmadd_ps(p, s, set1(-3.33332819422e-1f));
  p = _mm512_fmadd_ps(_mm512_mul_ps(p, s), x, x);
  // 1 - 2 / (e^{2|x|} + 1), |x| clamped to 10 (tanh rounds to 1 from 9.01) so that the reciprocal
  // (vrcp14ps and a Newton step) sees a finite argument, and e^a for a in [0, 20] needs none of
  // exp16's clamps.
  const V a = _mm512_min_ps(set1(20.0f), _mm512_add_ps(ax, ax));  // NaN passes
  const V n = exp_n(a);
  V r = _mm512_fnmadd_ps(n, set1(0.693359375f), a);
  r = _mm512_fnmadd_ps(n, set1(-2.12194440e-4f), r);
  const V e = _mm512_scalef_ps(exp_poly(r), n);
  const V l = _mm512_fnmadd_ps(set1(2.0f), rcp_nr(_mm512_add_ps(e, set1(1.0f))), set1(1.0f));
  return copysign16(_mm512_mask_mov_ps(l, _mm512_cmp_ps_mask(ax, set1(0.625f), _CMP_LT_OQ), p), x);  // odd, -0 too
}

/// The erfc pieces shared by gelu's forward and backward: |x| clamped to 20 (NaN passes), and
/// x^2 = sq + sq_lo exactly.
struct Gauss {
  V ax, sq, sq_lo;
};
STRATA_AVX512_INLINE Gauss gauss(V x) {
  Gauss g;
  g.ax = _mm512_range_ps(x, set1(20.0f), 0x0A);  // min(|x|, 20) with the sign cleared; NaN passes
  g.sq = _mm512_mul_ps(g.ax, g.ax);
  g.sq_lo = _mm512_fmsub_ps(g.ax, g.ax, g.sq);
  return g;
}

/// e^{z^2} erfc(z) for z = |x| / √2 as t Q(t), t = 1 / (1 + z/2) (f32_math.h's erfcx_f32; the
/// reciprocal by vrcp14ps and a Newton step).
STRATA_AVX512_INLINE V erfcx16(const Gauss& g) {
  const V t = rcp_nr(_mm512_fmadd_ps(g.ax, set1(0.353553390593273762f), set1(1.0f)));  // 1 + z/2 in [1, 8.1]
  const V t2 = _mm512_mul_ps(t, t);
  const V t4 = _mm512_mul_ps(t2, t2);
  const V q0 = _mm512_fmadd_ps(set1(0.282336056f), t, set1(0.282088399f));
  const V q1 = _mm512_fmadd_ps(set1(0.201274723f), t, set1(0.243423223f));
  const V q2 = _mm512_fmadd_ps(set1(0.272084236f), t, set1(-0.0229085349f));
  const V q3 = _mm512_fmadd_ps(set1(0.281518012f), t, set1(-0.481430978f));
  const V r0 = _mm512_fmadd_ps(q1, t2, q0);
  const V r1 = _mm512_fmadd_ps(q3, t2, q2);
  const V q = _mm512_fmadd_ps(_mm512_mul_ps(t4, t4), set1(-0.0583851524f), _mm512_fmadd_ps(r1, t4, r0));
  return _mm512_mul_ps(t, q);
}

/// e^{-x^2/2} with x^2 = sq + sq_lo exactly.
STRATA_AVX512_INLINE V gauss_exp16(const Gauss& g) {
  return exp_hilo_neg16(_mm512_mul_ps(set1(-0.5f), g.sq), _mm512_mul_ps(set1(-0.5f), g.sq_lo));
}

/// 1 + erf(x / √2) = erfc(-x / √2) from e^{-x^2/2} = e, relative-accurate for negative x.
STRATA_AVX512_INLINE V one_plus_erf16(V x, const Gauss& g, V e) {
  const V c = _mm512_mul_ps(erfcx16(g), e);  // erfc(|x| / √2)
  return _mm512_mask_sub_ps(c, _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_GE_OQ), set1(2.0f), c);
}

STRATA_AVX512_INLINE V gelu16(V x) {
  const Gauss g = gauss(x);
  return _mm512_mul_ps(_mm512_mul_ps(set1(0.5f), x), one_plus_erf16(x, g, gauss_exp16(g)));
}

STRATA_AVX512_INLINE V gelu_grad16(V gr, V x) {
  const Gauss g = gauss(x);
  const V e = gauss_exp16(g);
  const V cdf = _mm512_mul_ps(set1(0.5f), one_plus_erf16(x, g, e));
  const V pdf = _mm512_mul_ps(set1(0.398942280401432677940f), e);
  return _mm512_mul_ps(gr, _mm512_fmadd_ps(x, pdf, cdf));
}

template <typename F>
STRATA_AVX512_INLINE void map_unary(const float* x, float* y, int64_t n, F f) {
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    const V a = _mm512_loadu_ps(x + i), b = _mm512_loadu_ps(x + i + 16);
    const V c = _mm512_loadu_ps(x + i + 32), d = _mm512_loadu_ps(x + i + 48);
    const V ya = f(a), yb = f(b), yc = f(c), yd = f(d);
    _mm512_storeu_ps(y + i, ya);
    _mm512_storeu_ps(y + i + 16, yb);
    _mm512_storeu_ps(y + i + 32, yc);
    _mm512_storeu_ps(y + i + 48, yd);
  }
  for (; i < n; i += 16) {
    const M m = n - i >= 16 ? static_cast<M>(0xffff) : tail_mask(n - i);
    _mm512_mask_storeu_ps(y + i, m, f(_mm512_maskz_loadu_ps(m, x + i)));
  }
}

void exp_avx512(const float* x, float* y, int64_t n) {
  map_unary(x, y, n, [](V v) { return exp16(v); });
}
void sigmoid_avx512(const float* x, float* y, int64_t n) {
  map_unary(x, y, n, [](V v) { return sigmoid16(v); });
}
void tanh_avx512(const float* x, float* y, int64_t n) {
  map_unary(x, y, n, [](V v) { return tanh16(v); });
}
void gelu_erf_avx512(const float* x, float* y, int64_t n) {
  map_unary(x, y, n, [](V v) { return gelu16(v); });
}

void gelu_erf_grad_avx512(const float* g, const float* x, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    V v[4];
    for (int k = 0; k < 4; ++k) v[k] = gelu_grad16(_mm512_loadu_ps(g + i + 16 * k), _mm512_loadu_ps(x + i + 16 * k));
    for (int k = 0; k < 4; ++k) _mm512_storeu_ps(out + i + 16 * k, v[k]);
  }
  for (; i < n; i += 16) {
    const M m = n - i >= 16 ? static_cast<M>(0xffff) : tail_mask(n - i);
    _mm512_mask_storeu_ps(out + i, m, gelu_grad16(_mm512_maskz_loadu_ps(m, g + i), _mm512_maskz_loadu_ps(m, x + i)));
  }
}

float exp_shift_sum_avx512(const float* x, float shift, float* y, int64_t n) {
  const V s = set1(shift);
  V acc0 = _mm512_setzero_ps(), acc1 = acc0;
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const V e0 = exp16(_mm512_sub_ps(_mm512_loadu_ps(x + i), s));
    const V e1 = exp16(_mm512_sub_ps(_mm512_loadu_ps(x + i + 16), s));
    if (y != nullptr) {
      _mm512_storeu_ps(y + i, e0);
      _mm512_storeu_ps(y + i + 16, e1);
    }
    acc0 = _mm512_add_ps(acc0, e0);
    acc1 = _mm512_add_ps(acc1, e1);
  }
  for (; i < n; i += 16) {
    const M m = n - i >= 16 ? static_cast<M>(0xffff) : tail_mask(n - i);
    const V e = _mm512_maskz_mov_ps(m, exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + i), s)));
    if (y != nullptr) _mm512_mask_storeu_ps(y + i, m, e);
    acc0 = _mm512_add_ps(acc0, e);
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1));
}

float max_avx512(const float* x, int64_t n) {
  const V lo = set1(-__builtin_inff());
  V a0 = lo, a1 = lo;
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    a0 = _mm512_max_ps(a0, _mm512_loadu_ps(x + i));
    a1 = _mm512_max_ps(a1, _mm512_loadu_ps(x + i + 16));
  }
  for (; i < n; i += 16) {
    const M m = n - i >= 16 ? static_cast<M>(0xffff) : tail_mask(n - i);
    a0 = _mm512_max_ps(a0, _mm512_mask_loadu_ps(lo, m, x + i));
  }
  return _mm512_reduce_max_ps(_mm512_max_ps(a0, a1));
}

constexpr Kernels kAvx512{
    .isa = "avx512",
    .exp = exp_avx512,
    .sigmoid = sigmoid_avx512,
    .tanh = tanh_avx512,
    .gelu_erf = gelu_erf_avx512,
    .gelu_erf_grad = gelu_erf_grad_avx512,
    .exp_shift_sum = exp_shift_sum_avx512,
    .max = max_avx512,
};

}  // namespace

namespace detail {
const Kernels* avx512_table() { return &kAvx512; }
}  // namespace detail

}  // namespace strata::ops::cpu::vec

#else

namespace strata::ops::cpu::vec::detail {
const Kernels* avx512_table() { return nullptr; }
}  // namespace strata::ops::cpu::vec::detail

#endif
