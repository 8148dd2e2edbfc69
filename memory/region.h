#pragma once
/// @file
/// Objects and regions (dissertation §4.3): an Object is what the program holds (a tensor's bytes);
/// a Region is a contiguous slice of one heap holding the object's data (its *primary*) or a copy
/// of it (a *secondary*). Two regions of one object on different heaps are *linked* siblings.
///
/// Note [Access states]
/// Every object carries an access state: NotBusy, ReadOnly (n readers), ReadWrite (one writer) or
/// Moving (a migration owns it). Kernels pin an object (pin_read / pin_write) for as long as they
/// dereference its primary region; a migration may only start by moving the state from NotBusy to
/// Moving, so it never copies or frees a region a kernel is reading or writing, and a kernel that
/// wants to pin while a migration runs waits for it and then sees the new primary. This is what
/// rules out the torn write of the dissertation's Listing 6.1.
///
/// Note [Writes dirty the pinned primary]
/// pin_write marks the primary dirty itself. Marking it earlier (in the policy's write_use, before
/// the pin) is not enough: an eviction and a prefetch can run between the two and leave a fresh,
/// clean fast copy that the kernel then modifies, and the next clean eviction would drop the
/// write. Under the pin the primary cannot change, so the mark lands on the region written.

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace strata::memory {

class Heap;
class Object;

/// A contiguous slice of one heap.
class Region {
 public:
  Region(Heap* heap, void* data, std::size_t size, std::size_t offset, Object* parent)
      : heap_(heap), data_(data), size_(size), offset_(offset), parent_(parent) {}
  Region(const Region&) = delete;
  Region& operator=(const Region&) = delete;

  Heap* heap() const { return heap_; }
  void* data() const { return data_; }
  /// Bytes requested for the region (the object's size).
  std::size_t size() const { return size_; }
  /// Offset of the region in its heap's address space.
  std::size_t offset() const { return offset_; }
  Object* parent() const { return parent_; }
  void set_parent(Object* parent) { parent_ = parent; }
  Region* linked() const { return linked_; }
  void set_linked(Region* r) { linked_ = r; }
  bool dirty() const { return dirty_.load(std::memory_order_acquire); }
  void set_dirty(bool d) { dirty_.store(d, std::memory_order_release); }

 private:
  Heap* heap_;
  void* data_;
  std::size_t size_;
  std::size_t offset_;
  Object* parent_;
  Region* linked_ = nullptr;
  std::atomic<bool> dirty_{false};
};

/// What the program holds. The primary region may change (a migration); see Note [Access states].
class Object {
 public:
  enum class Access : int8_t { NotBusy, ReadOnly, ReadWrite, Moving };

  Object(std::size_t size, Region* primary) : size_(size), primary_(primary) {}
  Object(const Object&) = delete;
  Object& operator=(const Object&) = delete;

  std::size_t size() const { return size_; }
  Region* primary() const { return primary_.load(std::memory_order_acquire); }
  void set_primary(Region* r) { primary_.store(r, std::memory_order_release); }

  /// Pins for reading (shared with other readers); waits while a writer or a migration holds it.
  void pin_read();
  /// Pins for writing (exclusive); waits while readers, a writer or a migration hold it. Marks the
  /// primary dirty (Note [Writes dirty the pinned primary]).
  void pin_write();
  void unpin_read();
  void unpin_write();
  /// Tries to claim the object for a migration; fails if any kernel has it pinned.
  bool try_begin_move();
  /// Claims the object for a migration, waiting for pins to be released.
  void begin_move();
  void end_move();
  Access access() const;

  /// Intrusive LRU links, owned by the policy (guarded by the policy's lock).
  Object* lru_prev = nullptr;
  Object* lru_next = nullptr;
  bool in_lru = false;

 private:
  // state_ > 0: that many readers; 0: not busy; kWriter: one writer; kMoving: a migration.
  static constexpr int32_t kWriter = -1;
  static constexpr int32_t kMoving = -2;
  const std::size_t size_;
  std::atomic<Region*> primary_;
  std::atomic<int32_t> state_{0};
};

}  // namespace strata::memory
