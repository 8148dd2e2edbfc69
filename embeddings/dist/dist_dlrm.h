#pragma once
/// @file
/// DistributedDLRM: hybrid-parallel DLRM training over a strata::dist::Communicator (issue 28 item
/// 2): the embedding tables sharded by a ShardPlan (ShardedEmbeddingBags), the bottom MLP, the
/// interaction and the top MLP replicated on every rank and run data-parallel (DataParallel), with
/// losses and parameters bitwise the same at any rank count for one global batch (Note
/// [Distributed DLRM step] in dist_dlrm.cpp).
///
///     DistributedDLRM model(config, plan, {&heap, nullptr}, comm);   // every rank, same arguments
///     float loss = model.train_step(dense, bags, targets);          // every rank, the global batch
///     Tensor p = model.score(dense, bags);                           // [B, 1] on every rank

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "dist/communicator.h"
#include "dist/data_parallel/data_parallel.h"
#include "embeddings/dist/shard_plan.h"
#include "embeddings/dist/sharded_bags.h"
#include "embeddings/dlrm.h"
#include "embeddings/dlrm_config.h"
#include "embeddings/dlrm_step_rules.h"
#include "embeddings/kernels.h"
#include "models/checkpoint.h"
#include "models/optim/optimizer.h"
#include "models/zoo/dlrm.h"

namespace strata::emb {

/// Wall time per phase of a rank's training steps, summed over steps (Note [Distributed step
/// phases] in dist_dlrm.cpp): each phase is compute only, the time the rank was blocked in
/// collectives meanwhile is `waited` (OpStats::wait_seconds of every collective).
struct DistStepTimes {
  double lookup_remote = 0;    ///< the nodes for the other ranks' samples (before the exchange starts)
  double lookup = 0;           ///< this rank's pooled rows: its own nodes, then the received ones
  double bottom_mlp = 0;       ///< the bottom MLP's forward, every local chunk
  double interaction = 0;      ///< the interaction's forward, every local chunk
  double top_mlp = 0;          ///< the top MLP's forward and the loss
  double backward = 0;         ///< loss.backward() (the MLPs, the buckets' launches), pooled gradients
  double sparse_update = 0;    ///< ShardedEmbeddingBags::backward: gradient exchange's packing, update
  double dense_optimizer = 0;  ///< the MLPs' optimizer step
  double other = 0;            ///< the batch check, DataParallel's chunk set-up and output gather
  double waited = 0;           ///< blocked in collectives
  int64_t steps = 0;
  /// The phases as the one-process run reports them (its printer): lookup = both lookups, update =
  /// sparse + dense.
  DLRMPhaseTimes as_phases() const;
  /// This minus `earlier` (the steps between two snapshots).
  DistStepTimes since(const DistStepTimes& earlier) const;
};

/// The model besides its tables (the tables are the plan's).
struct DistributedDLRMConfig {
  /// Bottom MLP widths including its input (the reference's --arch-mlp-bot); the last is the
  /// tables' dim d (every table of the plan must have it).
  std::vector<int64_t> bottom_mlp;
  /// Top MLP widths after the interaction (--arch-mlp-top); the last must be 1 (the click
  /// probability, after a sigmoid).
  std::vector<int64_t> top_mlp;
  /// "dot" or "cat" (--arch-interaction-op); the dot interaction without the diagonal.
  std::string interaction = "dot";
  /// The optimizers, as TieredDLRM's (--optimizer; sparse_optimizer and dense_optimizer in
  /// embeddings/dlrm.h): sgd (SGD on both), rwsadagrad (row-wise Adagrad on the tables, element-wise
  /// on the MLPs), adagrad (element-wise Adagrad on both).
  OptimizerKind optimizer = OptimizerKind::SGD;
  /// The base learning rate of the MLPs and the tables (--learning-rate); each step's rate is
  /// lr_schedule's at the step count (LRSchedule in embeddings/dlrm_step_rules.h, as TieredDLRM's).
  double learning_rate = 0.01;
  /// Warm-up and decay (--lr-num-warmup-steps, --lr-decay-start-step, --lr-num-decay-steps); none by default.
  LRSchedule lr_schedule = {};
  /// The loss (--loss-function, Note [DLRM loss] in embeddings/dlrm_step_rules.h), computed from the
  /// gathered [B, 1] on every rank: mse, bce or wbce with `loss_weights` (one per target class,
  /// --loss-weights); the probabilities clamped into [loss_threshold, 1 − loss_threshold] when
  /// 0 < loss_threshold < 1 (--loss-threshold; the scores of forward() and score() too).
  LossFunction loss_function = LossFunction::BCE;
  std::vector<double> loss_weights = {1.0, 1.0};
  double loss_threshold = 0.0;
  /// Seeds the MLPs (nn::zoo::DLRM with external tables, drawn from Generator(seed)) and the tables
  /// (initial_value(seed, ...)): the same on every rank, never by rank.
  uint64_t seed = 0;
  /// The fixed chunks C of the global batch (DataParallelOptions::chunks): at least the rank count;
  /// results depend on C (the GEMM shapes and the gradient tree), never on the rank count.
  int64_t chunks = 8;
  /// --check-finite: each training step checks this rank's samples (dense features, targets)
  /// before the forward, then the batch's probabilities, the gradient of its samples' pooled
  /// embeddings, the loss and the MLPs' reduced gradients, all before any update, for NaN and
  /// ±inf. Any rank's finding stops every rank with the same error naming the rank (Note
  /// [Distributed finite check] in dist_dlrm_finite.cpp).
  bool check_finite = false;
};

class DistributedDLRM {
 public:
  /// Collective. The MLPs from config.seed, the shards of `plan` this rank holds (comm.rank()) in
  /// `memory`. Throws strata::Error naming the field for bad MLP widths, an interaction other than
  /// dot or cat, a top MLP not ending in 1, a table whose dim is not the bottom MLP's last width, a
  /// plan for another rank count, chunks below the rank count, a negative learning rate or schedule
  /// step count, a decay that starts before the warm-up ends, a loss_threshold outside [0, 1), or
  /// wbce without a non-negative weight for targets 0 and 1.
  DistributedDLRM(const DistributedDLRMConfig& config, ShardPlan plan, TableMemory memory,
                  dist::Communicator& comm = dist::Communicator::world())
      : DistributedDLRM(config, std::move(plan), ShardStorage(memory), comm) {}
  /// As above, the shards placed in `storage` (Note [Shard storage] in sharded_bags.h: DRAM, the
  /// rank's slow tier, or the slow tier behind a DRAM cache); also throws as ShardedEmbeddingBags'
  /// constructor does when a rank cannot place its shards (on every rank).
  DistributedDLRM(const DistributedDLRMConfig& config, ShardPlan plan, const ShardStorage& storage,
                  dist::Communicator& comm = dist::Communicator::world());
  ~DistributedDLRM();
  DistributedDLRM(const DistributedDLRM&) = delete;
  DistributedDLRM& operator=(const DistributedDLRM&) = delete;

