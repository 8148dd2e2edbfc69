#pragma once
/// @file
/// ShardedEmbeddingBags: the embedding tables of hybrid-parallel DLRM sharded by a ShardPlan over
/// the ranks of a strata::dist::Communicator (issue 28 item 2). Every rank passes the same global
/// batch; rank r computes the pooled embeddings of its sample slice (contiguous slices in rank order:
/// sample_split's, the first ranks one sample more, or the caller's boundaries, as DistributedDLRM
/// passes its chunk-aligned ones) and, given their gradients, updates the rows it holds (SGD, row-wise
/// or element-wise Adagrad). Which rank owns a sample changes who computes what, never the order of
/// a sum (the Note below).
///
/// Note [Rank-count-independent pooling]
/// The pooled embeddings and the tables after an update are bitwise the same at any rank count and
/// for any plan, because the order of every floating-point sum is fixed by the global batch alone:
/// - Row blocks. Every table is cut into G = plan.row_blocks fixed blocks of rows (block_first_row:
///   the rows split evenly, the first blocks one row more); G does not depend on the rank count and
///   row-wise shards are whole blocks.
/// - Pooling. Bag (sample s, table t) is pooled as: for each block b, the partial sum p_b of the
///   bag's rows that fall in b, in bag order, starting at +0.0f (Note [Embedding summation order]'s
///   lookup rule restricted to b); then the p_b are added in dist's fixed binary tree over the G
///   blocks (tree_split, Note [Deterministic reduction order]), a subtree whose blocks the bag does
///   not touch counting as +0.0f. A rank holding blocks [a, b) computes the maximal subtrees inside
///   [a, b) (tree_cover) and sends those; the sample owner finishes the tree with the nodes of every
///   holder. A whole table (table-wise, data-parallel, or one rank) is the root's single node. So
///   each node is computed by the same additions wherever it is computed, and the tree is the same.
///   Adding +0.0f changes nothing: partial sums start at +0.0f and so are never -0.0f, x + (+0.0f)
///   = x for every other x (NaN stays NaN), so skipping an untouched subtree equals adding its zeros.
/// - Gradients. The sample owner sends each sample's pooled gradient to every rank holding rows of
///   the table (the owner; each row-wise holder; every rank for data-parallel tables). Each holder
///   then has the whole batch's gradients in global sample order and applies the update kernel's
///   rule (Note [Embedding summation order]: a row's gradient is the sum of its occurrences in
///   (sample, position) order from +0.0f, then w = fma(-lr, g, w) for SGD, or the Adagrads' step
///   from that gradient and the row's own accumulators) to the rows it holds, with the batch's bags
///   restricted to those rows — the same occurrences in the same order at any rank count, and
///   each row's optimizer state lives with the row. Data-parallel replicas (and their states) thus
///   stay identical without an allreduce.
/// - Initialization is by global (table, row, column) from the seed (Philox), never by rank.
/// Cost (shard_volume.h has the exact bytes): a row-wise table sends |tree_cover| ≥ 1 nodes per
/// holder and sample instead of the one partial sum of a reduce-scatter of pooled partial sums —
/// with G a multiple of N (powers of two) exactly one, the same bytes as (N−1)/N·B·d·s per table;
/// with other N up to log2(G) nodes. Its backward sends each sample's gradient to every holder
/// (about (N−1)/N·B·d·s per table and rank), as the reverse of a reduce-scatter (an allgather of the
/// pooled gradients) does.
/// A data-parallel table sends its gradients to every rank ((N−1)·B_r·d·s per rank, the allgather
/// of the pooled gradients) instead of allreducing a rows × d gradient (2(N−1)/N·rows·d·s): cheaper
/// when B < 2·rows, and exact at any rank count, which an allreduce of per-rank gradients is not.
///
/// Note [Shard storage]
/// A rank places the shards it holds as the one-process DLRM places its tables (Note [DLRM table
/// placement] in embeddings/dlrm.h; plan_table_placement and place_table in embeddings/placement.h),
/// with the rank's own fast budget, slow tier and policy (ShardStorage): a shard is a Table of its
/// rows — a SimpleTable in DRAM, a SimpleTable in the slow tier (simple), or a CachedTable whose
/// base rows are in the slow tier behind a per-row DRAM cache (static, dynamic, auto), its policy
/// hooks run around the kernels (before_lookup with the global batch's indices of the shard's rows
/// at start_forward; after_update after the update, or at the next start_forward when no backward
/// came). The pooling reads rows through rowpointer(·, Forward) and charges direct slow-tier reads
/// to the table (Note [Slow-tier charging of row accesses]); the update is the same kernel on any
/// Table. Placement changes where a row's bits are, never what they are or the order of any sum:
/// a cache stores rows, so Note [Rank-count-independent pooling] holds for every placement.
/// Optimizer state (the Adagrads' accumulators) lives beside the rows in ordinary process memory
/// (SparseOptimizerState), wherever the rows are, as the one-process DLRM's; it is not part of the
/// fast budget, which counts embedding rows and caches.

