#include "autograd/remat/ilp.h"

#include <glpk.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>

#include "autograd/remat/detail/ilp_model.h"
#include "core/error.h"

namespace strata::remat {

namespace {

struct ProbDeleter {
  void operator()(glp_prob* p) const { glp_delete_prob(p); }
};
using Problem = std::unique_ptr<glp_prob, ProbDeleter>;

// The model as a GLPK problem (columns, objective, rows, matrix as built).
Problem load_problem(const detail::IlpModel& model) {
  Problem lp(glp_create_prob());
  glp_set_obj_dir(lp.get(), GLP_MIN);
  if (model.num_columns > 0) glp_add_cols(lp.get(), model.num_columns);
  for (int c = 1; c <= model.num_columns; ++c) {
    switch (model.column_kind[c]) {
      case detail::IlpColumnKind::Binary: glp_set_col_kind(lp.get(), c, GLP_BV); break;
      case detail::IlpColumnKind::Unit: glp_set_col_bnds(lp.get(), c, GLP_DB, 0.0, 1.0); break;
      case detail::IlpColumnKind::NonNegative: glp_set_col_bnds(lp.get(), c, GLP_LO, 0.0, 0.0); break;
    }
    glp_set_obj_coef(lp.get(), c, model.objective[c]);
  }
  if (model.num_rows() > 0) glp_add_rows(lp.get(), model.num_rows());
  for (int r = 1; r <= model.num_rows(); ++r) {
    const detail::IlpRowKind kind = model.row_kind[r];
    const int type = kind == detail::IlpRowKind::Fixed ? GLP_FX : kind == detail::IlpRowKind::Upper ? GLP_UP : GLP_LO;
    glp_set_row_bnds(lp.get(), r, type, model.glpk_lo[r], model.glpk_hi[r]);
  }
  if (model.ia.size() > 1)
    glp_load_matrix(lp.get(), static_cast<int>(model.ia.size()) - 1, model.ia.data(), model.ja.data(), model.ar.data());
  return lp;
}

// One call of the solver: the clock it runs against and what it reports.
struct SolveCall {
  const PlanGraph& graph;
  const detail::IlpModel& model;
  std::size_t budget_bytes;
  double time_limit_seconds;
  std::chrono::steady_clock::time_point t0;
  double elapsed() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); }
};

// GLPK's scaling, initial basis and cut generators print even with GLP_MSG_OFF.
struct TermOff {
  int saved = glp_term_out(GLP_OFF);
  ~TermOff() { glp_term_out(saved); }
};

enum class RootLp { Solved, NumericalFailure, TimedOut, Infeasible };

// The root LP, solved here first (without GLPK's MIP presolver, so that the starts' columns are the
// problem's, glp_intopt requires it). A numerical failure (GLP_EFAIL, seen once before scaling)
// falls back to GLPK's MIP presolver, without the starts.
RootLp solve_root_lp(const SolveCall& call, glp_prob* lp) {
  if (call.model.num_columns == 0) return RootLp::Solved;
  glp_smcp sm;
  glp_init_smcp(&sm);
  sm.msg_lev = GLP_MSG_OFF;
  sm.tm_lim = static_cast<int>(std::clamp((call.time_limit_seconds - call.elapsed()) * 1e3, 1.0, 2.0e9));
  glp_scale_prob(lp, GLP_SF_AUTO);  // rows in bytes, objective in scaled seconds
  glp_adv_basis(lp, 0);
  const int sret = glp_simplex(lp, &sm);
  if (sret == GLP_ETMLIM || call.elapsed() > call.time_limit_seconds) return RootLp::TimedOut;
  if (sret != 0) return RootLp::NumericalFailure;
  if (glp_get_status(lp) == GLP_NOFEAS) return RootLp::Infeasible;  // not even the relaxation fits
  return RootLp::Solved;
}

