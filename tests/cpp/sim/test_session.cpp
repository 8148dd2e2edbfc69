// sim::SimSession (ops/sim/backend_sim.h, Note [Sim session]): unmodified nn-module models run on
// the `sim` backend — their ops recorded through the ops' recording hook — train like the CPU
// backend (losses, gradients, parameters), come back with the simulator's report, and bad input
// (unsupported ops and attributes, wrong loss, backward twice, nesting) fails by name.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "autograd/engine.h"
#include "autograd/grad_mode.h"
#include "core/factories.h"
#include "core/rng.h"
#include "models/activation.h"
#include "models/container.h"
#include "models/conv.h"
#include "models/linear.h"
#include "models/optim/sgd.h"
#include "models/pooling.h"
#include "ops/backend.h"
#include "ops/binary.h"
#include "ops/conv.h"
#include "ops/linalg.h"
#include "ops/pooling.h"
#include "ops/shape_ops.h"
#include "ops/sim/backend_sim.h"
#include "ops/softmax_loss.h"
#include "ops/unary.h"
#include "tests/cpp/error_text.h"
#include "tests/cpp/sim/compare.h"

using namespace strata;
using namespace strata::sim;

namespace {

using testing_util::max_abs;
using testing_util::max_rel_diff;

std::shared_ptr<nn::Sequential> make_mlp(uint64_t seed) {
  Generator g(seed);
  return std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Linear>(8, 16, true, &g), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Linear>(16, 12, true, &g), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Linear>(12, 4, true, &g)});
}

// LeNet-5's topology at 32x32 (TapeFlow's Table II benchmark: conv 5x5, pool 2, conv 5x5, pool 2,
// three dense layers) with its channel and dense widths scaled down (6, 16, 120, 84 -> 2, 4, 32,
// 24): the full widths take ~9 s per step at batch 1, nearly all of it in the machine simulation.
// One ReLU and one max pool beside the classic tanh and average pooling so every lowered module runs.
std::shared_ptr<nn::Sequential> make_lenet(uint64_t seed) {
  Generator g(seed);
  using nn::Size2;
  return std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Conv2d>(1, 2, Size2(5), Size2(1), Size2(0), Size2(1), 1, true, "zeros", &g),
      std::make_shared<nn::Tanh>(), std::make_shared<nn::AvgPool2d>(Size2(2)),
      std::make_shared<nn::Conv2d>(2, 4, Size2(5), Size2(1), Size2(0), Size2(1), 1, true, "zeros", &g),
      std::make_shared<nn::ReLU>(), std::make_shared<nn::MaxPool2d>(Size2(2)), std::make_shared<nn::Flatten>(),
      std::make_shared<nn::Linear>(4 * 5 * 5, 32, true, &g), std::make_shared<nn::Tanh>(),
      std::make_shared<nn::Linear>(32, 24, true, &g), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Linear>(24, 10, true, &g)});
}

void expect_report_nonzero(const SimStepReport& r) {
  for (const MachineReport* m : {&r.enzyme, &r.tapeflow}) {
    EXPECT_GT(m->fwd.cycles, 0u) << m->system;
    EXPECT_GT(m->rev.cycles, 0u) << m->system;
    EXPECT_GT(m->dram_bytes(), 0u) << m->system;
    EXPECT_GT(m->energy.total_pj(), 0.0) << m->system;
  }
  EXPECT_EQ(r.enzyme.system, "Enzyme_32k");
  EXPECT_EQ(r.tapeflow.system, "Tflow_32k");
  EXPECT_GT(r.instrs, 0u);
  EXPECT_GT(r.tape_bytes, 0u);
}

}  // namespace

