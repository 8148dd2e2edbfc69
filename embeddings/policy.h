#pragma once
/// @file
/// Embedding-table placement policies (dissertation §5.6.1) and the per-batch hooks the training
/// loop calls. `make_table` builds the table a policy needs from a fast and a slow heap and a cache
/// fraction, and returns it wrapped in a ManagedTable whose hooks run the policy:
///
///     auto m = make_table(EmbeddingPolicy::Auto, rows, d, ElemType::F32, fast, slow, 0.10);
///     for each batch:
///       m->before_lookup(bag_indices);   // between phases: counting, planned swaps
///       lookup(m->table(), ...);         // Forward accesses (many threads)
///       ...backward...
///       update(m->table(), ...);         // Update accesses (many threads)
///       m->after_update();               // between phases: flushes
///
/// Policies:
///  - Simple: a SimpleTable in the slow heap; no indirection, nothing cached.
///  - Static: a CachedTable whose cache pages are filled at the start with random rows (§5.6.1),
///    or with the given hottest rows first (PolicyOptions::hot_rows, e.g. hottest_rows() of an
///    access profile: REFERENCE.md §2's static optimum), then dynamic caching is disabled.
///  - Dynamic: a CachedTable that caches rows on lookup; when the cache limit is reached the oldest
///    page is cleaned up (§5.6.1): cachelower = limit − one page, cacheslack = one page, and
///    after_update() calls flush_dirty() once the cache is full.
///  - Auto: ours (Note [Auto embedding policy]).
///
/// Note [Auto embedding policy]
/// Auto starts as Static (the same random or hot fill) and uses what the training loop knows —
/// the coming batch (lookahead: before_lookup sees its indices) and the access history — to move
/// rows only where that pays. Per row it keeps two bytes in the fast heap (beside the 8-byte
/// pointer table): a saturating access count and a batch flag (a 6-bit batch epoch and "seen
/// once"/"seen twice"; epochs make clearing the flags unnecessary except every 63 batches).
/// before_lookup makes one pass over the batch's indices, then plans:
///  1. Counting: every index bumps its row's count (exact, unlike a sketch, whose collision
///     error near the admission boundary is as large as the counts themselves). Every
///     auto_window × (cache rows) accesses all counts are halved (aging).
///  2. Within-batch repeats: an uncached row that occurs twice or more in the coming batch is
///     admitted on its first miss, so its later occurrences hit. The move replaces the slow read
///     that miss needs anyway, the row's update then hits the fast tier, and its eventual
///     write-back replaces the slow write of that update. Under iid uniform indices this is the
///     only thing that can beat Static's hit rate (any C rows hit C/N of the accesses), and it
///     is what gives Dynamic its edge there.
///  3. Skew test: with λ the mean count, t is the smallest count that fewer than one row would
///     reach under uniform (Poisson(λ)) indices; the inputs count as skewed while at least
///     max(8, cache rows / 100) rows have counts >= t. Skewed: victims are the rows of the oldest
///     pages (at most auto_max_pages) that are not in the coming batch, candidates the uncached
///     rows of the batch counted above the coldest victim. Sorting victims by count ascending
///     and candidates descending, the first k pairs where the candidate's count exceeds the
///     victim's decide: rows counted at least candidate_k are admitted on their miss (now and in
///     later batches), victims counted at most victim_k are evicted — when k is at least
///     auto_min_swap of the examined rows, since retiring a page also moves the rows it keeps.
///  4. Room: when the rows to admit exceed the free slots, the oldest pages are retired
///     (retire_oldest, dirty rows written home) while rows of the coming batch and rows counted
///     above the victims are retained (moved to a fresh page in the fast tier). Without skew, when
///     the slow tier's modeled row writes are slower than its row reads, repeats take only free
///     slots: evicting a dirty row to admit a repeat costs a slow write to save a slow read. In
///     that state (no skew, repeats not worth evictions) a batch can only change the counts, so
///     just one batch in four is counted (after the first 16) — enough to notice skew when it appears.
/// The table admits through CachedTable::AdmissionRule (flag == "seen twice in this epoch" or
/// count >= the admission threshold), so admission happens on the miss, never ahead of it, and
/// hit rates stay comparable with Dynamic's. Without skew Auto moves only repeating rows of a
/// batch; with skew its content approaches the static optimum (the hottest rows), where
/// Dynamic's FIFO pages lose several points.

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "embeddings/cached_table.h"
#include "embeddings/table.h"

