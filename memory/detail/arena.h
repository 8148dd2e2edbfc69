#pragma once
/// @file
/// Address-ordered, coalescing allocator over a range [0, capacity): the space manager of a heap
/// (dissertation §4.4.1, "heaps supply memory"). Its blocks can be walked in address order, which
/// `evictfrom` needs (Figure 4.3). Offsets and sizes are multiples of the granularity. The range
/// grows at its end by segments (`extend`): a heap that maps its memory on demand adds one per
/// mapping, and no block ever spans two segments (free blocks do not coalesce across a segment
/// boundary), since two mappings need not be adjacent in the address space.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <set>

namespace strata::memory {

class Arena {
 public:
  /// One block of the address space, as seen by a walk.
  struct Block {
    std::size_t offset = 0;
    std::size_t size = 0;
    bool free = true;
    void* owner = nullptr;  // what allocate() was given for a used block
  };

  /// @param capacity     bytes managed (rounded down to the granularity)
  /// @param granularity  allocation unit and alignment of offsets; a power of two
  explicit Arena(std::size_t capacity, std::size_t granularity = 64);

  /// Best-fit allocation of `bytes` (rounded up to the granularity; 0 counts as one unit).
  /// Returns the offset, or nothing when no free block is large enough.
  std::optional<std::size_t> allocate(std::size_t bytes, void* owner);
  /// Frees the used block starting at `offset` and coalesces it with free neighbours.
  void free(std::size_t offset);
  /// Appends a segment of `bytes` (rounded down to the granularity; must be at least one unit) as
  /// one free block at offset capacity(). Returns the segment's first offset.
  std::size_t extend(std::size_t bytes);
  /// True when `offset` starts a segment (0 and every offset extend() returned).
  bool is_segment_start(std::size_t offset) const;
  /// Size of the largest segment: the largest block the arena could ever hand out.
  std::size_t largest_segment() const;
  /// Sets the owner of the used block at `offset`.
  void set_owner(std::size_t offset, void* owner);

  /// The block containing `offset` (offset < capacity), for walks.
  Block block_containing(std::size_t offset) const;

  std::size_t capacity() const { return capacity_.load(std::memory_order_acquire); }
  std::size_t granularity() const { return granularity_; }
  /// Bytes in used blocks (rounded sizes).
  std::size_t used() const;
  /// Highest used() ever seen (since construction or reset_peak()).
  std::size_t peak() const;
  void reset_peak();
  /// Size of the largest free block.
  std::size_t largest_free() const;
  /// Number of blocks (free and used); for tests of coalescing.
  std::size_t block_count() const;
  /// Rounds a request up to the granularity.
  std::size_t round(std::size_t bytes) const;

 private:
  struct Entry {
    std::size_t size;
    bool free;
    void* owner;
  };
  void add_free(std::size_t offset, std::size_t size);
  void remove_free(std::size_t offset, std::size_t size);

  mutable std::mutex mutex_;
  const std::size_t granularity_;
  std::atomic<std::size_t> capacity_;
  std::set<std::size_t> segment_starts_;  // 0 and every extend()ed offset
  std::size_t largest_segment_ = 0;
  std::map<std::size_t, Entry> blocks_;                   // every block, by offset
  std::multimap<std::size_t, std::size_t> free_by_size_;  // free blocks: size -> offset
  std::size_t used_ = 0;
  std::size_t peak_ = 0;
};

}  // namespace strata::memory
