// The DLRM's lookups as one autograd node whose backward is the fused sparse update
// (Note [Embedding stage] in embeddings/embedding_stage.h).
#include "embeddings/embedding_stage.h"

#include <chrono>
#include <cstring>

#include "autograd/grad_mode.h"
#include "autograd/node.h"
#include "core/error.h"
#include "core/factories.h"
#include "core/pin_set.h"
#include "core/threading.h"

namespace strata::emb {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

}  // namespace

/// Per-step scratch, reused so the step loop does not allocate once it has seen its largest batch.
struct EmbeddingStage::Step {
  std::vector<std::vector<int64_t>> indices;  // per table: derived indices (quotient-remainder parts)
  std::vector<std::vector<float>> weights;    // per feature: gathered learned pooling weights
  std::vector<OutputSlice> slices;
  std::vector<Tensor> grads;
  std::vector<SparseOptimizerState*> states;
  std::vector<UpdateWorkspace*> workspaces;
  std::vector<LearnedPoolingWeights*> learned;  // per table (empty when no feature learns)
};

EmbeddingStage::EmbeddingStage(std::vector<StageFeature> features, std::vector<Table*> tables,
                               std::vector<ManagedTable*> policies, const SparseOptimizer& opt)
    : features_(std::move(features)),
      tables_(std::move(tables)),
      policies_(std::move(policies)),
      opt_(opt),
      step_(std::make_unique<Step>()) {
  STRATA_CHECK(policies_.size() == tables_.size(), "EmbeddingStage: ", tables_.size(), " tables but ", policies_.size(),
               " policies");
  int64_t next = 0;
  bool any_learned = false;
  for (const StageFeature& f : features_) {
    STRATA_CHECK(f.first == next && f.first + f.parts() <= num_tables(), "EmbeddingStage: ", f.name,
                 " does not own tables ", f.first, "..", f.first + f.parts() - 1, " of ", num_tables());
    if (f.kind == StageFeature::Kind::QuotientRemainder) {
      const int64_t c = f.collisions;
      STRATA_CHECK(
          c >= 1 && tables_[f.first]->nvectors() == (f.rows + c - 1) / c && tables_[f.first + 1]->nvectors() == c,
          "EmbeddingStage: ", f.name, " (", f.rows, " rows, ", c,
          " collisions) needs a quotient and a remainder table of ceil(rows / collisions) and collisions rows");
    } else {
      STRATA_CHECK(tables_[f.first]->nvectors() == f.rows, "EmbeddingStage: ", f.name, " has ", f.rows,
                   " rows but its table ", tables_[f.first]->nvectors());
    }
    STRATA_CHECK(!f.learned_pooling || f.kind == StageFeature::Kind::Plain, "EmbeddingStage: ", f.name,
                 ": learned pooling weights need a plain table");
    next += f.parts();
    any_learned = any_learned || f.learned_pooling;
    learned_.push_back(nullptr);
    if (f.learned_pooling) {
      auto w = std::make_unique<LearnedPoolingWeights>();
      w->v.assign(static_cast<std::size_t>(f.rows), 1.0f);
      if (opt_.kind != SparseOptimizer::Kind::SGD) w->sum.assign(static_cast<std::size_t>(f.rows), 0.0f);
      learned_.back() = std::move(w);
    }
  }
  STRATA_CHECK(next == num_tables(), "EmbeddingStage: the features own ", next, " of ", num_tables(), " tables");
  for (Table* t : tables_) {
    states_.push_back(std::make_unique<SparseOptimizerState>(*t, opt_));
    workspaces_.push_back(std::make_unique<UpdateWorkspace>());
    step_->states.push_back(states_.back().get());
    step_->workspaces.push_back(workspaces_.back().get());
  }
  if (any_learned) {
    for (std::size_t k = 0; k < features_.size(); ++k)
      for (int64_t part = 0; part < features_[k].parts(); ++part) step_->learned.push_back(learned_[k].get());
  }
  for (ManagedTable* m : policies_) has_policies_ = has_policies_ || m != nullptr;
  step_->indices.resize(tables_.size());
  step_->weights.resize(features_.size());
  bags_.resize(tables_.size());
  looked_up_.assign(tables_.size(), 0);
  updated_.assign(tables_.size(), 0);
}

EmbeddingStage::~EmbeddingStage() = default;

void EmbeddingStage::derive_bags(std::span<const Bags> bags) {
  for (std::size_t k = 0; k < features_.size(); ++k) {
    const StageFeature& f = features_[k];
    const Bags& in = bags[k];
    if (f.kind == StageFeature::Kind::Plain) {
      Bags b = in;
      if (f.learned_pooling) {
        STRATA_CHECK(in.weights.empty(), "embedding ", f.name,
                     ": per-sample weights were given, but with "
                     "--weighted-pooling learned they are the table's learned weights v_W_l[",
                     k, "]");
        auto& w = step_->weights[k];
        w.resize(in.indices.size());
        const float* v = learned_[k]->v.data();
        for (std::size_t i = 0; i < w.size(); ++i) w[i] = v[in.indices[i]];
        b.weights = w;
      }
      bags_[static_cast<std::size_t>(f.first)] = b;
      continue;
    }
    // Quotient-remainder: the same bags over derived indices (the weights apply to both parts).
    const std::size_t n = in.indices.size();
    auto& q = step_->indices[static_cast<std::size_t>(f.first)];
    auto& r = step_->indices[static_cast<std::size_t>(f.first + 1)];
    q.resize(n);
    r.resize(n);
    const int64_t c = f.collisions;
    parallel_for(static_cast<int64_t>(n), 1 << 14, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) {
        q[static_cast<std::size_t>(i)] = in.indices[static_cast<std::size_t>(i)] / c;
        r[static_cast<std::size_t>(i)] = in.indices[static_cast<std::size_t>(i)] % c;
      }
    });
    bags_[static_cast<std::size_t>(f.first)] = Bags{q, in.offsets, in.weights};
    bags_[static_cast<std::size_t>(f.first + 1)] = Bags{r, in.offsets, in.weights};
  }
}

