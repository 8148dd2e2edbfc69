// Compiled without trapping math: Note [No trapping math in element-wise kernels] (ops/unary.cpp).

#include "ops/reduction.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "ops/binary.h"
#include "ops/comparison.h"
#include "ops/detail/cpu/elementwise.h"
#include "ops/detail/op_util.h"

namespace strata {

namespace {

using namespace ops::detail;

// Note [Reduction kernel]
// Every reduction is brought to the form in[O, R, I] -> out[O, I] over a contiguous input: the
// reduced dims form one run [d0, d1] (O = product of the dims before, I = after). Reduced dims
// that are not adjacent are reduced one run at a time, the last run first. Two kernels:
//  - I == 1 (innermost reduce): each output is a reduction of a contiguous row, with 16
//    independent accumulators (vectorized); one long row is split into fixed chunks reduced in
//    parallel and combined in order.
//  - I > 1 (outer reduce): out[o, i-block] += in[o, r, i-block] for r = 0..R-1, vectorized along
//    the contiguous i; when O x (i-blocks) gives too few tasks, R is split into fixed chunks too.
// Chunking depends only on the shape, never on the thread count, so results are reproducible.
// Sums accumulate in double (f32 inputs too): a 1M-element f32 sum is exact to ~1e-7. The kernels
// run on f32, f64, i32, i64 and u8 (dispatch_kernel_dtype); reduction_input brings other dtypes there.

enum class RedOp { Sum, Max, Min };

template <typename T, RedOp Op>
using Acc = std::conditional_t<Op == RedOp::Sum, std::conditional_t<std::is_integral_v<T>, int64_t, double>, T>;

template <typename A, RedOp Op>
constexpr A red_init() {
  if constexpr (Op == RedOp::Sum)
    return A(0);
  else if constexpr (std::is_integral_v<A>)
    return Op == RedOp::Max ? std::numeric_limits<A>::lowest() : std::numeric_limits<A>::max();
  else
    return Op == RedOp::Max ? -std::numeric_limits<A>::infinity() : std::numeric_limits<A>::infinity();
}

template <RedOp Op, typename A>
inline A combine(A acc, A v) {
  if constexpr (Op == RedOp::Sum && std::is_integral_v<A>)  // wraps around, like PyTorch's integer sums
    return static_cast<A>(static_cast<uint64_t>(acc) + static_cast<uint64_t>(v));
  else if constexpr (Op == RedOp::Sum)
    return acc + v;
  else if constexpr (Op == RedOp::Max)
    return (v > acc || v != v) ? v : acc;  // NaN propagates
  else
    return (v < acc || v != v) ? v : acc;
}

/// Reduction of n contiguous values.
template <typename T, RedOp Op>
Acc<T, Op> reduce_row(const T* x, int64_t n) {
  if constexpr (Op == RedOp::Max && std::is_floating_point_v<T>) return ops::cpu::max_contig(x, n);
  using A = Acc<T, Op>;
  constexpr int kLanes = 16;
  A acc[kLanes];
  for (int k = 0; k < kLanes; ++k) acc[k] = red_init<A, Op>();
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int k = 0; k < kLanes; ++k) acc[k] = combine<Op>(acc[k], static_cast<A>(x[i + k]));
  for (; i < n; ++i) acc[0] = combine<Op>(acc[0], static_cast<A>(x[i]));
  for (int w = kLanes / 2; w > 0; w /= 2)
    for (int k = 0; k < w; ++k) acc[k] = combine<Op>(acc[k], acc[k + w]);
  return acc[0];
}

constexpr int64_t kRowChunk = 32768;  // elements per parallel chunk of one long row
constexpr int64_t kIBlock = 1024;     // inner elements per outer-reduce task (a 4 KiB f32 row: one prefetch stream)
constexpr int64_t kMinTasks = 8;

/// out[o, i] = scale * reduce_r in[o, r, i]; `in` and `out` contiguous.
template <typename T, RedOp Op>
void reduce_ori(const T* in, T* out, int64_t O, int64_t R, int64_t I, double scale) {
  using A = Acc<T, Op>;
  auto finish = [scale](A v) -> T {
    if constexpr (Op == RedOp::Sum && !std::is_integral_v<A>)
      return static_cast<T>(v * scale);
    else
      return static_cast<T>(v);  // integer sums are never scaled (no integer mean)
  };
  if (O == 0 || I == 0) return;
  if (I == 1) {
    if (R > 2 * kRowChunk && O < kMinTasks) {
      const int64_t chunks = (R + kRowChunk - 1) / kRowChunk;
      std::vector<A> partial(static_cast<std::size_t>(chunks));
      for (int64_t o = 0; o < O; ++o) {
        const T* row = in + o * R;
        parallel_for(chunks, 1, [&](int64_t c0, int64_t c1) {
          for (int64_t c = c0; c < c1; ++c) {
            const int64_t b = c * kRowChunk;
            partial[static_cast<std::size_t>(c)] = reduce_row<T, Op>(row + b, std::min(kRowChunk, R - b));
          }
        });
        A acc = red_init<A, Op>();
        for (A p : partial) acc = combine<Op>(acc, p);
        out[o] = finish(acc);
      }
      return;
    }
    parallel_for(O, std::max<int64_t>(1, kRowChunk / std::max<int64_t>(R, 1)), [&](int64_t o0, int64_t o1) {
      for (int64_t o = o0; o < o1; ++o) out[o] = finish(reduce_row<T, Op>(in + o * R, R));
    });
    return;
  }
  const int64_t nb = (I + kIBlock - 1) / kIBlock;
  const int64_t tasks = O * nb;
  int64_t rchunks = 1;
  if (tasks < kMinTasks && R >= 128) rchunks = std::min<int64_t>((kMinTasks + tasks - 1) / tasks, R / 64);
  const int64_t rlen = (R + rchunks - 1) / rchunks;
  // partial[(task * rchunks + rc) * kIBlock + i]
  std::vector<A> partial;
  if (rchunks > 1) partial.resize(static_cast<std::size_t>(tasks * rchunks * kIBlock));
  const int64_t grain = std::max<int64_t>(1, 32768 / std::max<int64_t>(R * std::min(I, kIBlock) / rchunks, 1));
  parallel_for(tasks * rchunks, grain, [&](int64_t t0, int64_t t1) {
    A acc[kIBlock];
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t task = t / rchunks, rc = t % rchunks;
      const int64_t o = task / nb, ib = task % nb;
      const int64_t i0 = ib * kIBlock, len = std::min(kIBlock, I - i0);
      const int64_t r0 = rc * rlen, r1 = std::min(R, r0 + rlen);
      for (int64_t i = 0; i < len; ++i) acc[i] = red_init<A, Op>();
      const T* base = in + o * R * I + i0;
      for (int64_t r = r0; r < r1; ++r) {
        const T* row = base + r * I;
        for (int64_t i = 0; i < len; ++i) acc[i] = combine<Op>(acc[i], static_cast<A>(row[i]));
      }
      if (rchunks == 1) {
        T* dst = out + o * I + i0;
        for (int64_t i = 0; i < len; ++i) dst[i] = finish(acc[i]);
      } else {
        std::copy(acc, acc + len, partial.begin() + t * kIBlock);
      }
    }
  });
  if (rchunks > 1) {
    for (int64_t task = 0; task < tasks; ++task) {
      const int64_t o = task / nb, ib = task % nb;
      const int64_t i0 = ib * kIBlock, len = std::min(kIBlock, I - i0);
      for (int64_t i = 0; i < len; ++i) {
        A acc = red_init<A, Op>();
        for (int64_t rc = 0; rc < rchunks; ++rc)
          acc = combine<Op>(acc, partial[static_cast<std::size_t>((task * rchunks + rc) * kIBlock + i)]);
        out[o * I + i0 + i] = finish(acc);
      }
    }
  }
}

}  // namespace

