#include "models/optim/sgd.h"

#include <cmath>

#include "core/error.h"
#include "core/factories.h"
#include "models/optim/detail/update_kernel.h"

namespace strata::optim {

using detail::option;
using detail::py_float;

Options SGDOptions::to_map() const {
  return {{"lr", lr},
          {"momentum", momentum},
          {"dampening", dampening},
          {"weight_decay", weight_decay},
          {"nesterov", nesterov ? 1.0 : 0.0},
          {"maximize", maximize ? 1.0 : 0.0}};
}

SGD::SGD(std::vector<Tensor> params, const SGDOptions& options) : Optimizer("SGD", options.to_map()) {
  init_groups({ParamGroup{std::move(params), {}}});
}

SGD::SGD(std::vector<ParamGroup> groups, const SGDOptions& defaults) : Optimizer("SGD", defaults.to_map()) {
  init_groups(std::move(groups));
}

void SGD::check_options(const Options& o) const {
  const double lr = option(o, "lr"), momentum = option(o, "momentum"), dampening = option(o, "dampening");
  const double weight_decay = option(o, "weight_decay");
  STRATA_CHECK(lr >= 0.0, "Invalid learning rate: ", py_float(lr));
  STRATA_CHECK(momentum >= 0.0, "Invalid momentum value: ", py_float(momentum));
  STRATA_CHECK(weight_decay >= 0.0, "Invalid weight_decay value: ", py_float(weight_decay));
  STRATA_CHECK(std::isfinite(dampening), "Invalid dampening value: ", py_float(dampening));
  for (const char* flag : {"nesterov", "maximize"}) {
    const double v = option(o, flag);
    STRATA_CHECK(v == 0.0 || v == 1.0, "Invalid ", flag, " value: ", py_float(v), " (expected 0 or 1)");
  }
  STRATA_CHECK(option(o, "nesterov") == 0.0 || (momentum > 0 && dampening == 0),
               "Nesterov momentum requires a momentum and zero dampening");
}

std::vector<std::string> SGD::buffer_names(const Options& options) const { return {"momentum_buffer"}; }

void SGD::init_state(const Tensor& param, const Options& options, ParamState& state) const {
  // The momentum buffer is created by the first update (buf = g, PyTorch's first step).
}

namespace {

template <typename T, bool kDecay, bool kMomentum, bool kNesterov, bool kFirst>
void sgd_kernel(const Tensor& param, const Tensor& grad, const Tensor* buf, const Options& o) {
  const T sign = option(o, "maximize") != 0 ? T(-1) : T(1);
  const T wd = static_cast<T>(option(o, "weight_decay"));
  const T momentum = static_cast<T>(option(o, "momentum"));
  const T one_minus_damp = static_cast<T>(1 - option(o, "dampening"));
  const T neg_lr = static_cast<T>(-option(o, "lr"));
  auto body = [=](T& p, T& g_in, auto&... b) {
    T g = sign * g_in;
    if constexpr (kDecay) g = std::fma(wd, p, g);  // grad.add(param, alpha=wd)
    if constexpr (kMomentum) {
      T& m = (b, ...);
      if constexpr (kFirst) {
        m = g;
      } else {
        m = std::fma(one_minus_damp, g, m * momentum);  // buf.mul_(m).add_(g, alpha=1-d)
      }
      if constexpr (kNesterov) {
        g = std::fma(momentum, m, g);
      } else {
        g = m;
      }
    }
    p = std::fma(neg_lr, g, p);  // param.add_(g, alpha=-lr)
  };
  if constexpr (kMomentum) {
    detail::update_elements<T, 3>({&param, &grad, buf}, body);
  } else {
    detail::update_elements<T, 2>({&param, &grad}, body);
  }
}

}  // namespace

void SGD::update(const Tensor& param, const Tensor& grad, const Options& o, ParamState& state) {
  const bool momentum = option(o, "momentum") != 0;
  bool first = false;
  const Tensor* buf = nullptr;
  if (momentum) {
    auto it = state.buffers.find("momentum_buffer");
    if (it == state.buffers.end()) {
      it = state.buffers.emplace("momentum_buffer", empty(param.sizes(), {param.dtype(), nullptr})).first;
      first = true;
    }
    buf = &it->second;
  }
  const bool decay = option(o, "weight_decay") != 0;
  const bool nesterov = option(o, "nesterov") != 0;
  auto run = [&](auto t) {
    using T = decltype(t);
    detail::dispatch_bool(decay, [&](auto d) {
      if (!momentum) return sgd_kernel<T, d(), false, false, false>(param, grad, buf, o);
      detail::dispatch_bool(nesterov, [&](auto n) {
        detail::dispatch_bool(first, [&](auto f) { sgd_kernel<T, d(), true, n(), f()>(param, grad, buf, o); });
      });
    });
  };
  if (param.dtype() == DType::f64) {
    run(double{});
  } else {
    run(float{});
  }
}

}  // namespace strata::optim
