#include "ops/shape_ops.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "autograd/view.h"
#include "ops/detail/op_util.h"

namespace strata {

namespace {

using namespace ops::detail;

// ---- small shared pieces --------------------------------------------------------------------------

/// Throws naming the first index outside [0, limit); `what` says which dim/table it indexes.
template <typename I>
void check_index_values(const char* op, const I* idx, int64_t n, int64_t limit, const std::string& what) {
  for (int64_t j = 0; j < n; ++j) {
    const int64_t v = static_cast<int64_t>(idx[j]);
    STRATA_CHECK(v >= 0 && v < limit, op, ": index ", v, " at position ", j, " is out of range for ", what,
                 " (valid indices are in [0, ", limit, "))");
  }
}

int64_t product(IntArrayRef sizes, std::size_t begin, std::size_t end) {
  int64_t p = 1;
  for (std::size_t i = begin; i < end; ++i) p *= sizes[i];
  return p;
}

// ---- cat kernel (also split's backward) ------------------------------------------------------------

/// Writes `parts` (same rank as `out`, equal sizes except in `d`) one after another along `d` into the
/// contiguous `out`. Contiguous parts are copied as one byte stream split evenly across threads; a
/// strided part goes through copy_ into its slice of `out`.
void cat_into(const Tensor& out, const std::vector<Tensor>& parts, int64_t d) {
  if (out.numel() == 0) return;
  const auto ds = static_cast<std::size_t>(d);
  const int64_t outer = product(out.sizes(), 0, ds);
  const int64_t inner = product(out.sizes(), ds + 1, out.sizes().size()) * static_cast<int64_t>(out.itemsize());
  const std::size_t k_parts = parts.size();
  std::vector<int64_t> prefix(k_parts + 1, 0);  // byte offset of each part within an output row
  std::vector<const char*> src(k_parts, nullptr);
  std::vector<int64_t> offsets(k_parts, 0);  // element offset along d
  bool any_strided = false;
  {
    PinSet pins;
    pins.add(out, AccessMode::Write);
    for (const Tensor& p : parts)
      if (p.is_contiguous() && p.numel() > 0) pins.add(p, AccessMode::Read);
    pins.acquire();
    int64_t along = 0;
    for (std::size_t k = 0; k < k_parts; ++k) {
      const Tensor& p = parts[k];
      prefix[k + 1] = prefix[k] + p.sizes()[ds] * inner;
      offsets[k] = along;
      along += p.sizes()[ds];
      if (p.numel() == 0) continue;
      if (p.is_contiguous())
        src[k] = static_cast<const char*>(p.data_ptr());
      else
        any_strided = true;
    }
    const int64_t row = prefix[k_parts];
    char* dst = static_cast<char*>(out.data_ptr());
    parallel_for(outer * row, int64_t{1} << 16, [&](int64_t begin, int64_t end) {
      int64_t o = begin / row;
      int64_t pos = begin % row;
      std::size_t k =
          static_cast<std::size_t>(std::upper_bound(prefix.begin(), prefix.end(), pos) - prefix.begin()) - 1;
      for (int64_t cur = begin; cur < end;) {
        while (prefix[k + 1] <= pos) ++k;
        const int64_t len = std::min(prefix[k + 1] - pos, end - cur);
        if (src[k] != nullptr)
          std::memcpy(dst + cur, src[k] + o * (prefix[k + 1] - prefix[k]) + (pos - prefix[k]),
                      static_cast<std::size_t>(len));
        cur += len;
        pos += len;
        if (pos == row) {
          pos = 0;
          k = 0;
          ++o;
        }
      }
    });
  }
  if (any_strided) {
    for (std::size_t k = 0; k < k_parts; ++k) {
      const Tensor& p = parts[k];
      if (p.numel() == 0 || p.is_contiguous()) continue;
      out.narrow(d, offsets[k], p.sizes()[ds]).copy_(p);
    }
  }
}

/// Validates the split sizes and returns the views; records SplitBackward when needed.
std::vector<Tensor> split_views(const Tensor& x, const Dims& sizes, int64_t d) {
  std::vector<Tensor> outs;
  outs.reserve(sizes.size());
  int64_t off = 0;
  for (int64_t s : sizes) {
    outs.push_back(x.narrow(d, off, s));
    off += s;
  }
  if (autograd::needs_grad({&x})) {
    const Dims in_sizes = x.sizes();
    auto node =
        autograd::make_node("SplitBackward", {&x}, [d, in_sizes](autograd::Node&, const TensorList& g) -> TensorList {
          Tensor gx = empty_output(in_sizes, g[0].dtype());
          cat_into(gx, g, d);
          return {gx};
        });
    autograd::set_history(outs, node);
  }
  for (Tensor& out : outs) autograd::mark_view(out, x);  // Note [View tracking]
  return outs;
}

// ---- index kernels ----------------------------------------------------------------------------------

/// Stable counting sort of `idx` (values in [0, n)): start[r]..start[r+1] lists, in increasing
/// position order, the positions j with idx[j] == r.
template <typename I>
void index_csr(const I* idx, int64_t m, int64_t n, std::vector<int64_t>& start, std::vector<int64_t>& order) {
  // Counts go two slots up so that the placement pass can use start[r + 1] as r's fill cursor: it
  // ends at the end of r's list, which is where start[r + 1] must point (no separate cursor array).
  start.assign(static_cast<std::size_t>(n) + 2, 0);
  for (int64_t j = 0; j < m; ++j) ++start[static_cast<std::size_t>(idx[j]) + 2];
  for (int64_t r = 2; r < n + 2; ++r) start[r] += start[r - 1];
  order.resize(static_cast<std::size_t>(m));
  for (int64_t j = 0; j < m; ++j) order[start[static_cast<std::size_t>(idx[j]) + 1]++] = j;
  start.pop_back();
}

/// gx[o, r, :] = Σ_{j: idx[j] = r} g[o, j, :] in increasing j; rows (o, r) in parallel.
Tensor index_select_backward(const Tensor& grad, const Tensor& index, int64_t d, const Dims& in_sizes) {
  const Tensor g = grad.contiguous();
  const Tensor ic = index.contiguous();
  Tensor gx = empty_output(in_sizes, g.dtype());
  const auto ds = static_cast<std::size_t>(d);
  const int64_t outer = product(in_sizes, 0, ds);
  const int64_t n = in_sizes[ds];
  const int64_t inner = product(in_sizes, ds + 1, in_sizes.size());
  const int64_t m = ic.numel();
  PinSet pins;
  pins.add(g, AccessMode::Read).add(ic, AccessMode::Read).add(gx, AccessMode::Write);
  pins.acquire();
  std::vector<int64_t> start, order;
  dispatch_index(ic.dtype(), [&](auto itag) {
    using I = decltype(itag);
    index_csr(static_cast<const I*>(ic.data_ptr()), m, n, start, order);
  });
  dispatch_float(g.dtype(), [&](auto t) {
    using T = decltype(t);
    const T* gp = static_cast<const T*>(g.data_ptr());
    T* out = static_cast<T*>(gx.data_ptr());
    parallel_for(outer * n, std::max<int64_t>(1, 16384 / std::max<int64_t>(inner, 1)), [&](int64_t begin, int64_t end) {
      int64_t o = begin / n, r = begin % n;
      int64_t zero_from = begin;  // rows [zero_from, row) are untouched and not yet zeroed
      for (int64_t row = begin; row < end; ++row, ++r) {
        if (r == n) {
          r = 0;
          ++o;
        }
        const int64_t b = start[r], e = start[r + 1];
        if (b == e) continue;
        // Untouched rows are zeroed in runs: one fill per run, not one per row.
        std::fill(out + zero_from * inner, out + row * inner, T(0));
        zero_from = row + 1;
        T* __restrict dst = out + row * inner;
        const T* __restrict s0 = gp + (o * m + order[b]) * inner;
        for (int64_t i = 0; i < inner; ++i) dst[i] = s0[i];
        for (int64_t q = b + 1; q < e; ++q) {
          const T* __restrict s = gp + (o * m + order[q]) * inner;
          for (int64_t i = 0; i < inner; ++i) dst[i] += s[i];
        }
      }
      std::fill(out + zero_from * inner, out + end * inner, T(0));
    });
  });
  return gx;
}

/// The dims of a rank-R index other than `skip_a` and `skip_b`, and the row count they span.
struct RowDims {
  Dims dims;
  int64_t rows = 1;
};

RowDims row_dims(IntArrayRef sizes, int64_t skip_a, int64_t skip_b) {
  RowDims r;
  for (int64_t i = 0; i < static_cast<int64_t>(sizes.size()); ++i) {
    if (i == skip_a || i == skip_b) continue;
    r.dims.push_back(i);
    r.rows *= sizes[static_cast<std::size_t>(i)];
  }
  return r;
}

/// Offsets of row `row` (over rd.dims) in a contiguous tensor of `isizes` and in one with strides `xs`.
void row_offsets(int64_t row, const RowDims& rd, IntArrayRef isizes, IntArrayRef is, IntArrayRef xs, int64_t& ioff,
                 int64_t& xoff) {
  ioff = 0;
  xoff = 0;
  for (std::size_t q = rd.dims.size(); q-- > 0;) {
    const auto dd = static_cast<std::size_t>(rd.dims[q]);
    const int64_t c = row % isizes[dd];
    row /= isizes[dd];
    ioff += c * is[dd];
    xoff += c * xs[dd];
  }
}

/// gather over a contiguous x and index; out has index's sizes (contiguous). Rows over every dim
/// but the last run in parallel.
void gather_kernel(const Tensor& out, const Tensor& xc, const Tensor& ic, int64_t d) {
  const int64_t last = ic.dim() - 1;
  const Dims& isz = ic.sizes();
  const Dims is = contiguous_strides(isz);
  Dims xs = xc.strides();
  const int64_t xsd = xs[static_cast<std::size_t>(d)];
  const int64_t xsl = d == last ? 0 : xs[static_cast<std::size_t>(last)];
  xs[static_cast<std::size_t>(d)] = 0;  // the coordinate along d comes from the index
  const int64_t inner = isz[static_cast<std::size_t>(last)];
  const RowDims rd = row_dims(isz, last, last);
  dispatch_itemsize(xc.itemsize(), [&](auto utag) {
    using U = decltype(utag);
    dispatch_index(ic.dtype(), [&](auto itag) {
      using I = decltype(itag);
      const U* xp = static_cast<const U*>(xc.data_ptr());
      const I* ip = static_cast<const I*>(ic.data_ptr());
      U* op = static_cast<U*>(out.data_ptr());
      parallel_for(rd.rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(inner, 1)), [&](int64_t begin, int64_t end) {
        for (int64_t row = begin; row < end; ++row) {
          int64_t ioff, xoff;
          row_offsets(row, rd, isz, is, xs, ioff, xoff);
          const I* __restrict irow = ip + ioff;
          U* __restrict orow = op + ioff;
          for (int64_t k = 0; k < inner; ++k) orow[k] = xp[xoff + k * xsl + static_cast<int64_t>(irow[k]) * xsd];
        }
      });
    });
  });
}

/// Scatter-add of gather's gradient into zeros of x's (contiguous) shape. Lines of x along `d` are
/// independent, so rows over the other dims run in parallel; within a line, duplicates add up in
/// index order.
Tensor gather_backward(const Tensor& grad, const Tensor& index, int64_t d, const Dims& in_sizes) {
  const Tensor g = grad.contiguous();
  const Tensor ic = index.contiguous();
  Tensor gx = zeros(in_sizes, {g.dtype(), nullptr});
  const int64_t rank = ic.dim();
  const int64_t last = rank - 1;
  const Dims& isz = ic.sizes();
  const Dims is = contiguous_strides(isz);
  const Dims xs = contiguous_strides(in_sizes);
  if (ic.numel() == 0) return gx;
  PinSet pins;
  pins.add(g, AccessMode::Read).add(ic, AccessMode::Read).add(gx, AccessMode::Write);
  pins.acquire();
  const RowDims rd = row_dims(isz, d, last);
  const int64_t nd = isz[static_cast<std::size_t>(d)];
  const int64_t nl = d == last ? 1 : isz[static_cast<std::size_t>(last)];
  const int64_t isd = is[static_cast<std::size_t>(d)];
  const int64_t xsd = xs[static_cast<std::size_t>(d)];
  dispatch_float(g.dtype(), [&](auto t) {
    using T = decltype(t);
    dispatch_index(ic.dtype(), [&](auto itag) {
      using I = decltype(itag);
      const T* gp = static_cast<const T*>(g.data_ptr());
      const I* ip = static_cast<const I*>(ic.data_ptr());
      T* xp = static_cast<T*>(gx.data_ptr());
      parallel_for(rd.rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(nd * nl, 1)),
                   [&](int64_t begin, int64_t end) {
                     for (int64_t row = begin; row < end; ++row) {
                       int64_t ioff, xoff;
                       row_offsets(row, rd, isz, is, xs, ioff, xoff);
                       for (int64_t j = 0; j < nd; ++j) {
                         const I* __restrict irow = ip + ioff + j * isd;
                         const T* __restrict grow = gp + ioff + j * isd;
                         // x is contiguous, so its last dim has stride 1 (when d is not the last dim).
                         for (int64_t k = 0; k < nl; ++k) xp[xoff + k + static_cast<int64_t>(irow[k]) * xsd] += grow[k];
                       }
                     }
                   });
    });
  });
  return gx;
}

}  // namespace

