// Compiled without trapping math: Note [No trapping math in element-wise kernels] (ops/unary.cpp).

#include "ops/binary.h"

#include <cmath>
#include <type_traits>
#include <vector>

#include "core/type_promotion.h"
#include "ops/detail/cpu/elementwise.h"
#include "ops/detail/op_util.h"
#include "ops/detail/typed_kernels.h"
#include "ops/reduction.h"

namespace strata {

namespace ops::detail {

Tensor convert_operand(const Tensor& t, DType dtype) {
  if (t.dtype() == dtype) return t;
  Tensor out = t.to(dtype);
  if (is_floating(dtype) && autograd::needs_grad({&t})) {
    const DType from = t.dtype();
    auto node = autograd::make_node(
        "ToCopyBackward", {&t}, [from](autograd::Node&, const TensorList& g) -> TensorList { return {g[0].to(from)}; });
    autograd::set_history({&out}, node);
  }
  return out;
}

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

Tensor sum_to_shape(const Tensor& g, IntArrayRef shape) {
  if (IntArrayRef(g.sizes()) == shape) return g;
  const int64_t lead = g.dim() - static_cast<int64_t>(shape.size());
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < g.dim(); ++d)
    if (d < lead || (shape[static_cast<std::size_t>(d - lead)] == 1 && g.size(d) != 1)) dims.push_back(d);
  Tensor r = dims.empty() ? g.clone() : sum(g, dims, /*keepdim=*/true);
  return r.view(shape);
}

PromotedPair promote_pair(const char* op, OpKind kind, const Tensor& a, const Tensor& b, bool true_division) {
  check_backend(kind);
  check_defined(op, a, "input");
  check_defined(op, b, "other");
  PromotedPair p;
  p.shape = broadcast_pair(op, a, b);
  p.dtype = result_type(a, b);
  if (true_division && !is_floating(p.dtype)) p.dtype = kDefaultFloat;
  p.a = convert_operand(a, p.dtype);
  p.b = convert_operand(b, p.dtype);
  return p;
}

Tensor promote_with_scalar(const char* op, OpKind kind, const Tensor& a, const Scalar& s, bool true_division) {
  check_backend(kind);
  check_defined(op, a, "input");
  DType dt = result_type(a, s);
  if (true_division && !is_floating(dt)) dt = kDefaultFloat;
  return convert_operand(a, dt);
}

}  // namespace ops::detail

