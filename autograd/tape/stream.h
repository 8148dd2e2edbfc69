#pragma once
/// @file
/// Tape streaming (TapeFlow on tensors): saved values are packed into per-node regions, regions
/// into layers that fit a fast-tier tape budget, full layers are spilled to the slow tier during
/// forward (FWD stream) and prefetched a few layers ahead during backward (REV stream).
///
/// Note [Tape streaming]
/// `StreamingScope scope(options)` installs a TapeStreamer as saved-tensor hooks (Note [Saved
/// values]) around a forward; backward later unpacks through the same streamer.
///  - Pass 1, regions: the values one Node saves (the ones its backward consumes together) form a
///    region, copied back to back in saving order into the current layer's tile (Note [Tape tiles
///    and regions]). Each value is copied when it is saved, so the streamer never holds an
///    activation longer than the forward does (a region closes when another node saves, when the
///    scope finishes, or at the first unpack).
///  - Pass 2, layers: a tile has `tape_budget_bytes`; a layer closes when the next region would
///    overflow it (TapeFlow's Algorithm 2); a region larger than the budget gets a tile of its own
///    size and is a layer by itself. Since a region's size is known only once its node stops
///    saving, a region whose next value overflows the open tile moves, values so far included,
///    to a new tile (the old tile closes at the region's start, or, when the region was all it held,
///    the new tile takes its place in its layer), so the layers come out as Algorithm 2 makes them.
///  - Adopted tiles: a region's first value larger than the budget that is the whole of a storage
///    of this tiered memory (offset 0, every byte) becomes its tile as it is, without a copy: the
///    tile *is* the activation. Its layer closes like any other, but its spill waits until the
///    forward has let go of the value (only the tile still holds the storage); that is checked
///    at every later save and at finish(). A value the forward still holds then stays fast.
///  - Pass 3, streams: a closed layer's tile is evicted on the mover thread
///    (TieredMemory::evict_async: the FWD stream). The open layer at the end of forward is not
///    spilled (backward needs it first). In backward, the first unpack of a value of layer L
///    queues prefetches of layers L-1 ... L-d (prefetch_async, the REV stream, in that order,
///    skipping those already queued); an unpack of a tile whose prefetch is still running waits for
///    it (counted as stall), and one of a tile not in the fast tier and never prefetched fetches it
///    on demand (also stall). Unpacked values are views of the tile; a tile is freed, without
///    write-back, once every SavedTensor of its layer was released.
/// At most max(1, d) spills are in flight: closing a layer beyond that waits for the oldest
/// (forward stall), so the fast tier holds a bounded number of tiles when the slow tier's write
/// bandwidth cannot keep up. A value saved again while its first save is alive and unmodified
/// (same storage, offset, shape, dtype, version) shares the first slot instead of a second copy.
/// Values below `min_stream_bytes`, non-contiguous values, parameters (leaves that require grad:
/// they stay alive through the step anyway, so a tape copy would only add traffic and bytes) unless
/// `stream_parameters`, and everything when `enabled` is false are kept as they are (the plain
/// saved value). Values checkpoint segments save never reach the
/// streamer (the checkpoint's hooks are innermost); the segments' inputs do, and stream as usual.
/// Pack and unpack take the streamer's mutex; the mover thread only moves tiles (it never touches
/// the streamer), so the streamer adds no thread of its own.

#include <cstddef>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "autograd/saved_tensor.h"
#include "memory/tiered_memory.h"

namespace strata::tape {

namespace detail {
struct Tile;
struct PackedValue;
struct SharedCounters;
}  // namespace detail

/// Options of one streaming step.
struct StreamOptions {
  bool enabled = true;
  /// Fast-tier bytes per layer (TapeFlow's scratchpad); the size of each tile. > 0.
  std::size_t tape_budget_bytes = std::size_t{16} << 20;
  /// Layers prefetched ahead in backward (1 = double buffering). >= 0 (0: fetch on demand only).
  int prefetch_distance = 1;
  /// Saved values smaller than this stay where they are.
  std::size_t min_stream_bytes = 4096;
  /// Stream parameters saved by ops (weights) like activations. Off: they are kept.
  bool stream_parameters = false;
  /// Where tiles are allocated; null = the process-wide tiered memory.
  memory::TieredMemory* memory = nullptr;

