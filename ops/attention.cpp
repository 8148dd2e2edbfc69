// Note [Blocked attention]
// scaled_dot_product_attention never forms the [L, S] probability matrix of a batch entry. The
// forward walks each block of kBlockQ query rows over blocks of kBlockK key rows with the online
// softmax of FlashAttention (Dao et al. 2022): per row it keeps the running maximum m and the
// running sum l of e^(s - m), rescales its output accumulator by e^(m_old - m_new) when m grows,
// and adds P·V of the block (two GEMMs per block pair, on the sgemm path of ops/detail/cpu/gemm.h). It
// saves q, k, v, the output O and one log-sum-exp per row, lse = m + log l.
// The backward (FlashAttention-2's) recomputes each block's probabilities from the saved lse,
// P = e^(s - lse), and with D_i = Σ_c dO_ic · O_ic accumulates dV += Pᵀ·dO, dS = P ∘ (dO·Vᵀ - D),
// dQ += dS·K·scale and dK += dSᵀ·Q·scale — memory O(block²) per task instead of O(L·S).
// Causal masking (key j visible to query i iff j <= i) skips the blocks that lie wholly above the
// diagonal in both passes; the others mask element-wise. A fully masked row has l = 0: its output
// is 0 and its lse is +inf, so every recomputed probability of that row is 0 (PyTorch 2.13's
// result for such rows). A row with a NaN score (or a NaN sum: an +inf score) saves lse = NaN, so
// its recomputed probabilities, and every gradient they reach, are NaN, as PyTorch's (whose row
// maximum propagates NaN); its output is what the online softmax left (NaN, or 0 when no score was
// a number), which is PyTorch's output too.
// Parallelism: the forward splits (batch entry, query block) pairs over the threads; the backward
// splits batch entries (each owns its dQ, dK and dV, so no two tasks write one element and the sums
// run in one order: results do not depend on the thread count).
// Dropout: the keep decision of probability (b, i, j) is word n % 4 of Philox block n / 4 of a
// range reserved at the forward, n = (b·L + i)·S + j, so the backward regenerates the same mask
// block by block without storing it.

#include "ops/attention.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "ops/detail/cpu/gemm.h"
#include "ops/detail/cpu/norm_loss_math.h"
#include "ops/detail/cpu/vec_math.h"
#include "ops/detail/op_util.h"

