#pragma once
/// @file
/// Model zoo: DenseNet-BC (torchvision's structure and names): dense blocks whose layers see the
/// concatenation of every earlier feature map, with transitions halving channels and resolution.

#include <vector>

#include "core/rng.h"
#include "models/container.h"
#include "models/remat.h"

namespace strata::nn::zoo {

/// norm1 → relu1 → conv1 (1x1, bn_size · growth) → norm2 → relu2 → conv2 (3x3, growth) [→ dropout]
/// over the concatenation of its inputs.
class DenseLayer : public Module {
 public:
  DenseLayer(int64_t in_features, int64_t growth_rate, int64_t bn_size, double drop_rate, Generator* gen);
  /// One input: the concatenated features so far.
  Tensor forward(const Tensor& input) override;
  /// forward's ops as graph steps on step `input`'s output (DenseBlock::append_remat_steps).
  int64_t append_layer_steps(int64_t input, std::vector<remat::GraphStep>& steps) const;

 private:
  std::shared_ptr<Module> norm1_, conv1_, norm2_, conv2_, dropout_;
};

/// denselayer1..denselayerN; returns the concatenation of its input and every layer's output.
/// Auto plans it per op (Note [Auto graph execution]): per layer a concatenation of the features
/// so far (none for the first), then norm1, relu, conv1, norm2, relu, conv2 [, dropout]; the last
/// step concatenates everything. A concatenation is cheap to recompute and as large as all the
/// features before it (the memory-efficient DenseNet's observation).
class DenseBlock : public Module, public RematGraphModule {
 public:
  DenseBlock(int64_t num_layers, int64_t in_features, int64_t growth_rate, int64_t bn_size, double drop_rate,
             Generator* gen);
  Tensor forward(const Tensor& input) override;
  int64_t append_remat_steps(int64_t input, std::vector<remat::GraphStep>& steps) const override;

 private:
  std::vector<std::shared_ptr<Module>> layers_;
};

struct DenseNetOptions {
  int64_t growth_rate = 32;
  std::vector<int64_t> block_config = {6, 12, 24, 16};
  int64_t num_init_features = 64;
  int64_t bn_size = 4;
  double drop_rate = 0.0;
  int64_t num_classes = 1000;
  int64_t in_channels = 3;
  /// "imagenet" (conv0 7x7/2 + pool0 3x3/2) or "cifar" (conv0 3x3/1, no pool0).
  std::string stem = "imagenet";
};

/// features (conv0, norm0, relu0, [pool0], denseblock1, transition1, ..., norm5) → relu → global
/// average pool → classifier. state_dict keys match torchvision.models.densenet*:
/// "features.denseblock1.denselayer1.norm1.weight", "features.transition1.conv.weight",
/// "classifier.bias".
class DenseNet : public Module {
 public:
  explicit DenseNet(const DenseNetOptions& options, Generator* gen = nullptr);
  Tensor forward(const Tensor& input) override;
  const DenseNetOptions& options() const { return options_; }

 private:
  DenseNetOptions options_;
  std::shared_ptr<Module> features_, classifier_;
};

/// torchvision's DenseNet-121, -161, -169, -201 and the dissertation's DenseNet-264
/// (block config {6, 12, 64, 48}, growth 32).
DenseNetOptions densenet_options(int depth, int64_t num_classes = 1000, const std::string& stem = "imagenet");

}  // namespace strata::nn::zoo
