#include "models/optim/rowwise_adagrad.h"

#include <cmath>

#include "core/error.h"
#include "core/factories.h"
#include "core/pin_set.h"
#include "core/threading.h"
#include "models/optim/detail/update_kernel.h"

namespace strata::optim {

using detail::option;
using detail::py_float;

Options RowWiseAdagradOptions::to_map() const { return {{"lr", lr}, {"eps", eps}, {"weight_decay", weight_decay}}; }

RowWiseAdagrad::RowWiseAdagrad(std::vector<Tensor> params, const RowWiseAdagradOptions& options)
    : Optimizer("RowWiseAdagrad", options.to_map()) {
  init_groups({ParamGroup{std::move(params), {}}});
}

RowWiseAdagrad::RowWiseAdagrad(std::vector<ParamGroup> groups, const RowWiseAdagradOptions& defaults)
    : Optimizer("RowWiseAdagrad", defaults.to_map()) {
  init_groups(std::move(groups));
}

void RowWiseAdagrad::check_options(const Options& o) const {
  const double lr = option(o, "lr"), eps = option(o, "eps"), wd = option(o, "weight_decay");
  STRATA_CHECK(lr >= 0.0, "Invalid learning rate: ", py_float(lr));
  STRATA_CHECK(eps >= 0.0, "Invalid epsilon value: ", py_float(eps));
  STRATA_CHECK(wd >= 0.0, "Invalid weight_decay value: ", py_float(wd));
}

namespace {
int64_t rows_of(const Tensor& param) { return param.dim() >= 2 ? param.size(0) : 1; }
}  // namespace

Dims RowWiseAdagrad::buffer_shape(const Tensor& param, const std::string& name) const { return Dims{rows_of(param)}; }

void RowWiseAdagrad::init_state(const Tensor& param, const Options& options, ParamState& state) const {
  const int64_t rows = rows_of(param);
  // A rank >= 3 parameter must be viewable as [rows, cols] (its own data is updated in place).
  if (param.dim() >= 3 && param.numel() > 0) {
    bool viewable = true;
    try {
      (void)param.view({rows, -1});
    } catch (const Error&) {
      viewable = false;
    }
    STRATA_CHECK(viewable, "RowWiseAdagrad: a parameter of rank >= 3 must be viewable as [rows, cols], got ",
                 param.describe(), " with strides ", param.strides());
  }
  state.step = 0;
  state.buffers["sum"] = zeros({rows}, {param.dtype(), nullptr});
}

namespace {

template <typename T>
void rowwise_kernel(const Tensor& p2, const Tensor& g2, const Tensor& sum, const Options& o) {
  const int64_t rows = p2.size(0), cols = p2.size(1);
  const T lr = static_cast<T>(option(o, "lr"));
  const T eps = static_cast<T>(option(o, "eps"));
  const T wd = static_cast<T>(option(o, "weight_decay"));
  const bool decay = option(o, "weight_decay") != 0;
  PinSet pins;
  pins.add(p2, AccessMode::Write).add(g2, AccessMode::Read).add(sum, AccessMode::Write);
  pins.acquire();
  T* const p_base = p2.data<T>();
  const T* const g_base = g2.data<T>();
  T* const s = sum.data<T>();
  const int64_t ps0 = p2.stride(0), ps1 = p2.stride(1), gs0 = g2.stride(0), gs1 = g2.stride(1);
  // Rows are independent: each task owns its rows of p and their accumulators (runs on several
  // threads through parallel_for; Note [Optimizer update kernels]).
  const int64_t grain_rows = std::max<int64_t>(1, detail::kUpdateGrain / std::max<int64_t>(cols, 1));
  parallel_for(rows, grain_rows, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      T* p = p_base + r * ps0;
      const T* g = g_base + r * gs0;
      double sq = 0;
      for (int64_t j = 0; j < cols; ++j) {
        const T gj = decay ? std::fma(wd, p[j * ps1], g[j * gs1]) : g[j * gs1];
        sq += static_cast<double>(gj) * static_cast<double>(gj);
      }
      s[r] = s[r] + static_cast<T>(sq / static_cast<double>(cols));
      const T multiplier = lr / (std::sqrt(s[r]) + eps);
      for (int64_t j = 0; j < cols; ++j) {
        const T gj = decay ? std::fma(wd, p[j * ps1], g[j * gs1]) : g[j * gs1];
        p[j * ps1] = p[j * ps1] - multiplier * gj;
      }
    }
  });
  p2.bump_version();
  sum.bump_version();
}

}  // namespace

void RowWiseAdagrad::update(const Tensor& param, const Tensor& grad, const Options& o, ParamState& state) {
  state.step += 1;
  if (param.numel() == 0) return;
  const int64_t rows = rows_of(param);
  const int64_t cols = param.numel() / rows;
  // Views of the parameter (checked viewable in init_state) and of the gradient (copied only if it
  // has a layout no [rows, cols] view can express).
  const Tensor p2 = param.dim() == 2 ? param : param.view({rows, cols});
  Tensor g2;
  if (grad.dim() == 2) {
    g2 = grad;
  } else {
    try {
      g2 = grad.view({rows, cols});
    } catch (const Error&) {
      g2 = grad.contiguous().view({rows, cols});
    }
  }
  const Tensor& sum = state.buffers.at("sum");
  if (param.dtype() == DType::f64) {
    rowwise_kernel<double>(p2, g2, sum, o);
  } else {
    rowwise_kernel<float>(p2, g2, sum, o);
  }
}

}  // namespace strata::optim
