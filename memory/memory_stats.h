#pragma once
/// @file
/// Statistics of the tiered memory system: bytes moved between the tiers, copies elided, write-backs
/// avoided, direct slow-tier traffic, per-heap current and peak occupancy, and an occupancy
/// timeline exportable as JSON, which Python draws as a PNG (the picture of the dissertation's
/// Figure 4.6; Note [Timeline plots are drawn in Python]).
///
/// Counting is lock-free (relaxed atomics); see Note [Memory statistics are not a consistent cut].

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "memory/tier.h"

namespace strata::memory {

/// Occupancy of one heap, as plain values. Bytes are the sizes the caller reported (requested
/// sizes, or the heap's block sizes: whatever the caller passes to on_alloc/on_free).
struct TierCounters {
  std::size_t current_bytes = 0;  ///< allocated and not yet freed
  std::size_t peak_bytes = 0;     ///< highest current_bytes since construction or reset()
  std::uint64_t allocations = 0;  ///< on_alloc calls
  std::uint64_t frees = 0;        ///< on_free calls
};

/// A count of events and the bytes they involved.
struct CountedBytes {
  std::uint64_t count = 0;
  std::uint64_t bytes = 0;
};

/// Everything MemoryStats counts, as plain values (see MemoryStats::snapshot()).
struct MemoryStatsSnapshot {
  CountedBytes moved_to_slow;                 ///< copies fast → slow (evictions of dirty objects)
  CountedBytes moved_to_fast;                 ///< copies slow → fast (prefetches, fetches on use)
  CountedBytes copies_elided;                 ///< clean evictions: the slow sibling was current, no copy
  CountedBytes writebacks_avoided;            ///< dirty objects freed while fast: never written back
  std::uint64_t direct_slow_read_bytes = 0;   ///< kernels/embeddings reading slow-tier bytes in place
  std::uint64_t direct_slow_write_bytes = 0;  ///< ... and writing them in place
  TierCounters fast;
  TierCounters slow;

  const TierCounters& heap(Tier tier) const { return tier == Tier::Fast ? fast : slow; }
};

/// Limits of an OccupancyTimeline.
struct TimelineConfig {
  /// Most samples kept (at least 8). When full, every other sample is dropped (first and last are
  /// kept) and the minimum interval grows; see Note [Occupancy timeline downsampling].
  std::size_t max_samples = 65536;
  /// Most marks kept (at least 8); thinned the same way when full.
  std::size_t max_marks = 4096;
  /// Unlabeled samples closer than this to the previous sample are not stored (the latest one is
  /// remembered and closes the timeline, so the curve ends at the right level). Seconds, >= 0.
  double min_interval_s = 1e-4;
};

/// One sample: seconds since the timeline started, and bytes in use in each heap.
struct TimelineSample {
  double t = 0;
  std::size_t fast_bytes = 0;
  std::size_t slow_bytes = 0;
};

/// A phase marker ("forward", "backward", "evict", ...) at a time.
struct TimelineMark {
  double t = 0;
  std::string label;
};

/// Heap occupancy over time, for plotting. Thread-safe; bounded in memory; disabled until enable().
///
/// Note [Timeline plots are drawn in Python]
/// The library writes the data (save_json) and never draws it: plotting needs matplotlib, and a
/// library that spawned an interpreter would depend on which Python is on the PATH and whether
/// strata is installed for it, and would fork from inside a multi-threaded process. The drawing is
/// python/strata/memory_plot.py: `python -m strata.memory_plot timeline.json out.png` from the
/// shell, `strata.memory.save_occupancy_plot("out.png")` (or `timeline(path_png=...)`) from Python.
///
/// JSON schema (to_json(), save_json(); read by `python -m strata.memory_plot`), version 1:
/// @code
/// {"version": 1, "unit": "bytes", "time_unit": "s",
///  "fast_capacity": <bytes or null>, "slow_capacity": <bytes or null>,
///  "min_interval": <seconds between stored samples now>,
///  "dropped_samples": <count>, "dropped_marks": <count>,
///  "samples": [[t, fast_bytes, slow_bytes], ...],   // t non-decreasing, seconds since start
///  "marks": [[t, "label"], ...]}
/// @endcode
class OccupancyTimeline {
 public:
  explicit OccupancyTimeline(TimelineConfig config = {});
  OccupancyTimeline(const OccupancyTimeline&) = delete;
  OccupancyTimeline& operator=(const OccupancyTimeline&) = delete;

