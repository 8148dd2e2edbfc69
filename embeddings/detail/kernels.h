#pragma once
// Internals shared by embeddings/lookup.cpp and embeddings/update.cpp: element conversion, the
// dispatch on the concrete table type and on the feature size, row streams with software
// prefetch, chunking of bags and the tuning knobs the benchmark sweeps.

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "embeddings/cached_table.h"
#include "embeddings/kernels.h"
#include "embeddings/table.h"

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define STRATA_EMB_AVX2 1
#else
#define STRATA_EMB_AVX2 0
#endif

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

// ---- row operations ----
//
// Note [Row operations]
// The kernels' inner loops over a row's elements, for a compile-time feature size kD (0: the run-time
// size d). With AVX2+FMA and kD a multiple of 8 they are written with intrinsics, 8 lanes at a time
// (the compiler's own vectorization of fully unrolled 16-element loops was partial or scalar); every
// other case is a plain loop. Both compute exactly the rules of Note [Embedding summation order]:
// lane j of a vector operation is the same IEEE operation (add, fused multiply-add, divide) as
// element j of the loop, so the results are bitwise identical.

template <int64_t kD, ElemType E>
struct RowOps {
  using T = typename Elem<E>::type;
  static constexpr bool kVec = STRATA_EMB_AVX2 && kD > 0 && kD % 8 == 0;

#if STRATA_EMB_AVX2
  static __m256 load8(const T* p) {
    if constexpr (E == ElemType::F32) {
      return _mm256_loadu_ps(p);
    } else {
      const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
      return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    }
  }
  static void store8(T* p, __m256 v) {
    if constexpr (E == ElemType::F32) {
      _mm256_storeu_ps(p, v);
    } else {
      const __m256i x = _mm256_castps_si256(v);
      const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(1));
      const __m256i rounded =
          _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(x, _mm256_set1_epi32(0x7fff)), lsb), 16);
      const __m256i quiet = _mm256_or_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(0x40));
      const __m256i is_nan =
          _mm256_cmpgt_epi32(_mm256_and_si256(x, _mm256_set1_epi32(0x7fffffff)), _mm256_set1_epi32(0x7f800000));
      const __m256i r = _mm256_blendv_epi8(rounded, quiet, is_nan);
      // 32 -> 16 bits: packus works per 128-bit lane, so gather the two low quadwords afterwards.
      const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0x08);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_castsi256_si128(packed));
    }
  }
