#pragma once
/// @file
/// PinSet: pins the storages a kernel reads and writes for the kernel's duration.
///
/// Note [Pinning kernel operands]
/// Every kernel that dereferences tensor data takes a PinSet over its operands *before* reading
/// data_ptr(), and keeps it until the last access. A storage that appears several times is pinned
/// once (Write if any use writes), and storages are pinned in address order of their Allocation,
/// so two kernels pinning the same storages can never deadlock. Before the first pin, every operand
/// is reported to the memory policy (Allocation::use → read_use / write_use): the policy may take
/// its lock, and a thread must never wait for that lock while holding a pin an eviction could be
/// waiting on.

#include <algorithm>
#include <functional>

#include "core/detail/small_vector.h"
#include "core/storage.h"
#include "core/tensor.h"

namespace strata {

class PinSet {
 public:
  PinSet() = default;
  PinSet(const PinSet&) = delete;
  PinSet& operator=(const PinSet&) = delete;
  ~PinSet() { release(); }

  /// Adds an operand whose elements the kernel touches; call acquire() once all are added.
  PinSet& add(const Tensor& t, AccessMode mode) { return add(t, mode, t.nbytes()); }
  /// Adds an operand of which the kernel touches `bytes` (e.g. one element).
  PinSet& add(const Tensor& t, AccessMode mode, std::size_t bytes) {
    Allocation* a = t.storage().allocation();
    for (auto& e : entries_) {
      if (e.allocation == a) {
        if (mode == AccessMode::Write) e.mode = AccessMode::Write;
        e.bytes += bytes;
        return *this;
      }
    }
    entries_.push_back({a, mode, bytes});
    return *this;
  }
  /// Reports every operand to the memory policy, then pins them (address order).
  void acquire() {
    std::sort(entries_.begin(), entries_.end(),
              [](const Entry& x, const Entry& y) { return std::less<Allocation*>()(x.allocation, y.allocation); });
    for (auto& e : entries_) e.allocation->use(e.mode);
    for (auto& e : entries_) {
      e.allocation->pin(e.mode, std::min(e.bytes, e.allocation->nbytes()));
      ++pinned_;
    }
  }
  void release() {
    while (pinned_ > 0) {
      --pinned_;
      entries_[pinned_].allocation->unpin(entries_[pinned_].mode);
    }
  }

 private:
  struct Entry {
    Allocation* allocation;
    AccessMode mode;
    std::size_t bytes;  // touched by the kernel (summed over the storage's operands)
  };
  SmallVector<Entry, 4> entries_;
  std::size_t pinned_ = 0;
};

}  // namespace strata
