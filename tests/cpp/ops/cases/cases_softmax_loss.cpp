// Harness cases for ops/softmax_loss.h.

#include "ops/softmax_loss.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "tests/cpp/ops/harness/op_harness.h"

namespace strata::testing {
namespace {

const char* reduction_name(Reduction r) {
  return r == Reduction::None ? "none" : r == Reduction::Mean ? "mean" : "sum";
}

/// Per-element losses → the op's output for `r` (Mean divides by `denom`, default: the count).
Tensor reduce_ref(const std::vector<double>& v, IntArrayRef shape, Reduction r, double denom = -1) {
  if (r == Reduction::None) return from_values(v, shape);
  double s = 0;
  for (double x : v) s += x;
  if (r == Reduction::Mean) s /= denom < 0 ? static_cast<double>(v.size()) : denom;
  return from_values({s}, Dims{});
}

// ---- softmax / log_softmax ----------------------------------------------------------------------

Tensor softmax_ref(const Tensor& x, int64_t dim, bool log) {
  const auto v = values_of(x);
  const int64_t rank = x.dim();
  if (dim < 0) dim += rank;
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= x.size(d);
  for (int64_t d = dim + 1; d < rank; ++d) inner *= x.size(d);
  const int64_t C = x.size(dim);
  std::vector<double> y(v.size());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      double m = -INFINITY, s = 0;
      for (int64_t c = 0; c < C; ++c) m = std::max(m, v[(o * C + c) * inner + i]);
      for (int64_t c = 0; c < C; ++c) s += std::exp(v[(o * C + c) * inner + i] - m);
      for (int64_t c = 0; c < C; ++c) {
        const int64_t k = (o * C + c) * inner + i;
        y[k] = log ? v[k] - m - std::log(s) : std::exp(v[k] - m) / s;
      }
    }
  return from_values(y, x.sizes());
}

const bool softmax_registered = [] {
  struct Spec {
    std::string name;
    Dims shape;
    int64_t dim;
    bool bench;
  };
  const std::vector<Spec> specs = {
      {"3d_dim0", {3, 4, 5}, 0, false},
      {"3d_dim1", {3, 4, 5}, 1, false},
      {"3d_dim_last", {3, 4, 5}, -1, false},
      {"2d_dim1", {256, 1000}, 1, true},
      {"1d", {7}, 0, false},
  };
  for (bool log : {false, true}) {
    for (const Spec& sp : specs) {
      OpCase c{
          .name = std::string(log ? "log_softmax/" : "softmax/") + sp.name,
          .op = log ? OpKind::log_softmax : OpKind::softmax,
          .inputs =
              [sp](Generator& g) {
                // Small test shape for the bench layout; scaled so the row max matters.
                Dims s = sp.bench ? Dims{4, 9} : sp.shape;
                Tensor t = randn64(s, g);
                double* p = t.data<double>();
                for (int64_t i = 0; i < t.numel(); ++i) p[i] *= 3.0;
                return TensorList{t};
              },
          .run =
              [sp, log](const TensorList& in) {
                return TensorList{log ? log_softmax(in[0], sp.dim) : softmax(in[0], sp.dim)};
              },
          .reference = [sp, log](const TensorList& in) { return TensorList{softmax_ref(in[0], sp.dim, log)}; },
          .grad_inputs = {0},
      };
      if (sp.bench) c.bench_inputs = [sp](Generator& g) { return TensorList{randn32(sp.shape, g)}; };
      op_cases().push_back(std::move(c));
    }
  }
  op_cases().push_back(OpCase{
      .name = "softmax/large_values",
      .op = OpKind::softmax,
      .inputs = [](Generator&) { return TensorList{from_values({1000, 1001, 999, -1000, 0, 1000.5}, {2, 3})}; },
      .run = [](const TensorList& in) { return TensorList{softmax(in[0], 1)}; },
      .reference = [](const TensorList& in) { return TensorList{softmax_ref(in[0], 1, false)}; },
      .grad_inputs = {0},
  });
  op_cases().push_back(OpCase{
      .name = "log_softmax/large_values",
      .op = OpKind::log_softmax,
      .inputs = [](Generator&) { return TensorList{from_values({1000, 1001, 999, -1000, 0, 1000.5}, {2, 3})}; },
      .run = [](const TensorList& in) { return TensorList{log_softmax(in[0], -1)}; },
      .reference = [](const TensorList& in) { return TensorList{softmax_ref(in[0], 1, true)}; },
      .grad_inputs = {0},
      // log_softmax of 1000.5 - 1001 etc.: f32 keeps ~1e-4 absolute precision at that magnitude.
      .f32_atol = 1e-3,
  });
  return true;
}();

// Note [Non-finite cases]: rows that are finite, hold a -inf, are all -inf (NaN), hold a +inf (NaN),
// two +inf (NaN), a NaN (NaN), as PyTorch's softmax gives them; along the last dim (rows) and along
// dim 0 (the strided kernel). Gradients by PyTorch's formulas: softmax y (g - Σ g y), log_softmax
// g - e^y Σ g.
Tensor nonfinite_rows() {
  return from_values({0.5,   -1.0,  2.0,   0.25,   //
                      -kInf, 1.0,   2.0,   -0.5,   //
                      -kInf, -kInf, -kInf, -kInf,  //
                      kInf,  1.0,   2.0,   3.0,    //
                      kInf,  kInf,  0.0,   0.0,    //
                      kNaN,  1.0,   2.0,   3.0},
                     {6, 4});
}

TensorList softmax_grad_ref(const Tensor& x, const Tensor& w, int64_t dim, bool log) {
  const Tensor yt = softmax_ref(x, dim, log);
  const auto y = values_of(yt), g = values_of(w);
  const int64_t R = x.size(0), C = x.size(1);
  std::vector<double> gx(y.size());
  // dim 1: slices are rows (stride 1, C long); dim 0: columns (stride C, R long).
  const int64_t slices = dim == 1 ? R : C, len = dim == 1 ? C : R, step = dim == 1 ? 1 : C;
  for (int64_t sl = 0; sl < slices; ++sl) {
    const int64_t base = dim == 1 ? sl * C : sl;
    double dot = 0;
    for (int64_t j = 0; j < len; ++j) dot += log ? g[base + j * step] : g[base + j * step] * y[base + j * step];
    for (int64_t j = 0; j < len; ++j) {
      const int64_t k = base + j * step;
      gx[k] = log ? g[k] - std::exp(y[k]) * dot : y[k] * (g[k] - dot);
    }
  }
  return {from_values(gx, x.sizes())};
}

const bool softmax_nonfinite_registered = [] {
  for (bool log : {false, true})
    for (int64_t dim : {1, 0}) {
      op_cases().push_back(OpCase{
          .name = std::string(log ? "log_softmax" : "softmax") + "/nonfinite_dim" + std::to_string(dim),
          .op = log ? OpKind::log_softmax : OpKind::softmax,
          .inputs =
              [dim](Generator&) { return TensorList{dim == 1 ? nonfinite_rows() : nonfinite_rows().t().contiguous()}; },
          .run = [dim, log](
                     const TensorList& in) { return TensorList{log ? log_softmax(in[0], dim) : softmax(in[0], dim)}; },
          .reference = [dim, log](const TensorList& in) { return TensorList{softmax_ref(in[0], dim, log)}; },
          .grad_inputs = {0},
          .grad_reference = [dim, log](const TensorList& in,
                                       const TensorList& w) { return softmax_grad_ref(in[0], w[0], dim, log); },
      });
    }
  return true;
}();

STRATA_REGISTER_CASE(BadInputCase{
    .name = "softmax/dim_out_of_range",
    .op = OpKind::softmax,
    .call = [] { softmax(zeros({2, 3}), 2); },
    .expect = {"dim 2", "Tensor[2, 3] f32", "[-2, 1]"},
});
STRATA_REGISTER_CASE(BadInputCase{
    .name = "softmax/integer_input",
    .op = OpKind::softmax,
    .call = [] { softmax(zeros({2, 3}, {DType::i64, nullptr}), 1); },
    .expect = {"Tensor[2, 3] i64", "f32 or f64"},
});
STRATA_REGISTER_CASE(BadInputCase{
    .name = "log_softmax/dim_out_of_range",
    .op = OpKind::log_softmax,
    .call = [] { log_softmax(zeros({2, 3, 4}), -4); },
    .expect = {"dim -4", "Tensor[2, 3, 4] f32"},
});
STRATA_REGISTER_CASE(BadInputCase{
    .name = "log_softmax/integer_input",
    .op = OpKind::log_softmax,
    .call = [] { log_softmax(zeros({3}, {DType::i32, nullptr}), 0); },
    .expect = {"Tensor[3] i32", "f32 or f64"},
});

// ---- element-wise losses ------------------------------------------------------------------------

const std::vector<Reduction> kReductions = {Reduction::None, Reduction::Mean, Reduction::Sum};

const bool mse_registered = [] {
  for (Reduction r : kReductions) {
    OpCase c{
        .name = std::string("mse_loss/") + reduction_name(r),
        .op = OpKind::mse_loss,
        .inputs = [](Generator& g) { return TensorList{randn64({4, 5}, g), randn64({4, 5}, g)}; },
        .run = [r](const TensorList& in) { return TensorList{mse_loss(in[0], in[1], r)}; },
        .reference =
            [r](const TensorList& in) {
              auto x = values_of(in[0]), t = values_of(in[1]);
              for (std::size_t i = 0; i < x.size(); ++i) x[i] = (x[i] - t[i]) * (x[i] - t[i]);
              return TensorList{reduce_ref(x, in[0].sizes(), r)};
            },
        .grad_inputs = {0, 1},
    };
    if (r == Reduction::Mean)
      c.bench_inputs = [](Generator& g) { return TensorList{randn32({256, 1024}, g), randn32({256, 1024}, g)}; };
    op_cases().push_back(std::move(c));
  }
  return true;
}();

// l1_loss: |x - t|; the inputs stay apart (|x - t| >= 0.1) so finite differences see no kink.
const bool l1_registered = [] {
  for (Reduction r : kReductions)
    op_cases().push_back(OpCase{
        .name = std::string("l1_loss/") + reduction_name(r),
        .op = OpKind::l1_loss,
        .inputs =
            [](Generator& g) {
              Tensor x = randn64({3, 7}, g), t = randn64({3, 7}, g);
              double *xp = x.data<double>(), *tp = t.data<double>();
              for (int64_t i = 0; i < x.numel(); ++i)
                if (std::abs(xp[i] - tp[i]) < 0.1) xp[i] = tp[i] + (xp[i] < tp[i] ? -0.1 : 0.1);
              return TensorList{x, t};
            },
        .run = [r](const TensorList& in) { return TensorList{l1_loss(in[0], in[1], r)}; },
        .reference =
            [r](const TensorList& in) {
              auto x = values_of(in[0]), t = values_of(in[1]);
              for (std::size_t i = 0; i < x.size(); ++i) x[i] = std::abs(x[i] - t[i]);
              return TensorList{reduce_ref(x, in[0].sizes(), r)};
            },
        .grad_inputs = {0, 1},
    });
  return true;
}();

/// Reference weights broadcast to `shape` (row-major; trailing alignment).
std::vector<double> broadcast_ref(const Tensor& w, IntArrayRef shape) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  if (!w.defined()) return std::vector<double>(n, 1.0);
  const auto wv = values_of(w);
  std::vector<double> out(n);
  const int64_t rank = static_cast<int64_t>(shape.size()), wr = w.dim();
  for (int64_t i = 0; i < n; ++i) {
    int64_t rem = i, widx = 0, wstride = 1;
    for (int64_t d = rank - 1; d >= 0; --d) {
      const int64_t id = rem % shape[d];
      rem /= shape[d];
      const int64_t wd = d - (rank - wr);
      if (wd >= 0) {
        const int64_t ws = w.size(wd);
        widx += (ws == 1 ? 0 : id) * wstride;
        wstride *= ws;
      }
    }
    out[i] = wv[widx];
  }
  return out;
}

