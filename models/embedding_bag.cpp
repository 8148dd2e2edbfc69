#include "models/embedding_bag.h"

#include "autograd/grad_mode.h"
#include "core/factories.h"

namespace strata::nn {

Embedding::Embedding(int64_t num_embeddings, int64_t embedding_dim, std::optional<int64_t> padding_idx,
                     std::optional<double> max_norm, double norm_type, Generator* gen)
    : Module("Embedding"),
      num_embeddings_(num_embeddings),
      embedding_dim_(embedding_dim),
      max_norm_(max_norm),
      norm_type_(norm_type) {
  STRATA_CHECK(num_embeddings > 0 && embedding_dim >= 0,
               "Embedding: num_embeddings must be positive and embedding_dim ", "non-negative, got ", num_embeddings,
               " and ", embedding_dim);
  if (padding_idx) {
    STRATA_CHECK(*padding_idx >= -num_embeddings && *padding_idx < num_embeddings, "Embedding: padding_idx ",
                 *padding_idx, " must be within num_embeddings (", num_embeddings, ")");
    padding_idx_ = *padding_idx < 0 ? *padding_idx + num_embeddings : *padding_idx;
  }
  STRATA_CHECK(!max_norm || *max_norm > 0, "Embedding: max_norm must be positive, got ", max_norm.value_or(0.0));
  STRATA_CHECK(norm_type > 0, "Embedding: norm_type must be positive, got ", norm_type);
  Tensor w = randn({num_embeddings, embedding_dim}, {}, gen);
  if (padding_idx_) w.select(0, *padding_idx_).zero_();
  register_parameter("weight", w);
}

Tensor Embedding::forward(const Tensor& input) {
  STRATA_CHECK(input.defined(), "Embedding: the input is undefined");
  const Tensor& w = parameter("weight");
  if (max_norm_) {
    autograd::NoGradGuard no_grad;
    embedding_renorm_(w, input, *max_norm_, norm_type_);
  }
  return embedding(w, input, padding_idx_);
}

std::string Embedding::extra_repr() const {
  std::string s = std::to_string(num_embeddings_) + ", " + std::to_string(embedding_dim_);
  if (padding_idx_) s += ", padding_idx=" + std::to_string(*padding_idx_);
  if (max_norm_) s += ", max_norm=" + py_float_repr(*max_norm_);
  if (max_norm_ && norm_type_ != 2.0) s += ", norm_type=" + py_float_repr(norm_type_);
  return s;
}

EmbeddingBag::EmbeddingBag(int64_t num_embeddings, int64_t embedding_dim, const std::string& mode,
                           bool include_last_offset, Generator* gen)
    : Module("EmbeddingBag"),
      num_embeddings_(num_embeddings),
      embedding_dim_(embedding_dim),
      mode_(mode),
      include_last_offset_(include_last_offset) {
  STRATA_CHECK(num_embeddings > 0 && embedding_dim > 0,
               "EmbeddingBag: num_embeddings and embedding_dim must be positive, got ", num_embeddings, " and ",
               embedding_dim);
  STRATA_CHECK(mode == "sum" || mode == "mean", "EmbeddingBag: mode '", mode,
               "' is not supported (expected 'sum' or 'mean')");
  register_parameter("weight", randn({num_embeddings, embedding_dim}, {}, gen));
}

Tensor EmbeddingBag::forward(const Tensor& input) { return forward(input, Tensor(), Tensor()); }

Tensor EmbeddingBag::forward(const Tensor& input, const Tensor& offsets, const Tensor& per_sample_weights) {
  STRATA_CHECK(input.defined(), "EmbeddingBag: the input is undefined");
  STRATA_CHECK(input.dtype() == DType::i64 || input.dtype() == DType::i32,
               "EmbeddingBag: input must hold i64 or i32 indices, got ", input.dtype());
  const EmbeddingBagMode mode = mode_ == "sum" ? EmbeddingBagMode::Sum : EmbeddingBagMode::Mean;
  STRATA_CHECK(!per_sample_weights.defined() || mode == EmbeddingBagMode::Sum,
               "EmbeddingBag: per_sample_weights are only supported with mode 'sum', got mode '", mode_, "'");
  if (input.dim() == 2) {
    STRATA_CHECK(!offsets.defined(), "EmbeddingBag: offsets must be omitted when the input is 2-D [B, L], got input ",
                 input.sizes(), " and offsets ", offsets.sizes());
    const int64_t bags = input.size(0), len = input.size(1);
    Tensor flat_offsets =
        arange(0, static_cast<double>(bags * len), static_cast<double>(len > 0 ? len : 1), {DType::i64, nullptr});
    if (len == 0) flat_offsets = zeros({bags}, {DType::i64, nullptr});
    Tensor psw = per_sample_weights;
    if (psw.defined()) {
      STRATA_CHECK(psw.sizes() == input.sizes(), "EmbeddingBag: per_sample_weights must have the input's shape ",
                   input.sizes(), ", got ", psw.sizes());
      psw = psw.reshape({bags * len});
    }
    return embedding_bag(parameter("weight"), input.reshape({bags * len}), flat_offsets, mode, psw, false);
  }
  STRATA_CHECK(input.dim() == 1, "EmbeddingBag: expected a 1-D input with offsets or a 2-D input [B, L], got ",
               input.sizes());
  STRATA_CHECK(offsets.defined(), "EmbeddingBag: offsets are required when the input is 1-D (got input ", input.sizes(),
               ")");
  return embedding_bag(parameter("weight"), input, offsets, mode, per_sample_weights, include_last_offset_);
}

std::string EmbeddingBag::extra_repr() const {
  std::string s = std::to_string(num_embeddings_) + ", " + std::to_string(embedding_dim_) + ", mode='" + mode_ + "'";
  if (include_last_offset_) s += ", include_last_offset=True";
  return s;
}

}  // namespace strata::nn
