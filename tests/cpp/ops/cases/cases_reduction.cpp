// Harness cases for ops/reduction.h.

#include "ops/reduction.h"

#include <cmath>
#include <functional>
#include <limits>

#include "tests/cpp/ops/harness/op_harness.h"

namespace strata::testing {
namespace {

enum class Kind { Sum, Mean, Max };

/// Naive reduction of `x` over `dims` (empty: all) with plain loops.
Tensor reduce_ref(const Tensor& x, std::vector<int64_t> dims, bool keepdim, Kind kind) {
  const auto v = values_of(x);
  const int64_t rank = x.dim();
  std::vector<bool> red(static_cast<std::size_t>(rank), dims.empty());
  for (int64_t d : dims) red[static_cast<std::size_t>(d < 0 ? d + rank : d)] = true;
  Dims keep, out_sizes;
  for (int64_t d = 0; d < rank; ++d) {
    keep.push_back(red[static_cast<std::size_t>(d)] ? 1 : x.size(d));
    if (!red[static_cast<std::size_t>(d)])
      out_sizes.push_back(x.size(d));
    else if (keepdim)
      out_sizes.push_back(1);
  }
  int64_t n_out = 1;
  for (int64_t s : keep) n_out *= s;
  std::vector<double> acc(static_cast<std::size_t>(n_out),
                          kind == Kind::Max ? -std::numeric_limits<double>::infinity() : 0.0);
  std::vector<int64_t> count(static_cast<std::size_t>(n_out), 0);
  for (std::size_t i = 0; i < v.size(); ++i) {
    int64_t rem = static_cast<int64_t>(i), o = 0, mul = 1;
    for (int64_t d = rank - 1; d >= 0; --d) {
      const int64_t idx = rem % x.size(d);
      rem /= x.size(d);
      if (!red[static_cast<std::size_t>(d)]) o += idx * mul;
      mul *= keep[static_cast<std::size_t>(d)];
    }
    auto& a = acc[static_cast<std::size_t>(o)];
    a = kind == Kind::Max ? std::max(a, v[i]) : a + v[i];
    ++count[static_cast<std::size_t>(o)];
  }
  if (kind == Kind::Mean)
    for (std::size_t o = 0; o < acc.size(); ++o) acc[o] /= static_cast<double>(count[o]);
  return from_values(acc, out_sizes);
}

/// -x element-wise (f64), for writing min references through max ones.
Tensor neg_values(const Tensor& x) {
  auto v = values_of(x);
  for (double& e : v) e = -e;
  return from_values(v, x.sizes());
}

OpCase reduction_case(std::string name, OpKind op, Kind kind, Dims sizes, std::vector<int64_t> dims, bool keepdim,
                      bool full_overload = false) {
  OpCase c;
  c.name = std::move(name);
  c.op = op;
  c.inputs = [sizes](Generator& g) { return TensorList{uniform64(sizes, g, -1.0, 1.0)}; };
  c.run = [=](const TensorList& in) {
    if (full_overload) {
      if (kind == Kind::Sum) return TensorList{sum(in[0])};
      if (kind == Kind::Mean) return TensorList{mean(in[0])};
      return TensorList{max(in[0])};
    }
    if (kind == Kind::Sum) return TensorList{sum(in[0], dims, keepdim)};
    if (kind == Kind::Mean) return TensorList{mean(in[0], dims, keepdim)};
    return TensorList{amax(in[0], dims, keepdim)};
  };
  c.reference = [=](const TensorList& in) { return TensorList{reduce_ref(in[0], dims, keepdim, kind)}; };
  c.grad_inputs = {0};
  return c;
}

// Note [Non-finite cases]: amax over dim 1 of rows with NaN (NaN), +inf, only -inf, ties of +inf,
// and finite rows; the gradient is PyTorch's (grad / count) * (x == max): a NaN row's count is 0, so
// its every element gets NaN (torch 2.13).
STRATA_REGISTER_CASE(OpCase{
    .name = "amax/nonfinite",
    .op = OpKind::amax,
    .inputs =
        [](Generator&) {
          return TensorList{from_values({0.5,   kNaN,  2.0,   -1.0,   //
                                         kInf,  1.0,   kInf,  -kInf,  //
                                         -kInf, -kInf, -kInf, -kInf,  //
                                         0.25,  -0.5,  0.75,  0.0,    //
                                         -kInf, kNaN,  kInf,  kNaN},
                                        {5, 4})};
        },
    .run = [](const TensorList& in) { return TensorList{amax(in[0], {1})}; },
    .reference =
        [](const TensorList& in) {
          const auto v = values_of(in[0]);
          std::vector<double> y(5, -kInf);
          for (std::size_t i = 0; i < v.size(); ++i)
            y[i / 4] = std::isnan(y[i / 4]) || std::isnan(v[i]) ? kNaN : std::max(y[i / 4], v[i]);
          return TensorList{from_values(y, {5})};
        },
    .grad_inputs = {0},
    .grad_reference =
        [](const TensorList& in, const TensorList& w) {
          const auto v = values_of(in[0]), wv = values_of(w[0]);
          std::vector<double> g(v.size());
          for (std::size_t r = 0; r < 5; ++r) {
            double m = -kInf;
            for (std::size_t j = 0; j < 4; ++j)
              m = std::isnan(m) || std::isnan(v[r * 4 + j]) ? kNaN : std::max(m, v[r * 4 + j]);
            double count = 0;
            for (std::size_t j = 0; j < 4; ++j) count += v[r * 4 + j] == m;
            for (std::size_t j = 0; j < 4; ++j) g[r * 4 + j] = (wv[r] / count) * (v[r * 4 + j] == m ? 1.0 : 0.0);
          }
          return TensorList{from_values(g, in[0].sizes())};
        },
});

// sum
STRATA_REGISTER_CASE(with_bench(reduction_case("sum/dim0", OpKind::sum, Kind::Sum, {5, 7}, {0}, false), {4096, 1024}));
STRATA_REGISTER_CASE(with_bench(reduction_case("sum/dim1", OpKind::sum, Kind::Sum, {5, 7}, {1}, false), {4096, 1024}));
STRATA_REGISTER_CASE(reduction_case("sum/middle_dim", OpKind::sum, Kind::Sum, {3, 4, 5}, {1}, false));
STRATA_REGISTER_CASE(reduction_case("sum/negative_dim", OpKind::sum, Kind::Sum, {3, 4, 5}, {-1}, false));
STRATA_REGISTER_CASE(reduction_case("sum/keepdim", OpKind::sum, Kind::Sum, {3, 4, 5}, {1}, true));
STRATA_REGISTER_CASE(reduction_case("sum/dims_0_2", OpKind::sum, Kind::Sum, {3, 4, 5}, {0, 2}, false));
STRATA_REGISTER_CASE(reduction_case("sum/dims_2_0_keepdim", OpKind::sum, Kind::Sum, {3, 4, 5}, {2, 0}, true));
STRATA_REGISTER_CASE(reduction_case("sum/adjacent_dims", OpKind::sum, Kind::Sum, {2, 3, 4, 5}, {1, 2}, false));
STRATA_REGISTER_CASE(with_bench(reduction_case("sum/all", OpKind::sum, Kind::Sum, {6, 7}, {}, false, true),
                                {4096, 1024}));
STRATA_REGISTER_CASE(reduction_case("sum/all_dims_listed", OpKind::sum, Kind::Sum, {2, 3, 4}, {0, 1, 2}, false));
STRATA_REGISTER_CASE(reduction_case("sum/0d", OpKind::sum, Kind::Sum, {}, {}, false, true));
STRATA_REGISTER_CASE(reduction_case("sum/long_row", OpKind::sum, Kind::Sum, {2, 150}, {1}, false));
// mean
STRATA_REGISTER_CASE(reduction_case("mean/dim0", OpKind::mean, Kind::Mean, {5, 7}, {0}, false));
STRATA_REGISTER_CASE(reduction_case("mean/negative_dim_keepdim", OpKind::mean, Kind::Mean, {3, 4, 5}, {-2}, true));
STRATA_REGISTER_CASE(reduction_case("mean/dims_0_2", OpKind::mean, Kind::Mean, {3, 4, 5}, {0, -1}, false));
STRATA_REGISTER_CASE(with_bench(reduction_case("mean/all", OpKind::mean, Kind::Mean, {6, 7}, {}, false, true),
                                {4096, 1024}));
// amax (random values: no ties)
STRATA_REGISTER_CASE(with_bench(reduction_case("amax/dim1", OpKind::amax, Kind::Max, {5, 7}, {1}, false),
                                {4096, 1024}));
STRATA_REGISTER_CASE(reduction_case("amax/dim0_keepdim", OpKind::amax, Kind::Max, {5, 7}, {0}, true));
STRATA_REGISTER_CASE(reduction_case("amax/dims_0_2", OpKind::amax, Kind::Max, {3, 4, 5}, {0, 2}, false));
STRATA_REGISTER_CASE(reduction_case("amax/negative_dim", OpKind::amax, Kind::Max, {3, 4, 5}, {-1}, false));
STRATA_REGISTER_CASE(reduction_case("amax/max_all", OpKind::amax, Kind::Max, {4, 6}, {}, false, true));
// Two-way ties: the gradient splits 1/2 each, which is also what central differences give at a
// two-way tie, so FD still applies (three-way ties are checked in test_elementwise.cpp).
STRATA_REGISTER_CASE(OpCase{
    .name = "amax/ties",
    .op = OpKind::amax,
    .inputs =
        [](Generator&) {
          return TensorList{
              from_values({0.5, 0.9, 0.9, -0.1, /**/ 0.3, -0.2, 0.3, 0.1, /**/ 1.0, 2.0, 0.0, -3.0}, {3, 4})};
        },
    .run = [](const TensorList& in) { return TensorList{amax(in[0], {1})}; },
    .reference = [](const TensorList& in) { return TensorList{reduce_ref(in[0], {1}, false, Kind::Max)}; },
    .grad_inputs = {0},
    .bench_inputs = {},
});

// amin: amax's mirror (random values: no ties); min() is the full reduction
STRATA_REGISTER_CASE(OpCase{
    .name = "amin/dim1",
    .op = OpKind::amin,
    .inputs = [](Generator& g) { return TensorList{uniform64({5, 7}, g)}; },
    .run = [](const TensorList& in) { return TensorList{amin(in[0], {1})}; },
    .reference =
        [](const TensorList& in) {
          return TensorList{neg_values(reduce_ref(neg_values(in[0]), {1}, false, Kind::Max))};
        },
    .grad_inputs = {0},
});
STRATA_REGISTER_CASE(OpCase{
    .name = "amin/min_all",
    .op = OpKind::amin,
    .inputs = [](Generator& g) { return TensorList{uniform64({3, 4}, g)}; },
    .run = [](const TensorList& in) { return TensorList{min(in[0])}; },
    .reference =
        [](const TensorList& in) {
          return TensorList{neg_values(reduce_ref(neg_values(in[0]), {}, false, Kind::Max))};
        },
    .grad_inputs = {0},
});

// prod: the gradient is the product of the other elements (checked by finite differences, also
// with a zero and with two zeros in a row, where it is exact through prefix and suffix products)
Tensor prod_ref(const Tensor& x, int64_t dim, bool keepdim) {
  const auto v = values_of(x);
  const int64_t r = x.size(dim), inner = x.stride(dim), outer = x.numel() / std::max<int64_t>(r * inner, 1);
  std::vector<double> out(static_cast<std::size_t>(outer * inner), 1.0);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < r; ++j)
      for (int64_t i = 0; i < inner; ++i)
        out[static_cast<std::size_t>(o * inner + i)] *= v[static_cast<std::size_t>((o * r + j) * inner + i)];
  Dims sizes = x.sizes();
  if (keepdim)
    sizes[static_cast<std::size_t>(dim)] = 1;
  else
    sizes.erase(static_cast<std::size_t>(dim));
  return from_values(out, sizes);
}
OpCase prod_case(std::string name, std::vector<double> zeros_at, Dims sizes, int64_t dim, bool keepdim, bool all) {
  OpCase c;
  c.name = std::move(name);
  c.op = OpKind::prod;
  c.inputs = [=](Generator& g) {
    Tensor t = uniform64(sizes, g, 0.5, 1.5);
    for (double i : zeros_at) t.data<double>()[static_cast<int64_t>(i)] = 0.0;
    return TensorList{t};
  };
  c.run = [=](const TensorList& in) { return TensorList{all ? prod(in[0]) : prod(in[0], dim, keepdim)}; };
  c.reference = [=](const TensorList& in) {
    return TensorList{all ? prod_ref(in[0].reshape({in[0].numel()}), 0, false) : prod_ref(in[0], dim, keepdim)};
  };
  c.grad_inputs = {0};
  return c;
}
STRATA_REGISTER_CASE(prod_case("prod/dim1", {}, {4, 5}, 1, false, false));
STRATA_REGISTER_CASE(prod_case("prod/dim0_keepdim", {}, {4, 3, 2}, 0, true, false));
STRATA_REGISTER_CASE(prod_case("prod/middle_dim_one_zero", {6}, {2, 4, 3}, 1, false, false));
STRATA_REGISTER_CASE(prod_case("prod/all_two_zeros", {1, 4}, {2, 3}, 0, false, true));
STRATA_REGISTER_CASE(prod_case("prod/all", {}, {3, 4}, 0, false, true));

/// any/all over dims of an f64 input with zeros (non-zero is true); the result is bool.
OpCase any_all_case(std::string name, OpKind op, std::vector<int64_t> dims, bool keepdim) {
  OpCase c;
  c.name = std::move(name);
  c.op = op;
  c.inputs = [](Generator& g) {
    Tensor t = uniform64({3, 4, 5}, g);
    double* p = t.data<double>();
    for (int64_t i = 0; i < t.numel(); ++i)
      if (p[i] < 0.3) p[i] = 0.0;  // about 65 % zeros: some slices all zero, some none
    return TensorList{t};
  };
  const bool is_any = op == OpKind::any;
  c.run = [=](const TensorList& in) {
    return TensorList{is_any ? any(in[0], dims, keepdim) : all(in[0], dims, keepdim)};
  };
  c.reference = [=](const TensorList& in) {
    Tensor nz = from_values(values_of(in[0]), in[0].sizes());
    double* p = nz.data<double>();
    for (int64_t i = 0; i < nz.numel(); ++i) p[i] = p[i] != 0.0 ? 1.0 : 0.0;
    // any = max of the 0/1 values, all = min = -max(-v).
    return TensorList{is_any ? reduce_ref(nz, dims, keepdim, Kind::Max)
                             : neg_values(reduce_ref(neg_values(nz), dims, keepdim, Kind::Max))};
  };
  return c;
}
STRATA_REGISTER_CASE(any_all_case("any/dim2", OpKind::any, {2}, false));
STRATA_REGISTER_CASE(any_all_case("any/all_dims", OpKind::any, {}, false));
STRATA_REGISTER_CASE(any_all_case("all/dim0_keepdim", OpKind::all, {0}, true));
STRATA_REGISTER_CASE(any_all_case("all/dims_1_2", OpKind::all, {1, 2}, false));
STRATA_REGISTER_CASE(any_all_case("all/all_dims", OpKind::all, {}, false));

// ---- bad inputs ---------------------------------------------------------------------------------
Tensor ints() { return zeros({2, 3}, {DType::i64, nullptr}); }

STRATA_REGISTER_CASE(BadInputCase{"sum/dim_out_of_range",
                                  OpKind::sum,
                                  [] { sum(ones({2, 3}), {2}); },
                                  {"dim 2", "out of range", "Tensor[2, 3] f32"}});
STRATA_REGISTER_CASE(BadInputCase{
    "sum/negative_dim_out_of_range", OpKind::sum, [] { sum(ones({2, 3}), {-3}); }, {"dim -3", "Tensor[2, 3] f32"}});
STRATA_REGISTER_CASE(BadInputCase{
    "sum/duplicate_dims", OpKind::sum, [] { sum(ones({2, 3}), {1, -1}); }, {"more than once", "Tensor[2, 3] f32"}});
STRATA_REGISTER_CASE(BadInputCase{"sum/undefined", OpKind::sum, [] { sum(Tensor()); }, {"input is undefined"}});
STRATA_REGISTER_CASE(BadInputCase{
    "mean/dim_out_of_range", OpKind::mean, [] { mean(ones({4}), {1}); }, {"dim 1", "Tensor[4] f32"}});
STRATA_REGISTER_CASE(BadInputCase{"mean/integer_input",
                                  OpKind::mean,
                                  [] { mean(ints(), {0}); },
                                  {"could not infer output dtype", "Tensor[2, 3] i64"}});
STRATA_REGISTER_CASE(BadInputCase{"amax/duplicate_dims",
                                  OpKind::amax,
                                  [] { amax(ones({2, 3, 4}), {0, 2, -3}); },
                                  {"more than once", "Tensor[2, 3, 4] f32"}});
STRATA_REGISTER_CASE(BadInputCase{
    "amax/empty_dim", OpKind::amax, [] { amax(ones({0, 3}), {0}); }, {"size 0", "Tensor[0, 3] f32"}});
STRATA_REGISTER_CASE(BadInputCase{
    "amax/dim_out_of_range", OpKind::amax, [] { amax(ints(), {2}); }, {"dim 2", "Tensor[2, 3] i64"}});
STRATA_REGISTER_CASE(BadInputCase{
    "amin/empty_dim", OpKind::amin, [] { amin(ones({0, 3}), {0}); }, {"size 0", "a minimum of nothing"}});
STRATA_REGISTER_CASE(BadInputCase{
    "prod/dim_out_of_range", OpKind::prod, [] { prod(ones({2, 3}), 2); }, {"out of range"}});
STRATA_REGISTER_CASE(BadInputCase{"prod/undefined", OpKind::prod, [] { prod(Tensor()); }, {"input is undefined"}});
STRATA_REGISTER_CASE(BadInputCase{
    "any/dim_out_of_range", OpKind::any, [] { any(ints(), {3}); }, {"dim 3", "Tensor[2, 3] i64"}});
STRATA_REGISTER_CASE(BadInputCase{"all/duplicate_dims", OpKind::all, [] { all(ints(), {0, -2}); }, {"more than once"}});

}  // namespace
}  // namespace strata::testing
