#pragma once
/// @file
/// f32 array kernels for the transcendental element-wise ops and the softmax rows, chosen at run
/// time for the CPU (internal to ops/).
///
/// Note [Run-time ISA dispatch]
/// Strata builds for x86-64-v3 (AVX2), but the machines it runs on often have AVX-512, where
/// `vscalefps` (2^n with correct overflow and gradual underflow in one instruction) and 16 lanes
/// roughly halve the cost of exp-based kernels. ops/detail/cpu/vec_math_avx512.cpp is the one translation
/// unit compiled with AVX-512 enabled; it includes nothing but intrinsics and this header (so no
/// inline function compiled for AVX-512 can be picked by the linker for other callers), and
/// `kernels()` hands out its table only when the CPU and OS support AVX-512F/DQ. Otherwise the
/// portable table (ops/detail/cpu/vec_math.cpp: loops over ops/detail/cpu/f32_math.h that GCC vectorizes for
/// the build's -march) serves. Both tables have the same accuracy contract (f32_math.h) and the
/// same special values; tests/cpp/ops/test_vec_math.cpp sweeps both against f64 references.

#include <cstdint>

namespace strata::ops::cpu::vec {

/// y[i] = f(x[i]) over n contiguous floats (y may equal x).
using UnaryFn = void (*)(const float* x, float* y, int64_t n);
/// out[i] = f(g[i], x[i]) (out may equal g or x).
using GradFn = void (*)(const float* g, const float* x, float* out, int64_t n);

struct Kernels {
  const char* isa;       ///< "avx512" or "generic"
  UnaryFn exp;           ///< e^x
  UnaryFn sigmoid;       ///< 1 / (1 + e^-x)
  UnaryFn tanh;          ///< tanh x
  UnaryFn gelu_erf;      ///< x Φ(x) = x (1 + erf(x / √2)) / 2
  GradFn gelu_erf_grad;  ///< g (Φ(x) + x φ(x))
  /// y[i] = e^(x[i] - shift) (skipped when y is null); returns Σ_i e^(x[i] - shift), summed in an
  /// order fixed by n alone.
  float (*exp_shift_sum)(const float* x, float shift, float* y, int64_t n);
  /// max_i x[i] (-inf for n == 0). A NaN in x gives NaN or is skipped; callers that go on to sum
  /// e^(x - max) produce NaN either way.
  float (*max)(const float* x, int64_t n);
};

/// The portable kernels (the build's -march).
const Kernels& generic_kernels();
/// The AVX-512 kernels, or nullptr when this CPU or this build has none.
const Kernels* avx512_kernels();
/// The best kernels for this CPU (chosen once).
const Kernels& kernels();

}  // namespace strata::ops::cpu::vec
