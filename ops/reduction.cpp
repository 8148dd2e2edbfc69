// Compiled without trapping math: Note [No trapping math in element-wise kernels] (ops/unary.cpp).

#include "ops/reduction.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "ops/cpu/elementwise.h"
#include "ops/op_util.h"

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
// Sums accumulate in double (f32 inputs too): a 1M-element f32 sum is exact to ~1e-7.

enum class RedOp { Sum, Max };

template <typename T, RedOp Op>
using Acc = std::conditional_t<Op == RedOp::Sum, double, T>;

template <typename A, RedOp Op>
constexpr A red_init() {
  if constexpr (Op == RedOp::Sum) return A(0);
  else return -std::numeric_limits<A>::infinity();
}

template <RedOp Op, typename A>
inline A combine(A acc, A v) {
  if constexpr (Op == RedOp::Sum) return acc + v;
  else return (v > acc || v != v) ? v : acc;  // NaN propagates
}

/// Reduction of n contiguous values.
template <typename T, RedOp Op>
Acc<T, Op> reduce_row(const T* x, int64_t n) {
  if constexpr (Op == RedOp::Max) return ops::cpu::max_contig(x, n);
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
    if constexpr (Op == RedOp::Sum) return static_cast<T>(v * scale);
    else return static_cast<T>(v);
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

/// Which dims of x are reduced (empty `dims` = all); errors name `op`.
std::vector<bool> reduce_mask(const char* op, const Tensor& x, IntArrayRef dims) {
  const int64_t rank = x.dim();
  std::vector<bool> mask(static_cast<std::size_t>(std::max<int64_t>(rank, 1)), dims.empty());
  for (int64_t d : dims) {
    bool ok = (rank == 0 && (d == 0 || d == -1)) || (d >= -rank && d < rank);
    STRATA_CHECK(ok, op, ": dim ", d, " is out of range for ", x.describe(), " (expected a dim in [", -std::max<int64_t>(rank, 1),
                 ", ", std::max<int64_t>(rank, 1) - 1, "])");
    const int64_t w = rank == 0 ? 0 : (d < 0 ? d + rank : d);
    STRATA_CHECK(!mask[static_cast<std::size_t>(w)], op, ": dim ", w, " appears more than once in the list of dims for ",
                 x.describe());
    mask[static_cast<std::size_t>(w)] = true;
  }
  if (rank == 0) mask.clear();
  return mask;
}

/// Output sizes with the reduced dims kept as 1 / dropped.
Dims reduced_sizes(const Tensor& x, const std::vector<bool>& mask, bool keepdim) {
  Dims s;
  for (int64_t d = 0; d < x.dim(); ++d) {
    if (!mask[static_cast<std::size_t>(d)]) s.push_back(x.size(d));
    else if (keepdim) s.push_back(1);
  }
  return s;
}

/// The reduction of x over `mask` with keepdim sizes (a fresh contiguous tensor). For Sum, the
/// result is multiplied by `scale_total` (1/N for mean).
template <RedOp Op>
Tensor reduce_impl(const Tensor& x, const std::vector<bool>& mask, double scale_total) {
  Tensor cur = x.contiguous();
  const int64_t rank = x.dim();
  // Size-1 dims can be treated as reduced: it merges runs and changes no value.
  std::vector<bool> m(static_cast<std::size_t>(rank));
  for (int64_t d = 0; d < rank; ++d) m[static_cast<std::size_t>(d)] = mask[static_cast<std::size_t>(d)] || x.size(d) == 1;
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
      dispatch_float(x.dtype(), [&](auto t) {
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
    dispatch_float(x.dtype(), [&](auto t) {
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
  dispatch_float(g.dtype(), [&](auto t) {
    using T = decltype(t);
    const T s = static_cast<T>(scale);
    if (scale == 1.0) ops::cpu::map1<T, T>(out, gk, [](T v) { return v; });
    else ops::cpu::map1<T, T>(out, gk, [s](T v) { return v * s; });
  });
  return out;
}

Tensor sum_mean(const char* op, OpKind kind, const Tensor& x, IntArrayRef dims, bool keepdim, bool is_mean) {
  check_backend(kind);
  check_float(op, x, "input");
  const std::vector<bool> mask = reduce_mask(op, x, dims);
  int64_t count = 1;
  for (int64_t d = 0; d < x.dim(); ++d)
    if (mask[static_cast<std::size_t>(d)]) count *= x.size(d);
  const double scale = is_mean ? (count == 0 ? std::numeric_limits<double>::quiet_NaN() : 1.0 / static_cast<double>(count)) : 1.0;
  const Dims keep = reduced_sizes(x, mask, true);
  Tensor y = reduce_impl<RedOp::Sum>(x, mask, scale);
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

Tensor amax_impl(const char* op, const Tensor& x, IntArrayRef dims, bool keepdim) {
  check_backend(OpKind::amax);
  check_float(op, x, "input");
  const std::vector<bool> mask = reduce_mask(op, x, dims);
  for (int64_t d = 0; d < x.dim(); ++d)
    STRATA_CHECK(!(mask[static_cast<std::size_t>(d)] && x.size(d) == 0), op, ": cannot reduce over dim ", d,
                 " of size 0 of ", x.describe(), " (a maximum of nothing)");
  const Dims keep = reduced_sizes(x, mask, true);
  Tensor yk = reduce_impl<RedOp::Max>(x, mask, 1.0);
  Tensor y = keepdim ? yk : yk.view(reduced_sizes(x, mask, false));
  if (autograd::needs_grad({&x})) {
    auto node = autograd::make_node("AmaxBackward", {&x}, [keep, mask](autograd::Node& n, const TensorList& g) -> TensorList {
      const Tensor xs = n.saved(0);
      const Tensor yv = n.saved(1).reshape(keep);
      const Tensor gk = g[0].reshape(keep);
      // count of the maxima per output, then grad / count to each maximum. PyTorch's
      // (grad / count) * (x == max): a NaN maximum equals nothing, count is 0, and every element of
      // that slice gets NaN (torch 2.13); the selects below give the same.
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
      Tensor gc = empty_output(keep, xs.dtype());
      {
        PinSet pins;
        pins.add(gk, AccessMode::Read).add(count, AccessMode::Read).add(gc, AccessMode::Write);
        pins.acquire();
        dispatch_float(xs.dtype(), [&](auto t) {
          using T = decltype(t);
          ops::cpu::map2<T, T, T>(gc, gk, count, [](T a, T c) { return c > T(0) ? a / c : std::numeric_limits<T>::quiet_NaN(); });
        });
      }
      Tensor gx = empty_output(xs.sizes(), xs.dtype());
      {
        PinSet pins;
        pins.add(xs, AccessMode::Read).add(yv, AccessMode::Read).add(gc, AccessMode::Read).add(gx, AccessMode::Write);
        pins.acquire();
        dispatch_float(xs.dtype(), [&](auto t) {
          using T = decltype(t);
          ops::cpu::map3<T, T, T, T>(gx, xs, yv, gc, [](T a, T b, T v) { return a == b || b != b ? v : T(0); });
        });
      }
      return {gx};
    });
    node->save(x);
    node->save(y);
    autograd::set_history({&y}, node);
  }
  return y;
}

}  // namespace

Tensor sum(const Tensor& x) { return sum_mean("sum", OpKind::sum, x, {}, false, false); }
Tensor sum(const Tensor& x, IntArrayRef dims, bool keepdim) { return sum_mean("sum", OpKind::sum, x, dims, keepdim, false); }
Tensor mean(const Tensor& x) { return sum_mean("mean", OpKind::mean, x, {}, false, true); }
Tensor mean(const Tensor& x, IntArrayRef dims, bool keepdim) {
  return sum_mean("mean", OpKind::mean, x, dims, keepdim, true);
}
Tensor amax(const Tensor& x, IntArrayRef dims, bool keepdim) { return amax_impl("amax", x, dims, keepdim); }
Tensor max(const Tensor& x) { return amax_impl("max", x, {}, false); }

}  // namespace strata