TEST(SimSession, MlpTrainsLikeTheCpuBackend) {
  auto cpu = make_mlp(41), sim = make_mlp(41);
  const std::vector<Tensor> pc = cpu->parameters(), ps = sim->parameters();
  ASSERT_EQ(pc.size(), 6u);
  for (size_t i = 0; i < pc.size(); ++i) ASSERT_EQ(max_rel_diff(pc[i], ps[i]), 0.0) << "same init";
  optim::SGD opt_cpu(pc, {.lr = 0.5}), opt_sim(ps, {.lr = 0.5});
  Generator g(5);
  const Tensor x = uniform({6, 8}, -1.0, 1.0, {}, &g);
  const Tensor target = tensor(std::vector<int64_t>{0, 3, 1, 2, 3, 1});

  for (int it = 0; it < 3; ++it) {
    Tensor cpu_loss = cross_entropy((*cpu)(x), target);
    cpu_loss.backward();

    // The sim model's loss computed on the CPU backend, with its current parameters (after the
    // first step they differ from the CPU model's by the f64-vs-f32 rounding of the gradients).
    Tensor sim_params_cpu_loss;
    {
      autograd::NoGradGuard no_grad;
      sim_params_cpu_loss = cross_entropy((*sim)(x), target);
    }
    SimSession session;
    EXPECT_EQ(&current_backend(), &sim_backend());
    Tensor logits = (*sim)(x);
    Tensor loss = cross_entropy(logits, target);
    // The forward values are the CPU kernels' (the trace records the same computation).
    EXPECT_EQ(max_rel_diff(loss, sim_params_cpu_loss), 0.0) << "step " << it;
    EXPECT_LT(max_rel_diff(loss, cpu_loss), 1e-5) << "step " << it;
    const SimStepReport r = session.backward(loss);
    session.end();
    EXPECT_EQ(&current_backend(), &cpu_backend());

    EXPECT_NEAR(r.loss, cpu_loss.item<float>(), 1e-5) << "step " << it;
    ASSERT_EQ(session.parameters().size(), ps.size());
    EXPECT_EQ(r.ops, 6u);  // 3 linear + 2 relu + cross_entropy
    EXPECT_EQ(session.ops(), r.ops);
    for (size_t i = 0; i < ps.size(); ++i) {
      // Parameters are found in first-use order: the module order here.
      EXPECT_TRUE(session.parameters()[i].shares_storage(ps[i])) << i;
      ASSERT_TRUE(ps[i].grad().defined()) << i;
      EXPECT_EQ(ps[i].grad().dtype(), DType::f32);
      EXPECT_GT(max_abs(pc[i].grad()), 1e-4) << "the reference gradient must not be trivially zero";
      EXPECT_LT(max_rel_diff(ps[i].grad(), pc[i].grad()), 2e-5) << "step " << it << " param " << i;
      EXPECT_LT(max_rel_diff(r.grads[i], pc[i].grad()), 2e-5) << "step " << it << " param " << i;
    }
    if (it == 0) expect_report_nonzero(r);
    opt_cpu.step();
    opt_sim.step();
    opt_cpu.zero_grad();
    opt_sim.zero_grad();
  }
  for (size_t i = 0; i < pc.size(); ++i) {
    EXPECT_GT(max_rel_diff(pc[i], make_mlp(41)->parameters()[i]), 1e-3) << "training moved param " << i;
    EXPECT_LT(max_rel_diff(ps[i], pc[i]), 1e-5) << "param " << i << " after 3 steps";
  }
}

