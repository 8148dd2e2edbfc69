// Embedding backward fused with the sparse optimizer (dissertation §5.2.1): the batch's indices
// are reindexed into a CSR by row (histogram -> prefix sum -> scatter, as LSD radix passes over
// the row's digits), then every distinct row accumulates its gradient in a fixed order and is
// updated in place. The table gradient is never materialized; the work is O(batch indices).
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "core/error.h"
#include "core/threading.h"
#include "embeddings/detail/kernels.h"
#include "embeddings/kernels.h"

namespace strata::emb {

const char* optimizer_name(SparseOptimizer::Kind k) {
  switch (k) {
    case SparseOptimizer::Kind::SGD: return "sgd";
    case SparseOptimizer::Kind::RowWiseAdagrad: return "rowwise_adagrad";
    case SparseOptimizer::Kind::Adagrad: return "adagrad";
  }
  return "?";
}

namespace {

void check_optimizer(const SparseOptimizer& opt, const std::string& name) {
  STRATA_CHECK(std::isfinite(opt.lr) && opt.lr >= 0.0f, "embedding ", name, ": ", optimizer_name(opt.kind),
               " learning rate must be finite and >= 0, got ", opt.lr);
  if (opt.kind != SparseOptimizer::Kind::SGD) {
    STRATA_CHECK(std::isfinite(opt.eps) && opt.eps >= 0.0f, "embedding ", name, ": ", optimizer_name(opt.kind),
                 " eps must be finite and >= 0, got ", opt.eps);
    STRATA_CHECK(std::isfinite(opt.initial_accumulator) && opt.initial_accumulator >= 0.0f, "embedding ", name, ": ",
                 optimizer_name(opt.kind), " initial_accumulator must be finite and >= 0, got ",
                 opt.initial_accumulator);
  }
}

}  // namespace

SparseOptimizerState::SparseOptimizerState(const Table& table, const SparseOptimizer& opt)
    : kind_(opt.kind), nvectors_(table.nvectors()) {
  check_optimizer(opt, table.name());
  if (kind_ == SparseOptimizer::Kind::RowWiseAdagrad)
    accum_.assign(static_cast<std::size_t>(nvectors_), opt.initial_accumulator);
  else if (kind_ == SparseOptimizer::Kind::Adagrad)
    accum_.assign(static_cast<std::size_t>(nvectors_ * table.featuresize()), opt.initial_accumulator);
}

void SparseOptimizerState::check_matches(const Table& table, const SparseOptimizer& opt) const {
  STRATA_CHECK(kind_ == opt.kind, "embedding ", table.name(), ": the optimizer state was built for ",
               optimizer_name(kind_), ", but the update uses ", optimizer_name(opt.kind));
  STRATA_CHECK(nvectors_ == table.nvectors(), "embedding ", table.name(), ": the optimizer state holds ", nvectors_,
               " rows, but the table has ", table.nvectors());
  STRATA_CHECK(kind_ != SparseOptimizer::Kind::Adagrad ||
                   accum_.size() == static_cast<std::size_t>(nvectors_ * table.featuresize()),
               "embedding ", table.name(), ": the adagrad state holds ", accum_.size(),
               " accumulators, but the table has ", nvectors_, " x ", table.featuresize(), " elements");
}

std::size_t UpdateWorkspace::capacity_bytes() const {
  return (sorted_a_.capacity() + sorted_b_.capacity()) * sizeof(uint64_t) +
         (hist_.capacity() + bag_of_.capacity() + seg_.capacity() + seg_rows_.capacity()) * sizeof(uint32_t);
}

namespace detail {

struct KernelAccess {
  static float* accum(SparseOptimizerState& s) { return s.accum_.data(); }
  static std::vector<uint64_t>& sorted_a(UpdateWorkspace& w) { return w.sorted_a_; }
  static std::vector<uint64_t>& sorted_b(UpdateWorkspace& w) { return w.sorted_b_; }
  static std::vector<uint32_t>& hist(UpdateWorkspace& w) { return w.hist_; }
  static std::vector<uint32_t>& bag_of(UpdateWorkspace& w) { return w.bag_of_; }
  static std::vector<uint32_t>& seg(UpdateWorkspace& w) { return w.seg_; }
  static std::vector<uint32_t>& seg_rows(UpdateWorkspace& w) { return w.seg_rows_; }
  static const uint64_t*& occ(UpdateWorkspace& w) { return w.occ_; }
  static void set_unique(UpdateWorkspace& w, int64_t u) { w.unique_rows_ = u; }
};

}  // namespace detail

namespace {

using detail::Elem;
using detail::KernelAccess;

constexpr int kMaxDigitBits = 11;        // 2048 counters (8 KiB) per chunk: stays in L1
constexpr int64_t kSortChunk = 1 << 14;  // occurrences per chunk of a radix pass
constexpr int64_t kMaxSortChunks = 64;
constexpr uint64_t kOccMask = 0xffffffffull;

void resize_no_shrink(std::vector<uint64_t>& v, std::size_t n) {
  if (v.size() < n) v.resize(n);
}
void resize_no_shrink(std::vector<uint32_t>& v, std::size_t n) {
  if (v.size() < n) v.resize(n);
}

/// The reindexing (Note [Embedding summation order]): the occurrences k sorted by row and, within
/// a row, by k (the (bag, position) order, since a stable sort keeps the input order); afterwards
/// occ holds each sorted occurrence's bag and gradient coefficient, seg the CSR start of each
/// distinct row's run (plus the end) and seg_rows its row. Each radix pass is histogram -> prefix sum
/// -> scatter over chunks of occurrences; a stable sort has one result, so the chunking (and the
/// thread count) cannot change it.
int64_t reindex(const Table& t, const Bags& bags, Pooling pooling, UpdateWorkspace& ws) {
  const int64_t nnz = static_cast<int64_t>(bags.indices.size());
  const int64_t batch = bags.batch();
  auto& a = KernelAccess::sorted_a(ws);
  auto& bb = KernelAccess::sorted_b(ws);
  auto& hist = KernelAccess::hist(ws);
  auto& bag_of = KernelAccess::bag_of(ws);
  auto& seg = KernelAccess::seg(ws);
  resize_no_shrink(a, static_cast<std::size_t>(nnz));
  resize_no_shrink(bb, static_cast<std::size_t>(nnz));
  resize_no_shrink(bag_of, static_cast<std::size_t>(nnz));
  resize_no_shrink(seg, static_cast<std::size_t>(nnz) + 1);

  const int64_t* idx = bags.indices.data();
  const int64_t* off = bags.offsets.data();
  uint32_t* bag_of_p = bag_of.data();
  parallel_for(batch, std::max<int64_t>(1, kSortChunk / std::max<int64_t>(1, nnz / std::max<int64_t>(1, batch))),
               [&](int64_t b0, int64_t b1) {
                 for (int64_t b = b0; b < b1; ++b)
                   for (int64_t k = off[b]; k < off[b + 1]; ++k) bag_of_p[k] = static_cast<uint32_t>(b);
               });

  const int bits_total = t.nvectors() > 1 ? std::bit_width(static_cast<uint64_t>(t.nvectors() - 1)) : 0;
  const int passes = (bits_total + kMaxDigitBits - 1) / kMaxDigitBits;
  const int64_t chunks = std::clamp<int64_t>((nnz + kSortChunk - 1) / kSortChunk, 1, kMaxSortChunks);
  const int64_t per_chunk = (nnz + chunks - 1) / chunks;
  uint64_t* src = a.data();
  uint64_t* dst = bb.data();
  if (passes == 0) {
    // One row only: the input order is the sorted order.
    for (int64_t k = 0; k < nnz; ++k) src[k] = (static_cast<uint64_t>(idx[k]) << 32) | static_cast<uint64_t>(k);
  }
  const int digit_bits = passes > 0 ? (bits_total + passes - 1) / passes : 0;
  const int64_t radix = int64_t{1} << digit_bits;
  if (passes > 0) resize_no_shrink(hist, static_cast<std::size_t>(radix * chunks));
  uint32_t* h = hist.data();
  for (int pass = 0; pass < passes; ++pass) {
    const int shift = 32 + pass * digit_bits;  // digits of the row, which sits in the high word
    const uint64_t mask = static_cast<uint64_t>(radix - 1);
    const bool first = pass == 0;
    // Histogram per chunk. The first pass reads the indices themselves.
    // (Loop constants are copied into locals so stores into the arrays cannot force reloads.)
    parallel_for(chunks, 1, [&, shift, mask, first](int64_t c0, int64_t c1) {
      for (int64_t c = c0; c < c1; ++c) {
        uint32_t* hc = h + c * radix;
        std::fill(hc, hc + radix, 0u);
        const int64_t k0 = c * per_chunk, k1 = std::min(nnz, k0 + per_chunk);
        if (first) {
          for (int64_t k = k0; k < k1; ++k) ++hc[static_cast<uint64_t>(idx[k]) & mask];
        } else {
          for (int64_t k = k0; k < k1; ++k) ++hc[(src[k] >> shift) & mask];
        }
      }
    });
    // Exclusive prefix sum in (digit, chunk) order: chunk c's digit-d items follow those of
    // chunks < c, which keeps the sort stable.
    uint32_t running = 0;
    for (int64_t d = 0; d < radix; ++d) {
      for (int64_t c = 0; c < chunks; ++c) {
        const uint32_t x = h[c * radix + d];
        h[c * radix + d] = running;
        running += x;
      }
    }
    // Scatter.
    parallel_for(chunks, 1, [&, shift, mask, first, src, dst](int64_t c0, int64_t c1) {
      for (int64_t c = c0; c < c1; ++c) {
        uint32_t* hc = h + c * radix;
        const int64_t k0 = c * per_chunk, k1 = std::min(nnz, k0 + per_chunk);
        if (first) {
          for (int64_t k = k0; k < k1; ++k) {
            const uint64_t row = static_cast<uint64_t>(idx[k]);
            dst[hc[row & mask]++] = (row << 32) | static_cast<uint64_t>(k);
          }
        } else {
          for (int64_t k = k0; k < k1; ++k) {
            const uint64_t v = src[k];
            dst[hc[(v >> shift) & mask]++] = v;
          }
        }
      }
    });
    std::swap(src, dst);
  }
  // CSR: a run begins wherever the row changes. Per chunk: count the run starts, prefix-sum the
  // counts, then write each run's start and row, and pack every occurrence's bag and coefficient
  // (in sorted order, into the other buffer) so the update streams them instead of chasing
  // occurrence -> bag -> gradient row.
  const uint64_t* sorted = src;
  uint64_t* occ = dst;
  uint32_t* s = seg.data();
  resize_no_shrink(KernelAccess::seg_rows(ws), static_cast<std::size_t>(nnz));
  uint32_t* srow = KernelAccess::seg_rows(ws).data();
  const float* wts = bags.weights.empty() ? nullptr : bags.weights.data();
  const bool mean = pooling == Pooling::Mean;
  uint32_t starts[kMaxSortChunks + 1];
  parallel_for(chunks, 1, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      const int64_t k0 = c * per_chunk, k1 = std::min(nnz, k0 + per_chunk);
      uint32_t n = 0;
      for (int64_t i = k0; i < k1; ++i) n += (i == 0 || (sorted[i] >> 32) != (sorted[i - 1] >> 32)) ? 1 : 0;
      starts[c] = n;
    }
  });
  uint32_t unique = 0;
  for (int64_t c = 0; c < chunks; ++c) {
    const uint32_t n = starts[c];
    starts[c] = unique;
    unique += n;
  }
  parallel_for(chunks, 1, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      const int64_t k0 = c * per_chunk, k1 = std::min(nnz, k0 + per_chunk);
      uint32_t u = starts[c];
      for (int64_t i = k0; i < k1; ++i) {
        const uint64_t v = sorted[i];
        if (i == 0 || (v >> 32) != (sorted[i - 1] >> 32)) {
          s[u] = static_cast<uint32_t>(i);
          srow[u] = static_cast<uint32_t>(v >> 32);
          ++u;
        }
        const int64_t k = static_cast<int64_t>(v & kOccMask);
        const uint32_t b = bag_of_p[k];
        float coef = 1.0f;
        if (wts != nullptr) {
          coef = wts[k];
        } else if (mean) {
          coef = 1.0f / static_cast<float>(off[b + 1] - off[b]);
        }
        occ[i] = (static_cast<uint64_t>(std::bit_cast<uint32_t>(coef)) << 32) | b;
      }
    }
  });
  s[unique] = static_cast<uint32_t>(nnz);
  KernelAccess::occ(ws) = occ;
  KernelAccess::set_unique(ws, unique);
  return unique;
}

