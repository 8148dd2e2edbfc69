#include "sim/detail/cache.h"

#include <bit>

#include "core/error.h"

namespace strata::sim::detail {

namespace {
constexpr uint32_t kScanWays = 16;  // sets wider than this are searched through index_
}

Cache::Cache(const CacheConfig& c) : config_(c) {
  STRATA_CHECK(c.line_bytes >= 8 && std::has_single_bit(c.line_bytes),
               "sim::Cache: line_bytes must be a power of two >= 8, got ", c.line_bytes);
  STRATA_CHECK(c.size_bytes >= c.line_bytes && std::has_single_bit(c.size_bytes),
               "sim::Cache: size_bytes must be a power of two >= line_bytes (", c.line_bytes, "), got ", c.size_bytes);
  const uint64_t lines = c.size_bytes / c.line_bytes;
  const uint64_t ways = c.associativity == 0 ? lines : c.associativity;
  STRATA_CHECK(ways <= lines && lines % ways == 0 && std::has_single_bit(ways), "sim::Cache: associativity ",
               c.associativity, " does not divide the ", lines, " lines of a ", c.size_bytes, "-byte cache with ",
               c.line_bytes, "-byte lines (expected a power of two <= ", lines, ", or 0 for fully associative)");
  STRATA_CHECK(c.ports > 0, "sim::Cache: ports must be > 0");
  STRATA_CHECK(c.mshrs > 0, "sim::Cache: mshrs must be > 0");
  ways_ = static_cast<uint32_t>(ways);
  sets_ = lines / ways;
  line_shift_ = static_cast<uint32_t>(std::countr_zero(c.line_bytes));
  tag_.assign(lines, 0);
  ready_.assign(lines, 0);
  valid_.assign(lines, 0);
  dirty_.assign(lines, 0);
  cls_.assign(lines, 0);
  prev_.assign(lines, -1);
  next_.assign(lines, -1);
  head_.assign(sets_, -1);
  tail_.assign(sets_, -1);
  // Initial LRU order per set: frame 0 most recent ... frame ways-1 least recent (all invalid).
  for (uint64_t s = 0; s < sets_; ++s) {
    const int32_t base = static_cast<int32_t>(s * ways_);
    for (uint32_t w = 0; w < ways_; ++w) {
      prev_[base + w] = w == 0 ? -1 : base + static_cast<int32_t>(w) - 1;
      next_[base + w] = w + 1 == ways_ ? -1 : base + static_cast<int32_t>(w) + 1;
    }
    head_[s] = base;
    tail_[s] = base + static_cast<int32_t>(ways_) - 1;
  }
}

int32_t Cache::find(uint64_t set, uint64_t tag) const {
  if (ways_ <= kScanWays) {
    const uint64_t base = set * ways_;
    for (uint32_t w = 0; w < ways_; ++w)
      if (valid_[base + w] && tag_[base + w] == tag) return static_cast<int32_t>(base + w);
    return -1;
  }
  const auto it = index_.find(tag * sets_ + set);
  return it == index_.end() ? -1 : it->second;
}

bool Cache::contains(uint64_t addr) const {
  const uint64_t line = addr >> line_shift_;
  return find(line % sets_, line / sets_) >= 0;
}

CacheOutcome Cache::access(uint64_t addr, bool write, AccessClass cls) {
  const uint64_t line = addr >> line_shift_;
  const uint64_t set = line % sets_;
  const uint64_t tag = line / sets_;
  CacheOutcome out;
  out.line = line << line_shift_;
  CacheClassStats& st = stats_.cls[static_cast<int>(cls)];
  int32_t f = find(set, tag);
  if (f >= 0) {
    ++st.hits;
    out.hit = true;
    out.ready_at = ready_[f];
  } else {
    ++st.misses;
    f = tail_[set];  // LRU victim
    if (valid_[f]) {
      if (dirty_[f]) {
        out.writeback = true;
        out.victim_line = ((tag_[f] * sets_) + set) << line_shift_;
        ++stats_.cls[cls_[f]].writebacks;
      }
      if (ways_ > kScanWays) index_.erase(tag_[f] * sets_ + set);
    }
    tag_[f] = tag;
    valid_[f] = 1;
    dirty_[f] = 0;
    ready_[f] = 0;
    if (ways_ > kScanWays) index_[line] = f;
  }
  if (write) dirty_[f] = 1;
  cls_[f] = static_cast<uint8_t>(cls);
  // move to MRU
  if (head_[set] != f) {
    const int32_t p = prev_[f], n = next_[f];
    if (p >= 0) next_[p] = n;
    if (n >= 0) prev_[n] = p;
    if (tail_[set] == f) tail_[set] = p;
    prev_[f] = -1;
    next_[f] = head_[set];
    prev_[head_[set]] = f;
    head_[set] = f;
  }
  out.way = static_cast<uint32_t>(f);
  return out;
}

}  // namespace strata::sim::detail
