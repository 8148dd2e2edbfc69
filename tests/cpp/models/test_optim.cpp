// Optimizers (models/optim) against plain f64 reference loops written here, over several steps with
// known gradients; state_dict round trips and errors; bad hyperparameters; zero_grad.

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/factories.h"
#include "core/threading.h"
#include "models/optim/adagrad.h"
#include "models/optim/adam.h"
#include "models/optim/rmsprop.h"
#include "models/optim/rowwise_adagrad.h"
#include "models/optim/sgd.h"
#include "ops/binary.h"

namespace strata::optim {
namespace {

using Vec = std::vector<double>;

// ---- helpers --------------------------------------------------------------------------------------

Tensor make(const Vec& values, IntArrayRef sizes, DType dtype) {
  return tensor<double>(values, sizes).to(dtype, /*copy=*/true);
}

Vec values_of(const Tensor& t) {
  Tensor c = t.contiguous().to(DType::f64, /*copy=*/true);
  const double* p = c.data<double>();
  return Vec(p, p + c.numel());
}

// Deterministic gradient for element i of parameter `which` at step `s` (includes negative values
// and a wide range of magnitudes).
double grad_value(int which, int s, int64_t i) {
  return std::sin(0.7 * static_cast<double>(i) + 1.3 * s + 0.5 * which) * (1.0 + 0.25 * static_cast<double>(i % 5));
}

Vec grad_vec(int which, int s, int64_t n) {
  Vec g(static_cast<std::size_t>(n));
  for (int64_t i = 0; i < n; ++i) g[i] = grad_value(which, s, i);
  return g;
}

Vec init_vec(int which, int64_t n) {
  Vec v(static_cast<std::size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = std::cos(0.3 * static_cast<double>(i) + which) * 0.8;
  return v;
}

void set_grads(std::vector<Tensor>& params, int s) {
  for (std::size_t k = 0; k < params.size(); ++k) {
    params[k].set_grad(make(grad_vec(static_cast<int>(k), s, params[k].numel()), params[k].sizes(), params[k].dtype()));
  }
}

void expect_close(const Vec& got, const Vec& want, double rtol, double atol, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t i = 0; i < got.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], atol + rtol * std::abs(want[i])) << what << " element " << i;
  }
}

template <typename Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "<no error>";
}

#define EXPECT_ERROR(stmt, substring)                                          \
  do {                                                                         \
    const std::string _msg = error_of([&] { stmt; });                          \
    EXPECT_NE(_msg.find(substring), std::string::npos) << "message: " << _msg; \
  } while (0)

// A reference optimizer: updates `p` in place from `g` given per-parameter state, step t (1-based).
using RefStep = std::function<void(Vec& p, const Vec& g, std::vector<Vec>& state, int t)>;

// Runs `steps` steps of `opt` over params of the given shapes and dtype and of `ref` in f64; compares.
void run_against_reference(const std::function<std::unique_ptr<Optimizer>(std::vector<Tensor>&)>& make_opt,
                           const RefStep& ref, const std::vector<Dims>& shapes, DType dtype, int steps,
                           const std::string& what) {
  std::vector<Tensor> params;
  std::vector<Vec> ref_params;
  for (std::size_t k = 0; k < shapes.size(); ++k) {
    int64_t n = 1;
    for (int64_t s : shapes[k]) n *= s;
    ref_params.push_back(init_vec(static_cast<int>(k), n));
    params.push_back(make(ref_params.back(), shapes[k], dtype));
  }
  auto opt = make_opt(params);
  std::vector<std::vector<Vec>> ref_state(shapes.size());
  for (int s = 1; s <= steps; ++s) {
    set_grads(params, s);
    opt->step();
    for (std::size_t k = 0; k < shapes.size(); ++k) {
      ref(ref_params[k], grad_vec(static_cast<int>(k), s, static_cast<int64_t>(ref_params[k].size())), ref_state[k], s);
    }
  }
  const double rtol = dtype == DType::f64 ? 1e-12 : 2e-5;
  const double atol = dtype == DType::f64 ? 1e-13 : 2e-6;
  for (std::size_t k = 0; k < shapes.size(); ++k) {
    expect_close(values_of(params[k]), ref_params[k], rtol, atol, what + " param " + std::to_string(k));
  }
}

const std::vector<Dims> kShapes = {Dims{2, 3}, Dims{5}, Dims{}};

// ---- SGD ------------------------------------------------------------------------------------------

