// Note [No trapping math in element-wise kernels]
// With GCC's default -ftrapping-math, a select whose arm computes something (`c ? x * k : x`, or
// a value the optimizer sinks into one arm) is not if-converted, so the loop is not vectorized
// (the f32 exp/log/tanh/erf loops and leaky_relu ran scalar), and std::sqrt stays a libm call
// for errno's sake. Strata never enables FP exceptions nor reads errno, so every Strata target is
// compiled with -fno-trapping-math -fno-math-errno (cmake/StrataOptions.cmake).

#include "ops/unary.h"

#include <cmath>
#include <limits>
#include <numbers>
#include <type_traits>

#include "autograd/engine.h"
#include "core/type_promotion.h"
#include "ops/detail/cpu/elementwise.h"
#include "ops/detail/cpu/vec_math.h"
#include "ops/detail/op_util.h"
#include "ops/detail/pointwise.h"
#include "ops/detail/typed_kernels.h"
#include "ops/reduction.h"

namespace strata {

namespace {

using namespace ops::detail;
using ops::cpu::kCheapGrain;
using ops::cpu::kCostlyGrain;
using ops::cpu::map1;
using ops::cpu::map2;
using ops::cpu::map3;
using ops::cpu::relu_value;

/// Elements per parallel task of the f32 array kernels (a few µs of work each).
constexpr int64_t kVecGrain = 16384;

/// y = f(x), through the f32 array kernel `k` (Note [Run-time ISA dispatch] in ops/detail/cpu/vec_math.h)
/// when x is f32 and contiguous, through unary_kernel with the scalar `f` otherwise.
template <typename F>
Tensor unary_vec(const Tensor& x, ops::cpu::vec::UnaryFn k, F f) {
  if (x.dtype() != DType::f32 || !x.is_contiguous()) return unary_kernel(x, f, kCostlyGrain);
  Tensor y = empty_output(x.sizes(), x.dtype());
  PinSet pins;
  pins.add(x, AccessMode::Read).add(y, AccessMode::Write);
  pins.acquire();
  const float* in = static_cast<const float*>(x.data_ptr());
  float* out = static_cast<float*>(y.data_ptr());
  parallel_for(x.numel(), kVecGrain, [&](int64_t b, int64_t e) { k(in + b, out + b, e - b); });
  return y;
}

/// out = f(g, s) like grad_kernel, through the f32 array kernel `k` when g and s are f32,
/// contiguous and of one shape.
/// `in_place` as for grad_kernel (the array kernels read each element of g before writing it).
template <typename F>
Tensor grad_vec(const Tensor& g, const Tensor& s, ops::cpu::vec::GradFn k, F f, bool in_place = false) {
  if (g.dtype() != DType::f32 || s.dtype() != DType::f32 || !g.is_contiguous() || !s.is_contiguous() ||
      IntArrayRef(g.sizes()) != IntArrayRef(s.sizes()))
    return grad_kernel(g, s, f, kCostlyGrain, in_place);
  Tensor out = in_place && autograd::reusable_gradient(g) ? g : empty_output(g.sizes(), g.dtype());
  PinSet pins;
  pins.add(g, AccessMode::Read).add(s, AccessMode::Read).add(out, AccessMode::Write);
  pins.acquire();
  const float* gp = static_cast<const float*>(g.data_ptr());
  const float* sp = static_cast<const float*>(s.data_ptr());
  float* op = static_cast<float*>(out.data_ptr());
  parallel_for(g.numel(), kVecGrain, [&](int64_t b, int64_t e) { k(gp + b, sp + b, op + b, e - b); });
  return out;
}

constexpr double kSqrt1_2 = 0.70710678118654752440;
constexpr double kInvSqrt2Pi = 0.39894228040143267794;
constexpr double kSqrt2OverPi = 0.79788456080286535588;
constexpr double kGeluCoeff = 0.044715;

template <typename T>
T exp_t(T v) {
  if constexpr (std::is_same_v<T, float>)
    return ops::cpu::exp_f32(v);
  else
    return std::exp(v);
}

template <typename T>
T tanh_t(T v) {
  if constexpr (std::is_same_v<T, float>)
    return ops::cpu::tanh_f32(v);
  else
    return std::tanh(v);
}

template <typename T>
T sigmoid_t(T v) {
  if constexpr (std::is_same_v<T, float>)
    return ops::cpu::sigmoid_f32(v);
  else
    return T(1) / (T(1) + std::exp(-v));
}

/// 2 Φ(x) = 1 + erf(x / √2).
template <typename T>
T one_plus_erf_t(T v) {
  if constexpr (std::is_same_v<T, float>)
    return ops::cpu::one_plus_erf_scaled_f32(v);
  else
    return std::erfc(-v * T(kSqrt1_2));
}

/// e^(-x^2 / 2).
template <typename T>
T exp_neg_half_sq_t(T v) {
  if constexpr (std::is_same_v<T, float>)
    return ops::cpu::exp_neg_half_sq_f32(v);
  else
    return std::exp(T(-0.5) * v * v);
}

/// sqrt with the explicit-SIMD kernel on contiguous inputs.
Tensor sqrt_kernel(const Tensor& x) {
  if (!x.is_contiguous()) return unary_kernel(x, [](auto v) { return std::sqrt(v); });
  Tensor y = empty_output(x.sizes(), x.dtype());
  PinSet pins;
  pins.add(x, AccessMode::Read).add(y, AccessMode::Write);
  pins.acquire();
  dispatch_float(x.dtype(), [&](auto t) {
    using T = decltype(t);
    const T* in = static_cast<const T*>(x.data_ptr());
    T* out = static_cast<T*>(y.data_ptr());
    parallel_for(x.numel(), kCheapGrain, [&](int64_t b, int64_t e) { ops::cpu::sqrt_contig(out + b, in + b, e - b); });
  });
  return y;
}

void check_unary(const char* op, OpKind kind, const Tensor& x) {
  check_backend(kind);
  check_float(op, x, "input");
}

}  // namespace

// Note [ReLU saves a bit mask]
// relu's backward needs only where its output is positive: it saves one bit per element (a u8
// tensor of ceil(n / 8) bytes, bit b of byte j for element 8j + b), 1/32 of an f32 output, instead
// of the output itself. The output then lives only as long as its readers need it (a following
// conv saves it as its input; max pooling saves indices), so a conv's input can leave the fast tier
// once the conv's backward is done with it, and relu → pool chains save a bit per element where
// they saved a float. The bit is PyTorch's threshold_backward condition, !(y <= 0): set where the
// output is positive or NaN (relu(NaN) is NaN, and PyTorch passes the gradient through it), clear at
// +-0 and below (Note [ReLU and NaN]). The gradient is g where the bit is set and 0 elsewhere:
// exactly what comparing the saved output with 0 gave, so gradients are bitwise the same. Forward
// computes the output and the mask in one pass (8 elements per byte, bytes split between threads).

// Note [ReLU and NaN]
// relu is PyTorch's clamp_min(x, 0): x < 0 ? 0 : x, so NaN stays NaN (a select on `x > 0` would
// turn it into 0 and hide a diverged layer), +-inf stay themselves and -0 stays -0; its gradient
// passes where !(y <= 0), NaN included (torch 2.13: relu'(NaN) = 1). Both are one compare and one
// select per element, as before, and vectorize the same. The fused ReLU epilogue of linear
// (ops/linalg.cpp) follows the same rule.

/// ceil(n / 8) bytes of mask for n elements.
int64_t mask_bytes(int64_t n) { return (n + 7) / 8; }

/// f(b, i0, i1) for every mask byte b of n elements (elements [i0, i1)), bytes split between threads.
template <typename F>
void for_each_mask_byte(int64_t n, F f) {
  parallel_for(mask_bytes(n), kVecGrain / 8, [=](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) f(b, 8 * b, std::min(n, 8 * b + 8));
  });
}

