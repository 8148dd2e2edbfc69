#include "ops/conv.h"

#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <vector>

#include "autograd/engine.h"
#include "ops/binary.h"
#include "ops/detail/cpu/dnnl_engine.h"
#include "ops/detail/cpu/primitive_cache.h"
#include "ops/detail/op_util.h"
#include "ops/resample.h"
#include "ops/shape_ops.h"

namespace strata {

namespace {

using namespace ops::detail;
namespace cpu = ops::cpu;

constexpr const char* kOp = "conv2d";

/// Every size of one conv2d problem (batch N = 1 for unbatched inputs).
struct Geom {
  int64_t N, C, H, W, O, KH, KW, OH, OW, sh, sw, ph, pw, dh, dw, G;
  /// False for a transposed conv whose output_padding reaches its stride (Note [Transposed conv
  /// as the conv's adjoint]): H is then not the size whose conv output is OH, which oneDNN checks.
  bool conv_consistent = true;
  int64_t Cg() const { return C / G; }
  int64_t Og() const { return O / G; }
  int64_t K() const { return Cg() * KH * KW; }  // GEMM reduction length per group
  int64_t P() const { return OH * OW; }         // output pixels per image
  bool is_pointwise() const { return KH == 1 && KW == 1 && sh == 1 && sw == 1 && ph == 0 && pw == 0; }
  double macs() const { return double(N) * O * P() * K(); }
};

std::array<int64_t, 2> pair_arg(IntArrayRef v, const char* what) {
  STRATA_CHECK(v.size() == 1 || v.size() == 2, kOp, ": ", what, " must have 1 or 2 elements, got ", v);
  return v.size() == 1 ? std::array<int64_t, 2>{v[0], v[0]} : std::array<int64_t, 2>{v[0], v[1]};
}

/// Validates everything and returns the geometry (no backend check, no dtype check on x/w).
Geom make_geom(const Tensor& x, const Tensor& w, IntArrayRef stride, IntArrayRef padding, IntArrayRef dilation,
               int64_t groups) {
  STRATA_CHECK(x.dim() == 3 || x.dim() == 4, kOp, ": input must be 3-D (C, H, W) or 4-D (N, C, H, W), got ",
               x.describe());
  STRATA_CHECK(w.dim() == 4, kOp, ": weight must be 4-D (O, C/groups, KH, KW), got ", w.describe());
  const auto s = pair_arg(stride, "stride");
  const auto p = pair_arg(padding, "padding");
  const auto d = pair_arg(dilation, "dilation");
  STRATA_CHECK(s[0] > 0 && s[1] > 0, kOp, ": stride must be positive, got ", stride);
  STRATA_CHECK(d[0] > 0 && d[1] > 0, kOp, ": dilation must be positive, got ", dilation);
  STRATA_CHECK(p[0] >= 0 && p[1] >= 0, kOp, ": padding must be non-negative, got ", padding);
  STRATA_CHECK(groups > 0, kOp, ": groups must be positive, got ", groups);
  const bool batched = x.dim() == 4;
  Geom g{};
  g.N = batched ? x.size(0) : 1;
  g.C = x.size(batched ? 1 : 0);
  g.H = x.size(batched ? 2 : 1);
  g.W = x.size(batched ? 3 : 2);
  g.O = w.size(0);
  g.KH = w.size(2);
  g.KW = w.size(3);
  g.sh = s[0], g.sw = s[1], g.ph = p[0], g.pw = p[1], g.dh = d[0], g.dw = d[1], g.G = groups;
  STRATA_CHECK(g.C % groups == 0, kOp, ": groups=", groups, " does not divide the ", g.C, " input channels of ",
               x.describe());
  STRATA_CHECK(g.O % groups == 0, kOp, ": groups=", groups, " does not divide the ", g.O, " output channels of weight ",
               w.describe());
  STRATA_CHECK(w.size(1) * groups == g.C, kOp, ": input ", x.describe(), " has ", g.C, " channels but weight ",
               w.describe(), " with groups=", groups, " expects ", w.size(1) * groups);
  STRATA_CHECK(g.KH > 0 && g.KW > 0 && g.O > 0, kOp, ": weight ", w.describe(), " has an empty kernel");
  const int64_t eh = g.dh * (g.KH - 1) + 1, ew = g.dw * (g.KW - 1) + 1;
  const int64_t nh = g.H + 2 * g.ph - eh, nw = g.W + 2 * g.pw - ew;
  STRATA_CHECK(nh >= 0 && nw >= 0, kOp, ": output size is not positive for input ", x.describe(), " and weight ",
               w.describe(), " (padding ", padding, ", dilation ", dilation, ")");
  g.OH = nh / g.sh + 1;
  g.OW = nw / g.sw + 1;
  return g;
}

Dims out_sizes(const Geom& g, bool batched) { return batched ? Dims{g.N, g.O, g.OH, g.OW} : Dims{g.O, g.OH, g.OW}; }

// ---- own kernels: im2col + GEMM ------------------------------------------------------------------

/// Row-major C[M,N] = alpha·op(A)·op(B) + beta·C. f32: dnnl_sgemm (runs on TBB, no SYCL queue),
/// except under TSan, where the uninstrumented TBB workers of libdnnl would be reported
/// (Note [TSan and TBB] in core/threading.cpp); there and for f64 the plain loops below.
template <typename T>
void gemm_loops(bool ta, bool tb, int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t lda, const T* B,
                int64_t ldb, T beta, T* C, int64_t ldc) {
  for (int64_t i = 0; i < M; ++i) {
    T* c = C + i * ldc;
    if (beta == T(0)) {
      std::fill(c, c + N, T(0));
    } else if (beta != T(1)) {
      for (int64_t j = 0; j < N; ++j) c[j] *= beta;
    }
    if (!tb) {
      for (int64_t k = 0; k < K; ++k) {
        const T a = alpha * (ta ? A[k * lda + i] : A[i * lda + k]);
        const T* b = B + k * ldb;
        for (int64_t j = 0; j < N; ++j) c[j] += a * b[j];
      }
    } else {
      for (int64_t j = 0; j < N; ++j) {
        const T* b = B + j * ldb;
        T acc = 0;
        if (!ta) {
          const T* a = A + i * lda;
          for (int64_t k = 0; k < K; ++k) acc += a[k] * b[k];
        } else {
          for (int64_t k = 0; k < K; ++k) acc += A[k * lda + i] * b[k];
        }
        c[j] += alpha * acc;
      }
    }
  }
}

#if defined(__SANITIZE_THREAD__)
constexpr bool kUseSgemm = false;
#else
constexpr bool kUseSgemm = true;
#endif

template <typename T>
void gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t lda, const T* B, int64_t ldb,
          T beta, T* C, int64_t ldc) {
  if constexpr (std::is_same_v<T, float>) {
    if (kUseSgemm) {
      const dnnl_status_t st = dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
      STRATA_CHECK(st == dnnl_success, kOp, ": dnnl_sgemm failed with status ", static_cast<int>(st));
      return;
    }
  }
  gemm_loops<T>(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

/// Valid output range [lo, hi) along one dim for kernel tap offset `off` (input = o·s + off).
inline void valid_range(int64_t off, int64_t s, int64_t in, int64_t out, int64_t& lo, int64_t& hi) {
  lo = off >= 0 ? 0 : (-off + s - 1) / s;
  hi = in - off <= 0 ? 0 : (in - off + s - 1) / s;
  lo = std::min(lo, out);
  hi = std::clamp(hi, lo, out);
}

/// col[(c·KH + kh)·KW + kw][oh·OW + ow] = x[c, oh·sh − ph + kh·dh, ow·sw − pw + kw·dw] (0 outside).
template <typename T>
void im2col(const T* x, T* col, const Geom& g) {
  const int64_t P = g.P();
  for (int64_t c = 0; c < g.Cg(); ++c)
    for (int64_t kh = 0; kh < g.KH; ++kh)
      for (int64_t kw = 0; kw < g.KW; ++kw) {
        T* row = col + ((c * g.KH + kh) * g.KW + kw) * P;
        const int64_t offh = kh * g.dh - g.ph, offw = kw * g.dw - g.pw;
        int64_t h0, h1, w0, w1;
        valid_range(offh, g.sh, g.H, g.OH, h0, h1);
        valid_range(offw, g.sw, g.W, g.OW, w0, w1);
        std::fill(row, row + h0 * g.OW, T(0));
        for (int64_t oh = h0; oh < h1; ++oh) {
          T* r = row + oh * g.OW;
          const T* xr = x + (c * g.H + oh * g.sh + offh) * g.W + offw;
          std::fill(r, r + w0, T(0));
          if (g.sw == 1) {
            std::memcpy(r + w0, xr + w0, sizeof(T) * (w1 - w0));
          } else {
            for (int64_t ow = w0; ow < w1; ++ow) r[ow] = xr[ow * g.sw];
          }
          std::fill(r + w1, r + g.OW, T(0));
        }
        std::fill(row + h1 * g.OW, row + P, T(0));
      }
}

/// The adjoint of im2col: x[c, ...] += col[...] (x zeroed by the caller).
template <typename T>
void col2im(const T* col, T* x, const Geom& g) {
  const int64_t P = g.P();
  for (int64_t c = 0; c < g.Cg(); ++c)
    for (int64_t kh = 0; kh < g.KH; ++kh)
      for (int64_t kw = 0; kw < g.KW; ++kw) {
        const T* row = col + ((c * g.KH + kh) * g.KW + kw) * P;
        const int64_t offh = kh * g.dh - g.ph, offw = kw * g.dw - g.pw;
        int64_t h0, h1, w0, w1;
        valid_range(offh, g.sh, g.H, g.OH, h0, h1);
        valid_range(offw, g.sw, g.W, g.OW, w0, w1);
        for (int64_t oh = h0; oh < h1; ++oh) {
          const T* r = row + oh * g.OW;
          T* xr = x + (c * g.H + oh * g.sh + offh) * g.W + offw;
          if (g.sw == 1) {
            for (int64_t ow = w0; ow < w1; ++ow) xr[ow] += r[ow];
          } else {
            for (int64_t ow = w0; ow < w1; ++ow) xr[ow * g.sw] += r[ow];
          }
        }
      }
}

/// Images per parallel task: enough work per task that small problems stay on one thread.
int64_t batch_grain(const Geom& g) {
  const double per_image = std::max(1.0, g.macs() / double(g.N));
  return std::max<int64_t>(1, static_cast<int64_t>(2e5 / per_image));
}

template <typename T>
void own_forward(const T* x, const T* w, const T* b, T* y, const Geom& g) {
  const int64_t P = g.P(), K = g.K(), Og = g.Og(), Cg = g.Cg();
  parallel_for(g.N, batch_grain(g), [&](int64_t n0, int64_t n1) {
    std::vector<T> col(g.is_pointwise() ? 0 : static_cast<std::size_t>(K * P));
    for (int64_t n = n0; n < n1; ++n)
      for (int64_t gi = 0; gi < g.G; ++gi) {
        const T* xg = x + (n * g.C + gi * Cg) * g.H * g.W;
        const T* B = xg;
        if (!g.is_pointwise()) {
          im2col(xg, col.data(), g);
          B = col.data();
        }
        T* yg = y + (n * g.O + gi * Og) * P;
        gemm<T>(false, false, Og, P, K, T(1), w + gi * Og * K, K, B, P, T(0), yg, P);
        if (b != nullptr)
          for (int64_t o = 0; o < Og; ++o) {
            const T bo = b[gi * Og + o];
            T* yr = yg + o * P;
            for (int64_t p = 0; p < P; ++p) yr[p] += bo;
          }
      }
  });
}

template <typename T>
void own_backward_input(const T* gy, const T* w, T* gx, const Geom& g) {
  const int64_t P = g.P(), K = g.K(), Og = g.Og(), Cg = g.Cg();
  parallel_for(g.N, batch_grain(g), [&](int64_t n0, int64_t n1) {
    std::vector<T> col(g.is_pointwise() ? 0 : static_cast<std::size_t>(K * P));
    for (int64_t n = n0; n < n1; ++n)
      for (int64_t gi = 0; gi < g.G; ++gi) {
        T* gxg = gx + (n * g.C + gi * Cg) * g.H * g.W;
        const T* gyg = gy + (n * g.O + gi * Og) * P;
        if (g.is_pointwise()) {
          gemm<T>(true, false, K, P, Og, T(1), w + gi * Og * K, K, gyg, P, T(0), gxg, P);
        } else {
          gemm<T>(true, false, K, P, Og, T(1), w + gi * Og * K, K, gyg, P, T(0), col.data(), P);
          std::fill(gxg, gxg + Cg * g.H * g.W, T(0));
          col2im(col.data(), gxg, g);
        }
      }
  });
}

/// gw (O·K) and gb (O) — either may be null.
template <typename T>
void own_backward_weight(const T* gy, const T* x, T* gw, T* gb, const Geom& g) {
  const int64_t P = g.P(), K = g.K(), Og = g.Og(), Cg = g.Cg();
  if (gw != nullptr) {
    const int64_t wsize = g.O * K;
    const int64_t max_chunks = std::max<int64_t>(1, std::min<int64_t>(g.N, get_num_threads()));
    const int64_t chunks = std::clamp<int64_t>(static_cast<int64_t>(g.macs() / 2e5), 1, max_chunks);
    std::vector<T> partial(static_cast<std::size_t>((chunks - 1) * wsize));
    parallel_for(chunks, 1, [&](int64_t c0, int64_t c1) {
      std::vector<T> col(g.is_pointwise() ? 0 : static_cast<std::size_t>(K * P));
      for (int64_t c = c0; c < c1; ++c) {
        T* acc = c == 0 ? gw : partial.data() + (c - 1) * wsize;
        std::fill(acc, acc + wsize, T(0));
        for (int64_t n = c * g.N / chunks; n < (c + 1) * g.N / chunks; ++n)
          for (int64_t gi = 0; gi < g.G; ++gi) {
            const T* xg = x + (n * g.C + gi * Cg) * g.H * g.W;
            const T* B = xg;
            if (!g.is_pointwise()) {
              im2col(xg, col.data(), g);
              B = col.data();
            }
            gemm<T>(false, true, Og, K, P, T(1), gy + (n * g.O + gi * Og) * P, P, B, P, T(1), acc + gi * Og * K, K);
          }
      }
    });
    for (int64_t c = 1; c < chunks; ++c) {
      const T* p = partial.data() + (c - 1) * wsize;
      for (int64_t i = 0; i < wsize; ++i) gw[i] += p[i];
    }
  }
  if (gb != nullptr) {
    parallel_for(g.O, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, g.N * P)), [&](int64_t o0, int64_t o1) {
      for (int64_t o = o0; o < o1; ++o) {
        T acc = 0;
        for (int64_t n = 0; n < g.N; ++n) {
          const T* r = gy + (n * g.O + o) * P;
          for (int64_t p = 0; p < P; ++p) acc += r[p];
        }
        gb[o] = acc;
      }
    });
  }
}

// ---- oneDNN primitives (f32) ---------------------------------------------------------------------

using dnnl::memory;
using tag = memory::format_tag;

// Kind tags of this file's primitive-cache keys (Note [Primitive cache]).
enum : int64_t { kConvFwd = 1, kConvBwdData = 2, kConvBwdWeights = 3, kConvBwdWeightsReorder = 4 };

struct DnnlGeom {
  memory::dims src, weights, bias, dst, strides, dilates, pad_l, pad_r;
  tag weights_plain;
};

DnnlGeom dnnl_geom(const Geom& g) {
  DnnlGeom d;
  d.src = {g.N, g.C, g.H, g.W};
  d.dst = {g.N, g.O, g.OH, g.OW};
  if (g.G == 1) {
    d.weights = {g.O, g.C, g.KH, g.KW};
    d.weights_plain = tag::oihw;
  } else {
    d.weights = {g.G, g.Og(), g.Cg(), g.KH, g.KW};
    d.weights_plain = tag::goihw;
  }
  d.bias = {g.O};
  d.strides = {g.sh, g.sw};
  d.dilates = {g.dh - 1, g.dw - 1};  // oneDNN counts dilation from 0
  d.pad_l = {g.ph, g.pw};
  d.pad_r = {g.ph, g.pw};  // torch's floor formula: oneDNN checks (H + pl + pr − ek) / s + 1 == OH
  return d;
}

constexpr auto f32 = memory::data_type::f32;

/// The key fields every conv primitive shares (then the per-kind argument formats).
cpu::PrimitiveKey conv_key(int64_t kind, const Geom& g, bool bias) {
  const DnnlGeom d = dnnl_geom(g);
  cpu::PrimitiveKey k;
  k.add(kind).add(static_cast<int64_t>(dnnl::prop_kind::forward_training));
  k.add(d.src, f32, tag::nchw).add(d.weights, f32, tag::any);
  k.add(bias ? d.bias : memory::dims{}, f32, bias ? tag::x : tag::undef);
  k.add(d.dst, f32, tag::nchw);
  k.add(d.strides).add(d.dilates).add(d.pad_l).add(d.pad_r).add(g.G);
  return k;
}

struct ConvFwd {
  dnnl::convolution_forward::primitive_desc pd;
  dnnl::convolution_forward prim;
};
struct ConvBwdData {
  dnnl::convolution_backward_data::primitive_desc pd;
  dnnl::convolution_backward_data prim;
};
struct ConvBwdWeights {
  dnnl::convolution_backward_weights::primitive_desc pd;
  dnnl::convolution_backward_weights prim;
};

std::shared_ptr<const ConvFwd> fwd_primitive(const Geom& g, bool bias, const cpu::PrimitiveKey& key) {
  return cpu::cached_primitive<ConvFwd>(key, [&] {
    const DnnlGeom d = dnnl_geom(g);
    const auto& eng = cpu::dnnl_engine();
    memory::desc src(d.src, f32, tag::nchw), w(d.weights, f32, tag::any), dst(d.dst, f32, tag::nchw);
    memory::desc b = bias ? memory::desc(d.bias, f32, tag::x) : memory::desc();
    dnnl::convolution_forward::primitive_desc pd(eng, dnnl::prop_kind::forward_training,
                                                 dnnl::algorithm::convolution_direct, src, w, b, dst, d.strides,
                                                 d.dilates, d.pad_l, d.pad_r);
    return ConvFwd{pd, dnnl::convolution_forward(pd)};
  });
}

void dnnl_forward(const float* x, const Tensor& w, const float* b, float* y, const Geom& g) {
  const cpu::PrimitiveKey key = conv_key(kConvFwd, g, b != nullptr);
  auto p = fwd_primitive(g, b != nullptr, key);
  const DnnlGeom d = dnnl_geom(g);
  std::unordered_map<int, memory> args;
  args[DNNL_ARG_SRC] = cpu::dnnl_wrap(p->pd.src_desc(), const_cast<float*>(x));
  args[DNNL_ARG_WEIGHTS] =
      cpu::prepared_weights(w, memory::desc(d.weights, f32, d.weights_plain), p->pd.weights_desc(), key);
  if (b != nullptr) args[DNNL_ARG_BIAS] = cpu::dnnl_wrap(p->pd.bias_desc(), const_cast<float*>(b));
  args[DNNL_ARG_DST] = cpu::dnnl_wrap(p->pd.dst_desc(), y);
  cpu::dnnl_execute(p->prim, args);
}

void dnnl_backward_input(const float* gy, const Tensor& w, float* gx, const Geom& g) {
  const cpu::PrimitiveKey fkey = conv_key(kConvFwd, g, false);
  const cpu::PrimitiveKey key = conv_key(kConvBwdData, g, false);
  auto p = cpu::cached_primitive<ConvBwdData>(key, [&] {
    auto hint = fwd_primitive(g, false, fkey);
    const DnnlGeom d = dnnl_geom(g);
    memory::desc src(d.src, f32, tag::nchw), wd(d.weights, f32, tag::any), dst(d.dst, f32, tag::nchw);
    dnnl::convolution_backward_data::primitive_desc pd(cpu::dnnl_engine(), dnnl::algorithm::convolution_direct, src, wd,
                                                       dst, d.strides, d.dilates, d.pad_l, d.pad_r, hint->pd);
    return ConvBwdData{pd, dnnl::convolution_backward_data(pd)};
  });
  const DnnlGeom d = dnnl_geom(g);
  std::unordered_map<int, memory> args;
  args[DNNL_ARG_DIFF_DST] = cpu::dnnl_wrap(p->pd.diff_dst_desc(), const_cast<float*>(gy));
  args[DNNL_ARG_WEIGHTS] =
      cpu::prepared_weights(w, memory::desc(d.weights, f32, d.weights_plain), p->pd.weights_desc(), key);
  args[DNNL_ARG_DIFF_SRC] = cpu::dnnl_wrap(p->pd.diff_src_desc(), gx);
  cpu::dnnl_execute(p->prim, args);
}

/// Diff weights are requested in `any`: with plain oihw and nchw activations oneDNN 3.13 falls back
/// to its reference kernel (measured ~1000x slower). The blocked result is reordered into the
/// plain gradient (one cached reorder primitive, one extra execution per step).
void dnnl_backward_weight(const float* gy, const float* x, float* gw, float* gb, const Geom& g) {
  const bool bias = gb != nullptr;
  const cpu::PrimitiveKey fkey = conv_key(kConvFwd, g, bias);
  cpu::PrimitiveKey key = conv_key(kConvBwdWeights, g, bias);
  key.add(static_cast<int64_t>(tag::any));  // diff weights format
  auto p = cpu::cached_primitive<ConvBwdWeights>(key, [&] {
    auto hint = fwd_primitive(g, bias, fkey);
    const DnnlGeom d = dnnl_geom(g);
    memory::desc src(d.src, f32, tag::nchw), wd(d.weights, f32, tag::any), dst(d.dst, f32, tag::nchw);
    memory::desc bd = bias ? memory::desc(d.bias, f32, tag::x) : memory::desc();
    dnnl::convolution_backward_weights::primitive_desc pd(cpu::dnnl_engine(), dnnl::algorithm::convolution_direct, src,
                                                          wd, bd, dst, d.strides, d.dilates, d.pad_l, d.pad_r,
                                                          hint->pd);
    return ConvBwdWeights{pd, dnnl::convolution_backward_weights(pd)};
  });
  const DnnlGeom d = dnnl_geom(g);
  const memory::desc plain(d.weights, f32, d.weights_plain);
  const bool blocked = p->pd.diff_weights_desc() != plain;
  memory gw_plain = cpu::dnnl_wrap(plain, gw);
  memory gw_mem = blocked ? memory(p->pd.diff_weights_desc(), cpu::dnnl_engine()) : gw_plain;
  std::unordered_map<int, memory> args;
  args[DNNL_ARG_SRC] = cpu::dnnl_wrap(p->pd.src_desc(), const_cast<float*>(x));
  args[DNNL_ARG_DIFF_DST] = cpu::dnnl_wrap(p->pd.diff_dst_desc(), const_cast<float*>(gy));
  args[DNNL_ARG_DIFF_WEIGHTS] = gw_mem;
  if (bias) args[DNNL_ARG_DIFF_BIAS] = cpu::dnnl_wrap(p->pd.diff_bias_desc(), gb);
  cpu::dnnl_execute(p->prim, args);
  if (blocked) {
    cpu::PrimitiveKey rkey = key;
    rkey.fields[0] = kConvBwdWeightsReorder;
    auto r = cpu::cached_primitive<dnnl::reorder>(rkey, [&] {
      return dnnl::reorder(
          dnnl::reorder::primitive_desc(cpu::dnnl_engine(), p->pd.diff_weights_desc(), cpu::dnnl_engine(), plain));
    });
    cpu::dnnl_execute(*r, {{DNNL_ARG_FROM, gw_mem}, {DNNL_ARG_TO, gw_plain}});
  }
}

// Measured (Release, 2 threads, loaded machine; fwd / fwd+bwd in ms, primitive vs own):
//   [64,64,32,32]x[64,64,3,3] p1:    67 / 156  vs 102 / 237   -> primitive
//   [32,128,16,16]x[128,128,3,3] p1: 29 /  66  vs  39 /  83   -> primitive
//   [16,32,16,16]x[32,32,3,3] p1:   1.5 / 3.4  vs 2.2 / 5.0   -> primitive
//   [8,16,8,8]x[16,16,3,3] (1.2M MAC): 0.13 / 0.30 vs 0.20 / 0.38 -> primitive
//   [2,16,8,8]x[16,16,3,3] (0.3M MAC): 0.08 / 0.20 vs 0.05 / 0.11 -> own (SYCL queue overhead)
//   [128,3,32,32]x[64,3,3,3] p1 (first layer, 3 input channels): 38 / 104 vs 17 / 54 -> own
// so primitives from ~1M multiply-adds on, except for very few input channels per group, where
// oneDNN's nchw-source kernels lose to im2col + sgemm.
constexpr double kPrimitiveMinMacs = 1e6;
constexpr int64_t kPrimitiveMinChannels = 8;

bool use_primitives(DType dtype, const Geom& g) {
  if (dtype != DType::f32 || g.N == 0 || g.C == 0) return false;  // oneDNN rejects empty dims
  if (!g.conv_consistent) return false;
  switch (cpu::dnnl_primitives_mode()) {
    case cpu::DnnlPrimitives::Never: return false;
    case cpu::DnnlPrimitives::Always: return true;
    case cpu::DnnlPrimitives::Auto: break;
  }
  return g.macs() >= kPrimitiveMinMacs && g.Cg() >= kPrimitiveMinChannels;
}

// ---- forward / backward drivers ------------------------------------------------------------------

Tensor forward(const Tensor& x, const Tensor& w, const Tensor& b, const Geom& g, bool batched) {
  const Tensor xc = x.contiguous(), wc = w.contiguous(), bc = b.defined() ? b.contiguous() : Tensor();
  Tensor y = empty_output(out_sizes(g, batched), x.dtype());
  PinSet pins;
  pins.add(xc, AccessMode::Read).add(wc, AccessMode::Read).add(y, AccessMode::Write);
  if (bc.defined()) pins.add(bc, AccessMode::Read);
  pins.acquire();
  if (use_primitives(x.dtype(), g)) {
    // The weight reorder cache needs the caller's storage: use `w` itself when it is contiguous.
    dnnl_forward(xc.data<float>(), wc, bc.defined() ? bc.data<float>() : nullptr, y.data<float>(), g);
  } else {
    dispatch_float(x.dtype(), [&](auto t) {
      using T = decltype(t);
      own_forward<T>(xc.data<T>(), wc.data<T>(), bc.defined() ? bc.data<T>() : nullptr, y.data<T>(), g);
    });
  }
  return y;
}

// Note [Conv input gradient in place]
// When the output gradient is the caller's to consume (autograd::reusable_gradient, Note [In-place
// backward]) and has the input's shape and dtype (stride 1 with "same" padding and as many output
// as input channels: VGG's and ResNet's 3x3 convs), the input gradient is written over it. Image n
// of the input gradient reads image n of the output gradient only, so the batch runs in
// kInPlaceChunks chunks: a chunk's input gradient is computed into a staging buffer of one chunk,
// then copied over the chunk's output gradient, which nothing reads afterwards. The backward then
// holds one gradient-sized buffer plus a chunk instead of two buffers, which lowers the backward's
// fast-tier peak (the Auto planner profiles backward growth, so its model sees it). Every image
// goes through the same kernel as in the batched call (oneDNN's per-image results do not depend on
// the batch size; the own kernel loops over images), so the bits are the batched call's: tests
// check both paths.
constexpr int64_t kInPlaceChunks = 8;

bool input_gradient_in_place(const Tensor& gy, const Geom& g, const Dims& x_sizes) {
  return x_sizes.size() == 4 && g.N > 1 && IntArrayRef(gy.sizes()) == IntArrayRef(x_sizes) &&
         autograd::reusable_gradient(gy);
}

Tensor backward_input_in_place(const Tensor& gy, const Tensor& w, const Geom& g) {
  const Tensor wc = w.contiguous();
  const int64_t chunk = (g.N + kInPlaceChunks - 1) / kInPlaceChunks;
  const int64_t image = g.C * g.H * g.W;
  Tensor staging = empty_output({chunk, g.C, g.H, g.W}, gy.dtype());
  PinSet pins;
  pins.add(gy, AccessMode::Read).add(gy, AccessMode::Write).add(wc, AccessMode::Read).add(staging, AccessMode::Write);
  pins.acquire();
  const bool prims = use_primitives(gy.dtype(), g);  // the batched call's choice, for every chunk
  for (int64_t n0 = 0; n0 < g.N; n0 += chunk) {
    Geom gc = g;
    gc.N = std::min(chunk, g.N - n0);
    dispatch_float(gy.dtype(), [&](auto t) {
      using T = decltype(t);
      T* slot = gy.data<T>() + n0 * image;
      T* out = staging.data<T>();
      if constexpr (std::is_same_v<T, float>) {
        if (prims) {
          dnnl_backward_input(slot, wc, out, gc);
          std::memcpy(slot, out, sizeof(T) * static_cast<std::size_t>(gc.N * image));
          return;
        }
      }
      own_backward_input<T>(slot, wc.data<T>(), out, gc);
      std::memcpy(slot, out, sizeof(T) * static_cast<std::size_t>(gc.N * image));
    });
  }
  return gy;
}

/// The input gradient; written over `gy` when Note [Conv input gradient in place] applies and
/// `may_overwrite` (the caller reads `gy` no more).
Tensor backward_input(const Tensor& gy, const Tensor& w, const Geom& g, const Dims& x_sizes,
                      bool may_overwrite = false) {
  if (may_overwrite && input_gradient_in_place(gy, g, x_sizes)) return backward_input_in_place(gy, w, g);
  const Tensor gyc = gy.contiguous(), wc = w.contiguous();
  Tensor gx = empty_output(x_sizes, gy.dtype());
  PinSet pins;
  pins.add(gyc, AccessMode::Read).add(wc, AccessMode::Read).add(gx, AccessMode::Write);
  pins.acquire();
  if (use_primitives(gy.dtype(), g)) {
    dnnl_backward_input(gyc.data<float>(), wc, gx.data<float>(), g);
  } else {
    dispatch_float(gy.dtype(), [&](auto t) {
      using T = decltype(t);
      own_backward_input<T>(gyc.data<T>(), wc.data<T>(), gx.data<T>(), g);
    });
  }
  return gx;
}

void backward_weight(const Tensor& gy, const Tensor& x, const Geom& g, Tensor* gw, Tensor* gb, const Dims& w_sizes) {
  const Tensor gyc = gy.contiguous(), xc = x.contiguous();
  if (gw != nullptr) *gw = empty_output(w_sizes, gy.dtype());
  if (gb != nullptr) *gb = empty_output({g.O}, gy.dtype());
  PinSet pins;
  pins.add(gyc, AccessMode::Read).add(xc, AccessMode::Read);
  if (gw != nullptr) pins.add(*gw, AccessMode::Write);
  if (gb != nullptr) pins.add(*gb, AccessMode::Write);
  pins.acquire();
  if (gw != nullptr && use_primitives(gy.dtype(), g)) {
    dnnl_backward_weight(gyc.data<float>(), xc.data<float>(), gw->data<float>(),
                         gb != nullptr ? gb->data<float>() : nullptr, g);
    return;
  }
  dispatch_float(gy.dtype(), [&](auto t) {
    using T = decltype(t);
    own_backward_weight<T>(gyc.data<T>(), xc.data<T>(), gw != nullptr ? gw->data<T>() : nullptr,
                           gb != nullptr ? gb->data<T>() : nullptr, g);
  });
}

}  // namespace

