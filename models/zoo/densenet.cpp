#include "models/zoo/densenet.h"

#include "core/error.h"
#include "models/activation.h"
#include "models/conv.h"
#include "models/dropout.h"
#include "models/linear.h"
#include "models/normalization.h"
#include "models/pooling.h"
#include "models/zoo/detail/init.h"
#include "ops/pooling.h"
#include "ops/shape_ops.h"
#include "ops/unary.h"

namespace strata::nn::zoo {
namespace {

std::shared_ptr<Module> conv(int64_t in, int64_t out, int64_t k, int64_t stride, Generator* gen) {
  return std::make_shared<Conv2d>(in, out, k, stride, k / 2, 1, 1, false, "zeros", gen);
}

}  // namespace

DenseLayer::DenseLayer(int64_t in_features, int64_t growth_rate, int64_t bn_size, double drop_rate, Generator* gen)
    : Module("DenseLayer") {
  norm1_ = register_module("norm1", std::make_shared<BatchNorm2d>(in_features));
  register_module("relu1", std::make_shared<ReLU>());
  conv1_ = register_module("conv1", conv(in_features, bn_size * growth_rate, 1, 1, gen));
  norm2_ = register_module("norm2", std::make_shared<BatchNorm2d>(bn_size * growth_rate));
  register_module("relu2", std::make_shared<ReLU>());
  conv2_ = register_module("conv2", conv(bn_size * growth_rate, growth_rate, 3, 1, gen));
  // torchvision applies F.dropout with drop_rate; a registered Dropout follows train/eval the same way.
  if (drop_rate > 0) dropout_ = register_module("dropout", std::make_shared<Dropout>(drop_rate, gen));
}

Tensor DenseLayer::forward(const Tensor& input) {
  Tensor y = (*conv1_)(relu((*norm1_)(input)));
  y = (*conv2_)(relu((*norm2_)(y)));
  return dropout_ ? (*dropout_)(y) : y;
}

int64_t DenseLayer::append_layer_steps(int64_t input, std::vector<remat::GraphStep>& steps) const {
  int64_t x = nn::append_remat_steps(norm1_, input, steps);
  x = nn::append_relu_step(x, steps);
  x = nn::append_remat_steps(conv1_, x, steps);
  x = nn::append_remat_steps(norm2_, x, steps);
  x = nn::append_relu_step(x, steps);
  x = nn::append_remat_steps(conv2_, x, steps);
  return dropout_ ? nn::append_remat_steps(dropout_, x, steps) : x;
}

DenseBlock::DenseBlock(int64_t num_layers, int64_t in_features, int64_t growth_rate, int64_t bn_size, double drop_rate,
                       Generator* gen)
    : Module("DenseBlock") {
  for (int64_t i = 0; i < num_layers; ++i)
    layers_.push_back(register_module(
        "denselayer" + std::to_string(i + 1),
        std::make_shared<DenseLayer>(in_features + i * growth_rate, growth_rate, bn_size, drop_rate, gen)));
}

Tensor DenseBlock::forward(const Tensor& input) {
  std::vector<Tensor> features{input};
  for (auto& layer : layers_) features.push_back((*layer)(features.size() == 1 ? input : cat(features, 1)));
  return cat(features, 1);
}

int64_t DenseBlock::append_remat_steps(int64_t input, std::vector<remat::GraphStep>& steps) const {
  auto concat = [](const autograd::TensorList& in) { return cat(in, 1); };
  std::vector<int64_t> features{input};
  for (const auto& layer : layers_) {
    const int64_t x = features.size() == 1 ? input : nn::append_remat_step(concat, features, "cat", steps);
    features.push_back(static_cast<const DenseLayer&>(*layer).append_layer_steps(x, steps));
  }
  return nn::append_remat_step(concat, features, "cat", steps);
}

DenseNet::DenseNet(const DenseNetOptions& o, Generator* gen) : Module("DenseNet"), options_(o) {
  STRATA_CHECK(!o.block_config.empty(), "DenseNet: block_config is empty");
  for (std::size_t i = 0; i < o.block_config.size(); ++i)
    STRATA_CHECK(o.block_config[i] >= 1, "DenseNet: block ", i + 1, " needs at least one layer, got ",
                 o.block_config[i]);
  STRATA_CHECK(
      o.growth_rate >= 1 && o.num_init_features >= 1 && o.bn_size >= 1 && o.num_classes >= 1 && o.in_channels >= 1,
      "DenseNet: growth_rate, num_init_features, bn_size, num_classes and in_channels must be positive");
  STRATA_CHECK(o.drop_rate >= 0 && o.drop_rate < 1, "DenseNet: drop_rate must be in [0, 1), got ", o.drop_rate);
  STRATA_CHECK(o.stem == "imagenet" || o.stem == "cifar", "DenseNet: stem must be \"imagenet\" or \"cifar\", got \"",
               o.stem, "\"");
  auto features = std::make_shared<Sequential>();
  const bool imagenet = o.stem == "imagenet";
  features->register_module("conv0", imagenet ? std::make_shared<Conv2d>(o.in_channels, o.num_init_features, 7, 2, 3, 1,
                                                                         1, false, "zeros", gen)
                                              : conv(o.in_channels, o.num_init_features, 3, 1, gen));
  features->register_module("norm0", std::make_shared<BatchNorm2d>(o.num_init_features));
  features->register_module("relu0", std::make_shared<ReLU>());
  if (imagenet) features->register_module("pool0", std::make_shared<MaxPool2d>(3, 2, 1));
  int64_t n = o.num_init_features;
  for (std::size_t i = 0; i < o.block_config.size(); ++i) {
    features->register_module(
        "denseblock" + std::to_string(i + 1),
        std::make_shared<DenseBlock>(o.block_config[i], n, o.growth_rate, o.bn_size, o.drop_rate, gen));
    n += o.block_config[i] * o.growth_rate;
    if (i + 1 != o.block_config.size()) {
      auto t = std::make_shared<Sequential>();
      t->set_type_name("Transition");
      t->register_module("norm", std::make_shared<BatchNorm2d>(n));
      t->register_module("relu", std::make_shared<ReLU>());
      t->register_module("conv", conv(n, n / 2, 1, 1, gen));
      t->register_module("pool", std::make_shared<AvgPool2d>(2, 2));
      features->register_module("transition" + std::to_string(i + 1), t);
      n /= 2;
    }
  }
  features->register_module("norm5", std::make_shared<BatchNorm2d>(n));
  features_ = register_module("features", features);
  classifier_ = register_module("classifier", std::make_shared<Linear>(n, o.num_classes, true, gen));
  init_torchvision(*this, /*conv_fan_out=*/false, /*linear_std=*/0.0, gen);
  init_constant(*classifier_, "bias", 0.0);
}

Tensor DenseNet::forward(const Tensor& input) {
  STRATA_CHECK(input.dim() == 4 && input.sizes()[1] == options_.in_channels, "DenseNet: expected a 4-D input [N, ",
               options_.in_channels, ", H, W], got ", input.sizes());
  Tensor x = relu((*features_)(input));
  return (*classifier_)(flatten(adaptive_avg_pool2d(x, {1, 1}), 1));
}

DenseNetOptions densenet_options(int depth, int64_t num_classes, const std::string& stem) {
  DenseNetOptions o;
  o.num_classes = num_classes;
  o.stem = stem;
  switch (depth) {
    case 121: o.block_config = {6, 12, 24, 16}; break;
    case 161: o.block_config = {6, 12, 36, 24}, o.growth_rate = 48, o.num_init_features = 96; break;
    case 169: o.block_config = {6, 12, 32, 32}; break;
    case 201: o.block_config = {6, 12, 48, 32}; break;
    case 264: o.block_config = {6, 12, 64, 48}; break;
    default:
      STRATA_FAIL("DenseNet: depth ", depth, " is not one of 121, 161, 169, 201, 264 (set DenseNetOptions for others)");
  }
  return o;
}

}  // namespace strata::nn::zoo
