#pragma once
/// @file
/// TieredDLRM: the DLRM of the public reference (dlrm_s_pytorch.py; REFERENCE.md §1) with its
/// embedding tables in tiered memory (dissertation §5.5–5.6): the model is nn::zoo::DLRM with
/// external tables (its FusedMLPs: bias + activation fused into the GEMM, and its interaction),
/// the tables are the EmbeddingStage's (embedding_stage.h), built per policy in a fast
/// (DRAM) and a slow heap, the dot or cat interaction, and the sparse optimizer fused into the
/// tables' backward (the table gradient is never materialized).
///
/// Note [DLRM training step]
/// train_step is forward → loss.backward() → dense optimizer step:
/// 1. bottom MLP: x = bot_l(dense) [B, d], recorded by autograd.
/// 2. lookup: the EmbeddingStage node (Note [Embedding stage]) validates every table's indices
///    once, runs the policy hooks and writes every stored table's pooled bags into one buffer; its
///    outputs are [B, d_p] views of it. A quotient-remainder pair is combined (mult, add, concat)
///    and a mixed-dimension table projected (Note [DLRM table kinds]) by ordinary ops.
/// 3. interaction: dot_interaction({x, E_0, …, E_{T−1}}) (or cat) — the reference's
///    `interact_features`; plain tables' features are read in place from the stage's buffer.
/// 4. top MLP and loss (mse, bce, wbce; outputs clamped with --loss-threshold: Note [DLRM loss] in
///    embeddings/dlrm_step_rules.h, shared with DistributedDLRM).
/// 5. backward: one autograd pass fills the dense parameters' .grad (MLPs, projections) and hands
///    each stored table's output gradient to the stage's node, which applies the fused sparse
///    optimizer (emb::update_ensemble) at the step's learning rate — inside loss.backward(); the
///    table gradient is never materialized.
/// 6. update: the dense optimizer steps the dense parameters. Indices are validated before any
///    row is read, so bad input leaves every parameter as it was.
/// The reference applies one optimizer to all parameters (see OptimizerKind); Strata does the
/// same: `sgd` is SGD on both sides, `rwsadagrad` is row-wise Adagrad on the tables and
/// element-wise Adagrad on the dense parameters, `adagrad` is element-wise Adagrad on both (the
/// sparse optimizer kind SparseOptimizer::Kind::Adagrad; its per-element table state lives in
/// ordinary memory beside the tables). Learned pooling weights follow the dense rule (SGD with
/// sgd, element-wise Adagrad otherwise), updated sparsely with the rows (bitwise the same as a
/// dense step with zero gradients elsewhere).
/// Phase times: the sparse update and its hooks count as `update`, not `backward`.
///
/// Note [DLRM table kinds]
/// Per logical table k of R rows (config.table_rows()), as the reference's create_emb builds it:
/// - plain: one table R × d, U(±sqrt(1/R)); state_dict name emb_l.k.weight.
/// - quotient-remainder (--qr-flag, R > --qr-threshold; QREmbeddingBag): a quotient table of
///   ceil(R / c) rows and a remainder table of c rows (c = --qr-collisions), both d wide and both
///   U(sqrt(1/R), 1) — the reference calls nn.init.uniform_(w, sqrt(1/R)), whose upper bound is
///   torch's default 1. Index i pools row i / c of the quotient and i mod c of the remainder table
///   (each a sum-pooled bag); the feature is q ⊙ r (mult), q + r (add) or [q, r] (concat, 2d
///   wide). Names emb_l.k.weight_q, emb_l.k.weight_r.
/// - mixed-dimension (--md-flag, R > --md-threshold; PrEmbeddingBag): a table R × d_k with d_k from
///   the reference's md_solver (DLRMConfig::table_dims), U(±sqrt(1/R)), followed when d_k < d by
///   a bias-free projection d_k → d (a dense parameter, Xavier-uniform, trained by the dense
///   optimizer). Names emb_l.k.embs.weight and emb_l.k.proj.weight. Tables of at most
///   --md-threshold rows stay plain d-wide tables (the reference means to; its code would fail).
/// - --weighted-pooling learned: per plain table the reference's v_W_l.k (R floats, initially 1,
///   ordinary memory); index i's per-sample weight is v_W_l.k[i].
/// Every stored table is placed like any table (Note [DLRM table placement]).

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "embeddings/criteo_dataset.h"
#include "embeddings/dlrm_config.h"
#include "embeddings/embedding_stage.h"
#include "embeddings/index_source.h"
#include "embeddings/kernels.h"
#include "embeddings/placement.h"
#include "embeddings/policy.h"
#include "embeddings/table.h"
#include "memory/heap.h"
#include "memory/slow_tier_model.h"
#include "memory/tiered_memory.h"
#include "models/checkpoint.h"
#include "models/container.h"
#include "models/linear.h"
#include "models/optim/optimizer.h"
#include "models/zoo/dlrm.h"

