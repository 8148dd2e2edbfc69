// Pooled embedding lookups (dissertation §5.2.1–5.2.3): validation, the kernels specialized on the
// table type, feature size and element type, and the ensemble's flattened parallel loop.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "core/error.h"
#include "core/threading.h"
#include "embeddings/detail/kernels.h"
#include "embeddings/kernels.h"

namespace strata::emb {

const char* pooling_name(Pooling p) { return p == Pooling::Sum ? "sum" : "mean"; }

namespace detail {

std::atomic<int>& prefetch_distance() {
  static std::atomic<int> d{8};
  return d;
}

std::atomic<int64_t>& chunk_rows() {
  static std::atomic<int64_t> n{2048};
  return n;
}

}  // namespace detail

// ---- validation ----

void validate(const Table& table, const Bags& bags) { validate(table.name(), table.nvectors(), bags); }

void validate(const std::string& name, int64_t rows, const Bags& bags) {
  const auto& off = bags.offsets;
  const auto& idx = bags.indices;
  const int64_t nnz = static_cast<int64_t>(idx.size());
  STRATA_CHECK(!off.empty(), "embedding ", name, ": offsets must hold batch + 1 >= 1 entries, got none");
  STRATA_CHECK(off[0] == 0, "embedding ", name, ": offsets[0] must be 0, got ", off[0]);
  const int64_t batch = bags.batch();
  for (int64_t b = 0; b < batch; ++b) {
    STRATA_CHECK(off[b + 1] >= off[b], "embedding ", name, ": offsets must be non-decreasing, but offsets[", b + 1,
                 "] = ", off[b + 1], " < offsets[", b, "] = ", off[b]);
  }
  STRATA_CHECK(off[batch] == nnz, "embedding ", name, ": offsets[", batch, "] (the last offset) must equal the ", nnz,
               " indices, got ", off[batch]);
  STRATA_CHECK(bags.weights.empty() || static_cast<int64_t>(bags.weights.size()) == nnz, "embedding ", name,
               ": per-sample weights must be empty or one per index (", nnz, "), got ", bags.weights.size());
  // Index range check: the first bad position (lowest bag, then position) is reported, whatever
  // the thread count.
  std::atomic<int64_t> first_bad{nnz};
  parallel_for(nnz, 1 << 14, [&](int64_t begin, int64_t end) {
    for (int64_t k = begin; k < end; ++k) {
      // One unsigned compare covers negative rows too.
      if (static_cast<uint64_t>(idx[k]) >= static_cast<uint64_t>(rows)) {
        int64_t cur = first_bad.load(std::memory_order_relaxed);
        while (k < cur && !first_bad.compare_exchange_weak(cur, k, std::memory_order_relaxed)) {}
        return;
      }
    }
  });
  const int64_t k = first_bad.load();
  if (k < nnz) {
    // The bag holding position k: the last b with offsets[b] <= k (skipping empty bags).
    const auto it = std::upper_bound(off.begin(), off.end(), k);
    const int64_t b = static_cast<int64_t>(it - off.begin()) - 1;
    STRATA_FAIL("embedding ", name, ": bag ", b, ", position ", k - off[b], " (index ", k, "): row ", idx[k],
                " is out of range [0, ", rows, ")");
  }
}

namespace detail {

void check_call(const Table& table, const Bags& bags, Pooling pooling, const OutputSlice& slice, const char* what,
                const char* slice_name, Indices indices) {
  if (indices == Indices::Unchecked) validate(table, bags);
  STRATA_CHECK(bags.weights.empty() || pooling == Pooling::Sum, "embedding ", table.name(), ": ", what,
               " with per-sample weights needs sum pooling, got ", pooling_name(pooling));
  const int64_t batch = bags.batch();
  if (batch == 0) return;
  STRATA_CHECK(slice.data != nullptr, "embedding ", table.name(), ": ", what, ": the ", slice_name,
               " slice has no data for a batch of ", batch);
  STRATA_CHECK(batch == 1 || slice.row_stride >= table.featuresize(), "embedding ", table.name(), ": ", what, ": the ",
               slice_name, " row stride ", slice.row_stride, " is smaller than the feature size ", table.featuresize());
}

}  // namespace detail

// ---- kernels ----

namespace {

using detail::Elem;

/// Pools bags [b0, b1) of one table. kD > 0: compile-time feature size; 0: `d` at run time.
template <typename TableT, int64_t kD, ElemType E, bool kWeighted>
void lookup_bags(TableT& t, const Bags& bags, Pooling pooling, OutputSlice out, int64_t b0, int64_t b1) {
  using T = typename Elem<E>::type;
  const int64_t d = kD > 0 ? kD : t.featuresize();
  const int64_t* idx = bags.indices.data();
  const int64_t* off = bags.offsets.data();
  const float* wts = bags.weights.data();
  const int64_t k0 = off[b0], k1 = off[b1];
  auto row_at = [idx](int64_t k) { return idx[k]; };
  detail::RowStream<TableT, decltype(row_at)> rows(t, AccessContext::Forward, row_at, k0, k1,
                                                   detail::prefetch_distance().load(std::memory_order_relaxed),
                                                   /*for_write=*/false);
  using Ops = detail::RowOps<kD, E>;
  int64_t slow_rows = 0;
  // Static sizes accumulate in a local row (registers or L1); the generic kernel in the
  // destination row itself.
  alignas(32) float local[kD > 0 ? kD : 1];
  for (int64_t b = b0; b < b1; ++b) {
    float* dst = out.data + b * out.row_stride;
    float* acc = kD > 0 ? local : dst;
    const int64_t kb = off[b], ke = off[b + 1];
    Ops::zero(acc, d);
    for (int64_t k = kb; k < ke; ++k) {
      const std::byte* p = rows.get(k);
      slow_rows += detail::row_in_slow(t, p) ? 1 : 0;
      const T* src = reinterpret_cast<const T*>(p);
      if constexpr (kWeighted) {
        Ops::fma(acc, wts[k], src, d);
      } else {
        Ops::add(acc, src, d);
      }
    }
    const float n = pooling == Pooling::Mean && ke > kb ? static_cast<float>(ke - kb) : 0.0f;
    if (kD > 0 || n > 0.0f) Ops::finish(dst, acc, n, d);
  }
  // Note [Slow-tier charging of row accesses]: one charge per chunk.
  if (slow_rows > 0) t.charge_slow_read(static_cast<std::size_t>(slow_rows) * t.row_bytes());
}

using ChunkFn = void (*)(Table&, const Bags&, Pooling, OutputSlice, int64_t, int64_t);

template <typename TableT, int64_t kD, ElemType E, bool kWeighted>
void lookup_bags_erased(Table& t, const Bags& bags, Pooling pooling, OutputSlice out, int64_t b0, int64_t b1) {
  lookup_bags<TableT, kD, E, kWeighted>(static_cast<TableT&>(t), bags, pooling, out, b0, b1);
}

/// The kernel for a table and its bags, chosen once per call.
ChunkFn select_lookup(Table& t, const Bags& bags) {
  const bool weighted = !bags.weights.empty();
  return detail::visit_table(t, [&](auto& concrete) -> ChunkFn {
    using TableT = std::remove_reference_t<decltype(concrete)>;
    return detail::visit_featuresize(t.featuresize(), [&](auto kd) -> ChunkFn {
      return detail::visit_elem(t.elem_type(), [&](auto e) -> ChunkFn {
        if (weighted) return &lookup_bags_erased<TableT, decltype(kd)::value, decltype(e)::value, true>;
        return &lookup_bags_erased<TableT, decltype(kd)::value, decltype(e)::value, false>;
      });
    });
  });
}

}  // namespace

void lookup(Table& table, const Bags& bags, Pooling pooling, OutputSlice out) {
  detail::check_call(table, bags, pooling, out, "lookup", "output");
  const int64_t batch = bags.batch();
  if (batch == 0) return;
  const ChunkFn fn = select_lookup(table, bags);
  const int64_t per = detail::bags_per_chunk(bags);
  const int64_t chunks = (batch + per - 1) / per;
  parallel_for(chunks, 1, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) fn(table, bags, pooling, out, c * per, std::min(batch, (c + 1) * per));
  });
}

