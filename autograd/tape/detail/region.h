#pragma once
/// @file
/// Tiles and packed values of the tape streamer (internal to autograd/tape; see stream.h).
///
/// Note [Tape tiles and regions]
/// A *tile* is one contiguous tiered-memory object holding the regions of one layer; a *region*
/// is the values one node saved, copied back to back (64-byte aligned, in saving order: TapeFlow's
/// array-of-structs). Every saved value the streamer packs is a PackedValue, held (through the
/// std::any of its SavedTensor) by exactly one SavedTensor; a PackedValue holds its tile, so a tile
/// is freed, without write-back, when the last SavedTensor of its layer is released (its node ran).
/// The streamer itself keeps only the open tile strongly; closed tiles are reached through weak
/// references (to prefetch them), so they never outlive their values.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "core/storage.h"
#include "core/tensor.h"
#include "memory/copy_engine.h"

namespace strata::tape::detail {

/// Counters shared by the streamer and its tiles (a tile may die after the streamer).
struct SharedCounters {
  std::atomic<std::size_t> tiles_freed{0};
};

struct Tile {
  Tile(Storage s, std::size_t cap, std::size_t layer_index, std::shared_ptr<SharedCounters> c)
      : storage(std::move(s)), capacity(cap), layer(layer_index), counters(std::move(c)) {}
  ~Tile() {
    if (!replaced) counters->tiles_freed.fetch_add(1, std::memory_order_relaxed);
  }
  Tile(const Tile&) = delete;
  Tile& operator=(const Tile&) = delete;

  Storage storage;
  std::size_t capacity;
  std::size_t used = 0;
  std::size_t layer;
  // Guarded by the streamer's mutex:
  bool touched = false;      // a value of this layer was unpacked (REV stream started here)
  bool replaced = false;     // a larger tile took its place in its layer (not counted as freed)
  bool adopted = false;      // the storage is the saved value's own (no copy; Note [Tape streaming])
  memory::MoveHandle fetch;  // the latest prefetch
  std::shared_ptr<SharedCounters> counters;
};

/// What the streamer's pack returns for one saved value.
struct PackedValue {
  Dims sizes;
  DType dtype = DType::f32;
  Tensor kept;                  // a value that is not streamed (small, non-contiguous, off)
  std::shared_ptr<Tile> tile;   // where a streamed value was copied
  std::size_t byte_offset = 0;  // in the tile
};

/// Rounds up to the region alignment (one cache line).
constexpr std::size_t align_region(std::size_t n) { return (n + 63) / 64 * 64; }

/// A contiguous view of `bytes` of `tile` at `byte_offset`, as `sizes`/`dtype`.
Tensor view_in_tile(const Tile& tile, std::size_t byte_offset, const Dims& sizes, DType dtype);

}  // namespace strata::tape::detail
