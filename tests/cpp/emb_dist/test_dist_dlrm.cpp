// DistributedDLRM (embeddings/dist/dist_dlrm.h) at whatever rank count the suite runs (ctest: 1, 2 and
// 4, one thread per rank): the losses of a few SGD steps, the final MLP parameters, every table row
// held and the scores are bitwise those of a one-process reference computed in every rank, for
// table-wise, row-wise and mixed plans and for a batch that does not divide (37) and one sample per
// rank; hence bitwise the same at every rank count. The reference uses neither DistributedDLRM nor
// DataParallel: the same fixed chunks, each chunk's gradients by its own autograd::grad, summed by
// tree_sum, the tables as one 1-rank ShardedEmbeddingBags. The same with mse, wbce and the output
// clamp under a learning-rate warm-up and decay (DistDLRMRules), and against the one-process
// TieredDLRM to float rounding with every step's learning rate equal. Bad inputs are named on every
// rank.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <ostream>
#include <random>

#include "autograd/engine.h"
#include "autograd/grad_mode.h"
#include "core/factories.h"
#include "core/rng.h"
#include "dist/communicator.h"
#include "dist/data_parallel/data_parallel.h"
#include "dist/reduction.h"
#include "embeddings/dist/dist_dlrm.h"
#include "embeddings/dist/shard_volume.h"
#include "embeddings/dlrm.h"
#include "embeddings/dlrm_config.h"
#include "memory/heap.h"
#include "ops/shape_ops.h"
#include "tests/cpp/bitwise.h"
#include "tests/cpp/emb_dist/dlrm_reference.h"
#include "tests/cpp/error_text.h"