// ---- view ops ---------------------------------------------------------------------------------------

Tensor reshape(const Tensor& x, IntArrayRef sizes) {
  check_backend(OpKind::reshape);
  check_defined("reshape", x, "input");
  int64_t known = 1;
  int infer = 0;
  for (int64_t s : sizes) {
    if (s == -1) {
      ++infer;
      continue;
    }
    STRATA_CHECK(s >= 0, "reshape: invalid size ", s, " in shape ", sizes, " for ", x.describe());
    STRATA_CHECK(!__builtin_mul_overflow(known, s, &known), "reshape: shape ", sizes, " has too many elements");
  }
  STRATA_CHECK(infer <= 1, "reshape: only one dimension can be -1, got shape ", sizes, " for ", x.describe());
  const bool ok = infer == 0 ? known == x.numel() : known != 0 && x.numel() % known == 0;
  STRATA_CHECK(ok, "reshape: shape ", sizes, " is invalid for ", x.describe(), " (", x.numel(), " elements)");
  Tensor y = x.reshape(sizes);
  if (autograd::needs_grad({&x})) {
    const Dims in_sizes = x.sizes();
    auto node = autograd::make_node(
        "ReshapeBackward", {&x},
        [in_sizes](autograd::Node&, const TensorList& g) -> TensorList { return {g[0].reshape(in_sizes)}; });
    autograd::set_history({&y}, node);
  }
  autograd::mark_view(y, x);                                // Note [View tracking]
  if (OpRecorder* rec = op_recorder()) rec->reshape(x, y);  // Note [Op recording hook]
  return y;
}

