#include "ops/linalg.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "ops/detail/cpu/elementwise.h"
#include "ops/detail/cpu/gemm.h"
#include "ops/detail/op_util.h"

namespace strata {

namespace {

using namespace ops::detail;
using ops::cpu::MatRef;

// ---- batched GEMM over strided views ----------------------------------------------------------------
//
// Note [One batched GEMM for forward and backward]
// Every product of this family, forward or backward, is one call
//     C[c(o)] (+)= A[a(o)] · B[b(o)]   for every index o of the broadcast batch shape,
// where A, B, C have the same rank r = nb + 2 and each batch dim of each is either the broadcast
// size or 1 (size-1 dims broadcast; no expanded views are made). C is fresh and contiguous; when
// several o map to the same C block (C's batch dim is 1: the gradient of a broadcast operand) they
// are summed by GEMMs that accumulate, run in order by one thread. Transposes are transposed views.
// Two folds turn a batch into one large GEMM:
//  - B without batch (weight-like): A's batch and row dims collapse into M (matmul [B,n,k]·[k,m],
//    linear on [..., in], and the gradient w.r.t. such an A);
//  - C without batch and A, B with full batch: the batch collapses into K (the gradient w.r.t. the
//    weight-like operand: Σ_o A[o]ᵀ·G[o] is one [k, B·n]·[B·n, m] product).

/// The stride of the dim obtained by collapsing dims [0, nb) and `inner` of `t` (batch-major), or
/// nullopt when they are not one arithmetic progression. Size-1 dims are ignored.
std::optional<int64_t> fold_stride(const Tensor& t, int64_t nb, int64_t inner) {
  int64_t stride = -1, expected = 0;
  auto visit = [&](int64_t d) {
    if (t.size(d) == 1) return true;
    if (stride < 0) {
      stride = t.stride(d);
      expected = stride * t.size(d);
      return true;
    }
    if (t.stride(d) != expected) return false;
    expected *= t.size(d);
    return true;
  };
  if (!visit(inner)) return std::nullopt;
  for (int64_t d = nb - 1; d >= 0; --d)
    if (!visit(d)) return std::nullopt;
  return stride < 0 ? int64_t{1} : stride;
}

template <typename T>
MatRef<T> mat_of(const Tensor& t, const T* data) {
  const int64_t r = t.dim();
  return {data, t.size(r - 2), t.size(r - 1), t.stride(r - 2), t.stride(r - 1)};
}

/// `t` itself when sgemm can read its matrices through strides, else a contiguous copy.
Tensor gemm_operand(const Tensor& t) {
  if (t.dtype() == DType::f64) return t;  // the blocked kernel packs any strides
  const int64_t r = t.dim();
  const MatRef<float> m{nullptr, t.size(r - 2), t.size(r - 1), t.stride(r - 2), t.stride(r - 1)};
  return ops::cpu::gemm_ready(m) ? t : t.contiguous();
}

template <typename T>
void batched_gemm_kernel(const Tensor& C, const Tensor& A, const Tensor& B) {
  const int64_t r = C.dim(), nb = r - 2;
  Dims bs(static_cast<std::size_t>(nb));
  int64_t nbatch = 1;
  bool a_full = true, b_full = true, c_full = true, b_none = true, c_none = true;
  for (int64_t d = 0; d < nb; ++d) {
    int64_t s = 1;  // the broadcast size: the one that is not 1 (0 broadcasts with 1 to 0)
    for (int64_t x : {A.size(d), B.size(d), C.size(d)})
      if (x != 1) s = x;
    bs[static_cast<std::size_t>(d)] = s;
    nbatch *= s;
    a_full = a_full && A.size(d) == s;
    b_full = b_full && B.size(d) == s;
    c_full = c_full && C.size(d) == s;
    b_none = b_none && B.size(d) == 1;
    c_none = c_none && C.size(d) == 1;
  }
  const int64_t n = C.size(r - 2), m = C.size(r - 1), k = A.size(r - 1);
  T* c = static_cast<T*>(C.data_ptr());
  const T* a = static_cast<const T*>(A.data_ptr());
  const T* b = static_cast<const T*>(B.data_ptr());
  if (C.numel() == 0) return;
  if (nbatch == 0) {  // C is a gradient of a broadcast operand that met an empty batch
    std::fill(c, c + C.numel(), T(0));
    return;
  }
  const MatRef<T> am = mat_of<T>(A, a), bm = mat_of<T>(B, b);
  // M fold (Note [One batched GEMM for forward and backward]).
  if (c_full && a_full && b_none) {
    if (auto rs = fold_stride(A, nb, r - 2)) {
      const MatRef<T> af{a, nbatch * n, k, *rs, A.stride(r - 1)};
      if (std::is_same_v<T, double> || ops::cpu::gemm_ready(af)) {
        ops::cpu::gemm(af, bm, c, m, /*accumulate=*/false);
        return;
      }
    }
  }
  // K fold.
  if (c_none && a_full && b_full) {
    auto cs = fold_stride(A, nb, r - 1);
    auto rs = fold_stride(B, nb, r - 2);
    if (cs && rs) {
      const MatRef<T> af{a, n, nbatch * k, A.stride(r - 2), *cs};
      const MatRef<T> bf{b, nbatch * k, m, *rs, B.stride(r - 1)};
      if (std::is_same_v<T, double> || (ops::cpu::gemm_ready(af) && ops::cpu::gemm_ready(bf))) {
        ops::cpu::gemm(af, bf, c, m, /*accumulate=*/false);
        return;
      }
    }
  }
  // One GEMM per batch index; entries grouped by their C block.
  struct Entry {
    int64_t c, a, b;
  };
  std::vector<Entry> entries(static_cast<std::size_t>(nbatch));
  {
    Dims idx(static_cast<std::size_t>(nb), 0);
    const int64_t c_mat = n * m;
    for (int64_t o = 0; o < nbatch; ++o) {
      Entry e{0, 0, 0};
      int64_t c_lin = 0;
      for (int64_t d = 0; d < nb; ++d) {
        const int64_t i = idx[static_cast<std::size_t>(d)];
        if (A.size(d) != 1) e.a += i * A.stride(d);
        if (B.size(d) != 1) e.b += i * B.stride(d);
        c_lin = c_lin * C.size(d) + (C.size(d) != 1 ? i : 0);
      }
      e.c = c_lin * c_mat;
      entries[static_cast<std::size_t>(o)] = e;
      for (int64_t d = nb - 1; d >= 0; --d) {  // next index, last dim fastest
        if (++idx[static_cast<std::size_t>(d)] < bs[static_cast<std::size_t>(d)]) break;
        idx[static_cast<std::size_t>(d)] = 0;
      }
    }
  }
  if (!c_full)
    std::stable_sort(entries.begin(), entries.end(), [](const Entry& x, const Entry& y) { return x.c < y.c; });
  std::vector<int64_t> group_start;
  for (std::size_t i = 0; i < entries.size(); ++i)
    if (i == 0 || entries[i].c != entries[i - 1].c) group_start.push_back(static_cast<int64_t>(i));
  group_start.push_back(static_cast<int64_t>(entries.size()));
  const int64_t ngroups = static_cast<int64_t>(group_start.size()) - 1;
  const int64_t macs = std::max<int64_t>(1, n * m * k);
  auto run_groups = [&](int64_t g0, int64_t g1, bool inner_parallel) {
    for (int64_t g = g0; g < g1; ++g) {
      for (int64_t i = group_start[static_cast<std::size_t>(g)]; i < group_start[static_cast<std::size_t>(g) + 1];
           ++i) {
        const Entry& e = entries[static_cast<std::size_t>(i)];
        MatRef<T> ai = am, bi = bm;
        ai.data = a + e.a;
        bi.data = b + e.b;
        ops::cpu::gemm(ai, bi, c + e.c, m, /*accumulate=*/i != group_start[static_cast<std::size_t>(g)],
                       inner_parallel);
      }
    }
  };
  // Small products: parallel over C blocks, one thread per GEMM. Large ones: the GEMM is parallel.
  if (ngroups > 1 && macs < (int64_t{1} << 21)) {
    parallel_for(ngroups, std::max<int64_t>(1, (int64_t{1} << 18) / macs),
                 [&](int64_t g0, int64_t g1) { run_groups(g0, g1, false); });
  } else {
    run_groups(0, ngroups, true);
  }
}

/// C = batched A·B (Note [One batched GEMM for forward and backward]); C: fresh contiguous output.
void batched_gemm(const Tensor& C, const Tensor& A_in, const Tensor& B_in) {
  const Tensor A = gemm_operand(A_in), B = gemm_operand(B_in);
  PinSet pins;
  pins.add(A, AccessMode::Read).add(B, AccessMode::Read).add(C, AccessMode::Write);
  pins.acquire();
  dispatch_float(C.dtype(), [&](auto t) {
    using T = decltype(t);
    batched_gemm_kernel<T>(C, A, B);
  });
}

/// `t` with size-1 dims prepended up to rank `rank` (a raw view).
Tensor pad_rank(Tensor t, int64_t rank) {
  while (t.dim() < rank) t = t.unsqueeze(0);
  return t;
}

Tensor mT(const Tensor& t) { return t.transpose(-1, -2); }

Dims concat(const Dims& batch, std::initializer_list<int64_t> tail) {
  Dims d = batch;
  for (int64_t x : tail) d.push_back(x);
  return d;
}

/// Fresh output of `sizes` holding batched A·B.
Tensor product(const Dims& sizes, const Tensor& A, const Tensor& B) {
  Tensor C = empty_output(sizes, A.dtype());
  batched_gemm(C, A, B);
  return C;
}

// ---- matmul ---------------------------------------------------------------------------------------

/// a and b as rank-r operands (1-D made [1, k] / [k, 1], batch dims padded with 1s).
struct MatmulOperands {
  Tensor A, B;
  Dims batch;      // broadcast batch shape
  Dims out_sizes;  // matmul's result shape
  int64_t n = 0, m = 0;
};

MatmulOperands matmul_operands(const Tensor& a, const Tensor& b) {
  MatmulOperands op;
  Tensor a2 = a.dim() == 1 ? a.unsqueeze(0) : a;
  Tensor b2 = b.dim() == 1 ? b.unsqueeze(1) : b;
  const int64_t nb = std::max(a2.dim(), b2.dim()) - 2;
  op.A = pad_rank(a2, nb + 2);
  op.B = pad_rank(b2, nb + 2);
  for (int64_t d = 0; d < nb; ++d) {
    const int64_t sa = op.A.size(d), sb = op.B.size(d);
    STRATA_CHECK(sa == sb || sa == 1 || sb == 1, "matmul: cannot broadcast the batch dimensions of ", a.describe(),
                 " and ", b.describe());
    op.batch.push_back(sa == 1 ? sb : sa);
  }
  op.n = op.A.size(-2);
  op.m = op.B.size(-1);
  op.out_sizes = op.batch;
  if (a.dim() > 1) op.out_sizes.push_back(op.n);
  if (b.dim() > 1) op.out_sizes.push_back(op.m);
  return op;
}

// ---- linear's epilogue and activation backward ----------------------------------------------------

template <typename T>
inline T gelu_exact(T v) {
  return T(0.5) * v * (T(1) + std::erf(v * T(M_SQRT1_2)));
}
template <typename T>
inline T gelu_grad(T z) {
  const T cdf = T(0.5) * (T(1) + std::erf(z * T(M_SQRT1_2)));
  const T pdf = std::exp(T(-0.5) * z * z) * T(0.3989422804014327);  // 1/√(2π)
  return cdf + z * pdf;
}

/// y[i, j] = f(z[i, j] + bias[j]) over M rows of N (bias may be null; y may be z). If `zb` is
/// non-null it receives z + bias (the pre-activation GELU's backward needs).
template <typename T, typename F>
void epilogue_rows(const T* z, const T* bias, T* y, T* zb, int64_t M, int64_t N, F f) {
  parallel_for(M, std::max<int64_t>(1, 32768 / std::max<int64_t>(1, N)), [&](int64_t r0, int64_t r1) {
    for (int64_t i = r0; i < r1; ++i) {
      const T* zi = z + i * N;
      T* yi = y + i * N;
      if (zb != nullptr) {
        T* zbi = zb + i * N;
        for (int64_t j = 0; j < N; ++j) {
          const T v = zi[j] + bias[j];
          zbi[j] = v;
          yi[j] = f(v);
        }
      } else if (bias != nullptr) {
        for (int64_t j = 0; j < N; ++j) yi[j] = f(zi[j] + bias[j]);
      } else {
        for (int64_t j = 0; j < N; ++j) yi[j] = f(zi[j]);
      }
    }
  });
}

template <typename T>
void epilogue(const T* z, const T* bias, T* y, T* zb, int64_t M, int64_t N, Activation act) {
  switch (act) {
    case Activation::None: epilogue_rows(z, bias, y, zb, M, N, [](T v) { return v; }); break;
    case Activation::ReLU:  // Note [ReLU and NaN] (ops/unary.cpp): NaN stays NaN, as in PyTorch
      epilogue_rows(z, bias, y, zb, M, N, [](T v) { return ops::cpu::relu_value(v); });
      break;
    case Activation::GELU: epilogue_rows(z, bias, y, zb, M, N, [](T v) { return gelu_exact(v); }); break;
    case Activation::Sigmoid:
      epilogue_rows(z, bias, y, zb, M, N, [](T v) { return T(1) / (T(1) + std::exp(-v)); });
      break;
    case Activation::Tanh: epilogue_rows(z, bias, y, zb, M, N, [](T v) { return std::tanh(v); }); break;
  }
}

/// grad · act'(.) where `s` is the saved output (ReLU, Sigmoid, Tanh) or pre-activation (GELU).
Tensor activation_backward(const Tensor& grad_in, const Tensor& s, Activation act) {
  const Tensor g = grad_in.contiguous();
  Tensor gz = empty_output(s.sizes(), s.dtype());
  PinSet pins;
  pins.add(g, AccessMode::Read).add(s, AccessMode::Read).add(gz, AccessMode::Write);
  pins.acquire();
  dispatch_float(s.dtype(), [&](auto t) {
    using T = decltype(t);
    const T* gp = static_cast<const T*>(g.data_ptr());
    const T* sp = static_cast<const T*>(s.data_ptr());
    T* out = static_cast<T*>(gz.data_ptr());
    auto run = [&](auto f) {
      parallel_for(s.numel(), 32768, [&](int64_t i0, int64_t i1) {
        for (int64_t i = i0; i < i1; ++i) out[i] = f(gp[i], sp[i]);
      });
    };
    switch (act) {
      case Activation::None: run([](T gv, T) { return gv; }); break;
      case Activation::ReLU: run([](T gv, T y) { return ops::cpu::relu_passes_grad(y) ? gv : T(0); }); break;
      case Activation::GELU: run([](T gv, T z) { return gv * gelu_grad(z); }); break;
      case Activation::Sigmoid: run([](T gv, T y) { return gv * y * (T(1) - y); }); break;
      case Activation::Tanh: run([](T gv, T y) { return gv * (T(1) - y * y); }); break;
    }
  });
  return gz;
}

/// Column sums of a contiguous [M, N] gradient (viewed from any leading shape): the bias gradient.
Tensor column_sums(const Tensor& gz, int64_t N) {
  Tensor out = empty_output({N}, gz.dtype());
  const int64_t M = N == 0 ? 0 : gz.numel() / N;
  PinSet pins;
  pins.add(gz, AccessMode::Read).add(out, AccessMode::Write);
  pins.acquire();
  dispatch_float(gz.dtype(), [&](auto t) {
    using T = decltype(t);
    const T* g = static_cast<const T*>(gz.data_ptr());
    T* o = static_cast<T*>(out.data_ptr());
    constexpr int64_t kCols = 256;
    const int64_t nblocks = (N + kCols - 1) / kCols;
    parallel_for(nblocks, std::max<int64_t>(1, 65536 / std::max<int64_t>(1, M * kCols)), [&](int64_t b0, int64_t b1) {
      for (int64_t blk = b0; blk < b1; ++blk) {
        const int64_t j0 = blk * kCols, w = std::min(kCols, N - j0);
        T acc[kCols];
        for (int64_t j = 0; j < w; ++j) acc[j] = T(0);
        for (int64_t i = 0; i < M; ++i) {
          const T* gi = g + i * N + j0;
          for (int64_t j = 0; j < w; ++j) acc[j] += gi[j];
        }
        for (int64_t j = 0; j < w; ++j) o[j0 + j] = acc[j];
      }
    });
  });
  return out;
}

// ---- linear_stack's row blocks ----------------------------------------------------------------------
//
// Note [Row blocks through a linear stack]
// Inference through an MLP at a large batch (DLRM's test pass: 16384 rows through 13-512-256-64-16
// and 367-512-256-1) ran each layer as one GEMM over all rows followed by the bias + activation
// epilogue as a second pass. Every activation (16384 x 512 f32 = 32 MiB, the whole L3) went out
// to DRAM, came back for the epilogue and again for the next layer; and oneDNN's sgemm, splitting
// each product across both threads, ran the 512 -> 256 layers at 172 GFLOP/s where one thread
// with a block of rows to itself runs them at 200 (bench/RESULTS.md, issue 25's evaluation).
// Without autograd nothing reads the intermediate activations again, so linear_stack gives each
// thread whole blocks of rows instead and runs every layer on a block before it takes the next:
// the GEMM on that thread alone (run_serially, Note [Serial regions] in core/threading.h), the
// epilogue right after on the block's output while it is in L2, the activations alternating
// between two per-thread buffers of about kBlockBytes, only the last layer writing the output.
// A block holds kBlockBytes / (widest row) rows, kMinBlockRows..kMaxBlockRows, and blocks are
// balanced (no small tail that would take sgemm's tiny-product path). The row blocks need at
// least two blocks per thread (fewer leave a thread idle); below that, and whenever autograd
// records or an op recorder listens, the layers run as linear calls. Each output element is the
// same sum of the same products as in linear; whether sgemm adds them in the same order for a
// block as for the whole batch is its choice (on the DLRM's layers the results were bitwise
// equal), so tests compare the two paths within f32 rounding.

constexpr int64_t kBlockBytes = int64_t{512} << 10;
constexpr int64_t kMinBlockRows = 16;
constexpr int64_t kMaxBlockRows = 512;

/// Raw views of one layer's operands (pinned by the caller).
template <typename T>
struct StackLayer {
  const T* weight;  // [out, in], contiguous
  const T* bias;    // [out] or null
  int64_t in, out;
  Activation act;
};

/// Rows [r0, r1) of x [M, in] through every layer; the last writes y's rows, the others alternate
/// between buf[0] and buf[1] (each (r1 - r0) x the widest layer's output).
template <typename T>
void stack_block(const T* x, T* y, const std::vector<StackLayer<T>>& layers, int64_t r0, int64_t r1, T* const buf[2]) {
  const int64_t m = r1 - r0;
  const T* a = x + r0 * layers.front().in;
  for (std::size_t i = 0; i < layers.size(); ++i) {
    const StackLayer<T>& l = layers[i];
    T* c = i + 1 == layers.size() ? y + r0 * l.out : buf[i % 2];
    const MatRef<T> am{a, m, l.in, l.in, 1}, wt{l.weight, l.in, l.out, 1, l.in};  // x-block, weightᵀ
    ops::cpu::gemm(am, wt, c, l.out, /*accumulate=*/false, /*parallel=*/false);
    if (l.bias != nullptr || l.act != Activation::None) epilogue<T>(c, l.bias, c, nullptr, m, l.out, l.act);
    a = c;
  }
}

/// x [M, in] through the layers into y [M, out_last] in `blocks` balanced row blocks, each thread
/// running its blocks serially (Note [Row blocks through a linear stack]).
template <typename T>
void stack_rows(const T* x, T* y, const std::vector<StackLayer<T>>& layers, int64_t M, int64_t blocks) {
  int64_t width = 0;
  for (const StackLayer<T>& l : layers) width = std::max(width, l.out);
  const int64_t rows = (M + blocks - 1) / blocks;  // the largest block
  const auto start = [&](int64_t b) { return b * M / blocks; };
  parallel_for(blocks, 1, [&](int64_t b0, int64_t b1) {
    const std::size_t n = static_cast<std::size_t>(rows * width);
    std::unique_ptr<T[]> scratch(new T[2 * n]);  // written before read
    T* const buf[2] = {scratch.get(), scratch.get() + n};
    run_serially([&] {
      for (int64_t b = b0; b < b1; ++b) stack_block<T>(x, y, layers, start(b), start(b + 1), buf);
    });
  });
}

/// linear_stack's argument checks: linear's, with the layer named and its input the previous output.
void check_stack(const Tensor& x, std::span<const LinearLayer> layers) {
  check_float("linear_stack", x, "input");
  STRATA_CHECK(x.dim() >= 1, "linear_stack: input must be at least 1-D, got ", x.describe());
  STRATA_CHECK(!layers.empty(), "linear_stack: no layers");
  int64_t in = x.size(-1);
  for (std::size_t i = 0; i < layers.size(); ++i) {
    const LinearLayer& l = layers[i];
    const std::string w = "layer " + std::to_string(i) + "'s weight", b = "layer " + std::to_string(i) + "'s bias";
    check_float("linear_stack", l.weight, w.c_str());
    check_same_dtype("linear_stack", x, l.weight);
    check_rank("linear_stack", l.weight, 2, w.c_str());
    STRATA_CHECK(l.weight.size(1) == in, "linear_stack: ", w, " ", l.weight.describe(), " does not take ",
                 i == 0 ? "the input " + x.describe() : "layer " + std::to_string(i - 1) + "'s output",
                 " (in_features ", in, " and ", l.weight.size(1), ")");
    if (l.bias.defined()) {
      check_float("linear_stack", l.bias, b.c_str());
      check_same_dtype("linear_stack", x, l.bias);
      STRATA_CHECK(l.bias.dim() == 1 && l.bias.size(0) == l.weight.size(0), "linear_stack: ", b, " must be [",
                   l.weight.size(0), "] for weight ", l.weight.describe(), ", got ", l.bias.describe());
    }
    in = l.weight.size(0);
  }
}

/// linear_stack_blocks of checked arguments: at least two blocks per thread, and nothing that records
/// (Note [Row blocks through a linear stack]).
int64_t row_blocks(const Tensor& x, std::span<const LinearLayer> layers) {
  TensorList operands{x};
  int64_t width = x.size(-1);
  for (const LinearLayer& l : layers) {
    operands.push_back(l.weight);
    operands.push_back(l.bias);
    width = std::max(width, l.weight.size(0));
  }
  if (autograd::needs_grad(operands) || op_recorder() != nullptr) return 0;
  const int64_t M = x.size(-1) == 0 ? 0 : x.numel() / x.size(-1);
  const int64_t elem = static_cast<int64_t>(x.itemsize());
  const int64_t rows = std::clamp(kBlockBytes / std::max<int64_t>(1, width * elem), kMinBlockRows, kMaxBlockRows);
  const int64_t blocks = (M + rows - 1) / rows;
  return blocks >= 2 * int64_t{get_num_threads()} ? blocks : 0;
}

}  // namespace

// ---- public ops -------------------------------------------------------------------------------------

Tensor matmul(const Tensor& a, const Tensor& b) {
  check_backend(OpKind::matmul);
  check_float("matmul", a, "first argument");
  check_float("matmul", b, "second argument");
  check_same_dtype("matmul", a, b);
  STRATA_CHECK(a.dim() >= 1 && b.dim() >= 1, "matmul: both arguments must be at least 1-D, got ", a.describe(), " and ",
               b.describe());
  const int64_t ka = a.size(-1), kb = b.dim() == 1 ? b.size(0) : b.size(-2);
  STRATA_CHECK(ka == kb, "matmul: shapes cannot be multiplied: ", a.describe(), " and ", b.describe(),
               " (inner dimensions ", ka, " and ", kb, ")");
  const MatmulOperands op = matmul_operands(a, b);
  Tensor out = product(concat(op.batch, {op.n, op.m}), op.A, op.B).view(op.out_sizes);
  if (autograd::needs_grad({&a, &b})) {
    auto node =
        autograd::make_node("MatmulBackward", {&a, &b}, [](autograd::Node& n, const TensorList& g) -> TensorList {
          const Tensor a = n.saved(0), b = n.saved(1);
          const MatmulOperands op = matmul_operands(a, b);
          const Tensor G = g[0].reshape(concat(op.batch, {op.n, op.m}));
          Tensor ga, gb;
          if (n.needs_input_grad(0)) ga = product(op.A.sizes(), G, mT(op.B)).view(a.sizes());
          if (n.needs_input_grad(1)) gb = product(op.B.sizes(), mT(op.A), G).view(b.sizes());
          return {ga, gb};
        });
    node->save(a);
    node->save(b);
    autograd::set_history({&out}, node);
  }
  if (OpRecorder* rec = op_recorder()) rec->matmul(a, b, out);  // Note [Op recording hook]
  return out;
}

Tensor bmm(const Tensor& a, const Tensor& b) {
  check_backend(OpKind::bmm);
  check_float("bmm", a, "first argument");
  check_float("bmm", b, "second argument");
  check_same_dtype("bmm", a, b);
  check_rank("bmm", a, 3, "first argument");
  check_rank("bmm", b, 3, "second argument");
  STRATA_CHECK(a.size(0) == b.size(0), "bmm: batch sizes differ: ", a.describe(), " and ", b.describe());
  STRATA_CHECK(a.size(2) == b.size(1), "bmm: shapes cannot be multiplied: ", a.describe(), " and ", b.describe(),
               " (inner dimensions ", a.size(2), " and ", b.size(1), ")");
  Tensor out = product({a.size(0), a.size(1), b.size(2)}, a, b);
  if (autograd::needs_grad({&a, &b})) {
    auto node = autograd::make_node("BmmBackward", {&a, &b}, [](autograd::Node& n, const TensorList& g) -> TensorList {
      const Tensor a = n.saved(0), b = n.saved(1);
      Tensor ga, gb;
      if (n.needs_input_grad(0)) ga = product(a.sizes(), g[0], mT(b));
      if (n.needs_input_grad(1)) gb = product(b.sizes(), mT(a), g[0]);
      return {ga, gb};
    });
    node->save(a);
    node->save(b);
    autograd::set_history({&out}, node);
  }
  return out;
}

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias, Activation act) {
  check_backend(OpKind::linear);
  check_float("linear", x, "input");
  check_float("linear", weight, "weight");
  check_same_dtype("linear", x, weight);
  if (bias.defined()) {
    check_float("linear", bias, "bias");
    check_same_dtype("linear", x, bias);
  }
  STRATA_CHECK(x.dim() >= 1, "linear: input must be at least 1-D, got ", x.describe());
  check_rank("linear", weight, 2, "weight");
  const int64_t in = weight.size(1), out_features = weight.size(0);
  STRATA_CHECK(x.size(-1) == in, "linear: input ", x.describe(), " does not match weight ", weight.describe(),
               " (in_features ", x.size(-1), " and ", in, ")");
  STRATA_CHECK(!bias.defined() || (bias.dim() == 1 && bias.size(0) == out_features), "linear: bias must be [",
               out_features, "] for weight ", weight.describe(), ", got ", bias.describe());

  const Tensor X = x.dim() == 1 ? x.unsqueeze(0) : x;
  const int64_t r = X.dim();
  Dims y_sizes = x.sizes();
  y_sizes.back() = out_features;
  Dims z_sizes = X.sizes();
  z_sizes.back() = out_features;
  Tensor z = product(z_sizes, X, pad_rank(weight.t(), r));

  const bool grad = autograd::needs_grad({&x, &weight, &bias});
  const bool keep_z = grad && act == Activation::GELU;  // GELU's backward needs the pre-activation
  Tensor y = (act == Activation::None || !keep_z) ? z : empty_output(z_sizes, z.dtype());
  if (bias.defined() || act != Activation::None) {
    const Tensor b = bias.defined() ? bias.contiguous() : Tensor();
    PinSet pins;
    pins.add(z, AccessMode::Write).add(y, AccessMode::Write);
    if (b.defined()) pins.add(b, AccessMode::Read);
    pins.acquire();
    const int64_t M = out_features == 0 ? 0 : z.numel() / out_features;
    dispatch_float(z.dtype(), [&](auto t) {
      using T = decltype(t);
      T* zp = static_cast<T*>(z.data_ptr());
      const T* bp = b.defined() ? static_cast<const T*>(b.data_ptr()) : nullptr;
      if (keep_z && bp != nullptr) {
        epilogue<T>(zp, bp, static_cast<T*>(y.data_ptr()), zp, M, out_features, act);
      } else {
        epilogue<T>(zp, bp, static_cast<T*>(y.data_ptr()), nullptr, M, out_features, act);
      }
    });
  }
  y = y.view(y_sizes);

  if (grad) {
    auto node = autograd::make_node(
        "LinearBackward", {&x, &weight, &bias}, [act](autograd::Node& n, const TensorList& g) -> TensorList {
          const Tensor x = n.saved(0), w = n.saved(1);
          const Tensor X = x.dim() == 1 ? x.unsqueeze(0) : x;
          const int64_t r = X.dim(), out_features = w.size(0);
          Dims z_sizes = X.sizes();
          z_sizes.back() = out_features;
          const Tensor G = g[0].reshape(z_sizes);
          const Tensor gz = act == Activation::None ? G : activation_backward(G, n.saved(2).view(z_sizes), act);
          Tensor gx, gw, gb;
          if (n.needs_input_grad(0)) gx = product(X.sizes(), gz, pad_rank(w, r)).view(x.sizes());
          if (n.needs_input_grad(1)) {
            Dims w_sizes(static_cast<std::size_t>(r - 2), 1);
            w_sizes.push_back(out_features);
            w_sizes.push_back(w.size(1));
            gw = product(w_sizes, mT(gz), X).view(w.sizes());
          }
          if (n.needs_input_grad(2)) gb = column_sums(gz.contiguous(), out_features);
          return {gx, gw, gb};
        });
    node->save(x);
    node->save(weight);
    if (act == Activation::GELU)
      node->save(z);
    else if (act != Activation::None)
      node->save(y);
    autograd::set_history({&y}, node);
  }
  if (OpRecorder* rec = op_recorder()) rec->linear(x, weight, bias, act, y);  // Note [Op recording hook]
  return y;
}

