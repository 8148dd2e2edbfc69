#pragma once
/// @file
/// Costs for the Auto planner (planner.h): per-(op, shapes) forward times measured once and cached
/// by signature, and the copy bandwidths between the tiers each way.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "autograd/remat/planner.h"

namespace strata::remat {

/// Times closures once per signature (e.g. "Linear(8, 16) [4, 8]"): one warm-up run, then the
/// median of `repeats` timed runs, in seconds. Later calls with the same signature return the
/// cached time without running the closure. Not thread-safe.
class OpProfiler {
 public:
  /// Throws strata::Error when repeats < 1.
  explicit OpProfiler(int repeats = 3);
  /// Throws strata::Error when `fn` is empty or the signature is empty.
  double time(const std::string& signature, const std::function<void()>& fn);
  bool cached(const std::string& signature) const { return times_.count(signature) != 0; }
  std::size_t size() const { return times_.size(); }
  /// How many closures were actually timed (cache misses).
  int64_t measurements() const { return measurements_; }

 private:
  int repeats_;
  std::map<std::string, double> times_;
  int64_t measurements_ = 0;
};

/// The copy bandwidths of the default tiered memory, bytes per second: from the slow-tier model
/// (memory/slow_tier_model.h) when it is on (write bandwidth fast->slow, read bandwidth
/// slow->fast); otherwise measured by evicting and prefetching a `probe_bytes` tensor through the
/// tiered memory's mover (TieredMemory::evict_async / prefetch_async), best of three; the CPU
/// time of those moves (the process's, while the caller waits) per byte moved both ways is
/// `cpu_seconds_per_byte` in either case (least of three). Throws
/// strata::Error when the default allocator is not the tiered memory or probe_bytes is 0.
CopyBandwidth copy_bandwidth(std::size_t probe_bytes = std::size_t{8} << 20);

}  // namespace strata::remat