  /// Throws strata::Error naming the bad field (zero budget, negative distance).
  void validate() const;
};

/// One layer as recorded.
struct LayerInfo {
  std::size_t regions = 0;
  std::size_t values = 0;
  std::size_t used_bytes = 0;  ///< bytes of the layer's regions (with alignment)
  std::size_t tile_bytes = 0;  ///< size of its tile (what a move copies)
  bool spilled = false;        ///< evicted by the FWD stream
  bool prefetched = false;     ///< prefetched by the REV stream (not a demand fetch)
};

/// What one step streamed.
struct StreamReport {
  std::size_t layers = 0, regions = 0;
  std::size_t values_streamed = 0, values_kept = 0;
  std::size_t parameters_kept = 0;  ///< of values_kept: parameters (StreamOptions::stream_parameters off)
  std::size_t tape_bytes = 0;       ///< bytes of the streamed values (regions, with alignment)
  std::size_t bytes_to_slow = 0;    ///< tile bytes spilled by the FWD stream
  std::size_t bytes_to_fast = 0;    ///< tile bytes prefetched or fetched on demand in backward
  std::size_t spills = 0, prefetches = 0, demand_fetches = 0;
  std::size_t tiles_freed = 0;
  std::size_t values_shared = 0;      ///< saves of a value already streamed (they share its slot)
  std::size_t region_moves = 0;       ///< regions that outgrew the open tile and moved (Pass 2)
  std::size_t values_adopted = 0;     ///< values that became their own tile without a copy
  std::size_t adopted_unspilled = 0;  ///< adopted tiles of closed layers the forward still held at the end
  double stall_s = 0;                 ///< time unpack waited for a tile (backward)
  double forward_stall_s = 0;         ///< time forward waited for spills (more than max(1, d) in flight)
  double transfer_to_slow_s = 0;      ///< running time of the spills on the mover thread
  double transfer_to_fast_s = 0;      ///< ... of the prefetches and demand fetches
  std::string slow_tier;              ///< "modeled: ..." or "real device ..."
  std::vector<LayerInfo> layer_info;

  double transfer_s() const { return transfer_to_slow_s + transfer_to_fast_s; }
  /// 1 - stall / transfer, in [0, 1] (1 when nothing was transferred).
  double overlap() const;
  /// A few lines for logs.
  std::string explain() const;
};

/// The saved-tensor hooks that stream the tape (Note [Tape streaming]). Usually made by
/// StreamingScope; thread-safe.
class TapeStreamer final : public autograd::SavedTensorHooks {
 public:
  explicit TapeStreamer(const StreamOptions& options);
  ~TapeStreamer() override;

  std::any pack(const Tensor& value) override;
  Tensor unpack(std::any& packed) override;

  /// Ends forward: closes the current region and stops holding the open tile (it stays fast).
  void finish();
  /// The report so far; waits for the moves queued so far to finish (to read their times).
  StreamReport report() const;
  /// Where layer `i`'s tile is now ("fast", "slow"), or "freed".
  std::string layer_tier(std::size_t i) const;
  const StreamOptions& options() const { return options_; }

 private:
  struct Layer;
  struct Seen {
    WeakStorage storage;
    const Allocation* allocation;
    int64_t offset;
    Dims sizes;
    DType dtype;
    std::weak_ptr<detail::PackedValue> packed;
  };
  static constexpr std::size_t kSeen = 64;  // recent streamed values checked for a second save
  void end_region_locked();
  void place_locked(const std::shared_ptr<detail::PackedValue>& pv, const Tensor& value);
  void close_layer_locked();
  void spill_locked(const std::shared_ptr<detail::Tile>& tile);
  void spill_released_locked();
  /// A new layer's tile of `bytes`: allocated, or `adopt` itself (a saved value's own storage).
  std::shared_ptr<detail::Tile> new_tile_locked(std::size_t bytes, Storage adopt = {});
  void prefetch_locked(std::size_t layer, bool demand);
  memory::TieredMemory& memory() const;

  StreamOptions options_;
  mutable std::mutex mutex_;
  std::shared_ptr<detail::SharedCounters> counters_;
  std::vector<Layer> layers_;
  std::shared_ptr<detail::Tile> open_;  // the layer being filled (forward only)
  uint64_t region_node_ = autograd::kNoSavingNode;
  std::vector<std::shared_ptr<detail::PackedValue>> region_;  // the open region's values, in open_
  std::size_t region_start_ = 0;                              // its byte offset in open_
  std::vector<Seen> seen_;
  std::deque<memory::MoveHandle> in_flight_;       // spills not known to be done
  std::vector<std::weak_ptr<detail::Tile>> held_;  // closed adopted tiles the forward still holds
  StreamReport stats_;                             // counts; times and layer info are filled by report()
};

/// Installs a TapeStreamer for this thread for its lifetime (the forward of one step); the values
/// saved meanwhile are unpacked through it in backward, after the scope is gone.
class StreamingScope {
 public:
  explicit StreamingScope(const StreamOptions& options = {});
  /// Calls finish() on the streamer.
  ~StreamingScope();
  StreamingScope(const StreamingScope&) = delete;
  StreamingScope& operator=(const StreamingScope&) = delete;

  /// The streamer (kept alive by the scope and by every value saved through it).
  const std::shared_ptr<TapeStreamer>& streamer() const { return streamer_; }

 private:
  std::shared_ptr<TapeStreamer> streamer_;
  std::unique_ptr<autograd::SavedTensorHooksGuard> guard_;
};

}  // namespace strata::tape
