#include "embeddings/dist/shard_plan.h"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <numeric>
#include <sstream>

#include "core/error.h"
#include "core/json.h"
#include "core/text.h"

namespace strata::emb {

const char* shard_kind_name(ShardKind kind) {
  switch (kind) {
    case ShardKind::data_parallel: return "data-parallel";
    case ShardKind::table_wise: return "table-wise";
    case ShardKind::row_wise: return "row-wise";
  }
  return "unknown";
}

int64_t block_first_row(int64_t rows, int64_t blocks, int64_t block) {
  const int64_t q = rows / blocks, extra = rows % blocks;
  return block * q + std::min(block, extra);
}

int64_t block_of_row(int64_t rows, int64_t blocks, int64_t row) {
  const int64_t q = rows / blocks, extra = rows % blocks;
  const int64_t big = extra * (q + 1);  // rows in the first `extra` blocks, one row longer
  return row < big ? row / (q + 1) : extra + (row - big) / q;
}

// ---- ShardPlan queries ------------------------------------------------------------------------------

bool ShardPlan::holds(int rank, int table) const {
  const TableShard& s = shards[static_cast<std::size_t>(table)];
  switch (s.kind) {
    case ShardKind::data_parallel: return true;
    case ShardKind::table_wise: return s.owner == rank;
    case ShardKind::row_wise: return s.block_begin[rank] < s.block_begin[rank + 1];
  }
  return false;
}

int64_t ShardPlan::block_begin(int rank, int table) const {
  const TableShard& s = shards[static_cast<std::size_t>(table)];
  if (s.kind == ShardKind::row_wise) return s.block_begin[rank];
  return 0;
}

int64_t ShardPlan::block_end(int rank, int table) const {
  const TableShard& s = shards[static_cast<std::size_t>(table)];
  if (s.kind == ShardKind::row_wise) return s.block_begin[rank + 1];
  return holds(rank, table) ? row_blocks : 0;
}

int64_t ShardPlan::row_begin(int rank, int table) const {
  return block_first_row(tables[static_cast<std::size_t>(table)].rows, row_blocks, block_begin(rank, table));
}

int64_t ShardPlan::row_end(int rank, int table) const {
  if (!holds(rank, table)) return row_begin(rank, table);
  return block_first_row(tables[static_cast<std::size_t>(table)].rows, row_blocks, block_end(rank, table));
}

double ShardPlan::max_over_mean() const {
  const int64_t total = std::accumulate(rank_bytes.begin(), rank_bytes.end(), int64_t{0});
  if (total == 0) return 1.0;
  const int64_t max = *std::max_element(rank_bytes.begin(), rank_bytes.end());
  return static_cast<double>(max) * static_cast<double>(ranks) / static_cast<double>(total);
}

namespace {

std::string where_text(const ShardPlan& plan, int t) {
  const TableShard& s = plan.shards[static_cast<std::size_t>(t)];
  std::ostringstream os;
  os << shard_kind_name(s.kind);
  if (s.kind == ShardKind::table_wise) os << " on rank " << s.owner;
  if (s.kind != ShardKind::row_wise) return os.str();
  os << ":";
  for (int r = 0; r < plan.ranks; ++r) {
    if (plan.holds(r, t)) os << " rank " << r << " rows [" << plan.row_begin(r, t) << ", " << plan.row_end(r, t) << ")";
  }
  return os.str();
}

}  // namespace

std::string ShardPlan::to_string() const {
  std::ostringstream os;
  os << "shard plan: " << tables.size() << " tables over " << ranks << " ranks (" << row_blocks
     << " row blocks per table; data-parallel below " << format_bytes(static_cast<double>(dp_boundary_bytes)) << ")\n";
  for (std::size_t t = 0; t < tables.size(); ++t) {
    const TableSpec& spec = tables[t];
    os << "  table " << t << " " << quote_field(spec.name) << ": " << spec.rows << " x " << spec.dim << " x "
       << spec.elem_bytes << " B = " << spec.bytes() << " bytes, " << where_text(*this, static_cast<int>(t)) << "\n";
  }
  for (int r = 0; r < ranks; ++r) {
    const int64_t b = rank_bytes[static_cast<std::size_t>(r)];
    const int64_t fast = std::min(b, fast_budget_bytes);
    os << "  rank " << r << ": " << b << " bytes (" << format_bytes(static_cast<double>(b)) << "; fast "
       << format_bytes(static_cast<double>(fast)) << ", slow " << format_bytes(static_cast<double>(b - fast)) << ")\n";
  }
  char ratio[32];
  std::snprintf(ratio, sizeof ratio, "%.3f", max_over_mean());
  os << "  max/mean bytes per rank: " << ratio << "\n";
  return os.str();
}

std::string ShardPlan::to_json() const {
  JsonWriter j;
  j.begin_object().kv("ranks", static_cast<int64_t>(ranks)).kv("row_blocks", row_blocks);
  j.kv("dp_boundary_bytes", dp_boundary_bytes).key("tables").begin_array();
  for (std::size_t t = 0; t < tables.size(); ++t) {
    const TableSpec& spec = tables[t];
    const TableShard& s = shards[t];
    j.begin_object().kv("name", spec.name).kv("rows", spec.rows).kv("dim", spec.dim);
    j.kv("elem_bytes", spec.elem_bytes).kv("kind", shard_kind_name(s.kind));
    if (s.kind == ShardKind::table_wise) j.kv("owner", static_cast<int64_t>(s.owner));
    if (s.kind == ShardKind::row_wise) {
      j.key("row_begin").begin_array();
      for (int r = 0; r <= ranks; ++r) {
        j.value(r < ranks ? row_begin(r, static_cast<int>(t)) : spec.rows);
      }
      j.end_array();
    }
    j.end_object();
  }
  j.end_array().key("rank_bytes").begin_array();
  for (int64_t b : rank_bytes) j.value(b);
  j.end_array().kv("max_over_mean", max_over_mean()).end_object();
  return j.str();
}

// ---- planning ---------------------------------------------------------------------------------------

namespace {

void check_inputs(const std::vector<TableSpec>& tables, const ShardPlanOptions& o) {
  STRATA_CHECK(!tables.empty(), "plan_shards: no tables to plan");
  STRATA_CHECK(o.ranks >= 1, "plan_shards: ranks = ", o.ranks, " (at least 1 rank is needed)");
  STRATA_CHECK(o.fast_budget_bytes >= 0 && o.slow_budget_bytes >= 0, "plan_shards: a negative budget per rank (fast ",
               o.fast_budget_bytes, " bytes, slow ", o.slow_budget_bytes, " bytes)");
  STRATA_CHECK(o.fast_budget_bytes <= std::numeric_limits<int64_t>::max() - o.slow_budget_bytes,
               "plan_shards: the budget per rank overflows (fast ", o.fast_budget_bytes, " + slow ",
               o.slow_budget_bytes, " bytes)");
  STRATA_CHECK(o.fast_budget_bytes + o.slow_budget_bytes > 0, "plan_shards: the budget per rank is 0 bytes");
  STRATA_CHECK(o.dp_boundary_bytes >= 0, "plan_shards: the data-parallel boundary is negative (", o.dp_boundary_bytes,
               " bytes)");
  STRATA_CHECK(o.balance_target >= 1.0, "plan_shards: balance_target = ", o.balance_target,
               " (max/mean bytes per rank cannot be below 1)");
  STRATA_CHECK(o.row_blocks >= 1, "plan_shards: row_blocks = ", o.row_blocks, " (at least 1)");
  for (std::size_t t = 0; t < tables.size(); ++t) {
    const TableSpec& s = tables[t];
    STRATA_CHECK(s.rows >= 1 && s.dim >= 1 && s.elem_bytes >= 1, "plan_shards: table ", t, " ", quote_field(s.name),
                 " has ", s.rows, " rows of dim ", s.dim, " and ", s.elem_bytes,
                 " bytes per element (each must be at least 1)");
    const int64_t max = std::numeric_limits<int64_t>::max();
    STRATA_CHECK(s.rows <= max / s.dim && s.rows * s.dim <= max / s.elem_bytes, "plan_shards: table ", t, " ",
                 quote_field(s.name), " (", s.rows, " x ", s.dim, " x ", s.elem_bytes, " bytes) overflows 64 bits");
  }
}

// Bytes of rows [block_first_row(a), block_first_row(b)) of table `s`.
int64_t block_bytes(const TableSpec& s, int64_t blocks, int64_t a, int64_t b) {
  return (block_first_row(s.rows, blocks, b) - block_first_row(s.rows, blocks, a)) * s.dim * s.elem_bytes;
}

// Step 3 of Note [Shard planning]: places every table given the kinds chosen so far.
void place(ShardPlan& plan, int64_t dp_bytes) {
  plan.rank_bytes.assign(static_cast<std::size_t>(plan.ranks), dp_bytes);
  std::vector<int> table_wise;
  for (std::size_t t = 0; t < plan.tables.size(); ++t) {
    TableShard& s = plan.shards[t];
    s.owner = -1;
    s.block_begin.clear();
    if (s.kind == ShardKind::table_wise) table_wise.push_back(static_cast<int>(t));
    if (s.kind != ShardKind::row_wise) continue;
    s.block_begin.assign(static_cast<std::size_t>(plan.ranks) + 1, 0);
    for (int r = 0; r < plan.ranks; ++r) {
      s.block_begin[r + 1] =
          s.block_begin[r] + plan.row_blocks / plan.ranks + (r < plan.row_blocks % plan.ranks ? 1 : 0);
      plan.rank_bytes[r] += block_bytes(plan.tables[t], plan.row_blocks, s.block_begin[r], s.block_begin[r + 1]);
    }
  }
  std::stable_sort(table_wise.begin(), table_wise.end(),
                   [&](int a, int b) { return plan.tables[a].bytes() > plan.tables[b].bytes(); });
  for (int t : table_wise) {
    const auto least = std::min_element(plan.rank_bytes.begin(), plan.rank_bytes.end());
    plan.shards[t].owner = static_cast<int>(least - plan.rank_bytes.begin());
    *least += plan.tables[t].bytes();
  }
}

// The largest table-wise table (ties: lower index), or -1.
int largest_table_wise(const ShardPlan& plan) {
  int best = -1;
  for (std::size_t t = 0; t < plan.tables.size(); ++t) {
    if (plan.shards[t].kind != ShardKind::table_wise) continue;
    if (best < 0 || plan.tables[t].bytes() > plan.tables[best].bytes()) best = static_cast<int>(t);
  }
  return best;
}

int64_t count_kind(const ShardPlan& plan, ShardKind kind) {
  return std::count_if(plan.shards.begin(), plan.shards.end(), [&](const TableShard& s) { return s.kind == kind; });
}

// Steps 1 and 2: the data-parallel tables (checked against the budget) and the first row-wise ones.
int64_t choose_initial_kinds(ShardPlan& plan, int64_t budget) {
  int64_t dp_bytes = 0;
  int largest_dp = -1;
  for (std::size_t t = 0; t < plan.tables.size(); ++t) {
    if (plan.tables[t].bytes() >= plan.dp_boundary_bytes) continue;
    plan.shards[t].kind = ShardKind::data_parallel;
    dp_bytes += plan.tables[t].bytes();
    if (largest_dp < 0 || plan.tables[t].bytes() > plan.tables[largest_dp].bytes()) largest_dp = static_cast<int>(t);
  }
  STRATA_CHECK(dp_bytes <= budget, "plan_shards: the data-parallel tables (below ", plan.dp_boundary_bytes,
               " bytes) need ", dp_bytes, " bytes on every rank but a rank's budget is ", budget,
               " bytes; the largest is table ", largest_dp, " ",
               quote_field(largest_dp >= 0 ? plan.tables[largest_dp].name : ""),
               " (lower the data-parallel boundary or raise the budget)");
  for (std::size_t t = 0; t < plan.tables.size(); ++t) {
    if (plan.shards[t].kind == ShardKind::table_wise && plan.tables[t].bytes() > budget - dp_bytes) {
      plan.shards[t].kind = ShardKind::row_wise;
    }
  }
  return dp_bytes;
}

[[noreturn]] void fail_budget(const ShardPlan& plan, int64_t budget) {
  const auto worst = std::max_element(plan.rank_bytes.begin(), plan.rank_bytes.end());
  int largest = 0;
  for (std::size_t t = 1; t < plan.tables.size(); ++t) {
    if (plan.tables[t].bytes() > plan.tables[largest].bytes()) largest = static_cast<int>(t);
  }
  STRATA_FAIL("plan_shards: the budget is too small for any plan: rank ", worst - plan.rank_bytes.begin(), " needs ",
              *worst, " bytes but a rank's budget is ", budget, " bytes (fast ", plan.fast_budget_bytes, " + slow ",
              plan.slow_budget_bytes, ") with every model-parallel table row-wise over ", plan.ranks,
              " ranks; the largest table is table ", largest, " ", quote_field(plan.tables[largest].name), " (",
              plan.tables[largest].bytes(), " bytes)");
}

}  // namespace

ShardPlan plan_shards(const std::vector<TableSpec>& tables, const ShardPlanOptions& options) {
  check_inputs(tables, options);
  ShardPlan plan;
  plan.ranks = options.ranks;
  plan.row_blocks = options.row_blocks;
  plan.fast_budget_bytes = options.fast_budget_bytes;
  plan.slow_budget_bytes = options.slow_budget_bytes;
  plan.dp_boundary_bytes = options.dp_boundary_bytes;
  plan.tables = tables;
  plan.shards.assign(tables.size(), TableShard{});
  const int64_t budget = options.fast_budget_bytes + options.slow_budget_bytes;
  const int64_t dp_bytes = choose_initial_kinds(plan, budget);
  // Step 4: convert the largest table-wise table while the plan is short of tables, unbalanced or
  // over budget.
  for (;;) {
    if (count_kind(plan, ShardKind::table_wise) < plan.ranks) {
      for (TableShard& s : plan.shards) {
        if (s.kind == ShardKind::table_wise) s.kind = ShardKind::row_wise;
      }
    }
    place(plan, dp_bytes);
    const int64_t max = *std::max_element(plan.rank_bytes.begin(), plan.rank_bytes.end());
    const bool over = max > budget;
    if (!over && plan.max_over_mean() <= options.balance_target) break;
    const int convert = largest_table_wise(plan);
    if (convert < 0) {
      if (over) fail_budget(plan, budget);
      break;  // as balanced as row blocks allow
    }
    plan.shards[convert].kind = ShardKind::row_wise;
  }
  return plan;
}

}  // namespace strata::emb