namespace ops {
bool conv2d_uses_primitives(const Tensor& x, const Tensor& weight, IntArrayRef stride, IntArrayRef padding,
                            IntArrayRef dilation, int64_t groups) {
  return use_primitives(x.dtype(), make_geom(x, weight, stride, padding, dilation, groups));
}
}  // namespace ops

namespace {

Geom checked_geom(const Tensor& x, const Tensor& weight, const Tensor& bias, IntArrayRef stride, IntArrayRef padding,
                  IntArrayRef dilation, int64_t groups) {
  check_backend(OpKind::conv2d);
  check_float(kOp, x, "input");
  check_float(kOp, weight, "weight");
  check_same_dtype(kOp, x, weight);
  const Geom g = make_geom(x, weight, stride, padding, dilation, groups);
  if (bias.defined()) {
    check_float(kOp, bias, "bias");
    check_same_dtype(kOp, x, bias);
    STRATA_CHECK(bias.dim() == 1 && bias.size(0) == g.O, kOp, ": bias must be 1-D with ", g.O,
                 " elements (the output channels of weight ", weight.describe(), "), got ", bias.describe());
  }
  return g;
}

}  // namespace

Tensor conv2d_data_step(const Tensor& x, const Tensor& weight, const Tensor& bias, IntArrayRef stride,
                        IntArrayRef padding, IntArrayRef dilation, int64_t groups) {
  const Geom g = checked_geom(x, weight, bias, stride, padding, dilation, groups);
  Tensor y = forward(x, weight, bias, g, x.dim() == 4);
  if (autograd::needs_grad({&x})) {
    const Dims x_sizes = x.sizes();
    auto node = autograd::make_node("Conv2DInputBackward", {&x},
                                    [g, x_sizes](autograd::Node& n, const TensorList& grads) -> TensorList {
                                      return {backward_input(grads[0], n.saved(0), g, x_sizes,
                                                             /*may_overwrite=*/true)};
                                    });
    node->save(weight);
    autograd::set_history({&y}, node);
  }
  if (OpRecorder* rec = op_recorder())  // Note [Op recording hook]
    rec->conv2d(x, weight, bias, stride, padding, dilation, groups, y);
  return y;
}

