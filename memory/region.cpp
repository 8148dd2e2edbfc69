#include "memory/region.h"

#include <thread>

#include "core/error.h"

namespace strata::memory {

namespace {
// Spins briefly, then yields: pins are held for one kernel, migrations for one copy.
void backoff(int& spins) {
  if (++spins < 64) return;
  std::this_thread::yield();
}
}  // namespace

void Object::pin_read() {
  int spins = 0;
  int32_t s = state_.load(std::memory_order_relaxed);
  for (;;) {
    if (s >= 0) {
      if (state_.compare_exchange_weak(s, s + 1, std::memory_order_acquire, std::memory_order_relaxed)) return;
    } else {
      backoff(spins);
      s = state_.load(std::memory_order_relaxed);
    }
  }
}

void Object::pin_write() {
  int spins = 0;
  for (;;) {
    int32_t expected = 0;
    if (state_.compare_exchange_weak(expected, kWriter, std::memory_order_acquire, std::memory_order_relaxed)) {
      // See Note [Writes dirty the pinned primary].
      primary()->set_dirty(true);
      return;
    }
    backoff(spins);
  }
}

void Object::unpin_read() {
  const int32_t before = state_.fetch_sub(1, std::memory_order_release);
  STRATA_ASSERT(before > 0, "Object::unpin_read without a matching pin_read (state ", before, ")");
}

void Object::unpin_write() {
  int32_t expected = kWriter;
  const bool ok = state_.compare_exchange_strong(expected, 0, std::memory_order_release);
  STRATA_ASSERT(ok, "Object::unpin_write without a matching pin_write (state ", expected, ")");
}

bool Object::try_begin_move() {
  int32_t expected = 0;
  return state_.compare_exchange_strong(expected, kMoving, std::memory_order_acquire, std::memory_order_relaxed);
}

void Object::begin_move() {
  int spins = 0;
  while (!try_begin_move()) backoff(spins);
}

void Object::end_move() {
  int32_t expected = kMoving;
  const bool ok = state_.compare_exchange_strong(expected, 0, std::memory_order_release);
  STRATA_ASSERT(ok, "Object::end_move without a matching begin_move (state ", expected, ")");
}

Object::Access Object::access() const {
  const int32_t s = state_.load(std::memory_order_acquire);
  if (s > 0) return Access::ReadOnly;
  if (s == kWriter) return Access::ReadWrite;
  if (s == kMoving) return Access::Moving;
  return Access::NotBusy;
}

}  // namespace strata::memory
