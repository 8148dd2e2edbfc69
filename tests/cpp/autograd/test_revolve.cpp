// Revolve: the schedule against an exhaustive search and the closed form, and every chain policy's
// gradients against StoreAll (bitwise), evaluation counts, RNG, and errors.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <bit>
#include <cstring>
#include <deque>
#include <map>

#include "autograd/engine.h"
#include "autograd/remat/chain.h"
#include "autograd/remat/revolve.h"
#include "core/factories.h"
#include "core/pin_set.h"
#include "core/rng.h"
#include "ops/binary.h"
#include "ops/linalg.h"
#include "ops/operators.h"
#include "ops/reduction.h"
#include "ops/shape_ops.h"
#include "ops/unary.h"
#include "tests/cpp/bitwise.h"
#include "tests/cpp/core/test_util.h"

namespace strata_test {
namespace {

using namespace strata;
using autograd::TensorList;
using remat::ChainPolicy;
using remat::RevolveAction;
using ::testing::HasSubstr;

// Exhaustive search over every strategy (0-1 BFS over states: current position or none, the set of
// stored positions, steps still to reverse). Advancing costs 1; storing, freeing, restoring and
// turning cost 0. Snapshots need not be used as a stack.
int64_t brute_force_advances(int n, int s) {
  struct State {
    int p;  // current position, -1 = none
    unsigned mask;
    int e;  // steps e..n-1 are reversed
  };
  auto key = [&](const State& st) { return (static_cast<int64_t>(st.e) * (n + 2) + (st.p + 1)) * (1 << n) + st.mask; };
  std::map<int64_t, int64_t> dist;
  std::deque<std::pair<State, int64_t>> dq;
  State start{0, 1u, n};
  dist[key(start)] = 0;
  dq.push_back({start, 0});
  while (!dq.empty()) {
    auto [st, d] = dq.front();
    dq.pop_front();
    if (dist[key(st)] < d) continue;
    if (st.e == 0) return d;
    auto relax = [&](State nx, int64_t cost) {
      const int64_t nd = d + cost;
      auto it = dist.find(key(nx));
      if (it != dist.end() && it->second <= nd) return;
      dist[key(nx)] = nd;
      if (cost == 0)
        dq.push_front({nx, nd});
      else
        dq.push_back({nx, nd});
    };
    if (st.p >= 0 && st.p + 1 <= st.e - 1) relax({st.p + 1, st.mask, st.e}, 1);
    if (st.p >= 0 && !(st.mask >> st.p & 1u) && std::popcount(st.mask) < s)
      relax({st.p, st.mask | 1u << st.p, st.e}, 0);
    if (st.p == st.e - 1) relax({-1, st.mask, st.e - 1}, 0);
    for (int q = 0; q < n; ++q) {
      if (!(st.mask >> q & 1u)) continue;
      relax({q, st.mask, st.e}, 0);
      relax({st.p, st.mask & ~(1u << q), st.e}, 0);
    }
  }
  return -1;
}

struct Replay {
  int64_t advances = 0;
  std::vector<int64_t> advanced;  // per step
  std::vector<int64_t> turns;
  int64_t max_slots = 0;
};

// Executes a schedule on positions only, checking that every action is legal.
Replay replay(const remat::RevolveSchedule& sched) {
  Replay r;
  const int64_t n = sched.steps;
  r.advanced.assign(n, 0);
  std::map<int64_t, int64_t> slots;
  int64_t cur = 0;  // x_0 is the current state at the start
  for (const remat::RevolveOp& op : sched.ops) {
    switch (op.action) {
      case RevolveAction::Takeshot:
        EXPECT_EQ(cur, op.position);
        EXPECT_LT(op.slot, sched.snapshots);
        slots[op.slot] = cur;
        break;
      case RevolveAction::Restore:
        EXPECT_TRUE(slots.count(op.slot));
        EXPECT_EQ(slots[op.slot], op.position);
        cur = op.position;
        break;
      case RevolveAction::Advance:
        EXPECT_EQ(cur, op.position);
        EXPECT_GT(op.target, op.position);
        for (int64_t j = op.position; j < op.target; ++j) ++r.advanced[j];
        r.advances += op.target - op.position;
        cur = op.target;
        break;
      case RevolveAction::Firsturn:
      case RevolveAction::Youturn:
        EXPECT_EQ(op.action == RevolveAction::Firsturn, r.turns.empty());
        EXPECT_EQ(cur, op.position);
        r.turns.push_back(op.position);
        cur = -1;
        break;
    }
    r.max_slots = std::max<int64_t>(r.max_slots, static_cast<int64_t>(slots.size()));
  }
  std::vector<int64_t> expected;
  for (int64_t i = n - 1; i >= 0; --i) expected.push_back(i);
  EXPECT_EQ(r.turns, expected);
  return r;
}

TEST(RevolveSchedule, MatchesExhaustiveSearchAndClosedForm) {
  for (int n = 1; n <= 9; ++n) {
    for (int s = 1; s <= n + 1; ++s) {
      SCOPED_TRACE("n=" + std::to_string(n) + " s=" + std::to_string(s));
      const auto sched = remat::revolve_schedule(n, s);
      const Replay r = replay(sched);
      const int64_t best = brute_force_advances(n, s);
      EXPECT_EQ(r.advances, best);
      EXPECT_EQ(sched.advances, best);
      EXPECT_EQ(remat::revolve_optimal_advances(n, s), best);
      EXPECT_LE(r.max_slots, s);
      // The most times a step is advanced is the repetition number.
      EXPECT_EQ(*std::max_element(r.advanced.begin(), r.advanced.end()), remat::revolve_repetitions(n, s));
    }
  }
}

TEST(RevolveSchedule, KnownValuesForLongerChains) {
  // Classic values: s = 1 reverses by recomputing from the start, n(n-1)/2 advances.
  EXPECT_EQ(remat::revolve_optimal_advances(10, 1), 45);
  EXPECT_EQ(remat::revolve_repetitions(10, 1), 9);
  // n = C(s + t, s) exactly: C(3 + 2, 3) = 10 steps with 3 snapshots need t = 2, F = 2·10 − C(5, 1) = 15.
  EXPECT_EQ(remat::revolve_repetitions(10, 3), 2);
  EXPECT_EQ(remat::revolve_optimal_advances(10, 3), 15);
  EXPECT_EQ(remat::revolve_repetitions(11, 3), 3);
  // With s >= n every state is stored once: n − 1 advances.
  EXPECT_EQ(remat::revolve_optimal_advances(50, 50), 49);
  for (int64_t n : {20, 57, 100}) {
    for (int64_t s : {2, 3, 5}) {
      const auto sched = remat::revolve_schedule(n, s);
      const Replay r = replay(sched);
      EXPECT_EQ(r.advances, remat::revolve_optimal_advances(n, s)) << n << " " << s;
      EXPECT_LE(r.max_slots, s);
      EXPECT_EQ(*std::max_element(r.advanced.begin(), r.advanced.end()), remat::revolve_repetitions(n, s));
    }
  }
}

TEST(RevolveSchedule, PrintsItsActions) {
  const std::string text = remat::revolve_schedule(3, 2).to_string();
  EXPECT_THAT(text, HasSubstr("takeshot 0 in slot 0"));
  EXPECT_THAT(text, HasSubstr("firsturn 2"));
  EXPECT_THAT(text, HasSubstr("youturn 0"));
}

TEST(RevolveSchedule, BadArguments) {
  EXPECT_THAT(ERROR_MESSAGE(remat::revolve_schedule(5, 0)), HasSubstr("at least 1 snapshot"));
  EXPECT_THAT(ERROR_MESSAGE(remat::revolve_schedule(5, 0)), HasSubstr("got 0"));
  EXPECT_THAT(ERROR_MESSAGE(remat::revolve_schedule(0, 2)), HasSubstr("at least 1 step, got 0"));
  EXPECT_THAT(ERROR_MESSAGE(remat::revolve_optimal_advances(4, -1)), HasSubstr("at least 1 snapshot"));
}

// ---- execution ------------------------------------------------------------------------------

using testing_util::bytes_of;
using testing_util::same_bits;

struct Chain {
  TensorList params;
  std::vector<remat::StepFn> steps;
  std::shared_ptr<std::vector<int64_t>> evals = std::make_shared<std::vector<int64_t>>();
  Chain(int n, int64_t width, uint64_t seed, double dropout_p = 0) {
    Generator gen(seed);
    evals->assign(n, 0);
    for (int i = 0; i < n; ++i) {
      Tensor w = (randn({width, width}, {}, &gen) * 0.5).set_requires_grad();
      Tensor b = randn({width}, {}, &gen).set_requires_grad();
      params.push_back(w);
      params.push_back(b);
      auto counter = evals;
      steps.push_back([w, b, i, counter, dropout_p](const Tensor& x) {
        ++(*counter)[i];
        Tensor h = tanh(linear(x, w, b));
        return dropout_p > 0 ? dropout(h, dropout_p, true) : h;
      });
    }
  }
  int64_t total_evals() const {
    int64_t t = 0;
    for (int64_t e : *evals) t += e;
    return t;
  }
};

std::vector<ChainPolicy> all_policies() {
  return {ChainPolicy::store_all(), ChainPolicy::recompute_all(), ChainPolicy::every_k(3), ChainPolicy::sqrt_n(),
          ChainPolicy::revolve(1),  ChainPolicy::revolve(2),      ChainPolicy::revolve(3), ChainPolicy::revolve(20)};
}

void expect_policies_match_store_all(int n, double dropout_p) {
  Chain chain(n, 12, 21, dropout_p);
  Generator gen(22);
  Tensor x = randn({6, 12}, {}, &gen).set_requires_grad();
  TensorList leaves = chain.params;
  leaves.push_back(x);
  TensorList ref;
  uint64_t ref_offset = 0;
  for (const ChainPolicy& p : all_policies()) {
    SCOPED_TRACE(p.to_string());
    for (Tensor t : leaves) t.set_grad(Tensor());
    chain.evals->assign(n, 0);
    manual_seed(77);
    Tensor y = remat::run_chain(p, chain.steps, x);
    sum(mul(y, y)).backward();
    TensorList got;
    for (const Tensor& t : leaves) got.push_back(t.grad());
    if (p.kind == remat::RematPolicy::StoreAll) {
      ref = got;
      ref_offset = default_generator().offset();
      EXPECT_EQ(chain.total_evals(), n);
      continue;
    }
    EXPECT_EQ(default_generator().offset(), ref_offset);  // backward leaves the generator where the forward did
    for (std::size_t i = 0; i < leaves.size(); ++i) EXPECT_TRUE(same_bits(got[i], ref[i])) << "leaf " << i;
    if (p.kind == remat::RematPolicy::Revolve) {
      EXPECT_EQ(chain.total_evals(), n + remat::revolve_optimal_advances(n, p.snapshots));
    }
  }
}

TEST(RunChain, EveryPolicyGivesStoreAllsGradientsBitwise) { expect_policies_match_store_all(11, 0); }

TEST(RunChain, DropoutChainsRecomputeTheSameMasks) { expect_policies_match_store_all(7, 0.3); }

TEST(RunChain, RevolveEvaluationCountIsTheOptimum) {
  for (int n : {1, 2, 5, 10, 16}) {
    for (int s : {1, 2, 3, 4}) {
      Chain chain(n, 4, 30 + n);
      Tensor x = ones({2, 4}).set_requires_grad();
      sum(remat::run_chain(ChainPolicy::revolve(s), chain.steps, x)).backward();
      EXPECT_EQ(chain.total_evals(), n + remat::revolve_optimal_advances(n, s)) << "n=" << n << " s=" << s;
      int64_t most = 0;
      for (int64_t e : *chain.evals) most = std::max(most, e);
      // Each step: advanced at most t times, recorded once.
      EXPECT_EQ(most, (n == 1 ? 0 : remat::revolve_repetitions(n, s)) + 1) << "n=" << n << " s=" << s;
      EXPECT_TRUE(x.grad().defined());
    }
  }
}

TEST(RunChain, InputThatNeedsNoGradStillGivesParameterGradients) {
  Chain chain(6, 5, 40);
  Tensor x = ones({3, 5});
  sum(remat::run_chain(ChainPolicy::store_all(), chain.steps, x)).backward();
  TensorList ref;
  for (Tensor& p : chain.params) ref.push_back(p.grad()), p.set_grad(Tensor());
  sum(remat::run_chain(ChainPolicy::revolve(2), chain.steps, x)).backward();
  for (std::size_t i = 0; i < ref.size(); ++i) EXPECT_TRUE(same_bits(chain.params[i].grad(), ref[i])) << i;
}

TEST(RunChain, Errors) {
  Chain chain(4, 3, 50);
  Tensor x = ones({1, 3}).set_requires_grad();
  EXPECT_THAT(ERROR_MESSAGE(remat::run_chain(ChainPolicy::revolve(0), chain.steps, x)),
              HasSubstr("Revolve needs at least 1 snapshot (the chain's input), got 0"));
  EXPECT_THAT(ERROR_MESSAGE(remat::run_chain(ChainPolicy::every_k(0), chain.steps, x)),
              HasSubstr("EveryK needs k >= 1 steps per segment, got 0"));
  EXPECT_THAT(ERROR_MESSAGE(remat::run_chain(ChainPolicy::store_all(), {}, x)), HasSubstr("the chain has no steps"));
  std::vector<remat::StepFn> with_hole = chain.steps;
  with_hole[2] = nullptr;
  EXPECT_THAT(ERROR_MESSAGE(remat::run_chain(ChainPolicy::sqrt_n(), with_hole, x)), HasSubstr("step 2 is empty"));

  // A Revolve step capturing a non-leaf that requires grad.
  Tensor outside = tanh(ones({1, 3}).set_requires_grad());
  std::vector<remat::StepFn> steps = chain.steps;
  steps[1] = [outside](const Tensor& h) { return mul(h, outside); };
  Tensor y = remat::run_chain(ChainPolicy::revolve(2), steps, x);
  const std::string msg = ERROR_MESSAGE(sum(y).backward());
  EXPECT_THAT(msg, HasSubstr("step 1 uses a tensor computed outside the chain"));
  EXPECT_THAT(msg, HasSubstr("TanhBackward"));

  // A non-deterministic step under Revolve.
  int calls = 0;
  std::vector<remat::StepFn> flaky = chain.steps;
  flaky[0] = [&calls](const Tensor& h) { return ++calls == 1 ? tanh(h) : cat({h, h}, 0); };
  Tensor z = remat::run_chain(ChainPolicy::revolve(1), flaky, x);
  EXPECT_THAT(ERROR_MESSAGE(sum(z).backward()), HasSubstr("steps must be deterministic"));
}

}  // namespace
}  // namespace strata_test
