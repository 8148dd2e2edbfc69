#pragma once
/// @file
/// The policy (dissertation §4.3.2, Table 4.5): what the program says about its objects, and the
/// decisions about tiers that follow. `LruPolicy` is the dissertation's policy, built from the
/// data manager's operations as in Listings 4.1 (evict) and 4.2 (prefetch).
///
/// Invariants (DESIGN.md §3 memory):
/// - if an object has a fast region, it is the primary;
/// - prefetch keeps the slow sibling, so a clean eviction elides the copy;
/// - an object freed while in the fast tier is never written back;
/// - a new object may live in the fast tier only (no slow sibling, "local allocation");
/// - a busy object (pinned by a kernel, Note [Access states]) is never moved: forced eviction
///   passes over it and explicit evict/prefetch report that they could not act.

#include <cstddef>
#include <mutex>

#include "memory/data_manager.h"

namespace strata::memory {

class Policy {
 public:
  virtual ~Policy() = default;
  /// A new object in fast memory. With `force`, evicts other objects to make room (through
  /// evictfrom); returns null when the fast tier cannot hold it.
  virtual Object* alloc_fast(std::size_t bytes, bool force = true) = 0;
  /// A new object in slow memory; throws strata::Error when the slow heap is full.
  virtual Object* alloc_slow(std::size_t bytes) = 0;
  virtual bool in_fast(const Object* object) const = 0;
  /// The object was used read-only (LRU: most recent).
  virtual void read_use(Object* object) = 0;
  /// The object was written: LRU touch, and its primary becomes dirty with respect to a sibling.
  virtual void write_use(Object* object) = 0;
  /// Frees the object now, without writing anything back.
  virtual void unsafe_free(Object* object) = 0;
  /// Moves the object into fast memory (keeping its slow copy). With `force`, evicts others to make
  /// room. Returns true when the object's primary is fast afterwards.
  virtual bool prefetch(Object* object, bool force = false) = 0;
  /// Moves the object out of fast memory now. Returns false if it is busy (pinned).
  virtual bool evict(Object* object) = 0;
  /// Makes the object the first candidate for eviction, without moving it.
  virtual void softevict(Object* object) = 0;
};

class LruPolicy final : public Policy {
 public:
  explicit LruPolicy(DataManager& manager) : dm_(manager) {}
  ~LruPolicy() override;

  Object* alloc_fast(std::size_t bytes, bool force = true) override;
  Object* alloc_slow(std::size_t bytes) override;
  bool in_fast(const Object* object) const override;
  void read_use(Object* object) override;
  void write_use(Object* object) override;
  void unsafe_free(Object* object) override;
  bool prefetch(Object* object, bool force = false) override;
  bool evict(Object* object) override;
  void softevict(Object* object) override;

  /// Objects currently resident in fast memory, least recently used first (for tests).
  std::vector<Object*> lru_order() const;
  DataManager& manager() { return dm_; }

 private:
  // All private helpers run with mutex_ held.
  Region* allocate_fast(std::size_t bytes, bool force);
  bool make_room(std::size_t bytes);
  /// Requires the object's Moving state. With `lock` (mutex_'s holder), mutex_ is released while
  /// the bytes are copied (Note [Moves copy outside the policy lock]).
  void evict_locked(Object* object, std::unique_lock<std::mutex>* lock = nullptr);
  void lru_push_front(Object* o);  // most recently used
  void lru_push_back(Object* o);   // next eviction candidate
  void lru_remove(Object* o);

  DataManager& dm_;
  mutable std::mutex mutex_;
  Object* lru_head_ = nullptr;  // most recently used
  Object* lru_tail_ = nullptr;  // least recently used
};

}  // namespace strata::memory
