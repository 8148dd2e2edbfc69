// Harness cases for ops/index_reduction.h: argmax, argmin, max(dim), min(dim), topk and sort. The
// inputs are random (no ties), so the indices are unique and the values' gradients (scattered to
// the selected elements) are piecewise linear: finite differences check them.

#include "ops/index_reduction.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>

#include "tests/cpp/ops/harness/op_harness.h"

namespace strata::testing {
namespace {

/// For each row along `dim` of a contiguous f64 tensor: the indices of its elements ordered by
/// `first` (stable). Returns values and indices with k entries along dim.
TensorList order_ref(const Tensor& x, int64_t dim, int64_t k, const std::function<bool(double, double)>& first) {
  const auto v = values_of(x);
  const int64_t r = x.dim() == 0 ? 1 : x.size(dim), inner = x.dim() == 0 ? 1 : x.stride(dim);
  const int64_t outer = x.numel() / std::max<int64_t>(r * inner, 1);
  std::vector<double> vals(static_cast<std::size_t>(outer * k * inner));
  std::vector<int64_t> idx(vals.size());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      std::vector<int64_t> order(static_cast<std::size_t>(r));
      std::iota(order.begin(), order.end(), int64_t{0});
      auto at = [&](int64_t j) { return v[static_cast<std::size_t>((o * r + j) * inner + i)]; };
      std::stable_sort(order.begin(), order.end(), [&](int64_t p, int64_t q) { return first(at(p), at(q)); });
      for (int64_t j = 0; j < k; ++j) {
        const auto out = static_cast<std::size_t>((o * k + j) * inner + i);
        vals[out] = at(order[static_cast<std::size_t>(j)]);
        idx[out] = order[static_cast<std::size_t>(j)];
      }
    }
  Dims sizes = x.sizes();
  if (x.dim() > 0) sizes[static_cast<std::size_t>(dim)] = k;
  return {from_values(vals, sizes), from_indices(idx, sizes)};
}

TensorList squeezed(TensorList t, int64_t dim) {
  for (Tensor& x : t) x = x.squeeze(dim);
  return t;
}

auto greater = [](double a, double b) { return a > b; };
auto less = [](double a, double b) { return a < b; };

OpCase index_case(std::string name, OpKind op, Dims sizes, std::function<TensorList(const Tensor&)> fn,
                  std::function<TensorList(const Tensor&)> ref, bool grad) {
  OpCase c;
  c.name = std::move(name);
  c.op = op;
  c.inputs = [sizes](Generator& g) { return TensorList{uniform64(sizes, g)}; };
  c.run = [fn](const TensorList& in) { return fn(in[0]); };
  c.reference = [ref](const TensorList& in) { return ref(in[0]); };
  if (grad) c.grad_inputs = {0};
  return c;
}

// max / min over a dim (values and indices), with and without keepdim
STRATA_REGISTER_CASE(with_bench(index_case(
                                    "max/dim1", OpKind::max, {4, 6},
                                    [](const Tensor& x) {
                                      auto r = max(x, 1);
                                      return TensorList{r.values, r.indices};
                                    },
                                    [](const Tensor& x) { return squeezed(order_ref(x, 1, 1, greater), 1); }, true),
                                Dims{256, 4096}));
STRATA_REGISTER_CASE(index_case(
    "max/dim0_keepdim", OpKind::max, {5, 3, 2},
    [](const Tensor& x) {
      auto r = max(x, 0, true);
      return TensorList{r.values, r.indices};
    },
    [](const Tensor& x) { return order_ref(x, 0, 1, greater); }, true));
STRATA_REGISTER_CASE(index_case(
    "min/negative_dim", OpKind::min, {3, 4, 5},
    [](const Tensor& x) {
      auto r = min(x, -2);
      return TensorList{r.values, r.indices};
    },
    [](const Tensor& x) { return squeezed(order_ref(x, 1, 1, less), 1); }, true));
// argmax / argmin (indices only)
STRATA_REGISTER_CASE(
    with_bench(index_case(
                   "argmax/dim1", OpKind::argmax, {4, 7}, [](const Tensor& x) { return TensorList{argmax(x, 1)}; },
                   [](const Tensor& x) { return TensorList{squeezed(order_ref(x, 1, 1, greater), 1)[1]}; }, false),
               Dims{256, 4096}));
STRATA_REGISTER_CASE(index_case(
    "argmax/flattened", OpKind::argmax, {3, 5}, [](const Tensor& x) { return TensorList{argmax(x)}; },
    [](const Tensor& x) { return TensorList{order_ref(x.reshape({x.numel()}), 0, 1, greater)[1].reshape({})}; },
    false));
STRATA_REGISTER_CASE(with_bench(index_case(
                                    "argmin/dim0_keepdim", OpKind::argmin, {6, 3},
                                    [](const Tensor& x) { return TensorList{argmin(x, 0, true)}; },
                                    [](const Tensor& x) { return TensorList{order_ref(x, 0, 1, less)[1]}; }, false),
                                Dims{256, 4096}));
// topk and sort
STRATA_REGISTER_CASE(with_bench(index_case(
                                    "topk/largest_last_dim", OpKind::topk, {3, 8},
                                    [](const Tensor& x) {
                                      auto r = topk(x, 3);
                                      return TensorList{r.values, r.indices};
                                    },
                                    [](const Tensor& x) { return order_ref(x, 1, 3, greater); }, true),
                                Dims{256, 4096}));
STRATA_REGISTER_CASE(index_case(
    "topk/smallest_dim0", OpKind::topk, {6, 2, 3},
    [](const Tensor& x) {
      auto r = topk(x, 2, 0, false);
      return TensorList{r.values, r.indices};
    },
    [](const Tensor& x) { return order_ref(x, 0, 2, less); }, true));
STRATA_REGISTER_CASE(with_bench(index_case(
                                    "sort/ascending", OpKind::sort, {4, 6},
                                    [](const Tensor& x) {
                                      auto r = sort(x);
                                      return TensorList{r.values, r.indices};
                                    },
                                    [](const Tensor& x) { return order_ref(x, 1, 6, less); }, true),
                                Dims{256, 4096}));
STRATA_REGISTER_CASE(index_case(
    "sort/descending_dim0", OpKind::sort, {5, 3},
    [](const Tensor& x) {
      auto r = sort(x, 0, true);
      return TensorList{r.values, r.indices};
    },
    [](const Tensor& x) { return order_ref(x, 0, 5, greater); }, true));

// Note [Non-finite cases]: NaN is above every number (PyTorch's order): max and argmax pick the
// first NaN, and so do min and argmin; sort puts NaN last ascending; -inf and +inf order as
// numbers. The gradient goes to the selected element.
bool nan_last(double a, double b) { return std::isnan(b) ? !std::isnan(a) : a < b; }
TensorList nan_first_of_row(const Tensor& x) {
  // max/min along dim 1: the first NaN if any, else the extremum.
  TensorList mx = squeezed(order_ref(x, 1, 1, [](double a, double b) { return nan_last(b, a); }), 1);
  return mx;
}
STRATA_REGISTER_CASE(OpCase{
    .name = "max/nonfinite",
    .op = OpKind::max,
    .inputs = [](Generator& g) { return TensorList{with_nonfinite({4, 9}, g)}; },
    .run =
        [](const TensorList& in) {
          auto r = max(in[0], 1);
          return TensorList{r.values, r.indices};
        },
    .reference = [](const TensorList& in) { return nan_first_of_row(in[0]); },
    .grad_inputs = {0},
    .grad_reference =
        [](const TensorList& in, const TensorList& w) {
          const auto idx = indices_of(nan_first_of_row(in[0])[1]);
          const auto wv = values_of(w[0]);
          std::vector<double> g(static_cast<std::size_t>(in[0].numel()), 0.0);
          for (std::size_t r = 0; r < idx.size(); ++r) g[r * 9 + static_cast<std::size_t>(idx[r])] = wv[r];
          return TensorList{from_values(g, in[0].sizes())};
        },
});
STRATA_REGISTER_CASE(OpCase{
    .name = "sort/nonfinite",
    .op = OpKind::sort,
    .inputs = [](Generator& g) { return TensorList{with_nonfinite({3, 11}, g)}; },
    .run =
        [](const TensorList& in) {
          auto r = sort(in[0]);
          return TensorList{r.values, r.indices};
        },
    .reference = [](const TensorList& in) { return order_ref(in[0], 1, 11, nan_last); },
});

// ---- bad inputs ---------------------------------------------------------------------------------
Tensor f32(IntArrayRef s) { return ones(s); }

STRATA_REGISTER_CASE(BadInputCase{"argmax/bool_input",
                                  OpKind::argmax,
                                  [] { argmax(zeros({3}, {DType::boolean, nullptr})); },
                                  {"bool", "Tensor[3] bool"}});
STRATA_REGISTER_CASE(BadInputCase{
    "argmax/empty_without_dim", OpKind::argmax, [] { argmax(f32({0, 3})); }, {"size 0", "dim"}});
STRATA_REGISTER_CASE(BadInputCase{
    "argmin/dim_out_of_range", OpKind::argmin, [] { argmin(f32({2, 3}), 2); }, {"argmin", "out of range"}});
STRATA_REGISTER_CASE(BadInputCase{
    "max/empty_dim", OpKind::max, [] { max(f32({2, 0}), 1); }, {"size 0", "Tensor[2, 0] f32"}});
STRATA_REGISTER_CASE(BadInputCase{"min/dim_out_of_range", OpKind::min, [] { min(f32({2}), -2); }, {"out of range"}});
STRATA_REGISTER_CASE(BadInputCase{
    "topk/k_too_large", OpKind::topk, [] { topk(f32({2, 3}), 4); }, {"k out of range", "Tensor[2, 3] f32"}});
STRATA_REGISTER_CASE(BadInputCase{"topk/negative_k", OpKind::topk, [] { topk(f32({2, 3}), -1); }, {"k out of range"}});
STRATA_REGISTER_CASE(BadInputCase{
    "topk/bool_input", OpKind::topk, [] { topk(zeros({3}, {DType::boolean, nullptr}), 1); }, {"bool"}});
STRATA_REGISTER_CASE(BadInputCase{
    "sort/dim_out_of_range", OpKind::sort, [] { sort(f32({2, 3}), 2); }, {"out of range"}});

}  // namespace
}  // namespace strata::testing
