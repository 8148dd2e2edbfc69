// Click data (Note [Click data]): determinism, replay, disjoint splits sharing one hidden model, the
// calibration (click rate, Bayes-optimal AUC), the planted per-row signal, and bad settings.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>
#include <utility>
#include <vector>

#include "embeddings/click_source.h"
#include "embeddings/dlrm.h"
#include "embeddings/dlrm_config.h"
#include "tests/cpp/error_text.h"

using namespace strata;
using namespace strata::emb;
using ::testing::HasSubstr;

namespace {

using strata::testing_util::message_of;

/// The default preset's shape of data, smaller batches.
ClickConfig config(ClickSplit split = ClickSplit::Train) {
  ClickConfig c;
  c.rows.assign(8, 131072);
  c.num_dense = 16;
  c.batch_size = 256;
  c.data_size = 256 * 8;
  c.seed = 123;
  c.split = split;
  return c;
}

std::vector<Batch> epoch(IndexSource& s) {
  std::vector<Batch> out;
  Batch b;
  while (s.next(b)) out.push_back(b);
  return out;
}

void expect_same(const std::vector<Batch>& a, const std::vector<Batch>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t j = 0; j < a.size(); ++j) {
    EXPECT_EQ(a[j].dense, b[j].dense) << "batch " << j;
    EXPECT_EQ(a[j].targets, b[j].targets) << "batch " << j;
    ASSERT_EQ(a[j].tables.size(), b[j].tables.size());
    for (std::size_t t = 0; t < a[j].tables.size(); ++t) {
      EXPECT_EQ(a[j].tables[t].indices, b[j].tables[t].indices) << "batch " << j << " table " << t;
      EXPECT_EQ(a[j].tables[t].offsets, b[j].tables[t].offsets) << "batch " << j << " table " << t;
    }
  }
}

/// Exact ROC AUC: the probability that a random positive scores above a random negative, ties
/// counting one half (the Mann–Whitney statistic over average ranks).
double exact_auc(const std::vector<double>& score, const std::vector<float>& label) {
  std::vector<std::size_t> order(score.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return score[a] < score[b]; });
  double rank_sum = 0, positives = 0;
  for (std::size_t i = 0; i < order.size();) {
    std::size_t j = i;
    while (j < order.size() && score[order[j]] == score[order[i]]) ++j;
    const double avg_rank = 0.5 * static_cast<double>(i + j + 1);  // ranks i+1..j
    for (std::size_t k = i; k < j; ++k) {
      if (label[order[k]] > 0.5f) {
        rank_sum += avg_rank;
        positives += 1;
      }
    }
    i = j;
  }
  const double negatives = static_cast<double>(score.size()) - positives;
  return (rank_sum - positives * (positives + 1) / 2) / (positives * negatives);
}

}  // namespace

TEST(ExactAuc, MatchesHandComputedValues) {
  EXPECT_DOUBLE_EQ(exact_auc({0.1, 0.4, 0.35, 0.8}, {0, 0, 1, 1}), 0.75);  // sklearn's doc example
  EXPECT_DOUBLE_EQ(exact_auc({1, 1, 1, 1}, {0, 1, 0, 1}), 0.5);
  EXPECT_DOUBLE_EQ(exact_auc({3, 2, 1}, {1, 0, 0}), 1.0);
}

TEST(ClickSource, IsDeterministicAndResetReplaysTheEpoch) {
  ClickSource a(config()), b(config());
  const auto first = epoch(a);
  expect_same(first, epoch(b));
  EXPECT_EQ(first.size(), 8u);
  a.reset();
  expect_same(first, epoch(a));
  ClickConfig other = config();
  other.seed = 124;
  ClickSource c(other);
  EXPECT_NE(epoch(c)[0].targets, first[0].targets);
}

TEST(ClickSource, BatchesAreWellFormedWithOneIdPerTableAndDenseInUnitInterval) {
  ClickConfig c = config();
  c.rows = {5, 1000, 131072};
  c.data_size = 600;  // 3 batches, the last of 88
  ClickSource s(c);
  const auto batches = epoch(s);
  ASSERT_EQ(batches.size(), 3u);
  EXPECT_EQ(batches.back().batch, 88);
  for (const Batch& b : batches) {
    for (float x : b.dense) EXPECT_TRUE(x >= 0.0f && x < 1.0f);
    for (float y : b.targets) EXPECT_TRUE(y == 0.0f || y == 1.0f);
    for (int64_t t = 0; t < b.num_tables(); ++t) {
      const BagStorage& bag = b.tables[static_cast<std::size_t>(t)];
      ASSERT_EQ(bag.indices.size(), static_cast<std::size_t>(b.batch));
      for (int64_t i = 0; i <= b.batch; ++i) EXPECT_EQ(bag.offsets[static_cast<std::size_t>(i)], i);
      for (int64_t x : bag.indices) EXPECT_TRUE(x >= 0 && x < c.rows[static_cast<std::size_t>(t)]);
    }
  }
}

