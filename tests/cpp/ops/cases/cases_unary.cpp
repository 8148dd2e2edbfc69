// Harness cases for ops/unary.h.

#include "ops/unary.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>

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

// ---- generic element-wise cases --------------------------------------------------------------------

using InputFn = std::function<Tensor(Generator&)>;

Tensor positive(IntArrayRef sizes, Generator& g) { return uniform64(sizes, g, 0.5, 2.0); }
Tensor bench_f32(Generator& g) { return randn32({256, 4096}, g); }
Tensor bench_positive_f32(Generator& g) { return uniform({256, 4096}, 0.5, 2.0, {DType::f32, nullptr}, &g); }

/// A case for y = op(x) with a scalar reference function, benchmarked on [256, 4096].
OpCase pointwise_case(std::string name, OpKind op, std::function<Tensor(const Tensor&)> fn,
                      std::function<double(double)> ref, InputFn in, bool positive_bench = false) {
  OpCase c = unary_case(std::move(name), op, std::move(fn), std::move(ref), std::move(in));
  c.bench_inputs = [positive_bench](Generator& g) {
    return TensorList{positive_bench ? bench_positive_f32(g) : bench_f32(g)};
  };
  return c;
}

// Note [Non-finite cases]: y and the gradient by PyTorch's rules (Note [ReLU and NaN], ops/unary.cpp):
// relu(NaN) = NaN and the gradient passes where !(y <= 0), NaN included; leaky_relu's slope applies
// where !(x > 0); clamp keeps NaN and passes the gradient only inside [min, max].
OpCase nonfinite_pointwise(std::string name, OpKind op, std::function<Tensor(const Tensor&)> fn,
                           std::function<double(double)> ref, std::function<double(double)> dref) {
  OpCase c = pointwise_case(std::move(name), op, std::move(fn), std::move(ref),
                            [](Generator& g) { return with_nonfinite({5, 13}, g); });
  c.bench_inputs = nullptr;
  c.grad_reference = [dref](const TensorList& x, const TensorList& w) {
    auto v = values_of(x[0]);
    const auto wv = values_of(w[0]);
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = wv[i] * dref(v[i]);
    return TensorList{from_values(v, x[0].sizes())};
  };
  return c;
}

STRATA_REGISTER_CASE(nonfinite_pointwise(
    "relu/nonfinite", OpKind::relu, [](const Tensor& x) { return relu(x); }, [](double v) { return v < 0 ? 0.0 : v; },
    [](double v) { return !((v < 0 ? 0.0 : v) <= 0) ? 1.0 : 0.0; }));
STRATA_REGISTER_CASE(nonfinite_pointwise(
    "leaky_relu/nonfinite", OpKind::leaky_relu, [](const Tensor& x) { return leaky_relu(x, 0.1); },
    [](double v) { return v > 0 ? v : v * 0.1; }, [](double v) { return v > 0 ? 1.0 : 0.1; }));
STRATA_REGISTER_CASE(nonfinite_pointwise(
    "clamp/nonfinite", OpKind::clamp, [](const Tensor& x) { return clamp(x, -0.5, 0.5); },
    [](double v) { return std::isnan(v) ? v : std::min(std::max(v, -0.5), 0.5); },
    [](double v) { return v >= -0.5 && v <= 0.5 ? 1.0 : 0.0; }));

double gelu_ref(double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }
double gelu_tanh_ref(double x) { return 0.5 * x * (1 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x))); }

STRATA_REGISTER_CASE(pointwise_case(
    "leaky_relu/default_slope", OpKind::leaky_relu, [](const Tensor& x) { return leaky_relu(x); },
    [](double x) { return x > 0 ? x : 0.01 * x; }, [](Generator& g) { return away_from({4, 6}, g, 0.0); }));
STRATA_REGISTER_CASE(pointwise_case(
    "leaky_relu/slope_0.2", OpKind::leaky_relu, [](const Tensor& x) { return leaky_relu(x, 0.2); },
    [](double x) { return x > 0 ? x : 0.2 * x; }, [](Generator& g) { return away_from({3, 7}, g, 0.0); }));
STRATA_REGISTER_CASE(pointwise_case(
    "sigmoid/basic", OpKind::sigmoid, [](const Tensor& x) { return sigmoid(x); },
    [](double x) { return 1 / (1 + std::exp(-x)); }, [](Generator& g) { return randn64({5, 8}, g); }));
STRATA_REGISTER_CASE(pointwise_case(
    "sigmoid/wide_range", OpKind::sigmoid, [](const Tensor& x) { return sigmoid(x); },
    [](double x) { return 1 / (1 + std::exp(-x)); }, [](Generator& g) { return uniform64({40}, g, -30, 30); }));
