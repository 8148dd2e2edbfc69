// Each rank's shards in its own slow tier (Note [Shard storage] in embeddings/dist/sharded_bags.h), at
// whatever rank count the suite runs (ctest: 1, 2 and 4, one thread per rank): DistributedDLRM with its
// shards in DRAM, in the slow tier (simple), or behind a DRAM cache (static, dynamic, auto) trains to
// the losses, MLP parameters, table rows and scores of the one-process all-DRAM reference bit for bit
// (so every placement at every rank count equals every other), for SGD and row-wise Adagrad; the
// caches really served lookups; a placement that cannot work is named on every rank.
#include <gtest/gtest.h>

#include <unistd.h>
#include <cstring>
#include <filesystem>
#include <string>

#include "embeddings/dist/dist_dlrm.h"
#include "memory/heap.h"
#include "tests/cpp/bitwise.h"
#include "tests/cpp/emb_dist/dlrm_reference.h"
#include "tests/cpp/error_text.h"

namespace strata::emb {
namespace {

namespace fs = std::filesystem;
using testing_util::same_bits;

using namespace dlrm_test;  // the suite's model, batches and reference (dlrm_reference.h)
using dlrm_test::Batch;     // not emb::Batch

enum class Where { dram, slow, static_cache, dynamic_cache, auto_cache };

const char* where_name(Where w) {
  switch (w) {
    case Where::dram: return "dram";
    case Where::slow: return "slow";
    case Where::static_cache: return "static_cache";
    case Where::dynamic_cache: return "dynamic_cache";
    case Where::auto_cache: return "auto_cache";
  }
  return "";
}

struct TierCase {
  Where where;
  OptimizerKind optimizer;
};

// This rank's placement: budgets from the bytes of its shards (`rows`), so that auto must cache.
ShardPlacementOptions placement_of(Where w, std::size_t rows) {
  switch (w) {
    case Where::dram: return {};
    case Where::slow: return {.policy = EmbeddingPolicy::Simple, .fast_budget = rows};
    case Where::static_cache:
      return {.policy = EmbeddingPolicy::Static, .fast_budget = 2 * rows, .cache_fraction = 0.25};
    case Where::dynamic_cache:
      return {.policy = EmbeddingPolicy::Dynamic, .fast_budget = 2 * rows, .cache_fraction = 0.25};
    case Where::auto_cache: return {.policy = EmbeddingPolicy::Auto, .fast_budget = rows - 1};
  }
  return {};
}

// A slow tier of this rank's own (a file-backed heap in a directory of its own).
struct RankSlowTier {
  fs::path dir = fs::path(::testing::TempDir()) /
                 ("strata_shard_tier_" + std::to_string(::getpid()) + "/rank-" + std::to_string(comm().rank()));
  std::unique_ptr<memory::PmHeap> heap;
  RankSlowTier() {
    fs::create_directories(dir);
    heap = std::make_unique<memory::PmHeap>(memory::PmHeapOptions{
        .capacity = std::size_t{8} << 20, .dir = dir.string(), .backend = memory::PmBackend::Mmap});
  }
  ~RankSlowTier() {
    heap.reset();
    std::error_code ec;
    fs::remove_all(dir.parent_path(), ec);
  }
};

class ShardTier : public ::testing::TestWithParam<TierCase> {
 protected:
  memory::DramHeap fast_{std::size_t{4} << 20};
  memory::DramHeap reference_heap_{std::size_t{4} << 20};
  RankSlowTier slow_;
};

TEST_P(ShardTier, BitwiseEqualToTheAllDramReference) {
  const int n = comm().size(), me = comm().rank();
  const Where where = GetParam().where;
  // Row-wise: every rank holds rows of every table (enough rows per table for auto's pointer tables).
  const ShardPlan p = plan(where == Where::auto_cache ? Kind::row_wise : Kind::mixed, n);
  const std::size_t rows = place_rank_shards(p, me, {}).table_bytes;
  const ShardStorage storage({&fast_, nullptr}, {slow_.heap.get(), nullptr}, placement_of(where, rows));
  DistributedDLRM model(config(GetParam().optimizer), p, storage, comm());
  const TablePlacement& placed = model.tables().placement();
  EXPECT_EQ(placed.uses_slow(), where != Where::dram) << placed.describe();
  EXPECT_EQ(slow_.heap->used() > 0, where != Where::dram);
  Reference ref(reference_heap_, GetParam().optimizer);
  for (int s = 0; s < 3; ++s) {
    const Batch b(37, s);
    const float got = model.train_step(b.dense, b.bags, b.targets);
    const float want = ref.step(b);
    EXPECT_EQ(std::memcmp(&got, &want, 4), 0) << "loss of step " << s << ": " << got << " vs " << want;
  }
  const std::vector<Tensor> mine = model.dense_module().parameters(), theirs = ref.mlp().parameters();
  ASSERT_EQ(mine.size(), theirs.size());
  for (std::size_t i = 0; i < mine.size(); ++i) EXPECT_TRUE(same_bits(mine[i], theirs[i])) << "MLP parameter " << i;
  std::vector<float> a(4), w(4);
  uint64_t lookups = 0;
  for (int t = 0; t < static_cast<int>(tables().size()); ++t) {
    for (int64_t r = model.tables().row_begin(t); r < model.tables().row_end(t); ++r) {
      model.tables().read_row(t, r, a.data());
      ref.embeddings().read_row(t, r, w.data());
      ASSERT_TRUE(testing_util::bitwise_equal(a, w)) << "table " << t << " row " << r;
    }
    if (const ManagedTable* m = model.tables().managed_shard(t)) {
      if (m->cached_table() != nullptr) lookups += m->stats().cache.hits + m->stats().cache.misses;
    }
  }
  // The cached placements served the lookups through their caches.
  const bool cached = where == Where::static_cache || where == Where::dynamic_cache || where == Where::auto_cache;
  EXPECT_EQ(lookups > 0, cached) << lookups << " lookups through caches";
  const Batch test(37, 99);
  EXPECT_TRUE(same_bits(model.score(test.dense, test.bags), ref.score(test)));
}

std::vector<TierCase> tier_cases() {
  std::vector<TierCase> out;
  for (OptimizerKind o : {OptimizerKind::SGD, OptimizerKind::RowWiseAdagrad}) {
    for (Where w : {Where::dram, Where::slow, Where::static_cache, Where::dynamic_cache, Where::auto_cache})
      out.push_back({w, o});
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(PlacementsAndOptimizers, ShardTier, ::testing::ValuesIn(tier_cases()), [](const auto& info) {
  return std::string(where_name(info.param.where)) + "_" + to_string(info.param.optimizer);
});

TEST(ShardTierBadInput, NamedOnEveryRank) {
  const int n = comm().size(), me = comm().rank();
  memory::DramHeap fast(std::size_t{4} << 20);
  const ShardPlan p = plan(Kind::mixed, n);
  const std::size_t rows = place_rank_shards(p, me, {}).table_bytes;
  // No slow tier where the placement needs one: simple, and auto over the budget.
  EXPECT_ERROR_HAS(
      DistributedDLRM(config(), p, ShardStorage({&fast, nullptr}, {}, {.policy = EmbeddingPolicy::Simple}), comm()),
      "shards need a slow tier (--emb-policy simple places them there) but none was given (--slow-dir)");
  EXPECT_ERROR_HAS(DistributedDLRM(config(), p, ShardStorage({&fast, nullptr}, {}, {.fast_budget = rows - 1}), comm()),
                   "exceed the fast budget of");
  // Only rank 0 lacks it: the others name rank 0.
  RankSlowTier slow;
  const TableMemory mine = me == 0 ? TableMemory{} : TableMemory{slow.heap.get(), nullptr};
  const std::string expected = n > 1 ? "ShardedEmbeddingBags: placing the shards failed on rank 0: rank 0's shards need"
                                     : "rank 0's shards need a slow tier";
  EXPECT_ERROR_HAS(
      DistributedDLRM(config(), p, ShardStorage({&fast, nullptr}, mine, {.policy = EmbeddingPolicy::Dynamic}), comm()),
      expected);
  // A cache fraction whose pages do not fit the budget.
  const TableMemory slow_memory{slow.heap.get(), nullptr};
  EXPECT_ERROR_HAS(
      DistributedDLRM(config(), p,
                      ShardStorage({&fast, nullptr}, slow_memory,
                                   {.policy = EmbeddingPolicy::Static, .fast_budget = rows, .cache_fraction = 0.9}),
                      comm()),
      "'s shards (");
  EXPECT_ERROR_HAS(
      place_rank_shards(p, me, {.policy = EmbeddingPolicy::Static, .fast_budget = rows, .cache_fraction = 0.9}),
      "--cache-fraction 0.9: the caches would need");
  EXPECT_ERROR_HAS(place_rank_shards(p, me, {.policy = EmbeddingPolicy::Dynamic, .fast_budget = 1000}),
                   "rank " + std::to_string(me) + "'s shards (");
  // The communicator still works after the refused constructions.
  const Tensor all = comm().allgatherv(full({1}, static_cast<double>(me), {DType::i64}));
  EXPECT_EQ(all.size(0), n);
}

}  // namespace
}  // namespace strata::emb
