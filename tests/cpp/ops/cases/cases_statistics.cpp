// Harness cases for ops/statistics.h.

#include "ops/statistics.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "tests/cpp/ops/harness/op_harness.h"

namespace strata::testing {
namespace {

/// The elements of x grouped by output position of a reduction over `dims` (all when empty), in
/// the output's row-major order, and the output sizes (reduced dims dropped or kept as 1).
struct Groups {
  std::vector<std::vector<double>> values;
  Dims sizes;
};

Groups group_by_output(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  const int64_t rank = x.dim();
  std::vector<bool> reduced(static_cast<std::size_t>(rank), dims.empty());
  for (int64_t d : dims) reduced[static_cast<std::size_t>(d < 0 ? d + rank : d)] = true;
  Groups g;
  int64_t outputs = 1;
  for (int64_t d = 0; d < rank; ++d) {
    if (!reduced[static_cast<std::size_t>(d)])
      outputs *= x.size(d), g.sizes.push_back(x.size(d));
    else if (keepdim)
      g.sizes.push_back(1);
  }
  g.values.resize(static_cast<std::size_t>(outputs));
  const auto v = values_of(x);
  for (int64_t i = 0; i < x.numel(); ++i) {
    int64_t rem = i, out = 0, mul = 1;
    for (int64_t d = rank - 1; d >= 0; --d) {
      const int64_t idx = rem % x.size(d);
      rem /= x.size(d);
      if (!reduced[static_cast<std::size_t>(d)]) out += idx * mul, mul *= x.size(d);
    }
    g.values[static_cast<std::size_t>(out)].push_back(v[static_cast<std::size_t>(i)]);
  }
  return g;
}

using GroupFn = std::function<double(const std::vector<double>&)>;

/// y = op(x) reducing `dims`, with reference `f` applied to each group.
OpCase reduce_case(std::string name, OpKind op, std::function<Tensor(const Tensor&)> fn, GroupFn f, Dims sizes,
                   std::vector<int64_t> dims, bool keepdim, double lo = -1.0, double hi = 1.0) {
  OpCase c;
  c.name = std::move(name);
  c.op = op;
  c.inputs = [sizes, lo, hi](Generator& g) { return TensorList{uniform64(sizes, g, lo, hi)}; };
  c.run = [fn](const TensorList& in) { return TensorList{fn(in[0])}; };
  c.reference = [f, dims, keepdim](const TensorList& in) {
    const Groups g = group_by_output(in[0], dims, keepdim);
    std::vector<double> out;
    for (const auto& group : g.values) out.push_back(f(group));
    return TensorList{from_values(out, g.sizes)};
  };
  c.grad_inputs = {0};
  return c;
}

double mean_of(const std::vector<double>& v) {
  double s = 0;
  for (double e : v) s += e;
  return s / static_cast<double>(v.size());
}

GroupFn variance(double correction) {
  return [correction](const std::vector<double>& v) {
    const double m = mean_of(v);
    double s = 0;
    for (double e : v) s += (e - m) * (e - m);
    return s / (static_cast<double>(v.size()) - correction);
  };
}

GroupFn p_norm(double p) {
  return [p](const std::vector<double>& v) {
    double s = 0;
    for (double e : v) s += std::pow(std::abs(e), p);
    return std::pow(s, 1 / p);
  };
}

double max_abs(const std::vector<double>& v) {
  double m = 0;
  for (double e : v) m = std::max(m, std::abs(e));
  return m;
}

double log_sum_exp(const std::vector<double>& v) {
  double s = 0;
  for (double e : v) s += std::exp(e);
  return std::log(s);
}

STRATA_REGISTER_CASE(
    reduce_case("var/all", OpKind::var, [](const Tensor& x) { return var(x); }, variance(1), {4, 5}, {}, false));
STRATA_REGISTER_CASE(with_bench(reduce_case(
                                    "var/dim1_keepdim", OpKind::var,
                                    [](const Tensor& x) { return var(x, {1}, 1.0, true); }, variance(1), {3, 6, 2}, {1},
                                    true),
                                Dims{256, 4096}));
STRATA_REGISTER_CASE(reduce_case(
    "var/two_dims_correction0", OpKind::var, [](const Tensor& x) { return var(x, {0, -1}, 0.0); }, variance(0),
    {3, 4, 5}, {0, -1}, false));
STRATA_REGISTER_CASE(with_bench(reduce_case(
                                    "std/all", OpKind::std, [](const Tensor& x) { return std(x); },
                                    [](const std::vector<double>& v) { return std::sqrt(variance(1)(v)); }, {4, 5}, {},
                                    false),
                                Dims{256, 4096}));
STRATA_REGISTER_CASE(reduce_case(
    "std/dim0_correction2", OpKind::std, [](const Tensor& x) { return std(x, {0}, 2.0); },
    [](const std::vector<double>& v) { return std::sqrt(variance(2)(v)); }, {6, 3}, {0}, false));
STRATA_REGISTER_CASE(
    reduce_case("norm/p2_all", OpKind::norm, [](const Tensor& x) { return norm(x); }, p_norm(2), {3, 5}, {}, false));
STRATA_REGISTER_CASE(with_bench(reduce_case(
                                    "norm/p2_dim1_keepdim", OpKind::norm,
                                    [](const Tensor& x) { return norm(x, 2, {1}, true); }, p_norm(2), {4, 6}, {1},
                                    true),
                                Dims{256, 4096}));
STRATA_REGISTER_CASE(reduce_case(
    "norm/p1_dim0", OpKind::norm, [](const Tensor& x) { return norm(x, 1, {0}); }, p_norm(1), {5, 3}, {0}, false, 0.1,
    1.0));
STRATA_REGISTER_CASE(reduce_case(
    "norm/p3_dim-1", OpKind::norm, [](const Tensor& x) { return norm(x, 3, {-1}); }, p_norm(3), {4, 5}, {-1}, false));
STRATA_REGISTER_CASE(reduce_case(
    "norm/p0.5", OpKind::norm, [](const Tensor& x) { return norm(x, 0.5, {1}); }, p_norm(0.5), {3, 4}, {1}, false, 0.2,
    1.0));
STRATA_REGISTER_CASE(reduce_case(
    "norm/inf_dim1", OpKind::norm,
    [](const Tensor& x) { return norm(x, std::numeric_limits<double>::infinity(), {1}); }, max_abs, {4, 5}, {1},
    false));
STRATA_REGISTER_CASE(with_bench(reduce_case(
                                    "logsumexp/dim1", OpKind::logsumexp,
                                    [](const Tensor& x) { return logsumexp(x, {1}); }, log_sum_exp, {4, 6}, {1}, false,
                                    -3, 3),
                                Dims{256, 4096}, -3, 3));
STRATA_REGISTER_CASE(reduce_case(
    "logsumexp/all_keepdim", OpKind::logsumexp, [](const Tensor& x) { return logsumexp(x, {0, 1}, true); }, log_sum_exp,
    {3, 5}, {}, true, -3, 3));

/// A norm over p = 0 counts non-zeros: zero gradient, checked by finite differences away from 0.
OpCase norm_p0_case() {
  OpCase c = reduce_case(
      "norm/p0", OpKind::norm, [](const Tensor& x) { return norm(x, 0, {1}); },
      [](const std::vector<double>& v) {
        return static_cast<double>(std::count_if(v.begin(), v.end(), [](double e) { return e != 0; }));
      },
      {3, 4}, {1}, false, 0.1, 1.0);
  c.inputs = [](Generator& g) {
    Tensor t = uniform64({3, 4}, g, 0.1, 1.0);
    t.data<double>()[1] = 0.0;
    return TensorList{t};
  };
  c.grad_inputs = {};
  return c;
}
STRATA_REGISTER_CASE(norm_p0_case());

/// cumsum along `dim` of a tensor of `sizes`.
OpCase cumsum_case(std::string name, Dims sizes, int64_t dim) {
  OpCase c;
  c.name = std::move(name);
  c.op = OpKind::cumsum;
  c.inputs = [sizes](Generator& g) { return TensorList{uniform64(sizes, g)}; };
  c.run = [dim](const TensorList& in) { return TensorList{cumsum(in[0], dim)}; };
  c.reference = [dim](const TensorList& in) {
    const Tensor& x = in[0];
    const int64_t d = dim < 0 ? dim + x.dim() : dim;
    int64_t inner = 1;
    for (int64_t k = d + 1; k < x.dim(); ++k) inner *= x.size(k);
    const int64_t n = x.size(d);
    auto v = values_of(x);
    for (std::size_t i = 0; i < v.size(); ++i) {
      const int64_t pos = (static_cast<int64_t>(i) / inner) % n;
      if (pos > 0) v[i] += v[i - static_cast<std::size_t>(inner)];  // row-major: the previous one is done
    }
    return TensorList{from_values(v, x.sizes())};
  };
  c.grad_inputs = {0};
  return c;
}
STRATA_REGISTER_CASE(cumsum_case("cumsum/dim0", {5, 3}, 0));
STRATA_REGISTER_CASE(with_bench(cumsum_case("cumsum/dim-1", {2, 3, 7}, -1), Dims{256, 4096}));
STRATA_REGISTER_CASE(cumsum_case("cumsum/middle", {2, 4, 3}, 1));

// ---- bad inputs ---------------------------------------------------------------------------------
Tensor ints() { return zeros({2, 3}, {DType::i64, nullptr}); }

STRATA_REGISTER_CASE(BadInputCase{
    "var/integer_input", OpKind::var, [] { var(ints()); }, {"var", "floating point", "Tensor[2, 3] i64"}});
STRATA_REGISTER_CASE(BadInputCase{"std/integer_input", OpKind::std, [] { std(ints()); }, {"std", "floating point"}});
STRATA_REGISTER_CASE(BadInputCase{"var/dim_out_of_range",
                                  OpKind::var,
                                  [] { var(ones({2, 3}), {2}); },
                                  {"var", "dim 2 is out of range", "Tensor[2, 3] f32"}});
STRATA_REGISTER_CASE(BadInputCase{
    "std/repeated_dim", OpKind::std, [] { std(ones({2, 3}), {1, -1}); }, {"std", "more than once"}});
STRATA_REGISTER_CASE(BadInputCase{
    "norm/integer_input", OpKind::norm, [] { norm(ints()); }, {"norm", "floating point", "Tensor[2, 3] i64"}});
STRATA_REGISTER_CASE(BadInputCase{"norm/nan_order",
                                  OpKind::norm,
                                  [] { norm(ones({2}), std::numeric_limits<double>::quiet_NaN()); },
                                  {"norm", "NaN"}});
STRATA_REGISTER_CASE(BadInputCase{"norm/inf_of_empty",
                                  OpKind::norm,
                                  [] { norm(ones({2, 0}), std::numeric_limits<double>::infinity(), {1}); },
                                  {"norm", "empty"}});
STRATA_REGISTER_CASE(BadInputCase{"logsumexp/dim_out_of_range",
                                  OpKind::logsumexp,
                                  [] { logsumexp(ones({2}), {-2}); },
                                  {"logsumexp", "dim -2 is out of range"}});
STRATA_REGISTER_CASE(BadInputCase{"cumsum/dim_out_of_range",
                                  OpKind::cumsum,
                                  [] { cumsum(ones({2, 3}), 2); },
                                  {"cumsum", "dim 2 is out of range", "Tensor[2, 3] f32"}});
STRATA_REGISTER_CASE(BadInputCase{
    "cumsum/undefined", OpKind::cumsum, [] { cumsum(Tensor(), 0); }, {"cumsum", "input is undefined"}});

}  // namespace
}  // namespace strata::testing
