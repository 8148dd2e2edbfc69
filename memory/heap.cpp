#include "memory/heap.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cstdint>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>
#include <thread>

#ifdef STRATA_HAVE_MEMKIND
#include <memkind.h>
#endif
#ifdef STRATA_HAVE_NUMA
#include <numa.h>
#endif

#include "core/error.h"
#include "core/file.h"
#include "memory/detail/fault_guard.h"
#include "memory/memory_stats.h"

namespace strata::memory {

std::size_t physical_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? static_cast<std::size_t>(pages) * static_cast<std::size_t>(page) : 0;
}

namespace {

std::string errno_text() { return std::strerror(errno); }

// Segments are multiples of 2 MiB (but the last, which ends at the limit): transparent huge pages
// back only 2 MiB-aligned ranges, and a file segment's offset must be page-aligned.
constexpr std::size_t kSegmentAlign = std::size_t{2} << 20;

std::size_t round_up(std::size_t bytes, std::size_t unit) { return (bytes + unit - 1) / unit * unit; }

// posix_fallocate of [offset, offset + bytes), or its error. Two processes growing heaps on one
// nearly full file system can each take part of the space and both fail, each giving its part
// back; when the space is there again after a failure, a few retries after a random pause let
// one of them have it.
int reserve_file_space(int fd, std::size_t offset, std::size_t bytes, const std::string& dir) {
  thread_local std::minstd_rand jitter(static_cast<unsigned>(getpid()) * 2654435761u + static_cast<unsigned>(offset));
  int err = 0;
  for (int attempt = 0; attempt < 8; ++attempt) {
    err = posix_fallocate(fd, static_cast<off_t>(offset), static_cast<off_t>(bytes));
    if (err != ENOSPC) return err;
    if (ftruncate(fd, static_cast<off_t>(offset)) != 0) return err;  // give the partial reservation back
    const std::optional<std::size_t> f = free_disk_bytes(dir);
    if (!f || *f < bytes) return err;  // not a race: the space is not there
    std::this_thread::sleep_for(std::chrono::milliseconds(1 + jitter() % 50));
  }
  return err;
}

std::string free_space_text(const std::string& dir) {
  const std::optional<std::size_t> f = free_disk_bytes(dir);
  return f ? format_mib(*f) + " free there" : std::string("free space unknown");
}

}  // namespace

// ---- Heap ---------------------------------------------------------------------------------------

Heap::Heap(Tier tier, std::string name, std::size_t limit) : tier_(tier), name_(std::move(name)), limit_(limit) {}

Heap::~Heap() {
  // Regions still allocated belong to owners that outlived the heap; reclaim their bookkeeping.
  if (!arena_) return;
  for (std::size_t off = 0; off < arena_->capacity();) {
    const Arena::Block b = arena_->block_containing(off);
    if (!b.free) delete static_cast<Region*>(b.owner);
    off = b.offset + b.size;
  }
}

void Heap::map_first_segment(std::size_t initial) {
  STRATA_CHECK(limit_ > 0, name_, ": the capacity must be positive");
  const std::size_t first =
      initial == 0 || initial >= limit_ ? limit_ : std::min(limit_, round_up(initial, kSegmentAlign));
  std::string why;
  STRATA_CHECK(add_segment(first, why), why);
}

bool Heap::add_segment(std::size_t bytes, std::string& why) {
  const int n = segment_count_.load(std::memory_order_relaxed);
  if (n == kMaxSegments) {
    why = name_ + ": " + std::to_string(kMaxSegments) + " segments mapped already";
    return false;
  }
  const std::size_t offset = arena_ ? arena_->capacity() : 0;
  void* base = map_segment(offset, bytes, why);
  if (base == nullptr) return false;
  segments_[static_cast<std::size_t>(n)] = Segment{offset, bytes, static_cast<char*>(base)};
  segment_count_.store(n + 1, std::memory_order_release);  // address_of sees it before the arena does
  if (!arena_)
    arena_ = std::make_unique<Arena>(bytes);
  else
    arena_->extend(bytes);
  return true;
}