namespace {

using namespace ops::detail;
using ops::cpu::map1;
using ops::cpu::map2;
using ops::cpu::map3;

// ---- kernels over every dtype (Note [Compute type] in ops/detail/typed_kernels.h) ----------------------

/// out (g's shape) = f(g, a, b) with a and b broadcast to g's shape (all of g's dtype).
template <typename F>
Tensor grad3_kernel(const Tensor& g, const Tensor& a, const Tensor& b, F f) {
  Tensor out = empty_output(g.sizes(), g.dtype());
  PinSet pins;
  pins.add(g, AccessMode::Read).add(a, AccessMode::Read).add(b, AccessMode::Read).add(out, AccessMode::Write);
  pins.acquire();
  dispatch_dtype(g.dtype(), [&](auto t) {
    using T = decltype(t);
    using C = compute_type_t<T>;
    map3<T, T, T, T>(out, g, a, b, [f](T x, T y, T z) {
      return static_cast<T>(f(static_cast<C>(x), static_cast<C>(y), static_cast<C>(z)));
    });
  });
  return out;
}

Tensor scaled(const Tensor& g, double s) {
  if (s == 1.0) return g;
  return typed_scalar(g, s, [](auto v, auto k) { return v * k; });
}

// x op y where signed integers wrap around instead of overflowing (PyTorch's integer results).
constexpr auto kPlus = [](auto x, auto y) {
  using W = Wrap<decltype(x)>;
  return static_cast<decltype(x)>(static_cast<W>(x) + static_cast<W>(y));
};
constexpr auto kMinus = [](auto x, auto y) {
  using W = Wrap<decltype(x)>;
  return static_cast<decltype(x)>(static_cast<W>(x) - static_cast<W>(y));
};
constexpr auto kTimes = [](auto x, auto y) {
  using W = Wrap<decltype(x)>;
  return static_cast<decltype(x)>(static_cast<W>(x) * static_cast<W>(y));
};
constexpr auto kDivide = [](auto x, auto y) { return x / y; };  // floating only

/// floor(x / y): Python's // (the caller has refused zero integer divisors).
constexpr auto kFloorDivide = [](auto x, auto y) {
  using C = decltype(x);
  if constexpr (std::is_integral_v<C>) {
    if constexpr (std::is_signed_v<C>) {
      if (y == C(-1)) return kMinus(C(0), x);  // the one quotient that overflows wraps
      const C q = static_cast<C>(x / y);
      return (x % y != 0 && ((x < 0) != (y < 0))) ? static_cast<C>(q - 1) : q;
    } else {
      return static_cast<C>(x / y);
    }
  } else {
    // PyTorch's rounding: the quotient of x - fmod(x, y), then floor with a correction so that
    // the result is the integer nearest the exact floor.
    if (y == C(0)) return x / y;
    const C mod = std::fmod(x, y);
    C div = (x - mod) / y;
    if (mod != C(0) && ((y < C(0)) != (mod < C(0)))) div -= C(1);
    if (div == C(0)) return std::copysign(C(0), x / y);
    C fl = std::floor(div);
    if (div - fl > C(0.5)) fl += C(1);
    return fl;
  }
};

/// x - floor(x / y) * y: Python's % (the sign of the divisor).
constexpr auto kRemainder = [](auto x, auto y) {
  using C = decltype(x);
  if constexpr (std::is_integral_v<C>) {
    if constexpr (std::is_signed_v<C>) {
      if (y == C(-1)) return C(0);
      const C r = static_cast<C>(x % y);
      return (r != 0 && ((r < 0) != (y < 0))) ? static_cast<C>(r + y) : r;
    } else {
      return static_cast<C>(x % y);
    }
  } else {
    C r = std::fmod(x, y);
    if (r != C(0) && ((y < C(0)) != (r < C(0)))) r += y;
    return r;
  }
};

// NaN propagates from either side.
constexpr auto kMax = [](auto x, auto y) { return (x > y || x != x) ? x : y; };
constexpr auto kMin = [](auto x, auto y) { return (x < y || x != x) ? x : y; };

// ---- operand checks -----------------------------------------------------------------------------

void check_not_bool_sub(const char* op, DType a, DType b) {
  STRATA_CHECK(a != DType::boolean && b != DType::boolean, op,
               ": subtraction with a bool tensor is not supported (PyTorch's rule); to invert a mask use "
               "logical_not (~), to compare two masks logical_xor (^)");
}

void check_alpha(const char* op, DType dt, const Scalar& alpha) {
  STRATA_CHECK(is_floating(dt) || !alpha.is_floating(), op, ": for integral input tensors (", dt,
               "), argument alpha must not be a floating point number, got ", alpha);
  STRATA_CHECK(dt == DType::boolean || !alpha.is_bool(), op, ": boolean alpha only supported for bool tensors, got ",
               dt);
  STRATA_CHECK(!std::isnan(alpha.to_double()), op, ": alpha must not be NaN");
}

/// Integer division refuses a zero divisor (PyTorch raises ZeroDivisionError).
void check_no_zero_divisor(const char* op, const Tensor& divisor) {
  if (is_floating(divisor.dtype())) return;
  const Tensor c = divisor.contiguous();
  PinSet pins;
  pins.add(c, AccessMode::Read).acquire();
  bool zero = false;
  dispatch_dtype(c.dtype(), [&](auto t) {
    using T = decltype(t);
    const T* p = static_cast<const T*>(c.data_ptr());
    for (int64_t i = 0; i < c.numel() && !zero; ++i) zero = p[i] == T(0);
  });
  STRATA_CHECK(!zero, op, ": integer division by zero (ZeroDivisionError) in the divisor ", divisor.describe());
}

void check_floor_div_dtype(const char* op, DType dt) {
  STRATA_CHECK(dt != DType::boolean, op, ": not implemented for bool tensors (convert them to an integer dtype)");
}

// ---- add and sub --------------------------------------------------------------------------------

/// a + alpha * b (or a - alpha * b when `negate`), computed in the result type.
Tensor add_sub(const char* op, OpKind kind, const char* node_name, const Tensor& a, const Tensor& b, Scalar alpha,
               bool negate) {
  PromotedPair p = promote_pair(op, kind, a, b);
  if (negate) check_not_bool_sub(op, a.dtype(), b.dtype());
  check_alpha(op, p.dtype, alpha);
  const double alpha_d = alpha.to_double();
  Tensor out;
  if (alpha_d == 1.0 && negate)
    out = typed_binary(p.a, p.b, p.shape, kMinus);
  else if (alpha_d == 1.0)
    out = typed_binary(p.a, p.b, p.shape, kPlus);
  else
    out = dispatch_dtype(p.dtype, [&](auto t) {
      using C = compute_type_t<decltype(t)>;
      const C k = alpha.to<C>();
      return typed_binary(p.a, p.b, p.shape, [k, negate](auto x, auto y) {
        const auto ky = kTimes(static_cast<decltype(x)>(k), y);
        return negate ? kMinus(x, ky) : kPlus(x, ky);
      });
    });
  if (autograd::needs_grad({&p.a, &p.b})) {
    const double gb_scale = negate ? -alpha_d : alpha_d;
    auto node =
        autograd::make_node(node_name, {&p.a, &p.b}, [gb_scale](autograd::Node& n, const TensorList& g) -> TensorList {
          return {n.needs_input_grad(0) ? sum_to_shape(g[0], n.input_meta()[0].sizes) : Tensor(),
                  n.needs_input_grad(1) ? sum_to_shape(scaled(g[0], gb_scale), n.input_meta()[1].sizes) : Tensor()};
        });
    autograd::set_history({&out}, node);
  }
  if (OpRecorder* rec = op_recorder(); rec && !negate) rec->add(p.a, p.b, alpha_d, out);  // Note [Op recording hook]
  return out;
}

/// out = f(x, s) for a scalar overload (x already promoted); backward g -> dg(g, x, out) with x
/// and out saved when `save`.
template <typename F, typename DF>
Tensor scalar_op(const char* node_name, const Tensor& x, const Scalar& s, F f, DF df, bool save) {
  Tensor out = typed_scalar(x, s, f);
  if (autograd::needs_grad({&x})) {
    auto node = autograd::make_node(node_name, {&x}, [df, save](autograd::Node& n, const TensorList& g) -> TensorList {
      if (!save) return {df(g[0], Tensor(), Tensor())};
      return {df(g[0], n.saved(0), n.saved(1))};
    });
    if (save) {
      node->save(x);
      node->save(out);
    }
    autograd::set_history({&out}, node);
  }
  return out;
}

Tensor pass_grad(const Tensor& g, const Tensor&, const Tensor&) { return g; }

/// (x, v) -> f(v, x): the reflected form of a scalar functor (s - a, s / a, ...).
template <typename F>
auto reflected(F f) {
  return [f](auto x, auto v) { return f(v, x); };
}

}  // namespace