/// y = relu(x) over a contiguous x, and the bit mask of !(y <= 0) (Note [ReLU saves a bit mask]).
template <typename T>
void relu_with_mask(const T* x, T* y, uint8_t* mask, int64_t n) {
  for_each_mask_byte(n, [=](int64_t b, int64_t i0, int64_t i1) {
    unsigned bits = 0;
    for (int64_t i = i0; i < i1; ++i) {
      const T v = relu_value(x[i]);
      y[i] = v;
      bits |= static_cast<unsigned>(ops::cpu::relu_passes_grad(v)) << (i - i0);
    }
    mask[b] = static_cast<uint8_t>(bits);
  });
}

/// out = g where the mask bit is set, 0 elsewhere (out may be g itself).
template <typename T>
void mask_gradient(const T* g, const uint8_t* mask, T* out, int64_t n) {
  for_each_mask_byte(n, [=](int64_t b, int64_t i0, int64_t i1) {
    const unsigned bits = mask[b];
    for (int64_t i = i0; i < i1; ++i) out[i] = (bits >> (i - i0)) & 1u ? g[i] : T(0);
  });
}

Tensor relu(const Tensor& x) {
  check_unary("relu", OpKind::relu, x);
  const bool grad = autograd::needs_grad({&x});
  if (!grad) {
    Tensor y = unary_kernel(x, [](auto v) { return relu_value(v); });
    if (OpRecorder* rec = op_recorder()) rec->relu(x, y);  // Note [Op recording hook]
    return y;
  }
  const Tensor xc = x.contiguous();
  Tensor y = empty_output(x.sizes(), x.dtype());
  Tensor mask = empty_output({mask_bytes(x.numel())}, DType::u8);
  {
    PinSet pins;
    pins.add(xc, AccessMode::Read).add(y, AccessMode::Write).add(mask, AccessMode::Write);
    pins.acquire();
    dispatch_float(x.dtype(), [&](auto t) {
      using T = decltype(t);
      relu_with_mask<T>(xc.data<T>(), y.data<T>(), mask.data<uint8_t>(), x.numel());
    });
  }
  auto node = autograd::make_node("ReluBackward", {&x}, [](autograd::Node& n, const TensorList& g) -> TensorList {
    const Tensor m = n.saved(0);
    const bool in_place = autograd::reusable_gradient(g[0]);  // Note [In-place backward]
    const Tensor gc = g[0].contiguous();
    Tensor out = in_place ? g[0] : empty_output(g[0].sizes(), g[0].dtype());
    PinSet pins;
    pins.add(gc, AccessMode::Read).add(m, AccessMode::Read).add(out, AccessMode::Write);
    pins.acquire();
    dispatch_float(out.dtype(), [&](auto t) {
      using T = decltype(t);
      mask_gradient<T>(gc.data<T>(), m.data<uint8_t>(), out.data<T>(), out.numel());
    });
    return {out};
  });
  node->save(mask);
  autograd::set_history({&y}, node);
  if (OpRecorder* rec = op_recorder()) rec->relu(x, y);  // Note [Op recording hook]
  return y;
}

