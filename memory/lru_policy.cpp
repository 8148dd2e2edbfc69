#include <vector>

#include "core/error.h"
#include "memory/policy.h"

namespace strata::memory {

namespace {
// Ends an object's Moving state on every path out of a migration, exceptions included.
class MoveGuard {
 public:
  explicit MoveGuard(Object* o) : o_(o) {}
  ~MoveGuard() { o_->end_move(); }
  MoveGuard(const MoveGuard&) = delete;
  MoveGuard& operator=(const MoveGuard&) = delete;

 private:
  Object* o_;
};
}  // namespace

LruPolicy::~LruPolicy() = default;

// ---- LRU list (mutex_ held) ---------------------------------------------------------------------

void LruPolicy::lru_remove(Object* o) {
  if (!o->in_lru) return;
  (o->lru_prev ? o->lru_prev->lru_next : lru_head_) = o->lru_next;
  (o->lru_next ? o->lru_next->lru_prev : lru_tail_) = o->lru_prev;
  o->lru_prev = o->lru_next = nullptr;
  o->in_lru = false;
}

void LruPolicy::lru_push_front(Object* o) {
  lru_remove(o);
  o->lru_next = lru_head_;
  o->lru_prev = nullptr;
  (lru_head_ ? lru_head_->lru_prev : lru_tail_) = o;
  lru_head_ = o;
  o->in_lru = true;
}

void LruPolicy::lru_push_back(Object* o) {
  lru_remove(o);
  o->lru_prev = lru_tail_;
  o->lru_next = nullptr;
  (lru_tail_ ? lru_tail_->lru_next : lru_head_) = o;
  lru_tail_ = o;
  o->in_lru = true;
}

std::vector<Object*> LruPolicy::lru_order() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<Object*> out;
  for (Object* o = lru_tail_; o != nullptr; o = o->lru_prev) out.push_back(o);
  return out;
}

// ---- eviction (Listing 4.1) ---------------------------------------------------------------------

// Note [Moves copy outside the policy lock]
// An explicit evict or prefetch (the mover thread's jobs) copies an object's bytes without holding
// mutex_: the copy takes as long as the slow tier's (modeled) bandwidth says — milliseconds for an
// activation — and every allocation, free and use notification of the compute threads takes
// mutex_, so holding it through the copy stalled the forward pass behind each spill. The object
// is Moving throughout (pins, frees and eviction walks wait for it or pass it over), and the
// region being filled has no object yet (prefetch) or is the object's unpublished sibling (evict),
// so no other thread touches either region until mutex_ is taken again to publish the move. An
// eviction made to find room for an allocation (make_room, inside a walk of the fast heap) keeps
// the lock.
void LruPolicy::evict_locked(Object* object, std::unique_lock<std::mutex>* lock) {
  Region* x = dm_.primary(object);
  if (!dm_.in(x, dm_.fast())) return;
  Region* y = dm_.getlinked(x, dm_.slow());
  bool allocated = false;
  if (y == nullptr) {
    y = dm_.allocate(dm_.slow(), dm_.size_of(x), object);
    STRATA_CHECK(y != nullptr, "evict: the slow tier is full and cannot take an object of ", dm_.size_of(x),
                 " bytes: ", dm_.slow().no_room_message(dm_.size_of(x)));
    allocated = true;
  }
  // A clean fast copy (prefetched and only read since) equals its slow sibling: elide the copy.
  if (dm_.isdirty(x) || allocated) {
    if (lock != nullptr) lock->unlock();
    dm_.copyto(y, x);
    if (lock != nullptr) lock->lock();
  } else {
    dm_.stats().on_copy_elided(dm_.size_of(x));
  }
  dm_.set(object, y);
  dm_.markclean(y);
  if (!allocated) dm_.unlink(x, y);
  lru_remove(object);
  dm_.free(x);
}

bool LruPolicy::make_room(std::size_t bytes) {
  // Listing 4.2's select_via_heuristic: start the walk at the least recently used fast object.
  Region* start = lru_tail_ ? dm_.primary(lru_tail_) : nullptr;
  return dm_.evictfrom(
      [this](Region* r) {
        Object* o = dm_.parent(r);
        if (o == nullptr || !o->try_begin_move()) return false;  // pinned by a kernel: skip it
        MoveGuard guard(o);
        evict_locked(o);
        return true;
      },
      dm_.fast(), start, bytes);
}

Region* LruPolicy::allocate_fast(std::size_t bytes, bool force) {
  Region* r = dm_.allocate(dm_.fast(), bytes);
  if (r == nullptr && force && bytes <= dm_.fast().largest_possible() && make_room(bytes))
    r = dm_.allocate(dm_.fast(), bytes);
  return r;
}

// ---- Table 4.5 ----------------------------------------------------------------------------------

Object* LruPolicy::alloc_fast(std::size_t bytes, bool force) {
  std::lock_guard<std::mutex> lock(mutex_);
  Region* r = allocate_fast(bytes, force);
  if (r == nullptr) return nullptr;
  Object* o = dm_.new_object(r);  // fast only: no slow sibling until it is first evicted
  lru_push_front(o);
  return o;
}

Object* LruPolicy::alloc_slow(std::size_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  Region* r = dm_.allocate(dm_.slow(), bytes);
  STRATA_CHECK(r != nullptr, "alloc_slow: ", dm_.slow().no_room_message(bytes));
  return dm_.new_object(r);
}

bool LruPolicy::in_fast(const Object* object) const { return object->primary()->heap()->tier() == Tier::Fast; }

void LruPolicy::read_use(Object* object) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (object->in_lru) lru_push_front(object);
}

void LruPolicy::write_use(Object* object) {
  std::lock_guard<std::mutex> lock(mutex_);
  Region* x = dm_.primary(object);
  // Dirty with respect to the sibling: a later eviction must copy. A slow primary has no fast
  // sibling (the invariant), so there is nothing to mark.
  if (dm_.in(x, dm_.fast())) dm_.markdirty(x);
  if (object->in_lru) lru_push_front(object);
}

void LruPolicy::unsafe_free(Object* object) {
  // Wait for kernels still using it *before* taking the lock (a kernel holding a pin may be
  // waiting for the lock); once Moving, no eviction walk can pick it.
  object->begin_move();
  std::lock_guard<std::mutex> lock(mutex_);
  lru_remove(object);
  dm_.delete_object(object);  // dead data is dropped, never written back
}

bool LruPolicy::prefetch(Object* object, bool force) {
  std::unique_lock<std::mutex> lock(mutex_);
  Region* x = dm_.primary(object);
  if (!dm_.in(x, dm_.slow())) {
    lru_push_front(object);
    return true;
  }
  if (!object->try_begin_move()) return false;
  MoveGuard guard(object);
  Region* y = allocate_fast(dm_.size_of(x), force);
  if (y == nullptr) return false;
  lock.unlock();     // Note [Moves copy outside the policy lock]
  dm_.copyto(y, x);  // Listing 4.2
  lock.lock();
  dm_.link(x, y);
  dm_.set(object, y);
  dm_.markclean(y);
  lru_push_front(object);
  return true;
}

bool LruPolicy::evict(Object* object) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (!dm_.in(dm_.primary(object), dm_.fast())) return true;
  if (!object->try_begin_move()) return false;
  MoveGuard guard(object);
  evict_locked(object, &lock);
  return true;
}

void LruPolicy::softevict(Object* object) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (object->in_lru) lru_push_back(object);
}

}  // namespace strata::memory
