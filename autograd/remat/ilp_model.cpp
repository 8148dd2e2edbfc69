#include "autograd/remat/detail/ilp_model.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace strata::remat::detail {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Fast-tier bytes fixed at every point: the ops' workspaces (backward workspace at a backward
// point) and the values in their forward lifetimes.
std::vector<double> point_constants(const PlanGraph& graph) {
  std::vector<double> constant(static_cast<std::size_t>(graph.num_points()), 0.0);
  for (int64_t k = 0; k < static_cast<int64_t>(graph.ops.size()); ++k) {
    constant[k] += static_cast<double>(graph.ops[k].workspace_bytes);
    constant[graph.backward_point(k)] += static_cast<double>(graph.ops[k].backward_workspace());
  }
  for (const PlanValue& v : graph.values)
    for (int64_t t = v.producer; t <= v.last_forward_use; ++t) constant[t] += static_cast<double>(v.bytes);
  return constant;
}

// What a member a of a recompute closure holds at the need point: itself and its re-run's temporaries.
double recompute_bytes(const PlanGraph& graph, int64_t a) {
  return static_cast<double>(graph.values[a].bytes) + static_cast<double>(graph.values[a].recompute_workspace_bytes);
}

// The uniform assignments (Note [Auto planning ILP]: bounds and starting incumbents): keep-,
// stream- and recompute-all and, when some values are slow_ok, those placed in the slow tier with
// the others streamed, or recomputed.
std::vector<std::vector<Decision>> uniform_plans(const PlanGraph& graph) {
  const std::size_t n = graph.values.size();
  std::vector<std::vector<Decision>> out;
  for (Decision d : {Decision::Keep, Decision::Stream, Decision::Recompute}) out.emplace_back(n, d);
  if (std::none_of(graph.values.begin(), graph.values.end(), [](const PlanValue& v) { return v.slow_ok; })) return out;
  for (Decision d : {Decision::Stream, Decision::Recompute}) {
    std::vector<Decision> x(n, d);
    for (std::size_t i = 0; i < n; ++i)
      if (graph.values[i].slow_ok) x[i] = Decision::Slow;
    out.push_back(std::move(x));
  }
  return out;
}

// The bound closures are pruned against (Note [Auto planning ILP]): the budget, or for the
// min-peak variant the peak of the best uniform assignment (the optimum is not above it).
double bytes_bound(const PlanGraph& graph, const IlpModel& model, std::size_t budget_bytes) {
  if (!model.min_peak) return static_cast<double>(budget_bytes);
  std::size_t best = std::numeric_limits<std::size_t>::max();
  for (const auto& d : model.uniform) best = std::min(best, evaluate(graph, d, model.windows).peak_bytes);
  return static_cast<double>(best);
}

// For the time-minimizing ILP, the extra time (recompute and exposed moves) of the best feasible
// uniform plan, and of that plan improved by local search (stored in model.improved: also a start),
// bounds the optimum's: a closure costing more is never optimal. Infinite for the min-peak variant.
double time_bound(const PlanGraph& graph, IlpModel& model, std::size_t budget_bytes) {
  double bound = kInf;
  if (model.min_peak) return bound;
  // At budgets the greedy cannot reach, the uniform plans are far from the optimum: improve the best.
  const std::vector<Decision>* best_uniform = nullptr;
  for (const auto& d : model.uniform) {
    const Evaluation e = evaluate(graph, d, model.windows);
    if (e.peak_bytes <= budget_bytes && e.step_time - e.base_time < bound) {
      bound = e.step_time - e.base_time;
      best_uniform = &d;
    }
  }
  if (best_uniform != nullptr) {
    model.improved = improve_decisions(graph, *best_uniform, budget_bytes);
    const Evaluation e = evaluate(graph, model.improved, model.windows);
    bound = std::min(bound, e.step_time - e.base_time);
  }
  return bound * (1 + 1e-9) + 1e-300;  // never cut a plan that reaches the bound
}