STRATA_REGISTER_CASE(pointwise_case(
    "tanh/basic", OpKind::tanh, [](const Tensor& x) { return tanh(x); }, [](double x) { return std::tanh(x); },
    [](Generator& g) { return uniform64({6, 7}, g, -3, 3); }));
STRATA_REGISTER_CASE(pointwise_case(
    "tanh/small", OpKind::tanh, [](const Tensor& x) { return tanh(x); }, [](double x) { return std::tanh(x); },
    [](Generator& g) { return uniform64({30}, g, -0.7, 0.7); }));
STRATA_REGISTER_CASE(pointwise_case(
    "gelu/erf", OpKind::gelu, [](const Tensor& x) { return gelu(x); }, gelu_ref,
    [](Generator& g) { return uniform64({6, 8}, g, -4, 4); }));
STRATA_REGISTER_CASE(pointwise_case(
    "gelu/tanh_approximation", OpKind::gelu, [](const Tensor& x) { return gelu(x, true); }, gelu_tanh_ref,
    [](Generator& g) { return uniform64({6, 8}, g, -4, 4); }));
STRATA_REGISTER_CASE(pointwise_case(
    "silu/basic", OpKind::silu, [](const Tensor& x) { return silu(x); },
    [](double x) { return x / (1 + std::exp(-x)); }, [](Generator& g) { return uniform64({6, 8}, g, -6, 6); }));
STRATA_REGISTER_CASE(pointwise_case(
    "exp/basic", OpKind::exp, [](const Tensor& x) { return exp(x); }, [](double x) { return std::exp(x); },
    [](Generator& g) { return uniform64({5, 9}, g, -5, 5); }));
STRATA_REGISTER_CASE(pointwise_case(
    "log/basic", OpKind::log, [](const Tensor& x) { return log(x); }, [](double x) { return std::log(x); },
    [](Generator& g) { return positive({5, 9}, g); }, true));
STRATA_REGISTER_CASE(pointwise_case(
    "sqrt/basic", OpKind::sqrt, [](const Tensor& x) { return sqrt(x); }, [](double x) { return std::sqrt(x); },
    [](Generator& g) { return positive({5, 9}, g); }, true));
STRATA_REGISTER_CASE(pointwise_case(
    "pow/scalar_2", OpKind::pow, [](const Tensor& x) { return pow(x, 2.0); }, [](double x) { return x * x; },
    [](Generator& g) { return uniform64({4, 9}, g); }));
STRATA_REGISTER_CASE(pointwise_case(
    "pow/scalar_1.7", OpKind::pow, [](const Tensor& x) { return pow(x, 1.7); },
    [](double x) { return std::pow(x, 1.7); }, [](Generator& g) { return positive({4, 9}, g); }, true));
STRATA_REGISTER_CASE(pointwise_case(
    "pow/scalar_-0.5", OpKind::pow, [](const Tensor& x) { return pow(x, -0.5); },
    [](double x) { return 1 / std::sqrt(x); }, [](Generator& g) { return positive({3, 5}, g); }));
STRATA_REGISTER_CASE(pointwise_case(
    "pow/scalar_0", OpKind::pow, [](const Tensor& x) { return pow(x, 0.0); }, [](double) { return 1.0; },
    [](Generator& g) { return uniform64({3, 5}, g); }));
STRATA_REGISTER_CASE(pointwise_case(
    "pow/scalar_3", OpKind::pow, [](const Tensor& x) { return pow(x, 3.0); }, [](double x) { return x * x * x; },
    [](Generator& g) { return uniform64({3, 5}, g); }));
STRATA_REGISTER_CASE(pointwise_case(
    "clamp/min_max", OpKind::clamp, [](const Tensor& x) { return clamp(x, -0.5, 0.5); },
    [](double x) { return std::min(std::max(x, -0.5), 0.5); },
    [](Generator& g) {
      Tensor t = away_from({5, 8}, g, -0.5);
      double* p = t.data<double>();
      for (int64_t i = 0; i < t.numel(); ++i)
        if (std::abs(p[i] - 0.5) < 0.05) p[i] = 0.5 + (p[i] < 0.5 ? -0.05 : 0.05);
      return t;
    }));
STRATA_REGISTER_CASE(pointwise_case(
    "clamp/min_only", OpKind::clamp, [](const Tensor& x) { return clamp(x, 0.1, std::nullopt); },
    [](double x) { return std::max(x, 0.1); }, [](Generator& g) { return away_from({4, 6}, g, 0.1); }));
