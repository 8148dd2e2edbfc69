// Views: sizes, strides and offsets as PyTorch computes them, storage sharing, element values, and
// writes through the view landing in the base. Then bad input for every view.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <vector>

#include "core/factories.h"
#include "core/tensor.h"
#include "test_util.h"

namespace {

using namespace strata;
using strata_test::iota;
using strata_test::Mentions;
using strata_test::NamesOp;
using strata_test::raw_values;
using strata_test::V;
using strata_test::values;
using strata_test::vec;
using ::testing::AllOf;
using ::testing::AnyOf;
using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using D = std::vector<double>;

constexpr TensorOptions kF32{DType::f32, nullptr};

/// arange(24) as f32 viewed as [2, 3, 4]: element (i, j, k) == 12 i + 4 j + k.
Tensor base234() { return arange(0, 24, 1, kF32).view({2, 3, 4}); }

/// Checks that a view reads the right values (through at() and through raw memory) and that
/// writing through it changes exactly the corresponding elements of the base.
void check_write_through(const Tensor& base, const Tensor& view, const char* what) {
  SCOPED_TRACE(what);
  ASSERT_TRUE(view.shares_storage(base));
  const Tensor before = base.clone();
  Tensor(view).fill_(77.0);  // representable in every dtype used here, and not a value of the base
  for (double v : values(view)) EXPECT_EQ(v, 77.0);
  // Every changed base element must now be 77, and at most numel() of them may change.
  const D after = values(base);
  const D orig = values(before);
  int64_t changed = 0;
  for (std::size_t i = 0; i < after.size(); ++i) {
    if (after[i] != orig[i]) {
      EXPECT_EQ(after[i], 77.0);
      ++changed;
    }
  }
  EXPECT_GT(changed, 0);
  EXPECT_LE(changed, view.numel());
  // Restore via copy_ through the view and check the base is back to its original contents.
  Tensor(view).copy_(before.as_strided(view.sizes(), view.strides(), view.offset() - base.offset() + before.offset()));
  EXPECT_EQ(values(base), orig);
}

// ---- view --------------------------------------------------------------------------------------

TEST(View, ContiguousReshapes) {
  Tensor a = base234();
  EXPECT_LAYOUT(a, ({2, 3, 4}), ({12, 4, 1}), 0);
  EXPECT_TRUE(a.is_contiguous());

  Tensor b = a.view({4, 6});
  EXPECT_LAYOUT(b, ({4, 6}), ({6, 1}), 0);
  EXPECT_TRUE(b.shares_storage(a));
  EXPECT_TRUE(b.is_contiguous());
  EXPECT_EQ(b.at({3, 5}), 23.0);
  EXPECT_EQ(b.at({1, 2}), 8.0);

  EXPECT_LAYOUT(a.view({-1, 4}), ({6, 4}), ({4, 1}), 0);
  EXPECT_LAYOUT(a.view({2, -1}), ({2, 12}), ({12, 1}), 0);
  EXPECT_LAYOUT(a.view({24}), ({24}), ({1}), 0);
  EXPECT_LAYOUT(a.view({-1}), ({24}), ({1}), 0);
  EXPECT_LAYOUT(a.view({1, 24, 1}), ({1, 24, 1}), ({24, 1, 1}), 0);
  EXPECT_EQ(values(a.view({3, 8})), iota(24));
  check_write_through(a, a.view({4, 6}).select(0, 2), "view row");
}

TEST(View, OfNonContiguousWhereStridesAllow) {
  Tensor a = base234().transpose(0, 1);  // [3, 2, 4] strides [4, 12, 1]
  EXPECT_LAYOUT(a, ({3, 2, 4}), ({4, 12, 1}), 0);
  Tensor v = a.view({3, 2, 2, 2});
  EXPECT_LAYOUT(v, ({3, 2, 2, 2}), ({4, 12, 2, 1}), 0);
  EXPECT_TRUE(v.shares_storage(a));
  EXPECT_EQ(v.at({2, 1, 1, 0}), 12 + 8 + 2.0);
  // A view on a narrowed tensor keeps its offset.
  Tensor b = base234();
  Tensor n = b.narrow(2, 1, 2);  // [2, 3, 2] strides [12, 4, 1] offset 1
  Tensor nv = n.view({6, 2});
  EXPECT_LAYOUT(nv, ({6, 2}), ({4, 1}), 1);
  EXPECT_EQ(values(nv), (D{1, 2, 5, 6, 9, 10, 13, 14, 17, 18, 21, 22}));
  check_write_through(b, nv, "view of narrow");
}

TEST(View, ScalarsAndEmpty) {
  Tensor s = scalar_tensor(3.5);
  Tensor s1 = s.view({1});
  EXPECT_LAYOUT(s1, ({1}), ({1}), 0);
  EXPECT_EQ(s1.at({0}), 3.5);
  Tensor back = s1.view({});
  EXPECT_EQ(back.dim(), 0);
  EXPECT_EQ(back.numel(), 1);
  EXPECT_EQ(back.item<double>(), 3.5);
  EXPECT_LAYOUT(s.view({1, 1, 1}), ({1, 1, 1}), ({1, 1, 1}), 0);

  Tensor e = zeros({0, 3});
  EXPECT_EQ(vec(e.view({-1}).sizes()), (V{0}));
  EXPECT_EQ(vec(e.view({3, 0}).sizes()), (V{3, 0}));
  EXPECT_EQ(vec(e.view({0, 5, 2}).sizes()), (V{0, 5, 2}));
}

TEST(View, Errors) {
  Tensor a = base234();
  EXPECT_THAT(ERROR_MESSAGE(a.view({5, 5})), AllOf(HasSubstr("view"), HasSubstr("[5, 5]"), HasSubstr("24")));
  EXPECT_THAT(ERROR_MESSAGE(a.view({-1, -1})), AllOf(HasSubstr("view"), HasSubstr("[-1, -1]")));
  EXPECT_THAT(ERROR_MESSAGE(a.view({-1, 5})), AllOf(HasSubstr("view"), HasSubstr("[-1, 5]")));
  EXPECT_THAT(ERROR_MESSAGE(a.view({-3, -8})), HasSubstr("view"));
  EXPECT_THAT(ERROR_MESSAGE(zeros({0, 3}).view({-1, 0})), AllOf(HasSubstr("view"), HasSubstr("[-1, 0]")));
  // Strides cannot express it: the message should say so and suggest reshape(), like PyTorch.
  Tensor t = a.transpose(0, 1);
  EXPECT_THAT(ERROR_MESSAGE(t.view({24})),
              AllOf(HasSubstr("view"), HasSubstr("[24]"), HasSubstr("[3, 2, 4]"), HasSubstr("reshape")));
  EXPECT_THAT(ERROR_MESSAGE(t.view({6, 4})), AllOf(HasSubstr("view"), HasSubstr("[6, 4]")));
  Tensor m = arange(0, 6, 1, kF32).view({2, 3}).t();
  EXPECT_THAT(ERROR_MESSAGE(m.view({6})), AllOf(HasSubstr("view"), HasSubstr("[3, 2]")));
}

// ---- reshape -----------------------------------------------------------------------------------

TEST(Reshape, ViewWhenPossible) {
  Tensor a = base234();
  Tensor r = a.reshape({6, -1});
  EXPECT_LAYOUT(r, ({6, 4}), ({4, 1}), 0);
  EXPECT_TRUE(r.shares_storage(a));
  check_write_through(a, r.narrow(0, 1, 2), "reshape view");
  Tensor t = a.transpose(0, 1);
  Tensor rv = t.reshape({3, 2, 2, 2});
  EXPECT_TRUE(rv.shares_storage(t));
  EXPECT_LAYOUT(rv, ({3, 2, 2, 2}), ({4, 12, 2, 1}), 0);
}

TEST(Reshape, CopiesWhenNoViewExists) {
  Tensor a = base234();
  Tensor t = a.transpose(0, 2);  // [4, 3, 2]
  Tensor r = t.reshape({-1});
  EXPECT_FALSE(r.shares_storage(a));
  EXPECT_TRUE(r.is_contiguous());
  EXPECT_LAYOUT(r, ({24}), ({1}), 0);
  D expected;
  for (int k = 0; k < 4; ++k)
    for (int j = 0; j < 3; ++j)
      for (int i = 0; i < 2; ++i) expected.push_back(12 * i + 4 * j + k);
  EXPECT_EQ(values(r), expected);
  // The copy is independent of the base.
  r.fill_(0.0);
  EXPECT_EQ(values(a), iota(24));

  Tensor m = arange(0, 6, 1, kF32).view({2, 3}).t().reshape({2, 3});
  EXPECT_EQ(values(m), (D{0, 3, 1, 4, 2, 5}));
  // Expanded input.
  Tensor e = arange(0, 3, 1, kF32).expand({2, 3}).reshape({6});
  EXPECT_EQ(values(e), (D{0, 1, 2, 0, 1, 2}));
}

TEST(Reshape, Errors) {
  Tensor a = base234();
  EXPECT_THAT(ERROR_MESSAGE(a.reshape({7, -1})), AllOf(HasSubstr("reshape"), HasSubstr("[7, -1]"), HasSubstr("24")));
  EXPECT_THAT(ERROR_MESSAGE(a.transpose(0, 1).reshape({25})), AllOf(HasSubstr("reshape"), HasSubstr("[25]")));
  EXPECT_THAT(ERROR_MESSAGE(a.reshape({-1, -1, 2})), HasSubstr("reshape"));
}

// ---- narrow ------------------------------------------------------------------------------------

TEST(Narrow, Basic) {
  Tensor a = base234();
  Tensor n = a.narrow(2, 1, 2);
  EXPECT_LAYOUT(n, ({2, 3, 2}), ({12, 4, 1}), 1);
  EXPECT_FALSE(n.is_contiguous());
  EXPECT_EQ(n.at({1, 2, 1}), 12 + 8 + 2.0);
  check_write_through(a, n, "narrow dim 2");

  Tensor n0 = a.narrow(0, 1, 1);
  EXPECT_LAYOUT(n0, ({1, 3, 4}), ({12, 4, 1}), 12);
  EXPECT_TRUE(n0.is_contiguous());
  check_write_through(a, n0, "narrow dim 0");

  Tensor nneg = a.narrow(-2, 2, 1);
  EXPECT_LAYOUT(nneg, ({2, 1, 4}), ({12, 4, 1}), 8);
  check_write_through(a, nneg, "narrow dim -2");

  Tensor full_range = a.narrow(1, 0, 3);
  EXPECT_LAYOUT(full_range, ({2, 3, 4}), ({12, 4, 1}), 0);

  Tensor empty = a.narrow(1, 3, 0);  // start == size with length 0 is allowed (PyTorch too)
  EXPECT_EQ(vec(empty.sizes()), (V{2, 0, 4}));
  EXPECT_EQ(empty.numel(), 0);

  // narrow of narrow accumulates the offset
  Tensor nn = a.narrow(2, 1, 3).narrow(2, 1, 2);
  EXPECT_LAYOUT(nn, ({2, 3, 2}), ({12, 4, 1}), 2);
  EXPECT_EQ(nn.at({0, 0, 0}), 2.0);
}

TEST(Narrow, Errors) {
  Tensor a = base234();
  EXPECT_THAT(ERROR_MESSAGE(a.narrow(3, 0, 1)), AllOf(HasSubstr("narrow"), Mentions("dim", 3)));
  EXPECT_THAT(ERROR_MESSAGE(a.narrow(-4, 0, 1)), AllOf(HasSubstr("narrow"), Mentions("dim", -4)));
  EXPECT_THAT(ERROR_MESSAGE(a.narrow(2, 3, 2)),
              AllOf(HasSubstr("narrow"), Mentions("start", 3), Mentions("length", 2)));
  EXPECT_THAT(ERROR_MESSAGE(a.narrow(2, 5, 0)), AllOf(HasSubstr("narrow"), HasSubstr("5")));
  // A negative length must be reported as such (not as "exceeds size").
  EXPECT_THAT(ERROR_MESSAGE(a.narrow(2, 0, -1)),
              AllOf(HasSubstr("narrow"), Mentions("length", -1),
                    AnyOf(HasSubstr("negative"), HasSubstr(">= 0"), HasSubstr("non-negative"))));
  EXPECT_THAT(ERROR_MESSAGE(a.narrow(1, 0, 4)), AllOf(HasSubstr("narrow"), Mentions("length", 4)));
  EXPECT_THAT(ERROR_MESSAGE(scalar_tensor(1.0).narrow(0, 0, 1)), HasSubstr("narrow"));
}

// ---- slice -------------------------------------------------------------------------------------

TEST(Slice, PythonSemantics) {
  Tensor x = arange(0, 10, 1, kF32);
  Tensor s = x.slice(0, 2, 8, 2);
  EXPECT_LAYOUT(s, ({3}), ({2}), 2);
  EXPECT_EQ(values(s), (D{2, 4, 6}));
  check_write_through(x, s, "slice step 2");

  Tensor tail = x.slice(0, -3);
  EXPECT_LAYOUT(tail, ({3}), ({1}), 7);
  EXPECT_EQ(values(tail), (D{7, 8, 9}));

  Tensor head = x.slice(0, std::nullopt, -2);
  EXPECT_LAYOUT(head, ({8}), ({1}), 0);

  Tensor all = x.slice(0);
  EXPECT_LAYOUT(all, ({10}), ({1}), 0);
  EXPECT_TRUE(all.shares_storage(x));

  Tensor clamped = x.slice(0, -100, 100);
  EXPECT_LAYOUT(clamped, ({10}), ({1}), 0);

  Tensor stepped = x.slice(0, 1, std::nullopt, 3);
  EXPECT_LAYOUT(stepped, ({3}), ({3}), 1);
  EXPECT_EQ(values(stepped), (D{1, 4, 7}));

  EXPECT_EQ(values(x.slice(0, 0, 10, 3)), (D{0, 3, 6, 9}));
  EXPECT_EQ(values(x.slice(0, std::nullopt, std::nullopt, 4)), (D{0, 4, 8}));
  EXPECT_EQ(values(x.slice(0, -4, -1)), (D{6, 7, 8}));
  EXPECT_EQ(values(x.slice(0, 9, 100, 5)), (D{9}));

  // Empty results: start >= end after clamping.
  EXPECT_EQ(x.slice(0, 8, 2).numel(), 0);
  EXPECT_EQ(vec(x.slice(0, 8, 2).sizes()), (V{0}));
  EXPECT_EQ(vec(x.slice(0, 20).sizes()), (V{0}));
  EXPECT_EQ(vec(x.slice(0, std::nullopt, -20).sizes()), (V{0}));
  EXPECT_EQ(vec(x.slice(0, 5, 5).sizes()), (V{0}));
}

TEST(Slice, MultiDim) {
  Tensor a = base234();
  Tensor s = a.slice(2, 0, 4, 2);
  EXPECT_LAYOUT(s, ({2, 3, 2}), ({12, 4, 2}), 0);
  EXPECT_EQ(s.at({1, 1, 1}), 12 + 4 + 2.0);
  check_write_through(a, s, "slice dim 2 step 2");

  Tensor s1 = a.slice(-2, 1);
  EXPECT_LAYOUT(s1, ({2, 2, 4}), ({12, 4, 1}), 4);
  check_write_through(a, s1, "slice dim -2");

  Tensor ss = a.slice(1, 1).slice(2, 1, std::nullopt, 2);
  EXPECT_LAYOUT(ss, ({2, 2, 2}), ({12, 4, 2}), 5);
  EXPECT_EQ(values(ss), (D{5, 7, 9, 11, 17, 19, 21, 23}));
  check_write_through(a, ss, "slice of slice");

  Tensor t = a.transpose(0, 2).slice(0, 1, 3);  // [2, 3, 2] strides [1, 4, 12] offset 1
  EXPECT_LAYOUT(t, ({2, 3, 2}), ({1, 4, 12}), 1);
  check_write_through(a, t, "slice of transpose");
}

TEST(Slice, HugeStepsDoNotOverflow) {
  // Python accepts any positive step: x[::2**62] is the first element only.
  Tensor x = arange(0, 10, 1, kF32);
  EXPECT_STRATA_ERROR_ISOLATED(
      [&] {
        Tensor s = x.slice(0, 0, 10, std::numeric_limits<int64_t>::max());
        if (s.numel() == 1 && s.at({0}) == 0.0) throw Error("ok: one element");
        return s;
      }(),
      "ok: one element");
  Tensor a = base234();
  EXPECT_STRATA_ERROR_ISOLATED(
      [&] {
        Tensor s = a.slice(0, 0, 2, int64_t{1} << 62);  // stride 12 * 2^62 does not fit in int64
        if (strata_test::vec(s.sizes()) == V{1, 3, 4} && s.at({0, 2, 3}) == 11.0) throw Error("ok: first block");
        return s;
      }(),
      "ok: first block");
}

TEST(Slice, Errors) {
  Tensor x = arange(0, 10, 1, kF32);
  EXPECT_THAT(ERROR_MESSAGE(x.slice(0, 0, 5, 0)), AllOf(HasSubstr("slice"), HasSubstr("step")));
  EXPECT_THAT(ERROR_MESSAGE(x.slice(0, 0, 5, -1)), AllOf(HasSubstr("slice"), HasSubstr("-1")));
  EXPECT_THAT(ERROR_MESSAGE(x.slice(1)), AllOf(HasSubstr("slice"), Mentions("dim", 1)));
  EXPECT_THAT(ERROR_MESSAGE(x.slice(-2)), AllOf(HasSubstr("slice"), Mentions("dim", -2)));
  EXPECT_THAT(ERROR_MESSAGE(scalar_tensor(1.0).slice(0)), HasSubstr("slice"));
}

// ---- select ------------------------------------------------------------------------------------

TEST(Select, Basic) {
  Tensor a = base234();
  Tensor s = a.select(1, 2);
  EXPECT_LAYOUT(s, ({2, 4}), ({12, 1}), 8);
  EXPECT_EQ(values(s), (D{8, 9, 10, 11, 20, 21, 22, 23}));
  check_write_through(a, s, "select dim 1");

  Tensor last = a.select(0, -1);
  EXPECT_LAYOUT(last, ({3, 4}), ({4, 1}), 12);
  EXPECT_TRUE(last.is_contiguous());
  check_write_through(a, last, "select dim 0 index -1");

  Tensor inner = a.select(-1, -4);
  EXPECT_LAYOUT(inner, ({2, 3}), ({12, 4}), 0);
  check_write_through(a, inner, "select dim -1");

  Tensor elem = a.select(0, 1).select(0, 2).select(0, 3);
  EXPECT_EQ(elem.dim(), 0);
  EXPECT_EQ(elem.offset(), 23);
  EXPECT_EQ(elem.item<float>(), 23.0f);
  check_write_through(a, elem, "select to scalar");
}

TEST(Select, Errors) {
  Tensor a = base234();
  EXPECT_THAT(ERROR_MESSAGE(a.select(2, 4)), AllOf(HasSubstr("select"), Mentions("index", 4), Mentions("size", 4)));
  EXPECT_THAT(ERROR_MESSAGE(a.select(1, -4)), AllOf(HasSubstr("select"), Mentions("index", -4)));
  EXPECT_THAT(ERROR_MESSAGE(a.select(3, 0)), AllOf(HasSubstr("select"), Mentions("dim", 3)));
  EXPECT_THAT(ERROR_MESSAGE(scalar_tensor(2.0).select(0, 0)), HasSubstr("select"));
  EXPECT_THAT(ERROR_MESSAGE(zeros({0, 2}).select(0, 0)), AllOf(HasSubstr("select"), Mentions("index", 0)));
}

// ---- transpose / permute / t -------------------------------------------------------------------

TEST(Transpose, Basic) {
  Tensor a = base234();
  Tensor t = a.transpose(0, 2);
  EXPECT_LAYOUT(t, ({4, 3, 2}), ({1, 4, 12}), 0);
  EXPECT_FALSE(t.is_contiguous());
  EXPECT_EQ(t.at({3, 1, 1}), 12 + 4 + 3.0);
  check_write_through(a, t.narrow(0, 1, 2), "transpose");

  EXPECT_LAYOUT(a.transpose(-1, -2), ({2, 4, 3}), ({12, 1, 4}), 0);
  EXPECT_LAYOUT(a.transpose(1, 1), ({2, 3, 4}), ({12, 4, 1}), 0);
  EXPECT_LAYOUT(a.transpose(0, 2).transpose(2, 0), ({2, 3, 4}), ({12, 4, 1}), 0);
  EXPECT_TRUE(a.transpose(0, 2).transpose(2, 0).is_contiguous());

  Tensor n = a.narrow(1, 1, 2).transpose(0, 1);
  EXPECT_LAYOUT(n, ({2, 2, 4}), ({4, 12, 1}), 4);
}

TEST(Transpose, Errors) {
  Tensor a = base234();
  EXPECT_THAT(ERROR_MESSAGE(a.transpose(0, 3)), AllOf(HasSubstr("transpose"), Mentions("dim", 3)));
  EXPECT_THAT(ERROR_MESSAGE(a.transpose(-4, 0)), AllOf(HasSubstr("transpose"), Mentions("dim", -4)));
}

TEST(Permute, Basic) {
  Tensor a = base234();
  Tensor p = a.permute({2, 0, 1});
  EXPECT_LAYOUT(p, ({4, 2, 3}), ({1, 12, 4}), 0);
  EXPECT_EQ(p.at({3, 1, 2}), 12 + 8 + 3.0);
  check_write_through(a, p.select(0, 1), "permute");
  EXPECT_LAYOUT(a.permute({-1, 0, 1}), ({4, 2, 3}), ({1, 12, 4}), 0);
  EXPECT_LAYOUT(a.permute({0, 1, 2}), ({2, 3, 4}), ({12, 4, 1}), 0);
  EXPECT_LAYOUT(a.permute({1, 2, 0}), ({3, 4, 2}), ({4, 1, 12}), 0);
  Tensor s = scalar_tensor(1.0);
  EXPECT_EQ(s.permute({}).dim(), 0);
}

TEST(Permute, Errors) {
  Tensor a = base234();
  EXPECT_THAT(ERROR_MESSAGE(a.permute({0, 0, 1})), AllOf(HasSubstr("permute"), HasSubstr("[0, 0, 1]")));
  EXPECT_THAT(ERROR_MESSAGE(a.permute({0, -3, 1})), HasSubstr("permute"));  // -3 == 0
  EXPECT_THAT(ERROR_MESSAGE(a.permute({0, 1})), AllOf(HasSubstr("permute"), HasSubstr("[0, 1]"), HasSubstr("3")));
  EXPECT_THAT(ERROR_MESSAGE(a.permute({0, 1, 2, 3})), AllOf(HasSubstr("permute"), HasSubstr("[0, 1, 2, 3]")));
  EXPECT_THAT(ERROR_MESSAGE(a.permute({0, 1, 3})), AllOf(HasSubstr("permute"), HasSubstr("3")));
}

TEST(T, Ranks) {
  Tensor m = arange(0, 6, 1, kF32).view({2, 3});
  Tensor t = m.t();
  EXPECT_LAYOUT(t, ({3, 2}), ({1, 3}), 0);
  EXPECT_EQ(values(t), (D{0, 3, 1, 4, 2, 5}));
  check_write_through(m, t.select(0, 1), "t");
  Tensor v = arange(0, 4, 1, kF32);
  EXPECT_LAYOUT(v.t(), ({4}), ({1}), 0);
  EXPECT_TRUE(v.t().shares_storage(v));
  Tensor s = scalar_tensor(2.0);
  EXPECT_EQ(s.t().dim(), 0);
  EXPECT_THAT(ERROR_MESSAGE(base234().t()), AllOf(NamesOp("t"), AnyOf(HasSubstr("[2, 3, 4]"), Mentions("rank", 3),
                                                                      ContainsRegex("3-?[Dd]"), HasSubstr("3 dim"))));
}

// ---- expand ------------------------------------------------------------------------------------

TEST(Expand, Basic) {
  Tensor c = arange(0, 3, 1, kF32).view({3, 1});
  Tensor e = c.expand({3, 4});
  EXPECT_LAYOUT(e, ({3, 4}), ({1, 0}), 0);
  EXPECT_FALSE(e.is_contiguous());
  EXPECT_TRUE(e.shares_storage(c));
  EXPECT_EQ(values(e), (D{0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2}));
  EXPECT_EQ(raw_values(e), values(e));

  EXPECT_LAYOUT(c.expand({2, 3, 4}), ({2, 3, 4}), ({0, 1, 0}), 0);
  EXPECT_LAYOUT(c.expand({-1, 4}), ({3, 4}), ({1, 0}), 0);
  EXPECT_LAYOUT(c.expand({3, 1}), ({3, 1}), ({1, 1}), 0);
  EXPECT_LAYOUT(c.expand({5, -1, -1}), ({5, 3, 1}), ({0, 1, 1}), 0);
  EXPECT_EQ(vec(c.expand({3, 0}).sizes()), (V{3, 0}));

  Tensor s = scalar_tensor(7.0);
  Tensor se = s.expand({2, 3});
  EXPECT_LAYOUT(se, ({2, 3}), ({0, 0}), 0);
  EXPECT_EQ(values(se), D(6, 7.0));

  // Writes to the base show through the expanded view.
  c.select(0, 1).fill_(9.0);
  EXPECT_EQ(values(e.select(0, 1)), D(4, 9.0));

  // expand of a narrowed tensor keeps the offset
  Tensor n = arange(0, 6, 1, kF32).narrow(0, 2, 1);
  EXPECT_LAYOUT(n.expand({4}), ({4}), ({0}), 2);
}

TEST(Expand, AsAndBroadcastTo) {
  Tensor row = arange(0, 4, 1, kF32);
  Tensor target = zeros({3, 4});
  Tensor e = row.expand_as(target);
  EXPECT_LAYOUT(e, ({3, 4}), ({0, 1}), 0);
  EXPECT_EQ(values(e.select(0, 2)), (D{0, 1, 2, 3}));
  Tensor b = row.broadcast_to({2, 3, 4});
  EXPECT_LAYOUT(b, ({2, 3, 4}), ({0, 0, 1}), 0);
  EXPECT_TRUE(b.shares_storage(row));
}

TEST(Expand, Errors) {
  Tensor c = arange(0, 3, 1, kF32).view({3, 1});
  EXPECT_THAT(ERROR_MESSAGE(c.expand({4, 4})), AllOf(HasSubstr("expand"), HasSubstr("[3, 1]"), HasSubstr("[4, 4]")));
  EXPECT_THAT(ERROR_MESSAGE(c.expand({4})), AllOf(HasSubstr("expand"), HasSubstr("[3, 1]"), HasSubstr("[4]")));
  EXPECT_THAT(ERROR_MESSAGE(c.expand({-1, 3, 4})), AllOf(HasSubstr("expand"), HasSubstr("-1")));
  EXPECT_THAT(ERROR_MESSAGE(c.expand({3, -2})), AllOf(HasSubstr("expand"), HasSubstr("-2")));
  EXPECT_THAT(ERROR_MESSAGE(c.expand_as(zeros({2, 2}))),
              AllOf(HasSubstr("expand"), HasSubstr("[3, 1]"), HasSubstr("[2, 2]")));
  EXPECT_THAT(ERROR_MESSAGE(arange(0, 3, 1, kF32).broadcast_to({3, 2})), AllOf(HasSubstr("[3]"), HasSubstr("[3, 2]")));
}

// ---- squeeze / unsqueeze -----------------------------------------------------------------------

TEST(Squeeze, AllDims) {
  Tensor a = arange(0, 6, 1, kF32).view({1, 3, 1, 2});
  EXPECT_LAYOUT(a, ({1, 3, 1, 2}), ({6, 2, 2, 1}), 0);
  Tensor s = a.squeeze();
  EXPECT_LAYOUT(s, ({3, 2}), ({2, 1}), 0);
  EXPECT_TRUE(s.shares_storage(a));
  check_write_through(a, s.select(1, 0), "squeeze()");
  Tensor ones11 = zeros({1, 1});
  Tensor s0 = ones11.squeeze();
  EXPECT_EQ(s0.dim(), 0);
  EXPECT_EQ(s0.numel(), 1);
  EXPECT_EQ(scalar_tensor(1.0).squeeze().dim(), 0);
  EXPECT_LAYOUT(zeros({2, 3}).squeeze(), ({2, 3}), ({3, 1}), 0);
  // squeeze of a narrowed tensor keeps the offset
  Tensor n = base234().narrow(1, 2, 1).squeeze();
  EXPECT_LAYOUT(n, ({2, 4}), ({12, 1}), 8);
}

TEST(Squeeze, OneDim) {
  Tensor a = arange(0, 6, 1, kF32).view({1, 3, 1, 2});
  EXPECT_LAYOUT(a.squeeze(0), ({3, 1, 2}), ({2, 2, 1}), 0);
  EXPECT_LAYOUT(a.squeeze(2), ({1, 3, 2}), ({6, 2, 1}), 0);
  EXPECT_LAYOUT(a.squeeze(-2), ({1, 3, 2}), ({6, 2, 1}), 0);
  // Non-1 dim: identical view (PyTorch semantics).
  Tensor same = a.squeeze(1);
  EXPECT_LAYOUT(same, ({1, 3, 1, 2}), ({6, 2, 2, 1}), 0);
  EXPECT_TRUE(same.shares_storage(a));
  check_write_through(a, a.squeeze(0).select(0, 1), "squeeze(0)");
  // 0-dim tensors accept dim 0 and -1.
  EXPECT_EQ(scalar_tensor(1.0).squeeze(0).dim(), 0);
  EXPECT_EQ(scalar_tensor(1.0).squeeze(-1).dim(), 0);
}

TEST(Squeeze, Errors) {
  Tensor a = arange(0, 6, 1, kF32).view({1, 3, 1, 2});
  EXPECT_THAT(ERROR_MESSAGE(a.squeeze(4)), AllOf(HasSubstr("squeeze"), Mentions("dim", 4)));
  EXPECT_THAT(ERROR_MESSAGE(a.squeeze(-5)), AllOf(HasSubstr("squeeze"), Mentions("dim", -5)));
  EXPECT_THAT(ERROR_MESSAGE(scalar_tensor(1.0).squeeze(1)), HasSubstr("squeeze"));
}

TEST(Unsqueeze, Basic) {
  Tensor a = arange(0, 6, 1, kF32).view({2, 3});
  EXPECT_LAYOUT(a.unsqueeze(0), ({1, 2, 3}), ({6, 3, 1}), 0);
  EXPECT_LAYOUT(a.unsqueeze(1), ({2, 1, 3}), ({3, 3, 1}), 0);
  EXPECT_LAYOUT(a.unsqueeze(2), ({2, 3, 1}), ({3, 1, 1}), 0);
  EXPECT_LAYOUT(a.unsqueeze(-1), ({2, 3, 1}), ({3, 1, 1}), 0);
  EXPECT_LAYOUT(a.unsqueeze(-3), ({1, 2, 3}), ({6, 3, 1}), 0);
  EXPECT_TRUE(a.unsqueeze(1).is_contiguous());
  EXPECT_EQ(values(a.unsqueeze(1)), iota(6));
  check_write_through(a, a.unsqueeze(1).select(2, 1), "unsqueeze");
  // Non-contiguous input: PyTorch's rule stride = size[dim] * stride[dim].
  Tensor t = a.t();  // [3, 2] strides [1, 3]
  EXPECT_LAYOUT(t.unsqueeze(0), ({1, 3, 2}), ({3, 1, 3}), 0);
  EXPECT_LAYOUT(t.unsqueeze(1), ({3, 1, 2}), ({1, 6, 3}), 0);
  EXPECT_LAYOUT(t.unsqueeze(2), ({3, 2, 1}), ({1, 3, 1}), 0);
  // 0-dim
  Tensor s = scalar_tensor(5.0).unsqueeze(0);
  EXPECT_LAYOUT(s, ({1}), ({1}), 0);
  EXPECT_EQ(s.at({0}), 5.0);
  EXPECT_LAYOUT(scalar_tensor(5.0).unsqueeze(-1), ({1}), ({1}), 0);
  // offset is kept
  EXPECT_EQ(a.select(0, 1).unsqueeze(0).offset(), 3);
}

TEST(Unsqueeze, Errors) {
  Tensor a = arange(0, 6, 1, kF32).view({2, 3});
  EXPECT_THAT(ERROR_MESSAGE(a.unsqueeze(3)), AllOf(HasSubstr("unsqueeze"), Mentions("dim", 3)));
  EXPECT_THAT(ERROR_MESSAGE(a.unsqueeze(-4)), AllOf(HasSubstr("unsqueeze"), Mentions("dim", -4)));
  EXPECT_THAT(ERROR_MESSAGE(scalar_tensor(1.0).unsqueeze(2)), HasSubstr("unsqueeze"));
}

// ---- flatten -----------------------------------------------------------------------------------

TEST(Flatten, ViewsWhenPossible) {
  Tensor a = base234();
  Tensor f = a.flatten();
  EXPECT_LAYOUT(f, ({24}), ({1}), 0);
  EXPECT_TRUE(f.shares_storage(a));
  check_write_through(a, f.slice(0, 3, 9), "flatten()");
  EXPECT_LAYOUT(a.flatten(1), ({2, 12}), ({12, 1}), 0);
  EXPECT_LAYOUT(a.flatten(0, 1), ({6, 4}), ({4, 1}), 0);
  EXPECT_LAYOUT(a.flatten(-2, -1), ({2, 12}), ({12, 1}), 0);
  EXPECT_LAYOUT(a.flatten(1, 1), ({2, 3, 4}), ({12, 4, 1}), 0);
  EXPECT_TRUE(a.flatten(1, 1).shares_storage(a));

  // narrowed in the last dim: dims 0 and 1 still merge into a view
  Tensor n = a.narrow(2, 0, 2);  // [2, 3, 2] strides [12, 4, 1]
  Tensor nf = n.flatten(0, 1);
  EXPECT_LAYOUT(nf, ({6, 2}), ({4, 1}), 0);
  EXPECT_TRUE(nf.shares_storage(a));
  check_write_through(a, nf, "flatten view of narrow");

  // a single dim of a transposed tensor stays a view
  Tensor t = a.transpose(0, 2);
  EXPECT_TRUE(t.flatten(2).shares_storage(a));
  EXPECT_LAYOUT(t.flatten(2), ({4, 3, 2}), ({1, 4, 12}), 0);

  Tensor s = scalar_tensor(4.0).flatten();
  EXPECT_LAYOUT(s, ({1}), ({1}), 0);
  EXPECT_EQ(s.at({0}), 4.0);
}

TEST(Flatten, CopiesWhenNeeded) {
  Tensor a = base234();
  Tensor n = a.narrow(2, 0, 2);
  Tensor c = n.flatten(1, 2);
  EXPECT_EQ(vec(c.sizes()), (V{2, 6}));
  EXPECT_FALSE(c.shares_storage(a));
  EXPECT_EQ(values(c), (D{0, 1, 4, 5, 8, 9, 12, 13, 16, 17, 20, 21}));
  Tensor t = a.transpose(0, 1).flatten();
  EXPECT_FALSE(t.shares_storage(a));
  EXPECT_EQ(values(t), (D{0, 1, 2, 3, 12, 13, 14, 15, 4, 5, 6, 7, 16, 17, 18, 19, 8, 9, 10, 11, 20, 21, 22, 23}));
}

TEST(Flatten, Errors) {
  Tensor a = base234();
  EXPECT_THAT(ERROR_MESSAGE(a.flatten(2, 1)), AllOf(HasSubstr("flatten"), Mentions("start", 2), Mentions("end", 1)));
  EXPECT_THAT(ERROR_MESSAGE(a.flatten(3)), AllOf(HasSubstr("flatten"), Mentions("dim", 3)));
  EXPECT_THAT(ERROR_MESSAGE(a.flatten(0, -4)), AllOf(HasSubstr("flatten"), Mentions("dim", -4)));
  // 0-dim tensors accept only dims 0 and -1 (PyTorch).
  EXPECT_THAT(ERROR_MESSAGE(scalar_tensor(1.0).flatten(3)), AllOf(HasSubstr("flatten"), Mentions("dim", 3)));
  EXPECT_THAT(ERROR_MESSAGE(scalar_tensor(1.0).flatten(0, 2)), AllOf(HasSubstr("flatten"), Mentions("dim", 2)));
}

// ---- as_strided --------------------------------------------------------------------------------

TEST(AsStrided, Basic) {
  Tensor x = arange(0, 12, 1, kF32);
  Tensor w = x.as_strided({3, 3}, {1, 1});  // sliding windows
  EXPECT_LAYOUT(w, ({3, 3}), ({1, 1}), 0);
  EXPECT_TRUE(w.shares_storage(x));
  EXPECT_EQ(values(w), (D{0, 1, 2, 1, 2, 3, 2, 3, 4}));
  Tensor m = x.as_strided({3, 4}, {1, 3}, 0);
  EXPECT_EQ(values(m), (D{0, 3, 6, 9, 1, 4, 7, 10, 2, 5, 8, 11}));
  check_write_through(x, m.select(0, 1), "as_strided");

  // Offset defaults to the tensor's own offset; an explicit offset is absolute in the storage.
  Tensor n = x.narrow(0, 2, 5);
  Tensor d = n.as_strided({2}, {1});
  EXPECT_LAYOUT(d, ({2}), ({1}), 2);
  EXPECT_EQ(values(d), (D{2, 3}));
  Tensor e = n.as_strided({2}, {1}, 0);
  EXPECT_LAYOUT(e, ({2}), ({1}), 0);
  EXPECT_EQ(values(e), (D{0, 1}));

  // Exactly reaching the end of the storage is fine.
  EXPECT_EQ(values(x.as_strided({3}, {1}, 9)), (D{9, 10, 11}));
  EXPECT_EQ(values(x.as_strided({2, 2}, {6, 5}, 0)), (D{0, 5, 6, 11}));
  // Zero-element views are fine anywhere inside.
  EXPECT_EQ(x.as_strided({0}, {1}, 5).numel(), 0);
  Tensor sc = x.as_strided({}, {}, 11);
  EXPECT_EQ(sc.item<float>(), 11.0f);
}

TEST(AsStrided, EmptyViewsAreContiguous) {
  // PyTorch: a tensor with no elements is contiguous whatever its strides.
  Tensor x = arange(0, 12, 1, kF32);
  EXPECT_TRUE(x.as_strided({0, 3}, {7, 5}).is_contiguous());
  EXPECT_TRUE(x.as_strided({3, 0}, {0, 4}).is_contiguous());
}

TEST(AsStrided, ExtentOverflowIsCaught) {
  // The last addressed byte is far outside the storage, but the naive bound computation
  // ((size - 1) * stride, then (last + 1) * itemsize) wraps around to a small number.
  Tensor x = arange(0, 12, 1, kF32);
  Tensor y = zeros({12}, {DType::f64, nullptr});
  EXPECT_STRATA_ERROR_ISOLATED(x.as_strided({3}, {int64_t{1} << 62}), "as_strided");
  EXPECT_STRATA_ERROR_ISOLATED(x.as_strided({2, 2}, {int64_t{1} << 62, int64_t{1} << 62}), "as_strided");
  EXPECT_STRATA_ERROR_ISOLATED(y.as_strided({2}, {int64_t{1} << 61}), "as_strided");
  EXPECT_STRATA_ERROR_ISOLATED(y.as_strided({1}, {1}, int64_t{1} << 61), "as_strided");
}

TEST(AsStrided, Errors) {
  Tensor x = arange(0, 12, 1, kF32);
  EXPECT_THAT(ERROR_MESSAGE(x.as_strided({4, 4}, {4, 1})),
              AllOf(HasSubstr("as_strided"), HasSubstr("[4, 4]"), HasSubstr("[4, 1]")));
  EXPECT_THAT(ERROR_MESSAGE(x.as_strided({3}, {1}, 10)),
              AllOf(HasSubstr("as_strided"), HasSubstr("[3]"), HasSubstr("10")));
  EXPECT_THAT(ERROR_MESSAGE(x.as_strided({1}, {1}, 12)), HasSubstr("as_strided"));
  EXPECT_THAT(ERROR_MESSAGE(x.as_strided({2}, {1}, -1)), AllOf(HasSubstr("as_strided"), HasSubstr("-1")));
  EXPECT_THAT(ERROR_MESSAGE(x.as_strided({2, 2}, {1})),
              AllOf(HasSubstr("as_strided"), HasSubstr("[2, 2]"), HasSubstr("[1]")));
  EXPECT_THAT(ERROR_MESSAGE(x.as_strided({-2}, {1})), AllOf(HasSubstr("as_strided"), HasSubstr("-2")));
  EXPECT_THAT(ERROR_MESSAGE(x.as_strided({2}, {-1}, 5)), AllOf(HasSubstr("as_strided"), HasSubstr("-1")));
  // A narrowed view: bounds are those of the storage, measured from the explicit offset.
  Tensor n = x.narrow(0, 8, 4);
  EXPECT_THAT(ERROR_MESSAGE(n.as_strided({5}, {1})), HasSubstr("as_strided"));
  // Large sizes must not overflow the bound computation into a false "fits".
  EXPECT_THAT(ERROR_MESSAGE(x.as_strided({int64_t{1} << 62, 4}, {4, 1})), HasSubstr("as_strided"));
  // f64 elements are twice as large: 12 f32 elements hold only 6 f64 ones.
  Tensor y = zeros({6}, {DType::f64, nullptr});
  EXPECT_THAT(ERROR_MESSAGE(y.as_strided({7}, {1})), AllOf(HasSubstr("as_strided"), HasSubstr("[7]")));
}

// ---- at / size / stride / data ------------------------------------------------------------------

TEST(Accessors, SizeStrideNegativeDims) {
  Tensor a = base234();
  EXPECT_EQ(a.size(0), 2);
  EXPECT_EQ(a.size(-1), 4);
  EXPECT_EQ(a.size(-3), 2);
  EXPECT_EQ(a.stride(-1), 1);
  EXPECT_EQ(a.stride(0), 12);
  EXPECT_EQ(a.dim(), 3);
  EXPECT_EQ(a.numel(), 24);
  EXPECT_EQ(a.itemsize(), 4u);
  EXPECT_EQ(a.nbytes(), 96u);
  EXPECT_THAT(ERROR_MESSAGE(a.size(3)), AllOf(HasSubstr("size"), Mentions("dim", 3)));
  EXPECT_THAT(ERROR_MESSAGE(a.size(-4)), AllOf(HasSubstr("size"), Mentions("dim", -4)));
  EXPECT_THAT(ERROR_MESSAGE(a.stride(3)), AllOf(HasSubstr("stride"), Mentions("dim", 3)));
  // The message for a 0-dim tensor must not state an empty "expected" range such as [0, -1].
  EXPECT_THAT(ERROR_MESSAGE(scalar_tensor(1.0).size(0)),
              AllOf(HasSubstr("size"), Mentions("dim", 0), ::testing::Not(HasSubstr("[0, -1]"))));
}

TEST(Accessors, At) {
  Tensor a = base234();
  EXPECT_EQ(a.at({1, 2, 3}), 23.0);
  EXPECT_EQ(a.at({-1, -1, -1}), 23.0);
  EXPECT_EQ(a.at({-2, 0, -4}), 0.0);
  EXPECT_EQ(scalar_tensor(2.5).at({}), 2.5);
  EXPECT_THAT(ERROR_MESSAGE(a.at({1, 2})), AllOf(NamesOp("at"), HasSubstr("[1, 2]"), HasSubstr("3")));
  EXPECT_THAT(ERROR_MESSAGE(a.at({1, 2, 3, 0})), AllOf(NamesOp("at"), HasSubstr("[1, 2, 3, 0]")));
  // Out-of-range entries: the message names the op, the bad index, its dim and the tensor.
  EXPECT_THAT(ERROR_MESSAGE(a.at({2, 0, 0})),
              AllOf(NamesOp("at"), Mentions("index", 2), Mentions("dim", 0), HasSubstr("[2, 3, 4]")));
  EXPECT_THAT(ERROR_MESSAGE(a.at({0, -4, 0})),
              AllOf(NamesOp("at"), Mentions("index", -4), Mentions("dim", 1), HasSubstr("[2, 3, 4]")));
  EXPECT_THAT(ERROR_MESSAGE(a.at({0, 0, 4})),
              AllOf(NamesOp("at"), Mentions("index", 4), Mentions("dim", 2), HasSubstr("[2, 3, 4]")));
  EXPECT_THAT(ERROR_MESSAGE(zeros({0}).at({0})), NamesOp("at"));
}

TEST(Accessors, DataPointers) {
  Tensor a = base234();
  float* p = a.data<float>();
  EXPECT_EQ(static_cast<void*>(p), a.data_ptr());
  EXPECT_EQ(p[23], 23.0f);
  Tensor s = a.select(1, 2);
  EXPECT_EQ(s.data<float>(), p + 8);
  EXPECT_EQ(s.data_ptr(), static_cast<void*>(p + 8));
  EXPECT_THAT(ERROR_MESSAGE(a.data<double>()), AllOf(HasSubstr("data"), HasSubstr("f64"), HasSubstr("f32")));
  EXPECT_THAT(ERROR_MESSAGE(a.data<int32_t>()), AllOf(HasSubstr("i32"), HasSubstr("f32")));
  Tensor b = zeros({2}, {DType::boolean, nullptr});
  EXPECT_NE(b.data<bool>(), nullptr);
  EXPECT_THAT(ERROR_MESSAGE(b.data<uint8_t>()), AllOf(HasSubstr("u8"), HasSubstr("bool")));
}

TEST(Accessors, ViewsOfAllDTypesReadCorrectly) {
  for (DType dt : {DType::f32, DType::f64, DType::bf16, DType::i32, DType::i64, DType::u8}) {
    SCOPED_TRACE(dtype_name(dt));
    Tensor a = arange(0, 24, 1, {dt, nullptr}).view({2, 3, 4});
    Tensor v = a.permute({2, 0, 1}).slice(0, 1, std::nullopt, 2);  // k in {1, 3}
    EXPECT_LAYOUT(v, ({2, 2, 3}), ({2, 12, 4}), 1);
    D expected;
    for (int k : {1, 3})
      for (int i = 0; i < 2; ++i)
        for (int j = 0; j < 3; ++j) expected.push_back(12 * i + 4 * j + k);
    EXPECT_EQ(values(v), expected);
    EXPECT_EQ(raw_values(v), expected);
    check_write_through(a, v, "permute+slice");
  }
}

}  // namespace
