// The `sim` backend (ops/sim/backend_sim.h): a training step lowered to element loops through the
// tracer gives the CPU backend's loss and gradients and a consistent simulator report; bad input.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "autograd/engine.h"
#include "core/factories.h"
#include "core/rng.h"
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

Tensor leaf(IntArrayRef sizes, double scale, uint64_t seed) {
  Generator g(seed);
  Tensor t = uniform(sizes, -scale, scale, {}, &g);
  t.requires_grad_(true);
  return t;
}

using testing_util::max_abs;
using testing_util::max_rel_diff;

struct Mlp {
  Tensor x, target;
  std::vector<Tensor> w, b;  // layer l: w[l] [out, in], b[l] [out]
};

Mlp make_mlp(const std::vector<int64_t>& widths, int64_t batch, uint64_t seed) {
  Mlp m;
  Generator g(seed);
  m.x = uniform({batch, widths[0]}, -1.0, 1.0, {}, &g);
  std::vector<int64_t> t;
  for (int64_t i = 0; i < batch; ++i) t.push_back((i * 7 + 1) % widths.back());
  m.target = tensor(t);
  for (size_t l = 0; l + 1 < widths.size(); ++l) {
    const double scale = 1.0 / std::sqrt(static_cast<double>(widths[l]));
    m.w.push_back(leaf({widths[l + 1], widths[l]}, scale, seed + 10 + l));
    m.b.push_back(leaf({widths[l + 1]}, scale, seed + 100 + l));
  }
  return m;
}

// The step on the CPU backend: ReLU between layers, cross-entropy at the end.
double cpu_mlp_step(const Mlp& m) {
  Tensor h = m.x;
  for (size_t l = 0; l < m.w.size(); ++l)
    h = linear(h, m.w[l], m.b[l], l + 1 < m.w.size() ? Activation::ReLU : Activation::None);
  Tensor loss = cross_entropy(h, m.target);
  loss.backward();
  return loss.item<float>();
}

std::string indexed(const char* prefix, size_t i) {
  std::string s(prefix);
  s += std::to_string(i);
  return s;
}

SimStepReport sim_mlp_step(const Mlp& m) {
  SimStep step("mlp");
  SimTensor h = step.data("x", m.x);
  std::vector<SimTensor> w, b;
  for (size_t l = 0; l < m.w.size(); ++l) {
    w.push_back(step.param(indexed("w", l), m.w[l]));
    b.push_back(step.param(indexed("b", l), m.b[l]));
  }
  for (size_t l = 0; l < m.w.size(); ++l)
    h = step.linear(h, w[l], b[l], l + 1 < m.w.size() ? Activation::ReLU : Activation::None);
  step.cross_entropy(h, m.target);
  return step.run();
}

}  // namespace

TEST(SimBackend, MlpStepMatchesCpuBackend) {
  const Mlp m = make_mlp({8, 16, 3}, 4, 7);
  const double cpu_loss = cpu_mlp_step(m);
  const SimStepReport r = sim_mlp_step(m);
  EXPECT_NEAR(r.loss, cpu_loss, 1e-5 * std::max(1.0, std::abs(cpu_loss)));
  ASSERT_EQ(r.grads.size(), 4u);
  for (size_t l = 0; l < 2; ++l) {
    EXPECT_EQ(r.grads[2 * l].sizes(), m.w[l].sizes());
    EXPECT_EQ(r.grads[2 * l].dtype(), DType::f32);
    EXPECT_GT(max_abs(m.w[l].grad()), 1e-3) << "the reference gradient must not be trivially zero";
    EXPECT_LT(max_rel_diff(r.grads[2 * l], m.w[l].grad()), 1e-5) << "w" << l;
    EXPECT_LT(max_rel_diff(r.grads[2 * l + 1], m.b[l].grad()), 1e-5) << "b" << l;
  }
}

