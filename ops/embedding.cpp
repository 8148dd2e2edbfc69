#include "ops/embedding.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "ops/detail/op_util.h"

namespace strata {

namespace {

using namespace ops::detail;

/// The entries of a 1-D contiguous index tensor as int64 (pins it while reading).
std::vector<int64_t> read_indices(const Tensor& t) {
  const Tensor c = t.contiguous();
  std::vector<int64_t> out(static_cast<std::size_t>(c.numel()));
  if (out.empty()) return out;
  PinSet pins;
  pins.add(c, AccessMode::Read).acquire();
  dispatch_index(c.dtype(), [&](auto tag) {
    using I = decltype(tag);
    const I* p = static_cast<const I*>(c.data_ptr());
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = static_cast<int64_t>(p[i]);
  });
  return out;
}

/// Throws unless every one of the n indices lies in [0, weight.size(0)), naming the first that does not.
template <typename I>
void check_index_range(const char* op, const I* ip, int64_t n, const Tensor& weight) {
  const int64_t num_rows = weight.size(0);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t v = static_cast<int64_t>(ip[i]);
    STRATA_CHECK(v >= 0 && v < num_rows, op, ": index ", v, " at position ", i, " is out of range for weight ",
                 weight.describe(), " with num_rows ", num_rows, " (valid indices are in [0, ", num_rows, "))");
  }
}

// ---- embedding_bag ----------------------------------------------------------------------------------

/// Bag bounds: bag b holds positions [bounds[b], bounds[b + 1]).
std::vector<int64_t> bag_bounds(const Tensor& offsets, int64_t num_indices, bool include_last_offset) {
  const std::vector<int64_t> off = read_indices(offsets);
  const int64_t n = static_cast<int64_t>(off.size());
  STRATA_CHECK(!include_last_offset || n >= 1, "embedding_bag: with include_last_offset, offsets ", offsets.describe(),
               " must hold at least one entry (the end of the last bag)");
  if (n > 0)
    STRATA_CHECK(off[0] == 0, "embedding_bag: offsets must start at 0, got offsets[0] = ", off[0], " (",
                 offsets.describe(), ")");
  for (int64_t b = 0; b < n; ++b) {
    if (b > 0)
      STRATA_CHECK(off[b] >= off[b - 1], "embedding_bag: offsets must be non-decreasing, got offsets[", b,
                   "] = ", off[b], " after offsets[", b - 1, "] = ", off[b - 1], " (", offsets.describe(), ")");
    STRATA_CHECK(off[b] <= num_indices, "embedding_bag: offsets[", b, "] = ", off[b], " is past the end of the ",
                 num_indices, " indices (", offsets.describe(), ")");
  }
  std::vector<int64_t> bounds = off;
  if (!include_last_offset) bounds.push_back(num_indices);
  return bounds;
}

/// Columns [k0, k0 + B) of one bag's sum, accumulated in registers (B is a compile-time width, so
/// the accumulator is B/8 or B/16 vector registers instead of a load and store of the output per
/// row). Same summation order per element as the plain loop: rows in position order.
template <int64_t B, typename T, typename I>
inline void bag_columns(T* __restrict o, const T* __restrict w, const I* idx, const T* psw, int64_t s, int64_t e,
                        int64_t dim, int64_t k0) {
  T acc[B];
  for (int64_t k = 0; k < B; ++k) acc[k] = T(0);
  for (int64_t i = s; i < e; ++i) {
    const T* __restrict r = w + static_cast<int64_t>(idx[i]) * dim + k0;
    if (psw != nullptr) {
      const T c = psw[i];
      for (int64_t k = 0; k < B; ++k) acc[k] += c * r[k];
    } else {
      for (int64_t k = 0; k < B; ++k) acc[k] += r[k];
    }
  }
  for (int64_t k = 0; k < B; ++k) o[k0 + k] = acc[k];
}

template <typename T, typename I>
void bag_forward(T* out, const T* w, const I* idx, const T* psw, const std::vector<int64_t>& bounds, int64_t dim,
                 bool mean) {
  const int64_t bags = static_cast<int64_t>(bounds.size()) - 1;
  const int64_t per_bag = std::max<int64_t>(1, (bounds.back() / std::max<int64_t>(bags, 1)) * dim);
  // The looked-up rows are scattered over a table far larger than the caches, so each one is a
  // DRAM miss; prefetching the row kRowsAhead positions ahead (within the task's positions) keeps
  // several rows' misses in flight. Measured on the [1M, 64] f32 benchmark table (256-byte rows):
  // 8 ahead ~20 % faster than none; 16 no better, 32 worse.
  constexpr int64_t kRowsAhead = 8;
  const int64_t row_bytes = dim * static_cast<int64_t>(sizeof(T));
  parallel_for(bags, std::max<int64_t>(1, 16384 / per_bag), [&](int64_t begin, int64_t end) {
    const int64_t pos_end = bounds[end];
    auto prefetch_row = [&](int64_t i) {
      if (i >= pos_end) return;
      const char* r = reinterpret_cast<const char*>(w + static_cast<int64_t>(idx[i]) * dim);
      for (int64_t off = 0; off < row_bytes; off += 64) __builtin_prefetch(r + off, 0, 3);
      __builtin_prefetch(r + row_bytes - 1, 0, 3);  // the last line of a row that starts mid-line
    };
    if (row_bytes == 0) return;
    for (int64_t i = bounds[begin]; i < bounds[begin] + kRowsAhead; ++i) prefetch_row(i);
    for (int64_t b = begin; b < end; ++b) {
      T* __restrict o = out + b * dim;
      const int64_t s = bounds[b], e = bounds[b + 1];
      for (int64_t i = s; i < e; ++i) prefetch_row(i + kRowsAhead);
      int64_t k0 = 0;
      for (; k0 + 64 <= dim; k0 += 64) bag_columns<64>(o, w, idx, psw, s, e, dim, k0);
      for (; k0 + 16 <= dim; k0 += 16) bag_columns<16>(o, w, idx, psw, s, e, dim, k0);
      for (; k0 < dim; ++k0) bag_columns<1>(o, w, idx, psw, s, e, dim, k0);
      if (mean && e > s) {
        const T c = T(1) / static_cast<T>(e - s);
        for (int64_t k = 0; k < dim; ++k) o[k] *= c;
      }
    }
  });
}

/// Runs bag_forward into `out` (contiguous, bags x dim) with its operands pinned, after checking
/// every index against weight's rows; `pc` (per-sample weights) may be undefined.
void bags_into(const char* op, const Tensor& weight, const Tensor& wc, const Tensor& ic, const Tensor& pc,
               const std::vector<int64_t>& bounds, bool mean, const Tensor& out) {
  const int64_t n = ic.numel(), dim = wc.size(1);
  PinSet pins;
  pins.add(ic, AccessMode::Read).add(out, AccessMode::Write);
  // Only the looked-up rows are touched (a large table may live in the slow tier).
  pins.add(wc, AccessMode::Read, static_cast<std::size_t>(n * dim) * wc.itemsize());
  if (pc.defined()) pins.add(pc, AccessMode::Read);
  pins.acquire();
  dispatch_index(ic.dtype(), [&](auto itag) {
    using I = decltype(itag);
    const I* ip = static_cast<const I*>(ic.data_ptr());
    check_index_range(op, ip, n, weight);
    dispatch_float(wc.dtype(), [&](auto t) {
      using T = decltype(t);
      bag_forward<T, I>(static_cast<T*>(out.data_ptr()), static_cast<const T*>(wc.data_ptr()), ip,
                        pc.defined() ? static_cast<const T*>(pc.data_ptr()) : nullptr, bounds, dim, mean);
    });
  });
}

/// Dense weight gradient: rows → (position, bag) lists by counting sort (histogram, prefix sum, CSR),
/// then each row's gradient summed in bag order, rows in parallel.
template <typename T, typename I>
void bag_backward_weight(T* gw, const T* g, const I* idx, const T* psw, const std::vector<int64_t>& bounds,
                         int64_t num_rows, int64_t dim, bool mean) {
  const int64_t bags = static_cast<int64_t>(bounds.size()) - 1;
  const int64_t used = bounds.back();
  std::vector<int64_t> bag_of(static_cast<std::size_t>(used));
  for (int64_t b = 0; b < bags; ++b)
    for (int64_t i = bounds[b]; i < bounds[b + 1]; ++i) bag_of[i] = b;
  std::vector<int64_t> start(static_cast<std::size_t>(num_rows) + 1, 0);
  for (int64_t i = 0; i < used; ++i) ++start[static_cast<std::size_t>(idx[i]) + 1];
  for (int64_t r = 0; r < num_rows; ++r) start[r + 1] += start[r];
  std::vector<int64_t> order(static_cast<std::size_t>(used));
  {
    std::vector<int64_t> fill(start.begin(), start.end() - 1);
    for (int64_t i = 0; i < used; ++i) order[fill[static_cast<std::size_t>(idx[i])]++] = i;
  }
  parallel_for(num_rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(dim, 1)), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      T* __restrict dst = gw + r * dim;
      for (int64_t k = 0; k < dim; ++k) dst[k] = T(0);
      for (int64_t q = start[r]; q < start[r + 1]; ++q) {
        const int64_t i = order[q];
        const int64_t b = bag_of[i];
        T c = T(1);
        if (psw != nullptr)
          c = psw[i];
        else if (mean)
          c = T(1) / static_cast<T>(bounds[b + 1] - bounds[b]);
        const T* __restrict src = g + b * dim;
        for (int64_t k = 0; k < dim; ++k) dst[k] += c * src[k];
      }
    }
  });
}

