#include "memory/heap.h"

#include <cstdint>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#ifdef STRATA_HAVE_MEMKIND
#include <memkind.h>
#endif
#ifdef STRATA_HAVE_NUMA
#include <numa.h>
#endif

#include "core/error.h"

namespace strata::memory {

std::size_t physical_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? static_cast<std::size_t>(pages) * static_cast<std::size_t>(page) : 0;
}

namespace {

std::string errno_text() { return std::strerror(errno); }

}  // namespace

// ---- Heap ---------------------------------------------------------------------------------------

Heap::Heap(Tier tier, std::string name, void* base, std::size_t capacity)
    : base_(static_cast<char*>(base)), tier_(tier), name_(std::move(name)), arena_(capacity) {}

Heap::~Heap() {
  // Regions still allocated belong to owners that outlived the heap; reclaim their bookkeeping.
  for (std::size_t off = 0; off < arena_.capacity();) {
    const Arena::Block b = arena_.block_containing(off);
    if (!b.free) delete static_cast<Region*>(b.owner);
    off = b.offset + b.size;
  }
}

Region* Heap::allocate(std::size_t bytes, Object* parent) {
  const std::optional<std::size_t> offset = arena_.allocate(bytes, nullptr);
  if (!offset) return nullptr;
  auto* region = new Region(this, base_ + *offset, bytes, *offset, parent);
  arena_.set_owner(*offset, region);
  return region;
}

void Heap::free(Region* region) {
  STRATA_ASSERT(region != nullptr && region->heap() == this, "Heap::free: region belongs to another heap");
  arena_.free(region->offset());
  delete region;
}