// Candidate closure members of value v (increasing index order): the transitive deps a reachable by
// a path v -> ... -> a whose members' bytes fit in the room left at v's need points and whose
// members' re-runs (at every need point) cost no more than the time bound; model.forbid collects
// (v, x, u): u is a dep of a candidate x (or of v) that cannot join.
void candidate_closure(const PlanGraph& graph, IlpModel& model, int64_t v, double bound, double time_bound) {
  const auto n = static_cast<int64_t>(graph.values.size());
  const ValueWindow& w = model.windows[v];
  double room = bound;
  for (int64_t t : w.needs) room = std::min(room, bound - model.constant[t]);
  const auto uses = static_cast<double>(w.needs.size());
  auto rerun = [&](int64_t a) { return uses * graph.ops[graph.values[a].producer].forward_time; };
  // Lightest path bytes and cheapest path time from v to every ancestor (deps point to lower
  // producers: a DAG).
  std::vector<double> dist(n, kInf), cost(n, kInf);
  dist[v] = recompute_bytes(graph, v);
  cost[v] = rerun(v);
  std::vector<int64_t> order{v};
  std::vector<char> seen(n, 0);
  seen[v] = 1;
  for (std::size_t q = 0; q < order.size(); ++q)
    for (int64_t u : graph.values[order[q]].deps)
      if (!seen[u]) {
        seen[u] = 1;
        order.push_back(u);
      }
  // Relax in decreasing producer order (a topological order of the dep DAG).
  std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    return graph.values[a].producer != graph.values[b].producer ? graph.values[a].producer > graph.values[b].producer
                                                                : a > b;
  });
  for (int64_t x : order)
    for (int64_t u : graph.values[x].deps) {
      dist[u] = std::min(dist[u], dist[x] + recompute_bytes(graph, u));
      cost[u] = std::min(cost[u], cost[x] + rerun(u));
    }
  auto fits = [&](int64_t a) { return dist[a] <= room && cost[a] <= time_bound; };
  for (int64_t a = 0; a < n; ++a)
    if (a != v && seen[a] && fits(a)) model.anc[v].push_back(a);
  std::vector<int64_t> members = model.anc[v];
  members.push_back(v);
  for (int64_t x : members) {
    if (x != v && !fits(x)) continue;
    for (int64_t u : graph.values[x].deps)
      if (!fits(u)) model.forbid.emplace_back(v, x, u);
  }
}

// Columns: k_i, s_i, r_i for every value, then n_{v,a}, then k'_i, s'_i (keep or stream on the
// value's own window) for the values some dependent widens, then p_i (slow_ok), then (min-peak) T.
void assign_columns(const PlanGraph& graph, IlpModel& model) {
  const auto n = static_cast<int64_t>(graph.values.size());
  int ncols = static_cast<int>(3 * n);
  model.ncol.assign(static_cast<std::size_t>(n), {});
  for (int64_t v = 0; v < n; ++v)
    for (std::size_t j = 0; j < model.anc[v].size(); ++j) model.ncol[v].push_back(++ncols);
  model.own_col.assign(static_cast<std::size_t>(n), 0);
  for (int64_t i = 0; i < n; ++i)
    if (!model.windows[i].widened_by.empty()) {
      model.own_col[i] = ncols + 1;
      ncols += 2;
    }
  model.slow_col.assign(static_cast<std::size_t>(n), 0);
  for (int64_t i = 0; i < n; ++i)
    if (graph.values[i].slow_ok) model.slow_col[i] = ++ncols;
  model.col_peak = model.min_peak ? ++ncols : 0;
  model.num_columns = ncols;
  // Binary unless set below: k, s, r, k', s', p.
  model.column_kind.assign(static_cast<std::size_t>(ncols) + 1, IlpColumnKind::Binary);
  for (const auto& cols : model.ncol)
    for (int c : cols) model.column_kind[c] = IlpColumnKind::Unit;
  if (model.min_peak) model.column_kind[model.col_peak] = IlpColumnKind::NonNegative;
}