Tensor conv2d_weight_step(const Tensor& y, const Tensor& x, const Tensor& weight, const Tensor& bias,
                          IntArrayRef stride, IntArrayRef padding, IntArrayRef dilation, int64_t groups) {
  const Geom g = checked_geom(x, weight, bias, stride, padding, dilation, groups);
  STRATA_CHECK(y.defined(), "conv2d_weight_step: the output is undefined");
  const Dims expected = x.dim() == 4 ? Dims{g.N, g.O, g.OH, g.OW} : Dims{g.O, g.OH, g.OW};
  STRATA_CHECK(y.sizes() == expected && y.dtype() == x.dtype(), "conv2d_weight_step: the output ", y.describe(),
               " is not conv2d's for input ", x.describe(), " and weight ", weight.describe(), " (expected shape ",
               IntArrayRef(expected), ")");
  if (!autograd::needs_grad({&weight, &bias})) return y;  // nothing to compute: x is not kept
  Tensor out = y.detach();                                // y's storage, with this step's history
  {
    const Dims w_sizes = weight.sizes();
    auto node =
        autograd::make_node("Conv2DWeightBackward", {&y, &weight, &bias},
                            [g, w_sizes](autograd::Node& n, const TensorList& grads) -> TensorList {
                              TensorList out(3);
                              if (n.needs_input_grad(1) || n.needs_input_grad(2))
                                backward_weight(grads[0], n.saved(0), g, n.needs_input_grad(1) ? &out[1] : nullptr,
                                                n.needs_input_grad(2) ? &out[2] : nullptr, w_sizes);
                              if (n.needs_input_grad(0)) out[0] = grads[0];
                              return out;
                            });
    node->save(x);
    autograd::set_history({&out}, node);
  }
  return out;
}

Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias, IntArrayRef stride, IntArrayRef padding,
              IntArrayRef dilation, int64_t groups) {
  const Geom g = checked_geom(x, weight, bias, stride, padding, dilation, groups);
  const bool batched = x.dim() == 4;
  Tensor y = forward(x, weight, bias, g, batched);
  if (autograd::needs_grad({&x, &weight, &bias})) {
    auto node = autograd::make_node("Conv2DBackward", {&x, &weight, &bias},
                                    [g](autograd::Node& n, const TensorList& grads) -> TensorList {
                                      const Tensor x = n.saved(0), w = n.saved(1);
                                      TensorList out(3);
                                      // The weight gradient first: the input gradient may then be written over grads[0]
                                      // (Note [Conv input gradient in place]).
                                      if (n.needs_input_grad(1) || n.needs_input_grad(2))
                                        backward_weight(grads[0], x, g, n.needs_input_grad(1) ? &out[1] : nullptr,
                                                        n.needs_input_grad(2) ? &out[2] : nullptr, w.sizes());
                                      if (n.needs_input_grad(0))
                                        out[0] = backward_input(grads[0], w, g, x.sizes(), /*may_overwrite=*/true);
                                      return out;
                                    });
    node->save(x);
    node->save(weight);
    autograd::set_history({&y}, node);
  }
  if (OpRecorder* rec = op_recorder())  // Note [Op recording hook]
    rec->conv2d(x, weight, bias, stride, padding, dilation, groups, y);
  return y;
}