const bool bce_registered = [] {
  struct Spec {
    std::string name;
    Reduction r;
    Dims weight;  // empty: none
    bool has_weight;
  };
  const std::vector<Spec> specs = {
      {"none", Reduction::None, {}, false},
      {"mean", Reduction::Mean, {}, false},
      {"sum", Reduction::Sum, {}, false},
      {"weight_full", Reduction::Mean, {4, 5}, true},
      {"weight_broadcast", Reduction::Sum, {5}, true},
      {"weight_none", Reduction::None, {4, 1}, true},
  };
  for (const Spec& sp : specs) {
    OpCase c{
        .name = "binary_cross_entropy/" + sp.name,
        .op = OpKind::binary_cross_entropy,
        .inputs =
            [sp](Generator& g) {
              return TensorList{uniform64({4, 5}, g, 0.05, 0.95), uniform64({4, 5}, g, 0.0, 1.0),
                                sp.has_weight ? uniform64(sp.weight, g, 0.5, 2.0) : Tensor()};
            },
        .run = [sp](const TensorList& in) { return TensorList{binary_cross_entropy(in[0], in[1], in[2], sp.r)}; },
        .reference =
            [sp](const TensorList& in) {
              auto x = values_of(in[0]), t = values_of(in[1]);
              const auto w = broadcast_ref(in[2], in[0].sizes());
              std::vector<double> l(x.size());
              for (std::size_t i = 0; i < x.size(); ++i)
                l[i] = -w[i] *
                       (t[i] * std::max(std::log(x[i]), -100.0) + (1 - t[i]) * std::max(std::log(1 - x[i]), -100.0));
              return TensorList{reduce_ref(l, in[0].sizes(), sp.r)};
            },
        .grad_inputs = {0, 1},
    };
    if (sp.name == "mean")
      c.bench_inputs = [](Generator& g) {
        return TensorList{uniform64({2048, 1}, g, 0.05, 0.95).to(DType::f32),
                          uniform64({2048, 1}, g, 0, 1).to(DType::f32), Tensor()};
      };
    op_cases().push_back(std::move(c));
  }
  // Inputs at exactly 0 and 1: the logs are clamped to -100 as in PyTorch (forward only).
  op_cases().push_back(OpCase{
      .name = "binary_cross_entropy/clamped_log",
      .op = OpKind::binary_cross_entropy,
      .inputs =
          [](Generator&) { return TensorList{from_values({0.0, 1.0, 0.5}, {3}), from_values({1.0, 0.0, 0.25}, {3})}; },
      .run =
          [](const TensorList& in) {
            return TensorList{binary_cross_entropy(in[0], in[1], Tensor(), Reduction::None)};
          },
      .reference =
          [](const TensorList&) {
            return TensorList{from_values({100.0, 100.0, -0.25 * std::log(0.5) - 0.75 * std::log(0.5)}, {3})};
          },
  });
  return true;
}();