// Objective: the streams' exposed time, the slow-tier accesses, and every closure member's re-run at
// every need point of v; or (min-peak) T. Scaled so the largest coefficient is 1e3.
void set_objective(const PlanGraph& graph, IlpModel& model) {
  const auto n = static_cast<int64_t>(graph.values.size());
  std::vector<double>& obj = model.objective;
  obj.assign(static_cast<std::size_t>(model.num_columns) + 1, 0.0);
  if (model.min_peak) {
    obj[model.col_peak] = 1.0;
  } else {
    for (int64_t i = 0; i < n; ++i) {
      obj[IlpModel::col_s(i)] = model.windows[i].stream_cost;
      if (model.own_col[i] > 0) obj[model.own_col[i] + 1] = model.windows[i].own.stream_cost;
      if (model.slow_col[i] > 0) obj[model.slow_col[i]] = slow_access_time(graph, graph.values[i]);
    }
    for (int64_t v = 0; v < n; ++v) {
      const auto uses = static_cast<double>(model.windows[v].needs.size());
      obj[IlpModel::col_r(v)] += uses * graph.ops[graph.values[v].producer].forward_time;
      for (int64_t a : model.anc[v]) obj[model.n_col(v, a)] += uses * graph.ops[graph.values[a].producer].forward_time;
    }
  }
  double obj_max = 0.0;
  for (double c : obj) obj_max = std::max(obj_max, std::abs(c));
  model.objective_scale = obj_max > 0 ? 1e3 / obj_max : 1.0;
  for (double& c : obj) c *= model.objective_scale;
}

void add_row(IlpModel& model, IlpRowKind kind, double lo, double hi) {
  model.row_kind.push_back(kind);
  model.glpk_lo.push_back(kind == IlpRowKind::Upper ? 0.0 : lo);
  model.glpk_hi.push_back(kind == IlpRowKind::Lower ? 0.0 : hi);
  model.row_lo.push_back(kind == IlpRowKind::Upper ? -kInf : lo);
  model.row_hi.push_back(kind == IlpRowKind::Lower ? kInf : hi);
}

// A coefficient of column c in the last row added.
void put(IlpModel& model, int c, double a) {
  model.ia.push_back(model.num_rows());
  model.ja.push_back(c);
  model.ar.push_back(a);
}

// k + s + r (+ k' + s') (+ p) = 1 per value; the hull only when a dependent that widens it is
// recomputed (k + s - Σ r_w <= 0), the own window only when none is (k' + s' + r_w <= 1 for each).
void add_choice_rows(const PlanGraph& graph, IlpModel& model) {
  for (int64_t i = 0; i < static_cast<int64_t>(graph.values.size()); ++i) {
    add_row(model, IlpRowKind::Fixed, 1.0, 1.0);
    put(model, IlpModel::col_k(i), 1.0);
    put(model, IlpModel::col_s(i), 1.0);
    put(model, IlpModel::col_r(i), 1.0);
    if (model.slow_col[i] > 0) put(model, model.slow_col[i], 1.0);
    const int own = model.own_col[i];
    if (own == 0) continue;
    put(model, own, 1.0);
    put(model, own + 1, 1.0);
    add_row(model, IlpRowKind::Upper, 0.0, 0.0);
    put(model, IlpModel::col_k(i), 1.0);
    put(model, IlpModel::col_s(i), 1.0);
    for (int64_t d : model.windows[i].widened_by) put(model, IlpModel::col_r(d), -1.0);
    for (int64_t d : model.windows[i].widened_by) {
      add_row(model, IlpRowKind::Upper, 0.0, 1.0);
      put(model, own, 1.0);
      put(model, own + 1, 1.0);
      put(model, IlpModel::col_r(d), 1.0);
    }
  }
}