template <typename T, typename I>
void bag_backward_psw(T* gp, const T* g, const T* w, const I* idx, const std::vector<int64_t>& bounds, int64_t n,
                      int64_t dim) {
  const int64_t bags = static_cast<int64_t>(bounds.size()) - 1;
  for (int64_t i = bounds.back(); i < n; ++i) gp[i] = T(0);  // positions past the last bag
  parallel_for(bags, std::max<int64_t>(1, 16384 / std::max<int64_t>(dim * 8, 1)), [&](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; ++b) {
      const T* __restrict gb = g + b * dim;
      for (int64_t i = bounds[b]; i < bounds[b + 1]; ++i) {
        const T* __restrict r = w + static_cast<int64_t>(idx[i]) * dim;
        T s = T(0);
        for (int64_t k = 0; k < dim; ++k) s += gb[k] * r[k];
        gp[i] = s;
      }
    }
  });
}

// ---- dot_interaction ----------------------------------------------------------------------------------

/// a·b with 16 independent partial sums (vectorizes without reassociating a single chain).
template <typename T>
inline T dot(const T* __restrict a, const T* __restrict b, int64_t n) {
  T acc[16] = {};
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    for (int k = 0; k < 16; ++k) acc[k] += a[i + k] * b[i + k];
  for (int k = 0; k < 8; ++k) acc[k] += acc[k + 8];
  T s = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
  for (; i < n; ++i) s += a[i] * b[i];
  return s;
}

}  // namespace

