// Harness cases for ops/unary.h.

#include "ops/unary.h"
#include <cmath>

#include "tests/cpp/ops/harness/op_harness.h"

namespace strata::testing {
namespace {

/// Values in [-1, 1) kept at least `gap` away from `kink` (where the op is not differentiable).
Tensor away_from(IntArrayRef sizes, Generator& gen, double kink, double gap = 0.05) {
  Tensor t = uniform64(sizes, gen, -1.0, 1.0);
  double* p = t.data<double>();
  for (int64_t i = 0; i < t.numel(); ++i)
    if (std::abs(p[i] - kink) < gap) p[i] = kink + (p[i] < kink ? -gap : gap);
  return t;
}

STRATA_REGISTER_CASE(OpCase{
    .name = "relu/basic",
    .op = OpKind::relu,
    .inputs = [](Generator& g) { return TensorList{away_from({3, 5}, g, 0.0)}; },
    .run = [](const TensorList& in) { return TensorList{relu(in[0])}; },
    .reference =
        [](const TensorList& in) {
          auto v = values_of(in[0]);
          for (double& x : v) x = x > 0 ? x : 0;
          return TensorList{from_values(v, in[0].sizes())};
        },
    .grad_inputs = {0},
    .bench_inputs = [](Generator& g) { return TensorList{randn32({256, 4096}, g)}; },
});

STRATA_REGISTER_CASE(OpCase{
    .name = "relu/scalar",
    .op = OpKind::relu,
    .inputs = [](Generator&) { return TensorList{from_values({-0.5}, {}).reshape({})}; },
    .run = [](const TensorList& in) { return TensorList{relu(in[0])}; },
    .reference = [](const TensorList& in) { return TensorList{zeros(in[0].sizes(), {DType::f64, nullptr})}; },
    .grad_inputs = {0},
});

STRATA_REGISTER_CASE(BadInputCase{
    .name = "relu/integer_input",
    .op = OpKind::relu,
    .call = [] { relu(zeros({2, 3}, {DType::i64, nullptr})); },
    .expect = {"Tensor[2, 3] i64", "f32 or f64"},
});

}  // namespace
}  // namespace strata::testing
