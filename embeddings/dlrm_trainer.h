#pragma once
/// @file
/// The training run of `strata-dlrm` (and `strata.dlrm.train`): the reference script's loop over
/// epochs and batches with its progress and test lines, test passes with accuracy, AUC and log loss
/// (models/metrics.h), checkpoints saved when the test result improves, and resumption from one.
///
/// Note [DLRM training run]
/// As `dlrm_s_pytorch.py`'s run():
/// - Each iteration j of epoch k trains one batch; every --print-freq iterations (and at the end of
///   the epoch) it prints `Finished training it {j+1}/{nb} of epoch {k}, {ms} ms/it, loss {mean}`,
///   the mean over the samples since the last line.
/// - A test pass runs every --test-freq iterations and at the end of the epoch when --test-freq > 0,
///   and — Strata's addition — at the end of every epoch when the data has a real test split
///   (dataset, click). It scores the whole test split (capped at --num-batches batches, as the
///   reference) with no gradient and prints `Testing at - {j+1}/{nb} of epoch {k}, loss …,
///   accuracy … %, best … %` (with --mlperf-logging: `auc …, best auc …, accuracy … %, best
///   accuracy … %`). The test pass is not counted in the step times.
/// - "Best" is test accuracy, or AUC with --mlperf-logging. When it improves and --save-model is
///   set, the model is saved with the position (epoch k, iter j+1), the bests and the loss
///   accumulators; a run with --save-model that never tests saves at its end. With
///   --mlperf-logging, --mlperf-acc-threshold / --mlperf-auc-threshold stop training once the best
///   exceeds them.
/// - --load-model resumes: the saved parameters and optimizer state, the bests, and the position —
///   epochs before k are skipped, and so are the first j+1 batches of epoch k (read and dropped, so
///   generators and shuffled splits continue where they were). N iterations, save, resume, N more
///   equal 2N uninterrupted ones. With --inference-only it runs one test pass instead.
/// - A batch that cannot be read or trained (a bad record, a bad index) stops the run with an
///   error naming the batch and epoch; with --save-model the last good state (before that batch)
///   is saved first, so a resume starts at the bad batch.

#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/line_plot.h"
#include "embeddings/dlrm.h"
#include "embeddings/dlrm_config.h"
#include "embeddings/index_source.h"
#include "models/checkpoint.h"
#include "models/metrics.h"

namespace strata::emb {

/// One test pass.
struct DLRMTestRecord {
  int64_t epoch = 0;
  int64_t iter = 0;         ///< j + 1: iterations of the epoch done
  int64_t global_iter = 0;  ///< iterations since the start of training (epochs × nb + iter)
  metrics::BinaryMetrics metrics;
  double seconds = 0;     ///< wall time of the pass
  bool improved = false;  ///< better than every earlier pass (accuracy, or AUC with --mlperf-logging)
};

/// Train loss and test results over the run (for --plot and the JSON).
struct DLRMHistory {
  std::vector<double> train_iter, train_loss;  ///< at each progress line
  std::vector<DLRMTestRecord> tests;
};

/// The figures of the training steps of a run (test passes excluded).
struct DLRMTrainStats {
  int64_t iterations = 0;
  int64_t samples = 0;
  double seconds = 0;       ///< in training steps (reading batches excluded)
  double data_seconds = 0;  ///< waiting for the next batch from the source (the reader's stall)
  std::vector<double> step_ms;
  double first_loss = -1, last_loss = -1;  ///< -1: no step taken
};

/// What DLRMTrainer trains: TieredDLRM (one process; the trainer wraps it itself) or
/// DistributedDLRM (embeddings/dist/dlrm_dist_run.h: every rank runs the same trainer on the same
/// global batches). Only the trainer's view of a model: steps, test scores, checkpoints.
class DLRMTrainable {
 public:
  virtual ~DLRMTrainable() = default;
  /// Logical tables (one Bags each per batch).
  virtual int64_t num_tables() const = 0;
  /// One training step on a batch (TieredDLRM::train_step's contract); returns its loss.
  virtual float train_step(std::span<const float> dense, std::span<const Bags> bags,
                           std::span<const float> targets) = 0;
  /// A test batch: every sample's click probability into `scores` (resized to B) and the batch's
  /// mean loss; updates nothing (TieredDLRM::score's contract).
  virtual float score(std::span<const float> dense, std::span<const Bags> bags, std::span<const float> targets,
                      std::vector<float>& scores) = 0;
  /// Clears the model's figures at the start of training.
  virtual void reset_stats() = 0;
  /// Lines printed after each progress line about the steps since the previous one (each ending
  /// in a newline; "" for none): TieredDLRM's phases with --enable-profiling, the distributed
  /// run's `comm:` line.
  virtual std::string progress_detail() = 0;
  /// Checkpoints (Note [DLRM checkpoints]); optimizer steps taken.
  virtual void save(const std::string& path, const CheckpointMetadata& extra) = 0;
  virtual CheckpointMetadata load(const std::string& path) = 0;
  virtual int64_t steps() const = 0;
};

class DLRMTrainer {
 public:
  /// `test` may be null (no testing). Output goes to `out` (stdout in strata-dlrm). The sources and
  /// the model must outlive the trainer.
  DLRMTrainer(TieredDLRM& model, const DLRMConfig& config, IndexSource& train, IndexSource* test,
              std::FILE* out = stdout);
  /// The same for any DLRMTrainable.
  DLRMTrainer(DLRMTrainable& model, const DLRMConfig& config, IndexSource& train, IndexSource* test,
              std::FILE* out = stdout);
  ~DLRMTrainer();