void lookup_ensemble(std::span<Table* const> tables, std::span<const Bags> bags, Pooling pooling,
                     std::span<const OutputSlice> outs, Indices indices) {
  const std::size_t n = tables.size();
  STRATA_CHECK(bags.size() == n && outs.size() == n, "lookup_ensemble: got ", n, " tables, ", bags.size(),
               " bag sets and ", outs.size(), " outputs; expected one of each per table");
  for (std::size_t i = 0; i < n; ++i) {
    STRATA_CHECK(tables[i] != nullptr, "lookup_ensemble: table ", i, " is null");
    detail::check_call(*tables[i], bags[i], pooling, outs[i], "lookup", "output", indices);
  }
  // One flat loop over (table, chunk of bags): inter- and intra-table parallelism at once
  // (§5.2.3). The plan lives on the stack for up to kSmall tables, so the step loop does not
  // allocate.
  struct Plan {
    ChunkFn fn;
    int64_t per;
    int64_t first_chunk;
  };
  constexpr std::size_t kSmall = 128;
  Plan small[kSmall];
  std::vector<Plan> big(n > kSmall ? n : 0);
  Plan* plan = n > kSmall ? big.data() : small;
  int64_t total = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const int64_t batch = bags[i].batch();
    const int64_t per = detail::bags_per_chunk(bags[i]);
    plan[i] = {batch > 0 ? select_lookup(*tables[i], bags[i]) : nullptr, per, total};
    total += (batch + per - 1) / per;
  }
  if (total == 0) return;
  const Plan* p = plan;
  parallel_for(total, 1, [&](int64_t c0, int64_t c1) {
    std::size_t i = static_cast<std::size_t>(
        std::upper_bound(p, p + n, c0, [](int64_t c, const Plan& q) { return c < q.first_chunk; }) - p - 1);
    for (int64_t c = c0; c < c1; ++c) {
      while (i + 1 < n && p[i + 1].first_chunk <= c) ++i;
      const int64_t local = c - p[i].first_chunk;
      const int64_t batch = bags[i].batch();
      p[i].fn(*tables[i], bags[i], pooling, outs[i], local * p[i].per, std::min(batch, (local + 1) * p[i].per));
    }
  });
}

}  // namespace strata::emb