namespace ops::detail {

std::vector<bool> reduce_mask(const char* op, const Tensor& x, IntArrayRef dims) {
  const int64_t rank = x.dim();
  std::vector<bool> mask(static_cast<std::size_t>(std::max<int64_t>(rank, 1)), dims.empty());
  for (int64_t d : dims) {
    bool ok = (rank == 0 && (d == 0 || d == -1)) || (d >= -rank && d < rank);
    STRATA_CHECK(ok, op, ": dim ", d, " is out of range for ", x.describe(), " (expected a dim in [",
                 -std::max<int64_t>(rank, 1), ", ", std::max<int64_t>(rank, 1) - 1, "])");
    const int64_t w = rank == 0 ? 0 : (d < 0 ? d + rank : d);
    STRATA_CHECK(!mask[static_cast<std::size_t>(w)], op, ": dim ", w,
                 " appears more than once in the list of dims for ", x.describe());
    mask[static_cast<std::size_t>(w)] = true;
  }
  if (rank == 0) mask.clear();
  return mask;
}

Dims reduced_sizes(const Tensor& x, const std::vector<bool>& mask, bool keepdim) {
  Dims s;
  for (int64_t d = 0; d < x.dim(); ++d) {
    if (!mask[static_cast<std::size_t>(d)])
      s.push_back(x.size(d));
    else if (keepdim)
      s.push_back(1);
  }
  return s;
}

}  // namespace ops::detail

