#pragma once
/// @file
/// The seam between tensors and memory management. core declares it; memory/ implements it.
///
/// Note [Storage does not know its tier]
/// A Storage owns one `Allocation`. The allocation decides where its bytes live and may move them
/// between tiers (the tiered data manager of memory/ does), so `Allocation::data()` is the
/// address *now*; code that dereferences it across a possible migration must pin the allocation
/// first (memory/'s access states). Tensors never ask which tier they are on.

#include <cstddef>
#include <functional>
#include <memory>
#include <string_view>

namespace strata {

/// How a kernel uses an allocation while it runs.
enum class AccessMode { Read, Write };

/// One block of bytes owned by a Storage.
class Allocation {
 public:
  virtual ~Allocation() = default;
  /// Pins the bytes where they are for the duration of a kernel (Note [Storage does not know its
  /// tier]): a tiered allocation cannot migrate while pinned, and a Write pin marks it modified.
  /// `bytes` is how much of the allocation the kernel touches (a slow-tier allocation is charged
  /// for that much direct access). Plain DRAM allocations never move, so the default does
  /// nothing. Use PinSet, not these.
  virtual void pin(AccessMode, std::size_t /*bytes*/) {}
  /// Tells the memory policy a kernel is about to read or write the bytes (its `read_use` /
  /// `write_use`, which may reorder eviction candidates). PinSet calls it for every operand before
  /// pinning any of them (Note [Pinning kernel operands]).
  virtual void use(AccessMode) {}
  virtual void unpin(AccessMode) {}
  /// Current address of the first byte (stable unless the implementation migrates the data;
  /// see Note [Storage does not know its tier]). May be null when nbytes() == 0.
  virtual void* data() = 0;
  /// Size in bytes as requested.
  virtual std::size_t nbytes() const = 0;
};

/// Makes Allocations. Implementations must be thread-safe.
class Allocator {
 public:
  virtual ~Allocator() = default;
  /// Allocates `nbytes` (may be 0) aligned to at least `kAlignment`. Throws strata::Error when the
  /// request cannot be met, naming the size and the allocator.
  virtual std::unique_ptr<Allocation> allocate(std::size_t nbytes) = 0;
  /// Short name for reports and error messages ("dram", "tiered", ...).
  virtual std::string_view name() const = 0;

  /// Alignment every allocation meets (one cache line; also what AVX-512 loads prefer).
  static constexpr std::size_t kAlignment = 64;
};

/// The allocator new tensors use unless told otherwise. memory/ installs its allocator when
/// linked (the `strata` library always links it). Throws strata::Error if none is installed.
Allocator& default_allocator();

/// Replaces the default allocator and returns the previous one (may be null). The allocator must
/// outlive every Storage it creates.
Allocator* set_default_allocator(Allocator* allocator);

/// An Allocation over memory owned by someone else (a NumPy array, a caller's buffer). `deleter`
/// runs once when the last Storage referring to it goes away.
class ExternalAllocation final : public Allocation {
 public:
  ExternalAllocation(void* data, std::size_t nbytes, std::function<void(void*)> deleter)
      : data_(data), nbytes_(nbytes), deleter_(std::move(deleter)) {}
  ~ExternalAllocation() override {
    if (deleter_) deleter_(data_);
  }
  ExternalAllocation(const ExternalAllocation&) = delete;
  ExternalAllocation& operator=(const ExternalAllocation&) = delete;
  void* data() override { return data_; }
  std::size_t nbytes() const override { return nbytes_; }

 private:
  void* data_;
  std::size_t nbytes_;
  std::function<void(void*)> deleter_;
};

}  // namespace strata
