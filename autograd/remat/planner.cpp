#include "autograd/remat/planner.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iomanip>
#include <iterator>
#include <limits>
#include <numeric>
#include <sstream>

#include "autograd/remat/ilp.h"
#include "core/error.h"

namespace strata::remat {

double PlanGraph::point_time(int64_t t) const {
  const auto m = static_cast<int64_t>(ops.size());
  return t < m ? ops[t].forward_time : ops[num_points() - 1 - t].backward_time;
}

void PlanGraph::validate() const {
  const auto m = static_cast<int64_t>(ops.size());
  STRATA_CHECK(m >= 1, "PlanGraph: the graph has no ops");
  for (int64_t k = 0; k < m; ++k) {
    const PlanOp& op = ops[k];
    STRATA_CHECK(std::isfinite(op.forward_time) && op.forward_time >= 0 && std::isfinite(op.backward_time) &&
                     op.backward_time >= 0,
                 "PlanGraph: op ", k, " (", op.name, ") has forward time ", op.forward_time, " and backward time ",
                 op.backward_time, "; expected finite times >= 0");
  }
  for (std::size_t i = 0; i < values.size(); ++i) {
    const PlanValue& v = values[i];
    STRATA_CHECK(v.producer >= 0 && v.producer < m, "PlanGraph: value ", i, " (", v.name, ") has producer ", v.producer,
                 "; expected an op index in [0, ", m, ")");
    STRATA_CHECK(v.last_forward_use >= v.producer && v.last_forward_use < m, "PlanGraph: value ", i, " (", v.name,
                 ") has last forward use ", v.last_forward_use, "; expected an op index in [producer ", v.producer,
                 ", ", m, ")");
    STRATA_CHECK(v.backward_use >= -1 && v.backward_use < m, "PlanGraph: value ", i, " (", v.name,
                 ") has backward use ", v.backward_use, "; expected an op index in [0, ", m, ") or -1 (none)");
    for (int64_t u : v.extra_backward_uses)
      STRATA_CHECK(u >= 0 && u < m, "PlanGraph: value ", i, " (", v.name, ") has an extra backward use ", u,
                   "; expected an op index in [0, ", m, ")");
    STRATA_CHECK(v.forward_reads >= 0, "PlanGraph: value ", i, " (", v.name, ") has ", v.forward_reads,
                 " forward reads; expected a count >= 0");
    for (int64_t d : v.deps) {
      STRATA_CHECK(d >= 0 && d < static_cast<int64_t>(values.size()) && values[d].producer < v.producer,
                   "PlanGraph: value ", i, " (", v.name, ") depends on value ", d,
                   ", expected a saved value produced by an earlier op");
    }
  }
  STRATA_CHECK(evict_lag >= 0, "PlanGraph: evict lag ", evict_lag, "; expected a number of points >= 0");
  STRATA_CHECK(!sync_prefetch || timed_moves, "PlanGraph: sync_prefetch needs timed_moves");
  STRATA_CHECK(!sync_evict || timed_moves, "PlanGraph: sync_evict needs timed_moves");
  STRATA_CHECK(move_compute_share >= 0 && move_compute_share <= 1 && bandwidth.cpu_seconds_per_byte >= 0 &&
                   std::isfinite(bandwidth.cpu_seconds_per_byte),
               "PlanGraph: move compute share ", move_compute_share, " and copy CPU time ",
               bandwidth.cpu_seconds_per_byte, " s/byte; expected a share in [0, 1] and a finite time >= 0");
  if (!values.empty()) {
    STRATA_CHECK(bandwidth.fast_to_slow > 0 && bandwidth.slow_to_fast > 0 && std::isfinite(bandwidth.fast_to_slow) &&
                     std::isfinite(bandwidth.slow_to_fast),
                 "PlanGraph: copy bandwidths fast->slow ", bandwidth.fast_to_slow, " and slow->fast ",
                 bandwidth.slow_to_fast, "; expected positive finite bytes per second");
  }
}

std::string PlanGraph::signature() const {
  std::ostringstream os;
  os << std::setprecision(17);
  for (const PlanOp& op : ops) {
    os << op.signature << '|' << op.workspace_bytes;
    if (op.backward_workspace_bytes) os << '|' << *op.backward_workspace_bytes;
    os << ';';
  }
  os << '#';
  for (const PlanValue& v : values) {
    os << v.bytes << ',' << v.producer << ',' << v.last_forward_use << ',' << v.backward_use;
    for (int64_t d : v.deps) os << ',' << d;
    if (!v.extra_backward_uses.empty() || v.recompute_workspace_bytes != 0) {
      os << '+';
      for (int64_t u : v.extra_backward_uses) os << u << ',';
      os << 'w' << v.recompute_workspace_bytes;
    }
    if (v.slow_ok) os << "+slow" << v.forward_reads;
    os << ';';
  }
  os << '#' << bandwidth.fast_to_slow << ',' << bandwidth.slow_to_fast;
  if (evict_lag != 0) os << '#' << evict_lag;
  if (timed_moves) os << "#timed";
  if (sync_prefetch) os << "#sync";
  if (sync_evict) os << "#sync_evict";
  if (move_compute_share != 0.0) os << "#cpu" << move_compute_share << ',' << bandwidth.cpu_seconds_per_byte;
  return os.str();
}

std::string to_string(Decision d) {
  switch (d) {
    case Decision::Keep: return "keep";
    case Decision::Stream: return "stream";
    case Decision::Recompute: return "recompute";
    case Decision::Slow: return "slow";
  }
  return "?";
}

std::string to_string(PlanSource s) {
  switch (s) {
    case PlanSource::Ilp: return "ILP";
    case PlanSource::Greedy: return "greedy";
    case PlanSource::Oracle: return "oracle";
    case PlanSource::Cached: return "cached";
  }
  return "?";
}

namespace {

// The residency of a kept or streamed value over the window [span.first, span.last] (set by the
// caller; first < 0: never needed after its forward).
void fill_span(const PlanGraph& graph, const PlanValue& v, WindowSpan& span) {
  span.move_time = span.overlap_window = span.stream_cost = 0.0;
  if (span.first < 0) {  // never needed again: dead after its forward, nothing to move
    span.evict_until = v.last_forward_use;
    span.stream_from = v.last_forward_use + 1;
    return;
  }
  const auto bytes = static_cast<double>(v.bytes);
  span.move_time = bytes / graph.bandwidth.fast_to_slow + bytes / graph.bandwidth.slow_to_fast;
  double window = 0.0;
  for (int64_t t = v.last_forward_use + 1; t < span.first; ++t) window += graph.point_time(t);
  span.overlap_window = window;
  span.stream_cost = std::max(0.0, span.move_time - window);
  const double cpu_cost = graph.move_compute_share * bytes * graph.bandwidth.cpu_seconds_per_byte;
  if (!graph.timed_moves) {
    span.evict_until = std::min(v.last_forward_use + graph.evict_lag, span.last);
    span.stream_from = std::max(v.last_forward_use + 1 + graph.evict_lag, span.first - 1);
    if (span.evict_until + 1 < span.stream_from && span.evict_until + 1 <= span.last) span.stream_cost += cpu_cost;
    return;
  }
  // Timed moves: each copy overlaps the points its time needs.
  const double t_out = bytes / graph.bandwidth.fast_to_slow, t_in = bytes / graph.bandwidth.slow_to_fast;
  int64_t e = v.last_forward_use;
  double out_window = 0.0;
  // sync_evict: the point after the last forward use waits for the whole eviction.
  while (!graph.sync_evict && e < span.last && (e == v.last_forward_use || out_window < t_out))
    out_window += graph.point_time(++e);
  int64_t s = span.first - 1;
  double in_window = s > e ? graph.point_time(s) : 0.0;
  while (s - 1 > e && in_window < t_in) in_window += graph.point_time(--s);
  if (graph.sync_prefetch) {  // fetched at the need point, the whole copy exposed
    s = span.first;
    in_window = 0.0;
  }
  span.evict_until = e;
  span.stream_from = std::max(s, e + 1);
  span.overlap_window = out_window + in_window;
  span.stream_cost = e + 1 >= span.stream_from || e + 1 > span.last
                         ? 0.0
                         : std::max(0.0, t_out - out_window) + std::max(0.0, t_in - in_window) + cpu_cost;
}

}  // namespace

std::vector<ValueWindow> value_windows(const PlanGraph& graph) {
  const std::size_t n = graph.values.size();
  std::vector<ValueWindow> w(n);
  for (std::size_t i = 0; i < n; ++i) {
    const PlanValue& v = graph.values[i];
    if (v.backward_use >= 0) w[i].needs.push_back(graph.backward_point(v.backward_use));
    for (int64_t u : v.extra_backward_uses) w[i].needs.push_back(graph.backward_point(u));
    std::sort(w[i].needs.begin(), w[i].needs.end());
    w[i].needs.erase(std::unique(w[i].needs.begin(), w[i].needs.end()), w[i].needs.end());
    w[i].need = w[i].first = w[i].needs.empty() ? -1 : w[i].needs.front();
    w[i].last = w[i].needs.empty() ? -1 : w[i].needs.back();
    w[i].own.first = w[i].first;
    w[i].own.last = w[i].last;
  }
  auto widen = [](ValueWindow& x, int64_t point) {
    x.first = x.first < 0 ? point : std::min(x.first, point);
    x.last = std::max(x.last, point);
  };
  // A recompute of u re-runs its closure, whose members read their deps at u's need points: v is
  // read there when some direct dependent a of v lies in the closure of a transitive dependent u
  // of a (u = a included). v's hull therefore takes the need points of every transitive
  // dependent with need points (`reach`), and it applies when one of `readers` is recomputed:
  // a itself when it has need points (a is then recomputed whenever such a chain is), else the
  // readers behind it (a value with no need point is re-run only inside its readers' closures).
  // A superset of the exact condition (every link of the chain recomputed), so the model never
  // holds less than the executor.
  std::vector<std::vector<int64_t>> dependents(n), readers(n), reach(n);
  for (std::size_t i = 0; i < n; ++i)
    for (int64_t d : graph.values[i].deps) dependents[d].push_back(static_cast<int64_t>(i));
  std::vector<std::size_t> order(n);
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return graph.values[a].producer != graph.values[b].producer ? graph.values[a].producer > graph.values[b].producer
                                                                : a > b;
  });
  auto merge_into = [](std::vector<int64_t>& into, const std::vector<int64_t>& from) {
    std::vector<int64_t> out;
    out.reserve(into.size() + from.size());
    std::set_union(into.begin(), into.end(), from.begin(), from.end(), std::back_inserter(out));
    into.swap(out);
  };
  for (std::size_t i : order) {  // dependents before the values they read (deps point to lower producers)
    const bool has_needs = !w[i].needs.empty();
    if (has_needs) {
      readers[i] = {static_cast<int64_t>(i)};
      reach[i] = {static_cast<int64_t>(i)};
    }
    for (int64_t u : dependents[i]) {
      if (!has_needs) merge_into(readers[i], readers[u]);
      merge_into(reach[i], reach[u]);
    }
  }
  for (std::size_t d = 0; d < n; ++d) {
    ValueWindow& x = w[d];
    std::vector<int64_t> direct = dependents[d];
    std::sort(direct.begin(), direct.end());
    direct.erase(std::unique(direct.begin(), direct.end()), direct.end());
    for (int64_t a : direct) {
      bool outside = false;
      for (int64_t u : reach[a])
        for (int64_t t : w[u].needs) {
          outside = outside || x.own.first < 0 || t < x.own.first || t > x.own.last;
          widen(x, t);
        }
      if (outside) merge_into(x.widened_by, readers[a]);
    }
  }
  for (std::size_t i = 0; i < n; ++i) {
    fill_span(graph, graph.values[i], w[i]);
    if (w[i].widened_by.empty())
      w[i].own = static_cast<const WindowSpan&>(w[i]);
    else
      fill_span(graph, graph.values[i], w[i].own);
  }
  return w;
}