TEST(ClickSource, BagsFollowNumIndicesPerLookup) {
  ClickConfig c = config();
  c.bag_size = 5;
  ClickSource fixed(c);
  Batch b;
  ASSERT_TRUE(fixed.next(b));
  EXPECT_EQ(b.tables[0].indices.size(), static_cast<std::size_t>(5 * b.batch));
  c.variable_bag_size = true;
  ClickSource variable(c);
  ASSERT_TRUE(variable.next(b));
  std::set<int64_t> sizes;
  for (int64_t i = 0; i < b.batch; ++i) sizes.insert(b.tables[0].offsets[i + 1] - b.tables[0].offsets[i]);
  EXPECT_EQ(*sizes.begin(), 1);
  EXPECT_EQ(*sizes.rbegin(), 5);
}

TEST(ClickSource, HotRanksAreScatteredLikeZipfSource) {
  ClickSource click(config());
  ZipfConfig z;
  z.rows = config().rows;
  z.seed = 123;
  ZipfSource zipf(z);
  for (int64_t t = 0; t < 8; ++t) {
    for (int64_t k : {0, 1, 2, 1000, 131071}) EXPECT_EQ(click.row_of_rank(t, k), zipf.row_of_rank(t, k));
  }
  EXPECT_NE(click.row_of_rank(0, 0), 0);
}

TEST(ClickSource, TrainAndTestSplitsAreDisjointSamplesOfOneHiddenModel) {
  ClickSource train(config(ClickSplit::Train)), test(config(ClickSplit::Test));
  std::set<std::vector<float>> seen;
  for (const Batch& b : epoch(train)) {
    for (int64_t i = 0; i < b.batch; ++i) seen.emplace(b.dense.begin() + i * 16, b.dense.begin() + (i + 1) * 16);
  }
  std::size_t shared = 0;
  for (const Batch& b : epoch(test)) {
    for (int64_t i = 0; i < b.batch; ++i)
      shared += seen.count(std::vector<float>(b.dense.begin() + i * 16, b.dense.begin() + (i + 1) * 16));
  }
  EXPECT_EQ(shared, 0u);
  for (int64_t k : {0, 7, 5000}) {
    EXPECT_EQ(train.model().main_effect(3, k), test.model().main_effect(3, k));
    EXPECT_EQ(train.model().latent(3, k), test.model().latent(3, k));
    EXPECT_EQ(train.row_of_rank(3, k), test.row_of_rank(3, k));
  }
  EXPECT_EQ(train.describe(), "click(alpha 1.05, train)");
  EXPECT_EQ(test.describe(), "click(alpha 1.05, test)");
}

TEST(ClickSource, ClickRateAndBayesOptimalAucAreCalibrated) {
  ClickConfig c = config();
  c.batch_size = 1000;
  c.data_size = 40000;
  ClickSource s(c);
  std::vector<double> logits;
  std::vector<float> labels;
  Batch b;
  while (s.next(b)) {
    logits.insert(logits.end(), s.logits().begin(), s.logits().end());
    labels.insert(labels.end(), b.targets.begin(), b.targets.end());
  }
  const double rate = std::accumulate(labels.begin(), labels.end(), 0.0) / static_cast<double>(labels.size());
  EXPECT_GT(rate, 0.25);
  EXPECT_LT(rate, 0.35);
  const double auc = exact_auc(logits, labels);
  EXPECT_GT(auc, 0.80);
  EXPECT_LT(auc, 0.86);
}

TEST(ClickSource, FrequentRowsCarryTheLargeEffects) {
  const ClickModel m(8, 16, 123);
  double head = 0, tail = 0;
  for (int64_t k = 0; k < 200; ++k) {
    head += std::abs(m.main_effect(0, k));
    tail += std::abs(m.main_effect(0, 100000 + k));
  }
  EXPECT_GT(head, 5 * tail);
}

