#pragma once
// Internals shared by embeddings/lookup.cpp and embeddings/update.cpp: element conversion, the
// dispatch on the concrete table type and on the feature size, row streams with software
// prefetch, chunking of bags and the tuning knobs the benchmark sweeps.

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "embeddings/kernels.h"
#include "embeddings/table.h"

namespace strata::emb::detail {

// ---- element conversion (vectorizable) ----

inline float bf16_to_f32(uint16_t b) { return std::bit_cast<float>(static_cast<uint32_t>(b) << 16); }

/// Round to nearest even, NaN kept quiet (bit-identical to BFloat16::round_from_float).
inline uint16_t f32_to_bf16(float f) {
  const uint32_t u = std::bit_cast<uint32_t>(f);
  const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  const uint32_t nan = (u >> 16) | 0x0040u;
  return static_cast<uint16_t>((u & 0x7fffffffu) > 0x7f800000u ? nan : rounded);
}

template <ElemType E>
struct Elem;
template <>
struct Elem<ElemType::F32> {
  using type = float;
  static float load(float x) { return x; }
  static float store(float x) { return x; }
};
template <>
struct Elem<ElemType::BF16> {
  using type = uint16_t;
  static float load(uint16_t x) { return bf16_to_f32(x); }
  static uint16_t store(float x) { return f32_to_bf16(x); }
};

// ---- tuning knobs (the benchmark sweeps them; the defaults are what the measurements chose) ----

/// Rows ahead whose lines are prefetched (0: no software prefetch). At most kMaxPrefetch.
inline constexpr int kMaxPrefetch = 32;
std::atomic<int>& prefetch_distance();
/// Target number of row accesses per parallel chunk of work.
std::atomic<int64_t>& chunk_rows();

inline void prefetch_row(const std::byte* p, std::size_t bytes) {
  for (std::size_t off = 0; off < bytes; off += 64) __builtin_prefetch(p + off, 0, 3);
}
inline void prefetch_row_for_write(const std::byte* p, std::size_t bytes) {
  for (std::size_t off = 0; off < bytes; off += 64) __builtin_prefetch(p + off, 1, 3);
}

// ---- dispatch on the concrete table type ----

/// True for tables whose rowpointer is pure address arithmetic without side effects, so the
/// kernels may compute a row's address ahead of time for prefetching.
template <typename TableT>
inline constexpr bool kPureRowPointer = std::is_same_v<TableT, SimpleTable>;

/// Calls f(concrete&) for the final table types the kernels are specialized for, f(Table&)
/// (virtual rowpointer) for any other. Adding a final table type is one line here.
template <typename F>
decltype(auto) visit_table(Table& t, F&& f) {
  if (auto* s = dynamic_cast<SimpleTable*>(&t)) return f(*s);
  return f(t);
}

/// Whether the table's rows may live in the slow tier at all (for the per-row in_slow test).
template <typename TableT>
inline bool row_in_slow(const TableT& t, const std::byte* p) {
  if constexpr (std::is_same_v<TableT, SimpleTable>) {
    (void)p;
    return t.slow();
  } else {
    return t.in_slow(p);
  }
}

// ---- dispatch on the feature size ----

/// Feature sizes with a compile-time specialization; 0 stands for the generic (run-time) kernel.
template <typename F>
decltype(auto) visit_featuresize(int64_t d, F&& f) {
  switch (d) {
    case 16: return f(std::integral_constant<int64_t, 16>{});
    case 32: return f(std::integral_constant<int64_t, 32>{});
    case 64: return f(std::integral_constant<int64_t, 64>{});
    case 128: return f(std::integral_constant<int64_t, 128>{});
    case 256: return f(std::integral_constant<int64_t, 256>{});
    default: return f(std::integral_constant<int64_t, 0>{});
  }
}

template <typename F>
decltype(auto) visit_elem(ElemType e, F&& f) {
  if (e == ElemType::F32) return f(std::integral_constant<ElemType, ElemType::F32>{});
  return f(std::integral_constant<ElemType, ElemType::BF16>{});
}

/// Row pointers of a sequence of rows, fetched `distance` rows ahead and prefetched, each
/// rowpointer call made exactly once per row and in order (a cached table may move a row when
/// asked, so the call itself must not be repeated or skipped).
template <typename TableT, typename RowAt>
class RowStream {
 public:
  RowStream(TableT& t, AccessContext ctx, RowAt row_at, int64_t begin, int64_t end, int distance, bool for_write)
      : t_(t), ctx_(ctx), row_at_(row_at), end_(end), next_(begin), distance_(distance), write_(for_write) {
    for (int i = 0; i < distance_ && next_ < end_; ++i) fetch();
  }
  /// The pointer of position k (positions are consumed in order begin, begin+1, ...).
  std::byte* get(int64_t k) {
    if (distance_ == 0) return t_.rowpointer(row_at_(k), ctx_);
    std::byte* p = ring_[static_cast<std::size_t>(k) & (kMaxPrefetch - 1)];
    if (next_ < end_) fetch();
    return p;
  }

 private:
  void fetch() {
    std::byte* p = t_.rowpointer(row_at_(next_), ctx_);
    if (write_)
      prefetch_row_for_write(p, t_.row_bytes());
    else
      prefetch_row(p, t_.row_bytes());
    ring_[static_cast<std::size_t>(next_) & (kMaxPrefetch - 1)] = p;
    ++next_;
  }
  TableT& t_;
  AccessContext ctx_;
  RowAt row_at_;
  int64_t end_, next_;
  int distance_;
  bool write_;
  std::byte* ring_[kMaxPrefetch];
};

/// Checks shared by lookup and update (validate() plus the output/gradient slice).
void check_call(const Table& table, const Bags& bags, Pooling pooling, const OutputSlice& slice, const char* what,
                const char* slice_name);

/// Bags per parallel chunk for a table so that a chunk holds about chunk_rows() row accesses.
inline int64_t bags_per_chunk(const Bags& bags) {
  const int64_t batch = bags.batch();
  if (batch <= 0) return 1;
  const int64_t nnz = static_cast<int64_t>(bags.indices.size());
  const int64_t avg = std::max<int64_t>(1, nnz / batch);
  return std::max<int64_t>(1, chunk_rows().load(std::memory_order_relaxed) / avg);
}

}  // namespace strata::emb::detail