namespace strata::emb {

/// Note [One tiered memory per process]
/// The tables live in the process's TieredMemory (memory/tiered_memory.h), beside the MLPs'
/// tensors: their rows, pointer tables, counters and cache pages are unmanaged regions of its fast
/// and slow heaps (Note [Unmanaged regions]), and every slow-tier row access is charged to its one
/// throttle. So a process has one fast tier, one slow tier, one model of the slow device and one
/// set of counters (strata.memory.stats() shows the tables too).
/// - --fast-budget is the fast memory of the embedding rows (tables and caches), as before; the
///   dense layers' tensors take theirs from the same fast tier. strata-dlrm, which owns its
///   process, creates the tiered memory (configure_process_memory) with a fast tier of the budget
///   plus the dense layers' working set (dense_working_set_bytes), unless STRATA_FAST_BYTES sets
///   it (it must then hold the budget). A model built in a process whose tiered memory exists
///   (Python, tests, a second model) takes its budget from that fast tier and is refused when the
///   tier lacks the room.
/// - --slow-dir (default: STRATA_SLOW_DIR, else /tmp) is where the process's slow tier lives; a
///   model naming another directory than the existing tier's is refused (one process, one slow
///   tier), as is a slow tier too small or on too full a filesystem for the tables.
/// - --slow-tier-model (default auto: the process's, STRATA_SLOW_MODEL) set to off, default or
///   R,W,L sets the process's model (TieredMemory::set_slow_tier_model): the device is one, so is
///   its model, for tables and tensors alike.

/// Note [DLRM table placement]
/// - auto (Strata's default): when every table fits the fast budget, all are plain tables in DRAM
///   (nothing to tier); otherwise every table is an Auto-policy CachedTable (embeddings/policy.h).
/// - simple: plain tables in the slow tier; static / dynamic: CachedTables with that policy, even
///   when the tables would fit the budget (they are explicit requests).
/// - A cached table keeps its base rows in the slow heap and its pointer table (8 B/row), Auto's
///   counters (2 B/row) and cache pages (cache rows × (row stride + 8 B back-edge)) in the fast
///   heap. --cache-fraction sets the rows each table may cache; by default the largest fraction
///   whose pages (plus one page of headroom per table) fit the budget after the pointer tables.
/// The policy hooks run around the kernels: before_lookup(indices) for every table before the
/// lookup (after every table's indices were validated), after_update() after the update.

/// Wall time per phase of the training step (Note [DLRM training step]), summed over steps.
/// `hooks` is the part of lookup and update spent in the tables' policy hooks (before_lookup,
/// after_update); it is included in those two phases, not added to the total.
struct DLRMPhaseTimes {
  double bottom_mlp = 0, lookup = 0, interaction = 0, top_mlp = 0, backward = 0, update = 0;
  double hooks = 0;
  int64_t steps = 0;
  double total() const { return bottom_mlp + lookup + interaction + top_mlp + backward + update; }
};

/// Traffic of the embedding rows since construction or reset_stats().
struct DLRMTierCounters {
  std::uint64_t rows_looked_up = 0;      ///< row reads by lookups (one per index)
  std::uint64_t rows_updated = 0;        ///< row updates by the sparse optimizer (one per occurrence)
  std::uint64_t slow_bytes_read = 0;     ///< direct slow-tier reads (the tables' counters)
  std::uint64_t slow_bytes_written = 0;  ///< direct slow-tier writes
  std::uint64_t fast_bytes_read = 0;     ///< row bytes read from the fast tier
  std::uint64_t fast_bytes_written = 0;  ///< row bytes written to the fast tier
  double cache_hit_rate = -1;            ///< lookups served from DRAM / all lookups; -1: no cached table
  memory::SlowTierCounters throttle;     ///< what the slow-tier model charged (and stalled)
};

/// The batches of a run per --data-generation: `random` (RandomSource, the reference's rules draw
/// for draw), `synthetic` (SyntheticTraceSource over --data-trace-file), `zipf` (ZipfSource:
/// Zipf(--zipf-alpha) for any alpha > 0, LFSR-scrambled per table, --reuse of the previous batch)
/// `click` (make_click_source's train split, click_source.h) or `dataset`: the reference's Criteo
/// pipeline (criteo_dataset.h; the processed .npz is made from
/// --raw-data-file when missing) as split `split` (train: --mini-batch-size and --num-batches;
/// test/val: --test-mini-batch-size, the whole split), prefetched on a background thread; with
/// --mlperf-bin-loader the split's 40 x int32 binary; a --processed-data-file that is not a zip is
/// read as one such binary (train only, rows from --arch-embedding-size). Dataset tables have
/// with_dataset_rows(config).table_rows() rows. Only `dataset` and `click` have splits; the generators take
/// `split` train or none (a test or val split of theirs is an error). Throws strata::Error naming
/// the flag (or the file) when the source cannot be built.
std::unique_ptr<IndexSource> make_index_source(const DLRMConfig& config, CriteoSplit split = CriteoSplit::Train);

/// Whether the run's data has a test split of its own: click data, and Criteo data but for a
/// --processed-data-file in the bare 40 x int32 format (then a run is tested every epoch).
bool has_test_split(const DLRMConfig& config);

/// The data's row counts per table for --data-generation dataset (the processed file's counts,
/// preprocessing first when it is missing; with --mlperf-bin-loader <raw>_fea_count.npz).
std::vector<int64_t> dataset_counts(const DLRMConfig& config);

/// `config` with --arch-embedding-size set from dataset_counts() for a dataset run that did not
/// give it (as the reference takes ln_emb from the data; table_rows() then caps them at
/// --max-ind-range and applies --scale-rows); other configurations unchanged. strata-dlrm and
/// strata.dlrm.DLRM build the model from it.
DLRMConfig with_dataset_rows(const DLRMConfig& config);

/// Bytes of fast memory the dense layers need beside the tables (Note [One tiered memory per
/// process]): parameters, gradients and dense optimizer state, plus the larger of a training
/// step's activations and gradients at --mini-batch-size and a test pass's live activations at
/// --test-mini-batch-size, and 4 MiB for small tensors and alignment.
std::size_t dense_working_set_bytes(const DLRMConfig& config);

/// Creates the process-wide tiered memory for a run of `config` (Note [One tiered memory per
/// process]): a fast tier of --fast-budget plus dense_working_set_bytes (STRATA_FAST_BYTES, when
/// set, instead), the slow tier in --slow-dir (else STRATA_SLOW_DIR, else /tmp), the other
/// settings from the STRATA_* variables; the slow heap grows on demand (Note [Heaps grow on
/// demand]). Does nothing when it exists already. strata-dlrm calls it before the first tensor.
void configure_process_memory(const DLRMConfig& config);

/// Checks, before any training, the paths the run will write at its end or along the way, so a
/// run does not train for an hour and then fail: --save-model, --json and --plot (when given) must name
/// files that can be created in existing, writable directories (core/file.h
/// check_writable_file_path), and --load-model (when given) a readable file — except with
/// --dist-backend, whose checkpoints are directories (check_distributed_checkpoint_paths). Throws
/// strata::Error naming the flag, the path and the reason. strata-dlrm calls it after parsing.
void check_output_paths(const DLRMConfig& config);

/// Note [DLRM finite check]
/// With --check-finite, train_step ends by checking the loss, every dense parameter (state_dict
/// order: bot_l.*, then top_l.*) and every embedding row the step's bags named (read without side
/// effects, AccessContext::Read) for NaN and ±inf, and throws strata::Error at the first
/// non-finite parameter: its name ("bot_l.0.weight", "emb_l.3.weight row 17"), the step, the loss,
/// the NaN/inf counts, the other parameters that went non-finite, and whether the batch itself
/// (dense features, per-sample weights, targets) held NaN or inf. A non-finite loss with every
/// parameter finite is an error too. The step's update has been applied by then: the check
/// reports, it does not roll back. Cost: one pass over the dense parameters and the touched rows.

/// Note [DLRM checkpoints]
/// A checkpoint holds everything a training step depends on, so that N steps, save, load into a
/// fresh model, N steps gives bitwise the parameters and losses of 2N uninterrupted steps: the
/// dense parameters, every table row (read through the table with AccessContext::Read, so a
/// cached table's dirty rows are saved as they are in its cache), the dense optimizer's state,
/// the sparse optimizer's (row-wise Adagrad accumulators, element-wise Adagrad sums) and the step
/// count (the learning-rate schedule). What it does not hold does not change the values: where a
/// cached table keeps a row (the policies' counters and cache contents) decides where reads go,
/// not what they return, so a loaded model starts with cold caches and trains identically
/// (tests/cpp/embeddings/test_dlrm_resume.cpp checks this for auto and dynamic). The data
/// source's position is the trainer's: DLRMTrainState stores it in the metadata.
/// load() is all or nothing: it validates every section first (the file's checksum, the
/// architecture, every key and shape, the dense parameters with nn::Module::check_state_dict and
/// the dense optimizer's state with Optimizer::check_state_dict) and only then writes anything.
/// The one failure left after validation is an I/O error while the table rows are read in (the
/// file changed or the disk failed underneath); the error then says the model is partly loaded.
/// Tables are written and read in chunks of at most `chunk_bytes` (Note [Streaming
/// checkpoints]), so tables larger than DRAM are never materialized whole.

/// The trainer's position in a run, stored in a checkpoint's metadata under the reference's
/// names (dlrm_s_pytorch.py's model_metrics_dict) so that a resumed run continues where the saved
/// one stopped: `TieredDLRM::save(path, state.to_metadata())`, then
/// `DLRMTrainState::from_metadata(model.load(path), path)`.
struct DLRMTrainState {
  int64_t epoch = 0;         ///< "epoch": the epoch the next batch belongs to
  int64_t iter = 0;          ///< "iter": batches of that epoch already trained
  int64_t nbatches = 0;      ///< "nbatches": batches per epoch of the run that saved (to check a resume)
  double total_loss = 0;     ///< "total_loss": loss × samples summed since the last report
  int64_t total_iter = 0;    ///< "total_iter": batches since the last report
  int64_t total_samp = 0;    ///< "total_samp": samples since the last report
  double best_acc_test = 0;  ///< "best_acc_test": best test accuracy so far (0..1)
  double best_auc_test = 0;  ///< "best_auc_test": best test ROC AUC so far (0..1)

