#include "embeddings/cached_table.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <new>
#include <thread>
#include <vector>

#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>
#endif

#include "core/error.h"
#include "core/threading.h"
#include "memory/heap.h"

namespace strata::emb {

// ---------------------------------------------------------------------------------------------
// Per-thread counter shards.
//
// Every access counts a hit or a miss. A shared atomic counter would bounce its cache line between
// the threads of a lookup on every row, so each table keeps kCounterShards cache-line-sized shards
// and each live thread owns one slot index (the same index in every table): the owner updates its
// shard with a relaxed load + store, which is exact because nobody else writes it. Slots are
// handed out by a registry and returned when the thread exits (the registry's mutex orders the
// last writes of the old owner before the first of the new). Threads beyond kCounterShards - 1
// live ones share slot kSharedSlot and use fetch_add there.
namespace detail {
namespace {

struct SlotRegistry {
  std::mutex mutex;
  std::vector<int> free;
  int next = 0;
};

SlotRegistry& registry() {
  // Never destroyed: threads may exit (and return their slots) during static destruction.
  static SlotRegistry* r = new SlotRegistry;
  return *r;
}

struct SlotHolder {
  int slot = -1;
  ~SlotHolder() {
    // Accesses made by later thread_local destructors fall back to the shared (atomic) shard.
    t_cache_slot = kSharedSlot;
    if (slot < 0 || slot == kSharedSlot) return;
    SlotRegistry& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    r.free.push_back(slot);
  }
};

}  // namespace

int acquire_thread_slot() {
  thread_local SlotHolder holder;
  SlotRegistry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  int s = kSharedSlot;
  if (!r.free.empty()) {
    s = r.free.back();
    r.free.pop_back();
  } else if (r.next < kSharedSlot) {
    s = r.next++;
  }
  holder.slot = s;
  return s;
}

}  // namespace detail

namespace {

// One throttle reservation per this many bytes of moves per thread (the kernels charge per chunk).
constexpr std::uint64_t kChargeBatchBytes = 16 * 1024;

void cpu_relax() {
#if defined(__x86_64__) || defined(_M_X64)
  _mm_pause();
#endif
}

// Copies `bytes` (a multiple of 8; dst and src 8-byte aligned) with non-temporal stores: the row
// is going home to the slow tier and will not be read soon (dissertation §5.3.5: non-temporal
// write-back groups the writes at the memory controller). The caller fences.
void stream_row(std::byte* dst, const std::byte* src, std::size_t bytes) {
#if defined(__x86_64__) || defined(_M_X64)
  while (bytes >= 8 && (reinterpret_cast<std::uintptr_t>(dst) & 31) != 0) {
    long long v;
    std::memcpy(&v, src, 8);
    _mm_stream_si64(reinterpret_cast<long long*>(dst), v);
    dst += 8, src += 8, bytes -= 8;
  }
#if defined(__AVX__)
  for (; bytes >= 32; dst += 32, src += 32, bytes -= 32)
    _mm256_stream_si256(reinterpret_cast<__m256i*>(dst), _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src)));
#else
  for (; bytes >= 16; dst += 16, src += 16, bytes -= 16)
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst), _mm_loadu_si128(reinterpret_cast<const __m128i*>(src)));
#endif
  for (; bytes >= 8; dst += 8, src += 8, bytes -= 8) {
    long long v;
    std::memcpy(&v, src, 8);
    _mm_stream_si64(reinterpret_cast<long long*>(dst), v);
  }
#else
  for (; bytes >= 8; dst += 8, src += 8, bytes -= 8) {
    std::uint64_t v;
    std::memcpy(&v, src, 8);
    __builtin_nontemporal_store(v, reinterpret_cast<std::uint64_t*>(dst));
  }
#endif
}

void store_fence() {
#if defined(__x86_64__) || defined(_M_X64)
  _mm_sfence();
#else
  std::atomic_thread_fence(std::memory_order_seq_cst);
#endif
}

memory::Region* allocate_or_throw(memory::Heap* heap, std::size_t bytes, const char* what, int64_t nvectors,
                                  std::size_t unit) {
  memory::Region* r = heap->allocate(bytes, nullptr);
  STRATA_CHECK(r != nullptr, "CachedTable: the ", heap->name(), " heap has no room for the ", what, " of ", nvectors,
               " rows (", unit, " bytes each, ", bytes, " bytes asked, largest free block ", heap->largest_free(),
               " of ", heap->capacity(), ")");
  return r;
}

}  // namespace