RefStep sgd_ref(SGDOptions o) {
  return [o](Vec& p, const Vec& g_in, std::vector<Vec>& st, int t) {
    if (st.empty()) st.resize(1);
    Vec& buf = st[0];
    for (std::size_t i = 0; i < p.size(); ++i) {
      double g = o.maximize ? -g_in[i] : g_in[i];
      g += o.weight_decay * p[i];
      if (o.momentum != 0) {
        if (t == 1) {
          buf.resize(p.size());
          buf[i] = g;
        } else {
          buf[i] = o.momentum * buf[i] + (1 - o.dampening) * g;
        }
        g = o.nesterov ? g + o.momentum * buf[i] : buf[i];
      }
      p[i] -= o.lr * g;
    }
  };
}

TEST(OptimSGD, MatchesReferenceForEachOptionCombination) {
  std::vector<std::pair<std::string, SGDOptions>> cases;
  cases.push_back({"plain", {.lr = 0.1}});
  cases.push_back({"momentum", {.lr = 0.05, .momentum = 0.9}});
  cases.push_back({"dampening", {.lr = 0.05, .momentum = 0.8, .dampening = 0.3}});
  cases.push_back({"nesterov", {.lr = 0.05, .momentum = 0.9, .nesterov = true}});
  cases.push_back({"weight_decay", {.lr = 0.1, .weight_decay = 0.2}});
  cases.push_back({"maximize", {.lr = 0.1, .momentum = 0.5, .maximize = true}});
  cases.push_back({"all", {.lr = 0.03, .momentum = 0.7, .weight_decay = 0.1, .nesterov = true, .maximize = true}});
  for (const auto& [name, o] : cases) {
    for (DType dt : {DType::f32, DType::f64}) {
      run_against_reference([&](std::vector<Tensor>& ps) { return std::make_unique<SGD>(ps, o); }, sgd_ref(o), kShapes,
                            dt, 6, "SGD " + name);
    }
  }
}

// ---- Adam / AdamW ---------------------------------------------------------------------------------

RefStep adam_ref(AdamOptions o, bool decoupled) {
  return [o, decoupled](Vec& p, const Vec& g_in, std::vector<Vec>& st, int t) {
    if (st.empty()) st.assign(3, Vec(p.size(), 0.0));
    Vec &m = st[0], &v = st[1], &vmax = st[2];
    const double bc1 = 1 - std::pow(o.beta1, t), bc2 = 1 - std::pow(o.beta2, t);
    for (std::size_t i = 0; i < p.size(); ++i) {
      double g = o.maximize ? -g_in[i] : g_in[i];
      if (decoupled) {
        p[i] *= 1 - o.lr * o.weight_decay;
      } else {
        g += o.weight_decay * p[i];
      }
      m[i] = o.beta1 * m[i] + (1 - o.beta1) * g;
      v[i] = o.beta2 * v[i] + (1 - o.beta2) * g * g;
      vmax[i] = std::max(vmax[i], v[i]);
      const double vv = o.amsgrad ? vmax[i] : v[i];
      p[i] -= o.lr / bc1 * m[i] / (std::sqrt(vv) / std::sqrt(bc2) + o.eps);
    }
  };
}

TEST(OptimAdam, MatchesReferenceForEachOptionCombination) {
  std::vector<std::pair<std::string, AdamOptions>> cases;
  cases.push_back({"plain", {.lr = 0.01}});
  cases.push_back({"weight_decay", {.lr = 0.01, .weight_decay = 0.1}});
  cases.push_back({"amsgrad", {.lr = 0.02, .amsgrad = true}});
  cases.push_back({"maximize", {.lr = 0.01, .maximize = true}});
  cases.push_back({"small_beta1", {.lr = 0.01, .beta1 = 0.3, .beta2 = 0.9, .eps = 1e-6}});  // lerp's other branch
  cases.push_back(
      {"all", {.lr = 0.01, .beta1 = 0.8, .beta2 = 0.99, .weight_decay = 0.05, .amsgrad = true, .maximize = true}});
  for (const auto& [name, o] : cases) {
    for (DType dt : {DType::f32, DType::f64}) {
      run_against_reference([&](std::vector<Tensor>& ps) { return std::make_unique<Adam>(ps, o); }, adam_ref(o, false),
                            kShapes, dt, 8, "Adam " + name);
      run_against_reference([&](std::vector<Tensor>& ps) { return std::make_unique<AdamW>(ps, o); }, adam_ref(o, true),
                            kShapes, dt, 8, "AdamW " + name);
    }
  }
}

TEST(OptimAdam, AdamWDefaultsToPyTorchsWeightDecay) {
  Tensor p = ones({2});
  AdamW opt({p});
  EXPECT_DOUBLE_EQ(opt.defaults().at("weight_decay"), 1e-2);
  EXPECT_DOUBLE_EQ(opt.param_groups()[0].options.at("lr"), 1e-3);
  EXPECT_EQ(opt.name(), "AdamW");
  Adam adam({ones({2})});
  EXPECT_DOUBLE_EQ(adam.defaults().at("weight_decay"), 0.0);
  EXPECT_DOUBLE_EQ(adam.defaults().at("beta2"), 0.999);
}