Tensor add(const Tensor& a, const Tensor& b, Scalar alpha) {
  return add_sub("add", OpKind::add, "AddBackward", a, b, alpha, false);
}

Tensor sub(const Tensor& a, const Tensor& b, Scalar alpha) {
  return add_sub("sub", OpKind::sub, "SubBackward", a, b, alpha, true);
}

Tensor add(const Tensor& a, Scalar s) {
  const Tensor x = promote_with_scalar("add", OpKind::add, a, s);
  Tensor out = scalar_op("AddBackward", x, s, kPlus, pass_grad, false);
  if (OpRecorder* rec = op_recorder()) rec->add_scalar(x, s.to_double(), out);  // Note [Op recording hook]
  return out;
}

Tensor sub(const Tensor& a, Scalar s) {
  const Tensor x = promote_with_scalar("sub", OpKind::sub, a, s);
  check_not_bool_sub("sub", a.dtype(), s.dtype());
  return scalar_op("SubBackward", x, s, kMinus, pass_grad, false);
}

Tensor sub(Scalar s, const Tensor& a) {
  const Tensor x = promote_with_scalar("sub", OpKind::sub, a, s);
  check_not_bool_sub("sub", a.dtype(), s.dtype());
  return scalar_op(
      "RsubBackward", x, s, reflected(kMinus),
      [](const Tensor& g, const Tensor&, const Tensor&) { return scaled(g, -1.0); }, false);
}