bool uses_hull(const ValueWindow& w, const std::vector<Decision>& decisions) {
  for (int64_t d : w.widened_by)
    if (decisions[static_cast<std::size_t>(d)] == Decision::Recompute) return true;
  return false;
}

const WindowSpan& span_under(const ValueWindow& w, const std::vector<Decision>& decisions) {
  return uses_hull(w, decisions) ? static_cast<const WindowSpan&>(w) : w.own;
}

std::vector<std::vector<int64_t>> recompute_closures(const PlanGraph& graph, const std::vector<Decision>& decisions) {
  const std::size_t n = graph.values.size();
  std::vector<std::vector<int64_t>> out(n);
  std::vector<char> in(n, 0);
  for (std::size_t v = 0; v < n; ++v) {
    if (decisions[v] != Decision::Recompute) continue;
    std::fill(in.begin(), in.end(), 0);
    std::vector<int64_t> stack{static_cast<int64_t>(v)};
    in[v] = 1;
    while (!stack.empty()) {
      const int64_t w = stack.back();
      stack.pop_back();
      out[v].push_back(w);
      for (int64_t u : graph.values[w].deps)
        if (decisions[u] == Decision::Recompute && !in[u]) {
          in[u] = 1;
          stack.push_back(u);
        }
    }
  }
  return out;
}