TEST(SimBackend, ReportIsConsistentAndGrowsWithDepth) {
  const SimStepReport two = sim_mlp_step(make_mlp({8, 16, 3}, 4, 3));
  const SimStepReport three = sim_mlp_step(make_mlp({8, 16, 16, 3}, 4, 3));
  for (const SimStepReport* r : {&two, &three}) {
    EXPECT_GT(r->enzyme.fwd.cycles, 0u);
    EXPECT_GT(r->enzyme.rev.cycles, 0u);
    EXPECT_GT(r->tapeflow.fwd.cycles, 0u);
    EXPECT_GT(r->tapeflow.rev.cycles, 0u);
    EXPECT_GT(r->enzyme.dram_bytes(), 0u);
    EXPECT_GT(r->enzyme.energy.total_pj(), 0.0);
    EXPECT_GT(r->tape_bytes, 0u);  // the ReLUs' and the softmax's values are taped
    EXPECT_EQ(r->enzyme.system, "Enzyme_32k");
    EXPECT_EQ(r->tapeflow.system, "Tflow_32k");
    EXPECT_GT(r->tapeflow.rev.layers, 0u);
    EXPECT_LE(r->tapeflow.spad_bytes_used, 512u);
    // TapeFlow moves every tape access out of the cache.
    EXPECT_EQ(r->tapeflow.cache.cls[1].accesses(), 0u);
    EXPECT_GT(r->enzyme.cache.cls[1].accesses(), 0u);
  }
  EXPECT_EQ(two.ops, 3u);
  EXPECT_EQ(three.ops, 4u);
  EXPECT_GT(three.instrs, two.instrs);
  EXPECT_GT(three.enzyme.cycles(), two.enzyme.cycles());
  EXPECT_GT(three.tapeflow.cycles(), two.tapeflow.cycles());
  EXPECT_GT(three.tape_bytes, two.tape_bytes);
}

TEST(SimBackend, SmallLenetStepMatchesCpuBackend) {
  // conv -> relu -> max pool -> conv -> relu -> avg pool -> flatten -> linear -> add -> CE
  Generator g(11);
  const Tensor x = uniform({2, 1, 10, 10}, -1.0, 1.0, {}, &g);
  const Tensor target = tensor(std::vector<int64_t>{1, 3});
  Tensor c1w = leaf({3, 1, 3, 3}, 0.4, 21), c1b = leaf({3}, 0.1, 22);
  Tensor c2w = leaf({4, 3, 3, 3}, 0.3, 23), c2b = leaf({4}, 0.1, 24);
  Tensor fw = leaf({5, 4 * 1 * 1}, 0.5, 25), fb = leaf({5}, 0.1, 26);
  Tensor shift = leaf({2, 5}, 0.2, 27);
  // CPU: 10x10 -conv3,pad1-> 10x10 -max2-> 5x5 -conv3-> 3x3 -avg3-> 1x1
  Tensor h = relu(conv2d(x, c1w, c1b, {1, 1}, {1, 1}));
  h = max_pool2d(h, {2, 2});
  h = relu(conv2d(h, c2w, c2b));
  h = avg_pool2d(h, {3, 3});
  h = add(linear(flatten(h, 1), fw, fb), shift);
  Tensor loss = cross_entropy(h, target);
  loss.backward();

  SimStep step("lenet_small");
  SimTensor sx = step.data("x", x);
  SimTensor s1w = step.param("c1w", c1w), s1b = step.param("c1b", c1b);
  SimTensor s2w = step.param("c2w", c2w), s2b = step.param("c2b", c2b);
  SimTensor sfw = step.param("fw", fw), sfb = step.param("fb", fb), ssh = step.param("shift", shift);
  SimTensor sh = step.relu(step.conv2d(sx, s1w, s1b, 1, 1));
  sh = step.max_pool2d(sh, 2);
  sh = step.relu(step.conv2d(sh, s2w, s2b));
  sh = step.avg_pool2d(sh, 3);
  sh = step.add(step.linear(step.flatten(sh), sfw, sfb), ssh);
  EXPECT_EQ(sh.shape, (std::vector<int64_t>{2, 5}));
  step.cross_entropy(sh, target);
  const SimStepReport r = step.run();

  EXPECT_NEAR(r.loss, loss.item<float>(), 1e-5);
  const std::vector<Tensor> ref = {c1w, c1b, c2w, c2b, fw, fb, shift};
  ASSERT_EQ(r.grads.size(), ref.size());
  for (size_t i = 0; i < ref.size(); ++i) {
    EXPECT_GT(max_abs(ref[i].grad()), 1e-4) << i;
    EXPECT_LT(max_rel_diff(r.grads[i], ref[i].grad()), 1e-5) << "param " << i;
  }
  EXPECT_GT(r.tapeflow.cycles(), 0u);
}

