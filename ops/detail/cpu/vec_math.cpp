// The portable f32 array kernels and the run-time choice between them and the AVX-512 ones
// (Note [Run-time ISA dispatch] in ops/detail/cpu/vec_math.h).

#include "ops/detail/cpu/vec_math.h"

#include <cmath>

#include "ops/detail/cpu/f32_math.h"
#include "ops/detail/cpu/norm_loss_math.h"

namespace strata::ops::cpu::vec {

namespace detail {
/// Defined in vec_math_avx512.cpp: its table, or nullptr when that file was built without AVX-512.
const Kernels* avx512_table();
}  // namespace detail

namespace {

constexpr float kInvSqrt2Pi = 0.398942280401432677940f;

void exp_generic(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = exp_f32(x[i]);
}
void sigmoid_generic(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = sigmoid_f32(x[i]);
}
void tanh_generic(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = tanh_f32(x[i]);
}
void gelu_erf_generic(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = 0.5f * x[i] * one_plus_erf_scaled_f32(x[i]);
}
void gelu_erf_grad_generic(const float* g, const float* x, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    const float e = exp_neg_half_sq_f32(v);
    const float cdf = 0.5f * one_plus_erf_scaled_f32(v, e);
    const float pdf = kInvSqrt2Pi * e;
    out[i] = g[i] * std::fma(v, pdf, cdf);  // explicit, so the vector body and the tail round alike
  }
}
float exp_shift_sum_generic(const float* x, float shift, float* y, int64_t n) {
  if (y == nullptr) return ops::detail::lane_sum<float>(n, [&](int64_t i) { return exp_f32(x[i] - shift); });
  for (int64_t i = 0; i < n; ++i) y[i] = exp_f32(x[i] - shift);
  return ops::detail::lane_sum<float>(n, [&](int64_t i) { return y[i]; });
}
float max_generic(const float* x, int64_t n) { return ops::detail::lane_max(x, n); }

constexpr Kernels kGeneric{
    .isa = "generic",
    .exp = exp_generic,
    .sigmoid = sigmoid_generic,
    .tanh = tanh_generic,
    .gelu_erf = gelu_erf_generic,
    .gelu_erf_grad = gelu_erf_grad_generic,
    .exp_shift_sum = exp_shift_sum_generic,
    .max = max_generic,
};

bool cpu_has_avx512() {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  // libgcc's check includes the OS saving the zmm state (XCR0). Every extension the AVX-512 file
  // is compiled with must be present, since the compiler may use any of them.
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bw");
#else
  return false;
#endif
}

}  // namespace

const Kernels& generic_kernels() { return kGeneric; }

const Kernels* avx512_kernels() {
  static const Kernels* k = cpu_has_avx512() ? detail::avx512_table() : nullptr;
  return k;
}

const Kernels& kernels() {
  static const Kernels& k = avx512_kernels() != nullptr ? *avx512_kernels() : kGeneric;
  return k;
}

}  // namespace strata::ops::cpu::vec
