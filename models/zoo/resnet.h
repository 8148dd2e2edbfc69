#pragma once
/// @file
/// Model zoo: ResNet with basic and bottleneck blocks (torchvision's structure and names), with an
/// ImageNet stem (7x7/2 convolution + 3x3/2 max pool) or a CIFAR stem (3x3/1 convolution).

#include <vector>

#include "core/rng.h"
#include "models/container.h"
#include "models/remat.h"

namespace strata::nn::zoo {

/// conv1 3x3 (stride) → bn1 → relu → conv2 3x3 → bn2, plus the shortcut (`downsample`: a 1x1
/// convolution and a batch norm when the shape changes), then relu.
class BasicBlock : public Module, public RematGraphModule {
 public:
  static constexpr int64_t kExpansion = 1;
  BasicBlock(int64_t in_planes, int64_t planes, int64_t stride, Generator* gen);
  Tensor forward(const Tensor& input) override;
  /// One step per op (convolutions and batch norms as modules; the shortcut's; add + relu last).
  int64_t append_remat_steps(int64_t input, std::vector<remat::GraphStep>& steps) const override;

 private:
  std::shared_ptr<Module> conv1_, bn1_, conv2_, bn2_, downsample_;
};

/// conv1 1x1 → bn1 → relu → conv2 3x3 (stride) → bn2 → relu → conv3 1x1 (4x planes) → bn3, plus
/// the shortcut, then relu (torchvision's ResNet v1.5 puts the stride on the 3x3 convolution).
class Bottleneck : public Module, public RematGraphModule {
 public:
  static constexpr int64_t kExpansion = 4;
  Bottleneck(int64_t in_planes, int64_t planes, int64_t stride, Generator* gen);
  Tensor forward(const Tensor& input) override;
  /// One step per op (convolutions and batch norms as modules; the shortcut's; add + relu last).
  int64_t append_remat_steps(int64_t input, std::vector<remat::GraphStep>& steps) const override;

 private:
  std::shared_ptr<Module> conv1_, bn1_, conv2_, bn2_, conv3_, bn3_, downsample_;
};

struct ResNetOptions {
  bool bottleneck = false;
  /// Blocks per stage (torchvision's ResNet-18: {2, 2, 2, 2}).
  std::vector<int64_t> layers = {2, 2, 2, 2};
  /// Planes per stage (before the bottleneck expansion); the first stage has stride 1, the
  /// others stride 2.
  std::vector<int64_t> widths = {64, 128, 256, 512};
  /// "imagenet" (conv 7x7/2, max pool 3x3/2) or "cifar" (conv 3x3/1, no max pool).
  std::string stem = "imagenet";
  int64_t num_classes = 1000;
  int64_t in_channels = 3;
};

/// conv1 → bn1 → relu → [maxpool] → layer1..layerN → avgpool → flatten → fc. state_dict keys match
/// torchvision.models.resnet*: "layer1.0.conv1.weight", "layer2.0.downsample.0.weight", "fc.bias".
class ResNet : public Module {
 public:
  explicit ResNet(const ResNetOptions& options, Generator* gen = nullptr);
  Tensor forward(const Tensor& input) override;
  const ResNetOptions& options() const { return options_; }

 private:
  ResNetOptions options_;
  std::shared_ptr<Module> conv1_, bn1_, maxpool_, avgpool_, fc_;
  std::vector<std::shared_ptr<Module>> stages_;
};

/// torchvision's depths: 18, 34 (basic), 50, 101, 152 and 200 (bottleneck; 200 = {3, 24, 36, 3},
/// He et al. 2016); other settings through ResNetOptions.
ResNetOptions resnet_options(int depth, int64_t num_classes = 1000, const std::string& stem = "imagenet");
/// The CIFAR ResNets of He et al. 2015 §4.2: depth 6n + 2, three stages of n basic blocks with
/// widths 16, 32, 64 and the CIFAR stem (ResNet-20, -56, -110, ...).
ResNetOptions cifar_resnet_options(int depth, int64_t num_classes = 10);

}  // namespace strata::nn::zoo
