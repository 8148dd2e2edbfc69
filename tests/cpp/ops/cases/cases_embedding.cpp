// Harness cases for ops/embedding.h.

#include "ops/embedding.h"

#include <string>
#include <vector>

#include "tests/cpp/ops/harness/op_harness.h"

namespace strata::testing {
namespace {

/// Reference embedding_bag; inputs {weight, indices, offsets[, per_sample_weights]}.
Tensor ref_bag(const TensorList& in, bool mean, bool include_last_offset) {
  const auto w = values_of(in[0]);
  const auto idx = indices_of(in[1]);
  const auto off = indices_of(in[2]);
  const bool psw = in.size() > 3 && in[3].defined();
  const auto p = psw ? values_of(in[3]) : std::vector<double>();
  const int64_t dim = in[0].sizes()[1];
  const int64_t bags = static_cast<int64_t>(off.size()) - (include_last_offset ? 1 : 0);
  std::vector<double> out(static_cast<std::size_t>(bags * dim), 0.0);
  for (int64_t b = 0; b < bags; ++b) {
    const int64_t s = off[b];
    const int64_t e = b + 1 < static_cast<int64_t>(off.size()) ? off[b + 1] : static_cast<int64_t>(idx.size());
    for (int64_t i = s; i < e; ++i)
      for (int64_t k = 0; k < dim; ++k) out[b * dim + k] += (psw ? p[i] : 1.0) * w[idx[i] * dim + k];
    if (mean && e > s)
      for (int64_t k = 0; k < dim; ++k) out[b * dim + k] /= static_cast<double>(e - s);
  }
  return from_values(out, {bags, dim});
}

// Bags [0, 2), [2, 2) (empty), [2, 5), [5, 7).
const std::vector<int64_t> kIndices = {1, 5, 1, 0, 3, 2, 2};
const std::vector<int64_t> kOffsets = {0, 2, 2, 5};

/// Benchmark: a [1000000, 64] table, 2048 bags of 20 lookups.
TensorList bag_bench(Generator& g) {
  std::vector<int64_t> off;
  for (int64_t b = 0; b < 2048; ++b) off.push_back(b * 20);
  return TensorList{randn32({1000000, 64}, g), randint64(0, 1000000, {2048 * 20}, g), from_indices(off, {2048})};
}

STRATA_REGISTER_CASE(OpCase{
    .name = "embedding_bag/sum",
    .op = OpKind::embedding_bag,
    .inputs =
        [](Generator& g) {
          return TensorList{uniform64({6, 3}, g), from_indices(kIndices, {7}), from_indices(kOffsets, {4})};
        },
    .run = [](const TensorList& in) { return TensorList{embedding_bag(in[0], in[1], in[2])}; },
    .reference = [](const TensorList& in) { return TensorList{ref_bag(in, false, false)}; },
    .grad_inputs = {0},
    .bench_inputs = bag_bench,
});

STRATA_REGISTER_CASE(OpCase{
    .name = "embedding_bag/mean",
    .op = OpKind::embedding_bag,
    .inputs =
        [](Generator& g) {
          return TensorList{uniform64({6, 3}, g), from_indices(kIndices, {7}), from_indices(kOffsets, {4})};
        },
    .run = [](const TensorList& in) { return TensorList{embedding_bag(in[0], in[1], in[2], EmbeddingBagMode::Mean)}; },
    .reference = [](const TensorList& in) { return TensorList{ref_bag(in, true, false)}; },
    .grad_inputs = {0},
});

STRATA_REGISTER_CASE(OpCase{
    .name = "embedding_bag/per_sample_weights",
    .op = OpKind::embedding_bag,
    .inputs =
        [](Generator& g) {
          return TensorList{uniform64({6, 3}, g), from_indices(kIndices, {7}), from_indices(kOffsets, {4}),
                            uniform64({7}, g)};
        },
    .run =
        [](const TensorList& in) {
          return TensorList{embedding_bag(in[0], in[1], in[2], EmbeddingBagMode::Sum, in[3])};
        },
    .reference = [](const TensorList& in) { return TensorList{ref_bag(in, false, false)}; },
    .grad_inputs = {0, 3},
});

STRATA_REGISTER_CASE(OpCase{
    .name = "embedding_bag/include_last_offset",
    .op = OpKind::embedding_bag,
    .inputs =
        [](Generator& g) {
          return TensorList{uniform64({6, 3}, g), from_indices(kIndices, {7}), from_indices({0, 3, 3, 7}, {4})};
        },
    .run =
        [](const TensorList& in) {
          return TensorList{embedding_bag(in[0], in[1], in[2], EmbeddingBagMode::Sum, Tensor(), true)};
        },
    .reference = [](const TensorList& in) { return TensorList{ref_bag(in, false, true)}; },
    .grad_inputs = {0},
});

STRATA_REGISTER_CASE(OpCase{
    .name = "embedding_bag/i32_mean_include_last_offset",
    .op = OpKind::embedding_bag,
    .inputs =
        [](Generator& g) {
          return TensorList{uniform64({6, 4}, g), from_indices({5, 5, 0, 4, 1, 2}, {6}).to(DType::i32),
                            from_indices({0, 0, 4, 6}, {4}).to(DType::i32)};
        },
    .run =
        [](const TensorList& in) {
          return TensorList{embedding_bag(in[0], in[1], in[2], EmbeddingBagMode::Mean, Tensor(), true)};
        },
    .reference = [](const TensorList& in) { return TensorList{ref_bag(in, true, true)}; },
    .grad_inputs = {0},
});

/// Reference embedding: out[..., k] = weight[index, k]; inputs {weight, indices}.
Tensor ref_embedding(const TensorList& in) {
  const auto w = values_of(in[0]);
  const auto idx = indices_of(in[1]);
  const int64_t dim = in[0].sizes()[1];
  std::vector<double> out;
  for (int64_t i : idx)
    for (int64_t k = 0; k < dim; ++k) out.push_back(w[i * dim + k]);
  Dims sizes = in[1].sizes();
  sizes.push_back(dim);
  return from_values(out, sizes);
}

STRATA_REGISTER_CASE(OpCase{
    .name = "embedding/2d_indices_repeated",
    .op = OpKind::embedding,
    .inputs = [](Generator& g) { return TensorList{uniform64({6, 4}, g), from_indices({1, 5, 1, 0, 3, 1}, {2, 3})}; },
    .run = [](const TensorList& in) { return TensorList{embedding(in[0], in[1])}; },
    .reference = [](const TensorList& in) { return TensorList{ref_embedding(in)}; },
    .grad_inputs = {0},
    .bench_inputs = [](Generator& g) { return TensorList{randn32({50304, 384}, g), randint64(0, 50304, {8, 256}, g)}; },
});

STRATA_REGISTER_CASE(OpCase{
    .name = "embedding/i32_scalar_index",
    .op = OpKind::embedding,
    .inputs = [](Generator& g) { return TensorList{uniform64({5, 3}, g), from_indices({4}, {}).to(DType::i32)}; },
    .run = [](const TensorList& in) { return TensorList{embedding(in[0], in[1])}; },
    .reference = [](const TensorList& in) { return TensorList{ref_embedding(in)}; },
    .grad_inputs = {0},
});

// padding_idx: the forward still reads the row; its gradient is zero. Finite differences of the
// row are not zero, so the gradient is compared with this reference (d/dweight of Σ out·w).
STRATA_REGISTER_CASE(OpCase{
    .name = "embedding/padding_idx",
    .op = OpKind::embedding,
    .inputs = [](Generator& g) { return TensorList{uniform64({5, 3}, g), from_indices({2, 0, 2, 4, 1}, {5})}; },
    .run = [](const TensorList& in) { return TensorList{embedding(in[0], in[1], -3)}; },
    .reference = [](const TensorList& in) { return TensorList{ref_embedding(in)}; },
    .grad_inputs = {0},
    .grad_reference =
        [](const TensorList& in, const TensorList& w) {
          const auto idx = indices_of(in[1]);
          const auto wv = values_of(w[0]);
          std::vector<double> gw(15, 0.0);
          for (std::size_t i = 0; i < idx.size(); ++i)
            for (int64_t k = 0; k < 3; ++k)
              if (idx[i] != 2) gw[idx[i] * 3 + k] += wv[i * 3 + k];
          return TensorList{from_values(gw, {5, 3})};
        },
});

/// Reference DLRM dot interaction (dlrm_s_pytorch.py interact_features, op dot).
Tensor ref_dot(const TensorList& in, bool self) {
  const int64_t nf = static_cast<int64_t>(in.size());
  const int64_t batch = in[0].sizes()[0];
  const int64_t d = in[0].sizes()[1];
  std::vector<std::vector<double>> f;
  for (const Tensor& t : in) f.push_back(values_of(t));
  std::vector<double> out;
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t k = 0; k < d; ++k) out.push_back(f[0][b * d + k]);
    for (int64_t i = 0; i < nf; ++i)
      for (int64_t j = 0; j < i + (self ? 1 : 0); ++j) {
        double z = 0;
        for (int64_t k = 0; k < d; ++k) z += f[i][b * d + k] * f[j][b * d + k];
        out.push_back(z);
      }
  }
  const int64_t width = static_cast<int64_t>(out.size()) / batch;
  return from_values(out, {batch, width});
}