namespace strata {

namespace {

using namespace ops::detail;
using ops::cpu::MatRef;

constexpr const char* kOp = "scaled_dot_product_attention";
/// Query and key rows per block (Note [Blocked attention]): a 64 x 128 score block and its
/// gradient stay in L2 beside the operand blocks.
constexpr int64_t kBlockQ = 64;
constexpr int64_t kBlockK = 128;

/// The problem's sizes: B batch entries (the leading dims flattened), L queries, S keys, E the
/// query/key width, Ev the value width.
struct Geometry {
  int64_t B = 1, L = 0, S = 0, E = 0, Ev = 0;
  double scale = 1.0;
  bool causal = false;
};

/// A tensor of rank >= 2 seen as B matrices: matrix b starts `offsets[b]` elements past `base`,
/// rows `rs` elements apart, columns `cs` apart (0 for a broadcast mask).
template <typename T>
struct Batched {
  T* base = nullptr;
  std::vector<int64_t> offsets;
  int64_t rs = 0, cs = 1;
  T* mat(int64_t b) const { return base + offsets[static_cast<std::size_t>(b)]; }
  MatRef<std::remove_const_t<T>> rows(int64_t b, int64_t r0, int64_t n, int64_t cols) const {
    return {mat(b) + r0 * rs, n, cols, rs, cs};
  }
};

/// Element offsets of the matrices of `t` (its dims but the last two, in row-major order).
std::vector<int64_t> batch_offsets(const Tensor& t) {
  const int64_t nb = t.dim() - 2;
  int64_t count = 1;
  for (int64_t d = 0; d < nb; ++d) count *= t.size(d);
  std::vector<int64_t> out(static_cast<std::size_t>(count));
  std::vector<int64_t> idx(static_cast<std::size_t>(std::max<int64_t>(nb, 0)), 0);
  for (int64_t b = 0; b < count; ++b) {
    int64_t off = 0;
    for (int64_t d = 0; d < nb; ++d) off += idx[d] * t.stride(d);
    out[static_cast<std::size_t>(b)] = off;
    for (int64_t d = nb - 1; d >= 0 && ++idx[d] == t.size(d); --d) idx[d] = 0;
  }
  return out;
}

template <typename T>
Batched<T> batched(const Tensor& t) {
  return {static_cast<T*>(t.data_ptr()), batch_offsets(t), t.stride(-2), t.stride(-1)};
}

/// An uninitialized tensor of `sizes` whose dims are laid out in `like`'s order (by decreasing
/// stride; the last dim stays innermost), so that a transposed view in gives the same view out.
Tensor empty_in_order_of(const Tensor& like, IntArrayRef sizes) {
  const int64_t r = like.dim();
  std::vector<int64_t> perm(static_cast<std::size_t>(r));
  for (int64_t d = 0; d < r; ++d) perm[d] = d;
  std::stable_sort(perm.begin(), perm.end() - 1, [&](int64_t a, int64_t b) { return like.stride(a) > like.stride(b); });
  Dims laid;
  for (int64_t d : perm) laid.push_back(sizes[d]);
  std::vector<int64_t> inverse(static_cast<std::size_t>(r));
  for (int64_t d = 0; d < r; ++d) inverse[perm[d]] = d;
  return empty_output(laid, like.dtype()).permute(inverse);
}

/// `t`, or a contiguous copy unless its matrices have unit column strides and rows that do not
/// overlap (what the block GEMMs and the row loops want; an expanded gradient has neither).
Tensor unit_column_stride(const Tensor& t) {
  const bool cols = t.stride(-1) == 1 || t.size(-1) <= 1;
  const bool rows = t.size(-2) <= 1 || t.stride(-2) >= std::max<int64_t>(1, t.size(-1));
  return cols && rows ? t : t.contiguous();
}

// ---- checks ---------------------------------------------------------------------------------------

Geometry check_qkv(const Tensor& q, const Tensor& k, const Tensor& v) {
  check_float(kOp, q, "query");
  check_float(kOp, k, "key");
  check_float(kOp, v, "value");
  STRATA_CHECK(q.dtype() == k.dtype() && q.dtype() == v.dtype(), kOp,
               ": expected query, key and value to have the same dtype, got query ", q.describe(), ", key ",
               k.describe(), " and value ", v.describe());
  STRATA_CHECK(q.dim() >= 2 && k.dim() == q.dim() && v.dim() == q.dim(), kOp,
               ": query, key and value must have the same rank (at least 2: [..., L, E], [..., S, E], [..., S, Ev]), "
               "got query ",
               q.describe(), ", key ", k.describe(), " and value ", v.describe());
  for (int64_t d = 0; d < q.dim() - 2; ++d)
    STRATA_CHECK(k.size(d) == q.size(d) && v.size(d) == q.size(d), kOp,
                 ": query, key and value must have the same batch sizes (dims before the last two), got query ",
                 q.describe(), ", key ", k.describe(), " and value ", v.describe());
  STRATA_CHECK(k.size(-1) == q.size(-1), kOp, ": key's last dim must equal query's (E), got query ", q.describe(),
               " and key ", k.describe());
  STRATA_CHECK(v.size(-2) == k.size(-2), kOp, ": value must have as many rows as key (S), got key ", k.describe(),
               " and value ", v.describe());
  Geometry g;
  for (int64_t d = 0; d < q.dim() - 2; ++d) g.B *= q.size(d);
  g.L = q.size(-2), g.S = k.size(-2), g.E = q.size(-1), g.Ev = v.size(-1);
  return g;
}

/// The mask expanded (a view) to [batch..., L, S], or undefined.
Tensor check_mask(const Tensor& mask, const Tensor& q, const Geometry& g) {
  if (!mask.defined()) return mask;
  STRATA_CHECK(mask.dtype() == DType::boolean || mask.dtype() == q.dtype(), kOp,
               ": attn_mask must be bool or of query's dtype, got attn_mask ", mask.describe(), " and query ",
               q.describe());
  STRATA_CHECK(!(mask.requires_grad() && autograd::GradMode::is_enabled()), kOp,
               ": the gradient w.r.t. attn_mask is not supported (attn_mask ", mask.describe(), " requires grad)");
  Dims target(q.sizes().begin(), q.sizes().end() - 1);
  target.push_back(g.S);
  bool ok = mask.dim() <= static_cast<int64_t>(target.size());
  for (int64_t i = 1; ok && i <= mask.dim(); ++i) {
    const int64_t ms = mask.size(mask.dim() - i), ts = target[target.size() - i];
    ok = ms == ts || ms == 1;
  }
  STRATA_CHECK(ok, kOp, ": attn_mask ", mask.describe(), " does not broadcast to the attention scores ", target);
  return mask.expand(target);
}

// ---- the mask of a score block --------------------------------------------------------------------

/// What masks a block: the causal rule, a bool or additive mask, dropout.
template <typename T>
struct Masking {
  bool causal = false;
  T scale = T(1);
  const bool* bmask = nullptr;  // bool mask batch (null: none)
  const T* fmask = nullptr;     // additive mask batch (null: none)
  Batched<const bool> bm;
  Batched<const T> fm;
  double keep = 1.0;       // 1 - dropout_p
  uint32_t threshold = 0;  // keep iff the top 24 bits of the word fall below this
  PhiloxRange range;
  int64_t L = 0, S = 0;