const bool bce_logits_registered = [] {
  struct Spec {
    std::string name;
    Reduction r;
    Dims weight, pos_weight;  // empty: none
  };
  const std::vector<Spec> specs = {
      {"none", Reduction::None, {}, {}},
      {"mean", Reduction::Mean, {}, {}},
      {"sum", Reduction::Sum, {}, {}},
      {"weight", Reduction::Mean, {4, 5}, {}},
      {"pos_weight", Reduction::Mean, {}, {5}},
      {"weight_and_pos_weight", Reduction::None, {4, 1}, {5}},
      {"pos_weight_sum", Reduction::Sum, {}, {1}},
  };
  for (const Spec& sp : specs) {
    OpCase c{
        .name = "binary_cross_entropy_with_logits/" + sp.name,
        .op = OpKind::binary_cross_entropy_with_logits,
        .inputs =
            [sp](Generator& g) {
              Tensor x = randn64({4, 5}, g);
              double* p = x.data<double>();
              for (int64_t i = 0; i < x.numel(); ++i) p[i] *= 3.0;
              return TensorList{x, uniform64({4, 5}, g, 0.0, 1.0),
                                sp.weight.empty() ? Tensor() : uniform64(sp.weight, g, 0.5, 2.0),
                                sp.pos_weight.empty() ? Tensor() : uniform64(sp.pos_weight, g, 0.5, 3.0)};
            },
        .run =
            [sp](const TensorList& in) {
              return TensorList{binary_cross_entropy_with_logits(in[0], in[1], in[2], in[3], sp.r)};
            },
        .reference =
            [sp](const TensorList& in) {
              auto x = values_of(in[0]), t = values_of(in[1]);
              const auto w = broadcast_ref(in[2], in[0].sizes());
              const auto pw = broadcast_ref(in[3], in[0].sizes());
              std::vector<double> l(x.size());
              for (std::size_t i = 0; i < x.size(); ++i) {
                const double sig = 1 / (1 + std::exp(-x[i]));
                l[i] = -w[i] * (pw[i] * t[i] * std::log(sig) + (1 - t[i]) * std::log(1 - sig));
              }
              return TensorList{reduce_ref(l, in[0].sizes(), sp.r)};
            },
        .grad_inputs = {0, 1},
    };
    if (sp.name == "mean")
      c.bench_inputs = [](Generator& g) {
        return TensorList{randn32({2048, 1}, g), uniform64({2048, 1}, g, 0, 1).to(DType::f32), Tensor(), Tensor()};
      };
    op_cases().push_back(std::move(c));
  }
  // Large logits: the stable form neither overflows nor loses the linear term.
  op_cases().push_back(OpCase{
      .name = "binary_cross_entropy_with_logits/large_logits",
      .op = OpKind::binary_cross_entropy_with_logits,
      .inputs =
          [](Generator&) {
            return TensorList{from_values({200.0, -200.0, 30.0}, {3}), from_values({0.0, 1.0, 0.5}, {3})};
          },
      .run =
          [](const TensorList& in) {
            return TensorList{binary_cross_entropy_with_logits(in[0], in[1], Tensor(), Tensor(), Reduction::None)};
          },
      .reference =
          [](const TensorList&) {
            return TensorList{from_values({200.0, 200.0, 15.0 + std::log1p(std::exp(-30.0))}, {3})};
          },
      .grad_inputs = {0, 1},
  });
  return true;
}();

