// What the harness cannot express for ops/shape_ops.h: views sharing storage, multi-output
// nodes with unused outputs, determinism, empty tensors, integer dtypes, large paths.

#include <gtest/gtest.h>

#include "autograd/engine.h"
#include "autograd/grad_mode.h"
#include "core/factories.h"
#include "core/threading.h"
#include "ops/shape_ops.h"
#include "tests/cpp/ops/harness/op_harness.h"

namespace strata {
namespace {

using testing::from_indices;
using testing::values_of;

Tensor leaf(IntArrayRef sizes, uint64_t seed = 1) {
  Generator g(seed);
  Tensor t = testing::uniform64(sizes, g);
  t.set_requires_grad(true);
  return t;
}

TEST(ShapeOps, ViewOpsShareStorageAndRecord) {
  Tensor x = leaf({4, 6});
  for (const Tensor& y :
       {reshape(x, {6, 4}), flatten(x), transpose(x, 0, 1), permute(x, {1, 0}), slice(x, 1, 1, 5, 2)}) {
    EXPECT_TRUE(y.shares_storage(x));
    EXPECT_TRUE(y.requires_grad());
    EXPECT_NE(y.grad_fn(), nullptr);
  }
  for (const Tensor& y : split(x, 4, 1)) {
    EXPECT_TRUE(y.shares_storage(x));
    EXPECT_TRUE(y.requires_grad());
  }
  // Input untouched by the view ops.
  EXPECT_TRUE(x.is_leaf());
  EXPECT_EQ(x.grad_fn(), nullptr);
}

TEST(ShapeOps, ReshapeCopiesWhenNoViewExists) {
  Tensor x = leaf({4, 6});
  Tensor xt = transpose(x, 0, 1);  // [6, 4], non-contiguous
  Tensor y = reshape(xt, {24});
  EXPECT_TRUE(y.is_contiguous());
  EXPECT_FALSE(y.shares_storage(x));
  Generator g(3);
  Tensor w = testing::uniform64({24}, g);
  y.backward(w);
  // d/dx[i][j] = w[j * 4 + i]
  const auto gx = values_of(x.grad());
  const auto wv = values_of(w);
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 6; ++j) EXPECT_DOUBLE_EQ(gx[i * 6 + j], wv[j * 4 + i]);
}

TEST(ShapeOps, SplitUnusedPiecesGetZeroGradient) {
  Tensor x = leaf({7, 2});
  auto pieces = split(x, 3);
  ASSERT_EQ(pieces.size(), 3u);
  EXPECT_EQ(pieces[2].sizes(), Dims({1, 2}));
  EXPECT_EQ(pieces[0].grad_fn(), pieces[2].grad_fn());  // one node, several outputs
  pieces[1].backward(ones({3, 2}, {DType::f64, nullptr}));
  const auto gx = values_of(x.grad());
  for (int r = 0; r < 7; ++r)
    for (int c = 0; c < 2; ++c) EXPECT_EQ(gx[r * 2 + c], (r >= 3 && r < 6) ? 1.0 : 0.0) << r;
}

TEST(ShapeOps, CatSkipsLegacyEmptyAndHandlesStridedParts) {
  Generator g(5);
  Tensor a = testing::uniform64({3, 4}, g);
  Tensor b = testing::uniform64({4, 3}, g).transpose(0, 1);  // [3, 4] strided
  Tensor e = zeros({0}, {DType::f64, nullptr});
  a.set_requires_grad(true);
  e.set_requires_grad(true);
  Tensor y = cat({a, e, b}, 0);
  EXPECT_EQ(y.sizes(), Dims({6, 4}));
  const auto yv = values_of(y);
  const auto av = values_of(a);
  const auto bv = values_of(b);
  for (int i = 0; i < 12; ++i) {
    EXPECT_EQ(yv[i], av[i]);
    EXPECT_EQ(yv[12 + i], bv[i]);
  }
  y.backward(ones({6, 4}, {DType::f64, nullptr}));
  EXPECT_EQ(e.grad().sizes(), Dims({0}));
  EXPECT_EQ(a.grad().sizes(), Dims({3, 4}));
}

TEST(ShapeOps, CatManyPartsAcrossChunks) {
  // Large enough that the byte stream is split across threads at unaligned points.
  std::vector<Tensor> parts;
  Generator g(9);
  for (int k = 0; k < 5; ++k) parts.push_back(randint(0, 1000, {301, 37 + k}, {DType::i32, nullptr}, &g));
  Tensor y = cat(parts, 1);
  ASSERT_EQ(y.sizes(), Dims({301, 37 * 5 + 10}));
  int64_t col = 0;
  for (const Tensor& p : parts) {
    for (int64_t r = 0; r < 301; r += 17)
      for (int64_t c = 0; c < p.sizes()[1]; ++c) ASSERT_EQ(y.at({r, col + c}), p.at({r, c}));
    col += p.sizes()[1];
  }
}

TEST(ShapeOps, IntegerDtypesMoveWithoutGrad) {
  Tensor x = from_indices({0, 1, 2, 3, 4, 5}, {3, 2});
  Tensor y = index_select(x, 0, from_indices({2, 0}, {2}));
  EXPECT_EQ(y.dtype(), DType::i64);
  EXPECT_EQ(testing::indices_of(y), (std::vector<int64_t>{4, 5, 0, 1}));
  Tensor z = gather(x, 1, from_indices({1, 1, 0}, {3, 1}));
  EXPECT_EQ(testing::indices_of(z), (std::vector<int64_t>{1, 3, 4}));
}

TEST(ShapeOps, EmptyIndexAndEmptyInputs) {
  Tensor x = leaf({4, 3});
  Tensor y = index_select(x, 0, zeros({0}, {DType::i64, nullptr}));
  EXPECT_EQ(y.sizes(), Dims({0, 3}));
  Tensor z = gather(x, 1, zeros({4, 0}, {DType::i64, nullptr}));
  EXPECT_EQ(z.sizes(), Dims({4, 0}));
  Tensor s = slice(x, 0, 3, 1);
  EXPECT_EQ(s.sizes(), Dims({0, 3}));
  auto pieces = split(zeros({0, 2}), 3);
  ASSERT_EQ(pieces.size(), 1u);
  EXPECT_EQ(pieces[0].sizes(), Dims({0, 2}));
  Tensor w = reshape(cat({y, x}, 0), {-1});
  w.backward(ones({12}, {DType::f64, nullptr}));
  for (double v : values_of(x.grad())) EXPECT_EQ(v, 1.0);
}

/// Bitwise-identical scatter-add gradients at 1 and at several threads (large, many duplicates).
TEST(ShapeOps, IndexBackwardIsDeterministic) {
  const int saved = get_num_threads();
  Generator g(11);
  Tensor x = testing::randn32({500, 64}, g);
  Tensor index = testing::randint64(0, 50, {20000}, g);  // heavy duplication
  Tensor gidx = testing::randint64(0, 500, {500, 64}, g);
  Tensor w1 = testing::randn32({20000, 64}, g);
  Tensor w2 = testing::randn32({500, 64}, g);
  auto run = [&](int threads) {
    set_num_threads(threads);
    Tensor xx = x.clone();
    xx.set_requires_grad(true);
    autograd::backward({index_select(xx, 0, index), gather(xx, 0, gidx)}, {w1, w2});
    return values_of(xx.grad());
  };
  const auto a = run(1);
  const auto b = run(std::max(2, saved));
  set_num_threads(saved);
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) ASSERT_EQ(a[i], b[i]) << i;
}

TEST(ShapeOps, SliceBackwardThroughStridedView) {
  Tensor x = leaf({5, 4});
  Tensor y = slice(transpose(x, 0, 1), 1, -4, std::nullopt, 3);  // [4, 2]: rows 1 and 4 of x
  EXPECT_EQ(y.sizes(), Dims({4, 2}));
  y.backward(ones({4, 2}, {DType::f64, nullptr}));
  const auto gx = values_of(x.grad());
  for (int r = 0; r < 5; ++r)
    for (int c = 0; c < 4; ++c) EXPECT_EQ(gx[r * 4 + c], (r == 1 || r == 4) ? 1.0 : 0.0);
}

TEST(ShapeOps, NoGradModeRecordsNothing) {
  Tensor x = leaf({4, 6});
  autograd::NoGradGuard ng;
  EXPECT_FALSE(reshape(x, {24}).requires_grad());
  EXPECT_FALSE(cat({x, x}, 1).requires_grad());
  for (const Tensor& p : split(x, 2)) EXPECT_FALSE(p.requires_grad());
}

}  // namespace
}  // namespace strata