TensorList dot_inputs(Generator& g) {
  return TensorList{uniform64({2, 3}, g), uniform64({2, 3}, g), uniform64({2, 3}, g), uniform64({2, 3}, g)};
}

TensorList dot_bench(Generator& g) {
  TensorList t;
  for (int k = 0; k < 27; ++k) t.push_back(randn32({2048, 64}, g));
  return t;
}

STRATA_REGISTER_CASE(OpCase{
    .name = "dot_interaction/basic",
    .op = OpKind::dot_interaction,
    .inputs = dot_inputs,
    .run = [](const TensorList& in) { return TensorList{dot_interaction(std::vector<Tensor>(in.begin(), in.end()))}; },
    .reference = [](const TensorList& in) { return TensorList{ref_dot(in, false)}; },
    .grad_inputs = {0, 1, 2, 3},
    .bench_inputs = dot_bench,
});

STRATA_REGISTER_CASE(OpCase{
    .name = "dot_interaction/self_interaction",
    .op = OpKind::dot_interaction,
    .inputs = dot_inputs,
    .run =
        [](const TensorList& in) {
          return TensorList{dot_interaction(std::vector<Tensor>(in.begin(), in.end()), true)};
        },
    .reference = [](const TensorList& in) { return TensorList{ref_dot(in, true)}; },
    .grad_inputs = {0, 1, 2, 3},
    .bench_inputs = dot_bench,
});

