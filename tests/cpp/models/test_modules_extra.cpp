// nn::Conv1d, nn::ConvTranspose2d, nn::GroupNorm, nn::ModuleDict and nn::ParameterList (issue 26
// part 7): shapes, state_dict names, the containers' protocols and bad arguments. Values against
// PyTorch are in tests/python/test_nn_extra.py; the ops' values in the op harness.

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "core/factories.h"
#include "models/activation.h"
#include "models/container.h"
#include "models/conv.h"
#include "models/linear.h"
#include "models/normalization.h"
#include "tests/cpp/error_text.h"

namespace strata::nn {
namespace {

std::vector<std::string> keys_of(const StateDict& d) {
  std::vector<std::string> out;
  for (const auto& [k, v] : d) out.push_back(k);
  return out;
}

TEST(Conv1d, ShapesNamesAndPaddingModes) {
  Conv1d c(4, 6, 3, 2, 1, 1, 2);
  EXPECT_EQ(keys_of(c.state_dict()), (std::vector<std::string>{"weight", "bias"}));
  EXPECT_EQ(c.parameter("weight").sizes(), (Dims{6, 2, 3}));
  EXPECT_EQ(c.forward(randn({2, 4, 9})).sizes(), (Dims{2, 6, 5}));
  EXPECT_EQ(c.forward(randn({4, 9})).sizes(), (Dims{6, 5}));
  for (const char* mode : {"zeros", "reflect", "replicate", "circular"}) {
    Conv1d same(3, 2, 4, 1, "same", 2, 1, false, mode);
    EXPECT_EQ(same.forward(randn({1, 3, 10})).sizes(), (Dims{1, 2, 10})) << mode;
  }
  EXPECT_EQ(c.to_string(), "Conv1d(4, 6, kernel_size=(3,), stride=(2,), padding=(1,), groups=2)");
}

TEST(Conv1d, BadArgumentsAndInputs) {
  EXPECT_ERROR_HAS(Conv1d(3, 4, 3, 1, 0, 1, 1, true, "mirror"), "padding_mode must be one of");
  EXPECT_ERROR_HAS(Conv1d(3, 4, 3, 2, "same"), "padding='same' is not supported for strided convolutions");
  EXPECT_ERROR_HAS(Conv1d(3, 4, 3, 1, "full"), "invalid padding string 'full'");
  EXPECT_ERROR_HAS(Conv1d(3, 4, 3, 1, 0, 1, 2), "in_channels (3) must be divisible by groups (2)");
  Conv1d c(3, 4, 3);
  EXPECT_ERROR_HAS(c.forward(randn({2, 5, 8})), "with C = 3");
  EXPECT_ERROR_HAS(c.forward(randn({2, 3, 8, 8})), "expected a 3-D input");
}

TEST(ConvTranspose2d, ShapesNamesAndInit) {
  ConvTranspose2d c(4, 6, {3, 2}, 2, 1, 1, 2);
  EXPECT_EQ(keys_of(c.state_dict()), (std::vector<std::string>{"weight", "bias"}));
  EXPECT_EQ(c.parameter("weight").sizes(), (Dims{4, 3, 3, 2}));
  // OH = (5 − 1)·2 − 2 + 2 + 1 + 1 = 10, OW = (4 − 1)·2 − 2 + 1 + 1 + 1 = 7
  EXPECT_EQ(c.forward(randn({2, 4, 5, 4})).sizes(), (Dims{2, 6, 10, 7}));
  const double bound = 1.0 / std::sqrt(3.0 * 3 * 2);  // fan_in = out / groups · kh · kw
  const Tensor w = c.parameter("weight").contiguous();
  for (int64_t i = 0; i < w.numel(); ++i) EXPECT_LE(std::abs(w.data<float>()[i]), bound);
  EXPECT_ERROR_HAS(ConvTranspose2d(3, 4, 3, 1, 0, 0, 1, true, 1, "reflect"), "only 'zeros' padding mode");
  EXPECT_ERROR_HAS(c.forward(randn({2, 3, 5, 4})), "with C = 4");
  ConvTranspose2d bad(2, 2, 3, 1, 0, 1);  // output_padding 1 with stride 1 and dilation 1
  EXPECT_ERROR_HAS(bad.forward(randn({1, 2, 4, 4})), "output padding must be smaller than either stride or dilation");
}

TEST(GroupNorm, NamesValuesAndBadArguments) {
  GroupNorm g(2, 4);
  EXPECT_EQ(keys_of(g.state_dict()), (std::vector<std::string>{"weight", "bias"}));
  EXPECT_EQ(g.to_string(), "GroupNorm(2, 4, eps=1e-05, affine=True, bias=True)");
  const Tensor y = g.forward(randn({3, 4, 5}));
  // Each (sample, group) of 2 channels · 5 values has mean 0 after the norm (weight 1, bias 0).
  double sum = 0;
  for (int64_t i = 0; i < 10; ++i) sum += y.contiguous().data<float>()[i];
  EXPECT_NEAR(sum, 0.0, 1e-4);
  EXPECT_TRUE(GroupNorm(2, 4, 1e-5, false).state_dict().empty());
  EXPECT_ERROR_HAS(GroupNorm(4, 6), "num_channels (6) must be divisible by num_groups (4)");
  EXPECT_ERROR_HAS(g.forward(randn({3, 5, 2})), "with C = 4");
  EXPECT_ERROR_HAS(g.forward(randn({4})), "expected an input [N, C, *]");
}

TEST(ModuleDict, InsertReplacePopAndStateDictNames) {
  ModuleDict d{{"lin", std::make_shared<Linear>(2, 3)}, {"act", std::make_shared<ReLU>()}};
  d.insert("out", std::make_shared<Linear>(3, 1));
  d.insert("lin", std::make_shared<Linear>(2, 3, false));  // replaced in place
  EXPECT_EQ(d.keys(), (std::vector<std::string>{"lin", "act", "out"}));
  EXPECT_EQ(keys_of(d.state_dict()), (std::vector<std::string>{"lin.weight", "out.weight", "out.bias"}));
  EXPECT_TRUE(d.contains("act"));
  EXPECT_EQ(d.pop("act")->type_name(), "ReLU");
  EXPECT_EQ(d.size(), 2u);
  EXPECT_ERROR_HAS(d["act"], "no module under key 'act'");
  EXPECT_ERROR_HAS(d.pop("act"), "no module under key 'act'");
  EXPECT_ERROR_HAS(d.insert("a.b", std::make_shared<ReLU>()), "a.b");
  EXPECT_ERROR_HAS(d.insert("x", nullptr), "cannot insert a null module under key 'x'");
  EXPECT_ERROR_HAS(d.forward(randn({2})), "ModuleDict has no forward");
  d.clear();
  EXPECT_EQ(d.size(), 0u);
  EXPECT_TRUE(d.parameters().empty());
}

TEST(ParameterList, AppendIndexAndSet) {
  ParameterList l{ones({2}), zeros({3})};
  l.append(ones({1, 2}), /*requires_grad=*/false);
  EXPECT_EQ(l.size(), 3u);
  EXPECT_EQ(keys_of(l.state_dict()), (std::vector<std::string>{"0", "1", "2"}));
  EXPECT_TRUE(l[0].requires_grad());
  EXPECT_FALSE(l[-1].requires_grad());
  EXPECT_EQ(l[-2].sizes(), (Dims{3}));
  l.set(1, full({4}, 2.0));
  EXPECT_EQ(l[1].sizes(), (Dims{4}));
  EXPECT_ERROR_HAS(l[3], "index 3 is out of range for a container of 3 parameters");
  EXPECT_ERROR_HAS(l.append(Tensor()), "cannot append an undefined tensor (at index 3)");
}

}  // namespace
}  // namespace strata::nn