namespace {

/// The reduction of x over `mask` with keepdim sizes (a fresh contiguous tensor). For Sum, the
/// result is multiplied by `scale_total` (1/N for mean).
template <RedOp Op>
Tensor reduce_impl(const Tensor& x, const std::vector<bool>& mask, double scale_total) {
  Tensor cur = x.contiguous();
  const int64_t rank = x.dim();
  // Size-1 dims can be treated as reduced: it merges runs and changes no value.
  std::vector<bool> m(static_cast<std::size_t>(rank));
  for (int64_t d = 0; d < rank; ++d)
    m[static_cast<std::size_t>(d)] = mask[static_cast<std::size_t>(d)] || x.size(d) == 1;
  bool first = true;
  bool done_any = false;
  int64_t d = rank - 1;
  while (d >= 0) {
    if (!m[static_cast<std::size_t>(d)]) {
      --d;
      continue;
    }
    const int64_t d1 = d;
    while (d - 1 >= 0 && m[static_cast<std::size_t>(d - 1)]) --d;
    const int64_t d0 = d;
    --d;
    int64_t O = 1, R = 1, I = 1;
    for (int64_t k = 0; k < d0; ++k) O *= cur.size(k);
    for (int64_t k = d0; k <= d1; ++k) R *= cur.size(k);
    for (int64_t k = d1 + 1; k < rank; ++k) I *= cur.size(k);
    if (R == 1) continue;  // nothing to reduce here (the copy below covers an all-size-1 reduction)
    Dims out_sizes = cur.sizes();
    for (int64_t k = d0; k <= d1; ++k) out_sizes[static_cast<std::size_t>(k)] = 1;
    Tensor next = empty_output(out_sizes, x.dtype());
    {
      PinSet pins;
      pins.add(cur, AccessMode::Read).add(next, AccessMode::Write);
      pins.acquire();
      const double scale = first ? scale_total : 1.0;
      dispatch_kernel_dtype(x.dtype(), [&](auto t) {
        using T = decltype(t);
        reduce_ori<T, Op>(static_cast<const T*>(cur.data_ptr()), static_cast<T*>(next.data_ptr()), O, R, I, scale);
      });
    }
    first = false;
    done_any = true;
    cur = next;
  }
  if (!done_any) {
    // No dim to reduce (0-D input, or every reduced dim has size 1): a copy, scaled for mean.
    Tensor next = empty_output(cur.sizes(), x.dtype());
    PinSet pins;
    pins.add(cur, AccessMode::Read).add(next, AccessMode::Write);
    pins.acquire();
    dispatch_kernel_dtype(x.dtype(), [&](auto t) {
      using T = decltype(t);
      reduce_ori<T, Op>(static_cast<const T*>(cur.data_ptr()), static_cast<T*>(next.data_ptr()), cur.numel(), 1, 1,
                        scale_total);
    });
    cur = next;
  }
  return cur;
}

/// grad (output shape) -> grad * scale expanded to x's sizes.
Tensor expand_grad(const Tensor& g, IntArrayRef keep_sizes, IntArrayRef x_sizes, double scale) {
  Tensor gk = g.reshape(keep_sizes);
  Tensor out = empty_output(x_sizes, g.dtype());
  PinSet pins;
  pins.add(gk, AccessMode::Read).add(out, AccessMode::Write);
  pins.acquire();
  dispatch_dtype(g.dtype(), [&](auto t) {
    using T = decltype(t);
    using C = compute_type_t<T>;
    const C s = static_cast<C>(scale);
    if (scale == 1.0)
      ops::cpu::map1<T, T>(out, gk, [](T v) { return v; });
    else
      ops::cpu::map1<T, T>(out, gk, [s](T v) { return static_cast<T>(static_cast<C>(v) * s); });
  });
  return out;
}

/// `x` in a dtype the kernels run on: f32 for bf16 and f16, i64 for integers and bool when
/// `widen_integers` (sums and products), the same bytes as u8 for bool otherwise, x itself else.
Tensor reduction_input(const Tensor& x, bool widen_integers) {
  if (is_reduced_float(x.dtype())) return x.to(DType::f32);
  if (widen_integers && !is_floating(x.dtype())) return x.to(DType::i64);
  if (x.dtype() == DType::boolean) return reinterpret_dtype(x, DType::u8);
  return x;
}

/// The dtype of a sum or product of x (PyTorch's: integers and bool give i64).
DType sum_dtype(const Tensor& x) { return is_floating(x.dtype()) ? x.dtype() : DType::i64; }

Tensor sum_mean(const char* op, OpKind kind, const Tensor& x, IntArrayRef dims, bool keepdim, bool is_mean) {
  check_backend(kind);
  check_defined(op, x, "input");
  STRATA_CHECK(!is_mean || is_floating(x.dtype()), op,
               ": could not infer output dtype. Input dtype must be either a "
               "floating point or complex dtype. Got: ",
               x.describe(), " (convert it with .to(f32) first)");
  const std::vector<bool> mask = reduce_mask(op, x, dims);
  int64_t count = 1;
  for (int64_t d = 0; d < x.dim(); ++d)
    if (mask[static_cast<std::size_t>(d)]) count *= x.size(d);
  const double scale =
      is_mean ? (count == 0 ? std::numeric_limits<double>::quiet_NaN() : 1.0 / static_cast<double>(count)) : 1.0;
  const Dims keep = reduced_sizes(x, mask, true);
  Tensor y = reduce_impl<RedOp::Sum>(reduction_input(x, true), mask, scale).to(sum_dtype(x));
  if (!keepdim) y = y.view(reduced_sizes(x, mask, false));
  if (autograd::needs_grad({&x})) {
    const Dims xs = x.sizes();
    const double gscale = is_mean ? 1.0 / static_cast<double>(std::max<int64_t>(count, 1)) : 1.0;
    auto node = autograd::make_node(is_mean ? "MeanBackward" : "SumBackward", {&x},
                                    [keep, xs, gscale](autograd::Node&, const TensorList& g) -> TensorList {
                                      return {expand_grad(g[0], keep, xs, gscale)};
                                    });
    autograd::set_history({&y}, node);
  }
  return y;
}

/// amax / amin's backward: grad / count to each extremum of its slice (computed in f32 for the
/// 16-bit floats, converted back). PyTorch's (grad / count) * (x == extremum): a NaN extremum equals
/// nothing, count is 0, and every element of that slice gets NaN (torch 2.13); the selects below
/// give the same.
Tensor extreme_backward(Tensor xs, Tensor yv, Tensor gk, const std::vector<bool>& mask) {
  const DType dt = xs.dtype();
  if (is_reduced_float(dt)) xs = xs.to(DType::f32), yv = yv.to(DType::f32), gk = gk.to(DType::f32);
  Tensor eq = empty_output(xs.sizes(), xs.dtype());
  {
    PinSet pins;
    pins.add(xs, AccessMode::Read).add(yv, AccessMode::Read).add(eq, AccessMode::Write);
    pins.acquire();
    dispatch_float(xs.dtype(), [&](auto t) {
      using T = decltype(t);
      ops::cpu::map2<T, T, T>(eq, xs, yv, [](T a, T b) { return a == b ? T(1) : T(0); });
    });
  }
  Tensor count = reduce_impl<RedOp::Sum>(eq, mask, 1.0);
  Tensor gx = empty_output(xs.sizes(), xs.dtype());
  {
    PinSet pins;
    pins.add(xs, AccessMode::Read).add(yv, AccessMode::Read).add(gk, AccessMode::Read).add(count, AccessMode::Read);
    pins.add(gx, AccessMode::Write).acquire();
    dispatch_float(xs.dtype(), [&](auto t) {
      using T = decltype(t);
      Tensor gc = empty_output(count.sizes(), xs.dtype());
      ops::cpu::map2<T, T, T>(gc, gk, count,
                              [](T a, T c) { return c > T(0) ? a / c : std::numeric_limits<T>::quiet_NaN(); });
      ops::cpu::map3<T, T, T, T>(gx, xs, yv, gc, [](T a, T b, T v) { return a == b || b != b ? v : T(0); });
    });
  }
  return gx.to(dt);
}

/// amax, amin, max() and min(): the extremum over `dims` of any dtype.
Tensor extreme_impl(const char* op, OpKind kind, const Tensor& x, IntArrayRef dims, bool keepdim, bool is_max) {
  check_backend(kind);
  check_defined(op, x, "input");
  const std::vector<bool> mask = reduce_mask(op, x, dims);
  for (int64_t d = 0; d < x.dim(); ++d)
    STRATA_CHECK(!(mask[static_cast<std::size_t>(d)] && x.size(d) == 0), op, ": cannot reduce over dim ", d,
                 " of size 0 of ", x.describe(), " (", is_max ? "a maximum" : "a minimum", " of nothing)");
  const Dims keep = reduced_sizes(x, mask, true);
  const Tensor xc = reduction_input(x, false);
  Tensor yk = is_max ? reduce_impl<RedOp::Max>(xc, mask, 1.0) : reduce_impl<RedOp::Min>(xc, mask, 1.0);
  if (x.dtype() == DType::boolean)
    yk = reinterpret_dtype(yk, DType::boolean);
  else
    yk = yk.to(x.dtype());
  Tensor y = keepdim ? yk : yk.view(reduced_sizes(x, mask, false));
  if (autograd::needs_grad({&x})) {
    auto node =
        autograd::make_node(is_max ? "AmaxBackward" : "AminBackward", {&x},
                            [keep, mask](autograd::Node& n, const TensorList& g) -> TensorList {
                              return {extreme_backward(n.saved(0), n.saved(1).reshape(keep), g[0].reshape(keep), mask)};
                            });
    node->save(x);
    node->save(y);
    autograd::set_history({&y}, node);
  }
  return y;
}

/// any (Max over 0/1 bytes) or all (Min): bool, or u8 for a u8 input.
Tensor any_all(const char* op, OpKind kind, const Tensor& x, IntArrayRef dims, bool keepdim, bool is_any) {
  check_backend(kind);
  check_defined(op, x, "input");
  const std::vector<bool> mask = reduce_mask(op, x, dims);
  const Tensor xb = reduction_input(x.to(DType::boolean), false);
  Tensor y =
      (is_any ? reduce_impl<RedOp::Max>(xb, mask, 1.0) : reduce_impl<RedOp::Min>(xb, mask, 1.0)).to(DType::boolean);
  if (!keepdim) y = y.view(reduced_sizes(x, mask, false));
  return x.dtype() == DType::u8 ? reinterpret_dtype(y, DType::u8) : y;
}

// ---- prod ---------------------------------------------------------------------------------------

/// Row products of `rows` (contiguous, [n, r]) into out ([n]); A accumulates (double for floats,
/// wrapping int64 for integers).
template <typename T>
void row_products(const Tensor& rows, const Tensor& out) {
  using A = std::conditional_t<std::is_integral_v<T>, uint64_t, double>;
  const int64_t r = rows.size(-1), n = out.numel();
  const T* in = static_cast<const T*>(rows.data_ptr());
  T* o = static_cast<T*>(out.data_ptr());
  parallel_for(n, std::max<int64_t>(1, 32768 / std::max<int64_t>(r, 1)), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      A acc = 1;
      for (int64_t j = 0; j < r; ++j) acc = static_cast<A>(acc * static_cast<A>(in[i * r + j]));
      o[i] = static_cast<T>(acc);
    }
  });
}