// The closure rows n_{v,u} - n_{v,w} - r_u >= -1 for every candidate u, and n_{v,x} + r_u <= 1 for
// every forbidden (v, x, u).
void add_closure_rows(const PlanGraph& graph, IlpModel& model) {
  auto is_candidate = [&](int64_t v, int64_t a) {
    return a == v || std::binary_search(model.anc[v].begin(), model.anc[v].end(), a);
  };
  for (int64_t v = 0; v < static_cast<int64_t>(graph.values.size()); ++v) {
    if (model.windows[v].needs.empty()) continue;
    std::vector<int64_t> ws = model.anc[v];
    ws.push_back(v);
    for (int64_t x : ws)
      for (int64_t u : graph.values[x].deps) {
        if (!is_candidate(v, u)) continue;  // in `forbid`
        add_row(model, IlpRowKind::Lower, -1.0, 0.0);
        put(model, model.n_col(v, u), 1.0);
        put(model, model.n_col(v, x), -1.0);
        if (IlpModel::col_r(u) != model.n_col(v, u)) put(model, IlpModel::col_r(u), -1.0);
      }
  }
  for (const auto& [v, x, u] : model.forbid) {
    add_row(model, IlpRowKind::Upper, 0.0, 1.0);
    put(model, model.n_col(v, x), 1.0);
    put(model, IlpModel::col_r(u), 1.0);
  }
}

// The memory terms of value i at every point (column, bytes), constants apart.
void add_memory_terms(const PlanGraph& graph, const IlpModel& model, int64_t i,
                      std::vector<std::vector<std::pair<int, double>>>& terms) {
  const PlanValue& v = graph.values[i];
  const ValueWindow& w = model.windows[i];
  const auto b = static_cast<double>(v.bytes);
  const int own = model.own_col[i];
  // Placed in the slow tier, it is not resident even in its forward lifetime (in `constant`).
  if (model.slow_col[i] > 0 && v.bytes > 0)
    for (int64_t t = v.producer; t <= v.last_forward_use; ++t) terms[t].emplace_back(model.slow_col[i], -b);
  if (v.bytes > 0) {
    for (int64_t t = v.last_forward_use + 1; t <= w.last; ++t) terms[t].emplace_back(IlpModel::col_k(i), b);
    for (int64_t t = v.last_forward_use + 1; t <= w.evict_until; ++t) terms[t].emplace_back(IlpModel::col_s(i), b);
    for (int64_t t = w.stream_from; t <= w.last; ++t) terms[t].emplace_back(IlpModel::col_s(i), b);
    if (own > 0) {
      const WindowSpan& o = w.own;
      for (int64_t t = v.last_forward_use + 1; t <= o.last; ++t) terms[t].emplace_back(own, b);
      for (int64_t t = v.last_forward_use + 1; t <= o.evict_until; ++t) terms[t].emplace_back(own + 1, b);
      for (int64_t t = o.stream_from; t <= o.last; ++t) terms[t].emplace_back(own + 1, b);
    }
  }
  for (int64_t t : w.needs) {
    if (recompute_bytes(graph, i) > 0) terms[t].emplace_back(IlpModel::col_r(i), recompute_bytes(graph, i));
    for (int64_t a : model.anc[i])
      if (recompute_bytes(graph, a) > 0) terms[t].emplace_back(model.n_col(i, a), recompute_bytes(graph, a));
  }
}

// One memory row per point: Σ terms <= budget - const_t, or (min-peak) Σ terms - T <= -const_t;
// a column's terms at one point summed into one coefficient.
void add_memory_rows(const PlanGraph& graph, IlpModel& model, std::size_t budget_bytes) {
  const int64_t points = graph.num_points();
  std::vector<std::vector<std::pair<int, double>>> terms(static_cast<std::size_t>(points));
  for (int64_t i = 0; i < static_cast<int64_t>(graph.values.size()); ++i) add_memory_terms(graph, model, i, terms);
  for (int64_t t = 0; t < points; ++t) {
    auto& tt = terms[t];
    std::sort(tt.begin(), tt.end());
    add_row(model, IlpRowKind::Upper, 0.0,
            model.min_peak ? -model.constant[t] : static_cast<double>(budget_bytes) - model.constant[t]);
    for (std::size_t j = 0; j < tt.size();) {
      const int c = tt[j].first;
      double a = 0.0;
      for (; j < tt.size() && tt[j].first == c; ++j) a += tt[j].second;
      put(model, c, a);
    }
    if (model.min_peak) put(model, model.col_peak, -1.0);
  }
}

}  // namespace

int IlpModel::n_col(int64_t v, int64_t a) const {
  if (a == v) return col_r(v);
  auto it = std::lower_bound(anc[v].begin(), anc[v].end(), a);
  return ncol[v][static_cast<std::size_t>(it - anc[v].begin())];
}

