#include "memory/detail/dram_allocator.h"

#include <cstdlib>
#include <new>

#include "core/error.h"

namespace strata::memory {

class DramAllocation final : public Allocation {
 public:
  DramAllocation(DramAllocator& owner, void* data, std::size_t nbytes) : owner_(owner), data_(data), nbytes_(nbytes) {}
  ~DramAllocation() override {
    std::free(data_);
    owner_.release(nbytes_);
  }
  DramAllocation(const DramAllocation&) = delete;
  DramAllocation& operator=(const DramAllocation&) = delete;
  void* data() override { return data_; }
  std::size_t nbytes() const override { return nbytes_; }

 private:
  DramAllocator& owner_;
  void* data_;
  std::size_t nbytes_;
};

std::unique_ptr<Allocation> DramAllocator::allocate(std::size_t nbytes) {
  void* p = nullptr;
  if (nbytes > 0) {
    // aligned_alloc wants a size that is a multiple of the alignment.
    const std::size_t rounded = (nbytes + kAlignment - 1) / kAlignment * kAlignment;
    STRATA_CHECK(rounded >= nbytes, "dram allocator: request of ", nbytes, " bytes overflows");
    p = std::aligned_alloc(kAlignment, rounded);
    STRATA_CHECK(p != nullptr, "dram allocator: out of memory allocating ", nbytes, " bytes (", current_.load(),
                 " bytes in use)");
  }
  allocations_.fetch_add(1, std::memory_order_relaxed);
  const std::size_t now = current_.fetch_add(nbytes, std::memory_order_relaxed) + nbytes;
  std::size_t peak = peak_.load(std::memory_order_relaxed);
  while (now > peak && !peak_.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {}
  return std::make_unique<DramAllocation>(*this, p, nbytes);
}

void DramAllocator::release(std::size_t nbytes) { current_.fetch_sub(nbytes, std::memory_order_relaxed); }

AllocatorStats DramAllocator::stats() const { return {allocations_.load(), current_.load(), peak_.load()}; }

void DramAllocator::reset_peak() {
  allocations_.store(0);
  peak_.store(current_.load());
}

DramAllocator& dram_allocator() {
  static DramAllocator instance;
  return instance;
}

}  // namespace strata::memory