Tensor f32(IntArrayRef s) { return zeros(s, {DType::f32, nullptr}); }

STRATA_REGISTER_CASE(BadInputCase{
    .name = "mse_loss/shape_mismatch",
    .op = OpKind::mse_loss,
    .call = [] { mse_loss(f32({2, 3}), f32({3, 2})); },
    .expect = {"Tensor[2, 3] f32", "Tensor[3, 2] f32"},
});
STRATA_REGISTER_CASE(BadInputCase{
    .name = "mse_loss/integer_target",
    .op = OpKind::mse_loss,
    .call = [] { mse_loss(f32({2, 3}), zeros({2, 3}, {DType::i64, nullptr})); },
    .expect = {"target", "Tensor[2, 3] i64"},
});
STRATA_REGISTER_CASE(BadInputCase{
    .name = "l1_loss/shape_mismatch",
    .op = OpKind::l1_loss,
    .call = [] { l1_loss(f32({2, 3}), f32({3, 2})); },
    .expect = {"l1_loss", "Tensor[2, 3] f32", "Tensor[3, 2] f32"},
});
STRATA_REGISTER_CASE(BadInputCase{
    .name = "l1_loss/dtype_mismatch",
    .op = OpKind::l1_loss,
    .call = [] { l1_loss(f32({2, 3}), zeros({2, 3}, {DType::f64, nullptr})); },
    .expect = {"dtype mismatch", "Tensor[2, 3] f64"},
});
STRATA_REGISTER_CASE(BadInputCase{
    .name = "binary_cross_entropy/shape_mismatch",
    .op = OpKind::binary_cross_entropy,
    .call = [] { binary_cross_entropy(f32({4}), f32({4, 1})); },
    .expect = {"Tensor[4] f32", "Tensor[4, 1] f32"},
});
STRATA_REGISTER_CASE(BadInputCase{
    .name = "binary_cross_entropy/input_out_of_range",
    .op = OpKind::binary_cross_entropy,
    .call = [] { binary_cross_entropy(full({2, 2}, 1.5), f32({2, 2})); },
    .expect = {"between 0 and 1", "Tensor[2, 2] f32"},
});
STRATA_REGISTER_CASE(BadInputCase{
    .name = "binary_cross_entropy/weight_not_broadcastable",
    .op = OpKind::binary_cross_entropy,
    .call = [] { binary_cross_entropy(f32({2, 3}), f32({2, 3}), f32({2})); },
    .expect = {"weight", "Tensor[2] f32", "Tensor[2, 3] f32"},
});
STRATA_REGISTER_CASE(BadInputCase{
    .name = "binary_cross_entropy_with_logits/shape_mismatch",
    .op = OpKind::binary_cross_entropy_with_logits,
    .call = [] { binary_cross_entropy_with_logits(f32({2, 3}), f32({2, 4})); },
    .expect = {"Tensor[2, 3] f32", "Tensor[2, 4] f32"},
});
STRATA_REGISTER_CASE(BadInputCase{
    .name = "binary_cross_entropy_with_logits/pos_weight_shape",
    .op = OpKind::binary_cross_entropy_with_logits,
    .call = [] { binary_cross_entropy_with_logits(f32({2, 3}), f32({2, 3}), Tensor(), f32({4})); },
    .expect = {"pos_weight", "Tensor[4] f32", "Tensor[2, 3] f32"},
});
STRATA_REGISTER_CASE(BadInputCase{
    .name = "binary_cross_entropy_with_logits/dtype_mismatch",
    .op = OpKind::binary_cross_entropy_with_logits,
    .call = [] { binary_cross_entropy_with_logits(f32({2, 3}), zeros({2, 3}, {DType::f64, nullptr})); },
    .expect = {"Tensor[2, 3] f32", "Tensor[2, 3] f64"},
});