Tensor embedding_bag(const Tensor& weight, const Tensor& indices, const Tensor& offsets, EmbeddingBagMode mode,
                     const Tensor& per_sample_weights, bool include_last_offset) {
  constexpr const char* op = "embedding_bag";
  check_backend(OpKind::embedding_bag);
  check_float(op, weight, "weight");
  check_rank(op, weight, 2, "weight");
  check_index(op, indices, "indices");
  check_rank(op, indices, 1, "indices");
  check_index(op, offsets, "offsets");
  check_rank(op, offsets, 1, "offsets");
  const bool mean = mode == EmbeddingBagMode::Mean;
  const bool has_psw = per_sample_weights.defined();
  if (has_psw) {
    STRATA_CHECK(!mean, "embedding_bag: per_sample_weights ", per_sample_weights.describe(),
                 " are only supported with mode Sum, got mode Mean");
    check_float(op, per_sample_weights, "per_sample_weights");
    check_same_dtype(op, weight, per_sample_weights);
    STRATA_CHECK(per_sample_weights.sizes() == indices.sizes(), "embedding_bag: per_sample_weights ",
                 per_sample_weights.describe(), " must have the shape of indices ", indices.describe());
  }
  const int64_t num_rows = weight.sizes()[0];
  const int64_t dim = weight.sizes()[1];
  const int64_t n = indices.numel();
  const std::vector<int64_t> bounds = bag_bounds(offsets, n, include_last_offset);
  const int64_t bags = static_cast<int64_t>(bounds.size()) - 1;
  const Tensor wc = weight.contiguous();
  const Tensor ic = indices.contiguous();
  const Tensor pc = has_psw ? per_sample_weights.contiguous() : Tensor();
  Tensor out = empty_output({bags, dim}, weight.dtype());
  bags_into(op, weight, wc, ic, pc, bounds, mean, out);
  if (autograd::needs_grad({&weight, &per_sample_weights})) {
    auto node = autograd::make_node(
        "EmbeddingBagBackward", {&weight, &indices, &offsets, &per_sample_weights},
        [bounds, num_rows, dim, mean, has_psw](autograd::Node& nd, const TensorList& grads) -> TensorList {
          const Tensor g = grads[0].contiguous();
          const Tensor idx = nd.saved(0).contiguous();
          const Tensor psw = has_psw ? nd.saved(1).contiguous() : Tensor();
          const Tensor w = has_psw && nd.needs_input_grad(3) ? nd.saved(2).contiguous() : Tensor();
          Tensor gw, gp;
          if (nd.needs_input_grad(0)) gw = empty_output({num_rows, dim}, g.dtype());
          if (has_psw && nd.needs_input_grad(3)) gp = empty_output(idx.sizes(), g.dtype());
          PinSet pins;
          pins.add(g, AccessMode::Read).add(idx, AccessMode::Read);
          if (psw.defined()) pins.add(psw, AccessMode::Read);
          if (w.defined()) pins.add(w, AccessMode::Read, static_cast<std::size_t>(idx.numel() * dim) * w.itemsize());
          if (gw.defined()) pins.add(gw, AccessMode::Write);
          if (gp.defined()) pins.add(gp, AccessMode::Write);
          pins.acquire();
          dispatch_index(idx.dtype(), [&](auto itag) {
            using I = decltype(itag);
            const I* ip = static_cast<const I*>(idx.data_ptr());
            dispatch_float(g.dtype(), [&](auto t) {
              using T = decltype(t);
              const T* gp_in = static_cast<const T*>(g.data_ptr());
              if (gw.defined())
                bag_backward_weight<T, I>(static_cast<T*>(gw.data_ptr()), gp_in, ip,
                                          psw.defined() ? static_cast<const T*>(psw.data_ptr()) : nullptr, bounds,
                                          num_rows, dim, mean);
              if (gp.defined())
                bag_backward_psw<T, I>(static_cast<T*>(gp.data_ptr()), gp_in, static_cast<const T*>(w.data_ptr()), ip,
                                       bounds, idx.numel(), dim);
            });
          });
          return {gw, Tensor(), Tensor(), gp};
        });
    node->save(indices);
    node->save(per_sample_weights);
    node->save(has_psw ? weight : Tensor());
    autograd::set_history({&out}, node);
  }
  return out;
}