IlpModel build_ilp_model(const PlanGraph& graph, std::size_t budget_bytes, bool min_peak) {
  IlpModel model;
  model.min_peak = min_peak;
  model.windows = value_windows(graph);
  model.constant = point_constants(graph);
  model.uniform = uniform_plans(graph);
  const double bound = bytes_bound(graph, model, budget_bytes);
  const double cost_bound = time_bound(graph, model, budget_bytes);
  const auto n = static_cast<int64_t>(graph.values.size());
  model.anc.assign(static_cast<std::size_t>(n), {});
  for (int64_t v = 0; v < n; ++v)
    if (!model.windows[v].needs.empty()) candidate_closure(graph, model, v, bound, cost_bound);  // else no closure
  assign_columns(graph, model);
  set_objective(graph, model);
  for (auto* rows : {&model.glpk_lo, &model.glpk_hi, &model.row_lo, &model.row_hi}) rows->assign(1, 0.0);
  model.row_kind.assign(1, IlpRowKind::Fixed);
  add_choice_rows(graph, model);
  add_closure_rows(graph, model);
  add_memory_rows(graph, model, budget_bytes);
  return model;
}

std::optional<std::vector<double>> start_columns(const IlpModel& model, const PlanGraph& graph,
                                                 const std::vector<Decision>& d) {
  const auto n = static_cast<int64_t>(graph.values.size());
  std::vector<double> x(static_cast<std::size_t>(model.num_columns) + 1, 0.0);
  static_assert(static_cast<int>(Decision::Keep) == 0 && static_cast<int>(Decision::Stream) == 1 &&
                static_cast<int>(Decision::Recompute) == 2);
  for (int64_t i = 0; i < n; ++i) {
    if (d[i] == Decision::Slow) {
      if (model.slow_col[i] == 0) return std::nullopt;  // not slow_ok
      x[static_cast<std::size_t>(model.slow_col[i])] = 1.0;
      continue;
    }
    const bool own = model.own_col[i] > 0 && d[i] != Decision::Recompute && !uses_hull(model.windows[i], d);
    x[static_cast<std::size_t>(own ? model.own_col[i] + static_cast<int>(d[i]) : 3 * i + 1 + static_cast<int>(d[i]))] =
        1.0;
  }
  const std::vector<std::vector<int64_t>> closures = recompute_closures(graph, d);
  for (int64_t v = 0; v < n; ++v) {
    if (model.windows[v].needs.empty()) continue;  // no closure variables
    for (int64_t a : closures[v]) {
      if (a == v) continue;
      if (!std::binary_search(model.anc[v].begin(), model.anc[v].end(), a)) return std::nullopt;
      x[static_cast<std::size_t>(model.n_col(v, a))] = 1.0;
    }
  }
  const auto& ia = model.ia;
  const auto& ja = model.ja;
  const auto& ar = model.ar;
  std::vector<double> activity(static_cast<std::size_t>(model.num_rows()) + 1, 0.0);
  for (std::size_t e = 1; e < ia.size(); ++e) activity[ia[e]] += ar[e] * x[ja[e]];
  if (model.col_peak > 0) {  // min-peak: T >= every memory row's bytes (rows read Σ - T <= -const)
    double peak = 0.0;
    for (std::size_t e = 1; e < ia.size(); ++e)
      if (ja[e] == model.col_peak) peak = std::max(peak, activity[ia[e]] - model.row_hi[ia[e]]);
    x[static_cast<std::size_t>(model.col_peak)] = peak;
    for (std::size_t e = 1; e < ia.size(); ++e)
      if (ja[e] == model.col_peak) activity[ia[e]] += ar[e] * peak;
  }
  for (int r = 1; r <= model.num_rows(); ++r) {
    const double hi = model.row_hi[r];
    const double tol = 1e-9 * std::max(1.0, std::abs(hi) < 1e300 ? std::abs(hi) : 1.0);
    if (activity[r] < model.row_lo[r] - tol || activity[r] > hi + tol) return std::nullopt;
  }
  return x;
}

}  // namespace strata::remat::detail