#include <cstdint>
#include <limits>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "dist/communicator.h"
#include "embeddings/dist/shard_plan.h"
#include "embeddings/kernels.h"
#include "embeddings/placement.h"

namespace strata::emb {

/// The initial value of element `col` of row `row` of table `table`: U(−sqrt(1/rows), +sqrt(1/rows))
/// (the reference's range) from Philox keyed by `seed` and countered by (row, table, col / 4); the
/// same on every rank and at every rank count.
float initial_value(uint64_t seed, int64_t table, int64_t rows, int64_t row, int64_t col);

/// How a rank places the shards it holds (Note [Shard storage]).
struct ShardPlacementOptions {
  /// Note [DLRM table placement]'s policies (auto: all in DRAM when they fit the budget, else cached).
  EmbeddingPolicy policy = EmbeddingPolicy::Auto;
  /// Bytes of DRAM for the rank's embedding rows and caches (the default: unlimited, all in DRAM).
  std::size_t fast_budget = std::numeric_limits<std::size_t>::max();
  /// The cached shards' fraction of rows cached; <= 0: the largest that fits the budget.
  double cache_fraction = -1;
};

/// Where rank `rank`'s shards of `plan` go under `options` (plan_table_placement over the shards it
/// holds; the same on every rank, so any rank can describe any other's). Throws strata::Error
/// naming --fast-budget or --cache-fraction as plan_table_placement does, prefixed with the rank.
TablePlacement place_rank_shards(const ShardPlan& plan, int rank, const ShardPlacementOptions& options);

/// A rank's memory for its shards (Note [Shard storage]).
struct ShardStorage {
  ShardStorage() = default;
  ShardStorage(TableMemory fast_memory, TableMemory slow_memory = {}, ShardPlacementOptions options = {})
      : fast(fast_memory), slow(slow_memory), placement(options) {}
  /// DRAM: whole shards, caches, pointer tables.
  TableMemory fast;
  /// The rank's slow tier and its throttle; a null heap: none (then every shard must fit DRAM).
  TableMemory slow;
  ShardPlacementOptions placement;
};

class ShardedEmbeddingBags {
 public:
  /// The shards of `plan` that `rank` holds, placed in `storage` (Note [Shard storage]) and
  /// initialized by initial_value(seed, ...); otherwise as the constructor below. Collective when
  /// comm is given and the plan has more than one rank: a rank that cannot place its shards (a
  /// heap without room, a slow tier missing when the placement needs one, a cache fraction that
  /// does not fit) makes every rank throw strata::Error naming it.
  ShardedEmbeddingBags(ShardPlan plan, int rank, const ShardStorage& storage, uint64_t seed, dist::Communicator* comm,
                       SparseOptimizer::Kind optimizer = SparseOptimizer::Kind::SGD);
  /// The shards of `plan` that `rank` holds, allocated from `memory` (f32 rows) and initialized by
  /// initial_value(seed, ...). `comm` must have plan.ranks ranks with this process as `rank`; it
  /// may be null when plan.ranks == 1. backward() steps the rows with `optimizer` (SGD, row-wise
  /// or element-wise Adagrad, eps 1e-10, accumulators from 0: their state lives beside the held
  /// rows). Throws strata::Error for a plan of another rank count, a rank outside the plan, a table
  /// with elem_bytes != 4, or a heap without room.
  ShardedEmbeddingBags(ShardPlan plan, int rank, TableMemory memory, uint64_t seed, dist::Communicator* comm,
                       SparseOptimizer::Kind optimizer = SparseOptimizer::Kind::SGD)
      : ShardedEmbeddingBags(std::move(plan), rank, ShardStorage(memory), seed, comm, optimizer) {}
  ~ShardedEmbeddingBags();
  ShardedEmbeddingBags(const ShardedEmbeddingBags&) = delete;
  ShardedEmbeddingBags& operator=(const ShardedEmbeddingBags&) = delete;

  const ShardPlan& plan() const { return plan_; }
  SparseOptimizer::Kind optimizer() const { return optimizer_.kind; }
  int rank() const { return rank_; }
  /// Where this rank's shards live (Note [Shard storage]).
  const TablePlacement& placement() const { return placement_; }
  /// The policy of table t's shard (null when it is in DRAM, or not held here): its cache counters.
  const ManagedTable* managed_shard(int table) const;
  /// Sum of the tables' dims: the width of forward()'s output.
  int64_t width() const { return width_; }

  /// The pooled (Sum) embeddings of this rank's sample slice of the global batch: [B_rank, width()]
  /// f32, table t in columns [Σ_{u<t} d_u, +d_t). `bags[t]` are table t's bags for the whole global
  /// batch (every rank passes the same), without per-sample weights. The slices are sample_split's,
  /// or `boundaries` (ranks + 1 entries as sample_slices checks them; every rank passes the same).
  /// Collective: every rank must call it. Throws strata::Error (before any communication) for a
  /// wrong number of tables, tables with different batch sizes, a batch smaller than the rank
  /// count, bad boundaries, weights, or bad indices or offsets (validate(), naming the table).
  Tensor forward(std::span<const Bags> bags, std::span<const int64_t> boundaries = {});

