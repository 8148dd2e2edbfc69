#pragma once
/// @file
/// The GEMM layer under ops/linalg.cpp (internal to ops/).
///
/// Note [GEMM operands]
/// Operands are strided 2-D views (MatRef): no transposed copy is ever made by the caller. For f32,
/// an operand with a unit stride in either dim goes straight to oneDNN's `dnnl_sgemm` with the
/// matching 'N'/'T' flag (Note [oneDNN from PyPI is a SYCL build]: sgemm runs on TBB directly,
/// primitives would cost ~25 µs a call); `gemm_ready` tells the caller when it must make an operand
/// contiguous first (neither stride is 1, or overlapping rows). f64, tiny f32 products (where a
/// call into oneDNN costs more than the arithmetic) and ThreadSanitizer builds (oneDNN and TBB are
/// not instrumented) use Strata's own cache-blocked kernel, which packs its operands and so
/// accepts any strides.

#include <cstdint>

namespace strata::ops::cpu {

/// A rows × cols matrix at `data` with element strides `rs` (between rows) and `cs` (between
/// columns). Strides may be anything non-negative for the own kernel.
template <typename T>
struct MatRef {
  const T* data = nullptr;
  int64_t rows = 0, cols = 0;
  int64_t rs = 0, cs = 0;
  /// The transposed view (no copy).
  MatRef t() const { return {data, cols, rows, cs, rs}; }
};

/// True when `m` can be passed to sgemm as is (a unit stride in one dim, rows not overlapping).
template <typename T>
bool gemm_ready(const MatRef<T>& m);

/// C = A·B (accumulate: C += A·B). A is M×K, B is K×N, C is M×N row-major with leading dim `ldc`.
/// f32 operands must be gemm_ready. Runs in parallel when large (`parallel` = false: one thread,
/// for callers that parallelize over a batch themselves).
void gemm(const MatRef<float>& a, const MatRef<float>& b, float* c, int64_t ldc, bool accumulate, bool parallel = true);
void gemm(const MatRef<double>& a, const MatRef<double>& b, double* c, int64_t ldc, bool accumulate,
          bool parallel = true);

/// Strata's own blocked kernel (exposed for tests and benchmarks; gemm() picks it when it wins).
template <typename T>
void gemm_blocked(const MatRef<T>& a, const MatRef<T>& b, T* c, int64_t ldc, bool accumulate, bool parallel);

}  // namespace strata::ops::cpu