double slow_access_time(const PlanGraph& graph, const PlanValue& v) {
  int64_t backward_reads = v.backward_use >= 0 ? 1 : 0;
  for (int64_t u : v.extra_backward_uses) backward_reads += u != v.backward_use;
  const auto bytes = static_cast<double>(v.bytes);
  return bytes / graph.bandwidth.fast_to_slow +
         static_cast<double>(v.forward_reads + backward_reads) * bytes / graph.bandwidth.slow_to_fast;
}

Evaluation evaluate(const PlanGraph& graph, const std::vector<Decision>& decisions) {
  return evaluate(graph, decisions, value_windows(graph));
}

Evaluation evaluate(const PlanGraph& graph, const std::vector<Decision>& decisions, const std::vector<ValueWindow>& w) {
  const std::size_t n = graph.values.size();
  STRATA_CHECK(decisions.size() == n, "evaluate: ", decisions.size(), " decisions for ", n, " saved values");
  STRATA_CHECK(w.size() == n, "evaluate: ", w.size(), " value windows for ", n, " saved values");
  const int64_t P = graph.num_points();
  const auto m = static_cast<int64_t>(graph.ops.size());
  const auto closures = recompute_closures(graph, decisions);
  Evaluation e;
  e.point_bytes.assign(static_cast<std::size_t>(P), 0);
  e.value_recompute_cost.assign(n, 0.0);
  for (int64_t k = 0; k < m; ++k) {
    e.base_time += graph.ops[k].forward_time + graph.ops[k].backward_time;
    e.point_bytes[k] += graph.ops[k].workspace_bytes;
    e.point_bytes[graph.backward_point(k)] += graph.ops[k].backward_workspace();
  }
  for (std::size_t i = 0; i < n; ++i) {
    const PlanValue& v = graph.values[i];
    STRATA_CHECK(decisions[i] != Decision::Slow || v.slow_ok, "evaluate: value ", i, " (", v.name,
                 ") is placed in the slow tier but is not slow_ok");
    if (decisions[i] == Decision::Slow) {  // resident at no point; its kernels access it in place
      e.slow_time += slow_access_time(graph, v);
      continue;
    }
    for (int64_t t = v.producer; t <= v.last_forward_use; ++t) e.point_bytes[t] += v.bytes;
    const WindowSpan& span = span_under(w[i], decisions);
    switch (decisions[i]) {
      case Decision::Keep:
        for (int64_t t = v.last_forward_use + 1; t <= span.last; ++t) e.point_bytes[t] += v.bytes;
        break;
      case Decision::Stream:
        for (int64_t t = v.last_forward_use + 1; t <= span.evict_until; ++t) e.point_bytes[t] += v.bytes;
        for (int64_t t = span.stream_from; t <= span.last; ++t) e.point_bytes[t] += v.bytes;
        e.move_time += span.stream_cost;
        break;
      case Decision::Recompute: {
        std::size_t closure_bytes = 0;
        double closure_time = 0.0;
        for (int64_t a : closures[i]) {
          closure_bytes += graph.values[a].bytes + graph.values[a].recompute_workspace_bytes;
          closure_time += graph.ops[graph.values[a].producer].forward_time;
        }
        for (int64_t t : w[i].needs) e.point_bytes[t] += closure_bytes;
        e.value_recompute_cost[i] = closure_time * static_cast<double>(w[i].needs.size());
        e.recompute_time += e.value_recompute_cost[i];
        break;
      }
      case Decision::Slow: break;  // handled above
    }
  }
  e.step_time = e.base_time + e.recompute_time + e.move_time + e.slow_time;
  for (int64_t t = 0; t < P; ++t)
    if (e.point_bytes[t] > e.peak_bytes) {
      e.peak_bytes = e.point_bytes[t];
      e.peak_point = t;
    }
  return e;
}

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::size_t uniform_peak(const PlanGraph& graph, Decision d) {
  return evaluate(graph, std::vector<Decision>(graph.values.size(), d)).peak_bytes;
}