// ---- Adagrad --------------------------------------------------------------------------------------

RefStep adagrad_ref(AdagradOptions o) {
  return [o](Vec& p, const Vec& g_in, std::vector<Vec>& st, int t) {
    if (st.empty()) st.assign(1, Vec(p.size(), o.initial_accumulator_value));
    Vec& sum = st[0];
    const double clr = o.lr / (1 + (t - 1) * o.lr_decay);
    for (std::size_t i = 0; i < p.size(); ++i) {
      double g = o.maximize ? -g_in[i] : g_in[i];
      g += o.weight_decay * p[i];
      sum[i] += g * g;
      p[i] -= clr * g / (std::sqrt(sum[i]) + o.eps);
    }
  };
}

TEST(OptimAdagrad, MatchesReferenceForEachOptionCombination) {
  std::vector<std::pair<std::string, AdagradOptions>> cases;
  cases.push_back({"plain", {.lr = 0.1}});
  cases.push_back({"lr_decay", {.lr = 0.1, .lr_decay = 0.2}});
  cases.push_back({"weight_decay", {.lr = 0.1, .weight_decay = 0.3}});
  cases.push_back({"initial_accumulator", {.lr = 0.1, .initial_accumulator_value = 0.5}});
  cases.push_back({"maximize", {.lr = 0.1, .eps = 1e-6, .maximize = true}});
  for (const auto& [name, o] : cases) {
    for (DType dt : {DType::f32, DType::f64}) {
      run_against_reference([&](std::vector<Tensor>& ps) { return std::make_unique<Adagrad>(ps, o); }, adagrad_ref(o),
                            kShapes, dt, 6, "Adagrad " + name);
    }
  }
}

// ---- RMSprop --------------------------------------------------------------------------------------

RefStep rmsprop_ref(RMSpropOptions o) {
  return [o](Vec& p, const Vec& g_in, std::vector<Vec>& st, int t) {
    if (st.empty()) st.assign(3, Vec(p.size(), 0.0));  // square_avg, grad_avg, momentum_buffer
    for (std::size_t i = 0; i < p.size(); ++i) {
      double g = o.maximize ? -g_in[i] : g_in[i];
      g += o.weight_decay * p[i];
      st[0][i] = o.alpha * st[0][i] + (1 - o.alpha) * g * g;
      double avg = st[0][i];
      if (o.centered) {
        st[1][i] += (1 - o.alpha) * (g - st[1][i]);
        avg -= st[1][i] * st[1][i];
      }
      avg = std::sqrt(avg) + o.eps;
      if (o.momentum > 0) {
        st[2][i] = o.momentum * st[2][i] + g / avg;
        p[i] -= o.lr * st[2][i];
      } else {
        p[i] -= o.lr * g / avg;
      }
    }
  };
}

TEST(OptimRMSprop, MatchesReferenceForEachOptionCombination) {
  std::vector<std::pair<std::string, RMSpropOptions>> cases;
  cases.push_back({"defaults", {}});
  cases.push_back({"alpha", {.lr = 0.01, .alpha = 0.3, .eps = 1e-6}});
  cases.push_back({"momentum", {.lr = 0.01, .momentum = 0.9}});
  cases.push_back({"centered", {.lr = 0.01, .centered = true}});
  cases.push_back({"all", {.lr = 0.01, .alpha = 0.8, .weight_decay = 0.1, .momentum = 0.5, .centered = true}});
  cases.push_back({"maximize", {.lr = 0.01, .maximize = true}});
  for (const auto& [name, o] : cases) {
    for (DType dt : {DType::f32, DType::f64}) {
      run_against_reference([&](std::vector<Tensor>& ps) { return std::make_unique<RMSprop>(ps, o); }, rmsprop_ref(o),
                            kShapes, dt, 20, "RMSprop " + name);
    }
  }
}

TEST(OptimRMSprop, StateHasPyTorchsBuffersPerOption) {
  std::vector<Tensor> ps = {ones({3})};
  RMSprop opt(ps, {.momentum = 0.9, .centered = true});
  EXPECT_FALSE(opt.state(0).initialized);  // created lazily, as PyTorch does
  ps[0].set_grad(ones({3}));
  opt.step();
  const ParamState& st = opt.state(0);
  EXPECT_EQ(st.step, 1);
  EXPECT_EQ(st.buffers.size(), 3u);
  for (const char* name : {"square_avg", "grad_avg", "momentum_buffer"}) EXPECT_EQ(st.buffers.count(name), 1u) << name;
  RMSprop plain(std::vector<Tensor>{ones({2})});
  EXPECT_EQ(plain.state_dict().size(), 8u);  // 7 options + params, no state before a step
}

