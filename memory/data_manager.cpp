#include "memory/data_manager.h"

#include <cstring>

#include "core/error.h"

namespace strata::memory {

DataManager::DataManager(std::unique_ptr<Heap> fast, std::unique_ptr<Heap> slow)
    : fast_(std::move(fast)), slow_(std::move(slow)) {
  STRATA_CHECK(fast_ && slow_, "DataManager: both a fast and a slow heap are required");
  STRATA_CHECK(fast_->tier() == Tier::Fast && slow_->tier() == Tier::Slow,
               "DataManager: the first heap must be the fast tier and the second the slow tier");
  copy_ = [](void* dst, const void* src, std::size_t n, Tier, Tier) { std::memcpy(dst, src, n); };
  stats_.timeline().set_capacity(fast_->capacity(), slow_->capacity());
  fast_->set_stats(&stats_);  // the heaps count every region, the tables' too (Note [Unmanaged regions])
  slow_->set_stats(&stats_);
}

DataManager::~DataManager() {
  // Objects still alive belong to someone who outlived the manager: a bug in the owner. Their
  // regions die with the heaps' mappings.
}

Object* DataManager::new_object(Region* region) {
  STRATA_CHECK(region != nullptr, "DataManager::new_object: null region");
  auto* object = new Object(region->size(), region);
  region->set_parent(object);
  live_objects_.fetch_add(1, std::memory_order_relaxed);
  return object;
}

void DataManager::delete_object(Object* object) {
  Region* primary = object->primary();
  Region* sibling = primary->linked();
  // A fast primary that differs from (or has no) slow copy would need a write-back if evicted;
  // freeing it skips that.
  if (primary->heap()->tier() == Tier::Fast && (sibling == nullptr || primary->dirty()))
    stats_.on_writeback_avoided(primary->size());
  if (sibling != nullptr) {
    unlink(primary, sibling);
    release(sibling);
  }
  release(primary);
  live_objects_.fetch_sub(1, std::memory_order_relaxed);
  delete object;
}

void DataManager::set(Object* object, Region* region) {
  STRATA_CHECK(region->parent() == object, "DataManager::set: region of ", region->size(),
               " bytes does not belong to the object");
  object->set_primary(region);
}

Region* DataManager::allocate(Heap& device, std::size_t bytes, Object* parent) {
  return device.allocate(bytes, parent);  // counted by the heap
}

void DataManager::release(Region* region) {
  region->heap()->free(region);  // counted by the heap
}

void DataManager::free(Region* region) {
  STRATA_ASSERT(region->linked() == nullptr, "DataManager::free: unlink the region first");
  STRATA_ASSERT(region->parent() == nullptr || region->parent()->primary() != region,
                "DataManager::free: the region is its object's primary");
  release(region);
}

void DataManager::link(Region* a, Region* b) {
  STRATA_ASSERT(a->heap() != b->heap(), "DataManager::link: regions on the same heap");
  STRATA_ASSERT(a->linked() == nullptr && b->linked() == nullptr, "DataManager::link: already linked");
  STRATA_ASSERT(a->size() == b->size(), "DataManager::link: sizes differ (", a->size(), " vs ", b->size(), ")");
  a->set_linked(b);
  b->set_linked(a);
  if (a->parent() == nullptr) a->set_parent(b->parent());
  if (b->parent() == nullptr) b->set_parent(a->parent());
}

void DataManager::unlink(Region* a, Region* b) {
  STRATA_ASSERT(a->linked() == b && b->linked() == a, "DataManager::unlink: regions are not linked");
  a->set_linked(nullptr);
  b->set_linked(nullptr);
}

void DataManager::copyto(Region* dst, Region* src) {
  STRATA_ASSERT(dst->size() == src->size(), "DataManager::copyto: sizes differ (", dst->size(), " vs ", src->size(),
                ")");
  const Tier from = src->heap()->tier();
  const Tier to = dst->heap()->tier();
  copy_(dst->data(), src->data(), src->size(), from, to);
  if (from != to) stats_.on_move(from, to, src->size());
}

Region* DataManager::getlinked(const Region* region, const Heap& device) const {
  Region* l = region->linked();
  return l != nullptr && l->heap() == &device ? l : nullptr;
}

}  // namespace strata::memory