namespace strata::emb {

enum class EmbeddingPolicy : uint8_t { Simple, Static, Dynamic, Auto };

/// "simple", "static", "dynamic" or "auto".
const char* policy_name(EmbeddingPolicy policy);
/// Parses the names above; throws strata::Error naming the text and the accepted names.
EmbeddingPolicy parse_embedding_policy(std::string_view text);

struct PolicyOptions {
  /// The cache (cache_fraction of the rows) is split into this many pages (§5.6.1: pages are a
  /// fraction of the limit). Must be >= 1.
  int64_t pages = 32;
  /// Seed of Static's (and Auto's) random fill.
  uint64_t seed = 0x5eed;
  /// Static and Auto: rows cached first, hottest first (e.g. hottest_rows() of a profile); the
  /// rest of the cache is filled with random rows. Rows must be in [0, rows).
  std::span<const int64_t> hot_rows = {};
  /// Auto: counters halve every auto_window × cache rows accesses. Must be >= 1.
  int64_t auto_window = 32;
  /// Auto: at most this many oldest pages are examined (and retired) per batch. Must be >= 1.
  int64_t auto_max_pages = 1;
  /// Auto: a page is retired for hotter rows only when at least this fraction of its rows would
  /// be replaced (retiring moves the rows it keeps; repeating rows that need room always count).
  double auto_min_swap = 1.0 / 16;
};

/// What a policy did (totals since construction or reset_stats()).
struct PolicyStats {
  EmbeddingPolicy policy = EmbeddingPolicy::Simple;
  int64_t cache_rows = 0;     ///< capacity of the cache in rows (0 for Simple)
  CacheCounters cache;        ///< the CachedTable's counters (zeros for Simple)
  TableCounters slow;         ///< slow-tier bytes charged to the table (kernels' direct accesses, moves, write-backs)
  bool skewed = false;        ///< Auto: the last skew test's verdict
  uint64_t swap_batches = 0;  ///< Auto: batches in which pages were retired to make room
  uint64_t rows_evicted = 0;  ///< Auto: rows evicted to make room
};

/// A table plus its policy. Not copyable; owns the table.
class ManagedTable {
 public:
  ~ManagedTable();
  ManagedTable(const ManagedTable&) = delete;
  ManagedTable& operator=(const ManagedTable&) = delete;

  EmbeddingPolicy policy() const { return policy_; }
  Table& table() { return *table_; }
  const Table& table() const { return *table_; }
  /// The CachedTable of Static, Dynamic and Auto; nullptr for Simple.
  CachedTable* cached_table() { return cached_; }
  const CachedTable* cached_table() const { return cached_; }
  /// Cache capacity in rows (whole pages; at most cache_fraction × rows).
  int64_t cache_rows() const { return cache_rows_; }

  /// Hook before the lookup of a batch, with all of this table's indices of the batch (between
  /// phases). Auto counts them (throwing strata::Error naming the table, position and row for an
  /// index out of [0, nvectors), before counting anything), decides which rows the lookup may
  /// cache and may retire pages to make room; the others do nothing. A batch Auto does not count
  /// (no skew and repeats not worth evictions: three batches in four) is not read, so its bad
  /// indices are reported by the lookup instead.
  void before_lookup(std::span<const int64_t> indices);
  /// Hook after the update of a batch (between phases): Dynamic flushes the oldest page when the
  /// cache is full; every cached policy settles its pending slow-tier charges.
  void after_update();

  PolicyStats stats() const;
  void reset_stats();

  /// Auto's state, for tests and reports.
  struct AutoState {
    double mean_count = 0;  ///< λ
    int threshold = 0;      ///< t of the skew test
    int64_t significant_rows = 0;
    int admit_min = 256, retain_min = 256;
  };
  AutoState auto_state() const { return auto_state_; }
  /// Auto's access count of `row` (0 for the other policies).
  int access_count(int64_t row) const { return meta_ == nullptr ? 0 : meta_[2 * row]; }