TEST(OptimAdagrad, StateExistsFromConstructionLikePyTorch) {
  Tensor p = ones({3});
  Adagrad opt({p}, {.initial_accumulator_value = 0.25});
  const ParamState& st = opt.state(0);
  EXPECT_TRUE(st.initialized);
  EXPECT_EQ(st.step, 0);
  EXPECT_EQ(values_of(st.buffers.at("sum")), (Vec{0.25, 0.25, 0.25}));
  StateDict sd = opt.state_dict();
  EXPECT_DOUBLE_EQ(state_scalar(sd, "state.0.step", "test"), 0.0);
}

// ---- Row-wise Adagrad -----------------------------------------------------------------------------

// Reference with rows of length `cols` (cols == size: one accumulator for the whole tensor).
RefStep rowwise_ref(RowWiseAdagradOptions o, int64_t cols) {
  return [o, cols](Vec& p, const Vec& g_in, std::vector<Vec>& st, int t) {
    const std::size_t rows = p.size() / static_cast<std::size_t>(cols);
    if (st.empty()) st.assign(1, Vec(rows, 0.0));
    for (std::size_t r = 0; r < rows; ++r) {
      double sq = 0;
      Vec g(static_cast<std::size_t>(cols));
      for (int64_t j = 0; j < cols; ++j) {
        const std::size_t i = r * cols + j;
        g[j] = g_in[i] + o.weight_decay * p[i];
        sq += g[j] * g[j];
      }
      st[0][r] += sq / static_cast<double>(cols);
      for (int64_t j = 0; j < cols; ++j) p[r * cols + j] -= o.lr * g[j] / (std::sqrt(st[0][r]) + o.eps);
    }
  };
}

TEST(OptimRowWiseAdagrad, MatchesReferencePerRowAndWholeTensor) {
  for (const RowWiseAdagradOptions& o :
       {RowWiseAdagradOptions{.lr = 0.1}, RowWiseAdagradOptions{.lr = 0.05, .eps = 1e-6, .weight_decay = 0.2}}) {
    for (DType dt : {DType::f32, DType::f64}) {
      auto make_opt = [&](std::vector<Tensor>& ps) { return std::make_unique<RowWiseAdagrad>(ps, o); };
      run_against_reference(make_opt, rowwise_ref(o, 4), {Dims{3, 4}}, dt, 5, "RowWiseAdagrad 2-D");
      run_against_reference(make_opt, rowwise_ref(o, 7), {Dims{7}}, dt, 5, "RowWiseAdagrad 1-D");
      run_against_reference(make_opt, rowwise_ref(o, 6), {Dims{2, 2, 3}}, dt, 5, "RowWiseAdagrad 3-D");
    }
  }
}

TEST(OptimRowWiseAdagrad, AccumulatorHasOneEntryPerRow) {
  Tensor w = zeros({4, 3});
  Tensor b = zeros({3});
  RowWiseAdagrad opt({w, b});
  w.set_grad(ones({4, 3}));
  b.set_grad(ones({3}));
  opt.step();
  EXPECT_EQ(opt.state(0).buffers.at("sum").sizes(), (Dims{4}));
  EXPECT_EQ(opt.state(1).buffers.at("sum").sizes(), (Dims{1}));
  EXPECT_EQ(values_of(opt.state(0).buffers.at("sum")), (Vec{1, 1, 1, 1}));
}

// ---- kernels: layouts and threads -----------------------------------------------------------------

TEST(OptimKernels, NonContiguousParameterAndGradient) {
  // The parameter is a transposed view into a larger tensor; the gradient a transposed view too.
  const SGDOptions o{.lr = 0.1, .momentum = 0.9, .weight_decay = 0.1};
  Tensor base = make(init_vec(0, 12), {3, 4}, DType::f32);
  Tensor p = base.t();  // [4, 3], strides [1, 4]
  Vec ref = values_of(p);
  SGD opt({p}, o);
  std::vector<Vec> st;
  for (int s = 1; s <= 4; ++s) {
    Vec g = grad_vec(0, s, 12);
    p.set_grad(make(g, {3, 4}, DType::f32).t());  // element [i][j] of the grad = g[j * 4 + i]
    Vec g_rowmajor(12);
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 3; ++j) g_rowmajor[i * 3 + j] = g[j * 4 + i];
    opt.step();
    sgd_ref(o)(ref, g_rowmajor, st, s);
  }
  expect_close(values_of(p), ref, 2e-5, 2e-6, "SGD transposed");
}