  /// s[r, c] = score · scale, masked entries -inf, for rows i0.., columns j0.. of batch b.
  void apply(T* s, int64_t ld, int64_t b, int64_t i0, int64_t nr, int64_t j0, int64_t nc) const {
    constexpr T ninf = -std::numeric_limits<T>::infinity();
    for (int64_t r = 0; r < nr; ++r) {
      T* row = s + r * ld;
      const int64_t i = i0 + r;
      const int64_t visible = causal ? std::clamp<int64_t>(i - j0 + 1, 0, nc) : nc;
      if (fmask != nullptr) {
        const T* m = fm.mat(b) + i * fm.rs + j0 * fm.cs;
        for (int64_t c = 0; c < visible; ++c) row[c] = row[c] * scale + m[c * fm.cs];
      } else {
        for (int64_t c = 0; c < visible; ++c) row[c] = row[c] * scale;
      }
      if (bmask != nullptr) {
        const bool* m = bm.mat(b) + i * bm.rs + j0 * bm.cs;
        for (int64_t c = 0; c < visible; ++c) row[c] = m[c * bm.cs] ? row[c] : ninf;
      }
      for (int64_t c = visible; c < nc; ++c) row[c] = ninf;
    }
  }

  bool dropping() const { return keep < 1.0; }