Tensor flatten(const Tensor& x, int64_t start_dim, int64_t end_dim) {
  check_backend(OpKind::reshape);
  check_defined("flatten", x, "input");
  if (x.dim() == 0) {
    wrap_dim(start_dim, 0, "flatten", true);
    wrap_dim(end_dim, 0, "flatten", true);
    return reshape(x, {1});
  }
  const int64_t a = wrap_dim(start_dim, x.dim(), "flatten");
  const int64_t b = wrap_dim(end_dim, x.dim(), "flatten");
  STRATA_CHECK(a <= b, "flatten: start_dim ", start_dim, " must not come after end_dim ", end_dim, " (", x.describe(),
               ")");
  Dims s;
  for (int64_t i = 0; i < a; ++i) s.push_back(x.sizes()[i]);
  s.push_back(product(x.sizes(), static_cast<std::size_t>(a), static_cast<std::size_t>(b) + 1));
  for (int64_t i = b + 1; i < x.dim(); ++i) s.push_back(x.sizes()[i]);
  return reshape(x, s);
}

Tensor transpose(const Tensor& x, int64_t dim0, int64_t dim1) {
  check_backend(OpKind::transpose);
  check_defined("transpose", x, "input");
  const int64_t a = wrap_dim(dim0, x.dim(), "transpose", true);
  const int64_t b = wrap_dim(dim1, x.dim(), "transpose", true);
  Tensor y = x.transpose(a, b);
  if (autograd::needs_grad({&x})) {
    auto node = autograd::make_node(
        "TransposeBackward", {&x},
        [a, b](autograd::Node&, const TensorList& g) -> TensorList { return {g[0].transpose(a, b)}; });
    autograd::set_history({&y}, node);
  }
  autograd::mark_view(y, x);  // Note [View tracking]
  return y;
}