struct CachedTable::Page {
  memory::Region* region = nullptr;
  std::byte* slots = nullptr;
  std::atomic<std::uintptr_t>* backedges = nullptr;
  alignas(64) std::atomic<int64_t> bump{0};
};

CachedTable::CachedTable(int64_t nvectors, int64_t featuresize, ElemType type, TableMemory slow, TableMemory fast,
                         const CachedTableOptions& options)
    : Table(nvectors, featuresize, type, slow), fast_(fast) {
  STRATA_CHECK(slow.heap != nullptr, "CachedTable: no slow heap given for its base rows");
  STRATA_CHECK(fast.heap != nullptr, "CachedTable: no fast heap given for its pointer table and cache pages");
  STRATA_CHECK(options.page_rows >= 0, "CachedTable: page_rows must be >= 0 (0: automatic), got ", options.page_rows);
  STRATA_CHECK(options.cachelower <= std::numeric_limits<std::size_t>::max() / 2 &&
                   options.cacheslack <= std::numeric_limits<std::size_t>::max() / 2,
               "CachedTable: cachelower/cacheslack are too large");
  stride_ = (row_bytes() + 7) & ~std::size_t{7};
  const std::size_t slot_bytes = stride_ + sizeof(std::uintptr_t);
  const std::size_t limit = options.cachelower + options.cacheslack;
  page_rows_ =
      options.page_rows > 0 ? options.page_rows : std::max<int64_t>(1, static_cast<int64_t>(limit / slot_bytes / 32));
  STRATA_CHECK(static_cast<std::size_t>(page_rows_) <= (std::size_t{1} << 40) / slot_bytes, "CachedTable: page_rows ",
               page_rows_, " is too large");
  page_bytes_ = static_cast<std::size_t>(page_rows_) * slot_bytes;
  cachelower_.store(options.cachelower, std::memory_order_relaxed);
  cacheslack_.store(options.cacheslack, std::memory_order_relaxed);

  const std::size_t base_bytes = static_cast<std::size_t>(nvectors) * stride_;
  base_region_ = allocate_or_throw(slow.heap, base_bytes, "base rows", nvectors, stride_);
  base_ = static_cast<std::byte*>(base_region_->data());
  base_end_ = base_ + base_bytes;
  slow_base_ = slow.heap->tier() == memory::Tier::Slow;
  std::memset(base_, 0, base_bytes);

  try {
    ptr_region_ = allocate_or_throw(fast.heap, pointer_table_bytes(), "pointer table", nvectors, 8);
  } catch (...) {
    slow.heap->free(base_region_);
    throw;
  }
  ptrs_ = static_cast<std::atomic<std::uintptr_t>*>(ptr_region_->data());
  for (int64_t r = 0; r < nvectors; ++r)
    new (ptrs_ + r) std::atomic<std::uintptr_t>(reinterpret_cast<std::uintptr_t>(home(r)));
  shards_ = std::make_unique<Shard[]>(detail::kCounterShards);
}

CachedTable::~CachedTable() {
  for (auto& p : pages_) fast_.heap->free(p->region);
  pages_.clear();
  if (ptr_region_ != nullptr) fast_.heap->free(ptr_region_);
  if (base_region_ != nullptr) memory_.heap->free(base_region_);
}

std::byte* CachedTable::slot_ptr(const Page& p, int64_t i) const {
  return p.slots + static_cast<std::size_t>(i) * stride_;
}

