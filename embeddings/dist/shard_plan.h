#pragma once
/// @file
/// The shard planner of hybrid-parallel DLRM (issue 28 item 2): which rank holds which embedding
/// rows. Each table is
/// - data-parallel: replicated on every rank (tables below the data-parallel boundary, as Intel's
///   --sparse-dense-boundary); lookups are local, gradients are exchanged;
/// - table-wise: whole on one rank;
/// - row-wise: split into contiguous row ranges, one per rank, along fixed row blocks
///   (Note [Rank-count-independent pooling] in embeddings/dist/sharded_bags.h).
///
/// Note [Shard planning]
/// plan_shards decides in this order:
/// 1. tables of fewer bytes than `dp_boundary_bytes` are data-parallel; together they must fit one
///    rank's budget (fast + slow);
/// 2. the other tables start table-wise, except tables larger than what a rank's budget leaves
///    after the data-parallel tables, which are row-wise;
/// 3. row-wise tables give every rank an equal share of their row blocks (the first ranks one
///    block more); table-wise tables go largest first (ties: lower index) onto the least-loaded rank
///    by bytes (ties: lower rank);
/// 4. while fewer table-wise tables remain than ranks, or the most-loaded rank holds more than
///    `balance_target` × the mean or more than its budget, the largest table-wise table becomes
///    row-wise and step 3 is redone. When none is left to convert and a rank is still over budget,
///    the plan fails naming the largest table and the bytes asked and available.
/// Row-wise costs communication (Note [Rank-count-independent pooling]), so it is used only where
/// table-wise placement leaves the ranks unbalanced or over budget.

#include <cstdint>
#include <string>
#include <vector>

namespace strata::emb {

/// One table as the planner sees it.
struct TableSpec {
  std::string name;
  int64_t rows = 0;
  int64_t dim = 0;
  /// Bytes per element (4 for f32, 2 for bf16).
  int64_t elem_bytes = 4;
  /// rows × dim × elem_bytes (checked for overflow by plan_shards).
  int64_t bytes() const { return rows * dim * elem_bytes; }
};

/// The planner's inputs besides the tables. Every rank has the same budget.
struct ShardPlanOptions {
  int ranks = 1;
  /// Bytes of a rank's fast tier and of its slow tier; a rank holds at most their sum.
  int64_t fast_budget_bytes = 0;
  int64_t slow_budget_bytes = 0;
  /// Tables of fewer bytes than this are data-parallel (0: none).
  int64_t dp_boundary_bytes = 0;
  /// The largest max/mean bytes per rank accepted before another table goes row-wise (>= 1).
  double balance_target = 1.1;
  /// Fixed row blocks per table (Note [Rank-count-independent pooling]); the same at every rank
  /// count, so that results do not depend on it. Row-wise tables are split at block boundaries.
  int64_t row_blocks = 64;
};

enum class ShardKind { data_parallel, table_wise, row_wise };
/// "data-parallel", "table-wise", "row-wise".
const char* shard_kind_name(ShardKind kind);

/// Where one table lives.
struct TableShard {
  ShardKind kind = ShardKind::table_wise;
  /// table-wise: the owning rank; otherwise -1.
  int owner = -1;
  /// row-wise: rank r holds blocks [block_begin[r], block_begin[r + 1]) (ranks + 1 entries);
  /// otherwise empty.
  std::vector<int64_t> block_begin;
};

/// The first row of block `block` of a table of `rows` rows in `blocks` fixed blocks: the rows split
/// as evenly as possible, the first blocks one row more (block == blocks gives rows).
int64_t block_first_row(int64_t rows, int64_t blocks, int64_t block);
/// The block that holds `row`.
int64_t block_of_row(int64_t rows, int64_t blocks, int64_t row);

/// A plan: the tables, where each lives and the bytes each rank holds.
struct ShardPlan {
  int ranks = 1;
  int64_t row_blocks = 64;
  int64_t fast_budget_bytes = 0;
  int64_t slow_budget_bytes = 0;
  int64_t dp_boundary_bytes = 0;
  std::vector<TableSpec> tables;
  std::vector<TableShard> shards;
  /// Bytes of embedding rows on each rank (data-parallel tables count on every rank).
  std::vector<int64_t> rank_bytes;

  /// True when `rank` holds rows of `table` (every rank for data-parallel tables; for row-wise
  /// tables, the ranks with a non-empty block range).
  bool holds(int rank, int table) const;
  /// The rows of `table` that `rank` holds: [first, end) (all rows for data-parallel tables and the
  /// table-wise owner; empty when it holds none).
  int64_t row_begin(int rank, int table) const;
  int64_t row_end(int rank, int table) const;
  /// Row blocks of `table` that `rank` holds: [first, end) ([0, row_blocks) for a whole table).
  int64_t block_begin(int rank, int table) const;
  int64_t block_end(int rank, int table) const;
  /// Bytes of the most-loaded rank over the mean (1 for a single rank).
  double max_over_mean() const;
  /// One line per table, then one per rank (bytes, fast and slow parts), then max/mean.
  std::string to_string() const;
  /// The same as JSON: {"ranks", "row_blocks", "tables": [...], "rank_bytes": [...], "max_over_mean"}.
  std::string to_json() const;
};

/// Plans the tables (Note [Shard planning]). Throws strata::Error for no tables, ranks < 1, a
/// table of no rows or dim (named), a table whose bytes overflow, a negative budget or boundary,
/// a zero budget, balance_target < 1, row_blocks < 1, or a budget too small for any plan (naming
/// the table and the bytes).
ShardPlan plan_shards(const std::vector<TableSpec>& tables, const ShardPlanOptions& options);

}  // namespace strata::emb
