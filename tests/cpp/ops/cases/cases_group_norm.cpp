// Harness cases for group_norm and normalize (ops/normalization.h; issue 26 part 7).

#include <algorithm>
#include <cmath>
#include <string>

#include "ops/normalization.h"
#include "tests/cpp/ops/harness/op_harness.h"

namespace strata::testing {
namespace {

/// Naive f64 group norm: per (n, group) mean and biased variance over its C/G·S elements.
Tensor group_norm_reference(const TensorList& in, int64_t G, double eps) {
  const Tensor& x = in[0];
  const int64_t N = x.size(0), C = x.size(1), S = x.numel() / (N * C), per = C / G * S;
  const auto xv = values_of(x);
  const auto w = in.size() > 1 ? values_of(in[1]) : std::vector<double>(C, 1.0);
  const auto b = in.size() > 2 ? values_of(in[2]) : std::vector<double>(C, 0.0);
  std::vector<double> y(xv.size());
  for (int64_t n = 0; n < N; ++n)
    for (int64_t g = 0; g < G; ++g) {
      const int64_t base = (n * G + g) * per;
      double mean = 0, var = 0;
      for (int64_t i = 0; i < per; ++i) mean += xv[base + i];
      mean /= per;
      for (int64_t i = 0; i < per; ++i) var += (xv[base + i] - mean) * (xv[base + i] - mean);
      var /= per;
      for (int64_t i = 0; i < per; ++i) {
        const int64_t c = g * (C / G) + i / S;
        y[base + i] = (xv[base + i] - mean) / std::sqrt(var + eps) * w[c] + b[c];
      }
    }
  return from_values(y, x.sizes());
}

OpCase group_norm_case(std::string name, Dims shape, int64_t G, bool affine, double eps = 1e-5) {
  const int64_t C = shape[1];
  return OpCase{
      .name = "group_norm/" + std::move(name),
      .op = OpKind::group_norm,
      .inputs =
          [shape, C, affine](Generator& g) {
            TensorList in{randn64(shape, g)};
            if (affine) in.push_back(uniform64({C}, g, 0.5, 1.5)), in.push_back(uniform64({C}, g));
            return in;
          },
      .run =
          [G, eps](const TensorList& in) {
            return TensorList{
                group_norm(in[0], G, in.size() > 1 ? in[1] : Tensor(), in.size() > 2 ? in[2] : Tensor(), eps)};
          },
      .reference = [G, eps](const TensorList& in) { return TensorList{group_norm_reference(in, G, eps)}; },
      .grad_inputs = affine ? std::vector<int>{0, 1, 2} : std::vector<int>{0},
  };
}

const bool group_norm_registered = [] {
  op_cases().push_back(group_norm_case("3d", {2, 6, 5}, 3, true));
  op_cases().push_back(group_norm_case("4d", {2, 4, 3, 3}, 2, true));
  op_cases().push_back(group_norm_case("2d_one_group", {3, 4}, 1, true));
  op_cases().push_back(group_norm_case("no_affine_instance", {2, 3, 4}, 3, false, 1e-3));
  return true;
}();

STRATA_REGISTER_CASE(BadInputCase{
    .name = "group_norm/groups_do_not_divide",
    .op = OpKind::group_norm,
    .call = [] { group_norm(zeros({2, 6, 4}), 4); },
    .expect = {"group_norm", "to be divisible by num_groups=4", "[2, 6, 4]"},
});
STRATA_REGISTER_CASE(BadInputCase{
    .name = "group_norm/rank",
    .op = OpKind::group_norm,
    .call = [] { group_norm(zeros({6}), 2); },
    .expect = {"group_norm", "expected at least 2 dims"},
});
STRATA_REGISTER_CASE(BadInputCase{
    .name = "group_norm/weight_size",
    .op = OpKind::group_norm,
    .call = [] { group_norm(zeros({2, 6, 4}), 2, ones({5})); },
    .expect = {"group_norm", "weight to be a vector of size equal to the number of channels (6)"},
});

// ---- normalize ---------------------------------------------------------------------------------

/// Naive f64 normalize of a contiguous x along dim.
Tensor normalize_reference(const Tensor& x, double p, int64_t dim, double eps) {
  const auto xv = values_of(x);
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= x.size(d);
  for (int64_t d = dim + 1; d < x.dim(); ++d) inner *= x.size(d);
  const int64_t n = x.size(dim);
  std::vector<double> y(xv.size());
  for (int64_t a = 0; a < outer; ++a)
    for (int64_t b = 0; b < inner; ++b) {
      double s = 0;
      for (int64_t i = 0; i < n; ++i) s += std::pow(std::abs(xv[(a * n + i) * inner + b]), p);
      const double norm = std::max(std::pow(s, 1.0 / p), eps);
      for (int64_t i = 0; i < n; ++i) y[(a * n + i) * inner + b] = xv[(a * n + i) * inner + b] / norm;
    }
  return from_values(y, x.sizes());
}

OpCase normalize_case(std::string name, Dims shape, double p, int64_t dim, double eps = 1e-12) {
  return OpCase{
      .name = "normalize/" + std::move(name),
      .op = OpKind::normalize,
      .inputs = [shape](Generator& g) { return TensorList{uniform64(shape, g, 0.2, 1.0)}; },
      .run = [p, dim, eps](const TensorList& in) { return TensorList{normalize(in[0], p, dim, eps)}; },
      .reference =
          [p, dim, eps](const TensorList& in) {
            return TensorList{normalize_reference(in[0], p, dim < 0 ? dim + in[0].dim() : dim, eps)};
          },
      .grad_inputs = {0},
  };
}

const bool normalize_registered = [] {
  op_cases().push_back(normalize_case("p2_dim1", {3, 4, 2}, 2.0, 1));
  op_cases().push_back(normalize_case("p1_last_dim", {4, 5}, 1.0, -1));
  op_cases().push_back(normalize_case("p3_dim0", {3, 2}, 3.0, 0));
  // Rows whose norm is below eps are divided by eps: the clamp's gradient is zero there.
  op_cases().push_back(normalize_case("eps_clamps", {2, 3}, 2.0, 1, 10.0));
  return true;
}();

STRATA_REGISTER_CASE(BadInputCase{
    .name = "normalize/dim_out_of_range",
    .op = OpKind::normalize,
    .call = [] { normalize(zeros({2, 3}), 2.0, 5); },
    .expect = {"normalize: dim 5 is out of range", "[-2, 1]"},
});

}  // namespace
}  // namespace strata::testing