std::byte* CachedTable::forward_miss(int64_t row, std::uintptr_t e) {
  count(&Shard::misses);
  if ((e & kLockBit) != 0 || !caching_.load(std::memory_order_relaxed) || full_.load(std::memory_order_relaxed))
    return address(e);
  if (!admit_all_) {
    const std::size_t at = static_cast<std::size_t>(row) * admit_.stride;
    const bool admit = (admit_.flags != nullptr && admit_.flags[at] == admit_.flag_value) ||
                       (admit_.counts != nullptr && admit_.counts[at] >= admit_.min_count);
    if (!admit) return address(e);
  }
  STRATA_ASSERT(!flushing_.load(std::memory_order_relaxed), "embedding ", name(), ": a Forward access of row ", row,
                " ran during a flush; flushes must run between phases (Note [CachedTable phases])");
  // §5.4: take ownership of the row with a compare-and-swap on its pointer-table entry.
  if (!entry(row).compare_exchange_strong(e, e | kLockBit, std::memory_order_acquire, std::memory_order_acquire))
    return address(e);  // another thread owns it (home) or has just cached it (its slot)
  const Slot s = allocate_slot();
  if (s.page == nullptr) {  // the cache is full: give the row back
    entry(row).store(e, std::memory_order_release);
    return address(e);
  }
  std::byte* dst = slot_ptr(*s.page, s.index);
  std::memcpy(dst, address(e), stride_);
  s.page->backedges[s.index].store(e, std::memory_order_relaxed);
  entry(row).store(reinterpret_cast<std::uintptr_t>(dst) | kCachedBit, std::memory_order_release);
  count(&Shard::rows_cached);
  if (slow_base_) {
    const int slot = detail::cache_thread_slot();
    std::atomic<std::uint64_t>& pending = shards_[slot].pending_read_bytes;
    std::uint64_t now;
    if (slot == detail::kSharedSlot) {
      now = pending.fetch_add(row_bytes(), std::memory_order_relaxed) + row_bytes();
      if (now >= kChargeBatchBytes) charge_slow_read(pending.exchange(0, std::memory_order_relaxed));
    } else {
      now = pending.load(std::memory_order_relaxed) + row_bytes();
      if (now >= kChargeBatchBytes) {
        pending.store(0, std::memory_order_relaxed);
        charge_slow_read(now);
      } else {
        pending.store(now, std::memory_order_relaxed);
      }
    }
  }
  return dst;
}

std::uintptr_t CachedTable::wait_unlocked(int64_t row) const {
  std::uintptr_t e;
  int spins = 0;
  while (((e = entry(row).load(std::memory_order_acquire)) & kLockBit) != 0) {
    if (++spins < 64)
      cpu_relax();
    else
      std::this_thread::yield();
  }
  return e;
}

CachedTable::Slot CachedTable::allocate_slot() {
  for (;;) {
    Page* p = current_.load(std::memory_order_acquire);
    if (p != nullptr) {
      const int64_t i = p->bump.fetch_add(1, std::memory_order_relaxed);
      if (i < page_rows_) return {p, i};
    }
    std::lock_guard<std::mutex> lock(mutex_);
    if (current_.load(std::memory_order_relaxed) != p) continue;  // another thread installed a page
    Page* fresh = new_page_locked(false);
    if (fresh == nullptr) return {};
    current_.store(fresh, std::memory_order_release);
  }
}

CachedTable::Page* CachedTable::new_page_locked(bool ignore_limit) {
  const std::size_t limit = cachelower() + cacheslack();
  if (!ignore_limit && cache_bytes() + page_bytes_ > limit) {
    full_.store(true, std::memory_order_relaxed);
    return nullptr;
  }
  memory::Region* region = fast_.heap->allocate(page_bytes_, nullptr);
  if (region == nullptr) {  // the fast heap ran out before the limit did
    if (!ignore_limit) full_.store(true, std::memory_order_relaxed);
    return nullptr;
  }
  auto page = std::make_unique<Page>();
  page->region = region;
  page->slots = static_cast<std::byte*>(region->data());
  page->backedges =
      reinterpret_cast<std::atomic<std::uintptr_t>*>(page->slots + static_cast<std::size_t>(page_rows_) * stride_);
  for (int64_t i = 0; i < page_rows_; ++i) new (page->backedges + i) std::atomic<std::uintptr_t>(0);
  Page* raw = page.get();
  pages_.push_back(std::move(page));
  cache_bytes_.fetch_add(page_bytes_, std::memory_order_relaxed);
  pages_allocated_.fetch_add(1, std::memory_order_relaxed);
  return raw;
}

bool CachedTable::is_full() const {
  if (full_.load(std::memory_order_relaxed)) return true;
  const Page* p = current_.load(std::memory_order_acquire);
  if (p != nullptr && p->bump.load(std::memory_order_relaxed) < page_rows_) return false;
  return cache_bytes() + page_bytes_ > cachelower() + cacheslack();
}

void CachedTable::set_cachelower(std::size_t bytes) {
  STRATA_CHECK(bytes <= std::numeric_limits<std::size_t>::max() / 2, "CachedTable: cachelower ", bytes,
               " is too large");
  cachelower_.store(bytes, std::memory_order_relaxed);
  full_.store(false, std::memory_order_relaxed);
}

