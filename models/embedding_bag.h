#pragma once
/// @file
/// nn::EmbeddingBag.

#include "core/rng.h"
#include "models/module.h"
#include "ops/embedding.h"

namespace strata::nn {

/// Sums or averages bags of embedding rows (torch.nn.EmbeddingBag, modes "sum" and "mean"; "max",
/// max_norm, padding_idx and sparse gradients are not supported). weight [num_embeddings,
/// embedding_dim] starts N(0, 1) like PyTorch's.
class EmbeddingBag : public Module {
 public:
  EmbeddingBag(int64_t num_embeddings, int64_t embedding_dim, const std::string& mode = "mean",
               bool include_last_offset = false, Generator* gen = nullptr);
  /// A 2-D input [B, L] is B bags of L indices each (no offsets).
  Tensor forward(const Tensor& input) override;
  /// `input` 1-D indices with `offsets` (bag starts), or 2-D [B, L] with `offsets` undefined;
  /// `per_sample_weights` (optional, input's shape) needs mode "sum".
  Tensor forward(const Tensor& input, const Tensor& offsets, const Tensor& per_sample_weights = Tensor());
  std::string extra_repr() const override;
  Tensor& weight() { return parameter("weight"); }

 private:
  int64_t num_embeddings_, embedding_dim_;
  std::string mode_;
  bool include_last_offset_;
};

}  // namespace strata::nn