TEST(ClickSource, TheHotRowsClickRatesFollowTheirHiddenEffects) {
  // Samples whose table-0 id is a hot row with a clearly positive effect click more often than
  // those whose row has a clearly negative one.
  ClickConfig c = config();
  c.batch_size = 1000;
  c.data_size = 30000;
  ClickSource s(c);
  std::vector<double> clicks(2), count(2);
  Batch b;
  while (s.next(b)) {
    for (int64_t i = 0; i < b.batch; ++i) {
      for (int64_t k = 0; k < 20; ++k) {
        if (b.tables[0].indices[static_cast<std::size_t>(i)] != s.row_of_rank(0, k)) continue;
        const double effect = s.model().main_effect(0, k);
        if (std::abs(effect) < 0.3) continue;
        const std::size_t side = effect > 0;
        clicks[side] += b.targets[static_cast<std::size_t>(i)];
        count[side] += 1;
      }
    }
  }
  ASSERT_GT(count[0], 500);
  ASSERT_GT(count[1], 500);
  EXPECT_GT(clicks[1] / count[1], clicks[0] / count[0] + 0.1);
}

TEST(ClickSource, BadSettingsNameTheFlag) {
  auto with = [](auto edit) {
    ClickConfig c = config();
    edit(c);
    return message_of([&] { ClickSource s(c); });
  };
  EXPECT_THAT(with([](ClickConfig& c) { c.rows.clear(); }), HasSubstr("--arch-embedding-size"));
  EXPECT_THAT(with([](ClickConfig& c) { c.rows[2] = 0; }), HasSubstr("--arch-embedding-size: table 2 has 0 rows"));
  EXPECT_THAT(with([](ClickConfig& c) { c.bag_size = 0; }), HasSubstr("--num-indices-per-lookup must be positive"));
  EXPECT_THAT(with([](ClickConfig& c) { c.alpha = 0; }), HasSubstr("--zipf-alpha must be positive"));
  EXPECT_THAT(with([](ClickConfig& c) { c.alpha = NAN; }), HasSubstr("--zipf-alpha must be positive"));
  EXPECT_THAT(with([](ClickConfig& c) { c.batch_size = 0; }), HasSubstr("--mini-batch-size must be positive"));
  EXPECT_THAT(with([](ClickConfig& c) { c.data_size = 0; }), HasSubstr("--data-size must be positive"));
  EXPECT_THAT(with([](ClickConfig& c) { c.num_dense = -1; }), HasSubstr("first width of --arch-mlp-bot"));
  EXPECT_THAT(with([](ClickConfig& c) { c.split = ClickSplit::Test, c.batch_size = 0; }),
              HasSubstr("--test-mini-batch-size must be positive"));
  EXPECT_THAT(with([](ClickConfig& c) { c.split = ClickSplit::Test, c.data_size = 0; }),
              HasSubstr("--test-data-size must be positive"));
}

TEST(MakeClickSource, BuildsBothSplitsFromTheFlags) {
  const DLRMConfig c = parse_dlrm_args({"--data-generation=click", "--arch-embedding-size=100-200",
                                        "--arch-mlp-bot=3-2", "--mini-batch-size=10", "--num-batches=7",
                                        "--num-indices-per-lookup=1", "--num-indices-per-lookup-fixed=True"});
  const auto train = make_index_source(c);
  EXPECT_EQ(train->describe(), "click(alpha 1.05, train), prefetched");  // generated ahead on a thread
  EXPECT_EQ(train->num_batches(), 7);
  EXPECT_EQ(train->num_dense(), 3);
  const auto test = make_click_source(c, true);
  EXPECT_EQ(test->describe(), "click(alpha 1.05, test)");
  EXPECT_EQ(test->num_batches(), 1);  // a tenth of 70 samples: 7, one batch
  Batch b;
  ASSERT_TRUE(test->next(b));
  EXPECT_EQ(b.batch, 7);

  DLRMConfig sized = c;
  sized.test_data_size = 25;
  sized.test_mini_batch_size = 4;
  EXPECT_EQ(make_click_source(sized, true)->num_batches(), 7);
  EXPECT_THAT(describe(c), HasSubstr("data click(alpha 1.05)"));
}

TEST(MakeClickSource, BadFlagsAreNamed) {
  EXPECT_THAT(message_of([] { parse_dlrm_args({"--data-generation=clicks"}); }),
              HasSubstr("--data-generation: expected one of random, synthetic, dataset, zipf, click"));
  EXPECT_THAT(message_of([] { parse_dlrm_args({"--test-data-size=-1"}); }), HasSubstr("--test-data-size"));
  EXPECT_THAT(message_of([] { parse_dlrm_args({"--data-generation=click", "--zipf-alpha=0"}); }),
              HasSubstr("--zipf-alpha"));
  DLRMConfig c = parse_dlrm_args({"--data-generation=click"});
  c.test_mini_batch_size = -1;
  c.mini_batch_size = 0;
  EXPECT_THAT(message_of([&] { make_click_source(c, false); }), HasSubstr("--mini-batch-size"));
}