Tensor mul(const Tensor& a, Scalar s) {
  const Tensor x = promote_with_scalar("mul", OpKind::mul, a, s);
  const double k = s.to_double();
  return scalar_op(
      "MulBackward", x, s, kTimes, [k](const Tensor& g, const Tensor&, const Tensor&) { return scaled(g, k); }, false);
}

Tensor div(const Tensor& a, Scalar s) {
  const Tensor x = promote_with_scalar("div", OpKind::div, a, s, /*true_division=*/true);
  // The gradient divides by s in the compute type, as the forward does.
  return scalar_op(
      "DivBackward", x, s, kDivide,
      [s](const Tensor& g, const Tensor&, const Tensor&) { return typed_scalar(g, s, kDivide); }, false);
}

Tensor div(Scalar s, const Tensor& a) {
  const Tensor x = promote_with_scalar("div", OpKind::div, a, s, /*true_division=*/true);
  // d(s / a)/da = -s / a^2 = -out / a.
  return scalar_op(
      "DivBackward", x, s, reflected(kDivide),
      [](const Tensor& g, const Tensor& xs, const Tensor& out) {
        return grad3_kernel(g, xs, out, [](auto gg, auto xx, auto oo) { return -gg * oo / xx; });
      },
      true);
}

Tensor mul(const Tensor& a, const Tensor& b) {
  PromotedPair p = promote_pair("mul", OpKind::mul, a, b);
  Tensor out = typed_binary(p.a, p.b, p.shape, kTimes);
  if (autograd::needs_grad({&p.a, &p.b})) {
    auto node =
        autograd::make_node("MulBackward", {&p.a, &p.b}, [](autograd::Node& n, const TensorList& g) -> TensorList {
          Tensor ga, gb;
          if (n.needs_input_grad(0))
            ga = sum_to_shape(typed_binary(g[0], n.saved(1), g[0].sizes(), kTimes), n.input_meta()[0].sizes);
          if (n.needs_input_grad(1))
            gb = sum_to_shape(typed_binary(g[0], n.saved(0), g[0].sizes(), kTimes), n.input_meta()[1].sizes);
          return {ga, gb};
        });
    node->save(node->needs_input_grad(1) ? p.a : Tensor());
    node->save(node->needs_input_grad(0) ? p.b : Tensor());
    autograd::set_history({&out}, node);
  }
  return out;
}

Tensor div(const Tensor& a, const Tensor& b) {
  PromotedPair p = promote_pair("div", OpKind::div, a, b, /*true_division=*/true);
  Tensor out = typed_binary(p.a, p.b, p.shape, kDivide);
  if (autograd::needs_grad({&p.a, &p.b})) {
    auto node =
        autograd::make_node("DivBackward", {&p.a, &p.b}, [](autograd::Node& n, const TensorList& g) -> TensorList {
          const Tensor sa = n.saved(0), sb = n.saved(1);
          Tensor ga, gb;
          if (n.needs_input_grad(0))
            ga = sum_to_shape(typed_binary(g[0], sb, g[0].sizes(), kDivide), n.input_meta()[0].sizes);
          if (n.needs_input_grad(1))
            gb = sum_to_shape(grad3_kernel(g[0], sa, sb, [](auto gg, auto x, auto y) { return -gg * x / (y * y); }),
                              n.input_meta()[1].sizes);
          return {ga, gb};
        });
    node->save(node->needs_input_grad(1) ? p.a : Tensor());
    node->save(p.b);
    autograd::set_history({&out}, node);
  }
  return out;
}

// ---- floor_divide and remainder -----------------------------------------------------------------