TEST(SimBackend, MatmulAndF64Params) {
  Generator g(5);
  Tensor a = uniform({3, 4}, -1.0, 1.0, TensorOptions{DType::f64}, &g);
  Tensor b = uniform({4, 2}, -1.0, 1.0, TensorOptions{DType::f64}, &g);
  a.requires_grad_(true);
  b.requires_grad_(true);
  const Tensor target = tensor(std::vector<int64_t>{0, 1, 1});
  Tensor loss = cross_entropy(matmul(a, b), target);
  loss.backward();
  SimStep step("mm");
  SimTensor sa = step.param("a", a), sb = step.param("b", b);
  step.cross_entropy(step.matmul(sa, sb), target);
  const SimStepReport r = step.run();
  EXPECT_NEAR(r.loss, loss.item<double>(), 1e-12);
  EXPECT_EQ(r.grads[0].dtype(), DType::f64);
  EXPECT_LT(max_rel_diff(r.grads[0], a.grad()), 1e-12);
  EXPECT_LT(max_rel_diff(r.grads[1], b.grad()), 1e-12);
}

TEST(SimBackend, OneRecordingStepPerThread) {
  SimStep first("first");
  EXPECT_ERROR_HAS(SimStep("second"), "another tracer is already current on this thread");
  SimTensor x = first.param("x", tensor(std::vector<float>{1.0f, 2.0f}, std::vector<int64_t>{1, 2}));
  first.cross_entropy(x, tensor(std::vector<int64_t>{1}));
  const SimStepReport a = first.run();
  // run() released the tracer: the next step records while `first` is still alive.
  SimStep second("second");
  SimTensor y = second.param("y", tensor(std::vector<float>{1.0f, 2.0f}, std::vector<int64_t>{1, 2}));
  second.cross_entropy(y, tensor(std::vector<int64_t>{1}));
  const SimStepReport b = second.run();
  EXPECT_DOUBLE_EQ(a.loss, b.loss);
  EXPECT_NEAR(a.loss, std::log(1.0 + std::exp(-1.0)), 1e-12);
  EXPECT_NEAR(a.grads[0].data<float>()[0], 1.0 / (1.0 + std::exp(1.0)), 1e-6);  // softmax_0
}

TEST(SimBackend, RegisteredAndSelectable) {
  Backend& sim = sim_backend();
  EXPECT_EQ(sim.name(), "sim");
  EXPECT_EQ(find_backend("sim"), &sim);
  for (OpKind op : {OpKind::linear, OpKind::matmul, OpKind::add, OpKind::relu, OpKind::conv2d, OpKind::max_pool2d,
                    OpKind::avg_pool2d, OpKind::reshape, OpKind::cross_entropy})
    EXPECT_TRUE(sim.supports(op)) << op_name(op);
  EXPECT_FALSE(sim.supports(OpKind::embedding_bag));
  EXPECT_FALSE(sim.supports(OpKind::batch_norm));
  BackendGuard guard("sim");
  EXPECT_EQ(&current_backend(), &sim);
  // Supported ops still run on the CPU kernels (a bare guard records nothing; SimSession does).
  Tensor y = relu(tensor(std::vector<float>{-1.0f, 2.0f}));
  EXPECT_FLOAT_EQ(y.data<float>()[1], 2.0f);
  // An op the simulator cannot lower fails by name.
  EXPECT_ERROR_HAS(sigmoid(tensor(std::vector<float>{1.0f})), "sigmoid: not supported by the 'sim' backend");
}