// Note [Non-finite cases]: NaN and ±inf in the features. The forward's dots propagate them; the
// gradient follows PyTorch's bmm backward, dZ·T + dZᵀ·T computed as two sums over every feature
// (Note [Interaction gradient and inf], ops/embedding.cpp).
TensorList dot_grad_ref(const TensorList& in, const TensorList& w, bool self) {
  const int64_t nf = static_cast<int64_t>(in.size()), batch = in[0].size(0), d = in[0].size(1);
  std::vector<std::vector<double>> f;
  for (const Tensor& t : in) f.push_back(values_of(t));
  const auto g = values_of(w[0]);
  const int64_t width = g.size() / batch;
  std::vector<std::vector<double>> gf(nf, std::vector<double>(batch * d, 0.0));
  for (int64_t b = 0; b < batch; ++b) {
    std::vector<double> dz(nf * nf, 0.0);  // lower triangular: the gathered pairs' gradients
    const double* gz = g.data() + b * width + d;
    for (int64_t i = 0; i < nf; ++i)
      for (int64_t j = 0; j < i + (self ? 1 : 0); ++j) dz[i * nf + j] = *gz++;
    for (int64_t i = 0; i < nf; ++i)
      for (int64_t k = 0; k < d; ++k) {
        double a = 0, c = 0;
        for (int64_t j = 0; j < nf; ++j) {
          a += dz[i * nf + j] * f[j][b * d + k];
          c += dz[j * nf + i] * f[j][b * d + k];
        }
        gf[i][b * d + k] = (i == 0 ? g[b * width + k] : 0.0) + (a + c);
      }
  }
  TensorList out;
  for (int64_t i = 0; i < nf; ++i) out.push_back(from_values(gf[i], in[i].sizes()));
  return out;
}

TensorList dot_nonfinite_inputs(Generator& g) {
  return TensorList{with_nonfinite({3, 5}, g), uniform64({3, 5}, g), uniform64({3, 5}, g),
                    with_nonfinite({3, 5}, g, 9)};
}

const bool dot_nonfinite_registered = [] {
  for (bool self : {false, true})
    op_cases().push_back(OpCase{
        .name = std::string("dot_interaction/nonfinite") + (self ? "_self" : ""),
        .op = OpKind::dot_interaction,
        .inputs = dot_nonfinite_inputs,
        .run =
            [self](const TensorList& in) {
              return TensorList{dot_interaction(std::vector<Tensor>(in.begin(), in.end()), self)};
            },
        .reference = [self](const TensorList& in) { return TensorList{ref_dot(in, self)}; },
        .grad_inputs = {0, 1, 2, 3},
        .grad_reference = [self](const TensorList& in, const TensorList& w) { return dot_grad_ref(in, w, self); },
    });
  return true;
}();

