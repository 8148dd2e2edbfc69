#include "embeddings/dist/shard_volume.h"

#include "core/error.h"
#include "dist/reduction.h"

namespace strata::emb {

namespace {
constexpr int64_t kF32 = 4;

std::vector<int64_t> zeros(int ranks) { return std::vector<int64_t>(static_cast<std::size_t>(ranks), 0); }
}  // namespace

std::vector<int64_t> sample_split(int64_t batch, int ranks) {
  STRATA_CHECK(ranks >= 1, "sample_split: ranks = ", ranks, " (at least 1)");
  STRATA_CHECK(batch >= ranks, "sample_split: a global batch of ", batch, " samples cannot give each of ", ranks,
               " ranks a sample (the batch must be at least the rank count)");
  std::vector<int64_t> at(static_cast<std::size_t>(ranks) + 1, 0);
  for (int r = 0; r < ranks; ++r) at[r + 1] = at[r] + batch / ranks + (r < batch % ranks ? 1 : 0);
  return at;
}

std::vector<int64_t> sample_slices(int64_t batch, int ranks, std::span<const int64_t> boundaries) {
  if (boundaries.empty()) return sample_split(batch, ranks);
  STRATA_CHECK(static_cast<int64_t>(boundaries.size()) == int64_t{ranks} + 1, "sample slices: ", boundaries.size(),
               " boundaries for ", ranks, " ranks (expected ranks + 1 = ", ranks + 1, ")");
  STRATA_CHECK(boundaries.front() == 0 && boundaries.back() == batch, "sample slices: the boundaries run from ",
               boundaries.front(), " to ", boundaries.back(), " but must run from 0 to the global batch of ", batch);
  for (int r = 0; r < ranks; ++r) {
    STRATA_CHECK(boundaries[r + 1] > boundaries[r], "sample slices: rank ", r, "'s slice [", boundaries[r], ", ",
                 boundaries[r + 1], ") is empty or reversed (each rank needs at least one sample)");
  }
  return {boundaries.begin(), boundaries.end()};
}

int64_t forward_nodes(const ShardPlan& plan, int rank, int table) {
  if (plan.shards[static_cast<std::size_t>(table)].kind == ShardKind::data_parallel) return 0;
  return static_cast<int64_t>(
      dist::tree_cover(plan.row_blocks, plan.block_begin(rank, table), plan.block_end(rank, table)).size());
}

CollectiveVolume forward_volume(const ShardPlan& plan, int64_t batch, std::span<const int64_t> boundaries) {
  const std::vector<int64_t> at = sample_slices(batch, plan.ranks, boundaries);
  CollectiveVolume v{zeros(plan.ranks), zeros(plan.ranks)};
  for (int r = 0; r < plan.ranks; ++r) {
    for (int j = 0; j < plan.ranks; ++j) {
      if (j == r) continue;
      int64_t per_sample = 0;  // floats rank r sends rank j per sample of j's slice
      for (std::size_t t = 0; t < plan.tables.size(); ++t) {
        per_sample += forward_nodes(plan, r, static_cast<int>(t)) * plan.tables[t].dim;
      }
      const int64_t bytes = (at[j + 1] - at[j]) * per_sample * kF32;
      v.sent[r] += bytes;
      v.received[j] += bytes;
    }
  }
  return v;
}

CollectiveVolume backward_volume(const ShardPlan& plan, int64_t batch, std::span<const int64_t> boundaries) {
  const std::vector<int64_t> at = sample_slices(batch, plan.ranks, boundaries);
  CollectiveVolume v{zeros(plan.ranks), zeros(plan.ranks)};
  for (int j = 0; j < plan.ranks; ++j) {    // the sample owner
    for (int i = 0; i < plan.ranks; ++i) {  // a rank holding rows
      if (i == j) continue;
      int64_t per_sample = 0;
      for (std::size_t t = 0; t < plan.tables.size(); ++t) {
        if (plan.holds(i, static_cast<int>(t))) per_sample += plan.tables[t].dim;
      }
      const int64_t bytes = (at[j + 1] - at[j]) * per_sample * kF32;
      v.sent[j] += bytes;
      v.received[i] += bytes;
    }
  }
  return v;
}

AllreduceLayout allreduce_layout(const char* who, int64_t numel, int64_t elem_bytes,
                                 const std::vector<int64_t>& contributions_per_rank) {
  const int n = static_cast<int>(contributions_per_rank.size());
  STRATA_CHECK(n >= 1, who, ": no ranks");
  STRATA_CHECK(numel >= 0 && elem_bytes >= 1, who, ": ", numel, " elements of ", elem_bytes, " bytes");
  std::vector<int64_t> first(static_cast<std::size_t>(n) + 1, 0);
  AllreduceLayout l{zeros(n), zeros(n)};
  for (int r = 0; r < n; ++r) {
    STRATA_CHECK(contributions_per_rank[r] >= 0, who, ": rank ", r, " has ", contributions_per_rank[r],
                 " contributions");
    first[r + 1] = first[r] + contributions_per_rank[r];
    l.chunk[r] = numel / n + (r < numel % n ? 1 : 0);  // dist's even split of the elements
  }
  STRATA_CHECK(first[n] >= 1, who, ": no contributions (the job must pass at least one)");
  for (int r = 0; r < n; ++r) {
    l.nodes[r] = static_cast<int64_t>(dist::tree_cover(first[n], first[r], first[r + 1]).size());
  }
  return l;
}

CollectiveVolume allreduce_volume(int64_t numel, int64_t elem_bytes,
                                  const std::vector<int64_t>& contributions_per_rank) {
  const AllreduceLayout l = allreduce_layout("allreduce_volume", numel, elem_bytes, contributions_per_rank);
  const int n = static_cast<int>(contributions_per_rank.size());
  CollectiveVolume v{zeros(n), zeros(n)};
  for (int r = 0; r < n; ++r) {
    for (int j = 0; j < n; ++j) {
      if (j == r) continue;
      v.sent[r] += (l.nodes[r] * l.chunk[j] + l.chunk[r]) * elem_bytes;  // reduce-scatter nodes, then the allgather
      v.received[j] += l.nodes[r] * l.chunk[j] * elem_bytes;
      v.received[r] += l.chunk[j] * elem_bytes;
    }
  }
  return v;
}

}  // namespace strata::emb