TEST(SimBackend, BadInput) {
  const Tensor x = zeros({2, 3});
  const Tensor w = zeros({4, 5});
  {
    SimStep step("bad");
    SimTensor sx = step.data("x", x), sw = step.param("w", w);
    EXPECT_ERROR_HAS(step.linear(sx, sw),
                     "sim::SimStep(bad)::linear: input [2, 3] and weight [4, 5] disagree on "
                     "in_features (expected weight [out, 3])");
    EXPECT_ERROR_HAS(step.param("w", w), "sim::SimStep(bad)::param: an input named 'w' already exists");
    EXPECT_ERROR_HAS(step.data("i", zeros({2}, TensorOptions{DType::i64})),
                     "expected a floating tensor (f32 or f64), got i64");
    EXPECT_ERROR_HAS(step.matmul(sx, sx), "sim::SimStep(bad)::matmul: inner dimensions differ: [2, 3] x [2, 3]");
    EXPECT_ERROR_HAS(step.add(sx, sw), "add: shapes must be equal on the sim backend, got [2, 3] and [4, 5]");
    EXPECT_ERROR_HAS(step.conv2d(sx, sw), "conv2d: input must be 4-D [N, C, H, W], got [2, 3]");
    EXPECT_ERROR_HAS(step.max_pool2d(sx, 2), "max_pool2d: input must be 4-D");
    EXPECT_ERROR_HAS(step.run(), "sim::SimStep(bad)::run: no loss; end the step with cross_entropy");
    EXPECT_ERROR_HAS(step.cross_entropy(sx, tensor(std::vector<int64_t>{0, 3})),
                     "cross_entropy: target[1] = 3 is not a class index in [0, 3)");
    EXPECT_ERROR_HAS(step.cross_entropy(sx, tensor(std::vector<int64_t>{0})), "cross_entropy: target must be [2]");
    EXPECT_ERROR_HAS(step.cross_entropy(sx, tensor(std::vector<float>{0, 1})),
                     "cross_entropy: target must be class indices (i64 or i32)");
    step.cross_entropy(sx, tensor(std::vector<int64_t>{0, 2}));
    EXPECT_ERROR_HAS(step.relu(sx), "relu: the step's loss is already set");
    SimStepOptions o;
    o.tapeflow_system = "Enzyme_1k";
    EXPECT_ERROR_HAS(step.run(o), "tapeflow_system 'Enzyme_1k' is not a Tflow_<size> system");
    o.tapeflow_system = "Tflow_3k";
    EXPECT_ERROR_HAS(step.run(o), "unknown system 'Tflow_3k'");
    const SimStepReport r = step.run();
    EXPECT_NEAR(r.loss, std::log(3.0), 1e-12);  // zero logits: uniform softmax
    EXPECT_ERROR_HAS(step.run(), "the step has already run");
  }
  {
    SimStep step("conv");
    SimTensor sx = step.data("x", zeros({1, 2, 4, 4}));
    SimTensor sw = step.param("w", zeros({3, 1, 3, 3}));
    EXPECT_ERROR_HAS(step.conv2d(sx, sw),
                     "conv2d: input [1, 2, 4, 4] has 2 channels but weight [3, 1, 3, 3] expects 1");
    SimTensor sw2 = step.param("w2", zeros({3, 2, 5, 5}));
    EXPECT_ERROR_HAS(step.conv2d(sx, sw2), "conv2d: kernel 5x5 does not fit input 4x4 with padding 0");
  }
}
