#pragma once
/// @file
/// Strata's own cache of oneDNN primitives and of weights reordered to a primitive's layout
/// (internal to ops/).
///
/// Note [Primitive cache]
/// Building a oneDNN primitive (primitive_desc + JIT) costs from tens of µs to milliseconds, so
/// every primitive Strata executes comes from `cached_primitive`: the caller describes it fully in
/// a PrimitiveKey (primitive kind, prop kind, every shape, stride, padding, dilation, groups, dtype
/// and the memory format requested for each argument, `any` included) and a builder; the builder
/// runs at most once per key for the life of the process (it runs under the cache's lock, so two
/// threads asking for the same key never both build). oneDNN's own primitive cache is not relied
/// upon. `primitive_cache_stats()` counts builds and hits (tests check that nothing is built twice).
///
/// Note [Cached weight reorders]
/// Primitives created with weights in `format_tag::any` want them in a blocked layout. Reordering
/// them on every call would cost a primitive execution and a full pass over the weights, so
/// `prepared_weights` keeps one reordered copy per (weight storage, offset, wanted layout) and
/// reorders again only when the storage's version changed (optimizers bump it on every update; so
/// does `copy_`). Entries observe their storage weakly and are dropped once it is gone.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

#include "core/tensor.h"

namespace strata::ops::cpu {

/// A primitive's full description as a flat list of integers (see the Note).
struct PrimitiveKey {
  std::vector<int64_t> fields;

  PrimitiveKey& add(int64_t v) {
    fields.push_back(v);
    return *this;
  }
  PrimitiveKey& add(IntArrayRef v) {
    fields.push_back(static_cast<int64_t>(v.size()));
    for (int64_t x : v) fields.push_back(x);
    return *this;
  }
  /// A memory descriptor requested by dims, data type and format tag (`any` included).
  PrimitiveKey& add(const dnnl::memory::dims& dims, dnnl::memory::data_type dt, dnnl::memory::format_tag tag) {
    fields.push_back(static_cast<int64_t>(dims.size()));
    for (auto d : dims) fields.push_back(static_cast<int64_t>(d));
    fields.push_back(static_cast<int64_t>(dt));
    fields.push_back(static_cast<int64_t>(tag));
    return *this;
  }
  bool operator==(const PrimitiveKey& o) const { return fields == o.fields; }
};

struct PrimitiveCacheStats {
  uint64_t builds = 0;           // primitives built (builder calls)
  uint64_t hits = 0;             // lookups answered from the cache
  uint64_t weight_reorders = 0;  // weight reorders executed by prepared_weights
  uint64_t weight_reuses = 0;    // prepared_weights calls answered without a reorder
  std::size_t primitives = 0;    // primitives currently cached
  std::size_t weight_entries = 0;
};

PrimitiveCacheStats primitive_cache_stats();

namespace detail {
std::shared_ptr<const void> cached_primitive_erased(const PrimitiveKey& key,
                                                    const std::function<std::shared_ptr<const void>()>& build);
}  // namespace detail

/// The cached entry for `key`, built by `build()` (returning an Entry) on the first request only.
/// The key's first field must identify the Entry type (callers use distinct kind tags).
template <typename Entry, typename Build>
std::shared_ptr<const Entry> cached_primitive(const PrimitiveKey& key, Build&& build) {
  auto p = detail::cached_primitive_erased(
      key, [&]() -> std::shared_ptr<const void> { return std::make_shared<const Entry>(build()); });
  return std::static_pointer_cast<const Entry>(p);
}

/// `w` (contiguous, pinned by the caller, plain layout `plain_md`) as a memory in layout `want_md`:
/// `w` itself when the layouts agree, otherwise a cached reordered copy refreshed only when `w`'s
/// storage version changed (Note [Cached weight reorders]). `origin` identifies the primitive
/// that wants `want_md` (it keys the reorder primitive). The returned memory stays valid while
/// `w` is pinned (plain case) or until the next version change of `w` (reordered case).
dnnl::memory prepared_weights(const Tensor& w, const dnnl::memory::desc& plain_md, const dnnl::memory::desc& want_md,
                              const PrimitiveKey& origin);

}  // namespace strata::ops::cpu