  /// The fields as metadata entries (doubles written with 17 significant digits: exact).
  CheckpointMetadata to_metadata() const;
  /// The fields from checkpoint metadata; std::nullopt when it holds none of them (a checkpoint
  /// saved without a train state). Throws strata::Error naming `path` and the key when only some
  /// are present or a value is malformed.
  static std::optional<DLRMTrainState> from_metadata(const CheckpointMetadata& meta, const std::string& path);
};

/// The optimizers of --optimizer (Note [DLRM training step]): the tables' fused sparse optimizer
/// (sgd: SGD; rwsadagrad: row-wise Adagrad; adagrad: element-wise Adagrad; eps 1e-10) and the dense
/// parameters' (SGD with sgd, element-wise Adagrad with eps 1e-10 otherwise), at `lr`.
SparseOptimizer sparse_optimizer(OptimizerKind kind, float lr);
std::unique_ptr<optim::Optimizer> dense_optimizer(OptimizerKind kind, const std::vector<Tensor>& params, double lr);

class TieredDLRM {
 public:
  /// Builds the model of `config` (validated first): MLPs initialized like the reference from
  /// --numpy-rand-seed, tables U(±sqrt(1 / rows)) placed per --emb-policy (Note [DLRM table
  /// placement]) in tiers sized from --fast-budget, the optimizers of --optimizer at
  /// --learning-rate. Throws strata::Error naming --fast-budget, --cache-fraction, --slow-dir or
  /// --scale-rows when the tables do not fit.
  explicit TieredDLRM(const DLRMConfig& config);
  ~TieredDLRM();
  TieredDLRM(const TieredDLRM&) = delete;
  TieredDLRM& operator=(const TieredDLRM&) = delete;

