#pragma once
/// @file
/// nn::Embedding and nn::EmbeddingBag.

#include <optional>

#include "core/rng.h"
#include "models/module.h"
#include "ops/embedding.h"

namespace strata::nn {

/// A lookup table (torch.nn.Embedding): forward(indices) gives weight rows, shape indices.sizes() +
/// [embedding_dim]. weight [num_embeddings, embedding_dim] starts N(0, 1) with row `padding_idx`
/// (optional; negative counts from the end) zeroed; that row gets no gradient. With `max_norm`,
/// each forward first renormalizes the looked-up rows in place to that `norm_type`-norm at most
/// (ops/embedding.h embedding_renorm_). Sparse gradients and scale_grad_by_freq are not supported.
class Embedding : public Module {
 public:
  Embedding(int64_t num_embeddings, int64_t embedding_dim, std::optional<int64_t> padding_idx = std::nullopt,
            std::optional<double> max_norm = std::nullopt, double norm_type = 2.0, Generator* gen = nullptr);
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;
  Tensor& weight() { return parameter("weight"); }
  int64_t num_embeddings() const { return num_embeddings_; }
  int64_t embedding_dim() const { return embedding_dim_; }
  /// The padding row (made non-negative), if any.
  std::optional<int64_t> padding_idx() const { return padding_idx_; }

 private:
  int64_t num_embeddings_, embedding_dim_;
  std::optional<int64_t> padding_idx_;
  std::optional<double> max_norm_;
  double norm_type_;
};

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
