#include "models/optim/adam.h"

#include <cmath>

#include "core/error.h"
#include "core/factories.h"
#include "models/optim/detail/update_kernel.h"

namespace strata::optim {

using detail::option;
using detail::py_float;

Options AdamOptions::to_map() const {
  return {{"lr", lr},
          {"beta1", beta1},
          {"beta2", beta2},
          {"eps", eps},
          {"weight_decay", weight_decay},
          {"amsgrad", amsgrad ? 1.0 : 0.0},
          {"maximize", maximize ? 1.0 : 0.0}};
}

Adam::Adam(std::vector<Tensor> params, const AdamOptions& options)
    : Adam("Adam", false, {ParamGroup{std::move(params), {}}}, options) {}

Adam::Adam(std::vector<ParamGroup> groups, const AdamOptions& defaults)
    : Adam("Adam", false, std::move(groups), defaults) {}

Adam::Adam(const char* name, bool decoupled_weight_decay, std::vector<ParamGroup> groups, const AdamOptions& defaults)
    : Optimizer(name, defaults.to_map()), decoupled_(decoupled_weight_decay) {
  init_groups(std::move(groups));
}

AdamW::AdamW(std::vector<Tensor> params, const AdamOptions& options)
    : Adam("AdamW", true, {ParamGroup{std::move(params), {}}}, options) {}

AdamW::AdamW(std::vector<ParamGroup> groups, const AdamOptions& defaults)
    : Adam("AdamW", true, std::move(groups), defaults) {}

void Adam::check_options(const Options& o) const {
  const double lr = option(o, "lr"), eps = option(o, "eps"), beta1 = option(o, "beta1"), beta2 = option(o, "beta2");
  const double weight_decay = option(o, "weight_decay");
  STRATA_CHECK(lr >= 0.0, "Invalid learning rate: ", py_float(lr));
  STRATA_CHECK(eps >= 0.0, "Invalid epsilon value: ", py_float(eps));
  STRATA_CHECK(beta1 >= 0.0 && beta1 < 1.0, "Invalid beta parameter at index 0: ", py_float(beta1));
  STRATA_CHECK(beta2 >= 0.0 && beta2 < 1.0, "Invalid beta parameter at index 1: ", py_float(beta2));
  STRATA_CHECK(weight_decay >= 0.0, "Invalid weight_decay value: ", py_float(weight_decay));
  for (const char* flag : {"amsgrad", "maximize"}) {
    const double v = option(o, flag);
    STRATA_CHECK(v == 0.0 || v == 1.0, "Invalid ", flag, " value: ", py_float(v), " (expected 0 or 1)");
  }
}

std::vector<std::string> Adam::buffer_names(const Options& options) const {
  if (option(options, "amsgrad") != 0) return {"exp_avg", "exp_avg_sq", "max_exp_avg_sq"};
  return {"exp_avg", "exp_avg_sq"};
}

void Adam::init_state(const Tensor& param, const Options& options, ParamState& state) const {
  state.step = 0;
  for (const auto& name : buffer_names(options)) state.buffers[name] = zeros(param.sizes(), {param.dtype(), nullptr});
}

namespace {

template <typename T, bool kDecay, bool kDecoupled, bool kAmsgrad, bool kSmallWeight>
void adam_kernel(const Tensor& param, const Tensor& grad, ParamState& state, const Options& o) {
  const double lr = option(o, "lr"), beta1 = option(o, "beta1"), beta2 = option(o, "beta2");
  const double weight_decay = option(o, "weight_decay");
  const auto step = static_cast<double>(state.step);
  const double bias_correction1 = 1 - std::pow(beta1, step);
  const double bias_correction2 = 1 - std::pow(beta2, step);
  const double step_size = lr / bias_correction1;
  const T bc2_sqrt = static_cast<T>(std::pow(bias_correction2, 0.5));
  const T neg_step_size = static_cast<T>(-step_size);
  const T eps = static_cast<T>(option(o, "eps"));
  const T sign = option(o, "maximize") != 0 ? T(-1) : T(1);
  const T wd = static_cast<T>(weight_decay);
  const T decay_factor = static_cast<T>(1 - lr * weight_decay);
  const T w = static_cast<T>(1 - beta1);  // lerp weight
  const T w_minus_one = w - T(1);
  const T b2 = static_cast<T>(beta2);
  const T one_minus_b2 = static_cast<T>(1 - beta2);
  // exp_avg.lerp_(g, w); exp_avg_sq.mul_(b2).addcmul_(g, g, value=1-b2); denom = (sqrt(v) / bc2_sqrt).add_(eps);
  // param.addcdiv_(exp_avg, denom, value=-step_size).
  auto body = [=](T& p, T& g_in, T& exp_avg, T& exp_avg_sq, auto&... max_sq) {
    T g = sign * g_in;
    if constexpr (kDecay && !kDecoupled) g = std::fma(wd, p, g);
    if constexpr (kDecay && kDecoupled) p = p * decay_factor;
    const T diff = g - exp_avg;
    if constexpr (kSmallWeight) {
      exp_avg = std::fma(w, diff, exp_avg);
    } else {
      exp_avg = std::fma(w_minus_one, diff, g);
    }
    exp_avg_sq = exp_avg_sq * b2 + one_minus_b2 * g * g;
    T v;
    if constexpr (kAmsgrad) {
      T& m = (max_sq, ...);
      m = (m < exp_avg_sq || exp_avg_sq != exp_avg_sq) ? exp_avg_sq : m;  // torch.maximum (NaN wins)
      v = m;
    } else {
      v = exp_avg_sq;
    }
    const T denom = std::sqrt(v) / bc2_sqrt + eps;
    p = p + neg_step_size * exp_avg / denom;
  };
  const Tensor& m = state.buffers.at("exp_avg");
  const Tensor& s = state.buffers.at("exp_avg_sq");
  if constexpr (kAmsgrad) {
    const Tensor& mx = state.buffers.at("max_exp_avg_sq");
    detail::update_elements<T, 5>({&param, &grad, &m, &s, &mx}, body);
  } else {
    detail::update_elements<T, 4>({&param, &grad, &m, &s}, body);
  }
}

}  // namespace

void Adam::update(const Tensor& param, const Tensor& grad, const Options& o, ParamState& state) {
  const bool amsgrad = option(o, "amsgrad") != 0;
  // A group switched to amsgrad after its state was created gets the missing buffer (zeros).
  if (amsgrad && state.buffers.count("max_exp_avg_sq") == 0)
    state.buffers["max_exp_avg_sq"] = zeros(param.sizes(), {param.dtype(), nullptr});
  state.step += 1;
  const bool decay = option(o, "weight_decay") != 0;
  const bool small = std::abs(static_cast<float>(1 - option(o, "beta1"))) < 0.5f;
  auto run = [&](auto t) {
    using T = decltype(t);
    detail::dispatch_bool(decay, [&](auto d) {
      detail::dispatch_bool(decoupled_, [&](auto dc) {
        detail::dispatch_bool(amsgrad, [&](auto a) {
          detail::dispatch_bool(small, [&](auto sw) { adam_kernel<T, d(), dc(), a(), sw()>(param, grad, state, o); });
        });
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
