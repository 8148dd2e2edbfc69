#pragma once
// The tiers the embeddings tests build tables on: a fast DRAM heap, a file-backed slow heap and a
// slow-tier throttle fast enough not to slow the tests down.

#include <cstddef>
#include <filesystem>

#include "embeddings/table.h"
#include "memory/heap.h"
#include "memory/slow_tier_model.h"

namespace strata::testing_util {

struct Heaps {
  explicit Heaps(std::size_t fast_bytes, std::size_t slow_bytes)
      : fast(fast_bytes),
        slow({.capacity = slow_bytes,
              .dir = std::filesystem::temp_directory_path().string(),
              .backend = memory::PmBackend::Mmap}),
        throttle(memory::SlowTierModel::custom(1000.0, 1000.0, 0.0)) {}
  emb::TableMemory fast_mem() { return {&fast, nullptr}; }
  emb::TableMemory slow_mem() { return {&slow, &throttle}; }
  memory::DramHeap fast;
  memory::PmHeap slow;
  memory::SlowTierThrottle throttle;
};

}  // namespace strata::testing_util