  /// One training step (forward, backward, the optimizers) on a global batch of B samples, every
  /// rank passing the same: `dense` [B, bottom_mlp[0]] row-major, one Bags per table (B bags each,
  /// no per-sample weights), `targets` [B]. Returns the config's loss over the global batch
  /// (bitwise the same on every rank), after stepping the MLPs and the tables at
  /// next_learning_rate(). Collective. A bad batch on any rank (sizes that disagree, B < ranks, a
  /// bad index, weights, a wbce target without a weight, or a batch whose size or contents differ
  /// from another rank's) throws strata::Error on every rank, naming the rank and the input, before
  /// anything is updated; so does a non-finite value with config.check_finite.
  float train_step(std::span<const float> dense, std::span<const Bags> bags, std::span<const float> targets);

  /// The click probabilities of this rank's samples of the global batch (rows local_rows(B)): [B_r,
  /// 1], no update. Collective; bad input as train_step.
  Tensor forward(std::span<const float> dense, std::span<const Bags> bags);
  /// The click probabilities of the whole global batch on every rank: [B, 1], forward()'s rows
  /// gathered in rank order (allgatherv), e.g. for rank 0 to compute accuracy and AUC. Collective.
  Tensor score(std::span<const float> dense, std::span<const Bags> bags);

  /// Collective. Saves everything training depends on into the checkpoint directory `path` (on a
  /// file system every rank sees), each rank streaming its own rows and their optimizer state,
  /// rank 0 the manifest, the MLPs and the dense optimizer's state (Note [Resharding checkpoints]
  /// in embeddings/dist/dist_checkpoint.h): `extra` metadata (e.g. DLRMTrainState::to_metadata())
  /// is stored too (a key the manifest uses itself is refused, naming it). Atomic: the previous
  /// checkpoint in `path` stays loadable until the new manifest replaces it. Rows are streamed
  /// through a buffer of at most `chunk_bytes` (one row at least). A failure on any rank throws
  /// strata::Error on every rank, naming the rank and the file.
  void save(const std::string& path, const CheckpointMetadata& extra = {},
            std::size_t chunk_bytes = kCheckpointChunkBytes);
  /// Collective. Loads a checkpoint directory written by save() at any rank count: each rank reads
  /// the rows its own plan holds, from whichever files have them. All or nothing: the manifest,
  /// the model (table rows and dims, MLP widths, interaction, optimizer kind: the field is named),
  /// every file and entry this rank needs, the MLPs and the dense optimizer's state are checked on
  /// every rank before anything changes; a failure on any rank throws strata::Error on every rank
  /// naming the rank and the file. Rows stream in through a buffer of at most `chunk_bytes`.
  /// Returns the manifest's metadata (extra keys included).
  CheckpointMetadata load(const std::string& path, std::size_t chunk_bytes = kCheckpointChunkBytes);
  /// Training steps taken (restored by load(); drives the learning-rate schedule).
  int64_t steps() const { return steps_; }
  /// The learning rate of the next step: config.lr_schedule's at steps() + 1 from
  /// config.learning_rate (TieredDLRM::next_learning_rate's for the same flags and steps).
  double next_learning_rate() const;
  /// The rate this object's last step trained the MLPs and the tables at (config.learning_rate
  /// before its first step).
  double learning_rate() const { return learning_rate_; }
  /// This rank's phase times of every training step since construction (not restored by load()).
  const DistStepTimes& step_times() const { return times_; }

