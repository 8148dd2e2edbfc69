#pragma once
/// @file
/// Exact communication volumes of the sharded embedding exchange (embeddings/dist/sharded_bags.h) and
/// of the deterministic dense allreduce, per rank: the payload bytes strata::dist counts in OpStats
/// (bytes_sent, bytes_received; rows a rank keeps are not counted, nor the headers of Note
/// [Collective headers], (N - 1)(16 + 2N)·8 bytes sent per call and rank).
///
/// With N ranks, the global batch B split into contiguous sample slices in rank order (B_r samples on
/// rank r: sample_split's, or the caller's boundaries, e.g. DistributedDLRM's chunk-aligned ones), d_t the dim of
/// table t, 4 bytes per f32 element, G = plan.row_blocks and c(r, t) = |tree_cover(G, blocks of t on
/// rank r)| (1 for a table-wise owner, 0 where r holds none of t):
/// - forward alltoallv (pooled embeddings, or their row-block partial sums, to the sample owners):
///     sent(r)     = Σ_{j≠r} B_j · Σ_{t not data-parallel} c(r, t) · d_t · 4
///     received(r) = B_r · Σ_{i≠r} Σ_{t not data-parallel} c(i, t) · d_t · 4
/// - backward alltoallv (the sample owner's pooled gradients to every rank holding rows of t,
///   data-parallel tables included):
///     sent(r)     = B_r · Σ_{i≠r} Σ_{t held by i} d_t · 4
///     received(r) = Σ_{j≠r} B_j · Σ_{t held by r} d_t · 4
/// - allreduce(contributions) of P elements of s bytes, k_r contributions on rank r (K = Σ k_r),
///   chunks P_r of dist's even split of P: reduce-scatter then allgather,
///     sent(r)     = |tree_cover(K, rank r's)| · Σ_{j≠r} P_j · s + (N - 1) · P_r · s
///     received(r) = Σ_{i≠r} |tree_cover(K, rank i's)| · P_r · s + Σ_{j≠r} P_j · s
///   which is REFERENCE.md §5's ring volume 2(N - 1)/N · P · s when k_r = 1 and N divides P.

#include <cstdint>
#include <span>
#include <vector>

#include "embeddings/dist/shard_plan.h"

namespace strata::emb {

/// Bytes one collective moves, per rank (index = rank).
struct CollectiveVolume {
  std::vector<int64_t> sent;
  std::vector<int64_t> received;
};

/// The samples of each rank for a global batch of `batch`: contiguous slices, the first ranks one
/// sample more; returns ranks + 1 boundaries. Throws strata::Error when batch < ranks or ranks < 1.
std::vector<int64_t> sample_split(int64_t batch, int ranks);

/// The sample slices of a global batch of `batch`: `boundaries` when given (ranks + 1 entries, the
/// first 0, the last `batch`, each rank at least one sample: a caller's contiguous slices in rank
/// order), else sample_split(batch, ranks). Throws strata::Error naming the bad boundary.
std::vector<int64_t> sample_slices(int64_t batch, int ranks, std::span<const int64_t> boundaries);

/// Row-block tree nodes rank `rank` sends per sample of table `table` in the forward exchange:
/// c(rank, table) of the formulas above (0 for data-parallel tables).
int64_t forward_nodes(const ShardPlan& plan, int rank, int table);

/// The forward pooled-embedding alltoallv of ShardedEmbeddingBags::forward for a global batch
/// (split by sample_split, or at `boundaries` as sample_slices checks them).
CollectiveVolume forward_volume(const ShardPlan& plan, int64_t batch, std::span<const int64_t> boundaries = {});
/// The backward alltoallv of ShardedEmbeddingBags::backward.
CollectiveVolume backward_volume(const ShardPlan& plan, int64_t batch, std::span<const int64_t> boundaries = {});
/// The layout of Communicator::allreduce(contributions): per rank r, its tree nodes |tree_cover(K,
/// rank r's)| and its element chunk (dist's even split of `numel`); K = Σ contributions. Throws
/// strata::Error, prefixed with `who`, for no ranks, numel < 0, elem_bytes < 1, a negative count or
/// no contribution in all.
struct AllreduceLayout {
  std::vector<int64_t> nodes;
  std::vector<int64_t> chunk;
};
AllreduceLayout allreduce_layout(const char* who, int64_t numel, int64_t elem_bytes,
                                 const std::vector<int64_t>& contributions_per_rank);
/// Communicator::allreduce(contributions) of `numel` elements of `elem_bytes` bytes with
/// contributions_per_rank[r] contributions on rank r (at least one in all).
CollectiveVolume allreduce_volume(int64_t numel, int64_t elem_bytes,
                                  const std::vector<int64_t>& contributions_per_rank);

}  // namespace strata::emb
