// Each layer's forward against the op it wraps, its initialization, train/eval behaviour, input
// validation and repr (reprs as printed by PyTorch 2.13 for the same arguments).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "core/error.h"
#include "core/factories.h"
#include "models/activation.h"
#include "models/container.h"
#include "models/conv.h"
#include "models/dropout.h"
#include "models/embedding_bag.h"
#include "models/linear.h"
#include "models/normalization.h"
#include "models/pooling.h"
#include "ops/conv.h"
#include "ops/embedding.h"
#include "ops/linalg.h"
#include "ops/normalization.h"
#include "ops/pooling.h"
#include "ops/reduction.h"
#include "ops/unary.h"
#include "tests/cpp/error_text.h"

namespace strata::nn {
namespace {

using testing_util::error_of;

/// Largest |a - b| over all elements (same shape required).
double max_diff(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.sizes(), b.sizes());
  Tensor x = a.to(DType::f64).contiguous().reshape({-1}), y = b.to(DType::f64).contiguous().reshape({-1});
  double m = 0;
  for (int64_t i = 0; i < x.numel(); ++i) m = std::max(m, std::abs(x.at({i}) - y.at({i})));
  return m;
}

struct Stats {
  double min, max, mean, var;
};
Stats stats_of(const Tensor& t) {
  Tensor x = t.to(DType::f64).contiguous().reshape({-1});
  Stats s{1e300, -1e300, 0, 0};
  for (int64_t i = 0; i < x.numel(); ++i) {
    const double v = x.at({i});
    s.min = std::min(s.min, v), s.max = std::max(s.max, v), s.mean += v;
  }
  s.mean /= static_cast<double>(x.numel());
  for (int64_t i = 0; i < x.numel(); ++i) s.var += (x.at({i}) - s.mean) * (x.at({i}) - s.mean);
  s.var /= static_cast<double>(x.numel());
  return s;
}

TEST(Linear, ForwardMatchesTheOpAndInitIsUniformInOneOverSqrtFanIn) {
  Generator gen(3);
  Linear lin(64, 200, true, &gen);
  EXPECT_EQ(lin.weight().sizes(), (Dims{200, 64}));
  EXPECT_TRUE(lin.weight().requires_grad());
  const double bound = 1.0 / 8.0;
  Stats w = stats_of(lin.weight());
  EXPECT_GE(w.min, -bound);
  EXPECT_LT(w.max, bound);
  EXPECT_GT(w.max, 0.98 * bound);  // 12800 draws reach the ends of the interval
  EXPECT_LT(w.min, -0.98 * bound);
  EXPECT_NEAR(w.mean, 0.0, 0.005);
  EXPECT_NEAR(w.var, bound * bound / 3, 0.05 * bound * bound / 3);
  Stats b = stats_of(lin.bias());
  EXPECT_GE(b.min, -bound);
  EXPECT_LT(b.max, bound);

  Tensor x = randn({5, 64});
  EXPECT_EQ(max_diff(lin.forward(x), linear(x, lin.weight(), lin.bias())), 0.0);
  // Same generator state, same weights.
  Generator g1(11), g2(11);
  EXPECT_EQ(max_diff(Linear(3, 4, true, &g1).weight(), Linear(3, 4, true, &g2).weight()), 0.0);

  Linear nobias(4, 2, false);
  EXPECT_FALSE(nobias.bias().defined());
  EXPECT_EQ(nobias.parameters().size(), 1u);
  Tensor y = nobias.forward(ones({3, 4}));
  EXPECT_EQ(y.sizes(), (Dims{3, 2}));
  EXPECT_EQ(nobias.to_string(), "Linear(in_features=4, out_features=2, bias=False)");
  EXPECT_ERROR_HAS(nobias.forward(ones({3, 5})),
                   "Linear: expected an input [..., 4] (last dimension = in_features), got [3, 5]");
  EXPECT_ERROR_HAS(nobias.forward(Tensor()), "Linear: the input is undefined");
  EXPECT_ERROR_HAS(Linear(-1, 2), "Linear: in_features and out_features must be non-negative");
}

TEST(Linear, BackwardReachesWeightAndBias) {
  Linear lin(3, 2);
  Tensor x = randn({4, 3});
  sum(lin.forward(x)).backward();
  // d/dW sum(x W^T + b) = column sums of x for every output row; d/db = batch size.
  for (int64_t o = 0; o < 2; ++o) {
    for (int64_t i = 0; i < 3; ++i) {
      double s = 0;
      for (int64_t n = 0; n < 4; ++n) s += x.at({n, i});
      EXPECT_NEAR(lin.weight().grad().at({o, i}), s, 1e-5);
    }
    EXPECT_EQ(lin.bias().grad().at({o}), 4.0);
  }
}

TEST(Conv2d, ForwardMatchesTheOpAndValidates) {
  Conv2d conv(4, 8, {3, 5}, 2, 1, 2, 2, false);
  EXPECT_EQ(conv.to_string(),
            "Conv2d(4, 8, kernel_size=(3, 5), stride=(2, 2), padding=(1, 1), dilation=(2, 2), groups=2, bias=False)");
  EXPECT_EQ(conv.weight().sizes(), (Dims{8, 2, 3, 5}));
  const double bound = 1.0 / std::sqrt(2.0 * 3 * 5);
  Stats w = stats_of(conv.weight());
  EXPECT_GE(w.min, -bound);
  EXPECT_LT(w.max, bound);
  Tensor x = randn({2, 4, 9, 11});
  EXPECT_EQ(max_diff(conv.forward(x), conv2d(x, conv.weight(), Tensor(), {2, 2}, {1, 1}, {2, 2}, 2)), 0.0);

  Conv2d c3(3, 6, 3);
  EXPECT_EQ(c3.to_string(), "Conv2d(3, 6, kernel_size=(3, 3), stride=(1, 1))");
  Tensor x3 = randn({2, 3, 8, 8});
  EXPECT_EQ(max_diff(c3.forward(x3), conv2d(x3, c3.weight(), c3.bias())), 0.0);
  EXPECT_EQ(c3.forward(randn({3, 8, 8})).sizes(), (Dims{6, 6, 6}));  // unbatched
  EXPECT_ERROR_HAS(c3.forward(randn({2, 4, 8, 8})),
                   "Conv2d: expected a 4-D input [N, C, H, W] (or 3-D [C, H, W]) with C = 3, got [2, 4, 8, 8]");
  EXPECT_ERROR_HAS(c3.forward(randn({2, 3})), "got [2, 3]");
  EXPECT_ERROR_HAS(Conv2d(3, 6, 3, 1, 0, 1, 2), "Conv2d: in_channels (3) must be divisible by groups (2)");
  EXPECT_ERROR_HAS(Conv2d(4, 6, 3, 1, 0, 1, 4), "Conv2d: out_channels (6) must be divisible by groups (4)");
  EXPECT_ERROR_HAS(Conv2d(3, 6, 3, 1, 0, 1, 1, true, "reflect"), "Conv2d: padding_mode 'reflect' is not supported");
  EXPECT_ERROR_HAS(Conv2d(3, 6, 3, 0), "Conv2d: stride must be positive, got (0, 0)");
  EXPECT_ERROR_HAS(Conv2d(3, 6, {0, 3}), "Conv2d: kernel_size must be positive");
  EXPECT_ERROR_HAS(Conv2d(3, 6, 3, 1, -1), "Conv2d: padding must be non-negative");
}

TEST(BatchNorm, TrainingUpdatesRunningStatsAndCountsBatches) {
  BatchNorm2d bn(3);
  EXPECT_EQ(bn.to_string(),
            "BatchNorm2d(3, eps=1e-05, momentum=0.1, affine=True, bias=True, track_running_stats=True)");
  EXPECT_EQ(bn.parameter("weight").at({1}), 1.0);
  EXPECT_EQ(bn.parameter("bias").at({1}), 0.0);
  EXPECT_EQ(bn.buffer("num_batches_tracked").dtype(), DType::i64);
  EXPECT_EQ(bn.buffer("num_batches_tracked").dim(), 0);
  Tensor x = randn({4, 3, 5, 5});
  Tensor rm = zeros({3}), rv = ones({3});
  Tensor expected = batch_norm(x, rm, rv, bn.parameter("weight"), bn.parameter("bias"), true, 0.1, 1e-5);
  EXPECT_EQ(max_diff(bn.forward(x), expected), 0.0);
  EXPECT_LT(max_diff(bn.buffer("running_mean"), rm), 1e-7);
  EXPECT_LT(max_diff(bn.buffer("running_var"), rv), 1e-7);
  EXPECT_GT(std::abs(bn.buffer("running_var").at({0}) - 1.0), 1e-4);  // it moved
  EXPECT_EQ(bn.buffer("num_batches_tracked").item<int64_t>(), 1);

  // Eval: normalizes with the running statistics and leaves them (and the counter) alone.
  bn.eval();
  Tensor y = bn.forward(x);
  EXPECT_EQ(max_diff(y, batch_norm(x, rm, rv, bn.parameter("weight"), bn.parameter("bias"), false, 0.1, 1e-5)), 0.0);
  EXPECT_LT(max_diff(bn.buffer("running_mean"), rm), 1e-7);
  EXPECT_EQ(bn.buffer("num_batches_tracked").item<int64_t>(), 1);

  EXPECT_ERROR_HAS(bn.forward(randn({4, 3, 5})),
                   "BatchNorm2d: expected a 4-D input [N, C, H, W] with C = 3, got [4, 3, 5]");
  EXPECT_ERROR_HAS(bn.forward(randn({4, 2, 5, 5})), "with C = 3, got [4, 2, 5, 5]");
  EXPECT_ERROR_HAS(BatchNorm2d(0), "BatchNorm2d: num_features must be positive");
  EXPECT_ERROR_HAS(BatchNorm2d(2, 1e-5, 1.5), "BatchNorm2d: momentum must lie in [0, 1]");
}

TEST(BatchNorm, CumulativeAverageWithoutMomentumAndUntrackedStats) {
  BatchNorm1d bn(2, 1e-5, std::nullopt);
  EXPECT_EQ(bn.to_string(),
            "BatchNorm1d(2, eps=1e-05, momentum=None, affine=True, bias=True, track_running_stats=True)");
  Tensor a = tensor<float>({1, 10, 3, 20}, IntArrayRef{2, 2});  // channel means 2 and 15
  Tensor b = tensor<float>({5, 0, 7, 4}, IntArrayRef{2, 2});    // channel means 6 and 2
  bn.forward(a);
  bn.forward(b);
  // Cumulative average of the batch means: (2 + 6) / 2 and (15 + 2) / 2.
  EXPECT_NEAR(bn.buffer("running_mean").at({0}), 4.0, 1e-6);
  EXPECT_NEAR(bn.buffer("running_mean").at({1}), 8.5, 1e-6);
  EXPECT_EQ(bn.buffer("num_batches_tracked").item<int64_t>(), 2);
  EXPECT_EQ(bn.forward(randn({4, 2, 7})).sizes(), (Dims{4, 2, 7}));
  EXPECT_ERROR_HAS(bn.forward(randn({4, 2, 7, 1})),
                   "BatchNorm1d: expected a 2-D input [N, C] or 3-D input [N, C, L] with C = 2");

  BatchNorm1d plain(2, 1e-5, 0.1, /*affine=*/false, /*track_running_stats=*/false);
  EXPECT_TRUE(plain.state_dict().empty());
  EXPECT_TRUE(plain.parameters().empty());
  plain.eval();  // no running statistics: batch statistics even in eval mode
  Tensor y = plain.forward(a);
  EXPECT_EQ(max_diff(y, batch_norm(a, Tensor(), Tensor(), Tensor(), Tensor(), true)), 0.0);
}

TEST(LayerNorm, ForwardMatchesTheOp) {
  LayerNorm ln({2, 3});
  EXPECT_EQ(ln.to_string(), "LayerNorm((2, 3), eps=1e-05, elementwise_affine=True, bias=True)");
  EXPECT_EQ(LayerNorm({4}).to_string(), "LayerNorm((4,), eps=1e-05, elementwise_affine=True, bias=True)");
  ln.parameter("weight").copy_(arange(0, 6, 1, {DType::f32}).view({2, 3}));
  Tensor x = randn({5, 2, 3});
  EXPECT_EQ(max_diff(ln.forward(x), layer_norm(x, {2, 3}, ln.parameter("weight"), ln.parameter("bias"))), 0.0);
  EXPECT_ERROR_HAS(ln.forward(randn({5, 3, 2})),
                   "LayerNorm: expected an input whose trailing dimensions are [2, 3], got [5, 3, 2]");
  LayerNorm bare({3}, 1e-5, false);
  EXPECT_TRUE(bare.parameters().empty());
}

TEST(Activations, MatchTheirOps) {
  Tensor x = randn({4, 7});
  EXPECT_EQ(max_diff(ReLU().forward(x), relu(x)), 0.0);
  EXPECT_EQ(max_diff(LeakyReLU(0.2).forward(x), leaky_relu(x, 0.2)), 0.0);
  EXPECT_EQ(max_diff(Sigmoid().forward(x), sigmoid(x)), 0.0);
  EXPECT_EQ(max_diff(Tanh().forward(x), strata::tanh(x)), 0.0);
  EXPECT_EQ(max_diff(GELU().forward(x), gelu(x, false)), 0.0);
  EXPECT_EQ(max_diff(GELU("tanh").forward(x), gelu(x, true)), 0.0);
  EXPECT_EQ(ReLU().to_string(), "ReLU()");
  EXPECT_EQ(LeakyReLU().to_string(), "LeakyReLU(negative_slope=0.01)");
  EXPECT_EQ(GELU().to_string(), "GELU(approximate='none')");
  EXPECT_EQ(Sigmoid().to_string(), "Sigmoid()");
  EXPECT_EQ(Tanh().to_string(), "Tanh()");
  EXPECT_ERROR_HAS(GELU("fast"), "GELU: approximate must be 'none' or 'tanh', got 'fast'");
  EXPECT_ERROR_HAS(ReLU().forward(Tensor()), "ReLU: the input is undefined");
  EXPECT_EQ(max_diff(Identity().forward(x), x), 0.0);
  EXPECT_EQ(Identity().to_string(), "Identity()");
}

TEST(Dropout, FollowsTrainingMode) {
  Dropout d(0.5);
  EXPECT_EQ(d.to_string(), "Dropout(p=0.5, inplace=False)");
  Tensor x = ones({1000});
  Tensor y = d.forward(x);
  int64_t zeros_seen = 0;
  for (int64_t i = 0; i < 1000; ++i) {
    const double v = y.at({i});
    EXPECT_TRUE(v == 0.0 || v == 2.0) << v;
    zeros_seen += v == 0.0;
  }
  EXPECT_GT(zeros_seen, 400);
  EXPECT_LT(zeros_seen, 600);
  // Same as the op with the same generator state.
  Generator g1(5), g2(5);
  EXPECT_EQ(max_diff(Dropout(0.3, &g1).forward(x), dropout(x, 0.3, true, &g2)), 0.0);
  d.eval();
  EXPECT_EQ(max_diff(d.forward(x), x), 0.0);
  EXPECT_ERROR_HAS(Dropout(1.5), "Dropout: probability p must lie in [0, 1], got 1.5");
}

TEST(Pooling, MatchTheOps) {
  Tensor x = randn({2, 3, 8, 9});
  MaxPool2d mp(2);
  EXPECT_EQ(mp.to_string(), "MaxPool2d(kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=False)");
  EXPECT_EQ(max_diff(mp.forward(x), max_pool2d(x, {2, 2}, {2, 2})), 0.0);
  MaxPool2d mp2(Size2(3, 2), Size2(1, 2), Size2(1, 0), 1, true);
  EXPECT_EQ(max_diff(mp2.forward(x), max_pool2d(x, {3, 2}, {1, 2}, {1, 0}, {1, 1}, true)), 0.0);
  AvgPool2d ap(Size2(2, 3));
  EXPECT_EQ(ap.to_string(), "AvgPool2d(kernel_size=(2, 3), stride=(2, 3), padding=0)");
  EXPECT_EQ(max_diff(ap.forward(x), avg_pool2d(x, {2, 3}, {2, 3})), 0.0);
  AdaptiveAvgPool2d aap(1);
  EXPECT_EQ(aap.to_string(), "AdaptiveAvgPool2d(output_size=1)");
  EXPECT_EQ(max_diff(aap.forward(x), adaptive_avg_pool2d(x, {1, 1})), 0.0);
  EXPECT_EQ(aap.forward(x).sizes(), (Dims{2, 3, 1, 1}));
  EXPECT_ERROR_HAS(mp.forward(randn({2, 3})),
                   "MaxPool2d: expected a 4-D input [N, C, H, W] (or 3-D [C, H, W]), got [2, 3]");
  EXPECT_ERROR_HAS(AvgPool2d(0), "AvgPool2d: kernel_size must be positive, got 0");
  EXPECT_ERROR_HAS(MaxPool2d(2, 2, 3), "MaxPool2d: padding must be non-negative and at most half the kernel size");
}

TEST(Containers, SequentialChainsAndIndexes) {
  Generator gen(1);
  auto l1 = std::make_shared<Linear>(4, 5, true, &gen);
  auto l2 = std::make_shared<Linear>(5, 2, true, &gen);
  Sequential seq{l1, std::make_shared<ReLU>(), l2};
  seq.push_back(std::make_shared<Flatten>(0));
  EXPECT_EQ(seq.size(), 4u);
  EXPECT_EQ(seq[0], l1);
  EXPECT_EQ(seq[-2], l2);
  Tensor x = randn({3, 4});
  Tensor expected = linear(relu(linear(x, l1->weight(), l1->bias())), l2->weight(), l2->bias()).reshape({6});
  EXPECT_EQ(max_diff(seq.forward(x), expected), 0.0);
  EXPECT_ERROR_HAS(seq[4], "Sequential: index 4 is out of range for a container of 4 modules");
  EXPECT_ERROR_HAS(seq[-5], "index -5 is out of range");
  EXPECT_ERROR_HAS(seq.push_back(nullptr), "Sequential: cannot append a null module (at index 4)");
  // Errors inside a child name the child.
  EXPECT_ERROR_HAS(seq.forward(randn({3, 5})), "Linear: expected an input [..., 4]");

  ModuleList list{l1, l2};
  EXPECT_EQ(list.size(), 2u);
  EXPECT_EQ(list[1], l2);
  EXPECT_EQ(list.parameters().size(), 4u);
  EXPECT_ERROR_HAS(list.forward(x), "ModuleList has no forward(Tensor)");

  Flatten f;
  EXPECT_EQ(f.to_string(), "Flatten(start_dim=1, end_dim=-1)");
  EXPECT_EQ(f.forward(randn({2, 3, 4, 5})).sizes(), (Dims{2, 60}));
}

TEST(EmbeddingBag, ForwardMatchesTheOpAndInitIsStandardNormal) {
  Generator gen(9);
  EmbeddingBag bag(400, 50, "mean", false, &gen);
  EXPECT_EQ(bag.to_string(), "EmbeddingBag(400, 50, mode='mean')");
  Stats w = stats_of(bag.weight());
  EXPECT_NEAR(w.mean, 0.0, 0.03);
  EXPECT_NEAR(w.var, 1.0, 0.05);
  Tensor idx = tensor<int64_t>({1, 5, 7, 7, 399, 0});
  Tensor off = tensor<int64_t>({0, 2, 2, 5});
  EXPECT_EQ(max_diff(bag.forward(idx, off), embedding_bag(bag.weight(), idx, off, EmbeddingBagMode::Mean)), 0.0);
  // 2-D input: each row is a bag.
  Tensor idx2 = tensor<int64_t>({1, 5, 7, 7, 399, 0}, IntArrayRef{3, 2});
  EXPECT_EQ(
      max_diff(bag.forward(idx2), embedding_bag(bag.weight(), idx, tensor<int64_t>({0, 2, 4}), EmbeddingBagMode::Mean)),
      0.0);
  EmbeddingBag sum_bag(10, 3, "sum");
  Tensor psw = tensor<float>({0.5, 2.0, 1.0});
  Tensor i3 = tensor<int64_t>({1, 2, 3});
  Tensor o3 = tensor<int64_t>({0, 1});
  EXPECT_EQ(max_diff(sum_bag.forward(i3, o3, psw), embedding_bag(sum_bag.weight(), i3, o3, EmbeddingBagMode::Sum, psw)),
            0.0);
  EXPECT_ERROR_HAS(bag.forward(i3, o3, psw), "EmbeddingBag: per_sample_weights are only supported with mode 'sum'");
  EXPECT_ERROR_HAS(bag.forward(i3), "EmbeddingBag: offsets are required when the input is 1-D");
  EXPECT_ERROR_HAS(bag.forward(idx2, off), "EmbeddingBag: offsets must be omitted when the input is 2-D");
  EXPECT_ERROR_HAS(bag.forward(tensor<float>({1, 2}), off),
                   "EmbeddingBag: input must hold i64 or i32 indices, got f32");
  EXPECT_ERROR_HAS(EmbeddingBag(10, 3, "max"), "EmbeddingBag: mode 'max' is not supported");
}

}  // namespace
}  // namespace strata::nn
