#include "ops/unary.h"

#include "core/strided_loop.h"
#include "ops/op_util.h"

namespace strata {

namespace {

using namespace ops::detail;

/// out[i] = f(in[i]) over any strides; `out` is contiguous and pinned by the caller.
template <typename T, typename F>
void map_unary(const Tensor& out, const Tensor& in, F f) {
  ::strata::detail::StridedOperands<2> o;
  o.sizes = out.sizes();
  o.strides = {byte_strides(out), byte_strides(in)};
  o.base = {static_cast<char*>(out.data_ptr()), static_cast<char*>(in.data_ptr())};
  ::strata::detail::for_each_row<2>(o, [&](const std::array<char*, 2>& p, const std::array<int64_t, 2>& st, int64_t n) {
    T* y = reinterpret_cast<T*>(p[0]);
    const char* x = p[1];
    if (st[1] == sizeof(T)) {
      const T* xx = reinterpret_cast<const T*>(x);
      for (int64_t i = 0; i < n; ++i) y[i] = f(xx[i]);
    } else {
      for (int64_t i = 0; i < n; ++i) y[i] = f(*reinterpret_cast<const T*>(x + i * st[1]));
    }
  });
}

/// out[i] = f(a[i], b[i]) for two same-shape operands.
template <typename T, typename F>
void map_binary_same_shape(const Tensor& out, const Tensor& a, const Tensor& b, F f) {
  ::strata::detail::StridedOperands<3> o;
  o.sizes = out.sizes();
  o.strides = {byte_strides(out), byte_strides(a), byte_strides(b)};
  o.base = {static_cast<char*>(out.data_ptr()), static_cast<char*>(a.data_ptr()), static_cast<char*>(b.data_ptr())};
  ::strata::detail::for_each_row<3>(o, [&](const std::array<char*, 3>& p, const std::array<int64_t, 3>& st, int64_t n) {
    T* y = reinterpret_cast<T*>(p[0]);
    if (st[1] == sizeof(T) && st[2] == sizeof(T)) {
      const T* a = reinterpret_cast<const T*>(p[1]);
      const T* b = reinterpret_cast<const T*>(p[2]);
      for (int64_t i = 0; i < n; ++i) y[i] = f(a[i], b[i]);
      return;
    }
    for (int64_t i = 0; i < n; ++i)
      y[i] = f(*reinterpret_cast<const T*>(p[1] + i * st[1]), *reinterpret_cast<const T*>(p[2] + i * st[2]));
  });
}

Tensor relu_backward(const Tensor& grad, const Tensor& out) {
  Tensor gx = empty_output(out.sizes(), out.dtype());
  PinSet pins;
  pins.add(grad, AccessMode::Read).add(out, AccessMode::Read).add(gx, AccessMode::Write);
  pins.acquire();
  dispatch_float(out.dtype(), [&](auto t) {
    using T = decltype(t);
    map_binary_same_shape<T>(gx, grad, out, [](T g, T y) { return y > T(0) ? g : T(0); });
  });
  return gx;
}

}  // namespace

Tensor relu(const Tensor& x) {
  check_backend(OpKind::relu);
  check_float("relu", x, "input");
  Tensor y = empty_output(x.sizes(), x.dtype());
  {
    PinSet pins;
    pins.add(x, AccessMode::Read).add(y, AccessMode::Write);
    pins.acquire();
    dispatch_float(x.dtype(), [&](auto t) {
      using T = decltype(t);
      map_unary<T>(y, x, [](T v) { return v > T(0) ? v : T(0); });
    });
  }
  if (autograd::needs_grad({&x})) {
    auto node = autograd::make_node("ReluBackward", {&x}, [](autograd::Node& n, const TensorList& g) -> TensorList {
      return {relu_backward(g[0], n.saved(0))};
    });
    node->save(y);
    autograd::set_history({&y}, node);
  }
  return y;
}

}  // namespace strata
