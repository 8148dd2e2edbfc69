#include "autograd/remat/ilp.h"

#include <glpk.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <memory>
#include <optional>
#include <tuple>

#include "core/error.h"

namespace strata::remat {

namespace {

struct ProbDeleter {
  void operator()(glp_prob* p) const { glp_delete_prob(p); }
};

// The ILP's column vector (1-based, as glp_ios_heur_sol takes it) of the assignment `d`: k, s, r per
// value, n_{v,a} the indicator of a in C(v), and the peak column (min-peak) at the largest memory
// row. Empty when d is not a solution of this ILP: a closure member the pruning excluded, or a row
// out of its bounds (a plan over the budget).
template <class NCol>
std::optional<std::vector<double>> start_columns(const PlanGraph& graph, const std::vector<Decision>& d, int ncols,
                                                 int col_peak, const std::vector<std::vector<int64_t>>& anc,
                                                 NCol&& n_col, const std::vector<int>& own_col,
                                                 const std::vector<int>& slow_col, const std::vector<int>& ia,
                                                 const std::vector<int>& ja,
                                                 const std::vector<double>& ar, const std::vector<double>& row_lo,
                                                 const std::vector<double>& row_hi) {
  const auto n = static_cast<int64_t>(graph.values.size());
  std::vector<double> x(static_cast<std::size_t>(ncols) + 1, 0.0);
  static_assert(static_cast<int>(Decision::Keep) == 0 && static_cast<int>(Decision::Stream) == 1 &&
                static_cast<int>(Decision::Recompute) == 2);
  const std::vector<ValueWindow> w = value_windows(graph);
  for (int64_t i = 0; i < n; ++i) {
    if (d[i] == Decision::Slow) {
      if (slow_col[i] == 0) return std::nullopt;  // not slow_ok
      x[static_cast<std::size_t>(slow_col[i])] = 1.0;
      continue;
    }
    const bool own = own_col[i] > 0 && d[i] != Decision::Recompute && !uses_hull(w[i], d);
    x[static_cast<std::size_t>(own ? own_col[i] + static_cast<int>(d[i]) : 3 * i + 1 + static_cast<int>(d[i]))] = 1.0;
  }
  const std::vector<std::vector<int64_t>> closures = recompute_closures(graph, d);
  for (int64_t v = 0; v < n; ++v) {
    if (w[v].needs.empty()) continue;  // no closure variables
    for (int64_t a : closures[v]) {
      if (a == v) continue;
      if (!std::binary_search(anc[v].begin(), anc[v].end(), a)) return std::nullopt;
      x[static_cast<std::size_t>(n_col(v, a))] = 1.0;
    }
  }
  const std::size_t rows = row_lo.size() - 1;
  std::vector<double> activity(rows + 1, 0.0);
  for (std::size_t e = 1; e < ia.size(); ++e) activity[ia[e]] += ar[e] * x[ja[e]];
  if (col_peak > 0) {  // min-peak: T >= every memory row's bytes (rows read Σ - T <= -const)
    double peak = 0.0;
    for (std::size_t e = 1; e < ia.size(); ++e)
      if (ja[e] == col_peak) peak = std::max(peak, activity[ia[e]] - row_hi[ia[e]]);
    x[static_cast<std::size_t>(col_peak)] = peak;
    for (std::size_t e = 1; e < ia.size(); ++e)
      if (ja[e] == col_peak) activity[ia[e]] += ar[e] * peak;
  }
  for (std::size_t r = 1; r <= rows; ++r) {
    const double tol = 1e-9 * std::max(1.0, std::abs(row_hi[r]) < 1e300 ? std::abs(row_hi[r]) : 1.0);
    if (activity[r] < row_lo[r] - tol || activity[r] > row_hi[r] + tol) return std::nullopt;
  }
  return x;
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

// Builds and solves Note [Auto planning ILP]; min_peak selects the min-peak variant.
IlpResult solve(const PlanGraph& graph, std::size_t budget_bytes, double time_limit_seconds, bool min_peak) {
  graph.validate();
  STRATA_CHECK(std::isfinite(time_limit_seconds) && time_limit_seconds > 0, "solve_plan_ilp: time limit ",
               time_limit_seconds, " s; expected a positive number of seconds");
  const auto t0 = std::chrono::steady_clock::now();
  const auto n = static_cast<int64_t>(graph.values.size());
  const int64_t P = graph.num_points();
  const std::vector<ValueWindow> w = value_windows(graph);

  // Fast-tier bytes fixed at every point (workspaces, forward lifetimes), and what a member a of
  // a recompute closure holds at the need point: itself and its re-run's temporaries.
  std::vector<double> constant(static_cast<std::size_t>(P), 0.0);
  for (int64_t k = 0; k < static_cast<int64_t>(graph.ops.size()); ++k) {
    constant[k] += static_cast<double>(graph.ops[k].workspace_bytes);
    constant[graph.backward_point(k)] += static_cast<double>(graph.ops[k].backward_workspace());
  }
  for (const PlanValue& v : graph.values)
    for (int64_t t = v.producer; t <= v.last_forward_use; ++t) constant[t] += static_cast<double>(v.bytes);
  auto recompute_bytes = [&](int64_t a) {
    return static_cast<double>(graph.values[a].bytes) + static_cast<double>(graph.values[a].recompute_workspace_bytes);
  };
  // The bound closures are pruned against (Note [Auto planning ILP]): the budget, or for the
  // min-peak variant the peak of the best uniform assignment (the optimum is not above it).
  const std::vector<std::vector<Decision>> uniform = uniform_plans(graph);
  double bound = static_cast<double>(budget_bytes);
  if (min_peak) {
    std::size_t best = std::numeric_limits<std::size_t>::max();
    for (const auto& d : uniform) best = std::min(best, evaluate(graph, d, w).peak_bytes);
    bound = static_cast<double>(best);
  }

  // For the time-minimizing ILP, the extra time (recompute and exposed moves) of the best
  // feasible uniform plan bounds the optimum's: a closure costing more is never optimal.
  double time_bound = std::numeric_limits<double>::infinity();
  std::vector<Decision> improved;
  if (!min_peak) {
    // ... and of the best of them improved by local search (also a start below): at budgets the
    // greedy cannot reach, the uniform plans are far from the optimum.
    const std::vector<Decision>* best_uniform = nullptr;
    for (const auto& d : uniform) {
      const Evaluation e = evaluate(graph, d, w);
      if (e.peak_bytes <= budget_bytes && e.step_time - e.base_time < time_bound) {
        time_bound = e.step_time - e.base_time;
        best_uniform = &d;
      }
    }
    if (best_uniform != nullptr) {
      improved = improve_decisions(graph, *best_uniform, budget_bytes);
      const Evaluation e = evaluate(graph, improved, w);
      time_bound = std::min(time_bound, e.step_time - e.base_time);
    }
    time_bound = time_bound * (1 + 1e-9) + 1e-300;  // never cut a plan that reaches the bound
  }

  // Candidate closure members of every value v (increasing index order): the transitive deps a
  // reachable by a path v -> ... -> a whose members' bytes fit in the room left at v's need
  // points and whose members' re-runs (at every need point) cost no more than the time bound;
  // `forbid` collects (v, x, u): u is a dep of a candidate x (or of v) that cannot join.
  std::vector<std::vector<int64_t>> anc(n);
  std::vector<std::tuple<int64_t, int64_t, int64_t>> forbid;
  {
    std::vector<double> dist(n), cost(n);
    for (int64_t v = 0; v < n; ++v) {
      if (w[v].needs.empty()) continue;  // never recomputed for itself: no closure
      double room = bound;
      for (int64_t t : w[v].needs) room = std::min(room, bound - constant[t]);
      const auto uses = static_cast<double>(w[v].needs.size());
      auto rerun = [&](int64_t a) { return uses * graph.ops[graph.values[a].producer].forward_time; };
      // Lightest path bytes and cheapest path time from v to every ancestor (deps point to lower
      // producers: a DAG).
      std::fill(dist.begin(), dist.end(), std::numeric_limits<double>::infinity());
      std::fill(cost.begin(), cost.end(), std::numeric_limits<double>::infinity());
      dist[v] = recompute_bytes(v);
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
          dist[u] = std::min(dist[u], dist[x] + recompute_bytes(u));
          cost[u] = std::min(cost[u], cost[x] + rerun(u));
        }
      auto fits = [&](int64_t a) { return dist[a] <= room && cost[a] <= time_bound; };
      for (int64_t a = 0; a < n; ++a)
        if (a != v && seen[a] && fits(a)) anc[v].push_back(a);
      std::vector<int64_t> members = anc[v];
      members.push_back(v);
      for (int64_t x : members) {
        if (x != v && !fits(x)) continue;
        for (int64_t u : graph.values[x].deps)
          if (!fits(u)) forbid.emplace_back(v, x, u);
      }
    }
  }

  std::unique_ptr<glp_prob, ProbDeleter> lp(glp_create_prob());
  glp_set_obj_dir(lp.get(), GLP_MIN);
  // Columns: k_i, s_i, r_i for every value, then n_{v,a}, then k'_i, s'_i (keep or stream on the
  // value's own window: Note [Auto planning ILP]) for the values some dependent widens, then
  // (min-peak) the peak T.
  auto col_k = [](int64_t i) { return static_cast<int>(3 * i + 1); };
  auto col_s = [](int64_t i) { return static_cast<int>(3 * i + 2); };
  auto col_r = [](int64_t i) { return static_cast<int>(3 * i + 3); };
  std::vector<std::vector<int>> ncol(n);  // ncol[v][j]: column of n_{v, anc[v][j]}
  int ncols = static_cast<int>(3 * n);
  for (int64_t v = 0; v < n; ++v)
    for (std::size_t j = 0; j < anc[v].size(); ++j) ncol[v].push_back(++ncols);
  std::vector<int> own_col(static_cast<std::size_t>(n), 0);  // k'_i; s'_i is the next column
  for (int64_t i = 0; i < n; ++i)
    if (!w[i].widened_by.empty()) {
      own_col[i] = ncols + 1;
      ncols += 2;
    }
  std::vector<int> slow_col(static_cast<std::size_t>(n), 0);  // p_i: placed in the slow tier (slow_ok values)
  for (int64_t i = 0; i < n; ++i)
    if (graph.values[i].slow_ok) slow_col[i] = ++ncols;
  const int col_peak = min_peak ? ++ncols : 0;
  if (ncols > 0) glp_add_cols(lp.get(), ncols);
  for (int64_t i = 0; i < n; ++i) {
    for (int c : {col_k(i), col_s(i), col_r(i)}) glp_set_col_kind(lp.get(), c, GLP_BV);
    if (own_col[i] > 0)
      for (int c : {own_col[i], own_col[i] + 1}) glp_set_col_kind(lp.get(), c, GLP_BV);
    if (slow_col[i] > 0) glp_set_col_kind(lp.get(), slow_col[i], GLP_BV);
  }
  for (int64_t v = 0; v < n; ++v)
    for (int c : ncol[v]) glp_set_col_bnds(lp.get(), c, GLP_DB, 0.0, 1.0);
  if (min_peak) glp_set_col_bnds(lp.get(), col_peak, GLP_LO, 0.0, 0.0);

  // n_{v,a} for a in {v} ∪ anc(v).
  auto n_col = [&](int64_t v, int64_t a) -> int {
    if (a == v) return col_r(v);
    auto it = std::lower_bound(anc[v].begin(), anc[v].end(), a);
    return ncol[v][static_cast<std::size_t>(it - anc[v].begin())];
  };

  // Objective, scaled so the largest coefficient is 1e3 (times may be tiny in seconds).
  std::vector<double> obj(static_cast<std::size_t>(ncols) + 1, 0.0);
  if (!min_peak) {
    for (int64_t i = 0; i < n; ++i) {
      obj[col_s(i)] = w[i].stream_cost;
      if (own_col[i] > 0) obj[own_col[i] + 1] = w[i].own.stream_cost;
      if (slow_col[i] > 0) obj[slow_col[i]] = slow_access_time(graph, graph.values[i]);
    }
    for (int64_t v = 0; v < n; ++v) {  // the closure re-runs at every need point of v
      const auto uses = static_cast<double>(w[v].needs.size());
      obj[col_r(v)] += uses * graph.ops[graph.values[v].producer].forward_time;
      for (int64_t a : anc[v]) obj[n_col(v, a)] += uses * graph.ops[graph.values[a].producer].forward_time;
    }
  } else {
    obj[col_peak] = 1.0;
  }
  double obj_max = 0.0;
  for (double c : obj) obj_max = std::max(obj_max, std::abs(c));
  const double obj_scale = obj_max > 0 ? 1e3 / obj_max : 1.0;
  for (int c = 1; c <= ncols; ++c) glp_set_obj_coef(lp.get(), c, obj[c] * obj_scale);

  std::vector<int> ia{0}, ja{0};
  std::vector<double> ar{0.0};
  std::vector<double> row_lo{0.0}, row_hi{0.0};  // per row; +-inf where the row has no such bound
  int row = 0;
  auto add_row = [&](int type, double lo, double hi) {
    glp_add_rows(lp.get(), 1);
    ++row;
    glp_set_row_bnds(lp.get(), row, type, lo, hi);
    constexpr double inf = std::numeric_limits<double>::infinity();
    row_lo.push_back(type == GLP_UP ? -inf : lo);
    row_hi.push_back(type == GLP_LO ? inf : hi);
  };
  auto put = [&](int c, double a) {
    ia.push_back(row);
    ja.push_back(c);
    ar.push_back(a);
  };

  for (int64_t i = 0; i < n; ++i) {  // k + s + r (+ k' + s') (+ p) = 1
    add_row(GLP_FX, 1.0, 1.0);
    put(col_k(i), 1.0);
    put(col_s(i), 1.0);
    put(col_r(i), 1.0);
    if (slow_col[i] > 0) put(slow_col[i], 1.0);
    if (own_col[i] == 0) continue;
    put(own_col[i], 1.0);
    put(own_col[i] + 1, 1.0);
    // The hull only when a dependent that widens it is recomputed: k + s - Σ r_w <= 0; the own
    // window only when none is: k' + s' + r_w <= 1 for each.
    add_row(GLP_UP, 0.0, 0.0);
    put(col_k(i), 1.0);
    put(col_s(i), 1.0);
    for (int64_t d : w[i].widened_by) put(col_r(d), -1.0);
    for (int64_t d : w[i].widened_by) {
      add_row(GLP_UP, 0.0, 1.0);
      put(own_col[i], 1.0);
      put(own_col[i] + 1, 1.0);
      put(col_r(d), 1.0);
    }
  }
  auto is_candidate = [&](int64_t v, int64_t a) { return a == v || std::binary_search(anc[v].begin(), anc[v].end(), a); };
  for (int64_t v = 0; v < n; ++v) {  // n_{v,u} - n_{v,w} - r_u >= -1
    if (w[v].needs.empty()) continue;
    std::vector<int64_t> ws = anc[v];
    ws.push_back(v);
    for (int64_t x : ws)
      for (int64_t u : graph.values[x].deps) {
        if (!is_candidate(v, u)) continue;  // in `forbid`
        add_row(GLP_LO, -1.0, 0.0);
        put(n_col(v, u), 1.0);
        put(n_col(v, x), -1.0);
        if (col_r(u) != n_col(v, u)) put(col_r(u), -1.0);
      }
  }
  for (const auto& [v, x, u] : forbid) {  // u cannot join C(v): n_{v,x} + r_u <= 1
    add_row(GLP_UP, 0.0, 1.0);
    put(n_col(v, x), 1.0);
    put(col_r(u), 1.0);
  }
  // Memory at every point: coefficients accumulated per column, constants apart.
  std::vector<std::vector<std::pair<int, double>>> terms(static_cast<std::size_t>(P));
  for (int64_t i = 0; i < n; ++i) {
    const PlanValue& v = graph.values[i];
    const auto b = static_cast<double>(v.bytes);
    // Placed in the slow tier, it is not resident even in its forward lifetime (in `constant`).
    if (slow_col[i] > 0 && v.bytes > 0)
      for (int64_t t = v.producer; t <= v.last_forward_use; ++t) terms[t].emplace_back(slow_col[i], -b);
    if (v.bytes > 0) {
      for (int64_t t = v.last_forward_use + 1; t <= w[i].last; ++t) terms[t].emplace_back(col_k(i), b);
      for (int64_t t = v.last_forward_use + 1; t <= w[i].evict_until; ++t) terms[t].emplace_back(col_s(i), b);
      for (int64_t t = w[i].stream_from; t <= w[i].last; ++t) terms[t].emplace_back(col_s(i), b);
      if (own_col[i] > 0) {
        const WindowSpan& o = w[i].own;
        for (int64_t t = v.last_forward_use + 1; t <= o.last; ++t) terms[t].emplace_back(own_col[i], b);
        for (int64_t t = v.last_forward_use + 1; t <= o.evict_until; ++t) terms[t].emplace_back(own_col[i] + 1, b);
        for (int64_t t = o.stream_from; t <= o.last; ++t) terms[t].emplace_back(own_col[i] + 1, b);
      }
    }
    for (int64_t t : w[i].needs) {
      if (recompute_bytes(i) > 0) terms[t].emplace_back(col_r(i), recompute_bytes(i));
      for (int64_t a : anc[i])
        if (recompute_bytes(a) > 0) terms[t].emplace_back(n_col(i, a), recompute_bytes(a));
    }
  }
  for (int64_t t = 0; t < P; ++t) {
    auto& tt = terms[t];
    std::sort(tt.begin(), tt.end());
    if (min_peak) add_row(GLP_UP, 0.0, -constant[t]);
    else add_row(GLP_UP, 0.0, static_cast<double>(budget_bytes) - constant[t]);
    for (std::size_t j = 0; j < tt.size();) {
      const int c = tt[j].first;
      double a = 0.0;
      for (; j < tt.size() && tt[j].first == c; ++j) a += tt[j].second;
      put(c, a);
    }
    if (min_peak) put(col_peak, -1.0);
  }
  if (ia.size() > 1) glp_load_matrix(lp.get(), static_cast<int>(ia.size()) - 1, ia.data(), ja.data(), ar.data());

  IlpResult result;
  result.num_columns = ncols;
  result.num_rows = row;
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  const double remaining = time_limit_seconds - elapsed();
  if (remaining <= 0) {
    result.seconds = elapsed();
    return result;  // TimedOut before solving
  }
  // Without GLPK's MIP presolver, so that the starts' columns are the problem's: the root LP is
  // solved here first, as glp_intopt then requires.
  // GLPK's scaling, initial basis and cut generators print even with GLP_MSG_OFF.
  struct TermOff {
    int saved = glp_term_out(GLP_OFF);
    ~TermOff() { glp_term_out(saved); }
  } term_off;
  bool presolve = false;
  glp_smcp sm;
  glp_init_smcp(&sm);
  sm.msg_lev = GLP_MSG_OFF;
  sm.tm_lim = static_cast<int>(std::clamp(remaining * 1e3, 1.0, 2.0e9));
  if (ncols > 0) {
    glp_scale_prob(lp.get(), GLP_SF_AUTO);  // rows in bytes, objective in scaled seconds
    glp_adv_basis(lp.get(), 0);
    const int sret = glp_simplex(lp.get(), &sm);
    if (sret == GLP_ETMLIM || elapsed() > time_limit_seconds) {
      result.seconds = elapsed();
      return result;
    }
    // A numerical failure of the root LP (GLP_EFAIL, seen once before scaling) falls back to
    // GLPK's MIP presolver, without the starts.
    presolve = sret != 0;
    if (!presolve && glp_get_status(lp.get()) == GLP_NOFEAS) {  // not even the relaxation fits
      result.seconds = elapsed();
      result.status = IlpStatus::Infeasible;
      return result;
    }
  }
  // Starting incumbents (Note [Auto planning ILP]): the feasible uniform plans and the greedy plan,
  // as full column vectors, each checked against every row before GLPK sees it.
  std::vector<std::vector<double>> starts;
  if (ncols > 0 && !presolve) {
    std::vector<std::vector<Decision>> candidates = uniform;
    if (!improved.empty()) candidates.push_back(improved);
    if (!min_peak)
      if (auto d = greedy_decisions(graph, budget_bytes)) candidates.push_back(std::move(*d));
    for (const auto& d : candidates) {
      if (auto x = start_columns(graph, d, ncols, col_peak, anc, n_col, own_col, slow_col, ia, ja, ar, row_lo, row_hi))
        starts.push_back(std::move(*x));
    }
  }
  // Note [Auto planning ILP]: exact for the minimum peak and on small graphs; beyond 16 values the
  // step-time ILP stops within 1 % of its bound on the extra time, or within 0.2 % of the step's
  // compute time of it (an incumbent that close is as good as optimal for a plan of a measured step).
  const bool gap = !min_peak && graph.values.size() > 16;
  double base_time = 0.0;
  for (int64_t t = 0; t < P; ++t) base_time += graph.point_time(t);
  struct Starts {
    const std::vector<std::vector<double>>* columns;
    double abs_gap = 0.0;  // in the objective's scaled units; 0: none
    bool given = false, stopped = false;
  } start_info{&starts, gap ? 0.002 * base_time * obj_scale : 0.0};
  glp_iocp parm;
  glp_init_iocp(&parm);
  parm.presolve = presolve ? GLP_ON : GLP_OFF;
  parm.msg_lev = GLP_MSG_OFF;
  parm.cb_info = &start_info;
  if (!presolve) parm.cb_func = [](glp_tree* tree, void* info) {
    auto* si = static_cast<Starts*>(info);
    const int reason = glp_ios_reason(tree);
    if (reason == GLP_IHEUR && !si->given) {
      si->given = true;
      for (const auto& x : *si->columns) glp_ios_heur_sol(tree, x.data());  // keeps the best
    } else if ((reason == GLP_ISELECT || reason == GLP_IBINGO) && si->abs_gap > 0) {
      glp_prob* mip = glp_ios_get_prob(tree);
      const int best = glp_ios_best_node(tree);
      if (glp_mip_status(mip) == GLP_FEAS && best != 0 &&
          glp_mip_obj_val(mip) - glp_ios_node_bound(tree, best) <= si->abs_gap) {
        si->stopped = true;
        glp_ios_terminate(tree);
      }
    }
  };
  parm.mip_gap = gap ? 0.01 : 0.0;
  // Cover and mixed-integer rounding cuts: the per-point budget rows are knapsacks; without them
  // GLPK's branch and bound did not close op-level and MLP plans in 10 s once streams cost CPU
  // time (Note [Auto planning ILP]); with them those solve in tens of milliseconds.
  parm.cov_cuts = GLP_ON;
  parm.mir_cuts = GLP_ON;
  parm.tm_lim = static_cast<int>(std::clamp((time_limit_seconds - elapsed()) * 1e3, 1.0, 2.0e9));
  const int ret = ncols == 0 ? 0 : glp_intopt(lp.get(), &parm);
  result.seconds = elapsed();
  auto read_decisions = [&] {
    result.decisions.resize(static_cast<std::size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      const bool own_stream = own_col[i] > 0 && glp_mip_col_val(lp.get(), own_col[i] + 1) > 0.5;
      if (slow_col[i] > 0 && glp_mip_col_val(lp.get(), slow_col[i]) > 0.5) result.decisions[i] = Decision::Slow;
      else if (own_stream || glp_mip_col_val(lp.get(), col_s(i)) > 0.5) result.decisions[i] = Decision::Stream;
      else if (glp_mip_col_val(lp.get(), col_r(i)) > 0.5) result.decisions[i] = Decision::Recompute;
      else result.decisions[i] = Decision::Keep;
    }
    const Evaluation e = evaluate(graph, result.decisions);
    result.objective = min_peak ? static_cast<double>(e.peak_bytes) : e.step_time;
  };
  if (ret == GLP_ETMLIM || result.seconds > time_limit_seconds) {
    // Timed out: the best assignment found so far (at least as good as the starts), if any.
    if (ncols > 0 && (ret == 0 || ret == GLP_ETMLIM) && glp_mip_status(lp.get()) == GLP_FEAS) read_decisions();
    return result;
  }
  const int status = ncols == 0 ? GLP_OPT : glp_mip_status(lp.get());
  if (ret == GLP_ENOPFS || ret == GLP_ENODFS || status == GLP_NOFEAS) {
    result.status = IlpStatus::Infeasible;
    return result;
  }
  if (ncols == 0) {  // no saved values: feasible iff the constants fit
    bool fits = true;
    for (int64_t t = 0; t < P; ++t) fits = fits && constant[t] <= static_cast<double>(budget_bytes);
    result.status = fits || min_peak ? IlpStatus::Optimal : IlpStatus::Infeasible;
    return result;
  }
  STRATA_CHECK((ret == 0 && status == GLP_OPT) ||
                   (gap && (ret == GLP_EMIPGAP || (ret == GLP_ESTOP && start_info.stopped)) && status == GLP_FEAS),
               "solve_plan_ilp: GLPK failed (glp_intopt returned ", ret,
               ", MIP status ", status, ")");
  result.status = IlpStatus::Optimal;
  read_decisions();
  return result;
}

}  // namespace

IlpResult solve_plan_ilp(const PlanGraph& graph, std::size_t budget_bytes, double time_limit_seconds) {
  return solve(graph, budget_bytes, time_limit_seconds, false);
}

IlpResult solve_min_peak_ilp(const PlanGraph& graph, double time_limit_seconds) {
  return solve(graph, 0, time_limit_seconds, true);
}

}  // namespace strata::remat