/// What one chunk of distinct rows needs.
struct UpdateArgs {
  OutputSlice grad;
  SparseOptimizer opt;
  float* accum;                    // the Adagrads' accumulators (null for SGD)
  const uint64_t* occ;             // per sorted occurrence: (coefficient bits << 32 | bag)
  const uint32_t* seg;             // run starts, unique + 1 entries
  const uint32_t* rows;            // the row of each run
  LearnedPoolingWeights* learned;  // null: none
};

/// Steps row r's learned pooling weight (Note [Embedding summation order]) from the row's values
/// before its own step: gv = Σ over the occurrences of dot(grad_out[bag], w_r).
template <ElemType E>
void step_pooling_weight(const UpdateArgs& a, int64_t r, const typename Elem<E>::type* w, int64_t d, uint32_t i0,
                         uint32_t i1) {
  float gv = 0.0f;
  for (uint32_t i = i0; i < i1; ++i) {
    const float* go = a.grad.data + static_cast<int64_t>(a.occ[i] & kOccMask) * a.grad.row_stride;
    float dot = 0.0f;
    for (int64_t j = 0; j < d; ++j) dot = std::fma(go[j], Elem<E>::load(w[j]), dot);
    gv = gv + dot;
  }
  float& v = a.learned->v[static_cast<std::size_t>(r)];
  if (a.opt.kind == SparseOptimizer::Kind::SGD) {
    v = std::fma(-a.opt.lr, gv, v);
  } else {
    float& s = a.learned->sum[static_cast<std::size_t>(r)];
    s = std::fma(gv, gv, s);
    v = std::fma(-a.opt.lr, gv / (std::sqrt(s) + a.opt.eps), v);
  }
}