[[noreturn]] void throw_infeasible(const char* who, std::size_t budget, std::size_t minimum, bool exact) {
  STRATA_FAIL(who, ": the fast-tier budget of ", budget, " bytes is below the minimum ", exact ? "" : "known ",
              "peak of ", minimum, " bytes any plan reaches",
              exact ? "" : " (an upper bound: the exact minimum was not found in time)",
              "; raise the budget to at least ", minimum, " bytes");
}

// A value no backward step consumes (empty N(v)) that no recompute reads from — no member of the
// recompute closure of a value with a backward use depends on it — is held for nothing when kept
// or streamed (and a kept one would be held by the recipe of an idle dependent in the forward, where
// the model frees it after its last forward use): dropping it
// (Recompute, which then re-runs nothing) costs no time and lowers the bytes at some points. The
// ILP is indifferent between the three; the executor should not keep such a value alive.
void drop_idle_values(const PlanGraph& graph, std::vector<Decision>& decisions) {
  const std::vector<ValueWindow> w = value_windows(graph);
  const auto closures = recompute_closures(graph, decisions);
  std::vector<char> read(graph.values.size(), 0);
  for (std::size_t v = 0; v < closures.size(); ++v) {
    if (w[v].needs.empty()) continue;  // an idle value's closure never re-runs
    for (int64_t a : closures[v])
      for (int64_t u : graph.values[a].deps) read[u] = 1;
  }
  for (std::size_t i = 0; i < graph.values.size(); ++i)
    if (w[i].needs.empty() && !read[i] && decisions[i] != Decision::Slow) decisions[i] = Decision::Recompute;
}

