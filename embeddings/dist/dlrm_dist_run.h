#pragma once
/// @file
/// The pieces of `mpirun -np N strata-dlrm ... --dist-backend=mpi` (issue 28 items 6 and 7): which
/// flags a distributed run supports, the DistributedDLRM and shard plan of a DLRMConfig, the start-up
/// check that every rank was given the same flags and data, and DistributedDLRM behind the trainer's
/// interface (DLRMTrainable) with the communication figures of its steps.
///
/// Note [Distributed strata-dlrm]
/// - Launch: every rank runs the same command line under mpirun; ranks and size come from the
///   Communicator (dist/communicator.h). Rank 0 prints "Running on N ranks using mpi backend" (as
///   the reference's extend_distributed.init_distributed), the shard plan, the reference's progress
///   and test lines and the summary; the other ranks print only errors, prefixed with their rank.
/// - Start-up checks (item 7), collective, before any table is built: every rank's canonical flags
///   (canonical_dlrm_args: name → value after the parse, the last occurrence winning, plus the
///   effective thread count) and then its data fingerprint (dlrm_data_fingerprint) are gathered on
///   every rank and compared with rank 0's; the first field that differs (in name order, at the
///   lowest differing rank) is named on every rank with both values and both ranks, and every rank
///   exits 1. Flags spelt differently but meaning the same (0.1 and 0.10) count as different: the
///   check compares what was typed. The other start-up checks (check_distributed_flags; --json and
///   --plot on rank 0, which writes them; the checkpoint directories on every rank, which all write
///   and read there; the dataset's rows; --slow-dir/rank-R/; the data sources) run locally and
///   their outcome is agreed (agree_on_every_rank, Note [Agreed failures]): a bad path that only
///   rank 0 checks ends every rank within seconds, each printing "rank R: error: the start-up check
///   failed on rank 0: --json: ...", instead of the others waiting for STRATA_DIST_TIMEOUT.
/// - Model: DistributedDLRM (embeddings/dist/dist_dlrm.h) from the config's MLPs, --optimizer,
///   --learning-rate, --numpy-rand-seed and --dist-chunks; the tables planned by plan_shards over
///   the ranks with --fast-budget per rank and, with --slow-dir DIR, the slow tier's limit
///   (dist_slow_budget). --slow-dir DIR gives rank R the process slow tier DIR/rank-R/ (created).
///   Each rank places its shards as the one-process DLRM places its tables (Note [Shard storage]):
///   --emb-policy, --cache-fraction and --fast-budget per rank, rows in its own slow tier; rank 0
///   prints where each rank's shards live (describe_shard_storage). Without --slow-dir there is no
///   slow tier: a rank's shards must fit --fast-budget (the plan fails naming the table otherwise),
///   and --emb-policy but auto and --cache-fraction are refused naming --slow-dir.
/// - Loss and learning rate: --loss-function, --loss-weights, --loss-threshold and the schedule
///   (--lr-num-warmup-steps, --lr-decay-start-step, --lr-num-decay-steps) go into
///   DistributedDLRMConfig; the schedule and the loss are the one-process run's functions
///   (embeddings/dlrm_step_rules.h), so a 1-rank run trains at the same rate per step.
/// - Data: every rank builds the same IndexSource from the same flags and reads the same global
///   batches (generators from --numpy-rand-seed; the Criteo files read whole by every rank).
///   DistributedDLRM takes its rank's slice itself.
/// - Loop: DLRMTrainer's, unchanged, on every rank (train_step and score are collective, so every
///   rank runs every step and test pass); score() gathers every probability of the batch to every
///   rank, so the metrics (and a --mlperf-*-threshold stop) are the same everywhere.
/// - Exposed communication: dist::OpStats::wait_seconds, the time the calling thread was blocked in
///   Work::wait() or in a blocking collective. It counts only what the step could not hide: an
///   alltoallv that finished while the bottom MLP ran costs no wait. It includes waiting for a
///   slower rank to reach the collective (imbalance), which is exposed time too, and nothing the
///   worker thread did while the caller computed. busy_seconds, the worker's time in collectives, is
///   the communication time it is compared with. Both are summed over the training steps only
///   (DistributedTrainable snapshots the counters around each step; test passes are excluded).
///   Collective time is not all network time: the deterministic allreduce adds the C chunk
///   gradients in its fixed tree on the worker thread even at one rank (0 bytes sent), and the
///   wait may exceed the busy time when the caller waits for a rank that has not arrived.
/// - Checkpoints: --save-model DIR and --load-model DIR are DistributedDLRM's directories (Note
///   [Resharding checkpoints]): a run saved at N ranks resumes, or runs --inference-only, at any M.
/// - Not supported yet, refused naming the flag (check_distributed_flags): mixed dimensions and quotient-remainder
///   tables, weighted pooling, --arch-interaction-itself, bf16 tables.
/// - --check-finite: DistributedDLRM's (Note [Distributed finite check]): checked before the
///   update and agreed, so every rank stops with the same error naming the rank whose samples or
///   gradients hold the NaN; with --save-model the state before the batch is saved first.
/// - Phases: every rank times its steps' phases (DistStepTimes, Note [Distributed step phases]);
///   --json has them per rank, and --enable-profiling prints rank 0's after each progress line and
///   in the summary with the one-process run's printer (phase_line), plus a line of what only the
///   distributed step has (the lookups for other ranks, the update's two halves, time blocked).
///
/// Note [Faults of distributed strata-dlrm]
/// What ends a run when a rank dies or stops mid-training (measured with Open MPI 4.1 under
/// `mpirun --oversubscribe`, 4 ranks; ctests dlrm_dist_cli_kill and dlrm_dist_cli_stall):
/// - Killed (SIGKILL, a crash, the OOM killer): mpirun sees the process die and kills the other
///   ranks itself (they print nothing: they are ended by its signals, not by an error of theirs);
///   it prints "mpirun noticed that process rank 2 with PID ... exited on signal 9 (Killed)" and
///   exits non-zero (137). Measured: about 1 s from the kill to mpirun's exit. No Strata code
///   runs; should a launcher miss the death, the others' next collective times out as below.
/// - Stopped (SIGSTOP, a hung rank, a rank that skipped a collective): alive to the launcher. The
///   other ranks' next collective waits STRATA_DIST_TIMEOUT (60 s by default), then each prints
///   "strata::dist: rank R: allreduce #N (header) waited T s ... for rank 2 (nothing received):
///   that rank died or hangs; aborting the job" and calls MPI_Abort; mpirun then kills every rank
///   (the stopped one too) and exits non-zero (Note [Communicator faults]).
/// - Either way the last committed checkpoint stays loadable: DistributedDLRM::save replaces the
///   manifest atomically after every rank wrote its files (Note [Resharding checkpoints]), so a
///   death mid-save leaves the previous one, and a run resumes from it at any rank count.
/// - Checkpoints are written when the test result improves (--test-freq with --save-model, as the
///   one-process run: Note [DLRM training run]); there is no separate checkpoint period.

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "dist/communicator.h"
#include "embeddings/dist/dist_dlrm.h"
#include "embeddings/dist/shard_plan.h"
#include "embeddings/dlrm_config.h"
#include "embeddings/dlrm_trainer.h"