// ---- nll_loss / cross_entropy -------------------------------------------------------------------

/// Reference NLL / cross entropy over [N, C, S] with targets [N, S].
Tensor class_loss_ref(const TensorList& in, Reduction r, int64_t ignore, double eps, bool from_logits) {
  const Tensor& x = in[0];
  const int64_t N = x.dim() == 1 ? 1 : x.size(0);
  const int64_t C = x.dim() == 1 ? x.size(0) : x.size(1);
  const int64_t S = x.numel() / std::max<int64_t>(1, N * C);
  auto xv = values_of(x);
  const auto tv = indices_of(in[1]);
  std::vector<double> w(C, 1.0);
  if (in.size() > 2 && in[2].defined()) w = values_of(in[2]);
  if (from_logits) {  // log_softmax over dim 1
    for (int64_t n = 0; n < N; ++n)
      for (int64_t s = 0; s < S; ++s) {
        double m = -INFINITY, sum = 0;
        for (int64_t c = 0; c < C; ++c) m = std::max(m, xv[(n * C + c) * S + s]);
        for (int64_t c = 0; c < C; ++c) sum += std::exp(xv[(n * C + c) * S + s] - m);
        for (int64_t c = 0; c < C; ++c) xv[(n * C + c) * S + s] -= m + std::log(sum);
      }
  }
  std::vector<double> loss(N * S, 0.0);
  double total_w = 0;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t s = 0; s < S; ++s) {
      const int64_t t = tv[n * S + s];
      if (t == ignore) continue;
      double smooth = 0;
      for (int64_t c = 0; c < C; ++c) smooth -= w[c] * xv[(n * C + c) * S + s];
      loss[n * S + s] = -(1 - eps) * w[t] * xv[(n * C + t) * S + s] + (eps > 0 ? eps / C * smooth : 0.0);
      total_w += w[t];
    }
  return reduce_ref(loss, in[1].sizes(), r, total_w);
}