/// Updates distinct rows [u0, u1). kD > 0: compile-time feature size; 0: run time.
template <typename TableT, int64_t kD, ElemType E, SparseOptimizer::Kind K>
void update_rows(TableT& t, const UpdateArgs& a, int64_t u0, int64_t u1) {
  using T = typename Elem<E>::type;
  using Ops = detail::RowOps<kD, E>;
  constexpr int64_t kBuf = kD > 0 ? kD : 1024;
  const int64_t d = kD > 0 ? kD : t.featuresize();
  const uint32_t* seg = a.seg;
  const uint32_t* run_rows = a.rows;
  const uint64_t* occ = a.occ;
  auto row_at = [run_rows](int64_t u) { return static_cast<int64_t>(run_rows[u]); };
  detail::RowStream<TableT, decltype(row_at)> rows(t, AccessContext::Update, row_at, u0, u1,
                                                   detail::prefetch_distance().load(std::memory_order_relaxed),
                                                   /*for_write=*/true);
  const float neg_lr = -a.opt.lr;
  int64_t slow_rows = 0;
  alignas(32) float gbuf[kBuf];
  std::vector<float> big;  // run-time feature sizes above kBuf only
  float* g = gbuf;
  if (kD == 0 && d > kBuf) {
    big.resize(static_cast<std::size_t>(d));
    g = big.data();
  }
  const float* grad = a.grad.data;
  const int64_t stride = a.grad.row_stride;
  for (int64_t u = u0; u < u1; ++u) {
    // Gradient of this row: its occurrences in (bag, position) order.
    Ops::zero(g, d);
    for (uint32_t i = seg[u]; i < seg[u + 1]; ++i) {
      const uint64_t v = occ[i];
      const float c = std::bit_cast<float>(static_cast<uint32_t>(v >> 32));
      Ops::fma_f32(g, c, grad + static_cast<int64_t>(v & kOccMask) * stride, d);
    }
    std::byte* p = rows.get(u);
    slow_rows += detail::row_in_slow(t, p) ? 1 : 0;
    if (a.learned != nullptr)
      step_pooling_weight<E>(a, row_at(u), reinterpret_cast<const T*>(p), d, seg[u], seg[u + 1]);
    if constexpr (K == SparseOptimizer::Kind::Adagrad) {
      // Element-wise: per element state and step (torch.optim.Adagrad).
      float* s = a.accum + row_at(u) * d;
      T* w = reinterpret_cast<T*>(p);
      for (int64_t j = 0; j < d; ++j) {
        s[j] = std::fma(g[j], g[j], s[j]);
        w[j] = Elem<E>::store(std::fma(neg_lr, g[j] / (std::sqrt(s[j]) + a.opt.eps), Elem<E>::load(w[j])));
      }
      continue;
    }
    float step = neg_lr;
    if constexpr (K == SparseOptimizer::Kind::RowWiseAdagrad) {
      const double sq = Ops::sum_squares(g, d);
      float& acc = a.accum[run_rows[u]];
      acc = acc + static_cast<float>(sq / static_cast<double>(d));
      step = -(a.opt.lr / (std::sqrt(acc) + a.opt.eps));
    }
    Ops::apply(reinterpret_cast<T*>(p), step, g, d);
  }
  // Note [Slow-tier charging of row accesses]: one charge per chunk, reads and writes.
  if (slow_rows > 0) {
    t.charge_slow_read(static_cast<std::size_t>(slow_rows) * t.row_bytes());
    t.charge_slow_write(static_cast<std::size_t>(slow_rows) * t.row_bytes());
  }
}