namespace {

/// PyTorch records floor_divide but has no derivative for it: backward through it is an error.
void record_floor_divide(const Tensor& a, const Tensor& b, Tensor& out) {
  if (!autograd::needs_grad({&a, &b})) return;
  auto node =
      autograd::make_node("FloorDivideBackward", {&a, &b}, [](autograd::Node&, const TensorList&) -> TensorList {
        STRATA_FAIL(
            "floor_divide: the derivative for floor_divide is not implemented (as in PyTorch); "
            "detach() its operands or use div and floor");
      });
  autograd::set_history({&out}, node);
}

/// remainder's backward: grad to a, -grad * floor(a / b) to b.
void record_remainder(const Tensor& a, const Tensor& b, Tensor& out) {
  if (!autograd::needs_grad({&a, &b})) return;
  auto node =
      autograd::make_node("RemainderBackward", {&a, &b}, [](autograd::Node& n, const TensorList& g) -> TensorList {
        Tensor gb;
        if (n.needs_input_grad(1))
          gb = sum_to_shape(grad3_kernel(g[0], n.saved(0), n.saved(1),
                                         [](auto gg, auto x, auto y) { return -gg * kFloorDivide(x, y); }),
                            n.input_meta()[1].sizes);
        return {n.needs_input_grad(0) ? sum_to_shape(g[0], n.input_meta()[0].sizes) : Tensor(), gb};
      });
  node->save(a);
  node->save(b);
  autograd::set_history({&out}, node);
}

/// floor_divide or remainder of two tensors.
Tensor integer_division(const char* op, OpKind kind, const Tensor& a, const Tensor& b) {
  PromotedPair p = promote_pair(op, kind, a, b);
  check_floor_div_dtype(op, p.dtype);
  check_no_zero_divisor(op, p.b);
  const bool floor = kind == OpKind::floor_divide;
  Tensor out = floor ? typed_binary(p.a, p.b, p.shape, kFloorDivide) : typed_binary(p.a, p.b, p.shape, kRemainder);
  if (floor)
    record_floor_divide(p.a, p.b, out);
  else
    record_remainder(p.a, p.b, out);
  return out;
}

/// floor_divide or remainder with a number on one side (`reflect`: the number is the dividend),
/// as a zero-dim tensor of the result type (which keeps one kernel and one backward for both).
Tensor integer_division(const char* op, OpKind kind, const Tensor& a, const Scalar& s, bool reflect) {
  const Tensor x = promote_with_scalar(op, kind, a, s);
  const Tensor num = scalar_tensor(s, x.dtype());
  return reflect ? integer_division(op, kind, num, x) : integer_division(op, kind, x, num);
}

}  // namespace

Tensor floor_divide(const Tensor& a, const Tensor& b) {
  return integer_division("floor_divide", OpKind::floor_divide, a, b);
}
Tensor floor_divide(const Tensor& a, Scalar s) {
  return integer_division("floor_divide", OpKind::floor_divide, a, s, false);
}
Tensor floor_divide(Scalar s, const Tensor& a) {
  return integer_division("floor_divide", OpKind::floor_divide, a, s, true);
}
Tensor remainder(const Tensor& a, const Tensor& b) { return integer_division("remainder", OpKind::remainder, a, b); }
Tensor remainder(const Tensor& a, Scalar s) { return integer_division("remainder", OpKind::remainder, a, s, false); }
Tensor remainder(Scalar s, const Tensor& a) { return integer_division("remainder", OpKind::remainder, a, s, true); }

// ---- maximum, minimum and where -----------------------------------------------------------------

