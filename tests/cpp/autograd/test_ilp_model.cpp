// The Auto planner's ILP as data (autograd/remat/detail/ilp_model.h), without GLPK: the columns,
// objective, rows and matrix of Note [Auto planning ILP] for tiny hand-built graphs, and the
// starting incumbents checked against them.

#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "autograd/remat/detail/ilp_model.h"
#include "autograd/remat/ilp.h"
#include "tests/cpp/autograd/plan_graphs.h"

namespace strata_test {
namespace {

using namespace strata;
using remat::Decision;
using remat::detail::IlpColumnKind;
using remat::detail::IlpModel;
using remat::detail::IlpRowKind;

// Row r of the model as column -> coefficient.
std::map<int, double> row(const IlpModel& m, int r) {
  std::map<int, double> out;
  for (std::size_t e = 1; e < m.ia.size(); ++e)
    if (m.ia[e] == r) out[m.ja[e]] += m.ar[e];
  return out;
}

// three_ops (plan_graphs.h): x1's recompute reads x0 at point 3, outside x0's own window {4}, so
// x1 widens x0's window and x0 has own-window columns.
// The min-peak variant prunes closures by bytes only (its time bound is infinite): with the best
// uniform peak (30 B, the forward's constant at points 1 and 2) as the bound, x0 fits in x1's
// closure at x1's need point 3 (20 + 10 B).
TEST(IlpModel, ColumnsOfThreeOps) {
  const remat::PlanGraph g = three_ops();
  const IlpModel m = remat::detail::build_ilp_model(g, 0, true);
  // k, s, r for x0 (1..3) and x1 (4..6); n_{1,0} is 7; x0's own-window k', s' are 8, 9; no slow_ok
  // value; the peak T is 10.
  EXPECT_EQ(m.windows[0].widened_by, (std::vector<int64_t>{1}));
  EXPECT_TRUE(m.windows[1].widened_by.empty());
  EXPECT_TRUE(m.anc[0].empty());
  EXPECT_EQ(m.anc[1], (std::vector<int64_t>{0}));
  EXPECT_TRUE(m.forbid.empty());
  EXPECT_EQ(m.num_columns, 10);
  EXPECT_EQ(m.n_col(1, 0), 7);
  EXPECT_EQ(m.n_col(1, 1), IlpModel::col_r(1));
  EXPECT_EQ(m.own_col, (std::vector<int>{8, 0}));
  EXPECT_EQ(m.slow_col, (std::vector<int>{0, 0}));
  EXPECT_EQ(m.col_peak, 10);
  for (int c = 1; c <= 9; ++c) EXPECT_EQ(m.column_kind[c], c == 7 ? IlpColumnKind::Unit : IlpColumnKind::Binary) << c;
  EXPECT_EQ(m.column_kind[10], IlpColumnKind::NonNegative);
  EXPECT_DOUBLE_EQ(m.objective[10], 1e3);  // T alone, scaled to 1e3
  for (int c = 1; c < 10; ++c) EXPECT_DOUBLE_EQ(m.objective[c], 0.0);
  EXPECT_TRUE(m.improved.empty());
}

TEST(IlpModel, RowsOfThreeOps) {
  const remat::PlanGraph g = three_ops();
  const IlpModel m = remat::detail::build_ilp_model(g, 0, true);
  // x0: choice, hull-only-if-x1-recomputed, own-only-if-not; x1: choice; x1's closure; 6 points.
  ASSERT_EQ(m.num_rows(), 3 + 1 + 1 + 6);
  using Row = std::map<int, double>;
  EXPECT_EQ(m.row_kind[1], IlpRowKind::Fixed);
  EXPECT_EQ(row(m, 1), (Row{{1, 1}, {2, 1}, {3, 1}, {8, 1}, {9, 1}}));  // k0+s0+r0+k'0+s'0 = 1
  EXPECT_EQ(m.row_kind[2], IlpRowKind::Upper);
  EXPECT_EQ(row(m, 2), (Row{{1, 1}, {2, 1}, {6, -1}}));  // k0 + s0 - r1 <= 0
  EXPECT_DOUBLE_EQ(m.row_hi[2], 0.0);
  EXPECT_EQ(row(m, 3), (Row{{8, 1}, {9, 1}, {6, 1}}));  // k'0 + s'0 + r1 <= 1
  EXPECT_DOUBLE_EQ(m.row_hi[3], 1.0);
  EXPECT_EQ(row(m, 4), (Row{{4, 1}, {5, 1}, {6, 1}}));  // k1 + s1 + r1 = 1
  EXPECT_DOUBLE_EQ(m.row_lo[4], 1.0);
  EXPECT_DOUBLE_EQ(m.row_hi[4], 1.0);
  // n_{1,0} - n_{1,1} - r0 >= -1 (x0 is re-run when x1 is, unless x0 is kept or streamed).
  EXPECT_EQ(m.row_kind[5], IlpRowKind::Lower);
  EXPECT_EQ(row(m, 5), (Row{{7, 1}, {6, -1}, {3, -1}}));
  EXPECT_DOUBLE_EQ(m.row_lo[5], -1.0);
  EXPECT_TRUE(std::isinf(m.row_hi[5]));
  // Memory rows, Σ - T <= -const_t: the constants are the forward lifetimes (x0 on 0..1, x1 on 1..2).
  EXPECT_EQ(m.constant, (std::vector<double>{10, 30, 20, 0, 0, 0}));
  // Per point, from the windows: kept x0 on its hull 2..4 (x1's recompute reads it at 3), kept on
  // its own window at 4; x1 kept at 3; recomputed x0 at its need 4 (10 B), recomputed x1 at 3
  // (20 B, plus 10 B when x0 joins its closure).
  const remat::ValueWindow& w0 = m.windows[0];
  const remat::ValueWindow& w1 = m.windows[1];
  ASSERT_EQ(w0.first, 3);
  ASSERT_EQ(w0.last, 4);
  ASSERT_EQ(w0.own.last, 4);
  ASSERT_EQ(w1.last, 3);
  for (int t = 0; t < 6; ++t) {
    EXPECT_EQ(m.row_kind[6 + t], IlpRowKind::Upper);
    EXPECT_DOUBLE_EQ(m.row_hi[6 + t], -m.constant[t]) << t;
    Row want{{10, -1.0}};
    auto add = [&](int c, double b) { want[c] += b; };
    if (t >= 2 && t <= w0.last) add(1, 10);                                                    // k0
    if ((t >= 2 && t <= w0.evict_until) || (t >= w0.stream_from && t <= w0.last)) add(2, 10);  // s0
    if (t >= 2 && t <= w0.own.last) add(8, 10);                                                // k'0
    if ((t >= 2 && t <= w0.own.evict_until) || (t >= w0.own.stream_from && t <= w0.own.last)) add(9, 10);
    if (t >= 3 && t <= w1.last) add(4, 20);  // k1
    if ((t >= 3 && t <= w1.evict_until) || (t >= w1.stream_from && t <= w1.last)) add(5, 20);
    if (t == 4) add(3, 10);  // r0 at x0's need point
    if (t == 3) add(6, 20), add(7, 10);
    EXPECT_EQ(row(m, 6 + t), want) << "point " << t;
  }
}

// The step-time variant: with everything fitting, keep-all costs no extra time, so no closure
// member can pay for itself (Note [Auto planning ILP]: pruning): x0 is forbidden in x1's closure.
TEST(IlpModel, StepTimeObjectiveAndPruning) {
  const remat::PlanGraph g = three_ops();
  const IlpModel m = remat::detail::build_ilp_model(g, 1000, false);
  EXPECT_TRUE(m.anc[1].empty());
  ASSERT_EQ(m.forbid.size(), 1u);
  EXPECT_EQ(m.forbid[0], std::make_tuple(int64_t{1}, int64_t{1}, int64_t{0}));
  EXPECT_EQ(m.num_columns, 8);  // k, s, r of two values; x0's k', s' (7, 8); no n, no T
  EXPECT_EQ(m.own_col, (std::vector<int>{7, 0}));
  EXPECT_EQ(m.improved, (std::vector<Decision>{Decision::Keep, Decision::Keep}));
  // The forbidden pair is one row, r1 + r0 <= 1; no closure row.
  ASSERT_EQ(m.num_rows(), 3 + 1 + 1 + 6);
  EXPECT_EQ(row(m, 5), (std::map<int, double>{{6, 1}, {3, 1}}));
  EXPECT_DOUBLE_EQ(m.row_hi[5], 1.0);
  for (int t = 0; t < 6; ++t) EXPECT_DOUBLE_EQ(m.row_hi[6 + t], 1000.0 - m.constant[t]) << t;
  // Objective (scaled): s_i its stream cost, s'_0 its own one, r_v the producer's forward time per
  // need point: r0 = A = 1, r1 = B = 2.
  const double scale = m.objective_scale;
  EXPECT_DOUBLE_EQ(m.objective[IlpModel::col_k(0)], 0.0);
  EXPECT_DOUBLE_EQ(m.objective[IlpModel::col_s(0)], m.windows[0].stream_cost * scale);
  EXPECT_DOUBLE_EQ(m.objective[8], m.windows[0].own.stream_cost * scale);
  EXPECT_DOUBLE_EQ(m.objective[IlpModel::col_s(1)], m.windows[1].stream_cost * scale);
  EXPECT_DOUBLE_EQ(m.objective[IlpModel::col_r(0)], 1.0 * scale);
  EXPECT_DOUBLE_EQ(m.objective[IlpModel::col_r(1)], 2.0 * scale);
  double largest = 0.0;
  for (double c : m.objective) largest = std::max(largest, std::abs(c));
  EXPECT_DOUBLE_EQ(largest, 1e3);
}

TEST(IlpModel, StartColumnsOfUniformPlans) {
  const remat::PlanGraph g = three_ops();
  const IlpModel m = remat::detail::build_ilp_model(g, 0, true);
  // Keep-all: x1 is not recomputed, so x0 uses its own window (k'0), x1 its k; T is the plan's peak.
  const std::vector<Decision> kk{Decision::Keep, Decision::Keep};
  auto keep = remat::detail::start_columns(m, g, kk);
  ASSERT_TRUE(keep.has_value());
  std::vector<double> want(11, 0.0);
  want[8] = want[4] = 1.0;
  want[10] = static_cast<double>(remat::evaluate(g, kk).peak_bytes);
  EXPECT_EQ(*keep, want);
  // Recompute-all: r0, r1, and x0 in x1's closure.
  const std::vector<Decision> rr{Decision::Recompute, Decision::Recompute};
  auto rec = remat::detail::start_columns(m, g, rr);
  ASSERT_TRUE(rec.has_value());
  want.assign(11, 0.0);
  want[3] = want[6] = want[7] = 1.0;
  want[10] = static_cast<double>(remat::evaluate(g, rr).peak_bytes);
  EXPECT_EQ(*rec, want);
  // Keep x0, recompute x1: x0 on its hull (k0), not re-run in x1's closure.
  const std::vector<Decision> kr{Decision::Keep, Decision::Recompute};
  auto kept = remat::detail::start_columns(m, g, kr);
  ASSERT_TRUE(kept.has_value());
  want.assign(11, 0.0);
  want[1] = want[6] = 1.0;
  want[10] = static_cast<double>(remat::evaluate(g, kr).peak_bytes);
  EXPECT_EQ(*kept, want);
  // Slow for a value that is not slow_ok: not a solution.
  EXPECT_FALSE(remat::detail::start_columns(m, g, {Decision::Slow, Decision::Keep}).has_value());
}

TEST(IlpModel, StartColumnsOverTheBudgetAreRejected) {
  remat::PlanGraph g = three_ops();
  g.ops[2].backward_workspace_bytes = 15;  // at C' (point 3), where x1 is needed
  // Keep-all holds x0 (kept from 2 to 4) and x1 at 3: 15 + 10 + 20 = 45 B. Recomputing x0 (at 4)
  // leaves 15 + 20 = 35 B there.
  const std::vector<Decision> kk{Decision::Keep, Decision::Keep}, rk{Decision::Recompute, Decision::Keep};
  EXPECT_EQ(remat::evaluate(g, kk).peak_bytes, 45u);
  EXPECT_EQ(remat::evaluate(g, rk).peak_bytes, 35u);
  const IlpModel m = remat::detail::build_ilp_model(g, 40, false);
  EXPECT_DOUBLE_EQ(m.row_hi[m.num_rows() - 6 + 1 + 3], 40.0 - 15.0);
  EXPECT_FALSE(remat::detail::start_columns(m, g, kk).has_value());
  EXPECT_TRUE(remat::detail::start_columns(m, g, rk).has_value());
  // x0 joining x1's closure needs 20 + 10 B in the 25 B left at point 3: pruned, and forbidden.
  EXPECT_TRUE(m.anc[1].empty());
  ASSERT_EQ(m.forbid.size(), 1u);
  EXPECT_EQ(m.forbid[0], std::make_tuple(int64_t{1}, int64_t{1}, int64_t{0}));
  EXPECT_FALSE(remat::detail::start_columns(m, g, {Decision::Recompute, Decision::Recompute}).has_value());
}

TEST(IlpModel, SlowOkValueGetsAPlacementColumn) {
  remat::PlanGraph g = three_ops();
  g.values[1].slow_ok = true;
  const IlpModel m = remat::detail::build_ilp_model(g, 1000, false);
  // k, s, r of two values, x0's k', s' (7, 8), then p1.
  EXPECT_EQ(m.slow_col, (std::vector<int>{0, 9}));
  EXPECT_EQ(m.num_columns, 9);
  EXPECT_EQ(row(m, 4).at(9), 1.0);  // in x1's choice row
  // Placed in the slow tier, x1 is not resident in its forward lifetime 1..2 either.
  const int first_memory_row = m.num_rows() - 6 + 1;
  for (int t = 0; t < 6; ++t) {
    const auto r = row(m, first_memory_row + t);
    if (t == 1 || t == 2)
      EXPECT_DOUBLE_EQ(r.at(9), -20.0) << t;
    else
      EXPECT_EQ(r.count(9), 0u) << t;
  }
  EXPECT_DOUBLE_EQ(m.objective[9], remat::slow_access_time(g, g.values[1]) * m.objective_scale);
  auto slow = remat::detail::start_columns(m, g, {Decision::Keep, Decision::Slow});
  ASSERT_TRUE(slow.has_value());
  EXPECT_EQ((*slow)[9], 1.0);
}

TEST(IlpModel, TheSolverAgreesWithTheModelSize) {
  const remat::PlanGraph g = three_ops();
  const IlpModel m = remat::detail::build_ilp_model(g, 1000, false);
  const remat::IlpResult r = remat::solve_plan_ilp(g, 1000, 10.0);
  EXPECT_EQ(r.num_columns, m.num_columns);
  EXPECT_EQ(r.num_rows, m.num_rows());
  EXPECT_EQ(r.status, remat::IlpStatus::Optimal);
  // Everything fits: the optimum costs no time beyond the steps' own (keep-all's).
  EXPECT_DOUBLE_EQ(r.objective, remat::evaluate(g, {Decision::Keep, Decision::Keep}).step_time);
}

}  // namespace
}  // namespace strata_test