bool Heap::evictfrom(const std::function<bool(Region*)>& evict, Region* start, std::size_t bytes) {
  const std::size_t need = arena_.round(bytes);
  const std::size_t cap = arena_.capacity();
  if (need > cap) return false;
  std::size_t cursor = start ? start->offset() : 0;
  std::size_t span = arena_.block_containing(cursor).offset;
  cursor = span;
  std::size_t walked = 0;  // bytes stepped over; a full lap plus one span means no luck
  bool wrapped = false;
  while (walked <= cap + need) {
    if (cursor - span >= need) {
      const Arena::Block b = arena_.block_containing(span);
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
    const Arena::Block b = arena_.block_containing(cursor);
    if (b.free) {
      walked += b.offset + b.size - cursor;
      cursor = b.offset + b.size;
      continue;
    }
    auto* region = static_cast<Region*>(b.owner);
    if (evict(region)) {
      // The block is free now and may have merged with free neighbours; re-read at the cursor.
      const Arena::Block after = arena_.block_containing(cursor);
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
void* map_anonymous(std::size_t capacity, const char* what) {
  STRATA_CHECK(capacity > 0, what, ": the capacity must be positive");
  const std::size_t phys = physical_memory_bytes();
  STRATA_CHECK(phys == 0 || capacity <= phys, what, ": capacity of ", capacity,
               " bytes is larger than this machine's physical memory (", phys, " bytes)");
  // Reserve 2 MiB more and trim, so that the heap starts on a 2 MiB boundary: transparent huge
  // pages back only 2 MiB-aligned ranges, and an unaligned base would leave where the huge pages
  // fall (and so every tensor's TLB behaviour) to the address space layout of the process.
  constexpr std::size_t kHuge = std::size_t{2} << 20;
  void* raw = mmap(nullptr, capacity + kHuge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
  STRATA_CHECK(raw != MAP_FAILED, what, ": mmap of ", capacity, " bytes failed: ", errno_text());
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
}  // namespace

DramHeap::DramHeap(std::size_t capacity) : Heap(Tier::Fast, "dram", map_anonymous(capacity, "DramHeap"), capacity) {}

DramHeap::~DramHeap() { munmap(base_, capacity()); }

// ---- PmHeap -------------------------------------------------------------------------------------

struct PmHeap::Mapping {
  void* base = nullptr;
  std::size_t bytes = 0;
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
  STRATA_CHECK(!dir.empty() && fs::is_directory(dir, ec), "PmHeap: slow-tier directory '", dir,
               "' does not exist or is not a directory");
  STRATA_CHECK(access(dir.c_str(), W_OK | X_OK) == 0, "PmHeap: slow-tier directory '", dir,
               "' is not writable: ", errno_text());
}
}  // namespace

PmHeap::Mapping PmHeap::map(const PmHeapOptions& o) {
  STRATA_CHECK(o.capacity > 0, "PmHeap: the capacity must be positive");
  Mapping m;
  PmBackend backend = o.backend;
  if (backend == PmBackend::Auto) {
    // memkind earns its place on a DAX filesystem (real PMem or a CXL device in fsdax mode); on
    // an ordinary filesystem a sparse file mapping is the same memory without memkind's up-front
    // reservation of the whole capacity.
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
      // Unlimited kind size: memkind grows its temporary file; we take one extent of `capacity`.
      int err = memkind_create_pmem(o.dir.c_str(), 0, &kind);
      if (err != 0) {
        char msg[MEMKIND_ERROR_MESSAGE_SIZE];
        memkind_error_message(err, msg, sizeof msg);
        STRATA_CHECK(false, "PmHeap: memkind_create_pmem('", o.dir, "') failed: ", msg);
      }
      void* p = memkind_malloc(kind, o.capacity);
      if (p == nullptr) {
        memkind_destroy_kind(kind);
        STRATA_CHECK(false, "PmHeap: memkind could not provide ", o.capacity, " bytes in '", o.dir, "'");
      }
      m.base = p;
      m.bytes = o.capacity;
      m.kind = kind;
      m.real_device = memkind_check_dax_path(o.dir.c_str()) == 0;
      m.name = "pm:memkind:" + o.dir;
      return m;
#else
      STRATA_CHECK(false, "PmHeap: this build of Strata has no memkind support; use the mmap backend");
#endif
    }
    case PmBackend::Mmap: {
      check_directory(o.dir);
      std::string path = o.dir + "/strata-pm-XXXXXX";
      const int fd = mkstemp(path.data());
      STRATA_CHECK(fd >= 0, "PmHeap: cannot create a heap file in '", o.dir, "': ", errno_text());
      unlink(path.c_str());  // anonymous once mapped: nothing is left behind after a crash
      if (ftruncate(fd, static_cast<off_t>(o.capacity)) != 0) {
        const std::string why = errno_text();
        close(fd);
        STRATA_CHECK(false, "PmHeap: cannot size the heap file in '", o.dir, "' to ", o.capacity, " bytes: ", why);
      }
      void* p = mmap(nullptr, o.capacity, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
      if (p == MAP_FAILED) {
        const std::string why = errno_text();
        close(fd);
        STRATA_CHECK(false, "PmHeap: mmap of ", o.capacity, " bytes from '", o.dir, "' failed: ", why);
      }
      m.base = p;
      m.bytes = o.capacity;
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
      void* p = map_anonymous(o.capacity, "PmHeap");
      numa_tonode_memory(p, o.capacity, o.numa_node);
      m.base = p;
      m.bytes = o.capacity;
      m.real_device = true;
      m.name = "pm:numa:" + std::to_string(o.numa_node);
      return m;
#else
      STRATA_CHECK(false, "PmHeap: this build of Strata has no NUMA support (libnuma)");
#endif
    }
    case PmBackend::Auto: break;
  }
  STRATA_ASSERT(false, "PmHeap: unhandled backend");
  return m;
}

PmHeap::PmHeap(const PmHeapOptions& options) : PmHeap(options, map(options)) {}

PmHeap::PmHeap(const PmHeapOptions& options, Mapping m)
    : Heap(Tier::Slow, m.name, m.base, options.capacity),
      backend_(m.backend),
      real_device_(m.real_device),
      memkind_kind_(m.kind),
      fd_(m.fd),
      mapped_bytes_(m.bytes) {}

PmHeap::~PmHeap() {
#ifdef STRATA_HAVE_MEMKIND
  if (memkind_kind_ != nullptr) {
    memkind_free(static_cast<memkind_t>(memkind_kind_), base_);
    memkind_destroy_kind(static_cast<memkind_t>(memkind_kind_));
    return;
  }
#endif
  munmap(base_, mapped_bytes_);
  if (fd_ >= 0) close(fd_);
}

}  // namespace strata::memory