namespace {

/// One bag per position: bounds 0, 1, ..., n (embedding as an embedding_bag of single rows).
std::vector<int64_t> single_bounds(int64_t n) {
  std::vector<int64_t> b(static_cast<std::size_t>(n) + 1);
  for (int64_t i = 0; i <= n; ++i) b[static_cast<std::size_t>(i)] = i;
  return b;
}

Tensor embedding_backward(const Tensor& grad, const Tensor& indices, int64_t num_rows, int64_t padding_idx) {
  const Tensor g = grad.contiguous();
  const Tensor idx = indices.contiguous();
  const int64_t dim = g.size(-1);
  Tensor gw = empty_output({num_rows, dim}, g.dtype());
  PinSet pins;
  pins.add(g, AccessMode::Read).add(idx, AccessMode::Read).add(gw, AccessMode::Write);
  pins.acquire();
  dispatch_index(idx.dtype(), [&](auto itag) {
    using I = decltype(itag);
    dispatch_float(g.dtype(), [&](auto t) {
      using T = decltype(t);
      T* out = static_cast<T*>(gw.data_ptr());
      bag_backward_weight<T, I>(out, static_cast<const T*>(g.data_ptr()), static_cast<const I*>(idx.data_ptr()),
                                nullptr, single_bounds(idx.numel()), num_rows, dim, false);
      if (padding_idx >= 0) std::fill(out + padding_idx * dim, out + (padding_idx + 1) * dim, T(0));
    });
  });
  return gw;
}

}  // namespace