STRATA_REGISTER_CASE(pointwise_case(
    "clamp/max_only", OpKind::clamp, [](const Tensor& x) { return clamp(x, std::nullopt, -0.2); },
    [](double x) { return std::min(x, -0.2); }, [](Generator& g) { return away_from({4, 6}, g, -0.2); }));

/// pow(x, exponent tensor) with broadcasting.
OpCase pow_tensor_case(std::string name, Dims xs, Dims es) {
  OpCase c;
  c.name = std::move(name);
  c.op = OpKind::pow;
  c.inputs = [xs, es](Generator& g) { return TensorList{positive(xs, g), uniform64(es, g, -1.5, 2.5)}; };
  c.run = [](const TensorList& in) { return TensorList{pow(in[0], in[1])}; };
  c.reference = [](const TensorList& in) {
    return TensorList{broadcast_reference(in, [](double x, double e) { return std::pow(x, e); })};
  };
  c.grad_inputs = {0, 1};
  c.bench_inputs = [](Generator& g) {
    return TensorList{bench_positive_f32(g), uniform({4096}, -1.5, 2.5, {DType::f32, nullptr}, &g)};
  };
  c.promotes = true;
  return c;
}
STRATA_REGISTER_CASE(pow_tensor_case("pow/tensor_same_shape", {3, 5}, {3, 5}));
STRATA_REGISTER_CASE(pow_tensor_case("pow/tensor_broadcast", {3, 1}, {4}));
STRATA_REGISTER_CASE(pow_tensor_case("pow/tensor_scalar_exponent", {2, 3}, {}));

// ---- neg and abs (every dtype; the integer kernels are in test_promotion.cpp) ---------------------
STRATA_REGISTER_CASE(pointwise_case(
    "neg/basic", OpKind::neg, [](const Tensor& x) { return neg(x); }, [](double x) { return -x; },
    [](Generator& g) { return uniform64({4, 6}, g, -1.0, 1.0); }));
STRATA_REGISTER_CASE(pointwise_case(
    "abs/basic", OpKind::abs, [](const Tensor& x) { return abs(x); }, [](double x) { return std::abs(x); },
    [](Generator& g) { return away_from({4, 6}, g, 0.0); }));
// Note [Non-finite cases]: |NaN| is NaN, |±inf| is inf; the gradient is grad * sign(x), 0 at ±0
// and at NaN (torch 2.13).
STRATA_REGISTER_CASE(nonfinite_pointwise(
    "abs/nonfinite", OpKind::abs, [](const Tensor& x) { return abs(x); }, [](double v) { return std::abs(v); },
    [](double v) { return v > 0   ? 1.0
                          : v < 0 ? -1.0
                                  : 0.0; }));
STRATA_REGISTER_CASE(nonfinite_pointwise(
    "neg/nonfinite", OpKind::neg, [](const Tensor& x) { return neg(x); }, [](double v) { return -v; },
    [](double) { return -1.0; }));

// ---- dropout ------------------------------------------------------------------------------------
constexpr uint64_t kDropoutSeed = 4242;

/// The reference mask: element i is kept iff the top 24 bits of word i % 4 of Philox block i / 4
/// (a fresh generator: offset 0) are below (1 - p) * 2^24.
std::vector<double> dropout_reference(const std::vector<double>& x, double p) {
  Generator gen(kDropoutSeed);
  const auto threshold = static_cast<uint32_t>(std::llround((1 - p) * 16777216.0));
  std::vector<double> out(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    const auto w = gen.block(i / 4);
    out[i] = (w[i % 4] >> 8) < threshold ? x[i] / (1 - p) : 0.0;
  }
  return out;
}

OpCase dropout_case(std::string name, double p, bool training) {
  OpCase c;
  c.name = std::move(name);
  c.op = OpKind::dropout;
  c.inputs = [](Generator& g) { return TensorList{uniform64({6, 9}, g)}; };
  c.run = [p, training](const TensorList& in) {
    Generator gen(kDropoutSeed);  // fresh each call: the forward is deterministic
    return TensorList{dropout(in[0], p, training, &gen)};
  };
  c.reference = [p, training](const TensorList& in) {
    auto v = values_of(in[0]);
    if (training && p == 1.0)
      v.assign(v.size(), 0.0);
    else if (training && p > 0)
      v = dropout_reference(v, p);
    return TensorList{from_values(v, in[0].sizes())};
  };
  c.grad_inputs = {0};
  c.bench_inputs = [](Generator& g) { return TensorList{bench_f32(g)}; };
  return c;
}
STRATA_REGISTER_CASE(dropout_case("dropout/p0.3_training", 0.3, true));
STRATA_REGISTER_CASE(dropout_case("dropout/p0.5_training", 0.5, true));
STRATA_REGISTER_CASE(dropout_case("dropout/eval", 0.5, false));
STRATA_REGISTER_CASE(dropout_case("dropout/p0", 0.0, true));
STRATA_REGISTER_CASE(dropout_case("dropout/p1", 1.0, true));