Tensor permute(const Tensor& x, IntArrayRef dims) {
  check_backend(OpKind::permute);
  check_defined("permute", x, "input");
  STRATA_CHECK(static_cast<int64_t>(dims.size()) == x.dim(), "permute: got ", dims.size(), " dims ", dims, " for ",
               x.describe(), " of rank ", x.dim());
  Dims wrapped(dims.size());
  Dims inverse(dims.size(), -1);
  for (std::size_t i = 0; i < dims.size(); ++i) {
    const int64_t d = wrap_dim(dims[i], x.dim(), "permute");
    STRATA_CHECK(inverse[static_cast<std::size_t>(d)] < 0, "permute: dim ", d, " appears more than once in ", dims,
                 " for ", x.describe());
    inverse[static_cast<std::size_t>(d)] = static_cast<int64_t>(i);
    wrapped[i] = d;
  }
  Tensor y = x.permute(wrapped);
  if (autograd::needs_grad({&x})) {
    auto node = autograd::make_node(
        "PermuteBackward", {&x},
        [inverse](autograd::Node&, const TensorList& g) -> TensorList { return {g[0].permute(inverse)}; });
    autograd::set_history({&y}, node);
  }
  autograd::mark_view(y, x);  // Note [View tracking]
  return y;
}

Tensor slice(const Tensor& x, int64_t dim, std::optional<int64_t> start, std::optional<int64_t> end, int64_t step) {
  check_backend(OpKind::slice);
  check_defined("slice", x, "input");
  STRATA_CHECK(x.dim() > 0, "slice: cannot slice a 0-dim tensor ", x.describe());
  const int64_t d = wrap_dim(dim, x.dim(), "slice");
  STRATA_CHECK(step > 0, "slice: step must be positive, got ", step, " (", x.describe(), ")");
  const int64_t n = x.sizes()[static_cast<std::size_t>(d)];
  auto clamp = [n](int64_t v) { return std::clamp<int64_t>(v < 0 ? v + n : v, 0, n); };
  const int64_t b = start ? clamp(*start) : 0;
  const int64_t e = std::max(b, end ? clamp(*end) : n);
  Tensor y = x.slice(d, b, e, step);
  if (autograd::needs_grad({&x})) {
    const Dims in_sizes = x.sizes();
    auto node = autograd::make_node("SliceBackward", {&x},
                                    [in_sizes, d, b, e, step](autograd::Node&, const TensorList& g) -> TensorList {
                                      Tensor gx = zeros(in_sizes, {g[0].dtype(), nullptr});
                                      gx.slice(d, b, e, step).copy_(g[0]);
                                      return {gx};
                                    });
    autograd::set_history({&y}, node);
  }
  autograd::mark_view(y, x);  // Note [View tracking]
  return y;
}

