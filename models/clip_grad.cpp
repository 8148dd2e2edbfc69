#include "models/clip_grad.h"

#include <cmath>
#include <limits>

#include "autograd/grad_mode.h"
#include "core/error.h"
#include "core/factories.h"
#include "models/module.h"
#include "ops/binary.h"
#include "ops/unary.h"

namespace strata::nn {

namespace {

// The defined gradients of `params`, checked to be floating.
std::vector<Tensor> defined_grads(const std::vector<Tensor>& params, const char* op) {
  std::vector<Tensor> out;
  for (std::size_t i = 0; i < params.size(); ++i) {
    STRATA_CHECK(params[i].defined(), op, ": parameter ", i, " is undefined");
    Tensor g = params[i].grad();
    if (!g.defined()) continue;
    STRATA_CHECK(g.dtype() == DType::f32 || g.dtype() == DType::f64, op, ": the gradient of parameter ", i,
                 " must be f32 or f64, got ", g.describe());
    out.push_back(std::move(g));
  }
  return out;
}

// The p-norm of already computed per-tensor norms (or of any list of values).
double norm_of_values(const std::vector<double>& v, double p) {
  if (std::isinf(p)) {
    double best = p > 0 ? 0.0 : std::numeric_limits<double>::infinity();
    for (double x : v) best = p > 0 ? std::max(best, std::abs(x)) : std::min(best, std::abs(x));
    return best;
  }
  double acc = 0.0;
  if (p == 0) {
    for (double x : v) acc += x != 0 ? 1.0 : 0.0;
    return acc;
  }
  for (double x : v) acc += std::pow(std::abs(x), p);
  return std::pow(acc, 1.0 / p);
}

}  // namespace

double vector_norm(const Tensor& t, double p) {
  const Tensor c = t.contiguous().to(DType::f64);
  const double* x = c.data<double>();
  return norm_of_values(std::vector<double>(x, x + c.numel()), p);
}

Tensor clip_grad_norm_(const std::vector<Tensor>& params, double max_norm, double norm_type, bool error_if_nonfinite) {
  const std::vector<Tensor> grads = defined_grads(params, "clip_grad_norm_");
  if (grads.empty()) return scalar_tensor(0.0, DType::f32);
  const DType dtype = grads[0].dtype();
  std::vector<double> norms;
  for (const Tensor& g : grads) {
    // Each norm is rounded to its gradient's dtype, as PyTorch's per-tensor norms are.
    norms.push_back(scalar_tensor(vector_norm(g, norm_type), g.dtype()).to(dtype).item<double>());
  }
  const Tensor total = scalar_tensor(norm_of_values(norms, norm_type), dtype);
  const double total_value = total.item<double>();
  STRATA_CHECK(!error_if_nonfinite || std::isfinite(total_value), "The total norm of order ", py_float_repr(norm_type),
               " for gradients from `parameters` is non-finite, so it cannot be "
               "clipped. To disable this error and scale the gradients by the non-finite norm anyway, set "
               "`error_if_nonfinite=False`");
  autograd::NoGradGuard no_grad;
  // clip_coef = max_norm / (total + 1e-6), clamped to 1, in the norm's dtype.
  const Tensor coef =
      clamp(div(scalar_tensor(max_norm, dtype), add(total, scalar_tensor(1e-6, dtype))), std::nullopt, 1.0);
  for (const Tensor& g : grads) {
    Tensor target = g;
    target.copy_(mul(g, coef.to(g.dtype())));
  }
  return total;
}

void clip_grad_value_(const std::vector<Tensor>& params, double clip_value) {
  const std::vector<Tensor> grads = defined_grads(params, "clip_grad_value_");
  autograd::NoGradGuard no_grad;
  for (const Tensor& g : grads) {
    Tensor target = g;
    target.copy_(clamp(g, -clip_value, clip_value));
  }
}

}  // namespace strata::nn