  /// One training step on a batch of B samples: `dense` [B, dense_features()] row-major, one Bags
  /// per table (batch B each), `targets` [B]. Returns the loss. Throws strata::Error naming the
  /// table, bag and row for a bad index (nothing is updated then) or the argument for bad shapes;
  /// with --check-finite, naming the first parameter that went NaN or inf (Note [DLRM finite check]).
  float train_step(std::span<const float> dense, std::span<const Bags> bags, std::span<const float> targets);
  /// The model's output (click probabilities after --loss-threshold clamping) [B, 1], no update.
  Tensor forward(std::span<const float> dense, std::span<const Bags> bags);
  /// The loss of a batch without updating anything (--inference-only).
  float evaluate(std::span<const float> dense, std::span<const Bags> bags, std::span<const float> targets);
  /// A test batch: the model's outputs (click probabilities after --loss-threshold clamping) into
  /// `scores` (resized to B) and the batch's mean loss; updates nothing and is not counted in
  /// times() (a test pass is not part of the training step).
  float score(std::span<const float> dense, std::span<const Bags> bags, std::span<const float> targets,
              std::vector<float>& scores);

  /// Logical tables (one Bags each per batch).
  int64_t num_tables() const { return static_cast<int64_t>(config_.arch_embedding_size.size()); }
  /// Logical table k's first stored table (its only one unless it is quotient-remainder; part 1
  /// is the remainder table). Throws strata::Error naming k or part when out of range.
  Table& table(int64_t k, int64_t part = 0);
  /// How logical table k is stored (Note [DLRM table kinds]).
  const StageFeature& table_layout(int64_t k) const { return stage_->feature(k); }
  /// Stored tables, in order (logical table k's parts from table_layout(k).first).
  int64_t num_stored_tables() const { return static_cast<int64_t>(tables_.size()); }
  Table& stored_table(int64_t p) { return *tables_.at(static_cast<std::size_t>(p)); }
  /// Stored table p's name in the reference's state_dict ("emb_l.3.weight", "emb_l.3.weight_q",
  /// "emb_l.3.embs.weight").
  std::string stored_table_key(int64_t p) const;
  /// Logical table k's learned pooling weights v_W_l.k (null without --weighted-pooling learned).
  LearnedPoolingWeights* learned_pooling_weights(int64_t k) { return stage_->learned(k); }
  int64_t dense_features() const { return config_.arch_mlp_bot.front(); }
  /// d (--arch-sparse-feature-size).
  int64_t feature_size() const { return config_.arch_sparse_feature_size; }
  const DLRMConfig& config() const { return config_; }
  /// The process's tiered memory the tables live in (Note [One tiered memory per process]).
  memory::TieredMemory& memory() { return *memory_; }
  /// True when the tables keep rows in the slow tier (false: all in the fast tier).
  bool uses_slow_tier() const { return uses_slow_; }
  /// "fast tier: ... (tables and caches ...); slow tier: ..." — what the run's memory is.
  std::string describe_memory() const;