// Starting incumbents (Note [Auto planning ILP]): the uniform plans, the improved one and the greedy
// plan, as full column vectors, each checked against every row before GLPK sees it.
std::vector<std::vector<double>> start_incumbents(const SolveCall& call) {
  std::vector<std::vector<Decision>> candidates = call.model.uniform;
  if (!call.model.improved.empty()) candidates.push_back(call.model.improved);
  if (!call.model.min_peak)
    if (auto d = greedy_decisions(call.graph, call.budget_bytes)) candidates.push_back(std::move(*d));
  std::vector<std::vector<double>> starts;
  for (const auto& d : candidates)
    if (auto x = detail::start_columns(call.model, call.graph, d)) starts.push_back(std::move(*x));
  return starts;
}

// What GLPK's callback sees: the starts to give at the root, and the absolute stop.
struct Starts {
  const std::vector<std::vector<double>>* columns;
  double abs_gap = 0.0;  // in the objective's scaled units; 0: none
  bool given = false, stopped = false;
};

void intopt_callback(glp_tree* tree, void* info) {
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
}

// Whether the step-time ILP may stop short of optimality (Note [Auto planning ILP]): exact for the
// minimum peak and on small graphs; beyond 16 values it stops within 1 % of its bound on the extra
// time, or within 0.2 % of the step's compute time of it (an incumbent that close is as good as
// optimal for a plan of a measured step).
bool with_gap(const SolveCall& call) { return !call.model.min_peak && call.graph.values.size() > 16; }

// Branch and bound from the root LP (or GLPK's presolver), given the starts; glp_intopt's return.
int run_intopt(const SolveCall& call, glp_prob* lp, bool presolve, Starts& start_info) {
  if (call.model.num_columns == 0) return 0;
  double base_time = 0.0;
  for (int64_t t = 0; t < call.graph.num_points(); ++t) base_time += call.graph.point_time(t);
  start_info.abs_gap = with_gap(call) ? 0.002 * base_time * call.model.objective_scale : 0.0;
  glp_iocp parm;
  glp_init_iocp(&parm);
  parm.presolve = presolve ? GLP_ON : GLP_OFF;
  parm.msg_lev = GLP_MSG_OFF;
  parm.cb_info = &start_info;
  if (!presolve) parm.cb_func = intopt_callback;
  parm.mip_gap = with_gap(call) ? 0.01 : 0.0;
  // Cover and mixed-integer rounding cuts: the per-point budget rows are knapsacks; without them
  // GLPK's branch and bound did not close op-level and MLP plans in 10 s once streams cost CPU
  // time (Note [Auto planning ILP]); with them those solve in tens of milliseconds.
  parm.cov_cuts = GLP_ON;
  parm.mir_cuts = GLP_ON;
  parm.tm_lim = static_cast<int>(std::clamp((call.time_limit_seconds - call.elapsed()) * 1e3, 1.0, 2.0e9));
  return glp_intopt(lp, &parm);
}

// The decisions of GLPK's MIP solution (or incumbent) and their evaluation.
void read_decisions(const SolveCall& call, glp_prob* lp, IlpResult& result) {
  const detail::IlpModel& m = call.model;
  const auto n = static_cast<int64_t>(call.graph.values.size());
  result.decisions.resize(static_cast<std::size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const bool own_stream = m.own_col[i] > 0 && glp_mip_col_val(lp, m.own_col[i] + 1) > 0.5;
    if (m.slow_col[i] > 0 && glp_mip_col_val(lp, m.slow_col[i]) > 0.5)
      result.decisions[i] = Decision::Slow;
    else if (own_stream || glp_mip_col_val(lp, detail::IlpModel::col_s(i)) > 0.5)
      result.decisions[i] = Decision::Stream;
    else if (glp_mip_col_val(lp, detail::IlpModel::col_r(i)) > 0.5)
      result.decisions[i] = Decision::Recompute;
    else
      result.decisions[i] = Decision::Keep;
  }
  const Evaluation e = evaluate(call.graph, result.decisions);
  result.objective = m.min_peak ? static_cast<double>(e.peak_bytes) : e.step_time;
}

