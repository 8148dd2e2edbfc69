// The Auto planner: the cost model by hand, the ILP against the exhaustive oracle on random DAGs,
// the greedy fallback, the plan cache, infeasible budgets, explain, and bad inputs.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <random>

#include "autograd/remat/ilp.h"
#include "autograd/remat/planner.h"
#include "autograd/remat/profile.h"
#include "tests/cpp/autograd/plan_graphs.h"
#include "tests/cpp/core/test_util.h"

namespace strata_test {
namespace {

using namespace strata;
using remat::Decision;
using ::testing::HasSubstr;

TEST(Planner, CostModelByHand) {
  const remat::PlanGraph g = three_ops();
  // Points: 0 A, 1 B, 2 C (forward); 3 C', 4 B', 5 A' (backward). Base time 1+2+3+2+4+6 = 18.
  const auto w = remat::value_windows(g);
  EXPECT_EQ(w[0].need, 4);
  EXPECT_EQ(w[0].first, 3);  // x1's recompute may read x0 at point 3
  EXPECT_EQ(w[0].last, 4);
  EXPECT_DOUBLE_EQ(w[0].move_time, 2.0);
  EXPECT_DOUBLE_EQ(w[0].overlap_window, 3.0);  // C's forward
  EXPECT_DOUBLE_EQ(w[0].stream_cost, 0.0);
  EXPECT_EQ(w[0].stream_from, 2);
  EXPECT_DOUBLE_EQ(w[1].stream_cost, 4.0);  // nothing to overlap with
  EXPECT_EQ(w[1].stream_from, 3);

  auto keep = remat::evaluate(g, {Decision::Keep, Decision::Keep});
  EXPECT_EQ(keep.point_bytes, (std::vector<std::size_t>{10, 30, 30, 30, 10, 0}));
  EXPECT_DOUBLE_EQ(keep.step_time, 18.0);
  EXPECT_EQ(keep.peak_bytes, 30u);

  auto rr = remat::evaluate(g, {Decision::Recompute, Decision::Recompute});
  // x0 is freed after B; at C' the closure {x1, x0} is re-run (B then A); at B', x0 alone again.
  EXPECT_EQ(rr.point_bytes, (std::vector<std::size_t>{10, 30, 20, 30, 10, 0}));
  EXPECT_DOUBLE_EQ(rr.recompute_time, 2.0 + 1.0 + 1.0);
  EXPECT_DOUBLE_EQ(rr.step_time, 22.0);

  auto sr = remat::evaluate(g, {Decision::Stream, Decision::Recompute});
  EXPECT_EQ(sr.point_bytes, (std::vector<std::size_t>{10, 30, 30, 30, 10, 0}));
  EXPECT_DOUBLE_EQ(sr.recompute_time, 2.0);  // x0 is streamed back in: only B re-runs
  EXPECT_DOUBLE_EQ(sr.move_time, 0.0);
  EXPECT_DOUBLE_EQ(sr.step_time, 20.0);

  auto ks = remat::evaluate(g, {Decision::Keep, Decision::Stream});
  EXPECT_DOUBLE_EQ(ks.move_time, 4.0);
  EXPECT_DOUBLE_EQ(ks.step_time, 22.0);
}

// A random DAG: integral times and bytes, bandwidth 4 bytes per unit, so every cost is exact.
remat::PlanGraph random_graph(std::mt19937& rng, int n_values) {
  auto uni = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  remat::PlanGraph g;
  const int m = n_values + uni(0, 3);
  for (int k = 0; k < m; ++k)
    g.ops.push_back({"op" + std::to_string(k),
                     "op" + std::to_string(k),
                     double(uni(1, 20)),
                     double(uni(1, 40)),
                     std::size_t(uni(0, 3) == 0 ? uni(0, 30) : 0),
                     {}});
  std::vector<int> producers;
  for (int k = 0; k < m; ++k) producers.push_back(k);
  std::shuffle(producers.begin(), producers.end(), rng);
  producers.resize(n_values);
  std::sort(producers.begin(), producers.end());
  for (int i = 0; i < n_values; ++i) {
    remat::PlanValue v;
    v.name = "v" + std::to_string(i);
    v.bytes = std::size_t(uni(1, 100));
    v.producer = producers[i];
    v.last_forward_use = std::min<int64_t>(m - 1, v.producer + uni(0, 3));
    v.backward_use = uni(int(v.producer), int(v.last_forward_use));
    for (int j = 0; j < i; ++j)
      if (producers[j] < v.producer && uni(0, 2) == 0) v.deps.push_back(j);
    g.values.push_back(v);
  }
  g.bandwidth = {4.0, 4.0};
  return g;
}

TEST(Planner, IlpEqualsExhaustiveOracleOnRandomDags) {
  std::mt19937 rng(8);
  int compared = 0, infeasible = 0;
  for (int trial = 0; trial < 120; ++trial) {
    const int n = 1 + trial % 9;
    const remat::PlanGraph g = random_graph(rng, n);
    const std::size_t hi = remat::evaluate(g, std::vector<Decision>(n, Decision::Keep)).peak_bytes;
    const std::size_t lo = remat::minimum_budget(g);
    for (double f : {0.0, 0.3, 0.7, 1.0}) {
      const auto budget = static_cast<std::size_t>(double(lo) + f * double(hi - std::min(hi, lo)));
      const remat::Plan oracle = remat::oracle_plan(g, budget);
      const remat::IlpResult ilp = remat::solve_plan_ilp(g, budget, 60.0);
      ASSERT_EQ(ilp.status, remat::IlpStatus::Optimal) << "trial " << trial << " budget " << budget;
      const remat::Evaluation e = remat::evaluate(g, ilp.decisions);
      EXPECT_LE(e.peak_bytes, budget) << "trial " << trial;
      EXPECT_NEAR(e.step_time, oracle.predicted.step_time, 1e-9) << "trial " << trial << " budget " << budget;
      EXPECT_DOUBLE_EQ(ilp.objective, e.step_time);
      ++compared;
    }
    if (lo > 0) {
      EXPECT_EQ(remat::solve_plan_ilp(g, lo - 1, 60.0).status, remat::IlpStatus::Infeasible) << "trial " << trial;
      EXPECT_THROW(remat::oracle_plan(g, lo - 1), Error);  // minimum_budget is the oracle's minimum
      ++infeasible;
    }
  }
  EXPECT_EQ(compared, 480);
  EXPECT_GT(infeasible, 100);
}

// The extensions of Note [Auto planning model] by hand: a backward workspace, a value consumed by
// two backward steps, a value with no backward use (only a recompute source), recompute
// workspaces and the eviction lag.
TEST(Planner, ModelExtensionsByHand) {
  remat::PlanGraph g;
  // Points: 0 A, 1 B, 2 C, 3 D (forward); 4 D', 5 C', 6 B', 7 A' (backward).
  g.ops = {{"A", "A", 1, 10, 5, 100}, {"B", "B", 2, 20, 0, 200}, {"C", "C", 3, 30, 0, {}}, {"D", "D", 4, 40, 0, 400}};
  remat::PlanValue x0{"x0", 10, 0, 1, -1, {}, {}, 0};  // A's output: no backward step reads it
  x0.recompute_workspace_bytes = 1;
  remat::PlanValue x1{"x1", 20, 1, 2, 2, {0}, {}, 0};  // B's output: read by C' and by B' (saved as B's output)
  x1.extra_backward_uses = {1};
  x1.recompute_workspace_bytes = 3;
  remat::PlanValue x2{"x2", 40, 2, 3, 3, {1}, {}, 0};  // C's output, read by D'
  g.values = {x0, x1, x2};
  g.bandwidth = {1.0, 1.0};  // streaming x1 or x2 costs time; x0 could hide its moves
  g.evict_lag = 1;
  const auto w = remat::value_windows(g);
  EXPECT_EQ(w[0].needs, std::vector<int64_t>{});
  EXPECT_EQ(w[0].need, -1);
  EXPECT_EQ(w[0].first, 4);  // x1's recomputes read x0 at C' and B', and at D' inside x2's closure
  EXPECT_EQ(w[0].last, 6);
  EXPECT_EQ(w[1].needs, (std::vector<int64_t>{5, 6}));
  EXPECT_EQ(w[1].first, 4);  // x2's recompute reads x1 at D'
  EXPECT_EQ(w[1].last, 6);
  EXPECT_EQ(w[1].evict_until, 3);
  EXPECT_EQ(w[1].stream_from, 4);  // max(lfu + 1 + lag, first - 1)
  EXPECT_EQ(w[2].evict_until, 4);
  EXPECT_EQ(w[2].stream_from, 5);  // the lag reaches D'; no gap left: resident on [4, 4] then from 5 (last 4)
  // Those are the hulls; each value's own window ignores its dependents' need points.
  EXPECT_EQ(w[0].widened_by, std::vector<int64_t>{1});
  EXPECT_EQ(w[0].own.first, -1);  // no backward use of its own: dead after B unless x1 is recomputed
  EXPECT_EQ(w[1].widened_by, std::vector<int64_t>{2});
  EXPECT_EQ(w[1].own.first, 5);
  EXPECT_EQ(w[1].own.last, 6);
  EXPECT_EQ(w[1].own.stream_from, 4);  // max(lfu + 1 + lag, own first - 1)
  EXPECT_TRUE(w[2].widened_by.empty());
  EXPECT_EQ(w[2].own.first, w[2].first);

  const std::vector<Decision> keep(3, Decision::Keep);
  // Workspaces: 5 0 0 0 | D' 400, C' 0, B' 200, A' 100. Forward lifetimes: x0 [0,1], x1 [1,2], x2 [2,3].
  // Kept, nothing recomputed, so each on its own window: x0 dead after B, x1 until 6, x2 until 4.
  EXPECT_EQ(remat::evaluate(g, keep).point_bytes, (std::vector<std::size_t>{15, 30, 60, 60, 460, 20, 220, 100}));
  // With x1 recomputed (at C' and B', reading x0), a kept x0 is held on its hull, until B'.
  const std::vector<Decision> krk = {Decision::Keep, Decision::Recompute, Decision::Keep};
  EXPECT_TRUE(remat::uses_hull(w[0], krk));
  EXPECT_FALSE(remat::uses_hull(w[0], keep));
  EXPECT_EQ(remat::evaluate(g, krk).point_bytes,
            (std::vector<std::size_t>{15, 30, 70, 10 + 40, 450, 10 + 23, 210 + 23, 100}));
  // Recompute everything: x0 dead after B; x1 re-run (with x0) at C' and at B': 20+3 + 10+1 each;
  // x2 re-run at D' with x1 and x0: 40 + 23 + 11.
  const std::vector<Decision> rr(3, Decision::Recompute);
  const remat::Evaluation e = remat::evaluate(g, rr);
  EXPECT_EQ(e.point_bytes, (std::vector<std::size_t>{15, 30, 60, 40, 474, 34, 234, 100}));
  EXPECT_DOUBLE_EQ(e.value_recompute_cost[0], 0.0);
  EXPECT_DOUBLE_EQ(e.value_recompute_cost[1], 2 * (2.0 + 1.0));
  EXPECT_DOUBLE_EQ(e.value_recompute_cost[2], 3.0 + 2.0 + 1.0);
  EXPECT_DOUBLE_EQ(e.recompute_time, 12.0);
  // Stream x1: resident [1,2] forward, the lag point 3, then [4, 6].
  const remat::Evaluation s = remat::evaluate(g, {Decision::Recompute, Decision::Stream, Decision::Recompute});
  EXPECT_EQ(s.point_bytes, (std::vector<std::size_t>{15, 30, 60, 60, 460, 20, 220, 100}));
  // The ILP sees the same model: it reaches the oracle's optimum at every budget.
  const std::size_t lo = remat::minimum_budget(g);
  for (std::size_t budget : {lo, lo + 7, std::size_t{465}, std::size_t{1000}}) {
    const remat::Plan oracle = remat::oracle_plan(g, budget);
    const remat::IlpResult ilp = remat::solve_plan_ilp(g, budget, 60.0);
    ASSERT_EQ(ilp.status, remat::IlpStatus::Optimal) << budget;
    EXPECT_NEAR(ilp.objective, oracle.predicted.step_time, 1e-9) << budget;
    EXPECT_LE(remat::evaluate(g, ilp.decisions).peak_bytes, budget);
  }
  // The planner drops x0 when nothing is recomputed from it (it would be held for nothing).
  remat::Planner planner;
  const remat::Plan generous = planner.plan(g, 1000);
  EXPECT_EQ(generous.decisions, (std::vector<Decision>{Decision::Recompute, Decision::Keep, Decision::Keep}));
  EXPECT_EQ(generous.predicted.peak_bytes, 460u);
}

TEST(Planner, ModelExtensionsBadInput) {
  remat::PlanGraph g;
  g.ops = {{"A", "A", 1, 1, 0, {}}, {"B", "B", 1, 1, 0, {}}};
  g.values = {{"x", 1, 0, 1, -2, {}, {}, 0}};
  g.bandwidth = {1.0, 1.0};
  EXPECT_THAT(ERROR_MESSAGE(g.validate()),
              HasSubstr("value 0 (x) has backward use -2; expected an op index in [0, 2) or -1"));
  g.values[0].backward_use = -1;
  g.values[0].extra_backward_uses = {2};
  EXPECT_THAT(ERROR_MESSAGE(g.validate()), HasSubstr("value 0 (x) has an extra backward use 2"));
  g.values[0].extra_backward_uses = {};
  g.evict_lag = -1;
  EXPECT_THAT(ERROR_MESSAGE(g.validate()), HasSubstr("evict lag -1"));
}

// Solves the plan ILP for `budget` and checks it against the oracle's plan: optimal, within the
// budget, the same predicted step time.
remat::IlpResult ilp_matching_oracle(const remat::PlanGraph& g, std::size_t budget, const remat::Plan& oracle,
                                     int trial) {
  remat::IlpResult ilp = remat::solve_plan_ilp(g, budget, 60.0);
  EXPECT_EQ(ilp.status, remat::IlpStatus::Optimal) << "trial " << trial << " budget " << budget;
  if (ilp.status != remat::IlpStatus::Optimal) return ilp;
  EXPECT_LE(remat::evaluate(g, ilp.decisions).peak_bytes, budget) << "trial " << trial;
  EXPECT_NEAR(ilp.objective, oracle.predicted.step_time, 1e-9) << "trial " << trial << " budget " << budget;
  return ilp;
}

// Random DAGs using every extension: the ILP still equals the exhaustive optimum.
TEST(Planner, IlpEqualsOracleWithModelExtensions) {
  std::mt19937 rng(21);
  auto uni = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  int compared = 0;
  for (int trial = 0; trial < 60; ++trial) {
    const int n = 1 + trial % 8;
    remat::PlanGraph g = random_graph(rng, n);
    const auto m = static_cast<int>(g.ops.size());
    g.evict_lag = uni(0, 2);
    g.timed_moves = uni(0, 2) == 0;
    for (auto& op : g.ops)
      if (uni(0, 1)) op.backward_workspace_bytes = std::size_t(uni(0, 60));
    for (auto& v : g.values) {
      const int kind = uni(0, 3);
      if (kind == 0) v.backward_use = -1;
      if (kind == 1) v.extra_backward_uses = {uni(0, m - 1)};
      if (kind == 2) v.extra_backward_uses = {uni(0, m - 1), uni(0, m - 1)};
      v.recompute_workspace_bytes = std::size_t(uni(0, 1) ? uni(0, 40) : 0);
    }
    const std::size_t hi = remat::evaluate(g, std::vector<Decision>(n, Decision::Keep)).peak_bytes;
    const std::size_t lo = remat::minimum_budget(g);
    for (double f : {0.0, 0.5, 1.0}) {
      const auto budget = static_cast<std::size_t>(double(lo) + f * double(hi - std::min(hi, lo)));
      const remat::Plan oracle = remat::oracle_plan(g, budget);
      ilp_matching_oracle(g, budget, oracle, trial);
      ++compared;
    }
    if (lo > 0) {
      EXPECT_EQ(remat::solve_plan_ilp(g, lo - 1, 60.0).status, remat::IlpStatus::Infeasible);
    }
  }
  EXPECT_EQ(compared, 180);
}

// Decision::Slow (Note [Auto planning model]): a value placed in the slow tier is resident at no
// point, its forward lifetime included, and costs one write and a read per forward reader and
// backward step at the copy bandwidths; only slow_ok values may take it.
TEST(Planner, SlowPlacementByHand) {
  remat::PlanGraph g = three_ops();
  g.values[1].slow_ok = true;
  g.values[1].forward_reads = 1;  // C reads x1
  EXPECT_DOUBLE_EQ(remat::slow_access_time(g, g.values[1]), 20.0 / 10 + 2 * 20.0 / 10);
  const remat::Evaluation ks = remat::evaluate(g, {Decision::Keep, Decision::Slow});
  EXPECT_EQ(ks.point_bytes, (std::vector<std::size_t>{10, 10, 10, 10, 10, 0}));
  EXPECT_DOUBLE_EQ(ks.slow_time, 6.0);
  EXPECT_DOUBLE_EQ(ks.step_time, 18.0 + 6.0);
  // x1's recompute would read x0; placed in the slow tier, x1 reads nothing later, so x0 keeps
  // its own window.
  const remat::Evaluation rs = remat::evaluate(g, {Decision::Recompute, Decision::Slow});
  EXPECT_EQ(rs.point_bytes, (std::vector<std::size_t>{10, 10, 0, 0, 10, 0}));
  // The minimum peak drops below keep/stream/recompute's (x1's forward lifetime binds at 30).
  remat::PlanGraph plain = three_ops();
  EXPECT_EQ(remat::minimum_budget(plain), 30u);
  EXPECT_EQ(remat::minimum_budget(g), 10u);
  // Only where needed: at a budget keep-all meets, nothing goes to the slow tier.
  remat::Planner planner;
  for (Decision d : planner.plan(g, 30).decisions) EXPECT_NE(d, Decision::Slow);
  const remat::Plan low = planner.plan(g, 10);
  EXPECT_EQ(low.decisions[1], Decision::Slow);
  EXPECT_LE(low.predicted.peak_bytes, 10u);
  EXPECT_THAT(remat::explain(g, low), HasSubstr("slow"));
  EXPECT_THAT(remat::explain(g, low), HasSubstr("slow-tier accesses 6"));
}

// The ILP (and the greedy) with slow_ok values against the exhaustive oracle, over the model's
// extensions; placing values in the slow tier never raises the minimum.
TEST(Planner, IlpEqualsOracleWithSlowPlacement) {
  std::mt19937 rng(31);
  auto uni = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  int compared = 0, used_slow = 0, greedy_planned = 0;
  for (int trial = 0; trial < 60; ++trial) {
    const int n = 1 + trial % 8;
    remat::PlanGraph g = random_graph(rng, n);
    const auto m = static_cast<int>(g.ops.size());
    g.timed_moves = uni(0, 1) == 0;
    if (g.timed_moves && uni(0, 2) == 0) g.sync_prefetch = g.sync_evict = true;
    for (auto& v : g.values) {
      v.slow_ok = uni(0, 2) != 0;
      v.forward_reads = uni(0, 3);
      if (uni(0, 3) == 0) v.backward_use = -1;
      if (uni(0, 3) == 0) v.extra_backward_uses = {uni(0, m - 1)};
    }
    remat::PlanGraph plain = g;
    for (auto& v : plain.values) v.slow_ok = false;
    const std::size_t hi = remat::evaluate(g, std::vector<Decision>(n, Decision::Keep)).peak_bytes;
    const std::size_t lo = remat::minimum_budget(g);
    EXPECT_LE(lo, remat::minimum_budget(plain)) << "trial " << trial;
    for (double f : {0.0, 0.5, 1.0}) {
      const auto budget = static_cast<std::size_t>(double(lo) + f * double(hi - std::min(hi, lo)));
      const remat::Plan oracle = remat::oracle_plan(g, budget);
      const remat::IlpResult ilp = ilp_matching_oracle(g, budget, oracle, trial);
      for (std::size_t i = 0; i < ilp.decisions.size(); ++i) {
        if (ilp.decisions[i] == Decision::Slow) {
          EXPECT_TRUE(g.values[i].slow_ok);
        }
        used_slow += ilp.decisions[i] == Decision::Slow;
      }
      if (auto d = remat::greedy_decisions(g, budget)) {
        const remat::Evaluation e = remat::evaluate(g, *d);
        EXPECT_LE(e.peak_bytes, budget);
        EXPECT_GE(e.step_time + 1e-9, oracle.predicted.step_time);
        ++greedy_planned;
      }
      ++compared;
    }
    if (lo > 0) {
      EXPECT_EQ(remat::solve_plan_ilp(g, lo - 1, 60.0).status, remat::IlpStatus::Infeasible);
      EXPECT_THROW(remat::oracle_plan(g, lo - 1), Error);
    }
  }
  EXPECT_EQ(compared, 180);
  EXPECT_GT(used_slow, 20);
  EXPECT_GT(greedy_planned, 90);
}

TEST(Planner, OracleAgreesWithIlpAtTwelveValues) {
  std::mt19937 rng(12);
  for (int trial = 0; trial < 3; ++trial) {
    const remat::PlanGraph g = random_graph(rng, 12);
    const std::size_t hi = remat::evaluate(g, std::vector<Decision>(12, Decision::Keep)).peak_bytes;
    const std::size_t lo = remat::minimum_budget(g);
    const std::size_t budget = (lo + hi) / 2;
    const remat::Plan oracle = remat::oracle_plan(g, budget);
    const remat::IlpResult ilp = remat::solve_plan_ilp(g, budget, 60.0);
    ASSERT_EQ(ilp.status, remat::IlpStatus::Optimal);
    EXPECT_NEAR(ilp.objective, oracle.predicted.step_time, 1e-9);
  }
}

TEST(Planner, GreedyIsFeasibleAndNeverBeatsTheOracle) {
  std::mt19937 rng(3);
  int planned = 0;
  for (int trial = 0; trial < 60; ++trial) {
    const int n = 2 + trial % 7;
    const remat::PlanGraph g = random_graph(rng, n);
    const std::size_t hi = remat::evaluate(g, std::vector<Decision>(n, Decision::Keep)).peak_bytes;
    const std::size_t lo = remat::minimum_budget(g);
    const std::size_t budget = (lo + hi) / 2;
    remat::Plan greedy;
    try {
      greedy = remat::greedy_plan(g, budget);
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr("below the minimum"));
      continue;  // the greedy may fail where a plan exists; it says so
    }
    EXPECT_LE(greedy.predicted.peak_bytes, budget);
    EXPECT_GE(greedy.predicted.step_time + 1e-9, remat::oracle_plan(g, budget).predicted.step_time);
    ++planned;
  }
  EXPECT_GT(planned, 40);
}

TEST(Planner, GreedyDecisionsAndSharedWindows) {
  std::mt19937 rng(5);
  int planned = 0, failed = 0;
  for (int trial = 0; trial < 40; ++trial) {
    const int n = 2 + trial % 9;
    const remat::PlanGraph g = random_graph(rng, n);
    const auto w = remat::value_windows(g);
    const std::size_t hi = remat::evaluate(g, std::vector<Decision>(n, Decision::Keep)).peak_bytes;
    const std::size_t lo = remat::minimum_budget(g);
    for (std::size_t budget : {lo / 2, (lo + hi) / 2}) {
      remat::Evaluation last;
      const auto d = remat::greedy_decisions(g, budget, &last);
      if (!d) {  // no error, and greedy_plan says the same with one
        EXPECT_GT(last.peak_bytes, budget);
        EXPECT_THROW(remat::greedy_plan(g, budget), Error);
        ++failed;
        continue;
      }
      EXPECT_EQ(*d, remat::greedy_plan(g, budget).decisions);
      EXPECT_LE(last.peak_bytes, budget);
      const remat::Evaluation a = remat::evaluate(g, *d), b = remat::evaluate(g, *d, w);
      EXPECT_EQ(a.point_bytes, b.point_bytes);
      EXPECT_DOUBLE_EQ(a.step_time, b.step_time);
      ++planned;
    }
  }
  EXPECT_GT(planned, 20);
  EXPECT_GT(failed, 20);  // every lo / 2 below a positive minimum
  const remat::PlanGraph g = random_graph(rng, 4);
  EXPECT_THROW(remat::evaluate(g, std::vector<Decision>(4, Decision::Keep), {}), Error);
}

// Beyond 16 values the step-time ILP stops within 1 % of the overhead or 0.2 % of the step's
// compute of its bound, starting from the uniform and greedy plans: its plan fits and is never
// worse than any of those starts.
TEST(Planner, GappedIlpIsNeverWorseThanItsStarts) {
  std::mt19937 rng(11);
  int solved = 0;
  for (int trial = 0; trial < 12; ++trial) {
    const int n = 17 + trial;
    const remat::PlanGraph g = random_graph(rng, n);
    const std::size_t hi = remat::evaluate(g, std::vector<Decision>(n, Decision::Keep)).peak_bytes;
    std::size_t lo = hi;  // the best uniform peak: a budget above it has feasible starts
    for (Decision u : {Decision::Stream, Decision::Recompute})
      lo = std::min(lo, remat::evaluate(g, std::vector<Decision>(n, u)).peak_bytes);
    const std::size_t budget = lo + (hi - lo) / 3;
    const remat::IlpResult ilp = remat::solve_plan_ilp(g, budget, 60.0);
    ASSERT_EQ(ilp.status, remat::IlpStatus::Optimal) << "trial " << trial;
    const remat::Evaluation e = remat::evaluate(g, ilp.decisions);
    EXPECT_LE(e.peak_bytes, budget);
    if (auto d = remat::greedy_decisions(g, budget))
      EXPECT_LE(e.step_time, remat::evaluate(g, *d).step_time * (1 + 1e-12)) << "trial " << trial;
    for (Decision u : {Decision::Keep, Decision::Stream, Decision::Recompute}) {
      const remat::Evaluation ue = remat::evaluate(g, std::vector<Decision>(n, u));
      if (ue.peak_bytes <= budget) EXPECT_LE(e.step_time, ue.step_time * (1 + 1e-12)) << "trial " << trial;
    }
    ++solved;
  }
  EXPECT_EQ(solved, 12);
}

// A solve that times out hands back GLPK's incumbent when it has one (feasible, at least as fast as
// the greedy start), and Planner::plan uses it; without one the plan is the greedy's. Several time
// limits on a large graph: whichever way each ends, the invariants hold.
TEST(Planner, TimedOutSolvesReturnTheirIncumbent) {
  std::mt19937 rng(17);
  remat::PlanGraph g = random_graph(rng, 120);
  for (std::size_t i = 0; i < g.values.size(); i += 3) g.values[i].slow_ok = true;
  const std::size_t hi = remat::evaluate(g, std::vector<Decision>(g.values.size(), Decision::Keep)).peak_bytes;
  const std::size_t budget = hi / 3;
  int incumbents = 0;
  for (double limit : {0.02, 0.05, 0.1, 0.3}) {
    const remat::IlpResult r = remat::solve_plan_ilp(g, budget, limit);
    if (r.decisions.empty()) continue;
    ASSERT_EQ(r.decisions.size(), g.values.size());
    const remat::Evaluation e = remat::evaluate(g, r.decisions);
    EXPECT_LE(e.peak_bytes, budget) << "limit " << limit;
    EXPECT_DOUBLE_EQ(r.objective, e.step_time);
    if (auto greedy = remat::greedy_decisions(g, budget)) {
      EXPECT_LE(e.step_time, remat::evaluate(g, *greedy).step_time * (1 + 1e-12)) << "limit " << limit;
    }
    if (r.status != remat::IlpStatus::TimedOut) continue;
    ++incumbents;
    remat::Planner planner({limit});
    const remat::Plan p = planner.plan(g, budget);
    EXPECT_TRUE(p.ilp_timed_out || p.source == remat::PlanSource::Ilp);
    EXPECT_LE(p.predicted.peak_bytes, budget);
  }
  std::printf("[ planner ] %d of 4 time limits ended with an incumbent\n", incumbents);
}

TEST(Planner, FallsBackToGreedyWhenTheSolverTimesOut) {
  std::mt19937 rng(5);
  const remat::PlanGraph g = random_graph(rng, 8);
  const std::size_t hi = remat::evaluate(g, std::vector<Decision>(8, Decision::Keep)).peak_bytes;
  const std::size_t budget = (remat::minimum_budget(g) + hi) / 2;
  EXPECT_EQ(remat::solve_plan_ilp(g, budget, 1e-9).status, remat::IlpStatus::TimedOut);
  remat::Planner planner({1e-9});
  const remat::Plan p = planner.plan(g, budget);
  EXPECT_TRUE(p.ilp_timed_out);
  EXPECT_EQ(p.source, remat::PlanSource::Greedy);
  // The greedy plan, after Planner::plan's clean-ups: idle values dropped, and streamed values
  // kept where that fits at no extra time.
  const remat::Plan greedy = remat::greedy_plan(g, budget);
  const auto w = remat::value_windows(g);
  for (std::size_t i = 0; i < 8; ++i)
    if (p.decisions[i] != greedy.decisions[i])
      EXPECT_TRUE((greedy.decisions[i] == Decision::Stream && p.decisions[i] == Decision::Keep) ||
                  (w[i].needs.empty() && p.decisions[i] == Decision::Recompute))
          << i;
  EXPECT_LE(p.predicted.step_time, greedy.predicted.step_time);
  EXPECT_LE(p.predicted.peak_bytes, budget);
}

TEST(Planner, CachesPlansByGraphSignature) {
  std::mt19937 rng(7);
  remat::PlanGraph g = random_graph(rng, 6);
  const std::size_t budget = remat::evaluate(g, std::vector<Decision>(6, Decision::Keep)).peak_bytes * 3 / 4;
  remat::Planner planner;
  const remat::Plan first = planner.plan(g, budget);
  EXPECT_EQ(first.source, remat::PlanSource::Ilp);
  const remat::Plan again = planner.plan(g, budget);
  EXPECT_EQ(again.source, remat::PlanSource::Cached);
  EXPECT_EQ(again.decisions, first.decisions);
  EXPECT_EQ(planner.solves(), 1);
  // A changed shape (signature and bytes) re-plans.
  g.ops[0].signature = "op0[other shape]";
  g.values[0].bytes += 8;
  EXPECT_EQ(planner.plan(g, budget).source, remat::PlanSource::Ilp);
  EXPECT_EQ(planner.solves(), 2);
  EXPECT_EQ(planner.cache_size(), 2u);
}

// Two adjacent backward steps each reading a large value (a batch norm's input, then the next
// conv's input): an asynchronous prefetch of the second is resident during the first, so both are
// held there; fetched at its need point (sync_prefetch), only one is. Planner::plan falls back to
// that variant below the asynchronous minimum, and the fetch's whole time is then exposed.
TEST(Planner, SyncPrefetchLowersTheMinimumAndThePlannerFallsBackToIt) {
  remat::PlanGraph g;
  // Points: 0 A, 1 S, 2 C, 3 D, 4 E | 5 E', 6 D', 7 C', 8 S', 9 A'. x0 (A's output, 100 bytes)
  // is read by S' (point 8), x1 (C's output, 100 bytes) by C' (point 7); every backward step holds
  // a 10-byte gradient; re-running either producer needs 200 bytes, so neither is recomputed.
  for (const char* name : {"A", "S", "C", "D", "E"}) g.ops.push_back({name, name, 1, 1, 0, 10});
  g.values = {{"x0", 100, 0, 0, 1, {}, {}, 200}, {"x1", 100, 2, 2, 2, {}, {}, 200}};
  g.bandwidth = {1000.0, 1000.0};  // a copy takes 0.1: one point hides it
  g.timed_moves = true;
  const std::vector<Decision> stream(2, Decision::Stream);
  const remat::Evaluation async = remat::evaluate(g, stream);
  EXPECT_EQ(async.point_bytes[7], 210u);  // x1 read at C' while x0's prefetch is under way
  EXPECT_EQ(async.peak_bytes, 210u);
  const remat::PlanGraph sync = remat::with_sync_prefetch(g);
  EXPECT_NE(sync.signature(), g.signature());
  const auto w = remat::value_windows(sync);
  EXPECT_EQ(w[0].stream_from, 8);           // x0 arrives at S' itself
  EXPECT_DOUBLE_EQ(w[0].stream_cost, 0.1);  // its fetch is exposed; its eviction hides behind S
  const remat::Evaluation e = remat::evaluate(sync, stream);
  EXPECT_EQ(e.point_bytes[7], 110u);
  EXPECT_EQ(e.peak_bytes, 110u);
  EXPECT_NEAR(e.move_time, 0.2, 1e-12);
  EXPECT_EQ(remat::minimum_budget(g), 210u);
  EXPECT_EQ(remat::minimum_budget(sync), 110u);
  EXPECT_EQ(remat::lowest_budget(g), 110u);
  // Between the two minima only the fallback plans; from the asynchronous minimum up it is not used.
  remat::Planner planner;
  const remat::Plan fallback = planner.plan(g, 150);
  EXPECT_TRUE(fallback.sync_prefetch);
  // x1 stays (prefer_keep: keeping it costs nothing and fits); x0 is fetched at S'.
  const std::vector<Decision> expected{Decision::Stream, Decision::Keep};
  EXPECT_EQ(fallback.decisions, expected);
  EXPECT_EQ(fallback.predicted.peak_bytes, 110u);
  EXPECT_THAT(remat::explain(sync, fallback), HasSubstr("synchronous"));
  EXPECT_EQ(planner.plan(g, 150).decisions, expected);  // cached
  EXPECT_FALSE(planner.plan(g, 210).sync_prefetch);
  EXPECT_THAT(ERROR_MESSAGE(planner.plan(g, 109)), HasSubstr("minimum peak of 110 bytes"));
  remat::PlanGraph untimed = sync;
  untimed.timed_moves = false;
  EXPECT_THAT(ERROR_MESSAGE(untimed.validate()), HasSubstr("sync_prefetch needs timed_moves"));
}

// A value no backward step reads (a batch norm's output, which the relu after it saves as a mask)
// is read only inside the recompute closure of its readers (the relu output, which the next
// conv's weight step reads): recomputing that reader re-runs the batch norm on its input, so the
// input's window widens by the reader's need point, not only by its direct dependent's (none).
// Found by AutoRemat.SmallVgg at budgets near 10 %, where the executor held the input 128 KiB
// above the prediction.
TEST(Planner, IdleValuesPassTheirReadersOnToTheWindowsOfTheirDeps) {
  remat::PlanGraph g;
  // Points: 0 N, 1 R, 2 W | 3 W', 4 R', 5 N'. 100 bytes each: x, which N' reads (the batch
  // norm's input); y, made from x and read by no backward step (its output); z, made from y by R
  // and read by W' at point 3 (the relu output the next conv's weight step reads).
  for (const char* name : {"N", "R", "W"}) g.ops.push_back({name, name, 1, 1, 0, 0});
  g.values = {{"x", 100, 0, 0, 0, {}, {}, 0}, {"y", 100, 0, 1, -1, {0}, {}, 0}, {"z", 100, 1, 2, 2, {1}, {}, 0}};
  g.bandwidth = {1e9, 1e9};
  const auto w = remat::value_windows(g);
  EXPECT_TRUE(w[1].needs.empty());
  EXPECT_EQ(w[0].widened_by, std::vector<int64_t>{2});  // z, through y
  EXPECT_EQ(w[0].first, 3);
  EXPECT_EQ(w[0].own.first, 5);
  EXPECT_EQ(w[1].widened_by, std::vector<int64_t>{2});
  // x streamed; y and z recomputed: at W' z is re-run from y, re-run from x, so x is resident.
  const std::vector<Decision> d = {Decision::Stream, Decision::Recompute, Decision::Recompute};
  EXPECT_TRUE(remat::uses_hull(w[0], d));
  EXPECT_EQ(remat::evaluate(g, d).point_bytes[3], 300u);  // x, y, z
  // With z kept, x only needs its own window: streamed, it is away at W'.
  const std::vector<Decision> e = {Decision::Stream, Decision::Recompute, Decision::Keep};
  EXPECT_FALSE(remat::uses_hull(w[0], e));
  EXPECT_EQ(remat::evaluate(g, e).point_bytes[3], 100u);  // z
}

// A value's asynchronous eviction keeps it resident while the next op writes its output (VGG's
// batch-norm input during the batch norm); with sync_evict that op waits for the eviction
// instead. Planner::plan tries sync_prefetch first, then sync_prefetch + sync_evict.
TEST(Planner, SyncEvictLowersTheMinimumBelowSyncPrefetch) {
  remat::PlanGraph g;
  // Points: 0 A, 1 B, 2 C | 3 C', 4 B', 5 A'. x0 (A's output) is read by A', x1 (B's output) by
  // B'; 100 bytes each, re-running either needs 200 more, so neither is recomputed; every backward
  // step holds a 10-byte gradient. A copy takes 0.1, a point 1.
  for (const char* name : {"A", "B", "C"}) g.ops.push_back({name, name, 1, 1, 0, 10});
  g.values = {{"x0", 100, 0, 0, 0, {}, {}, 200}, {"x1", 100, 1, 1, 1, {}, {}, 200}};
  g.bandwidth = {1000.0, 1000.0};
  g.timed_moves = true;
  const std::vector<Decision> stream(2, Decision::Stream);
  // Asynchronous: x0 leaves during B, which writes x1 (200 at B); x0's prefetch runs during B'
  // (210 there).
  EXPECT_EQ(remat::minimum_budget(g), 210u);
  EXPECT_EQ(remat::minimum_budget(remat::with_sync_prefetch(g)), 200u);
  const remat::PlanGraph moves = remat::with_sync_moves(g);
  EXPECT_TRUE(moves.sync_prefetch && moves.sync_evict);
  EXPECT_NE(moves.signature(), remat::with_sync_prefetch(g).signature());
  const auto w = remat::value_windows(moves);
  EXPECT_EQ(w[0].evict_until, 0);  // gone before B runs
  EXPECT_EQ(w[0].stream_from, 5);
  EXPECT_DOUBLE_EQ(w[0].stream_cost, 0.2);  // both copies exposed
  const remat::Evaluation e = remat::evaluate(moves, stream);
  EXPECT_EQ(e.point_bytes, (std::vector<std::size_t>{100, 100, 0, 10, 110, 110}));  // x1 gone before C
  EXPECT_EQ(remat::minimum_budget(moves), 110u);
  EXPECT_EQ(remat::lowest_budget(g), 110u);
  const std::vector<remat::PlanGraph> variants = remat::fallback_variants(g);
  ASSERT_EQ(variants.size(), 3u);
  EXPECT_TRUE(variants[1].sync_prefetch && !variants[1].sync_evict);
  EXPECT_TRUE(variants[2].sync_prefetch && variants[2].sync_evict);
  EXPECT_EQ(remat::fallback_variants(moves).size(), 1u);
  remat::PlanGraph untimed_graph = g;
  untimed_graph.timed_moves = false;
  EXPECT_EQ(remat::fallback_variants(untimed_graph).size(), 1u);

  remat::Planner planner;
  const remat::Plan p = planner.plan(g, 150);
  EXPECT_TRUE(p.sync_prefetch);
  EXPECT_TRUE(p.sync_evict);
  EXPECT_LE(p.predicted.peak_bytes, 150u);
  EXPECT_THAT(remat::explain(moves, p), HasSubstr("each eviction finishes before the next op runs"));
  const remat::Plan q = planner.plan(g, 205);
  EXPECT_TRUE(q.sync_prefetch);
  EXPECT_FALSE(q.sync_evict);
  EXPECT_FALSE(planner.plan(g, 210).sync_prefetch);
  EXPECT_THAT(ERROR_MESSAGE(planner.plan(g, 109)), HasSubstr("minimum peak of 110 bytes"));
  remat::PlanGraph untimed = moves;
  untimed.timed_moves = false;
  untimed.sync_prefetch = false;
  EXPECT_THAT(ERROR_MESSAGE(untimed.validate()), HasSubstr("sync_evict needs timed_moves"));
}

TEST(Planner, InfeasibleBudgetNamesTheMinimum) {
  const remat::PlanGraph g = three_ops();
  // The forward alone holds x0 and x1 at B: 30 bytes whatever the plan.
  EXPECT_EQ(remat::minimum_budget(g), 30u);
  remat::Planner planner;
  EXPECT_THAT(ERROR_MESSAGE(planner.plan(g, 29)),
              HasSubstr("fast-tier budget of 29 bytes is below the minimum peak of 30 bytes"));
  EXPECT_THAT(ERROR_MESSAGE(remat::oracle_plan(g, 12)), HasSubstr("raise the budget to at least 30 bytes"));
  EXPECT_EQ(planner.plan(g, 30).predicted.peak_bytes, 30u);
}

TEST(Planner, ExplainListsEveryValue) {
  const remat::PlanGraph g = three_ops();
  remat::Planner planner;
  const remat::Plan p = planner.plan(g, 30);
  const std::string text = remat::explain(g, p);
  EXPECT_THAT(text, HasSubstr("x0"));
  EXPECT_THAT(text, HasSubstr("x1"));
  EXPECT_THAT(text, HasSubstr("keep"));  // the budget allows keep-all, the fastest
  EXPECT_THAT(text, HasSubstr("predicted peak 30 bytes (budget 30)"));
  EXPECT_THAT(text, HasSubstr("predicted step time 18 s"));
  EXPECT_THAT(text, HasSubstr("plan by ILP"));
}

TEST(Planner, BadInputs) {
  remat::PlanGraph g = three_ops();
  g.values[1].deps = {1};
  EXPECT_THAT(ERROR_MESSAGE(g.validate()),
              HasSubstr("value 1 (x1) depends on value 1, expected a saved value produced by an earlier op"));
  g = three_ops();
  g.values[0].last_forward_use = 5;
  EXPECT_THAT(ERROR_MESSAGE(remat::Planner().plan(g, 100)), HasSubstr("value 0 (x0) has last forward use 5"));
  g = three_ops();
  g.values[0].producer = -1;
  EXPECT_THAT(ERROR_MESSAGE(g.validate()), HasSubstr("value 0 (x0) has producer -1"));
  g = three_ops();
  g.ops[1].forward_time = -1;
  EXPECT_THAT(ERROR_MESSAGE(g.validate()), HasSubstr("op 1 (B) has forward time -1"));
  g = three_ops();
  g.bandwidth.slow_to_fast = 0;
  EXPECT_THAT(ERROR_MESSAGE(g.validate()), HasSubstr("copy bandwidths"));
  EXPECT_THAT(ERROR_MESSAGE(remat::PlanGraph().validate()), HasSubstr("the graph has no ops"));
  g = three_ops();
  EXPECT_THAT(ERROR_MESSAGE(remat::evaluate(g, {Decision::Keep})), HasSubstr("1 decisions for 2 saved values"));
  EXPECT_THAT(ERROR_MESSAGE(remat::solve_plan_ilp(g, 100, 0.0)), HasSubstr("expected a positive number of seconds"));
  std::mt19937 rng(1);
  EXPECT_THAT(ERROR_MESSAGE(remat::oracle_plan(random_graph(rng, 15), 1000)), HasSubstr("more than 3^14"));
  remat::PlanGraph eleven_slow = random_graph(rng, 12);  // 4^12 plans
  for (auto& v : eleven_slow.values) v.slow_ok = true;
  EXPECT_THAT(ERROR_MESSAGE(remat::oracle_plan(eleven_slow, 1000)), HasSubstr("12 of them slow_ok"));
  EXPECT_THAT(ERROR_MESSAGE(remat::evaluate(g, {Decision::Keep, Decision::Slow})), HasSubstr("is not slow_ok"));
  g.values[1].slow_ok = true;
  g.values[1].forward_reads = -1;
  EXPECT_THAT(ERROR_MESSAGE(g.validate()), HasSubstr("-1 forward reads"));
  g = three_ops();
  remat::Plan p;
  EXPECT_THAT(ERROR_MESSAGE(remat::explain(g, p)), HasSubstr("0 decisions for a graph of 2 saved values"));
}

}  // namespace
}  // namespace strata_test

