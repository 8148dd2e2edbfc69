#include "ops/scatter.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "autograd/grad_mode.h"
#include "ops/detail/op_util.h"
#include "ops/inplace.h"
#include "ops/shape_ops.h"

namespace strata {

namespace {

using namespace ops::detail;

enum class Reduce { none, sum, prod, mean, amax, amin };

Reduce parse_reduce(std::string_view r) {
  if (r == "sum") return Reduce::sum;
  if (r == "prod") return Reduce::prod;
  if (r == "mean") return Reduce::mean;
  if (r == "amax") return Reduce::amax;
  if (r == "amin") return Reduce::amin;
  STRATA_FAIL("scatter_reduce: reduce argument must be one of 'sum', 'prod', 'mean', 'amax' or 'amin', got '", r, "'");
}

/// Where each scattered element goes: position p of index (row-major) reads src at source[p] and
/// writes out (contiguous, x's shape) at target[p]; `scattered[t]` marks the targets written.
struct ScatterPlan {
  std::vector<int64_t> target, source;
};

/// The checks every scatter op shares (the header's rules); returns the wrapped dim.
int64_t check_scatter(const char* op, const Tensor& x, int64_t dim, const Tensor& index, const Tensor* src) {
  check_defined(op, x, "self");
  check_index(op, index, "index");
  STRATA_CHECK(index.dim() == x.dim(), op, ": index ", index.describe(),
               " must have the same number of dimensions as self ", x.describe());
  const int64_t d = wrap_dim(dim, std::max<int64_t>(x.dim(), 1), op);
  if (src != nullptr) {
    check_defined(op, *src, "src");
    STRATA_CHECK(src->dtype() == x.dtype(), op, ": src ", src->describe(), " must have the dtype of self ",
                 x.describe());
    STRATA_CHECK(src->dim() == x.dim(), op, ": src ", src->describe(),
                 " must have the same number of dimensions as self ", x.describe());
  }
  for (int64_t k = 0; k < index.dim(); ++k)
    STRATA_CHECK((k == d || index.size(k) <= x.size(k)) && (src == nullptr || index.size(k) <= src->size(k)), op,
                 ": index ", index.describe(), " must be no larger than self ", x.describe(), " apart from dim ", d,
                 src ? " and no larger than src " + src->describe() : std::string());
  return d;
}

ScatterPlan make_scatter_plan(const char* op, const Tensor& x, int64_t d, const Tensor& index,
                              IntArrayRef src_strides) {
  ScatterPlan p;
  Dims out_strides = contiguous_strides(x.sizes());
  const int64_t stride_d = x.dim() == 0 ? 0 : out_strides[static_cast<std::size_t>(d)];
  if (x.dim() > 0) out_strides[static_cast<std::size_t>(d)] = 0;
  p.target = strided_offsets(index.sizes(), out_strides);
  p.source = strided_offsets(index.sizes(), src_strides);
  if (index.numel() == 0) p.target.clear(), p.source.clear();
  const Tensor ic = index.to(DType::i64).contiguous();
  PinSet pins;
  pins.add(ic, AccessMode::Read).acquire();
  const int64_t* ip = static_cast<const int64_t*>(ic.data_ptr());
  const int64_t n = x.dim() == 0 ? 1 : x.size(d);
  for (std::size_t q = 0; q < p.target.size(); ++q) {
    STRATA_CHECK(ip[q] >= 0 && ip[q] < n, op, ": index ", ip[q], " is out of bounds for dimension ", d, " with size ",
                 n);
    p.target[q] += ip[q] * stride_d;
  }
  return p;
}

/// The identity of a reduction (what include_self = false starts a scattered position from).
template <typename T>
T reduce_identity(Reduce r) {
  switch (r) {
    case Reduce::prod: return T(1);
    case Reduce::amax:
      return std::numeric_limits<T>::has_infinity ? -std::numeric_limits<T>::infinity()
                                                  : std::numeric_limits<T>::lowest();
    case Reduce::amin:
      return std::numeric_limits<T>::has_infinity ? std::numeric_limits<T>::infinity() : std::numeric_limits<T>::max();
    default: return T(0);
  }
}

template <typename T>
T combine(Reduce r, T a, T b) {
  switch (r) {
    case Reduce::none: return b;
    case Reduce::prod: return static_cast<T>(a * b);
    case Reduce::amax: return (a > b || a != a) ? a : b;  // NaN propagates
    case Reduce::amin: return (a < b || a != a) ? a : b;
    default: return static_cast<T>(a + b);
  }
}

/// out (a contiguous copy of x of n elements) reduced with src along the plan; mean divides each
/// scattered position once by the number of elements reduced into it.
template <typename T>
void reduce_kernel(T* out, const T* src, const ScatterPlan& p, Reduce r, bool include_self, int64_t n) {
  if (!include_self)
    for (int64_t t : p.target) out[t] = reduce_identity<T>(r);
  for (std::size_t q = 0; q < p.target.size(); ++q) out[p.target[q]] = combine(r, out[p.target[q]], src[p.source[q]]);
  if (r != Reduce::mean) return;
  std::vector<int64_t> counts(static_cast<std::size_t>(n), include_self ? 1 : 0);
  for (int64_t t : p.target) ++counts[static_cast<std::size_t>(t)];
  for (int64_t t : p.target) {
    int64_t& c = counts[static_cast<std::size_t>(t)];
    if (c == 0) continue;
    if constexpr (std::is_integral_v<T>) {
      const T v = out[t];
      out[t] = static_cast<T>(v / c - ((v % c != 0) && (v < 0) ? 1 : 0));  // floor (c > 0)
    } else {
      out[t] = static_cast<T>(out[t] / static_cast<T>(c));
    }
    c = 0;  // divided: later duplicates of t skip it
  }
}

/// The forward of every scatter op: a contiguous copy of x with src (or the 0-dim `value`) reduced in.
Tensor scatter_forward(const char* op, const Tensor& x, int64_t d, const Tensor& index, const Tensor& src, Reduce r,
                       bool include_self) {
  Tensor out = empty_output(x.sizes(), x.dtype());
  out.copy_(x);
  const bool scalar = src.dim() == 0 && x.dim() > 0;
  const Tensor sc = scalar ? src : src.contiguous();
  Dims src_strides = scalar ? Dims(static_cast<std::size_t>(index.dim()), 0) : sc.strides();
  const ScatterPlan p = make_scatter_plan(op, x, d, index, src_strides);
  if (p.target.empty()) return out;
  PinSet pins;
  pins.add(sc, AccessMode::Read).add(out, AccessMode::Write);
  pins.acquire();
  if (r == Reduce::none) {
    dispatch_itemsize(x.itemsize(), [&](auto utag) {
      using U = decltype(utag);
      const U* s = static_cast<const U*>(sc.data_ptr());
      U* o = static_cast<U*>(out.data_ptr());
      for (std::size_t q = 0; q < p.target.size(); ++q) o[p.target[q]] = s[p.source[q]];
    });
    return out;
  }
  STRATA_CHECK(x.dtype() != DType::boolean && x.dtype() != DType::f16 && x.dtype() != DType::bf16, op,
               ": reductions support f32, f64 and integer tensors, got ", x.describe());
  dispatch_kernel_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    reduce_kernel(static_cast<T*>(out.data_ptr()), static_cast<const T*>(sc.data_ptr()), p, r, include_self, x.numel());
  });
  return out;
}

