#include "ops/statistics.h"

#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "autograd/engine.h"
#include "autograd/grad_mode.h"
#include "core/type_promotion.h"
#include "ops/binary.h"
#include "ops/comparison.h"
#include "ops/detail/op_util.h"
#include "ops/elementwise_math.h"
#include "ops/operators.h"
#include "ops/reduction.h"
#include "ops/unary.h"

namespace strata {

namespace {

using namespace ops::detail;

/// The reduced dims of x: the keepdim sizes, the dropped-dim sizes and the number of elements each
/// output reduces (dims checked by reduce_mask).
struct Reduced {
  Dims keep, out;
  int64_t count = 1;
};

Reduced reduced(const char* op, const Tensor& x, IntArrayRef dims) {
  const std::vector<bool> mask = reduce_mask(op, x, dims);
  Reduced r{reduced_sizes(x, mask, true), reduced_sizes(x, mask, false), 1};
  for (int64_t d = 0; d < x.dim(); ++d)
    if (mask[static_cast<std::size_t>(d)]) r.count *= x.size(d);
  return r;
}

/// `compute` on x in f32 for bf16 and f16 (the result rounded back, recorded), on x itself else.
template <typename F>
Tensor in_compute_dtype(const Tensor& x, F compute) {
  if (is_reduced_float(x.dtype())) return convert_operand(compute(convert_operand(x, DType::f32)), x.dtype());
  return compute(x);
}

/// Records `node_name` on y with backward(g reshaped to the keepdim sizes, saved...) -> grad of x.
template <typename B>
void record_reduction(const char* node_name, const Tensor& x, Tensor& y, const Dims& keep,
                      std::initializer_list<Tensor> saved, B backward) {
  if (!autograd::needs_grad({&x})) return;
  auto node =
      autograd::make_node(node_name, {&x}, [keep, backward](autograd::Node& n, const TensorList& g) -> TensorList {
        return {backward(g[0].reshape(keep), n)};
      });
  for (const Tensor& s : saved) node->save(s);
  autograd::set_history({&y}, node);
}

Tensor var_std(const char* op, OpKind kind, const Tensor& x_in, IntArrayRef dims, double correction, bool keepdim,
               bool take_sqrt) {
  check_backend(kind);
  check_defined(op, x_in, "input");
  STRATA_CHECK(is_floating(x_in.dtype()), op, ": std and var only support floating point dtypes (PyTorch's rule), got ",
               x_in.describe(), "; convert it with .to(f32) first");
  STRATA_CHECK(std::isfinite(correction), op, ": correction must be finite, got ", correction);
  const Reduced r = reduced(op, x_in, dims);
  const double n = std::max(static_cast<double>(r.count) - correction, 0.0);
  return in_compute_dtype(x_in, [&](const Tensor& x) {
    Tensor centered, y;
    {
      autograd::NoGradGuard no_grad;
      centered = x - mean(x, dims, true);
      y = div(sum(centered * centered, dims, keepdim), n);
      if (take_sqrt) y = sqrt(y);
    }
    if (take_sqrt) {
      record_reduction("StdBackward", x, y, r.keep, {centered, y}, [n](const Tensor& g, autograd::Node& nd) {
        return g * nd.saved(0) / (nd.saved(1).reshape(g.sizes()) * n);
      });
    } else {
      record_reduction("VarBackward", x, y, r.keep, {centered},
                       [n](const Tensor& g, autograd::Node& nd) { return g * nd.saved(0) * (2.0 / n); });
    }
    return y;
  });
}

/// The p-norm for finite p other than 0 (see norm's comment for its backward).
Tensor finite_p_norm(const Tensor& x, double p, IntArrayRef dims, bool keepdim, const Reduced& r) {
  Tensor y;
  {
    autograd::NoGradGuard no_grad;
    if (p == 2.0)
      y = sqrt(sum(x * x, dims, keepdim));
    else if (p == 1.0)
      y = sum(abs(x), dims, keepdim);
    else
      y = pow(sum(pow(abs(x), p), dims, keepdim), 1.0 / p);
  }
  record_reduction("NormBackward", x, y, r.keep, {x, y}, [p](const Tensor& g, autograd::Node& nd) {
    const Tensor xs = nd.saved(0), ys = nd.saved(1).reshape(g.sizes());
    if (p == 1.0) return sign(xs) * g;
    const Tensor scale = where(eq(ys, 0), 0.0, g / (p == 2.0 ? ys : pow(ys, p - 1)));
    return (p == 2.0 ? xs : xs * pow(abs(xs), p - 2)) * scale;
  });
  return y;
}

}  // namespace

Tensor var(const Tensor& x, IntArrayRef dims, double correction, bool keepdim) {
  return var_std("var", OpKind::var, x, dims, correction, keepdim, false);
}

Tensor std(const Tensor& x, IntArrayRef dims, double correction, bool keepdim) {
  return var_std("std", OpKind::std, x, dims, correction, keepdim, true);
}

Tensor norm(const Tensor& x_in, double p, IntArrayRef dims, bool keepdim) {
  check_backend(OpKind::norm);
  check_defined("norm", x_in, "input");
  STRATA_CHECK(is_floating(x_in.dtype()), "norm: expected a floating point input, got ", x_in.describe(),
               " (PyTorch's rule; convert it with .to(f32) first)");
  STRATA_CHECK(!std::isnan(p), "norm: the order p must not be NaN");
  const Reduced r = reduced("norm", x_in, dims);
  return in_compute_dtype(x_in, [&](const Tensor& x) {
    if (std::isinf(p)) {
      STRATA_CHECK(r.count > 0, "norm: the ", p > 0 ? "inf" : "-inf", "-norm of ", x.describe(),
                   " reduces an empty dim (PyTorch refuses it too)");
      return p > 0 ? amax(abs(x), dims, keepdim) : amin(abs(x), dims, keepdim);  // recorded compositions
    }
    if (p == 0.0) {
      Tensor y;
      {
        autograd::NoGradGuard no_grad;
        y = sum(ne(x, 0), dims, keepdim).to(x.dtype());
      }
      // Recorded, but its backward gives no gradient: x.grad stays unset, as PyTorch's.
      record_reduction("NormBackward", x, y, r.keep, {}, [](const Tensor&, autograd::Node&) { return Tensor(); });
      return y;
    }
    return finite_p_norm(x, p, dims, keepdim, r);
  });
}

Tensor logsumexp(const Tensor& x_in, IntArrayRef dims, bool keepdim) {
  check_backend(OpKind::logsumexp);
  check_defined("logsumexp", x_in, "input");
  const Reduced r = reduced("logsumexp", x_in, dims);
  const Tensor xf = is_floating(x_in.dtype()) ? x_in : x_in.to(kDefaultFloat);
  return in_compute_dtype(xf, [&](const Tensor& x) {
    Tensor y;
    {
      autograd::NoGradGuard no_grad;
      if (r.count == 0) {
        y = full(r.keep, -std::numeric_limits<double>::infinity(), {x.dtype(), nullptr});
      } else {
        // Shifting by an infinite maximum would make inf - inf; such slices keep m = 0 and give ±inf.
        const Tensor m = amax(x, dims, true);
        const Tensor shift = where(lt(abs(m), std::numeric_limits<double>::infinity()), m, 0.0);
        y = log(sum(exp(x - shift), dims, true)) + shift;
      }
      if (!keepdim) y = y.reshape(r.out);
    }
    record_reduction("LogsumexpBackward", x, y, r.keep, {x, y}, [](const Tensor& g, autograd::Node& nd) {
      return g * exp(nd.saved(0) - nd.saved(1).reshape(g.sizes()));
    });
    return y;
  });
}

// ---- cumsum ------------------------------------------------------------------------------------

namespace {

/// Running sums of `rows` rows of n contiguous elements, from the end when `reverse`; floating
/// values accumulate in f64, integers in i64 (wrapping, like PyTorch's).
template <typename T>
void scan_rows(const T* in, T* out, int64_t rows, int64_t n, bool reverse) {
  using A = std::conditional_t<std::is_integral_v<T>, uint64_t, double>;
  parallel_for(rows, std::max<int64_t>(1, 32768 / std::max<int64_t>(n, 1)), [=](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      A acc = 0;
      for (int64_t k = 0; k < n; ++k) {
        const int64_t i = r * n + (reverse ? n - 1 - k : k);
        acc += static_cast<A>(in[i]);
        out[i] = static_cast<T>(acc);
      }
    }
  });
}

/// The running sum of x (f32, f64 or i64) along dim, not recorded.
Tensor scan(const Tensor& x, int64_t dim, bool reverse) {
  const Tensor rows = rows_along(x, dim);
  Tensor out = empty_output(rows.sizes(), x.dtype());
  {
    const int64_t n = x.dim() == 0 ? 1 : x.size(dim);
    PinSet pins;
    pins.add(rows, AccessMode::Read).add(out, AccessMode::Write);
    pins.acquire();
    dispatch_kernel_dtype(x.dtype(), [&](auto t) {
      using T = decltype(t);
      scan_rows<T>(rows.data<T>(), out.data<T>(), n == 0 ? 0 : rows.numel() / n, n, reverse);
    });
  }
  return from_rows(out, dim, x.dim());
}

}  // namespace

