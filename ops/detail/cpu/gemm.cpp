#include "ops/detail/cpu/gemm.h"

#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "core/error.h"
#include "core/threading.h"

#if defined(__SANITIZE_THREAD__)
#define STRATA_GEMM_TSAN 1
#else
#define STRATA_GEMM_TSAN 0
#endif

namespace strata::ops::cpu {

namespace {

// ---- Strata's blocked kernel ----------------------------------------------------------------------
//
// GotoBLAS-style loops: B is packed per (KC × NC) panel into NR-wide column strips, A per (MC × KC)
// block into MR-tall row strips (both zero-padded), and an MR × NR register tile accumulates over
// the KC depth. Packing makes any operand strides cost the same, so no caller ever copies for this
// kernel. The micro-kernel keeps an MR × NR tile in 12 ymm accumulators (-march=x86-64-v3).

template <typename T>
struct Blocking;
template <>
struct Blocking<float> {
  static constexpr int64_t MR = 6, NR = 16, KC = 256, MC = 96, NC = 1024;
};
template <>
struct Blocking<double> {
  static constexpr int64_t MR = 6, NR = 8, KC = 256, MC = 72, NC = 512;
};

/// 256-bit vectors through GCC/Clang vector extensions (plain C++ arithmetic, no intrinsics): left to
/// itself GCC vectorizes an MR × NR accumulator array with shuffles and spills (measured 0.4
/// GFLOP/s); as MR × NR/VL vector variables it keeps the tile in registers.
template <typename T>
struct Vec;
template <>
struct Vec<float> {
  typedef float type __attribute__((vector_size(32)));
};
template <>
struct Vec<double> {
  typedef double type __attribute__((vector_size(32)));
};

template <typename T, int64_t MR, int64_t NR>
inline void micro_kernel(int64_t kc, const T* __restrict ap, const T* __restrict bp, T* __restrict c, int64_t ldc,
                         int64_t mr, int64_t nr, bool accumulate) {
  using V = typename Vec<T>::type;
  constexpr int64_t VL = static_cast<int64_t>(sizeof(V) / sizeof(T)), NV = NR / VL;
  static_assert(NR % VL == 0);
  V acc[MR][NV];
#pragma GCC unroll 16
  for (int64_t r = 0; r < MR; ++r)
#pragma GCC unroll 4
    for (int64_t v = 0; v < NV; ++v) acc[r][v] = V{};
  for (int64_t k = 0; k < kc; ++k) {
    V b[NV];
#pragma GCC unroll 4
    for (int64_t v = 0; v < NV; ++v) __builtin_memcpy(&b[v], bp + k * NR + v * VL, sizeof(V));
    const T* ak = ap + k * MR;
#pragma GCC unroll 16
    for (int64_t r = 0; r < MR; ++r) {
      const T av = ak[r];
#pragma GCC unroll 4
      for (int64_t v = 0; v < NV; ++v) acc[r][v] += av * b[v];
    }
  }
  if (mr == MR && nr == NR) {
#pragma GCC unroll 16
    for (int64_t r = 0; r < MR; ++r) {
      T* cr = c + r * ldc;
#pragma GCC unroll 4
      for (int64_t v = 0; v < NV; ++v) {
        V out = acc[r][v];
        if (accumulate) {
          V old;
          __builtin_memcpy(&old, cr + v * VL, sizeof(V));
          out += old;
        }
        __builtin_memcpy(cr + v * VL, &out, sizeof(V));
      }
    }
  } else {
    T tile[MR][NR];
    __builtin_memcpy(tile, acc, sizeof(tile));
    for (int64_t r = 0; r < mr; ++r) {
      T* cr = c + r * ldc;
      for (int64_t j = 0; j < nr; ++j) cr[j] = accumulate ? cr[j] + tile[r][j] : tile[r][j];
    }
  }
}

/// Packs B[p0:p0+kc, j0:j0+nc] into NR-wide strips: strip s holds kc rows of NR values.
template <typename T, int64_t NR>
void pack_b(const MatRef<T>& b, int64_t p0, int64_t kc, int64_t j0, int64_t nc, T* out) {
  for (int64_t s = 0; s < nc; s += NR) {
    const int64_t w = std::min(NR, nc - s);
    T* dst = out + (s / NR) * kc * NR;
    for (int64_t k = 0; k < kc; ++k) {
      const T* src = b.data + (p0 + k) * b.rs + (j0 + s) * b.cs;
      T* d = dst + k * NR;
      if (b.cs == 1) {
        for (int64_t j = 0; j < w; ++j) d[j] = src[j];
      } else {
        for (int64_t j = 0; j < w; ++j) d[j] = src[j * b.cs];
      }
      for (int64_t j = w; j < NR; ++j) d[j] = T(0);
    }
  }
}

/// Packs A[i0:i0+mc, p0:p0+kc] into MR-tall strips: strip s holds kc columns of MR values.
template <typename T, int64_t MR>
void pack_a(const MatRef<T>& a, int64_t i0, int64_t mc, int64_t p0, int64_t kc, T* out) {
  for (int64_t s = 0; s < mc; s += MR) {
    const int64_t h = std::min(MR, mc - s);
    T* dst = out + (s / MR) * kc * MR;
    const T* base = a.data + (i0 + s) * a.rs + p0 * a.cs;
    if (h == MR && a.cs == 1) {
      for (int64_t k = 0; k < kc; ++k)
        for (int64_t r = 0; r < MR; ++r) dst[k * MR + r] = base[r * a.rs + k];
    } else {
      for (int64_t k = 0; k < kc; ++k) {
        for (int64_t r = 0; r < h; ++r) dst[k * MR + r] = base[r * a.rs + k * a.cs];
        for (int64_t r = h; r < MR; ++r) dst[k * MR + r] = T(0);
      }
    }
  }
}

}  // namespace

template <typename T>
void gemm_blocked(const MatRef<T>& a, const MatRef<T>& b, T* c, int64_t ldc, bool accumulate, bool parallel) {
  using B = Blocking<T>;
  constexpr int64_t MR = B::MR, NR = B::NR;
  const int64_t M = a.rows, K = a.cols, N = b.cols;
  STRATA_ASSERT(b.rows == K, "gemm_blocked: inner sizes ", K, " and ", b.rows);
  if (M == 0 || N == 0) return;
  if (K == 0) {
    if (!accumulate)
      for (int64_t i = 0; i < M; ++i) std::fill(c + i * ldc, c + i * ldc + N, T(0));
    return;
  }
  // Work items inside one (KC × NC) panel: MC-row blocks × JC-column chunks, row-block-major so a
  // thread walking consecutive items reuses its packed A block.
  constexpr int64_t JC = 8 * NR;
  // Packing writes every element (padding included): no initialization needed.
  const int64_t bpack_size = std::min(B::KC, K) * ((std::min(B::NC, N) + NR - 1) / NR) * NR;
  std::unique_ptr<T[]> bpack(new T[static_cast<std::size_t>(bpack_size)]);
  for (int64_t jc = 0; jc < N; jc += B::NC) {
    const int64_t nc = std::min(B::NC, N - jc);
    for (int64_t pc = 0; pc < K; pc += B::KC) {
      const int64_t kc = std::min(B::KC, K - pc);
      pack_b<T, NR>(b, pc, kc, jc, nc, bpack.get());
      const bool acc = accumulate || pc > 0;
      const int64_t ni = (M + B::MC - 1) / B::MC, nj = (nc + JC - 1) / JC;
      auto body = [&](int64_t begin, int64_t end) {
        const int64_t mc_max = std::min(B::MC, (M + MR - 1) / MR * MR);
        std::unique_ptr<T[]> apack(new T[static_cast<std::size_t>(mc_max * kc)]);
        int64_t packed = -1;
        for (int64_t item = begin; item < end; ++item) {
          const int64_t ib = item / nj, jb = item % nj;
          const int64_t i0 = ib * B::MC, mc = std::min(B::MC, M - i0);
          if (packed != ib) {
            pack_a<T, MR>(a, i0, mc, pc, kc, apack.get());
            packed = ib;
          }
          const int64_t j_end = std::min(nc, (jb + 1) * JC);
          for (int64_t j = jb * JC; j < j_end; j += NR) {
            const T* bp = bpack.get() + (j / NR) * kc * NR;
            for (int64_t i = 0; i < mc; i += MR)
              micro_kernel<T, MR, NR>(kc, apack.get() + (i / MR) * kc * MR, bp, c + (i0 + i) * ldc + jc + j, ldc,
                                      std::min(MR, mc - i), std::min(NR, nc - j), acc);
          }
        }
      };
      const int64_t items = ni * nj;
      // ~1 MFLOP per task keeps small products on one thread.
      const int64_t flops_per_item = std::min(B::MC, M) * std::min(JC, nc) * kc;
      if (parallel && items > 1 && flops_per_item * items >= (int64_t{1} << 20)) {
        parallel_for(items, std::max<int64_t>(1, (int64_t{1} << 19) / flops_per_item), body);
      } else {
        body(0, items);
      }
    }
  }
}

template void gemm_blocked<float>(const MatRef<float>&, const MatRef<float>&, float*, int64_t, bool, bool);
template void gemm_blocked<double>(const MatRef<double>&, const MatRef<double>&, double*, int64_t, bool, bool);

namespace {

struct SgemmOperand {
  char trans = 'N';
  int64_t ld = 1;
  bool ok = false;
};

/// How sgemm sees a rows × cols operand (row-major): 'N' with unit column stride, or 'T' with unit
/// row stride; leading dims must not make rows (columns) overlap.
template <typename T>
SgemmOperand classify(const MatRef<T>& m) {
  const int64_t rows = m.rows, cols = m.cols;
  if ((m.cs == 1 || cols <= 1) && (rows <= 1 || m.rs >= std::max<int64_t>(1, cols)))
    return {'N', rows <= 1 ? std::max<int64_t>(1, cols) : m.rs, true};
  if ((m.rs == 1 || rows <= 1) && (cols <= 1 || m.cs >= std::max<int64_t>(1, rows)))
    return {'T', cols <= 1 ? std::max<int64_t>(1, rows) : m.cs, true};
  return {};
}

/// Up to this many multiply-adds the own kernel beats a call into oneDNN. Measured on the 2-core
/// dev machine (noisy, other jobs running): 4³ 0.15 µs vs 1.3 µs, 16³ 0.8 vs 1.9, 20³ 3.3 vs 1.2,
/// 32³ 4.0 vs 2.2; Gemm.DISABLED_TinyTimings in tests/cpp/ops/test_linalg.cpp prints the comparison.
constexpr int64_t kTinyMacs = 16 * 16 * 16;

}  // namespace

template <typename T>
bool gemm_ready(const MatRef<T>& m) {
  return classify(m).ok;
}
template bool gemm_ready<float>(const MatRef<float>&);
template bool gemm_ready<double>(const MatRef<double>&);

void gemm(const MatRef<float>& a, const MatRef<float>& b, float* c, int64_t ldc, bool accumulate, bool parallel) {
  const int64_t M = a.rows, K = a.cols, N = b.cols;
  STRATA_ASSERT(b.rows == K, "gemm: inner sizes ", K, " and ", b.rows);
  if (M == 0 || N == 0) return;
  if (STRATA_GEMM_TSAN || K == 0 || M * N * K <= kTinyMacs) {
    gemm_blocked<float>(a, b, c, ldc, accumulate, parallel);
    return;
  }
  const SgemmOperand oa = classify(a), ob = classify(b);
  STRATA_ASSERT(oa.ok && ob.ok, "gemm: operand without a unit stride reached sgemm");
  const dnnl_status_t st = dnnl_sgemm(oa.trans, ob.trans, M, N, K, 1.0f, a.data, oa.ld, b.data, ob.ld,
                                      accumulate ? 1.0f : 0.0f, c, std::max<int64_t>(1, ldc));
  STRATA_CHECK(st == dnnl_success, "gemm: dnnl_sgemm failed with status ", static_cast<int>(st), " (M=", M, " N=", N,
               " K=", K, ")");
}

void gemm(const MatRef<double>& a, const MatRef<double>& b, double* c, int64_t ldc, bool accumulate, bool parallel) {
  gemm_blocked<double>(a, b, c, ldc, accumulate, parallel);
}

}  // namespace strata::ops::cpu
