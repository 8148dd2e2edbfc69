#pragma once
/// @file
/// Model zoo: DLRM as in the public reference (facebookresearch/dlrm, dlrm_s_pytorch.py;
/// REFERENCE.md §1), with its embedding tables as plain tensors in nn::EmbeddingBag modules (the
/// tiered, cached tables are the embeddings library's).

#include <string>
#include <vector>

#include "core/rng.h"
#include "models/container.h"

namespace strata::nn::zoo {

struct DLRMOptions {
  /// Embedding dimension d (--arch-sparse-feature-size).
  int64_t sparse_feature_size = 2;
  /// Rows per table (--arch-embedding-size).
  std::vector<int64_t> embedding_sizes = {4, 3, 2};
  /// Bottom MLP widths including its input (--arch-mlp-bot); the last must equal d.
  std::vector<int64_t> bottom_mlp = {4, 3, 2};
  /// Top MLP layer widths after the interaction (--arch-mlp-top); its input width is computed
  /// from the interaction, as the reference prepends it.
  std::vector<int64_t> top_mlp = {4, 2, 1};
  /// "dot" or "cat" (--arch-interaction-op).
  std::string interaction = "dot";
  /// Keep the diagonal of the dot interaction (--arch-interaction-itself).
  bool interaction_itself = false;
  /// The tables live outside the module (emb::TieredDLRM's tiered embedding stage): no emb_l is
  /// built, and the model runs as bottom_mlp(), the caller's lookups, interact(), top_mlp().
  bool external_tables = false;
};

/// bot_l (Linear + ReLU after every layer) → embedding bags emb_l (mode sum) → interaction →
/// top_l (Linear + ReLU, Sigmoid after the last). The one DLRM model: emb::TieredDLRM runs it with
/// `external_tables` and its tiered tables in place of emb_l. state_dict keys are the reference's:
/// "emb_l.0.weight", "bot_l.0.weight", "top_l.2.bias". Initialized like the reference: Linear
/// weights N(0, sqrt(2 / (in + out))), biases N(0, sqrt(1 / out)), tables U(±sqrt(1 / rows)).
class DLRM : public Module {
 public:
  explicit DLRM(const DLRMOptions& options, Generator* gen = nullptr);
  /// `dense` [B, bottom_mlp[0]]; per table k, `indices[k]` (1-D, i64/i32) and `offsets[k]` (B bag
  /// starts); `per_sample_weights` empty or one per table (weighted pooling). Returns [B, top_mlp.back()].
  Tensor forward(const Tensor& dense, const std::vector<Tensor>& indices, const std::vector<Tensor>& offsets,
                 const std::vector<Tensor>& per_sample_weights = {});
  /// Single-input forward is not defined for DLRM (throws with the signature to use).
  Tensor forward(const Tensor& input) override;
  /// The interaction alone: x [B, d] and one [B, d] per table → the top MLP's input.
  Tensor interact(const Tensor& x, const std::vector<Tensor>& embedded) const;
  /// Width of the top MLP's input: d + F(F−1)/2 (dot; F(F+1)/2 with itself) or F·d (cat), F = tables + 1.
  int64_t interaction_width() const;
  const DLRMOptions& options() const { return options_; }
  /// bot_l and top_l (FusedMLPs; top_l ends in the Sigmoid).
  Sequential& bottom_mlp() { return *bot_; }
  Sequential& top_mlp() { return *top_; }

 private:
  DLRMOptions options_;
  std::shared_ptr<Sequential> bot_, top_;
  std::shared_ptr<ModuleList> emb_;
};

/// Parses a dash-separated list of positive integers like the reference's --arch-* flags ("4-3-2");
/// errors name `flag` and the offending text.
std::vector<int64_t> parse_arch(const std::string& text, const std::string& flag);

/// A Sequential of Linear layers each followed by an activation module, whose forward fuses every
/// ReLU or Sigmoid that follows a Linear into the Linear's GEMM epilogue (ops/linalg.h `linear`
/// with an Activation): one op per layer instead of two, the same parameters and state_dict as the
/// plain Sequential. Consecutive fused layers run as one ops/linalg.h `linear_stack`, which at
/// inference takes row blocks through all of them (Note [Row blocks through a linear stack]).
/// Children in any other arrangement run one by one.
class FusedMLP : public Sequential {
 public:
  Tensor forward(const Tensor& input) override;
};

/// The reference's create_mlp: Linear(widths[i] → widths[i + 1]) each followed by ReLU (Sigmoid
/// after the last with `sigmoid_last`), weights N(0, sqrt(2 / (in + out))), biases N(0, sqrt(1 / out)),
/// as a FusedMLP. Linear layers sit at even indices, so state_dict keys are "0.weight", "2.bias", ...
std::shared_ptr<Sequential> reference_mlp(const std::vector<int64_t>& widths, bool sigmoid_last, Generator* gen);

/// Width of the top MLP's input for `tables` embedding tables of dimension `d`: d + F(F−1)/2 for
/// "dot" (F(F+1)/2 with `itself`), F·d for "cat", F = tables + 1.
int64_t interaction_width(int64_t tables, int64_t d, const std::string& interaction, bool itself);

}  // namespace strata::nn::zoo