std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim) {
  check_backend(OpKind::split);
  check_defined("split", x, "input");
  STRATA_CHECK(x.dim() > 0, "split: cannot split a 0-dim tensor ", x.describe());
  const int64_t d = wrap_dim(dim, x.dim(), "split");
  STRATA_CHECK(split_size > 0, "split: split_size must be positive, got ", split_size, " (", x.describe(), ")");
  const int64_t n = x.sizes()[static_cast<std::size_t>(d)];
  Dims sizes;
  for (int64_t off = 0; off < n; off += split_size) sizes.push_back(std::min(split_size, n - off));
  if (sizes.empty()) sizes.push_back(0);  // PyTorch: one empty piece
  return split_views(x, sizes, d);
}

std::vector<Tensor> split(const Tensor& x, IntArrayRef split_sizes, int64_t dim) {
  check_backend(OpKind::split);
  check_defined("split", x, "input");
  STRATA_CHECK(x.dim() > 0, "split: cannot split a 0-dim tensor ", x.describe());
  const int64_t d = wrap_dim(dim, x.dim(), "split");
  STRATA_CHECK(!split_sizes.empty(), "split: split_sizes is empty (", x.describe(), ")");
  int64_t total = 0;
  for (int64_t s : split_sizes) {
    STRATA_CHECK(s >= 0, "split: split sizes ", split_sizes, " must be non-negative (", x.describe(), ")");
    total += s;
  }
  STRATA_CHECK(total == x.sizes()[static_cast<std::size_t>(d)], "split: split sizes ", split_sizes, " sum to ", total,
               " but dim ", d, " of ", x.describe(), " has size ", x.sizes()[static_cast<std::size_t>(d)]);
  return split_views(x, split_sizes.to_dims(), d);
}

