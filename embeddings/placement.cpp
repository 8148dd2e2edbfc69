#include "embeddings/placement.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "core/error.h"
#include "core/text.h"

namespace strata::emb {

namespace {

constexpr std::size_t kHeapSlackPerTable = std::size_t{1} << 12;  // a few 64-byte-aligned allocations

}  // namespace

std::string TablePlacement::describe() const {
  if (all_dram) return "DRAM";
  if (policy == EmbeddingPolicy::Simple) return "slow";
  std::ostringstream os;
  os << "cached (" << policy_name(policy) << ", fraction " << cache_fraction << ")";
  return os.str();
}

TablePlacement plan_table_placement(std::span<const TableShape> tables, ElemType type, EmbeddingPolicy policy,
                                    std::size_t fast_budget, double cache_fraction) {
  TablePlacement plan;
  plan.policy = policy;
  std::size_t fixed_fast = 0, cached_row_bytes = 0;
  for (const TableShape& t : tables) {
    const std::size_t row_bytes = static_cast<std::size_t>(t.dim) * elem_size(type);
    const std::size_t stride = (row_bytes + 7) / 8 * 8;
    const auto r = static_cast<std::size_t>(t.rows);
    plan.table_bytes += r * row_bytes + kHeapSlackPerTable;
    fixed_fast += r * (8 + (policy == EmbeddingPolicy::Auto ? 2 : 0)) + kHeapSlackPerTable;
    cached_row_bytes += r * (stride + 8);
  }
  plan.all_dram = policy == EmbeddingPolicy::Auto && plan.table_bytes <= fast_budget;
  if (plan.all_dram) {
    plan.fast_bytes = plan.table_bytes;
    return plan;
  }
  if (policy == EmbeddingPolicy::Simple) return plan;
  const double budget = 0.98 * static_cast<double>(fast_budget);
  const double page_headroom = 1.0 + 1.0 / static_cast<double>(PolicyOptions{}.pages);
  const double room = budget - static_cast<double>(fixed_fast);
  const double fits = room / (static_cast<double>(cached_row_bytes) * page_headroom);
  STRATA_CHECK(room > 0, "--fast-budget: ", format_bytes(static_cast<double>(fast_budget)),
               " cannot hold the cached tables' pointer tables", policy == EmbeddingPolicy::Auto ? " and counters" : "",
               " (", format_bytes(static_cast<double>(fixed_fast)), " for ", tables.size(),
               " tables); raise it or use --emb-policy simple");
  if (cache_fraction > 0) {
    STRATA_CHECK(cache_fraction <= fits, "--cache-fraction ", cache_fraction, ": the caches would need ",
                 format_bytes(static_cast<double>(fixed_fast) +
                              cache_fraction * static_cast<double>(cached_row_bytes) * page_headroom),
                 " of fast memory but --fast-budget is ", format_bytes(static_cast<double>(fast_budget)),
                 " (at most --cache-fraction ", std::floor(1000.0 * fits) / 1000.0, " fits)");
    plan.cache_fraction = cache_fraction;
  } else {
    plan.cache_fraction = std::min(1.0, fits);
  }
  plan.fast_bytes = fixed_fast + static_cast<std::size_t>(plan.cache_fraction * static_cast<double>(cached_row_bytes) *
                                                          page_headroom);
  return plan;
}

PlacedTable place_table(const TablePlacement& placement, int64_t rows, int64_t dim, ElemType type, TableMemory fast,
                        TableMemory slow, const PolicyOptions& options) {
  PlacedTable out;
  if (placement.all_dram)
    out.dram = std::make_unique<SimpleTable>(rows, dim, type, fast);
  else
    out.managed = make_table(placement.policy, rows, dim, type, fast, slow, placement.cache_fraction, options);
  return out;
}

}  // namespace strata::emb