/// gx[i, j] = g[i] * prod_{k != j} x[i, k], from prefix and suffix products (exact with zeros).
template <typename T>
void prod_grad_rows(const Tensor& x, const Tensor& g, const Tensor& gx) {
  const int64_t r = x.size(-1), n = g.numel();
  const T* in = static_cast<const T*>(x.data_ptr());
  const T* gp = static_cast<const T*>(g.data_ptr());
  T* out = static_cast<T*>(gx.data_ptr());
  parallel_for(n, std::max<int64_t>(1, 4096 / std::max<int64_t>(r, 1)), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      T prefix = 1;
      for (int64_t j = 0; j < r; ++j) {
        out[i * r + j] = prefix;
        prefix *= in[i * r + j];
      }
      T suffix = 1;
      for (int64_t j = r - 1; j >= 0; --j) {
        out[i * r + j] *= suffix * gp[i];
        suffix *= in[i * r + j];
      }
    }
  });
}

/// x's sizes with `dim` moved last (rows_along's layout).
Dims dim_last_sizes(const Tensor& x, int64_t dim) {
  Dims sizes;
  for (int64_t d = 0; d < x.dim(); ++d)
    if (d != dim) sizes.push_back(x.size(d));
  sizes.push_back(x.size(dim));
  return sizes;
}

