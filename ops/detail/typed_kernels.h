#pragma once
/// @file
/// Element-wise kernels over every dtype (internal to ops/), for the ops that follow PyTorch's type
/// promotion: binary arithmetic, comparisons, bitwise and sign ops.
///
/// Note [Compute type]
/// A functor is a generic lambda called with values of compute_type_t<T> (core/dtype.h): float for
/// bf16 and f16 elements, T itself otherwise, so the 16-bit floats compute in f32 as PyTorch's CPU
/// kernels do and are rounded once on store. For f32 and f64 the conversions are no-ops and the
/// loops vectorize as before (Note [Element-wise engine] in ops/detail/cpu/elementwise.h). Every functor
/// is instantiated for every dtype; branches that make no sense for a dtype are cut with
/// `if constexpr`, and the ops refuse such dtypes before dispatching.

#include <cstdint>
#include <type_traits>

#include "core/dtype.h"
#include "core/pin_set.h"
#include "core/scalar.h"
#include "core/tensor.h"
#include "ops/detail/cpu/elementwise.h"
#include "ops/detail/op_util.h"

namespace strata::ops::detail {

/// The type integer arithmetic runs in so that signed results wrap around (PyTorch's integer
/// overflow) instead of overflowing: unsigned for signed integers, the type itself otherwise.
template <typename C, bool = std::is_integral_v<C> && std::is_signed_v<C>>
struct WrapType {
  using type = C;
};
template <typename C>
struct WrapType<C, true> {
  using type = std::make_unsigned_t<C>;
};
template <typename C>
using Wrap = typename WrapType<C>::type;

/// out = f(a, b) over `shape`; a and b have one dtype. out has that dtype, or bool when
/// `kPredicate` (comparisons and logical ops).
template <bool kPredicate = false, typename F>
Tensor typed_binary(const Tensor& a, const Tensor& b, IntArrayRef shape, F f) {
  Tensor out = empty_output(shape, kPredicate ? DType::boolean : a.dtype());
  PinSet pins;
  pins.add(a, AccessMode::Read).add(b, AccessMode::Read).add(out, AccessMode::Write);
  pins.acquire();
  dispatch_dtype(a.dtype(), [&](auto t) {
    using T = decltype(t);
    using C = compute_type_t<T>;
    using O = std::conditional_t<kPredicate, bool, T>;
    cpu::map2<O, T, T>(out, a, b, [f](T x, T y) { return static_cast<O>(f(static_cast<C>(x), static_cast<C>(y))); });
  });
  return out;
}

/// out (bool) = f(a, b) over `shape`; a and b have one dtype.
template <typename F>
Tensor typed_predicate(const Tensor& a, const Tensor& b, IntArrayRef shape, F f) {
  return typed_binary<true>(a, b, shape, f);
}

/// out = f(x, s) (x's shape and dtype), the number s converted once to x's compute type.
template <typename F>
Tensor typed_scalar(const Tensor& x, const Scalar& s, F f) {
  Tensor out = empty_output(x.sizes(), x.dtype());
  PinSet pins;
  pins.add(x, AccessMode::Read).add(out, AccessMode::Write);
  pins.acquire();
  dispatch_dtype(x.dtype(), [&](auto t) {
    using T = decltype(t);
    using C = compute_type_t<T>;
    const C v = s.to<C>();
    cpu::map1<T, T>(out, x, [f, v](T a) { return static_cast<T>(f(static_cast<C>(a), v)); });
  });
  return out;
}

/// out = f(x) (x's shape and dtype).
template <typename F>
Tensor typed_unary(const Tensor& x, F f) {
  return typed_scalar(x, 0, [f](auto v, auto) { return f(v); });
}

}  // namespace strata::ops::detail
