// Harness cases for ops/linalg.h.

#include "ops/linalg.h"

#include <algorithm>
#include <cmath>

#include "tests/cpp/ops/harness/op_harness.h"

namespace strata::testing {
namespace {

Tensor f32_zeros(IntArrayRef sizes) { return zeros(sizes, {DType::f32, nullptr}); }

/// torch.matmul on plain vectors: 1-D operands promoted and the added dims dropped, batch dims
/// broadcast.
Tensor ref_matmul(const Tensor& a, const Tensor& b) {
  const auto av = values_of(a), bv = values_of(b);
  Dims as = a.sizes(), bs = b.sizes();
  if (as.size() == 1) as.insert(0, 1);
  if (bs.size() == 1) bs.push_back(1);
  const std::size_t nb = std::max(as.size(), bs.size()) - 2;
  while (as.size() < nb + 2) as.insert(0, 1);
  while (bs.size() < nb + 2) bs.insert(0, 1);
  const int64_t n = as[nb], k = as[nb + 1], m = bs[nb + 1];
  Dims batch(nb);
  int64_t nbatch = 1;
  for (std::size_t d = 0; d < nb; ++d) {
    batch[d] = std::max(as[d], bs[d]);
    nbatch *= batch[d];
  }
  std::vector<double> out(static_cast<std::size_t>(nbatch * n * m), 0.0);
  for (int64_t o = 0; o < nbatch; ++o) {
    int64_t rem = o, ao = 0, bo = 0, astride = 1, bstride = 1;
    for (std::size_t d = nb; d-- > 0;) {
      const int64_t i = rem % batch[d];
      rem /= batch[d];
      if (as[d] != 1) ao += i * astride;
      if (bs[d] != 1) bo += i * bstride;
      astride *= as[d];
      bstride *= bs[d];
    }
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < m; ++j) {
        double s = 0;
        for (int64_t p = 0; p < k; ++p) s += av[ao * n * k + i * k + p] * bv[bo * k * m + p * m + j];
        out[o * n * m + i * m + j] = s;
      }
  }
  Dims out_sizes = batch;
  if (a.dim() > 1) out_sizes.push_back(n);
  if (b.dim() > 1) out_sizes.push_back(m);
  return from_values(out, out_sizes);
}

double act_ref(double v, Activation act) {
  switch (act) {
    case Activation::None: return v;
    case Activation::ReLU: return v < 0 ? 0 : v;  // PyTorch's: NaN stays NaN (Note [ReLU and NaN])
    case Activation::GELU: return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)));
    case Activation::Sigmoid: return 1 / (1 + std::exp(-v));
    case Activation::Tanh: return std::tanh(v);
  }
  return v;
}

/// act(x·Wᵀ + b) with plain loops; in[2] may be undefined (no bias).
Tensor ref_linear(const TensorList& in, Activation act) {
  const auto x = values_of(in[0]), w = values_of(in[1]);
  const bool has_bias = in.size() > 2 && in[2].defined();
  const auto b = has_bias ? values_of(in[2]) : std::vector<double>();
  const int64_t out = in[1].size(0), k = in[1].size(1), rows = in[0].numel() / k;
  std::vector<double> y(static_cast<std::size_t>(rows * out));
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < out; ++j) {
      double s = has_bias ? b[j] : 0.0;
      for (int64_t p = 0; p < k; ++p) s += x[i * k + p] * w[j * k + p];
      y[i * out + j] = act_ref(s, act);
    }
  Dims sizes = in[0].sizes();
  sizes.back() = out;
  return from_values(y, sizes);
}

/// Linear inputs whose pre-activations all stay at least `gap` away from 0 (ReLU's kink): redraws
/// until they do (each draw is deterministic in the generator).
TensorList linear_inputs(Generator& g, IntArrayRef x_sizes, int64_t out, bool bias, double gap) {
  const int64_t in = x_sizes.back();
  for (int attempt = 0; attempt < 1000; ++attempt) {
    TensorList t{uniform64(x_sizes, g), uniform64({out, in}, g)};
    if (bias) t.push_back(uniform64({out}, g));
    if (gap <= 0) return t;
    const Tensor z = ref_linear(t, Activation::None);
    const auto zv = values_of(z);
    if (std::all_of(zv.begin(), zv.end(), [&](double v) { return std::abs(v) >= gap; })) return t;
  }
  throw Error("linear_inputs: could not keep pre-activations away from 0");
}

