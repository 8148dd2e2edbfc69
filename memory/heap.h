#pragma once
/// @file
/// Heaps (the dissertation's "devices"): address ranges acquired from the OS up to a fixed limit,
/// segment by segment as they fill (Note [Heaps grow on demand]), carved into regions by a
/// coalescing Arena. `DramHeap` is the fast tier (its capacity is
/// the fast-memory budget and is enforced); `PmHeap` is the slow tier (memkind's PMEM kind over a
/// directory, a file-backed mmap, or a CPU-less NUMA node such as a CXL expander).

#include <array>
#include <atomic>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "core/config.h"
#include "core/text.h"
#include "memory/detail/arena.h"
#include "memory/region.h"
#include "memory/tier.h"

namespace strata::memory {
class MemoryStats;
}

namespace strata::memory {

/// Bytes of physical memory on this machine, or 0 when the OS does not say.
std::size_t physical_memory_bytes();
using strata::format_mib;  // core/text.h

/// Note [Heaps grow on demand]
/// A heap's capacity is a limit, not a mapping: it maps a first segment when it is created and
/// further segments as allocations need them, each at least as large as the request and as all
/// segments so far (so a heap reaches its limit in a few dozen segments at most), until the limit.
/// An untouched default (half the RAM fast, twice the RAM slow) so costs a small job no address
/// space and no disk: a process under `ulimit -v` of a few GiB runs. Every segment of a
/// file-backed slow heap has its file space reserved (posix_fallocate) before it is mapped, and a
/// memkind segment (or a file system that cannot reserve) has its pages written under a SIGBUS
/// guard (fault_guard.h), so a full file system fails the growth, and the allocation that asked
/// for it, with a message naming the directory, the bytes asked and the bytes free
/// (`no_room_message`), never with a SIGBUS on a later page fault. Segments need not be adjacent in
/// the address space, so no block spans two
/// (Arena::extend); an object larger than every segment cannot fit even when the sum of free
/// space could hold it, which is why the segments double.

/// Note [Unmanaged regions]
/// A heap holds two kinds of regions: an Object's (a tensor's storage, placed, moved and evicted
/// by the data manager's policy under the policy's lock) and unmanaged ones, allocated with a null
/// parent by a component that manages its own rows — the embedding tables' rows, pointer tables
/// and cache pages, from their own threads under their own locks. Eviction walks pass unmanaged
/// regions over (no parent: nothing to evict). Because the two kinds are allocated and freed
/// under different locks, the heap serializes allocate, free and the evictfrom walk itself
/// (`regions_mutex_`, recursive: the walk's callback frees the region it evicts): a walk never
/// reads a region that another thread frees or has not yet finished allocating.

class Heap {
 public:
  virtual ~Heap();
  Heap(const Heap&) = delete;
  Heap& operator=(const Heap&) = delete;

  Tier tier() const { return tier_; }
  /// e.g. "dram", "pm:memkind:/mnt/pmem0", "pm:mmap:/tmp", "pm:numa:2".
  const std::string& name() const { return name_; }
  /// The limit: the bytes this heap may map (its budget), not what it has mapped yet.
  std::size_t capacity() const { return limit_; }
  /// Bytes mapped (and, for a file-backed heap, reserved on disk) so far.
  std::size_t mapped() const { return arena_->capacity(); }
  std::size_t used() const { return arena_->used(); }
  std::size_t peak() const { return arena_->peak(); }
  void reset_peak() { arena_->reset_peak(); }
  std::size_t largest_free() const { return arena_->largest_free(); }
  /// The largest block the heap could hold: its largest segment, or what growing could still map.
  std::size_t largest_possible() const;
  const Arena& arena() const { return *arena_; }
  /// Counts every allocation and free of this heap — an object's region or an unmanaged one
  /// (Note [Unmanaged regions]) — in `stats` (null: none). Set before the heap is shared.
  void set_stats(MemoryStats* stats) { stats_ = stats; }

  /// A region of `bytes` owned by `parent`, or null when no free block is large enough and the
  /// heap cannot grow to make one (at its limit, or the OS refused: see no_room_message).
  Region* allocate(std::size_t bytes, Object* parent);
  /// Returns the region's space to the heap and deletes the Region.
  void free(Region* region);
  /// Makes room for `bytes` of allocations to come, contiguous: when no free block is that large,
  /// grows the heap by exactly the rounded request in one segment (not doubling: a component that
  /// knows its need — the embedding tables — takes that, and a file-backed heap reserves no more
  /// disk than that). False when the heap cannot grow that much (see no_room_message).
  bool reserve(std::size_t bytes);
  /// Why an allocation of `bytes` found no room: the heap's use, and the last failure to grow.
  std::string no_room_message(std::size_t bytes) const;

