// Harness cases for ops/comparison.h: comparisons, logical and bitwise ops (bool outputs, never
// differentiable). The integer and bool kernels and their promotion are in test_promotion.cpp.

#include "ops/comparison.h"

#include <functional>

#include "tests/cpp/ops/harness/op_harness.h"

namespace strata::testing {
namespace {

using Pred = std::function<bool(double, double)>;
using Fn = std::function<Tensor(const Tensor&, const Tensor&)>;

/// Values in {-1, -0.5, 0, 0.5, 1}: equal pairs are common, so == and <= meet ties.
Tensor coarse(IntArrayRef sizes, Generator& g) {
  Tensor t = randint64(-2, 3, sizes, g).to(DType::f64);
  double* p = t.data<double>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] *= 0.5;
  return t;
}

/// Values of `t` broadcast to `shape`, row-major.
std::vector<double> broadcast_to_values(const Tensor& t, IntArrayRef shape) {
  return values_of(t.expand(shape).contiguous());
}

OpCase predicate_case(std::string name, OpKind op, Fn fn, Pred ref, Dims as, Dims bs) {
  OpCase c;
  c.name = std::move(name);
  c.op = op;
  c.inputs = [as, bs](Generator& g) { return TensorList{coarse(as, g), coarse(bs, g)}; };
  c.run = [fn](const TensorList& in) { return TensorList{fn(in[0], in[1])}; };
  c.reference = [ref](const TensorList& in) {
    const Dims shape = broadcast_shapes(in[0].sizes(), in[1].sizes());
    const auto a = broadcast_to_values(in[0], shape), b = broadcast_to_values(in[1], shape);
    std::vector<double> out(a.size());
    for (std::size_t i = 0; i < a.size(); ++i) out[i] = ref(a[i], b[i]) ? 1.0 : 0.0;
    return TensorList{from_values(out, shape)};
  };
  c.promotes = true;
  c.bench_inputs = [](Generator& g) { return TensorList{randn32({256, 4096}, g), randn32({256, 4096}, g)}; };
  return c;
}

/// Registers "<op>/same_shape" and "<op>/broadcast" for a predicate op.
bool register_predicate(const std::string& name, OpKind op, const Fn& fn, const Pred& ref) {
  op_cases().push_back(predicate_case(name + "/same_shape", op, fn, ref, {3, 4}, {3, 4}));
  op_cases().push_back(predicate_case(name + "/broadcast", op, fn, ref, {2, 3, 1}, {4}));
  return true;
}
#define STRATA_PREDICATE(OP, EXPR)                                                \
  const bool registered_##OP = register_predicate(                                \
      #OP, OpKind::OP, [](const Tensor& a, const Tensor& b) { return OP(a, b); }, \
      [](double x, double y) { return EXPR; });
STRATA_PREDICATE(eq, x == y)
STRATA_PREDICATE(ne, x != y)
STRATA_PREDICATE(lt, x < y)
STRATA_PREDICATE(le, x <= y)
STRATA_PREDICATE(gt, x > y)
STRATA_PREDICATE(ge, x >= y)
STRATA_PREDICATE(logical_and, x != 0 && y != 0)
STRATA_PREDICATE(logical_or, x != 0 || y != 0)
STRATA_PREDICATE(logical_xor, (x != 0) != (y != 0))
#undef STRATA_PREDICATE

// Comparisons with a number, in the tensor's dtype.
STRATA_REGISTER_CASE(OpCase{
    .name = "lt/scalar",
    .op = OpKind::lt,
    .inputs = [](Generator& g) { return TensorList{coarse({4, 5}, g)}; },
    .run = [](const TensorList& in) { return TensorList{lt(in[0], 0.25)}; },
    .reference =
        [](const TensorList& in) {
          auto v = values_of(in[0]);
          for (double& e : v) e = e < 0.25 ? 1.0 : 0.0;
          return TensorList{from_values(v, in[0].sizes())};
        },
});

STRATA_REGISTER_CASE(OpCase{
    .name = "logical_not/basic",
    .op = OpKind::logical_not,
    .inputs = [](Generator& g) { return TensorList{coarse({4, 5}, g)}; },
    .run = [](const TensorList& in) { return TensorList{logical_not(in[0])}; },
    .reference =
        [](const TensorList& in) {
          auto v = values_of(in[0]);
          for (double& e : v) e = e == 0.0 ? 1.0 : 0.0;
          return TensorList{from_values(v, in[0].sizes())};
        },
});

// Note [Non-finite cases]: NaN compares unequal to everything (ne is true), ±inf order as numbers,
// and NaN is true for the logical ops.
OpCase nonfinite_predicate(std::string name, OpKind op, Fn fn, Pred ref) {
  OpCase c = predicate_case(std::move(name), op, std::move(fn), std::move(ref), {4, 9}, {4, 9});
  c.inputs = [](Generator& g) { return TensorList{with_nonfinite({4, 9}, g), with_nonfinite({4, 9}, g, 3)}; };
  c.bench_inputs = nullptr;
  return c;
}
STRATA_REGISTER_CASE(nonfinite_predicate(
    "eq/nonfinite", OpKind::eq, [](const Tensor& a, const Tensor& b) { return eq(a, b); },
    [](double x, double y) { return x == y; }));
STRATA_REGISTER_CASE(nonfinite_predicate(
    "ne/nonfinite", OpKind::ne, [](const Tensor& a, const Tensor& b) { return ne(a, b); },
    [](double x, double y) { return x != y; }));
STRATA_REGISTER_CASE(nonfinite_predicate(
    "le/nonfinite", OpKind::le, [](const Tensor& a, const Tensor& b) { return le(a, b); },
    [](double x, double y) { return x <= y; }));