// Streaming a value whose moves hide behind compute costs nothing in the model, so the solver is
// indifferent between keeping and streaming it; the moves still take copy bandwidth. A streamed
// value is kept instead when that keeps the plan within the budget and no slower. Likewise a value
// placed in the slow tier (which the ILP's gap may leave where the budget no longer needs it) is
// kept, or else streamed, when that fits and is no slower.
void prefer_keep(const PlanGraph& graph, std::vector<Decision>& decisions, std::size_t budget_bytes) {
  const std::vector<ValueWindow> w = value_windows(graph);  // O(n^2) in the values: once
  Evaluation e = evaluate(graph, decisions, w);
  for (std::size_t i = 0; i < decisions.size(); ++i) {
    const Decision was = decisions[i];
    if (was != Decision::Stream && was != Decision::Slow) continue;
    for (Decision instead : {Decision::Keep, Decision::Stream}) {
      if (instead == was) break;
      decisions[i] = instead;
      Evaluation trial = evaluate(graph, decisions, w);
      if (trial.peak_bytes <= budget_bytes && trial.step_time <= e.step_time) {
        e = std::move(trial);
        break;
      }
      decisions[i] = was;
    }
  }
}

}  // namespace

Plan oracle_plan(const PlanGraph& graph, std::size_t budget_bytes) {
  graph.validate();
  const std::size_t n = graph.values.size();
  double plans = 1.0;
  int64_t slow_ok = 0;
  for (const PlanValue& v : graph.values) {
    plans *= v.slow_ok ? 4.0 : 3.0;
    slow_ok += v.slow_ok;
  }
  STRATA_CHECK(plans <= 4782969.0, "oracle_plan: ", n, " saved values (", slow_ok,
               " of them slow_ok: 4 decisions each, the others 3) give more than 3^14 = 4782969 plans, the most "
               "the exhaustive oracle enumerates");
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<Decision> d(n, Decision::Keep);
  const std::vector<ValueWindow> w = value_windows(graph);
  Plan best;
  bool found = false;
  std::size_t min_peak = std::numeric_limits<std::size_t>::max();
  while (true) {
    Evaluation e = evaluate(graph, d, w);
    min_peak = std::min(min_peak, e.peak_bytes);
    if (e.peak_bytes <= budget_bytes && (!found || e.step_time < best.predicted.step_time)) {
      best.decisions = d;
      best.predicted = std::move(e);
      found = true;
    }
    // Odometer, value n-1 varying fastest.
    std::size_t i = n;
    bool carry = true;
    while (carry && i > 0) {
      --i;
      carry = d[i] == (graph.values[i].slow_ok ? Decision::Slow : Decision::Recompute);
      d[i] = carry ? Decision::Keep : static_cast<Decision>(static_cast<int>(d[i]) + 1);
    }
    if (carry) break;  // wrapped around (or n == 0): every assignment was seen
  }
  if (!found) throw_infeasible("oracle_plan", budget_bytes, min_peak, true);
  best.budget_bytes = budget_bytes;
  best.source = PlanSource::Oracle;
  best.solve_seconds = seconds_since(t0);
  return best;
}