TEST(SimSession, Lenet5StepMatchesCpuAutograd) {
  auto cpu = make_lenet(7), sim = make_lenet(7);
  Generator g(9);
  const Tensor x = uniform({2, 1, 32, 32}, -1.0, 1.0, {}, &g);
  const Tensor target = tensor(std::vector<int64_t>{7, 2});
  Tensor cpu_loss = cross_entropy((*cpu)(x), target);
  cpu_loss.backward();

  SimSession session;
  Tensor loss = cross_entropy((*sim)(x), target);
  const SimStepReport r = session.backward(loss);
  EXPECT_NEAR(r.loss, cpu_loss.item<float>(), 1e-5);
  EXPECT_EQ(r.ops, 13u);  // 12 modules (Flatten is one reshape) + cross_entropy
  const std::vector<Tensor> pc = cpu->parameters(), ps = sim->parameters();
  ASSERT_EQ(session.parameters().size(), pc.size());
  for (size_t i = 0; i < pc.size(); ++i) {
    EXPECT_GT(max_abs(pc[i].grad()), 1e-5) << i;
    EXPECT_LT(max_rel_diff(ps[i].grad(), pc[i].grad()), 2e-5) << "param " << i;
  }
  expect_report_nonzero(r);
  EXPECT_EQ(r.tapeflow.cache.cls[1].accesses(), 0u);  // TapeFlow keeps tape accesses out of the cache
  EXPECT_GT(r.enzyme.cache.cls[1].accesses(), 0u);
}

TEST(SimSession, OpFunctionsTiedWeightsViewsAndAccumulation) {
  // Op functions directly: a weight used twice, a flatten view, a residual add, a matmul, a raw
  // view and a detach (both cut from the graph, as CPU autograd cuts them), f64 parameters and
  // gradients accumulated on top of existing ones.
  Generator g(3);
  const TensorOptions f64{DType::f64};
  const Tensor x = uniform({3, 2, 2}, -1.0, 1.0, f64, &g);
  Tensor w = uniform({4, 4}, -0.5, 0.5, f64, &g), b = uniform({4}, -0.1, 0.1, f64, &g);
  Tensor m = uniform({4, 5}, -0.5, 0.5, f64, &g);
  for (Tensor* t : {&w, &b, &m}) t->requires_grad_(true);
  const Tensor target = tensor(std::vector<int64_t>{4, 0, 2});
  auto forward = [&]() {
    const Tensor h0 = flatten(x, 1);                                       // [3, 4]
    const Tensor h1 = relu(linear(h0, w, b));                              // first use of w
    const Tensor h2 = add(linear(h1, w, Tensor(), Activation::Tanh), h1);  // second use, residual
    const Tensor cut = add(h2.view({3, 4}), h2.detach());                  // no gradient through these
    return cross_entropy(add(matmul(h2, m), matmul(cut, m)), target);
  };
  Tensor ref = forward();
  ref.backward();
  const Tensor gw = w.grad().clone(), gb = b.grad().clone(), gm = m.grad().clone();
  // w and b keep the reference gradient (the session adds the simulated one); m has none.
  m.set_grad(Tensor());

  SimSession session;
  Tensor loss = forward();
  const SimStepReport r = session.backward(loss);
  session.end();  // back on the CPU backend for the checks (mul is not a sim op)
  EXPECT_NEAR(r.loss, ref.item<double>(), 1e-12);
  ASSERT_EQ(session.parameters().size(), 3u);  // w once, b, m
  EXPECT_LT(max_rel_diff(r.grads[0], gw), 1e-12);
  EXPECT_LT(max_rel_diff(w.grad(), mul(gw, 2.0)), 1e-12) << "accumulated onto the existing .grad";
  EXPECT_LT(max_rel_diff(b.grad(), mul(gb, 2.0)), 1e-12);
  EXPECT_LT(max_rel_diff(m.grad(), gm), 1e-12) << "set when undefined";
  EXPECT_EQ(w.grad().dtype(), DType::f64);
}