// ---- conv1d --------------------------------------------------------------------------------------

namespace {

int64_t single_arg(IntArrayRef v, const char* op, const char* what) {
  STRATA_CHECK(v.size() == 1, op, ": ", what, " must have 1 element, got ", v);
  return v[0];
}

/// conv1d's checks before it becomes a conv2d with H = 1 (that conv2d checks the rest).
void check_conv1d(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  check_backend(OpKind::conv1d);
  check_float("conv1d", x, "input");
  check_float("conv1d", weight, "weight");
  check_same_dtype("conv1d", x, weight);
  STRATA_CHECK(x.dim() == 2 || x.dim() == 3, "conv1d: expected 2-D (unbatched) or 3-D (batched) input, got ",
               x.describe());
  STRATA_CHECK(weight.dim() == 3, "conv1d: weight must be 3-D (O, C/groups, K), got ", weight.describe());
  if (bias.defined()) check_same_dtype("conv1d", x, bias);
}

/// x or weight with a size-1 dim inserted before the last (a recorded reshape).
Tensor with_unit_height(const Tensor& t) {
  Dims s = t.sizes();
  s.insert(s.size() - 1, 1);
  return reshape(t, s);
}

}  // namespace

Tensor conv1d(const Tensor& x, const Tensor& weight, const Tensor& bias, IntArrayRef stride, IntArrayRef padding,
              IntArrayRef dilation, int64_t groups) {
  check_conv1d(x, weight, bias);
  const int64_t s = single_arg(stride, "conv1d", "stride"), p = single_arg(padding, "conv1d", "padding");
  const int64_t d = single_arg(dilation, "conv1d", "dilation");
  Tensor y = conv2d(with_unit_height(x), with_unit_height(weight), bias, {1, s}, {0, p}, {1, d}, groups);
  Dims out = y.sizes();
  out.erase(out.size() - 2);
  return reshape(y, out);
}