bool Heap::grow(std::size_t bytes) {
  const std::size_t mapped = arena_->capacity();
  const std::size_t remaining = limit_ - mapped;
  const std::size_t need = arena_->round(bytes);
  if (need > remaining) {
    growth_failure_ = "it is at its limit of " + format_mib(limit_) + " (" + format_mib(mapped) + " mapped)";
    return false;
  }
  // At least the request and as much as is mapped already (the heap doubles), within the limit;
  // when that much cannot be had, just the request.
  const std::size_t doubled = std::min(remaining, round_up(std::max(need, mapped), kSegmentAlign));
  const std::size_t exact = std::min(remaining, round_up(need, kSegmentAlign));
  std::string why;
  if (add_segment(doubled, why) || (exact < doubled && add_segment(exact, why))) return true;
  growth_failure_ = why;
  return false;
}

bool Heap::reserve(std::size_t bytes) {
  if (bytes == 0 || arena_->largest_free() >= arena_->round(bytes)) return true;
  std::lock_guard<std::mutex> lock(grow_mutex_);
  if (arena_->largest_free() >= arena_->round(bytes)) return true;
  const std::size_t mapped = arena_->capacity();
  const std::size_t need = round_up(arena_->round(bytes), kSegmentAlign);
  if (need > limit_ - mapped) {
    growth_failure_ = "it is at its limit of " + format_mib(limit_) + " (" + format_mib(mapped) + " mapped)";
    return false;
  }
  std::string why;
  if (add_segment(need, why)) return true;
  growth_failure_ = why;
  return false;
}

char* Heap::address_of(std::size_t offset) const {
  const int n = segment_count_.load(std::memory_order_acquire);
  for (int i = n - 1; i >= 0; --i) {
    const Segment& s = segments_[static_cast<std::size_t>(i)];
    if (offset >= s.offset) return s.base + (offset - s.offset);
  }
  STRATA_ASSERT(false, "Heap::address_of: offset ", offset, " of heap '", name_, "' precedes every segment");
  return nullptr;
}

std::size_t Heap::largest_possible() const { return std::max(arena_->largest_segment(), limit_ - arena_->capacity()); }

Region* Heap::allocate(std::size_t bytes, Object* parent) {
  std::lock_guard<std::recursive_mutex> regions(regions_mutex_);
  std::optional<std::size_t> offset = arena_->allocate(bytes, nullptr);
  if (!offset && arena_->capacity() < limit_) {
    std::lock_guard<std::mutex> lock(grow_mutex_);
    offset = arena_->allocate(bytes, nullptr);  // another thread may have grown the heap meanwhile
    if (!offset && grow(bytes)) offset = arena_->allocate(bytes, nullptr);
  }
  if (!offset) return nullptr;
  auto* region = new Region(this, address_of(*offset), bytes, *offset, parent);
  arena_->set_owner(*offset, region);
  if (stats_ != nullptr) stats_->on_alloc(tier_, bytes);
  return region;
}

void Heap::free(Region* region) {
  STRATA_ASSERT(region != nullptr && region->heap() == this, "Heap::free: region belongs to another heap");
  std::lock_guard<std::recursive_mutex> regions(regions_mutex_);
  if (stats_ != nullptr) stats_->on_free(tier_, region->size());
  arena_->free(region->offset());
  delete region;
}

std::string Heap::no_room_message(std::size_t bytes) const {
  std::string msg = std::string(tier_ == Tier::Fast ? "the fast tier '" : "the slow tier '") + name_ +
                    "' has no room for " + std::to_string(bytes) + " bytes (" + format_mib(used()) + " of " +
                    format_mib(mapped()) + " mapped in use, limit " + format_mib(limit_) + ", largest free block " +
                    format_mib(largest_free()) + ")";
  std::lock_guard<std::mutex> lock(grow_mutex_);
  if (!growth_failure_.empty()) msg += "; growing it failed: " + growth_failure_;
  return msg;
}

void Heap::unmap_all() noexcept {
  const int n = segment_count_.exchange(0, std::memory_order_acq_rel);
  for (int i = 0; i < n; ++i) {
    const Segment& s = segments_[static_cast<std::size_t>(i)];
    unmap_segment(s.base, s.bytes);
  }
}

