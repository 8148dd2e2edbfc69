#include "memory/detail/arena.h"

#include <algorithm>

#include "core/error.h"

namespace strata::memory {

Arena::Arena(std::size_t capacity, std::size_t granularity)
    : granularity_(granularity), capacity_(capacity / granularity * granularity) {
  STRATA_CHECK(granularity > 0 && (granularity & (granularity - 1)) == 0,
               "Arena: granularity must be a power of two, got ", granularity);
  STRATA_CHECK(capacity_.load(std::memory_order_relaxed) > 0, "Arena: capacity ", capacity,
               " is smaller than one unit of ", granularity, " bytes");
  const std::size_t cap = capacity_.load(std::memory_order_relaxed);
  blocks_.emplace(0, Entry{cap, true, nullptr});
  free_by_size_.emplace(cap, 0);
  segment_starts_.insert(0);
  largest_segment_ = cap;
}

std::size_t Arena::extend(std::size_t bytes) {
  const std::size_t size = bytes / granularity_ * granularity_;
  STRATA_CHECK(size > 0, "Arena::extend: a segment of ", bytes, " bytes is smaller than one unit of ", granularity_,
               " bytes");
  std::lock_guard<std::mutex> lock(mutex_);
  const std::size_t offset = capacity_.load(std::memory_order_relaxed);
  blocks_.emplace(offset, Entry{size, true, nullptr});
  add_free(offset, size);
  segment_starts_.insert(offset);
  largest_segment_ = std::max(largest_segment_, size);
  capacity_.store(offset + size, std::memory_order_release);
  return offset;
}

bool Arena::is_segment_start(std::size_t offset) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return segment_starts_.count(offset) != 0;
}

std::size_t Arena::largest_segment() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return largest_segment_;
}

std::size_t Arena::round(std::size_t bytes) const {
  const std::size_t units = std::max<std::size_t>(1, (bytes + granularity_ - 1) / granularity_);
  return units * granularity_;
}

void Arena::add_free(std::size_t offset, std::size_t size) { free_by_size_.emplace(size, offset); }

void Arena::remove_free(std::size_t offset, std::size_t size) {
  auto [lo, hi] = free_by_size_.equal_range(size);
  for (auto it = lo; it != hi; ++it) {
    if (it->second == offset) {
      free_by_size_.erase(it);
      return;
    }
  }
  STRATA_ASSERT(false, "Arena: free block at ", offset, " of ", size, " bytes missing from the size index");
}

std::optional<std::size_t> Arena::allocate(std::size_t bytes, void* owner) {
  if (bytes > capacity()) return std::nullopt;
  const std::size_t need = round(bytes);
  std::lock_guard<std::mutex> lock(mutex_);
  auto fit = free_by_size_.lower_bound(need);
  if (fit == free_by_size_.end()) return std::nullopt;
  const std::size_t offset = fit->second;
  const std::size_t size = fit->first;
  free_by_size_.erase(fit);
  Entry& e = blocks_.at(offset);
  e.free = false;
  e.owner = owner;
  e.size = need;
  if (size > need) {
    blocks_.emplace(offset + need, Entry{size - need, true, nullptr});
    add_free(offset + need, size - need);
  }
  used_ += need;
  peak_ = std::max(peak_, used_);
  return offset;
}

void Arena::free(std::size_t offset) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = blocks_.find(offset);
  STRATA_ASSERT(it != blocks_.end() && !it->second.free, "Arena::free: no used block at offset ", offset);
  used_ -= it->second.size;
  it->second.free = true;
  it->second.owner = nullptr;
  // Coalesce with the next block, and then the previous one, within the segment.
  auto next = std::next(it);
  if (next != blocks_.end() && next->second.free && segment_starts_.count(next->first) == 0) {
    remove_free(next->first, next->second.size);
    it->second.size += next->second.size;
    blocks_.erase(next);
  }
  if (it != blocks_.begin() && segment_starts_.count(it->first) == 0) {
    auto prev = std::prev(it);
    if (prev->second.free) {
      remove_free(prev->first, prev->second.size);
      prev->second.size += it->second.size;
      blocks_.erase(it);
      it = prev;
    }
  }
  add_free(it->first, it->second.size);
}

void Arena::set_owner(std::size_t offset, void* owner) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = blocks_.find(offset);
  STRATA_ASSERT(it != blocks_.end() && !it->second.free, "Arena::set_owner: no used block at ", offset);
  it->second.owner = owner;
}

Arena::Block Arena::block_containing(std::size_t offset) const {
  std::lock_guard<std::mutex> lock(mutex_);
  STRATA_ASSERT(offset < capacity(), "Arena::block_containing: offset ", offset, " beyond capacity ", capacity());
  auto it = blocks_.upper_bound(offset);
  --it;  // the block starting at or before offset; block 0 always exists
  return Block{it->first, it->second.size, it->second.free, it->second.owner};
}

std::size_t Arena::used() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return used_;
}

std::size_t Arena::peak() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return peak_;
}

void Arena::reset_peak() {
  std::lock_guard<std::mutex> lock(mutex_);
  peak_ = used_;
}

std::size_t Arena::largest_free() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return free_by_size_.empty() ? 0 : free_by_size_.rbegin()->first;
}

std::size_t Arena::block_count() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return blocks_.size();
}

}  // namespace strata::memory