  /// Turns recording on or off. Turning it on while the timeline is empty restarts its clock, so
  /// time 0 is when recording began. Turning off the timeline of a MemoryStats closes it with a
  /// sample of the heaps' occupancy at that moment.
  void enable(bool on = true);
  bool enabled() const { return enabled_.load(std::memory_order_relaxed); }

  /// Heap capacities drawn as limit lines in the plot; 0 means unknown (JSON null).
  void set_capacity(std::size_t fast_bytes, std::size_t slow_bytes);

  /// Records the heaps' occupancy now. Unlabeled samples are rate-limited by the minimum interval
  /// (without taking the lock). A non-empty label always stores the sample and adds a mark.
  /// No-op while disabled. (The timeline of a MemoryStats ignores the two values and samples the
  /// MemoryStats' own counters instead; see MemoryStats::sample().)
  void record(std::size_t fast_bytes, std::size_t slow_bytes, std::string_view label = {});

  /// Adds a phase marker at the current time. No-op while disabled.
  void mark(std::string_view label);

  /// Drops all samples and marks, restarts the clock, and restores the configured minimum interval.
  void clear();

  /// The samples, oldest first, ending with the latest rate-limited sample if it is newer than the
  /// last stored one (for the timeline of a MemoryStats that is still recording: with the heaps'
  /// occupancy now, if it differs from the last stored sample). At most `config().max_samples`.
  std::vector<TimelineSample> samples() const;
  std::vector<TimelineMark> marks() const;
  /// The current minimum interval between stored unlabeled samples (grows as the run lengthens).
  double min_interval_s() const;
  /// Samples and marks discarded by downsampling so far.
  std::uint64_t dropped_samples() const;
  std::uint64_t dropped_marks() const;
  const TimelineConfig& config() const { return config_; }

  /// The timeline as a JSON object (schema above).
  std::string to_json() const;
  /// Writes to_json() to `path` atomically (via `path.tmp` and rename). Throws strata::Error naming
  /// the path and the system's reason on failure, leaving no partial file behind.
  void save_json(const std::string& path) const;

 private:
  friend class MemoryStats;
  struct StoredSample {
    std::int64_t t_ns;  // since start
    std::size_t fast, slow;
  };
  struct StoredMark {
    std::int64_t t_ns;
    std::string label;
  };
  std::int64_t now_ns() const;  // steady clock, absolute
  // MemoryStats attaches its heap counters before any use (Note [Occupancy timeline downsampling]).
  void attach_source(const std::atomic<std::size_t>* fast, const std::atomic<std::size_t>* slow);
  void remember_tail(std::int64_t abs_ns, std::size_t fast, std::size_t slow);
  void store_sample_locked(std::int64_t abs_ns, std::size_t fast, std::size_t slow);
  void store_mark_locked(std::int64_t abs_ns, std::string_view label);
  void downsample_samples_locked();
  std::vector<StoredSample> samples_with_tail_locked() const;

  const TimelineConfig config_;
  std::atomic<bool> enabled_{false};
  std::atomic<std::size_t> fast_capacity_{0};
  std::atomic<std::size_t> slow_capacity_{0};
  std::atomic<std::int64_t> start_ns_;  // absolute steady-clock time of t = 0
  std::atomic<std::int64_t> min_interval_ns_;
  std::atomic<std::int64_t> last_stored_ns_;               // absolute; lock-free rate-limit check
  const std::atomic<std::size_t>* source_fast_ = nullptr;  // set once, before any concurrent use
  const std::atomic<std::size_t>* source_slow_ = nullptr;
  // The latest rate-limited sample (absolute time; each field is individually atomic; with a
  // source only the time is kept, as the maximum over the rate-limited records).
  std::atomic<std::int64_t> tail_ns_{-1};
  std::atomic<std::size_t> tail_fast_{0};
  std::atomic<std::size_t> tail_slow_{0};

