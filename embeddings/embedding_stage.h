#pragma once
/// @file
/// EmbeddingStage: a DLRM's embedding lookups as one autograd node whose backward is the tables'
/// fused sparse update (Note [Embedding stage]).
///
/// Note [Embedding stage]
/// forward(bags), one Bags per logical table:
/// 1. validation: every logical table's bags are validated once (embeddings/kernels.h validate,
///    against the logical rows), before any policy hook or row read — a bad index changes nothing.
/// 2. derived bags: a quotient-remainder table (the reference's QREmbeddingBag) looks up index i
///    as row i / c of its quotient table and row i mod c of its remainder table (c = collisions;
///    integer division — the reference divides in float32, which differs for ids >= 2^24);
///    --weighted-pooling learned gathers the per-sample weights v[i] (LearnedPoolingWeights).
/// 3. the policies' before_lookup hooks (concurrently over tables), then lookup_ensemble
///    (Indices::Validated) writes table p's pooled bags into block p ([B, d_p]) of one buffer.
/// 4. outputs: one [B, d_p] tensor per stored table, views of that buffer (so a dot interaction
///    reads them in place), recorded — in grad mode — as the outputs of one node,
///    EmbeddingStageBackward, without inputs. Without grad mode the after_update hooks run now.
/// backward: the node receives one [B, d_p] gradient per output (zeros for an output nobody used,
/// which leave every row, accumulator and pooling weight as it was) and hands them straight to
/// update_ensemble at the learning rate of set_learning_rate(): the table gradient is never
/// materialized and the rows are updated inside loss.backward(); then the after_update hooks.
/// Combining a quotient-remainder pair (mult, add, concat) or projecting a mixed-dimension table
/// are ordinary autograd ops on the outputs, so their gradients reach the node as the reference's
/// autograd computes them. The node refers to the stage's state of the last forward (the stage
/// must outlive the graph): a backward after another forward is refused.

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "embeddings/kernels.h"
#include "embeddings/policy.h"
#include "embeddings/table.h"

namespace strata::emb {

/// One logical table (one Bags per batch) and the tables that store it.
struct StageFeature {
  enum class Kind : uint8_t {
    Plain,              ///< one table of `rows` rows
    QuotientRemainder,  ///< tables `first` (ceil(rows / collisions) rows) and `first` + 1 (collisions rows)
  };
  Kind kind = Kind::Plain;
  std::string name;              ///< for messages: "table 3"
  int64_t rows = 0;              ///< the logical rows; indices are validated against them
  int64_t collisions = 0;        ///< QuotientRemainder only
  int64_t first = 0;             ///< the first stored table
  bool learned_pooling = false;  ///< --weighted-pooling learned (Plain only)
  int64_t parts() const { return kind == Kind::Plain ? 1 : 2; }
};

/// Time the stage spent, summed since construction or reset_stats().
struct StageTimes {
  double hooks = 0;   ///< policy hooks (before_lookup, after_update)
  double update = 0;  ///< the fused sparse update in backward (hooks excluded)
};

class EmbeddingStage {
 public:
  /// `tables[p]` are the stored tables (each feature's parts in order), `policies[p]` their policy
  /// (null: a table whose rows all live in the fast tier). Builds one optimizer state per table
  /// (and learned pooling weights of one per row where asked). Throws strata::Error for a feature
  /// that does not match the tables.
  EmbeddingStage(std::vector<StageFeature> features, std::vector<Table*> tables, std::vector<ManagedTable*> policies,
                 const SparseOptimizer& opt);
  ~EmbeddingStage();
  EmbeddingStage(const EmbeddingStage&) = delete;
  EmbeddingStage& operator=(const EmbeddingStage&) = delete;

  /// Note [Embedding stage]. `bags` holds one Bags per feature (equal batch sizes, checked by the
  /// caller); they must stay valid until the backward ran. Returns one [B, d_p] tensor per table.
  /// Throws strata::Error naming the table, bag and row for a bad index.
  std::vector<Tensor> forward(std::span<const Bags> bags);
  /// The learning rate of the next backward's sparse update.
  void set_learning_rate(float lr) { opt_.lr = lr; }

  int64_t num_features() const { return static_cast<int64_t>(features_.size()); }
  const StageFeature& feature(int64_t k) const { return features_.at(static_cast<std::size_t>(k)); }
  int64_t num_tables() const { return static_cast<int64_t>(tables_.size()); }
  const SparseOptimizer& optimizer() const { return opt_; }
  SparseOptimizerState& state(int64_t p) { return *states_.at(static_cast<std::size_t>(p)); }
  /// Feature k's learned pooling weights (null without --weighted-pooling learned).
  LearnedPoolingWeights* learned(int64_t k) { return learned_.at(static_cast<std::size_t>(k)).get(); }
  /// Table p's bags of the last forward (derived and with the gathered weights).
  const Bags& bags(int64_t p) const { return bags_.at(static_cast<std::size_t>(p)); }

  /// Per table: row lookups, and rows updated (distinct rows per step), since reset_stats().
  std::span<const std::uint64_t> looked_up() const { return looked_up_; }
  std::span<const std::uint64_t> updated() const { return updated_; }
  const StageTimes& times() const { return times_; }
  void reset_stats();
  /// Runs the policies' after_update hooks (concurrently over tables).
  void run_after_update_hooks();

 private:
  struct Step;
  void derive_bags(std::span<const Bags> bags);
  void run_before_lookup_hooks();
  std::vector<Tensor> lookup_all(int64_t batch);
  void backward(const std::vector<Tensor>& grads, uint64_t generation);

  std::vector<StageFeature> features_;
  std::vector<Table*> tables_;
  std::vector<ManagedTable*> policies_;
  bool has_policies_ = false;
  SparseOptimizer opt_;
  std::vector<std::unique_ptr<SparseOptimizerState>> states_;
  std::vector<std::unique_ptr<UpdateWorkspace>> workspaces_;
  std::vector<std::unique_ptr<LearnedPoolingWeights>> learned_;  // per feature
  std::unique_ptr<Step> step_;
  std::vector<Bags> bags_;  // per table, the last forward's
  Tensor out_;              // the outputs' buffer: table p's [B, d_p] block after those of tables < p
  uint64_t generation_ = 0;
  std::vector<std::uint64_t> looked_up_, updated_;
  StageTimes times_;
};

}  // namespace strata::emb
