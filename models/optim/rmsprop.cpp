#include "models/optim/rmsprop.h"

#include <cmath>

#include "core/error.h"
#include "core/factories.h"
#include "models/optim/detail/update_kernel.h"

namespace strata::optim {

using detail::option;
using detail::py_float;

Options RMSpropOptions::to_map() const {
  return {{"lr", lr},
          {"alpha", alpha},
          {"eps", eps},
          {"weight_decay", weight_decay},
          {"momentum", momentum},
          {"centered", centered ? 1.0 : 0.0},
          {"maximize", maximize ? 1.0 : 0.0}};
}

RMSprop::RMSprop(std::vector<Tensor> params, const RMSpropOptions& options) : Optimizer("RMSprop", options.to_map()) {
  init_groups({ParamGroup{std::move(params), {}}});
}

RMSprop::RMSprop(std::vector<ParamGroup> groups, const RMSpropOptions& defaults)
    : Optimizer("RMSprop", defaults.to_map()) {
  init_groups(std::move(groups));
}

void RMSprop::check_options(const Options& o) const {
  const double lr = option(o, "lr"), eps = option(o, "eps"), momentum = option(o, "momentum");
  const double weight_decay = option(o, "weight_decay"), alpha = option(o, "alpha");
  STRATA_CHECK(lr >= 0.0, "Invalid learning rate: ", py_float(lr));
  STRATA_CHECK(eps >= 0.0, "Invalid epsilon value: ", py_float(eps));
  STRATA_CHECK(momentum >= 0.0, "Invalid momentum value: ", py_float(momentum));
  STRATA_CHECK(weight_decay >= 0.0, "Invalid weight_decay value: ", py_float(weight_decay));
  STRATA_CHECK(alpha >= 0.0, "Invalid alpha value: ", py_float(alpha));
  for (const char* flag : {"centered", "maximize"}) {
    const double v = option(o, flag);
    STRATA_CHECK(v == 0.0 || v == 1.0, "Invalid ", flag, " value: ", py_float(v), " (expected 0 or 1)");
  }
}

std::vector<std::string> RMSprop::buffer_names(const Options& options) const {
  std::vector<std::string> names = {"square_avg"};
  if (option(options, "momentum") > 0) names.emplace_back("momentum_buffer");
  if (option(options, "centered") != 0) names.emplace_back("grad_avg");
  return names;
}

void RMSprop::init_state(const Tensor& param, const Options& options, ParamState& state) const {
  state.step = 0;
  for (const auto& name : buffer_names(options)) state.buffers[name] = zeros(param.sizes(), {param.dtype(), nullptr});
}

namespace {

// The operands of one update: param, grad, square_avg, then grad_avg (centered) and
// momentum_buffer (momentum > 0) when present.
template <typename T, bool kDecay, bool kCentered, bool kMomentum, bool kSmallWeight>
void rmsprop_kernel(const Tensor& param, const Tensor& grad, ParamState& state, const Options& o) {
  const T sign = option(o, "maximize") != 0 ? T(-1) : T(1);
  const T wd = static_cast<T>(option(o, "weight_decay"));
  const T alpha = static_cast<T>(option(o, "alpha"));
  const T one_minus_alpha = static_cast<T>(1 - option(o, "alpha"));
  const T w_minus_one = one_minus_alpha - T(1);  // lerp weight - 1
  const T eps = static_cast<T>(option(o, "eps"));
  const T momentum = static_cast<T>(option(o, "momentum"));
  const T neg_lr = static_cast<T>(-option(o, "lr"));
  // square_avg.mul_(alpha).addcmul_(g, g, value=1-alpha); grad_avg.lerp_(g, 1-alpha);
  // avg = square_avg.addcmul(grad_avg, grad_avg, value=-1).sqrt_().add_(eps) (or sqrt(square_avg) + eps);
  // buf.mul_(momentum).addcdiv_(g, avg); param.add_(buf, alpha=-lr)  (or param.addcdiv_(g, avg, value=-lr)).
  auto body = [=](T& p, T& g_in, T& sq, auto&... rest) {
    T g = sign * g_in;
    if constexpr (kDecay) g = std::fma(wd, p, g);
    sq = sq * alpha + one_minus_alpha * g * g;
    T avg;
    if constexpr (kCentered) {
      T& ga = std::get<0>(std::tie(rest...));
      const T diff = g - ga;
      ga = kSmallWeight ? std::fma(one_minus_alpha, diff, ga) : std::fma(w_minus_one, diff, g);
      avg = std::sqrt(sq + T(-1) * ga * ga) + eps;
    } else {
      avg = std::sqrt(sq) + eps;
    }
    if constexpr (kMomentum) {
      T& buf = std::get<sizeof...(rest) - 1>(std::tie(rest...));
      buf = buf * momentum + g / avg;
      p = std::fma(neg_lr, buf, p);
    } else {
      p = p + neg_lr * g / avg;
    }
  };
  const Tensor& sq = state.buffers.at("square_avg");
  if constexpr (kCentered && kMomentum) {
    const Tensor& ga = state.buffers.at("grad_avg");
    const Tensor& buf = state.buffers.at("momentum_buffer");
    detail::update_elements<T, 5>({&param, &grad, &sq, &ga, &buf}, body);
  } else if constexpr (kCentered) {
    const Tensor& ga = state.buffers.at("grad_avg");
    detail::update_elements<T, 4>({&param, &grad, &sq, &ga}, body);
  } else if constexpr (kMomentum) {
    const Tensor& buf = state.buffers.at("momentum_buffer");
    detail::update_elements<T, 4>({&param, &grad, &sq, &buf}, body);
  } else {
    detail::update_elements<T, 3>({&param, &grad, &sq}, body);
  }
}

}  // namespace

void RMSprop::update(const Tensor& param, const Tensor& grad, const Options& o, ParamState& state) {
  // A group switched to momentum or centered after its state was created gets the missing
  // buffers as zeros (PyTorch would fail with a KeyError on the missing state entry).
  for (const auto& name : buffer_names(o))
    if (state.buffers.count(name) == 0) state.buffers[name] = zeros(param.sizes(), {param.dtype(), nullptr});
  state.step += 1;
  const bool decay = option(o, "weight_decay") != 0;
  const bool centered = option(o, "centered") != 0;
  const bool momentum = option(o, "momentum") > 0;
  const bool small = std::abs(static_cast<float>(1 - option(o, "alpha"))) < 0.5f;
  auto run = [&](auto t) {
    using T = decltype(t);
    detail::dispatch_bool(decay, [&](auto d) {
      detail::dispatch_bool(centered, [&](auto c) {
        detail::dispatch_bool(momentum, [&](auto m) {
          detail::dispatch_bool(small, [&](auto sw) { rmsprop_kernel<T, d(), c(), m(), sw()>(param, grad, state, o); });
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