struct ClassSpec {
  std::string name;
  Dims shape;  // input
  Reduction r = Reduction::Mean;
  bool weight = false;
  int64_t ignore_index = -100;
  bool use_ignore = false;  // make some targets equal to ignore_index
  double smoothing = 0.0;
  Dims bench;
};

TensorList class_inputs(Generator& g, const ClassSpec& sp, IntArrayRef shape, bool f32) {
  const int64_t C = shape.size() == 1 ? shape[0] : shape[1];
  Dims tshape;
  if (shape.size() > 1) {
    tshape.push_back(shape[0]);
    for (std::size_t d = 2; d < shape.size(); ++d) tshape.push_back(shape[d]);
  }
  Tensor x = f32 ? randn32(shape, g) : randn64(shape, g);
  Tensor t = randint64(0, C, tshape, g);
  if (sp.use_ignore) {
    int64_t* p = t.data<int64_t>();
    for (int64_t i = 0; i < t.numel(); i += 3) p[i] = sp.ignore_index;
  }
  Tensor w = sp.weight ? uniform64({C}, g, 0.5, 2.0) : Tensor();
  if (f32 && w.defined()) w = w.to(DType::f32);
  return {x, t, w};
}

const bool class_registered = [] {
  const std::vector<ClassSpec> specs = {
      {"none", {5, 4}, Reduction::None},
      {"mean", {5, 4}, Reduction::Mean, false, -100, false, 0.0, {256, 1000}},
      {"sum", {5, 4}, Reduction::Sum},
      {"weight_mean", {6, 4}, Reduction::Mean, true},
      {"weight_none", {6, 4}, Reduction::None, true},
      {"ignore_index_mean", {6, 4}, Reduction::Mean, false, -100, true},
      {"ignore_index_class_weight", {6, 4}, Reduction::Mean, true, 2, true},
      {"spatial_4d", {2, 4, 3, 2}, Reduction::Mean, true, -100, true},
      {"spatial_3d_none", {2, 3, 4}, Reduction::None},
      {"1d_input", {5}, Reduction::Sum},
  };
  for (bool ce : {false, true}) {
    std::vector<ClassSpec> all = specs;
    if (ce) {
      all.push_back({"label_smoothing", {5, 4}, Reduction::Mean, false, -100, false, 0.2});
      all.push_back({"label_smoothing_weight_ignore", {6, 4}, Reduction::Mean, true, -100, true, 0.1});
      all.push_back({"label_smoothing_sum", {5, 4}, Reduction::Sum, false, -100, false, 0.3});
      all.push_back({"label_smoothing_spatial_none", {2, 3, 4}, Reduction::None, true, -100, true, 0.25});
    }
    for (const ClassSpec& sp : all) {
      OpCase c{
          .name = std::string(ce ? "cross_entropy/" : "nll_loss/") + sp.name,
          .op = ce ? OpKind::cross_entropy : OpKind::nll_loss,
          .inputs = [sp](Generator& g) { return class_inputs(g, sp, sp.shape, false); },
          .run =
              [sp, ce](const TensorList& in) {
                return TensorList{ce ? cross_entropy(in[0], in[1], in[2], sp.r, sp.ignore_index, sp.smoothing)
                                     : nll_loss(in[0], in[1], in[2], sp.r, sp.ignore_index)};
              },
          .reference =
              [sp, ce](const TensorList& in) {
                return TensorList{class_loss_ref(in, sp.r, sp.ignore_index, sp.smoothing, ce)};
              },
          .grad_inputs = {0},
      };
      if (!sp.bench.empty()) c.bench_inputs = [sp](Generator& g) { return class_inputs(g, sp, sp.bench, true); };
      op_cases().push_back(std::move(c));
    }
  }
  return true;
}();

