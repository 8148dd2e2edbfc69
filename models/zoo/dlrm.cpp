#include "models/zoo/dlrm.h"

#include <cmath>
#include <cstdlib>
#include <vector>

#include "core/error.h"
#include "core/factories.h"
#include "core/text.h"
#include "models/activation.h"
#include "models/embedding_bag.h"
#include "models/linear.h"
#include "models/zoo/detail/init.h"
#include "ops/embedding.h"
#include "ops/linalg.h"
#include "ops/shape_ops.h"

namespace strata::nn::zoo {
namespace {

void check_widths(const std::vector<int64_t>& w, const char* what, std::size_t min_size) {
  STRATA_CHECK(w.size() >= min_size, "DLRM: ", what, " needs at least ", min_size, " width(s), got ", w.size());
  for (std::size_t i = 0; i < w.size(); ++i)
    STRATA_CHECK(w[i] >= 1, "DLRM: ", what, " width ", i, " must be positive, got ", w[i]);
}

}  // namespace

Tensor FusedMLP::forward(const Tensor& input) {
  // Runs of Linear + ReLU/Sigmoid pairs go to linear_stack together (row blocks at inference).
  const auto& children = child_slots();
  Tensor x = input;
  std::vector<LinearLayer> run;
  auto flush = [&] {
    if (!run.empty()) x = linear_stack(x, run);
    run.clear();
  };
  for (std::size_t i = 0; i < children.size(); ++i) {
    auto* lin = dynamic_cast<Linear*>(children[i].module.get());
    const Module* next = i + 1 < children.size() ? children[i + 1].module.get() : nullptr;
    const Activation act = next == nullptr                                 ? Activation::None
                           : dynamic_cast<const ReLU*>(next) != nullptr    ? Activation::ReLU
                           : dynamic_cast<const Sigmoid*>(next) != nullptr ? Activation::Sigmoid
                                                                           : Activation::None;
    // A layer with hooks runs on its own, through them (Note [Module hooks]).
    if (lin == nullptr || act == Activation::None || lin->has_hooks() || next->has_hooks()) {
      flush();
      x = (*children[i].module)(x);
      continue;
    }
    run.push_back({lin->weight(), lin->has_parameter("bias") ? lin->bias() : Tensor(), act});
    ++i;  // the activation runs in the epilogue
  }
  flush();
  return x;
}

std::shared_ptr<Sequential> reference_mlp(const std::vector<int64_t>& widths, bool sigmoid_last, Generator* gen) {
  auto mlp = std::make_shared<FusedMLP>();
  for (std::size_t i = 0; i + 1 < widths.size(); ++i) {
    auto lin = std::make_shared<Linear>(widths[i], widths[i + 1], true, gen);
    const double n = static_cast<double>(widths[i]), m = static_cast<double>(widths[i + 1]);
    init_normal(*lin, "weight", 0.0, std::sqrt(2.0 / (m + n)), gen);
    init_normal(*lin, "bias", 0.0, std::sqrt(1.0 / m), gen);
    mlp->push_back(lin);
    if (sigmoid_last && i + 2 == widths.size())
      mlp->push_back(std::make_shared<Sigmoid>());
    else
      mlp->push_back(std::make_shared<ReLU>());
  }
  return mlp;
}

int64_t interaction_width(int64_t tables, int64_t d, const std::string& interaction, bool itself) {
  const int64_t f = tables + 1;
  if (interaction == "cat") return f * d;
  return d + (itself ? f * (f + 1) / 2 : f * (f - 1) / 2);
}

std::vector<int64_t> parse_arch(const std::string& text, const std::string& flag) {
  std::vector<int64_t> out;
  std::size_t start = 0;
  STRATA_CHECK(!text.empty(), flag, ": empty list (expected dash-separated positive integers like \"4-3-2\")");
  while (true) {
    const std::size_t dash = text.find('-', start);
    const std::string part = text.substr(start, dash == std::string::npos ? std::string::npos : dash - start);
    char* end = nullptr;
    const long long v = part.empty() ? 0 : std::strtoll(part.c_str(), &end, 10);
    STRATA_CHECK(!part.empty() && end != nullptr && *end == '\0' && v >= 1, flag, ": ", quote_field(text),
                 " is not a dash-separated list of positive integers (bad element ", quote_field(part), ")");
    out.push_back(v);
    if (dash == std::string::npos) break;
    start = dash + 1;
  }
  return out;
}

DLRM::DLRM(const DLRMOptions& o, Generator* gen) : Module("DLRM"), options_(o) {
  STRATA_CHECK(o.sparse_feature_size >= 1, "DLRM: sparse feature size must be positive, got ", o.sparse_feature_size);
  check_widths(o.embedding_sizes, "embedding sizes", 1);
  check_widths(o.bottom_mlp, "bottom MLP", 2);
  check_widths(o.top_mlp, "top MLP", 1);
  STRATA_CHECK(o.interaction == "dot" || o.interaction == "cat", "DLRM: interaction must be \"dot\" or \"cat\", got \"",
               o.interaction, "\"");
  STRATA_CHECK(o.bottom_mlp.back() == o.sparse_feature_size, "DLRM: the bottom MLP's last width (", o.bottom_mlp.back(),
               ") must equal the sparse feature size (", o.sparse_feature_size, ")");
  std::vector<int64_t> top{interaction_width()};
  top.insert(top.end(), o.top_mlp.begin(), o.top_mlp.end());
  if (o.external_tables) {  // the caller's tables; the MLPs draw from `gen` as they would after emb_l
    bot_ = register_module("bot_l", reference_mlp(o.bottom_mlp, false, gen));
    top_ = register_module("top_l", reference_mlp(top, true, gen));
    return;
  }
  emb_ = std::make_shared<ModuleList>();
  for (int64_t rows : o.embedding_sizes) {
    auto bag = std::make_shared<EmbeddingBag>(rows, o.sparse_feature_size, "sum", false, gen);
    const double bound = std::sqrt(1.0 / static_cast<double>(rows));
    bag->register_parameter("weight", uniform({rows, o.sparse_feature_size}, -bound, bound, {}, gen));
    emb_->push_back(bag);
  }
  // The reference's module registration order: emb_l, bot_l, top_l.
  register_module("emb_l", emb_);
  bot_ = register_module("bot_l", reference_mlp(o.bottom_mlp, false, gen));
  top_ = register_module("top_l", reference_mlp(top, true, gen));
}

int64_t DLRM::interaction_width() const {
  return zoo::interaction_width(static_cast<int64_t>(options_.embedding_sizes.size()), options_.sparse_feature_size,
                                options_.interaction, options_.interaction_itself);
}

Tensor DLRM::interact(const Tensor& x, const std::vector<Tensor>& embedded) const {
  std::vector<Tensor> feats{x};
  feats.insert(feats.end(), embedded.begin(), embedded.end());
  if (options_.interaction == "cat") return cat(feats, 1);
  return dot_interaction(feats, options_.interaction_itself);
}

Tensor DLRM::forward(const Tensor& dense, const std::vector<Tensor>& indices, const std::vector<Tensor>& offsets,
                     const std::vector<Tensor>& per_sample_weights) {
  const std::size_t tables = options_.embedding_sizes.size();
  STRATA_CHECK(!options_.external_tables, "DLRM: this model's tables are external (external_tables); run ",
               "bottom_mlp(), the lookups, interact() and top_mlp()");
  STRATA_CHECK(dense.dim() == 2 && dense.sizes()[1] == options_.bottom_mlp[0], "DLRM: expected dense features [B, ",
               options_.bottom_mlp[0], "], got ", dense.sizes());
  STRATA_CHECK(indices.size() == tables && offsets.size() == tables, "DLRM: expected indices and offsets for ", tables,
               " tables, got ", indices.size(), " and ", offsets.size());
  STRATA_CHECK(per_sample_weights.empty() || per_sample_weights.size() == tables,
               "DLRM: expected per-sample weights for ", tables, " tables or none, got ", per_sample_weights.size());
  const int64_t batch = dense.sizes()[0];
  Tensor x = (*bot_)(dense);
  std::vector<Tensor> ly;
  ly.reserve(tables);
  for (std::size_t k = 0; k < tables; ++k) {
    STRATA_CHECK(offsets[k].dim() == 1 && offsets[k].sizes()[0] == batch, "DLRM: table ", k, ": expected ", batch,
                 " offsets (one bag per sample), got ", offsets[k].sizes());
    auto* bag = static_cast<EmbeddingBag*>((*emb_)[static_cast<int64_t>(k)].get());
    ly.push_back(bag->forward(indices[k], offsets[k], per_sample_weights.empty() ? Tensor() : per_sample_weights[k]));
  }
  return (*top_)(interact(x, ly));
}

Tensor DLRM::forward(const Tensor&) {
  STRATA_FAIL("DLRM: forward takes (dense, indices per table, offsets per table), not one tensor");
}

}  // namespace strata::nn::zoo