TEST(SimSession, UnsupportedOpsAndAttributes) {
  const Tensor x = ones({1, 1, 4, 4});
  Tensor w = ones({1, 1, 3, 3});
  w.requires_grad_(true);
  {
    SimSession s;
    EXPECT_ERROR_HAS(sigmoid(x), "sigmoid: not supported by the 'sim' backend");
    EXPECT_ERROR_HAS(nn::Sigmoid()(x), "sigmoid: not supported by the 'sim' backend");
    // Not recorded, so the trace is still whole.
    EXPECT_ERROR_HAS(s.backward(x), "no loss was recorded; end the forward with cross_entropy");
  }
  auto fails_and_poisons = [&](const std::function<void()>& op, const std::string& text) {
    SimSession s;
    EXPECT_ERROR_HAS(op(), text);
    Tensor logits = linear(ones({2, 3}), ones({2, 3}));
    Tensor loss = cross_entropy(logits, tensor(std::vector<int64_t>{0, 1}));
    EXPECT_ERROR_HAS(s.backward(loss), "an op failed to record in this session, so its trace is incomplete");
  };
  fails_and_poisons([&] { conv2d(ones({1, 1, 6, 6}), w, Tensor(), {1, 1}, {0, 0}, {2, 2}); },
                    "conv2d: the 'sim' backend lowers equal strides and paddings in both dims, dilation 1 and groups "
                    "1; got stride [1, 1], padding [0, 0], dilation [2, 2], groups 1");
  fails_and_poisons([&] { conv2d(x, w, Tensor(), {1, 2}); }, "got stride [1, 2]");
  fails_and_poisons([&] { max_pool2d(x, {2, 2}, {2, 2}, {1, 1}); },
                    "max_pool2d: the 'sim' backend lowers square kernels and strides without padding or dilation; "
                    "got kernel [2, 2], stride [2, 2], padding [1, 1]");
  fails_and_poisons([&] { avg_pool2d(x, {3, 3}, {2, 2}, {0, 0}, true); },
                    "avg_pool2d: the 'sim' backend lowers floor-mode pooling; ceil_mode adds partial windows");
  fails_and_poisons([&] { add(x, 1.0); }, "add: the 'sim' backend lowers tensor + tensor only, not tensor + scalar");
  fails_and_poisons([&] { add(x, x, 2.0); }, "add: the 'sim' backend lowers a + b only (alpha 1), got alpha 2");
  fails_and_poisons([&] { linear(ones({2, 3}), ones({4, 3}), Tensor(), Activation::GELU); },
                    "linear: activation must be None, ReLU or Tanh on the sim backend");
  fails_and_poisons([&] { matmul(ones({2, 2, 3}), ones({3, 2})); }, "matmul: expected two matrices, got [2, 2, 3]");
  fails_and_poisons([&] { add(ones({2, 3}), ones({3})); },
                    "add: shapes must be equal on the sim backend, got [2, 3] and [3]");
  const Tensor logits = zeros({2, 3});
  const Tensor target = tensor(std::vector<int64_t>{0, 2});
  for (auto bad : std::vector<std::function<void()>>{
           [&] { cross_entropy(logits, target, ones({3})); },
           [&] { cross_entropy(logits, target, Tensor(), Reduction::Sum); },
           [&] { cross_entropy(logits, target, Tensor(), Reduction::Mean, -100, 0.1); }}) {
    SimSession s;
    EXPECT_ERROR_HAS(bad(),
                     "cross_entropy: the 'sim' backend lowers the mean over class-index targets without "
                     "class weights or label smoothing");
  }
  {
    SimSession s;
    EXPECT_ERROR_HAS(cross_entropy(logits, target, Tensor(), Reduction::Mean, 2),
                     "cross_entropy: the 'sim' backend does not lower ignore_index; target[1] = 2 is the ignore_index");
  }
  // Every failed session restored the CPU backend and removed its recorder.
  EXPECT_EQ(&current_backend(), &cpu_backend());
  EXPECT_EQ(ops::detail::op_recorder(), nullptr);
  EXPECT_NO_THROW(sigmoid(x));
}