Tensor conv1d(const Tensor& x, const Tensor& weight, const Tensor& bias, IntArrayRef stride, std::string_view padding,
              IntArrayRef dilation, int64_t groups) {
  check_conv1d(x, weight, bias);
  STRATA_CHECK(padding == "same" || padding == "valid", "conv1d: invalid padding string '", padding,
               "' (expected 'same' or 'valid')");
  if (padding == "valid") return conv1d(x, weight, bias, stride, IntArrayRef{0}, dilation, groups);
  const int64_t s = single_arg(stride, "conv1d", "stride"), d = single_arg(dilation, "conv1d", "dilation");
  STRATA_CHECK(s == 1, "conv1d: padding='same' is not supported for strided convolutions (stride ", s, ")");
  // PyTorch's 'same': total = dilation·(K − 1), half on each side, the odd one on the right.
  const int64_t total = d * (weight.size(2) - 1);
  const Tensor xp = total % 2 == 0 ? x : pad(x, {0, 1});
  return conv1d(xp, weight, bias, stride, IntArrayRef{total / 2}, dilation, groups);
}

// ---- conv_transpose2d ----------------------------------------------------------------------------

// Note [Transposed conv as the conv's adjoint]
// conv_transpose2d(x, w) is the input gradient of a conv2d whose input has the transposed conv's
// output shape and whose weight is w (O = C_in of x, C/groups = C_out/groups): PyTorch's weight
// layout (C_in, C_out/groups, KH, KW) is exactly that conv's. So its forward is that conv's
// backward_input (oneDNN's convolution-backward-data primitive, which is how oneDNN implements
// deconvolution, or im2col's adjoint), its input gradient is the conv's forward of the output
// gradient, and its weight gradient is the conv's backward_weight with the roles of input and
// output gradient swapped. Output size OH = (H − 1)·stride − 2·padding + dilation·(KH − 1) +
// output_padding + 1; with output_padding < stride the conv of OH gives H back, as oneDNN checks;
// output_padding < dilation (PyTorch's other allowed case) runs the own kernels only.

