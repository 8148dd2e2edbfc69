// Compiled without trapping math: Note [No trapping math in element-wise kernels] (ops/unary.cpp).

#include "ops/binary.h"

#include <cmath>
#include <vector>

#include "ops/cpu/elementwise.h"
#include "ops/op_util.h"
#include "ops/reduction.h"

namespace strata {

namespace {

using namespace ops::detail;
using ops::cpu::map1;
using ops::cpu::map2;
using ops::cpu::map3;

/// The broadcast shape of a and b; the error names both tensors.
Dims broadcast_pair(const char* op, const Tensor& a, const Tensor& b) {
  const std::size_t rank = static_cast<std::size_t>(std::max(a.dim(), b.dim()));
  Dims out(rank);
  for (std::size_t i = 0; i < rank; ++i) {
    const int64_t ia = static_cast<int64_t>(i) - static_cast<int64_t>(rank) + a.dim();
    const int64_t ib = static_cast<int64_t>(i) - static_cast<int64_t>(rank) + b.dim();
    const int64_t da = ia < 0 ? 1 : a.size(ia);
    const int64_t db = ib < 0 ? 1 : b.size(ib);
    STRATA_CHECK(da == db || da == 1 || db == 1, op, ": cannot broadcast ", a.describe(), " with ", b.describe(),
                 " (dim ", i, " of the result: ", da, " vs ", db, ")");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

void check_binary(const char* op, OpKind kind, const Tensor& a, const Tensor& b) {
  check_backend(kind);
  check_float(op, a, "input");
  check_float(op, b, "other");
  check_same_dtype(op, a, b);
}

/// Sums `g` over the dims that were broadcast to reach g's shape from `shape` (g itself when the
/// shapes already match).
Tensor sum_to_shape(const Tensor& g, IntArrayRef shape) {
  if (IntArrayRef(g.sizes()) == shape) return g;
  const int64_t lead = g.dim() - static_cast<int64_t>(shape.size());
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < g.dim(); ++d)
    if (d < lead || (shape[static_cast<std::size_t>(d - lead)] == 1 && g.size(d) != 1)) dims.push_back(d);
  Tensor r = dims.empty() ? g.clone() : sum(g, dims, /*keepdim=*/true);
  return r.view(shape);
}

/// out = f(a, b) over the broadcast shape (generic lambda f, called with float or double).
template <typename F>
Tensor binary_kernel(const Tensor& a, const Tensor& b, IntArrayRef shape, F f) {
  Tensor out = empty_output(shape, a.dtype());
  PinSet pins;
  pins.add(a, AccessMode::Read).add(b, AccessMode::Read).add(out, AccessMode::Write);
  pins.acquire();
  dispatch_float(a.dtype(), [&](auto t) {
    using T = decltype(t);
    map2<T, T, T>(out, a, b, [f](T x, T y) { return f(x, y); });
  });
  return out;
}

/// out (g's shape) = f(g, a, b) with a and b broadcast to g's shape.
template <typename F>
Tensor grad3_kernel(const Tensor& g, const Tensor& a, const Tensor& b, F f) {
  Tensor out = empty_output(g.sizes(), g.dtype());
  PinSet pins;
  pins.add(g, AccessMode::Read).add(a, AccessMode::Read).add(b, AccessMode::Read).add(out, AccessMode::Write);
  pins.acquire();
  dispatch_float(g.dtype(), [&](auto t) {
    using T = decltype(t);
    map3<T, T, T, T>(out, g, a, b, [f](T x, T y, T z) { return f(x, y, z); });
  });
  return out;
}

/// out = f(x) (same shape).
template <typename F>
Tensor map_kernel(const Tensor& x, F f) {
  Tensor out = empty_output(x.sizes(), x.dtype());
  PinSet pins;
  pins.add(x, AccessMode::Read).add(out, AccessMode::Write);
  pins.acquire();
  dispatch_float(x.dtype(), [&](auto t) {
    using T = decltype(t);
    map1<T, T>(out, x, [f](T v) { return f(v); });
  });
  return out;
}

Tensor scaled(const Tensor& g, double s) {
  if (s == 1.0) return g;
  return map_kernel(g, [s](auto v) { return v * decltype(v)(s); });
}

/// a + alpha * b or a - alpha * b.
Tensor add_sub(const char* op, OpKind kind, const char* node_name, const Tensor& a, const Tensor& b, double alpha) {
  check_binary(op, kind, a, b);
  STRATA_CHECK(!std::isnan(alpha), op, ": alpha must not be NaN");
  const Dims shape = broadcast_pair(op, a, b);
  Tensor out = alpha == 1.0 ? binary_kernel(a, b, shape, [](auto x, auto y) { return x + y; })
               : alpha == -1.0 ? binary_kernel(a, b, shape, [](auto x, auto y) { return x - y; })
                               : binary_kernel(a, b, shape, [alpha](auto x, auto y) { return x + decltype(y)(alpha) * y; });
  if (autograd::needs_grad({&a, &b})) {
    auto node = autograd::make_node(node_name, {&a, &b}, [alpha](autograd::Node& n, const TensorList& g) -> TensorList {
      return {n.needs_input_grad(0) ? sum_to_shape(g[0], n.input_meta()[0].sizes) : Tensor(),
              n.needs_input_grad(1) ? sum_to_shape(scaled(g[0], alpha), n.input_meta()[1].sizes) : Tensor()};
    });
    autograd::set_history({&out}, node);
  }
  return out;
}

/// out = f(a) for a scalar overload; backward g -> dg(g) (plus a saved tensor when `save` is set).
template <typename F, typename DF>
Tensor scalar_op(const char* op, OpKind kind, const char* node_name, const Tensor& a, F f, DF df, bool save_out) {
  check_backend(kind);
  check_float(op, a, "input");
  Tensor out = map_kernel(a, f);
  if (autograd::needs_grad({&a})) {
    auto node = autograd::make_node(node_name, {&a}, [df, save_out](autograd::Node& n, const TensorList& g) -> TensorList {
      if (!save_out) return {df(g[0], Tensor(), Tensor())};
      return {df(g[0], n.saved(0), n.saved(1))};
    });
    if (save_out) {
      node->save(a);
      node->save(out);
    }
    autograd::set_history({&out}, node);
  }
  return out;
}

}  // namespace

Tensor add(const Tensor& a, const Tensor& b, double alpha) {
  Tensor out = add_sub("add", OpKind::add, "AddBackward", a, b, alpha);
  if (OpRecorder* rec = op_recorder()) rec->add(a, b, alpha, out);  // Note [Op recording hook]
  return out;
}

Tensor sub(const Tensor& a, const Tensor& b, double alpha) {
  return add_sub("sub", OpKind::sub, "SubBackward", a, b, -alpha);
}

Tensor add(const Tensor& a, double s) {
  Tensor out = scalar_op(
      "add", OpKind::add, "AddBackward", a, [s](auto v) { return v + decltype(v)(s); },
      [](const Tensor& g, const Tensor&, const Tensor&) { return g; }, false);
  if (OpRecorder* rec = op_recorder()) rec->add_scalar(a, s, out);  // Note [Op recording hook]
  return out;
}

Tensor sub(const Tensor& a, double s) {
  return scalar_op(
      "sub", OpKind::sub, "SubBackward", a, [s](auto v) { return v - decltype(v)(s); },
      [](const Tensor& g, const Tensor&, const Tensor&) { return g; }, false);
}

Tensor sub(double s, const Tensor& a) {
  return scalar_op(
      "sub", OpKind::sub, "RsubBackward", a, [s](auto v) { return decltype(v)(s) - v; },
      [](const Tensor& g, const Tensor&, const Tensor&) { return map_kernel(g, [](auto v) { return -v; }); }, false);
}

Tensor mul(const Tensor& a, double s) {
  return scalar_op(
      "mul", OpKind::mul, "MulBackward", a, [s](auto v) { return v * decltype(v)(s); },
      [s](const Tensor& g, const Tensor&, const Tensor&) { return map_kernel(g, [s](auto v) { return v * decltype(v)(s); }); },
      false);
}

Tensor div(const Tensor& a, double s) {
  return scalar_op(
      "div", OpKind::div, "DivBackward", a, [s](auto v) { return v / decltype(v)(s); },
      [s](const Tensor& g, const Tensor&, const Tensor&) { return map_kernel(g, [s](auto v) { return v / decltype(v)(s); }); },
      false);
}

Tensor div(double s, const Tensor& a) {
  // d(s / a)/da = -s / a^2 = -out / a.
  return scalar_op(
      "div", OpKind::div, "DivBackward", a, [s](auto v) { return decltype(v)(s) / v; },
      [](const Tensor& g, const Tensor& x, const Tensor& out) {
        return grad3_kernel(g, x, out, [](auto gg, auto xx, auto oo) { return -gg * oo / xx; });
      },
      true);
}

Tensor mul(const Tensor& a, const Tensor& b) {
  check_binary("mul", OpKind::mul, a, b);
  const Dims shape = broadcast_pair("mul", a, b);
  Tensor out = binary_kernel(a, b, shape, [](auto x, auto y) { return x * y; });
  if (autograd::needs_grad({&a, &b})) {
    auto node = autograd::make_node("MulBackward", {&a, &b}, [](autograd::Node& n, const TensorList& g) -> TensorList {
      Tensor ga, gb;
      if (n.needs_input_grad(0))
        ga = sum_to_shape(binary_kernel(g[0], n.saved(1), g[0].sizes(), [](auto x, auto y) { return x * y; }),
                          n.input_meta()[0].sizes);
      if (n.needs_input_grad(1))
        gb = sum_to_shape(binary_kernel(g[0], n.saved(0), g[0].sizes(), [](auto x, auto y) { return x * y; }),
                          n.input_meta()[1].sizes);
      return {ga, gb};
    });
    node->save(node->needs_input_grad(1) ? a : Tensor());
    node->save(node->needs_input_grad(0) ? b : Tensor());
    autograd::set_history({&out}, node);
  }
  return out;
}

Tensor div(const Tensor& a, const Tensor& b) {
  check_binary("div", OpKind::div, a, b);
  const Dims shape = broadcast_pair("div", a, b);
  Tensor out = binary_kernel(a, b, shape, [](auto x, auto y) { return x / y; });
  if (autograd::needs_grad({&a, &b})) {
    auto node = autograd::make_node("DivBackward", {&a, &b}, [](autograd::Node& n, const TensorList& g) -> TensorList {
      const Tensor sa = n.saved(0), sb = n.saved(1);
      Tensor ga, gb;
      if (n.needs_input_grad(0))
        ga = sum_to_shape(binary_kernel(g[0], sb, g[0].sizes(), [](auto x, auto y) { return x / y; }),
                          n.input_meta()[0].sizes);
      if (n.needs_input_grad(1))
        gb = sum_to_shape(grad3_kernel(g[0], sa, sb, [](auto gg, auto x, auto y) { return -gg * x / (y * y); }),
                          n.input_meta()[1].sizes);
      return {ga, gb};
    });
    node->save(node->needs_input_grad(1) ? a : Tensor());
    node->save(b);
    autograd::set_history({&out}, node);
  }
  return out;
}

Tensor maximum(const Tensor& a, const Tensor& b) {
  check_binary("maximum", OpKind::maximum, a, b);
  const Dims shape = broadcast_pair("maximum", a, b);
  Tensor out = binary_kernel(a, b, shape, [](auto x, auto y) {
    // NaN propagates from either side.
    return (x > y || x != x) ? x : y;
  });
  if (autograd::needs_grad({&a, &b})) {
    // PyTorch's rule: the gradient goes to a side unless the other side is larger, halved on a tie;
    // so where either side is NaN both get it (torch 2.13).
    auto node = autograd::make_node("MaximumBackward", {&a, &b}, [](autograd::Node& n, const TensorList& g) -> TensorList {
      const Tensor sa = n.saved(0), sb = n.saved(1);
      Tensor ga, gb;
      if (n.needs_input_grad(0))
        ga = sum_to_shape(grad3_kernel(g[0], sa, sb,
                                       [](auto gg, auto x, auto y) {
                                         using T = decltype(x);
                                         return x < y ? T(0) : x == y ? gg * T(0.5) : gg;
                                       }),
                          n.input_meta()[0].sizes);
      if (n.needs_input_grad(1))
        gb = sum_to_shape(grad3_kernel(g[0], sa, sb,
                                       [](auto gg, auto x, auto y) {
                                         using T = decltype(x);
                                         return x > y ? T(0) : x == y ? gg * T(0.5) : gg;
                                       }),
                          n.input_meta()[1].sizes);
      return {ga, gb};
    });
    node->save(a);
    node->save(b);
    autograd::set_history({&out}, node);
  }
  return out;
}

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  check_backend(OpKind::where);
  check_defined("where", cond, "condition");
  STRATA_CHECK(cond.dtype() == DType::boolean || cond.dtype() == DType::u8,
               "where: condition must be bool or u8, got ", cond.describe());
  check_float("where", a, "input");
  check_float("where", b, "other");
  check_same_dtype("where", a, b);
  const Dims ab = broadcast_pair("where", a, b);
  Dims shape;
  {
    bool ok = true;
    try {
      shape = broadcast_shapes(cond.sizes(), ab, "where");
    } catch (const Error&) {
      ok = false;
    }
    STRATA_CHECK(ok, "where: cannot broadcast condition ", cond.describe(), " with ", a.describe(), " and ",
                 b.describe(), " (broadcast shape ", ab, ")");
  }
  Tensor out = empty_output(shape, a.dtype());
  {
    PinSet pins;
    pins.add(cond, AccessMode::Read).add(a, AccessMode::Read).add(b, AccessMode::Read).add(out, AccessMode::Write);
    pins.acquire();
    dispatch_float(a.dtype(), [&](auto t) {
      using T = decltype(t);
      map3<T, uint8_t, T, T>(out, cond, a, b, [](uint8_t c, T x, T y) { return c != 0 ? x : y; });
    });
  }
  if (autograd::needs_grad({&a, &b})) {
    auto node = autograd::make_node("WhereBackward", {&a, &b}, [](autograd::Node& n, const TensorList& g) -> TensorList {
      const Tensor c = n.saved(0);
      auto masked = [&](bool take_true) {
        Tensor out = empty_output(g[0].sizes(), g[0].dtype());
        PinSet pins;
        pins.add(g[0], AccessMode::Read).add(c, AccessMode::Read).add(out, AccessMode::Write);
        pins.acquire();
        dispatch_float(g[0].dtype(), [&](auto t) {
          using T = decltype(t);
          map2<T, T, uint8_t>(out, g[0], c, [take_true](T gg, uint8_t cc) { return (cc != 0) == take_true ? gg : T(0); });
        });
        return out;
      };
      return {n.needs_input_grad(0) ? sum_to_shape(masked(true), n.input_meta()[0].sizes) : Tensor(),
              n.needs_input_grad(1) ? sum_to_shape(masked(false), n.input_meta()[1].sizes) : Tensor()};
    });
    node->save(cond);
    autograd::set_history({&out}, node);
  }
  return out;
}

}  // namespace strata