// embedding_bag with NaN and ±inf rows and per-sample weights: the sums propagate them; the weight's
// gradient is psw · g per lookup (NaN where psw is), psw's is g · row.
STRATA_REGISTER_CASE(OpCase{
    .name = "embedding_bag/nonfinite",
    .op = OpKind::embedding_bag,
    .inputs =
        [](Generator& g) {
          Tensor psw = uniform64({7}, g);
          psw.data<double>()[4] = kNaN;
          psw.data<double>()[6] = kInf;
          return TensorList{with_nonfinite({6, 3}, g), from_indices(kIndices, {7}), from_indices(kOffsets, {4}), psw};
        },
    .run =
        [](const TensorList& in) {
          return TensorList{embedding_bag(in[0], in[1], in[2], EmbeddingBagMode::Sum, in[3])};
        },
    .reference = [](const TensorList& in) { return TensorList{ref_bag(in, false, false)}; },
    .grad_inputs = {0, 3},
    .grad_reference =
        [](const TensorList& in, const TensorList& w) {
          const auto wt = values_of(in[0]), p = values_of(in[3]), g = values_of(w[0]);
          std::vector<double> gw(wt.size(), 0.0), gp(p.size(), 0.0);
          for (int64_t b = 0; b < 4; ++b) {
            const int64_t e = b + 1 < 4 ? kOffsets[b + 1] : 7;
            for (int64_t i = kOffsets[b]; i < e; ++i)
              for (int64_t k = 0; k < 3; ++k) {
                gw[kIndices[i] * 3 + k] += p[i] * g[b * 3 + k];
                gp[i] += g[b * 3 + k] * wt[kIndices[i] * 3 + k];
              }
          }
          return TensorList{from_values(gw, in[0].sizes()), from_values(gp, in[3].sizes())};
        },
});

// ---- bad inputs ----------------------------------------------------------------------------------------

Tensor f32(IntArrayRef sizes) { return zeros(sizes, {DType::f32, nullptr}); }
Tensor idx(const std::vector<int64_t>& v) { return from_indices(v, {static_cast<int64_t>(v.size())}); }

STRATA_REGISTER_CASE(BadInputCase{
    .name = "embedding/index_out_of_range",
    .op = OpKind::embedding,
    .call = [] { embedding(f32({6, 3}), idx({1, 6, 2})); },
    .expect = {"embedding: index 6 at position 1", "Tensor[6, 3] f32", "[0, 6)"},
});
STRATA_REGISTER_CASE(BadInputCase{
    .name = "embedding/float_indices",
    .op = OpKind::embedding,
    .call = [] { embedding(f32({6, 3}), f32({2})); },
    .expect = {"embedding", "indices", "i64 or i32", "Tensor[2] f32"},
});
STRATA_REGISTER_CASE(BadInputCase{
    .name = "embedding/weight_not_2d",
    .op = OpKind::embedding,
    .call = [] { embedding(f32({6}), idx({1})); },
    .expect = {"embedding", "weight must be 2-D", "Tensor[6] f32"},
});
STRATA_REGISTER_CASE(BadInputCase{
    .name = "embedding/padding_idx_out_of_range",
    .op = OpKind::embedding,
    .call = [] { embedding(f32({6, 3}), idx({1}), 6); },
    .expect = {"padding_idx 6", "num_embeddings (6)"},
});
STRATA_REGISTER_CASE(BadInputCase{
    .name = "embedding/renorm_bad_max_norm",
    .op = OpKind::embedding,
    .call = [] { embedding_renorm_(f32({6, 3}), idx({1}), 0.0); },
    .expect = {"embedding_renorm_", "max_norm", "positive"},
});

STRATA_REGISTER_CASE(BadInputCase{
    .name = "embedding_bag/offsets_not_starting_at_zero",
    .op = OpKind::embedding_bag,
    .call = [] { embedding_bag(f32({6, 3}), idx({1, 2, 3}), idx({1, 2})); },
    .expect = {"offsets must start at 0", "offsets[0] = 1"},
});