std::optional<std::vector<Decision>> greedy_decisions(const PlanGraph& graph, std::size_t budget_bytes,
                                                      Evaluation* last) {
  graph.validate();
  const std::size_t n = graph.values.size();
  const std::vector<ValueWindow> w = value_windows(graph);
  std::vector<Decision> d(n, Decision::Keep);
  Evaluation e = evaluate(graph, d, w);
  while (e.peak_bytes > budget_bytes) {
    const int64_t t = e.peak_point;
    int64_t pick = -1;
    Decision pick_as = Decision::Keep;
    double pick_score = std::numeric_limits<double>::infinity();
    for (std::size_t i = 0; i < n; ++i) {
      const PlanValue& v = graph.values[i];
      if (d[i] != Decision::Keep || v.bytes == 0) continue;
      // Only a value kept resident at t can lower t: a stream is resident on a subset of a
      // keep's points, and a recompute only adds closures at need points. In its forward
      // lifetime only placing it in the slow tier lowers it.
      const bool forward = t >= v.producer && t <= v.last_forward_use;
      if (!(forward && v.slow_ok) && (t <= v.last_forward_use || t > w[i].last)) continue;
      const double staleness =
          forward ? 1.0 : static_cast<double>(std::max<int64_t>(1, w[i].first - v.last_forward_use));
      for (Decision as : {Decision::Stream, Decision::Recompute, Decision::Slow}) {
        if (as == Decision::Slow ? !v.slow_ok : forward) continue;
        std::vector<Decision> trial = d;
        trial[i] = as;
        const Evaluation te = evaluate(graph, trial, w);
        if (te.point_bytes[t] >= e.point_bytes[t]) continue;  // does not lower the peak point
        const double cost = te.step_time - e.step_time;
        // Zero-cost evictions tie on score 0: prefer the larger value.
        const double score = cost / (static_cast<double>(v.bytes) * staleness) - 1e-30 * static_cast<double>(v.bytes);
        if (score < pick_score) {
          pick_score = score;
          pick = static_cast<int64_t>(i);
          pick_as = as;
        }
      }
    }
    if (pick < 0) {
      if (last != nullptr) *last = std::move(e);
      return std::nullopt;
    }
    d[pick] = pick_as;
    e = evaluate(graph, d, w);
  }
  if (last != nullptr) *last = std::move(e);
  return d;
}

