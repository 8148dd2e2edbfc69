#pragma once
/// @file
/// Table placement under a fast budget (Note [DLRM table placement] in embeddings/dlrm.h): which
/// tables live whole in DRAM, which in the slow tier, which behind a per-row DRAM cache, and with
/// how much cache. The one-process TieredDLRM places its tables with it, and each rank of the
/// distributed run places the shards it holds with it (ShardedEmbeddingBags), so both runs share one
/// placement rule and one set of table classes.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "embeddings/policy.h"
#include "embeddings/table.h"

namespace strata::emb {

/// A table as the placement sees it.
struct TableShape {
  int64_t rows = 0;
  int64_t dim = 0;
};

/// Where a set of tables goes (plan_table_placement).
struct TablePlacement {
  EmbeddingPolicy policy = EmbeddingPolicy::Auto;
  bool all_dram = false;        ///< every table whole in the fast tier (SimpleTables)
  std::size_t table_bytes = 0;  ///< the rows (with slack), wherever they go
  std::size_t fast_bytes = 0;   ///< what the tables take from the fast tier
  double cache_fraction = 0;    ///< the cached tables' fraction of rows cached (0 when none is cached)
  /// True when the rows live in the slow tier (simple or cached tables).
  bool uses_slow() const { return !all_dram; }
  /// "DRAM", "slow" (simple) or "cached (<policy>, fraction f)".
  std::string describe() const;
};

/// Note [DLRM table placement]'s rule for `tables` of `type` under `fast_budget` bytes: with
/// `policy` auto, all in DRAM when their rows fit the budget, else every table an Auto CachedTable;
/// simple: SimpleTables in the slow tier; static and dynamic: CachedTables of that policy.
/// `cache_fraction` > 0 is the cached tables' fraction (refused, naming --cache-fraction and the
/// largest that fits, when its pages do not fit); otherwise the largest fraction that fits (at most
/// 1). Throws strata::Error naming --fast-budget when the cached tables' pointer tables alone do not
/// fit.
TablePlacement plan_table_placement(std::span<const TableShape> tables, ElemType type, EmbeddingPolicy policy,
                                    std::size_t fast_budget, double cache_fraction);

/// One table placed by a TablePlacement: a SimpleTable in the fast heap (all_dram), or the policy's
/// table (make_table: base rows in the slow heap, cache and pointer table in the fast heap).
struct PlacedTable {
  std::unique_ptr<Table> dram;            ///< all_dram: the table; else null
  std::unique_ptr<ManagedTable> managed;  ///< otherwise: the table and its policy; else null
  Table& table() { return dram != nullptr ? *dram : managed->table(); }
};

/// Builds one table of `rows` × `dim` elements of `type` as `placement` says, from `fast` and
/// `slow` (`options` seed the cached policies' fills). Throws strata::Error (make_table's or
/// SimpleTable's) for a heap without room or a missing slow heap when the placement needs it.
PlacedTable place_table(const TablePlacement& placement, int64_t rows, int64_t dim, ElemType type, TableMemory fast,
                        TableMemory slow, const PolicyOptions& options = {});

}  // namespace strata::emb