void CachedTable::set_cacheslack(std::size_t bytes) {
  STRATA_CHECK(bytes <= std::numeric_limits<std::size_t>::max() / 2, "CachedTable: cacheslack ", bytes,
               " is too large");
  cacheslack_.store(bytes, std::memory_order_relaxed);
  full_.store(false, std::memory_order_relaxed);
}

void CachedTable::set_caching(bool enabled) { caching_.store(enabled, std::memory_order_relaxed); }

void CachedTable::set_admission(const AdmissionRule& rule) {
  STRATA_CHECK(rule.stride >= 1, "CachedTable::set_admission: the stride must be >= 1");
  admit_ = rule;
  admit_all_ = rule.flags == nullptr && rule.counts == nullptr;
}

int64_t CachedTable::free_slots() const {
  const std::size_t limit = cachelower() + cacheslack();
  const std::size_t bytes = cache_bytes();
  int64_t n = bytes < limit ? static_cast<int64_t>((limit - bytes) / page_bytes_) * page_rows_ : 0;
  if (full_.load(std::memory_order_relaxed)) n = 0;
  const Page* p = current_.load(std::memory_order_acquire);
  if (p != nullptr) n += std::max<int64_t>(0, page_rows_ - p->bump.load(std::memory_order_relaxed));
  return n;
}

std::size_t CachedTable::flush_clean() { return retire(std::numeric_limits<std::size_t>::max(), false, true, {}); }

std::size_t CachedTable::flush_dirty() { return retire(std::numeric_limits<std::size_t>::max(), true, true, {}); }

std::size_t CachedTable::retire_oldest(std::size_t pages, bool write_back, const std::function<bool(int64_t)>& retain) {
  return retire(pages, write_back, false, retain);
}

std::size_t CachedTable::retire(std::size_t max_pages, bool write_back, bool respect_lower,
                                const std::function<bool(int64_t)>& retain) {
  settle_charges();
  struct FlushFlag {
    std::atomic<bool>& f;
    explicit FlushFlag(std::atomic<bool>& flag) : f(flag) { f.store(true, std::memory_order_relaxed); }
    ~FlushFlag() { f.store(false, std::memory_order_relaxed); }
  } flag(flushing_);
  std::lock_guard<std::mutex> lock(mutex_);
  const std::size_t originals = std::min(max_pages, pages_.size());
  Page* retention_page = nullptr;
  std::size_t retired = 0;
  while (retired < originals) {
    if (respect_lower && cache_bytes() <= cachelower()) break;
    Page* front = pages_.front().get();
    const bool was_current = current_.load(std::memory_order_relaxed) == front;
    retire_front_locked(write_back, retain, retention_page);
    if (was_current) current_.store(nullptr, std::memory_order_release);
    ++retired;
  }
  if (retention_page != nullptr) current_.store(retention_page, std::memory_order_release);
  full_.store(false, std::memory_order_relaxed);
  return retired;
}