STRATA_REGISTER_CASE(BadInputCase{
    .name = "embedding_bag/offsets_decreasing",
    .op = OpKind::embedding_bag,
    .call = [] { embedding_bag(f32({6, 3}), idx({1, 2, 3}), idx({0, 2, 1})); },
    .expect = {"non-decreasing", "offsets[2] = 1", "offsets[1] = 2"},
});

STRATA_REGISTER_CASE(BadInputCase{
    .name = "embedding_bag/offsets_past_end",
    .op = OpKind::embedding_bag,
    .call = [] { embedding_bag(f32({6, 3}), idx({1, 2, 3}), idx({0, 4})); },
    .expect = {"offsets[1] = 4", "past the end", "3 indices"},
});

STRATA_REGISTER_CASE(BadInputCase{
    .name = "embedding_bag/index_out_of_range",
    .op = OpKind::embedding_bag,
    .call = [] { embedding_bag(f32({6, 3}), idx({1, 6, 3}), idx({0})); },
    .expect = {"index 6", "position 1", "num_rows 6", "Tensor[6, 3] f32"},
});

STRATA_REGISTER_CASE(BadInputCase{
    .name = "embedding_bag/negative_index",
    .op = OpKind::embedding_bag,
    .call = [] { embedding_bag(f32({6, 3}), idx({1, 2, -3}), idx({0})); },
    .expect = {"index -3", "position 2", "num_rows 6"},
});

STRATA_REGISTER_CASE(BadInputCase{
    .name = "embedding_bag/per_sample_weights_with_mean",
    .op = OpKind::embedding_bag,
    .call = [] { embedding_bag(f32({6, 3}), idx({1, 2, 3}), idx({0}), EmbeddingBagMode::Mean, f32({3})); },
    .expect = {"per_sample_weights", "mode Sum", "Mean"},
});

STRATA_REGISTER_CASE(BadInputCase{
    .name = "embedding_bag/per_sample_weights_shape",
    .op = OpKind::embedding_bag,
    .call = [] { embedding_bag(f32({6, 3}), idx({1, 2, 3}), idx({0}), EmbeddingBagMode::Sum, f32({2})); },
    .expect = {"Tensor[2] f32", "Tensor[3] i64"},
});

STRATA_REGISTER_CASE(BadInputCase{
    .name = "embedding_bag/float_indices",
    .op = OpKind::embedding_bag,
    .call = [] { embedding_bag(f32({6, 3}), f32({3}), idx({0})); },
    .expect = {"indices must be i64 or i32", "Tensor[3] f32"},
});

STRATA_REGISTER_CASE(BadInputCase{
    .name = "embedding_bag/weight_rank",
    .op = OpKind::embedding_bag,
    .call = [] { embedding_bag(f32({6}), idx({1}), idx({0})); },
    .expect = {"weight must be 2-D", "Tensor[6] f32"},
});

STRATA_REGISTER_CASE(BadInputCase{
    .name = "embedding_bag/integer_weight",
    .op = OpKind::embedding_bag,
    .call = [] { embedding_bag(zeros({6, 3}, {DType::i64, nullptr}), idx({1}), idx({0})); },
    .expect = {"f32 or f64", "Tensor[6, 3] i64"},
});

STRATA_REGISTER_CASE(BadInputCase{
    .name = "dot_interaction/mismatched_batch",
    .op = OpKind::dot_interaction,
    .call = [] { dot_interaction({f32({4, 3}), f32({4, 3}), f32({5, 3})}); },
    .expect = {"Tensor[4, 3] f32", "Tensor[5, 3] f32", "feature 2"},
});

STRATA_REGISTER_CASE(BadInputCase{
    .name = "dot_interaction/mismatched_dim",
    .op = OpKind::dot_interaction,
    .call = [] { dot_interaction({f32({4, 3}), f32({4, 2})}); },
    .expect = {"Tensor[4, 3] f32", "Tensor[4, 2] f32"},
});

STRATA_REGISTER_CASE(BadInputCase{
    .name = "dot_interaction/wrong_rank",
    .op = OpKind::dot_interaction,
    .call = [] { dot_interaction({f32({4, 3, 1})}); },
    .expect = {"2-D", "Tensor[4, 3, 1] f32"},
});

STRATA_REGISTER_CASE(BadInputCase{
    .name = "dot_interaction/no_features",
    .op = OpKind::dot_interaction,
    .call = [] { dot_interaction({}); },
    .expect = {"at least one feature"},
});

}  // namespace
}  // namespace strata::testing
