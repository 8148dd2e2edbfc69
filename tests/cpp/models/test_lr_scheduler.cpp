// Learning-rate schedulers (models/optim/lr_scheduler.h): each recursive schedule against its
// closed form written here, PyTorch's step() semantics (initial step, initial_lr, last_epoch
// resume, SequentialLR's restarts, OneCycleLR's momentum), state_dict round trips and errors.
// (pytest compares every schedule with torch's to the last bit: tests/python/test_lr_scheduler.py.)

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <numbers>
#include <vector>

#include "core/factories.h"
#include "models/optim/adam.h"
#include "models/optim/lr_scheduler.h"
#include "models/optim/sgd.h"
#include "tests/cpp/error_text.h"

namespace strata::optim {
namespace {

using Vec = std::vector<double>;

// Two param groups with lrs 0.1 and 0.03.
std::unique_ptr<SGD> make_sgd(double momentum = 0.9) {
  std::vector<ParamGroup> groups = {{{ones({2})}, {{"lr", 0.1}}}, {{ones({3})}, {{"lr", 0.03}}}};
  return std::make_unique<SGD>(std::move(groups), SGDOptions{.momentum = momentum});
}

Vec lrs_of(const Optimizer& opt) {
  Vec out;
  for (const auto& g : opt.param_groups()) out.push_back(g.options.at("lr"));
  return out;
}

void expect_lrs(const Vec& got, const Vec& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], 1e-12 * std::abs(want[i]) + 1e-15) << what << " group " << i;
}

Vec scaled(double f) { return {0.1 * f, 0.03 * f}; }

TEST(LRScheduler, StepLRAndExponentialFollowTheirClosedForms) {
  auto opt = make_sgd();
  StepLR step(*opt, 3, 0.5);
  EXPECT_EQ(step.last_epoch(), 0);
  expect_lrs(step.last_lr(), scaled(1), "epoch 0");
  for (int e = 1; e <= 20; ++e) {
    step.step();
    expect_lrs(lrs_of(*opt), scaled(std::pow(0.5, e / 3)), "StepLR epoch " + std::to_string(e));
    EXPECT_EQ(step.last_lr(), lrs_of(*opt));
  }
  auto opt2 = make_sgd();
  ExponentialLR exp(*opt2, 0.9);
  for (int e = 1; e <= 20; ++e) {
    exp.step();
    expect_lrs(lrs_of(*opt2), scaled(std::pow(0.9, e)), "ExponentialLR epoch " + std::to_string(e));
  }
}

TEST(LRScheduler, MultiStepCountsRepeatedMilestones) {
  auto opt = make_sgd();
  MultiStepLR s(*opt, {8, 2, 8}, 0.1);
  Vec factors = {1, 1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 1e-3, 1e-3};
  for (std::size_t e = 1; e < factors.size(); ++e) {
    s.step();
    expect_lrs(lrs_of(*opt), scaled(factors[e]), "epoch " + std::to_string(e));
  }
}

TEST(LRScheduler, CosineAnnealingRecursionMatchesClosedFormWithinAPeriod) {
  auto opt = make_sgd();
  const double eta_min = 0.001;
  CosineAnnealingLR s(*opt, 10, eta_min);
  for (int e = 1; e <= 10; ++e) {
    s.step();
    Vec want;
    for (double base : {0.1, 0.03})
      want.push_back(eta_min + (base - eta_min) * (1 + std::cos(std::numbers::pi * e / 10)) / 2);
    expect_lrs(lrs_of(*opt), want, "epoch " + std::to_string(e));
  }
}

TEST(LRScheduler, LinearWarmupThenConstant) {
  auto opt = make_sgd();
  LinearLR s(*opt, 0.25, 1.0, 4);
  expect_lrs(lrs_of(*opt), scaled(0.25), "epoch 0");
  for (int e = 1; e <= 8; ++e) {
    s.step();
    expect_lrs(lrs_of(*opt), scaled(0.25 + 0.75 * std::min(e, 4) / 4.0), "epoch " + std::to_string(e));
  }
  EXPECT_EQ(s.base_lrs(), (Vec{0.1, 0.03}));
  EXPECT_EQ(opt->param_groups()[0].extras.at("initial_lr"), 0.1);
}

