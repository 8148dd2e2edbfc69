#include "ops/elementwise_math.h"

#include <cmath>
#include <functional>
#include <numbers>
#include <type_traits>

#include "core/type_promotion.h"
#include "ops/detail/op_util.h"
#include "ops/detail/pointwise.h"
#include "ops/detail/typed_kernels.h"
#include "ops/unary.h"

namespace strata {

namespace {

using namespace ops::detail;
using ops::cpu::kCostlyGrain;

/// Runs `compute` (which sees f32 or f64 only) on x by Note [Element-wise math dtypes]: integers
/// and bool in the default float dtype, bf16 and f16 in f32 rounded back to their dtype.
Tensor floating_math(const char* op, OpKind kind, const Tensor& x,
                     const std::function<Tensor(const Tensor&)>& compute) {
  check_backend(kind);
  check_defined(op, x, "input");
  if (!is_floating(x.dtype())) return compute(x.to(kDefaultFloat));
  if (is_reduced_float(x.dtype())) return convert_operand(compute(convert_operand(x, DType::f32)), x.dtype());
  return compute(x);
}

/// y = f(x) whose backward df(g, x) reads the input.
template <typename F, typename DF>
Tensor from_input(const char* node, const Tensor& x, F f, DF df) {
  Tensor y = unary_kernel(x, f, kCostlyGrain);
  record_pointwise(node, x, y, x, df, kCostlyGrain);
  return y;
}

/// y = f(x) whose backward df(g, y) reads the output.
template <typename F, typename DF>
Tensor from_output(const char* node, const Tensor& x, F f, DF df) {
  Tensor y = unary_kernel(x, f, kCostlyGrain);
  record_pointwise(node, x, y, y, df, kCostlyGrain);
  return y;
}

/// Records a node whose gradient is zero (the rounding ops and sign).
void record_zero_grad(const char* node, const Tensor& x, Tensor& y) {
  if (!autograd::needs_grad({&x})) return;
  auto n = autograd::make_node(node, {&x}, [](autograd::Node&, const TensorList& g) -> TensorList {
    return {zeros(g[0].sizes(), {g[0].dtype(), nullptr})};
  });
  autograd::set_history({&y}, n);
}

/// A rounding op (floor, ceil, trunc, round): integers copied, bool refused, floats through `f`.
template <typename F>
Tensor rounding(const char* op, OpKind kind, const char* node, const Tensor& x, F f) {
  check_backend(kind);
  check_defined(op, x, "input");
  STRATA_CHECK(x.dtype() != DType::boolean, op, ": not implemented for bool tensors (PyTorch's rule), got ",
               x.describe());
  if (!is_floating(x.dtype())) return x.clone();
  return floating_math(op, kind, x, [&](const Tensor& v) {
    Tensor y = unary_kernel(v, f);
    record_zero_grad(node, v, y);
    return y;
  });
}

}  // namespace

Tensor sin(const Tensor& x) {
  return floating_math("sin", OpKind::sin, x, [](const Tensor& v) {
    return from_input(
        "SinBackward", v, [](auto a) { return std::sin(a); }, [](auto g, auto a) { return g * std::cos(a); });
  });
}

Tensor cos(const Tensor& x) {
  return floating_math("cos", OpKind::cos, x, [](const Tensor& v) {
    return from_input(
        "CosBackward", v, [](auto a) { return std::cos(a); }, [](auto g, auto a) { return -g * std::sin(a); });
  });
}

Tensor tan(const Tensor& x) {
  return floating_math("tan", OpKind::tan, x, [](const Tensor& v) {
    return from_output(
        "TanBackward", v, [](auto a) { return std::tan(a); },
        [](auto g, auto y) { return g * (decltype(y)(1) + y * y); });
  });
}

Tensor asin(const Tensor& x) {
  return floating_math("asin", OpKind::asin, x, [](const Tensor& v) {
    return from_input(
        "AsinBackward", v, [](auto a) { return std::asin(a); },
        [](auto g, auto a) { return g / std::sqrt(decltype(a)(1) - a * a); });
  });
}

Tensor acos(const Tensor& x) {
  return floating_math("acos", OpKind::acos, x, [](const Tensor& v) {
    return from_input(
        "AcosBackward", v, [](auto a) { return std::acos(a); },
        [](auto g, auto a) { return -g / std::sqrt(decltype(a)(1) - a * a); });
  });
}

Tensor atan(const Tensor& x) {
  return floating_math("atan", OpKind::atan, x, [](const Tensor& v) {
    return from_input(
        "AtanBackward", v, [](auto a) { return std::atan(a); },
        [](auto g, auto a) { return g / (decltype(a)(1) + a * a); });
  });
}

Tensor sinh(const Tensor& x) {
  return floating_math("sinh", OpKind::sinh, x, [](const Tensor& v) {
    return from_input(
        "SinhBackward", v, [](auto a) { return std::sinh(a); }, [](auto g, auto a) { return g * std::cosh(a); });
  });
}

Tensor cosh(const Tensor& x) {
  return floating_math("cosh", OpKind::cosh, x, [](const Tensor& v) {
    return from_input(
        "CoshBackward", v, [](auto a) { return std::cosh(a); }, [](auto g, auto a) { return g * std::sinh(a); });
  });
}

Tensor expm1(const Tensor& x) {
  return floating_math("expm1", OpKind::expm1, x, [](const Tensor& v) {
    return from_output(
        "Expm1Backward", v, [](auto a) { return std::expm1(a); },
        [](auto g, auto y) { return g * (y + decltype(y)(1)); });
  });
}

Tensor log1p(const Tensor& x) {
  return floating_math("log1p", OpKind::log1p, x, [](const Tensor& v) {
    return from_input(
        "Log1PBackward", v, [](auto a) { return std::log1p(a); },
        [](auto g, auto a) { return g / (decltype(a)(1) + a); });
  });
}

Tensor rsqrt(const Tensor& x) {
  return floating_math("rsqrt", OpKind::rsqrt, x, [](const Tensor& v) {
    return from_output(
        "RsqrtBackward", v, [](auto a) { return decltype(a)(1) / std::sqrt(a); },
        [](auto g, auto y) { return decltype(y)(-0.5) * g * y * y * y; });
  });
}

Tensor erf(const Tensor& x) {
  return floating_math("erf", OpKind::erf, x, [](const Tensor& v) {
    return from_input(
        "ErfBackward", v, [](auto a) { return std::erf(a); },
        [](auto g, auto a) {
          using T = decltype(a);
          return g * T(std::numbers::inv_sqrtpi * 2) * std::exp(-a * a);
        });
  });
}

Tensor reciprocal(const Tensor& x) {
  return floating_math("reciprocal", OpKind::reciprocal, x, [](const Tensor& v) {
    return from_output(
        "ReciprocalBackward", v, [](auto a) { return decltype(a)(1) / a; }, [](auto g, auto y) { return -g * y * y; });
  });
}

Tensor square(const Tensor& x) {
  check_backend(OpKind::square);
  check_defined("square", x, "input");
  // torch.square is torch.pow(x, 2): bool becomes i64, the rest keep their dtype.
  return pow(x.dtype() == DType::boolean ? x.to(DType::i64) : x, 2);
}

// ---- rounding and sign -------------------------------------------------------------------------------

Tensor floor(const Tensor& x) {
  return rounding("floor", OpKind::floor, "FloorBackward", x, [](auto a) { return std::floor(a); });
}

Tensor ceil(const Tensor& x) {
  return rounding("ceil", OpKind::ceil, "CeilBackward", x, [](auto a) { return std::ceil(a); });
}

Tensor trunc(const Tensor& x) {
  return rounding("trunc", OpKind::trunc, "TruncBackward", x, [](auto a) { return std::trunc(a); });
}

Tensor round(const Tensor& x, int64_t decimals) {
  if (decimals == 0)  // nearbyint in the default rounding mode: halves to even
    return rounding("round", OpKind::round, "RoundBackward", x, [](auto a) { return std::nearbyint(a); });
  check_defined("round", x, "input");
  STRATA_CHECK(is_floating(x.dtype()), "round: decimals=", decimals,
               " is not implemented for integer or bool tensors (PyTorch's rule), got ", x.describe());
  // PyTorch's formulas: 10^d as a double, rounded to the compute type once.
  const double ten_pow = std::pow(10.0, static_cast<double>(decimals < 0 ? -decimals : decimals));
  const bool negative = decimals < 0;
  return rounding("round", OpKind::round, "RoundBackward", x, [ten_pow, negative](auto a) {
    using T = decltype(a);
    const T p = static_cast<T>(ten_pow);
    return negative ? std::nearbyint(a / p) * p : std::nearbyint(a * p) / p;
  });
}

Tensor sign(const Tensor& x) {
  check_backend(OpKind::sign);
  check_defined("sign", x, "input");
  if (x.dtype() == DType::boolean) return x.clone();
  Tensor y = typed_unary(x, [](auto v) {
    using C = decltype(v);
    if constexpr (std::is_unsigned_v<C>)
      return static_cast<C>(v != C(0));
    else
      return static_cast<C>(static_cast<int>(C(0) < v) - static_cast<int>(v < C(0)));
  });
  record_zero_grad("SignBackward", x, y);
  return y;
}

// ---- atan2 ---------------------------------------------------------------------------------------

namespace {

/// The gradient of atan2 for input (kOther false) or other, over g's shape, summed back to the
/// operand's shape.
template <bool kOther>
Tensor atan2_grad(const Tensor& g, const Tensor& a, const Tensor& b) {
  Tensor out = empty_output(g.sizes(), g.dtype());
  {
    PinSet pins;
    pins.add(g, AccessMode::Read).add(a, AccessMode::Read).add(b, AccessMode::Read).add(out, AccessMode::Write);
    pins.acquire();
    dispatch_float(g.dtype(), [&](auto t) {
      using T = decltype(t);
      ops::cpu::map3<T, T, T, T>(out, g, a, b, [](T gg, T y, T x) {
        const T r2 = y * y + x * x;
        return kOther ? -gg * y / r2 : gg * x / r2;
      });
    });
  }
  return sum_to_shape(out, kOther ? b.sizes() : a.sizes());
}

/// atan2 of two f32 or f64 operands of one dtype.
Tensor float_atan2(const Tensor& a, const Tensor& b, IntArrayRef shape) {
  Tensor y = empty_output(shape, a.dtype());
  {
    PinSet pins;
    pins.add(a, AccessMode::Read).add(b, AccessMode::Read).add(y, AccessMode::Write);
    pins.acquire();
    dispatch_float(a.dtype(), [&](auto t) {
      using T = decltype(t);
      ops::cpu::map2<T, T, T>(y, a, b, [](T p, T q) { return std::atan2(p, q); }, kCostlyGrain);
    });
  }
  if (autograd::needs_grad({&a, &b})) {
    auto node =
        autograd::make_node("Atan2Backward", {&a, &b}, [](autograd::Node& n, const TensorList& g) -> TensorList {
          const Tensor as = n.saved(0), bs = n.saved(1);
          return {n.needs_input_grad(0) ? atan2_grad<false>(g[0], as, bs) : Tensor(),
                  n.needs_input_grad(1) ? atan2_grad<true>(g[0], as, bs) : Tensor()};
        });
    node->save(a);
    node->save(b);
    autograd::set_history({&y}, node);
  }
  return y;
}

}  // namespace

Tensor atan2(const Tensor& input, const Tensor& other) {
  const PromotedPair p = promote_pair("atan2", OpKind::atan2, input, other, /*true_division=*/true);
  if (is_reduced_float(p.dtype))  // computed in f32 and rounded once, through recorded conversions
    return convert_operand(float_atan2(convert_operand(p.a, DType::f32), convert_operand(p.b, DType::f32), p.shape),
                           p.dtype);
  return float_atan2(p.a, p.b, p.shape);
}

}  // namespace strata
