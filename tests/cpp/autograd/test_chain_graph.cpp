// AutoChain's graph builder (autograd/remat/detail/chain_graph.h) on hand-built step profiles: the
// values of a graph of steps and the backward accounting of Note [Auto graph execution] — pending
// gradients (skip connections, values read by several steps, the add-alias correction, parameters
// read by several steps, the graph input's gradient) and each step's incoming-gradient case —
// checked through backward_workspace_bytes by hand arithmetic; and the executor's move schedule.

#include <gtest/gtest.h>

#include "autograd/remat/detail/chain_graph.h"
#include "autograd/remat/detail/move_schedule.h"

namespace strata_test {
namespace {

using namespace strata;
using remat::Decision;
using remat::GraphStep;
using remat::detail::StepProfile;

constexpr std::size_t kLoss = remat::detail::kCallerLossBytes;
// Every hand-built step's backward grows by 10 B when its incoming gradient is reusable (it works
// in place) and by 30 B when that is held elsewhere; no step returns a reusable gradient unless a
// test says so.
constexpr std::size_t kInPlace = 10, kHeld = 30;

GraphStep step(std::vector<int64_t> inputs) {
  GraphStep s;
  s.inputs = std::move(inputs);
  return s;
}

// A profile of a step with `k_in` inputs and an output of `out_bytes`, which differentiates every
// input and saves nothing.
StepProfile profile(std::size_t k_in, std::size_t out_bytes) {
  StepProfile p;
  p.signature = "hand-built";
  p.saves_input.assign(k_in, 0);
  p.out_storage_bytes = p.out_nbytes = out_bytes;
  p.out_size_allocations = 1;
  p.forward_peak = p.nograd_peak = out_bytes;
  p.has_backward = true;
  p.backward_growth[0] = kInPlace;
  p.backward_growth[1] = kHeld;
  for (int c = 0; c < 2; ++c) {
    p.grad_reusable[c].assign(k_in, 0);
    p.grad_alias[c].assign(k_in, -1);
  }
  p.grad_input.assign(k_in, 1);
  return p;
}

// The profiles of `steps`, with out_bytes[i] per step.
std::vector<StepProfile> profiles(const std::vector<GraphStep>& steps, const std::vector<std::size_t>& out_bytes) {
  std::vector<StepProfile> out;
  for (std::size_t i = 0; i < steps.size(); ++i) out.push_back(profile(steps[i].inputs.size(), out_bytes[i]));
  return out;
}

remat::detail::ChainGraphContext context(std::size_t input_grad_bytes = 0) {
  remat::detail::ChainGraphContext c;
  c.input_grad_bytes = input_grad_bytes;
  c.bandwidth = {1e9, 1e9};
  return c;
}

std::vector<std::size_t> backward_workspaces(const std::vector<GraphStep>& steps, const std::vector<StepProfile>& prof,
                                             std::size_t input_grad_bytes = 0) {
  const remat::ChainGraph cg = remat::detail::build_chain_graph(steps, prof, context(input_grad_bytes));
  std::vector<std::size_t> out;
  for (const remat::PlanOp& op : cg.graph.ops) out.push_back(op.backward_workspace());
  return out;
}

TEST(ChainGraph, AChainHoldsNothingPending) {
  const std::vector<GraphStep> steps{step({-1}), step({0}), step({1})};
  const auto prof = profiles(steps, {100, 200, 300});
  const auto acc = remat::detail::backward_accounting(steps, prof, 0);
  EXPECT_EQ(acc.pending, (std::vector<std::size_t>{0, 0, 0}));
  EXPECT_EQ(acc.contributions, (std::vector<int>{1, 1, 0}));
  // One contribution each, not reusable: every incoming gradient is held (the last one the caller's).
  EXPECT_EQ(acc.incoming_reusable, (std::vector<char>{0, 0, 0}));
  // out_nbytes (the seed) + growth + the chain's output held by the caller (300) + the loss.
  EXPECT_EQ(
      backward_workspaces(steps, prof),
      (std::vector<std::size_t>{100 + kHeld + 300 + kLoss, 200 + kHeld + 300 + kLoss, 300 + kHeld + 300 + kLoss}));
}

TEST(ChainGraph, AReturnedReusableGradientLetsTheReaderWorkInPlace) {
  const std::vector<GraphStep> steps{step({-1}), step({0}), step({1})};
  auto prof = profiles(steps, {100, 200, 300});
  prof[2].grad_reusable[1][0] = 1;  // step 2 (given the caller's held seed) returns a reusable gradient
  prof[1].grad_reusable[0][0] = 0;  // step 1, working in place, returns one held elsewhere
  prof[1].grad_reusable[1][0] = 1;  // (what it would return given a held one: not its case)
  const auto acc = remat::detail::backward_accounting(steps, prof, 0);
  EXPECT_EQ(acc.incoming_reusable, (std::vector<char>{0, 1, 0}));
  EXPECT_EQ(
      backward_workspaces(steps, prof),
      (std::vector<std::size_t>{100 + kHeld + 300 + kLoss, 200 + kInPlace + 300 + kLoss, 300 + kHeld + 300 + kLoss}));
}

TEST(ChainGraph, ASkipConnectionsGradientIsPendingAcrossTheStepsBetween) {
  // 0 -> 1 -> 2 -> 3 = add(x2, x0): x0's gradient exists from 3's backward until 0's, so the
  // backward points of 1 and 2 hold its 100 B too.
  const std::vector<GraphStep> steps{step({-1}), step({0}), step({1}), step({2, 0})};
  const auto prof = profiles(steps, {100, 100, 100, 100});
  const auto acc = remat::detail::backward_accounting(steps, prof, 0);
  EXPECT_EQ(acc.pending, (std::vector<std::size_t>{0, 100, 100, 0}));
  EXPECT_EQ(acc.contributions, (std::vector<int>{2, 1, 1, 0}));
  EXPECT_EQ(acc.incoming_reusable, (std::vector<char>{1, 0, 0, 0}));  // two contributions: summed, owned
  const std::size_t held_output = 100;
  EXPECT_EQ(backward_workspaces(steps, prof),
            (std::vector<std::size_t>{100 + kInPlace + held_output + kLoss, 100 + kHeld + held_output + kLoss + 100,
                                      100 + kHeld + held_output + kLoss + 100, 100 + kHeld + held_output + kLoss}));
}

TEST(ChainGraph, AValueReadByThreeStepsIsPendingFromItsLastReader) {
  // x0 is read by steps 1, 2 and 3: its gradient is pending from 3's backward, across 2's and 1's.
  const std::vector<GraphStep> steps{step({-1}), step({0}), step({0, 1}), step({0, 2})};
  const auto prof = profiles(steps, {40, 50, 60, 70});
  const remat::ChainGraph cg = remat::detail::build_chain_graph(steps, prof, context());
  const remat::PlanValue& x1 = cg.graph.values[static_cast<std::size_t>(cg.output_value[0])];
  EXPECT_EQ(x1.last_forward_use, 3);
  EXPECT_EQ(x1.forward_reads, 3);
  const auto acc = remat::detail::backward_accounting(steps, prof, 0);
  EXPECT_EQ(acc.pending, (std::vector<std::size_t>{0, 40, 40, 0}));
  EXPECT_EQ(acc.contributions, (std::vector<int>{3, 1, 1, 0}));
  EXPECT_EQ(backward_workspaces(steps, prof),
            (std::vector<std::size_t>{40 + kInPlace + 70 + kLoss, 50 + kHeld + 70 + kLoss + 40,
                                      60 + kHeld + 70 + kLoss + 40, 70 + kHeld + 70 + kLoss}));
}

TEST(ChainGraph, OnlyReadersReturningAGradientStartAPendingOne) {
  // As above, but step 3 returns no gradient for x0 (a conv's weight step reads the conv's input):
  // x0's gradient starts at 2's backward, pending across 1's only.
  const std::vector<GraphStep> steps{step({-1}), step({0}), step({0, 1}), step({0, 2})};
  auto prof = profiles(steps, {40, 50, 60, 70});
  prof[3].grad_input[0] = 0;
  const auto acc = remat::detail::backward_accounting(steps, prof, 0);
  EXPECT_EQ(acc.pending, (std::vector<std::size_t>{0, 40, 0, 0}));
  EXPECT_EQ(acc.contributions, (std::vector<int>{2, 1, 1, 0}));
}

TEST(ChainGraph, AnAddsAliasedGradientIsCountedOnceWhereItIsPending) {
  // 0 -> 1 -> 2 = add(x1, x0). x0's gradient is pending across 1's backward; but add hands one
  // tensor to both operands, so what is pending there is the very buffer step 1 receives.
  const std::vector<GraphStep> steps{step({-1}), step({0}), step({1, 0})};
  auto prof = profiles(steps, {100, 100, 100});
  EXPECT_EQ(remat::detail::backward_accounting(steps, prof, 0).pending, (std::vector<std::size_t>{0, 100, 0}));
  prof[2].grad_alias[1] = {1, 0};  // the last step's incoming gradient is the caller's: case [1]
  const auto acc = remat::detail::backward_accounting(steps, prof, 0);
  EXPECT_EQ(acc.pending, (std::vector<std::size_t>{0, 0, 0}));
  EXPECT_EQ(
      backward_workspaces(steps, prof),
      (std::vector<std::size_t>{100 + kInPlace + 100 + kLoss, 100 + kHeld + 100 + kLoss, 100 + kHeld + 100 + kLoss}));
  // Not when x1 has another reader adding to its gradient (then it is a sum, not the alias); x1's
  // own gradient is pending across 2's backward too.
  const std::vector<GraphStep> more{step({-1}), step({0}), step({1, 0}), step({1, 2})};
  auto prof2 = profiles(more, {100, 100, 100, 100});
  prof2[2].grad_alias[0] = prof2[2].grad_alias[1] = {1, 0};
  EXPECT_EQ(remat::detail::backward_accounting(more, prof2, 0).pending, (std::vector<std::size_t>{0, 100, 100, 0}));
}

TEST(ChainGraph, AParameterReadBySeveralStepsIsPendingFromItsLastReaderToItsFirst) {
  // A chain of five steps; parameter p (1000 B) is read by steps 1 and 3, q (7 B) by step 2 only.
  // p's gradient waits in its AccumulateGrad node from 3's backward through 1's (inclusive: 1 holds
  // it while adding its own); 3's own growth already counts what 3 adds.
  const std::vector<GraphStep> steps{step({-1}), step({0}), step({1}), step({2}), step({3})};
  auto prof = profiles(steps, {100, 100, 100, 100, 100});
  const int p = 0, q = 0;
  prof[1].parameters = {{&p, 1000}};
  prof[2].parameters = {{&q, 7}};
  prof[3].parameters = {{&p, 1000}};
  const auto acc = remat::detail::backward_accounting(steps, prof, 0);
  EXPECT_EQ(acc.pending, (std::vector<std::size_t>{0, 1000, 1000, 0, 0}));
  const std::size_t base = 100 + kHeld + 100 + kLoss;
  EXPECT_EQ(backward_workspaces(steps, prof), (std::vector<std::size_t>{base, base + 1000, base + 1000, base, base}));
  // A reader without a backward sends p no gradient.
  prof[1].has_backward = false;
  EXPECT_EQ(remat::detail::backward_accounting(steps, prof, 0).pending, (std::vector<std::size_t>{0, 0, 0, 0, 0}));
}

TEST(ChainGraph, TheGraphInputsGradientIsPendingBetweenItsReaders) {
  // The graph input is read by steps 0 and 2: its gradient (48 B) is pending across 1's backward.
  const std::vector<GraphStep> steps{step({-1}), step({0}), step({1, -1}), step({2})};
  const auto prof = profiles(steps, {100, 100, 100, 100});
  EXPECT_EQ(remat::detail::backward_accounting(steps, prof, 48).pending, (std::vector<std::size_t>{0, 48, 0, 0}));
  // An input needing no gradient: nothing.
  EXPECT_EQ(remat::detail::backward_accounting(steps, prof, 0).pending, (std::vector<std::size_t>{0, 0, 0, 0}));
  const std::size_t base = 100 + kHeld + 100 + kLoss;
  EXPECT_EQ(backward_workspaces(steps, prof, 48), (std::vector<std::size_t>{base, base + 48, base, base}));
}

TEST(ChainGraph, AStepWithoutBackwardHoldsOnlyTheCallersBytes) {
  const std::vector<GraphStep> steps{step({-1}), step({0})};
  auto prof = profiles(steps, {100, 100});
  prof[0].has_backward = false;
  EXPECT_EQ(backward_workspaces(steps, prof), (std::vector<std::size_t>{100 + kLoss, 100 + kHeld + 100 + kLoss}));
}

TEST(ChainGraph, ValuesOfInternalsAndViews) {
  // Step 0 saves an internal (16 B); step 1 returns a view of its input (continuing x1's value);
  // step 2 reads it and saves it; the last step's output is no value.
  const std::vector<GraphStep> steps{step({-1}), step({0}), step({1})};
  auto prof = profiles(steps, {100, 100, 300});
  prof[0].internal_saves = {1};
  prof[0].internal_bytes = 16;
  prof[0].forward_peak = 100 + 16 + 8;  // 8 B of temporaries
  prof[1].view_of = 0;
  prof[2].saves_input = {1};
  const remat::ChainGraph cg = remat::detail::build_chain_graph(steps, prof, context());
  ASSERT_EQ(cg.graph.values.size(), 2u);
  EXPECT_EQ(cg.graph.values[0].name, "int 0");
  EXPECT_EQ(cg.graph.values[0].bytes, 16u);
  EXPECT_EQ(cg.graph.values[0].recompute_workspace_bytes, 100u + 8u);
  EXPECT_EQ(cg.graph.values[1].name, "x 1");
  EXPECT_EQ(cg.internal_value, (std::vector<int64_t>{0, -1, -1}));
  EXPECT_EQ(cg.output_value, (std::vector<int64_t>{1, 1, -1}));
  EXPECT_EQ(cg.input_values[2], (std::vector<int64_t>{1}));
  EXPECT_EQ(cg.graph.values[1].last_forward_use, 2);
  EXPECT_EQ(cg.graph.values[1].backward_use, 2);
  EXPECT_EQ(cg.graph.ops[0].workspace_bytes, 8u);    // the forward peak beyond x1 and the internal
  EXPECT_EQ(cg.graph.ops[1].workspace_bytes, 100u);  // a view step's output is its input's value
}

TEST(MoveSchedule, StreamsOnlyValuesWithAGap) {
  // A -> B -> C -> D; x_i (A's, B's, C's outputs) saved by the next op's backward. Points: 0-3
  // forward, 4 D', 5 C', 6 B', 7 A'. Copies far faster than the steps: a move takes one point.
  remat::PlanGraph g;
  g.ops = {{"A", "A", 1, 1, 0, {}}, {"B", "B", 1, 1, 0, {}}, {"C", "C", 1, 1, 0, {}}, {"D", "D", 1, 1, 0, {}}};
  g.values = {{"x0", 10, 0, 1, 1, {}, {}, 0}, {"x1", 10, 1, 2, 2, {0}, {}, 0}, {"x2", 10, 2, 3, 3, {1}, {}, 0}};
  g.bandwidth = {1e6, 1e6};
  g.timed_moves = true;
  const std::vector<Decision> stream(3, Decision::Stream);
  const auto w = remat::value_windows(g);
  // x0 (last forward use 1, needed at 6): resident while its eviction runs (2), gone at 3 and 4,
  // fetched from 5. x1 (needed at 5): its eviction would end at 3 and its fetch start at 4: no gap.
  // x2 (needed at 4, right after its last forward use): none either.
  ASSERT_EQ(w[0].own.evict_until, 2);
  ASSERT_EQ(w[0].own.stream_from, 5);
  ASSERT_EQ(w[1].own.evict_until, 3);
  ASSERT_EQ(w[1].own.stream_from, 4);
  ASSERT_EQ(w[2].own.last, 4);
  const auto s = remat::detail::schedule_moves(g, stream);
  EXPECT_EQ(s.moves, (std::vector<char>{1, 0, 0}));
  EXPECT_EQ(s.evict_after, (std::vector<std::vector<int64_t>>{{}, {0}, {}, {}}));
  EXPECT_EQ(s.wait_evict_at, (std::vector<std::vector<int64_t>>{{}, {}, {}, {0}, {}, {}, {}, {}}));
  EXPECT_EQ(s.prefetch_at, (std::vector<std::vector<int64_t>>{{}, {}, {}, {}, {}, {0}, {}, {}}));
  // Kept or recomputed: nothing moves.
  const auto k = remat::detail::schedule_moves(g, {Decision::Keep, Decision::Recompute, Decision::Keep});
  EXPECT_EQ(k.moves, (std::vector<char>{0, 0, 0}));
  for (const auto& at : k.prefetch_at) EXPECT_TRUE(at.empty());
}

}  // namespace
}  // namespace strata_test