void CachedTable::retire_front_locked(bool write_back, const std::function<bool(int64_t)>& retain,
                                      Page*& retention_page) {
  Page& page = *pages_.front();
  const int64_t n = std::min<int64_t>(page.bump.load(std::memory_order_relaxed), page_rows_);
  enum Fate : std::uint8_t { Empty, Drop, WriteBack, Retain };
  std::vector<std::uint8_t>& fates = fates_;
  std::vector<int64_t>& dirty = writeback_;
  fates.assign(static_cast<std::size_t>(n), Empty);
  dirty.clear();

  // Pass 1: check every slot and decide its fate before changing anything, so that a refused
  // flush_clean leaves this page as it was.
  for (int64_t i = 0; i < n; ++i) {
    const std::uintptr_t home_addr = page.backedges[i].load(std::memory_order_relaxed);
    if (home_addr == 0) continue;
    const auto* h = reinterpret_cast<const std::byte*>(home_addr);
    const int64_t row = static_cast<int64_t>(static_cast<std::size_t>(h - base_) / stride_);
    STRATA_ASSERT(h >= base_ && h < base_end_ && this->home(row) == h, "embedding ", name(),
                  ": a back-edge does not point at a row's home");
    const std::uintptr_t e = entry(row).load(std::memory_order_relaxed);
    STRATA_ASSERT((e & kCachedBit) != 0 && (e & kLockBit) == 0 && address(e) == slot_ptr(page, i), "embedding ", name(),
                  ": row ", row,
                  " is locked or does not point at the slot being retired; a flush ran "
                  "concurrently with an access (Note [CachedTable phases])");
    const bool is_dirty = (e & kDirtyBit) != 0;
    if (retain && retain(row)) {
      fates[i] = Retain;
    } else if (is_dirty) {
      STRATA_CHECK(write_back, "embedding ", name(), ": flush_clean would drop row ", row,
                   ", whose cached copy was updated (dirty); use flush_dirty to write it home");
      fates[i] = WriteBack;
    } else {
      fates[i] = Drop;
    }
  }

  // Pass 2: retained rows move to a fresh page (fast tier to fast tier; no slow-tier traffic).
  std::uint64_t retained = 0, dropped = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (fates[i] != Retain) continue;
    const std::uintptr_t home_addr = page.backedges[i].load(std::memory_order_relaxed);
    const int64_t row = static_cast<int64_t>((reinterpret_cast<const std::byte*>(home_addr) - base_) /
                                             static_cast<std::ptrdiff_t>(stride_));
    const std::uintptr_t e = entry(row).load(std::memory_order_relaxed);
    if (retention_page == nullptr || retention_page->bump.load(std::memory_order_relaxed) >= page_rows_)
      retention_page = new_page_locked(true);
    if (retention_page == nullptr) {
      // No fast memory for another page: the row is retired after all; a dirty one is written home
      // even by flush_clean, so that nothing is lost.
      fates[i] = (e & kDirtyBit) != 0 ? WriteBack : Drop;
      continue;
    }
    const int64_t j = retention_page->bump.fetch_add(1, std::memory_order_relaxed);
    std::byte* dst = slot_ptr(*retention_page, j);
    std::memcpy(dst, slot_ptr(page, i), stride_);
    retention_page->backedges[j].store(home_addr, std::memory_order_relaxed);
    entry(row).store(reinterpret_cast<std::uintptr_t>(dst) | kCachedBit | (e & kDirtyBit), std::memory_order_release);
    ++retained;
  }

  // Pass 3: clean rows point home again; dirty rows are written home first.
  for (int64_t i = 0; i < n; ++i) {
    if (fates[i] == WriteBack) {
      dirty.push_back(i);
    } else if (fates[i] == Drop) {
      const std::uintptr_t home_addr = page.backedges[i].load(std::memory_order_relaxed);
      const int64_t row = static_cast<int64_t>((reinterpret_cast<const std::byte*>(home_addr) - base_) /
                                               static_cast<std::ptrdiff_t>(stride_));
      entry(row).store(home_addr, std::memory_order_release);
      ++dropped;
    }
  }
  const std::vector<int64_t>& wb = dirty;
  parallel_for(static_cast<int64_t>(wb.size()), 256, [&](int64_t b, int64_t e) {
    for (int64_t k = b; k < e; ++k) {
      const int64_t i = wb[static_cast<std::size_t>(k)];
      stream_row(reinterpret_cast<std::byte*>(page.backedges[i].load(std::memory_order_relaxed)), slot_ptr(page, i),
                 stride_);
    }
    store_fence();  // the rows are home before any entry points there again
    for (int64_t k = b; k < e; ++k) {
      const int64_t i = wb[static_cast<std::size_t>(k)];
      const std::uintptr_t home_addr = page.backedges[i].load(std::memory_order_relaxed);
      const int64_t row = static_cast<int64_t>((reinterpret_cast<const std::byte*>(home_addr) - base_) /
                                               static_cast<std::ptrdiff_t>(stride_));
      entry(row).store(home_addr, std::memory_order_release);
    }
    if (slow_base_) charge_slow_write(static_cast<std::size_t>(e - b) * row_bytes());
  });

  rows_written_back_.fetch_add(wb.size(), std::memory_order_relaxed);
  rows_dropped_.fetch_add(dropped, std::memory_order_relaxed);
  rows_retained_.fetch_add(retained, std::memory_order_relaxed);
  pages_flushed_.fetch_add(1, std::memory_order_relaxed);
  fast_.heap->free(page.region);
  pages_.pop_front();
  cache_bytes_.fetch_sub(page_bytes_, std::memory_order_relaxed);
}

std::size_t CachedTable::npages() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return pages_.size();
}

