#include "models/metrics.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <utility>
#include <vector>

#include "core/error.h"

namespace strata::metrics {

namespace {

void check_lengths(std::span<const float> scores, std::span<const float> targets, const char* what) {
  STRATA_CHECK(scores.size() == targets.size(), what, ": scores has ", scores.size(), " elements but targets has ",
               targets.size());
}

void check_targets(std::span<const float> targets, const char* what) {
  for (std::size_t i = 0; i < targets.size(); ++i)
    STRATA_CHECK(targets[i] == 0.0f || targets[i] == 1.0f, what, ": targets[", i, "] is ", targets[i],
                 "; targets must be 0 or 1");
}

/// `v`'s bits as an unsigned key in the floats' order (-0 and +0 one key; v is not NaN).
uint32_t order_key(float v) {
  if (v == 0.0f) v = 0.0f;  // -0 ties with +0
  uint32_t u;
  std::memcpy(&u, &v, sizeof u);
  return (u & 0x80000000u) != 0 ? ~u : (u | 0x80000000u);
}

/// Sorts `keys` by their upper 32 bits: stable LSD radix passes of 11 bits (Note [Exact ROC AUC]);
/// a pass whose digit is the same in every key is skipped.
void sort_by_upper_half(std::vector<uint64_t>& keys) {
  constexpr int kBits = 11;
  constexpr uint64_t kMask = (uint64_t{1} << kBits) - 1;
  std::vector<uint64_t> tmp(keys.size());
  std::vector<std::size_t> start(std::size_t{1} << kBits);
  for (int shift = 32; shift < 64; shift += kBits) {
    std::fill(start.begin(), start.end(), std::size_t{0});
    for (const uint64_t k : keys) ++start[(k >> shift) & kMask];
    if (start[(keys.front() >> shift) & kMask] == keys.size()) continue;
    std::size_t sum = 0;
    for (std::size_t& c : start) sum += std::exchange(c, sum);
    for (const uint64_t k : keys) tmp[start[(k >> shift) & kMask]++] = k;
    keys.swap(tmp);
  }
}

}  // namespace

double roc_auc(std::span<const float> scores, std::span<const float> targets) {
  check_lengths(scores, targets, "roc_auc");
  STRATA_CHECK(!scores.empty(), "roc_auc: no samples (scores and targets are empty)");
  check_targets(targets, "roc_auc");
  // Each sample as (score's order key << 32 | positive), sorted by score.
  std::vector<uint64_t> s(scores.size());
  for (std::size_t i = 0; i < scores.size(); ++i) {
    STRATA_CHECK(!std::isnan(scores[i]), "roc_auc: scores[", i, "] is NaN");
    s[i] = uint64_t{order_key(scores[i])} << 32 | (targets[i] == 1.0f ? 1u : 0u);
  }
  sort_by_upper_half(s);
  // Twice the Mann-Whitney count, in integers: every positive above a negative counts 2, a tie 1
  // (Note [Exact ROC AUC]).
  unsigned __int128 twice_wins = 0;
  uint64_t negatives_below = 0, positives = 0;
  for (std::size_t run = 0; run < s.size();) {
    std::size_t end = run;
    uint64_t p = 0;
    for (; end < s.size() && (s[end] >> 32) == (s[run] >> 32); ++end) p += s[end] & 1u;
    const uint64_t n = (end - run) - p;
    twice_wins += static_cast<unsigned __int128>(p) * (2 * negatives_below + n);
    negatives_below += n;
    positives += p;
    run = end;
  }
  const uint64_t negatives = negatives_below;
  if (positives == 0 || negatives == 0) return std::numeric_limits<double>::quiet_NaN();
  return static_cast<double>(twice_wins) / (2.0 * static_cast<double>(positives) * static_cast<double>(negatives));
}

double accuracy(std::span<const float> scores, std::span<const float> targets) {
  check_lengths(scores, targets, "accuracy");
  if (scores.empty()) return 0;
  int64_t right = 0;
  for (std::size_t i = 0; i < scores.size(); ++i)
    right += std::nearbyint(scores[i]) == targets[i] ? 1 : 0;  // round half to even (np.round)
  return static_cast<double>(right) / static_cast<double>(scores.size());
}

double log_loss(std::span<const float> scores, std::span<const float> targets) {
  check_lengths(scores, targets, "log_loss");
  if (scores.empty()) return 0;
  constexpr double eps = DBL_EPSILON;
  double sum = 0;
  for (std::size_t i = 0; i < scores.size(); ++i) {
    const double p = std::clamp(static_cast<double>(scores[i]), eps, 1.0 - eps);
    const double t = targets[i];
    sum -= t * std::log(p) + (1.0 - t) * std::log1p(-p);
  }
  return sum / static_cast<double>(scores.size());
}

void BinaryMetricsAccumulator::add(std::span<const float> scores, std::span<const float> targets, double batch_loss) {
  check_lengths(scores, targets, "BinaryMetricsAccumulator::add");
  for (float t : targets) binary_ = binary_ && (t == 0.0f || t == 1.0f);
  scores_.insert(scores_.end(), scores.begin(), scores.end());
  targets_.insert(targets_.end(), targets.begin(), targets.end());
  loss_sum_ += batch_loss * static_cast<double>(scores.size());
}

BinaryMetrics BinaryMetricsAccumulator::compute() const {
  BinaryMetrics m;
  m.samples = samples();
  if (m.samples == 0) return m;
  m.loss = loss_sum_ / static_cast<double>(m.samples);
  m.log_loss = log_loss(scores_, targets_);
  m.accuracy = accuracy(scores_, targets_);
  m.auc = binary_ ? roc_auc(scores_, targets_) : std::numeric_limits<double>::quiet_NaN();
  return m;
}

void BinaryMetricsAccumulator::clear() {
  scores_.clear();
  targets_.clear();
  loss_sum_ = 0;
  binary_ = true;
}

}  // namespace strata::metrics