namespace strata::emb {

/// Named values compared across ranks: (flag or file, value).
using RankFields = std::vector<std::pair<std::string, std::string>>;

/// Throws strata::Error naming the flag for what a --dist-backend run over `ranks` ranks does not
/// support (Note [Distributed strata-dlrm]), for --dist-chunks below `ranks`, a --mini-batch-size or
/// --test-mini-batch-size below `ranks`, a random or zipf last batch (the rest of --data-size) below
/// `ranks`, and Criteo data without an existing --processed-data-file (ranks do not preprocess
/// concurrently). The Criteo and click splits' last batches are checked when they are trained
/// (DistributedDLRM names the batch; nothing is updated).
void check_distributed_flags(const DLRMConfig& config, int ranks);

/// The DistributedDLRM of `config`: its MLPs, interaction, optimizer, learning rate and schedule,
/// loss (function, weights, threshold), seed and chunks.
DistributedDLRMConfig distributed_model_config(const DLRMConfig& config);

/// The tables of `config` ("emb_l.<k>", f32) planned over `ranks` ranks, each holding at most
/// --fast-budget + `slow_budget_bytes` bytes of rows (plan_shards; throws naming --fast-budget, and
/// the slow tier or its absence, when they do not fit).
ShardPlan plan_dlrm_shards(const DLRMConfig& config, int ranks, int64_t slow_budget_bytes = 0);

/// Rank `rank`'s slow-tier directory: --slow-dir/rank-R ("" without --slow-dir).
std::string rank_slow_dir(const DLRMConfig& config, int rank);

/// Collective: the slow budget per rank of the plan (Note [Shard storage]): 0 without --slow-dir,
/// else the smallest of the ranks' slow-tier limits (every rank plans alike). Needs the process's
/// tiered memory (configure_process_memory).
int64_t dist_slow_budget(dist::Communicator& comm, const DLRMConfig& config);

/// --emb-policy, --fast-budget and --cache-fraction as a rank's ShardPlacementOptions; without
/// --slow-dir an unlimited budget (plan_dlrm_shards kept each rank's rows within --fast-budget, and
/// every shard goes to DRAM).
ShardPlacementOptions dlrm_shard_placement(const DLRMConfig& config);

/// This process's memory for its shards: the tiered memory's fast heap, its slow heap and throttle
/// when --slow-dir was given (none otherwise), dlrm_shard_placement; sets --slow-tier-model (unless
/// auto) as the one-process run does.
ShardStorage dlrm_shard_storage(const DLRMConfig& config);

/// One line per rank: where its shards live (DRAM, slow, cached with the fraction), the bytes of
/// rows and of DRAM they take, and its slow directory. Computed alike on every rank
/// (place_rank_shards), so it throws the same strata::Error on every rank for a placement that
/// cannot work on some rank (naming the rank and --fast-budget or --cache-fraction).
std::string describe_shard_storage(const ShardPlan& plan, const DLRMConfig& config);

/// The command line `args` (already accepted by parse_dlrm_args) as sorted (flag, value) pairs:
/// "--x=v" and "--x v" alike, store-true flags "true", the last occurrence of a flag winning.
RankFields canonical_dlrm_args(const std::vector<std::string>& args);

/// The files the run reads (the Criteo raw and processed files, the trace files) as ("<flag>
/// <path>", "<bytes> bytes, hash <h>") pairs, the hash over the first and last MiB and the size
/// (a sample: cheap on large files; a change elsewhere in the middle of the file goes unnoticed).
/// Empty for generated data. A missing file is "missing".
RankFields dlrm_data_fingerprint(const DLRMConfig& config);

/// Collective: gathers every rank's `fields` and throws strata::Error on every rank when a rank's
/// differ from rank 0's, naming `what`, the first differing field in name order, both values and
/// both ranks ("(not given)" for a field one rank lacks).
void check_same_on_every_rank(dist::Communicator& comm, const RankFields& fields, std::string_view what);

/// Collective: one line per rank, "rank R slow tier: <heap name (backend:directory)>, <bytes> in
/// use", gathered on every rank (the directory shows each rank's tier is its own DIR/rank-R/).
std::string gather_slow_tiers(dist::Communicator& comm);

/// DistributedDLRM as DLRMTrainer sees it. train_step counts the communicator's figures of each
/// step; score gathers the batch's probabilities (every rank gets them all, clamped with
/// --loss-threshold) and computes the run's loss of them (dlrm_loss, as TieredDLRM::score);
/// progress_detail is the `comm:` line of the steps since the previous one. Checkpoints are
/// DistributedDLRM's (directories that reshard: a run saved at N ranks resumes at M; Note
/// [Resharding checkpoints]). With `profile` (--enable-profiling), progress_detail adds the phases
/// (phase_line and dist_phase_line).
class DistributedTrainable final : public DLRMTrainable {
 public:
  DistributedTrainable(DistributedDLRM& model, int64_t num_tables, bool profile = false);