Tensor leaky_relu(const Tensor& x, double negative_slope) {
  check_unary("leaky_relu", OpKind::leaky_relu, x);
  STRATA_CHECK(std::isfinite(negative_slope), "leaky_relu: negative_slope must be finite, got ", negative_slope);
  const double s = negative_slope;
  Tensor y = unary_kernel(x, [s](auto v) {
    using T = decltype(v);
    return v > T(0) ? v : v * T(s);
  });
  record_pointwise("LeakyReluBackward", x, y, x, [s](auto g, auto v) {
    using T = decltype(v);
    return v > T(0) ? g : g * T(s);
  });
  return y;
}

Tensor sigmoid(const Tensor& x) {
  check_unary("sigmoid", OpKind::sigmoid, x);
  Tensor y = unary_vec(x, ops::cpu::vec::kernels().sigmoid, [](auto v) { return sigmoid_t(v); });
  record_pointwise("SigmoidBackward", x, y, y, [](auto g, auto out) { return g * out * (decltype(out)(1) - out); });
  return y;
}

Tensor tanh(const Tensor& x) {
  check_unary("tanh", OpKind::tanh, x);
  Tensor y = unary_vec(x, ops::cpu::vec::kernels().tanh, [](auto v) { return tanh_t(v); });
  record_pointwise("TanhBackward", x, y, y, [](auto g, auto out) { return g * (decltype(out)(1) - out * out); });
  if (OpRecorder* rec = op_recorder()) rec->tanh(x, y);  // Note [Op recording hook]
  return y;
}

