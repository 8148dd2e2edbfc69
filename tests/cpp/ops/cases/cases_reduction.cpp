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
    if (!red[static_cast<std::size_t>(d)]) out_sizes.push_back(x.size(d));
    else if (keepdim) out_sizes.push_back(1);
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
    .inputs = [](Generator&) {
      return TensorList{from_values({0.5, kNaN, 2.0, -1.0,       //
                                     kInf, 1.0, kInf, -kInf,     //
                                     -kInf, -kInf, -kInf, -kInf, //
                                     0.25, -0.5, 0.75, 0.0,      //
                                     -kInf, kNaN, kInf, kNaN},
                                    {5, 4})};
    },
    .run = [](const TensorList& in) { return TensorList{amax(in[0], {1})}; },
    .reference = [](const TensorList& in) {
      const auto v = values_of(in[0]);
      std::vector<double> y(5, -kInf);
      for (std::size_t i = 0; i < v.size(); ++i) y[i / 4] = std::isnan(y[i / 4]) || std::isnan(v[i]) ? kNaN : std::max(y[i / 4], v[i]);
      return TensorList{from_values(y, {5})};
    },
    .grad_inputs = {0},
    .grad_reference = [](const TensorList& in, const TensorList& w) {
      const auto v = values_of(in[0]), wv = values_of(w[0]);
      std::vector<double> g(v.size());
      for (std::size_t r = 0; r < 5; ++r) {
        double m = -kInf;
        for (std::size_t j = 0; j < 4; ++j) m = std::isnan(m) || std::isnan(v[r * 4 + j]) ? kNaN : std::max(m, v[r * 4 + j]);
        double count = 0;
        for (std::size_t j = 0; j < 4; ++j) count += v[r * 4 + j] == m;
        for (std::size_t j = 0; j < 4; ++j) g[r * 4 + j] = (wv[r] / count) * (v[r * 4 + j] == m ? 1.0 : 0.0);
      }
      return TensorList{from_values(g, in[0].sizes())};
    },
});

OpCase with_bench(OpCase c, Dims sizes) {
  c.bench_inputs = [sizes](Generator& g) { return TensorList{randn32(sizes, g)}; };
  return c;
}

