#pragma once
/// @file
/// CachedTable: the dissertation's CachedEmbeddings table (§5.4, Figure 5.7, Table 5.4). Base rows
/// live in the slow tier; a pointer table (one atomic word per row, in the fast tier) says where
/// each row is now; rows read by lookups are moved into cache pages in the fast tier, and flushes
/// retire the oldest pages, writing dirty rows home with non-temporal stores.
///
/// Note [CachedTable pointer table]
/// Entry r of the pointer table is the address of row r's current copy with three flag bits in
/// the low bits the address never uses:
///   bit 0  cached  the address is a cache slot (otherwise it is the row's home in the base rows)
///   bit 1  locked  a thread owns the row and is moving it (§5.4's lock bit)
///   bit 2  dirty   the cached copy was written (an Update access) and must be written home
/// Bits 0 and 1 are the text's; bit 2 is ours: it gives §5.4's "dirty vectors" per-row
/// granularity at no cost (an Update access sets it on the entry it has just read, with no page
/// lookup), so flush_dirty writes home exactly the rows that were updated, and a page that only
/// lookups touched is retired without writing, as the text's clean case. Three bits need 8-byte
/// alignment of every row: base rows and cache slots are laid out with a row stride of row_bytes
/// rounded up to a multiple of 8 (row_stride(); it equals row_bytes for every f32 row with an
/// even featuresize and every bf16 row with featuresize % 4 == 0). Tiny rows (d = 1 bf16: 2 bytes)
/// are padded, not refused; the padding is never read as data.
///
/// Caching a row (access_and_cache, the Forward context), as §5.4 describes:
///   1. load the entry (acquire); cached: a hit, return the slot;
///   2. not cached and caching allowed (caching enabled, cache not full, admission rule agrees):
///      CAS entry home -> home|locked (acquire). Losing the CAS means another thread owns the row:
///      return whatever the entry now holds (the slot if that thread has finished, else home —
///      the base copy is unchanged while a row is being cached, so reading it is correct);
///   3. take a slot: fetch_add on the newest page's bump pointer; when that page is used up, take
///      the table's mutex and allocate a new page if the cache stays within cachelower +
///      cacheslack (else the cache is full: unlock the row and return home);
///   4. copy home -> slot, store the slot's back-edge (the home address), then publish the entry
///      slot|cached with a release store (which also clears the lock). A reader that loads the
///      entry with acquire therefore sees the copied data.
/// Update accesses of a cached row set the dirty bit with a relaxed fetch_or: flushes never run
/// concurrently with accesses (below), so the phase boundary (thread join or a TBB barrier)
/// orders the bit before the flush that reads it.
///
/// Note [CachedTable phases]
/// Accesses may run on many threads at once: Forward accesses of any rows concurrently (two
/// threads caching one row race on the CAS; one wins), Update and Read accesses concurrently with
/// Forward accesses of *other* rows. A row must not be updated while it is being looked up (the
/// data itself would race; training separates the lookup and update phases), and an Update of a
/// row whose lock bit is set waits for the mover to publish. flush_clean, flush_dirty,
/// retire_oldest, the setters, set_caching, set_admission and reset_cache_counters run *between*
/// phases, never concurrently with an access: a flush frees cache pages that a
/// concurrent access could be reading. This is asserted cheaply: a flush raises a flag that the
/// caching path checks (a Forward miss during a flush throws strata::Error), and a flush checks
/// that every row it retires is unlocked and still points at the slot being retired. A flush
/// itself writes dirty rows home on several threads (strata::parallel_for over the page's dirty
/// rows; each thread fences its non-temporal stores before re-pointing its rows home).
///
/// Slow-tier charging (Note [Slow-tier charging of row accesses]): moving a row into the cache is
/// a slow read of row_bytes, writing a dirty row home a slow write of row_bytes; both are charged
/// by the table. Moves are charged in batches per thread (one throttle reservation per ~16 KiB,
/// like the kernels' per-chunk charges); settle_charges() charges what is pending (flushes and
/// the policy hooks call it). Direct accesses of uncached rows are charged by the kernels
/// (in_slow() is true for every base-row address).

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "embeddings/table.h"