  /// p[r, c] *= keep(b, i0 + r, j0 + c) / keep (0 for dropped entries).
  void drop(T* p, int64_t ld, int64_t b, int64_t i0, int64_t nr, int64_t j0, int64_t nc) const {
    const T inv = T(1.0 / keep);
    for (int64_t r = 0; r < nr; ++r) {
      const uint64_t first = static_cast<uint64_t>((b * L + i0 + r) * S + j0);
      uint64_t cached = ~uint64_t{0};
      std::array<uint32_t, 4> words{};
      for (int64_t c = 0; c < nc; ++c) {
        const uint64_t n = first + static_cast<uint64_t>(c);
        if (n / 4 != cached) words = range.block(cached = n / 4);
        p[r * ld + c] *= (words[n % 4] >> 8) < threshold ? inv : T(0);
      }
    }
  }
};

template <typename T>
Masking<T> masking(const Tensor& mask, const Geometry& g, double dropout_p, const PhiloxRange& range) {
  Masking<T> m;
  m.causal = g.causal;
  m.scale = static_cast<T>(g.scale);
  if (mask.defined() && mask.dtype() == DType::boolean) {
    m.bm = batched<const bool>(mask);
    m.bmask = m.bm.base;
  } else if (mask.defined()) {
    m.fm = batched<const T>(mask);
    m.fmask = m.fm.base;
  }
  m.keep = 1.0 - dropout_p;
  m.threshold = static_cast<uint32_t>(std::llround(m.keep * 16777216.0));
  m.range = range;
  m.L = g.L, m.S = g.S;
  return m;
}

// ---- row helpers ----------------------------------------------------------------------------------

/// The largest of x[0, n) ignoring NaN (-inf when none is a number); `nan` is set when one is NaN.
template <typename T>
T row_max(const T* x, int64_t n, bool& nan) {
  T m = -std::numeric_limits<T>::infinity();
  bool any_nan = false;
  for (int64_t i = 0; i < n; ++i) {
    m = std::max(m, x[i]);
    any_nan |= x[i] != x[i];
  }
  nan = nan || any_nan;
  return m;
}

/// y = e^(x - shift) over a row; returns Σ y. A shift of -inf (every entry masked) gives zeros.
template <typename T>
T exp_row(T* x, T shift, int64_t n) {
  if (shift == -std::numeric_limits<T>::infinity()) {
    std::fill(x, x + n, T(0));
    return T(0);
  }
  if constexpr (std::is_same_v<T, float>) return ops::cpu::vec::kernels().exp_shift_sum(x, shift, x, n);
  T s = T(0);
  for (int64_t i = 0; i < n; ++i) s += (x[i] = fast_exp(x[i] - shift));
  return s;
}

// ---- forward --------------------------------------------------------------------------------------

template <typename T>
struct Operands {
  Batched<const T> q, k, v;
};

/// The online-softmax state of one query block.
template <typename T>
struct RowState {
  std::vector<T> s, o, m, l;
  std::vector<char> nan;  ///< per row: a score was NaN
  explicit RowState(int64_t Ev) : s(kBlockQ * kBlockK), o(kBlockQ * Ev), m(kBlockQ), l(kBlockQ), nan(kBlockQ) {}
};

/// Folds the score block in st.s (nr x nc, masked) into the running max, sum and output rows.
template <typename T>
void online_softmax_step(RowState<T>& st, int64_t nr, int64_t nc, int64_t Ev) {
  for (int64_t r = 0; r < nr; ++r) {
    T* row = st.s.data() + r * kBlockK;
    bool nan = st.nan[r] != 0;
    const T mnew = std::max(st.m[r], row_max(row, nc, nan));
    st.nan[r] = nan;
    const T sum = exp_row(row, mnew, nc);
    if (mnew == st.m[r]) {
      st.l[r] += sum;
      continue;
    }
    const T alpha = st.m[r] == -std::numeric_limits<T>::infinity() ? T(0) : fast_exp(st.m[r] - mnew);
    T* o = st.o.data() + r * Ev;
    for (int64_t c = 0; c < Ev; ++c) o[c] *= alpha;
    st.l[r] = st.l[r] * alpha + sum;
    st.m[r] = mnew;
  }
}

/// Query rows [i0, i0 + nr) of batch entry b: out rows and their lse.
template <typename T>
void forward_block(const Operands<T>& x, const Batched<T>& out, T* lse, const Masking<T>& mk, const Geometry& g,
                   int64_t b, int64_t i0, int64_t nr, RowState<T>& st) {
  std::fill(st.o.begin(), st.o.end(), T(0));
  std::fill(st.m.begin(), st.m.end(), -std::numeric_limits<T>::infinity());
  std::fill(st.l.begin(), st.l.end(), T(0));
  std::fill(st.nan.begin(), st.nan.end(), char{0});
  const int64_t j_end = g.causal ? std::min(g.S, i0 + nr) : g.S;
  for (int64_t j0 = 0; j0 < j_end; j0 += kBlockK) {
    const int64_t nc = std::min(kBlockK, g.S - j0);
    ops::cpu::gemm(x.q.rows(b, i0, nr, g.E), x.k.rows(b, j0, nc, g.E).t(), st.s.data(), kBlockK, false, false);
    mk.apply(st.s.data(), kBlockK, b, i0, nr, j0, nc);
    online_softmax_step(st, nr, nc, g.Ev);
    if (mk.dropping()) mk.drop(st.s.data(), kBlockK, b, i0, nr, j0, nc);
    const MatRef<T> p{st.s.data(), nr, nc, kBlockK, 1};
    ops::cpu::gemm(p, x.v.rows(b, j0, nc, g.Ev), st.o.data(), g.Ev, true, false);
  }
  for (int64_t r = 0; r < nr; ++r) {
    const T l = st.l[r];
    const T inv = l > T(0) ? T(1) / l : T(0);
    T* dst = out.mat(b) + (i0 + r) * out.rs;
    for (int64_t c = 0; c < g.Ev; ++c) dst[c] = st.o[r * g.Ev + c] * inv;
    // +inf for a fully masked row, NaN for a row with a NaN score or sum (Note [Blocked attention]).
    lse[b * g.L + i0 + r] = st.nan[r] != 0 || std::isnan(l) ? std::numeric_limits<T>::quiet_NaN()
                            : l > T(0)                      ? st.m[r] + std::log(l)
                                                            : std::numeric_limits<T>::infinity();
  }
}

template <typename T>
void forward_kernel(const Operands<T>& x, const Batched<T>& out, T* lse, const Masking<T>& mk, const Geometry& g) {
  const int64_t qblocks = (g.L + kBlockQ - 1) / kBlockQ;
  parallel_for(g.B * qblocks, 1, [&](int64_t t0, int64_t t1) {
    RowState<T> st(g.Ev);
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t b = t / qblocks, i0 = (t % qblocks) * kBlockQ;
      forward_block(x, out, lse, mk, g, b, i0, std::min(kBlockQ, g.L - i0), st);
    }
  });
}

// ---- backward -------------------------------------------------------------------------------------

template <typename T>
struct Grads {
  Batched<T> dq, dk, dv;
};

/// The block pair (query rows i0.., key rows j0..) of batch entry b: accumulates into dq, dk, dv.
template <typename T>
void backward_block(const Operands<T>& x, const Batched<const T>& dout, const T* lse, const T* delta,
                    const Grads<T>& gr, const Masking<T>& mk, const Geometry& g, int64_t b, int64_t i0, int64_t nr,
                    int64_t j0, int64_t nc, T* p, T* dp) {
  const MatRef<T> qb = x.q.rows(b, i0, nr, g.E), kb = x.k.rows(b, j0, nc, g.E);
  ops::cpu::gemm(qb, kb.t(), p, kBlockK, false, false);
  mk.apply(p, kBlockK, b, i0, nr, j0, nc);
  for (int64_t r = 0; r < nr; ++r) {
    const T shift = lse[b * g.L + i0 + r];
    T* row = p + r * kBlockK;
    if (shift == std::numeric_limits<T>::infinity())
      std::fill(row, row + nc, T(0));
    else
      exp_row(row, shift, nc);
  }
  const MatRef<T> dob = dout.rows(b, i0, nr, g.Ev);
  ops::cpu::gemm(dob, x.v.rows(b, j0, nc, g.Ev).t(), dp, kBlockK, false, false);  // dP (of the dropped P)
  if (mk.dropping()) {
    // dV takes the dropped probabilities; dS the kept ones' gradient through the same mask.
    mk.drop(dp, kBlockK, b, i0, nr, j0, nc);
    std::vector<T> pd(p, p + kBlockQ * kBlockK);
    mk.drop(pd.data(), kBlockK, b, i0, nr, j0, nc);
    ops::cpu::gemm(MatRef<T>{pd.data(), nr, nc, kBlockK, 1}.t(), dob, gr.dv.mat(b) + j0 * gr.dv.rs, gr.dv.rs, true,
                   false);
  } else {
    ops::cpu::gemm(MatRef<T>{p, nr, nc, kBlockK, 1}.t(), dob, gr.dv.mat(b) + j0 * gr.dv.rs, gr.dv.rs, true, false);
  }
  const T scale = static_cast<T>(g.scale);
  for (int64_t r = 0; r < nr; ++r) {
    const T d = delta[i0 + r];
    T* dr = dp + r * kBlockK;
    const T* pr = p + r * kBlockK;
    for (int64_t c = 0; c < nc; ++c) dr[c] = pr[c] * (dr[c] - d) * scale;
  }
  const MatRef<T> ds{dp, nr, nc, kBlockK, 1};
  ops::cpu::gemm(ds, kb, gr.dq.mat(b) + i0 * gr.dq.rs, gr.dq.rs, true, false);
  ops::cpu::gemm(ds.t(), qb, gr.dk.mat(b) + j0 * gr.dk.rs, gr.dk.rs, true, false);
}

/// Zeroes rows [0, rows) x cols of every matrix of `m`.
template <typename T>
void zero_rows(const Batched<T>& m, int64_t b, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) std::fill(m.mat(b) + r * m.rs, m.mat(b) + r * m.rs + cols, T(0));
}