// sum
STRATA_REGISTER_CASE(with_bench(reduction_case("sum/dim0", OpKind::sum, Kind::Sum, {5, 7}, {0}, false), {4096, 1024}));
STRATA_REGISTER_CASE(with_bench(reduction_case("sum/dim1", OpKind::sum, Kind::Sum, {5, 7}, {1}, false), {4096, 1024}));
STRATA_REGISTER_CASE(reduction_case("sum/middle_dim", OpKind::sum, Kind::Sum, {3, 4, 5}, {1}, false));
STRATA_REGISTER_CASE(reduction_case("sum/negative_dim", OpKind::sum, Kind::Sum, {3, 4, 5}, {-1}, false));
STRATA_REGISTER_CASE(reduction_case("sum/keepdim", OpKind::sum, Kind::Sum, {3, 4, 5}, {1}, true));
STRATA_REGISTER_CASE(reduction_case("sum/dims_0_2", OpKind::sum, Kind::Sum, {3, 4, 5}, {0, 2}, false));
STRATA_REGISTER_CASE(reduction_case("sum/dims_2_0_keepdim", OpKind::sum, Kind::Sum, {3, 4, 5}, {2, 0}, true));
STRATA_REGISTER_CASE(reduction_case("sum/adjacent_dims", OpKind::sum, Kind::Sum, {2, 3, 4, 5}, {1, 2}, false));
STRATA_REGISTER_CASE(with_bench(reduction_case("sum/all", OpKind::sum, Kind::Sum, {6, 7}, {}, false, true), {4096, 1024}));
STRATA_REGISTER_CASE(reduction_case("sum/all_dims_listed", OpKind::sum, Kind::Sum, {2, 3, 4}, {0, 1, 2}, false));
STRATA_REGISTER_CASE(reduction_case("sum/0d", OpKind::sum, Kind::Sum, {}, {}, false, true));
STRATA_REGISTER_CASE(reduction_case("sum/long_row", OpKind::sum, Kind::Sum, {2, 150}, {1}, false));
// mean
STRATA_REGISTER_CASE(reduction_case("mean/dim0", OpKind::mean, Kind::Mean, {5, 7}, {0}, false));
STRATA_REGISTER_CASE(reduction_case("mean/negative_dim_keepdim", OpKind::mean, Kind::Mean, {3, 4, 5}, {-2}, true));
STRATA_REGISTER_CASE(reduction_case("mean/dims_0_2", OpKind::mean, Kind::Mean, {3, 4, 5}, {0, -1}, false));
STRATA_REGISTER_CASE(with_bench(reduction_case("mean/all", OpKind::mean, Kind::Mean, {6, 7}, {}, false, true), {4096, 1024}));
// amax (random values: no ties)
STRATA_REGISTER_CASE(with_bench(reduction_case("amax/dim1", OpKind::amax, Kind::Max, {5, 7}, {1}, false), {4096, 1024}));
STRATA_REGISTER_CASE(reduction_case("amax/dim0_keepdim", OpKind::amax, Kind::Max, {5, 7}, {0}, true));
STRATA_REGISTER_CASE(reduction_case("amax/dims_0_2", OpKind::amax, Kind::Max, {3, 4, 5}, {0, 2}, false));
STRATA_REGISTER_CASE(reduction_case("amax/negative_dim", OpKind::amax, Kind::Max, {3, 4, 5}, {-1}, false));
STRATA_REGISTER_CASE(reduction_case("amax/max_all", OpKind::amax, Kind::Max, {4, 6}, {}, false, true));
// Two-way ties: the gradient splits 1/2 each, which is also what central differences give at a
// two-way tie, so FD still applies (three-way ties are checked in test_elementwise.cpp).
STRATA_REGISTER_CASE(OpCase{
    .name = "amax/ties",
    .op = OpKind::amax,
    .inputs = [](Generator&) {
      return TensorList{from_values({0.5, 0.9, 0.9, -0.1, /**/ 0.3, -0.2, 0.3, 0.1, /**/ 1.0, 2.0, 0.0, -3.0}, {3, 4})};
    },
    .run = [](const TensorList& in) { return TensorList{amax(in[0], {1})}; },
    .reference = [](const TensorList& in) { return TensorList{reduce_ref(in[0], {1}, false, Kind::Max)}; },
    .grad_inputs = {0},
    .bench_inputs = {},
});

// ---- bad inputs ---------------------------------------------------------------------------------
Tensor ints() { return zeros({2, 3}, {DType::i64, nullptr}); }

STRATA_REGISTER_CASE(BadInputCase{"sum/dim_out_of_range", OpKind::sum, [] { sum(ones({2, 3}), {2}); },
                                  {"dim 2", "out of range", "Tensor[2, 3] f32"}});
STRATA_REGISTER_CASE(BadInputCase{"sum/negative_dim_out_of_range", OpKind::sum, [] { sum(ones({2, 3}), {-3}); },
                                  {"dim -3", "Tensor[2, 3] f32"}});
STRATA_REGISTER_CASE(BadInputCase{"sum/duplicate_dims", OpKind::sum, [] { sum(ones({2, 3}), {1, -1}); },
                                  {"more than once", "Tensor[2, 3] f32"}});
STRATA_REGISTER_CASE(BadInputCase{"sum/integer_input", OpKind::sum, [] { sum(ints()); }, {"Tensor[2, 3] i64", "f32 or f64"}});
STRATA_REGISTER_CASE(BadInputCase{"mean/dim_out_of_range", OpKind::mean, [] { mean(ones({4}), {1}); },
                                  {"dim 1", "Tensor[4] f32"}});
STRATA_REGISTER_CASE(BadInputCase{"mean/integer_input", OpKind::mean, [] { mean(ints(), {0}); }, {"Tensor[2, 3] i64"}});
STRATA_REGISTER_CASE(BadInputCase{"amax/duplicate_dims", OpKind::amax, [] { amax(ones({2, 3, 4}), {0, 2, -3}); },
                                  {"more than once", "Tensor[2, 3, 4] f32"}});
STRATA_REGISTER_CASE(BadInputCase{"amax/empty_dim", OpKind::amax, [] { amax(ones({0, 3}), {0}); },
                                  {"size 0", "Tensor[0, 3] f32"}});
STRATA_REGISTER_CASE(BadInputCase{"amax/integer_input", OpKind::amax, [] { amax(ints(), {0}); }, {"Tensor[2, 3] i64"}});

}  // namespace
}  // namespace strata::testing