// Note: this test runs the update kernels on several threads (parallel_for over chunks).
TEST(OptimKernels, LargeParametersSplitAcrossThreadsMatchReference) {
  const int threads = get_num_threads();
  set_num_threads(2);
  const AdamOptions o{.lr = 0.01, .weight_decay = 0.01, .amsgrad = true};
  run_against_reference([&](std::vector<Tensor>& ps) { return std::make_unique<AdamW>(ps, o); }, adam_ref(o, true),
                        {Dims{300000}}, DType::f32, 3, "AdamW large");
  const RowWiseAdagradOptions r{.lr = 0.1};
  run_against_reference([&](std::vector<Tensor>& ps) { return std::make_unique<RowWiseAdagrad>(ps, r); },
                        rowwise_ref(r, 64), {Dims{4096, 64}}, DType::f32, 3, "RowWiseAdagrad large");
  set_num_threads(threads);
}

// ---- step semantics -------------------------------------------------------------------------------

TEST(OptimStep, UndefinedGradsAreSkippedAndVersionsBumped) {
  Tensor a = make({1, 2}, {2}, DType::f32);
  Tensor b = make({3, 4}, {2}, DType::f32);
  Adam opt({a, b}, {.lr = 0.1});
  a.set_grad(make({1, -1}, {2}, DType::f32));
  const uint64_t va = a.version(), vb = b.version();
  opt.step();
  EXPECT_GT(a.version(), va);
  EXPECT_EQ(b.version(), vb);
  EXPECT_EQ(values_of(b), (Vec{3, 4}));
  EXPECT_TRUE(opt.state(0).initialized);
  EXPECT_EQ(opt.state(0).step, 1);
  EXPECT_FALSE(opt.state(1).initialized);
  // Adam's first step moves every element by lr (times the gradient's sign).
  expect_close(values_of(a), Vec{0.9, 2.1}, 1e-6, 1e-6, "Adam first step");
  StateDict sd = opt.state_dict();
  EXPECT_NE(state_find(sd, "state.0.exp_avg"), nullptr);
  EXPECT_EQ(state_find(sd, "state.1.exp_avg"), nullptr);
}

TEST(OptimStep, IsNotRecordedByAutograd) {
  Tensor p = ones({3});
  p.set_requires_grad(true);
  SGD opt({p}, {.lr = 0.5});
  p.set_grad(ones({3}));
  opt.step();
  EXPECT_TRUE(p.is_leaf());
  EXPECT_EQ(p.grad_fn(), nullptr);
  EXPECT_EQ(values_of(p), (Vec{0.5, 0.5, 0.5}));
}

TEST(OptimStep, ZeroGradSetsToNoneOrZeros) {
  Tensor p = ones({2});
  Tensor q = ones({2});
  SGD opt({p, q});
  p.set_grad(ones({2}));
  opt.zero_grad(/*set_to_none=*/false);
  ASSERT_TRUE(p.grad().defined());
  EXPECT_EQ(values_of(p.grad()), (Vec{0, 0}));
  EXPECT_FALSE(q.grad().defined());
  opt.zero_grad();
  EXPECT_FALSE(p.grad().defined());
}

TEST(OptimStep, ParamGroupOptionChangesTakeEffect) {
  Tensor p = zeros({1});
  Tensor q = zeros({1});
  SGD opt(std::vector<ParamGroup>{{{p}, {{"lr", 1.0}}}, {{q}, {}}}, {.lr = 0.5});
  EXPECT_DOUBLE_EQ(opt.param_groups()[1].options.at("lr"), 0.5);
  p.set_grad(ones({1}));
  q.set_grad(ones({1}));
  opt.step();
  EXPECT_EQ(values_of(p), Vec{-1.0});
  EXPECT_EQ(values_of(q), Vec{-0.5});
  opt.param_groups()[0].options["lr"] = 0.25;
  opt.step();
  EXPECT_EQ(values_of(p), Vec{-1.25});
  opt.param_groups()[0].options["lr"] = -1;
  EXPECT_ERROR(opt.step(), "SGD.step: param group 0: Invalid learning rate: -1.0");
  EXPECT_EQ(values_of(p), Vec{-1.25});
}

TEST(OptimStep, BadGradientFailsBeforeAnyUpdate) {
  Tensor p = zeros({2});
  Tensor q = zeros({3});
  SGD opt({p, q}, {.lr = 1});
  p.set_grad(ones({2}));
  q.autograd_meta().grad = ones({2});  // bypasses set_grad's own check
  EXPECT_ERROR(opt.step(), "SGD.step: gradient of parameter 1 of param group 0 has shape [2], expected [3]");
  EXPECT_EQ(values_of(p), (Vec{0, 0}));  // nothing was updated
  q.autograd_meta().grad = ones({3}, {DType::f64, nullptr});
  EXPECT_ERROR(opt.step(), "has dtype f64, expected f32");
}

// ---- construction errors --------------------------------------------------------------------------

