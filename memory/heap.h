#pragma once
/// @file
/// Heaps (the dissertation's "devices"): fixed-capacity address ranges acquired from the OS up
/// front, carved into regions by a coalescing Arena. `DramHeap` is the fast tier (its capacity is
/// the fast-memory budget and is enforced); `PmHeap` is the slow tier (memkind's PMEM kind over a
/// directory, a file-backed mmap, or a CPU-less NUMA node such as a CXL expander).

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "memory/arena.h"
#include "memory/region.h"
#include "memory/tier.h"

namespace strata::memory {


/// Bytes of physical memory on this machine, or 0 when the OS does not say.
std::size_t physical_memory_bytes();

class Heap {
 public:
  virtual ~Heap();
  Heap(const Heap&) = delete;
  Heap& operator=(const Heap&) = delete;

  Tier tier() const { return tier_; }
  /// e.g. "dram", "pm:memkind:/mnt/pmem0", "pm:mmap:/tmp", "pm:numa:2".
  const std::string& name() const { return name_; }
  std::size_t capacity() const { return arena_.capacity(); }
  std::size_t used() const { return arena_.used(); }
  std::size_t peak() const { return arena_.peak(); }
  void reset_peak() { arena_.reset_peak(); }
  std::size_t largest_free() const { return arena_.largest_free(); }
  const Arena& arena() const { return arena_; }

  /// A region of `bytes` owned by `parent`, or null when no free block is large enough.
  Region* allocate(std::size_t bytes, Object* parent);
  /// Returns the region's space to the heap and deletes the Region.
  void free(Region* region);

  /// Table 4.4 `evictfrom`: starting at `start` (or the heap's beginning when null), walks the
  /// address space (wrapping once) until a contiguous span of `bytes` is free. Free blocks are
  /// collected; each occupied block's region is passed to `evict`, which must free it and return
  /// true, or return false to refuse (e.g. the object is pinned: the span then restarts after it).
  /// Returns true when the span is free (coalesced into one block), false after a full lap.
  bool evictfrom(const std::function<bool(Region*)>& evict, Region* start, std::size_t bytes);

 protected:
  Heap(Tier tier, std::string name, void* base, std::size_t capacity);
  char* base_;

 private:
  const Tier tier_;
  const std::string name_;
  Arena arena_;
};

/// The fast tier: an anonymous mapping of exactly `capacity` bytes.
class DramHeap final : public Heap {
 public:
  /// Throws strata::Error for a zero capacity or one larger than the machine's physical memory.
  explicit DramHeap(std::size_t capacity);
  ~DramHeap() override;
};

/// How the slow heap gets its memory.
enum class PmBackend {
  Auto,     ///< memkind on a DAX directory (when built with it), else Mmap
  Memkind,  ///< memkind's PMEM kind over `dir` (fsdax on real PMem/CXL, any filesystem otherwise)
  Mmap,     ///< a file in `dir` mapped shared
  Numa,     ///< anonymous memory bound to NUMA node `numa_node` (a CPU-less CXL expander)
};

struct PmHeapOptions {
  std::size_t capacity = 0;
  std::string dir = "/tmp";
  PmBackend backend = PmBackend::Auto;
  int numa_node = -1;
};

class PmHeap final : public Heap {
 public:
  /// Throws strata::Error naming the problem: zero capacity, missing or unwritable directory,
  /// memkind unavailable, absent NUMA node, or a mapping the OS refuses.
  explicit PmHeap(const PmHeapOptions& options);
  ~PmHeap() override;
  PmBackend backend() const { return backend_; }
  /// True when the memory is a real slow device (fsdax PMem or a NUMA node), false when it is
  /// ordinary DRAM/page cache standing in for one (reports then say the slow tier is modeled).
  bool is_real_device() const { return real_device_; }

 private:
  struct Mapping;
  static Mapping map(const PmHeapOptions& options);
  PmHeap(const PmHeapOptions& options, Mapping mapping);
  PmBackend backend_;
  bool real_device_ = false;
  void* memkind_kind_ = nullptr;
  int fd_ = -1;
  std::size_t mapped_bytes_ = 0;
};

}  // namespace strata::memory