using RowsFn = void (*)(Table&, const UpdateArgs&, int64_t, int64_t);

template <typename TableT, int64_t kD, ElemType E, SparseOptimizer::Kind K>
void update_rows_erased(Table& t, const UpdateArgs& a, int64_t u0, int64_t u1) {
  update_rows<TableT, kD, E, K>(static_cast<TableT&>(t), a, u0, u1);
}

RowsFn select_update(Table& t, SparseOptimizer::Kind kind) {
  return detail::visit_table(t, [&](auto& concrete) -> RowsFn {
    using TableT = std::remove_reference_t<decltype(concrete)>;
    return detail::visit_featuresize(t.featuresize(), [&](auto kd) -> RowsFn {
      return detail::visit_elem(t.elem_type(), [&](auto e) -> RowsFn {
        using Kind = SparseOptimizer::Kind;
        if (kind == Kind::SGD) return &update_rows_erased<TableT, decltype(kd)::value, decltype(e)::value, Kind::SGD>;
        if (kind == Kind::Adagrad)
          return &update_rows_erased<TableT, decltype(kd)::value, decltype(e)::value, Kind::Adagrad>;
        return &update_rows_erased<TableT, decltype(kd)::value, decltype(e)::value, Kind::RowWiseAdagrad>;
      });
    });
  });
}