TEST(SimSession, BadUse) {
  Tensor w = ones({3, 2});
  w.requires_grad_(true);
  const Tensor x = ones({4, 2});
  const Tensor target = tensor(std::vector<int64_t>{0, 1, 2, 0});
  {
    SimSession s;
    Tensor logits = linear(x, w);
    EXPECT_ERROR_HAS(SimSession(),
                     "sim::SimSession(session)::SimSession: another sim session (an op recorder) is "
                     "active on this thread; sessions do not nest");
    EXPECT_EQ(&current_backend(), &sim_backend()) << "the refused nested session changed nothing";
    Tensor loss = cross_entropy(logits, target);
    EXPECT_ERROR_HAS(s.backward(logits), "sim::SimSession(session)::backward: Tensor[4, 3] f32 is not the loss");
    EXPECT_ERROR_HAS(s.backward(logits), "is not the loss this session recorded (the output of its cross_entropy");
    EXPECT_ERROR_HAS(s.backward(loss.detach()), "is not the loss this session recorded");
    EXPECT_ERROR_HAS(relu(logits),
                     "relu: the 'sim' session 'session' already recorded its loss (cross_entropy must "
                     "be the last op of the step)");
    EXPECT_ERROR_HAS(s.backward(Tensor()), "backward: the loss is undefined");
    const SimStepReport r = s.backward(loss);
    EXPECT_NEAR(r.loss, loss.item<float>(), 1e-6);
    EXPECT_ERROR_HAS(s.backward(loss),
                     "backward() already ran for this session; record the next step in a new session");
    EXPECT_ERROR_HAS(relu(logits),
                     "relu: the 'sim' session 'session' already ran backward(); ops after it are not "
                     "recorded (start a new session)");
  }
  {
    // A session records into its own SimStep: it cannot start while another SimStep records.
    SimStep open("open");
    EXPECT_ERROR_HAS(SimSession(), "another tracer is already current on this thread");
    EXPECT_EQ(&current_backend(), &cpu_backend());
    EXPECT_EQ(ops::detail::op_recorder(), nullptr);
  }
  {
    SimSession s;
    Tensor a = linear(x, w);
    w.bump_version();  // as an in-place update would
    EXPECT_ERROR_HAS(linear(x, w),
                     "linear: input Tensor[3, 2] f32 (a parameter of the 'sim' session) was modified in place "
                     "after the session first used it");
  }
  {
    SimSession s;
    Tensor loss = cross_entropy(linear(x, w), target);
    s.end();
    EXPECT_FALSE(s.active());
    EXPECT_EQ(&current_backend(), &cpu_backend());
    EXPECT_ERROR_HAS(s.backward(loss), "the session ended before backward(); call backward() inside the session");
    SimSession next;  // end() released the thread's tracer
    EXPECT_TRUE(next.active());
  }
  {
    SimStepOptions o;
    o.tapeflow_system = "Tflow_3k";
    EXPECT_ERROR_HAS(SimSession{o}, "unknown system 'Tflow_3k'");
    o.tapeflow_system = "Tflow_2k";
    o.enzyme_system = "Tflow_1k";
    EXPECT_ERROR_HAS(SimSession{o},
                     "sim::SimSession(session)::SimSession: enzyme_system 'Tflow_1k' is not an "
                     "Enzyme_<size> system");
    EXPECT_EQ(ops::detail::op_recorder(), nullptr);
  }
  {
    // backward() drops the tensors the session held (the activations live no longer than the
    // user's own references and the CPU autograd graph behind the loss).
    SimSession s;
    WeakStorage hidden;
    {
      const Tensor h = relu(linear(x, w));
      hidden = WeakStorage(h.storage());
      Tensor loss = cross_entropy(h, target);
      s.backward(loss);
      EXPECT_TRUE(hidden.version().has_value());
    }
    EXPECT_FALSE(hidden.version().has_value()) << "the session still holds an activation after backward()";
  }
  // A session belongs to its thread: another thread runs on the CPU backend, unrecorded.
  SimSession s;
  Backend* other = nullptr;
  ops::detail::OpRecorder* other_recorder = reinterpret_cast<ops::detail::OpRecorder*>(1);
  std::thread t([&] {
    other = &current_backend();
    other_recorder = ops::detail::op_recorder();
  });
  t.join();
  EXPECT_EQ(other, &cpu_backend());
  EXPECT_EQ(other_recorder, nullptr);
}