Tensor gelu(const Tensor& x, bool tanh_approximation) {
  check_unary("gelu", OpKind::gelu, x);
  Tensor y;
  if (tanh_approximation) {
    // 0.5 (1 + tanh(u)) = sigmoid(2u): the same value without 1 + tanh's cancellation for x << 0.
    y = unary_kernel(
        x,
        [](auto v) {
          using T = decltype(v);
          const T u2 = T(2 * kSqrt2OverPi) * (v + T(kGeluCoeff) * v * v * v);
          return v * sigmoid_t(u2);
        },
        kCostlyGrain);
    record_pointwise(
        "GeluBackward", x, y, x,
        [](auto g, auto v) {
          using T = decltype(v);
          const T v2 = v * v;
          const T s = sigmoid_t(T(2 * kSqrt2OverPi) * (v + T(kGeluCoeff) * v2 * v));
          const T d_inner = T(kSqrt2OverPi) * (T(1) + T(3 * kGeluCoeff) * v2);
          // d/dx [x s(2u)] = s + 2 x s (1 - s) u'
          return g * (s + T(2) * v * s * (T(1) - s) * d_inner);
        },
        kCostlyGrain);
  } else {
    y = unary_vec(x, ops::cpu::vec::kernels().gelu_erf, [](auto v) {
      using T = decltype(v);
      return T(0.5) * v * one_plus_erf_t(v);
    });
    if (autograd::needs_grad({&x})) {
      auto node = autograd::make_node("GeluBackward", {&x}, [](autograd::Node& n, const TensorList& g) -> TensorList {
        return {grad_vec(
            g[0], n.saved(0), ops::cpu::vec::kernels().gelu_erf_grad,
            [](auto gr, auto v) {
              using T = decltype(v);
              const T cdf = T(0.5) * one_plus_erf_t(v);
              const T pdf = T(kInvSqrt2Pi) * exp_neg_half_sq_t(v);
              return gr * (cdf + v * pdf);
            },
            /*in_place=*/true)};
      });
      node->save(x);
      autograd::set_history({&y}, node);
    }
  }
  return y;
}

Tensor silu(const Tensor& x) {
  check_unary("silu", OpKind::silu, x);
  Tensor y = unary_kernel(x, [](auto v) { return v * sigmoid_t(v); }, kCostlyGrain);
  record_pointwise(
      "SiluBackward", x, y, x,
      [](auto g, auto v) {
        using T = decltype(v);
        const T s = sigmoid_t(v);
        return g * s * (T(1) + v * (T(1) - s));
      },
      kCostlyGrain);
  return y;
}

Tensor exp(const Tensor& x) {
  check_unary("exp", OpKind::exp, x);
  Tensor y = unary_vec(x, ops::cpu::vec::kernels().exp, [](auto v) { return exp_t(v); });
  record_pointwise("ExpBackward", x, y, y, [](auto g, auto out) { return g * out; });
  return y;
}

Tensor log(const Tensor& x) {
  check_unary("log", OpKind::log, x);
  Tensor y = unary_kernel(
      x,
      [](auto v) {
        using T = decltype(v);
        if constexpr (std::is_same_v<T, float>)
          return ops::cpu::log_f32(v);
        else
          return std::log(v);
      },
      kCostlyGrain);
  record_pointwise("LogBackward", x, y, x, [](auto g, auto v) { return g / v; });
  return y;
}

Tensor sqrt(const Tensor& x) {
  check_unary("sqrt", OpKind::sqrt, x);
  Tensor y = sqrt_kernel(x);
  record_pointwise("SqrtBackward", x, y, y, [](auto g, auto out) { return g / (decltype(out)(2) * out); });
  return y;
}