Tensor embedding(const Tensor& weight, const Tensor& indices, std::optional<int64_t> padding_idx) {
  constexpr const char* op = "embedding";
  check_backend(OpKind::embedding);
  check_float(op, weight, "weight");
  check_rank(op, weight, 2, "weight");
  check_index(op, indices, "indices");
  const int64_t num_rows = weight.size(0), dim = weight.size(1);
  int64_t pad = -1;
  if (padding_idx) {
    STRATA_CHECK(*padding_idx >= -num_rows && *padding_idx < num_rows, op, ": padding_idx ", *padding_idx,
                 " must be within num_embeddings (", num_rows, ") of weight ", weight.describe());
    pad = *padding_idx < 0 ? *padding_idx + num_rows : *padding_idx;
  }
  const int64_t n = indices.numel();
  const Tensor wc = weight.contiguous();
  const Tensor ic = indices.contiguous();
  Dims osizes = indices.sizes();
  osizes.push_back(dim);
  Tensor out = empty_output(osizes, weight.dtype());
  bags_into(op, weight, wc, ic, Tensor(), single_bounds(n), false, out);
  if (autograd::needs_grad({&weight})) {
    auto node = autograd::make_node("EmbeddingBackward", {&weight},
                                    [num_rows, pad](autograd::Node& nd, const TensorList& g) -> TensorList {
                                      return {embedding_backward(g[0], nd.saved(0), num_rows, pad)};
                                    });
    node->save(indices);
    autograd::set_history({&out}, node);
  }
  return out;
}

void embedding_renorm_(const Tensor& weight, const Tensor& indices, double max_norm, double norm_type) {
  constexpr const char* op = "embedding_renorm_";
  check_float(op, weight, "weight");
  check_rank(op, weight, 2, "weight");
  check_index(op, indices, "indices");
  STRATA_CHECK(weight.is_contiguous(), op, ": weight ", weight.describe(), " must be contiguous");
  STRATA_CHECK(max_norm > 0 && norm_type > 0, op, ": max_norm and norm_type must be positive, got ", max_norm, " and ",
               norm_type);
  std::vector<int64_t> rows = read_indices(indices.reshape({-1}));
  check_index_range(op, rows.data(), static_cast<int64_t>(rows.size()), weight);
  const int64_t dim = weight.size(1);
  std::sort(rows.begin(), rows.end());
  rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
  PinSet pins;
  pins.add(weight, AccessMode::Write).acquire();
  dispatch_float(weight.dtype(), [&](auto t) {
    using T = decltype(t);
    T* w = weight.data<T>();
    for (int64_t r : rows) {
      T* row = w + r * dim;
      double norm = 0;
      for (int64_t k = 0; k < dim; ++k) norm += std::pow(std::abs(static_cast<double>(row[k])), norm_type);
      norm = std::pow(norm, 1.0 / norm_type);
      if (norm <= max_norm) continue;
      const T c = static_cast<T>(max_norm / (norm + 1e-7));
      for (int64_t k = 0; k < dim; ++k) row[k] *= c;
    }
  });
  weight.bump_version();
}

