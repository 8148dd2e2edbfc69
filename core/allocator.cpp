#include "core/allocator.h"

#include <atomic>

#include "core/error.h"

namespace strata {

namespace {
std::atomic<Allocator*>& default_slot() {
  static std::atomic<Allocator*> slot{nullptr};
  return slot;
}
}  // namespace

Allocator& default_allocator() {
  Allocator* a = default_slot().load(std::memory_order_acquire);
  STRATA_CHECK(a != nullptr,
               "default_allocator: no allocator is installed; link the `strata` library (or "
               "strata_memory as a whole archive), or call set_default_allocator()");
  return *a;
}

Allocator* set_default_allocator(Allocator* allocator) {
  return default_slot().exchange(allocator, std::memory_order_acq_rel);
}

}  // namespace strata