namespace strata::emb {

/// Totals since construction or reset_cache_counters().
struct CacheCounters {
  std::uint64_t hits = 0;               ///< Forward accesses that found the row cached
  std::uint64_t misses = 0;             ///< Forward accesses that did not (including those that cached it)
  std::uint64_t update_hits = 0;        ///< Update accesses of cached rows
  std::uint64_t update_misses = 0;      ///< Update accesses of rows in the slow tier
  std::uint64_t rows_cached = 0;        ///< rows moved into the cache (a slow read each)
  std::uint64_t rows_written_back = 0;  ///< dirty rows written home by flushes (a slow write each)
  std::uint64_t rows_dropped = 0;       ///< clean rows retired without writing
  std::uint64_t rows_retained = 0;      ///< rows retire_oldest moved to a newer page (its `retain`)
  std::uint64_t pages_flushed = 0;      ///< cache pages retired
  std::uint64_t pages_allocated = 0;    ///< cache pages allocated
  /// hits / (hits + misses); 0 when there were no Forward accesses.
  double hit_rate() const {
    const std::uint64_t n = hits + misses;
    return n == 0 ? 0.0 : static_cast<double>(hits) / static_cast<double>(n);
  }
};

/// Construction parameters of a CachedTable (sizes in bytes of fast-tier cache memory; a page is
/// page_rows slots of row_stride() bytes plus one 8-byte back-edge per slot).
struct CachedTableOptions {
  std::size_t cachelower = 0;  ///< §5.4 cachelower: flushes retire pages until the cache is at most this
  std::size_t cacheslack = 0;  ///< §5.4 cacheslack: the cache grows to at most cachelower + cacheslack
  int64_t page_rows = 0;       ///< slots per cache page; 0: 1/32 of the slots cachelower + cacheslack hold (>= 1)
};

namespace detail {
/// Per-thread counter shards of CachedTables (see cached_table.cpp). Slot kSharedSlot is shared by
/// the threads beyond the first kCounterShards - 1 live ones and updated with atomic RMWs.
inline constexpr int kCounterShards = 64;
inline constexpr int kSharedSlot = kCounterShards - 1;
int acquire_thread_slot();
inline thread_local int t_cache_slot = -1;
inline int cache_thread_slot() {
  if (t_cache_slot < 0) [[unlikely]]
    t_cache_slot = acquire_thread_slot();
  return t_cache_slot;
}
}  // namespace detail

/// The slow-tier table with a per-row fast-tier cache (§5.4). Concrete and `final` so kernels that
/// dispatch on it (embeddings/detail/visit.h) inline access_and_cache / access.
class CachedTable final : public Table {
 public:
  static constexpr std::uintptr_t kCachedBit = 1;
  static constexpr std::uintptr_t kLockBit = 2;
  static constexpr std::uintptr_t kDirtyBit = 4;
  static constexpr std::uintptr_t kFlagMask = 7;

  /// Base rows (nvectors × row_stride(), zero-filled) from `slow.heap`; the pointer table and the
  /// cache pages from `fast.heap`. `slow.throttle` is charged for the table's moves. Throws
  /// strata::Error for missing heaps, non-positive sizes, a negative page_rows, or heaps without
  /// room (naming the heap, the bytes asked and the largest free block).
  CachedTable(int64_t nvectors, int64_t featuresize, ElemType type, TableMemory slow, TableMemory fast,
              const CachedTableOptions& options = {});
  ~CachedTable() override;

  std::string_view kind() const override { return "cached"; }
  /// Forward -> access_and_cache; Update and Read -> access (Table 5.4).
  std::byte* rowpointer(int64_t row, AccessContext ctx) override {
    return ctx == AccessContext::Forward ? access_and_cache(row) : access(row, ctx);
  }
  /// True for addresses in the base rows (the slow tier); cache slots are in the fast tier.
  bool in_slow(const std::byte* p) const override { return slow_base_ && p >= base_ && p < base_end_; }

  /// Table 5.4 `access_and_cache`: the row's current address, caching it first when (1) the cache
  /// is not full, (2) the row is not cached and (3) this thread wins the row's ownership (and
  /// caching is enabled and the admission rule, if any, admits the row). Counts a hit or a miss.
  std::byte* access_and_cache(int64_t row) {
    const std::uintptr_t e = entry(row).load(std::memory_order_acquire);
    if (e & kCachedBit) [[likely]] {
      count(&Shard::hits);
      return address(e);
    }
    return forward_miss(row, e);
  }
  /// Table 5.4 `access`: the row's current address without caching. `ctx` Update marks a cached
  /// copy dirty (and counts an update hit or miss); Read changes nothing.
  std::byte* access(int64_t row, AccessContext ctx = AccessContext::Update) {
    std::uintptr_t e = entry(row).load(std::memory_order_acquire);
    if (ctx != AccessContext::Update) return address(e);
    if (e & kLockBit) [[unlikely]]
      e = wait_unlocked(row);
    if (e & kCachedBit) {
      if (!(e & kDirtyBit)) entry(row).fetch_or(kDirtyBit, std::memory_order_relaxed);
      count(&Shard::update_hits);
    } else {
      count(&Shard::update_misses);
    }
    return address(e);
  }

