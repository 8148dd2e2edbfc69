#pragma once
// Helpers for the memory tests: a small two-tier manager and byte patterns to check data after
// every move.

#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <string>

#include "core/error.h"

#include "memory/data_manager.h"
#include "memory/heap.h"

namespace strata::memory::test {

inline std::unique_ptr<DataManager> make_manager(std::size_t fast_bytes, std::size_t slow_bytes) {
  PmHeapOptions o;
  o.capacity = slow_bytes;
  o.dir = "/tmp";
  o.backend = PmBackend::Mmap;
  return std::make_unique<DataManager>(std::make_unique<DramHeap>(fast_bytes), std::make_unique<PmHeap>(o));
}

/// Byte i of pattern `seed`.
inline uint8_t pattern_byte(uint32_t seed, std::size_t i) {
  uint32_t x = seed * 2654435761u + static_cast<uint32_t>(i) * 40503u;
  x ^= x >> 13;
  return static_cast<uint8_t>(x * 2246822519u >> 24);
}

inline void fill_pattern(void* p, std::size_t n, uint32_t seed) {
  auto* b = static_cast<uint8_t*>(p);
  for (std::size_t i = 0; i < n; ++i) b[i] = pattern_byte(seed, i);
}

/// Index of the first byte that differs from the pattern, or n when all match.
inline std::size_t first_mismatch(const void* p, std::size_t n, uint32_t seed) {
  const auto* b = static_cast<const uint8_t*>(p);
  for (std::size_t i = 0; i < n; ++i)
    if (b[i] != pattern_byte(seed, i)) return i;
  return n;
}

/// The message of the strata::Error `fn` throws, or "<no error>".
inline std::string message_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "<no error>";
}

}  // namespace strata::memory::test
