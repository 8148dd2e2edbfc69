#pragma once
/// @file
/// Embedding lookup and update kernels (dissertation §5.2): pooled lookups of bags of rows written
/// straight into the caller's buffer (the DLRM interaction input), and the backward pass fused with
/// a sparse optimizer (SGD, row-wise or element-wise Adagrad) by reindexing the batch's indices
/// (histogram → prefix sum → CSR by row), so the table gradient is never materialized.
///
/// Kernels reach rows only through `Table::rowpointer` (Forward for lookups, Update for updates),
/// dispatched once per call on the concrete table type, and charge direct slow-tier traffic per
/// chunk of work (Note [Slow-tier charging of row accesses] in embeddings/table.h).
///
/// Note [Embedding summation order]
/// Results are bitwise reproducible and independent of the thread count:
/// - lookup: bag b's output is acc / n for Mean and acc for Sum, where acc starts at +0.0f and, for
///   each position i of the bag in order, acc_j = acc_j + row_j (unweighted) or
///   acc_j = fma(w_i, row_j, acc_j) (weighted); bf16 rows are widened to f32 exactly first.
///   An empty bag gives zeros.
/// - update: for every distinct row r of the batch, g_j starts at +0.0f and, for each occurrence
///   of r in (bag, position) order, g_j = fma(c, grad_out[bag]_j, g_j) with c = 1 (Sum),
///   c = w_i (weighted Sum) or c = 1.0f / n_bag (Mean). Then
///   SGD:            w_j = fma(-lr, g_j, w_j);
///   row-wise Adagrad: m = mean_j(g_j²) accumulated in double in 8 interleaved partial sums
///                   (lane j % 8, each lane in j order, lanes then added 0..7 in order),
///                   state_r = state_r + float(m), mult = lr / (sqrt(state_r) + eps),
///                   w_j = fma(-mult, g_j, w_j);
///   element-wise Adagrad (torch.optim.Adagrad on a sparse gradient): state_rj = fma(g_j, g_j,
///                   state_rj), w_j = fma(-lr, g_j / (sqrt(state_rj) + eps), w_j);
///   learned pooling weights (LearnedPoolingWeights): before row r is stepped, gv = Σ over its
///                   occurrences in order of dot(grad_out[bag], w_r) (the dot: s = fma(grad_j, w_rj,
///                   s) in j order, starting at +0.0f; the occurrences' sums added in order), then
///                   v_r = fma(-lr, gv, v_r) (SGD) or sv_r = fma(gv, gv, sv_r),
///                   v_r = fma(-lr, gv / (sqrt(sv_r) + eps), v_r) (both Adagrads);
///   bf16 rows are updated in f32 and rounded to nearest even.
/// embeddings/reference.h restates these rules naively; the tests require exact equality.

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "embeddings/table.h"

namespace strata::emb {

namespace detail {
struct KernelAccess;  // the kernels' access to optimizer state and workspace internals
}  // namespace detail

/// How a bag's rows are reduced.
enum class Pooling : uint8_t { Sum, Mean };

/// "sum" or "mean".
const char* pooling_name(Pooling p);

/// One table's bags for one batch in CSR form: bag b is indices[offsets[b] .. offsets[b+1]),
/// offsets has batch+1 entries, offsets[0] == 0, non-decreasing, offsets[batch] == indices.size().
/// weights: empty, or one per index (per-sample weights, --weighted-pooling; Sum pooling only).
struct Bags {
  std::span<const int64_t> indices;
  std::span<const int64_t> offsets;
  std::span<const float> weights = {};
  int64_t batch() const { return static_cast<int64_t>(offsets.size()) - 1; }
};

/// Where bag b's pooled row goes: featuresize floats at data + b * row_stride (so tables can
/// write straight into the DLRM interaction input [B, F*d] at their column offset).
struct OutputSlice {
  float* data;
  int64_t row_stride;
};

/// Throws strata::Error naming the table (Table::name()), bag, position and row for an index
/// out of [0, nvectors) or negative, malformed offsets, or weights of the wrong length.
void validate(const Table& table, const Bags& bags);
/// validate() against `rows` rows under `name` (e.g. a logical table stored as several tables).
void validate(const std::string& name, int64_t rows, const Bags& bags);

/// Pooled lookup of one table (validates first). Parallel over bags (TBB).
/// Throws strata::Error for bad bags (see validate), weights with Mean pooling, a null output, or
/// a row_stride smaller than featuresize (when batch > 1).
void lookup(Table& table, const Bags& bags, Pooling pooling, OutputSlice out);

/// Whether the caller has validated the bags already (validate() on every table of this batch,
/// e.g. before running policy hooks); then the ensemble calls only check the output slices.
enum class Indices : uint8_t { Unchecked, Validated };

/// All tables of a DLRM at once: inter- and intra-table parallelism (TBB). All tables are
/// validated before any row is touched (unless `indices` says the caller did). The spans must
/// have equal lengths.
void lookup_ensemble(std::span<Table* const> tables, std::span<const Bags> bags, Pooling pooling,
                     std::span<const OutputSlice> outs, Indices indices = Indices::Unchecked);

/// The fused sparse optimizers (never materialize the table gradient).
struct SparseOptimizer {
  enum class Kind : uint8_t { SGD, RowWiseAdagrad, Adagrad } kind = Kind::SGD;
  float lr = 0.01f;
  float eps = 1e-10f;  // the Adagrads only
  float initial_accumulator = 0.0f;
};

/// "sgd", "rowwise_adagrad" or "adagrad".
const char* optimizer_name(SparseOptimizer::Kind k);

/// Per-table optimizer state in DRAM: row-wise Adagrad one float per row, element-wise Adagrad
/// one per element (nvectors × featuresize); empty for SGD.
class SparseOptimizerState {
 public:
  /// Sizes the state for `table` and `opt` (the Adagrads' accumulators set to
  /// opt.initial_accumulator). Throws strata::Error for a negative lr, eps or initial accumulator.
  SparseOptimizerState(const Table& table, const SparseOptimizer& opt);

