// Harness cases for ops/attention.h. The shapes cross the kernel's block edges (64 query rows,
// 128 key rows; Note [Blocked attention]) where it matters: causal skipping, several key blocks.

#include "ops/attention.h"

#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "tests/cpp/ops/harness/op_harness.h"

namespace strata::testing {
namespace {

struct RefOptions {
  bool causal = false;
  std::optional<double> scale;
  double dropout_p = 0.0;
  uint64_t seed = 0;  // the dropout generator's seed (offset 0)
};

/// Naive f64 attention over the batch dims: softmax(q kᵀ scale + mask) (dropped) v. `mask` is
/// undefined, bool or f64, broadcast to [..., L, S] (already expanded by the caller).
Tensor ref_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask, const RefOptions& o) {
  const auto qv = values_of(q), kv = values_of(k), vv = values_of(v);
  const int64_t L = q.size(-2), S = k.size(-2), E = q.size(-1), Ev = v.size(-1);
  const int64_t B = q.numel() / std::max<int64_t>(1, L * E);
  const bool bool_mask = mask.defined() && mask.dtype() == DType::boolean;
  std::vector<double> mv;
  if (mask.defined()) mv = bool_mask ? values_of(mask.to(DType::f64)) : values_of(mask);
  const double scale = o.scale ? *o.scale : 1.0 / std::sqrt(static_cast<double>(E));
  Generator gen(o.seed);
  std::vector<double> out(static_cast<std::size_t>(B * L * Ev), 0.0);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < L; ++i) {
      std::vector<double> s(S, -INFINITY);
      double mx = -INFINITY;
      for (int64_t j = 0; j < S; ++j) {
        const double m = mask.defined() ? mv[(b * L + i) * S + j] : 0.0;
        if ((o.causal && j > i) || (bool_mask && m == 0.0)) continue;
        double d = 0;
        for (int64_t e = 0; e < E; ++e) d += qv[(b * L + i) * E + e] * kv[(b * S + j) * E + e];
        s[j] = d * scale + (bool_mask ? 0.0 : m);
        mx = std::max(mx, s[j]);
      }
      if (mx == -INFINITY) continue;  // every key masked: zeros
      double sum = 0;
      for (double& x : s) sum += (x = std::exp(x - mx));
      for (int64_t j = 0; j < S; ++j) {
        double p = s[j] / sum;
        if (o.dropout_p > 0) {
          const uint64_t n = static_cast<uint64_t>((b * L + i) * S + j);
          const uint32_t word = gen.block(n / 4)[n % 4];
          const bool keep = (word >> 8) < static_cast<uint32_t>(std::llround((1 - o.dropout_p) * 16777216.0));
          p = keep ? p / (1 - o.dropout_p) : 0.0;
        }
        for (int64_t e = 0; e < Ev; ++e) out[(b * L + i) * Ev + e] += p * vv[(b * S + j) * Ev + e];
      }
    }
  Dims sizes(q.sizes().begin(), q.sizes().end() - 1);
  sizes.push_back(Ev);
  return from_values(out, sizes);
}

/// The scores' shape [..., L, S] for inputs {q, k, ...}.
Dims score_shape(const TensorList& in) {
  Dims s(in[0].sizes().begin(), in[0].sizes().end() - 1);
  s.push_back(in[1].size(-2));
  return s;
}

/// A case on inputs {q, k, v[, mask]} of the given shapes.
OpCase attention_case(std::string name, Dims qs, Dims ks, Dims vs, RefOptions o,
                      std::function<Tensor(Generator&)> mask = nullptr) {
  OpCase c;
  c.name = "scaled_dot_product_attention/" + name;
  c.op = OpKind::scaled_dot_product_attention;
  c.inputs = [qs, ks, vs, mask](Generator& g) {
    TensorList t{uniform64(qs, g, -2, 2), uniform64(ks, g, -2, 2), uniform64(vs, g)};
    if (mask) t.push_back(mask(g));
    return t;
  };
  c.run = [o](const TensorList& in) {
    Generator gen(o.seed);
    const Tensor m = in.size() > 3 ? in[3] : Tensor();
    return TensorList{scaled_dot_product_attention(in[0], in[1], in[2], m, o.dropout_p, o.causal, o.scale, &gen)};
  };
  c.reference = [o](const TensorList& in) {
    const Tensor m = in.size() > 3 ? in[3].expand(score_shape(in)).contiguous() : Tensor();
    return TensorList{ref_attention(in[0], in[1], in[2], m, o)};
  };
  c.grad_inputs = {0, 1, 2};
  return c;
}