namespace {

// The interaction's sizes: nf features of [batch, d]; `offset` 1 with self-interaction; the output
// row holds the dense features (d) and then the pairs.
struct InteractionShape {
  int64_t nf, batch, d, offset, pairs, width;
};

// The forward over every sample: out[b] = [x_0, the dots of each feature with the earlier ones].
template <typename T>
void interaction_forward(const std::vector<const T*>& fp, T* op_out, const InteractionShape& s) {
  const int64_t nf = s.nf, batch = s.batch, d = s.d, offset = s.offset, pairs = s.pairs, width = s.width;
  const int64_t work = std::max<int64_t>(1, (pairs + 1) * d);
  // Per sample the features are transposed into ft[k][j] = f_j[k] (j padded to a multiple of
  // 8), so feature i's dots with all earlier features accumulate as vectors over j, in k order:
  // no horizontal sums (a dot of 16 elements is otherwise a chain of dependent adds).
  const int64_t nfp = (nf + 7) / 8 * 8;
  parallel_for(batch, std::max<int64_t>(1, 16384 / work), [&](int64_t begin, int64_t end) {
    std::vector<T> ft_buf(static_cast<std::size_t>(d * nfp), T(0)), acc_buf(static_cast<std::size_t>(nfp));
    T* __restrict ft = ft_buf.data();
    T* __restrict acc = acc_buf.data();
    for (int64_t b = begin; b < end; ++b) {
      T* __restrict o = op_out + b * width;
      const T* __restrict x = fp[0] + b * d;
      for (int64_t k = 0; k < d; ++k) o[k] = x[k];
      for (int64_t j = 0; j < nf; ++j) {
        const T* __restrict fj = fp[j] + b * d;
        for (int64_t k = 0; k < d; ++k) ft[k * nfp + j] = fj[k];
      }
      T* z = o + d;
      for (int64_t i = 0; i < nf; ++i) {
        const int64_t m = i + offset;
        if (m == 0) continue;
        const T* __restrict fi = fp[i] + b * d;
        // Eight dots at a time, their accumulators kept in registers across k.
        for (int64_t jb = 0; jb < m; jb += 8) {
          T v[8] = {};
          for (int64_t k = 0; k < d; ++k) {
            const T a = fi[k];
            const T* __restrict row = ft + k * nfp + jb;
            for (int l = 0; l < 8; ++l) v[l] += a * row[l];
          }
          for (int l = 0; l < 8; ++l) acc[jb + l] = v[l];
        }
        for (int64_t j = 0; j < m; ++j) *z++ = acc[j];
      }
    }
  });
}

// Note [Interaction gradient and inf]
// PyTorch (and the DLRM reference) computes Z = T Tᵀ with bmm, so the gradient of T is
// dZ·T + dZᵀ·T with dZ lower triangular: each sum runs over every feature, and for a pair i != j
// one of the two coefficients is 0 (on the diagonal, both are 0 without self-interaction and both
// non-zero with it). A NaN or ±inf at column k of feature j therefore makes column k of every
// other feature's gradient NaN (0 · inf), and of feature j's own too unless self-interaction is
// on; our one symmetric sum would give ±inf there. So the backward counts the non-finite
// features per column (x - x is NaN exactly for NaN and ±inf) and adds NaN where one other than
// the feature itself (or any, without self-interaction) is: O(nf · d) per sample beside the
// O(nf² · d) sums.
//
// The backward over every sample: the gradient of each feature that needs one (gp[i] non-null),
// from the output's gradient `gin`, with PyTorch's non-finite rule (Note [Interaction gradient and
// inf]).
template <typename T>
void interaction_backward(const std::vector<const T*>& fp, const T* gin, const std::vector<T*>& gp,
                          const InteractionShape& s) {
  const int64_t nf = s.nf, batch = s.batch, d = s.d, offset = s.offset, width = s.width;
  const int64_t work = std::max<int64_t>(1, nf * nf * d);
  parallel_for(batch, std::max<int64_t>(1, 16384 / work), [&](int64_t begin, int64_t end) {
    // Per chunk: the symmetric coefficients, the sample's features gathered into one
    // contiguous [nf, d] block, and one gradient row; the inner loops run over d with
    // unit stride and no aliasing, so they vectorize.
    const int64_t d8 = (d + 7) / 8 * 8;  // rows padded with zeros to whole vectors
    std::vector<T> sym_buf(static_cast<std::size_t>(nf * nf)), f_buf(static_cast<std::size_t>(nf * d8), T(0)),
        acc_buf(static_cast<std::size_t>(d8), T(0)), bad_buf(static_cast<std::size_t>(d), T(0));
    T* __restrict sym = sym_buf.data();
    T* __restrict fs = f_buf.data();
    T* __restrict acc = acc_buf.data();
    T* __restrict bad = bad_buf.data();
    for (int64_t b = begin; b < end; ++b) {
      // Symmetric coefficients: d out / d f_i = Σ_j sym[i][j] f_j.
      std::fill(sym, sym + nf * nf, T(0));
      const T* gz = gin + b * width + d;
      for (int64_t i = 0; i < nf; ++i)
        for (int64_t j = 0; j < i + offset; ++j) {
          const T c = *gz++;
          sym[i * nf + j] += c;
          sym[j * nf + i] += c;
        }
      // Note [Interaction gradient and inf]: bad[k] = how many features hold NaN or ±inf at k.
      std::fill(bad, bad + d, T(0));
      for (int64_t j = 0; j < nf; ++j) {
        const T* __restrict src = fp[j] + b * d;
        for (int64_t k = 0; k < d; ++k) {
          const T v = src[k], z = v - v;
          fs[j * d8 + k] = v;
          bad[k] += z != z ? T(1) : T(0);
        }
      }
      for (int64_t i = 0; i < nf; ++i) {
        if (gp[i] == nullptr) continue;
        if (i == 0) {
          const T* __restrict gx = gin + b * width;
          for (int64_t k = 0; k < d; ++k) acc[k] = gx[k];
        } else {
          for (int64_t k = 0; k < d; ++k) acc[k] = T(0);
        }
        // Eight elements at a time, their accumulators kept in registers across j.
        for (int64_t kb = 0; kb < d8; kb += 8) {
          T v[8];
          for (int l = 0; l < 8; ++l) v[l] = acc[kb + l];
          for (int64_t j = 0; j < nf; ++j) {
            const T c = sym[i * nf + j];
            const T* __restrict fj = fs + j * d8 + kb;
            for (int l = 0; l < 8; ++l) v[l] += c * fj[l];
          }
          for (int l = 0; l < 8; ++l) acc[kb + l] = v[l];
        }
        T* __restrict dst = gp[i] + b * d;
        const T* __restrict fi = fs + i * d8;
        constexpr T kNaN = std::numeric_limits<T>::quiet_NaN();
        for (int64_t k = 0; k < d; ++k) {
          const T z = fi[k] - fi[k];
          const T own = offset != 0 && z != z ? T(1) : T(0);
          dst[k] = acc[k] + (bad[k] > own ? kNaN : T(0));
        }
      }
    }
  });
}

}  // namespace

