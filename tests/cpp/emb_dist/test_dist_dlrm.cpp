// DistributedDLRM (embeddings/dist/dist_dlrm.h) at whatever rank count the suite runs (ctest: 1, 2 and
// 4, one thread per rank): the losses of a few SGD steps, the final MLP parameters, every table row
// held and the scores are bitwise those of a one-process reference computed in every rank, for
// table-wise, row-wise and mixed plans and for a batch that does not divide (37) and one sample per
// rank; hence bitwise the same at every rank count. The reference uses neither DistributedDLRM nor
// DataParallel: the same fixed chunks, each chunk's gradients by its own autograd::grad, summed by
// tree_sum, the tables as one 1-rank ShardedEmbeddingBags. Bad inputs are named on every rank.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
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
#include "ops/softmax_loss.h"
#include "tests/cpp/bitwise.h"
#include "tests/cpp/emb_dist/dlrm_reference.h"
#include "tests/cpp/error_text.h"

namespace strata::emb {
namespace {

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

TEST_P(DistDLRM, BitwiseEqualToOneProcess) {
  const int n = comm().size();
  const int64_t batch = GetParam().one_per_rank ? n : 37;
  DistributedDLRM model(config(GetParam().optimizer), plan(GetParam().kind, n), {&heap_, nullptr}, comm());
  Reference ref(reference_heap_, GetParam().optimizer);
  for (int s = 0; s < kSteps; ++s) {
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
    rows_trained += w[0] != initial_value(config().seed, 0, tables()[0].rows, r, 0) ? 1 : 0;
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
  const ShardPlan p = plan(GetParam().kind, n);
  for (std::size_t t = 0; t < p.tables.size(); ++t)
    expected += p.tables[t].rows * (p.shards[t].kind == ShardKind::data_parallel ? n : 1);
  EXPECT_EQ(total, expected);
  // Scores: this rank's rows, and the whole batch on every rank.
  const Batch test(batch, 99);
  const Tensor local = model.forward(test.dense, test.bags);
  EXPECT_EQ(local.size(0), model.local_rows(batch).size());
  EXPECT_TRUE(same_bits(model.score(test.dense, test.bags), ref.score(test)));
}

INSTANTIATE_TEST_SUITE_P(PlansAndOptimizers, DistDLRM, ::testing::ValuesIn(cases()),
                         [](const auto& info) { return case_name(info.param); });

// The one-process TieredDLRM (embeddings/dlrm.h) of the same architecture, loaded with DistributedDLRM's
// initial weights: the same model, but one GEMM over the whole batch instead of fixed chunks, a plain
// sum per bag instead of the row-block tree, so equal only to float rounding.
DLRMConfig tiered_config(OptimizerKind optimizer) {
  std::string rows;
  for (const TableSpec& t : tables()) rows += (rows.empty() ? "" : "-") + std::to_string(t.rows);
  return parse_dlrm_args({"--arch-sparse-feature-size", "4", "--arch-mlp-bot", "5-8-4", "--arch-mlp-top", "6-1",
                          "--arch-embedding-size", rows, "--loss-function", "bce", "--optimizer", to_string(optimizer),
                          "--learning-rate", std::to_string(config(optimizer).learning_rate), "--slow-tier-model",
                          "off", "--fast-budget", "1M"});
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

class DistDLRMTiered : public ::testing::TestWithParam<OptimizerKind> {};

TEST_P(DistDLRMTiered, EqualToTheOneProcessDLRMToFloatRounding) {
  const int n = comm().size();
  memory::DramHeap heap(std::size_t{4} << 20);
  DistributedDLRM model(config(GetParam()), plan(Kind::mixed, n), {&heap, nullptr}, comm());
  TieredDLRM tiered(tiered_config(GetParam()));
  ASSERT_EQ(static_cast<float>(tiered.next_learning_rate()), model.config().learning_rate);
  tiered.load_state_dict(model.dense_module().state_dict());
  std::vector<float> row(4);
  for (int t = 0; t < static_cast<int>(tables().size()); ++t) {
    for (int64_t r = 0; r < tables()[t].rows; ++r) {
      for (int64_t c = 0; c < 4; ++c) row[c] = initial_value(config().seed, t, tables()[t].rows, r, c);
      tiered.table(t).write_row(r, row.data());
    }
  }
  float worst = 0;
  for (int s = 0; s < kSteps; ++s) {
    const Batch b(37, s);
    const float got = model.train_step(b.dense, b.bags, b.targets);
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
  RecordProperty("largest_difference", std::to_string(worst));
  if (comm().rank() == 0) {
    std::printf("[ DistributedDLRM vs TieredDLRM, %s ] largest |difference| %.3g\n", to_string(GetParam()), worst);
  }
}

INSTANTIATE_TEST_SUITE_P(Optimizers, DistDLRMTiered,
                         ::testing::Values(OptimizerKind::SGD, OptimizerKind::RowWiseAdagrad, OptimizerKind::Adagrad),
                         [](const auto& info) { return std::string(to_string(info.param)); });

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