namespace {

Geom transposed_geom(const Tensor& x, const Tensor& w, IntArrayRef stride, IntArrayRef padding,
                     IntArrayRef output_padding, IntArrayRef dilation, int64_t groups) {
  constexpr const char* op = "conv_transpose2d";
  STRATA_CHECK(x.dim() == 3 || x.dim() == 4, op, ": expected 3-D (unbatched) or 4-D (batched) input, got ",
               x.describe());
  STRATA_CHECK(w.dim() == 4, op, ": weight must be 4-D (C_in, C_out/groups, KH, KW), got ", w.describe());
  const auto s = pair_arg(stride, "stride"), p = pair_arg(padding, "padding");
  const auto op_ = pair_arg(output_padding, "output_padding"), d = pair_arg(dilation, "dilation");
  STRATA_CHECK(s[0] > 0 && s[1] > 0 && d[0] > 0 && d[1] > 0, op, ": stride and dilation must be positive, got ", stride,
               " and ", dilation);
  STRATA_CHECK(p[0] >= 0 && p[1] >= 0 && op_[0] >= 0 && op_[1] >= 0, op,
               ": padding and output_padding must be non-negative, got ", padding, " and ", output_padding);
  for (int i = 0; i < 2; ++i)
    STRATA_CHECK(op_[i] < s[i] || op_[i] < d[i], op,
                 ": output padding must be smaller than either stride or "
                 "dilation, got output_padding ",
                 output_padding, ", stride ", stride, ", dilation ", dilation);
  STRATA_CHECK(groups > 0, op, ": groups must be positive, got ", groups);
  const bool batched = x.dim() == 4;
  const int64_t cin = x.size(batched ? 1 : 0);
  STRATA_CHECK(w.size(0) == cin, op, ": weight ", w.describe(), " expects ", w.size(0), " input channels, got input ",
               x.describe());
  STRATA_CHECK(cin % groups == 0, op, ": groups=", groups, " does not divide the ", cin, " input channels");
  Geom g{};
  g.N = batched ? x.size(0) : 1;
  g.O = cin;
  g.C = w.size(1) * groups;
  g.KH = w.size(2), g.KW = w.size(3);
  g.OH = x.size(batched ? 2 : 1), g.OW = x.size(batched ? 3 : 2);
  g.sh = s[0], g.sw = s[1], g.ph = p[0], g.pw = p[1], g.dh = d[0], g.dw = d[1], g.G = groups;
  g.H = (g.OH - 1) * g.sh - 2 * g.ph + g.dh * (g.KH - 1) + op_[0] + 1;
  g.W = (g.OW - 1) * g.sw - 2 * g.pw + g.dw * (g.KW - 1) + op_[1] + 1;
  STRATA_CHECK(g.C > 0 && g.KH > 0 && g.KW > 0, op, ": weight ", w.describe(), " is empty");
  STRATA_CHECK(g.H > 0 && g.W > 0, op, ": output size (", g.H, ", ", g.W, ") is not positive for input ", x.describe(),
               " and weight ", w.describe());
  g.conv_consistent = op_[0] < s[0] && op_[1] < s[1];
  return g;
}

}  // namespace

