// Harness cases for ops/elementwise_math.h.

#include "ops/elementwise_math.h"

#include <cmath>
#include <functional>
#include <string>

#include "tests/cpp/ops/harness/op_harness.h"

namespace strata::testing {
namespace {

using InputFn = std::function<Tensor(Generator&)>;

Tensor in_range(Generator& g, double lo, double hi) { return uniform64({4, 7}, g, lo, hi); }

/// Values in [lo, hi) kept at least `gap` away from every point k * period + phase (the op's jumps,
/// where neither the value nor a finite difference means anything).
Tensor away_from_grid(Generator& g, double lo, double hi, double period, double phase, double gap) {
  Tensor t = uniform64({5, 6}, g, lo, hi);
  double* p = t.data<double>();
  for (int64_t i = 0; i < t.numel(); ++i) {
    const double nearest = std::round((p[i] - phase) / period) * period + phase;
    if (std::abs(p[i] - nearest) < gap) p[i] = nearest + (p[i] < nearest ? -gap : gap);
  }
  return t;
}

InputFn range(double lo, double hi) {
  return [lo, hi](Generator& g) { return in_range(g, lo, hi); };
}

STRATA_REGISTER_CASE(with_bench(unary_case(
                                    "sin/basic", OpKind::sin, [](const Tensor& x) { return sin(x); },
                                    [](double v) { return std::sin(v); }, range(-3, 3)),
                                Dims{256, 4096}, -3, 3));
STRATA_REGISTER_CASE(with_bench(unary_case(
                                    "cos/basic", OpKind::cos, [](const Tensor& x) { return cos(x); },
                                    [](double v) { return std::cos(v); }, range(-3, 3)),
                                Dims{256, 4096}, -3, 3));
STRATA_REGISTER_CASE(with_bench(unary_case(
                                    "tan/basic", OpKind::tan, [](const Tensor& x) { return tan(x); },
                                    [](double v) { return std::tan(v); }, range(-1.2, 1.2)),
                                Dims{256, 4096}, -1.2, 1.2));
STRATA_REGISTER_CASE(with_bench(unary_case(
                                    "asin/basic", OpKind::asin, [](const Tensor& x) { return asin(x); },
                                    [](double v) { return std::asin(v); }, range(-0.9, 0.9)),
                                Dims{256, 4096}, -0.9, 0.9));
STRATA_REGISTER_CASE(with_bench(unary_case(
                                    "acos/basic", OpKind::acos, [](const Tensor& x) { return acos(x); },
                                    [](double v) { return std::acos(v); }, range(-0.9, 0.9)),
                                Dims{256, 4096}, -0.9, 0.9));
STRATA_REGISTER_CASE(with_bench(unary_case(
                                    "atan/basic", OpKind::atan, [](const Tensor& x) { return atan(x); },
                                    [](double v) { return std::atan(v); }, range(-4, 4)),
                                Dims{256, 4096}, -4, 4));
STRATA_REGISTER_CASE(with_bench(unary_case(
                                    "sinh/basic", OpKind::sinh, [](const Tensor& x) { return sinh(x); },
                                    [](double v) { return std::sinh(v); }, range(-2, 2)),
                                Dims{256, 4096}, -2, 2));
STRATA_REGISTER_CASE(with_bench(unary_case(
                                    "cosh/basic", OpKind::cosh, [](const Tensor& x) { return cosh(x); },
                                    [](double v) { return std::cosh(v); }, range(-2, 2)),
                                Dims{256, 4096}, -2, 2));
STRATA_REGISTER_CASE(with_bench(unary_case(
                                    "expm1/basic", OpKind::expm1, [](const Tensor& x) { return expm1(x); },
                                    [](double v) { return std::expm1(v); }, range(-2, 2)),
                                Dims{256, 4096}, -2, 2));
STRATA_REGISTER_CASE(unary_case(
    "expm1/tiny", OpKind::expm1, [](const Tensor& x) { return expm1(x); }, [](double v) { return std::expm1(v); },
    range(-1e-6, 1e-6)));
STRATA_REGISTER_CASE(with_bench(unary_case(
                                    "log1p/basic", OpKind::log1p, [](const Tensor& x) { return log1p(x); },
                                    [](double v) { return std::log1p(v); }, range(-0.5, 2)),
                                Dims{256, 4096}, -0.5, 2));
STRATA_REGISTER_CASE(with_bench(unary_case(
                                    "rsqrt/basic", OpKind::rsqrt, [](const Tensor& x) { return rsqrt(x); },
                                    [](double v) { return 1 / std::sqrt(v); }, range(0.5, 3)),
                                Dims{256, 4096}, 0.5, 3));
STRATA_REGISTER_CASE(with_bench(unary_case(
                                    "erf/basic", OpKind::erf, [](const Tensor& x) { return erf(x); },
                                    [](double v) { return std::erf(v); }, range(-2.5, 2.5)),
                                Dims{256, 4096}, -2.5, 2.5));
STRATA_REGISTER_CASE(with_bench(unary_case(
                                    "square/basic", OpKind::square, [](const Tensor& x) { return square(x); },
                                    [](double v) { return v * v; }, range(-2, 2)),
                                Dims{256, 4096}, -2, 2));
STRATA_REGISTER_CASE(with_bench(unary_case(
                                    "reciprocal/positive", OpKind::reciprocal,
                                    [](const Tensor& x) { return reciprocal(x); }, [](double v) { return 1 / v; },
                                    range(0.5, 2)),
                                Dims{256, 4096}, 0.5, 2));
STRATA_REGISTER_CASE(unary_case(
    "reciprocal/negative", OpKind::reciprocal, [](const Tensor& x) { return reciprocal(x); },
    [](double v) { return 1 / v; }, range(-2, -0.5)));

// The rounding ops and sign: inputs away from their jumps; the gradient is zero.
STRATA_REGISTER_CASE(with_bench(unary_case(
                                    "floor/basic", OpKind::floor, [](const Tensor& x) { return floor(x); },
                                    [](double v) { return std::floor(v); },
                                    [](Generator& g) { return away_from_grid(g, -3, 3, 1, 0, 0.05); }),
                                Dims{256, 4096}, -3, 3));
STRATA_REGISTER_CASE(with_bench(unary_case(
                                    "ceil/basic", OpKind::ceil, [](const Tensor& x) { return ceil(x); },
                                    [](double v) { return std::ceil(v); },
                                    [](Generator& g) { return away_from_grid(g, -3, 3, 1, 0, 0.05); }),
                                Dims{256, 4096}, -3, 3));
STRATA_REGISTER_CASE(with_bench(unary_case(
                                    "trunc/basic", OpKind::trunc, [](const Tensor& x) { return trunc(x); },
                                    [](double v) { return std::trunc(v); },
                                    [](Generator& g) { return away_from_grid(g, -3, 3, 1, 0, 0.05); }),
                                Dims{256, 4096}, -3, 3));
STRATA_REGISTER_CASE(with_bench(unary_case(
                                    "round/basic", OpKind::round, [](const Tensor& x) { return round(x); },
                                    [](double v) { return std::nearbyint(v); },
                                    [](Generator& g) { return away_from_grid(g, -3, 3, 1, 0.5, 0.05); }),
                                Dims{256, 4096}, -3, 3));
/// Exact halves: forward only (a finite difference straddles the jump).
OpCase halves_case() {
  OpCase c = unary_case(
      "round/halves_to_even", OpKind::round, [](const Tensor& x) { return round(x); },
      [](double v) { return std::nearbyint(v); },
      [](Generator&) { return from_values({-2.5, -1.5, -0.5, 0.5, 1.5, 2.5}, {6}); });
  c.grad_inputs = {};
  return c;
}
STRATA_REGISTER_CASE(halves_case());
STRATA_REGISTER_CASE(unary_case(
    "round/decimals_2", OpKind::round, [](const Tensor& x) { return round(x, 2); },
    [](double v) { return std::nearbyint(v * 100) / 100; },
    [](Generator& g) { return away_from_grid(g, -3, 3, 0.01, 0.005, 0.002); }));
STRATA_REGISTER_CASE(unary_case(
    "round/decimals_-1", OpKind::round, [](const Tensor& x) { return round(x, -1); },
    [](double v) { return std::nearbyint(v / 10) * 10; },
    [](Generator& g) { return away_from_grid(g, -60, 60, 10, 5, 0.5); }));
STRATA_REGISTER_CASE(with_bench(unary_case(
                                    "sign/basic", OpKind::sign, [](const Tensor& x) { return sign(x); },
                                    [](double v) { return v > 0   ? 1.0
                                                          : v < 0 ? -1.0
                                                                  : 0.0; },
                                    [](Generator& g) { return away_from_grid(g, -1, 1, 100, 0, 0.05); }),
                                Dims{256, 4096}, -1, 1));

/// atan2(a, b) with broadcasting; |a| >= 0.1 keeps away from the branch cut (a = 0, b < 0) and
/// |b| >= 0.2 from the origin.
OpCase atan2_case(std::string name, Dims as, Dims bs) {
  OpCase c;
  c.name = std::move(name);
  c.op = OpKind::atan2;
  c.inputs = [as, bs](Generator& g) {
    Tensor a = uniform64(as, g, 0.1, 1.0), b = uniform64(bs, g, 0.2, 1.5);
    double* pa = a.data<double>();
    for (int64_t i = 0; i < a.numel(); i += 2) pa[i] = -pa[i];
    double* pb = b.data<double>();
    for (int64_t i = 0; i < b.numel(); i += 3) pb[i] = -pb[i];
    return TensorList{a, b};
  };
  c.run = [](const TensorList& in) { return TensorList{atan2(in[0], in[1])}; };
  c.reference = [](const TensorList& in) {
    return TensorList{broadcast_reference(in, [](double a, double b) { return std::atan2(a, b); })};
  };
  c.grad_inputs = {0, 1};
  c.promotes = true;
  return c;
}
STRATA_REGISTER_CASE(with_bench_inputs(atan2_case("atan2/same_shape", {3, 5}, {3, 5}), [](Generator& g) {
  return TensorList{randn32({256, 4096}, g), randn32({256, 4096}, g)};
}));
STRATA_REGISTER_CASE(atan2_case("atan2/broadcast", {4, 1}, {3}));

// ---- bad inputs ---------------------------------------------------------------------------------
Tensor bools() { return zeros({2, 3}, {DType::boolean, nullptr}); }

/// An undefined input: an error naming the op.
BadInputCase undefined_input(const char* name, OpKind op, Tensor (*fn)(const Tensor&)) {
  return BadInputCase{
      std::string(name) + "/undefined", op, [fn] { fn(Tensor()); }, {std::string(name) + ": input is undefined"}};
}
STRATA_REGISTER_CASE(undefined_input("sin", OpKind::sin, &sin));
STRATA_REGISTER_CASE(undefined_input("cos", OpKind::cos, &cos));
STRATA_REGISTER_CASE(undefined_input("tan", OpKind::tan, &tan));
STRATA_REGISTER_CASE(undefined_input("asin", OpKind::asin, &asin));
STRATA_REGISTER_CASE(undefined_input("acos", OpKind::acos, &acos));
STRATA_REGISTER_CASE(undefined_input("atan", OpKind::atan, &atan));
STRATA_REGISTER_CASE(undefined_input("sinh", OpKind::sinh, &sinh));
STRATA_REGISTER_CASE(undefined_input("cosh", OpKind::cosh, &cosh));
STRATA_REGISTER_CASE(undefined_input("ceil", OpKind::ceil, &ceil));
STRATA_REGISTER_CASE(undefined_input("trunc", OpKind::trunc, &trunc));
STRATA_REGISTER_CASE(undefined_input("sign", OpKind::sign, &sign));
STRATA_REGISTER_CASE(undefined_input("expm1", OpKind::expm1, &expm1));
STRATA_REGISTER_CASE(undefined_input("log1p", OpKind::log1p, &log1p));
STRATA_REGISTER_CASE(undefined_input("rsqrt", OpKind::rsqrt, &rsqrt));
STRATA_REGISTER_CASE(undefined_input("erf", OpKind::erf, &erf));
STRATA_REGISTER_CASE(undefined_input("square", OpKind::square, &square));
STRATA_REGISTER_CASE(undefined_input("reciprocal", OpKind::reciprocal, &reciprocal));
STRATA_REGISTER_CASE(BadInputCase{
    "floor/bool_input", OpKind::floor, [] { floor(bools()); }, {"floor", "bool", "Tensor[2, 3] bool"}});
STRATA_REGISTER_CASE(BadInputCase{"round/bool_input", OpKind::round, [] { round(bools()); }, {"round", "bool"}});
STRATA_REGISTER_CASE(BadInputCase{"round/decimals_on_integers",
                                  OpKind::round,
                                  [] { round(zeros({3}, {DType::i64, nullptr}), 1); },
                                  {"decimals=1", "Tensor[3] i64"}});
STRATA_REGISTER_CASE(BadInputCase{"atan2/not_broadcastable",
                                  OpKind::atan2,
                                  [] { atan2(ones({2, 3}), ones({4})); },
                                  {"cannot broadcast", "Tensor[2, 3] f32", "Tensor[4] f32"}});
STRATA_REGISTER_CASE(BadInputCase{
    "atan2/undefined_other", OpKind::atan2, [] { atan2(ones({2}), Tensor()); }, {"atan2", "other is undefined"}});

}  // namespace
}  // namespace strata::testing