namespace {

/// x^e for a floating x (f32 or f64) and a number e.
Tensor float_pow(const Tensor& x, double e) {
  check_float("pow", x, "input");
  Tensor y;
  if (e == 2.0)
    y = unary_kernel(x, [](auto v) { return v * v; });
  else if (e == 1.0)
    y = unary_kernel(x, [](auto v) { return v; });
  else if (e == 0.0)
    y = unary_kernel(x, [](auto v) { return decltype(v)(1); });
  else if (e == 3.0)
    y = unary_kernel(x, [](auto v) { return v * v * v; });
  else if (e == 0.5)
    y = sqrt_kernel(x);
  else if (e == -1.0)
    y = unary_kernel(x, [](auto v) { return decltype(v)(1) / v; });
  else if (e == -0.5)
    y = unary_kernel(x, [](auto v) { return decltype(v)(1) / std::sqrt(v); });
  else
    y = unary_kernel(x, [e](auto v) { return std::pow(v, decltype(v)(e)); }, kCostlyGrain);
  if (e == 2.0) {
    record_pointwise("PowBackward", x, y, x, [](auto g, auto v) { return g * decltype(v)(2) * v; });
  } else if (e == 0.0) {
    record_pointwise("PowBackward", x, y, x, [](auto g, auto) { return decltype(g)(0) * g; });
  } else if (e == 1.0) {
    record_pointwise("PowBackward", x, y, x, [](auto g, auto) { return g; });
  } else {
    record_pointwise(
        "PowBackward", x, y, x,
        [e](auto g, auto v) {
          using T = decltype(v);
          return g * T(e) * std::pow(v, T(e - 1));
        },
        kCostlyGrain);
  }
  return y;
}

/// base^e for integers by squaring, wrapping like PyTorch's; a negative e gives 0 except for bases
/// 1 and -1 (the scalar overload refuses negative powers before).
constexpr auto kIntPow = [](auto base, auto e) {
  using C = decltype(base);
  if constexpr (std::is_integral_v<C>) {
    using W = Wrap<C>;
    if constexpr (std::is_signed_v<C>) {
      if (e < 0) return base == C(1) ? C(1) : base == C(-1) ? ((e & 1) ? C(-1) : C(1)) : C(0);
    }
    W result = 1, b = static_cast<W>(base);
    for (auto k = e; k != 0; k = static_cast<C>(k >> 1)) {
      if (k & 1) result = static_cast<W>(result * b);
      b = static_cast<W>(b * b);
    }
    return static_cast<C>(result);
  } else {
    return base;  // floating: never dispatched here
  }
};

Tensor integer_pow(const Tensor& x, const Tensor& e, IntArrayRef shape) {
  STRATA_CHECK(x.dtype() != DType::boolean, "pow: not implemented for bool tensors (convert them to an integer dtype)");
  return typed_binary(x, e, shape, kIntPow);
}

}  // namespace

Tensor pow(const Tensor& x, Scalar exponent) {
  check_backend(OpKind::pow);
  check_defined("pow", x, "input");
  const DType dt = result_type(x, exponent);
  if (dt == DType::boolean && (exponent.to_double() == 0.0 || exponent.to_double() == 1.0))  // PyTorch's shortcuts
    return exponent.to_double() == 0.0 ? ones(x.sizes(), {dt, nullptr}) : x.clone();
  if (!is_floating(dt)) {
    STRATA_CHECK(exponent.to_double() >= 0, "pow: integers to negative integer powers are not allowed (", x.describe(),
                 " to the power ", exponent, ")");
    return integer_pow(x.to(dt), scalar_tensor(exponent, dt), x.sizes());
  }
  if (is_reduced_float(dt))  // computed in f32 and rounded once, through recorded conversions
    return convert_operand(float_pow(convert_operand(x, DType::f32), exponent.to_double()), dt);
  return float_pow(convert_operand(x, dt), exponent.to_double());
}

Tensor pow(Scalar base, const Tensor& exponent) {
  check_backend(OpKind::pow);
  check_defined("pow", exponent, "exponent");
  return pow(scalar_tensor(base, result_type(base, exponent)), exponent);
}

namespace {

template <typename T>
T pow_grad_base(T g, T x, T e) {
  return e == T(0) ? T(0) : g * e * std::pow(x, e - T(1));
}
template <typename T>
T pow_grad_exponent(T g, T x, T e) {
  return (x == T(0) && e >= T(0)) ? T(0) : g * std::pow(x, e) * std::log(x);
}

/// out (g's shape) = f(g, x, e) with x and e broadcast to g.
template <bool kExponent>
Tensor pow_tensor_grad(const Tensor& g, const Tensor& x, const Tensor& e) {
  Tensor out = empty_output(g.sizes(), g.dtype());
  {
    PinSet pins;
    pins.add(g, AccessMode::Read).add(x, AccessMode::Read).add(e, AccessMode::Read).add(out, AccessMode::Write);
    pins.acquire();
    dispatch_float(g.dtype(), [&](auto t) {
      using T = decltype(t);
      map3<T, T, T, T>(
          out, g, x, e,
          [](T gg, T xx, T ee) { return kExponent ? pow_grad_exponent(gg, xx, ee) : pow_grad_base(gg, xx, ee); },
          kCostlyGrain);
    });
  }
  return sum_to_shape(out, kExponent ? e.sizes() : x.sizes());
}

}  // namespace