// Note [Non-finite cases]: cross_entropy on logits with a -inf beside the target (finite), a -inf
// target logit (+inf loss), all -inf, a +inf, a NaN (NaN); per sample and averaged. The gradient is
// (softmax - one-hot) per sample, NaN where softmax is.
const bool class_nonfinite_registered = [] {
  for (Reduction r : {Reduction::None, Reduction::Mean}) {
    op_cases().push_back(OpCase{
        .name = std::string("cross_entropy/nonfinite_") + (r == Reduction::None ? "none" : "mean"),
        .op = OpKind::cross_entropy,
        .inputs =
            [](Generator&) {
              return TensorList{from_values({0.5,   -1.0,  2.0,   0.25,   //
                                             -kInf, 1.0,   2.0,   -0.5,   //
                                             -kInf, 1.0,   2.0,   -0.5,   //
                                             -kInf, -kInf, -kInf, -kInf,  //
                                             kInf,  1.0,   2.0,   3.0,    //
                                             kNaN,  1.0,   2.0,   3.0},
                                            {6, 4}),
                                from_indices({1, 2, 0, 3, 1, 2}, {6}), Tensor()};
            },
        .run = [r](const TensorList& in) { return TensorList{cross_entropy(in[0], in[1], in[2], r)}; },
        .reference = [r](const TensorList& in) { return TensorList{class_loss_ref(in, r, -100, 0.0, true)}; },
        .grad_inputs = {0},
        .grad_reference =
            [r](const TensorList& in, const TensorList& w) {
              auto g = values_of(softmax_ref(in[0], 1, false));
              const auto t = indices_of(in[1]);
              const auto wv = values_of(w[0]);
              for (int64_t n = 0; n < 6; ++n)
                for (int64_t c = 0; c < 4; ++c) {
                  const double gn = r == Reduction::None ? wv[n] : wv[0] / 6.0;
                  g[n * 4 + c] = (g[n * 4 + c] - (c == t[n] ? 1.0 : 0.0)) * gn;
                }
              return TensorList{from_values(g, in[0].sizes())};
            },
    });
  }
  // mse_loss: (x - t)^2 with inf - inf = NaN; d/dx 2 (x - t).
  op_cases().push_back(OpCase{
      .name = "mse_loss/nonfinite",
      .op = OpKind::mse_loss,
      .inputs = [](Generator& g) { return TensorList{with_nonfinite({4, 9}, g), with_nonfinite({4, 9}, g, 2)}; },
      .run = [](const TensorList& in) { return TensorList{mse_loss(in[0], in[1], Reduction::None)}; },
      .reference =
          [](const TensorList& in) {
            auto x = values_of(in[0]);
            const auto t = values_of(in[1]);
            for (std::size_t i = 0; i < x.size(); ++i) x[i] = (x[i] - t[i]) * (x[i] - t[i]);
            return TensorList{from_values(x, in[0].sizes())};
          },
      .grad_inputs = {0},
      .grad_reference =
          [](const TensorList& in, const TensorList& w) {
            auto x = values_of(in[0]);
            const auto t = values_of(in[1]), wv = values_of(w[0]);
            for (std::size_t i = 0; i < x.size(); ++i) x[i] = 2 * (x[i] - t[i]) * wv[i];
            return TensorList{from_values(x, in[0].sizes())};
          },
  });
  // binary_cross_entropy_with_logits: PyTorch's (1 - t) x - lw log_sigmoid(x), lw = 1 + (p - 1) t:
  // NaN at (+inf, t = 1) and (-inf, t = 0) (0 · inf), +inf at (+inf, t = 0); d/dx lw sigmoid(x) - p t,
  // d/dt -x without pos_weight and log_sigmoid(-x) - p log_sigmoid(x) with it (±inf at ±inf).
  for (bool pw : {false, true}) {
    op_cases().push_back(OpCase{
        .name = std::string("binary_cross_entropy_with_logits/nonfinite") + (pw ? "_pos_weight" : ""),
        .op = OpKind::binary_cross_entropy_with_logits,
        .inputs =
            [pw](Generator& g) {
              Tensor t = uniform64({4, 9}, g, 0.0, 1.0);
              double* p = t.data<double>();
              for (int64_t i = 0; i < t.numel(); ++i) p[i] = i % 3 == 0 ? 0.0 : i % 3 == 1 ? 1.0 : p[i];
              return TensorList{with_nonfinite({4, 9}, g), t, pw ? uniform64({9}, g, 0.25, 3.0) : Tensor()};
            },
        .run =
            [](const TensorList& in) {
              return TensorList{binary_cross_entropy_with_logits(in[0], in[1], {}, in[2], Reduction::None)};
            },
        .reference =
            [](const TensorList& in) {
              auto x = values_of(in[0]);
              const auto t = values_of(in[1]), p = broadcast_ref(in[2], in[0].sizes());
              for (std::size_t i = 0; i < x.size(); ++i) {
                const double log_sigmoid = -(std::log1p(std::exp(-std::abs(x[i]))) + (x[i] < 0 ? -x[i] : 0.0));
                x[i] = (1 - t[i]) * x[i] - (1 + (p[i] - 1) * t[i]) * log_sigmoid;
              }
              return TensorList{from_values(x, in[0].sizes())};
            },
        .grad_inputs = {0, 1},
        .grad_reference =
            [pw](const TensorList& in, const TensorList& w) {
              auto gx = values_of(in[0]), gt = values_of(in[0]);
              const auto x = values_of(in[0]), t = values_of(in[1]), wv = values_of(w[0]);
              const auto p = broadcast_ref(in[2], in[0].sizes());
              auto log_sigmoid = [](double v) { return -(std::log1p(std::exp(-std::abs(v))) + (v < 0 ? -v : 0.0)); };
              for (std::size_t i = 0; i < x.size(); ++i) {
                gx[i] = ((1 + (p[i] - 1) * t[i]) / (1 + std::exp(-x[i])) - p[i] * t[i]) * wv[i];
                gt[i] = (pw ? log_sigmoid(-x[i]) - p[i] * log_sigmoid(x[i]) : -x[i]) * wv[i];
              }
              return TensorList{from_values(gx, in[0].sizes()), from_values(gt, in[1].sizes())};
            },
    });
  }
  return true;
}();

