#pragma once
// The DistributedDLRM tests' model, batches and one-process reference (tests/cpp/emb_dist): eight
// tables of dim 4, bottom MLP 5-8-4, top MLP 6-1, seed 77, 5 chunks (one per rank beyond 5);
// table-wise, row-wise and mixed plans; seeded batches; a Reference that trains the same model in
// one process with neither DistributedDLRM nor DataParallel (per-chunk autograd::grad, tree_sum, a
// 1-rank ShardedEmbeddingBags).
#include <algorithm>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "autograd/engine.h"
#include "autograd/grad_mode.h"
#include "core/factories.h"
#include "core/rng.h"
#include "dist/communicator.h"
#include "dist/reduction.h"
#include "embeddings/dist/dist_dlrm.h"
#include "embeddings/dlrm.h"
#include "embeddings/dlrm_step_rules.h"
#include "memory/heap.h"
#include "ops/shape_ops.h"

namespace strata::emb::dlrm_test {

inline dist::Communicator& comm() { return dist::Communicator::world(); }

constexpr int64_t kDense = 5;

// Eight tables of dim 4 (bytes 6400, 2400, 1600, 1440, 1280, 1120, 160, 96).
inline std::vector<TableSpec> tables() {
  return {{"a", 400, 4, 4}, {"b", 150, 4, 4}, {"c", 100, 4, 4}, {"d", 90, 4, 4},
          {"g", 80, 4, 4},  {"h", 70, 4, 4},  {"e", 10, 4, 4},  {"f", 6, 4, 4}};
}

inline DistributedDLRMConfig config(OptimizerKind optimizer = OptimizerKind::SGD) {
  return {.bottom_mlp = {kDense, 8, 4},
          .top_mlp = {6, 1},
          .optimizer = optimizer,
          .learning_rate = optimizer == OptimizerKind::SGD ? 0.2 : 0.02,
          .seed = 77,
          .chunks = std::max(5, comm().size())};  // 5 up to 5 ranks (uneven shares); one per rank beyond
}

enum class Kind { table_wise, row_wise, mixed };

inline ShardPlan plan(Kind kind, int ranks) {
  ShardPlanOptions o{.ranks = ranks, .fast_budget_bytes = 1 << 20, .row_blocks = 4};
  switch (kind) {
    case Kind::table_wise: o.balance_target = 1e9; break;
    case Kind::row_wise: o.balance_target = 1.0; break;
    case Kind::mixed:  // e and f replicated; a row-wise at 2 and 4 ranks; the rest table-wise
      o.dp_boundary_bytes = 200;
      o.balance_target = ranks == 2 ? 1.05 : 1.2;  // table-wise alone is 1.056 at 2 ranks
      break;
  }
  return plan_shards(tables(), o);
}

// The global batch of step `step`: dense N(0, 1), targets 0/1, bags of 0..4 rows (duplicates allowed).
struct Batch {
  std::vector<float> dense, targets;
  std::vector<std::vector<int64_t>> indices, offsets;
  std::vector<Bags> bags;
  Batch(int64_t batch, int step) {
    std::mt19937_64 gen(500 + static_cast<uint64_t>(step));
    std::normal_distribution<float> normal;
    for (int64_t i = 0; i < batch * kDense; ++i) dense.push_back(normal(gen));
    for (int64_t s = 0; s < batch; ++s) targets.push_back(static_cast<float>(gen() % 2));
    for (const TableSpec& t : tables()) {
      indices.emplace_back();
      offsets.push_back({0});
      for (int64_t s = 0; s < batch; ++s) {
        for (uint64_t k = gen() % 5; k > 0; --k)
          indices.back().push_back(static_cast<int64_t>(gen() % static_cast<uint64_t>(t.rows)));
        offsets.back().push_back(static_cast<int64_t>(indices.back().size()));
      }
    }
    for (std::size_t t = 0; t < indices.size(); ++t) bags.push_back({indices[t], offsets[t]});
  }
};

inline Tensor rows_of(const std::vector<float>& values, int64_t first, int64_t rows, int64_t width) {
  Tensor t = empty({rows, width}, {DType::f32});
  std::memcpy(t.data<float>(), values.data() + first * width, static_cast<std::size_t>(rows * width) * 4);
  return t;
}

// One process, no communicator: the step of Note [Distributed DLRM step] restated, with the
// config's learning-rate schedule, clamp and loss (embeddings/dlrm_step_rules.h).
class Reference {
 public:
  Reference(memory::Heap& heap, OptimizerKind optimizer) : Reference(heap, config(optimizer)) {}
  explicit Reference(memory::Heap& heap, const DistributedDLRMConfig& c)
      : config_(c),
        tables_(plan(Kind::table_wise, 1), 0, {&heap, nullptr}, config_.seed, nullptr,
                sparse_optimizer(c.optimizer, 0.0f).kind) {
    nn::zoo::DLRMOptions o{.sparse_feature_size = 4, .bottom_mlp = config().bottom_mlp, .top_mlp = config().top_mlp};
    o.embedding_sizes.clear();
    for (const TableSpec& t : tables()) o.embedding_sizes.push_back(t.rows);
    o.external_tables = true;
    Generator gen(config_.seed);
    mlp_ = std::make_shared<nn::zoo::DLRM>(o, &gen);
    opt_ = dense_optimizer(c.optimizer, mlp_->parameters(), config_.learning_rate);
  }