STRATA_REGISTER_CASE(nonfinite_predicate(
    "logical_and/nonfinite", OpKind::logical_and, [](const Tensor& a, const Tensor& b) { return logical_and(a, b); },
    [](double x, double y) { return x != 0 && y != 0; }));

// Bitwise ops take integers and bool only: their harness cases run on bool masks made from the
// f64 inputs (x > 0), so the f64/f32 runs compare the same masks.
OpCase bitwise_case(std::string name, OpKind op, Fn fn, Pred ref) {
  OpCase c = predicate_case(std::move(name), op, std::move(fn), std::move(ref), {3, 4}, {4});
  c.bench_inputs = nullptr;
  return c;
}
Tensor mask(const Tensor& x) { return gt(x, 0.0); }
STRATA_REGISTER_CASE(bitwise_case(
    "bitwise_and/masks", OpKind::bitwise_and,
    [](const Tensor& a, const Tensor& b) { return bitwise_and(mask(a), mask(b)); },
    [](double x, double y) { return x > 0 && y > 0; }));
STRATA_REGISTER_CASE(bitwise_case(
    "bitwise_or/masks", OpKind::bitwise_or,
    [](const Tensor& a, const Tensor& b) { return bitwise_or(mask(a), mask(b)); },
    [](double x, double y) { return x > 0 || y > 0; }));
STRATA_REGISTER_CASE(bitwise_case(
    "bitwise_xor/masks", OpKind::bitwise_xor,
    [](const Tensor& a, const Tensor& b) { return bitwise_xor(mask(a), mask(b)); },
    [](double x, double y) { return (x > 0) != (y > 0); }));
STRATA_REGISTER_CASE(OpCase{
    .name = "bitwise_not/mask",
    .op = OpKind::bitwise_not,
    .inputs = [](Generator& g) { return TensorList{coarse({4, 5}, g)}; },
    .run = [](const TensorList& in) { return TensorList{bitwise_not(mask(in[0]))}; },
    .reference =
        [](const TensorList& in) {
          auto v = values_of(in[0]);
          for (double& e : v) e = e > 0 ? 0.0 : 1.0;
          return TensorList{from_values(v, in[0].sizes())};
        },
});

// ---- bad inputs ---------------------------------------------------------------------------------
Tensor f32(IntArrayRef s) { return ones(s); }

STRATA_REGISTER_CASE(BadInputCase{"eq/not_broadcastable",
                                  OpKind::eq,
                                  [] { eq(f32({2, 3}), f32({4})); },
                                  {"cannot broadcast", "Tensor[2, 3] f32", "Tensor[4] f32"}});
STRATA_REGISTER_CASE(BadInputCase{
    "ne/undefined_other", OpKind::ne, [] { ne(f32({2}), Tensor()); }, {"other is undefined"}});
STRATA_REGISTER_CASE(BadInputCase{
    "lt/not_broadcastable", OpKind::lt, [] { lt(f32({3}), f32({2})); }, {"Tensor[3] f32"}});
STRATA_REGISTER_CASE(BadInputCase{"le/undefined_input", OpKind::le, [] { le(Tensor(), 1.0); }, {"input is undefined"}});
STRATA_REGISTER_CASE(BadInputCase{
    "gt/not_broadcastable", OpKind::gt, [] { gt(f32({3}), f32({2})); }, {"Tensor[2] f32"}});
STRATA_REGISTER_CASE(BadInputCase{
    "ge/not_broadcastable", OpKind::ge, [] { ge(f32({3, 1}), f32({2, 5})); }, {"Tensor[2, 5] f32"}});
STRATA_REGISTER_CASE(BadInputCase{
    "logical_and/not_broadcastable", OpKind::logical_and, [] { logical_and(f32({3}), f32({2})); }, {"Tensor[3] f32"}});
STRATA_REGISTER_CASE(BadInputCase{
    "logical_or/undefined_other", OpKind::logical_or, [] { logical_or(f32({3}), Tensor()); }, {"other is undefined"}});
STRATA_REGISTER_CASE(BadInputCase{
    "logical_xor/not_broadcastable", OpKind::logical_xor, [] { logical_xor(f32({3}), f32({2})); }, {"Tensor[2] f32"}});
STRATA_REGISTER_CASE(BadInputCase{
    "logical_not/undefined", OpKind::logical_not, [] { logical_not(Tensor()); }, {"input is undefined"}});
STRATA_REGISTER_CASE(BadInputCase{"bitwise_and/float",
                                  OpKind::bitwise_and,
                                  [] { bitwise_and(f32({3}), f32({3})); },
                                  {"only integer and bool", "Tensor[3] f32"}});
STRATA_REGISTER_CASE(BadInputCase{"bitwise_or/float_scalar",
                                  OpKind::bitwise_or,
                                  [] { bitwise_or(zeros({3}, {DType::i64, nullptr}), 1.5); },
                                  {"only integer and bool"}});
STRATA_REGISTER_CASE(BadInputCase{"bitwise_xor/float_other",
                                  OpKind::bitwise_xor,
                                  [] { bitwise_xor(zeros({3}, {DType::boolean, nullptr}), f32({3})); },
                                  {"only integer and bool", "Tensor[3] f32"}});
STRATA_REGISTER_CASE(BadInputCase{"bitwise_not/float",
                                  OpKind::bitwise_not,
                                  [] { bitwise_not(f32({2})); },
                                  {"only integer and bool", "Tensor[2] f32"}});

}  // namespace
}  // namespace strata::testing