Tensor idx(std::vector<int64_t> v) { return from_indices(v, {static_cast<int64_t>(v.size())}); }

STRATA_REGISTER_CASE(BadInputCase{
    .name = "nll_loss/target_out_of_range",
    .op = OpKind::nll_loss,
    .call = [] { nll_loss(f32({3, 5}), idx({0, 7, 1})); },
    .expect = {"target 7", "C = 5"},
});
STRATA_REGISTER_CASE(BadInputCase{
    .name = "nll_loss/negative_target",
    .op = OpKind::nll_loss,
    .call = [] { nll_loss(f32({3, 5}), idx({0, -1, 1})); },
    .expect = {"target -1", "C = 5"},
});
STRATA_REGISTER_CASE(BadInputCase{
    .name = "nll_loss/float_target",
    .op = OpKind::nll_loss,
    .call = [] { nll_loss(f32({3, 5}), f32({3})); },
    .expect = {"target", "Tensor[3] f32", "i64"},
});
STRATA_REGISTER_CASE(BadInputCase{
    .name = "nll_loss/target_shape",
    .op = OpKind::nll_loss,
    .call = [] { nll_loss(f32({3, 5}), idx({0, 1})); },
    .expect = {"Tensor[2] i64", "Tensor[3, 5] f32", "[3]"},
});
STRATA_REGISTER_CASE(BadInputCase{
    .name = "nll_loss/weight_size",
    .op = OpKind::nll_loss,
    .call = [] { nll_loss(f32({3, 5}), idx({0, 1, 2}), f32({4})); },
    .expect = {"weight", "Tensor[4] f32", "[5]"},
});
STRATA_REGISTER_CASE(BadInputCase{
    .name = "cross_entropy/target_out_of_range",
    .op = OpKind::cross_entropy,
    .call = [] { cross_entropy(f32({2, 3}), idx({3, 0})); },
    .expect = {"target 3", "C = 3"},
});
STRATA_REGISTER_CASE(BadInputCase{
    .name = "cross_entropy/float_target",
    .op = OpKind::cross_entropy,
    .call = [] { cross_entropy(f32({2, 3}), f32({2, 3})); },
    .expect = {"target", "Tensor[2, 3] f32", "i64"},
});
STRATA_REGISTER_CASE(BadInputCase{
    .name = "cross_entropy/label_smoothing_out_of_range",
    .op = OpKind::cross_entropy,
    .call = [] { cross_entropy(f32({2, 3}), idx({1, 0}), Tensor(), Reduction::Mean, -100, 1.5); },
    .expect = {"label_smoothing", "1.5"},
});
STRATA_REGISTER_CASE(BadInputCase{
    .name = "cross_entropy/weight_dtype",
    .op = OpKind::cross_entropy,
    .call = [] { cross_entropy(f32({2, 3}), idx({1, 0}), zeros({3}, {DType::f64, nullptr})); },
    .expect = {"Tensor[2, 3] f32", "Tensor[3] f64"},
});

}  // namespace
}  // namespace strata::testing