Tensor pow(const Tensor& x_in, const Tensor& e_in) {
  check_backend(OpKind::pow);
  check_defined("pow", x_in, "input");
  check_defined("pow", e_in, "exponent");
  const Dims shape = broadcast_pair("pow", x_in, e_in);
  const DType dt = result_type(x_in, e_in);
  if (!is_floating(dt)) return integer_pow(x_in.to(dt), e_in.to(dt), shape);
  if (is_reduced_float(dt))  // computed in f32 and rounded once, through recorded conversions
    return convert_operand(pow(convert_operand(x_in, DType::f32), convert_operand(e_in, DType::f32)), dt);
  const Tensor x = convert_operand(x_in, dt), exponent = convert_operand(e_in, dt);
  check_float("pow", x, "input");
  Tensor y = empty_output(shape, x.dtype());
  {
    PinSet pins;
    pins.add(x, AccessMode::Read).add(exponent, AccessMode::Read).add(y, AccessMode::Write);
    pins.acquire();
    dispatch_float(x.dtype(), [&](auto t) {
      using T = decltype(t);
      map2<T, T, T>(y, x, exponent, [](T a, T b) { return std::pow(a, b); }, kCostlyGrain);
    });
  }
  if (autograd::needs_grad({&x, &exponent})) {
    auto node =
        autograd::make_node("PowBackward", {&x, &exponent}, [](autograd::Node& n, const TensorList& g) -> TensorList {
          const Tensor xs = n.saved(0), es = n.saved(1);
          return {n.needs_input_grad(0) ? pow_tensor_grad<false>(g[0], xs, es) : Tensor(),
                  n.needs_input_grad(1) ? pow_tensor_grad<true>(g[0], xs, es) : Tensor()};
        });
    node->save(x);
    node->save(exponent);
    autograd::set_history({&y}, node);
  }
  return y;
}

Tensor clamp(const Tensor& x, std::optional<double> min, std::optional<double> max) {
  check_unary("clamp", OpKind::clamp, x);
  STRATA_CHECK(min.has_value() || max.has_value(), "clamp: at least one of min and max must be given (input ",
               x.describe(), ")");
  STRATA_CHECK(!(min && std::isnan(*min)) && !(max && std::isnan(*max)), "clamp: min and max must not be NaN");
  const double lo = min ? *min : -std::numeric_limits<double>::infinity();
  const double hi = max ? *max : std::numeric_limits<double>::infinity();
  Tensor y = unary_kernel(x, [lo, hi](auto v) {
    using T = decltype(v);
    const T a = v < T(lo) ? T(lo) : v;
    return a > T(hi) ? T(hi) : a;
  });
  record_pointwise("ClampBackward", x, y, x, [lo, hi](auto g, auto v) {
    using T = decltype(v);
    return (v >= T(lo) && v <= T(hi)) ? g : T(0);
  });
  return y;
}

Tensor neg(const Tensor& x) {
  check_backend(OpKind::neg);
  check_defined("neg", x, "input");
  STRATA_CHECK(x.dtype() != DType::boolean,
               "neg: negation, the - operator, on a bool tensor is not supported "
               "(PyTorch's rule); to invert a mask use logical_not (~)");
  constexpr auto negate = [](auto v) {
    using C = decltype(v);
    return static_cast<C>(-static_cast<Wrap<C>>(v));
  };
  Tensor y = typed_unary(x, negate);
  if (autograd::needs_grad({&x})) {
    auto node = autograd::make_node("NegBackward", {&x}, [negate](autograd::Node&, const TensorList& g) -> TensorList {
      return {typed_unary(g[0], negate)};
    });
    autograd::set_history({&y}, node);
  }
  return y;
}

