#pragma once
/// @file
/// Model zoo: VGG (torchvision's structure and names), including the very deep variants of the
/// dissertation (AutoTM's Vgg116/Vgg416: Vgg16 with extra 3x3 convolutions in every block).

#include <vector>

#include "core/rng.h"
#include "models/container.h"

namespace strata::nn::zoo {

struct VGGOptions {
  /// Convolution widths per entry, 0 for a 2x2 max pool ("M" in torchvision's configs).
  std::vector<int64_t> config;
  bool batch_norm = false;
  int64_t num_classes = 1000;
  int64_t in_channels = 3;
  /// Side of the adaptive average pool before the classifier (torchvision: 7 for 224x224 inputs;
  /// 1 suits 32x32 CIFAR inputs).
  int64_t pool_size = 7;
  /// Width of the two hidden classifier layers (torchvision: 4096).
  int64_t hidden = 4096;
  double dropout = 0.5;
};

/// features (Sequential of Conv2d 3x3 pad 1 [+ BatchNorm2d] + ReLU, MaxPool2d 2) → avgpool
/// (AdaptiveAvgPool2d) → flatten → classifier (Linear, ReLU, Dropout, Linear, ReLU, Dropout,
/// Linear). state_dict keys match torchvision.models.vgg*: "features.0.weight",
/// "classifier.6.bias". Initialized like torchvision (Kaiming-normal fan_out convolutions, N(0, 0.01)
/// linear layers).
class VGG : public Module {
 public:
  explicit VGG(const VGGOptions& options, Generator* gen = nullptr);
  Tensor forward(const Tensor& input) override;
  const VGGOptions& options() const { return options_; }

 private:
  VGGOptions options_;
  std::shared_ptr<Sequential> features_, classifier_;
  std::shared_ptr<Module> avgpool_;
};

/// torchvision's configurations: depth 11, 13, 16 or 19 ("A", "B", "D", "E").
std::vector<int64_t> vgg_config(int depth);
/// The very deep VGG of AutoTM (dissertation §3.5.2): Vgg16's five blocks with `extra` more 3x3
/// convolutions each, so depth = 16 + 5 · extra (Vgg116: extra 20; Vgg416: extra 80). `depth`
/// must be 16 + 5k.
std::vector<int64_t> deep_vgg_config(int depth);

}  // namespace strata::nn::zoo
