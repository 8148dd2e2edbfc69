#pragma once
/// @file
/// nn::MultiheadAttention and nn::TransformerEncoderLayer (torch.nn's structure, parameter names,
/// initialization and results), over the fused attention op (ops/attention.h).

#include <memory>
#include <optional>
#include <string>

#include "core/rng.h"
#include "models/module.h"
#include "models/remat.h"

namespace strata::nn {

/// Multi-head attention of batch-first q [B, L, E], k [B, S, E] and v [B, S, Ev] already projected:
/// each split into `num_heads` heads of E / num_heads (Ev / num_heads) columns — views, no copy —,
/// attended with scaled_dot_product_attention (additive or bool `mask` broadcastable to
/// [B, num_heads, L, S], `causal`, dropout `dropout_p` from `gen`), and the heads concatenated
/// back: [B, L, Ev]. E and Ev must be multiples of num_heads.
Tensor multi_head_attention(const Tensor& q, const Tensor& k, const Tensor& v, int64_t num_heads,
                            const Tensor& mask = Tensor(), bool causal = false, double dropout_p = 0.0,
                            Generator* gen = nullptr);

/// torch.nn.MultiheadAttention. Parameters as PyTorch's: `in_proj_weight` [3E, E] when key and
/// value have the embedding width (else `q_proj_weight` [E, E], `k_proj_weight` [E, kdim],
/// `v_proj_weight` [E, vdim]), `in_proj_bias` [3E] with `bias`, and `out_proj` (a Linear
/// E → E); xavier-uniform projections and zero biases, as PyTorch initializes them. add_bias_kv
/// and add_zero_attn are not supported.
class MultiheadAttention : public Module {
 public:
  MultiheadAttention(int64_t embed_dim, int64_t num_heads, double dropout = 0.0, bool bias = true,
                     std::optional<int64_t> kdim = std::nullopt, std::optional<int64_t> vdim = std::nullopt,
                     bool batch_first = false, Generator* gen = nullptr);

  /// The attention output and (with need_weights) the attention weights.
  struct Output {
    Tensor output;   ///< [B, L, E] (batch_first) or [L, B, E]; [L, E] for an unbatched query
    Tensor weights;  ///< [B, L, S] averaged over heads, [B, H, L, S] when not averaged; or undefined
  };

  /// PyTorch's forward: query [L, B, E] ([B, L, E] when batch_first, or unbatched [L, E]), key
  /// and value likewise with S rows. `key_padding_mask` [B, S] (or [S]) and `attn_mask` [L, S] or
  /// [B·H, L, S]: bool (true = not attended) or floating (added). `is_causal` with an attn_mask
  /// is PyTorch's hint that the mask is causal; without one it applies the causal mask. With
  /// `need_weights` the probabilities are formed explicitly (and returned); without, the fused
  /// op runs and saves no [L, S] matrix.
  Output forward(const Tensor& query, const Tensor& key, const Tensor& value, const Tensor& key_padding_mask = Tensor(),
                 bool need_weights = true, const Tensor& attn_mask = Tensor(), bool average_attn_weights = true,
                 bool is_causal = false);
  /// Self-attention of `input` without weights (forward(x, x, x, {}, false).output).
  Tensor forward(const Tensor& input) override;

  int64_t embed_dim() const { return embed_dim_; }
  int64_t num_heads() const { return num_heads_; }
  bool batch_first() const { return batch_first_; }
  double dropout() const { return dropout_; }
  const std::shared_ptr<Module>& out_proj() const { return out_proj_; }

 private:
  struct Projected;
  Projected project(const Tensor& q, const Tensor& k, const Tensor& v) const;
  Tensor merged_mask(const Tensor& key_padding_mask, const Tensor& attn_mask, int64_t B, int64_t L, int64_t S,
                     DType dtype) const;
  Output explicit_attention(const Projected& p, const Tensor& mask, bool average) const;

  int64_t embed_dim_, num_heads_, kdim_, vdim_;
  double dropout_;
  bool batch_first_;
  std::shared_ptr<Module> out_proj_;
};

/// Options of a TransformerEncoderLayer beyond d_model and nhead (PyTorch's keywords).
struct TransformerEncoderLayerOptions {
  int64_t dim_feedforward = 2048;
  double dropout = 0.1;
  std::string activation = "relu";  ///< "relu" or "gelu"
  double layer_norm_eps = 1e-5;
  bool batch_first = false;
  bool norm_first = false;
  bool bias = true;
  /// The feed-forward block runs on this many slices of the token rows, one after another (Note
  /// [Feed-forward in row chunks]); 1 (PyTorch's layer) runs it on all rows at once.
  int64_t ffn_chunks = 1;
};

/// torch.nn.TransformerEncoderLayer: self-attention and a feed-forward block (linear1 → activation
/// → dropout → linear2), each with dropout and a residual, layer norms after each (or, with
/// norm_first, before each). Children and state_dict keys as PyTorch's: self_attn, linear1,
/// dropout, linear2, norm1, norm2, dropout1, dropout2. Under Auto it plans per op (its steps:
/// norms, projections, attention, the fused linear + activation, residual adds).
class TransformerEncoderLayer : public Module, public RematGraphModule {
 public:
  TransformerEncoderLayer(int64_t d_model, int64_t nhead, const TransformerEncoderLayerOptions& options = {},
                          Generator* gen = nullptr);
  /// src as MultiheadAttention's query; `src_mask` and `src_key_padding_mask` as its attn_mask and
  /// key_padding_mask; `is_causal` applies the causal mask (or hints that src_mask is one).
  Tensor forward(const Tensor& src, const Tensor& src_mask, const Tensor& src_key_padding_mask = Tensor(),
                 bool is_causal = false);
  Tensor forward(const Tensor& src) override { return forward(src, Tensor(), Tensor(), causal_); }
  /// Makes forward(src) causal (a GPT block; PyTorch passes is_causal on every call instead).
  void set_causal(bool causal) { causal_ = causal; }
  int64_t append_remat_steps(int64_t input, std::vector<remat::GraphStep>& steps) const override;
  const TransformerEncoderLayerOptions& options() const { return options_; }

 private:
  Tensor self_attention_block(const Tensor& x, const Tensor& mask, const Tensor& kpm, bool causal);
  Tensor feed_forward_block(const Tensor& x);
  /// linear1 + activation, dropout, linear2, dropout2 on rows [begin, end) of x viewed as [rows, E].
  Tensor feed_forward_rows(const Tensor& x, int64_t begin, int64_t end) const;

  TransformerEncoderLayerOptions options_;
  bool causal_ = false;
  std::shared_ptr<MultiheadAttention> self_attn_;
  std::shared_ptr<Module> linear1_, dropout_, linear2_, norm1_, norm2_, dropout1_, dropout2_;
};

}  // namespace strata::nn
