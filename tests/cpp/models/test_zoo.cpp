// The model zoo: structure (parameter counts that torchvision publishes, state_dict names),
// forward shapes, gradients reaching every parameter, DLRM's wiring against plain ops, bad input.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "autograd/engine.h"
#include "autograd/grad_mode.h"
#include "core/error.h"
#include "core/factories.h"
#include "models/linear.h"
#include "models/zoo/densenet.h"
#include "models/zoo/dlrm.h"
#include "models/zoo/mlp.h"
#include "models/zoo/resnet.h"
#include "models/zoo/vgg.h"
#include "ops/binary.h"
#include "ops/embedding.h"
#include "ops/linalg.h"
#include "ops/reduction.h"
#include "ops/softmax_loss.h"
#include "ops/unary.h"
#include "tests/cpp/error_text.h"

namespace strata::nn::zoo {
namespace {

int64_t count_parameters(const Module& m) {
  int64_t n = 0;
  for (const Tensor& p : m.parameters()) n += p.numel();
  return n;
}

std::vector<std::string> keys(const Module& m) {
  std::vector<std::string> out;
  for (const auto& [k, v] : m.state_dict()) out.push_back(k);
  return out;
}

bool has_key(const Module& m, const std::string& key) {
  const auto k = keys(m);
  return std::find(k.begin(), k.end(), key) != k.end();
}

template <typename Fn>
void expect_error(Fn&& fn, const std::string& needle) {
  try {
    fn();
    FAIL() << "no error; expected one containing: " << needle;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  const Tensor ac = a.to(DType::f64).contiguous(), bc = b.to(DType::f64).contiguous();
  double worst = 0;
  for (int64_t i = 0; i < ac.numel(); ++i)
    worst = std::max(worst, std::abs(ac.data<double>()[i] - bc.data<double>()[i]));
  return worst;
}

/// Runs a cross-entropy step and checks that every parameter received a finite, non-zero gradient.
void expect_gradients_everywhere(Module& m, const Tensor& x, int64_t classes) {
  Generator gen(3);
  const Tensor y = randint(0, classes, {x.sizes()[0]}, {DType::i64}, &gen);
  cross_entropy(m.forward(x), y).backward();
  for (const auto& [name, p] : m.named_parameters()) {
    const Tensor g = p.grad();
    ASSERT_TRUE(g.defined()) << name;
    EXPECT_GT(sum(mul(g, g)).item<double>(), 0.0) << name;
  }
}

TEST(ZooMLP, NamesLikeSequentialAndValidates) {
  MLP m({8, 16, 4}, "relu");
  EXPECT_EQ(keys(m), (std::vector<std::string>{"0.weight", "0.bias", "2.weight", "2.bias"}));
  EXPECT_EQ(m.forward(randn({5, 8})).sizes(), (Dims{5, 4}));
  MLP s({3, 1}, "relu", "sigmoid");
  EXPECT_EQ(s.size(), 2u);  // Linear, Sigmoid
  expect_error([] { MLP({8}); }, "needs at least an input and an output width");
  expect_error([] { MLP({8, 0, 2}); }, "width 1 must be positive");
  expect_error([] { MLP({8, 2}, "swish"); }, "unknown activation 'swish'");
}

TEST(ZooVGG, ConfigurationsAndDeepVariants) {
  auto convs = [](const std::vector<int64_t>& cfg) {
    return std::count_if(cfg.begin(), cfg.end(), [](int64_t v) { return v > 0; });
  };
  EXPECT_EQ(convs(vgg_config(11)), 8);
  EXPECT_EQ(convs(vgg_config(16)), 13);
  EXPECT_EQ(convs(vgg_config(19)), 16);
  // Vgg116 and Vgg416: Vgg16's five blocks with 20 / 80 more convolutions each (+3 linear layers).
  EXPECT_EQ(convs(deep_vgg_config(116)) + 3, 116);
  EXPECT_EQ(convs(deep_vgg_config(416)) + 3, 416);
  const auto deep = deep_vgg_config(116);
  EXPECT_EQ(std::count(deep.begin(), deep.end(), 0), 5);
  expect_error([] { vgg_config(17); }, "depth 17 is not one of torchvision's");
  expect_error([] { deep_vgg_config(117); }, "depth 16 + 5k");
}

TEST(ZooVGG, TorchvisionNamesAndACifarForward) {
  VGGOptions o;
  o.config = {8, 0, 16, 0};
  o.batch_norm = true;
  o.num_classes = 10;
  o.pool_size = 1;
  o.hidden = 32;
  VGG m(o);
  for (const char* k : {"features.0.weight", "features.1.running_mean", "features.1.num_batches_tracked",
                        "features.4.weight", "classifier.0.weight", "classifier.3.weight", "classifier.6.bias"})
    EXPECT_TRUE(has_key(m, k)) << k;
  EXPECT_EQ(m.forward(randn({2, 3, 16, 16})).sizes(), (Dims{2, 10}));
  expect_gradients_everywhere(m, randn({2, 3, 16, 16}), 10);
  expect_error([&] { m.forward(randn({2, 1, 16, 16})); }, "VGG: expected a 4-D input [N, 3, H, W]");
}

TEST(ZooResNet, TorchvisionParameterCountsAndNames) {
  ResNet r18(resnet_options(18));
  EXPECT_EQ(count_parameters(r18), 11689512);  // torchvision.models.resnet18
  for (const char* k :
       {"conv1.weight", "bn1.num_batches_tracked", "layer1.0.conv1.weight", "layer2.0.downsample.0.weight",
        "layer2.0.downsample.1.running_var", "layer4.1.bn2.bias", "fc.weight", "fc.bias"})
    EXPECT_TRUE(has_key(r18, k)) << k;
  EXPECT_FALSE(has_key(r18, "layer1.0.downsample.0.weight"));
  ResNet r50(resnet_options(50));
  EXPECT_EQ(count_parameters(r50), 25557032);                 // torchvision.models.resnet50
  EXPECT_TRUE(has_key(r50, "layer1.0.downsample.0.weight"));  // 64 -> 256 channels
  EXPECT_TRUE(has_key(r50, "layer3.5.conv3.weight"));
  EXPECT_EQ(resnet_options(200).layers, (std::vector<int64_t>{3, 24, 36, 3}));
  expect_error([] { resnet_options(19); }, "depth 19 is not one of");
}

TEST(ZooResNet, CifarAndBottleneckForwardAndGradients) {
  ResNet r20(cifar_resnet_options(20));
  EXPECT_EQ(count_parameters(r20), 272474);  // He et al.'s ResNet-20 (0.27M), with option-B shortcuts
  ResNetOptions o;
  o.bottleneck = true;
  o.layers = {1, 1};
  o.widths = {4, 8};
  o.stem = "cifar";
  o.num_classes = 5;
  ResNet small(o);
  EXPECT_EQ(small.forward(randn({2, 3, 8, 8})).sizes(), (Dims{2, 5}));
  expect_gradients_everywhere(small, randn({2, 3, 8, 8}), 5);
  o.stem = "tiny";
  expect_error([&] { ResNet bad(o); }, "stem must be \"imagenet\" or \"cifar\"");
  expect_error([] { cifar_resnet_options(21); }, "depth 6n + 2");
}

TEST(ZooDenseNet, TorchvisionParameterCountAndNames) {
  DenseNet d121(densenet_options(121));
  EXPECT_EQ(count_parameters(d121), 7978856);  // torchvision.models.densenet121
  for (const char* k :
       {"features.conv0.weight", "features.norm0.running_mean", "features.denseblock1.denselayer1.norm1.weight",
        "features.denseblock1.denselayer6.conv2.weight", "features.transition1.conv.weight",
        "features.denseblock4.denselayer16.norm2.bias", "features.norm5.weight", "classifier.bias"})
    EXPECT_TRUE(has_key(d121, k)) << k;
  EXPECT_EQ(densenet_options(264).block_config, (std::vector<int64_t>{6, 12, 64, 48}));
  expect_error([] { densenet_options(100); }, "depth 100 is not one of");
}

TEST(ZooDenseNet, SmallCifarForwardAndGradients) {
  DenseNetOptions o;
  o.growth_rate = 4;
  o.block_config = {2, 2};
  o.num_init_features = 8;
  o.bn_size = 2;
  o.num_classes = 3;
  o.stem = "cifar";
  DenseNet d(o);
  // 8 + 2·4 = 16 channels, transition to 8, + 2·4 = 16 into norm5 and the classifier.
  const StateDict sd = d.state_dict();
  EXPECT_EQ(sd.back().first, "classifier.bias");
  EXPECT_EQ(sd.back().second.sizes(), (Dims{3}));
  ASSERT_NE(state_find(sd, "classifier.weight"), nullptr);
  EXPECT_EQ(state_find(sd, "classifier.weight")->sizes(), (Dims{3, 16}));
  ASSERT_NE(state_find(sd, "features.norm5.weight"), nullptr);
  EXPECT_EQ(state_find(sd, "features.norm5.weight")->sizes(), (Dims{16}));
  EXPECT_EQ(d.forward(randn({2, 3, 8, 8})).sizes(), (Dims{2, 3}));
  expect_gradients_everywhere(d, randn({2, 3, 8, 8}), 3);
}

TEST(ZooDLRM, ReferenceNamesShapesAndCounts) {
  DLRM m(DLRMOptions{});  // the reference's defaults: d 2, tables 4-3-2, bottom 4-3-2, top 4-2-1
  EXPECT_EQ(keys(m), (std::vector<std::string>{"emb_l.0.weight", "emb_l.1.weight", "emb_l.2.weight", "bot_l.0.weight",
                                               "bot_l.0.bias", "bot_l.2.weight", "bot_l.2.bias", "top_l.0.weight",
                                               "top_l.0.bias", "top_l.2.weight", "top_l.2.bias", "top_l.4.weight",
                                               "top_l.4.bias"}));
  EXPECT_EQ(m.interaction_width(), 2 + 6);  // d + F(F-1)/2 with F = 4
  EXPECT_EQ(count_parameters(m), 18 + 23 + 49);
  DLRMOptions o;
  o.interaction_itself = true;
  EXPECT_EQ(DLRM(o).interaction_width(), 2 + 10);
  o.interaction = "cat";
  EXPECT_EQ(DLRM(o).interaction_width(), 4 * 2);
  // Tables start U(±sqrt(1/rows)).
  const Tensor w = m.state_dict()[0].second;
  EXPECT_LE(amax(w.view({-1}), {0}).item<double>(), std::sqrt(1.0 / 4) + 1e-7);
}

// With external tables (emb::TieredDLRM's) the model has only its MLPs, and the table-taking
// forward is refused; the parts run one by one.
TEST(ZooDLRM, ExternalTablesBuildOnlyTheMLPs) {
  DLRMOptions o;
  o.external_tables = true;
  Generator gen(5);
  DLRM ext(o, &gen);
  EXPECT_EQ(keys(ext), (std::vector<std::string>{"bot_l.0.weight", "bot_l.0.bias", "bot_l.2.weight", "bot_l.2.bias",
                                                 "top_l.0.weight", "top_l.0.bias", "top_l.2.weight", "top_l.2.bias",
                                                 "top_l.4.weight", "top_l.4.bias"}));
  EXPECT_EQ(ext.interaction_width(), 2 + 6);
  EXPECT_EQ(ext.bottom_mlp().state_dict().size(), 4u);
  EXPECT_EQ(ext.top_mlp().state_dict().size(), 6u);
  EXPECT_ERROR_HAS(ext.forward(ones({2, 4}), {}, {}), "this model's tables are external");
  const Tensor x = ext.bottom_mlp().forward(ones({2, 4}));
  EXPECT_EQ(ext.top_mlp().forward(ext.interact(x, {x, x, x})).sizes(), (std::vector<int64_t>{2, 1}));
}

TEST(ZooDLRM, ForwardIsTheReferenceWiringOfPlainOps) {
  DLRMOptions o;
  o.sparse_feature_size = 4;
  o.embedding_sizes = {10, 7};
  o.bottom_mlp = {5, 8, 4};
  o.top_mlp = {6, 1};
  DLRM m(o);
  Generator gen(11);
  const Tensor dense = rand({3, 5}, {}, &gen);
  const std::vector<Tensor> idx{tensor<int64_t>({1, 2, 9, 4, 4, 0}), tensor<int64_t>({6, 0, 3})};
  const std::vector<Tensor> off{tensor<int64_t>({0, 2, 3}), tensor<int64_t>({0, 1, 1})};  // an empty bag too
  const Tensor out = m.forward(dense, idx, off);
  ASSERT_EQ(out.sizes(), (Dims{3, 1}));
  auto P = [&](const std::string& k) {
    for (const auto& [name, t] : m.state_dict())
      if (name == k) return t;
    return Tensor();
  };
  Tensor x =
      relu(linear(relu(linear(dense, P("bot_l.0.weight"), P("bot_l.0.bias"))), P("bot_l.2.weight"), P("bot_l.2.bias")));
  std::vector<Tensor> feats{x, embedding_bag(P("emb_l.0.weight"), idx[0], off[0]),
                            embedding_bag(P("emb_l.1.weight"), idx[1], off[1])};
  Tensor z = dot_interaction(feats);
  Tensor ref =
      sigmoid(linear(relu(linear(z, P("top_l.0.weight"), P("top_l.0.bias"))), P("top_l.2.weight"), P("top_l.2.bias")));
  for (int64_t i = 0; i < 3; ++i)
    EXPECT_FLOAT_EQ(out.select(0, i).select(0, 0).item<float>(), ref.select(0, i).select(0, 0).item<float>());
  mse_loss(out, full({3, 1}, 0.5)).backward();
  for (const auto& [name, p] : m.named_parameters()) EXPECT_TRUE(p.grad().defined()) << name;
}

TEST(ZooDLRM, FusedMLPsTakeRowBlocksAtInference) {
  // FusedMLP hands its Linear + activation runs to linear_stack: at inference with many rows that is
  // the row-block path (Note [Row blocks through a linear stack]), which must give training's output.
  Generator gen(12);
  auto mlp = reference_mlp({13, 128, 64, 1}, /*sigmoid_last=*/true, &gen);
  const Tensor x = rand({3000, 13}, {}, &gen);
  const Tensor trained = mlp->forward(x);  // grad mode: the chain of linear calls, recorded
  ASSERT_TRUE(trained.requires_grad());
  std::vector<LinearLayer> layers;
  for (int64_t i = 0; i < 6; i += 2) {
    auto& lin = static_cast<Linear&>(*(*mlp)[i]);
    layers.push_back({lin.weight(), lin.bias(), i == 4 ? Activation::Sigmoid : Activation::ReLU});
  }
  autograd::NoGradGuard no_grad;
  EXPECT_GT(linear_stack_blocks(x, layers), 0);
  const Tensor inferred = mlp->forward(x);
  EXPECT_FALSE(inferred.requires_grad());
  ASSERT_EQ(inferred.sizes(), trained.sizes());
  EXPECT_LT(max_abs_diff(inferred, trained.detach()), 1e-6);
  // A child that is not a Linear + activation pair ends a run: both runs and the child still apply.
  FusedMLP split;
  split.push_back((*mlp)[0]);
  split.push_back((*mlp)[1]);
  split.push_back(std::make_shared<Identity>());
  for (int64_t i = 2; i < 6; ++i) split.push_back((*mlp)[i]);
  EXPECT_LT(max_abs_diff(split.forward(x), inferred), 1e-6);
}

TEST(ZooDLRM, BadInputIsNamed) {
  DLRMOptions o;
  o.bottom_mlp = {4, 3};
  expect_error([&] { DLRM bad(o); }, "the bottom MLP's last width (3) must equal the sparse feature size (2)");
  o = DLRMOptions{};
  o.interaction = "sum";
  expect_error([&] { DLRM bad(o); }, "interaction must be \"dot\" or \"cat\"");
  DLRM m(DLRMOptions{});
  const std::vector<Tensor> idx{tensor<int64_t>({0}), tensor<int64_t>({1})};
  const std::vector<Tensor> off{tensor<int64_t>({0}), tensor<int64_t>({0})};
  expect_error([&] { m.forward(rand({1, 4}), idx, off); }, "expected indices and offsets for 3 tables, got 2 and 2");
  expect_error([&] { m.forward(rand({1, 5}), idx, off); }, "expected dense features [B, 4], got [1, 5]");
  expect_error([&] { m.forward(rand({1, 4})); }, "DLRM: forward takes (dense, indices per table, offsets per table)");
  EXPECT_EQ(parse_arch("4-3-2", "--arch-mlp-bot"), (std::vector<int64_t>{4, 3, 2}));
  expect_error([] { parse_arch("4--2", "--arch-mlp-bot"); }, "--arch-mlp-bot: '4--2' is not a dash-separated list");
  expect_error([] { parse_arch("4-x", "--arch-mlp-top"); }, "bad element 'x'");
  expect_error([] { parse_arch("", "--arch-embedding-size"); }, "--arch-embedding-size: empty list");
}

}  // namespace
}  // namespace strata::nn::zoo