  SparseOptimizer::Kind kind() const { return kind_; }
  /// Rows the state was built for.
  int64_t nvectors() const { return nvectors_; }
  /// The accumulators (row-wise: nvectors floats; element-wise: nvectors × featuresize, row-major;
  /// empty for SGD), e.g. for checkpoints.
  std::span<float> accumulators() { return accum_; }
  std::span<const float> accumulators() const { return accum_; }
  /// Number of update() calls applied with this state.
  int64_t steps() const { return steps_; }
  void set_steps(int64_t s) { steps_ = s; }
  /// Throws strata::Error naming the table unless the state fits `table` and `opt`.
  void check_matches(const Table& table, const SparseOptimizer& opt) const;

 private:
  friend struct detail::KernelAccess;
  SparseOptimizer::Kind kind_;
  int64_t nvectors_;
  int64_t steps_ = 0;
  std::vector<float> accum_;
};

/// Reusable scratch (histogram, prefix sums, CSR arrays) so the step loop does not allocate once
/// it has seen its largest batch. One workspace per table that is updated concurrently.
class UpdateWorkspace {
 public:
  UpdateWorkspace() = default;
  /// Distinct rows of the last update() that used this workspace.
  int64_t last_unique_rows() const { return unique_rows_; }
  /// Bytes currently reserved by the scratch arrays.
  std::size_t capacity_bytes() const;

 private:
  friend struct detail::KernelAccess;
  std::vector<uint64_t> sorted_a_, sorted_b_;  // radix passes over (row << 32 | occurrence)
  std::vector<uint32_t> hist_;                 // per-chunk digit histograms, then prefix sums
  std::vector<uint32_t> bag_of_;               // occurrence -> bag
  std::vector<uint32_t> seg_;                  // CSR: start of each distinct row's occurrences
  std::vector<uint32_t> seg_rows_;             // the row of each run
  const uint64_t* occ_ = nullptr;              // per sorted occurrence: (coefficient bits << 32 | bag)
  int64_t unique_rows_ = 0;
};

/// --weighted-pooling learned (the reference's v_W_l[k]): one trainable pooling weight per row of a
/// table; the per-sample weight of index i is v[indices[i]] (the caller gathers them into the
/// Bags' weights). update() and update_ensemble() step v with the rows (Note [Embedding summation
/// order]): SGD with SGD, element-wise Adagrad (state `sum`) with either Adagrad — as the
/// reference's optimizer treats the dense Parameter v (untouched rows get a zero gradient, which
/// leaves both v and the Adagrad state as they are).
struct LearnedPoolingWeights {
  std::vector<float> v;    ///< nvectors weights, initially 1
  std::vector<float> sum;  ///< Adagrad accumulators (nvectors, initially 0; unused with SGD)
};

/// Backward + update of one table: grad_out row b (featuresize floats at grad.data + b *
/// grad.row_stride) is the gradient of bag b's pooled output; every row r that occurs gets
/// w_r -= step(sum over its occurrences, in (bag, position) order, of weight * grad_out[bag]
/// (/ bag size for Mean)). Reindexing: histogram -> prefix sum -> CSR by row; deterministic
/// (Note [Embedding summation order]). Validates before touching any row.
/// `learned`: the table's learned pooling weights (null: none); the bags' weights must then be
/// v[indices] (Sum pooling).
void update(Table& table, const Bags& bags, Pooling pooling, OutputSlice grad, const SparseOptimizer& opt,
            SparseOptimizerState& state, UpdateWorkspace& ws, LearnedPoolingWeights* learned = nullptr);

/// update() for all tables of a DLRM at once (inter- and intra-table parallelism). All tables are
/// validated before any row is touched (unless `indices` says the caller did). The spans must have
/// equal lengths (`learned` may be empty: no learned pooling weights; null entries: none for that
/// table) and the workspaces must be distinct.
void update_ensemble(std::span<Table* const> tables, std::span<const Bags> bags, Pooling pooling,
                     std::span<const OutputSlice> grads, const SparseOptimizer& opt,
                     std::span<SparseOptimizerState* const> states, std::span<UpdateWorkspace* const> workspaces,
                     Indices indices = Indices::Unchecked, std::span<LearnedPoolingWeights* const> learned = {});

}  // namespace strata::emb
