#pragma once
/// @file
/// The data manager (dissertation §4.3.1, Table 4.4): tracks objects, their primary regions and
/// linked siblings across two heaps, and moves bytes between regions. It is mechanism only: which
/// object goes where is the Policy's business (memory/policy.h). Names follow Table 4.4
/// (`sizeof` is `size_of` in C++).
///
/// Thread safety: region and object operations are safe to call concurrently for *different*
/// objects; operations on one object (set, link, unlink, copyto) must be serialized by the caller
/// (the policy holds its lock and the object's Moving state, Note [Access states]).

#include <atomic>
#include <cstddef>
#include <functional>
#include <memory>

#include "memory/heap.h"
#include "memory/memory_stats.h"
#include "memory/region.h"

namespace strata::memory {

class DataManager {
 public:
  DataManager(std::unique_ptr<Heap> fast, std::unique_ptr<Heap> slow);
  ~DataManager();
  DataManager(const DataManager&) = delete;
  DataManager& operator=(const DataManager&) = delete;

  Heap& fast() { return *fast_; }
  Heap& slow() { return *slow_; }
  Heap& device(Tier t) { return t == Tier::Fast ? *fast_ : *slow_; }

  // ---- objects ----------------------------------------------------------------------------------
  /// A new object whose primary is `region` (which becomes owned by the object).
  Object* new_object(Region* region);
  /// Frees every region of `object` (no copy: dead data is never written back, counted as a
  /// write-back avoided when the fast copy was dirty or fast-only) and deletes it.
  void delete_object(Object* object);
  Region* primary(const Object* object) const { return object->primary(); }
  /// Table 4.4 `set!`: makes `region` (already linked to or owned by `object`) its primary.
  void set(Object* object, Region* region);
  std::size_t live_objects() const { return live_objects_.load(std::memory_order_relaxed); }

  // ---- regions ----------------------------------------------------------------------------------
  /// A region of `bytes` on `device`, or null when the device has no contiguous space for it.
  Region* allocate(Heap& device, std::size_t bytes, Object* parent = nullptr);
  /// Frees a region that is not the primary of a live object and not linked.
  void free(Region* region);
  /// Links `a` and `b` (two regions of one object on different devices).
  void link(Region* a, Region* b);
  void unlink(Region* a, Region* b);
  /// Copies size_of(src) bytes from `src` into `dst` (sizes must match).
  void copyto(Region* dst, Region* src);
  std::size_t size_of(const Region* region) const { return region->size(); }
  /// The region linked to `region` on `device`, or null.
  Region* getlinked(const Region* region, const Heap& device) const;
  bool in(const Region* region, const Heap& device) const { return region->heap() == &device; }
  void markdirty(Region* region) { region->set_dirty(true); }
  void markclean(Region* region) { region->set_dirty(false); }
  bool isdirty(const Region* region) const { return region->dirty(); }
  Object* parent(const Region* region) const { return region->parent(); }

  // ---- devices ----------------------------------------------------------------------------------
  /// Table 4.4 `evictfrom!`; see Heap::evictfrom.
  bool evictfrom(const std::function<bool(Region*)>& callback, Heap& device, Region* start, std::size_t bytes) {
    return device.evictfrom(callback, start, bytes);
  }

  /// The function copyto uses to move bytes; replaced by the copy engine (multithreaded,
  /// non-temporal stores into the slow tier, slow-tier model charging).
  using CopyFn = std::function<void(void* dst, const void* src, std::size_t n, Tier from, Tier to)>;
  void set_copy_function(CopyFn fn) { copy_ = std::move(fn); }
  /// Occupancy per heap, bytes moved each way, copies elided, write-backs avoided, timeline.
  MemoryStats& stats() { return stats_; }
  const MemoryStats& stats() const { return stats_; }

 private:
  void release(Region* region);  // frees and counts
  std::unique_ptr<Heap> fast_;
  std::unique_ptr<Heap> slow_;
  CopyFn copy_;
  MemoryStats stats_;
  std::atomic<std::size_t> live_objects_{0};
};

}  // namespace strata::memory
