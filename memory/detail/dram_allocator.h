#pragma once
/// @file
/// The plain DRAM allocator: 64-byte-aligned blocks from the system heap, with statistics. Tiered
/// memory is the default (memory/tiered_memory.h); this one is used with STRATA_MEMORY=dram, or
/// explicitly through TensorOptions::allocator.

#include <atomic>
#include <cstddef>

#include "core/allocator.h"

namespace strata::memory {

/// Counters of an allocator. `current`/`peak` count bytes requested and not yet freed.
struct AllocatorStats {
  std::size_t allocations = 0;
  std::size_t current_bytes = 0;
  std::size_t peak_bytes = 0;
};

/// Thread-safe aligned allocator over the system heap.
class DramAllocator final : public Allocator {
 public:
  std::unique_ptr<Allocation> allocate(std::size_t nbytes) override;
  std::string_view name() const override { return "dram"; }
  AllocatorStats stats() const;
  /// Resets `peak_bytes` to `current_bytes` (and `allocations` to 0).
  void reset_peak();

 private:
  friend class DramAllocation;
  void release(std::size_t nbytes);

  std::atomic<std::size_t> allocations_{0};
  std::atomic<std::size_t> current_{0};
  std::atomic<std::size_t> peak_{0};
};

/// The process-wide instance.
DramAllocator& dram_allocator();

}  // namespace strata::memory