namespace {

/// maximum or minimum. PyTorch's backward: the gradient goes to a side unless the other side wins,
/// halved on a tie; so where either side is NaN both get it (torch 2.13).
Tensor extremum(const char* op, OpKind kind, const char* node_name, const Tensor& a, const Tensor& b, bool is_max) {
  PromotedPair p = promote_pair(op, kind, a, b);
  Tensor out = is_max ? typed_binary(p.a, p.b, p.shape, kMax) : typed_binary(p.a, p.b, p.shape, kMin);
  if (autograd::needs_grad({&p.a, &p.b})) {
    auto node =
        autograd::make_node(node_name, {&p.a, &p.b}, [is_max](autograd::Node& n, const TensorList& g) -> TensorList {
          const Tensor sa = n.saved(0), sb = n.saved(1);
          auto side = [&](bool first) {
            return grad3_kernel(g[0], sa, sb, [first, is_max](auto gg, auto x, auto y) {
              using C = decltype(x);
              const C mine = first ? x : y, other = first ? y : x;
              const bool loses = is_max ? mine < other : mine > other;
              return loses ? C(0) : mine == other ? gg * C(0.5) : gg;
            });
          };
          return {n.needs_input_grad(0) ? sum_to_shape(side(true), n.input_meta()[0].sizes) : Tensor(),
                  n.needs_input_grad(1) ? sum_to_shape(side(false), n.input_meta()[1].sizes) : Tensor()};
        });
    node->save(p.a);
    node->save(p.b);
    autograd::set_history({&out}, node);
  }
  return out;
}

/// g where the condition is `take_true`, 0 elsewhere (g's shape).
Tensor masked_grad(const Tensor& g, const Tensor& cond, bool take_true) {
  Tensor out = empty_output(g.sizes(), g.dtype());
  PinSet pins;
  pins.add(g, AccessMode::Read).add(cond, AccessMode::Read).add(out, AccessMode::Write);
  pins.acquire();
  dispatch_dtype(g.dtype(), [&](auto t) {
    using T = decltype(t);
    map2<T, T, uint8_t>(out, g, cond, [take_true](T gg, uint8_t c) { return (c != 0) == take_true ? gg : T(0.0f); });
  });
  return out;
}

Dims where_shape(const Tensor& cond, const Tensor& a, const Tensor& b) {
  const Dims ab = broadcast_pair("where", a, b);
  bool ok = true;
  Dims shape;
  try {
    shape = broadcast_shapes(cond.sizes(), ab, "where");
  } catch (const Error&) {
    ok = false;
  }
  STRATA_CHECK(ok, "where: cannot broadcast condition ", cond.describe(), " with ", a.describe(), " and ", b.describe(),
               " (broadcast shape ", ab, ")");
  return shape;
}

}  // namespace

Tensor maximum(const Tensor& a, const Tensor& b) {
  return extremum("maximum", OpKind::maximum, "MaximumBackward", a, b, true);
}
Tensor minimum(const Tensor& a, const Tensor& b) {
  return extremum("minimum", OpKind::minimum, "MinimumBackward", a, b, false);
}

Tensor where(const Tensor& cond, const Tensor& a_in, const Tensor& b_in) {
  check_backend(OpKind::where);
  check_defined("where", cond, "condition");
  STRATA_CHECK(cond.dtype() == DType::boolean || cond.dtype() == DType::u8, "where: condition must be bool or u8, got ",
               cond.describe());
  check_defined("where", a_in, "input");
  check_defined("where", b_in, "other");
  const Dims shape = where_shape(cond, a_in, b_in);
  const DType dt = result_type(a_in, b_in);
  const Tensor a = convert_operand(a_in, dt), b = convert_operand(b_in, dt);
  Tensor out = empty_output(shape, dt);
  {
    PinSet pins;
    pins.add(cond, AccessMode::Read).add(a, AccessMode::Read).add(b, AccessMode::Read).add(out, AccessMode::Write);
    pins.acquire();
    dispatch_dtype(dt, [&](auto t) {
      using T = decltype(t);
      map3<T, uint8_t, T, T>(out, cond, a, b, [](uint8_t c, T x, T y) { return c != 0 ? x : y; });
    });
  }
  if (autograd::needs_grad({&a, &b})) {
    auto node =
        autograd::make_node("WhereBackward", {&a, &b}, [](autograd::Node& n, const TensorList& g) -> TensorList {
          const Tensor c = n.saved(0);
          return {
              n.needs_input_grad(0) ? sum_to_shape(masked_grad(g[0], c, true), n.input_meta()[0].sizes) : Tensor(),
              n.needs_input_grad(1) ? sum_to_shape(masked_grad(g[0], c, false), n.input_meta()[1].sizes) : Tensor()};
        });
    node->save(cond);
    autograd::set_history({&out}, node);
  }
  return out;
}

Tensor where(const Tensor& cond, const Tensor& a, Scalar b) {
  check_defined("where", a, "input");
  return where(cond, a, scalar_tensor(b, result_type(a, b)));
}

Tensor where(const Tensor& cond, Scalar a, const Tensor& b) {
  check_defined("where", b, "other");
  return where(cond, scalar_tensor(a, result_type(a, b)), b);
}

Tensor where(const Tensor& cond, Scalar a, Scalar b) {
  const DType dt = ResultType().add(a).add(b).get();
  return where(cond, scalar_tensor(a, dt), scalar_tensor(b, dt));
}

}  // namespace strata