// ---- matmul -----------------------------------------------------------------------------------------

OpCase matmul_case(std::string name, Dims a, Dims b) {
  return OpCase{
      .name = "matmul/" + name,
      .op = OpKind::matmul,
      .inputs = [a, b](Generator& g) { return TensorList{uniform64(a, g), uniform64(b, g)}; },
      .run = [](const TensorList& in) { return TensorList{matmul(in[0], in[1])}; },
      .reference = [](const TensorList& in) { return TensorList{ref_matmul(in[0], in[1])}; },
      .grad_inputs = {0, 1},
      .bench_inputs = {},
  };
}

STRATA_REGISTER_CASE(matmul_case("dot", {7}, {7}));
STRATA_REGISTER_CASE(matmul_case("vec_mat", {4}, {4, 3}));
STRATA_REGISTER_CASE(matmul_case("mat_vec", {3, 4}, {4}));
STRATA_REGISTER_CASE(matmul_case("batch_broadcast", {2, 1, 3, 4}, {5, 4, 2}));
// [B, n, k]·[k, m]: the batch folds into one GEMM (and the weight gradient into one K-long GEMM).
STRATA_REGISTER_CASE(matmul_case("batch_mat", {2, 3, 4}, {4, 5}));
// [n, k]·[B, k, m]: the gradient of the broadcast first argument sums over the batch.
STRATA_REGISTER_CASE(matmul_case("mat_batch", {3, 4}, {2, 4, 5}));
STRATA_REGISTER_CASE(matmul_case("batch_vec", {2, 3, 4}, {4}));
STRATA_REGISTER_CASE(matmul_case("vec_batch", {4}, {2, 4, 3}));
STRATA_REGISTER_CASE(matmul_case("both_broadcast", {3, 1, 2, 4}, {1, 2, 4, 3}));

STRATA_REGISTER_CASE([] {
  OpCase c = matmul_case("mat_mat", {3, 4}, {4, 5});
  c.bench_inputs = [](Generator& g) { return TensorList{randn32({1024, 1024}, g), randn32({1024, 1024}, g)}; };
  return c;
}());

STRATA_REGISTER_CASE(BadInputCase{
    .name = "matmul/inner_mismatch",
    .op = OpKind::matmul,
    .call = [] { matmul(f32_zeros({2, 3}), f32_zeros({4, 5})); },
    .expect = {"Tensor[2, 3] f32", "Tensor[4, 5] f32", "inner dimensions 3 and 4"},
});
STRATA_REGISTER_CASE(BadInputCase{
    .name = "matmul/vector_mismatch",
    .op = OpKind::matmul,
    .call = [] { matmul(f32_zeros({3}), f32_zeros({4})); },
    .expect = {"Tensor[3] f32", "Tensor[4] f32"},
});
STRATA_REGISTER_CASE(BadInputCase{
    .name = "matmul/batch_mismatch",
    .op = OpKind::matmul,
    .call = [] { matmul(f32_zeros({2, 3, 4}), f32_zeros({3, 4, 5})); },
    .expect = {"cannot broadcast", "Tensor[2, 3, 4] f32", "Tensor[3, 4, 5] f32"},
});
STRATA_REGISTER_CASE(BadInputCase{
    .name = "matmul/zero_dim",
    .op = OpKind::matmul,
    .call = [] { matmul(f32_zeros({}), f32_zeros({3})); },
    .expect = {"at least 1-D", "Tensor[3] f32"},
});
STRATA_REGISTER_CASE(BadInputCase{
    .name = "matmul/integer_input",
    .op = OpKind::matmul,
    .call = [] { matmul(zeros({2, 3}, {DType::i64, nullptr}), f32_zeros({3, 2})); },
    .expect = {"Tensor[2, 3] i64", "f32 or f64"},
});

// ---- linear -----------------------------------------------------------------------------------------

OpCase linear_case(std::string name, Dims x, int64_t out, bool bias, Activation act) {
  const double gap = act == Activation::ReLU ? 0.02 : 0.0;
  return OpCase{
      .name = "linear/" + name,
      .op = OpKind::linear,
      .inputs = [x, out, bias, gap](Generator& g) { return linear_inputs(g, x, out, bias, gap); },
      .run =
          [act](const TensorList& in) {
            return TensorList{linear(in[0], in[1], in.size() > 2 ? in[2] : Tensor(), act)};
          },
      .reference = [act](const TensorList& in) { return TensorList{ref_linear(in, act)}; },
      .grad_inputs = bias ? std::vector<int>{0, 1, 2} : std::vector<int>{0, 1},
      .bench_inputs = {},
  };
}

