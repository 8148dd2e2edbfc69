// checkpoint() and checkpoint_sequential(): gradients bitwise equal to the plain forward, nothing of
// the segment kept, recomputed values freed as used, RNG preserved, nesting, random DAGs, errors.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>

#include "autograd/engine.h"
#include "autograd/remat/checkpoint.h"
#include "core/factories.h"
#include "core/pin_set.h"
#include "core/rng.h"
#include "ops/binary.h"
#include "ops/linalg.h"
#include "ops/reduction.h"
#include "ops/shape_ops.h"
#include "ops/unary.h"
#include "tests/cpp/autograd/graph_util.h"
#include "tests/cpp/bitwise.h"
#include "tests/cpp/core/test_util.h"

namespace strata_test {
namespace {

using namespace strata;
using autograd::TensorList;
using ::testing::HasSubstr;

using testing_util::bytes_of;
using testing_util::same_bits;

Tensor param(IntArrayRef sizes, Generator& gen) {
  Tensor t = randn(sizes, {}, &gen);
  t.set_requires_grad(true);
  return t;
}

void clear_grads(const TensorList& ts) {
  for (Tensor t : ts) t.set_grad(Tensor());
}

TensorList grads_of(const TensorList& ts) {
  TensorList g;
  for (const Tensor& t : ts) g.push_back(t.grad().defined() ? t.grad().clone() : Tensor());
  return g;
}

struct Mlp {
  TensorList params;
  explicit Mlp(int layers, int64_t width, uint64_t seed) {
    Generator gen(seed);
    for (int i = 0; i < layers; ++i) {
      params.push_back(param({width, width}, gen));
      params.push_back(param({width}, gen));
    }
  }
  Tensor layer(int i, const Tensor& x) const { return tanh(linear(x, params[2 * i], params[2 * i + 1])); }
};

TEST(Checkpoint, GradientsAreBitwiseThoseOfThePlainForward) {
  Mlp m(4, 16, 1);
  Generator gen(2);
  Tensor x = randn({8, 16}, {}, &gen).set_requires_grad();
  TensorList leaves = m.params;
  leaves.push_back(x);

  Tensor y = x;
  for (int i = 0; i < 4; ++i) y = m.layer(i, y);
  sum(y).backward();
  TensorList ref = grads_of(leaves);
  clear_grads(leaves);

  int runs = 0;
  auto seg = [&](int a, int b) {
    return [&, a, b](const TensorList& in) -> TensorList {
      ++runs;
      Tensor h = in[0];
      for (int i = a; i < b; ++i) h = m.layer(i, h);
      return {h};
    };
  };
  Tensor h = remat::checkpoint(seg(0, 2), {x})[0];
  Tensor out = remat::checkpoint(seg(2, 4), {h})[0];
  EXPECT_EQ(runs, 2);
  EXPECT_TRUE(same_bits(out, y));
  sum(out).backward();
  EXPECT_EQ(runs, 4);  // each segment re-ran exactly once
  TensorList got = grads_of(leaves);
  for (std::size_t i = 0; i < leaves.size(); ++i) EXPECT_TRUE(same_bits(got[i], ref[i])) << "leaf " << i;
}

TEST(Checkpoint, KeepsNothingOfTheSegmentAfterTheForward) {
  Mlp m(2, 8, 3);
  Generator gen(4);
  Tensor x = randn({4, 8}, {}, &gen).set_requires_grad();
  WeakStorage hidden;
  auto fn = [&](const TensorList& in) -> TensorList {
    Tensor h = m.layer(0, in[0]);
    hidden = WeakStorage(h.storage());
    return {m.layer(1, h)};
  };
  {
    Tensor plain = fn({x})[0];
    EXPECT_TRUE(hidden.version().has_value());  // the plain graph keeps the hidden layer (saved by linear)
  }
  Tensor out = remat::checkpoint(fn, {x})[0];
  EXPECT_FALSE(hidden.version().has_value());  // the checkpointed one does not
  sum(out).backward();
  EXPECT_TRUE(x.grad().defined());
}

// A test op that saves its input and, in backward, reports the saved value's storage.
std::vector<WeakStorage>* probe_log = nullptr;
std::vector<bool>* probe_seen_alive = nullptr;

Tensor probe(const Tensor& a) {
  Tensor out = map2(a, a, [](double x, double) { return 2 * x; });
  if (autograd::needs_grad({&a})) {
    auto node = autograd::make_node("ProbeBackward", {&a}, [](autograd::Node& n, const TensorList& g) -> TensorList {
      // Before using its own value: is the value the previously run probe used still alive?
      if (!probe_log->empty()) probe_seen_alive->push_back(probe_log->back().version().has_value());
      Tensor s = n.saved(0);
      probe_log->push_back(WeakStorage(s.storage()));
      return {map2(g[0], s, [](double gg, double) { return 2 * gg; })};
    });
    node->save(a);
    autograd::set_history({&out}, node);
  }
  return out;
}

TEST(Checkpoint, RecomputedValuesAreFreedAsSoonAsTheirNodeRan) {
  std::vector<WeakStorage> log;
  std::vector<bool> alive;
  probe_log = &log;
  probe_seen_alive = &alive;
  Tensor x = f64({1, 2, 3}).set_requires_grad();
  Tensor out = remat::checkpoint(
      [](const TensorList& in) -> TensorList {
        Tensor h = tmul(in[0], in[0]);
        return {probe(probe(probe(h)))};
      },
      {x})[0];
  out.backward(f64({1, 1, 1}));
  ASSERT_EQ(log.size(), 3u);
  EXPECT_EQ(alive, (std::vector<bool>{false, false}));
  EXPECT_EQ(values(x.grad()), (std::vector<double>{16, 32, 48}));
  probe_log = nullptr;
  probe_seen_alive = nullptr;
}

TEST(Checkpoint, DropoutRecomputesTheSameMaskAndRestoresTheGenerator) {
  Mlp m(2, 32, 5);
  Generator gen(6);
  Tensor x = randn({16, 32}, {}, &gen).set_requires_grad();
  TensorList leaves = m.params;
  leaves.push_back(x);
  auto fn = [&](const TensorList& in) -> TensorList { return {m.layer(1, dropout(m.layer(0, in[0]), 0.5, true))}; };
  manual_seed(123);
  sum(fn({x})[0]).backward();
  TensorList ref = grads_of(leaves);
  const uint64_t ref_offset = default_generator().offset();
  clear_grads(leaves);

  manual_seed(123);
  Tensor out = remat::checkpoint(fn, {x})[0];
  EXPECT_EQ(default_generator().offset(), ref_offset);
  rand({5});  // draws between forward and backward must not leak into the recompute
  const uint64_t before_backward = default_generator().offset();
  sum(out).backward();
  EXPECT_EQ(default_generator().offset(), before_backward);
  TensorList got = grads_of(leaves);
  for (std::size_t i = 0; i < leaves.size(); ++i) EXPECT_TRUE(same_bits(got[i], ref[i])) << "leaf " << i;
  clear_grads(leaves);

  // Without preserving the state the recompute draws another mask: the gradients differ.
  manual_seed(123);
  Tensor out2 = remat::checkpoint(fn, {x}, /*preserve_rng_state=*/false)[0];
  sum(out2).backward();
  EXPECT_FALSE(same_bits(x.grad(), ref.back()));
}

TEST(Checkpoint, NestedCheckpoints) {
  Mlp m(4, 12, 7);
  Generator gen(8);
  Tensor x = randn({5, 12}, {}, &gen).set_requires_grad();
  TensorList leaves = m.params;
  leaves.push_back(x);
  Tensor y = x;
  for (int i = 0; i < 4; ++i) y = m.layer(i, y);
  sum(y).backward();
  TensorList ref = grads_of(leaves);
  clear_grads(leaves);

  int outer_runs = 0, inner_runs = 0;
  auto inner = [&](const TensorList& in) -> TensorList {
    ++inner_runs;
    return {m.layer(2, m.layer(1, in[0]))};
  };
  auto outer = [&](const TensorList& in) -> TensorList {
    ++outer_runs;
    Tensor h = m.layer(0, in[0]);
    h = remat::checkpoint(inner, {h})[0];
    return {m.layer(3, h)};
  };
  Tensor out = remat::checkpoint(outer, {x})[0];
  sum(out).backward();
  EXPECT_EQ(outer_runs, 2);
  EXPECT_EQ(inner_runs, 3);  // forward, inside the outer recompute, and its own recompute
  TensorList got = grads_of(leaves);
  for (std::size_t i = 0; i < leaves.size(); ++i) EXPECT_TRUE(same_bits(got[i], ref[i])) << "leaf " << i;
}

TEST(Checkpoint, NestedCheckpointsWithDropoutReplayTheGenerator) {
  Mlp m(3, 16, 15);
  Generator gen(16);
  Tensor x = randn({8, 16}, {}, &gen).set_requires_grad();
  TensorList leaves = m.params;
  leaves.push_back(x);
  auto inner = [&](const TensorList& in) -> TensorList { return {dropout(m.layer(1, in[0]), 0.4, true)}; };
  auto body = [&](const TensorList& in, bool nested) -> TensorList {
    Tensor h = dropout(m.layer(0, in[0]), 0.4, true);
    h = nested ? remat::checkpoint(inner, {h})[0] : inner({h})[0];
    return {dropout(m.layer(2, h), 0.4, true)};
  };
  manual_seed(99);
  sum(body({x}, false)[0]).backward();
  TensorList ref = grads_of(leaves);
  clear_grads(leaves);
  manual_seed(99);
  Tensor out = remat::checkpoint([&](const TensorList& in) { return body(in, true); }, {x})[0];
  sum(out).backward();
  TensorList got = grads_of(leaves);
  for (std::size_t i = 0; i < leaves.size(); ++i) EXPECT_TRUE(same_bits(got[i], ref[i])) << "leaf " << i;
}

TEST(Checkpoint, RetainGraphAllowsASecondBackward) {
  Mlp m(2, 6, 9);
  Generator gen(10);
  Tensor x = randn({3, 6}, {}, &gen).set_requires_grad();
  int runs = 0;
  Tensor out = remat::checkpoint(
      [&](const TensorList& in) -> TensorList {
        ++runs;
        return {m.layer(1, m.layer(0, in[0]))};
      },
      {x})[0];
  Tensor loss = sum(out);
  loss.backward(Tensor(), /*retain_graph=*/true);
  Tensor g1 = x.grad().clone();
  x.set_grad(Tensor());
  loss.backward();
  EXPECT_TRUE(same_bits(x.grad(), g1));
  EXPECT_EQ(runs, 2);
}

TEST(Checkpoint, UnderNoGradJustRunsTheFunction) {
  Mlp m(1, 4, 11);
  Tensor x = ones({2, 4});
  autograd::NoGradGuard no_grad;
  Tensor out = remat::checkpoint([&](const TensorList& in) -> TensorList { return {m.layer(0, in[0])}; }, {x})[0];
  EXPECT_FALSE(out.requires_grad());
}

// Random DAGs of ops, with segments over several inputs and outputs (and a nested one).
struct Program {
  struct Op {
    int kind;  // 0 add, 1 mul, 2 tanh, 3 linear(param), 4 sigmoid of a, times b
    int a, b, p;
  };
  int num_inputs;
  std::vector<Op> ops;
  TensorList params;