TEST(LRScheduler, LambdaUsesOneFunctionPerGroup) {
  auto opt = make_sgd();
  LambdaLR s(*opt, {[](int64_t e) { return 1.0 / static_cast<double>(e + 1); }, [](int64_t e) { return 2.0 * e; }});
  expect_lrs(lrs_of(*opt), {0.1, 0.0}, "epoch 0");
  s.step();
  s.step();
  expect_lrs(lrs_of(*opt), {0.1 / 3, 0.03 * 4}, "epoch 2");
}

TEST(LRScheduler, SequentialWarmupRestartsTheSecondSchedulerAtTheMilestone) {
  auto opt = make_sgd();
  auto warm = std::make_shared<LinearLR>(*opt, 0.1, 1.0, 5);
  auto cos = std::make_shared<CosineAnnealingLR>(*opt, 20);
  SequentialLR s(*opt, {warm, cos}, {5});
  expect_lrs(lrs_of(*opt), scaled(0.1), "epoch 0");
  for (int e = 1; e <= 30; ++e) {
    s.step();
    const double f = e < 5 ? 0.1 + 0.9 * e / 5.0 : (1 + std::cos(std::numbers::pi * (e - 5) / 20)) / 2;
    expect_lrs(lrs_of(*opt), scaled(f), "epoch " + std::to_string(e));
    EXPECT_EQ(s.last_epoch(), e);
  }
}

TEST(LRScheduler, OneCycleCyclesLrAndMomentumInversely) {
  auto opt = make_sgd();
  OneCycleLR s(*opt, {.max_lr = {1.0}, .total_steps = 11, .pct_start = 0.5, .anneal_strategy = "linear"});
  // Phase 1 ends at step 4.5 (pct_start * total - 1): lr 0.04 -> 1, momentum 0.95 -> 0.85.
  expect_lrs(lrs_of(*opt), {0.04, 0.04}, "step 0");
  EXPECT_DOUBLE_EQ(opt->param_groups()[0].options.at("momentum"), 0.95);
  for (int i = 0; i < 10; ++i) s.step();
  // Step 10 ends phase 2: min_lr = initial_lr / final_div_factor, momentum back to max.
  expect_lrs(lrs_of(*opt), {0.04 / 1e4, 0.04 / 1e4}, "step 10");
  EXPECT_DOUBLE_EQ(opt->param_groups()[1].options.at("momentum"), 0.95);
  s.step();  // step 11 = total_steps is still allowed, as in PyTorch
  EXPECT_ERROR_HAS(s.step(), "Tried to step 12 times. The specified number of total steps is 11");
  // Adam cycles beta1.
  std::vector<Tensor> ps = {ones({2})};
  Adam adam(ps);
  OneCycleLR a(adam, {.max_lr = {0.5}, .total_steps = 10});
  EXPECT_DOUBLE_EQ(adam.param_groups()[0].options.at("beta1"), 0.95);
}

TEST(LRScheduler, ResumeFromStateDictContinuesIdentically) {
  auto opt = make_sgd();
  CosineAnnealingLR s(*opt, 7, 0.01);
  for (int i = 0; i < 9; ++i) s.step();
  const StateDict saved = s.state_dict();
  const Vec saved_lrs = lrs_of(*opt);
  std::vector<Vec> expected;
  for (int i = 0; i < 10; ++i) {
    s.step();
    expected.push_back(s.last_lr());
  }
  auto opt2 = make_sgd();
  CosineAnnealingLR r(*opt2, 3);
  for (std::size_t g = 0; g < 2; ++g) opt2->param_groups()[g].options["lr"] = saved_lrs[g];
  r.load_state_dict(saved);
  EXPECT_EQ(r.last_epoch(), 9);
  for (int i = 0; i < 10; ++i) {
    r.step();
    EXPECT_EQ(r.last_lr(), expected[i]) << "step " << i;  // bitwise
  }
}