  /// Loads a checkpoint written by a run (TieredDLRM::load) and the position to resume from.
  void load(const std::string& path);
  /// Trains every epoch from the current position (Note [DLRM training run]). Throws strata::Error
  /// naming the batch and epoch when a batch fails (after saving the last good state with
  /// --save-model).
  void train();
  /// One test pass over the whole test split; prints the reference's test line for (epoch, iter)
  /// and updates the bests. Throws strata::Error when there is no test split.
  const DLRMTestRecord& test(int64_t epoch, int64_t iter);
  /// Saves the model and the position (epoch, iter done) to --save-model.
  void save(int64_t epoch, int64_t iter);

  const DLRMHistory& history() const { return history_; }
  /// The history as plot series (core/line_plot.h): train loss, test accuracy, and test AUC when
  /// every pass had one.
  TrainingCurves curves() const;
  const DLRMTrainStats& stats() const { return stats_; }
  double best_accuracy() const { return best_acc_; }
  double best_auc() const { return best_auc_; }
  /// Whether training stopped at an --mlperf-*-threshold.
  bool stopped_at_threshold() const { return stopped_; }

 private:
  /// `model`, or `*owned` when `model` is null.
  DLRMTrainer(std::unique_ptr<DLRMTrainable> owned, DLRMTrainable* model, const DLRMConfig& config, IndexSource& train,
              IndexSource* test, std::FILE* out);
  bool train_epoch(int64_t k);
  void skip_batches(int64_t k, int64_t n);
  std::optional<float> train_batch(int64_t k, int64_t j);
  void print_progress(int64_t k, int64_t j);
  bool should_test(int64_t j) const;
  bool threshold_reached() const;
  DLRMTrainState position(int64_t epoch, int64_t iter) const;

  std::unique_ptr<DLRMTrainable> owned_;  // the wrapper of a TieredDLRM
  DLRMTrainable& model_;
  const DLRMConfig& config_;
  IndexSource& train_;
  IndexSource* test_;
  std::FILE* out_;
  int64_t nb_;
  bool test_each_epoch_;
  Batch batch_;
  std::vector<Bags> bags_;
  // The reference's accumulators between progress lines.
  double total_time_ = 0, total_loss_ = 0;
  int64_t total_iter_ = 0, total_samp_ = 0;
  // Where training resumes.
  int64_t start_epoch_ = 0, start_iter_ = 0;
  double best_acc_ = 0, best_auc_ = 0;
  bool stopped_ = false;
  bool saved_ = false;
  DLRMTrainStats stats_;
  DLRMHistory history_;
};

/// One pass over `source` (from its start; at most `max_batches` batches when > 0) scoring every
/// batch with no gradient (TieredDLRM::score): loss, log loss, accuracy and AUC.
/// The --enable-profiling line of the steps between two snapshots of phase times ("  phases
/// (ms/it): bottom MLP ..., update ...\n", ms per step; `earlier` empty: since the start).
std::string phase_line(const DLRMPhaseTimes& now, const DLRMPhaseTimes& earlier = {});

metrics::BinaryMetrics evaluate_source(TieredDLRM& model, IndexSource& source, int64_t max_batches = 0);
metrics::BinaryMetrics evaluate_source(DLRMTrainable& model, IndexSource& source, int64_t max_batches = 0);

/// The test split of the run's data: the dataset's or click generator's test split; for the other
/// generators the training data again (the reference tests random data on its training batches).
/// Throws strata::Error for Criteo data without a split (a bare 40 x int32 --processed-data-file).
/// Batches of --test-mini-batch-size (default --mini-batch-size).
std::unique_ptr<IndexSource> make_test_index_source(const DLRMConfig& config);

}  // namespace strata::emb