/// A bool mask of `sizes` with about 1 in 4 entries false and, if it has >= 2 rows, row 1 wholly
/// false (a query that sees no key).
Tensor bool_mask(IntArrayRef sizes, Generator& g) {
  Tensor u = uniform64(sizes, g, 0, 1);
  std::vector<double> v = values_of(u);
  const int64_t cols = sizes.back(), rows = sizes.size() >= 2 ? sizes[sizes.size() - 2] : 1;
  for (std::size_t i = 0; i < v.size(); ++i) {
    const int64_t r = static_cast<int64_t>(i) / cols % rows;
    v[i] = (r == 1 && rows >= 2) ? 0.0 : (v[i] < 0.25 ? 0.0 : 1.0);
  }
  return from_values(v, sizes).to(DType::boolean);
}

const bool attention_registered = [] {
  RefOptions plain, causal, scaled, dropout;
  causal.causal = true;
  scaled.scale = 0.3;
  dropout.dropout_p = 0.3;
  dropout.seed = 7;
  OpCase basic = attention_case("basic", {2, 3, 5, 4}, {2, 3, 7, 4}, {2, 3, 7, 6}, plain);
  basic.bench_inputs = [](Generator& g) {
    return TensorList{randn32({8, 6, 256, 64}, g), randn32({8, 6, 256, 64}, g), randn32({8, 6, 256, 64}, g)};
  };
  op_cases().push_back(basic);
  op_cases().push_back(attention_case("rank2_scale", {6, 3}, {4, 3}, {4, 2}, scaled));
  // Several query and key blocks; causal skips the blocks above the diagonal.
  op_cases().push_back(attention_case("causal_blocks", {1, 2, 140, 3}, {1, 2, 140, 3}, {1, 2, 140, 2}, causal));
  op_cases().push_back(attention_case("causal_more_keys", {2, 5, 3}, {2, 9, 3}, {2, 9, 4}, causal));
  op_cases().push_back(attention_case("causal_more_queries", {2, 9, 3}, {2, 5, 3}, {2, 5, 4}, causal));
  op_cases().push_back(attention_case("many_keys", {1, 3, 3}, {1, 150, 3}, {1, 150, 2}, plain));
  // A bool mask broadcast over heads, with a fully masked query row (zeros, zero gradients).
  op_cases().push_back(attention_case("bool_mask_broadcast", {2, 3, 4, 3}, {2, 3, 6, 3}, {2, 3, 6, 5}, plain,
                                      [](Generator& g) { return bool_mask({2, 1, 4, 6}, g); }));
  op_cases().push_back(attention_case("float_mask", {2, 2, 4, 3}, {2, 2, 5, 3}, {2, 2, 5, 3}, scaled,
                                      [](Generator& g) { return uniform64({2, 1, 4, 5}, g, -3, 1); }));
  op_cases().push_back(attention_case("dropout", {2, 5, 3}, {2, 7, 3}, {2, 7, 4}, dropout));
  return true;
}();

// ---- bad inputs ----------------------------------------------------------------------------------

Tensor f32(IntArrayRef sizes) { return zeros(sizes, {DType::f32, nullptr}); }