bool Heap::evictfrom(const std::function<bool(Region*)>& evict, Region* start, std::size_t bytes) {
  std::lock_guard<std::recursive_mutex> regions(regions_mutex_);  // Note [Unmanaged regions]
  Arena& arena = *arena_;
  const std::size_t need = arena.round(bytes);
  const std::size_t cap = arena.capacity();
  if (need > arena.largest_segment()) return false;
  std::size_t cursor = start ? start->offset() : 0;
  std::size_t span = arena.block_containing(cursor).offset;
  cursor = span;
  std::size_t walked = 0;  // bytes stepped over; a full lap plus one span means no luck
  bool wrapped = false;
  while (walked <= cap + need) {
    if (cursor - span >= need) {
      const Arena::Block b = arena.block_containing(span);
      if (b.free && b.offset + b.size >= span + need) return true;
      span = cursor = b.offset;  // the span was taken meanwhile: start over from here
      continue;
    }
    if (cursor >= cap) {
      if (wrapped) return false;
      wrapped = true;
      span = cursor = 0;
      continue;
    }
    if (cursor != span && arena.is_segment_start(cursor)) span = cursor;  // a span never crosses segments
    const Arena::Block b = arena.block_containing(cursor);
    if (b.free) {
      walked += b.offset + b.size - cursor;
      cursor = b.offset + b.size;
      continue;
    }
    auto* region = static_cast<Region*>(b.owner);
    if (evict(region)) {
      // The block is free now and may have merged with free neighbours; re-read at the cursor.
      const Arena::Block after = arena.block_containing(cursor);
      STRATA_ASSERT(after.free, "evictfrom: the callback reported success but the region at offset ", b.offset,
                    " of heap '", name_, "' is still allocated");
      continue;
    }
    walked += b.offset + b.size - cursor;
    span = cursor = b.offset + b.size;  // a refused block breaks contiguity
  }
  return false;
}

// ---- DramHeap -----------------------------------------------------------------------------------