void EmbeddingStage::run_before_lookup_hooks() {
  if (!has_policies_) return;
  const auto h0 = Clock::now();
  // Tables' hooks may run concurrently (embeddings/policy.h).
  parallel_for(num_tables(), 1, [&](int64_t begin, int64_t end) {
    for (int64_t p = begin; p < end; ++p)
      if (ManagedTable* m = policies_[static_cast<std::size_t>(p)])
        m->before_lookup(bags_[static_cast<std::size_t>(p)].indices);
  });
  times_.hooks += seconds_since(h0);
}

void EmbeddingStage::run_after_update_hooks() {
  if (!has_policies_) return;
  const auto h0 = Clock::now();
  parallel_for(num_tables(), 1, [&](int64_t begin, int64_t end) {
    for (int64_t p = begin; p < end; ++p)
      if (ManagedTable* m = policies_[static_cast<std::size_t>(p)]) m->after_update();
  });
  times_.hooks += seconds_since(h0);
}

std::vector<Tensor> EmbeddingStage::lookup_all(int64_t batch) {
  int64_t width = 0;
  for (const Table* t : tables_) width += t->featuresize();
  if (!out_.defined() || out_.numel() != batch * width) out_ = empty({batch * width});
  PinSet pins;
  pins.add(out_, AccessMode::Write).acquire();
  auto& slices = step_->slices;
  slices.clear();
  std::vector<Tensor> outs;
  int64_t offset = 0;
  for (const Table* t : tables_) {
    const int64_t d = t->featuresize();
    slices.push_back({static_cast<float*>(out_.data_ptr()) + offset, d});
    outs.push_back(out_.narrow(0, offset, batch * d).view({batch, d}));
    offset += batch * d;
  }
  lookup_ensemble(tables_, bags_, Pooling::Sum, slices, Indices::Validated);
  pins.release();
  for (std::size_t p = 0; p < tables_.size(); ++p) looked_up_[p] += bags_[p].indices.size();
  return outs;
}

std::vector<Tensor> EmbeddingStage::forward(std::span<const Bags> bags) {
  STRATA_CHECK(bags.size() == features_.size(), "EmbeddingStage: expected bags for ", features_.size(), " tables, got ",
               bags.size());
  // 1. Every logical table's indices are valid before anything reads or counts them.
  for (std::size_t k = 0; k < features_.size(); ++k) validate(features_[k].name, features_[k].rows, bags[k]);
  derive_bags(bags);
  run_before_lookup_hooks();
  const int64_t batch = bags.empty() ? 0 : bags[0].batch();
  std::vector<Tensor> outs = lookup_all(batch);
  ++generation_;
  if (!autograd::GradMode::is_enabled()) {
    run_after_update_hooks();
    return outs;
  }
  const uint64_t generation = generation_;
  auto node = autograd::make_node("EmbeddingStageBackward", autograd::TensorList{},
                                  [this, generation](autograd::Node&, const autograd::TensorList& grads) {
                                    backward(grads, generation);
                                    return autograd::TensorList{};
                                  });
  autograd::set_history(outs, node);
  return outs;
}

void EmbeddingStage::backward(const std::vector<Tensor>& grads_in, uint64_t generation) {
  STRATA_CHECK(generation == generation_,
               "EmbeddingStageBackward: the embedding stage ran another forward since "
               "this graph was recorded; its bags are gone (backward each step before the next forward)");
  const auto t0 = Clock::now();
  auto& grads = step_->grads;
  auto& slices = step_->slices;
  grads.clear();
  slices.clear();
  PinSet pins;
  for (const Tensor& g_in : grads_in) {
    Tensor g = g_in.stride(1) == 1 ? g_in : g_in.contiguous();
    grads.push_back(g);
    pins.add(g, AccessMode::Read);
  }
  pins.acquire();
  for (const Tensor& g : grads) slices.push_back({static_cast<float*>(g.data_ptr()), g.stride(0)});
  update_ensemble(tables_, bags_, Pooling::Sum, slices, opt_, step_->states, step_->workspaces, Indices::Validated,
                  step_->learned);
  pins.release();
  grads.clear();  // the gradients' memory goes back now
  for (std::size_t p = 0; p < tables_.size(); ++p)
    updated_[p] += static_cast<std::uint64_t>(workspaces_[p]->last_unique_rows());
  times_.update += seconds_since(t0);
  run_after_update_hooks();
}

void EmbeddingStage::reset_stats() {
  std::fill(looked_up_.begin(), looked_up_.end(), 0);
  std::fill(updated_.begin(), updated_.end(), 0);
  times_ = {};
}

}  // namespace strata::emb