  /// Starts loading row `row`'s pointer-table entry into the CPU cache. The entry is a random
  /// access of its own (8 bytes per row, usually far larger than the caches): a kernel that
  /// prefetches the rows it will touch should prefetch their entries one prefetch distance
  /// earlier, so that rowpointer finds the entry in cache and can return the row's address.
  void prefetch_entry(int64_t row) const { __builtin_prefetch(ptrs_ + row, 0, 3); }

  /// Table 5.4 setters (between phases). Lowering the bound does not shrink the cache by itself;
  /// the next flush does.
  void set_cachelower(std::size_t bytes);
  void set_cacheslack(std::size_t bytes);
  std::size_t cachelower() const { return cachelower_.load(std::memory_order_relaxed); }
  std::size_t cacheslack() const { return cacheslack_.load(std::memory_order_relaxed); }
  /// Table 5.4 `isfull`: the newest page has no free slot and another page would take the cache
  /// beyond cachelower + cacheslack (or the fast heap refused one).
  bool is_full() const;

  /// Table 5.4 `flush_clean`: retires the oldest pages until the cache is at most cachelower,
  /// without writing anything home. (§5.4 says "less than cachelower" but also that the cache
  /// fluctuates between cachelower and cachelower + cacheslack; with whole pages both cannot hold,
  /// and stopping at the first size <= cachelower keeps a cachelower of whole pages exactly.)
  /// Throws strata::Error (before touching that page) if a page to retire holds a dirty row,
  /// naming the row: dropping it would lose an update; use flush_dirty. Returns the number of
  /// pages retired.
  std::size_t flush_clean();
  /// Table 5.4 `flush_dirty`: as flush_clean, but dirty rows are written home with non-temporal
  /// stores first. Returns the number of pages retired.
  std::size_t flush_dirty();
  /// Retires exactly min(pages, number of pages) oldest pages regardless of cachelower, writing
  /// dirty rows home when `write_back` (else as flush_clean, including its error). With `retain`,
  /// each row for which retain(row) is true is moved to a fresh page instead of being retired
  /// (fast tier to fast tier, keeping its dirty bit; the fast heap needs room for one more page,
  /// else the row is retired normally) — an extension for EmbeddingPolicy::Auto.
  std::size_t retire_oldest(std::size_t pages, bool write_back, const std::function<bool(int64_t)>& retain = {});

  /// The static policy's switch: when false, Forward misses never cache (hits still hit).
  void set_caching(bool enabled);
  bool caching() const { return caching_.load(std::memory_order_relaxed); }

  /// Admission hook (an extension used by EmbeddingPolicy::Auto; without it the table is exactly
  /// §5.4's). With an admission rule set, a Forward miss caches row r only if
  /// flags[r × stride] == flag_value or counts[r × stride] >= min_count (either pointer may be
  /// null: that condition is then false). The bytes are owned by the caller and must not change
  /// while accesses run. A rule with both pointers null admits every row (the default).
  struct AdmissionRule {
    const std::uint8_t* flags = nullptr;
    const std::uint8_t* counts = nullptr;
    std::size_t stride = 1;
    std::uint8_t flag_value = 0;
    int min_count = 256;  ///< > 255: never by count
  };
  void set_admission(const AdmissionRule& rule);
  /// Slots that can still be filled without a flush: the free slots of the newest page plus whole
  /// pages up to cachelower + cacheslack.
  int64_t free_slots() const;

  /// Rows are laid out with this stride (row_bytes rounded up to a multiple of 8).
  std::size_t row_stride() const { return stride_; }
  int64_t page_rows() const { return page_rows_; }
  /// Fast-tier bytes of one page: page_rows × (row_stride + 8).
  std::size_t page_bytes() const { return page_bytes_; }
  /// Current size of the cache: allocated pages × page_bytes.
  std::size_t cache_bytes() const { return cache_bytes_.load(std::memory_order_relaxed); }
  std::size_t npages() const;
  /// Rows currently cached (filled slots of all pages).
  int64_t cached_rows() const;
  /// Fast-tier bytes of the pointer table (8 per row).
  std::size_t pointer_table_bytes() const { return static_cast<std::size_t>(nvectors()) * 8; }