  int64_t num_tables() const override { return num_tables_; }
  float train_step(std::span<const float> dense, std::span<const Bags> bags, std::span<const float> targets) override;
  float score(std::span<const float> dense, std::span<const Bags> bags, std::span<const float> targets,
              std::vector<float>& scores) override;
  void reset_stats() override;
  std::string progress_detail() override;
  void save(const std::string& path, const CheckpointMetadata& extra) override;
  CheckpointMetadata load(const std::string& path) override;
  int64_t steps() const override { return model_.steps(); }

  /// This rank's communication in the training steps since reset_stats().
  const dist::CommStats& step_comm() const { return total_; }
  /// This rank's phase times of the training steps since reset_stats(): summed, and step by step.
  DistStepTimes step_times() const { return model_.step_times().since(times_at_reset_); }
  const std::vector<DistStepTimes>& step_log() const { return step_log_; }

 private:
  DistributedDLRM& model_;
  int64_t num_tables_;
  dist::CommStats total_;       // every training step since reset_stats()
  dist::CommStats since_line_;  // since the last progress line
  int64_t steps_since_line_ = 0;
  bool profile_ = false;
  DistStepTimes times_at_reset_, times_at_line_;
  std::vector<DistStepTimes> step_log_;
};

/// --save-model and --load-model of a distributed run, checked before training: a checkpoint is a
/// directory — --save-model an existing directory or a new one whose parent takes files, never a
/// file; --load-model a directory with a readable manifest. Throws strata::Error naming the flag.
void check_distributed_checkpoint_paths(const DLRMConfig& config);

/// `a` plus the difference `after` − `before` of the communicator's counters.
void add_comm_delta(dist::CommStats& a, const dist::CommStats& before, const dist::CommStats& after);

/// The `comm:` line of `steps` steps whose counters are `stats`: this rank's MB (10^6 bytes) sent
/// per step per collective, the milliseconds per step in collectives (busy) and exposed (waited).
std::string comm_line(const dist::CommStats& stats, int64_t steps, int rank);

/// What only the distributed step's phases have, in ms per step of `times` ("  distributed phases
/// (ms/it): lookups for other ranks ..., blocked in collectives ...\n"); phase_line has the rest.
std::string dist_phase_line(const DistStepTimes& times);

}  // namespace strata::emb