/// Everything checked before any row is touched.
void check_update(Table& table, const Bags& bags, Pooling pooling, const OutputSlice& grad, const SparseOptimizer& opt,
                  const SparseOptimizerState& state, Indices indices, const LearnedPoolingWeights* learned) {
  detail::check_call(table, bags, pooling, grad, "update", "gradient", indices);
  if (learned != nullptr) {
    STRATA_CHECK(learned->v.size() == static_cast<std::size_t>(table.nvectors()) &&
                     (opt.kind == SparseOptimizer::Kind::SGD || learned->sum.size() == learned->v.size()),
                 "embedding ", table.name(), ": the learned pooling weights hold ", learned->v.size(), " weights and ",
                 learned->sum.size(), " accumulators for ", table.nvectors(), " rows");
    STRATA_CHECK(pooling == Pooling::Sum && bags.weights.size() == bags.indices.size(), "embedding ", table.name(),
                 ": learned pooling weights need sum pooling and the gathered per-sample weights");
  }
  check_optimizer(opt, table.name());
  state.check_matches(table, opt);
  STRATA_CHECK(table.nvectors() <= (int64_t{1} << 32), "embedding ", table.name(),
               ": update supports tables of at most 2^32 rows, got ", table.nvectors());
  STRATA_CHECK(static_cast<int64_t>(bags.indices.size()) < (int64_t{1} << 32), "embedding ", table.name(),
               ": update supports fewer than 2^32 indices per batch, got ", bags.indices.size());
}

/// Distinct rows per parallel chunk of the update.
int64_t rows_per_chunk() { return std::max<int64_t>(1, detail::chunk_rows().load(std::memory_order_relaxed) / 2); }

}  // namespace

void update(Table& table, const Bags& bags, Pooling pooling, OutputSlice grad, const SparseOptimizer& opt,
            SparseOptimizerState& state, UpdateWorkspace& ws, LearnedPoolingWeights* learned) {
  check_update(table, bags, pooling, grad, opt, state, Indices::Unchecked, learned);
  state.set_steps(state.steps() + 1);
  if (bags.indices.empty()) {
    KernelAccess::set_unique(ws, 0);
    return;
  }
  const int64_t unique = reindex(table, bags, pooling, ws);
  const UpdateArgs args{grad,
                        opt,
                        KernelAccess::accum(state),
                        KernelAccess::occ(ws),
                        KernelAccess::seg(ws).data(),
                        KernelAccess::seg_rows(ws).data(),
                        learned};
  const RowsFn fn = select_update(table, opt.kind);
  const int64_t per = rows_per_chunk();
  const int64_t chunks = (unique + per - 1) / per;
  parallel_for(chunks, 1, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) fn(table, args, c * per, std::min(unique, (c + 1) * per));
  });
}