TEST(OptimErrors, BadHyperparametersUsePyTorchsMessages) {
  auto p = [] { return std::vector<Tensor>{ones({2})}; };
  EXPECT_ERROR(SGD(p(), {.lr = -1}), "Invalid learning rate: -1.0");
  EXPECT_ERROR(SGD(p(), {.momentum = -0.5}), "Invalid momentum value: -0.5");
  EXPECT_ERROR(SGD(p(), {.weight_decay = -1e-5}), "Invalid weight_decay value: -1e-05");
  EXPECT_ERROR(SGD(p(), {.nesterov = true}), "Nesterov momentum requires a momentum and zero dampening");
  EXPECT_ERROR(SGD(p(), {.momentum = 0.9, .dampening = 0.1, .nesterov = true}),
               "Nesterov momentum requires a momentum and zero dampening");
  EXPECT_ERROR(Adam(p(), {.beta1 = 1.0}), "Invalid beta parameter at index 0: 1.0");
  EXPECT_ERROR(Adam(p(), {.beta2 = -0.1}), "Invalid beta parameter at index 1: -0.1");
  EXPECT_ERROR(AdamW(p(), {.eps = -1e-8}), "Invalid epsilon value: -1e-08");
  EXPECT_ERROR(Adagrad(p(), {.lr_decay = -1}), "Invalid lr_decay value: -1.0");
  EXPECT_ERROR(Adagrad(p(), {.initial_accumulator_value = -2}), "Invalid initial_accumulator_value value: -2.0");
  EXPECT_ERROR(RowWiseAdagrad(p(), {.lr = -0.01}), "Invalid learning rate: -0.01");
  EXPECT_ERROR(RMSprop(p(), {.alpha = -0.5}), "Invalid alpha value: -0.5");
  EXPECT_ERROR(RMSprop(p(), {.eps = -1}), "Invalid epsilon value: -1.0");
  EXPECT_ERROR(RMSprop(p(), {.momentum = -0.1}), "Invalid momentum value: -0.1");
  EXPECT_ERROR(RMSprop(p(), {.weight_decay = -0.1}), "Invalid weight_decay value: -0.1");
  EXPECT_ERROR(SGD(std::vector<ParamGroup>{{p(), {{"lr", -2.0}}}}), "Invalid learning rate: -2.0");
  EXPECT_ERROR(SGD(std::vector<ParamGroup>{{p(), {{"betas", 0.9}}}}),
               "SGD: unknown option 'betas' in param group 0 (expected one of: dampening, lr, maximize, momentum, "
               "nesterov, weight_decay)");
}

TEST(OptimErrors, BadParameters) {
  EXPECT_ERROR(SGD(std::vector<Tensor>{}), "SGD: optimizer got an empty parameter list");
  EXPECT_ERROR(Adam({ones({2}, {DType::bf16, nullptr})}), "Adam: parameter 0 of param group 0 must be f32 or f64");
  EXPECT_ERROR(Adam({ones({2}, {DType::i64, nullptr})}), "must be f32 or f64, got Tensor[2] i64");
  Tensor leaf = ones({2});
  leaf.set_requires_grad(true);
  Tensor non_leaf = mul(leaf, 2.0);
  EXPECT_ERROR(SGD({non_leaf}), "SGD: can't optimize a non-leaf Tensor");
  Tensor p = ones({2});
  EXPECT_ERROR(SGD({p, p}), "contains a parameter twice");
  SGD opt({p});
  EXPECT_ERROR(opt.add_param_group({{p}, {}}), "some parameters appear in more than one parameter group");
  EXPECT_ERROR(opt.state(1), "SGD: parameter index 1 out of range");
}

// ---- state_dict -----------------------------------------------------------------------------------

TEST(OptimStateDict, LayoutFollowsPyTorchsNumbering) {
  Tensor a = ones({2, 2}), b = ones({3}), c = ones({1});
  SGD opt(std::vector<ParamGroup>{{{a, b}, {}}, {{c}, {{"lr", 0.5}}}}, {.lr = 0.1, .momentum = 0.9});
  a.set_grad(ones({2, 2}));
  c.set_grad(ones({1}));
  opt.step();
  StateDict sd = opt.state_dict();
  ASSERT_NE(state_find(sd, "state.0.momentum_buffer"), nullptr);
  EXPECT_EQ(state_find(sd, "state.1.momentum_buffer"), nullptr);  // b had no gradient
  ASSERT_NE(state_find(sd, "state.2.momentum_buffer"), nullptr);
  EXPECT_EQ(state_find(sd, "state.0.step"), nullptr);  // SGD does not count steps
  EXPECT_DOUBLE_EQ(state_scalar(sd, "param_groups.0.lr", "t"), 0.1);
  EXPECT_DOUBLE_EQ(state_scalar(sd, "param_groups.1.lr", "t"), 0.5);
  EXPECT_DOUBLE_EQ(state_scalar(sd, "param_groups.1.momentum", "t"), 0.9);
  EXPECT_EQ(state_at(sd, "param_groups.1.lr", "t").dtype(), DType::f64);
  EXPECT_EQ(state_at(sd, "param_groups.1.lr", "t").dim(), 0);
  const Tensor& ids0 = state_at(sd, "param_groups.0.params", "t");
  EXPECT_EQ(ids0.dtype(), DType::i64);
  EXPECT_EQ(values_of(ids0), (Vec{0, 1}));
  EXPECT_EQ(values_of(state_at(sd, "param_groups.1.params", "t")), (Vec{2}));
  // The state dict is a snapshot: later steps do not change it.
  opt.step();
  EXPECT_EQ(values_of(state_at(sd, "state.2.momentum_buffer", "t")), Vec{1.0});
}