// ---- data-moving ops --------------------------------------------------------------------------------

Tensor cat(const std::vector<Tensor>& tensors, int64_t dim) {
  check_backend(OpKind::cat);
  STRATA_CHECK(!tensors.empty(), "cat: expected a non-empty list of tensors");
  for (std::size_t k = 0; k < tensors.size(); ++k)
    STRATA_CHECK(tensors[k].defined(), "cat: tensor ", k, " is undefined");
  // Like PyTorch, 1-D empty tensors are skipped whatever the other shapes.
  auto skipped = [](const Tensor& t) { return t.dim() == 1 && t.numel() == 0; };
  const Tensor* ref = nullptr;
  for (const Tensor& t : tensors) {
    check_same_dtype("cat", tensors[0], t);
    if (ref == nullptr && !skipped(t)) ref = &t;
  }
  if (ref == nullptr) ref = &tensors[0];
  STRATA_CHECK(ref->dim() > 0, "cat: zero-dimensional tensor ", ref->describe(), " cannot be concatenated");
  const int64_t d = wrap_dim(dim, ref->dim(), "cat");
  const auto ds = static_cast<std::size_t>(d);
  std::vector<Tensor> parts;
  Dims out_sizes = ref->sizes();
  out_sizes[ds] = 0;
  for (const Tensor& t : tensors) {
    if (skipped(t) && &t != ref) continue;
    STRATA_CHECK(t.dim() == ref->dim(), "cat: tensors must have the same rank, got ", ref->describe(), " and ",
                 t.describe());
    for (std::size_t i = 0; i < static_cast<std::size_t>(t.dim()); ++i)
      STRATA_CHECK(i == ds || t.sizes()[i] == ref->sizes()[i], "cat: sizes of ", ref->describe(), " and ", t.describe(),
                   " must match except in dimension ", d, " (they differ at dim ", i, ")");
    out_sizes[ds] += t.sizes()[ds];
    parts.push_back(t);
  }
  Tensor out = empty_output(out_sizes, ref->dtype());
  cat_into(out, parts, d);
  if (autograd::needs_grad(tensors)) {
    std::vector<int64_t> lengths;  // -1: a skipped empty tensor
    for (const Tensor& t : tensors) lengths.push_back(skipped(t) && &t != ref ? -1 : t.sizes()[ds]);
    auto node =
        autograd::make_node("CatBackward", tensors, [d, lengths](autograd::Node& n, const TensorList& g) -> TensorList {
          TensorList gs;
          int64_t off = 0;
          for (std::size_t k = 0; k < lengths.size(); ++k) {
            if (lengths[k] < 0) {
              gs.push_back(n.needs_input_grad(k) ? empty_output({0}, g[0].dtype()) : Tensor());
              continue;
            }
            // A fresh tensor, not a view of g[0]: a pending view would hold the whole concatenated
            // gradient alive until its slot is consumed, and could not take later contributions in
            // place (Note [In-place gradient accumulation]). DenseNet's blocks, whose features are
            // read by every later concatenation, measured a feature map above Auto's predicted peak.
            gs.push_back(n.needs_input_grad(k) ? g[0].narrow(d, off, lengths[k]).clone() : Tensor());
            off += lengths[k];
          }
          return gs;
        });
    autograd::set_history({&out}, node);
  }
  return out;
}

Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index) {
  check_backend(OpKind::index_select);
  check_defined("index_select", x, "input");
  check_index("index_select", index, "index");
  STRATA_CHECK(x.dim() > 0, "index_select: input must have at least one dim, got ", x.describe());
  STRATA_CHECK(index.dim() <= 1, "index_select: index must be 1-D or 0-D, got ", index.describe());
  const int64_t d = wrap_dim(dim, x.dim(), "index_select");
  const auto ds = static_cast<std::size_t>(d);
  const Tensor xc = x.contiguous();
  const Tensor ic = index.contiguous();
  const int64_t m = ic.numel();
  const int64_t n = x.sizes()[ds];
  Dims out_sizes = x.sizes();
  out_sizes[ds] = m;
  Tensor out = empty_output(out_sizes, x.dtype());
  {
    PinSet pins;
    pins.add(xc, AccessMode::Read).add(ic, AccessMode::Read).add(out, AccessMode::Write);
    pins.acquire();
    const int64_t outer = product(x.sizes(), 0, ds);
    const int64_t inner = product(x.sizes(), ds + 1, x.sizes().size());
    dispatch_index(ic.dtype(), [&](auto itag) {
      using I = decltype(itag);
      const I* ip = static_cast<const I*>(ic.data_ptr());
      check_index_values("index_select", ip, m, n,
                         "dim " + std::to_string(d) + " of " + x.describe() + " (size " + std::to_string(n) + ")");
      if (out.numel() == 0) return;
      dispatch_itemsize(x.itemsize(), [&](auto utag) {
        using U = decltype(utag);
        const U* xp = static_cast<const U*>(xc.data_ptr());
        U* op = static_cast<U*>(out.data_ptr());
        parallel_for(outer * m, std::max<int64_t>(1, 16384 / std::max<int64_t>(inner, 1)),
                     [&](int64_t begin, int64_t end) {
                       int64_t o = begin / m, j = begin % m;
                       for (int64_t row = begin; row < end; ++row) {
                         const U* __restrict s = xp + (o * n + static_cast<int64_t>(ip[j])) * inner;
                         U* __restrict t = op + row * inner;
                         for (int64_t i = 0; i < inner; ++i) t[i] = s[i];
                         if (++j == m) {
                           j = 0;
                           ++o;
                         }
                       }
                     });
      });
    });
  }
  if (autograd::needs_grad({&x})) {
    const Dims in_sizes = x.sizes();
    auto node = autograd::make_node("IndexSelectBackward", {&x, &index},
                                    [d, in_sizes](autograd::Node& n, const TensorList& g) -> TensorList {
                                      return {index_select_backward(g[0], n.saved(0), d, in_sizes), Tensor()};
                                    });
    node->save(index);
    autograd::set_history({&out}, node);
  }
  return out;
}