/// The rows a product reduces, as a contiguous [rows, r]: x's `dim` moved last, or every element
/// as one row (dim < 0).
Tensor prod_rows(const Tensor& x, int64_t dim) {
  if (dim < 0) return x.contiguous().reshape({1, x.numel()});
  const int64_t r = x.size(dim);
  int64_t n = 1;
  for (int64_t d = 0; d < x.dim(); ++d)
    if (d != dim) n *= x.size(d);
  return rows_along(x, dim).reshape({n, r});
}

/// prod's gradient, by PyTorch's rule: grad * (result / x) when x holds no zero (so an inf or NaN
/// element spreads NaN through its slice, as in PyTorch), else from exclusive products.
Tensor prod_backward(const Tensor& x, const Tensor& y, const Tensor& g, int64_t dim) {
  if (!any(eq(x, 0)).item<bool>()) {
    Dims keep = x.sizes();
    for (int64_t d = 0; d < x.dim(); ++d)
      if (dim < 0 || d == dim) keep[static_cast<std::size_t>(d)] = 1;
    return mul(g.reshape(keep), div(y.reshape(keep), x));
  }
  const DType dt = x.dtype(), ct = is_reduced_float(dt) ? DType::f32 : dt;
  const Tensor rows = prod_rows(x.to(ct), dim), gc = g.to(ct).contiguous();
  Tensor gx = empty_output(rows.sizes(), ct);
  {
    PinSet pins;
    pins.add(rows, AccessMode::Read).add(gc, AccessMode::Read).add(gx, AccessMode::Write).acquire();
    dispatch_float(ct, [&](auto t) { prod_grad_rows<decltype(t)>(rows, gc, gx); });
  }
  return (dim < 0 ? gx.reshape(x.sizes()) : from_rows(gx.reshape(dim_last_sizes(x, dim)), dim, x.dim())).to(dt);
}

