#include "models/optim/adagrad.h"

#include <cmath>

#include "core/error.h"
#include "core/factories.h"
#include "models/optim/detail/update_kernel.h"

namespace strata::optim {

using detail::option;
using detail::py_float;

Options AdagradOptions::to_map() const {
  return {{"lr", lr},
          {"lr_decay", lr_decay},
          {"weight_decay", weight_decay},
          {"initial_accumulator_value", initial_accumulator_value},
          {"eps", eps},
          {"maximize", maximize ? 1.0 : 0.0}};
}

Adagrad::Adagrad(std::vector<Tensor> params, const AdagradOptions& options) : Optimizer("Adagrad", options.to_map()) {
  init_groups({ParamGroup{std::move(params), {}}});
}

Adagrad::Adagrad(std::vector<ParamGroup> groups, const AdagradOptions& defaults)
    : Optimizer("Adagrad", defaults.to_map()) {
  init_groups(std::move(groups));
}

void Adagrad::check_options(const Options& o) const {
  const double lr = option(o, "lr"), lr_decay = option(o, "lr_decay"), wd = option(o, "weight_decay");
  const double init = option(o, "initial_accumulator_value"), eps = option(o, "eps");
  STRATA_CHECK(lr >= 0.0, "Invalid learning rate: ", py_float(lr));
  STRATA_CHECK(lr_decay >= 0.0, "Invalid lr_decay value: ", py_float(lr_decay));
  STRATA_CHECK(wd >= 0.0, "Invalid weight_decay value: ", py_float(wd));
  STRATA_CHECK(init >= 0.0, "Invalid initial_accumulator_value value: ", py_float(init));
  STRATA_CHECK(eps >= 0.0, "Invalid epsilon value: ", py_float(eps));
  const double maximize = option(o, "maximize");
  STRATA_CHECK(maximize == 0.0 || maximize == 1.0, "Invalid maximize value: ", py_float(maximize),
               " (expected 0 or 1)");
}

void Adagrad::init_state(const Tensor& param, const Options& options, ParamState& state) const {
  state.step = 0;
  state.buffers["sum"] = full(param.sizes(), option(options, "initial_accumulator_value"), {param.dtype(), nullptr});
}

namespace {

template <typename T, bool kDecay>
void adagrad_kernel(const Tensor& param, const Tensor& grad, const Tensor& sum, double clr, const Options& o) {
  const T sign = option(o, "maximize") != 0 ? T(-1) : T(1);
  const T wd = static_cast<T>(option(o, "weight_decay"));
  const T eps = static_cast<T>(option(o, "eps"));
  const T neg_clr = static_cast<T>(-clr);
  // state_sum.addcmul_(g, g, value=1); std = state_sum.sqrt().add_(eps); param.addcdiv_(g, std, value=-clr)
  detail::update_elements<T, 3>({&param, &grad, &sum}, [=](T& p, T& g_in, T& s) {
    T g = sign * g_in;
    if constexpr (kDecay) g = std::fma(wd, p, g);
    s = s + g * g;
    const T std_dev = std::sqrt(s) + eps;
    p = p + neg_clr * g / std_dev;
  });
}

}  // namespace

void Adagrad::update(const Tensor& param, const Tensor& grad, const Options& o, ParamState& state) {
  state.step += 1;
  const double clr = option(o, "lr") / (1 + static_cast<double>(state.step - 1) * option(o, "lr_decay"));
  const Tensor& sum = state.buffers.at("sum");
  const bool decay = option(o, "weight_decay") != 0;
  auto run = [&](auto t) {
    using T = decltype(t);
    detail::dispatch_bool(decay, [&](auto d) { adagrad_kernel<T, d()>(param, grad, sum, clr, o); });
  };
  if (param.dtype() == DType::f64) {
    run(double{});
  } else {
    run(float{});
  }
}

}  // namespace strata::optim