// ---- scatter_reduce's backward -----------------------------------------------------------------------

/// d out[t] / d (one of its inputs e) for the non-linear reductions, per position t: mean's count,
/// amax/amin's number of elements equal to the result, prod's zero count and product of non-zeros.
struct ReduceStats {
  std::vector<double> count, nonzero_product;
  std::vector<int64_t> zeros;
};

template <typename T>
double input_weight(Reduce r, const ReduceStats& s, std::size_t t, T e, T result) {
  switch (r) {
    case Reduce::mean: return 1.0 / s.count[t];
    case Reduce::amax:
    case Reduce::amin: return e == result ? 1.0 / s.count[t] : 0.0;
    case Reduce::prod:
      if (s.zeros[t] == 0) return s.nonzero_product[t] / static_cast<double>(e);
      return s.zeros[t] == 1 && e == T(0) ? s.nonzero_product[t] : 0.0;
    default: return 1.0;
  }
}

template <typename T>
ReduceStats reduce_stats(Reduce r, const T* x, const T* src, const T* result, const ScatterPlan& p, bool include_self,
                         int64_t n) {
  ReduceStats s{std::vector<double>(static_cast<std::size_t>(n), 0.0),
                std::vector<double>(static_cast<std::size_t>(n), 1.0),
                std::vector<int64_t>(static_cast<std::size_t>(n), 0)};
  auto visit = [&](std::size_t t, T e) {
    if (r == Reduce::mean || e == result[t]) s.count[t] += 1;
    if (e == T(0))
      ++s.zeros[t];
    else
      s.nonzero_product[t] *= static_cast<double>(e);
  };
  std::vector<char> scattered(static_cast<std::size_t>(n), 0);
  for (int64_t t : p.target) scattered[static_cast<std::size_t>(t)] = 1;
  for (std::size_t t = 0; t < scattered.size(); ++t)
    if (include_self || !scattered[t]) visit(t, x[t]);
  for (std::size_t q = 0; q < p.target.size(); ++q) visit(static_cast<std::size_t>(p.target[q]), src[p.source[q]]);
  return s;
}

