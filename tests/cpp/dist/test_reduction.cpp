// The fixed reduction tree (dist/reduction.h), on one process.
#include <gtest/gtest.h>

#include "core/factories.h"
#include "dist/reduction.h"
#include "tests/cpp/bitwise.h"
#include "tests/cpp/dist/dist_test_util.h"
#include "tests/cpp/error_text.h"

namespace strata::dist {
namespace {

using testing_util::same_bits;

TEST(DistReduction, SplitIsTheLargestPowerOfTwoBelowTheCount) {
  EXPECT_EQ(tree_split(0, 2), 1);
  EXPECT_EQ(tree_split(0, 4), 2);
  EXPECT_EQ(tree_split(0, 5), 4);
  EXPECT_EQ(tree_split(0, 8), 4);
  EXPECT_EQ(tree_split(4, 7), 6);
}

TEST(DistReduction, CoverIsTheMaximalSubtreesInsideABlock) {
  using V = std::vector<TreeNode>;
  EXPECT_EQ(tree_cover(8, 0, 8), (V{{0, 8}}));
  EXPECT_EQ(tree_cover(8, 2, 6), (V{{2, 4}, {4, 6}}));
  EXPECT_EQ(tree_cover(8, 1, 4), (V{{1, 2}, {2, 4}}));
  EXPECT_EQ(tree_cover(6, 0, 3), (V{{0, 2}, {2, 3}}));
  EXPECT_EQ(tree_cover(6, 3, 6), (V{{3, 4}, {4, 6}}));
  EXPECT_TRUE(tree_cover(6, 2, 2).empty());
  // One contribution per rank: each rank's block is one leaf.
  for (int64_t r = 0; r < 4; ++r) EXPECT_EQ(tree_cover(4, r, r + 1), (V{{r, r + 1}}));
}

TEST(DistReduction, TreeSumAddsInTheTreeOrder) {
  // f32: the left fold ((1e8 + 1) - 1e8) + 1 gives 1; the tree (1e8 + 1) + (-1e8 + 1) gives 0.
  std::vector<Tensor> c;
  for (float v : {1e8f, 1.f, -1e8f, 1.f}) c.push_back(full({1}, v, {DType::f32}));
  EXPECT_EQ(tree_sum(c).item<float>(), 0.f);
  // Three: (c0 + c1) + c2.
  std::vector<Tensor> three{c[0], c[1], c[2]};
  EXPECT_EQ(tree_sum(three).item<float>(), (1e8f + 1.f) + -1e8f);
}

TEST(DistReduction, TreeSumMatchesAnExplicitTreeOnSeededData) {
  for (DType dtype : testing::reducible_dtypes()) {
    std::vector<Tensor> c;
    for (int i = 0; i < 5; ++i) c.push_back(testing::seeded(i, {33}, dtype));
    const Tensor expected = c[0].clone();
    // T(0,5) = T(0,4) + c4 = ((c0 + c1) + (c2 + c3)) + c4, element by element.
    for (int64_t e = 0; e < 33; ++e) {
      if (dtype == DType::f32) {
        auto v = [&](int i) { return c[i].data<float>()[e]; };
        expected.data<float>()[e] = ((v(0) + v(1)) + (v(2) + v(3))) + v(4);
      } else if (dtype == DType::f64) {
        auto v = [&](int i) { return c[i].data<double>()[e]; };
        expected.data<double>()[e] = ((v(0) + v(1)) + (v(2) + v(3))) + v(4);
      } else {
        auto v = [&](int i) { return c[i].data<int64_t>()[e]; };
        expected.data<int64_t>()[e] = ((v(0) + v(1)) + (v(2) + v(3))) + v(4);
      }
    }
    EXPECT_TRUE(same_bits(tree_sum(c), expected)) << dtype;
  }
}

TEST(DistReduction, TreeSumRefusesBadInput) {
  EXPECT_ERROR_HAS(tree_sum({}), "no contributions");
  EXPECT_ERROR_HAS(tree_sum({zeros({2}), Tensor()}), "contribution 1 is undefined");
  EXPECT_ERROR_HAS(tree_sum({zeros({2}, {DType::i32})}), "dtype i32 (f32, f64 or i64 expected)");
  EXPECT_ERROR_HAS(tree_sum({zeros({2}), zeros({3})}), "contribution 1 is f32 [3] but contribution 0 is f32 [2]");
  EXPECT_ERROR_HAS(tree_sum({zeros({2}), zeros({2}, {DType::f64})}), "contribution 1 is f64");
}

}  // namespace
}  // namespace strata::dist