/// The product over `dim` (every element when dim < 0).
Tensor prod_impl(const Tensor& x, int64_t dim, bool keepdim) {
  const DType out_dtype = sum_dtype(x);
  const Tensor xc = reduction_input(x, true);
  const Tensor rows = prod_rows(xc, dim);
  Tensor y = empty_output({rows.size(0)}, xc.dtype());
  {
    PinSet pins;
    pins.add(rows, AccessMode::Read).add(y, AccessMode::Write).acquire();
    dispatch_kernel_dtype(xc.dtype(), [&](auto t) { row_products<decltype(t)>(rows, y); });
  }
  Dims sizes;
  if (dim >= 0)
    for (int64_t d = 0; d < x.dim(); ++d) {
      if (d != dim)
        sizes.push_back(x.size(d));
      else if (keepdim)
        sizes.push_back(1);
    }
  y = y.view(sizes).to(out_dtype);
  if (autograd::needs_grad({&x})) {
    auto node = autograd::make_node("ProdBackward", {&x}, [dim](autograd::Node& n, const TensorList& g) -> TensorList {
      return {prod_backward(n.saved(0), n.saved(1), g[0], dim)};
    });
    node->save(x);
    node->save(y);
    autograd::set_history({&y}, node);
  }
  return y;
}

}  // namespace

