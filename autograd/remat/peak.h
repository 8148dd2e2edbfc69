#pragma once
/// @file
/// Measuring the fast-tier peak of one training step (the activation peak rematerialization lowers).

#include <cstddef>
#include <functional>

namespace strata::remat {

struct PeakMeasurement {
  std::size_t baseline_bytes = 0;  ///< fast-tier bytes in use when the step began
  std::size_t peak_bytes = 0;      ///< highest fast-tier bytes in use during the step
  /// What the step added on top of what was already live (activations, tape, gradients, ...).
  std::size_t step_peak_bytes() const { return peak_bytes > baseline_bytes ? peak_bytes - baseline_bytes : 0; }
};

/// Runs `step` and reports the fast tier's occupancy peak during it, from the default tiered
/// memory's statistics (memory/memory_stats.h): the heaps' peaks are reset to their current
/// occupancy before the step (MemoryStats::reset(), which also zeroes the event counters) and read
/// after it. Allocations made by other threads meanwhile count too. Throws strata::Error when the
/// default allocator is not the tiered memory (e.g. STRATA_MEMORY=dram) or `step` is empty.
PeakMeasurement measure_fast_peak(const std::function<void()>& step);

}  // namespace strata::remat