// The result of glp_intopt's return `ret` (Note [Auto planning ILP]: timed out, infeasible,
// optimal or within the gap).
void finish(const SolveCall& call, glp_prob* lp, int ret, const Starts& start_info, IlpResult& result) {
  const int ncols = call.model.num_columns;
  if (ret == GLP_ETMLIM || result.seconds > call.time_limit_seconds) {
    // Timed out: the best assignment found so far (at least as good as the starts), if any.
    if (ncols > 0 && (ret == 0 || ret == GLP_ETMLIM) && glp_mip_status(lp) == GLP_FEAS)
      read_decisions(call, lp, result);
    return;
  }
  const int status = ncols == 0 ? GLP_OPT : glp_mip_status(lp);
  if (ret == GLP_ENOPFS || ret == GLP_ENODFS || status == GLP_NOFEAS) {
    result.status = IlpStatus::Infeasible;
    return;
  }
  if (ncols == 0) {  // no saved values: feasible iff the constants fit
    bool fits = true;
    for (double c : call.model.constant) fits = fits && c <= static_cast<double>(call.budget_bytes);
    result.status = fits || call.model.min_peak ? IlpStatus::Optimal : IlpStatus::Infeasible;
    return;
  }
  const bool gap = with_gap(call);
  STRATA_CHECK((ret == 0 && status == GLP_OPT) ||
                   (gap && (ret == GLP_EMIPGAP || (ret == GLP_ESTOP && start_info.stopped)) && status == GLP_FEAS),
               "solve_plan_ilp: GLPK failed (glp_intopt returned ", ret, ", MIP status ", status, ")");
  result.status = IlpStatus::Optimal;
  read_decisions(call, lp, result);
}

// The solver call on a built model: the root LP, the starts, branch and bound, the result.
IlpResult solve_model(const SolveCall& call) {
  IlpResult result;
  result.num_columns = call.model.num_columns;
  result.num_rows = call.model.num_rows();
  Problem lp = load_problem(call.model);
  if (call.time_limit_seconds - call.elapsed() <= 0) {
    result.seconds = call.elapsed();
    return result;  // TimedOut before solving
  }
  TermOff term_off;
  const RootLp root = solve_root_lp(call, lp.get());
  if (root == RootLp::TimedOut || root == RootLp::Infeasible) {
    result.seconds = call.elapsed();
    if (root == RootLp::Infeasible) result.status = IlpStatus::Infeasible;
    return result;
  }
  const bool presolve = root == RootLp::NumericalFailure;
  std::vector<std::vector<double>> starts;
  if (call.model.num_columns > 0 && !presolve) starts = start_incumbents(call);
  Starts start_info{&starts};
  const int ret = run_intopt(call, lp.get(), presolve, start_info);
  result.seconds = call.elapsed();
  finish(call, lp.get(), ret, start_info, result);
  return result;
}

// Builds and solves Note [Auto planning ILP]; min_peak selects the min-peak variant.
IlpResult solve(const PlanGraph& graph, std::size_t budget_bytes, double time_limit_seconds, bool min_peak) {
  graph.validate();
  STRATA_CHECK(std::isfinite(time_limit_seconds) && time_limit_seconds > 0, "solve_plan_ilp: time limit ",
               time_limit_seconds, " s; expected a positive number of seconds");
  const auto t0 = std::chrono::steady_clock::now();
  const detail::IlpModel model = detail::build_ilp_model(graph, budget_bytes, min_peak);
  return solve_model(SolveCall{graph, model, budget_bytes, time_limit_seconds, t0});
}

}  // namespace

IlpResult solve_plan_ilp(const PlanGraph& graph, std::size_t budget_bytes, double time_limit_seconds) {
  return solve(graph, budget_bytes, time_limit_seconds, false);
}

IlpResult solve_min_peak_ilp(const PlanGraph& graph, double time_limit_seconds) {
  return solve(graph, 0, time_limit_seconds, true);
}

}  // namespace strata::remat
