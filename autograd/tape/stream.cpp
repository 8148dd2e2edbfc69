#include "autograd/tape/stream.h"

#include <algorithm>
#include <chrono>
#include <sstream>

#include "autograd/tape/detail/region.h"
#include "core/error.h"
#include "core/text.h"

namespace strata::tape {

using detail::PackedValue;
using detail::Tile;

struct TapeStreamer::Layer {
  std::weak_ptr<Tile> tile;
  LayerInfo info;
  memory::MoveHandle spill;
  std::vector<memory::MoveHandle> fetches;  // prefetches and demand fetches, every backward
};

namespace {
double seconds(std::chrono::nanoseconds ns) { return std::chrono::duration<double>(ns).count(); }

}  // namespace

void StreamOptions::validate() const {
  STRATA_CHECK(tape_budget_bytes > 0,
               "tape::StreamOptions: tape_budget_bytes must be > 0 (the fast-tier bytes of one layer), got 0");
  STRATA_CHECK(prefetch_distance >= 0,
               "tape::StreamOptions: prefetch_distance must be >= 0 (layers prefetched ahead), got ",
               prefetch_distance);
}

double StreamReport::overlap() const {
  const double t = transfer_s();
  if (t <= 0) return 1.0;
  return std::clamp(1.0 - stall_s / t, 0.0, 1.0);
}

std::string StreamReport::explain() const {
  std::ostringstream os;
  os << "tape streaming: " << layers << " layers, " << regions << " regions, " << values_streamed
     << " values streamed (" << format_mib(tape_bytes, 2) << "), " << values_kept << " kept (" << parameters_kept
     << " of them parameters)\n";
  os << "  FWD stream: " << spills << " spills, " << format_mib(bytes_to_slow, 2) << " to slow in "
     << transfer_to_slow_s * 1e3 << " ms\n";
  os << "  REV stream: " << prefetches << " prefetches + " << demand_fetches << " demand fetches, "
     << format_mib(bytes_to_fast, 2) << " to fast in " << transfer_to_fast_s * 1e3 << " ms\n";
  os << "  forward stall " << forward_stall_s * 1e3 << " ms (waiting for spills); " << values_shared
     << " values saved twice shared their slot; " << region_moves << " region moves (a region outgrew the open tile)\n";
  os << "  " << values_adopted << " values were their own tile (no copy), " << adopted_unspilled
     << " of them still held by the forward at its end (kept fast)\n";
  os << "  stall " << stall_s * 1e3 << " ms of " << transfer_s() * 1e3 << " ms transfer: overlap " << overlap() * 100
     << " %; tiles freed " << tiles_freed << "/" << layers << "\n";
  os << "  slow tier: " << slow_tier << "\n";
  return os.str();
}

TapeStreamer::TapeStreamer(const StreamOptions& options)
    : options_(options), counters_(std::make_shared<detail::SharedCounters>()) {
  options_.validate();
  if (options_.memory == nullptr && options_.enabled) options_.memory = &memory::tiered_memory();
}

TapeStreamer::~TapeStreamer() = default;

memory::TieredMemory& TapeStreamer::memory() const { return *options_.memory; }

std::any TapeStreamer::pack(const Tensor& value) {
  std::lock_guard<std::mutex> lock(mutex_);
  const uint64_t node = autograd::saving_node_sequence_nr();
  if (node != region_node_ || node == autograd::kNoSavingNode) end_region_locked();
  region_node_ = node;
  if (!held_.empty()) spill_released_locked();
  // A value saved again (a relu output saved by the relu and by the next linear) shares its slot.
  for (auto it = seen_.rbegin(); it != seen_.rend(); ++it) {
    if (it->allocation != value.storage().allocation() || it->offset != value.offset() || it->sizes != value.sizes() ||
        it->dtype != value.dtype() || it->storage.version() != std::optional<uint64_t>(value.version()))
      continue;
    if (auto same = it->packed.lock()) {
      ++stats_.values_shared;
      return same;
    }
  }
  auto pv = std::make_shared<PackedValue>();
  pv->sizes = value.sizes();
  pv->dtype = value.dtype();
  // The value arrives detached (autograd's pack contract); saving_requires_grad_leaf() says
  // whether it was a parameter. A direct call with a leaf that requires grad counts too.
  const bool parameter = !options_.stream_parameters &&
                         (autograd::saving_requires_grad_leaf() || (value.is_leaf() && value.requires_grad()));
  if (!options_.enabled || parameter || value.nbytes() < options_.min_stream_bytes || !value.is_contiguous() ||
      value.numel() == 0) {
    pv->kept = value;
    ++stats_.values_kept;
    if (parameter && options_.enabled) ++stats_.parameters_kept;
  } else {
    place_locked(pv, value);
    if (seen_.size() >= kSeen) seen_.erase(seen_.begin());
    seen_.push_back(
        {WeakStorage(value.storage()), value.storage().allocation(), value.offset(), value.sizes(), value.dtype(), pv});
  }
  return pv;
}

std::shared_ptr<Tile> TapeStreamer::new_tile_locked(std::size_t bytes, Storage adopt) {
  const bool adopted = adopt.defined();
  Storage s = adopted ? std::move(adopt) : Storage::allocate(bytes, memory());
  auto t = std::make_shared<Tile>(std::move(s), bytes, layers_.size(), counters_);
  t->adopted = adopted;
  Layer l;
  l.tile = t;
  l.info.tile_bytes = bytes;
  layers_.push_back(std::move(l));
  ++stats_.layers;
  return t;
}

void TapeStreamer::close_layer_locked() {
  if (!open_) return;
  std::shared_ptr<Tile> t = std::move(open_);
  open_.reset();
  if (t->adopted && t->storage.use_count() > 1) {
    held_.push_back(t);  // the forward still uses the value: spill it once it lets go
    return;
  }
  spill_locked(t);
}

void TapeStreamer::spill_locked(const std::shared_ptr<Tile>& t) {
  Layer& l = layers_[t->layer];
  l.spill = memory().evict_async(t->storage);
  l.info.spilled = true;
  ++stats_.spills;
  stats_.bytes_to_slow += t->capacity;
  // Back-pressure: at most max(1, d) spills in flight, so a FWD stream slower than the forward
  // does not pile full tiles up in the fast tier (the forward waits instead: forward stall).
  in_flight_.push_back(l.spill);
  const std::size_t limit = static_cast<std::size_t>(std::max(1, options_.prefetch_distance));
  while (!in_flight_.empty() && (in_flight_.front().done() || in_flight_.size() > limit)) {
    if (!in_flight_.front().done()) {
      const auto t0 = std::chrono::steady_clock::now();
      in_flight_.front().wait();
      stats_.forward_stall_s += seconds(std::chrono::steady_clock::now() - t0);
    }
    in_flight_.pop_front();
  }
}

void TapeStreamer::spill_released_locked() {
  // An adopted tile whose storage only the tile holds was let go by the forward.
  for (auto it = held_.begin(); it != held_.end();) {
    std::shared_ptr<Tile> t = it->lock();
    if (!t) {
      it = held_.erase(it);
    } else if (t->storage.use_count() == 1) {
      it = held_.erase(it);
      spill_locked(t);
    } else {
      ++it;
    }
  }
}

void TapeStreamer::end_region_locked() {
  region_.clear();
  region_start_ = 0;
}

void TapeStreamer::place_locked(const std::shared_ptr<PackedValue>& pv, const Tensor& value) {
  const std::size_t bytes = detail::align_region(value.nbytes());
  const std::size_t budget = options_.tape_budget_bytes;
  if (region_.empty()) {
    // A new region. Pass 2: close the layer when it would overflow it; a region larger than the
    // budget is a layer by itself (its exact-size tile is closed by the next region).
    if (open_ && open_->used + bytes > open_->capacity) close_layer_locked();
    if (bytes > budget) {
      close_layer_locked();
      // Adopted: a value that is a whole storage of this memory is its own tile, without a copy
      // (Note [Tape streaming]).
      const bool adopt = value.offset() == 0 && value.nbytes() == value.storage().nbytes() &&
                         memory().object_of(value.storage().allocation()) != nullptr;
      open_ = adopt ? new_tile_locked(value.nbytes(), value.storage()) : new_tile_locked(bytes);
      if (adopt) ++stats_.values_adopted;
    } else if (!open_) {
      open_ = new_tile_locked(budget);
    }
    region_start_ = open_->used;
    ++layers_[open_->layer].info.regions;
    ++stats_.regions;
  } else if (open_->used + bytes > open_->capacity) {
    // The region outgrew the open tile: move it, values so far included, to a tile that holds it.
    const std::shared_ptr<Tile> old = open_;
    ++stats_.region_moves;
    const std::size_t need = old->used - region_start_ + bytes;
    std::shared_ptr<Tile> moved;
    if (region_start_ == 0) {
      // The region was all the tile held: a larger tile takes the old one's place in its layer.
      const std::size_t capacity = std::max(budget, need);
      moved = std::make_shared<Tile>(Storage::allocate(capacity, memory()), capacity, old->layer, counters_);
      old->replaced = true;
      layers_[old->layer].tile = moved;
      layers_[old->layer].info.tile_bytes = capacity;
    } else {
      moved = new_tile_locked(std::max(budget, need));
      LayerInfo& info = layers_[old->layer].info;
      --info.regions;
      info.values -= region_.size();
      info.used_bytes = region_start_;
      ++layers_[moved->layer].info.regions;
      layers_[moved->layer].info.values += region_.size();
    }
    for (const auto& q : region_) {
      const std::size_t at = q->byte_offset - region_start_;
      detail::view_in_tile(*moved, at, q->sizes, q->dtype)
          .copy_(detail::view_in_tile(*old, q->byte_offset, q->sizes, q->dtype));
      q->tile = moved;
      q->byte_offset = at;
    }
    moved->used = old->used - region_start_;
    if (region_start_ > 0) {
      old->used = region_start_;
      close_layer_locked();  // open_ is still the old tile: spill what stays in it
    }
    open_ = moved;
    region_start_ = 0;
  }
  // Pass 1: the value goes next in its region.
  Tile& tile = *open_;
  if (!tile.storage.is_same(value.storage()))  // an adopted tile already holds the value
    detail::view_in_tile(tile, tile.used, pv->sizes, pv->dtype).copy_(value);
  pv->tile = open_;
  pv->byte_offset = tile.used;
  tile.used += bytes;
  LayerInfo& info = layers_[tile.layer].info;
  info.used_bytes = tile.used;
  ++info.values;
  ++stats_.values_streamed;
  stats_.tape_bytes += bytes;
  region_.push_back(pv);
}

void TapeStreamer::finish() {
  std::lock_guard<std::mutex> lock(mutex_);
  end_region_locked();
  region_node_ = autograd::kNoSavingNode;
  spill_released_locked();
  for (const auto& w : held_)
    if (!w.expired()) ++stats_.adopted_unspilled;
  held_.clear();
  seen_.clear();
  in_flight_.clear();
  open_.reset();  // the last layer stays in the fast tier, held by its values only
}

void TapeStreamer::prefetch_locked(std::size_t layer, bool demand) {
  Layer& l = layers_[layer];
  std::shared_ptr<Tile> t = l.tile.lock();
  if (!t) return;
  t->fetch = memory().prefetch_async(t->storage);
  l.fetches.push_back(t->fetch);
  if (!demand) l.info.prefetched = true;
  ++(demand ? stats_.demand_fetches : stats_.prefetches);
  stats_.bytes_to_fast += t->capacity;
}

Tensor TapeStreamer::unpack(std::any& packed) {
  auto* p = std::any_cast<std::shared_ptr<PackedValue>>(&packed);
  STRATA_CHECK(p != nullptr && *p != nullptr,
               "tape::TapeStreamer::unpack: the saved value was not packed by this streamer");
  PackedValue& pv = **p;
  std::unique_lock<std::mutex> lock(mutex_);
  end_region_locked();  // backward began: the next value saved starts a region of its own
  if (pv.kept.defined()) return pv.kept;
  STRATA_ASSERT(pv.tile != nullptr, "tape: a streamed value has no tile");
  Tile& tile = *pv.tile;
  if (!tile.touched) {
    // REV stream: the first value of layer L queues layers L-1 ... L-d, in that order.
    tile.touched = true;
    for (int k = 1; k <= options_.prefetch_distance && static_cast<std::size_t>(k) <= tile.layer; ++k) {
      const std::size_t target = tile.layer - static_cast<std::size_t>(k);
      std::shared_ptr<Tile> t = layers_[target].tile.lock();
      if (t && !t->fetch.valid() && layers_[target].spill.valid()) prefetch_locked(target, false);
    }
  }
  const auto t0 = std::chrono::steady_clock::now();
  bool waited = false;
  if (!tile.fetch.valid() && layers_[tile.layer].spill.valid()) {
    prefetch_locked(tile.layer, true);  // spilled and never prefetched: fetch on demand
  }
  if (tile.fetch.valid() && !tile.fetch.done()) {
    tile.fetch.wait();
    waited = true;
  }
  if (waited) stats_.stall_s += seconds(std::chrono::steady_clock::now() - t0);
  return detail::view_in_tile(tile, pv.byte_offset, pv.sizes, pv.dtype);
}

StreamReport TapeStreamer::report() const {
  std::vector<memory::MoveHandle> spills;
  std::vector<std::vector<memory::MoveHandle>> fetches;
  StreamReport r;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    r = stats_;
    for (const Layer& l : layers_) {
      r.layer_info.push_back(l.info);
      spills.push_back(l.spill);
      fetches.push_back(l.fetches);
    }
  }
  for (const auto& h : spills)
    if (h.valid()) r.transfer_to_slow_s += seconds(h.duration());
  for (const auto& v : fetches)
    for (const auto& h : v) r.transfer_to_fast_s += seconds(h.duration());
  r.tiles_freed = counters_->tiles_freed.load(std::memory_order_relaxed);
  r.slow_tier = options_.memory ? options_.memory->slow_tier_mode() : "none (streaming off)";
  return r;
}

std::string TapeStreamer::layer_tier(std::size_t i) const {
  std::shared_ptr<Tile> t;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    STRATA_CHECK(i < layers_.size(), "tape::TapeStreamer::layer_tier: layer ", i, " does not exist (", layers_.size(),
                 " layers)");
    t = layers_[i].tile.lock();
  }
  if (!t) return "freed";
  return memory().in_fast(t->storage) ? "fast" : "slow";
}

StreamingScope::StreamingScope(const StreamOptions& options)
    : streamer_(std::make_shared<TapeStreamer>(options)),
      guard_(std::make_unique<autograd::SavedTensorHooksGuard>(streamer_)) {}

StreamingScope::~StreamingScope() {
  guard_.reset();
  streamer_->finish();
}

}  // namespace strata::tape