namespace {
// Anonymous memory starting on a 2 MiB boundary, or null (errno set).
void* map_anonymous(std::size_t capacity) {
  // Reserve 2 MiB more and trim, so that the mapping starts on a 2 MiB boundary: transparent huge
  // pages back only 2 MiB-aligned ranges, and an unaligned base would leave where the huge pages
  // fall (and so every tensor's TLB behaviour) to the address space layout of the process.
  constexpr std::size_t kHuge = std::size_t{2} << 20;
  void* raw =
      mmap(nullptr, capacity + kHuge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (raw == MAP_FAILED) return nullptr;
  const auto start = reinterpret_cast<std::uintptr_t>(raw);
  const std::uintptr_t aligned = (start + kHuge - 1) & ~(std::uintptr_t{kHuge} - 1);
  if (aligned > start) munmap(raw, aligned - start);
  const std::uintptr_t end = start + capacity + kHuge;
  if (end > aligned + capacity) munmap(reinterpret_cast<void*>(aligned + capacity), end - (aligned + capacity));
  void* p = reinterpret_cast<void*>(aligned);
  // Transparent huge pages where the kernel offers them ("madvise" mode is Debian's default): the
  // fast tier is where random row lookups (embedding bags, gathers) land, and with 4 KiB pages
  // they wait on page walks as much as on DRAM (about 1.4x slower on a 1 GiB table). Advisory:
  // without THP the heap works the same, only slower.
  madvise(p, capacity, MADV_HUGEPAGE);
  return p;
}

void check_fits_the_machine(std::size_t capacity, const char* what) {
  STRATA_CHECK(capacity > 0, what, ": the capacity must be positive");
  const std::size_t phys = physical_memory_bytes();
  STRATA_CHECK(phys == 0 || capacity <= phys, what, ": capacity of ", capacity,
               " bytes is larger than this machine's physical memory (", phys, " bytes)");
}

std::string anonymous_failure(const std::string& heap, std::size_t bytes) {
  return heap + ": mmap of " + std::to_string(bytes) + " bytes failed: " + errno_text() +
         (errno == ENOMEM ? " (the address space is limited: see ulimit -v)" : "");
}
}  // namespace

DramHeap::DramHeap(std::size_t capacity, std::size_t initial) : Heap(Tier::Fast, "dram", capacity) {
  check_fits_the_machine(capacity, "DramHeap");
  map_first_segment(initial);
}

DramHeap::~DramHeap() { unmap_all(); }

void* DramHeap::map_segment(std::size_t, std::size_t bytes, std::string& why) {
  void* p = map_anonymous(bytes);
  if (p == nullptr) why = anonymous_failure("DramHeap", bytes);
  return p;
}

void DramHeap::unmap_segment(void* base, std::size_t bytes) noexcept { munmap(base, bytes); }

// ---- PmHeap -------------------------------------------------------------------------------------

struct PmHeap::Backing {
  PmBackend backend = PmBackend::Mmap;
  bool real_device = false;
  void* kind = nullptr;
  int fd = -1;
  std::string name;
};

namespace {
void check_directory(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  STRATA_CHECK(!dir.empty() && fs::exists(dir, ec), "PmHeap: slow-tier directory '", dir, "' does not exist");
  STRATA_CHECK(fs::is_directory(dir, ec), "PmHeap: slow-tier directory '", dir, "' is not a directory");
  STRATA_CHECK(access(dir.c_str(), W_OK | X_OK) == 0, "PmHeap: slow-tier directory '", dir,
               "' is not writable: ", errno_text());
}
}  // namespace

PmHeap::Backing PmHeap::open_backing(const PmHeapOptions& o) {
  STRATA_CHECK(o.capacity > 0, "PmHeap: the capacity must be positive");
  Backing m;
  PmBackend backend = o.backend;
  if (backend == PmBackend::Auto) {
    // memkind earns its place on a DAX filesystem (real PMem or a CXL device in fsdax mode); on
    // an ordinary filesystem a file mapping is the same memory without memkind's allocator.
    backend = PmBackend::Mmap;
#ifdef STRATA_HAVE_MEMKIND
    if (memkind_check_dax_path(o.dir.c_str()) == 0) backend = PmBackend::Memkind;
#endif
  }
  m.backend = backend;
  switch (backend) {
    case PmBackend::Memkind: {
#ifdef STRATA_HAVE_MEMKIND
      check_directory(o.dir);
      memkind_t kind = nullptr;
      // Unlimited kind size: memkind grows its temporary file; each segment is one extent.
      int err = memkind_create_pmem(o.dir.c_str(), 0, &kind);
      if (err != 0) {
        char msg[MEMKIND_ERROR_MESSAGE_SIZE];
        memkind_error_message(err, msg, sizeof msg);
        STRATA_FAIL("PmHeap: memkind_create_pmem('", o.dir, "') failed: ", msg);
      }
      m.kind = kind;
      m.real_device = memkind_check_dax_path(o.dir.c_str()) == 0;
      m.name = "pm:memkind:" + o.dir;
      return m;
#else
      STRATA_FAIL("PmHeap: this build of Strata has no memkind support; use the mmap backend");
#endif
    }
    case PmBackend::Mmap: {
      check_directory(o.dir);
      std::string path = o.dir + "/strata-pm-XXXXXX";
      const int fd = mkstemp(path.data());
      STRATA_CHECK(fd >= 0, "PmHeap: cannot create a heap file in '", o.dir, "': ", errno_text());
      unlink(path.c_str());  // anonymous once mapped: nothing is left behind after a crash
      m.fd = fd;
      m.name = "pm:mmap:" + o.dir;
      return m;
    }
    case PmBackend::Numa: {
#ifdef STRATA_HAVE_NUMA
      STRATA_CHECK(numa_available() >= 0, "PmHeap: NUMA is not available on this machine");
      STRATA_CHECK(o.numa_node >= 0 && o.numa_node <= numa_max_node(), "PmHeap: NUMA node ", o.numa_node,
                   " does not exist (nodes 0..", numa_max_node(), ")");
      long long free_bytes = 0;
      const long long node_size = numa_node_size64(o.numa_node, &free_bytes);
      STRATA_CHECK(node_size > 0, "PmHeap: NUMA node ", o.numa_node, " has no memory");
      check_fits_the_machine(o.capacity, "PmHeap");
      m.real_device = true;
      m.name = "pm:numa:" + std::to_string(o.numa_node);
      return m;
#else
      STRATA_FAIL("PmHeap: this build of Strata has no NUMA support (libnuma)");
#endif
    }
    case PmBackend::Auto: break;
  }
  STRATA_ASSERT(false, "PmHeap: unhandled backend");
  return m;
}

PmHeap::PmHeap(const PmHeapOptions& options) : PmHeap(options, open_backing(options)) {}

PmHeap::PmHeap(const PmHeapOptions& options, Backing b)
    : Heap(Tier::Slow, b.name, options.capacity),
      dir_(options.dir),
      numa_node_(options.numa_node),
      backend_(b.backend),
      real_device_(b.real_device),
      memkind_kind_(b.kind),
      fd_(b.fd) {
  try {
    map_first_segment(options.initial);
  } catch (...) {
    unmap_all();
#ifdef STRATA_HAVE_MEMKIND
    if (memkind_kind_ != nullptr) memkind_destroy_kind(static_cast<memkind_t>(memkind_kind_));
#endif
    if (fd_ >= 0) close(fd_);
    throw;
  }
}

void* PmHeap::map_segment(std::size_t offset, std::size_t bytes, std::string& why) {
  const std::string asked = format_mib(bytes) + " for the slow tier in '" + dir_ + "'";
  void* p = nullptr;
  switch (backend_) {
    case PmBackend::Mmap: {
      // Reserve the file's blocks before mapping them (Note [Heaps grow on demand]): a sparse file
      // would fault with SIGBUS on the first write to a page the file system cannot supply.
      const int err = reserve_file_space(fd_, offset, bytes, dir_);
      // A file system that cannot reserve (EOPNOTSUPP, EINVAL) gets a sized file whose pages are
      // then written one by one under the SIGBUS guard instead.
      const bool touch = err == EOPNOTSUPP || err == EINVAL;
      if (err != 0 && (!touch || ftruncate(fd_, static_cast<off_t>(offset + bytes)) != 0)) {
        if (ftruncate(fd_, static_cast<off_t>(offset)) != 0) {}  // give back a partial reservation
        why = "cannot reserve " + asked + ": " + std::strerror(err) + " (" + free_space_text(dir_) + ")";
        return nullptr;
      }
      p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, static_cast<off_t>(offset));
      if (p == MAP_FAILED) {
        why = "mmap of " + asked + " failed: " + errno_text() +
              (errno == ENOMEM ? " (the address space is limited: see ulimit -v)" : "");
        if (ftruncate(fd_, static_cast<off_t>(offset)) != 0) {}
        return nullptr;
      }
      if (touch && !touch_pages(p, bytes)) {
        munmap(p, bytes);
        if (ftruncate(fd_, static_cast<off_t>(offset)) != 0) {}
        why = "cannot back " + asked + ": a page faulted (SIGBUS; " + free_space_text(dir_) + ")";
        return nullptr;
      }
      break;
    }
    case PmBackend::Memkind: {
#ifdef STRATA_HAVE_MEMKIND
      p = memkind_malloc(static_cast<memkind_t>(memkind_kind_), bytes);
      if (p == nullptr) {
        why = "memkind could not provide " + asked + " (" + free_space_text(dir_) + ")";
        return nullptr;
      }
      // memkind's file cannot be reserved from here: back every page now, under a SIGBUS guard.
      if (!touch_pages(p, bytes)) {
        memkind_free(static_cast<memkind_t>(memkind_kind_), p);
        why = "cannot back " + asked + ": a page faulted (SIGBUS; " + free_space_text(dir_) + ")";
        return nullptr;
      }
#endif
      break;
    }
    case PmBackend::Numa: {
#ifdef STRATA_HAVE_NUMA
      p = map_anonymous(bytes);
      if (p == nullptr) {
        why = anonymous_failure(name(), bytes);
        return nullptr;
      }
      numa_tonode_memory(p, bytes, numa_node_);
#endif
      return p;  // anonymous memory: no file behind it to fault
    }
    case PmBackend::Auto: break;
  }
  if (p != nullptr) register_fault_range(p, bytes, name());
  return p;
}

void PmHeap::unmap_segment(void* base, std::size_t bytes) noexcept {
  if (backend_ != PmBackend::Numa) unregister_fault_range(base);
#ifdef STRATA_HAVE_MEMKIND
  if (memkind_kind_ != nullptr) {
    memkind_free(static_cast<memkind_t>(memkind_kind_), base);
    return;
  }
#endif
  munmap(base, bytes);
}

PmHeap::~PmHeap() {
  unmap_all();
#ifdef STRATA_HAVE_MEMKIND
  if (memkind_kind_ != nullptr) memkind_destroy_kind(static_cast<memkind_t>(memkind_kind_));
#endif
  if (fd_ >= 0) close(fd_);
}

}  // namespace strata::memory