  /// Introspection (tests, reports). Rows must be in range (check_row).
  std::uintptr_t pointer_entry(int64_t row) const { return entry(row).load(std::memory_order_acquire); }
  bool is_cached(int64_t row) const { return (pointer_entry(row) & kCachedBit) != 0; }
  bool is_dirty(int64_t row) const { return (pointer_entry(row) & kDirtyBit) != 0; }
  bool is_locked(int64_t row) const { return (pointer_entry(row) & kLockBit) != 0; }
  /// Row `row`'s home in the base rows.
  std::byte* home(int64_t row) const { return base_ + static_cast<std::size_t>(row) * stride_; }
  /// Back-edge of slot `slot` of the page `page` positions from the oldest: the home address of
  /// the row in that slot, or nullptr when the slot is empty. Throws for a page or slot out of range.
  const std::byte* backedge(std::size_t page, int64_t slot) const;
  /// Address of slot `slot` of page `page` (as backedge).
  const std::byte* slot_address(std::size_t page, int64_t slot) const;
  /// Appends to `rows` the rows cached in page `page` (counted from the oldest), in slot order.
  void append_page_rows(std::size_t page, std::vector<int64_t>& rows) const;

  CacheCounters cache_counters() const;
  void reset_cache_counters();
  /// Charges the moves not yet charged to the throttle (see the header comment).
  void settle_charges();

 private:
  struct alignas(64) Shard {
    std::atomic<std::uint64_t> hits{0}, misses{0}, update_hits{0}, update_misses{0}, rows_cached{0},
        pending_read_bytes{0};
  };
  struct Page;
  struct Slot {
    Page* page = nullptr;
    int64_t index = 0;
  };

  std::atomic<std::uintptr_t>& entry(int64_t row) const { return ptrs_[row]; }
  static std::byte* address(std::uintptr_t e) { return reinterpret_cast<std::byte*>(e & ~kFlagMask); }
  void count(std::atomic<std::uint64_t> Shard::* field, std::uint64_t n = 1) {
    const int slot = detail::cache_thread_slot();
    std::atomic<std::uint64_t>& c = shards_[slot].*field;
    if (slot == detail::kSharedSlot)
      c.fetch_add(n, std::memory_order_relaxed);
    else  // this thread owns the shard: a plain load + store is an exact count
      c.store(c.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }

  std::byte* forward_miss(int64_t row, std::uintptr_t e);
  std::uintptr_t wait_unlocked(int64_t row) const;
  // Takes a free slot of the newest page, allocating a page under mutex_ when needed and allowed.
  Slot allocate_slot();
  // With mutex_ held: a new page (nullptr when the heap refuses); `ignore_limit` for retention.
  Page* new_page_locked(bool ignore_limit);
  std::size_t retire(std::size_t max_pages, bool write_back, bool respect_lower,
                     const std::function<bool(int64_t)>& retain);
  void retire_front_locked(bool write_back, const std::function<bool(int64_t)>& retain, Page*& retention_page);
  std::byte* slot_ptr(const Page& p, int64_t i) const;

  std::size_t stride_ = 0;
  int64_t page_rows_ = 0;
  std::size_t page_bytes_ = 0;
  TableMemory fast_;
  memory::Region* base_region_ = nullptr;
  memory::Region* ptr_region_ = nullptr;
  std::byte* base_ = nullptr;
  std::byte* base_end_ = nullptr;
  bool slow_base_ = false;  // the base rows' heap is the slow tier (charged, in_slow)
  std::atomic<std::uintptr_t>* ptrs_ = nullptr;

  std::atomic<std::size_t> cachelower_{0};
  std::atomic<std::size_t> cacheslack_{0};
  std::atomic<bool> caching_{true};
  std::atomic<bool> full_{false};
  std::atomic<bool> flushing_{false};
  AdmissionRule admit_;
  bool admit_all_ = true;

  mutable std::mutex mutex_;  // pages_ and page allocation
  std::deque<std::unique_ptr<Page>> pages_;
  alignas(64) std::atomic<Page*> current_{nullptr};
  std::atomic<std::size_t> cache_bytes_{0};

  std::unique_ptr<Shard[]> shards_;
  // Flush scratch (flushes hold mutex_), reused so that a flush in the step loop does not allocate.
  std::vector<std::uint8_t> fates_;
  std::vector<int64_t> writeback_;
  // Flush-side counters (flushes run alone; atomics only so that readers never race).
  std::atomic<std::uint64_t> rows_written_back_{0}, rows_dropped_{0}, rows_retained_{0}, pages_flushed_{0},
      pages_allocated_{0};
};

}  // namespace strata::emb