std::vector<Decision> improve_decisions(const PlanGraph& graph, std::vector<Decision> d, std::size_t budget_bytes,
                                        int max_passes) {
  graph.validate();
  const std::vector<ValueWindow> w = value_windows(graph);
  Evaluation e = evaluate(graph, d, w);
  STRATA_CHECK(e.peak_bytes <= budget_bytes, "improve_decisions: the starting assignment peaks at ", e.peak_bytes,
               " bytes, above the budget of ", budget_bytes);
  for (int pass = 0; pass < max_passes; ++pass) {
    bool changed = false;
    for (std::size_t i = 0; i < d.size(); ++i) {
      const Decision was = d[i];
      Decision best = was;
      for (Decision as : {Decision::Keep, Decision::Stream, Decision::Recompute, Decision::Slow}) {
        if (as == was || (as == Decision::Slow && !graph.values[i].slow_ok)) continue;
        d[i] = as;
        Evaluation trial = evaluate(graph, d, w);
        if (trial.peak_bytes <= budget_bytes && trial.step_time < e.step_time) {
          e = std::move(trial);
          best = as;
        }
      }
      d[i] = best;
      changed = changed || best != was;
    }
    if (!changed) break;
  }
  return d;
}

Plan greedy_plan(const PlanGraph& graph, std::size_t budget_bytes) {
  const auto t0 = std::chrono::steady_clock::now();
  Evaluation e;
  std::optional<std::vector<Decision>> d = greedy_decisions(graph, budget_bytes, &e);
  if (!d) {
    const std::size_t minimum = minimum_budget(graph, 1.0);
    throw_infeasible("greedy_plan", budget_bytes, std::min(minimum, e.peak_bytes), false);
  }
  Plan p;
  p.decisions = std::move(*d);
  p.predicted = std::move(e);
  p.budget_bytes = budget_bytes;
  p.source = PlanSource::Greedy;
  p.solve_seconds = seconds_since(t0);
  return p;
}

PlanGraph with_sync_prefetch(PlanGraph graph) {
  graph.sync_prefetch = true;
  return graph;
}

PlanGraph with_sync_moves(PlanGraph graph) {
  graph.sync_prefetch = graph.sync_evict = true;
  return graph;
}

std::vector<PlanGraph> fallback_variants(const PlanGraph& graph) {
  std::vector<PlanGraph> out{graph};
  if (!graph.timed_moves) return out;
  if (!graph.sync_prefetch) out.push_back(with_sync_prefetch(graph));
  if (!graph.sync_evict) out.push_back(with_sync_moves(graph));
  return out;
}

namespace {

// minimum_budget of the graph as it is (no sync_prefetch fallback).
std::size_t own_minimum(const PlanGraph& graph, double time_limit_seconds) {
  if (time_limit_seconds > 0) {
    IlpResult r = solve_min_peak_ilp(graph, time_limit_seconds);
    if (r.status == IlpStatus::Optimal) return evaluate(graph, r.decisions).peak_bytes;
  }
  return std::min(uniform_peak(graph, Decision::Stream), uniform_peak(graph, Decision::Recompute));
}

}  // namespace

std::size_t minimum_budget(const PlanGraph& graph, double time_limit_seconds) {
  graph.validate();
  return own_minimum(graph, time_limit_seconds);
}

std::size_t lowest_budget(const PlanGraph& graph, double time_limit_seconds) {
  graph.validate();
  std::size_t m = std::numeric_limits<std::size_t>::max();
  for (const PlanGraph& g : fallback_variants(graph)) m = std::min(m, own_minimum(g, time_limit_seconds));
  return m;
}