STRATA_REGISTER_CASE(linear_case("no_bias", {4, 6}, 5, false, Activation::None));
// Note [Non-finite cases]: the fused epilogues on rows with a NaN, a +inf, +inf and -inf, and a
// finite row, with a +inf and a -inf bias: relu(NaN) is NaN and its gradient passes there, as with
// PyTorch's relu(linear(...)) (Note [ReLU and NaN], ops/unary.cpp).
OpCase linear_nonfinite_case(std::string name, Activation act) {
  OpCase c = linear_case(std::move(name), {4, 6}, 5, true, act);
  c.inputs = [](Generator& g) {
    TensorList in = linear_inputs(g, {4, 6}, 5, true, 0.0);
    double* x = in[0].data<double>();
    x[6 + 2] = kNaN;
    x[12 + 1] = kInf;
    x[18 + 0] = kInf;
    x[18 + 4] = -kInf;
    double* b = in[2].data<double>();
    b[1] = kInf;
    b[3] = -kInf;
    return in;
  };
  c.grad_reference = [act](const TensorList& in, const TensorList& wt) {
    const auto x = values_of(in[0]), w = values_of(in[1]), y = values_of(ref_linear(in, act)), gy = values_of(wt[0]);
    const int64_t rows = 4, k = 6, out = 5;
    std::vector<double> gz(gy.size()), gx(x.size(), 0.0), gw(w.size(), 0.0), gb(out, 0.0);
    for (std::size_t i = 0; i < gy.size(); ++i) {
      if (act == Activation::ReLU)
        gz[i] = !(y[i] <= 0) ? gy[i] : 0.0;  // threshold_backward
      else
        gz[i] = gy[i] * y[i] * (1 - y[i]);  // sigmoid
    }
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < out; ++j) {
        gb[j] += gz[i * out + j];
        for (int64_t p = 0; p < k; ++p) {
          gx[i * k + p] += gz[i * out + j] * w[j * k + p];
          gw[j * k + p] += gz[i * out + j] * x[i * k + p];
        }
      }
    return TensorList{from_values(gx, in[0].sizes()), from_values(gw, in[1].sizes()), from_values(gb, in[2].sizes())};
  };
  return c;
}

STRATA_REGISTER_CASE(linear_nonfinite_case("nonfinite_relu", Activation::ReLU));
STRATA_REGISTER_CASE(linear_nonfinite_case("nonfinite_sigmoid", Activation::Sigmoid));

STRATA_REGISTER_CASE([] {
  OpCase c = linear_case("bias", {4, 6}, 5, true, Activation::None);
  c.bench_inputs = [](Generator& g) {
    return TensorList{randn32({32, 256}, g), randn32({256, 256}, g), randn32({256}, g)};
  };
  return c;
}());
STRATA_REGISTER_CASE([] {
  OpCase c = linear_case("relu", {4, 6}, 5, true, Activation::ReLU);
  c.bench_inputs = [](Generator& g) {
    return TensorList{randn32({256, 1024}, g), randn32({1024, 1024}, g), randn32({1024}, g)};
  };
  return c;
}());
STRATA_REGISTER_CASE(linear_case("relu_no_bias", {4, 6}, 5, false, Activation::ReLU));
STRATA_REGISTER_CASE(linear_case("gelu", {4, 6}, 5, true, Activation::GELU));
STRATA_REGISTER_CASE(linear_case("gelu_no_bias", {4, 6}, 5, false, Activation::GELU));
STRATA_REGISTER_CASE(linear_case("sigmoid", {4, 6}, 5, true, Activation::Sigmoid));
STRATA_REGISTER_CASE(linear_case("tanh", {4, 6}, 5, true, Activation::Tanh));
STRATA_REGISTER_CASE(linear_case("input_3d", {2, 3, 4}, 5, true, Activation::ReLU));
STRATA_REGISTER_CASE(linear_case("input_1d", {6}, 4, true, Activation::Tanh));