/// Gradients of scatter_reduce for x and src (contiguous, f32/f64).
TensorList scatter_reduce_backward(Reduce r, bool include_self, int64_t d, const Tensor& x, const Tensor& index,
                                   const Tensor& src, const Tensor& result, const Tensor& grad) {
  const Tensor xc = x.contiguous(), sc = src.contiguous(), g = grad.contiguous();
  const ScatterPlan p = make_scatter_plan("scatter_reduce", x, d, index, sc.strides());
  Tensor gx = empty_output(x.sizes(), x.dtype());
  Tensor gs = zeros(src.sizes(), {src.dtype(), nullptr});
  PinSet pins;
  pins.add(xc, AccessMode::Read).add(sc, AccessMode::Read).add(result, AccessMode::Read).add(g, AccessMode::Read);
  pins.add(gx, AccessMode::Write).add(gs, AccessMode::Write).acquire();
  dispatch_float(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T *xp = static_cast<const T*>(xc.data_ptr()), *sp = static_cast<const T*>(sc.data_ptr());
    const T *rp = static_cast<const T*>(result.data_ptr()), *gp = static_cast<const T*>(g.data_ptr());
    T *gxp = static_cast<T*>(gx.data_ptr()), *gsp = static_cast<T*>(gs.data_ptr());
    const ReduceStats s = reduce_stats(r, xp, sp, rp, p, include_self, x.numel());
    std::vector<char> scattered(static_cast<std::size_t>(x.numel()), 0);
    for (int64_t t : p.target) scattered[static_cast<std::size_t>(t)] = 1;
    for (int64_t t = 0; t < x.numel(); ++t) {
      const auto ts = static_cast<std::size_t>(t);
      const double w = !scattered[ts] ? 1.0 : include_self ? input_weight(r, s, ts, xp[t], rp[t]) : 0.0;
      gxp[t] = static_cast<T>(gp[t] * w);
    }
    for (std::size_t q = 0; q < p.target.size(); ++q) {
      const auto t = static_cast<std::size_t>(p.target[q]);
      gsp[p.source[q]] = static_cast<T>(gp[t] * input_weight(r, s, t, sp[p.source[q]], rp[t]));
    }
  });
  return {gx, gs};
}