// Runs `first` steps on A, loads A's state into B (over copies of A's parameters), runs `more`
// steps on both with the same gradients and expects identical parameters.
template <typename Opt, typename O>
void round_trip(const O& options, DType dtype, const std::string& what) {
  std::vector<Tensor> pa = {make(init_vec(0, 6), {2, 3}, dtype), make(init_vec(1, 4), {4}, dtype)};
  Opt a(std::vector<ParamGroup>{{{pa[0]}, {}}, {{pa[1]}, {{"lr", 0.02}}}}, options);
  for (int s = 1; s <= 3; ++s) {
    set_grads(pa, s);
    a.step();
  }
  std::vector<Tensor> pb = {pa[0].clone(), pa[1].clone()};
  Opt b(std::vector<ParamGroup>{{{pb[0]}, {}}, {{pb[1]}, {}}}, options);
  b.load_state_dict(a.state_dict());
  EXPECT_DOUBLE_EQ(b.param_groups()[1].options.at("lr"), 0.02) << what;
  for (int s = 4; s <= 7; ++s) {
    set_grads(pa, s);
    set_grads(pb, s);
    a.step();
    b.step();
  }
  for (int k = 0; k < 2; ++k) EXPECT_EQ(values_of(pa[k]), values_of(pb[k])) << what << " param " << k;
  EXPECT_EQ(a.state(0).step, b.state(0).step) << what;
}

TEST(OptimStateDict, RoundTripContinuesIdentically) {
  for (DType dt : {DType::f32, DType::f64}) {
    round_trip<SGD>(SGDOptions{.lr = 0.1, .momentum = 0.9, .nesterov = true}, dt, "SGD");
    round_trip<Adam>(AdamOptions{.lr = 0.01, .amsgrad = true}, dt, "Adam");
    round_trip<AdamW>(AdamOptions{.lr = 0.01, .weight_decay = 0.1}, dt, "AdamW");
    round_trip<Adagrad>(AdagradOptions{.lr = 0.1, .lr_decay = 0.1}, dt, "Adagrad");
    round_trip<RowWiseAdagrad>(RowWiseAdagradOptions{.lr = 0.1}, dt, "RowWiseAdagrad");
  }
}

TEST(OptimStateDict, LoadedStateIsConvertedToTheParameterDtype) {
  Tensor p = zeros({2}, {DType::f64, nullptr});
  SGD opt({p}, {.lr = 1, .momentum = 0.5});
  StateDict sd;
  sd.emplace_back("state.0.momentum_buffer", make({2, 4}, {2}, DType::f32));
  state_put_scalar(sd, "param_groups.0.lr", 1.0);
  sd.emplace_back("param_groups.0.params", tensor<int64_t>({0}));
  opt.load_state_dict(sd);
  EXPECT_EQ(opt.state(0).buffers.at("momentum_buffer").dtype(), DType::f64);
  EXPECT_DOUBLE_EQ(opt.param_groups()[0].options.at("momentum"), 0.5);  // kept: not in the dict
  p.set_grad(make({0, 0}, {2}, DType::f64));
  opt.step();  // buf = 0.5 * buf; p -= buf
  EXPECT_EQ(values_of(p), (Vec{-1, -2}));
}