STRATA_REGISTER_CASE(BadInputCase{
    .name = "scaled_dot_product_attention/rank_mismatch",
    .op = OpKind::scaled_dot_product_attention,
    .call = [] { scaled_dot_product_attention(f32({2, 3, 4}), f32({3, 4}), f32({3, 4})); },
    .expect = {"same rank", "Tensor[2, 3, 4] f32", "Tensor[3, 4] f32"},
});
STRATA_REGISTER_CASE(BadInputCase{
    .name = "scaled_dot_product_attention/width_mismatch",
    .op = OpKind::scaled_dot_product_attention,
    .call = [] { scaled_dot_product_attention(f32({3, 4}), f32({3, 5}), f32({3, 4})); },
    .expect = {"key's last dim", "Tensor[3, 4] f32", "Tensor[3, 5] f32"},
});
STRATA_REGISTER_CASE(BadInputCase{
    .name = "scaled_dot_product_attention/value_rows",
    .op = OpKind::scaled_dot_product_attention,
    .call = [] { scaled_dot_product_attention(f32({3, 4}), f32({5, 4}), f32({4, 4})); },
    .expect = {"as many rows as key", "Tensor[5, 4] f32", "Tensor[4, 4] f32"},
});
STRATA_REGISTER_CASE(BadInputCase{
    .name = "scaled_dot_product_attention/batch_mismatch",
    .op = OpKind::scaled_dot_product_attention,
    .call = [] { scaled_dot_product_attention(f32({2, 3, 4}), f32({3, 3, 4}), f32({3, 3, 4})); },
    .expect = {"same batch sizes", "Tensor[2, 3, 4] f32", "Tensor[3, 3, 4] f32"},
});
STRATA_REGISTER_CASE(BadInputCase{
    .name = "scaled_dot_product_attention/integer_input",
    .op = OpKind::scaled_dot_product_attention,
    .call = [] { scaled_dot_product_attention(zeros({3, 4}, {DType::i64, nullptr}), f32({3, 4}), f32({3, 4})); },
    .expect = {"query", "f32 or f64", "Tensor[3, 4] i64"},
});
STRATA_REGISTER_CASE(BadInputCase{
    .name = "scaled_dot_product_attention/mask_not_broadcastable",
    .op = OpKind::scaled_dot_product_attention,
    .call = [] { scaled_dot_product_attention(f32({3, 4}), f32({5, 4}), f32({5, 4}), f32({2, 5})); },
    .expect = {"attn_mask", "Tensor[2, 5] f32", "does not broadcast", "[3, 5]"},
});
STRATA_REGISTER_CASE(BadInputCase{
    .name = "scaled_dot_product_attention/integer_mask",
    .op = OpKind::scaled_dot_product_attention,
    .call =
        [] {
          scaled_dot_product_attention(f32({3, 4}), f32({5, 4}), f32({5, 4}), zeros({3, 5}, {DType::i64, nullptr}));
        },
    .expect = {"attn_mask must be bool or of query's dtype", "Tensor[3, 5] i64"},
});
STRATA_REGISTER_CASE(BadInputCase{
    .name = "scaled_dot_product_attention/mask_and_causal",
    .op = OpKind::scaled_dot_product_attention,
    .call = [] { scaled_dot_product_attention(f32({3, 4}), f32({3, 4}), f32({3, 4}), f32({3, 3}), 0.0, true); },
    .expect = {"attn_mask should not be set when is_causal=True", "Tensor[3, 3] f32"},
});
STRATA_REGISTER_CASE(BadInputCase{
    .name = "scaled_dot_product_attention/dropout_out_of_range",
    .op = OpKind::scaled_dot_product_attention,
    .call = [] { scaled_dot_product_attention(f32({3, 4}), f32({5, 4}), f32({5, 4}), Tensor(), 1.5); },
    .expect = {"dropout probability has to be between 0 and 1", "1.5"},
});
STRATA_REGISTER_CASE(BadInputCase{
    .name = "scaled_dot_product_attention/mask_requires_grad",
    .op = OpKind::scaled_dot_product_attention,
    .call =
        [] {
          Tensor m = f32({3, 5});
          m.requires_grad_();
          scaled_dot_product_attention(f32({3, 4}), f32({5, 4}), f32({5, 4}), m);
        },
    .expect = {"gradient w.r.t. attn_mask is not supported"},
});

}  // namespace
}  // namespace strata::testing
