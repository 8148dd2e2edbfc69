#include "models/attention.h"

#include <cmath>
#include <limits>

#include "core/factories.h"
#include "core/text.h"
#include "models/dropout.h"
#include "models/linear.h"
#include "models/normalization.h"
#include "ops/attention.h"
#include "ops/binary.h"
#include "ops/linalg.h"
#include "ops/reduction.h"
#include "ops/shape_ops.h"
#include "ops/softmax_loss.h"
#include "ops/unary.h"

namespace strata::nn {

namespace {

/// [B, L, W] → [B, heads, L, W / heads] (a view).
Tensor split_heads(const Tensor& x, int64_t heads) {
  return transpose(reshape(x, {x.size(0), x.size(1), heads, x.size(2) / heads}), 1, 2);
}

/// [B, heads, L, w] → [B, L, heads · w].
Tensor merge_heads(const Tensor& x) {
  return reshape(transpose(x, 1, 2), {x.size(0), x.size(2), x.size(1) * x.size(3)});
}

/// [1, ...t's sizes] and back, recorded (the differentiable reshape, not the raw view).
Tensor unsqueeze0(const Tensor& t) {
  Dims s = t.sizes();
  s.insert(0, 1);
  return reshape(t, s);
}
Tensor squeeze0(const Tensor& t) { return reshape(t, Dims(t.sizes().begin() + 1, t.sizes().end())); }

/// True when a and b view the same elements the same way (PyTorch's `query is key`).
bool same_tensor(const Tensor& a, const Tensor& b) {
  return a.shares_storage(b) && a.offset() == b.offset() && a.sizes() == b.sizes() && a.strides() == b.strides();
}

/// xavier_uniform_ of a [fan_out, fan_in] matrix (gain 1).
Tensor xavier_uniform(int64_t fan_out, int64_t fan_in, Generator* gen) {
  const double bound = std::sqrt(6.0 / static_cast<double>(fan_in + fan_out));
  return uniform({fan_out, fan_in}, -bound, bound, {}, gen);
}

/// A bool mask (true = not attended) as an additive one (-inf / 0) of `dtype`; a floating mask as is.
Tensor additive_mask(const Tensor& mask, DType dtype, const char* what) {
  if (mask.dtype() != DType::boolean) {
    STRATA_CHECK(mask.dtype() == dtype, "MultiheadAttention: ", what, " must be bool or of the query's dtype (", dtype,
                 "), got ", mask.describe());
    return mask;
  }
  return where(mask, scalar_tensor(-std::numeric_limits<double>::infinity(), dtype), scalar_tensor(0.0, dtype));
}

/// Additive causal mask [L, S]: -inf where j > i.
Tensor causal_mask(int64_t L, int64_t S, DType dtype) {
  Tensor m = zeros({L, S}, {DType::f64, nullptr});
  double* p = m.data<double>();
  for (int64_t i = 0; i < L; ++i)
    for (int64_t j = i + 1; j < S; ++j) p[i * S + j] = -std::numeric_limits<double>::infinity();
  return m.to(dtype);
}

}  // namespace

Tensor multi_head_attention(const Tensor& q, const Tensor& k, const Tensor& v, int64_t num_heads, const Tensor& mask,
                            bool causal, double dropout_p, Generator* gen) {
  STRATA_CHECK(q.dim() == 3 && k.dim() == 3 && v.dim() == 3,
               "multi_head_attention: expected batch-first 3-D q, k, v, got ", q.describe(), ", ", k.describe(), ", ",
               v.describe());
  STRATA_CHECK(q.size(2) % num_heads == 0 && v.size(2) % num_heads == 0, "multi_head_attention: widths ", q.size(2),
               " and ", v.size(2), " must be multiples of num_heads ", num_heads);
  Tensor o = scaled_dot_product_attention(split_heads(q, num_heads), split_heads(k, num_heads),
                                          split_heads(v, num_heads), mask, dropout_p, causal, std::nullopt, gen);
  return merge_heads(o);
}

// ---- MultiheadAttention ---------------------------------------------------------------------------

MultiheadAttention::MultiheadAttention(int64_t embed_dim, int64_t num_heads, double dropout, bool bias,
                                       std::optional<int64_t> kdim, std::optional<int64_t> vdim, bool batch_first,
                                       Generator* gen)
    : Module("MultiheadAttention"),
      embed_dim_(embed_dim),
      num_heads_(num_heads),
      kdim_(kdim.value_or(embed_dim)),
      vdim_(vdim.value_or(embed_dim)),
      dropout_(dropout),
      batch_first_(batch_first) {
  STRATA_CHECK(embed_dim > 0 && num_heads > 0, "MultiheadAttention: embed_dim and num_heads must be positive, got ",
               embed_dim, " and ", num_heads);
  STRATA_CHECK(embed_dim % num_heads == 0, "MultiheadAttention: embed_dim must be divisible by num_heads, got ",
               embed_dim, " and ", num_heads);
  STRATA_CHECK(kdim_ > 0 && vdim_ > 0, "MultiheadAttention: kdim and vdim must be positive, got ", kdim_, " and ",
               vdim_);
  STRATA_CHECK(dropout >= 0.0 && dropout <= 1.0,
               "MultiheadAttention: dropout probability has to be between 0 and 1, "
               "but got ",
               dropout);
  if (kdim_ == embed_dim && vdim_ == embed_dim) {
    register_parameter("in_proj_weight", xavier_uniform(3 * embed_dim, embed_dim, gen));
  } else {
    register_parameter("q_proj_weight", xavier_uniform(embed_dim, embed_dim, gen));
    register_parameter("k_proj_weight", xavier_uniform(embed_dim, kdim_, gen));
    register_parameter("v_proj_weight", xavier_uniform(embed_dim, vdim_, gen));
  }
  register_parameter("in_proj_bias", bias ? zeros({3 * embed_dim}) : Tensor());
  out_proj_ = register_module("out_proj", std::make_shared<Linear>(embed_dim, embed_dim, bias, gen));
  out_proj_->set_type_name("NonDynamicallyQuantizableLinear");
  if (bias) out_proj_->parameter("bias").detach().zero_();
}

/// Batch-first projected q [B, L, E], k [B, S, E], v [B, S, E] and the sizes.
struct MultiheadAttention::Projected {
  Tensor q, k, v;
  int64_t B, L, S;
};

MultiheadAttention::Projected MultiheadAttention::project(const Tensor& q, const Tensor& k, const Tensor& v) const {
  const int64_t E = embed_dim_;
  const Tensor& b = parameter("in_proj_bias");
  auto bias_part = [&](int64_t i) { return b.defined() ? slice(b, 0, i * E, (i + 1) * E) : Tensor(); };
  Projected p{Tensor(), Tensor(), Tensor(), q.size(0), q.size(1), k.size(1)};
  if (has_parameter("in_proj_weight") && parameter("in_proj_weight").defined()) {
    const Tensor& w = parameter("in_proj_weight");
    if (same_tensor(q, k) && same_tensor(k, v)) {  // self-attention: one GEMM for q, k and v
      std::vector<Tensor> qkv = split(linear(q, w, b), E, 2);
      p.q = qkv[0], p.k = qkv[1], p.v = qkv[2];
      return p;
    }
    p.q = linear(q, slice(w, 0, 0, E), bias_part(0));
    p.k = linear(k, slice(w, 0, E, 2 * E), bias_part(1));
    p.v = linear(v, slice(w, 0, 2 * E, 3 * E), bias_part(2));
    return p;
  }
  p.q = linear(q, parameter("q_proj_weight"), bias_part(0));
  p.k = linear(k, parameter("k_proj_weight"), bias_part(1));
  p.v = linear(v, parameter("v_proj_weight"), bias_part(2));
  return p;
}

Tensor MultiheadAttention::merged_mask(const Tensor& key_padding_mask, const Tensor& attn_mask, int64_t B, int64_t L,
                                       int64_t S, DType dtype) const {
  Tensor mask;
  if (attn_mask.defined()) {
    if (attn_mask.dim() == 2) {
      STRATA_CHECK(attn_mask.size(0) == L && attn_mask.size(1) == S,
                   "MultiheadAttention: the shape of the 2D attn_mask is ", attn_mask.sizes(), ", but should be (", L,
                   ", ", S, ")");
      mask = reshape(additive_mask(attn_mask, dtype, "attn_mask"), {1, 1, L, S});
    } else {
      STRATA_CHECK(attn_mask.dim() == 3 && attn_mask.size(0) == B * num_heads_ && attn_mask.size(1) == L &&
                       attn_mask.size(2) == S,
                   "MultiheadAttention: attn_mask must be 2-D (", L, ", ", S, ") or 3-D (", B * num_heads_, ", ", L,
                   ", ", S, "), got ", attn_mask.describe());
      mask = reshape(additive_mask(attn_mask, dtype, "attn_mask"), {B, num_heads_, L, S});
    }
  }
  if (key_padding_mask.defined()) {
    STRATA_CHECK(key_padding_mask.dim() == 2 && key_padding_mask.size(0) == B && key_padding_mask.size(1) == S,
                 "MultiheadAttention: expected key_padding_mask of shape (", B, ", ", S, "), got ",
                 key_padding_mask.describe());
    Tensor kpm = reshape(additive_mask(key_padding_mask, dtype, "key_padding_mask"), {B, 1, 1, S});
    mask = mask.defined() ? add(mask, kpm) : kpm;
  }
  return mask;
}

MultiheadAttention::Output MultiheadAttention::explicit_attention(const Projected& p, const Tensor& mask,
                                                                  bool average) const {
  const Tensor q = split_heads(p.q, num_heads_), k = split_heads(p.k, num_heads_), v = split_heads(p.v, num_heads_);
  Tensor scores = mul(matmul(q, transpose(k, 2, 3)), 1.0 / std::sqrt(static_cast<double>(q.size(3))));
  if (mask.defined()) scores = add(scores, mask);
  Tensor probs = softmax(scores, -1);
  if (is_training() && dropout_ > 0) probs = strata::dropout(probs, dropout_, true);
  Output out;
  out.output = merge_heads(matmul(probs, v));
  out.weights = average ? mean(probs, {1}) : probs;
  return out;
}

MultiheadAttention::Output MultiheadAttention::forward(const Tensor& query, const Tensor& key, const Tensor& value,
                                                       const Tensor& key_padding_mask, bool need_weights,
                                                       const Tensor& attn_mask, bool average_attn_weights,
                                                       bool is_causal) {
  STRATA_CHECK(query.defined() && key.defined() && value.defined(),
               "MultiheadAttention: query, key and value must be defined");
  const bool batched = query.dim() == 3;
  STRATA_CHECK((query.dim() == 2 || batched) && key.dim() == query.dim() && value.dim() == query.dim(),
               "MultiheadAttention: query, key and value must all be 3-D (batched) or 2-D (unbatched), got ",
               query.describe(), ", ", key.describe(), " and ", value.describe());
  STRATA_CHECK(query.size(-1) == embed_dim_ && key.size(-1) == kdim_ && value.size(-1) == vdim_,
               "MultiheadAttention: expected query, key and value widths ", embed_dim_, ", ", kdim_, " and ", vdim_,
               ", got ", query.describe(), ", ", key.describe(), " and ", value.describe());
  // Batch-first views: [L, B, E] → [B, L, E]; unbatched [L, E] → [1, L, E].
  auto to_bf = [&](const Tensor& t) { return !batched ? unsqueeze0(t) : batch_first_ ? t : transpose(t, 0, 1); };
  const Tensor q = to_bf(query), k = same_tensor(key, query) ? q : to_bf(key),
               v = same_tensor(value, key) ? k : to_bf(value);
  STRATA_CHECK(k.size(0) == q.size(0) && v.size(0) == q.size(0) && v.size(1) == k.size(1),
               "MultiheadAttention: key and value must have the query's batch size and equal lengths, got ",
               query.describe(), ", ", key.describe(), " and ", value.describe());
  const Projected p = project(q, k, v);
  const Tensor kpm = batched || !key_padding_mask.defined() ? key_padding_mask : unsqueeze0(key_padding_mask);
  // PyTorch: is_causal with a mask is a hint that the mask is causal; the fused op then applies it.
  const bool fused_causal = is_causal && !need_weights && !kpm.defined();
  Tensor mask = merged_mask(kpm, fused_causal ? Tensor() : attn_mask, p.B, p.L, p.S, q.dtype());
  if (is_causal && !attn_mask.defined() && !fused_causal) {
    const Tensor c = causal_mask(p.L, p.S, q.dtype());
    mask = mask.defined() ? add(mask, c) : c;
  }
  Output out;
  if (need_weights) {
    out = explicit_attention(p, mask, average_attn_weights);
  } else {
    out.output = multi_head_attention(p.q, p.k, p.v, num_heads_, mask, fused_causal, is_training() ? dropout_ : 0.0);
  }
  out.output = (*out_proj_)(out.output);
  if (!batched) {
    out.output = squeeze0(out.output);
    if (out.weights.defined()) out.weights = squeeze0(out.weights);
  } else if (!batch_first_) {
    out.output = transpose(out.output, 0, 1);
  }
  return out;
}

Tensor MultiheadAttention::forward(const Tensor& input) { return forward(input, input, input, Tensor(), false).output; }

// ---- TransformerEncoderLayer ----------------------------------------------------------------------

TransformerEncoderLayer::TransformerEncoderLayer(int64_t d_model, int64_t nhead,
                                                 const TransformerEncoderLayerOptions& options, Generator* gen)
    : Module("TransformerEncoderLayer"), options_(options) {
  STRATA_CHECK(options.activation == "relu" || options.activation == "gelu",
               "TransformerEncoderLayer: activation should be relu/gelu, not ", quote_field(options.activation));
  STRATA_CHECK(options.dim_feedforward > 0, "TransformerEncoderLayer: dim_feedforward must be positive, got ",
               options.dim_feedforward);
  STRATA_CHECK(options.ffn_chunks >= 1, "TransformerEncoderLayer: ffn_chunks must be at least 1, got ",
               options.ffn_chunks);
  self_attn_ = register_module(
      "self_attn", std::make_shared<MultiheadAttention>(d_model, nhead, options.dropout, options.bias, std::nullopt,
                                                        std::nullopt, options.batch_first, gen));
  linear1_ = register_module("linear1", std::make_shared<Linear>(d_model, options.dim_feedforward, options.bias, gen));
  dropout_ = register_module("dropout", std::make_shared<Dropout>(options.dropout, gen));
  linear2_ = register_module("linear2", std::make_shared<Linear>(options.dim_feedforward, d_model, options.bias, gen));
  const std::vector<int64_t> shape{d_model};
  norm1_ = register_module("norm1", std::make_shared<LayerNorm>(shape, options.layer_norm_eps, true, options.bias));
  norm2_ = register_module("norm2", std::make_shared<LayerNorm>(shape, options.layer_norm_eps, true, options.bias));
  dropout1_ = register_module("dropout1", std::make_shared<Dropout>(options.dropout, gen));
  dropout2_ = register_module("dropout2", std::make_shared<Dropout>(options.dropout, gen));
}

Tensor TransformerEncoderLayer::self_attention_block(const Tensor& x, const Tensor& mask, const Tensor& kpm,
                                                     bool causal) {
  Tensor out = self_attn_->forward(x, x, x, kpm, false, mask, true, causal).output;
  return (*dropout1_)(out);
}

// Note [Feed-forward in row chunks]
// The feed-forward block is 2/3 of a GPT block's activation bytes: linear1's output and its
// pre-activation (which GELU's backward reads) are [rows, 4E] each, and their backward holds the
// pre-activation, the output's gradient and the pre-activation's gradient at once — 3 x 12.6 MB at
// GPT's 8 x 256 tokens of width 384, a floor no plan of whole ops goes below (Auto's minimum was
// 14.5 % of the StoreAll peak). Every row of the block depends on that row alone, so with
// ffn_chunks = k the rows (tokens of the whole batch, x viewed as [rows, E]) run in k slices, one
// after another, and the k outputs are concatenated: the same function with a working set k times
// smaller, and under Auto k steps per op that the plan can keep, stream or recompute one by one.
// (Hugging Face's chunk_size_feed_forward is the same idea.) Slice c is rows
// [c·rows/k, (c+1)·rows/k); dropout draws its masks slice by slice in the same order in forward and
// in the Auto steps, so the two paths agree bit for bit; against ffn_chunks = 1 the values agree to
// the GEMM's summation order over a slice instead of all rows.

Tensor TransformerEncoderLayer::feed_forward_rows(const Tensor& x, int64_t begin, int64_t end) const {
  const Activation act = options_.activation == "gelu" ? Activation::GELU : Activation::ReLU;
  const Tensor rows = options_.ffn_chunks == 1 ? x : slice(reshape(x, {-1, x.size(-1)}), 0, begin, end);
  Tensor h = linear(rows, linear1_->parameter("weight"), linear1_->parameter("bias"), act);
  h = (*dropout_)(h);
  h = (*linear2_)(h);
  return (*dropout2_)(h);
}

Tensor TransformerEncoderLayer::feed_forward_block(const Tensor& x) {
  const int64_t k = options_.ffn_chunks;
  if (k == 1) return feed_forward_rows(x, 0, 0);
  const int64_t rows = x.numel() / x.size(-1);
  std::vector<Tensor> parts;
  for (int64_t c = 0; c < k; ++c) parts.push_back(feed_forward_rows(x, c * rows / k, (c + 1) * rows / k));
  return reshape(cat(parts, 0), x.sizes());
}

Tensor TransformerEncoderLayer::forward(const Tensor& src, const Tensor& src_mask, const Tensor& src_key_padding_mask,
                                        bool is_causal) {
  STRATA_CHECK(src.defined(), "TransformerEncoderLayer: src is undefined");
  // One op per statement (as in the zoo's blocks): each intermediate is released once consumed.
  Tensor x = src;
  if (options_.norm_first) {
    Tensor h = (*norm1_)(x);
    h = self_attention_block(h, src_mask, src_key_padding_mask, is_causal);
    x = add(x, h);
    h = (*norm2_)(x);
    h = feed_forward_block(h);
    return add(x, h);
  }
  Tensor h = self_attention_block(x, src_mask, src_key_padding_mask, is_causal);
  x = (*norm1_)(add(x, h));
  h = feed_forward_block(x);
  return (*norm2_)(add(x, h));
}

int64_t TransformerEncoderLayer::append_remat_steps(int64_t input, std::vector<remat::GraphStep>& steps) const {
  // forward(src): self-attention without masks (causal when set_causal), one step per op.
  const MultiheadAttention* sa = self_attn_.get();
  const int64_t E = sa->embed_dim(), H = sa->num_heads();
  const bool causal = causal_, training = is_training();
  const double p = options_.dropout;
  auto maybe_dropout = [&](const std::shared_ptr<Module>& d, int64_t x) {
    return training && p > 0 ? nn::append_remat_steps(d, x, steps) : x;
  };
  auto attention = [&](int64_t x) {
    const int64_t qkv = nn::append_remat_step(
        [sa](const autograd::TensorList& in) {
          return linear(in[0], sa->parameter("in_proj_weight"), sa->parameter("in_proj_bias"));
        },
        {x}, "in_proj", steps);
    const int64_t o = nn::append_remat_step(
        [E, H, causal, training, p](const autograd::TensorList& in) {
          const std::vector<Tensor> t = split(in[0], E, 2);
          return multi_head_attention(t[0], t[1], t[2], H, Tensor(), causal, training ? p : 0.0);
        },
        {qkv}, "attention", steps);
    return maybe_dropout(dropout1_, nn::append_remat_steps(sa->out_proj(), o, steps));
  };
  // Note [Feed-forward in row chunks]: per slice, linear1 + activation reads the block's input and
  // takes its rows; one step concatenates the slices' outputs back to the input's shape.
  auto feed_forward_slice = [&](int64_t x, int64_t c) {
    const Module* l1 = linear1_.get();
    const Activation act = options_.activation == "gelu" ? Activation::GELU : Activation::ReLU;
    const int64_t k = options_.ffn_chunks;
    int64_t h = nn::append_remat_step(
        [l1, act, c, k](const autograd::TensorList& in) {
          const int64_t rows = in[0].numel() / in[0].size(-1);
          const Tensor r =
              k == 1 ? in[0] : slice(reshape(in[0], {-1, in[0].size(-1)}), 0, c * rows / k, (c + 1) * rows / k);
          return linear(r, l1->parameter("weight"), l1->parameter("bias"), act);
        },
        {x}, "linear1+" + options_.activation, steps);
    h = nn::append_remat_steps(linear2_, maybe_dropout(dropout_, h), steps);
    return maybe_dropout(dropout2_, h);
  };
  auto feed_forward = [&](int64_t x) {
    const int64_t k = options_.ffn_chunks;
    if (k == 1) return feed_forward_slice(x, 0);
    std::vector<int64_t> parts{x};  // the input first: the concatenation takes its shape
    for (int64_t c = 0; c < k; ++c) parts.push_back(feed_forward_slice(x, c));
    return nn::append_remat_step(
        [](const autograd::TensorList& in) {
          return reshape(cat(std::vector<Tensor>(in.begin() + 1, in.end()), 0), in[0].sizes());
        },
        parts, "cat", steps);
  };
  auto residual = [&](int64_t a, int64_t b) {
    return nn::append_remat_step([](const autograd::TensorList& in) { return add(in[0], in[1]); }, {a, b}, "add",
                                 steps);
  };
  if (options_.norm_first) {
    const int64_t x1 = residual(input, attention(nn::append_remat_steps(norm1_, input, steps)));
    return residual(x1, feed_forward(nn::append_remat_steps(norm2_, x1, steps)));
  }
  const int64_t x1 = nn::append_remat_steps(norm1_, residual(input, attention(input)), steps);
  return nn::append_remat_steps(norm2_, residual(x1, feed_forward(x1)), steps);
}

}  // namespace strata::nn