  /// Table 4.4 `evictfrom`: starting at `start` (or the heap's beginning when null), walks the
  /// address space (wrapping once) until a contiguous span of `bytes` is free. Free blocks are
  /// collected; each occupied block's region is passed to `evict`, which must free it and return
  /// true, or return false to refuse (e.g. the object is pinned: the span then restarts after it).
  /// A span never crosses a segment boundary. Returns true when the span is free (coalesced into
  /// one block), false after a full lap.
  bool evictfrom(const std::function<bool(Region*)>& evict, Region* start, std::size_t bytes);

 protected:
  Heap(Tier tier, std::string name, std::size_t limit);
  /// Maps the first segment: `initial` bytes (0 or more than the limit: the whole limit). Derived
  /// constructors call it last; a failure throws strata::Error with the backend's reason.
  void map_first_segment(std::size_t initial);
  /// Maps `bytes` for the segment at heap offset `offset`; null with `why` set when it cannot.
  virtual void* map_segment(std::size_t offset, std::size_t bytes, std::string& why) = 0;
  virtual void unmap_segment(void* base, std::size_t bytes) noexcept = 0;
  /// Unmaps every segment; derived destructors call it (the base cannot dispatch to them).
  void unmap_all() noexcept;

 private:
  struct Segment {
    std::size_t offset = 0;  // in the arena
    std::size_t bytes = 0;   // mapped
    char* base = nullptr;
  };
  static constexpr int kMaxSegments = 64;
  bool grow(std::size_t bytes);  // under grow_mutex_
  bool add_segment(std::size_t bytes, std::string& why);
  char* address_of(std::size_t offset) const;

  const Tier tier_;
  const std::string name_;
  const std::size_t limit_;
  std::unique_ptr<Arena> arena_;
  std::array<Segment, kMaxSegments> segments_{};
  std::atomic<int> segment_count_{0};
  std::recursive_mutex regions_mutex_;  // Note [Unmanaged regions]
  MemoryStats* stats_ = nullptr;
  mutable std::mutex grow_mutex_;
  std::string growth_failure_;  // the last reason growing failed, under grow_mutex_
};

/// The fast tier: anonymous memory, up to exactly `capacity` bytes.
class DramHeap final : public Heap {
 public:
  /// Maps `initial` bytes now (0: all of `capacity`) and the rest on demand. Throws strata::Error
  /// for a zero capacity or one larger than the machine's physical memory.
  explicit DramHeap(std::size_t capacity, std::size_t initial = 0);
  ~DramHeap() override;

 private:
  void* map_segment(std::size_t offset, std::size_t bytes, std::string& why) override;
  void unmap_segment(void* base, std::size_t bytes) noexcept override;
};

/// How the slow heap gets its memory (defined with its names and parser in core/config.h).
using strata::PmBackend;

struct PmHeapOptions {
  std::size_t capacity = 0;  ///< the limit
  std::string dir = "/tmp";
  PmBackend backend = PmBackend::Auto;
  int numa_node = -1;
  /// Bytes mapped and reserved at creation; 0: all of `capacity`. The rest is mapped on demand
  /// (Note [Heaps grow on demand]).
  std::size_t initial = 0;
};

class PmHeap final : public Heap {
 public:
  /// Throws strata::Error naming the problem: zero capacity, missing or unwritable directory,
  /// memkind unavailable, absent NUMA node, too little free space for the first segment (naming
  /// the directory, the bytes asked and the bytes free), or a mapping the OS refuses.
  explicit PmHeap(const PmHeapOptions& options);
  ~PmHeap() override;
  PmBackend backend() const { return backend_; }
  /// True when the memory is a real slow device (fsdax PMem or a NUMA node), false when it is
  /// ordinary DRAM/page cache standing in for one (reports then say the slow tier is modeled).
  bool is_real_device() const { return real_device_; }

 private:
  struct Backing;
  static Backing open_backing(const PmHeapOptions& options);
  PmHeap(const PmHeapOptions& options, Backing backing);
  void* map_segment(std::size_t offset, std::size_t bytes, std::string& why) override;
  void unmap_segment(void* base, std::size_t bytes) noexcept override;

  const std::string dir_;
  const int numa_node_;
  PmBackend backend_;
  bool real_device_ = false;
  void* memkind_kind_ = nullptr;
  int fd_ = -1;
};

}  // namespace strata::memory