template <typename T>
void backward_kernel(const Operands<T>& x, const Batched<const T>& out, const Batched<const T>& dout, const T* lse,
                     const Grads<T>& gr, const Masking<T>& mk, const Geometry& g) {
  parallel_for(g.B, 1, [&](int64_t b0, int64_t b1) {
    std::vector<T> p(kBlockQ * kBlockK), dp(kBlockQ * kBlockK), delta(g.L);
    for (int64_t b = b0; b < b1; ++b) {
      for (int64_t i = 0; i < g.L; ++i) {
        const T* o = out.mat(b) + i * out.rs;
        const T* d = dout.mat(b) + i * dout.rs;
        T s = T(0);
        for (int64_t c = 0; c < g.Ev; ++c) s += o[c] * d[c];
        delta[i] = s;
      }
      zero_rows(gr.dq, b, g.L, g.E);
      zero_rows(gr.dk, b, g.S, g.E);
      zero_rows(gr.dv, b, g.S, g.Ev);
      for (int64_t j0 = 0; j0 < g.S; j0 += kBlockK) {
        const int64_t nc = std::min(kBlockK, g.S - j0);
        // Causal: query rows before j0 see none of these keys.
        for (int64_t i0 = g.causal ? (j0 / kBlockQ) * kBlockQ : 0; i0 < g.L; i0 += kBlockQ)
          backward_block(x, dout, lse, delta.data(), gr, mk, g, b, i0, std::min(kBlockQ, g.L - i0), j0, nc, p.data(),
                         dp.data());
      }
    }
  });
}

