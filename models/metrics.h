#pragma once
/// @file
/// Metrics of binary classifiers (click prediction): exact ROC AUC, accuracy and log loss, over
/// scores that are probabilities and targets that are 0 or 1, as scikit-learn computes them.
///
/// Note [Exact ROC AUC]
/// AUC is the probability that a random positive scores above a random negative, a tie counting
/// one half — the area under the ROC curve with tied scores joined by one straight segment, which
/// is what `sklearn.metrics.roc_auc_score` integrates. Computed exactly from ranks: sort the scores,
/// give each run of equal scores the run's mean rank (1-based), and
///     AUC = (Σ ranks of positives − P(P+1)/2) / (P·N).
/// The rank sums are accumulated per tie run in double (each run's contribution is exact up to
/// 2^53 samples), so the result agrees with sklearn to rounding (tested within 1e-9). With only one
/// class present AUC is undefined: NaN, as sklearn ≥ 1.6 returns (with a warning). Cost: one sort,
/// O(n): the scores' bits as unsigned keys in the floats' order (-0 and +0 one key, since they
/// compare equal), in three LSD radix passes of 11 bits — 143k scores of a DLRM test pass in ~1-3 ms
/// where std::sort of (score, label) pairs took 11 ms; the scores of a test pass are kept (4 + 1
/// bytes per sample).
/// Accuracy rounds the score half to even (numpy's round, as the reference's
/// `np.round(S_test) == T_test`); log loss clips probabilities to [ε, 1 − ε] with ε = 2^-52 (double's
/// machine epsilon, sklearn's for float64 input).

#include <cstdint>
#include <span>
#include <vector>

namespace strata::metrics {

/// Exact ROC AUC (Note [Exact ROC AUC]). `targets` must be 0 or 1 and as long as `scores`; scores
/// must not be NaN. NaN when only one class is present. Throws strata::Error naming the argument
/// and the first bad element otherwise (also for empty input).
double roc_auc(std::span<const float> scores, std::span<const float> targets);

/// The fraction of samples whose score rounded half to even equals the target (0 for no samples).
double accuracy(std::span<const float> scores, std::span<const float> targets);

/// Mean binary cross-entropy of probabilities `scores` against 0/1 `targets`, probabilities clipped
/// to [2^-52, 1 − 2^-52] (sklearn.metrics.log_loss).
double log_loss(std::span<const float> scores, std::span<const float> targets);

/// What one evaluation pass reports.
struct BinaryMetrics {
  int64_t samples = 0;
  double loss = 0;      ///< the model's own loss (mean over samples), as passed to add()
  double log_loss = 0;  ///< binary cross-entropy of the scores (log_loss above)
  double accuracy = 0;
  double auc = 0;  ///< NaN with one class only, or targets other than 0 and 1
};

/// Collects the scores and targets of a pass batch by batch, then computes BinaryMetrics.
class BinaryMetricsAccumulator {
 public:
  /// Adds a batch: scores (probabilities), targets and the batch's mean loss. Throws strata::Error
  /// naming the argument for lengths that differ. Targets other than 0 and 1 (the reference's
  /// random data without --round-targets) are kept; AUC is then NaN.
  void add(std::span<const float> scores, std::span<const float> targets, double batch_loss);
  /// Samples added so far.
  int64_t samples() const { return static_cast<int64_t>(targets_.size()); }
  /// The metrics of everything added (AUC NaN with one class; all zero with no samples).
  BinaryMetrics compute() const;
  void clear();

 private:
  std::vector<float> scores_;
  std::vector<float> targets_;
  double loss_sum_ = 0;
  bool binary_ = true;  // every target 0 or 1
};

}  // namespace strata::metrics