 private:
  friend std::unique_ptr<ManagedTable> make_table(EmbeddingPolicy, int64_t, int64_t, ElemType, TableMemory, TableMemory,
                                                  double, const PolicyOptions&);
  ManagedTable() = default;
  void fill(std::span<const int64_t> hot_rows, uint64_t seed);
  struct CountPart;
  void check_range(std::span<const int64_t> indices) const;
  void group_by_part(std::span<const int64_t> indices);
  void auto_count(std::span<const int64_t> indices, bool grouped);
  void count_part(std::span<const int64_t> rows, CountPart& part);
  void auto_age();
  void auto_plan();
  void auto_rule();
  std::uint8_t& count_of(int64_t r) { return meta_[2 * r]; }
  std::uint8_t& flag_of(int64_t r) { return meta_[2 * r + 1]; }

  EmbeddingPolicy policy_ = EmbeddingPolicy::Simple;
  std::unique_ptr<Table> table_;
  CachedTable* cached_ = nullptr;
  int64_t cache_rows_ = 0;
  int64_t npages_ = 0;
  PolicyOptions options_;

  // Auto: meta_[2r] is row r's access count, meta_[2r + 1] its flag for the coming batch.
  memory::Heap* meta_heap_ = nullptr;
  memory::Region* meta_region_ = nullptr;
  std::uint8_t* meta_ = nullptr;
  int admit_min_ = 256;
  int retain_min_ = 256;
  std::uint8_t epoch_ = 0;                   // 1..63; flags of rows in the coming batch carry it
  int64_t wanted_ = 0;                       // uncached repeating rows of the coming batch
  std::vector<int64_t> marked_;              // distinct rows of the coming batch
  std::vector<int64_t> bucketed_;            // the batch's indices grouped by row partition
  std::array<std::size_t, 9> part_start_{};  // bucketed_ offset of each partition (kParts + 1 entries)
  std::vector<std::unique_ptr<CountPart>> parts_;
  std::vector<std::size_t> marked_ends_;  // marked_ segment of each partition
  std::vector<uint64_t> histogram_;       // rows per count value 0..255
  uint64_t count_sum_ = 0;
  uint64_t since_aging_ = 0;
  uint64_t window_ = 1;
  int64_t skew_rows_ = 8;
  bool skewed_ = false;
  bool repeats_need_cheap_writes_ = false;  // the slow tier's row writes are dearer than its reads
  uint64_t unsampled_ = 0;                  // batches seen while sampling (see before_lookup)
  uint64_t counted_ = 0;                    // batches counted
  uint64_t swap_batches_ = 0, rows_evicted_ = 0;
  AutoState auto_state_;
  std::vector<int64_t> victims_;
  std::vector<size_t> page_ends_;
};

/// Builds the table `policy` needs: `rows` × `featuresize` elements of `type`, base rows in
/// `slow.heap`, and for the cached policies the pointer table, cache pages (cache_fraction of the
/// rows, in options.pages whole pages) and Auto's 2 bytes per row in `fast.heap`; Auto's
/// retaining flushes also want one page of headroom there (without it they evict instead).
/// Static and Auto fill their cache here; the fill is not counted in the cache counters (the
/// slow-tier bytes it moved are). Different tables may run their hooks concurrently. Throws
/// strata::Error for bad sizes, a cache_fraction outside [0, 1], bad options, missing heaps, heaps
/// without room or hot rows out of range (naming the position and the row).
std::unique_ptr<ManagedTable> make_table(EmbeddingPolicy policy, int64_t rows, int64_t featuresize, ElemType type,
                                         TableMemory fast, TableMemory slow, double cache_fraction,
                                         const PolicyOptions& options = {});

/// The skew test's threshold: the smallest t with n × P(Poisson(lambda) >= t) < 1 (at most 256).
int poisson_rare_count(double lambda, int64_t n);

}  // namespace strata::emb