// ---- the op and its node ---------------------------------------------------------------------------

struct Saved {
  Geometry g;
  double dropout_p = 0.0;
  PhiloxRange range;
};

TensorList attention_backward(const Tensor& grad, const TensorList& in, const Saved& sv) {
  const Tensor &q = in[0], &k = in[1], &v = in[2], &out = in[3], &lse = in[4], &mask = in[5];
  const Tensor dout = unit_column_stride(grad);
  Tensor dq = empty_in_order_of(q, q.sizes()), dk = empty_in_order_of(k, k.sizes()),
         dv = empty_in_order_of(v, v.sizes());
  PinSet pins;
  for (const Tensor* t : {&q, &k, &v, &out, &lse, &dout}) pins.add(*t, AccessMode::Read);
  if (mask.defined()) pins.add(mask, AccessMode::Read);
  for (const Tensor* t : {&dq, &dk, &dv}) pins.add(*t, AccessMode::Write);
  pins.acquire();
  dispatch_float(q.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const Operands<T> x{batched<const T>(q), batched<const T>(k), batched<const T>(v)};
    const Grads<T> gr{batched<T>(dq), batched<T>(dk), batched<T>(dv)};
    backward_kernel(x, batched<const T>(out), batched<const T>(dout), lse.data<T>(), gr,
                    masking<T>(mask, sv.g, sv.dropout_p, sv.range), sv.g);
  });
  return {dq, dk, dv};
}