  /// forward() in two halves, so that the caller computes while the pooled rows travel:
  /// start_forward checks the bags (throwing as forward() does), computes the nodes this rank sends
  /// and starts the non-blocking alltoallv; finish_forward waits for it and finishes the pooling.
  /// The `bags` of both calls must be the same, unchanged in between. Collective, in this order on
  /// every rank (other collectives may be issued in between).
  struct PendingForward {
    std::vector<int64_t> at;  // the sample slices (ranks + 1 boundaries)
    Tensor payload;           // what this rank sends (alive while the exchange runs)
    dist::Work work;          // the alltoallv; undefined at one rank
  };
  PendingForward start_forward(std::span<const Bags> bags, std::span<const int64_t> boundaries = {});
  Tensor finish_forward(std::span<const Bags> bags, const PendingForward& pending) const;

  /// Backward and optimizer step: `grad` [B_rank, width()] f32 is the gradient of this rank's
  /// forward() output for the same `bags` and `boundaries`; every row held here is stepped at `lr`
  /// by the constructor's optimizer, by Note [Rank-count-independent pooling]'s rule. Collective.
  /// Throws strata::Error for a grad of the wrong shape or dtype, a negative lr, or bad bags or
  /// boundaries (as forward()).
  void backward(std::span<const Bags> bags, const Tensor& grad, float lr, std::span<const int64_t> boundaries = {});

  /// backward() in two halves, so that the caller computes while the gradients travel:
  /// start_backward checks the bags and `grad` (throwing as backward() does, but for the learning
  /// rate) and starts the non-blocking alltoallv of the gradients; finish_backward waits for it and
  /// steps the held rows at `lr` (throwing for a negative lr). The `bags` of both calls must be the
  /// same, unchanged in between. Collective, in this order on every rank (other collectives may be
  /// issued in between).
  struct PendingBackward {
    std::vector<int64_t> at;  // the sample slices (ranks + 1 boundaries)
    Tensor grad;              // this rank's gradient, contiguous
    Tensor payload;           // what this rank sends (alive while the exchange runs)
    dist::Work work;          // the alltoallv; undefined at one rank
  };
  PendingBackward start_backward(std::span<const Bags> bags, const Tensor& grad,
                                 std::span<const int64_t> boundaries = {});
  void finish_backward(std::span<const Bags> bags, const PendingBackward& pending, float lr);

  /// The checks forward() makes before communicating, alone (throwing as forward() does); returns
  /// the sample slices (sample_slices). Local: no communication.
  std::vector<int64_t> check_bags(std::span<const Bags> bags, std::span<const int64_t> boundaries = {}) const;

  /// The rows of table t held here: [row_begin(t), row_end(t)) of the global table (empty when none).
  int64_t row_begin(int table) const { return plan_.row_begin(rank_, table); }
  int64_t row_end(int table) const { return plan_.row_end(rank_, table); }
  /// Global row `row` of table `table` (held here) into `dst` (dim floats).
  void read_row(int table, int64_t row, float* dst) const;
  /// Overwrites global row `row` of table `table` (held here) with `src` (dim floats): checkpoints.
  void write_row(int table, int64_t row, const float* src);
  /// The optimizer state of table t's held rows, row-major from row_begin(t): one float per row
  /// (row-wise Adagrad), dim per row (Adagrad), none for SGD or a table not held. Checkpoints.
  std::span<float> accumulators(int table);
  std::span<const float> accumulators(int table) const;
  /// The update count of the tables' optimizer states (SparseOptimizerState::steps), restored by
  /// checkpoints.
  void set_optimizer_steps(int64_t steps);

 private:
  struct Shard;

  void place_shards(const ShardStorage& storage, uint64_t seed);
  void run_lookup_hooks(std::span<const Bags> bags);
  void run_update_hooks();
  void charge_slow_reads() const;
  void compute_nodes(int table, const Bags& bags, int64_t s, float* out) const;
  Tensor forward_payload(std::span<const Bags> bags, const std::vector<int64_t>& at, std::vector<int64_t>& send) const;
  void finish_pooling(std::span<const Bags> bags, const std::vector<int64_t>& at, const Tensor* received,
                      float* out) const;
  dist::Work start_gradient_exchange(const Tensor& grad, const std::vector<int64_t>& at, Tensor& payload);

  ShardPlan plan_;
  int rank_ = 0;
  dist::Communicator* comm_ = nullptr;
  int64_t width_ = 0;
  SparseOptimizer optimizer_;                   // its lr is backward()'s
  std::vector<int64_t> column_;                 // table t's first output column
  std::vector<std::unique_ptr<Shard>> shards_;  // per table; null where this rank holds no rows
  TablePlacement placement_;                    // of the shards held here
  bool update_hooks_due_ = false;               // a lookup's hooks ran, the update's not yet
};

}  // namespace strata::emb
