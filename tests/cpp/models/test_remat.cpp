// Rematerialization on nn modules and the zoo: every chain policy's gradients and batch-norm
// running statistics bitwise equal to the plain forward's; checkpoint_sequential over a
// Sequential; the fast-tier peak of one training step per policy; errors.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <functional>

#include "autograd/remat/peak.h"
#include "autograd/remat/revolve.h"
#include "core/factories.h"
#include "core/pin_set.h"
#include "core/rng.h"
#include "models/activation.h"
#include "models/container.h"
#include "models/linear.h"
#include "models/pooling.h"
#include "models/remat.h"
#include "models/zoo/densenet.h"
#include "models/zoo/mlp.h"
#include "models/zoo/resnet.h"
#include "models/zoo/vgg.h"
#include "ops/reduction.h"
#include "ops/softmax_loss.h"
#include "tests/cpp/bitwise.h"
#include "tests/cpp/core/test_util.h"
#include "tests/cpp/remat_steps.h"

namespace strata_test {
namespace {

using namespace strata;
using nn::Module;
using remat::ChainPolicy;
using ::testing::HasSubstr;
using testing_util::children_of;
using testing_util::expect_same;
using testing_util::ModuleList;
using testing_util::StepResult;
using testing_util::train_step;

using testing_util::same_bits;

std::vector<ChainPolicy> policies() {
  return {ChainPolicy::store_all(), ChainPolicy::recompute_all(), ChainPolicy::every_k(2), ChainPolicy::sqrt_n(),
          ChainPolicy::revolve(1),  ChainPolicy::revolve(2),      ChainPolicy::revolve(3)};
}

// Runs `model` plainly and as a RematSequential over `chain` under every policy.
void check_model(Module& model, const ModuleList& chain, const Tensor& x, const Tensor& target, bool expect_buffers) {
  const StateDict initial = model.state_dict();
  StateDict frozen;  // a deep copy: state_dict() entries are views of the live tensors
  for (const auto& [k, v] : initial) frozen.emplace_back(k, v.clone());
  const StepResult ref = train_step(model, frozen, x, target, [&](const Tensor& in) { return model.forward(in); });
  if (expect_buffers) {
    // The step changed the running statistics, so comparing them below is meaningful.
    bool changed = false;
    for (std::size_t i = 0; i < ref.buffers.size(); ++i)
      for (const auto& [k, v] : frozen)
        if (k == ref.buffers[i].first && !same_bits(v, ref.buffers[i].second)) changed = true;
    EXPECT_TRUE(changed);
  }
  for (const ChainPolicy& p : policies()) {
    SCOPED_TRACE(p.to_string());
    nn::RematSequential seq(p);
    for (const auto& m : chain) seq.push_back(m);
    expect_same(train_step(model, frozen, x, target, [&](const Tensor& in) { return seq.forward(in); }), ref);
  }
}

TEST(RematModels, ZooMlp) {
  manual_seed(1);
  auto mlp = std::make_shared<nn::zoo::MLP>(std::vector<int64_t>{24, 48, 48, 32, 10});
  Tensor x = randn({6, 24});
  Tensor target = tensor<int64_t>({1, 3, 5, 7, 9, 0});
  check_model(*mlp, children_of(mlp), x, target, false);
}

ModuleList vgg_chain(const std::shared_ptr<Module>& vgg) {
  ModuleList chain = children_of(vgg->child("features"));
  chain.push_back(vgg->child("avgpool"));
  chain.push_back(std::make_shared<nn::Flatten>(1));
  for (auto& m : children_of(vgg->child("classifier"))) chain.push_back(m);
  return chain;
}

void check_vgg(bool batch_norm) {
  manual_seed(2);
  nn::zoo::VGGOptions o;
  o.config = {8, 0, 12, 12, 0};
  o.batch_norm = batch_norm;
  o.num_classes = 5;
  o.pool_size = 1;
  o.hidden = 16;
  o.dropout = 0.5;
  auto vgg = std::make_shared<nn::zoo::VGG>(o);
  Tensor x = randn({4, 3, 8, 8});
  Tensor target = tensor<int64_t>({0, 1, 2, 4});
  check_model(*vgg, vgg_chain(vgg), x, target, batch_norm);
}

TEST(RematModels, VggWithDropout) { check_vgg(false); }
TEST(RematModels, VggWithBatchNormKeepsRunningStatisticsOfOneForward) { check_vgg(true); }

TEST(RematModels, CifarResNet) {
  manual_seed(3);
  nn::zoo::ResNetOptions o = nn::zoo::cifar_resnet_options(8, 4);
  o.widths = {4, 8, 8};
  auto net = std::make_shared<nn::zoo::ResNet>(o);
  ModuleList chain{std::make_shared<nn::Sequential>(
      std::initializer_list<std::shared_ptr<Module>>{net->child("conv1"), net->child("bn1"), net->child("relu")})};
  for (const char* stage : {"layer1", "layer2", "layer3"})
    for (auto& block : children_of(net->child(stage))) chain.push_back(block);
  chain.push_back(net->child("avgpool"));
  chain.push_back(std::make_shared<nn::Flatten>(1));
  chain.push_back(net->child("fc"));
  Tensor x = randn({2, 3, 8, 8});
  Tensor target = tensor<int64_t>({3, 1});
  check_model(*net, chain, x, target, true);
}

TEST(RematModels, SmallDenseNetWithDropout) {
  manual_seed(4);
  nn::zoo::DenseNetOptions o;
  o.growth_rate = 4;
  o.block_config = {2, 2};
  o.num_init_features = 8;
  o.bn_size = 2;
  o.drop_rate = 0.2;
  o.num_classes = 3;
  o.stem = "cifar";
  auto net = std::make_shared<nn::zoo::DenseNet>(o);
  ModuleList chain = children_of(net->child("features"));
  chain.push_back(std::make_shared<nn::ReLU>());
  chain.push_back(std::make_shared<nn::AdaptiveAvgPool2d>(1));
  chain.push_back(std::make_shared<nn::Flatten>(1));
  chain.push_back(net->child("classifier"));
  Tensor x = randn({2, 3, 8, 8});
  Tensor target = tensor<int64_t>({2, 0});
  check_model(*net, chain, x, target, true);
}

TEST(RematModels, CheckpointSequentialOverASequential) {
  manual_seed(5);
  nn::zoo::VGGOptions o;
  o.config = {6, 6, 0, 8};
  o.batch_norm = true;
  o.num_classes = 4;
  o.pool_size = 1;
  o.hidden = 8;
  auto vgg = std::make_shared<nn::zoo::VGG>(o);
  auto features = std::dynamic_pointer_cast<nn::Sequential>(vgg->child("features"));
  ASSERT_NE(features, nullptr);
  auto tail = [&](const Tensor& h) {
    return vgg->child("classifier")->forward(nn::Flatten(1).forward(vgg->child("avgpool")->forward(h)));
  };
  Tensor x = randn({3, 3, 6, 6});
  Tensor target = tensor<int64_t>({0, 1, 3});
  StateDict frozen;
  for (const auto& [k, v] : vgg->state_dict()) frozen.emplace_back(k, v.clone());
  const StepResult ref = train_step(*vgg, frozen, x, target, [&](const Tensor& in) { return vgg->forward(in); });
  for (int64_t segments : std::vector<int64_t>{1, 2, 3, static_cast<int64_t>(features->size())}) {
    SCOPED_TRACE("segments " + std::to_string(segments));
    expect_same(train_step(*vgg, frozen, x, target,
                           [&](const Tensor& in) { return tail(nn::checkpoint_sequential(*features, segments, in)); }),
                ref);
  }
  const int64_t n = static_cast<int64_t>(features->size());
  EXPECT_THAT(ERROR_MESSAGE(nn::checkpoint_sequential(*features, 0, x)),
              HasSubstr("0 segments requested for a Sequential of " + std::to_string(n) + " modules"));
  EXPECT_THAT(ERROR_MESSAGE(nn::checkpoint_sequential(*features, n + 1, x)),
              HasSubstr(std::to_string(n + 1) + " segments requested"));
  nn::Sequential empty;
  EXPECT_THAT(ERROR_MESSAGE(nn::checkpoint_sequential(empty, 1, x)), HasSubstr("the Sequential has no modules"));
}

TEST(RematModels, RematSequentialErrors) {
  EXPECT_THAT(ERROR_MESSAGE(nn::RematSequential(ChainPolicy::revolve(0))),
              HasSubstr("Revolve needs at least 1 snapshot (the input), got 0"));
  EXPECT_THAT(ERROR_MESSAGE(nn::RematSequential(ChainPolicy::every_k(-2))),
              HasSubstr("EveryK needs k >= 1 steps per segment, got -2"));
  nn::RematSequential seq;
  EXPECT_THAT(ERROR_MESSAGE(seq.forward(ones({2}))), HasSubstr("RematSequential: no modules to run"));
  EXPECT_THAT(ERROR_MESSAGE(seq.set_policy(ChainPolicy::revolve(-1))), HasSubstr("got -1"));
  EXPECT_EQ(seq.policy().kind, remat::RematPolicy::StoreAll);  // unchanged by the failed call
  EXPECT_THAT(seq.to_string(), HasSubstr("RematSequential"));
}

TEST(RematPeak, RecomputingPoliciesLowerTheFastTierPeakOfADeepMlp) {
  manual_seed(6);
  // Activations (batch x width) dominate the parameters and their gradients (width x width).
  const int depth = 32;
  const int64_t width = 64, batch = 512;  // small enough for the sanitizer trees; the ratios do not depend on it
  ModuleList layers;
  for (int i = 0; i < depth; ++i)
    layers.push_back(std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<Module>>{
        std::make_shared<nn::Linear>(width, width), std::make_shared<nn::GELU>()}));
  Tensor x = randn({batch, width});
  auto measure = [&](const ChainPolicy& p) {
    nn::RematSequential seq(p);
    for (auto& l : layers) seq.push_back(l);
    seq.zero_grad();
    const remat::PeakMeasurement m = remat::measure_fast_peak([&] { sum(seq.forward(x)).backward(); });
    seq.zero_grad();
    std::printf("[ remat peak ] depth %d, width %lld, batch %lld: %-14s step peak %8.2f MiB (baseline %.2f MiB)\n",
                depth, static_cast<long long>(width), static_cast<long long>(batch), p.to_string().c_str(),
                static_cast<double>(m.step_peak_bytes()) / (1 << 20),
                static_cast<double>(m.baseline_bytes) / (1 << 20));
    return m.step_peak_bytes();
  };
  const std::size_t store_all = measure(ChainPolicy::store_all());
  const std::size_t recompute_all = measure(ChainPolicy::recompute_all());
  const std::size_t sqrt_n = measure(ChainPolicy::sqrt_n());
  const std::size_t revolve = measure(ChainPolicy::revolve(3));
  const std::size_t activation = static_cast<std::size_t>(batch * width) * sizeof(float);
  // StoreAll keeps two activations per step (Linear's input, GELU's input); RecomputeAll one (the
  // step's input); SqrtN about 2·sqrt(n); Revolve(3) three snapshots and one step's values.
  EXPECT_GT(store_all, static_cast<std::size_t>(2 * depth) * activation);
  EXPECT_LT(recompute_all, store_all);
  EXPECT_LT(sqrt_n, store_all);
  EXPECT_LT(revolve, store_all);
  EXPECT_LT(revolve + static_cast<std::size_t>(depth / 2) * activation, store_all);
}

TEST(RematPeak, BadInput) {
  EXPECT_THAT(ERROR_MESSAGE(remat::measure_fast_peak(nullptr)), HasSubstr("the step to measure is empty"));
}

}  // namespace
}  // namespace strata_test
