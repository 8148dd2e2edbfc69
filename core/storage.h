#pragma once
/// @file
/// Storage: a refcounted block of bytes shared by a tensor and all its views.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>

#include "core/allocator.h"

namespace strata {

namespace detail {
struct StorageImpl {
  std::unique_ptr<Allocation> allocation;
  /// Bumped by every in-place write through any view (autograd's SavedTensor checks it).
  std::atomic<uint64_t> version{0};
};
}  // namespace detail

/// Cheap, copyable handle; copies share the same bytes and version counter.
class Storage {
 public:
  Storage() = default;
  /// Allocates `nbytes` from `allocator`.
  static Storage allocate(std::size_t nbytes, Allocator& allocator = default_allocator());
  /// Wraps an existing allocation (for example an ExternalAllocation over a NumPy buffer).
  static Storage wrap(std::unique_ptr<Allocation> allocation);

  bool defined() const { return impl_ != nullptr; }
  /// Current address of the bytes; see Note [Storage does not know its tier].
  void* data() const { return impl_ ? impl_->allocation->data() : nullptr; }
  std::size_t nbytes() const { return impl_ ? impl_->allocation->nbytes() : 0; }
  Allocation* allocation() const { return impl_ ? impl_->allocation.get() : nullptr; }

  uint64_t version() const { return impl_ ? impl_->version.load(std::memory_order_acquire) : 0; }
  void bump_version() const {
    if (impl_) impl_->version.fetch_add(1, std::memory_order_acq_rel);
  }
  /// Number of handles (tensors and views) sharing these bytes.
  long use_count() const { return impl_.use_count(); }
  bool is_same(const Storage& other) const { return impl_ == other.impl_; }

 private:
  friend class WeakStorage;
  explicit Storage(std::shared_ptr<detail::StorageImpl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<detail::StorageImpl> impl_;
};

/// Observes a Storage without keeping its bytes alive (autograd's SavedTensor uses it to check the
/// version of a value a pack hook moved elsewhere).
class WeakStorage {
 public:
  WeakStorage() = default;
  explicit WeakStorage(const Storage& s) : impl_(s.impl_) {}
  /// The storage's current version, or nullopt once the storage is gone.
  std::optional<uint64_t> version() const {
    auto p = impl_.lock();
    if (!p) return std::nullopt;
    return p->version.load(std::memory_order_acquire);
  }

 private:
  std::weak_ptr<detail::StorageImpl> impl_;
};

}  // namespace strata
