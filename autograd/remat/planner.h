#pragma once
/// @file
/// The Auto rematerialization planner: a graph model of one training step, a cost model, and for
/// every saved value a decision keep-in-fast-tier / stream-to-slow-tier / recompute, chosen to
/// minimize the predicted step time under a fast-tier budget on the liveness-aware peak.
///
/// Note [Auto planning model]
/// A step is m forward ops 0..m-1 followed by their backward steps in reverse order. Program points:
/// forward op k is point k, the backward step of op k is point 2m-1-k; point t costs the op's
/// forward (t < m) or backward time. A saved value v has `bytes`, a `producer` op, a
/// `last_forward_use` op (>= producer) and a `backward_use` op whose backward step consumes it, and
/// `deps`: the saved values its producer reads (what a recompute of v needs). Let need(v) be the
/// point of v's backward use and [first(v), last(v)] v's window: when some w with v in deps(w) is
/// recomputed, the hull of need(v) and need(w) for every such w (a kept or streamed v serves the
/// recompute of w; the hull takes them all, recomputed or not, which keeps the ILP linear), else
/// v's own [need(v), need(v)]. A w that no backward step reads is re-run only inside the
/// closures of its own readers, so it passes them on: v's window widens by their need points.
/// (Before, the hull applied whatever the decisions, and held VGG's relu outputs through the
/// next batch norm's backward for a recompute that never ran; and it missed the readers behind
/// idle values, under-predicting plans near 10 % of SmallVgg's peak by 128 KiB.) Residency in the fast
/// tier, per decision (every value is resident on [producer, last_forward_use] whatever it is):
///  - Keep: resident from its producer to last(v).
///  - Stream: evicted after its last forward use, prefetched at point first(v)-1 (one step ahead),
///    resident on [first(v)-1, last(v)]. The two copies take bytes/bw_out + bytes/bw_in and overlap
///    the compute of the points strictly between last_forward_use and first(v) (AutoTM's
///    asynchronous model, eq. 3.8): only max(0, copies - window) is added to the step time.
///  - Recompute: at need(v) the producer re-runs, and so does (once) every value in deps(v) that is
///    itself recomputed, transitively: the recompute closure C(v) (DaCe AD's recursive cost). The
///    step time grows by the sum of their producers' forward times; at point need(v) the bytes of
///    all of C(v) are resident (DaCe AD's R_i + S_i), and they are freed after it. A recompute
///    does not memoize across backward steps: a value recomputed for two consumers runs twice.
/// The fast-tier bytes at point t are each op's `workspace_bytes` at its two points plus the
/// resident values; the peak is the maximum over points. The step time is the sum of the points'
/// times plus the recompute and the exposed move costs. Contention between concurrent moves on the
/// copy engine is not modeled (AutoTM does not either). evaluate() is this model; the exhaustive
/// oracle, the ILP (autograd/remat/ilp.h) and the greedy fallback all use it.
///
/// Extensions (all off by default, so a graph that does not use them means what is said above):
///  - An op's `backward_workspace_bytes`, when set, replaces `workspace_bytes` at its backward
///    point (what a backward step holds besides the saved values — incoming and outgoing
///    gradients, weight-gradient temporaries — differs from what its forward holds).
///  - A value may be consumed by several backward steps (`extra_backward_uses`): need(v) is then a
///    set of points N(v), the hull [first(v), last(v)] covers all of them, and a recompute happens
///    at each point of N(v) (costing the closure's forward time each time, the closure resident
///    at each). A value may have no backward use at all (`backward_use` = -1 and no extra uses):
///    it only serves the recomputes of the values that depend on it; N(v) is empty, a recompute
///    of it costs nothing by itself, and with no dependent either it is dead after its forward.
///  - A value's `recompute_workspace_bytes`: transient bytes its producer needs when it re-runs
///    (temporaries, beyond the value itself); at a need point of v every member a of C(v) counts
///    bytes(a) + recompute_workspace_bytes(a) (a sum: the re-runs are sequential, so this is an
///    upper bound).
///  - The graph's `evict_lag`: a streamed value stays resident for `evict_lag` points after its
///    last forward use while the asynchronous eviction runs (an executor must wait for the
///    eviction before the point after those); it is then resident on
///    [lfu+1, lfu+evict_lag] and again from stream_from = max(lfu+1+evict_lag, first(v)-1).
///  - The graph's `timed_moves` (replaces evict_lag and the overlap window): each copy gets
///    the points it needs by the ops' times. The eviction, bytes/bw_out long, overlaps points
///    lfu+1.. up to the first point E at which their summed time reaches it (at least one point,
///    at most last(v)); the value is resident on [lfu+1, E] and an executor waits for the
///    eviction before point E+1. The prefetch, bytes/bw_in long, is issued at the start of the
///    latest point S <= first(v)-1 from which the points up to first(v)-1 take at least that long
///    (but not before E+1), and the value is resident on [S, last(v)]. Each copy's exposed cost is
///    its time beyond the compute of its own points; with E+1 >= S nothing moves (the value stays
///    resident, cost 0). Short ops (op-level graphs) thus neither hide a long copy behind one
///    point nor assume a prefetch issued one point ahead has finished.
///  - The graph's `sync_prefetch` (with timed_moves): a streamed value is fetched at the start of
///    its first need point and that point waits for the copy: resident on [first(v), last(v)]
///    after the eviction, its whole fetch time bytes/bw_in exposed. Two adjacent backward steps
///    that each read a large value (batch norm's input, then the next conv's input) otherwise hold
///    both at the first of them, which bounds how low the peak can go. Planner::plan falls back to
///    this variant when a budget is below what asynchronous prefetches reach.
///  - The graph's `sync_evict` (with timed_moves): a streamed value's eviction starts after its
///    last forward use and the next point waits for it: resident only on [producer, lfu] in the
///    forward, its whole eviction time bytes/bw_out exposed. An asynchronous eviction keeps the
///    value while the next points write their outputs (VGG's first block: an 8 MiB batch-norm
///    input held for the ~1.8 ms its eviction takes while the batch norm and relu write two more
///    8 MiB tensors). Planner::plan falls back to sync_prefetch + sync_evict when a budget is
///    below what sync_prefetch alone reaches.
///  - The graph's `move_compute_share` s: a value that moves adds s x bytes x
///    bandwidth.cpu_seconds_per_byte to its stream cost however well the copies overlap. With no
///    copy engine, the mover thread's copying takes a core the compute threads would use. The
///    executor sets s = 1 when the compute threads fill the cores and 0 when a core is free: on
///    the 2-core development VM, tape-streamed ResNet-20 steps lost 1.2x the mover's CPU time
///    (16 ms per step for ~13 ms of copying; a barrier-synchronized op waits for the thread the
///    copy displaced, and the copy competes for memory bandwidth), and plans made with s = 1
///    predicted their measured overheads within 3 points where s = 0.5 predicted +3.9 % for +15 %.
///  - A value with `slow_ok` may also be placed in the slow tier (Slow, AutoTM's tensors placed in
///    PM and used there, dissertation ch. 3): its producer writes it into the slow tier and every
///    kernel that reads it (its `forward_reads` forward readers, its backward steps, recomputes of
///    its dependents) reads it there, in place. It is resident in the fast tier at no point, not
///    even on [producer, last_forward_use] — the only decision that lowers the forward's whole-
///    tensor floor (a conv's input and output both resident). Its cost, exposed (a kernel waits
///    for its slow operand): bytes / bw_out for the write plus (forward_reads + |N(v)|) x bytes /
///    bw_in for the reads (slow_access_time; the copies' bandwidths stand for the direct
///    accesses': equal under the slow-tier model, an over-estimate on a DRAM-backed slow tier
///    without it). Reads by recomputes of dependents are not counted. The executor places only
///    step outputs (boundary values), through memory::SlowPlacement.

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace strata::remat {

/// One forward op of the planning graph.
struct PlanOp {
  std::string name;
  std::string signature;      ///< op name and shapes: what the plan cache keys on
  double forward_time = 0.0;  ///< seconds (any unit works if all costs share it)
  double backward_time = 0.0;
  std::size_t workspace_bytes = 0;  ///< fast-tier bytes live at this op's forward and backward points
  /// Fast-tier bytes live at this op's backward point instead of workspace_bytes, when set.
  std::optional<std::size_t> backward_workspace_bytes;
  std::size_t backward_workspace() const { return backward_workspace_bytes.value_or(workspace_bytes); }
};

/// One saved value (Note [Auto planning model]).
struct PlanValue {
  std::string name;
  std::size_t bytes = 0;
  int64_t producer = 0;
  int64_t last_forward_use = 0;
  int64_t backward_use = 0;                   ///< -1: no backward step consumes it (it only serves recomputes)
  std::vector<int64_t> deps;                  ///< indices of earlier saved values the producer reads
  std::vector<int64_t> extra_backward_uses;   ///< further ops whose backward steps consume it
  std::size_t recompute_workspace_bytes = 0;  ///< transient bytes beyond the value while its producer re-runs
  /// The value may be placed in the slow tier (Decision::Slow; Note [Auto planning model]).
  bool slow_ok = false;
  int64_t forward_reads = 1;  ///< forward ops that read it (for the cost of Slow)
};

/// Copy bandwidths between the tiers, bytes per second (per the cost unit).
struct CopyBandwidth {
  double fast_to_slow = 0.0;
  double slow_to_fast = 0.0;
  /// CPU seconds the copying thread spends per byte moved both ways (evict + prefetch); 0: unknown.
  double cpu_seconds_per_byte = 0.0;
};

struct PlanGraph {
  std::vector<PlanOp> ops;
  std::vector<PlanValue> values;
  CopyBandwidth bandwidth;
  int64_t evict_lag = 0;       ///< points a streamed value stays resident after its last forward use
  bool timed_moves = false;    ///< copies take the points their time needs (Note [Auto planning model])
  bool sync_prefetch = false;  ///< with timed_moves: fetches wait at the need point (Note [Auto planning model])
  bool sync_evict = false;     ///< with timed_moves: evictions finish before the next point (same Note)
  /// Share of the copies' CPU time the step loses even when they overlap compute (0: copies cost
  /// the compute nothing, AutoTM's copy engine; Note [Auto planning model]).
  double move_compute_share = 0.0;

  int64_t num_points() const { return 2 * static_cast<int64_t>(ops.size()); }
  /// Point of op k's backward step.
  int64_t backward_point(int64_t op) const { return num_points() - 1 - op; }
  /// Time of point t (forward or backward time of its op).
  double point_time(int64_t t) const;
  /// Throws strata::Error naming the value/op when an index is out of range or out of order.
  void validate() const;
  /// Ops' signatures, values' bytes and structure, bandwidths: equal graphs plan alike.
  std::string signature() const;
};

enum class Decision { Keep, Stream, Recompute, Slow };
std::string to_string(Decision d);

/// Where a kept or streamed value is resident, for one window [first, last] of backward points.
struct WindowSpan {
  int64_t first = 0, last = 0;  ///< points (Note [Auto planning model]); -1 when there is none
  int64_t evict_until = 0;      ///< a streamed value is resident on [lfu+1, evict_until] (evict_lag)
  double move_time = 0.0;       ///< both copies
  double overlap_window = 0.0;  ///< compute time the copies can hide behind
  double stream_cost = 0.0;     ///< max(0, move_time - overlap_window)
  int64_t stream_from = 0;      ///< first point a streamed value is resident again
};

/// Per-value quantities of the cost model. The WindowSpan base is the hull: the value's own need
/// points and those of every value w with it in deps(w) (it serves their recomputes). `own` is the
/// window of its own need points; a value uses it when none of `widened_by` is recomputed
/// (uses_hull; Note [Auto planning model]).
struct ValueWindow : WindowSpan {
  std::vector<int64_t> needs;  ///< N(v), ascending (empty: no backward use)
  int64_t need = 0;            ///< min N(v), -1 when empty
  /// The values that may read this one in a recompute and have a need point outside `own`
  /// (ascending): its dependents with need points and, through dependents with none (idle values,
  /// re-run only inside their readers' closures), those dependents' readers, transitively.
  std::vector<int64_t> widened_by;
  WindowSpan own;  ///< the window of N(v) alone (the hull itself when widened_by is empty)
};
std::vector<ValueWindow> value_windows(const PlanGraph& graph);
/// True when `w`'s value must be resident on its hull under `decisions`: a value that widens its
/// window is recomputed (its recompute reads this value at its need points).
bool uses_hull(const ValueWindow& w, const std::vector<Decision>& decisions);
/// The span `w`'s value follows under `decisions` (the hull or its own).
const WindowSpan& span_under(const ValueWindow& w, const std::vector<Decision>& decisions);

/// The recompute closure of each value under `decisions` (indices, v first): v and, transitively,
/// its recomputed deps. Empty for values that are not recomputed.
std::vector<std::vector<int64_t>> recompute_closures(const PlanGraph& graph, const std::vector<Decision>& decisions);

/// The exposed time of placing `value` in the slow tier (Decision::Slow; Note [Auto planning
/// model]): one write and forward_reads + |N(v)| reads of its bytes at the copy bandwidths.
double slow_access_time(const PlanGraph& graph, const PlanValue& value);

/// What the cost model predicts for one assignment.
struct Evaluation {
  double step_time = 0.0;  ///< base + recompute + exposed moves
  double base_time = 0.0;  ///< sum of forward and backward times
  double recompute_time = 0.0;
  double move_time = 0.0;  ///< exposed part of the moves
  double slow_time = 0.0;  ///< direct slow-tier accesses of the values placed there (Slow)
  std::size_t peak_bytes = 0;
  int64_t peak_point = 0;
  std::vector<std::size_t> point_bytes;      ///< fast-tier bytes at every program point
  std::vector<double> value_recompute_cost;  ///< per value: its closure's forward time (if recomputed)
};
/// The cost model of Note [Auto planning model]. Throws strata::Error if `decisions` does not have
/// one entry per value.
Evaluation evaluate(const PlanGraph& graph, const std::vector<Decision>& decisions);
/// evaluate() with the graph's value_windows(graph) computed once by the caller (they do not
/// depend on the decisions); throws strata::Error when `windows` has not one entry per value.
Evaluation evaluate(const PlanGraph& graph, const std::vector<Decision>& decisions,
                    const std::vector<ValueWindow>& windows);

enum class PlanSource { Ilp, Greedy, Oracle, Cached };
std::string to_string(PlanSource s);

struct Plan {
  std::vector<Decision> decisions;
  Evaluation predicted;
  std::size_t budget_bytes = 0;
  PlanSource source = PlanSource::Ilp;
  double solve_seconds = 0.0;
  /// The ILP hit its time limit: the plan is its incumbent (source Ilp) or, without one, the
  /// greedy plan (source Greedy).
  bool ilp_timed_out = false;
  /// The plan is for the graph's sync_prefetch (and sync_evict) variant (Planner::plan's
  /// fallbacks): evaluate and execute it on that variant (with_sync_prefetch, with_sync_moves).
  bool sync_prefetch = false;
  bool sync_evict = false;
};

/// `graph` with sync_prefetch set.
PlanGraph with_sync_prefetch(PlanGraph graph);
/// `graph` with sync_prefetch and sync_evict set.
PlanGraph with_sync_moves(PlanGraph graph);
/// The variants Planner::plan tries in turn, each reaching lower budgets at a higher exposed
/// move cost: the graph itself and, for a timed_moves graph, with_sync_prefetch and then
/// with_sync_moves (those it does not set already).
std::vector<PlanGraph> fallback_variants(const PlanGraph& graph);

/// Enumerates all assignments (3 decisions per value, 4 for a slow_ok one; at most 3^14 of them)
/// and returns the fastest whose peak fits `budget_bytes` (ties: the first in enumeration order,
/// value 0 varying slowest with Keep < Stream < Recompute < Slow). Throws strata::Error when there
/// are more than 3^14 assignments or when none fits (naming the minimum budget).
Plan oracle_plan(const PlanGraph& graph, std::size_t budget_bytes);

/// DTR-style greedy: starting from keep-all, while the peak exceeds the budget, takes among the
/// kept values resident at the peak point the one with the smallest cost / (bytes x staleness)
/// (cost: the cheapest of streaming, recomputing and, for a slow_ok value, placing it in the slow
/// tier, among those that lower that point; staleness: the points it would sit idle between its
/// last forward use and first backward use, 1 in its forward lifetime, where only Slow helps) and
/// applies that decision. Throws strata::Error naming the minimum budget if it cannot reach the budget.
Plan greedy_plan(const PlanGraph& graph, std::size_t budget_bytes);
/// greedy_plan's decisions, or nothing when it cannot reach the budget (no error, no minimum
/// computed); `last`, when given, receives the evaluation of the last assignment it reached.
std::optional<std::vector<Decision>> greedy_decisions(const PlanGraph& graph, std::size_t budget_bytes,
                                                      Evaluation* last = nullptr);

/// Local search from a feasible assignment: passes over the values, each value taking the
/// decision (keep, stream, recompute, or slow when slow_ok) that lowers the predicted step time
/// most while the peak stays within `budget_bytes`, until a pass changes nothing (at most
/// `max_passes`). `decisions` must fit the budget; the result fits it and is never slower. The
/// ILP starts from it (Note [Auto planning ILP]).
std::vector<Decision> improve_decisions(const PlanGraph& graph, std::vector<Decision> decisions,
                                        std::size_t budget_bytes, int max_passes = 3);

/// The smallest fast-tier peak any assignment reaches (by the ILP when it finishes within
/// `time_limit_seconds`, else the smaller of the all-stream and all-recompute peaks, an upper
/// bound) — the number an infeasible budget's error names.
std::size_t minimum_budget(const PlanGraph& graph, double time_limit_seconds = 10.0);
/// The smallest budget Planner::plan meets: the lowest minimum_budget of fallback_variants(graph)
/// (Note [Auto planning model]).
std::size_t lowest_budget(const PlanGraph& graph, double time_limit_seconds = 10.0);

struct PlannerOptions {
  double time_limit_seconds = 10.0;  ///< ILP time limit; beyond it the greedy plan is used
  /// Values marked slow_ok may be placed in the slow tier (Decision::Slow); false plans every
  /// graph as if none were.
  bool slow_placement = true;
};

/// Plans by ILP (autograd/remat/ilp.h) — its incumbent when it times out, the greedy plan when it
/// has none — caching plans by graph signature and budget.
class Planner {
 public:
  explicit Planner(PlannerOptions options = {}) : options_(options) {}
  /// The plan for `graph` under `budget_bytes`; a graph with a signature seen before (same budget)
  /// returns the cached plan (source Cached). Values with no backward use that no recompute reads
  /// and not placed in the slow tier are set to Recompute (dropped after their forward: no cost,
  /// no bytes), and a streamed value, or one placed in the slow tier, is kept (or the latter
  /// streamed) instead when the budget allows it at no extra predicted time. A timed_moves graph
  /// whose asynchronous moves cannot reach the budget is planned as its sync_prefetch variant,
  /// and below that one's minimum as its sync_prefetch + sync_evict variant (the plan says which:
  /// fallback_variants). Throws strata::Error for an invalid graph or when the budget is
  /// below the minimum budget (the message names it).
  Plan plan(const PlanGraph& graph, std::size_t budget_bytes);
  std::size_t cache_size() const { return cache_.size(); }
  int64_t solves() const { return solves_; }
  void clear_cache() { cache_.clear(); }
  PlannerOptions& options() { return options_; }

 private:
  PlannerOptions options_;
  std::map<std::pair<std::string, std::size_t>, Plan> cache_;
  int64_t solves_ = 0;
};

/// A table, one line per saved value: name, bytes, recompute cost (its closure under the plan, or
/// its producer's time when kept/streamed), move cost (exposed), decision; then the predicted peak
/// and step time and where the plan came from.
std::string explain(const PlanGraph& graph, const Plan& plan);

}  // namespace strata::remat