Plan Planner::plan(const PlanGraph& graph, std::size_t budget_bytes) {
  graph.validate();
  if (!options_.slow_placement &&
      std::any_of(graph.values.begin(), graph.values.end(), [](const PlanValue& v) { return v.slow_ok; })) {
    PlanGraph without = graph;
    for (PlanValue& v : without.values) v.slow_ok = false;
    return plan(without, budget_bytes);
  }
  const auto key = std::make_pair(graph.signature(), budget_bytes);
  if (auto it = cache_.find(key); it != cache_.end()) {
    Plan p = it->second;
    p.source = PlanSource::Cached;
    return p;
  }
  const auto t0 = std::chrono::steady_clock::now();
  ++solves_;
  IlpResult r = solve_plan_ilp(graph, budget_bytes, options_.time_limit_seconds);
  Plan p;
  if (r.status == IlpStatus::Optimal) {
    p.decisions = std::move(r.decisions);
    drop_idle_values(graph, p.decisions);
    prefer_keep(graph, p.decisions, budget_bytes);
    p.predicted = evaluate(graph, p.decisions);
    p.source = PlanSource::Ilp;
  } else if (const std::vector<PlanGraph> next = fallback_variants(graph);
             r.status == IlpStatus::Infeasible && next.size() > 1) {
    // Asynchronous moves cannot reach the budget: fetch at the need points instead, and then
    // also wait for evictions (Note [Auto planning model]); the last variant's error names the
    // minimum if none can.
    p = plan(next[1], budget_bytes);
    p.source = p.source == PlanSource::Cached ? PlanSource::Ilp : p.source;
    cache_.emplace(key, p);
    return p;
  } else if (r.status == IlpStatus::Infeasible) {
    IlpResult mp = solve_min_peak_ilp(graph, options_.time_limit_seconds);
    const bool exact = mp.status == IlpStatus::Optimal;
    throw_infeasible("Planner", budget_bytes,
                     exact ? evaluate(graph, mp.decisions).peak_bytes : minimum_budget(graph, 0), exact);
  } else {
    // Timed out: GLPK's incumbent when it has one (its starts include the greedy plan, so it is
    // at least as fast), else the greedy plan.
    const bool incumbent = !r.decisions.empty();
    p = incumbent ? Plan{} : greedy_plan(graph, budget_bytes);
    if (incumbent) p.decisions = std::move(r.decisions);
    p.source = incumbent ? PlanSource::Ilp : PlanSource::Greedy;
    drop_idle_values(graph, p.decisions);
    prefer_keep(graph, p.decisions, budget_bytes);
    p.predicted = evaluate(graph, p.decisions);
    p.ilp_timed_out = true;
  }
  p.budget_bytes = budget_bytes;
  p.solve_seconds = seconds_since(t0);
  p.sync_prefetch = graph.sync_prefetch;
  p.sync_evict = graph.sync_evict;
  cache_.emplace(key, p);
  return p;
}

std::string explain(const PlanGraph& graph, const Plan& plan) {
  STRATA_CHECK(plan.decisions.size() == graph.values.size(), "explain: the plan has ", plan.decisions.size(),
               " decisions for a graph of ", graph.values.size(), " saved values");
  const std::vector<ValueWindow> w = value_windows(graph);
  const Evaluation e = evaluate(graph, plan.decisions);
  std::ostringstream os;
  os << std::left << std::setw(24) << "value" << std::right << std::setw(14) << "bytes" << std::setw(16)
     << "recompute_s" << std::setw(16) << "move_s" << "  decision\n";
  for (std::size_t i = 0; i < graph.values.size(); ++i) {
    const PlanValue& v = graph.values[i];
    const double rc =
        plan.decisions[i] == Decision::Recompute ? e.value_recompute_cost[i] : graph.ops[v.producer].forward_time;
    // The move column: the exposed copies of a stream, the direct accesses of a slow placement.
    const double mc =
        plan.decisions[i] == Decision::Slow ? slow_access_time(graph, v) : span_under(w[i], plan.decisions).stream_cost;
    os << std::left << std::setw(24) << (v.name.empty() ? "v" + std::to_string(i) : v.name) << std::right
       << std::setw(14) << v.bytes << std::setw(16) << std::setprecision(6) << rc << std::setw(16) << mc << "  "
       << to_string(plan.decisions[i]) << "\n";
  }
  os << "predicted peak " << e.peak_bytes << " bytes (budget " << plan.budget_bytes << ") at point " << e.peak_point
     << "; predicted step time " << e.step_time << " s (compute " << e.base_time << ", recompute " << e.recompute_time
     << ", exposed moves " << e.move_time << ", slow-tier accesses " << e.slow_time << "); plan by "
     << to_string(plan.source) << (plan.ilp_timed_out ? " (ILP timed out)" : "") << " in " << plan.solve_seconds << " s"
     << (graph.sync_prefetch ? "; streamed values are fetched at their need points (synchronous)" : "")
     << (graph.sync_evict ? "; each eviction finishes before the next op runs (synchronous)" : "") << "\n";
  return os.str();
}

}  // namespace strata::remat
