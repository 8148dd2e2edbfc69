// Harness cases for ops/normalization.h.

#include "ops/normalization.h"

#include <cmath>
#include <string>

#include "tests/cpp/ops/harness/op_harness.h"

namespace strata::testing {
namespace {

// ---- batch_norm ---------------------------------------------------------------------------------

/// Inputs: x, running_mean, running_var, weight, bias (the last two may be undefined).
struct BnSpec {
  std::string name;
  Dims shape;
  bool training = true;
  bool affine = true;
  bool running = true;
  Dims bench;  // empty: not benchmarked
};

/// Reference batch norm: y, and the running stats after the update (training) / unchanged (eval).
TensorList bn_reference(const TensorList& in, bool training, double momentum, double eps) {
  const Tensor& x = in[0];
  const int64_t N = x.size(0), C = x.size(1);
  int64_t S = 1;
  for (int64_t d = 2; d < x.dim(); ++d) S *= x.size(d);
  const auto xv = values_of(x);
  std::vector<double> rm(C, 0.0), rv(C, 1.0), w(C, 1.0), b(C, 0.0);
  if (in[1].defined()) rm = values_of(in[1]);
  if (in[2].defined()) rv = values_of(in[2]);
  if (in[3].defined()) w = values_of(in[3]);
  if (in[4].defined()) b = values_of(in[4]);
  std::vector<double> y(xv.size());
  for (int64_t c = 0; c < C; ++c) {
    double mean = rm[c], var = rv[c];
    if (training) {
      double s = 0;
      for (int64_t n = 0; n < N; ++n)
        for (int64_t i = 0; i < S; ++i) s += xv[(n * C + c) * S + i];
      mean = s / (N * S);
      double q = 0;
      for (int64_t n = 0; n < N; ++n)
        for (int64_t i = 0; i < S; ++i) q += (xv[(n * C + c) * S + i] - mean) * (xv[(n * C + c) * S + i] - mean);
      var = q / (N * S);
      rm[c] = (1 - momentum) * rm[c] + momentum * mean;
      rv[c] = (1 - momentum) * rv[c] + momentum * q / (N * S - 1);
    }
    for (int64_t n = 0; n < N; ++n)
      for (int64_t i = 0; i < S; ++i) {
        const int64_t k = (n * C + c) * S + i;
        y[k] = (xv[k] - mean) / std::sqrt(var + eps) * w[c] + b[c];
      }
  }
  return {from_values(y, x.sizes()), from_values(rm, {C}), from_values(rv, {C})};
}

TensorList bn_inputs(Generator& g, IntArrayRef shape, bool affine, bool running, bool bench) {
  const int64_t C = shape[1];
  auto rnd = [&](IntArrayRef s) { return bench ? randn32(s, g) : randn64(s, g); };
  auto uni = [&](IntArrayRef s, double lo, double hi) {
    Tensor t = uniform64(s, g, lo, hi);
    return bench ? t.to(DType::f32) : t;
  };
  TensorList in{rnd(shape)};
  in.push_back(running ? uni({C}, -0.5, 0.5) : Tensor());
  in.push_back(running ? uni({C}, 0.5, 1.5) : Tensor());
  in.push_back(affine ? uni({C}, 0.5, 1.5) : Tensor());
  in.push_back(affine ? uni({C}, -0.5, 0.5) : Tensor());
  return in;
}

const bool bn_registered = [] {
  const std::vector<BnSpec> specs = {
      {"train_2d", {6, 4}, true, true, true, {}},
      {"train_3d", {4, 3, 5}, true, true, true, {}},
      {"train_4d", {3, 4, 3, 3}, true, true, true, {64, 64, 32, 32}},
      {"train_no_affine", {4, 3, 5}, true, false, true, {}},
      {"train_no_running_stats", {3, 2, 2, 3}, true, true, false, {}},
      {"eval_2d", {5, 4}, false, true, true, {}},
      {"eval_4d", {2, 3, 3, 4}, false, true, true, {64, 64, 32, 32}},
      {"eval_no_affine", {3, 4, 5}, false, false, true, {}},
  };
  for (const BnSpec& sp : specs) {
    const bool training = sp.training;
    OpCase c{
        .name = "batch_norm/" + sp.name,
        .op = OpKind::batch_norm,
        .inputs = [sp](Generator& g) { return bn_inputs(g, sp.shape, sp.affine, sp.running, false); },
        // The harness reruns forward (finite differences), so the running statistics are cloned:
        // forward stays a pure function here; the in-place update has its own case and tests.
        .run =
            [training](const TensorList& in) {
              Tensor rm = in[1].defined() ? in[1].clone() : Tensor();
              Tensor rv = in[2].defined() ? in[2].clone() : Tensor();
              return TensorList{batch_norm(in[0], rm, rv, in[3], in[4], training, 0.1, 1e-5)};
            },
        .reference = [training](const TensorList& in) { return TensorList{bn_reference(in, training, 0.1, 1e-5)[0]}; },
        .grad_inputs = sp.affine ? std::vector<int>{0, 3, 4} : std::vector<int>{0},
    };
    if (!sp.bench.empty()) c.bench_inputs = [sp](Generator& g) { return bn_inputs(g, sp.bench, true, true, true); };
    op_cases().push_back(std::move(c));
  }
  // The running-statistics update, checked as outputs (no gradients: forward runs once per prepared
  // copy, so the in-place update is visible and compared with the reference, strided views included).
  for (bool two_d : {false, true}) {
    op_cases().push_back(OpCase{
        .name = std::string("batch_norm/running_stats_update") + (two_d ? "_2d" : "_4d"),
        .op = OpKind::batch_norm,
        .inputs =
            [two_d](Generator& g) { return bn_inputs(g, two_d ? Dims{7, 5} : Dims{3, 4, 2, 3}, true, true, false); },
        .run =
            [](const TensorList& in) {
              Tensor y = batch_norm(in[0], in[1], in[2], in[3], in[4], true, 0.3, 1e-3);
              return TensorList{y, in[1], in[2]};
            },
        .reference = [](const TensorList& in) { return bn_reference(in, true, 0.3, 1e-3); },
    });
  }
  return true;
}();

Tensor f32(IntArrayRef s) { return zeros(s, {DType::f32, nullptr}); }

STRATA_REGISTER_CASE(BadInputCase{
    .name = "batch_norm/weight_wrong_size",
    .op = OpKind::batch_norm,
    .call = [] { batch_norm(f32({4, 3, 5}), Tensor(), Tensor(), f32({5}), Tensor(), true); },
    .expect = {"weight", "Tensor[5] f32", "Tensor[4, 3, 5] f32", "[3]"},
});
STRATA_REGISTER_CASE(BadInputCase{
    .name = "batch_norm/running_mean_wrong_size",
    .op = OpKind::batch_norm,
    .call = [] { batch_norm(f32({4, 3}), f32({4}), f32({3}), Tensor(), Tensor(), false); },
    .expect = {"running_mean", "Tensor[4] f32", "Tensor[4, 3] f32"},
});
STRATA_REGISTER_CASE(BadInputCase{
    .name = "batch_norm/running_var_wrong_rank",
    .op = OpKind::batch_norm,
    .call = [] { batch_norm(f32({4, 3}), f32({3}), f32({3, 1}), Tensor(), Tensor(), true); },
    .expect = {"running_var", "Tensor[3, 1] f32"},
});
STRATA_REGISTER_CASE(BadInputCase{
    .name = "batch_norm/rank_1_input",
    .op = OpKind::batch_norm,
    .call = [] { batch_norm(f32({4}), Tensor(), Tensor(), Tensor(), Tensor(), true); },
    .expect = {"Tensor[4] f32", "at least 2 dims"},
});
STRATA_REGISTER_CASE(BadInputCase{
    .name = "batch_norm/integer_input",
    .op = OpKind::batch_norm,
    .call = [] { batch_norm(zeros({4, 3}, {DType::i64, nullptr}), Tensor(), Tensor(), Tensor(), Tensor(), true); },
    .expect = {"Tensor[4, 3] i64", "f32 or f64"},
});
STRATA_REGISTER_CASE(BadInputCase{
    .name = "batch_norm/dtype_mismatch",
    .op = OpKind::batch_norm,
    .call = [] { batch_norm(f32({4, 3}), Tensor(), Tensor(), zeros({3}, {DType::f64, nullptr}), Tensor(), true); },
    .expect = {"Tensor[4, 3] f32", "Tensor[3] f64"},
});
STRATA_REGISTER_CASE(BadInputCase{
    .name = "batch_norm/negative_eps",
    .op = OpKind::batch_norm,
    .call = [] { batch_norm(f32({4, 3}), Tensor(), Tensor(), Tensor(), Tensor(), true, 0.1, -1e-5); },
    .expect = {"eps", "-1e-05"},
});
STRATA_REGISTER_CASE(BadInputCase{
    .name = "batch_norm/momentum_above_1",
    .op = OpKind::batch_norm,
    .call = [] { batch_norm(f32({4, 3}), f32({3}), f32({3}), Tensor(), Tensor(), true, 1.5); },
    .expect = {"momentum", "[0, 1]", "1.5"},
});
STRATA_REGISTER_CASE(BadInputCase{
    .name = "batch_norm/momentum_negative",
    .op = OpKind::batch_norm,
    .call = [] { batch_norm(f32({4, 3}), f32({3}), f32({3}), Tensor(), Tensor(), true, -0.1); },
    .expect = {"momentum", "[0, 1]"},
});
STRATA_REGISTER_CASE(BadInputCase{
    .name = "batch_norm/eval_without_running_stats",
    .op = OpKind::batch_norm,
    .call = [] { batch_norm(f32({4, 3}), Tensor(), Tensor(), Tensor(), Tensor(), false); },
    .expect = {"running_mean", "evaluation"},
});
STRATA_REGISTER_CASE(BadInputCase{
    .name = "batch_norm/one_value_per_channel",
    .op = OpKind::batch_norm,
    .call = [] { batch_norm(f32({1, 3}), Tensor(), Tensor(), Tensor(), Tensor(), true); },
    .expect = {"more than 1 value per channel", "Tensor[1, 3] f32"},
});

// ---- layer_norm ---------------------------------------------------------------------------------

TensorList ln_reference(const TensorList& in, IntArrayRef ns, double eps) {
  const Tensor& x = in[0];
  int64_t D = 1;
  for (int64_t s : ns) D *= s;
  const int64_t M = x.numel() / D;
  const auto xv = values_of(x);
  std::vector<double> w(D, 1.0), b(D, 0.0);
  if (in[1].defined()) w = values_of(in[1]);
  if (in[2].defined()) b = values_of(in[2]);
  std::vector<double> y(xv.size());
  for (int64_t r = 0; r < M; ++r) {
    double m = 0, v = 0;
    for (int64_t i = 0; i < D; ++i) m += xv[r * D + i];
    m /= D;
    for (int64_t i = 0; i < D; ++i) v += (xv[r * D + i] - m) * (xv[r * D + i] - m);
    v /= D;
    for (int64_t i = 0; i < D; ++i) y[r * D + i] = (xv[r * D + i] - m) / std::sqrt(v + eps) * w[i] + b[i];
  }
  return {from_values(y, x.sizes())};
}

struct LnSpec {
  std::string name;
  Dims shape;
  Dims ns;
  bool weight = true, bias = true;
  double eps = 1e-5;
  Dims bench;
};

const bool ln_registered = [] {
  const std::vector<LnSpec> specs = {
      {"basic", {4, 6}, {6}, true, true, 1e-5, {256, 1024}},
      {"two_normalized_dims", {2, 3, 4}, {3, 4}, true, true, 1e-5, {}},
      {"no_affine", {3, 2, 5}, {5}, false, false, 1e-5, {}},
      {"weight_only", {5, 4}, {4}, true, false, 1e-3, {}},
      {"bias_only", {5, 4}, {4}, false, true, 1e-5, {}},
      {"whole_tensor", {3, 4}, {3, 4}, true, true, 0.1, {}},
  };
  for (const LnSpec& sp : specs) {
    std::vector<int> grads{0};
    if (sp.weight) grads.push_back(1);
    if (sp.bias) grads.push_back(2);
    OpCase c{
        .name = "layer_norm/" + sp.name,
        .op = OpKind::layer_norm,
        .inputs =
            [sp](Generator& g) {
              return TensorList{randn64(sp.shape, g), sp.weight ? uniform64(sp.ns, g, 0.5, 1.5) : Tensor(),
                                sp.bias ? uniform64(sp.ns, g, -0.5, 0.5) : Tensor()};
            },
        // The normalized shape is the input's trailing dims (so the bench-sized inputs work too).
        .run =
            [sp](const TensorList& in) {
              const Dims& s = in[0].sizes();
              const Dims ns(s.end() - static_cast<std::ptrdiff_t>(sp.ns.size()), s.end());
              return TensorList{layer_norm(in[0], ns, in[1], in[2], sp.eps)};
            },
        .reference = [sp](const TensorList& in) { return ln_reference(in, sp.ns, sp.eps); },
        .grad_inputs = grads,
    };
    if (!sp.bench.empty())
      c.bench_inputs = [sp](Generator& g) {
        const Dims ns{sp.bench.back()};
        return TensorList{randn32(sp.bench, g), uniform64(ns, g, 0.5, 1.5).to(DType::f32),
                          uniform64(ns, g, -0.5, 0.5).to(DType::f32)};
      };
    op_cases().push_back(std::move(c));
  }
  return true;
}();

STRATA_REGISTER_CASE(BadInputCase{
    .name = "layer_norm/normalized_shape_mismatch",
    .op = OpKind::layer_norm,
    .call = [] { layer_norm(f32({2, 3, 5}), {3, 4}); },
    .expect = {"normalized_shape", "[3, 4]", "Tensor[2, 3, 5] f32"},
});
STRATA_REGISTER_CASE(BadInputCase{
    .name = "layer_norm/normalized_shape_too_long",
    .op = OpKind::layer_norm,
    .call = [] { layer_norm(f32({5}), {2, 5}); },
    .expect = {"normalized_shape", "[2, 5]", "Tensor[5] f32"},
});
STRATA_REGISTER_CASE(BadInputCase{
    .name = "layer_norm/weight_shape",
    .op = OpKind::layer_norm,
    .call = [] { layer_norm(f32({2, 4}), {4}, f32({5})); },
    .expect = {"weight", "[4]", "Tensor[5] f32"},
});
STRATA_REGISTER_CASE(BadInputCase{
    .name = "layer_norm/bias_dtype",
    .op = OpKind::layer_norm,
    .call = [] { layer_norm(f32({2, 4}), {4}, Tensor(), zeros({4}, {DType::f64, nullptr})); },
    .expect = {"Tensor[2, 4] f32", "Tensor[4] f64"},
});
STRATA_REGISTER_CASE(BadInputCase{
    .name = "layer_norm/integer_input",
    .op = OpKind::layer_norm,
    .call = [] { layer_norm(zeros({2, 4}, {DType::i32, nullptr}), {4}); },
    .expect = {"Tensor[2, 4] i32", "f32 or f64"},
});
STRATA_REGISTER_CASE(BadInputCase{
    .name = "layer_norm/negative_eps",
    .op = OpKind::layer_norm,
    .call = [] { layer_norm(f32({2, 4}), {4}, Tensor(), Tensor(), -1.0); },
    .expect = {"eps", "-1"},
});

}  // namespace
}  // namespace strata::testing