void update_ensemble(std::span<Table* const> tables, std::span<const Bags> bags, Pooling pooling,
                     std::span<const OutputSlice> grads, const SparseOptimizer& opt,
                     std::span<SparseOptimizerState* const> states, std::span<UpdateWorkspace* const> workspaces,
                     Indices indices, std::span<LearnedPoolingWeights* const> learned) {
  const std::size_t n = tables.size();
  STRATA_CHECK(bags.size() == n && grads.size() == n && states.size() == n && workspaces.size() == n,
               "update_ensemble: got ", n, " tables, ", bags.size(), " bag sets, ", grads.size(), " gradients, ",
               states.size(), " optimizer states and ", workspaces.size(),
               " workspaces; expected one of each per table");
  STRATA_CHECK(learned.empty() || learned.size() == n, "update_ensemble: got ", learned.size(),
               " learned pooling weights for ", n, " tables; expected none or one (possibly null) per table");
  const auto learned_of = [&](std::size_t i) { return learned.empty() ? nullptr : learned[i]; };
  for (std::size_t i = 0; i < n; ++i) {
    STRATA_CHECK(tables[i] != nullptr && states[i] != nullptr && workspaces[i] != nullptr, "update_ensemble: entry ", i,
                 " has a null table, optimizer state or workspace");
    check_update(*tables[i], bags[i], pooling, grads[i], opt, *states[i], indices, learned_of(i));
  }
  // Tables, states and workspaces updated concurrently must be distinct.
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = i + 1; j < n; ++j) {
      STRATA_CHECK(tables[i] != tables[j], "update_ensemble: table ", tables[i]->name(), " appears twice (entries ", i,
                   " and ", j, ")");
      STRATA_CHECK(states[i] != states[j], "update_ensemble: entries ", i, " and ", j, " share one optimizer state");
      STRATA_CHECK(workspaces[i] != workspaces[j], "update_ensemble: entries ", i, " and ", j, " share one workspace");
    }
  // Phase 1: reindex every table (tables in parallel, each radix pass parallel over chunks).
  parallel_for(static_cast<int64_t>(n), 1, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      states[i]->set_steps(states[i]->steps() + 1);
      if (bags[i].indices.empty()) {
        KernelAccess::set_unique(*workspaces[i], 0);
        continue;
      }
      reindex(*tables[i], bags[i], pooling, *workspaces[i]);
    }
  });
  // Phase 2: one flat loop over (table, chunk of distinct rows).
  struct Plan {
    RowsFn fn;
    UpdateArgs args;
    int64_t unique;
    int64_t first_chunk;
  };
  constexpr std::size_t kSmall = 64;
  Plan small[kSmall];
  std::vector<Plan> big(n > kSmall ? n : 0);
  Plan* plan = n > kSmall ? big.data() : small;
  const int64_t per = rows_per_chunk();
  int64_t total = 0;
  for (std::size_t i = 0; i < n; ++i) {
    UpdateWorkspace& ws = *workspaces[i];
    const int64_t unique = ws.last_unique_rows();
    plan[i] = {unique > 0 ? select_update(*tables[i], opt.kind) : nullptr,
               UpdateArgs{grads[i], opt, KernelAccess::accum(*states[i]), KernelAccess::occ(ws),
                          KernelAccess::seg(ws).data(), KernelAccess::seg_rows(ws).data(), learned_of(i)},
               unique, total};
    total += (unique + per - 1) / per;
  }
  if (total == 0) return;
  const Plan* p = plan;
  parallel_for(total, 1, [&](int64_t c0, int64_t c1) {
    std::size_t i = static_cast<std::size_t>(
        std::upper_bound(p, p + n, c0, [](int64_t c, const Plan& q) { return c < q.first_chunk; }) - p - 1);
    for (int64_t c = c0; c < c1; ++c) {
      while (i + 1 < n && p[i + 1].first_chunk <= c) ++i;
      const int64_t local = c - p[i].first_chunk;
      p[i].fn(*tables[i], p[i].args, local * per, std::min(p[i].unique, (local + 1) * per));
    }
  });
}

}  // namespace strata::emb