// ---- bad inputs ---------------------------------------------------------------------------------
Tensor ints() { return zeros({2, 3}, {DType::i64, nullptr}); }

STRATA_REGISTER_CASE(BadInputCase{
    "leaky_relu/integer_input", OpKind::leaky_relu, [] { leaky_relu(ints()); }, {"Tensor[2, 3] i64", "f32 or f64"}});
STRATA_REGISTER_CASE(BadInputCase{
    "sigmoid/integer_input", OpKind::sigmoid, [] { sigmoid(ints()); }, {"Tensor[2, 3] i64", "f32 or f64"}});
STRATA_REGISTER_CASE(BadInputCase{"tanh/integer_input", OpKind::tanh, [] { tanh(ints()); }, {"Tensor[2, 3] i64"}});
STRATA_REGISTER_CASE(BadInputCase{"gelu/integer_input", OpKind::gelu, [] { gelu(ints()); }, {"Tensor[2, 3] i64"}});
STRATA_REGISTER_CASE(BadInputCase{
    "silu/integer_input", OpKind::silu, [] { silu(ints()); }, {"silu", "Tensor[2, 3] i64"}});
STRATA_REGISTER_CASE(BadInputCase{"exp/integer_input", OpKind::exp, [] { exp(ints()); }, {"Tensor[2, 3] i64"}});
STRATA_REGISTER_CASE(BadInputCase{"log/integer_input", OpKind::log, [] { log(ints()); }, {"Tensor[2, 3] i64"}});
STRATA_REGISTER_CASE(BadInputCase{
    "sqrt/bool_input", OpKind::sqrt, [] { sqrt(zeros({4}, {DType::boolean, nullptr})); }, {"Tensor[4] bool"}});
STRATA_REGISTER_CASE(BadInputCase{"pow/negative_integer_power",
                                  OpKind::pow,
                                  [] { pow(ints(), -1); },
                                  {"negative integer powers", "Tensor[2, 3] i64"}});
STRATA_REGISTER_CASE(BadInputCase{
    "pow/bool",
    OpKind::pow,
    [] { pow(zeros({4}, {DType::boolean, nullptr}), zeros({4}, {DType::boolean, nullptr})); },
    {"bool"}});
STRATA_REGISTER_CASE(BadInputCase{
    "pow/undefined_exponent", OpKind::pow, [] { pow(ones({2}), Tensor()); }, {"exponent is undefined"}});
STRATA_REGISTER_CASE(BadInputCase{
    "neg/bool_input", OpKind::neg, [] { neg(zeros({4}, {DType::boolean, nullptr})); }, {"bool", "logical_not"}});
STRATA_REGISTER_CASE(BadInputCase{"neg/undefined", OpKind::neg, [] { neg(Tensor()); }, {"input is undefined"}});
STRATA_REGISTER_CASE(BadInputCase{
    "abs/bool_input", OpKind::abs, [] { abs(zeros({4}, {DType::boolean, nullptr})); }, {"bool"}});
STRATA_REGISTER_CASE(BadInputCase{"pow/not_broadcastable",
                                  OpKind::pow,
                                  [] { pow(ones({2, 3}), ones({4})); },
                                  {"cannot broadcast", "Tensor[2, 3] f32", "Tensor[4] f32"}});
STRATA_REGISTER_CASE(BadInputCase{"clamp/no_bounds",
                                  OpKind::clamp,
                                  [] { clamp(ones({2}), std::nullopt, std::nullopt); },
                                  {"at least one of min and max"}});
STRATA_REGISTER_CASE(BadInputCase{
    "clamp/integer_input", OpKind::clamp, [] { clamp(ints(), 0.0, 1.0); }, {"Tensor[2, 3] i64"}});
STRATA_REGISTER_CASE(BadInputCase{"dropout/p_above_1",
                                  OpKind::dropout,
                                  [] { dropout(ones({2, 3}), 1.5, true); },
                                  {"[0, 1]", "1.5", "Tensor[2, 3] f32"}});
STRATA_REGISTER_CASE(BadInputCase{
    "dropout/p_negative", OpKind::dropout, [] { dropout(ones({2, 3}), -0.1, true); }, {"[0, 1]", "-0.1"}});
STRATA_REGISTER_CASE(BadInputCase{
    "dropout/integer_input", OpKind::dropout, [] { dropout(ints(), 0.5, true); }, {"Tensor[2, 3] i64"}});

}  // namespace
}  // namespace strata::testing