Tensor gather(const Tensor& x, int64_t dim, const Tensor& index) {
  check_backend(OpKind::gather);
  check_defined("gather", x, "input");
  check_index("gather", index, "index");
  STRATA_CHECK(x.dim() > 0, "gather: input must have at least one dim, got ", x.describe());
  STRATA_CHECK(index.dim() == x.dim(), "gather: index ", index.describe(), " must have the same rank as the input ",
               x.describe());
  const int64_t d = wrap_dim(dim, x.dim(), "gather");
  for (int64_t i = 0; i < x.dim(); ++i)
    STRATA_CHECK(i == d || index.sizes()[i] <= x.sizes()[i], "gather: index ", index.describe(),
                 " is larger than the input ", x.describe(), " at dim ", i, " (only dim ", d, " may differ)");
  const Tensor xc = x.contiguous();
  const Tensor ic = index.contiguous();
  Tensor out = empty_output(index.sizes(), x.dtype());
  {
    PinSet pins;
    pins.add(xc, AccessMode::Read).add(ic, AccessMode::Read).add(out, AccessMode::Write);
    pins.acquire();
    const int64_t n = x.sizes()[static_cast<std::size_t>(d)];
    dispatch_index(ic.dtype(), [&](auto itag) {
      using I = decltype(itag);
      check_index_values("gather", static_cast<const I*>(ic.data_ptr()), ic.numel(), n,
                         "dim " + std::to_string(d) + " of " + x.describe() + " (size " + std::to_string(n) + ")");
    });
    if (out.numel() > 0) gather_kernel(out, xc, ic, d);
  }
  if (autograd::needs_grad({&x})) {
    const Dims in_sizes = x.sizes();
    auto node = autograd::make_node("GatherBackward", {&x, &index},
                                    [d, in_sizes](autograd::Node& n, const TensorList& g) -> TensorList {
                                      return {gather_backward(g[0], n.saved(0), d, in_sizes), Tensor()};
                                    });
    node->save(index);
    autograd::set_history({&out}, node);
  }
  return out;
}

}  // namespace strata
