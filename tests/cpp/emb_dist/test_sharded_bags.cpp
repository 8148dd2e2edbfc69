// ShardedEmbeddingBags (embeddings/dist/sharded_bags.h) at whatever rank count the suite runs (ctest: 1, 2
// and 4): the pooled embeddings and the tables after SGD steps are bitwise equal to the 1-rank run
// computed in-process, for table-wise, row-wise, data-parallel and mixed plans; the bytes each
// collective moves equal the formulas of embeddings/dist/shard_volume.h; bad inputs are named.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "core/factories.h"
#include "dist/communicator.h"
#include "dist/reduction.h"
#include "embeddings/dist/shard_volume.h"
#include "embeddings/dist/sharded_bags.h"
#include "memory/heap.h"
#include "tests/cpp/error_text.h"

namespace strata::emb {
namespace {

dist::Communicator& comm() { return dist::Communicator::world(); }

constexpr uint64_t kSeed = 20261128;
constexpr int64_t kBatch = 11;  // uneven at 2 and 4 ranks

// Eight tables of different sizes and dims (bytes 128000, 32000, 28800, 25600, 480, 640, 19200, 16000).
std::vector<TableSpec> tables() {
  return {{"t0", 4000, 8, 4}, {"t1", 1000, 8, 4}, {"t2", 900, 8, 4}, {"t3", 400, 16, 4},
          {"t4", 30, 4, 4},   {"t5", 20, 8, 4},   {"t6", 600, 8, 4}, {"t7", 500, 8, 4}};
}

enum class Kind { table_wise, row_wise, row_wise_coarse, data_parallel, mixed };
const char* kind_name(Kind k) {
  switch (k) {
    case Kind::table_wise: return "table-wise";
    case Kind::row_wise: return "row-wise";
    case Kind::row_wise_coarse: return "row-wise-coarse";
    case Kind::data_parallel: return "data-parallel";
    case Kind::mixed: return "mixed";
  }
  return "";
}

ShardPlanOptions options(Kind kind, int ranks) {
  ShardPlanOptions o{.ranks = ranks, .fast_budget_bytes = 1 << 20, .slow_budget_bytes = 0, .row_blocks = 5};
  switch (kind) {
    case Kind::table_wise: o.balance_target = 1e9; break;  // never convert
    case Kind::row_wise: o.balance_target = 1.0; break;    // convert until nothing is table-wise
    case Kind::row_wise_coarse:                            // 3 blocks: at 4 ranks rank 3 holds no rows of any table
      o.balance_target = 1.0;
      o.row_blocks = 3;
      break;
    case Kind::data_parallel: o.dp_boundary_bytes = 1 << 20; break;
    case Kind::mixed:  // t4, t5 replicated; t0 (and t1 at 4 ranks) row-wise; the rest table-wise
      o.dp_boundary_bytes = 1000;
      o.balance_target = ranks == 2 ? 1.02 : 1.1;  // table-wise alone is 1.025 at 2 ranks
      break;
  }
  return o;
}

// The global batch of step `step`: bag sizes 0..6 (some empty), duplicates allowed; the same on every rank.
struct Batch {
  std::vector<std::vector<int64_t>> indices, offsets;
  std::vector<Bags> bags;
  Batch(const std::vector<TableSpec>& specs, int step) {
    std::mt19937_64 gen(1000 + static_cast<uint64_t>(step));
    for (const TableSpec& t : specs) {
      indices.emplace_back();
      offsets.push_back({0});
      for (int64_t s = 0; s < kBatch; ++s) {
        const int64_t n = static_cast<int64_t>(gen() % 7);
        for (int64_t k = 0; k < n; ++k)
          indices.back().push_back(static_cast<int64_t>(gen() % static_cast<uint64_t>(t.rows)));
        offsets.back().push_back(static_cast<int64_t>(indices.back().size()));
      }
    }
    for (std::size_t t = 0; t < specs.size(); ++t) bags.push_back({indices[t], offsets[t]});
  }
};

// A gradient for global sample s and column c spanning several magnitudes, so orders show in bits.
float grad_value(int step, int64_t s, int64_t c) {
  const double x = std::sin(static_cast<double>(s * 131 + c * 17 + step * 7 + 1));
  return static_cast<float>(x * std::pow(10.0, static_cast<double>((s + c) % 5) - 2.0));
}

Tensor grad_rows(int step, int64_t first, int64_t count, int64_t width) {
  Tensor g = empty({count, width}, {DType::f32});
  for (int64_t k = 0; k < count; ++k) {
    for (int64_t c = 0; c < width; ++c) g.data<float>()[k * width + c] = grad_value(step, first + k, c);
  }
  return g;
}

bool same_floats(const float* a, const float* b, int64_t n) {
  return std::memcmp(a, b, static_cast<std::size_t>(n) * 4) == 0;
}

// The run of two SGD steps: pooled embeddings of both steps for the samples [first, first + count).
struct TrainRun {
  std::vector<Tensor> pooled;
};

// `split`: forward and backward in their halves, each with another collective in between.
TrainRun train(ShardedEmbeddingBags& bags, int64_t first, int64_t count, bool split = false) {
  TrainRun run;
  for (int step = 0; step < 2; ++step) {
    const Batch batch(bags.plan().tables, step);
    const Tensor grad = grad_rows(step, first, count, bags.width());
    if (!split) {
      run.pooled.push_back(bags.forward(batch.bags));
      bags.backward(batch.bags, grad, 0.5f);
      continue;
    }
    const ShardedEmbeddingBags::PendingForward f = bags.start_forward(batch.bags);
    (void)comm().allgatherv(full({1}, static_cast<double>(step), {DType::i64}));
    run.pooled.push_back(bags.finish_forward(batch.bags, f));
    const ShardedEmbeddingBags::PendingBackward b = bags.start_backward(batch.bags, grad);
    (void)comm().allgatherv(full({1}, static_cast<double>(step), {DType::i64}));
    bags.finish_backward(batch.bags, b, 0.5f);
  }
  return run;
}

class ShardedBags : public ::testing::TestWithParam<Kind> {
 protected:
  memory::DramHeap heap_{std::size_t{16} << 20};
  memory::DramHeap reference_heap_{std::size_t{16} << 20};
};

TEST_P(ShardedBags, BitwiseEqualToOneRank) {
  const int me = comm().rank(), n = comm().size();
  const ShardPlan plan = plan_shards(tables(), options(GetParam(), n));
  const std::vector<int64_t> at = sample_split(kBatch, n);
  ShardedEmbeddingBags mine(plan, me, {&heap_, nullptr}, kSeed, &comm());
  ShardedEmbeddingBags one(plan_shards(tables(), options(GetParam(), 1)), 0, {&reference_heap_, nullptr}, kSeed,
                           nullptr);
  const TrainRun got = train(mine, at[me], at[me + 1] - at[me]);
  const TrainRun want = train(one, 0, kBatch);
  for (int step = 0; step < 2; ++step) {
    // This rank's slice, and the whole batch gathered from every rank.
    const Tensor all = comm().allgatherv(got.pooled[step]);
    ASSERT_EQ(all.size(0), kBatch);
    EXPECT_TRUE(same_floats(all.data<float>(), want.pooled[step].data<float>(), all.numel())) << "step " << step;
  }
  std::vector<float> a(16), b(16);
  for (int t = 0; t < static_cast<int>(plan.tables.size()); ++t) {
    for (int64_t r = mine.row_begin(t); r < mine.row_end(t); ++r) {
      mine.read_row(t, r, a.data());
      one.read_row(t, r, b.data());
      ASSERT_TRUE(same_floats(a.data(), b.data(), plan.tables[t].dim)) << "table " << t << " row " << r;
    }
  }
}

TEST_P(ShardedBags, HalvesEqualTheWholeCalls) {
  const int me = comm().rank(), n = comm().size();
  const ShardPlan plan = plan_shards(tables(), options(GetParam(), n));
  const std::vector<int64_t> at = sample_split(kBatch, n);
  ShardedEmbeddingBags whole(plan, me, {&heap_, nullptr}, kSeed, &comm());
  ShardedEmbeddingBags halves(plan, me, {&reference_heap_, nullptr}, kSeed, &comm());
  const TrainRun a = train(whole, at[me], at[me + 1] - at[me]);
  const TrainRun b = train(halves, at[me], at[me + 1] - at[me], true);
  for (int step = 0; step < 2; ++step)
    EXPECT_TRUE(same_floats(a.pooled[step].data<float>(), b.pooled[step].data<float>(), a.pooled[step].numel()));
  std::vector<float> x(16), y(16);
  for (int t = 0; t < static_cast<int>(plan.tables.size()); ++t) {
    for (int64_t r = whole.row_begin(t); r < whole.row_end(t); ++r) {
      whole.read_row(t, r, x.data());
      halves.read_row(t, r, y.data());
      ASSERT_TRUE(same_floats(x.data(), y.data(), plan.tables[t].dim)) << "table " << t << " row " << r;
    }
  }
}

TEST_P(ShardedBags, BytesEqualTheFormulas) {
  const int me = comm().rank(), n = comm().size();
  const ShardPlan plan = plan_shards(tables(), options(GetParam(), n));
  const std::vector<int64_t> at = sample_split(kBatch, n);
  ShardedEmbeddingBags mine(plan, me, {&heap_, nullptr}, kSeed, &comm());
  const Batch batch(plan.tables, 0);
  comm().reset_stats();
  const Tensor pooled = mine.forward(batch.bags);
  const dist::OpStats fwd = comm().stats()[dist::Op::alltoallv];
  const CollectiveVolume fv = forward_volume(plan, kBatch);
  EXPECT_EQ(fwd.bytes_sent, fv.sent[me]);
  EXPECT_EQ(fwd.bytes_received, fv.received[me]);
  EXPECT_EQ(fwd.calls, n > 1 ? 1 : 0);
  EXPECT_EQ(fwd.header_bytes_sent, n > 1 ? (n - 1) * (16 + 2 * n) * 8 : 0);  // shard_volume.h's header line
  comm().reset_stats();
  mine.backward(batch.bags, grad_rows(0, at[me], at[me + 1] - at[me], mine.width()), 0.1f);
  const dist::OpStats bwd = comm().stats()[dist::Op::alltoallv];
  const CollectiveVolume bv = backward_volume(plan, kBatch);
  EXPECT_EQ(bwd.bytes_sent, bv.sent[me]);
  EXPECT_EQ(bwd.bytes_received, bv.received[me]);
  if (n > 1 && GetParam() != Kind::data_parallel) {
    EXPECT_GT(fv.sent[me] + fv.received[me], 0);
  }
  if (n > 1) {
    EXPECT_GT(bv.sent[me], 0);
  }
  if (n > 1 && GetParam() == Kind::data_parallel) {
    EXPECT_EQ(fv.sent[me], 0);
  }
}

TEST_P(ShardedBags, PlanHasItsKind) {
  const int n = comm().size();
  const ShardPlan plan = plan_shards(tables(), options(GetParam(), n));
  auto count = [&](ShardKind k) {
    return std::count_if(plan.shards.begin(), plan.shards.end(), [&](const TableShard& s) { return s.kind == k; });
  };
  const auto tw = count(ShardKind::table_wise), rw = count(ShardKind::row_wise), dp = count(ShardKind::data_parallel);
  const auto all = static_cast<std::ptrdiff_t>(plan.tables.size());
  switch (GetParam()) {
    case Kind::table_wise: EXPECT_EQ(tw, all); break;
    case Kind::row_wise:
    case Kind::row_wise_coarse: EXPECT_EQ(n == 1 ? tw : rw, all); break;
    case Kind::data_parallel: EXPECT_EQ(dp, all); break;
    case Kind::mixed:  // at 2 and 4 ranks: t0 (and t1) row-wise, the rest table-wise, t4 and t5 replicated
      EXPECT_EQ(dp, 2);
      EXPECT_EQ(tw + rw, all - 2);
      if (n > 1) {
        EXPECT_GE(rw, 1);
      }
      if (n > 1) {
        EXPECT_GE(tw, 1);
      }
      break;
  }
}

INSTANTIATE_TEST_SUITE_P(Plans, ShardedBags,
                         ::testing::Values(Kind::table_wise, Kind::row_wise, Kind::row_wise_coarse, Kind::data_parallel,
                                           Kind::mixed),
                         [](const auto& info) {
                           std::string s = kind_name(info.param);
                           for (char& c : s) c = c == '-' ? '_' : c;
                           return s;
                         });

// The canonical order restated naively (Note [Rank-count-independent pooling]): block partials from
// +0.0f in bag order, all G blocks (zeros included) added in dist's tree; against the 1-rank class.
TEST(ShardedBagsCanonical, OneRankPoolingIsTheFullBlockTree) {
  memory::DramHeap heap(std::size_t{16} << 20);
  const ShardPlan plan = plan_shards(tables(), {.ranks = 1, .fast_budget_bytes = 1 << 20, .row_blocks = 5});
  ShardedEmbeddingBags one(plan, 0, {&heap, nullptr}, kSeed, nullptr);
  const Batch batch(plan.tables, 0);
  const Tensor pooled = one.forward(batch.bags);
  int64_t column = 0;
  for (std::size_t t = 0; t < plan.tables.size(); ++t) {
    const TableSpec& spec = plan.tables[t];
    for (int64_t s = 0; s < kBatch; ++s) {
      std::vector<Tensor> blocks;
      for (int64_t b = 0; b < plan.row_blocks; ++b) blocks.push_back(zeros({spec.dim}, {DType::f32}));
      for (int64_t p = batch.offsets[t][s]; p < batch.offsets[t][s + 1]; ++p) {
        const int64_t row = batch.indices[t][p];
        float* acc = blocks[block_of_row(spec.rows, plan.row_blocks, row)].data<float>();
        for (int64_t c = 0; c < spec.dim; ++c)
          acc[c] += initial_value(kSeed, static_cast<int64_t>(t), spec.rows, row, c);
      }
      const Tensor want = dist::tree_sum(blocks);
      EXPECT_TRUE(same_floats(pooled.data<float>() + s * one.width() + column, want.data<float>(), spec.dim))
          << "table " << t << " sample " << s;
    }
    column += spec.dim;
  }
}

// The dense allreduce of the trainer's MLP gradients: bytes per rank equal allreduce_volume, and with one
// contribution per rank and N dividing P they are REFERENCE.md §5's ring volume 2(N-1)/N·P·s.
TEST(ShardedBagsVolume, DenseAllreduceBytesEqualTheFormula) {
  const int me = comm().rank(), n = comm().size();
  for (int64_t numel : {int64_t{4096}, int64_t{1001}}) {
    for (int per_rank_extra : {0, 1}) {
      std::vector<int64_t> counts;
      for (int r = 0; r < n; ++r) counts.push_back(1 + (per_rank_extra != 0 ? r % 3 : 0));
      std::vector<Tensor> mine;
      for (int64_t k = 0; k < counts[me]; ++k) mine.push_back(full({numel}, 0.5, {DType::f32}));
      comm().reset_stats();
      comm().allreduce(mine);
      const dist::OpStats st = comm().stats()[dist::Op::allreduce];
      const CollectiveVolume v = allreduce_volume(numel, 4, counts);
      EXPECT_EQ(st.bytes_sent, v.sent[me]) << numel << " " << per_rank_extra;
      EXPECT_EQ(st.bytes_received, v.received[me]) << numel << " " << per_rank_extra;
      if (numel % n == 0 && per_rank_extra == 0) {
        EXPECT_EQ(v.sent[me], 2 * (n - 1) * numel / n * 4);
      }
    }
  }
}

TEST(ShardedBagsVolume, SampleSplitGivesTheFirstRanksOneMore) {
  EXPECT_EQ(sample_split(11, 4), (std::vector<int64_t>{0, 3, 6, 9, 11}));
  EXPECT_EQ(sample_split(4, 4), (std::vector<int64_t>{0, 1, 2, 3, 4}));
  EXPECT_ERROR_HAS(sample_split(3, 4), "global batch of 3 samples cannot give each of 4 ranks a sample");
  EXPECT_ERROR_HAS(allreduce_volume(10, 4, {0, 0}), "no contributions");
}

TEST(ShardedBagsVolume, TableWiseForwardIsTheReferenceAlltoallVolume) {
  // §5: table-wise alltoall sends (N-1)/N^2 · B·T·d·s per rank when each rank owns T/N tables and N | B.
  const std::vector<TableSpec> four{{"a", 100, 8, 4}, {"b", 100, 8, 4}, {"c", 100, 8, 4}, {"d", 100, 8, 4}};
  const ShardPlan plan = plan_shards(four, {.ranks = 4, .fast_budget_bytes = 1 << 20});
  const CollectiveVolume v = forward_volume(plan, 64);
  for (int r = 0; r < 4; ++r) EXPECT_EQ(v.sent[r], 3 * 64 * 4 * 8 * 4 / 16);
}

TEST(ShardedBagsBadInput, NamedBeforeAnyCommunication) {
  const int me = comm().rank(), n = comm().size();
  memory::DramHeap heap(std::size_t{16} << 20);
  const ShardPlan plan = plan_shards(tables(), options(Kind::mixed, n));
  ShardedEmbeddingBags mine(plan, me, {&heap, nullptr}, kSeed, &comm());
  Batch batch(plan.tables, 0);
  std::vector<Bags> few(batch.bags.begin(), batch.bags.begin() + 2);
  EXPECT_ERROR_HAS(mine.forward(few), "2 tables of bags for 8 tables");
  Batch bad = batch;
  bad.indices[3][0] = 400;  // t3 has 400 rows
  bad.bags[3] = {bad.indices[3], bad.offsets[3]};
  EXPECT_ERROR_HAS(mine.forward(bad.bags), "t3");
  std::vector<int64_t> short_offsets{0};  // a batch of 0 samples
  std::vector<Bags> empty_batch(8, Bags{{}, short_offsets});
  EXPECT_ERROR_HAS(mine.forward(empty_batch), "cannot give each of");
  EXPECT_ERROR_HAS(mine.backward(batch.bags, zeros({1, 3}, {DType::f32}), 0.1f), "expects an f32 gradient");
  EXPECT_ERROR_HAS(mine.backward(batch.bags, zeros({1, 3}, {DType::f64}), 0.1f), "expects an f32 gradient");
  const std::vector<int64_t> at = sample_split(kBatch, n);
  const Tensor grad = zeros({at[me + 1] - at[me], mine.width()}, {DType::f32});
  EXPECT_ERROR_HAS(mine.backward(batch.bags, grad, -0.1f), "negative learning rate");
  std::vector<float> weights(batch.indices[2].size(), 1.0f);
  std::vector<Bags> weighted = batch.bags;
  weighted[2].weights = weights;
  EXPECT_ERROR_HAS(mine.forward(weighted), "table 2 't2' has per-sample weights");
  const std::vector<int64_t> too_many(static_cast<std::size_t>(n) + 2, 0);
  EXPECT_ERROR_HAS(mine.forward(batch.bags, too_many), std::to_string(n + 2) + " boundaries for " + std::to_string(n));
  EXPECT_ERROR_HAS(mine.backward(batch.bags, grad, 0.1f, too_many), "boundaries for");
  EXPECT_ERROR_HAS(mine.finish_forward(batch.bags, {}), "no forward was started");
  EXPECT_ERROR_HAS(mine.finish_backward(batch.bags, {}, 0.1f), "no backward was started");
  EXPECT_ERROR_HAS(ShardedEmbeddingBags(plan, n, {&heap, nullptr}, kSeed, &comm()), "outside the plan");
  EXPECT_ERROR_HAS(
      ShardedEmbeddingBags(plan_shards(tables(), options(Kind::mixed, n + 1)), me, {&heap, nullptr}, kSeed, &comm()),
      "but the communicator has");
  if (n > 1) {
    EXPECT_ERROR_HAS(ShardedEmbeddingBags(plan, me, {&heap, nullptr}, kSeed, nullptr), "needs a communicator");
  }
  EXPECT_ERROR_HAS(ShardedEmbeddingBags(plan_shards({{"half", 10, 4, 2}}, {.ranks = 1, .fast_budget_bytes = 1024}), 0,
                                        {&heap, nullptr}, kSeed, nullptr),
                   "'half' has 2-byte elements");
  // The communicator still works after the refused calls (nothing was sent).
  EXPECT_EQ(mine.forward(batch.bags).size(0), sample_split(kBatch, n)[me + 1] - sample_split(kBatch, n)[me]);
}

}  // namespace
}  // namespace strata::emb
