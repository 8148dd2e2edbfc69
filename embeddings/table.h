#pragma once
/// @file
/// The embedding-table API of dissertation Table 5.2: a table is `nvectors` rows (feature vectors)
/// of `featuresize` elements (f32 or bf16); algorithms reach a row only through
/// `rowpointer(row, context)`, so the same lookup and update kernels run on a plain table in either
/// tier (SimpleTable) and on the slow-tier table with a per-row DRAM cache (CachedTable, §5.4).
///
/// Note [Slow-tier charging of row accesses]
/// When the slow tier is DRAM standing in for PMem/CXL, direct accesses to slow-tier rows must cost
/// what the device would (DESIGN.md §3 memory, "Slow-tier model"). Kernels ask `in_slow(ptr)` for
/// every row they touch, add up the bytes per chunk of work, and call `charge_slow_read` /
/// `charge_slow_write` once per chunk (one throttle reservation per chunk, not per row). Moves a
/// table makes itself (caching a row, writing a dirty row home) are charged by the table.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/dtype.h"
#include "memory/heap.h"
#include "memory/slow_tier_model.h"

namespace strata::emb {

/// Element type of a table's rows.
enum class ElemType : uint8_t { F32, BF16 };

/// 4 for f32, 2 for bf16.
std::size_t elem_size(ElemType t);
/// "f32" or "bf16".
const char* elem_name(ElemType t);
/// Parses "f32"/"float32" or "bf16"/"bfloat16"; throws strata::Error naming the text otherwise.
ElemType parse_elem_type(std::string_view text);

/// Table 5.2's access context: who is asking for the row.
enum class AccessContext : uint8_t {
  Forward,  ///< a lookup: a cached table may move the row into its DRAM cache (access_and_cache)
  Update,   ///< a write (gradient update, bulk write): never moves the row; a cached copy becomes dirty
  Read,     ///< a read without side effects (bulk reads, checks): never moves the row or dirties it
};

/// Where a table's rows live and what direct slow-tier accesses cost.
struct TableMemory {
  /// The heap the rows (for CachedTable: the base rows) are allocated from; must outlive the table.
  memory::Heap* heap = nullptr;
  /// Charged for direct accesses to slow-tier rows (Note [Slow-tier charging of row accesses]);
  /// null: nothing is charged (real device, or no model). Must outlive the table.
  memory::SlowTierThrottle* throttle = nullptr;
};

/// Counters of a table's direct slow-tier traffic (totals since construction or reset_counters()).
struct TableCounters {
  std::uint64_t slow_bytes_read = 0;
  std::uint64_t slow_bytes_written = 0;
};

/// The abstract table. Concrete tables are `final`, so kernels that dispatch on the concrete type
/// once per call get inlined row pointers.
class Table {
 public:
  virtual ~Table();
  Table(const Table&) = delete;
  Table& operator=(const Table&) = delete;

  /// Elements per row (Table 5.2 `featuresize`).
  int64_t featuresize() const { return featuresize_; }
  /// Number of rows (Table 5.2 `nvectors`).
  int64_t nvectors() const { return nvectors_; }
  ElemType elem_type() const { return elem_type_; }
  /// featuresize × element size.
  std::size_t row_bytes() const { return row_bytes_; }
  /// "simple" or "cached".
  virtual std::string_view kind() const = 0;

  /// Table 5.2 `rowpointer`: the current location of `row`'s elements. `row` must be in
  /// [0, nvectors) — kernels validate indices before they touch rows (check_row does it here).
  virtual std::byte* rowpointer(int64_t row, AccessContext ctx) = 0;
  /// True when `p` (a pointer returned by rowpointer) points into the slow tier.
  virtual bool in_slow(const std::byte* p) const = 0;

  /// Charge direct slow-tier traffic (Note [Slow-tier charging of row accesses]); counted always,
  /// throttled when the table has a throttle with an enabled model.
  void charge_slow_read(std::size_t bytes);
  void charge_slow_write(std::size_t bytes);
  TableCounters counters() const;
  void reset_counters();
  memory::SlowTierThrottle* throttle() const { return memory_.throttle; }
  memory::Heap* heap() const { return memory_.heap; }

  /// Throws strata::Error naming the table and the row when `row` is outside [0, nvectors).
  void check_row(int64_t row) const;
  /// A name used in error messages and reports (default "table").
  const std::string& name() const { return name_; }
  void set_name(std::string name) { name_ = std::move(name); }

  /// Bulk copies through rowpointer(·, Read) / rowpointer(·, Update), converting to/from f32: `dst`/`src` hold
  /// nvectors × featuresize floats, row-major. Not thread-safe against concurrent kernels.
  void copy_to(float* dst);
  void copy_from(const float* src);
  /// One row (featuresize floats).
  void read_row(int64_t row, float* dst);
  void write_row(int64_t row, const float* src);

 protected:
  Table(int64_t nvectors, int64_t featuresize, ElemType type, TableMemory memory);
  TableMemory memory_;

 private:
  int64_t nvectors_;
  int64_t featuresize_;
  ElemType elem_type_;
  std::size_t row_bytes_;
  std::string name_ = "table";
  alignas(64) std::atomic<std::uint64_t> slow_read_{0};
  alignas(64) std::atomic<std::uint64_t> slow_written_{0};
};

/// Rows contiguous in one heap of either tier (the dissertation's standard table; the `simple`
/// policy's table when the heap is the slow one).
class SimpleTable final : public Table {
 public:
  /// Allocates nvectors × row_bytes from `memory.heap` (zero-filled). Throws strata::Error for a
  /// missing heap, non-positive sizes, or a heap without room (naming the bytes asked and free).
  SimpleTable(int64_t nvectors, int64_t featuresize, ElemType type, TableMemory memory);
  ~SimpleTable() override;

  std::string_view kind() const override { return "simple"; }
  std::byte* rowpointer(int64_t row, AccessContext) override {
    return base_ + static_cast<std::size_t>(row) * row_bytes();
  }
  /// Inline, non-virtual form kernels use after dispatching on the concrete type.
  std::byte* row(int64_t r) const { return base_ + static_cast<std::size_t>(r) * row_bytes(); }
  bool in_slow(const std::byte*) const override { return slow_; }
  bool slow() const { return slow_; }
  std::byte* data() const { return base_; }

 private:
  memory::Region* region_ = nullptr;
  std::byte* base_ = nullptr;
  bool slow_ = false;
};

}  // namespace strata::emb