  mutable std::mutex mutex_;  // guards everything below
  std::vector<StoredSample> samples_;
  std::vector<StoredMark> marks_;
  std::uint64_t dropped_samples_ = 0;
  std::uint64_t dropped_marks_ = 0;
};

/// Counters of the tiered memory system. Every method is thread-safe; the counting methods are
/// lock-free and cost a few atomic operations (plus a clock read when the timeline is enabled).
class MemoryStats {
 public:
  explicit MemoryStats(TimelineConfig timeline_config = {});
  MemoryStats(const MemoryStats&) = delete;
  MemoryStats& operator=(const MemoryStats&) = delete;

  /// `bytes` were allocated in / freed from a heap. A free must not exceed what is in use (every
  /// on_alloc must happen before its matching on_free); a violation is reported as strata::Error
  /// (internal error) and leaves the counters unchanged. Feeds the timeline when it is enabled.
  void on_alloc(Tier tier, std::size_t bytes);
  void on_free(Tier tier, std::size_t bytes);

  /// An object's bytes were copied from one tier to the other (`from != to`).
  void on_move(Tier from, Tier to, std::size_t bytes);
  /// A clean object was evicted from the fast tier without a copy.
  void on_copy_elided(std::size_t bytes);
  /// A dirty object was freed while in the fast tier, so it is never written back.
  void on_writeback_avoided(std::size_t bytes);
  /// Records the heaps' current occupancy on the timeline now (if it is enabled); with a label the
  /// sample is always stored and the label becomes a mark (e.g. sample("backward")).
  void sample(std::string_view label = {});

  /// Bytes read / written in place in the slow tier (not migrated).
  void on_direct_slow_read(std::size_t bytes);
  void on_direct_slow_write(std::size_t bytes);

  /// Describes the slow tier for reports, e.g. "real device /mnt/pmem0" or "modeled: read 2.1 GB/s,
  /// write 0.7 GB/s, latency 300 ns". Shown by describe() and to_json() when set.
  void set_slow_tier_mode(std::string description);
  std::string slow_tier_mode() const;

  /// All counters now (each read individually; see the Note in memory_stats.cpp).
  MemoryStatsSnapshot snapshot() const;
  /// Zeroes the event counters and sets each heap's peak to its current occupancy. Current
  /// occupancy is kept (live objects are still live). The timeline is not touched (see clear()).
  void reset();
  /// Sets each heap's peak to its current occupancy, leaving every other counter as it is (like
  /// torch.cuda.reset_peak_memory_stats).
  void reset_peaks();

  /// The snapshot as a JSON object:
  /// `{"moved_to_slow":{"count":..,"bytes":..}, "moved_to_fast":{..}, "copies_elided":{..},
  ///   "writebacks_avoided":{..}, "direct_slow_read_bytes":.., "direct_slow_write_bytes":..,
  ///   "heaps":{"fast":{"current_bytes":..,"peak_bytes":..,"allocations":..,"frees":..},
  ///            "slow":{..}}, "slow_tier_mode":".."}` (the last key only when set).
  std::string to_json() const;
  /// A human-readable multi-line report (MiB with one decimal, and counts).
  std::string describe() const;

  /// The occupancy timeline fed by on_alloc/on_free while it is enabled.
  OccupancyTimeline& timeline() { return timeline_; }
  const OccupancyTimeline& timeline() const { return timeline_; }

 private:
  struct alignas(64) Heap {
    std::atomic<std::size_t> current{0};
    std::atomic<std::size_t> peak{0};
    std::atomic<std::uint64_t> allocations{0};
    std::atomic<std::uint64_t> frees{0};
  };
  struct alignas(64) Counted {
    std::atomic<std::uint64_t> count{0};
    std::atomic<std::uint64_t> bytes{0};
  };
  Heap& heap(Tier tier) { return tier == Tier::Fast ? fast_ : slow_; }

  Heap fast_;
  Heap slow_;
  Counted to_slow_;
  Counted to_fast_;
  Counted elided_;
  Counted writeback_avoided_;
  alignas(64) std::atomic<std::uint64_t> direct_read_bytes_{0};
  std::atomic<std::uint64_t> direct_write_bytes_{0};
  mutable std::mutex mode_mutex_;
  std::string slow_tier_mode_;
  OccupancyTimeline timeline_;
};

}  // namespace strata::memory
