#include "tests/cpp/ops/harness/op_harness.h"

namespace strata::testing {

std::vector<OpCase>& op_cases() {
  static std::vector<OpCase> cases;
  return cases;
}

std::vector<BadInputCase>& bad_input_cases() {
  static std::vector<BadInputCase> cases;
  return cases;
}

Tensor uniform64(IntArrayRef sizes, Generator& gen, double lo, double hi) {
  return uniform(sizes, lo, hi, {DType::f64, nullptr}, &gen);
}

Tensor randn64(IntArrayRef sizes, Generator& gen) { return randn(sizes, {DType::f64, nullptr}, &gen); }

Tensor randn32(IntArrayRef sizes, Generator& gen) { return randn(sizes, {DType::f32, nullptr}, &gen); }

OpCase with_bench_inputs(OpCase c, std::function<TensorList(Generator&)> make) {
  c.bench_inputs = std::move(make);
  return c;
}

OpCase with_bench(OpCase c, Dims sizes) {
  return with_bench_inputs(std::move(c), [sizes](Generator& g) { return TensorList{randn32(sizes, g)}; });
}

OpCase with_bench(OpCase c, Dims sizes, double lo, double hi) {
  return with_bench_inputs(std::move(c), [sizes, lo, hi](Generator& g) {
    return TensorList{uniform(sizes, lo, hi, {DType::f32, nullptr}, &g)};
  });
}

Tensor randint64(int64_t lo, int64_t hi, IntArrayRef sizes, Generator& gen) {
  return randint(lo, hi, sizes, {DType::i64, nullptr}, &gen);
}

Tensor from_values(const std::vector<double>& values, IntArrayRef sizes) {
  Tensor t = empty(sizes, {DType::f64, nullptr});
  STRATA_CHECK(static_cast<std::size_t>(t.numel()) == values.size(), "from_values: ", values.size(),
               " values for shape ", sizes);
  std::copy(values.begin(), values.end(), t.data<double>());
  return t;
}

Tensor from_indices(const std::vector<int64_t>& values, IntArrayRef sizes) {
  Tensor t = empty(sizes, {DType::i64, nullptr});
  STRATA_CHECK(static_cast<std::size_t>(t.numel()) == values.size(), "from_indices: ", values.size(),
               " values for shape ", sizes);
  std::copy(values.begin(), values.end(), t.data<int64_t>());
  return t;
}

std::vector<double> values_of(const Tensor& t) {
  Tensor c = t.to(DType::f64).contiguous();
  const double* p = c.data<double>();
  return std::vector<double>(p, p + c.numel());
}

OpCase unary_case(std::string name, OpKind op, std::function<Tensor(const Tensor&)> fn,
                  std::function<double(double)> ref, std::function<Tensor(Generator&)> input) {
  OpCase c;
  c.name = std::move(name);
  c.op = op;
  c.inputs = [input](Generator& g) { return TensorList{input(g)}; };
  c.run = [fn](const TensorList& x) { return TensorList{fn(x[0])}; };
  c.reference = [ref](const TensorList& x) {
    auto v = values_of(x[0]);
    for (double& e : v) e = ref(e);
    return TensorList{from_values(v, x[0].sizes())};
  };
  c.grad_inputs = {0};
  return c;
}

Tensor broadcast_reference(const TensorList& in, const std::function<double(double, double)>& f) {
  const Dims shape = broadcast_shapes(in[0].sizes(), in[1].sizes());
  const auto a = values_of(in[0].expand(shape).contiguous());
  const auto b = values_of(in[1].expand(shape).contiguous());
  std::vector<double> out(a.size());
  for (std::size_t i = 0; i < a.size(); ++i) out[i] = f(a[i], b[i]);
  return from_values(out, shape);
}

std::vector<int64_t> indices_of(const Tensor& t) {
  Tensor c = t.to(DType::i64).contiguous();
  const int64_t* p = c.data<int64_t>();
  return std::vector<int64_t>(p, p + c.numel());
}

Tensor noncontiguous(const Tensor& t) {
  if (t.dim() == 0) return t;
  // Double the last dim and take every second element: same values, inner stride 2.
  Dims big = t.sizes();
  big.back() *= 2;
  Tensor storage = zeros(big, {t.dtype(), nullptr});
  Tensor view = storage.slice(t.dim() - 1, 0, std::nullopt, 2);
  view.copy_(t);
  if (t.dim() >= 2) {
    // And swap the memory order of the last two dims.
    Dims sw = t.sizes();
    std::swap(sw[sw.size() - 1], sw[sw.size() - 2]);
    sw.back() *= 2;
    Tensor s2 = zeros(sw, {t.dtype(), nullptr});
    Tensor v2 = s2.slice(t.dim() - 1, 0, std::nullopt, 2).transpose(-1, -2);
    v2.copy_(t);
    return v2;
  }
  return view;
}

Tensor with_nonfinite(IntArrayRef sizes, Generator& gen, int64_t shift) {
  Tensor t = uniform64(sizes, gen, -1.0, 1.0);
  double* p = t.data<double>();
  for (int64_t i = 0; i < t.numel(); ++i) {
    const int64_t k = i + shift;
    if (k % 5 == 1)
      p[i] = kNaN;
    else if (k % 7 == 2)
      p[i] = kInf;
    else if (k % 11 == 3)
      p[i] = -kInf;
    else if (k % 13 == 4)
      p[i] = 0.0;
    else if (k % 17 == 5)
      p[i] = -0.0;
  }
  return t;
}

}  // namespace strata::testing