Tensor cumsum(const Tensor& x_in, int64_t dim, std::optional<DType> dtype) {
  check_backend(OpKind::cumsum);
  check_defined("cumsum", x_in, "input");
  const int64_t rank = std::max<int64_t>(x_in.dim(), 1);
  STRATA_CHECK(dim >= -rank && dim < rank, "cumsum: dim ", dim, " is out of range for ", x_in.describe(),
               " (expected a dim in [", -rank, ", ", rank - 1, "])");
  const int64_t d = x_in.dim() == 0 ? 0 : (dim < 0 ? dim + rank : dim);
  const DType out_dtype = dtype ? *dtype : (is_floating(x_in.dtype()) ? x_in.dtype() : DType::i64);
  const Tensor x = convert_operand(x_in, out_dtype);
  if (!is_floating(out_dtype)) return scan(x.to(DType::i64), d, false).to(out_dtype);
  return in_compute_dtype(x, [&](const Tensor& v) {
    Tensor y = scan(v, d, false);
    if (autograd::needs_grad({&v})) {
      auto node = autograd::make_node("CumsumBackward", {&v}, [d](autograd::Node&, const TensorList& g) -> TensorList {
        return {scan(g[0], d, true)};
      });
      autograd::set_history({&y}, node);
    }
    return y;
  });
}

}  // namespace strata