  /// The dense parameters under the reference's names: "bot_l.0.weight", "top_l.2.bias", ...,
  /// and the mixed-dimension projections "emb_l.3.proj.weight".
  nn::Module& dense_module() { return *dense_; }
  /// The dense parameters (reference names) and, with --weighted-pooling learned, copies of the
  /// pooling weights "v_W_l.<k>" [rows] — the tables are not tensors; see save().
  StateDict state_dict() const;
  /// Loads dense parameters and pooling weights (strict: every key of state_dict(), same shapes).
  void load_state_dict(const StateDict& state);

  /// Saves everything a training step depends on (Note [DLRM checkpoints]) to `path` atomically
  /// (models/checkpoint): the dense parameters, every table as "emb_l.<k>.weight" f32 [rows, d]
  /// (cached rows as they are now, dirty or not), the dense optimizer's state ("dense.*"), the
  /// sparse optimizer's ("sparse.<k>.sum") and the step count, with metadata naming the format,
  /// its version and the architecture. `extra` is stored too (DLRMTrainState::to_metadata(), or
  /// any key the metadata does not use already: a reserved key is refused, naming it). Tables are
  /// streamed through a buffer of at most `chunk_bytes` (one row at least). Throws strata::Error
  /// naming the path; the previous file at `path`, if any, is then untouched.
  void save(const std::string& path, const CheckpointMetadata& extra = {},
            std::size_t chunk_bytes = kCheckpointChunkBytes);
  /// Loads a file written by save(), all or nothing: every section (format and version,
  /// architecture, optimizer kind, every key with its dtype and shape, the dense parameters and
  /// the dense optimizer's state, the step count) is validated before anything changes, and a
  /// failure throws strata::Error naming the path and the key. Tables stream in through a buffer
  /// of at most `chunk_bytes`. Returns the stored metadata (DLRMTrainState::from_metadata reads
  /// the trainer's position back).
  CheckpointMetadata load(const std::string& path, std::size_t chunk_bytes = kCheckpointChunkBytes);