Tensor conv_transpose2d(const Tensor& x, const Tensor& weight, const Tensor& bias, IntArrayRef stride,
                        IntArrayRef padding, IntArrayRef output_padding, int64_t groups, IntArrayRef dilation) {
  constexpr const char* op = "conv_transpose2d";
  check_backend(OpKind::conv_transpose2d);
  check_float(op, x, "input");
  check_float(op, weight, "weight");
  check_same_dtype(op, x, weight);
  const Geom g = transposed_geom(x, weight, stride, padding, output_padding, dilation, groups);
  if (bias.defined()) {
    check_float(op, bias, "bias");
    check_same_dtype(op, x, bias);
    STRATA_CHECK(bias.dim() == 1 && bias.size(0) == g.C, op, ": bias must be 1-D with ", g.C,
                 " elements (the output channels), got ", bias.describe());
  }
  const bool batched = x.dim() == 4;
  const Dims y_sizes = batched ? Dims{g.N, g.C, g.H, g.W} : Dims{g.C, g.H, g.W};
  Tensor y = backward_input(x, weight, g, y_sizes);
  if (autograd::needs_grad({&x, &weight})) {
    auto node = autograd::make_node("ConvTranspose2DBackward", {&x, &weight},
                                    [g, batched](autograd::Node& n, const TensorList& grads) {
                                      const Tensor x = n.saved(0), w = n.saved(1);
                                      TensorList out(2);
                                      if (n.needs_input_grad(1))
                                        backward_weight(x, grads[0], g, &out[1], nullptr, w.sizes());
                                      if (n.needs_input_grad(0)) out[0] = forward(grads[0], w, Tensor(), g, batched);
                                      return out;
                                    });
    node->save(x);
    node->save(weight);
    autograd::set_history({&y}, node);
  }
  if (!bias.defined()) return y;
  return add(y, reshape(bias, {g.C, 1, 1}));
}

}  // namespace strata