TEST(LRScheduler, PlateauReducesAfterPatienceThenCoolsDown) {
  auto opt = make_sgd();
  ReduceLROnPlateau s(*opt, {.factor = 0.5, .patience = 1, .cooldown = 1, .min_lr = {0.04, 0.0}});
  const Vec metrics = {1.0, 0.9, 0.95, 0.95, 0.95, 0.95, 0.95};
  const std::vector<Vec> want = {{0.1, 0.03},   {0.1, 0.03},   {0.1, 0.03},   {0.05, 0.015},
                                 {0.05, 0.015}, {0.05, 0.015}, {0.04, 0.0075}};
  for (std::size_t i = 0; i < metrics.size(); ++i) {
    s.step(metrics[i]);
    expect_lrs(s.last_lr(), want[i], "step " + std::to_string(i));
  }
  EXPECT_EQ(s.best(), 0.9);
}

TEST(LRSchedulerErrors, BadArgumentsUsePyTorchsMessages) {
  auto opt = make_sgd();
  EXPECT_ERROR_HAS(StepLR(*opt, 0), "StepLR: step_size must be a positive integer, got 0");
  EXPECT_ERROR_HAS(CosineAnnealingLR(*opt, -1), "T_max must be a positive integer");
  EXPECT_ERROR_HAS(LinearLR(*opt, 0.0), "Starting multiplicative factor expected to be greater than 0");
  EXPECT_ERROR_HAS(LinearLR(*opt, 0.5, 2.0), "Ending multiplicative factor expected to be between 0 and 1.");
  EXPECT_ERROR_HAS(LambdaLR(*opt, {nullptr, nullptr, nullptr}), "Expected 2 lr_lambdas, but got 3");
  EXPECT_ERROR_HAS(OneCycleLR(*opt, {.max_lr = {0.1}}), "You must define either total_steps OR");
  EXPECT_ERROR_HAS(OneCycleLR(*opt, {.max_lr = {0.1, 0.2, 0.3}, .total_steps = 4}),
                   "expected 2 values for max_lr, but got 3");
  EXPECT_ERROR_HAS(ReduceLROnPlateau(*opt, {.factor = 1.0}), "Factor should be < 1.0.");
  EXPECT_ERROR_HAS(ReduceLROnPlateau(*opt, {.mode = "avg"}), "mode avg is unknown!");
  EXPECT_ERROR_HAS(SequentialLR(*opt, {}, {}), "expects at least one scheduler");
  auto other = make_sgd();
  auto a = std::make_shared<StepLR>(*opt, 2);
  auto b = std::make_shared<StepLR>(*other, 2);
  EXPECT_ERROR_HAS(SequentialLR(*opt, {a, b}, {3}), "expects all schedulers to belong to the same optimizer");
  EXPECT_ERROR_HAS(SequentialLR(*opt, {a}, {3}), "one more than the number of milestone points");
  auto fresh = make_sgd();
  EXPECT_ERROR_HAS(StepLR(*fresh, 2, 0.1, 5), "param 'initial_lr' is not specified in param_groups[0]");
}

TEST(LRSchedulerErrors, BadStateDictsNameTheKeyAndChangeNothing) {
  auto opt = make_sgd();
  StepLR s(*opt, 3);
  const auto f64 = [](double v) { return scalar_tensor(v, DType::f64); };
  EXPECT_ERROR_HAS(s.load_state_dict({{"bogus", f64(1)}}), "StepLR.load_state_dict: unexpected key 'bogus'");
  EXPECT_ERROR_HAS(s.load_state_dict({{"last_epoch", f64(1.5)}}), "key 'last_epoch' must be a whole number, got 1.5");
  EXPECT_ERROR_HAS(s.load_state_dict({{"base_lrs", zeros({3}, {DType::f64, nullptr})}}),
                   "key 'base_lrs' has 3 values, but the optimizer has 2 param groups");
  EXPECT_ERROR_HAS(s.load_state_dict({{"gamma", zeros({2}, {DType::f64, nullptr})}}),
                   "key 'gamma' must be a 0-d tensor");
  EXPECT_ERROR_HAS(s.load_state_dict({{"last_epoch", f64(4)}, {"step_size", f64(0)}}),
                   "key 'step_size' must be a positive integer");
  EXPECT_EQ(s.last_epoch(), 0);
  ReduceLROnPlateau p(*opt);
  EXPECT_ERROR_HAS(p.load_state_dict({{"patience", f64(0.5)}}), "key 'patience' must be a whole number");
}

}  // namespace
}  // namespace strata::optim