STRATA_REGISTER_CASE(BadInputCase{
    .name = "linear/in_features_mismatch",
    .op = OpKind::linear,
    .call = [] { linear(f32_zeros({2, 5}), f32_zeros({4, 3})); },
    .expect = {"Tensor[2, 5] f32", "Tensor[4, 3] f32"},
});
STRATA_REGISTER_CASE(BadInputCase{
    .name = "linear/weight_rank",
    .op = OpKind::linear,
    .call = [] { linear(f32_zeros({2, 3}), f32_zeros({3})); },
    .expect = {"weight must be 2-D", "Tensor[3] f32"},
});
STRATA_REGISTER_CASE(BadInputCase{
    .name = "linear/bias_size",
    .op = OpKind::linear,
    .call = [] { linear(f32_zeros({2, 3}), f32_zeros({4, 3}), f32_zeros({5})); },
    .expect = {"bias", "Tensor[5] f32", "Tensor[4, 3] f32"},
});
STRATA_REGISTER_CASE(BadInputCase{
    .name = "linear/bias_rank",
    .op = OpKind::linear,
    .call = [] { linear(f32_zeros({2, 3}), f32_zeros({4, 3}), f32_zeros({1, 4})); },
    .expect = {"bias", "Tensor[1, 4] f32"},
});
STRATA_REGISTER_CASE(BadInputCase{
    .name = "linear/zero_dim_input",
    .op = OpKind::linear,
    .call = [] { linear(f32_zeros({}), f32_zeros({4, 3})); },
    .expect = {"at least 1-D"},
});
STRATA_REGISTER_CASE(BadInputCase{
    .name = "linear/integer_input",
    .op = OpKind::linear,
    .call = [] { linear(zeros({2, 3}, {DType::i32, nullptr}), f32_zeros({4, 3})); },
    .expect = {"Tensor[2, 3] i32", "f32 or f64"},
});
STRATA_REGISTER_CASE(BadInputCase{
    .name = "linear/bias_dtype",
    .op = OpKind::linear,
    .call = [] { linear(f32_zeros({2, 3}), f32_zeros({4, 3}), zeros({4}, {DType::f64, nullptr})); },
    .expect = {"Tensor[2, 3] f32", "Tensor[4] f64"},
});

// ---- bmm --------------------------------------------------------------------------------------------

STRATA_REGISTER_CASE(OpCase{
    .name = "bmm/basic",
    .op = OpKind::bmm,
    .inputs = [](Generator& g) { return TensorList{uniform64({3, 2, 4}, g), uniform64({3, 4, 5}, g)}; },
    .run = [](const TensorList& in) { return TensorList{bmm(in[0], in[1])}; },
    .reference = [](const TensorList& in) { return TensorList{ref_matmul(in[0], in[1])}; },
    .grad_inputs = {0, 1},
    .bench_inputs = [](Generator& g) { return TensorList{randn32({64, 128, 64}, g), randn32({64, 64, 128}, g)}; },
});

STRATA_REGISTER_CASE(BadInputCase{
    .name = "bmm/rank",
    .op = OpKind::bmm,
    .call = [] { bmm(f32_zeros({2, 3}), f32_zeros({2, 3, 4})); },
    .expect = {"3-D", "Tensor[2, 3] f32"},
});
STRATA_REGISTER_CASE(BadInputCase{
    .name = "bmm/batch_mismatch",
    .op = OpKind::bmm,
    .call = [] { bmm(f32_zeros({2, 3, 4}), f32_zeros({3, 4, 5})); },
    .expect = {"batch", "Tensor[2, 3, 4] f32", "Tensor[3, 4, 5] f32"},
});
STRATA_REGISTER_CASE(BadInputCase{
    .name = "bmm/inner_mismatch",
    .op = OpKind::bmm,
    .call = [] { bmm(f32_zeros({2, 3, 4}), f32_zeros({2, 5, 6})); },
    .expect = {"Tensor[2, 3, 4] f32", "Tensor[2, 5, 6] f32", "inner dimensions 4 and 5"},
});
STRATA_REGISTER_CASE(BadInputCase{
    .name = "bmm/integer_input",
    .op = OpKind::bmm,
    .call = [] { bmm(f32_zeros({2, 3, 4}), zeros({2, 4, 5}, {DType::i64, nullptr})); },
    .expect = {"Tensor[2, 4, 5] i64", "f32 or f64"},
});

}  // namespace
}  // namespace strata::testing
