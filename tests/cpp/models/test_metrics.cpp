// models/metrics.h: exact ROC AUC, accuracy and log loss (sklearn's definitions; the pytest
// tests/python/test_metrics.py compares with sklearn itself).

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "core/error.h"
#include "models/metrics.h"
#include "tests/cpp/error_text.h"

namespace strata::metrics {
namespace {

// The definition itself: over all (positive, negative) pairs, 1 when the positive scores higher,
// 1/2 on a tie.
double pairwise_auc(const std::vector<float>& s, const std::vector<float>& t) {
  double wins = 0, pairs = 0;
  for (std::size_t i = 0; i < s.size(); ++i)
    for (std::size_t j = 0; j < s.size(); ++j)
      if (t[i] == 1 && t[j] == 0) {
        pairs += 1;
        wins += s[i] > s[j] ? 1.0 : s[i] == s[j] ? 0.5 : 0.0;
      }
  return wins / pairs;
}

TEST(Metrics, AucOfAHandWorkedCase) {
  // Positives at 0.35 and 0.8, negatives at 0.1 and 0.4: 3 of 4 pairs ordered.
  EXPECT_DOUBLE_EQ(roc_auc(std::vector<float>{0.1f, 0.4f, 0.35f, 0.8f}, std::vector<float>{0, 0, 1, 1}), 0.75);
  EXPECT_DOUBLE_EQ(roc_auc(std::vector<float>{0.5f, 0.5f}, std::vector<float>{0, 1}), 0.5);
  EXPECT_DOUBLE_EQ(roc_auc(std::vector<float>{0.9f, 0.1f}, std::vector<float>{0, 1}), 0.0);
}

TEST(Metrics, AucEqualsThePairwiseDefinitionWithManyTies) {
  std::mt19937 gen(7);
  for (int trial = 0; trial < 20; ++trial) {
    const int n = 50 + trial * 13;
    std::vector<float> s(n), t(n);
    std::uniform_int_distribution<int> level(0, trial % 2 == 0 ? 5 : 1000);  // heavy ties, then few
    for (int i = 0; i < n; ++i) {
      s[i] = static_cast<float>(level(gen)) / 1000.0f;
      t[i] = static_cast<float>(gen() % 3 == 0);
    }
    t[0] = 0, t[1] = 1;
    EXPECT_NEAR(roc_auc(s, t), pairwise_auc(s, t), 1e-12) << "trial " << trial;
  }
}

TEST(Metrics, AucOrdersEveryFloatLikeComparisons) {
  // The sort runs on the scores' bits (Note [Exact ROC AUC]): negative scores, -0 against +0 (a tie),
  // infinities, subnormals and neighbouring floats must order as the float comparisons do, and a
  // batch as large as a test pass must agree with the definition too.
  const float sub = std::numeric_limits<float>::denorm_min(), inf = std::numeric_limits<float>::infinity();
  const std::vector<float> levels{-inf, -3.5f, -1.0f, -sub, -0.0f, 0.0f, sub, std::nextafter(1.0f, 0.0f),
                                  1.0f, 7e30f, inf};
  std::mt19937 gen(8);
  for (int trial = 0; trial < 12; ++trial) {
    const int n = trial < 10 ? 40 + trial * 31 : 3000;
    std::vector<float> s(n), t(n);
    for (int i = 0; i < n; ++i) {
      s[i] =
          trial < 10 ? levels[gen() % levels.size()] : std::ldexp(static_cast<float>(gen() % 100000) - 50000.0f, -20);
      t[i] = static_cast<float>(gen() % 3 == 0);
    }
    t[0] = 0, t[1] = 1;
    EXPECT_NEAR(roc_auc(s, t), pairwise_auc(s, t), 1e-12) << "trial " << trial;
  }
  // -0 and +0 tie: one positive at -0 and one negative at +0 is a half win.
  EXPECT_DOUBLE_EQ(roc_auc(std::vector<float>{0.0f, -0.0f}, std::vector<float>{0, 1}), 0.5);
  EXPECT_DOUBLE_EQ(roc_auc(std::vector<float>{-inf, inf, -sub, sub}, std::vector<float>{0, 1, 0, 1}), 1.0);
}

TEST(Metrics, AucIsNaNWithOneClass) {
  EXPECT_TRUE(std::isnan(roc_auc(std::vector<float>{0.1f, 0.7f}, std::vector<float>{1, 1})));
  EXPECT_TRUE(std::isnan(roc_auc(std::vector<float>{0.1f}, std::vector<float>{0})));
}

TEST(Metrics, BadInputNamesTheArgument) {
  EXPECT_ERROR_HAS(roc_auc(std::vector<float>{0.1f, 0.2f}, std::vector<float>{0, 2}), "targets[1] is 2");
  EXPECT_ERROR_HAS(roc_auc(std::vector<float>{0.1f, NAN}, std::vector<float>{0, 1}), "scores[1] is NaN");
  EXPECT_ERROR_HAS(roc_auc(std::vector<float>{0.1f}, std::vector<float>{0, 1}),
                   "scores has 1 elements but targets has 2");
  EXPECT_ERROR_HAS(roc_auc(std::vector<float>{}, std::vector<float>{}), "no samples");
  BinaryMetricsAccumulator acc;
  EXPECT_ERROR_HAS(acc.add(std::vector<float>{0.5f}, std::vector<float>{0.5f, 1.0f}, 0.1),
                   "scores has 1 elements but targets has 2");
  EXPECT_EQ(acc.samples(), 0);
}

TEST(Metrics, SoftTargetsHaveNoAuc) {
  // The reference's random data has targets in [0, 1): accuracy and loss are still reported.
  BinaryMetricsAccumulator acc;
  acc.add(std::vector<float>{0.2f, 0.7f}, std::vector<float>{0.25f, 1.0f}, 0.5);
  const BinaryMetrics m = acc.compute();
  EXPECT_TRUE(std::isnan(m.auc));
  EXPECT_DOUBLE_EQ(m.accuracy, 0.5);
  EXPECT_DOUBLE_EQ(m.loss, 0.5);
}

TEST(Metrics, AccuracyRoundsHalfToEven) {
  // 0.5 rounds to 0 (np.round), so a 0.5 score is right for target 0 and wrong for 1.
  EXPECT_DOUBLE_EQ(accuracy(std::vector<float>{0.5f, 0.5f, 0.51f, 0.2f}, std::vector<float>{0, 1, 1, 1}), 0.5);
  EXPECT_DOUBLE_EQ(accuracy(std::vector<float>{}, std::vector<float>{}), 0.0);
}

TEST(Metrics, LogLossClipsCertainMistakes) {
  const double eps = 0x1p-52;
  EXPECT_NEAR(log_loss(std::vector<float>{0.0f, 1.0f}, std::vector<float>{0, 1}), -std::log1p(-eps), 1e-30);
  EXPECT_NEAR(log_loss(std::vector<float>{1.0f}, std::vector<float>{0}), -std::log(eps), 1e-9);
  EXPECT_NEAR(log_loss(std::vector<float>{0.25f}, std::vector<float>{1}), -std::log(0.25), 1e-12);
}

TEST(Metrics, AccumulatorCombinesBatches) {
  BinaryMetricsAccumulator acc;
  acc.add(std::vector<float>{0.1f, 0.4f}, std::vector<float>{0, 0}, 1.0);
  acc.add(std::vector<float>{0.35f, 0.8f}, std::vector<float>{1, 1}, 3.0);
  const BinaryMetrics m = acc.compute();
  EXPECT_EQ(m.samples, 4);
  EXPECT_DOUBLE_EQ(m.auc, 0.75);
  EXPECT_DOUBLE_EQ(m.loss, 2.0);  // mean of per-sample losses
  EXPECT_DOUBLE_EQ(m.accuracy, 0.75);
  acc.clear();
  EXPECT_EQ(acc.compute().samples, 0);
}

}  // namespace
}  // namespace strata::metrics
