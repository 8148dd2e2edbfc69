#pragma once
// Tiny differentiable ops local to the autograd tests (f64, contiguous, same shapes), so the engine
// is tested independently of ops/. Each records itself exactly as ops do (Note [Recording an op]).

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "autograd/engine.h"
#include "autograd/node.h"
#include "core/factories.h"
#include "core/pin_set.h"

namespace strata_test {

using strata::Tensor;
using strata::autograd::Node;
using strata::autograd::TensorList;

inline Tensor map2(const Tensor& a, const Tensor& b, const std::function<double(double, double)>& f) {
  Tensor ac = a.contiguous(), bc = b.contiguous();
  Tensor out = strata::empty(a.sizes(), {strata::DType::f64, nullptr});
  strata::PinSet pins;
  pins.add(ac, strata::AccessMode::Read).add(bc, strata::AccessMode::Read).add(out, strata::AccessMode::Write);
  pins.acquire();
  const double* x = ac.data<double>();
  const double* y = bc.data<double>();
  double* o = out.data<double>();
  for (int64_t i = 0; i < out.numel(); ++i) o[i] = f(x[i], y[i]);
  return out;
}

/// Test-local op: elementwise a * b (saves both).
inline Tensor tmul(const Tensor& a, const Tensor& b) {
  Tensor out = map2(a, b, [](double x, double y) { return x * y; });
  if (strata::autograd::needs_grad({&a, &b})) {
    auto node = strata::autograd::make_node("TMulBackward", {&a, &b}, [](Node& n, const TensorList& g) -> TensorList {
      Tensor sa = n.saved(0), sb = n.saved(1);
      return {n.needs_input_grad(0) ? map2(g[0], sb, [](double x, double y) { return x * y; }) : Tensor(),
              n.needs_input_grad(1) ? map2(g[0], sa, [](double x, double y) { return x * y; }) : Tensor()};
    });
    node->save(a);
    node->save(b);
    strata::autograd::set_history({&out}, node);
  }
  return out;
}

/// Test-local op: elementwise a + b (saves nothing).
inline Tensor tadd(const Tensor& a, const Tensor& b) {
  Tensor out = map2(a, b, [](double x, double y) { return x + y; });
  if (strata::autograd::needs_grad({&a, &b})) {
    auto node = strata::autograd::make_node("TAddBackward", {&a, &b}, [](Node& n, const TensorList& g) -> TensorList {
      return {n.needs_input_grad(0) ? g[0].clone() : Tensor(), n.needs_input_grad(1) ? g[0].clone() : Tensor()};
    });
    strata::autograd::set_history({&out}, node);
  }
  return out;
}

/// Test-local op with two outputs: (x, 2x); its backward is g0 + 2 g1.
inline std::pair<Tensor, Tensor> ttwo(const Tensor& x) {
  Tensor a = x.clone();
  Tensor b = map2(x, x, [](double v, double) { return 2 * v; });
  if (strata::autograd::needs_grad({&x})) {
    auto node = strata::autograd::make_node("TTwoBackward", {&x}, [](Node&, const TensorList& g) -> TensorList {
      return {map2(g[0], g[1], [](double p, double q) { return p + 2 * q; })};
    });
    strata::autograd::set_history({&a, &b}, node);
  }
  return {a, b};
}

inline Tensor f64(std::vector<double> v) { return strata::tensor<double>(v); }

inline std::vector<double> vals(const Tensor& t) {
  Tensor c = t.contiguous();
  return std::vector<double>(c.data<double>(), c.data<double>() + c.numel());
}

}  // namespace strata_test
