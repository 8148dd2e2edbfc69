#pragma once
/// @file
/// Internal: the simulated accelerator's data cache (TapeFlow §III, Table III): set-associative,
/// LRU, write-back, write-allocate, with a configurable size, associativity and line size. It
/// serves the datapath's Load/Store (program arrays) and, in Enzyme-style execution,
/// TapeLoad/TapeStore; hits, misses and writebacks are counted per access class. The cache holds
/// tags and the time at which each line's fill completes; the machine (sim/machine.h) owns the
/// timing around it. Its configuration and statistics (CacheConfig, CacheStats) are public, in
/// sim/machine.h; the model is not part of the public API.

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "sim/machine.h"

namespace strata::sim::detail {

/// What one access did.
struct CacheOutcome {
  bool hit = false;
  bool writeback = false;    ///< a dirty victim was evicted (its line must go to DRAM)
  uint64_t victim_line = 0;  ///< byte address of the evicted dirty line (when writeback)
  uint64_t line = 0;         ///< byte address of the accessed line
  uint64_t ready_at = 0;     ///< on a hit: when the line's fill completes (0 if long done)
  uint32_t way = 0;          ///< the line's frame (for set_ready after a miss)
};

class Cache {
 public:
  /// Throws strata::Error when the geometry is invalid (sizes not powers of two, the size not a
  /// multiple of line_bytes x associativity, zero ports or MSHRs).
  explicit Cache(const CacheConfig& config);

  const CacheConfig& config() const { return config_; }

  /// One access to the line holding byte `addr`: a hit refreshes LRU (and marks the line dirty on
  /// a write); a miss evicts the set's LRU line (reporting it when dirty) and installs the line
  /// (write-allocate), dirty on a write. Counts the access under `cls`.
  CacheOutcome access(uint64_t addr, bool write, AccessClass cls);

  /// Records when the fill of the frame `way` (from a missing access) completes.
  void set_ready(uint32_t way, uint64_t cycle) { ready_[way] = cycle; }

  /// Whether the line holding `addr` is present (no LRU update, no counting).
  bool contains(uint64_t addr) const;

  const CacheStats& stats() const { return stats_; }
  void reset_stats() { stats_ = {}; }
  uint64_t num_sets() const { return sets_; }
  uint32_t ways() const { return ways_; }

 private:
  int32_t find(uint64_t set, uint64_t tag) const;

  CacheConfig config_;
  uint64_t sets_ = 0;
  uint32_t ways_ = 0;
  uint32_t line_shift_ = 0;
  // per frame (set * ways_ + w): tag, state, LRU links within the set
  std::vector<uint64_t> tag_;
  std::vector<uint64_t> ready_;
  std::vector<uint8_t> valid_, dirty_, cls_;
  std::vector<int32_t> prev_, next_;             // LRU list: head = most recent
  std::vector<int32_t> head_, tail_;             // per set
  std::unordered_map<uint64_t, int32_t> index_;  // line -> frame, for wide sets
  CacheStats stats_;
};

}  // namespace strata::sim::detail
