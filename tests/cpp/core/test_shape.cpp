// Shape arithmetic: IntArrayRef, numel, strides, contiguity, dim wrapping, size inference,
// broadcasting and the view-stride rule.

#include "core/shape.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sstream>
#include <vector>

#include "test_util.h"

namespace {

using namespace strata;
using strata_test::V;
using strata_test::vec;
using ::testing::AllOf;
using ::testing::HasSubstr;

TEST(IntArrayRef, FromBracedListVectorAndDims) {
  std::vector<int64_t> v{4, 5, 6};
  Dims d{7, 8};
  IntArrayRef a = v;
  IntArrayRef b = d;
  EXPECT_EQ(a.size(), 3u);
  EXPECT_EQ(a[2], 6);
  EXPECT_EQ(b.vec(), (V{7, 8}));
  EXPECT_EQ(vec(a.to_dims()), v);
  EXPECT_TRUE(IntArrayRef().empty());
  EXPECT_TRUE(a == IntArrayRef(v));
  EXPECT_FALSE(a == IntArrayRef(d));
  EXPECT_TRUE(IntArrayRef() == IntArrayRef(std::vector<int64_t>{}));
}

TEST(IntArrayRef, Printing) {
  EXPECT_EQ(to_string({2, 3}), "[2, 3]");
  EXPECT_EQ(to_string({}), "[]");
  EXPECT_EQ(to_string({-1}), "[-1]");
  std::ostringstream os;
  os << Dims{1, 2, 3};
  EXPECT_EQ(os.str(), "[1, 2, 3]");
}

TEST(Shape, CheckedNumel) {
  EXPECT_EQ(checked_numel({}, "op"), 1);
  EXPECT_EQ(checked_numel({2, 3, 4}, "op"), 24);
  EXPECT_EQ(checked_numel({2, 0, 4}, "op"), 0);
  EXPECT_THAT(ERROR_MESSAGE(checked_numel({2, -3}, "my_factory")),
              AllOf(HasSubstr("my_factory"), HasSubstr("-3"), HasSubstr("[2, -3]")));
  EXPECT_THAT(ERROR_MESSAGE(checked_numel({int64_t{1} << 40, int64_t{1} << 40}, "my_factory")),
              AllOf(HasSubstr("my_factory"), HasSubstr("1099511627776")));
}

TEST(Shape, ContiguousStrides) {
  EXPECT_EQ(vec(contiguous_strides({2, 3, 4})), (V{12, 4, 1}));
  EXPECT_EQ(vec(contiguous_strides({5})), (V{1}));
  EXPECT_EQ(vec(contiguous_strides({})), (V{}));
  // PyTorch: torch.empty(2, 0, 3).stride() == (3, 3, 1)
  EXPECT_EQ(vec(contiguous_strides({2, 0, 3})), (V{3, 3, 1}));
  EXPECT_EQ(vec(contiguous_strides({1, 1})), (V{1, 1}));
}

TEST(Shape, IsContiguousLayout) {
  EXPECT_TRUE(is_contiguous_layout({2, 3}, {3, 1}));
  EXPECT_FALSE(is_contiguous_layout({2, 3}, {1, 2}));
  EXPECT_FALSE(is_contiguous_layout({2, 3}, {4, 1}));         // padded rows
  EXPECT_TRUE(is_contiguous_layout({2, 1, 3}, {3, 100, 1}));  // size-1 dims ignored
  EXPECT_TRUE(is_contiguous_layout({}, {}));
  EXPECT_TRUE(is_contiguous_layout({0, 3}, {7, 5}));   // empty tensors are contiguous
  EXPECT_FALSE(is_contiguous_layout({3, 4}, {1, 0}));  // expanded
}

TEST(Shape, WrapDim) {
  EXPECT_EQ(wrap_dim(0, 3, "op"), 0);
  EXPECT_EQ(wrap_dim(2, 3, "op"), 2);
  EXPECT_EQ(wrap_dim(-1, 3, "op"), 2);
  EXPECT_EQ(wrap_dim(-3, 3, "op"), 0);
  EXPECT_EQ(wrap_dim(0, 0, "op", true), 0);
  EXPECT_EQ(wrap_dim(-1, 0, "op", true), 0);
  EXPECT_THAT(ERROR_MESSAGE(wrap_dim(3, 3, "my_op")),
              AllOf(HasSubstr("my_op"), HasSubstr("dimension 3"), HasSubstr("rank 3")));
  EXPECT_THAT(ERROR_MESSAGE(wrap_dim(-4, 3, "my_op")), AllOf(HasSubstr("my_op"), HasSubstr("dimension -4")));
  EXPECT_THAT(ERROR_MESSAGE(wrap_dim(0, 0, "my_op")),
              AllOf(HasSubstr("my_op"), HasSubstr("dimension 0"), ::testing::Not(HasSubstr("[0, -1]"))));
  EXPECT_THAT(ERROR_MESSAGE(wrap_dim(1, 0, "my_op", true)), AllOf(HasSubstr("my_op"), HasSubstr("dimension 1")));
}

TEST(Shape, InferSize) {
  EXPECT_EQ(vec(infer_size({-1, 4}, 24, "op")), (V{6, 4}));
  EXPECT_EQ(vec(infer_size({2, -1, 3}, 24, "op")), (V{2, 4, 3}));
  EXPECT_EQ(vec(infer_size({4, 6}, 24, "op")), (V{4, 6}));
  EXPECT_EQ(vec(infer_size({-1}, 0, "op")), (V{0}));
  EXPECT_EQ(vec(infer_size({}, 1, "op")), (V{}));
  EXPECT_THAT(ERROR_MESSAGE(infer_size({-1, -1}, 24, "my_view")), AllOf(HasSubstr("my_view"), HasSubstr("[-1, -1]")));
  EXPECT_THAT(ERROR_MESSAGE(infer_size({5, 5}, 24, "my_view")),
              AllOf(HasSubstr("my_view"), HasSubstr("[5, 5]"), HasSubstr("24")));
  EXPECT_THAT(ERROR_MESSAGE(infer_size({-1, 5}, 24, "my_view")),
              AllOf(HasSubstr("my_view"), HasSubstr("[-1, 5]"), HasSubstr("24")));
  EXPECT_THAT(ERROR_MESSAGE(infer_size({-2, 12}, 24, "my_view")), AllOf(HasSubstr("my_view"), HasSubstr("-2")));
  // -1 next to a 0 is ambiguous (PyTorch refuses too).
  EXPECT_THAT(ERROR_MESSAGE(infer_size({-1, 0}, 0, "my_view")), AllOf(HasSubstr("my_view"), HasSubstr("[-1, 0]")));
  EXPECT_THAT(ERROR_MESSAGE(infer_size({}, 2, "my_view")), HasSubstr("my_view"));
}

TEST(Shape, BroadcastShapes) {
  EXPECT_EQ(vec(broadcast_shapes({3, 1}, {4})), (V{3, 4}));
  EXPECT_EQ(vec(broadcast_shapes({2, 1, 4}, {3, 1})), (V{2, 3, 4}));
  EXPECT_EQ(vec(broadcast_shapes({}, {2, 2})), (V{2, 2}));
  EXPECT_EQ(vec(broadcast_shapes({5}, {})), (V{5}));
  EXPECT_EQ(vec(broadcast_shapes({0}, {1})), (V{0}));
  EXPECT_EQ(vec(broadcast_shapes({1, 0}, {3, 1})), (V{3, 0}));
  EXPECT_THAT(ERROR_MESSAGE(broadcast_shapes({3}, {4}, "my_add")),
              AllOf(HasSubstr("my_add"), HasSubstr("[3]"), HasSubstr("[4]")));
  EXPECT_THAT(ERROR_MESSAGE(broadcast_shapes({2, 3}, {2, 1, 2})),
              AllOf(HasSubstr("broadcast_shapes"), HasSubstr("[2, 3]"), HasSubstr("[2, 1, 2]")));
  EXPECT_THAT(ERROR_MESSAGE(broadcast_shapes({0}, {2})), AllOf(HasSubstr("[0]"), HasSubstr("[2]")));
}

struct ViewCase {
  V sizes, strides, new_sizes;
  bool ok;
  V expected;
};

TEST(Shape, ComputeViewStridesMatchesPyTorch) {
  const std::vector<ViewCase> cases = {
      {{2, 3, 4}, {12, 4, 1}, {4, 6}, true, {6, 1}},
      {{2, 3, 4}, {12, 4, 1}, {24}, true, {1}},
      {{2, 3}, {3, 1}, {3, 2, 1}, true, {2, 1, 1}},
      {{3, 2}, {1, 3}, {6}, false, {}},  // transposed
      {{3, 2, 4}, {4, 12, 1}, {3, 2, 2, 2}, true, {4, 12, 2, 1}},
      {{3, 2, 4}, {4, 12, 1}, {6, 4}, false, {}},
      {{2, 3, 2}, {12, 4, 1}, {6, 2}, true, {4, 1}},  // last dim narrowed
      {{2, 3, 2}, {12, 4, 1}, {2, 6}, false, {}},
      {{2, 3, 2}, {12, 4, 1}, {12}, false, {}},
      {{3, 4}, {1, 0}, {12}, false, {}},  // expanded
      {{3, 4}, {1, 0}, {3, 2, 2}, true, {1, 0, 0}},
      {{0, 3}, {3, 1}, {3, 0}, true, {1, 1}},
      {{}, {}, {1, 1}, true, {1, 1}},
      {{4}, {2}, {2, 2}, true, {4, 2}},  // strided 1-D split
  };
  for (const auto& c : cases) {
    Dims out;
    const bool ok = compute_view_strides(c.sizes, c.strides, c.new_sizes, out);
    EXPECT_EQ(ok, c.ok) << "sizes " << to_string(c.sizes) << " strides " << to_string(c.strides) << " -> "
                        << to_string(c.new_sizes);
    if (ok && c.ok) {
      EXPECT_EQ(vec(out), c.expected) << "sizes " << to_string(c.sizes) << " strides " << to_string(c.strides) << " -> "
                                      << to_string(c.new_sizes);
    }
  }
}

}  // namespace