TEST(OptimStateDict, LoadErrorsNameTheKey) {
  Tensor a = ones({2, 3}), b = ones({4});
  Adam src(std::vector<ParamGroup>{{{a}, {}}, {{b}, {}}}, {.amsgrad = true});
  a.set_grad(ones({2, 3}));
  b.set_grad(ones({4}));
  src.step();
  const StateDict good = src.state_dict();

  auto edited = [&](const std::function<void(StateDict&)>& fn) {
    StateDict d = good;
    fn(d);
    return d;
  };
  auto replace = [](StateDict& d, const std::string& key, Tensor t) {
    for (auto& [k, v] : d)
      if (k == key) v = t;
  };
  auto erase = [](StateDict& d, const std::string& key) {
    std::erase_if(d, [&](const auto& e) { return e.first == key; });
  };

  Tensor x = ones({2, 3}), y = ones({4});
  Adam one_group({x, y}, {.amsgrad = true});
  EXPECT_ERROR(one_group.load_state_dict(good),
               "Adam load_state_dict: loaded state dict has 2 parameter groups, the optimizer has 1");

  Tensor z = ones({1});
  Adam three_params(std::vector<ParamGroup>{{{x, z}, {}}, {{y}, {}}}, {.amsgrad = true});
  EXPECT_ERROR(three_params.load_state_dict(good),
               "loaded state dict contains a parameter group that doesn't match the size of optimizer's group "
               "('param_groups.0.params' has 1 entries, the optimizer's group 0 has 2 parameters)");

  Adam dst(std::vector<ParamGroup>{{{x}, {}}, {{y}, {}}}, {.amsgrad = true});
  EXPECT_ERROR(dst.load_state_dict(edited([&](StateDict& d) { replace(d, "state.1.exp_avg", ones({2, 2})); })),
               "Adam load_state_dict: key 'state.1.exp_avg' has shape [2, 2], expected [4] for parameter 1");
  EXPECT_ERROR(dst.load_state_dict(edited([&](StateDict& d) { erase(d, "state.0.max_exp_avg_sq"); })),
               "Adam load_state_dict: missing key 'state.0.max_exp_avg_sq'");
  EXPECT_ERROR(dst.load_state_dict(edited([&](StateDict& d) { erase(d, "state.0.step"); })),
               "missing key 'state.0.step'");
  EXPECT_ERROR(
      dst.load_state_dict(edited([&](StateDict& d) { d.emplace_back("state.0.momentum_buffer", ones({2, 3})); })),
      "unexpected key 'state.0.momentum_buffer' (Adam state for these options: step, exp_avg, exp_avg_sq, "
      "max_exp_avg_sq)");
  EXPECT_ERROR(dst.load_state_dict(edited([&](StateDict& d) { d.emplace_back("state.7.exp_avg", ones({4})); })),
               "key 'state.7.exp_avg': no parameter has index 7");
  EXPECT_ERROR(dst.load_state_dict(edited([&](StateDict& d) { d.emplace_back("lr", ones({})); })),
               "unexpected key 'lr'");
  EXPECT_ERROR(dst.load_state_dict(edited([&](StateDict& d) { d.emplace_back("param_groups.0.momentum", ones({})); })),
               "unknown option 'param_groups.0.momentum'");
  EXPECT_ERROR(dst.load_state_dict(edited([&](StateDict& d) { erase(d, "param_groups.1.params"); })),
               "missing key 'param_groups.1.params'");
  EXPECT_ERROR(dst.load_state_dict(
                   edited([&](StateDict& d) { replace(d, "param_groups.0.beta1", scalar_tensor(1.5, DType::f64)); })),
               "Adam load_state_dict: param_groups.0: Invalid beta parameter at index 0: 1.5");
  EXPECT_ERROR(dst.load_state_dict(edited([&](StateDict& d) { replace(d, "state.0.step", scalar_tensor(-1.0)); })),
               "key 'state.0.step' must be a non-negative whole number, got -1.0");
  // check_state_dict throws the same errors and changes nothing, even for a good state.
  EXPECT_ERROR(dst.check_state_dict(edited([&](StateDict& d) { erase(d, "state.0.step"); })),
               "Adam load_state_dict: missing key 'state.0.step'");
  dst.check_state_dict(good);
  // A failed load leaves the optimizer untouched.
  EXPECT_FALSE(dst.state(0).initialized);
  EXPECT_DOUBLE_EQ(dst.param_groups()[0].options.at("beta1"), 0.9);
  dst.load_state_dict(good);
  EXPECT_EQ(dst.state(0).step, 1);
}

TEST(OptimDetail, PyFloatFormatsLikePythonRepr) {
  EXPECT_EQ(detail::py_float(-1.0), "-1.0");
  EXPECT_EQ(detail::py_float(0.001), "0.001");
  EXPECT_EQ(detail::py_float(1e-10), "1e-10");
  EXPECT_EQ(detail::py_float(1e-05), "1e-05");
  EXPECT_EQ(detail::py_float(0.0001), "0.0001");
  EXPECT_EQ(detail::py_float(100000.0), "100000.0");
  EXPECT_EQ(detail::py_float(1.5e16), "1.5e+16");
  EXPECT_EQ(detail::py_float(123.25), "123.25");
  EXPECT_EQ(detail::py_float(0.0), "0.0");
}

}  // namespace
}  // namespace strata::optim