Tensor dot_interaction(const std::vector<Tensor>& features, bool self_interaction) {
  constexpr const char* op = "dot_interaction";
  check_backend(OpKind::dot_interaction);
  STRATA_CHECK(!features.empty(), "dot_interaction: expected at least one feature tensor");
  for (std::size_t k = 0; k < features.size(); ++k) {
    const std::string what = "feature " + std::to_string(k);
    check_float(op, features[k], what.c_str());
    check_rank(op, features[k], 2, what.c_str());
    check_same_dtype(op, features[0], features[k]);
    STRATA_CHECK(features[k].sizes() == features[0].sizes(), "dot_interaction: feature ", k, " ",
                 features[k].describe(), " does not match the dense features ", features[0].describe(),
                 " (every feature must be [batch, dim] with the same batch and dim)");
  }
  const int64_t nf = static_cast<int64_t>(features.size());
  const int64_t batch = features[0].sizes()[0];
  const int64_t d = features[0].sizes()[1];
  const int64_t offset = self_interaction ? 1 : 0;
  const int64_t pairs = nf * (nf - 1 + 2 * offset) / 2;
  const int64_t width = d + pairs;
  const InteractionShape shape{nf, batch, d, offset, pairs, width};
  std::vector<Tensor> fc;
  for (const Tensor& f : features) fc.push_back(f.contiguous());
  Tensor out = empty_output({batch, width}, features[0].dtype());
  {
    PinSet pins;
    for (const Tensor& f : fc) pins.add(f, AccessMode::Read);
    pins.add(out, AccessMode::Write);
    pins.acquire();
    dispatch_float(out.dtype(), [&](auto t) {
      using T = decltype(t);
      std::vector<const T*> fp;
      for (const Tensor& f : fc) fp.push_back(static_cast<const T*>(f.data_ptr()));
      T* op_out = static_cast<T*>(out.data_ptr());
      interaction_forward<T>(fp, op_out, shape);
    });
  }
  if (autograd::needs_grad(features)) {
    auto node = autograd::make_node("DotInteractionBackward", features,
                                    [nf, batch, d, shape](autograd::Node& nd, const TensorList& grads) -> TensorList {
                                      const Tensor g = grads[0].contiguous();
                                      std::vector<Tensor> f;
                                      for (int64_t k = 0; k < nf; ++k)
                                        f.push_back(nd.saved(static_cast<std::size_t>(k)).contiguous());
                                      TensorList gf(static_cast<std::size_t>(nf));
                                      for (int64_t k = 0; k < nf; ++k)
                                        if (nd.needs_input_grad(static_cast<std::size_t>(k)))
                                          gf[k] = empty_output({batch, d}, g.dtype());
                                      PinSet pins;
                                      pins.add(g, AccessMode::Read);
                                      for (const Tensor& t : f) pins.add(t, AccessMode::Read);
                                      for (const Tensor& t : gf)
                                        if (t.defined()) pins.add(t, AccessMode::Write);
                                      pins.acquire();
                                      dispatch_float(g.dtype(), [&](auto tag) {
                                        using T = decltype(tag);
                                        std::vector<const T*> fp;
                                        std::vector<T*> gp;
                                        for (const Tensor& t : f) fp.push_back(static_cast<const T*>(t.data_ptr()));
                                        for (const Tensor& t : gf)
                                          gp.push_back(t.defined() ? static_cast<T*>(t.data_ptr()) : nullptr);
                                        const T* gin = static_cast<const T*>(g.data_ptr());
                                        interaction_backward<T>(fp, gin, gp, shape);
                                      });
                                      return gf;
                                    });
    for (const Tensor& t : features) node->save(t);
    autograd::set_history({&out}, node);
  }
  return out;
}

}  // namespace strata