  /// Optimizer steps taken (drives the learning-rate schedule; restored by load()).
  int64_t steps() const { return steps_; }
  /// The learning rate of the next step (the reference's LRPolicyScheduler: LRSchedule in
  /// embeddings/dlrm_step_rules.h, shared with DistributedDLRM).
  double next_learning_rate() const;

  const DLRMPhaseTimes& times() const { return times_; }
  DLRMTierCounters counters() const;
  void reset_stats();
  /// One line per table: rows, kind, tier, cache.
  std::string describe_tables() const;
  /// Stored table p's policy (null when the table lives whole in the fast tier).
  ManagedTable* managed_table(int64_t p) { return managed_.at(static_cast<std::size_t>(p)).get(); }
  /// The cache fraction the cached tables were built with (0 when none is cached).
  double cache_fraction() const { return cache_fraction_; }

 private:
  struct Impl;
  struct LoadPlan;
  /// Stored table k's sparse optimizer state (element-wise Adagrad: rows × d sums; row-wise
  /// Adagrad: one accumulator per row; SGD: empty).
  std::span<float> sparse_state(int64_t k);
  /// The step count (the learning-rate schedule's and the sparse states').
  void set_steps(int64_t steps);
  CheckpointMetadata checkpoint_metadata() const;
  LoadPlan plan_load(const std::string& path) const;
  void save_tables(CheckpointWriter& w, std::size_t chunk_bytes);
  void load_tables(const LoadPlan& plan, std::size_t chunk_bytes);
  /// Note [DLRM table placement]; sets cache_fraction_.
  TablePlacement plan_placement(const std::vector<DLRMConfig::StoredTable>& stored, EmbeddingPolicy policy);
  /// Takes the process's tiered memory, checks it has room for `plan` (and the slow directory and
  /// model it names), and sets the model (Note [One tiered memory per process]).
  void attach_memory(const TablePlacement& plan);
  void place_tables();
  /// The dense part of `state`; `pooling[k]` points at its v_W_l.<k> (checked: every learned
  /// table's, f32 [rows]; nothing else named v_W_l).
  StateDict split_pooling(const StateDict& state, std::vector<const Tensor*>& pooling) const;
  void build_dense(Generator& gen);
  Tensor run_forward(std::span<const float> dense, std::span<const Bags> bags);
  Tensor embedding_feature(int64_t k, const std::vector<Tensor>& stored) const;
  void check_batch(std::span<const float> dense, std::span<const Bags> bags, int64_t batch) const;
  void check_finite(float loss, std::span<const float> dense, std::span<const float> targets) const;

  DLRMConfig config_;
  memory::TieredMemory* memory_ = nullptr;  // the process's
  bool uses_slow_ = false;
  std::vector<Table*> tables_;                          // stored table p, whoever owns it
  std::vector<std::unique_ptr<Table>> dram_tables_;     // tables placed whole in the fast tier
  std::vector<std::unique_ptr<ManagedTable>> managed_;  // per stored table: its policy, or null (DRAM)
  std::unique_ptr<EmbeddingStage> stage_;
  std::shared_ptr<nn::zoo::DLRM> dense_;                  // the model, its tables external (the stage's)
  std::vector<std::shared_ptr<nn::Linear>> projections_;  // per logical table: its projection, or null
  std::unique_ptr<optim::Optimizer> dense_opt_;
  std::unique_ptr<Impl> impl_;
  int64_t steps_ = 0;
  double cache_fraction_ = 0;
  DLRMPhaseTimes times_;
};

}  // namespace strata::emb
