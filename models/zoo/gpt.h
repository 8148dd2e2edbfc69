#pragma once
/// @file
/// Model zoo: a GPT-2-style decoder-only transformer.

#include <memory>

#include "core/rng.h"
#include "models/attention.h"
#include "models/embedding_bag.h"
#include "models/remat.h"

namespace strata::nn::zoo {

struct GPTConfig {
  int64_t vocab_size = 50304;
  int64_t block_size = 1024;  ///< the longest context (rows of the position embedding)
  int64_t n_layer = 12;
  int64_t n_head = 12;
  int64_t n_embd = 768;
  double dropout = 0.0;
  bool bias = true;  ///< biases in the linear layers and layer norms
  /// Each block's MLP runs on this many slices of the tokens (Note [Feed-forward in row chunks] in
  /// models/attention.cpp): the same function, a finer plan for Auto under small budgets.
  int64_t ffn_chunks = 1;
};

/// GPT-2 (Radford et al. 2019): token and position embeddings, n_layer pre-norm blocks of causal
/// self-attention and a GELU MLP (4 · n_embd wide), a final LayerNorm and an output head tied to
/// the token embedding. Each block is a TransformerEncoderLayer(norm_first, activation "gelu",
/// batch_first, made causal), so its state_dict keys are those of a PyTorch model built from
/// torch.nn.TransformerEncoderLayer: "transformer.wte.weight", "transformer.wpe.weight",
/// "transformer.h.0.self_attn.in_proj_weight", ..., "transformer.ln_f.weight", "lm_head.weight"
/// (the same tensor as wte's). The blocks run in a RematSequential (`blocks()`): set an Auto policy
/// on it to plan them per op, or run the model under a tape streamer like any other.
/// Initialization as GPT-2's: N(0, 0.02) weights and embeddings, the residual projections
/// (attention out_proj, MLP linear2) N(0, 0.02 / √(2 · n_layer)), zero biases.
class GPT : public Module {
 public:
  explicit GPT(const GPTConfig& config, Generator* gen = nullptr);
  /// Token indices [B, T] (i64 or i32, T <= block_size) → logits [B, T, vocab_size].
  Tensor forward(const Tensor& idx) override;
  /// The mean cross-entropy of forward(idx) against `targets` [B, T] (positions holding -1 are ignored).
  Tensor loss(const Tensor& idx, const Tensor& targets);
  RematSequential& blocks() { return *blocks_; }
  const GPTConfig& config() const { return config_; }

 private:
  void init_weights(Generator* gen);

  GPTConfig config_;
  std::shared_ptr<Embedding> wte_, wpe_;
  std::shared_ptr<Module> drop_, ln_f_, lm_head_;
  std::shared_ptr<RematSequential> blocks_;
};

}  // namespace strata::nn::zoo