int64_t linear_stack_blocks(const Tensor& x, std::span<const LinearLayer> layers) {
  check_stack(x, layers);
  return row_blocks(x, layers);
}

Tensor linear_stack(const Tensor& x, std::span<const LinearLayer> layers) {
  check_backend(OpKind::linear);
  check_stack(x, layers);
  const int64_t blocks = row_blocks(x, layers);
  if (blocks == 0) {
    Tensor y = x;
    for (const LinearLayer& l : layers) y = linear(y, l.weight, l.bias, l.act);
    return y;
  }
  const int64_t in = x.size(-1), M = x.numel() / in;
  const Tensor X = x.contiguous();
  std::vector<LinearLayer> dense;  // contiguous operands
  for (const LinearLayer& l : layers)
    dense.push_back({l.weight.contiguous(), l.bias.defined() ? l.bias.contiguous() : Tensor(), l.act});
  Dims y_sizes = x.sizes();
  y_sizes.back() = layers.back().weight.size(0);
  Tensor y = empty_output(y_sizes, x.dtype());
  PinSet pins;
  pins.add(X, AccessMode::Read).add(y, AccessMode::Write);
  for (const LinearLayer& l : dense) {
    pins.add(l.weight, AccessMode::Read);
    if (l.bias.defined()) pins.add(l.bias, AccessMode::Read);
  }
  pins.acquire();
  dispatch_float(x.dtype(), [&](auto t) {
    using T = decltype(t);
    std::vector<StackLayer<T>> raw;
    for (const LinearLayer& l : dense)
      raw.push_back({static_cast<const T*>(l.weight.data_ptr()),
                     l.bias.defined() ? static_cast<const T*>(l.bias.data_ptr()) : nullptr, l.weight.size(1),
                     l.weight.size(0), l.act});
    stack_rows<T>(static_cast<const T*>(X.data_ptr()), static_cast<T*>(y.data_ptr()), raw, M, blocks);
  });
  return y;
}

}  // namespace strata