  Program(uint64_t seed, int inputs, int n_ops, int64_t width) : num_inputs(inputs) {
    std::mt19937_64 rng(seed);
    Generator gen(seed + 1);
    for (int i = 0; i < 3; ++i) params.push_back(param({width, width}, gen));
    for (int i = 0; i < n_ops; ++i) {
      const int avail = inputs + i;
      Op op{static_cast<int>(rng() % 5), static_cast<int>(rng() % avail), static_cast<int>(rng() % avail),
            static_cast<int>(rng() % 3)};
      // Bias towards recent values so the DAG is deep.
      if (rng() % 2 == 0) op.a = avail - 1;
      ops.push_back(op);
    }
  }
  Tensor apply(const Op& op, const TensorList& env) const {
    const Tensor& a = env[op.a];
    const Tensor& b = env[op.b];
    switch (op.kind) {
      case 0: return add(a, b);
      case 1: return mul(a, tanh(b));
      case 2: return tanh(a);
      case 3: return linear(a, params[op.p]);
      default: return mul(sigmoid(a), b);
    }
  }
  // Runs ops [from, to) over `env` (indexed by value id; defined where known).
  void run(int from, int to, TensorList& env) const {
    for (int i = from; i < to; ++i) env[num_inputs + i] = apply(ops[i], env);
  }
  int value_count() const { return num_inputs + static_cast<int>(ops.size()); }
  // Values defined before `from` and read by ops in [from, to).
  std::vector<int> live_ins(int from, int to) const {
    std::vector<bool> used(value_count(), false);
    for (int i = from; i < to; ++i) used[ops[i].a] = used[ops[i].b] = true;
    std::vector<int> out;
    for (int v = 0; v < num_inputs + from; ++v)
      if (used[v]) out.push_back(v);
    return out;
  }
  // Values defined in [from, to) and read after it (or final: everything is part of the loss).
  std::vector<int> live_outs(int from, int to) const {
    std::vector<int> out;
    for (int i = from; i < to; ++i) out.push_back(num_inputs + i);
    return out;
  }
  void run_checkpointed(int from, int to, TensorList& env, int nest_from, int nest_to) const {
    const std::vector<int> ins = live_ins(from, to), outs = live_outs(from, to);
    TensorList in_values;
    for (int v : ins) in_values.push_back(env[v]);
    auto fn = [this, ins, outs, from, to, nest_from, nest_to](const TensorList& in) -> TensorList {
      TensorList local(value_count());
      for (std::size_t k = 0; k < ins.size(); ++k) local[ins[k]] = in[k];
      if (nest_from >= from && nest_to <= to && nest_from < nest_to) {
        run(from, nest_from, local);
        run_checkpointed(nest_from, nest_to, local, -1, -1);
        run(nest_to, to, local);
      } else {
        run(from, to, local);
      }
      TensorList result;
      for (int v : outs) result.push_back(local[v]);
      return result;
    };
    TensorList got = remat::checkpoint(fn, in_values);
    for (std::size_t k = 0; k < outs.size(); ++k) env[outs[k]] = got[k];
  }
};

TEST(Checkpoint, RandomDagsWithMultiInputOutputSegments) {
  for (uint64_t seed = 0; seed < 12; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    const int inputs = 3, n_ops = 14;
    Program prog(seed, inputs, n_ops, 6);
    Generator gen(seed + 100);
    TensorList xs;
    for (int i = 0; i < inputs; ++i) xs.push_back(randn({4, 6}, {}, &gen).set_requires_grad(i != 1));
    TensorList leaves = prog.params;
    for (int i = 0; i < inputs; ++i)
      if (i != 1) leaves.push_back(xs[i]);
    auto loss_of = [&](const TensorList& env) {
      Tensor total = sum(env[prog.value_count() - 1]);
      for (int v = inputs; v < prog.value_count() - 1; v += 3) total = add(total, sum(env[v]));
      return total;
    };

    TensorList env(prog.value_count());
    for (int i = 0; i < inputs; ++i) env[i] = xs[i];
    prog.run(0, n_ops, env);
    loss_of(env).backward();
    TensorList ref = grads_of(leaves);
    clear_grads(leaves);

    // Random cut points: segments [c0, c1) and [c2, c3), the first with a nested segment.
    std::mt19937 rng(static_cast<unsigned>(seed));
    std::vector<int> cuts;
    while (cuts.size() < 4) {
      int c = static_cast<int>(rng() % (n_ops + 1));
      if (std::find(cuts.begin(), cuts.end(), c) == cuts.end()) cuts.push_back(c);
    }
    std::sort(cuts.begin(), cuts.end());
    TensorList env2(prog.value_count());
    for (int i = 0; i < inputs; ++i) env2[i] = xs[i];
    prog.run(0, cuts[0], env2);
    const int mid = (cuts[0] + cuts[1]) / 2;
    prog.run_checkpointed(cuts[0], cuts[1], env2, mid, cuts[1]);
    prog.run(cuts[1], cuts[2], env2);
    prog.run_checkpointed(cuts[2], cuts[3], env2, -1, -1);
    prog.run(cuts[3], n_ops, env2);
    loss_of(env2).backward();
    TensorList got = grads_of(leaves);
    for (std::size_t i = 0; i < leaves.size(); ++i) EXPECT_TRUE(same_bits(got[i], ref[i])) << "leaf " << i;
  }
}

TEST(CheckpointSequential, LastSegmentIsNotCheckpointedAndGradientsMatch) {
  Mlp m(6, 10, 12);
  Generator gen(13);
  Tensor x = randn({4, 10}, {}, &gen).set_requires_grad();
  TensorList leaves = m.params;
  leaves.push_back(x);
  std::vector<int> runs(6, 0);
  std::vector<remat::StepFn> fns;
  for (int i = 0; i < 6; ++i)
    fns.push_back([&m, &runs, i](const Tensor& h) {
      ++runs[i];
      return m.layer(i, h);
    });
  Tensor y = x;
  for (auto& f : fns) y = f(y);
  sum(y).backward();
  TensorList ref = grads_of(leaves);
  clear_grads(leaves);
  runs.assign(6, 0);

  // 6 functions in 4 segments: size 1, so 0, 1, 2 are checkpointed and 3..5 form the last one.
  Tensor out = remat::checkpoint_sequential(fns, 4, x);
  sum(out).backward();
  EXPECT_EQ(runs, (std::vector<int>{2, 2, 2, 1, 1, 1}));
  TensorList got = grads_of(leaves);
  for (std::size_t i = 0; i < leaves.size(); ++i) EXPECT_TRUE(same_bits(got[i], ref[i])) << "leaf " << i;
}

TEST(CheckpointErrors, BadArguments) {
  std::vector<remat::StepFn> fns(3, [](const Tensor& t) { return tanh(t); });
  Tensor x = ones({2});
  EXPECT_THAT(ERROR_MESSAGE(remat::checkpoint_sequential(fns, 0, x)), HasSubstr("segments must be at least 1, got 0"));
  EXPECT_THAT(ERROR_MESSAGE(remat::checkpoint_sequential(fns, 4, x)),
              HasSubstr("4 segments requested for 3 functions"));
  EXPECT_THAT(ERROR_MESSAGE(remat::checkpoint_sequential({}, 1, x)), HasSubstr("no functions"));
  EXPECT_THAT(ERROR_MESSAGE(remat::checkpoint(remat::SegmentFn(), {x})), HasSubstr("function to checkpoint is empty"));
}

TEST(CheckpointErrors, NonDeterministicSegments) {
  Mlp m(2, 4, 14);
  Tensor x = ones({3, 4}).set_requires_grad();
  {
    int calls = 0;  // the re-run saves values of another shape
    Tensor out = remat::checkpoint(
        [&](const TensorList& in) -> TensorList {
          Tensor h = ++calls == 1 ? in[0] : cat({in[0], in[0]}, 0);
          return {sum(m.layer(0, h))};
        },
        {x})[0];
    const std::string msg = ERROR_MESSAGE(out.backward());
    EXPECT_THAT(msg, HasSubstr("checkpoint: value 0 saved by the recomputation has shape [6, 4]"));
    EXPECT_THAT(msg, HasSubstr("original forward saved shape [3, 4]"));
    EXPECT_THAT(msg, HasSubstr("must be deterministic"));
  }
  {
    int calls = 0;  // the re-run saves fewer values
    Tensor out = remat::checkpoint(
        [&](const TensorList& in) -> TensorList {
          Tensor h = m.layer(0, in[0]);
          if (++calls == 1) h = m.layer(1, h);
          return {sum(h)};
        },
        {x})[0];
    const std::string msg = ERROR_MESSAGE(out.backward());
    EXPECT_THAT(msg, HasSubstr("the recomputation saved"));
    EXPECT_THAT(msg, HasSubstr("must be deterministic"));
  }
  {
    int calls = 0;  // the re-run saves more values
    Tensor out = remat::checkpoint(
        [&](const TensorList& in) -> TensorList {
          Tensor h = m.layer(0, in[0]);
          if (++calls > 1) h = m.layer(1, h);
          return {sum(m.layer(0, in[0]))};
        },
        {x})[0];
    EXPECT_THAT(ERROR_MESSAGE(out.backward()), HasSubstr("saved more values for backward than the original forward"));
  }
}

}  // namespace
}  // namespace strata_test