  /// This rank's samples of a global batch of B: DataParallel's chunk-aligned rows, which are also
  /// the sample slice of its embeddings. row_boundaries gives every rank's (ranks + 1 entries).
  dist::RowRange local_rows(int64_t batch) const { return ddp_->local_rows(batch); }
  std::vector<int64_t> row_boundaries(int64_t batch) const { return ddp_->row_boundaries(batch); }

  /// The MLPs under the reference's names ("bot_l.0.weight", "top_l.2.bias").
  nn::zoo::DLRM& dense_module();
  /// The MLPs' DataParallel (its buckets: one per MLP layer, the top MLP's last layer first).
  const dist::DataParallel& data_parallel() const { return *ddp_; }
  /// This rank's shards (read_row, row_begin, row_end).
  const ShardedEmbeddingBags& tables() const { return *tables_; }
  const DistributedDLRMConfig& config() const { return config_; }
  dist::Communicator& communicator() const { return comm_; }

 private:
  class ChunkedDLRM;
  struct Feed;
  class PhaseClock;
  int64_t check_batch(std::span<const float> dense, std::span<const Bags> bags, const std::span<const float>* targets);
  Tensor local_dense(std::span<const float> dense, dist::RowRange rows) const;
  // Note [Distributed finite check] (dist_dlrm_finite.cpp).
  std::string finite_step_name() const;
  void check_finite_inputs(std::span<const float> dense, std::span<const float> targets, dist::RowRange rows);
  void check_finite_output(const Tensor& probabilities) const;
  /// Ends a training step after its forward without a backward (the pooled rows, DataParallel's step).
  void abandon_step();
  void check_finite_gradients(float loss, dist::RowRange rows, const ShardedEmbeddingBags::PendingBackward& embedding);
  Tensor run_local(std::span<const float> dense, std::span<const Bags> bags, int64_t batch);
  void make_stages();
  /// The rate of the MLPs' optimizer and the tables' update from here on.
  void set_learning_rate(double lr);
  /// The config's loss of the gathered probabilities z [B, 1] (clamped here) against `targets`.
  Tensor compute_loss(const Tensor& z, std::span<const float> targets) const;

  DistributedDLRMConfig config_;
  dist::Communicator& comm_;
  std::unique_ptr<ShardedEmbeddingBags> tables_;
  std::shared_ptr<ChunkedDLRM> dense_;
  std::unique_ptr<dist::DataParallel> ddp_;
  std::unique_ptr<optim::Optimizer> opt_;
  std::unique_ptr<Feed> feed_;
  int64_t steps_ = 0;
  double learning_rate_ = 0;
  DistStepTimes times_;
  std::unique_ptr<PhaseClock> clock_;
  std::vector<dist::DataParallel::Stage> stages_;  // the training forward's (make_stages)
};

}  // namespace strata::emb
