#include "embeddings/policy.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <numeric>
#include <string>

#include "core/error.h"
#include "core/text.h"
#include "core/threading.h"
#include "memory/heap.h"
#include "memory/slow_tier_model.h"

namespace strata::emb {

const char* policy_name(EmbeddingPolicy policy) {
  switch (policy) {
    case EmbeddingPolicy::Simple: return "simple";
    case EmbeddingPolicy::Static: return "static";
    case EmbeddingPolicy::Dynamic: return "dynamic";
    case EmbeddingPolicy::Auto: return "auto";
  }
  return "?";
}

EmbeddingPolicy parse_embedding_policy(std::string_view text) {
  for (auto p : {EmbeddingPolicy::Simple, EmbeddingPolicy::Static, EmbeddingPolicy::Dynamic, EmbeddingPolicy::Auto})
    if (text == policy_name(p)) return p;
  STRATA_FAIL("embedding policy ", quote_field(text), " is not known; expected simple, static, dynamic or auto");
}

int poisson_rare_count(double lambda, int64_t n) {
  STRATA_CHECK(std::isfinite(lambda) && lambda >= 0.0, "poisson_rare_count: lambda must be finite and >= 0, got ",
               lambda);
  STRATA_CHECK(n > 0, "poisson_rare_count: n must be positive, got ", n);
  if (lambda == 0.0) return 1;
  // Upper tails tail[t] = P(X >= t) for t in [0, 256], summed from the top so that tiny tails keep
  // their precision; terms in log space (lambda up to 255 overflows nothing).
  constexpr int kMax = 256;
  constexpr int kTop = 700;  // terms beyond are < 1e-300 for lambda <= 255
  // log(k!) by summation: std::lgamma writes the global `signgam`, a data race when several
  // tables run their hooks at once.
  double log_fact[kTop + 1];
  log_fact[0] = 0.0;
  for (int k = 1; k <= kTop; ++k) log_fact[k] = log_fact[k - 1] + std::log(static_cast<double>(k));
  double tail = 0.0;
  double tails[kMax + 1];
  for (int k = kTop; k >= 0; --k) {
    tail += std::exp(-lambda + k * std::log(lambda) - log_fact[k]);
    if (k <= kMax) tails[k] = tail;
  }
  for (int t = 0; t <= kMax; ++t)
    if (static_cast<double>(n) * tails[t] < 1.0) return t;
  return kMax;
}

namespace {
// Auto's flag byte (meta_[2r + 1]): (epoch << 2) | state, state 1 = seen once, 2 = seen twice or
// more in the batch of that epoch.
constexpr std::uint8_t kSeenOnce = 1, kSeenTwice = 2;
constexpr std::uint8_t kMaxEpoch = 63;
// Without skew (and repeats not worth evictions) one batch in this many is counted.
constexpr uint64_t kSampleEvery = 4;
// ... once this many batches have been counted (so skew present from the start is found at once).
constexpr uint64_t kCountedFirst = 16;
// Auto's bookkeeping is split over kParts partitions of the rows (a multiplicative hash), so that
// threads can count disjoint rows without atomics; batches below kParallelIndices stay serial.
constexpr int kParts = 8;
constexpr std::size_t kParallelIndices = 16384;
inline int part_of(int64_t r) { return static_cast<int>((static_cast<uint64_t>(r) * 0x9E3779B97F4A7C15ull) >> 61); }
}  // namespace

struct ManagedTable::CountPart {
  std::vector<int64_t> marked;             // first occurrences, in index order
  std::array<int64_t, 256> hist_delta;     // change of histogram_
  uint64_t sum = 0;                        // increments (not saturated)
  int64_t wanted = 0;                      // uncached repeating rows
  std::array<int64_t, 256> cand_hist;      // auto_plan: uncached rows above the coldest victim, per count
  std::array<int64_t, 256> cand_new_hist;  // auto_plan: of those, the ones not repeating in the batch
  int64_t candidates = 0;                  // auto_plan: sum of cand_hist
  int64_t wanted_by_count = 0;             // auto_plan: candidates already admitted by count
};

ManagedTable::~ManagedTable() {
  table_.reset();
  if (meta_region_ != nullptr) meta_heap_->free(meta_region_);
}

std::unique_ptr<ManagedTable> make_table(EmbeddingPolicy policy, int64_t rows, int64_t featuresize, ElemType type,
                                         TableMemory fast, TableMemory slow, double cache_fraction,
                                         const PolicyOptions& options) {
  const char* pname = policy_name(policy);
  STRATA_CHECK(rows > 0, "make_table(", pname, "): rows must be positive, got ", rows);
  STRATA_CHECK(featuresize > 0, "make_table(", pname, "): featuresize must be positive, got ", featuresize);
  STRATA_CHECK(std::isfinite(cache_fraction) && cache_fraction >= 0.0 && cache_fraction <= 1.0, "make_table(", pname,
               "): cache_fraction must be in [0, 1], got ", cache_fraction);
  STRATA_CHECK(options.pages >= 1, "make_table(", pname, "): PolicyOptions::pages must be >= 1, got ", options.pages);
  STRATA_CHECK(options.auto_window >= 1, "make_table(", pname, "): PolicyOptions::auto_window must be >= 1, got ",
               options.auto_window);
  STRATA_CHECK(options.auto_max_pages >= 1, "make_table(", pname, "): PolicyOptions::auto_max_pages must be >= 1, got ",
               options.auto_max_pages);
  STRATA_CHECK(std::isfinite(options.auto_min_swap) && options.auto_min_swap >= 0.0 && options.auto_min_swap <= 1.0,
               "make_table(", pname, "): PolicyOptions::auto_min_swap must be in [0, 1], got ", options.auto_min_swap);
  STRATA_CHECK(slow.heap != nullptr, "make_table(", pname, "): no slow heap given for the table's rows");
  for (std::size_t i = 0; i < options.hot_rows.size(); ++i)
    STRATA_CHECK(options.hot_rows[i] >= 0 && options.hot_rows[i] < rows, "make_table(", pname, "): hot row ",
                 options.hot_rows[i], " at position ", i, " is out of range [0, ", rows, ")");

  std::unique_ptr<ManagedTable> m(new ManagedTable);
  m->policy_ = policy;
  m->options_ = options;
  m->options_.hot_rows = {};  // not kept: the span's owner may go away
  if (policy == EmbeddingPolicy::Simple) {
    m->table_ = std::make_unique<SimpleTable>(rows, featuresize, type, slow);
    return m;
  }
  STRATA_CHECK(fast.heap != nullptr, "make_table(", pname, "): no fast heap given for the cache");

  // Geometry: options.pages whole pages of page_rows rows, at most cache_fraction × rows in all.
  const auto target = static_cast<int64_t>(std::floor(cache_fraction * static_cast<double>(rows)));
  const int64_t page_rows = std::max<int64_t>(1, target / options.pages);
  const int64_t npages = target / page_rows;
  m->cache_rows_ = npages * page_rows;
  m->npages_ = npages;
  const std::size_t stride = (static_cast<std::size_t>(featuresize) * elem_size(type) + 7) & ~std::size_t{7};
  const std::size_t page_bytes = static_cast<std::size_t>(page_rows) * (stride + sizeof(std::uintptr_t));
  const std::size_t limit = static_cast<std::size_t>(npages) * page_bytes;

  CachedTableOptions copt;
  copt.page_rows = page_rows;
  if (policy == EmbeddingPolicy::Dynamic && npages > 0) {
    copt.cachelower = limit - page_bytes;
    copt.cacheslack = page_bytes;
  } else {  // Static and Auto: the whole cache, filled at the start
    copt.cachelower = limit;
    copt.cacheslack = 0;
  }
  auto table = std::make_unique<CachedTable>(rows, featuresize, type, slow, fast, copt);
  m->cached_ = table.get();
  m->table_ = std::move(table);

  if (policy == EmbeddingPolicy::Auto) {
    m->meta_heap_ = fast.heap;
    m->meta_region_ = fast.heap->allocate(2 * static_cast<std::size_t>(rows), nullptr);
    STRATA_CHECK(m->meta_region_ != nullptr, "make_table(auto): the ", fast.heap->name(),
                 " heap has no room for the access counters (", 2 * rows, " bytes asked, largest free block ",
                 fast.heap->largest_free(), ")");
    m->meta_ = static_cast<std::uint8_t*>(m->meta_region_->data());
    std::memset(m->meta_, 0, 2 * static_cast<std::size_t>(rows));
    m->histogram_.assign(256, 0);
    m->histogram_[0] = static_cast<uint64_t>(rows);
    m->window_ =
        static_cast<uint64_t>(std::max<int64_t>(1, options.auto_window * std::max<int64_t>(1, m->cache_rows_)));
    m->skew_rows_ = std::max<int64_t>(8, m->cache_rows_ / 100);
    if (slow.throttle != nullptr && slow.throttle->enabled()) {
      const memory::SlowTierModel& mod = slow.throttle->model();
      const double rd = mod.random_read_gbps > 0 ? mod.random_read_gbps : mod.read_gbps;
      const double wr = mod.random_write_gbps > 0 ? mod.random_write_gbps : mod.write_gbps;
      m->repeats_need_cheap_writes_ = wr < rd;
    }
  }
  if (policy == EmbeddingPolicy::Static || policy == EmbeddingPolicy::Auto) {
    m->fill(options.hot_rows, options.seed);
    if (policy == EmbeddingPolicy::Static) m->cached_->set_caching(false);
    // Auto: caching stays enabled behind the admission rule (Note [Auto embedding policy]).
    if (policy == EmbeddingPolicy::Auto) m->auto_rule();
  }
  m->cached_->reset_cache_counters();
  return m;
}

namespace {
// SplitMix64: a small seeded generator for the random fill.
uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
}  // namespace

void ManagedTable::fill(std::span<const int64_t> hot_rows, uint64_t seed) {
  CachedTable& t = *cached_;
  for (int64_t r : hot_rows) {
    if (t.is_full()) return;
    t.access_and_cache(r);
  }
  const int64_t n = t.nvectors();
  uint64_t state = seed;
  if (cache_rows_ * 2 <= n) {
    // Rejection sampling; the pointer table's cached bit is the set of rows taken.
    while (!t.is_full()) {
      const auto r = static_cast<int64_t>(splitmix64(state) % static_cast<uint64_t>(n));
      if (!t.is_cached(r)) t.access_and_cache(r);
    }
    return;
  }
  // A large fraction: a seeded random permutation of all rows.
  std::vector<int64_t> perm(static_cast<std::size_t>(n));
  std::iota(perm.begin(), perm.end(), int64_t{0});
  for (int64_t i = n - 1; i > 0; --i)
    std::swap(perm[static_cast<std::size_t>(i)],
              perm[static_cast<std::size_t>(splitmix64(state) % static_cast<uint64_t>(i + 1))]);
  for (int64_t r : perm) {
    if (t.is_full()) return;
    if (!t.is_cached(r)) t.access_and_cache(r);
  }
}

void ManagedTable::before_lookup(std::span<const int64_t> indices) {
  if (policy_ != EmbeddingPolicy::Auto) return;
  const int64_t n = table_->nvectors();
  // Without skew, and with repeats taking only free slots (step 4), a batch can change nothing but
  // the counts: then (after the first kCountedFirst batches) only every kSampleEvery-th batch is
  // counted, enough to notice skew when it appears. The others do not read their indices at all
  // (the lookup kernel range-checks every index itself); their admission rule admits nothing (no
  // flag carries epoch 0; no count reaches 256).
  if (!skewed_ && repeats_need_cheap_writes_ && counted_ >= kCountedFirst && ++unsampled_ % kSampleEvery != 0) {
    admit_min_ = 256;
    const std::uint8_t epoch = epoch_;
    epoch_ = 0;
    auto_rule();
    epoch_ = epoch;
    return;
  }
  // The whole batch is range-checked before anything is counted; large batches are checked in
  // the pass that groups them by row partition.
  const bool grouped = indices.size() >= kParallelIndices;
  if (grouped)
    group_by_part(indices);
  else
    check_range(indices);
  if (epoch_ == kMaxEpoch) {  // flags of 63 batches ago would alias: clear them all
    for (int64_t r = 0; r < n; ++r) flag_of(r) = 0;
    epoch_ = 0;
  }
  ++epoch_;
  ++counted_;
  auto_count(indices, grouped);

  // The skew test (Note [Auto embedding policy], step 3).
  const double lambda = static_cast<double>(count_sum_) / static_cast<double>(n);
  const int thr = poisson_rare_count(lambda, n);
  int64_t significant = 0;
  for (int c = thr; c < 256; ++c) significant += static_cast<int64_t>(histogram_[static_cast<std::size_t>(c)]);
  skewed_ = significant >= skew_rows_;
  if (!skewed_) admit_min_ = 256;
  auto_state_.mean_count = lambda;
  auto_state_.threshold = thr;
  auto_state_.significant_rows = significant;
  auto_plan();
  auto_rule();
  auto_state_.admit_min = admit_min_;
  auto_state_.retain_min = retain_min_;
}

void ManagedTable::auto_rule() {
  CachedTable::AdmissionRule rule;
  rule.flags = meta_ + 1;
  rule.counts = meta_;
  rule.stride = 2;
  rule.flag_value = static_cast<std::uint8_t>((epoch_ << 2) | kSeenTwice);
  rule.min_count = admit_min_;
  cached_->set_admission(rule);
}

// One pass over the batch: counts, epoch flags, the distinct rows, and the uncached repeating rows.
// Large batches are grouped by row partition and the partitions counted in parallel; marked_ then
// lists the partitions' first occurrences one partition after the other (deterministic).
void ManagedTable::check_range(std::span<const int64_t> indices) const {
  const int64_t n = table_->nvectors();
  for (std::size_t i = 0; i < indices.size(); ++i)
    STRATA_CHECK(indices[i] >= 0 && indices[i] < n, "embedding ", table_->name(), ": index ", indices[i],
                 " at position ", i, " is out of range [0, ", n, ")");
}

void ManagedTable::group_by_part(std::span<const int64_t> indices) {
  static_assert(std::tuple_size_v<decltype(part_start_)> == kParts + 1);
  const auto n = static_cast<uint64_t>(table_->nvectors());
  part_start_.fill(0);
  bool bad = false;  // part_of takes any value, so the check can wait for the end of the pass
  for (int64_t r : indices) {
    bad |= static_cast<uint64_t>(r) >= n;
    ++part_start_[static_cast<std::size_t>(part_of(r)) + 1];
  }
  if (bad) check_range(indices);  // throws, naming the first bad index and its position
  for (int p = 0; p < kParts; ++p) part_start_[p + 1] += part_start_[p];
  bucketed_.resize(indices.size());
  std::array<std::size_t, kParts> pos;
  std::copy(part_start_.begin(), part_start_.begin() + kParts, pos.begin());
  for (int64_t r : indices) bucketed_[pos[static_cast<std::size_t>(part_of(r))]++] = r;
}

void ManagedTable::auto_count(std::span<const int64_t> indices, bool grouped) {
  if (parts_.empty())
    for (int p = 0; p < kParts; ++p) parts_.push_back(std::make_unique<CountPart>());
  const std::size_t size = indices.size();
  int used = 1;
  if (!grouped) {
    count_part(indices, *parts_[0]);
  } else {
    parallel_for(kParts, 1, [&](int64_t b, int64_t e) {
      for (int64_t p = b; p < e; ++p)
        count_part(std::span<const int64_t>(bucketed_.data() + part_start_[p], part_start_[p + 1] - part_start_[p]),
                   *parts_[p]);
    });
    used = kParts;
  }
  marked_.clear();
  marked_ends_.clear();
  wanted_ = 0;
  for (int p = 0; p < used; ++p) {
    const CountPart& part = *parts_[p];
    for (std::size_t c = 0; c < 256; ++c)
      histogram_[c] = static_cast<uint64_t>(static_cast<int64_t>(histogram_[c]) + part.hist_delta[c]);
    count_sum_ += part.sum;
    wanted_ += part.wanted;
    marked_.insert(marked_.end(), part.marked.begin(), part.marked.end());
    marked_ends_.push_back(marked_.size());
  }
  since_aging_ += size;
  if (since_aging_ >= window_) auto_age();
}

void ManagedTable::count_part(std::span<const int64_t> rows, CountPart& part) {
  part.marked.clear();
  part.hist_delta.fill(0);
  part.sum = 0;
  part.wanted = 0;
  const CachedTable& t = *cached_;
  const std::size_t size = rows.size();
  constexpr std::size_t kAhead = 16;  // the counters are a random access each: keep several in flight
  for (std::size_t i = 0; i < size; ++i) {
    if (i + kAhead < size) __builtin_prefetch(meta_ + 2 * rows[i + kAhead], 1, 3);
    const int64_t r = rows[i];
    std::uint8_t& c = count_of(r);
    if (c != 255) {
      --part.hist_delta[c];
      ++part.hist_delta[c + 1];
      ++c;
      ++part.sum;
    }
    std::uint8_t& f = flag_of(r);
    if ((f >> 2) != epoch_) {
      f = static_cast<std::uint8_t>((epoch_ << 2) | kSeenOnce);
      part.marked.push_back(r);
    } else if ((f & 3) == kSeenOnce) {
      f = static_cast<std::uint8_t>((epoch_ << 2) | kSeenTwice);
      part.wanted += !t.is_cached(r);
    }
  }
}

void ManagedTable::auto_age() {
  const int64_t n = table_->nvectors();
  std::fill(histogram_.begin(), histogram_.end(), 0);
  uint64_t sum = 0;
  for (int64_t r = 0; r < n; ++r) {
    const auto c = static_cast<std::uint8_t>(count_of(r) >> 1);
    count_of(r) = c;
    ++histogram_[c];
    sum += c;
  }
  count_sum_ = sum;
  since_aging_ = 0;
}

void ManagedTable::auto_plan() {
  CachedTable& t = *cached_;
  retain_min_ = 256;
  if (npages_ == 0 || t.npages() == 0) return;
  const auto page_rows = static_cast<std::size_t>(t.page_rows());
  const std::size_t max_pages = std::min<std::size_t>(static_cast<std::size_t>(options_.auto_max_pages), t.npages());
  int64_t wanted = wanted_;
  auto in_batch = [&](int64_t r) { return (flag_of(r) >> 2) == epoch_; };

  // Step 3: pair candidates against victims of the oldest pages.
  std::size_t skew_pages = 0;
  if (skewed_) {
    victims_.clear();
    page_ends_.clear();
    for (std::size_t p = 0; p < max_pages; ++p) {
      t.append_page_rows(p, victims_);
      page_ends_.push_back(victims_.size());
    }
    int coldest = 256;
    for (int64_t r : victims_)
      if (!in_batch(r)) coldest = std::min<int>(coldest, count_of(r));
    // Candidates, per partition of marked_ (in parallel for large batches). Only their counts
    // matter to the pairing below, so each partition keeps a histogram of them (and of those not
    // repeating in the batch) instead of a list to sort.
    auto scan = [&](std::size_t p) {
      CountPart& part = *parts_[p];
      part.cand_hist.fill(0);
      part.cand_new_hist.fill(0);
      part.candidates = 0;
      part.wanted_by_count = 0;
      const std::size_t b = p == 0 ? 0 : marked_ends_[p - 1], e = marked_ends_[p];
      constexpr std::size_t kAhead = 16;
      for (std::size_t i = b; i < e; ++i) {
        if (i + kAhead < e) {
          __builtin_prefetch(meta_ + 2 * marked_[i + kAhead], 0, 3);
          t.prefetch_entry(marked_[i + kAhead]);
        }
        const int64_t r = marked_[i];
        const int c = count_of(r);
        if (c <= coldest || t.is_cached(r)) continue;
        const bool repeats = (flag_of(r) & 3) == kSeenTwice;  // counted by auto_count already
        // Rows counted up to the admission threshold are admitted already.
        part.wanted_by_count += c >= admit_min_ && !repeats;
        ++part.cand_hist[static_cast<std::size_t>(c)];
        part.cand_new_hist[static_cast<std::size_t>(c)] += !repeats;
        ++part.candidates;
      }
    };
    const std::size_t nparts = marked_ends_.size();
    if (nparts > 1)
      parallel_for(static_cast<int64_t>(nparts), 1, [&](int64_t b, int64_t e) {
        for (int64_t p = b; p < e; ++p) scan(static_cast<std::size_t>(p));
      });
    else
      scan(0);
    std::array<int64_t, 256> cand{}, cand_new{}, vict{};
    int64_t ncand = 0;
    for (std::size_t p = 0; p < nparts; ++p) {
      const CountPart& part = *parts_[p];
      for (std::size_t c = 0; c < 256; ++c) {
        cand[c] += part.cand_hist[c];
        cand_new[c] += part.cand_new_hist[c];
      }
      ncand += part.candidates;
      wanted += part.wanted_by_count;
    }
    if (ncand > 0) {
      const std::size_t pages =
          std::clamp<std::size_t>((static_cast<std::size_t>(ncand) + page_rows - 1) / page_rows, 1, max_pages);
      const std::size_t examined = page_ends_[pages - 1];
      for (std::size_t i = 0; i < examined; ++i)
        if (!in_batch(victims_[i])) ++vict[count_of(victims_[i])];
      // Pair the i-th hottest candidate with the i-th coldest victim while the candidate is
      // counted higher: k pairs, the last pair's counts are the new thresholds.
      int ci = 255, vi = 0;
      int64_t rc = cand[255], rv = vict[0];
      int64_t k = 0;
      int last_c = 0, last_v = 0;
      for (;;) {
        while (ci >= 0 && rc == 0) rc = --ci >= 0 ? cand[static_cast<std::size_t>(ci)] : 0;
        while (vi < 256 && rv == 0) rv = ++vi < 256 ? vict[static_cast<std::size_t>(vi)] : 0;
        if (ci < 0 || vi >= 256 || ci <= vi) break;
        const int64_t m = std::min(rc, rv);
        k += m;
        rc -= m;
        rv -= m;
        last_c = ci;
        last_v = vi;
      }
      if (k > 0 && static_cast<double>(k) >= options_.auto_min_swap * static_cast<double>(examined)) {
        retain_min_ = last_v + 1;
        const int admit_min = std::max<int>(last_c, retain_min_);
        // Newly admitted by count: the rule admits every row counted >= admit_min.
        for (int c = admit_min; c < admit_min_ && c < 256; ++c) wanted += cand_new[static_cast<std::size_t>(c)];
        admit_min_ = admit_min;
        skew_pages = pages;
      }
    }
  }

  // Step 4: room for what is to be admitted. Without skew the wanted rows are the batch's repeats:
  // admitting one saves slow reads of its later occurrences, but room for it evicts a row that
  // the updates have dirtied, whose write-back costs a slow write. When the slow tier's row writes
  // are dearer than its reads (the Optane model: 0.10 against 0.24 of DRAM), that trade loses, so
  // repeats then only take free slots.
  if (!skewed_ && repeats_need_cheap_writes_) return;
  const int64_t need = wanted - t.free_slots();
  std::size_t pages = skew_pages;
  if (need > 0)
    pages = std::max(pages, static_cast<std::size_t>((need + static_cast<int64_t>(page_rows) - 1) /
                                                     static_cast<int64_t>(page_rows)));
  pages = std::min(pages, max_pages);
  if (pages == 0) return;
  if (!skewed_) retain_min_ = 256;  // retain only the coming batch's rows
  const CacheCounters before = t.cache_counters();
  // Retained: rows counted above the evicted victims, and the coming batch's rows.
  t.retire_oldest(pages, /*write_back=*/true,
                  [this](int64_t r) { return count_of(r) >= retain_min_ || (flag_of(r) >> 2) == epoch_; });
  const CacheCounters after = t.cache_counters();
  ++swap_batches_;
  rows_evicted_ += (after.rows_written_back - before.rows_written_back) + (after.rows_dropped - before.rows_dropped);
}

void ManagedTable::after_update() {
  if (cached_ == nullptr) return;
  if (policy_ == EmbeddingPolicy::Dynamic && cached_->is_full()) cached_->flush_dirty();
  cached_->settle_charges();
}

PolicyStats ManagedTable::stats() const {
  PolicyStats s;
  s.policy = policy_;
  s.cache_rows = cache_rows_;
  if (cached_ != nullptr) s.cache = cached_->cache_counters();
  s.slow = table_->counters();
  s.skewed = skewed_;
  s.swap_batches = swap_batches_;
  s.rows_evicted = rows_evicted_;
  return s;
}

void ManagedTable::reset_stats() {
  if (cached_ != nullptr) cached_->reset_cache_counters();
  table_->reset_counters();
  swap_batches_ = rows_evicted_ = 0;
}

}  // namespace strata::emb