int64_t CachedTable::cached_rows() const {
  std::lock_guard<std::mutex> lock(mutex_);
  int64_t n = 0;
  for (const auto& p : pages_) {
    const int64_t filled = std::min<int64_t>(p->bump.load(std::memory_order_relaxed), page_rows_);
    for (int64_t i = 0; i < filled; ++i) n += p->backedges[i].load(std::memory_order_relaxed) != 0;
  }
  return n;
}

const std::byte* CachedTable::backedge(std::size_t page, int64_t slot) const {
  std::lock_guard<std::mutex> lock(mutex_);
  STRATA_CHECK(page < pages_.size(), "embedding ", name(), ": page ", page, " is out of range [0, ", pages_.size(),
               ")");
  STRATA_CHECK(slot >= 0 && slot < page_rows_, "embedding ", name(), ": slot ", slot, " is out of range [0, ",
               page_rows_, ")");
  return reinterpret_cast<const std::byte*>(pages_[page]->backedges[slot].load(std::memory_order_acquire));
}

const std::byte* CachedTable::slot_address(std::size_t page, int64_t slot) const {
  std::lock_guard<std::mutex> lock(mutex_);
  STRATA_CHECK(page < pages_.size(), "embedding ", name(), ": page ", page, " is out of range [0, ", pages_.size(),
               ")");
  STRATA_CHECK(slot >= 0 && slot < page_rows_, "embedding ", name(), ": slot ", slot, " is out of range [0, ",
               page_rows_, ")");
  return slot_ptr(*pages_[page], slot);
}

void CachedTable::append_page_rows(std::size_t page, std::vector<int64_t>& rows) const {
  std::lock_guard<std::mutex> lock(mutex_);
  STRATA_CHECK(page < pages_.size(), "embedding ", name(), ": page ", page, " is out of range [0, ", pages_.size(),
               ")");
  const Page& p = *pages_[page];
  const int64_t filled = std::min<int64_t>(p.bump.load(std::memory_order_relaxed), page_rows_);
  for (int64_t i = 0; i < filled; ++i) {
    const std::uintptr_t h = p.backedges[i].load(std::memory_order_relaxed);
    if (h != 0)
      rows.push_back(
          static_cast<int64_t>((reinterpret_cast<const std::byte*>(h) - base_) / static_cast<std::ptrdiff_t>(stride_)));
  }
}

CacheCounters CachedTable::cache_counters() const {
  CacheCounters c;
  for (int s = 0; s < detail::kCounterShards; ++s) {
    const Shard& sh = shards_[s];
    c.hits += sh.hits.load(std::memory_order_relaxed);
    c.misses += sh.misses.load(std::memory_order_relaxed);
    c.update_hits += sh.update_hits.load(std::memory_order_relaxed);
    c.update_misses += sh.update_misses.load(std::memory_order_relaxed);
    c.rows_cached += sh.rows_cached.load(std::memory_order_relaxed);
  }
  c.rows_written_back = rows_written_back_.load(std::memory_order_relaxed);
  c.rows_dropped = rows_dropped_.load(std::memory_order_relaxed);
  c.rows_retained = rows_retained_.load(std::memory_order_relaxed);
  c.pages_flushed = pages_flushed_.load(std::memory_order_relaxed);
  c.pages_allocated = pages_allocated_.load(std::memory_order_relaxed);
  return c;
}

void CachedTable::reset_cache_counters() {
  for (int s = 0; s < detail::kCounterShards; ++s) {
    Shard& sh = shards_[s];
    sh.hits.store(0, std::memory_order_relaxed);
    sh.misses.store(0, std::memory_order_relaxed);
    sh.update_hits.store(0, std::memory_order_relaxed);
    sh.update_misses.store(0, std::memory_order_relaxed);
    sh.rows_cached.store(0, std::memory_order_relaxed);
  }
  rows_written_back_.store(0, std::memory_order_relaxed);
  rows_dropped_.store(0, std::memory_order_relaxed);
  rows_retained_.store(0, std::memory_order_relaxed);
  pages_flushed_.store(0, std::memory_order_relaxed);
  pages_allocated_.store(0, std::memory_order_relaxed);
}

void CachedTable::settle_charges() {
  std::uint64_t pending = 0;
  for (int s = 0; s < detail::kCounterShards; ++s)
    pending += shards_[s].pending_read_bytes.exchange(0, std::memory_order_relaxed);
  if (pending > 0) charge_slow_read(pending);
}

}  // namespace strata::emb