namespace strata::emb {
namespace {

using testing_util::bitwise_equal;
using testing_util::same_bits;

using namespace dlrm_test;  // the suite's model, batches and reference (dlrm_reference.h)
using dlrm_test::Batch;     // not emb::Batch

constexpr int kSteps = 3;

struct Case {
  Kind kind;
  bool one_per_rank;  // B == ranks; else B = 37
  OptimizerKind optimizer;
};

std::string case_name(const Case& c) {
  const std::string kind = c.kind == Kind::table_wise ? "table_wise" : c.kind == Kind::row_wise ? "row_wise" : "mixed";
  return kind + (c.one_per_rank ? "_one_sample_per_rank_" : "_37_samples_") + to_string(c.optimizer);
}

std::vector<Case> cases() {
  std::vector<Case> out;
  for (OptimizerKind o : {OptimizerKind::SGD, OptimizerKind::RowWiseAdagrad, OptimizerKind::Adagrad}) {
    for (Kind k : {Kind::table_wise, Kind::row_wise, Kind::mixed}) {
      out.push_back({k, false, o});
      out.push_back({k, true, o});
    }
  }
  return out;
}

class DistDLRM : public ::testing::TestWithParam<Case> {
 protected:
  memory::DramHeap heap_{std::size_t{4} << 20};
  memory::DramHeap reference_heap_{std::size_t{4} << 20};
};

// `steps` steps of DistributedDLRM of `c` over `kind`'s plan and of the Reference on batches of
// `batch`: the losses, the MLP parameters, every held row and the scores bitwise equal. The scores
// of the test batch into `scores` (every rank's).
void expect_bitwise_reference(const DistributedDLRMConfig& c, Kind kind, int64_t batch, int steps, memory::Heap& heap,
                              memory::Heap& reference_heap, Tensor* scores = nullptr) {
  const int n = comm().size();
  DistributedDLRM model(c, plan(kind, n), {&heap, nullptr}, comm());
  Reference ref(reference_heap, c);
  for (int s = 0; s < steps; ++s) {
    const Batch b(batch, s);
    const float got = model.train_step(b.dense, b.bags, b.targets);
    const float want = ref.step(b);
    EXPECT_EQ(std::memcmp(&got, &want, 4), 0) << "loss of step " << s << ": " << got << " vs " << want;
  }
  const std::vector<Tensor> mine = model.dense_module().parameters(), theirs = ref.mlp().parameters();
  ASSERT_EQ(mine.size(), theirs.size());
  for (std::size_t p = 0; p < mine.size(); ++p) EXPECT_TRUE(same_bits(mine[p], theirs[p])) << "MLP parameter " << p;
  std::vector<float> a(4), w(4);
  int64_t rows_compared = 0, rows_trained = 0;
  for (int64_t r = 0; r < tables()[0].rows; ++r) {  // the steps moved rows (the comparison is not of initial values)
    ref.embeddings().read_row(0, r, w.data());
    rows_trained += w[0] != initial_value(c.seed, 0, tables()[0].rows, r, 0) ? 1 : 0;
  }
  EXPECT_GT(rows_trained, 0);
  for (int t = 0; t < static_cast<int>(tables().size()); ++t) {
    for (int64_t r = model.tables().row_begin(t); r < model.tables().row_end(t); ++r, ++rows_compared) {
      model.tables().read_row(t, r, a.data());
      ref.embeddings().read_row(t, r, w.data());
      ASSERT_TRUE(testing_util::bitwise_equal(a, w)) << "table " << t << " row " << r;
    }
  }
  // Every row of every table is held by some rank.
  const Tensor held = comm().allgatherv(full({1}, static_cast<double>(rows_compared), {DType::i64}));
  int64_t total = 0, expected = 0;
  for (int r = 0; r < n; ++r) total += held.data<int64_t>()[r];
  const ShardPlan p = plan(kind, n);
  for (std::size_t t = 0; t < p.tables.size(); ++t)
    expected += p.tables[t].rows * (p.shards[t].kind == ShardKind::data_parallel ? n : 1);
  EXPECT_EQ(total, expected);
  // Scores: this rank's rows, and the whole batch on every rank.
  const Batch test(batch, 99);
  const Tensor local = model.forward(test.dense, test.bags);
  EXPECT_EQ(local.size(0), model.local_rows(batch).size());
  const Tensor all = model.score(test.dense, test.bags);
  EXPECT_TRUE(same_bits(all, ref.score(test)));
  if (scores != nullptr) *scores = all;
}

TEST_P(DistDLRM, BitwiseEqualToOneProcess) {
  const int64_t batch = GetParam().one_per_rank ? comm().size() : 37;
  expect_bitwise_reference(config(GetParam().optimizer), GetParam().kind, batch, kSteps, heap_, reference_heap_);
}

INSTANTIATE_TEST_SUITE_P(PlansAndOptimizers, DistDLRM, ::testing::ValuesIn(cases()),
                         [](const auto& info) { return case_name(info.param); });

// The reference's other losses, the output clamp and a learning-rate schedule (Note [DLRM loss],
// LRSchedule): warm-up over 2 steps, decay from step 3 over 3 steps, then frozen — 7 steps see
// every phase of the schedule.
struct RulesCase {
  const char* name;
  OptimizerKind optimizer;
  LossFunction loss;
  std::vector<double> weights;
  double threshold;
};

void PrintTo(const RulesCase& r, std::ostream* os) { *os << r.name; }

constexpr int kScheduleSteps = 7;

DistributedDLRMConfig rules_config(const RulesCase& r) {
  DistributedDLRMConfig c = config(r.optimizer);
  c.lr_schedule = {.warmup_steps = 2, .decay_start_step = 3, .decay_steps = 3};
  c.loss_function = r.loss;
  c.loss_weights = r.weights;
  c.loss_threshold = r.threshold;
  return c;
}

std::vector<RulesCase> rules_cases() {
  return {{"mse_sgd", OptimizerKind::SGD, LossFunction::MSE, {1.0, 1.0}, 0.0},
          {"wbce_rwsadagrad", OptimizerKind::RowWiseAdagrad, LossFunction::WBCE, {0.3, 1.7}, 0.0},
          {"bce_clamped_adagrad", OptimizerKind::Adagrad, LossFunction::BCE, {1.0, 1.0}, 0.45}};
}

class DistDLRMRules : public ::testing::TestWithParam<RulesCase> {
 protected:
  memory::DramHeap heap_{std::size_t{4} << 20};
  memory::DramHeap reference_heap_{std::size_t{4} << 20};
};

TEST_P(DistDLRMRules, BitwiseEqualToOneProcess) {
  Tensor scores;
  expect_bitwise_reference(rules_config(GetParam()), Kind::mixed, 37, kScheduleSteps, heap_, reference_heap_, &scores);
  if (GetParam().threshold == 0) return;
  // The clamp acted: some scores sit on a bound, some inside.
  const double t = GetParam().threshold;
  int64_t on_bound = 0;
  for (int64_t i = 0; i < scores.numel(); ++i) {
    const float v = scores.data<float>()[i];
    EXPECT_TRUE(v >= static_cast<float>(t) && v <= static_cast<float>(1 - t)) << v;
    on_bound += v == static_cast<float>(t) || v == static_cast<float>(1 - t) ? 1 : 0;
  }
  EXPECT_GT(on_bound, 0);
  EXPECT_LT(on_bound, scores.numel());
}

INSTANTIATE_TEST_SUITE_P(LossesAndSchedule, DistDLRMRules, ::testing::ValuesIn(rules_cases()),
                         [](const auto& info) { return std::string(info.param.name); });

// The one-process TieredDLRM (embeddings/dlrm.h) of the same architecture, loaded with DistributedDLRM's
// initial weights: the same model, but one GEMM over the whole batch instead of fixed chunks, a plain
// sum per bag instead of the row-block tree, so equal only to float rounding.
// Its flags from DistributedDLRM's config: optimizer, learning rate, schedule and loss.
DLRMConfig tiered_config(const DistributedDLRMConfig& c) {
  std::string rows, weights;
  for (const TableSpec& t : tables()) rows += (rows.empty() ? "" : "-") + std::to_string(t.rows);
  const auto exact = [](double v) {
    char s[32];
    std::snprintf(s, sizeof s, "%.17g", v);
    return std::string(s);
  };
  for (const double w : c.loss_weights) weights += (weights.empty() ? "" : "-") + exact(w);
  return parse_dlrm_args({"--arch-sparse-feature-size",
                          "4",
                          "--arch-mlp-bot",
                          "5-8-4",
                          "--arch-mlp-top",
                          "6-1",
                          "--arch-embedding-size",
                          rows,
                          "--loss-function",
                          to_string(c.loss_function),
                          "--loss-weights",
                          weights,
                          "--loss-threshold",
                          exact(c.loss_threshold),
                          "--optimizer",
                          to_string(c.optimizer),
                          "--learning-rate",
                          exact(c.learning_rate),
                          "--lr-num-warmup-steps",
                          std::to_string(c.lr_schedule.warmup_steps),
                          "--lr-decay-start-step",
                          std::to_string(c.lr_schedule.decay_start_step),
                          "--lr-num-decay-steps",
                          std::to_string(c.lr_schedule.decay_steps),
                          "--slow-tier-model",
                          "off",
                          "--fast-budget",
                          "1M"});
}

// |a - b| <= kAbs + kRel·|b| elementwise; the largest |a - b| into `worst`.
constexpr float kAbs = 2e-6f, kRel = 2e-5f;
bool close(const float* a, const float* b, int64_t n, float& worst) {
  bool ok = true;
  for (int64_t i = 0; i < n; ++i) {
    const float diff = std::fabs(a[i] - b[i]);
    worst = std::max(worst, diff);
    ok = ok && diff <= kAbs + kRel * std::fabs(b[i]);
  }
  return ok;
}

// `steps` steps of DistributedDLRM of `c` and of the TieredDLRM of the same flags from the same
// weights: the learning rate of every step equal, the losses, MLPs and rows to float rounding.
// The largest difference into `worst`.
void expect_close_to_tiered(const DistributedDLRMConfig& c, int steps, float& worst) {
  const int n = comm().size();
  memory::DramHeap heap(std::size_t{4} << 20);
  DistributedDLRM model(c, plan(Kind::mixed, n), {&heap, nullptr}, comm());
  TieredDLRM tiered(tiered_config(c));
  tiered.load_state_dict(model.dense_module().state_dict());
  std::vector<float> row(4);
  for (int t = 0; t < static_cast<int>(tables().size()); ++t) {
    for (int64_t r = 0; r < tables()[t].rows; ++r) {
      for (int64_t j = 0; j < 4; ++j) row[j] = initial_value(c.seed, t, tables()[t].rows, r, j);
      tiered.table(t).write_row(r, row.data());
    }
  }
  for (int s = 0; s < steps; ++s) {
    const Batch b(37, s);
    const double lr = tiered.next_learning_rate();  // the same schedule function, the same number
    EXPECT_EQ(model.next_learning_rate(), lr) << "step " << s;
    const float got = model.train_step(b.dense, b.bags, b.targets);
    EXPECT_EQ(model.learning_rate(), lr) << "step " << s;
    const float want = tiered.train_step(b.dense, b.bags, b.targets);
    EXPECT_TRUE(close(&got, &want, 1, worst)) << "loss of step " << s << ": " << got << " vs " << want;
  }
  const StateDict want = tiered.state_dict(), got = model.dense_module().state_dict();
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t p = 0; p < got.size(); ++p) {
    const Tensor a = got[p].second.contiguous(), b = want[p].second.contiguous();
    ASSERT_EQ(got[p].first, want[p].first);
    EXPECT_TRUE(close(a.data<float>(), b.data<float>(), a.numel(), worst)) << got[p].first;
  }
  std::vector<float> other(4);
  for (int t = 0; t < static_cast<int>(tables().size()); ++t) {
    for (int64_t r = model.tables().row_begin(t); r < model.tables().row_end(t); ++r) {
      model.tables().read_row(t, r, row.data());
      tiered.table(t).read_row(r, other.data());
      ASSERT_TRUE(close(row.data(), other.data(), 4, worst)) << "table " << t << " row " << r;
    }
  }
}

class DistDLRMTiered : public ::testing::TestWithParam<OptimizerKind> {};

TEST_P(DistDLRMTiered, EqualToTheOneProcessDLRMToFloatRounding) {
  float worst = 0;
  expect_close_to_tiered(config(GetParam()), kSteps, worst);
  RecordProperty("largest_difference", std::to_string(worst));
  if (comm().rank() == 0) {
    std::printf("[ DistributedDLRM vs TieredDLRM, %s ] largest |difference| %.3g\n", to_string(GetParam()), worst);
  }
}

INSTANTIATE_TEST_SUITE_P(Optimizers, DistDLRMTiered,
                         ::testing::Values(OptimizerKind::SGD, OptimizerKind::RowWiseAdagrad, OptimizerKind::Adagrad),
                         [](const auto& info) { return std::string(to_string(info.param)); });

class DistDLRMTieredRules : public ::testing::TestWithParam<RulesCase> {};

TEST_P(DistDLRMTieredRules, EqualToTheOneProcessDLRMToFloatRounding) {
  float worst = 0;
  expect_close_to_tiered(rules_config(GetParam()), kScheduleSteps, worst);
  RecordProperty("largest_difference", std::to_string(worst));
  if (comm().rank() == 0) {
    std::printf("[ DistributedDLRM vs TieredDLRM, %s, schedule ] largest |difference| %.3g\n", GetParam().name, worst);
  }
}

INSTANTIATE_TEST_SUITE_P(LossesAndSchedule, DistDLRMTieredRules, ::testing::ValuesIn(rules_cases()),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(DistDLRMBuckets, OneBucketPerLayerTheTopMLPsLastFirst) {
  // Each layer's bucket is reduced once that layer's backward finished in every local chunk, while
  // the earlier layers' backward runs (Note [Distributed DLRM step]; the order: Note [Staged chunks]).
  memory::DramHeap heap(std::size_t{4} << 20);
  DistributedDLRM model(config(), plan(Kind::mixed, comm().size()), {&heap, nullptr}, comm());
  const std::vector<std::vector<int64_t>>& buckets = model.data_parallel().buckets();
  // Bottom MLP 5-8-4 and top MLP 6-1: four Linear layers of a weight and a bias each, registered
  // bottom first; a bucket takes a layer's bias, then its weight.
  const auto all = static_cast<int64_t>(model.dense_module().parameters().size());
  ASSERT_EQ(all, 8);
  std::vector<std::vector<int64_t>> want;
  for (int64_t layer = 3; layer >= 0; --layer) want.push_back({2 * layer + 1, 2 * layer});
  EXPECT_EQ(buckets, want);
  const Batch b(23, 0);
  model.train_step(b.dense, b.bags, b.targets);
  EXPECT_EQ(model.data_parallel().buckets_reduced(), 4);
}

TEST(DistDLRMPlan, MixedPlanHasEveryKind) {
  const int n = comm().size();
  const ShardPlan p = plan(Kind::mixed, n);
  auto count = [&](ShardKind k) {
    return std::count_if(p.shards.begin(), p.shards.end(), [&](const TableShard& s) { return s.kind == k; });
  };
  EXPECT_EQ(count(ShardKind::data_parallel), 2);
  EXPECT_GE(count(ShardKind::table_wise), 1);
  if (n > 1) {
    EXPECT_GE(count(ShardKind::row_wise), 1);
  }
}

// The step's embedding exchange moves shard_volume.h's bytes at the chunk-aligned slices.
TEST(DistDLRMVolume, EmbeddingBytesEqualTheFormulasAtTheChunkSlices) {
  const int me = comm().rank(), n = comm().size();
  memory::DramHeap heap(std::size_t{4} << 20);
  const ShardPlan p = plan(Kind::mixed, n);
  DistributedDLRM model(config(), p, {&heap, nullptr}, comm());
  const Batch b(37, 0);
  const std::vector<int64_t> at = model.row_boundaries(37);
  comm().reset_stats();
  model.train_step(b.dense, b.bags, b.targets);
  const dist::OpStats st = comm().stats()[dist::Op::alltoallv];
  const CollectiveVolume fwd = forward_volume(p, 37, at), bwd = backward_volume(p, 37, at);
  EXPECT_EQ(st.bytes_sent, fwd.sent[me] + bwd.sent[me]);
  EXPECT_EQ(st.bytes_received, fwd.received[me] + bwd.received[me]);
  EXPECT_EQ(st.calls, n > 1 ? 2 : 0);
}

TEST(DistDLRMVolume, SampleSlicesCheckTheBoundaries) {
  EXPECT_EQ(sample_slices(5, 2, {}), (std::vector<int64_t>{0, 3, 5}));
  const std::vector<int64_t> ok{0, 2, 5};
  EXPECT_EQ(sample_slices(5, 2, ok), ok);
  const std::vector<int64_t> three{0, 5};
  EXPECT_ERROR_HAS(sample_slices(5, 2, three), "2 boundaries for 2 ranks");
  const std::vector<int64_t> short_end{0, 2, 4};
  EXPECT_ERROR_HAS(sample_slices(5, 2, short_end), "run from 0 to 4 but must run from 0 to the global batch of 5");
  const std::vector<int64_t> empty_slice{0, 0, 5};
  EXPECT_ERROR_HAS(sample_slices(5, 2, empty_slice), "rank 0's slice [0, 0) is empty");
}

TEST(DistDLRMBadInput, NamedOnEveryRank) {
  const int me = comm().rank(), n = comm().size();
  memory::DramHeap heap(std::size_t{4} << 20);
  DistributedDLRM model(config(), plan(Kind::mixed, n), {&heap, nullptr}, comm());
  Batch b(37, 0);
  std::vector<float> wide = b.dense;
  wide.resize(37 * (kDense + 1));
  EXPECT_ERROR_HAS(model.train_step(wide, b.bags, b.targets), "expected dense features [37, 5] (185 floats)");
  const std::vector<float> few_targets(b.targets.begin(), b.targets.end() - 1);
  EXPECT_ERROR_HAS(model.train_step(b.dense, b.bags, few_targets), "expected 37 targets (one per bag), got 36");
  std::vector<Bags> mismatched = b.bags;  // table 2 without its last bag
  const std::vector<int64_t> short_offsets(b.offsets[2].begin(), b.offsets[2].end() - 1);
  const std::vector<int64_t> short_indices(b.indices[2].begin(), b.indices[2].begin() + short_offsets.back());
  mismatched[2] = {short_indices, short_offsets};
  EXPECT_ERROR_HAS(model.train_step(b.dense, mismatched, b.targets), "has 36 bags but table 0 has 37");
  const std::vector<Bags> few_tables(b.bags.begin(), b.bags.begin() + 3);
  EXPECT_ERROR_HAS(model.forward(b.dense, few_tables), "3 tables of bags for 8 tables");
  if (n > 1) {
    // A batch smaller than the rank count; one rank's bad index; a rank whose batch differs.
    const Batch one(1, 0);
    EXPECT_ERROR_HAS(model.train_step(one.dense, one.bags, one.targets), "cannot give each of");
    Batch bad = b;
    if (me == n - 1) bad.indices[0][0] = 400;  // table a has 400 rows
    bad.bags[0] = {bad.indices[0], bad.offsets[0]};
    const std::string message = testing_util::error_of([&] { model.train_step(bad.dense, bad.bags, bad.targets); });
    EXPECT_NE(
        message.find(me == n - 1 ? "embedding a: bag 2" : "rank " + std::to_string(n - 1) + " passed an invalid batch"),
        std::string::npos)
        << message;
    const Batch other(me == 0 ? 37 : 36, 0);
    EXPECT_ERROR_HAS(model.train_step(other.dense, other.bags, other.targets),
                     "rank 0 passed a global batch of 37 samples but rank 1 passed 36");
    // The same sizes, other contents on the last rank: a dense value, an index, a target, a bag split.
    const std::string differs = "rank " + std::to_string(n - 1) + "'s global batch of 37 samples differs from rank 0's";
    for (int field = 0; field < 4; ++field) {
      Batch changed = b;
      if (me == n - 1 && field == 0) changed.dense[5] += 1.0f;
      if (me == n - 1 && field == 1) changed.indices[3][0] = (changed.indices[3][0] + 1) % 90;
      if (me == n - 1 && field == 2) changed.targets[36] = 1.0f - changed.targets[36];
      if (me == n - 1 && field == 3) {
        std::vector<int64_t>& o = changed.offsets[1];  // the first row of a bag k >= 1 moves to bag k - 1
        std::size_t k = 1;
        while (k + 1 < o.size() && o[k] == o[k + 1]) ++k;
        ASSERT_LT(k + 1, o.size());
        o[k] += 1;
      }
      for (std::size_t t = 0; t < changed.bags.size(); ++t) changed.bags[t] = {changed.indices[t], changed.offsets[t]};
      SCOPED_TRACE("field " + std::to_string(field));
      EXPECT_ERROR_HAS(model.train_step(changed.dense, changed.bags, changed.targets), differs);
      if (field != 2) EXPECT_ERROR_HAS(model.score(changed.dense, changed.bags), differs);  // no targets there
    }
  }
  // Nothing was updated and the communicator is in step: a good step still runs.
  EXPECT_TRUE(std::isfinite(model.train_step(b.dense, b.bags, b.targets)));
}

TEST(DistDLRMBadInput, WbceTargetWithoutAWeightNamedOnEveryRank) {
  const int me = comm().rank(), n = comm().size();
  memory::DramHeap heap(std::size_t{4} << 20);
  DistributedDLRMConfig c = config();
  c.loss_function = LossFunction::WBCE;
  DistributedDLRM model(c, plan(Kind::mixed, n), {&heap, nullptr}, comm());
  const Batch b(37, 0);
  const std::vector<Tensor> before = model.dense_module().parameters();
  std::vector<Tensor> copies;
  for (const Tensor& p : before) copies.push_back(p.clone());
  Batch bad = b;
  if (me == n - 1) bad.targets[5] = 2.0f;  // class 2: the two weights are for 0 and 1
  const std::string message = testing_util::error_of([&] { model.train_step(bad.dense, bad.bags, bad.targets); });
  EXPECT_NE(message.find(me == n - 1 ? "wbce: target 2 of sample 5 has no --loss-weights entry (2 weights)"
                                     : "rank " + std::to_string(n - 1) + " passed an invalid batch"),
            std::string::npos)
      << message;
  // Refused before anything moved: the MLPs and the step count are as before; a good step runs.
  for (std::size_t p = 0; p < before.size(); ++p) EXPECT_TRUE(same_bits(before[p], copies[p])) << "MLP parameter " << p;
  EXPECT_EQ(model.steps(), 0);
  EXPECT_TRUE(std::isfinite(model.train_step(b.dense, b.bags, b.targets)));
}

// Note [Distributed finite check]: a NaN in one sample's dense features stops every rank with the
// same error naming the rank whose samples hold it, before anything is updated: the steps after it
// are bitwise those of a model that never saw the bad batch.
TEST(DistDLRMCheckFinite, ANaNInOneRanksSamplesStopsEveryRankBeforeTheUpdate) {
  memory::DramHeap heap(std::size_t{8} << 20);
  DistributedDLRMConfig c = config();
  c.check_finite = true;
  DistributedDLRM checked(c, plan(Kind::mixed, comm().size()), {&heap, nullptr}, comm());
  DistributedDLRM plain(config(), plan(Kind::mixed, comm().size()), {&heap, nullptr}, comm());
  const Batch first(37, 0), last(37, 2);
  const auto same_step = [&](const Batch& b) {
    const float got = checked.train_step(b.dense, b.bags, b.targets);
    const float want = plain.train_step(b.dense, b.bags, b.targets);
    EXPECT_TRUE(bitwise_equal({got}, {want})) << got << " vs " << want;
  };
  same_step(first);
  Batch bad(37, 1);
  constexpr int64_t kSample = 30;  // the last rank's at 2 and 4 ranks
  bad.dense[kSample * kDense + 2] = std::nanf("");
  const std::vector<int64_t> at = checked.row_boundaries(37);
  int owner = 0;
  while (at[static_cast<std::size_t>(owner) + 1] <= kSample) ++owner;
  const std::string rank = std::to_string(owner);
  EXPECT_ERROR_HAS(checked.train_step(bad.dense, bad.bags, bad.targets),
                   "--check-finite failed on rank " + rank + ": in step 2, before its forward: rank " + rank +
                       "'s samples [" + std::to_string(at[static_cast<std::size_t>(owner)]) +
                       ", 37): the dense features hold nan (sample 30, feature 2)");
  EXPECT_EQ(checked.steps(), 1);
  same_step(last);
  // A NaN target: the same, naming the targets.
  Batch bad_target(37, 1);
  bad_target.targets[0] = std::nanf("");
  EXPECT_ERROR_HAS(checked.train_step(bad_target.dense, bad_target.bags, bad_target.targets),
                   "--check-finite failed on rank 0: in step 3, before its forward: rank 0's samples [0, ");
  EXPECT_ERROR_HAS(checked.train_step(bad_target.dense, bad_target.bags, bad_target.targets),
                   "the targets hold nan (sample 0)");
  // A NaN parameter (the top MLP's last bias, on every rank): the output check stops the step
  // before its backward; with the bias restored, training goes on as if the batch had not been given.
  Tensor bias = checked.dense_module().parameters().back();
  const Tensor saved = bias.detach().clone();
  {
    autograd::NoGradGuard no_grad;
    bias.fill_(std::nan(""));
  }
  EXPECT_ERROR_HAS(checked.train_step(last.dense, last.bags, last.targets), "the model's output");
  EXPECT_EQ(checked.steps(), 2);
  {
    autograd::NoGradGuard no_grad;
    bias.copy_(saved);
  }
  same_step(first);
}

TEST(DistDLRMBadInput, ConfigurationNamed) {
  const int n = comm().size();
  memory::DramHeap heap(std::size_t{4} << 20);
  DistributedDLRMConfig c = config();
  c.top_mlp = {6, 2};
  EXPECT_ERROR_HAS(DistributedDLRM(c, plan(Kind::mixed, n), {&heap, nullptr}, comm()), "top_mlp must end in width 1");
  c = config();
  c.bottom_mlp = {kDense, 8};
  EXPECT_ERROR_HAS(DistributedDLRM(c, plan(Kind::mixed, n), {&heap, nullptr}, comm()),
                   "table 0 'a' has dim 4 but the bottom MLP's last width (the interaction's d) is 8");
  c = config();
  c.learning_rate = -1;
  EXPECT_ERROR_HAS(DistributedDLRM(c, plan(Kind::mixed, n), {&heap, nullptr}, comm()), "negative learning_rate");
  c = config();
  c.loss_threshold = 1.0;
  EXPECT_ERROR_HAS(DistributedDLRM(c, plan(Kind::mixed, n), {&heap, nullptr}, comm()),
                   "loss_threshold must lie in [0, 1), got 1");
  c = config();
  c.loss_function = LossFunction::WBCE;
  c.loss_weights = {1.0};
  EXPECT_ERROR_HAS(DistributedDLRM(c, plan(Kind::mixed, n), {&heap, nullptr}, comm()),
                   "wbce needs loss_weights for targets 0 and 1, got 1 weight(s)");
  c.loss_weights = {1.0, -0.5};
  EXPECT_ERROR_HAS(DistributedDLRM(c, plan(Kind::mixed, n), {&heap, nullptr}, comm()),
                   "loss_weights must be non-negative, got -0.5");
  c = config();
  c.lr_schedule = {.warmup_steps = 3, .decay_start_step = 1, .decay_steps = 2};
  EXPECT_ERROR_HAS(DistributedDLRM(c, plan(Kind::mixed, n), {&heap, nullptr}, comm()),
                   "decay_start_step 1 comes before the warm-up's 3 steps end");
  c.lr_schedule = {.warmup_steps = -1};
  EXPECT_ERROR_HAS(DistributedDLRM(c, plan(Kind::mixed, n), {&heap, nullptr}, comm()),
                   "negative lr_schedule step count (warmup_steps -1");
  c = config();
  c.interaction = "sum";
  EXPECT_ERROR_HAS(DistributedDLRM(c, plan(Kind::mixed, n), {&heap, nullptr}, comm()), "interaction must be");
  EXPECT_ERROR_HAS(DistributedDLRM(config(), plan(Kind::mixed, n + 1), {&heap, nullptr}, comm()),
                   "but the communicator has");
  if (n > 1) {
    c = config();
    c.chunks = 1;
    EXPECT_ERROR_HAS(DistributedDLRM(c, plan(Kind::mixed, n), {&heap, nullptr}, comm()), "chunks=1 is fewer than");
  }
}

}  // namespace
}  // namespace strata::emb
