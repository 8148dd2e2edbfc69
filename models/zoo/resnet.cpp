#include "models/zoo/resnet.h"

#include "core/error.h"
#include "models/activation.h"
#include "models/conv.h"
#include "models/linear.h"
#include "models/normalization.h"
#include "models/pooling.h"
#include "models/zoo/detail/init.h"
#include "ops/binary.h"
#include "ops/shape_ops.h"
#include "ops/unary.h"

namespace strata::nn::zoo {
namespace {

std::shared_ptr<Module> conv(int64_t in, int64_t out, int64_t k, int64_t stride, Generator* gen) {
  return std::make_shared<Conv2d>(in, out, k, stride, k / 2, 1, 1, false, "zeros", gen);
}

std::shared_ptr<Module> shortcut(int64_t in, int64_t out, int64_t stride, Generator* gen) {
  if (stride == 1 && in == out) return nullptr;
  return std::make_shared<Sequential>(std::initializer_list<std::shared_ptr<Module>>{
      conv(in, out, 1, stride, gen), std::make_shared<BatchNorm2d>(out)});
}

}  // namespace

BasicBlock::BasicBlock(int64_t in_planes, int64_t planes, int64_t stride, Generator* gen) : Module("BasicBlock") {
  conv1_ = register_module("conv1", conv(in_planes, planes, 3, stride, gen));
  bn1_ = register_module("bn1", std::make_shared<BatchNorm2d>(planes));
  conv2_ = register_module("conv2", conv(planes, planes, 3, 1, gen));
  bn2_ = register_module("bn2", std::make_shared<BatchNorm2d>(planes));
  register_module("relu", std::make_shared<ReLU>());
  if (auto d = shortcut(in_planes, planes * kExpansion, stride, gen)) downsample_ = register_module("downsample", d);
}

Tensor BasicBlock::forward(const Tensor& input) {
  // One op per statement: each intermediate is released once the next op consumed it (a temporary
  // would live to the end of its full-expression), so the forward holds the block's input, one op's
  // operand and its result, which is the floor tape streaming leaves (Note [Tape streaming]).
  Tensor out = (*conv1_)(input);
  out = (*bn1_)(out);
  out = relu(out);
  out = (*conv2_)(out);
  out = (*bn2_)(out);
  out = add(out, downsample_ ? (*downsample_)(input) : input);
  return relu(out);
}

namespace {

// The residual join of both blocks as one step: relu(main + shortcut) (add saves nothing).
int64_t append_join(int64_t main, int64_t shortcut, std::vector<remat::GraphStep>& steps) {
  return nn::append_remat_step(
      [](const autograd::TensorList& in) -> Tensor {
        Tensor out = add(in[0], in[1]);
        return relu(out);
      },
      {main, shortcut}, "add+relu", steps);
}

}  // namespace

int64_t BasicBlock::append_remat_steps(int64_t input, std::vector<remat::GraphStep>& steps) const {
  int64_t x = nn::append_remat_steps(conv1_, input, steps);
  x = nn::append_remat_steps(bn1_, x, steps);
  x = nn::append_relu_step(x, steps);
  x = nn::append_remat_steps(conv2_, x, steps);
  x = nn::append_remat_steps(bn2_, x, steps);
  const int64_t s = downsample_ ? nn::append_remat_steps(downsample_, input, steps) : input;
  return append_join(x, s, steps);
}

int64_t Bottleneck::append_remat_steps(int64_t input, std::vector<remat::GraphStep>& steps) const {
  int64_t x = nn::append_remat_steps(conv1_, input, steps);
  x = nn::append_remat_steps(bn1_, x, steps);
  x = nn::append_relu_step(x, steps);
  x = nn::append_remat_steps(conv2_, x, steps);
  x = nn::append_remat_steps(bn2_, x, steps);
  x = nn::append_relu_step(x, steps);
  x = nn::append_remat_steps(conv3_, x, steps);
  x = nn::append_remat_steps(bn3_, x, steps);
  const int64_t s = downsample_ ? nn::append_remat_steps(downsample_, input, steps) : input;
  return append_join(x, s, steps);
}

Bottleneck::Bottleneck(int64_t in_planes, int64_t planes, int64_t stride, Generator* gen) : Module("Bottleneck") {
  conv1_ = register_module("conv1", conv(in_planes, planes, 1, 1, gen));
  bn1_ = register_module("bn1", std::make_shared<BatchNorm2d>(planes));
  conv2_ = register_module("conv2", conv(planes, planes, 3, stride, gen));
  bn2_ = register_module("bn2", std::make_shared<BatchNorm2d>(planes));
  conv3_ = register_module("conv3", conv(planes, planes * kExpansion, 1, 1, gen));
  bn3_ = register_module("bn3", std::make_shared<BatchNorm2d>(planes * kExpansion));
  register_module("relu", std::make_shared<ReLU>());
  if (auto d = shortcut(in_planes, planes * kExpansion, stride, gen)) downsample_ = register_module("downsample", d);
}

Tensor Bottleneck::forward(const Tensor& input) {
  // One op per statement, as in BasicBlock::forward.
  Tensor out = (*conv1_)(input);
  out = (*bn1_)(out);
  out = relu(out);
  out = (*conv2_)(out);
  out = (*bn2_)(out);
  out = relu(out);
  out = (*conv3_)(out);
  out = (*bn3_)(out);
  out = add(out, downsample_ ? (*downsample_)(input) : input);
  return relu(out);
}

ResNet::ResNet(const ResNetOptions& options, Generator* gen) : Module("ResNet"), options_(options) {
  STRATA_CHECK(!options.layers.empty() && options.layers.size() == options.widths.size(),
               "ResNet: layers and widths must be non-empty and of equal length, got ", options.layers.size(), " and ",
               options.widths.size());
  for (std::size_t i = 0; i < options.layers.size(); ++i)
    STRATA_CHECK(options.layers[i] >= 1 && options.widths[i] >= 1, "ResNet: stage ", i + 1,
                 " needs at least one block and a positive width, got ", options.layers[i], " blocks of width ",
                 options.widths[i]);
  STRATA_CHECK(options.stem == "imagenet" || options.stem == "cifar",
               "ResNet: stem must be \"imagenet\" or \"cifar\", got \"", options.stem, "\"");
  STRATA_CHECK(options.num_classes >= 1 && options.in_channels >= 1,
               "ResNet: num_classes and in_channels must be positive");
  const bool imagenet = options.stem == "imagenet";
  int64_t planes = options.widths[0];
  conv1_ = register_module(
      "conv1", imagenet ? conv(options.in_channels, planes, 7, 2, gen) : conv(options.in_channels, planes, 3, 1, gen));
  bn1_ = register_module("bn1", std::make_shared<BatchNorm2d>(planes));
  register_module("relu", std::make_shared<ReLU>());
  if (imagenet) maxpool_ = register_module("maxpool", std::make_shared<MaxPool2d>(3, 2, 1));
  const int64_t expansion = options.bottleneck ? Bottleneck::kExpansion : BasicBlock::kExpansion;
  int64_t in = planes;
  for (std::size_t s = 0; s < options.layers.size(); ++s) {
    auto stage = std::make_shared<Sequential>();
    for (int64_t b = 0; b < options.layers[s]; ++b) {
      const int64_t stride = (s > 0 && b == 0) ? 2 : 1;
      if (options.bottleneck)
        stage->push_back(std::make_shared<Bottleneck>(in, options.widths[s], stride, gen));
      else
        stage->push_back(std::make_shared<BasicBlock>(in, options.widths[s], stride, gen));
      in = options.widths[s] * expansion;
    }
    stages_.push_back(register_module("layer" + std::to_string(s + 1), stage));
  }
  avgpool_ = register_module("avgpool", std::make_shared<AdaptiveAvgPool2d>(1));
  fc_ = register_module("fc", std::make_shared<Linear>(in, options.num_classes, true, gen));
  init_torchvision(*this, /*conv_fan_out=*/true, /*linear_std=*/0.0, gen);
}

Tensor ResNet::forward(const Tensor& input) {
  STRATA_CHECK(input.dim() == 4 && input.sizes()[1] == options_.in_channels, "ResNet: expected a 4-D input [N, ",
               options_.in_channels, ", H, W], got ", input.sizes());
  Tensor x = relu((*bn1_)((*conv1_)(input)));
  if (maxpool_) x = (*maxpool_)(x);
  for (auto& stage : stages_) x = (*stage)(x);
  return (*fc_)(flatten((*avgpool_)(x), 1));
}

ResNetOptions resnet_options(int depth, int64_t num_classes, const std::string& stem) {
  ResNetOptions o;
  o.num_classes = num_classes;
  o.stem = stem;
  switch (depth) {
    case 18: o.layers = {2, 2, 2, 2}; break;
    case 34: o.layers = {3, 4, 6, 3}; break;
    case 50: o.layers = {3, 4, 6, 3}, o.bottleneck = true; break;
    case 101: o.layers = {3, 4, 23, 3}, o.bottleneck = true; break;
    case 152: o.layers = {3, 8, 36, 3}, o.bottleneck = true; break;
    case 200: o.layers = {3, 24, 36, 3}, o.bottleneck = true; break;
    default:
      STRATA_FAIL("ResNet: depth ", depth,
                  " is not one of 18, 34, 50, 101, 152, 200 (set ResNetOptions.layers for others)");
  }
  return o;
}

ResNetOptions cifar_resnet_options(int depth, int64_t num_classes) {
  STRATA_CHECK(depth >= 8 && (depth - 2) % 6 == 0,
               "ResNet: a CIFAR ResNet has depth 6n + 2 (20, 32, 56, 110, ...), got ", depth);
  const int64_t n = (depth - 2) / 6;
  ResNetOptions o;
  o.layers = {n, n, n};
  o.widths = {16, 32, 64};
  o.stem = "cifar";
  o.num_classes = num_classes;
  return o;
}

}  // namespace strata::nn::zoo