#endif

  static void zero(float* acc, int64_t d) {
    for (int64_t j = 0; j < (kD > 0 ? kD : d); ++j) acc[j] = 0.0f;
  }
  /// acc_j = acc_j + src_j
  static void add(float* acc, const T* src, int64_t d) {
#if STRATA_EMB_AVX2
    if constexpr (kVec) {
      for (int64_t j = 0; j < kD; j += 8)
        _mm256_storeu_ps(acc + j, _mm256_add_ps(_mm256_loadu_ps(acc + j), load8(src + j)));
      return;
    }
#endif
    for (int64_t j = 0; j < (kD > 0 ? kD : d); ++j) acc[j] = acc[j] + Elem<E>::load(src[j]);
  }
  /// acc_j = fma(w, src_j, acc_j)
  static void fma(float* acc, float w, const T* src, int64_t d) {
#if STRATA_EMB_AVX2
    if constexpr (kVec) {
      const __m256 wv = _mm256_set1_ps(w);
      for (int64_t j = 0; j < kD; j += 8)
        _mm256_storeu_ps(acc + j, _mm256_fmadd_ps(wv, load8(src + j), _mm256_loadu_ps(acc + j)));
      return;
    }
#endif
    for (int64_t j = 0; j < (kD > 0 ? kD : d); ++j) acc[j] = std::fma(w, Elem<E>::load(src[j]), acc[j]);
  }
  /// dst_j = acc_j / n (n > 0) or acc_j (n == 0: no division)
  static void finish(float* dst, const float* acc, float n, int64_t d) {
#if STRATA_EMB_AVX2
    if constexpr (kVec) {
      if (n > 0.0f) {
        const __m256 nv = _mm256_set1_ps(n);
        for (int64_t j = 0; j < kD; j += 8) _mm256_storeu_ps(dst + j, _mm256_div_ps(_mm256_loadu_ps(acc + j), nv));
      } else {
        for (int64_t j = 0; j < kD; j += 8) _mm256_storeu_ps(dst + j, _mm256_loadu_ps(acc + j));
      }
      return;
    }
#endif
    const int64_t n_el = kD > 0 ? kD : d;
    if (n > 0.0f) {
      for (int64_t j = 0; j < n_el; ++j) dst[j] = acc[j] / n;
    } else {
      for (int64_t j = 0; j < n_el; ++j) dst[j] = acc[j];
    }
  }
  /// g_j = fma(c, x_j, g_j) for f32 x (gradient rows)
  static void fma_f32(float* g, float c, const float* x, int64_t d) {
#if STRATA_EMB_AVX2
    if constexpr (kVec) {
      const __m256 cv = _mm256_set1_ps(c);
      for (int64_t j = 0; j < kD; j += 8)
        _mm256_storeu_ps(g + j, _mm256_fmadd_ps(cv, _mm256_loadu_ps(x + j), _mm256_loadu_ps(g + j)));
      return;
    }
#endif
    for (int64_t j = 0; j < (kD > 0 ? kD : d); ++j) g[j] = std::fma(c, x[j], g[j]);
  }
  /// w_j = round(fma(step, g_j, w_j))
  static void apply(T* w, float step, const float* g, int64_t d) {
#if STRATA_EMB_AVX2
    if constexpr (kVec) {
      const __m256 sv = _mm256_set1_ps(step);
      for (int64_t j = 0; j < kD; j += 8) store8(w + j, _mm256_fmadd_ps(sv, _mm256_loadu_ps(g + j), load8(w + j)));
      return;
    }
#endif
    for (int64_t j = 0; j < (kD > 0 ? kD : d); ++j) w[j] = Elem<E>::store(std::fma(step, g[j], Elem<E>::load(w[j])));
  }
  /// sum_j g_j^2 in double, in 8 interleaved lanes (lane j % 8, each in j order) added 0..7.
  static double sum_squares(const float* g, int64_t d) {
    alignas(32) double lanes[8] = {0, 0, 0, 0, 0, 0, 0, 0};
#if STRATA_EMB_AVX2
    if constexpr (kVec) {
      __m256d lo = _mm256_setzero_pd(), hi = _mm256_setzero_pd();
      for (int64_t j = 0; j < kD; j += 8) {
        const __m256d a = _mm256_cvtps_pd(_mm_loadu_ps(g + j));
        const __m256d b = _mm256_cvtps_pd(_mm_loadu_ps(g + j + 4));
        lo = _mm256_fmadd_pd(a, a, lo);
        hi = _mm256_fmadd_pd(b, b, hi);
      }
      _mm256_store_pd(lanes, lo);
      _mm256_store_pd(lanes + 4, hi);
    } else
#endif
    {
      for (int64_t j = 0; j < (kD > 0 ? kD : d); ++j) {
        const double x = static_cast<double>(g[j]);
        lanes[j & 7] = std::fma(x, x, lanes[j & 7]);
      }
    }
    double sq = lanes[0];
    for (int l = 1; l < 8; ++l) sq += lanes[l];
    return sq;
  }
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

/// Calls f(concrete&) for the final table types the kernels are specialized for, f(Table&)
/// (virtual rowpointer) for any other. Adding a final table type is one line here.
template <typename F>
decltype(auto) visit_table(Table& t, F&& f) {
  if (auto* s = dynamic_cast<SimpleTable*>(&t)) return f(*s);
  if (auto* c = dynamic_cast<CachedTable*>(&t)) return f(*c);
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
    // A cached table's pointer-table entry is itself a dependent miss: prefetch the entry of the
    // row `distance` positions further on, so its rowpointer call finds it in cache.
    if constexpr (std::is_same_v<TableT, CachedTable>)
      if (next_ + distance_ < end_) t_.prefetch_entry(row_at_(next_ + distance_));
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

/// Checks shared by lookup and update (validate(), unless `indices` says the caller did, plus the
/// output/gradient slice).
void check_call(const Table& table, const Bags& bags, Pooling pooling, const OutputSlice& slice, const char* what,
                const char* slice_name, Indices indices = Indices::Unchecked);

/// Bags per parallel chunk for a table so that a chunk holds about chunk_rows() row accesses.
inline int64_t bags_per_chunk(const Bags& bags) {
  const int64_t batch = bags.batch();
  if (batch <= 0) return 1;
  const int64_t nnz = static_cast<int64_t>(bags.indices.size());
  const int64_t avg = std::max<int64_t>(1, nnz / batch);
  return std::max<int64_t>(1, chunk_rows().load(std::memory_order_relaxed) / avg);
}

}  // namespace strata::emb::detail
