#include "core/storage.h"

#include "core/error.h"

namespace strata {

Storage Storage::allocate(std::size_t nbytes, Allocator& allocator) {
  auto impl = std::make_shared<detail::StorageImpl>();
  impl->allocation = allocator.allocate(nbytes);
  STRATA_ASSERT(impl->allocation != nullptr, "allocator '", allocator.name(), "' returned null");
  return Storage(std::move(impl));
}

Storage Storage::wrap(std::unique_ptr<Allocation> allocation) {
  STRATA_CHECK(allocation != nullptr, "Storage::wrap: null allocation");
  auto impl = std::make_shared<detail::StorageImpl>();
  impl->allocation = std::move(allocation);
  return Storage(std::move(impl));
}

}  // namespace strata
