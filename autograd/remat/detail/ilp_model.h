#pragma once
/// @file
/// Internal: the ILP of Note [Auto planning ILP] (autograd/remat/ilp.h) as data — its columns,
/// objective, rows and matrix — built from a PlanGraph without GLPK, so it can be inspected and
/// tested on its own; ilp.cpp loads it into GLPK and solves it. Not part of the public API.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <tuple>
#include <vector>

#include "autograd/remat/planner.h"

namespace strata::remat::detail {

/// What a column may take: a binary, a continuous value in [0, 1] (n_{v,a}), or one >= 0 (the
/// min-peak variant's peak T).
enum class IlpColumnKind { Binary, Unit, NonNegative };

/// How a row bounds its activity: = lo (Fixed), <= hi (Upper), >= lo (Lower).
enum class IlpRowKind { Fixed, Upper, Lower };

/// The ILP of Note [Auto planning ILP] for one graph and budget. Columns and rows are 1-based, as
/// GLPK numbers them (index 0 of every per-column and per-row vector is unused).
struct IlpModel {
  bool min_peak = false;
  std::vector<ValueWindow> windows;  ///< value_windows(graph)
  std::vector<double> constant;      ///< per point: fast-tier bytes fixed there (workspaces, forward lifetimes)
  /// Per value: the candidate closure members other than itself (ascending), after the pruning.
  std::vector<std::vector<int64_t>> anc;
  /// (v, x, u): u is a dep of the candidate x (or of v itself) that cannot join C(v).
  std::vector<std::tuple<int64_t, int64_t, int64_t>> forbid;
  /// The feasible-or-not uniform plans and, for the step-time ILP, the best of them improved by
  /// local search (empty when none fits): the starting incumbents besides the greedy plan.
  std::vector<std::vector<Decision>> uniform;
  std::vector<Decision> improved;

  // Columns: k_i, s_i, r_i = 3i+1, 3i+2, 3i+3; then n_{v,a}; then k'_i, s'_i; then p_i; then T.
  std::vector<std::vector<int>> ncol;  ///< ncol[v][j]: the column of n_{v, anc[v][j]}
  std::vector<int> own_col;            ///< per value: k'_i (s'_i is the next column), or 0
  std::vector<int> slow_col;           ///< per value: p_i (slow_ok values), or 0
  int col_peak = 0;                    ///< T (min-peak variant), or 0
  int num_columns = 0;
  std::vector<IlpColumnKind> column_kind;  ///< per column
  /// Per column: the objective coefficient, already multiplied by objective_scale (the largest
  /// coefficient is 1e3: times may be tiny in seconds).
  std::vector<double> objective;
  double objective_scale = 1.0;

  std::vector<IlpRowKind> row_kind;  ///< per row
  /// Per row: its bounds as given to GLPK (the unused one 0), and as the activity must satisfy
  /// (row_lo / row_hi: -inf / +inf where the row has no such bound).
  std::vector<double> glpk_lo, glpk_hi, row_lo, row_hi;
  /// The constraint matrix as triplets (row ia[e], column ja[e], coefficient ar[e]), e >= 1.
  std::vector<int> ia{0}, ja{0};
  std::vector<double> ar{0.0};

  static int col_k(int64_t i) { return static_cast<int>(3 * i + 1); }
  static int col_s(int64_t i) { return static_cast<int>(3 * i + 2); }
  static int col_r(int64_t i) { return static_cast<int>(3 * i + 3); }
  /// The column of n_{v,a} for a in {v} ∪ anc[v] (r_v for a == v).
  int n_col(int64_t v, int64_t a) const;
  int num_rows() const { return static_cast<int>(row_kind.size()) - 1; }
};

/// Builds Note [Auto planning ILP] for `budget_bytes` (ignored by the min-peak variant). The graph
/// must be valid (PlanGraph::validate).
IlpModel build_ilp_model(const PlanGraph& graph, std::size_t budget_bytes, bool min_peak);

/// The model's column vector (1-based, as glp_ios_heur_sol takes it) of the assignment `d`: k, s, r
/// per value, n_{v,a} the indicator of a in C(v), and (min-peak) T at the largest memory row. Empty
/// when d is not a solution of the model: a closure member the pruning excluded, a Slow value that
/// is not slow_ok, or a row out of its bounds (a plan over the budget).
std::optional<std::vector<double>> start_columns(const IlpModel& model, const PlanGraph& graph,
                                                 const std::vector<Decision>& d);

}  // namespace strata::remat::detail