Tensor sum(const Tensor& x) { return sum_mean("sum", OpKind::sum, x, {}, false, false); }
Tensor sum(const Tensor& x, IntArrayRef dims, bool keepdim) {
  return sum_mean("sum", OpKind::sum, x, dims, keepdim, false);
}
Tensor mean(const Tensor& x) { return sum_mean("mean", OpKind::mean, x, {}, false, true); }
Tensor mean(const Tensor& x, IntArrayRef dims, bool keepdim) {
  return sum_mean("mean", OpKind::mean, x, dims, keepdim, true);
}
Tensor amax(const Tensor& x, IntArrayRef dims, bool keepdim) {
  return extreme_impl("amax", OpKind::amax, x, dims, keepdim, true);
}
Tensor amin(const Tensor& x, IntArrayRef dims, bool keepdim) {
  return extreme_impl("amin", OpKind::amin, x, dims, keepdim, false);
}
Tensor max(const Tensor& x) { return extreme_impl("max", OpKind::amax, x, {}, false, true); }
Tensor min(const Tensor& x) { return extreme_impl("min", OpKind::amin, x, {}, false, false); }

Tensor prod(const Tensor& x) {
  check_backend(OpKind::prod);
  check_defined("prod", x, "input");
  return prod_impl(x, -1, false);
}

Tensor prod(const Tensor& x, int64_t dim, bool keepdim) {
  check_backend(OpKind::prod);
  check_defined("prod", x, "input");
  const int64_t d = wrap_dim(dim, x.dim(), "prod", /*scalar_ok=*/true);
  return x.dim() == 0 ? prod_impl(x, -1, false) : prod_impl(x, d, keepdim);
}

Tensor any(const Tensor& x, IntArrayRef dims, bool keepdim) {
  return any_all("any", OpKind::any, x, dims, keepdim, true);
}
Tensor all(const Tensor& x, IntArrayRef dims, bool keepdim) {
  return any_all("all", OpKind::all, x, dims, keepdim, false);
}

}  // namespace strata