/// src's gradient for scatter and scatter_add: the gradient gathered at index, in zeros of src's
/// shape (src may be larger than index).
Tensor src_grad(const Tensor& grad, int64_t d, const Tensor& index, const Dims& src_sizes) {
  const Tensor picked = gather(grad, d, index);
  if (picked.sizes() == src_sizes) return picked;
  Tensor gs = zeros(src_sizes, {grad.dtype(), nullptr});
  Tensor region = gs;
  for (int64_t k = 0; k < index.dim(); ++k) region = region.narrow(k, 0, index.size(k));
  region.copy_(picked);
  return gs;
}

}  // namespace

Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  check_backend(OpKind::scatter);
  const int64_t d = check_scatter("scatter", x, dim, index, &src);
  Tensor out = scatter_forward("scatter", x, d, index, src, Reduce::none, true);
  if (autograd::needs_grad({&x, &src})) {
    const Dims src_sizes = src.sizes();
    auto node = autograd::make_node("ScatterBackward", {&x, &src, &index},
                                    [d, src_sizes](autograd::Node& n, const TensorList& g) -> TensorList {
                                      const Tensor idx = n.saved(0);
                                      Tensor gx = n.needs_input_grad(0) ? scatter(g[0], d, idx, Scalar(0)) : Tensor();
                                      Tensor gs = n.needs_input_grad(1) ? src_grad(g[0], d, idx, src_sizes) : Tensor();
                                      return {gx, gs, Tensor()};
                                    });
    node->save(index);
    autograd::set_history({&out}, node);
  }
  return out;
}

Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, Scalar value) {
  check_backend(OpKind::scatter);
  const int64_t d = check_scatter("scatter", x, dim, index, nullptr);
  Tensor out = scatter_forward("scatter", x, d, index, scalar_tensor(value, x.dtype()), Reduce::none, true);
  if (autograd::needs_grad({&x})) {
    auto node =
        autograd::make_node("ScatterBackward", {&x, &index}, [d](autograd::Node& n, const TensorList& g) -> TensorList {
          return {scatter(g[0], d, n.saved(0), Scalar(0)), Tensor()};
        });
    node->save(index);
    autograd::set_history({&out}, node);
  }
  return out;
}

// The in-place forms: the out-of-place op written into x (Note [In-place ops] in ops/inplace.h).
Tensor& scatter_(Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  check_defined("scatter_", src, "src");
  return apply_in_place(
      x, {"scatter_", [&](const Tensor& a) { return scatter(a, dim, index, src); }, false, src.requires_grad(), {}});
}
Tensor& scatter_(Tensor& x, int64_t dim, const Tensor& index, Scalar value) {
  return apply_in_place(x,
                        {"scatter_", [&](const Tensor& a) { return scatter(a, dim, index, value); }, false, false, {}});
}

Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  check_backend(OpKind::scatter_add);
  const int64_t d = check_scatter("scatter_add", x, dim, index, &src);
  Tensor out = scatter_forward("scatter_add", x, d, index, src, Reduce::sum, true);
  if (autograd::needs_grad({&x, &src})) {
    const Dims src_sizes = src.sizes();
    auto node = autograd::make_node(
        "ScatterAddBackward", {&x, &src, &index}, [d, src_sizes](autograd::Node& n, const TensorList& g) -> TensorList {
          Tensor gs = n.needs_input_grad(1) ? src_grad(g[0], d, n.saved(0), src_sizes) : Tensor();
          return {g[0], gs, Tensor()};
        });
    node->save(index);
    autograd::set_history({&out}, node);
  }
  return out;
}

Tensor& scatter_add_(Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  check_defined("scatter_add_", src, "src");
  return apply_in_place(x, {"scatter_add_",
                            [&](const Tensor& a) { return scatter_add(a, dim, index, src); },
                            false,
                            src.requires_grad(),
                            {}});
}

Tensor scatter_reduce(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src, std::string_view reduce,
                      bool include_self) {
  check_backend(OpKind::scatter_reduce);
  const Reduce r = parse_reduce(reduce);
  const int64_t d = check_scatter("scatter_reduce", x, dim, index, &src);
  Tensor out = scatter_forward("scatter_reduce", x, d, index, src, r, include_self);
  if (autograd::needs_grad({&x, &src})) {
    auto node = autograd::make_node("ScatterReduceBackward", {&x, &src, &index},
                                    [r, include_self, d](autograd::Node& n, const TensorList& g) -> TensorList {
                                      TensorList grads = scatter_reduce_backward(
                                          r, include_self, d, n.saved(0), n.saved(1), n.saved(2), n.saved(3), g[0]);
                                      return {grads[0], grads[1], Tensor()};
                                    });
    node->save(x);
    node->save(index);
    node->save(src);
    node->save(out);
    autograd::set_history({&out}, node);
  }
  return out;
}

}  // namespace strata