namespace strata_test {
namespace {

TEST(PlannerProfile, TimesEachSignatureOnce) {
  remat::OpProfiler profiler(3);
  int runs = 0;
  auto op = [&] {
    ++runs;
    volatile double s = 0;
    for (int i = 0; i < 20000; ++i) s = s + i;
  };
  const double t = profiler.time("loop [20000]", op);
  EXPECT_GT(t, 0.0);
  EXPECT_EQ(runs, 4);  // one warm-up, three timed
  EXPECT_EQ(profiler.time("loop [20000]", op), t);
  EXPECT_EQ(runs, 4);  // cached: not run again
  profiler.time("loop [other]", op);
  EXPECT_EQ(runs, 8);
  EXPECT_EQ(profiler.size(), 2u);
  EXPECT_EQ(profiler.measurements(), 2);
  EXPECT_THAT(ERROR_MESSAGE(remat::OpProfiler(0)), ::testing::HasSubstr("repeats must be at least 1, got 0"));
  EXPECT_THAT(ERROR_MESSAGE(profiler.time("", op)), ::testing::HasSubstr("the signature is empty"));
  EXPECT_THAT(ERROR_MESSAGE(profiler.time("new", {})), ::testing::HasSubstr("closure to time for \"new\" is empty"));
}

TEST(PlannerProfile, CopyBandwidthsArePositive) {
  const remat::CopyBandwidth bw = remat::copy_bandwidth(std::size_t{4} << 20);
  EXPECT_GT(bw.fast_to_slow, 1e6);  // bytes per second; any real copy moves more than 1 MB/s
  EXPECT_GT(bw.slow_to_fast, 1e6);
  EXPECT_THAT(ERROR_MESSAGE(remat::copy_bandwidth(0)), ::testing::HasSubstr("probe size is 0 bytes"));
}

}  // namespace
}  // namespace strata_test
