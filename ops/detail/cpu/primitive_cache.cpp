#include "ops/detail/cpu/primitive_cache.h"

#include <mutex>
#include <unordered_map>

#include "core/storage.h"
#include "ops/detail/cpu/dnnl_engine.h"

namespace strata::ops::cpu {

namespace {

struct KeyHash {
  std::size_t operator()(const PrimitiveKey& k) const {
    uint64_t h = 1469598103934665603ull;
    for (int64_t v : k.fields) {
      h ^= static_cast<uint64_t>(v) + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
      h *= 1099511628211ull;
    }
    return static_cast<std::size_t>(h);
  }
};

// Tag of reorder primitives in the primitive cache (callers' tags are small positive numbers).
constexpr int64_t kWeightReorderTag = -1;

struct WeightEntry {
  WeakStorage storage;  // observed, not owned
  int64_t offset = 0;   // element offset of the weight tensor in its storage
  dnnl::memory::desc want;
  uint64_t version = 0;
  dnnl::memory memory;  // owned by oneDNN, layout `want`
};

struct Cache {
  std::recursive_mutex mutex;  // a builder may ask for its hint primitive
  std::unordered_map<PrimitiveKey, std::shared_ptr<const void>, KeyHash> primitives;
  // Weight entries by allocation (an allocation address can be reused once its storage is gone:
  // entries whose storage expired are dropped before matching).
  std::unordered_map<const void*, std::vector<WeightEntry>> weights;
  PrimitiveCacheStats stats;
};

Cache& cache() {
  static Cache* c = new Cache;  // never destroyed: primitives outlive static destruction order
  return *c;
}

std::shared_ptr<const void> lookup_or_build(Cache& c, const PrimitiveKey& key,
                                            const std::function<std::shared_ptr<const void>()>& build) {
  auto it = c.primitives.find(key);
  if (it != c.primitives.end()) {
    ++c.stats.hits;
    return it->second;
  }
  auto p = build();
  ++c.stats.builds;
  c.primitives.emplace(key, p);
  return p;
}

}  // namespace

PrimitiveCacheStats primitive_cache_stats() {
  Cache& c = cache();
  std::lock_guard lock(c.mutex);
  PrimitiveCacheStats s = c.stats;
  s.primitives = c.primitives.size();
  s.weight_entries = 0;
  for (auto& [a, v] : c.weights) s.weight_entries += v.size();
  return s;
}

namespace detail {
std::shared_ptr<const void> cached_primitive_erased(const PrimitiveKey& key,
                                                    const std::function<std::shared_ptr<const void>()>& build) {
  Cache& c = cache();
  std::lock_guard lock(c.mutex);
  return lookup_or_build(c, key, build);
}
}  // namespace detail

dnnl::memory prepared_weights(const Tensor& w, const dnnl::memory::desc& plain_md, const dnnl::memory::desc& want_md,
                              const PrimitiveKey& origin) {
  if (want_md == plain_md) return dnnl_wrap(plain_md, w.data_ptr());
  Cache& c = cache();
  std::lock_guard lock(c.mutex);
  const void* alloc = w.storage().allocation();
  const uint64_t version = w.version();
  auto& entries = c.weights[alloc];
  std::erase_if(entries, [](const WeightEntry& e) { return !e.storage.version().has_value(); });
  WeightEntry* entry = nullptr;
  for (auto& e : entries)
    if (e.offset == w.offset() && e.want == want_md) entry = &e;
  if (entry != nullptr && entry->version == version) {
    ++c.stats.weight_reuses;
    return entry->memory;
  }
  if (entry == nullptr) {
    entries.push_back({WeakStorage(w.storage()), w.offset(), want_md, 0, dnnl::memory(want_md, dnnl_engine())});
    entry = &entries.back();
  }
  PrimitiveKey rkey = origin;
  rkey.fields.insert(rkey.fields.begin(), kWeightReorderTag);
  auto reorder = std::static_pointer_cast<const dnnl::reorder>(lookup_or_build(c, rkey, [&] {
    return std::static_pointer_cast<const void>(std::make_shared<const dnnl::reorder>(
        dnnl::reorder::primitive_desc(dnnl_engine(), plain_md, dnnl_engine(), want_md)));
  }));
  dnnl::memory src = dnnl_wrap(plain_md, w.data_ptr());
  dnnl_execute(*reorder, {{DNNL_ARG_FROM, src}, {DNNL_ARG_TO, entry->memory}});
  entry->version = version;
  ++c.stats.weight_reorders;
  // Sweep other allocations' dead entries now and then (bounded work per call).
  if (c.weights.size() > 64) {
    for (auto it = c.weights.begin(); it != c.weights.end();) {
      std::erase_if(it->second, [](const WeightEntry& e) { return !e.storage.version().has_value(); });
      it = it->second.empty() ? c.weights.erase(it) : std::next(it);
    }
  }
  return entry->memory;
}

}  // namespace strata::ops::cpu
