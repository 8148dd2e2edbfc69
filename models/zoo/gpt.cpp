#include "models/zoo/gpt.h"

#include <cmath>

#include "core/factories.h"
#include "models/container.h"
#include "models/dropout.h"
#include "models/linear.h"
#include "models/normalization.h"
#include "models/zoo/detail/init.h"
#include "ops/binary.h"
#include "ops/embedding.h"
#include "ops/linalg.h"
#include "ops/shape_ops.h"
#include "ops/softmax_loss.h"

namespace strata::nn::zoo {

GPT::GPT(const GPTConfig& config, Generator* gen) : Module("GPT"), config_(config) {
  STRATA_CHECK(
      config.vocab_size > 0 && config.block_size > 0 && config.n_layer > 0 && config.n_head > 0 && config.n_embd > 0,
      "GPT: vocab_size, block_size, n_layer, n_head and n_embd must be positive, got ", config.vocab_size, ", ",
      config.block_size, ", ", config.n_layer, ", ", config.n_head, ", ", config.n_embd);
  STRATA_CHECK(config.n_embd % config.n_head == 0, "GPT: n_embd (", config.n_embd, ") must be a multiple of n_head (",
               config.n_head, ")");
  STRATA_CHECK(config.dropout >= 0 && config.dropout < 1, "GPT: dropout must lie in [0, 1), got ", config.dropout);
  auto transformer = register_module("transformer", std::make_shared<ModuleDict>());
  wte_ = transformer->register_module(
      "wte", std::make_shared<Embedding>(config.vocab_size, config.n_embd, std::nullopt, std::nullopt, 2.0, gen));
  wpe_ = transformer->register_module(
      "wpe", std::make_shared<Embedding>(config.block_size, config.n_embd, std::nullopt, std::nullopt, 2.0, gen));
  drop_ = transformer->register_module("drop", std::make_shared<Dropout>(config.dropout, gen));
  blocks_ = transformer->register_module("h", std::make_shared<RematSequential>());
  TransformerEncoderLayerOptions o;
  o.dim_feedforward = 4 * config.n_embd;
  o.dropout = config.dropout;
  o.activation = "gelu";
  o.batch_first = true;
  o.norm_first = true;
  o.bias = config.bias;
  o.ffn_chunks = config.ffn_chunks;
  for (int64_t i = 0; i < config.n_layer; ++i) {
    auto block = std::make_shared<TransformerEncoderLayer>(config.n_embd, config.n_head, o, gen);
    block->set_causal(true);
    blocks_->push_back(block);
  }
  ln_f_ = transformer->register_module(
      "ln_f", std::make_shared<LayerNorm>(std::vector<int64_t>{config.n_embd}, 1e-5, true, config.bias));
  lm_head_ = register_module("lm_head", std::make_shared<Linear>(config.n_embd, config.vocab_size, false, gen));
  init_weights(gen);
  lm_head_->register_parameter("weight", wte_->weight());  // weight tying: one tensor, two names
}

void GPT::init_weights(Generator* gen) {
  const double resid_std = 0.02 / std::sqrt(2.0 * static_cast<double>(config_.n_layer));
  init_normal(*wte_, "weight", 0.0, 0.02, gen);
  init_normal(*wpe_, "weight", 0.0, 0.02, gen);
  for (std::size_t i = 0; i < blocks_->size(); ++i) {
    auto& block = static_cast<TransformerEncoderLayer&>(*(*blocks_)[static_cast<int64_t>(i)]);
    for (const auto& [name, child] : block.named_modules()) {
      if (child->type_name() == "MultiheadAttention") {
        init_normal(*child, "in_proj_weight", 0.0, 0.02, gen);
        init_constant(*child, "in_proj_bias", 0.0);
      } else if (child->type_name() == "Linear" || child->type_name() == "NonDynamicallyQuantizableLinear") {
        const bool residual = name == "linear2" || name == "self_attn.out_proj";
        init_normal(*child, "weight", 0.0, residual ? resid_std : 0.02, gen);
        init_constant(*child, "bias", 0.0);
      }
    }
  }
}

Tensor GPT::forward(const Tensor& idx) {
  STRATA_CHECK(idx.defined() && idx.dim() == 2, "GPT: expected token indices [B, T], got ",
               idx.defined() ? idx.describe() : std::string("an undefined tensor"));
  const int64_t T = idx.size(1);
  STRATA_CHECK(T <= config_.block_size, "GPT: cannot forward a sequence of length ", T, ", the block size is only ",
               config_.block_size);
  const Tensor pos = arange(0, static_cast<double>(T), 1.0, {DType::i64, nullptr});
  Tensor x = (*wte_)(idx);
  x = add(x, (*wpe_)(pos));
  x = (*drop_)(x);
  x = (*blocks_)(x);
  x = (*ln_f_)(x);
  return linear(x, wte_->weight());
}

Tensor GPT::loss(const Tensor& idx, const Tensor& targets) {
  STRATA_CHECK(targets.defined() && targets.sizes() == idx.sizes(), "GPT: targets must have the shape of idx ",
               idx.sizes(), ", got ", targets.defined() ? targets.describe() : std::string("an undefined tensor"));
  const Tensor logits = forward(idx);
  return cross_entropy(reshape(logits, {-1, config_.vocab_size}), reshape(targets, {-1}), Tensor(), Reduction::Mean,
                       -1);
}

}  // namespace strata::nn::zoo
