// Harness cases for ops/binary.h.

#include "ops/binary.h"

#include <cmath>
#include <functional>

#include "tests/cpp/ops/harness/op_harness.h"

namespace strata::testing {
namespace {

using Fn2 = std::function<double(double, double)>;

/// Values of `t` broadcast to `shape`, row-major.
std::vector<double> broadcast_values(const Tensor& t, IntArrayRef shape) {
  const auto v = values_of(t);
  const int64_t rank = static_cast<int64_t>(shape.size());
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  std::vector<double> out(static_cast<std::size_t>(n));
  const int64_t lead = rank - t.dim();
  for (int64_t i = 0; i < n; ++i) {
    int64_t rem = i, src = 0, mul = 1;
    for (int64_t d = rank - 1; d >= 0; --d) {
      const int64_t idx = rem % shape[static_cast<std::size_t>(d)];
      rem /= shape[static_cast<std::size_t>(d)];
      if (d >= lead) {
        const int64_t sz = t.size(d - lead);
        src += (sz == 1 ? 0 : idx) * mul;
        mul *= sz;
      }
    }
    out[static_cast<std::size_t>(i)] = v[static_cast<std::size_t>(src)];
  }
  return out;
}

Dims bshape(const Tensor& a, const Tensor& b) { return broadcast_shapes(a.sizes(), b.sizes()); }

using InputFn = std::function<Tensor(IntArrayRef, Generator&)>;
Tensor any_values(IntArrayRef s, Generator& g) { return uniform64(s, g, -1.0, 1.0); }
Tensor positive(IntArrayRef s, Generator& g) { return uniform64(s, g, 0.5, 2.0); }

/// out = op(a, b) with broadcasting; `bench` selects [256,4096] ⊕ [4096] (true) or same shape.
OpCase binary_case(std::string name, OpKind op, std::function<Tensor(const Tensor&, const Tensor&)> fn, Fn2 ref,
                   Dims as, Dims bs, InputFn ina = any_values, InputFn inb = any_values, int bench = 0) {
  OpCase c;
  c.name = std::move(name);
  c.op = op;
  c.inputs = [=](Generator& g) { return TensorList{ina(as, g), inb(bs, g)}; };
  c.run = [fn](const TensorList& in) { return TensorList{fn(in[0], in[1])}; };
  c.reference = [ref](const TensorList& in) {
    const Dims shape = bshape(in[0], in[1]);
    const auto a = broadcast_values(in[0], shape), b = broadcast_values(in[1], shape);
    std::vector<double> out(a.size());
    for (std::size_t i = 0; i < a.size(); ++i) out[i] = ref(a[i], b[i]);
    return TensorList{from_values(out, shape)};
  };
  c.grad_inputs = {0, 1};
  c.promotes = true;
  if (bench == 1)
    c.bench_inputs = [](Generator& g) {
      return TensorList{uniform({256, 4096}, 0.5, 2.0, {DType::f32, nullptr}, &g),
                        uniform({4096}, 0.5, 2.0, {DType::f32, nullptr}, &g)};
    };
  if (bench == 2)
    c.bench_inputs = [](Generator& g) {
      return TensorList{uniform({256, 4096}, 0.5, 2.0, {DType::f32, nullptr}, &g),
                        uniform({256, 4096}, 0.5, 2.0, {DType::f32, nullptr}, &g)};
    };
  return c;
}

/// out = op(a) for a scalar overload.
OpCase scalar_case(std::string name, OpKind op, std::function<Tensor(const Tensor&)> fn,
                   std::function<double(double)> ref, InputFn in = any_values) {
  OpCase c =
      unary_case(std::move(name), op, std::move(fn), std::move(ref), [in](Generator& g) { return in({4, 5}, g); });
  c.bench_inputs = [](Generator& g) { return TensorList{uniform({256, 4096}, 0.5, 2.0, {DType::f32, nullptr}, &g)}; };
  return c;
}

auto add_fn = [](const Tensor& a, const Tensor& b) { return add(a, b); };
auto sub_fn = [](const Tensor& a, const Tensor& b) { return sub(a, b); };
auto mul_fn = [](const Tensor& a, const Tensor& b) { return mul(a, b); };
auto div_fn = [](const Tensor& a, const Tensor& b) { return div(a, b); };
auto max_fn = [](const Tensor& a, const Tensor& b) { return maximum(a, b); };
Fn2 add_ref = [](double a, double b) { return a + b; };
Fn2 sub_ref = [](double a, double b) { return a - b; };
Fn2 mul_ref = [](double a, double b) { return a * b; };
Fn2 div_ref = [](double a, double b) { return a / b; };
Fn2 max_ref = [](double a, double b) { return a > b ? a : b; };

// add
STRATA_REGISTER_CASE(binary_case("add/same_shape", OpKind::add, add_fn, add_ref, {3, 4}, {3, 4}, any_values, any_values,
                                 2));
STRATA_REGISTER_CASE(binary_case("add/broadcast_row", OpKind::add, add_fn, add_ref, {3, 4}, {4}, any_values, any_values,
                                 1));
STRATA_REGISTER_CASE(binary_case("add/broadcast_3x1_4", OpKind::add, add_fn, add_ref, {3, 1}, {4}));
STRATA_REGISTER_CASE(binary_case("add/broadcast_2x3x4_3x1", OpKind::add, add_fn, add_ref, {2, 3, 4}, {3, 1}));
STRATA_REGISTER_CASE(binary_case("add/scalar_tensor", OpKind::add, add_fn, add_ref, {}, {2, 3}));
STRATA_REGISTER_CASE(binary_case(
    "add/alpha", OpKind::add, [](const Tensor& a, const Tensor& b) { return add(a, b, 2.5); },
    [](double a, double b) { return a + 2.5 * b; }, {2, 3}, {3}));
STRATA_REGISTER_CASE(scalar_case(
    "add/scalar", OpKind::add, [](const Tensor& a) { return add(a, 1.5); }, [](double a) { return a + 1.5; }));
// sub
STRATA_REGISTER_CASE(binary_case("sub/same_shape", OpKind::sub, sub_fn, sub_ref, {3, 4}, {3, 4}, any_values, any_values,
                                 2));
STRATA_REGISTER_CASE(binary_case("sub/broadcast_2x3x4_3x1", OpKind::sub, sub_fn, sub_ref, {2, 3, 4}, {3, 1}));
STRATA_REGISTER_CASE(binary_case("sub/broadcast_left", OpKind::sub, sub_fn, sub_ref, {4}, {3, 4}));
STRATA_REGISTER_CASE(binary_case(
    "sub/alpha", OpKind::sub, [](const Tensor& a, const Tensor& b) { return sub(a, b, -0.5); },
    [](double a, double b) { return a + 0.5 * b; }, {3, 1}, {4}));
STRATA_REGISTER_CASE(scalar_case(
    "sub/scalar", OpKind::sub, [](const Tensor& a) { return sub(a, 0.25); }, [](double a) { return a - 0.25; }));
STRATA_REGISTER_CASE(scalar_case(
    "sub/rsub", OpKind::sub, [](const Tensor& a) { return sub(2.0, a); }, [](double a) { return 2.0 - a; }));
// mul
STRATA_REGISTER_CASE(binary_case("mul/same_shape", OpKind::mul, mul_fn, mul_ref, {3, 4}, {3, 4}, any_values, any_values,
                                 2));
STRATA_REGISTER_CASE(binary_case("mul/broadcast_row", OpKind::mul, mul_fn, mul_ref, {3, 4}, {4}, any_values, any_values,
                                 1));
STRATA_REGISTER_CASE(binary_case("mul/broadcast_3x1_4", OpKind::mul, mul_fn, mul_ref, {3, 1}, {4}));
STRATA_REGISTER_CASE(binary_case("mul/scalar_tensor", OpKind::mul, mul_fn, mul_ref, {2, 3}, {}));
STRATA_REGISTER_CASE(scalar_case(
    "mul/scalar", OpKind::mul, [](const Tensor& a) { return mul(a, -3.0); }, [](double a) { return -3.0 * a; }));
// div
STRATA_REGISTER_CASE(binary_case("div/same_shape", OpKind::div, div_fn, div_ref, {3, 4}, {3, 4}, any_values, positive,
                                 2));
STRATA_REGISTER_CASE(binary_case("div/broadcast_row", OpKind::div, div_fn, div_ref, {3, 4}, {4}, any_values, positive,
                                 1));
STRATA_REGISTER_CASE(binary_case("div/broadcast_2x3x4_3x1", OpKind::div, div_fn, div_ref, {2, 3, 4}, {3, 1}, any_values,
                                 positive));
STRATA_REGISTER_CASE(binary_case("div/scalar_tensor_numerator", OpKind::div, div_fn, div_ref, {}, {2, 3}, any_values,
                                 positive));
STRATA_REGISTER_CASE(scalar_case(
    "div/scalar", OpKind::div, [](const Tensor& a) { return div(a, 4.0); }, [](double a) { return a / 4.0; }));
STRATA_REGISTER_CASE(scalar_case(
    "div/rdiv", OpKind::div, [](const Tensor& a) { return div(2.0, a); }, [](double a) { return 2.0 / a; }, positive));
// maximum (random inputs have no ties; the ties case checks the half split: central differences
// at a tie give exactly 1/2 too)
STRATA_REGISTER_CASE(binary_case("maximum/same_shape", OpKind::maximum, max_fn, max_ref, {3, 4}, {3, 4}, any_values,
                                 any_values, 2));
STRATA_REGISTER_CASE(binary_case("maximum/broadcast_3x1_4", OpKind::maximum, max_fn, max_ref, {3, 1}, {4}));
// Note [Non-finite cases]: NaN from either side wins; the gradient goes to a side unless the other
// side is larger, halved on a tie (+-inf against itself) — so both sides get it at a NaN (torch 2.13).
STRATA_REGISTER_CASE(OpCase{
    .name = "maximum/nonfinite",
    .op = OpKind::maximum,
    .inputs = [](Generator& g) { return TensorList{with_nonfinite({4, 9}, g), with_nonfinite({4, 9}, g, 3)}; },
    .run = [](const TensorList& in) { return TensorList{maximum(in[0], in[1])}; },
    .reference =
        [](const TensorList& in) {
          auto a = values_of(in[0]);
          const auto b = values_of(in[1]);
          for (std::size_t i = 0; i < a.size(); ++i)
            a[i] = std::isnan(a[i]) || std::isnan(b[i]) ? kNaN : std::max(a[i], b[i]);
          return TensorList{from_values(a, in[0].sizes())};
        },
    .grad_inputs = {0, 1},
    .grad_reference =
        [](const TensorList& in, const TensorList& w) {
          const auto a = values_of(in[0]), b = values_of(in[1]), wv = values_of(w[0]);
          std::vector<double> ga(a.size()), gb(a.size());
          for (std::size_t i = 0; i < a.size(); ++i) {
            ga[i] = a[i] < b[i] ? 0.0 : a[i] == b[i] ? wv[i] / 2 : wv[i];
            gb[i] = a[i] > b[i] ? 0.0 : a[i] == b[i] ? wv[i] / 2 : wv[i];
          }
          return TensorList{from_values(ga, in[0].sizes()), from_values(gb, in[1].sizes())};
        },
    .promotes = true,
});

STRATA_REGISTER_CASE(OpCase{
    .name = "maximum/ties",
    .op = OpKind::maximum,
    .inputs =
        [](Generator&) {
          return TensorList{from_values({0.5, -1.0, 2.0, 0.25, 0.0, 3.0}, {2, 3}),
                            from_values({0.5, -2.0, 2.0, 0.75, 0.0, 1.0}, {2, 3})};
        },
    .run = [](const TensorList& in) { return TensorList{maximum(in[0], in[1])}; },
    .reference =
        [](const TensorList& in) {
          auto a = values_of(in[0]), b = values_of(in[1]);
          for (std::size_t i = 0; i < a.size(); ++i) a[i] = std::max(a[i], b[i]);
          return TensorList{from_values(a, in[0].sizes())};
        },
    .grad_inputs = {0, 1},
    .bench_inputs = {},
    .promotes = true,
});

// minimum: maximum's mirror (no ties in random inputs; NaN cases in test_nonfinite.py)
STRATA_REGISTER_CASE(binary_case(
    "minimum/same_shape", OpKind::minimum, [](const Tensor& a, const Tensor& b) { return minimum(a, b); },
    [](double a, double b) { return a < b ? a : b; }, {3, 4}, {3, 4}));
STRATA_REGISTER_CASE(binary_case(
    "minimum/broadcast_3x1_4", OpKind::minimum, [](const Tensor& a, const Tensor& b) { return minimum(a, b); },
    [](double a, double b) { return a < b ? a : b; }, {3, 1}, {4}));

// remainder: a - floor(a / b) * b, differentiable in both (away from the jumps: the inputs keep
// a / b away from integers). floor_divide has no derivative: forward only.
Tensor dividends(IntArrayRef s, Generator& g) { return uniform64(s, g, -5.0, 5.0); }
Tensor divisors(IntArrayRef s, Generator& g) {
  Tensor t = uniform64(s, g, 0.6, 1.4);  // with both signs, never near 0
  double* p = t.data<double>();
  for (int64_t i = 0; i < t.numel(); i += 2) p[i] = -p[i];
  return t;
}
double floor_div_ref(double a, double b) { return std::floor(a / b); }
double remainder_ref(double a, double b) { return a - std::floor(a / b) * b; }
/// Pushes a / b at least 0.05 away from an integer, so central differences do not straddle a jump.
TensorList away_from_jumps(TensorList in) {
  const Dims shape = broadcast_shapes(in[0].sizes(), in[1].sizes());
  if (IntArrayRef(shape) != IntArrayRef(in[0].sizes())) return in;
  const auto b = broadcast_values(in[1], shape);
  double* a = in[0].data<double>();
  for (int64_t i = 0; i < in[0].numel(); ++i) {
    const double q = a[i] / b[static_cast<std::size_t>(i)], frac = q - std::floor(q);
    if (frac < 0.05 || frac > 0.95) a[i] += 0.1 * b[static_cast<std::size_t>(i)];
  }
  return in;
}
OpCase division_case(std::string name, OpKind op, Dims as, Dims bs) {
  const bool floor = op == OpKind::floor_divide;
  OpCase c = binary_case(
      std::move(name), op,
      [floor](const Tensor& a, const Tensor& b) { return floor ? floor_divide(a, b) : remainder(a, b); },
      floor ? Fn2(floor_div_ref) : Fn2(remainder_ref), as, bs, dividends, divisors);
  const auto base = c.inputs;
  c.inputs = [base](Generator& g) { return away_from_jumps(base(g)); };
  if (floor) c.grad_inputs = {};
  return c;
}
STRATA_REGISTER_CASE(division_case("floor_divide/same_shape", OpKind::floor_divide, {3, 4}, {3, 4}));
STRATA_REGISTER_CASE(division_case("floor_divide/broadcast_row", OpKind::floor_divide, {3, 4}, {4}));
STRATA_REGISTER_CASE(division_case("remainder/same_shape", OpKind::remainder, {3, 4}, {3, 4}));
STRATA_REGISTER_CASE(division_case("remainder/broadcast_row", OpKind::remainder, {3, 4}, {4}));
STRATA_REGISTER_CASE(scalar_case(
    "remainder/scalar", OpKind::remainder, [](const Tensor& a) { return remainder(a, 0.75); },
    [](double a) { return remainder_ref(a, 0.75); }));

// where
OpCase where_case(std::string name, Dims cs, Dims as, Dims bs, bool u8) {
  OpCase c;
  c.name = std::move(name);
  c.op = OpKind::where;
  c.inputs = [=](Generator& g) {
    Tensor cond = randint64(0, 2, cs, g).to(u8 ? DType::u8 : DType::boolean);
    return TensorList{cond, any_values(as, g), any_values(bs, g)};
  };
  c.run = [](const TensorList& in) { return TensorList{where(in[0], in[1], in[2])}; };
  c.reference = [](const TensorList& in) {
    const Dims shape = broadcast_shapes(broadcast_shapes(in[0].sizes(), in[1].sizes()), in[2].sizes());
    const auto cv = broadcast_values(in[0], shape), a = broadcast_values(in[1], shape),
               b = broadcast_values(in[2], shape);
    std::vector<double> out(a.size());
    for (std::size_t i = 0; i < a.size(); ++i) out[i] = cv[i] != 0 ? a[i] : b[i];
    return TensorList{from_values(out, shape)};
  };
  c.grad_inputs = {1, 2};
  c.promotes = true;
  c.bench_inputs = [](Generator& g) {
    return TensorList{randint(0, 2, {256, 4096}, {DType::i64, nullptr}, &g).to(DType::boolean), randn32({256, 4096}, g),
                      randn32({256, 4096}, g)};
  };
  return c;
}
STRATA_REGISTER_CASE(where_case("where/same_shape", {3, 4}, {3, 4}, {3, 4}, false));
STRATA_REGISTER_CASE(where_case("where/broadcast_cond", {3, 1}, {3, 4}, {4}, false));
STRATA_REGISTER_CASE(where_case("where/u8_cond_broadcast_all", {4}, {2, 1, 4}, {3, 1}, true));

// ---- bad inputs ---------------------------------------------------------------------------------
Tensor f32(IntArrayRef s) { return ones(s); }
Tensor ints() { return zeros({2, 3}, {DType::i64, nullptr}); }
Tensor bools() { return zeros({2, 3}, {DType::boolean, nullptr}); }

STRATA_REGISTER_CASE(BadInputCase{"add/not_broadcastable",
                                  OpKind::add,
                                  [] { add(f32({2, 3}), f32({4})); },
                                  {"cannot broadcast", "Tensor[2, 3] f32", "Tensor[4] f32"}});
STRATA_REGISTER_CASE(BadInputCase{"add/float_alpha_for_integers",
                                  OpKind::add,
                                  [] { add(ints(), ints(), 0.5); },
                                  {"alpha must not be a floating point number", "i64"}});
STRATA_REGISTER_CASE(BadInputCase{"sub/not_broadcastable",
                                  OpKind::sub,
                                  [] { sub(f32({2, 3, 4}), f32({2, 3})); },
                                  {"Tensor[2, 3, 4] f32", "Tensor[2, 3] f32"}});
STRATA_REGISTER_CASE(BadInputCase{
    "sub/bool_operand", OpKind::sub, [] { sub(f32({2, 3}), bools()); }, {"bool", "logical_not"}});
STRATA_REGISTER_CASE(BadInputCase{"sub/bool_scalar", OpKind::sub, [] { sub(bools(), 1); }, {"bool"}});
STRATA_REGISTER_CASE(BadInputCase{
    "mul/not_broadcastable", OpKind::mul, [] { mul(f32({5}), f32({3})); }, {"Tensor[5] f32", "Tensor[3] f32"}});
STRATA_REGISTER_CASE(BadInputCase{
    "mul/undefined_other", OpKind::mul, [] { mul(f32({2}), Tensor()); }, {"other is undefined"}});
STRATA_REGISTER_CASE(BadInputCase{"div/not_broadcastable",
                                  OpKind::div,
                                  [] { div(f32({2, 2}), f32({3, 1})); },
                                  {"Tensor[2, 2] f32", "Tensor[3, 1] f32"}});
STRATA_REGISTER_CASE(BadInputCase{
    "div/undefined_input", OpKind::div, [] { div(1.0, Tensor()); }, {"input is undefined"}});
STRATA_REGISTER_CASE(BadInputCase{"maximum/not_broadcastable",
                                  OpKind::maximum,
                                  [] { maximum(f32({2}), f32({3})); },
                                  {"Tensor[2] f32", "Tensor[3] f32"}});
STRATA_REGISTER_CASE(BadInputCase{"minimum/not_broadcastable",
                                  OpKind::minimum,
                                  [] { minimum(f32({2}), f32({3})); },
                                  {"Tensor[2] f32", "Tensor[3] f32"}});
STRATA_REGISTER_CASE(BadInputCase{"floor_divide/integer_zero",
                                  OpKind::floor_divide,
                                  [] { floor_divide(ints(), zeros({3}, {DType::i32, nullptr})); },
                                  {"ZeroDivisionError"}});
STRATA_REGISTER_CASE(BadInputCase{
    "floor_divide/bool", OpKind::floor_divide, [] { floor_divide(bools(), bools()); }, {"bool"}});
STRATA_REGISTER_CASE(BadInputCase{
    "remainder/integer_zero_scalar", OpKind::remainder, [] { remainder(ints(), 0); }, {"ZeroDivisionError"}});
STRATA_REGISTER_CASE(BadInputCase{"remainder/not_broadcastable",
                                  OpKind::remainder,
                                  [] { remainder(f32({2}), f32({3})); },
                                  {"Tensor[2] f32", "Tensor[3] f32"}});
STRATA_REGISTER_CASE(BadInputCase{"where/float_condition",
                                  OpKind::where,
                                  [] { where(f32({2, 3}), f32({2, 3}), f32({2, 3})); },
                                  {"condition must be bool or u8", "Tensor[2, 3] f32"}});
STRATA_REGISTER_CASE(BadInputCase{"where/not_broadcastable",
                                  OpKind::where,
                                  [] { where(zeros({5}, {DType::boolean, nullptr}), f32({2, 3}), f32({3})); },
                                  {"Tensor[5] bool", "Tensor[2, 3] f32"}});
STRATA_REGISTER_CASE(BadInputCase{"where/operands_not_broadcastable",
                                  OpKind::where,
                                  [] { where(zeros({3}, {DType::boolean, nullptr}), f32({2, 3}), f32({4})); },
                                  {"Tensor[2, 3] f32", "Tensor[4] f32"}});

}  // namespace
}  // namespace strata::testing
