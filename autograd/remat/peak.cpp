#include "autograd/remat/peak.h"

#include <string>

#include "core/allocator.h"
#include "core/error.h"
#include "memory/tiered_memory.h"

namespace strata::remat {

PeakMeasurement measure_fast_peak(const std::function<void()>& step) {
  STRATA_CHECK(static_cast<bool>(step), "measure_fast_peak: the step to measure is empty");
  Allocator& allocator = default_allocator();
  // The process-wide tiered memory is installed behind a forwarding allocator named "tiered"
  // (Note [Default allocator registration]); a TieredMemory installed directly is used as is.
  auto* tiered = dynamic_cast<memory::TieredMemory*>(&allocator);
  if (tiered == nullptr && allocator.name() == "tiered") tiered = &memory::tiered_memory();
  STRATA_CHECK(tiered != nullptr, "measure_fast_peak: the default allocator is \"", std::string(allocator.name()),
               "\", expected the tiered memory (\"tiered\"; unset STRATA_MEMORY=dram)");
  memory::MemoryStats& stats = tiered->manager().stats();
  stats.reset();
  PeakMeasurement m;
  m.baseline_bytes = stats.snapshot().fast.current_bytes;
  step();
  m.peak_bytes = stats.snapshot().fast.peak_bytes;
  return m;
}

}  // namespace strata::remat