Tensor attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask, const Saved& sv,
                         Tensor& lse) {
  Dims osizes(q.sizes().begin(), q.sizes().end() - 1);
  osizes.push_back(sv.g.Ev);
  Tensor out = empty_in_order_of(q, osizes);
  lse = empty_output({sv.g.B, sv.g.L}, q.dtype());
  PinSet pins;
  for (const Tensor* t : {&q, &k, &v}) pins.add(*t, AccessMode::Read);
  if (mask.defined()) pins.add(mask, AccessMode::Read);
  pins.add(out, AccessMode::Write).add(lse, AccessMode::Write);
  pins.acquire();
  if (out.numel() == 0) return out;
  dispatch_float(q.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const Operands<T> x{batched<const T>(q), batched<const T>(k), batched<const T>(v)};
    forward_kernel(x, batched<T>(out), lse.data<T>(), masking<T>(mask, sv.g, sv.dropout_p, sv.range), sv.g);
  });
  return out;
}

}  // namespace

Tensor scaled_dot_product_attention(const Tensor& query, const Tensor& key, const Tensor& value,
                                    const Tensor& attn_mask, double dropout_p, bool is_causal,
                                    std::optional<double> scale, Generator* gen) {
  check_backend(OpKind::scaled_dot_product_attention);
  Saved sv;
  sv.g = check_qkv(query, key, value);
  sv.g.causal = is_causal;
  STRATA_CHECK(dropout_p >= 0.0 && dropout_p <= 1.0, kOp, ": dropout probability has to be between 0 and 1, but got ",
               dropout_p);
  STRATA_CHECK(!scale || std::isfinite(*scale), kOp, ": scale must be finite, got ", scale.value_or(0.0));
  sv.g.scale = scale ? *scale : 1.0 / std::sqrt(static_cast<double>(sv.g.E));
  STRATA_CHECK(!(attn_mask.defined() && is_causal), kOp,
               ": explicit attn_mask should not be set when is_causal=True (PyTorch's rule), got attn_mask ",
               attn_mask.describe());
  const Tensor mask = check_mask(attn_mask, query, sv.g);
  sv.dropout_p = dropout_p;
  if (dropout_p > 0.0) {
    Generator& g = gen != nullptr ? *gen : default_generator();
    sv.range = g.reserve(static_cast<uint64_t>((sv.g.B * sv.g.L * sv.g.S + 3) / 4));
  }
  const Tensor q = unit_column_stride(query), k = unit_column_stride(key), v = unit_column_stride(value);
  Tensor lse;
  Tensor out = attention_forward(q, k, v, mask, sv, lse);
  if (autograd::needs_grad({&query, &key, &value})) {
    auto node = autograd::make_node("ScaledDotProductAttentionBackward", {&query, &key, &value},
                                    [sv](autograd::Node& n, const TensorList& g) -> TensorList {
                                      TensorList in;
                                      for (std::size_t i = 0; i < 6; ++i) in.push_back(n.saved(i));
                                      TensorList grads = attention_backward(g[0], in, sv);
                                      for (std::size_t i = 0; i < 3; ++i)
                                        if (!n.needs_input_grad(i)) grads[i] = Tensor();
                                      return grads;
                                    });
    for (const Tensor* t : std::initializer_list<const Tensor*>{&q, &k, &v, &out, &lse, &mask}) node->save(*t);
    autograd::set_history({&out}, node);
  }
  return out;
}

}  // namespace strata
