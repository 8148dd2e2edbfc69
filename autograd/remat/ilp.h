#pragma once
/// @file
/// The store / stream / recompute ILP of the Auto planner, solved with GLPK.
///
/// Note [Auto planning ILP]
/// Over the model of Note [Auto planning model] (planner.h), for saved values i = 1..n:
///  - Binary k_i, s_i, r_i (keep, stream, recompute) with k_i + s_i + r_i = 1. DaCe AD (§IV-A b)
///    has one binary v_i per array (store = 1, recompute = 0); the stream option and its cost are
///    AutoTM's (ch. 3, eqs. 3.5 and 3.8). A slow_ok value also has p_i (placed in the slow tier,
///    AutoTM's PM-resident tensor), in the same sum, with objective coefficient
///    slow_access_time(i) and coefficient -bytes_i in the memory rows of its forward lifetime
///    (whose bytes are in const_t): placed there, it is resident at no point.
///  - Continuous n_{v,a} in [0, 1] for every transitive dep a of v ("a is re-run when v is
///    recomputed"), n_{v,v} := r_v, and for every w in {v} ∪ anc(v) and every u in deps(w):
///        n_{v,u} >= n_{v,w} + r_u - 1
///    (u is re-run if w is and u is not itself kept or streamed). Minimization drives n to the
///    indicator of the recompute closure C(v), so n is integral whenever r is: DaCe AD's recursive
///    recompute cost c_i made linear.
///  - Objective (DaCe AD's f = Σ c_i (1 - v_i), extended):
///        min  Σ_i stream_cost_i · s_i  +  Σ_v |N(v)| Σ_{a ∈ {v} ∪ anc(v)} fwd(producer(a)) · n_{v,a}
///    (the constant compute time of the step is added back after solving; N(v) is v's set of need
///    points, one point unless the value has extra backward uses).
///  - One constraint per program point t (DaCe AD's memory measurement sequence m_t <= limit, and
///    AutoTM's DRAM constraint 3.5 "live tensors resident in DRAM fit at every kernel"):
///        const_t + Σ_{i: lfu(i) < t <= last(i)} bytes_i k_i
///                + Σ_{i: lfu(i) < t <= evict_until(i) or stream_from(i) <= t <= last(i)} bytes_i s_i
///                + Σ_{v: t ∈ N(v)} Σ_{a ∈ {v} ∪ anc(v)} (bytes_a + recompute_workspace_a) n_{v,a}  <=  budget
///    where const_t is the workspace of the op at t (its backward workspace at a backward point)
///    plus the bytes of values in their forward lifetime [producer, last_forward_use].
///  - Windows: last, evict_until and stream_from above are the hull's (ValueWindow). A value whose
///    own window differs (widened_by(i) non-empty) also has binaries k'_i, s'_i that keep or
///    stream it on its own window (the same memory terms with ValueWindow::own, its own stream
///    cost), with k_i + s_i + r_i + k'_i + s'_i = 1, and
///        k_i + s_i <= Σ_{w ∈ widened_by(i)} r_w      (the hull only when a reader is recomputed)
///        k'_i + s'_i + r_w <= 1  for w ∈ widened_by(i) (its own window only when none is)
///    so every assignment has exactly the residency evaluate() gives it.
/// The min-peak variant (minimum_budget) adds DaCe AD's auxiliary t >= m_t for all points and
/// minimizes t.
/// Pruning (exact: it only removes plans that are infeasible or worse than a known plan). A value
/// with no need point has no closure variables. An ancestor a is a candidate member of C(v) only if
/// some dep path v -> ... -> a fits: the bytes + recompute workspaces of its members fit in the
/// room the budget leaves at v's need points beyond their constants (for the min-peak variant the
/// budget is the peak of the best uniform plan), and its members' re-runs (|N(v)| times each)
/// cost no more than the extra time of the best feasible uniform plan (those of the starts below).
/// For a non-candidate u that is a dep of a candidate x: n_{v,x} + r_u <= 1. On
/// chains this turns the O(n^2) closure variables into O(n k), k the longest affordable closure.
/// Gap: the min-peak ILP and graphs of up to 16 values are solved to optimality (mip_gap 0, so the
/// ILP equals the exhaustive oracle); larger step-time ILPs stop once the incumbent is within 1 %
/// of GLPK's bound on the extra time (recompute + exposed moves; the step's compute is a
/// constant outside the objective), i.e. within 1 % of the overhead, or within 0.2 % of the
/// step's compute time of that bound (an absolute stop, checked in GLPK's callback; far below
/// what a measured step resolves). With the copies' CPU cost in the model (move_compute_share)
/// every stream has a price, and the op-level ResNet-20 ILP did not close a zero gap in 10 s; on
/// the test ResNets and VGG the bound was within 1.5–3 % of the optimum while branch and bound
/// ran out of time proving the 1 %.
/// Starts: GLPK gets the feasible uniform plans (keep-, stream-, recompute-all; with slow_ok
/// values also those placed in the slow tier and the rest streamed, or recomputed — which also
/// bound the pruning above) and, for the
/// step-time ILP, greedy_decisions() (planner.h) as incumbents at the root, each checked against
/// every row first. Its own heuristics found no incumbent near the bound on those graphs. The
/// starts need the problem's own columns, so GLPK's MIP presolver is off: the problem is scaled and
/// its root LP solved by glp_simplex (an infeasible relaxation is an infeasible budget), and only a
/// numerical failure of that LP falls back to the presolver without starts.
/// Code: the model is built as data without GLPK (detail/ilp_model.h: build_ilp_model, start_columns;
/// tested row by row), and ilp.cpp loads it into GLPK and solves it.

#include <cstddef>
#include <vector>

#include "autograd/remat/planner.h"

namespace strata::remat {

enum class IlpStatus { Optimal, Infeasible, TimedOut };

struct IlpResult {
  IlpStatus status = IlpStatus::TimedOut;
  std::vector<Decision> decisions;  ///< when Optimal; when TimedOut, the best assignment found (if any)
  double objective = 0.0;           ///< predicted step time (or the minimal peak in bytes, min-peak ILP)
  double seconds = 0.0;             ///< model building and solving
  int num_columns = 0, num_rows = 0;
};

/// Solves Note [Auto planning ILP] for `budget_bytes`. TimedOut when GLPK stops at its time limit
/// or the whole call took longer than `time_limit_seconds` (so a tiny limit always times out);
/// `decisions` then hold GLPK's incumbent when it has one (a feasible plan, at least as fast as
/// the starts), else stay empty.
/// Throws strata::Error for an invalid graph or a non-positive time limit.
IlpResult solve_plan_ilp(const PlanGraph& graph, std::size_t budget_bytes, double time_limit_seconds);

/// The min-peak variant: the decisions reaching the smallest fast-tier peak (objective: that peak).
IlpResult solve_min_peak_ilp(const PlanGraph& graph, double time_limit_seconds);

}  // namespace strata::remat
