#pragma once
/// @file
/// The floating point-wise kernels shared by the element-wise op families (ops/unary.cpp,
/// ops/unary_math.cpp); internal to ops/. Each takes a generic lambda called with float or double
/// and runs it over every element (any strides, contiguous output).

#include "autograd/engine.h"
#include "ops/detail/cpu/elementwise.h"
#include "ops/detail/op_util.h"

namespace strata::ops::detail {

/// y = f(x) for every element (f is a generic lambda, called with float or double).
template <typename F>
Tensor unary_kernel(const Tensor& x, F f, int64_t grain = cpu::kCheapGrain) {
  Tensor y = empty_output(x.sizes(), x.dtype());
  PinSet pins;
  pins.add(x, AccessMode::Read).add(y, AccessMode::Write);
  pins.acquire();
  dispatch_float(x.dtype(), [&](auto t) {
    using T = decltype(t);
    cpu::map1<T, T>(y, x, [f](T v) { return f(v); }, grain);
  });
  return y;
}

/// g = f(g, s) in place, for the incoming gradient g of a backward function when
/// autograd::reusable_gradient(g) (Note [In-place backward] in autograd/engine.h) and s is
/// contiguous with g's shape and dtype; returns false (and touches nothing) otherwise. Each element
/// reads its own g before writing it, so the values are grad_kernel's.
template <typename F>
bool grad_in_place(const Tensor& g, const Tensor& s, F f, int64_t grain) {
  if (!autograd::reusable_gradient(g) || !s.is_contiguous() || IntArrayRef(s.sizes()) != IntArrayRef(g.sizes()) ||
      s.dtype() != g.dtype())
    return false;
  PinSet pins;
  pins.add(g, AccessMode::Write).add(s, AccessMode::Read);
  pins.acquire();
  dispatch_float(g.dtype(), [&](auto t) {
    using T = decltype(t);
    T* gp = g.data<T>();
    const T* sp = s.data<T>();
    parallel_for(g.numel(), grain, [gp, sp, f](int64_t b, int64_t e) {
      const F fn = f;  // a local copy keeps the loop vectorized (ops/detail/cpu/elementwise.h)
      for (int64_t i = b; i < e; ++i) gp[i] = fn(gp[i], sp[i]);
    });
  });
  return true;
}

/// out = f(g, s) for a gradient g and a saved value s of the same shape; with `in_place`, into g
/// when grad_in_place can (the caller passes in_place only for a backward function's incoming
/// gradient).
template <typename F>
Tensor grad_kernel(const Tensor& g, const Tensor& s, F f, int64_t grain = cpu::kCheapGrain, bool in_place = false) {
  if (in_place && grad_in_place(g, s, f, grain)) return g;
  Tensor out = empty_output(g.sizes(), g.dtype());
  PinSet pins;
  pins.add(g, AccessMode::Read).add(s, AccessMode::Read).add(out, AccessMode::Write);
  pins.acquire();
  dispatch_float(g.dtype(), [&](auto t) {
    using T = decltype(t);
    cpu::map2<T, T, T>(out, g, s, [f](T a, T b) { return f(a, b); }, grain);
  });
  return out;
}

/// Records a node whose backward is grad_kernel(g, saved, df), in place when it can be.
template <typename DF>
void record_pointwise(const char* name, const Tensor& x, Tensor& y, const Tensor& saved, DF df,
                      int64_t grain = cpu::kCheapGrain) {
  if (!autograd::needs_grad({&x})) return;
  auto node = autograd::make_node(name, {&x}, [df, grain](autograd::Node& n, const TensorList& g) -> TensorList {
    return {grad_kernel(g[0], n.saved(0), df, grain, /*in_place=*/true)};
  });
  node->save(saved);
  autograd::set_history({&y}, node);
}

}  // namespace strata::ops::detail