Tensor abs(const Tensor& x) {
  check_backend(OpKind::abs);
  check_defined("abs", x, "input");
  STRATA_CHECK(x.dtype() != DType::boolean, "abs: not implemented for bool tensors (PyTorch's rule)");
  Tensor y = typed_unary(x, [](auto v) {
    using C = decltype(v);
    if constexpr (std::is_unsigned_v<C>)
      return v;
    else
      return v < C(0) ? static_cast<C>(-static_cast<Wrap<C>>(v)) : v + C(0);  // + 0: |-0| is +0
  });
  if (autograd::needs_grad({&x})) {
    auto node = autograd::make_node("AbsBackward", {&x}, [](autograd::Node& n, const TensorList& g) -> TensorList {
      const Tensor xs = n.saved(0);
      return {typed_binary(g[0], xs, g[0].sizes(), [](auto gg, auto v) {
        using C = decltype(v);
        return v > C(0) ? gg : v < C(0) ? -gg : C(0);
      })};
    });
    node->save(x);
    autograd::set_history({&y}, node);
  }
  return y;
}

Tensor dropout(const Tensor& x, double p, bool training, Generator* gen) {
  check_unary("dropout", OpKind::dropout, x);
  STRATA_CHECK(p >= 0.0 && p <= 1.0, "dropout: probability p must be in [0, 1], got ", p, " (input ", x.describe(),
               ")");
  if (!training || p == 0.0) {
    Tensor y = unary_kernel(x, [](auto v) { return v; });
    if (autograd::needs_grad({&x})) {
      auto node = autograd::make_node("DropoutBackward", {&x},
                                      [](autograd::Node&, const TensorList& g) -> TensorList { return {g[0]}; });
      autograd::set_history({&y}, node);
    }
    return y;
  }
  if (p == 1.0) {
    Tensor y = zeros(x.sizes(), {x.dtype(), nullptr});
    if (autograd::needs_grad({&x})) {
      auto node = autograd::make_node("DropoutBackward", {&x}, [](autograd::Node&, const TensorList& g) -> TensorList {
        return {zeros(g[0].sizes(), {g[0].dtype(), nullptr})};
      });
      autograd::set_history({&y}, node);
    }
    return y;
  }
  Generator& g = gen != nullptr ? *gen : default_generator();
  const int64_t n = x.numel();
  const PhiloxRange range = g.reserve(static_cast<uint64_t>((n + 3) / 4));
  // Keep element i iff its top 24 random bits, as a fraction of 2^24, fall below 1 - p.
  const uint32_t threshold = static_cast<uint32_t>(std::llround((1.0 - p) * 16777216.0));
  Tensor mask = empty_output(x.sizes(), DType::u8);
  Tensor y = empty_output(x.sizes(), x.dtype());
  const double scale = 1.0 / (1.0 - p);
  {
    PinSet pins;
    pins.add(x, AccessMode::Read).add(mask, AccessMode::Write).add(y, AccessMode::Write);
    pins.acquire();
    uint8_t* m = static_cast<uint8_t*>(mask.data_ptr());
    const int64_t blocks = (n + 3) / 4;
    parallel_for(blocks, 2048, [&](int64_t b0, int64_t b1) {
      for (int64_t j = b0; j < b1; ++j) {
        const auto w = range.block(static_cast<uint64_t>(j));
        const int64_t base = 4 * j;
        const int64_t cnt = std::min<int64_t>(4, n - base);
        for (int64_t k = 0; k < cnt; ++k) m[base + k] = (w[static_cast<std::size_t>(k)] >> 8) < threshold ? 1 : 0;
      }
    });
    dispatch_float(x.dtype(), [&](auto t) {
      using T = decltype(t);
      const T s = static_cast<T>(scale);
      map2<T, T, uint8_t>(y, x, mask, [s](T v, uint8_t keep) { return keep ? v * s : T(0); });
    });
  }
  if (autograd::needs_grad({&x})) {
    auto node =
        autograd::make_node("DropoutBackward", {&x}, [scale](autograd::Node& nd, const TensorList& gr) -> TensorList {
          const Tensor& gg = gr[0];
          const Tensor mk = nd.saved(0);
          Tensor out = empty_output(gg.sizes(), gg.dtype());
          PinSet pins;
          pins.add(gg, AccessMode::Read).add(mk, AccessMode::Read).add(out, AccessMode::Write);
          pins.acquire();
          dispatch_float(gg.dtype(), [&](auto t) {
            using T = decltype(t);
            const T s = static_cast<T>(scale);
            map2<T, T, uint8_t>(out, gg, mk, [s](T v, uint8_t keep) { return keep ? v * s : T(0); });
          });
          return {out};
        });
    node->save(mask);
    autograd::set_history({&y}, node);
  }
  return y;
}

}  // namespace strata
