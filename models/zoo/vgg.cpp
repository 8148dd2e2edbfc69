#include "models/zoo/vgg.h"

#include "core/error.h"
#include "models/activation.h"
#include "models/conv.h"
#include "models/dropout.h"
#include "models/linear.h"
#include "models/normalization.h"
#include "models/pooling.h"
#include "models/zoo/detail/init.h"
#include "ops/shape_ops.h"

namespace strata::nn::zoo {

std::vector<int64_t> vgg_config(int depth) {
  switch (depth) {
    case 11: return {64, 0, 128, 0, 256, 256, 0, 512, 512, 0, 512, 512, 0};
    case 13: return {64, 64, 0, 128, 128, 0, 256, 256, 0, 512, 512, 0, 512, 512, 0};
    case 16: return {64, 64, 0, 128, 128, 0, 256, 256, 256, 0, 512, 512, 512, 0, 512, 512, 512, 0};
    case 19: return {64, 64, 0, 128, 128, 0, 256, 256, 256, 256, 0, 512, 512, 512, 512, 0, 512, 512, 512, 512, 0};
    default: break;
  }
  STRATA_FAIL("VGG: depth ", depth, " is not one of torchvision's 11, 13, 16, 19 (deep_vgg_config builds 16 + 5k)");
}

std::vector<int64_t> deep_vgg_config(int depth) {
  STRATA_CHECK(depth >= 16 && (depth - 16) % 5 == 0, "VGG: a deep VGG has depth 16 + 5k (116, 416, ...), got ", depth);
  const int extra = (depth - 16) / 5;
  const int64_t widths[5] = {64, 128, 256, 512, 512};
  const int base[5] = {2, 2, 3, 3, 3};
  std::vector<int64_t> cfg;
  for (int b = 0; b < 5; ++b) {
    for (int i = 0; i < base[b] + extra; ++i) cfg.push_back(widths[b]);
    cfg.push_back(0);
  }
  return cfg;
}

VGG::VGG(const VGGOptions& options, Generator* gen) : Module("VGG"), options_(options) {
  STRATA_CHECK(!options.config.empty(), "VGG: empty configuration");
  STRATA_CHECK(options.num_classes >= 1 && options.in_channels >= 1 && options.pool_size >= 1 && options.hidden >= 1,
               "VGG: num_classes, in_channels, pool_size and hidden must be positive");
  features_ = std::make_shared<Sequential>();
  int64_t c = options.in_channels;
  for (int64_t v : options.config) {
    STRATA_CHECK(v >= 0, "VGG: configuration widths must be positive (0 marks a max pool), got ", v);
    if (v == 0) {
      features_->push_back(std::make_shared<MaxPool2d>(2, 2));
      continue;
    }
    features_->push_back(std::make_shared<Conv2d>(c, v, 3, 1, 1, 1, 1, true, "zeros", gen));
    if (options.batch_norm) features_->push_back(std::make_shared<BatchNorm2d>(v));
    features_->push_back(std::make_shared<ReLU>());
    c = v;
  }
  register_module("features", features_);
  avgpool_ = register_module("avgpool", std::make_shared<AdaptiveAvgPool2d>(options.pool_size));
  const int64_t flat = c * options.pool_size * options.pool_size;
  classifier_ = std::make_shared<Sequential>(std::initializer_list<std::shared_ptr<Module>>{
      std::make_shared<Linear>(flat, options.hidden, true, gen), std::make_shared<ReLU>(),
      std::make_shared<Dropout>(options.dropout, gen),
      std::make_shared<Linear>(options.hidden, options.hidden, true, gen), std::make_shared<ReLU>(),
      std::make_shared<Dropout>(options.dropout, gen),
      std::make_shared<Linear>(options.hidden, options.num_classes, true, gen)});
  register_module("classifier", classifier_);
  init_torchvision(*this, /*conv_fan_out=*/true, /*linear_std=*/0.01, gen);
}

Tensor VGG::forward(const Tensor& input) {
  STRATA_CHECK(input.dim() == 4 && input.sizes()[1] == options_.in_channels, "VGG: expected a 4-D input [N, ",
               options_.in_channels, ", H, W], got ", input.sizes());
  Tensor x = (*features_)(input);
  x = (*avgpool_)(x);
  return (*classifier_)(flatten(x, 1));
}

}  // namespace strata::nn::zoo
