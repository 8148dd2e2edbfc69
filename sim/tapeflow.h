#pragma once
/// @file
/// The TapeFlow passes (TapeFlow §IV) over an Enzyme-style traced Program (sim/active.h):
/// pass 1 region formation / array-of-structs tape layout (Algorithm 1), pass 2 layering under a
/// scratchpad size (Algorithm 2), pass 3 explicit FWD/REV streaming at layer boundaries, pass 4
/// scratchpad indexing (Algorithm 3). `aos_layout` applies pass 1 alone (the tape stays in DRAM
/// behind the cache: the paper's layout-alone experiment, Fig. 13); `tapeflow` applies all four.
///
/// Note [TapeFlow passes]
/// - Pass 1 (regions, Alg. 1): a loop's region is one struct per iteration holding every tape
///   value the iteration stores (one slot per Enzyme site of the loop); the tape of the loop is an
///   array of those structs (`base + iteration * RSize`), loops' arrays one after another from
///   the program's tape base (code outside loops is one struct). Slots are ordered by REV use:
///   by the order of the sites' TapeLoads within the REV of the site's first iteration (ties by
///   FWD store order). Only TapeStore/TapeLoad addresses change.
/// - Pass 2 (layers, Alg. 2): a layer is a contiguous run of FWD instructions whose tape stores
///   all belong to one loop and fit the scratchpad (`spad_bytes / 8` values). The pass walks the
///   FWD in order, taking each instruction with the tape stores placed right after it as a unit,
///   and ends the layer when a store of another loop arrives, or when a new iteration's stores
///   would no longer fit (layers hold whole structs when a struct fits: "each layer's tape
///   accesses are restricted to a single region"), or — for an iteration larger than the
///   scratchpad — when the next unit would overflow (the region is split). The cut falls at the
///   first instruction of the new iteration. Instructions without tape stores stay in the current
///   layer. The REV layer of a FWD layer (FtoR) is every REV instruction whose origin is in it;
///   REV is generated in reverse FWD order, so REV layers are contiguous and run in reverse.
/// - Pass 3 (streams): layers take consecutive scratchpad ranges (SAlloc base); at a layer
///   boundary where the next layer's region no longer fits, FWD spills the whole used scratchpad
///   with one StreamOut to the end of the DRAM tape (a tile), and REV streams that tile back with
///   one StreamIn at the head of the tile's last layer (the first of its layers in REV). The final
///   tile stays in the scratchpad: FWD and REV share it (§III, Choice 2) and REV starts with it.
/// - Pass 4 (scratchpad indexing, Alg. 3): within a layer, offsets are given in the tape's memory
///   order (pass 1 addresses) from the layer's SAlloc base, 8 bytes per value; a SpadStore and its
///   SpadLoad get the same offset. Each layer begins with SAlloc (addr = base, bytes = region) and
///   ends with Barrier, in FWD and in REV.
/// - Trace::tape_bytes is unchanged (the same values are taped); Trace::spad_bytes is the largest
///   tile, never more than the scratchpad.

#include <cstdint>
#include <vector>

#include "sim/active.h"

namespace strata::sim {

/// One layer of the plan (indices refer to the input program's FWD instructions).
struct TapeLayer {
  uint32_t loop = kNone;          ///< loop whose region the layer holds (kNone outside loops)
  uint32_t begin = 0;             ///< first FWD instruction
  uint32_t end = 0;               ///< one past the last FWD instruction
  std::vector<uint32_t> entries;  ///< Program::tape indices, in scratchpad-offset order
  uint64_t base = 0;              ///< scratchpad byte offset of the region (SAlloc)
  uint64_t bytes = 0;             ///< region bytes (8 per tape value)
  uint32_t tile = 0;              ///< the tile (stream) the layer belongs to
};

/// A scratchpad tile: consecutive layers spilled together by one FWD-stream.
struct TapeTile {
  uint32_t first_layer = 0, last_layer = 0;
  uint64_t bytes = 0;     ///< bytes streamed (the tile's regions)
  uint64_t dram = 0;      ///< DRAM address of the tile in the streamed tape
  bool resident = false;  ///< the final tile: never streamed
};

struct TapeflowPlan {
  uint64_t spad_bytes = 0;  ///< scratchpad size the plan was made for
  std::vector<TapeLayer> layers;
  std::vector<TapeTile> tiles;
  uint64_t max_tile_bytes = 0;  ///< scratchpad bytes the plan uses
};

/// Pass 1 alone: the Enzyme tape rewritten as per-loop arrays of structs (still TapeStore /
/// TapeLoad in DRAM through the cache).
Program aos_layout(const Program& enzyme);

/// Passes 2 and 3 on an AoS program (from aos_layout): layers and tiles for `spad_bytes`.
/// Throws strata::Error if spad_bytes is not a positive multiple of 8 or is smaller than the
/// tape values one instruction needs stored.
TapeflowPlan plan_layers(const Program& aos, uint64_t spad_bytes);

/// Passes 1-4: the TapeFlow program for a scratchpad of `spad_bytes` (SAlloc/Barrier per layer,
/// StreamOut/StreamIn per tile, SpadStore/SpadLoad for the tape). `plan`, if given, receives the
/// layering.
Program tapeflow(const Program& enzyme, uint64_t spad_bytes, TapeflowPlan* plan = nullptr);

}  // namespace strata::sim