  // Chunk c's probabilities from its dense rows and pooled rows.
  Tensor chunk(const Tensor& dense, const Tensor& pooled) {
    return mlp_->top_mlp()(mlp_->interact(mlp_->bottom_mlp()(dense), split(pooled, 4, 1)));
  }

  float step(const Batch& b) {
    const int64_t batch = b.bags[0].batch();
    const Tensor pooled = tables_.forward(b.bags);
    const std::vector<dist::RowRange> split = dist::split_rows(batch, config_.chunks);
    std::vector<Tensor> leaves, outs;
    for (const dist::RowRange& r : split) {
      leaves.push_back(pooled.narrow(0, r.begin, r.size()).detach());
      leaves.back().set_requires_grad(true);
      outs.push_back(chunk(rows_of(b.dense, r.begin, r.size(), kDense), leaves.back()));
    }
    const Tensor z = cat(outs, 0);
    const Tensor loss = dlrm_loss(clamp_probabilities(z, config_.loss_threshold), b.targets, config_.loss_function,
                                  config_.loss_weights);
    const Tensor g = autograd::grad({loss}, {z})[0];
    std::vector<Tensor> params = mlp_->parameters();
    std::vector<std::vector<Tensor>> per_param(params.size());
    std::vector<Tensor> pooled_grad;
    for (std::size_t c = 0; c < split.size(); ++c) {
      autograd::TensorList inputs = params;
      inputs.push_back(leaves[c]);
      const autograd::TensorList grads =
          autograd::grad({outs[c]}, inputs, {g.narrow(0, split[c].begin, split[c].size()).contiguous()});
      for (std::size_t p = 0; p < params.size(); ++p) per_param[p].push_back(grads[p]);
      pooled_grad.push_back(grads.back());
    }
    for (std::size_t p = 0; p < params.size(); ++p) params[p].set_grad(dist::tree_sum(per_param[p]));
    const double lr = config_.lr_schedule.rate(config_.learning_rate, ++steps_);
    for (optim::ParamGroup& group : opt_->param_groups()) group.options["lr"] = lr;
    opt_->step();
    opt_->zero_grad();
    tables_.backward(b.bags, cat(pooled_grad, 0).contiguous(), static_cast<float>(lr));
    return loss.item<float>();
  }

  Tensor score(const Batch& b) {
    autograd::NoGradGuard no_grad;
    const Tensor pooled = tables_.forward(b.bags);
    std::vector<Tensor> outs;
    for (const dist::RowRange& r : dist::split_rows(b.bags[0].batch(), config_.chunks))
      outs.push_back(chunk(rows_of(b.dense, r.begin, r.size(), kDense), pooled.narrow(0, r.begin, r.size())));
    return clamp_probabilities(cat(outs, 0), config_.loss_threshold);
  }

  nn::zoo::DLRM& mlp() { return *mlp_; }
  const ShardedEmbeddingBags& embeddings() const { return tables_; }

 private:
  DistributedDLRMConfig config_;
  ShardedEmbeddingBags tables_;
  std::shared_ptr<nn::zoo::DLRM> mlp_;
  std::unique_ptr<optim::Optimizer> opt_;
  int64_t steps_ = 0;
};

}  // namespace strata::emb::dlrm_test
