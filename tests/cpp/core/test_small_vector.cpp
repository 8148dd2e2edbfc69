// SmallVector: inline storage up to N, heap beyond; copies and moves in both states.

#include "core/detail/small_vector.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <utility>
#include <vector>

namespace {

using SV = strata::SmallVector<int64_t, 4>;

std::vector<int64_t> items(const SV& v) { return {v.begin(), v.end()}; }

SV make(int64_t n) {
  SV v;
  for (int64_t i = 0; i < n; ++i) v.push_back(i * 10);
  return v;
}

TEST(SmallVector, DefaultIsEmpty) {
  SV v;
  EXPECT_TRUE(v.empty());
  EXPECT_EQ(v.size(), 0u);
  EXPECT_EQ(v.begin(), v.end());
}

TEST(SmallVector, ConstructFromCountAndValue) {
  SV v(std::size_t{3}, int64_t{7});
  EXPECT_EQ(items(v), (std::vector<int64_t>{7, 7, 7}));
  SV w(std::size_t{9}, int64_t{-1});  // beyond inline capacity
  EXPECT_EQ(items(w), std::vector<int64_t>(9, -1));
  SV z(std::size_t{2});
  EXPECT_EQ(items(z), (std::vector<int64_t>{0, 0}));
}

TEST(SmallVector, InitializerListAndIterators) {
  SV v{1, 2, 3, 4, 5, 6};
  EXPECT_EQ(items(v), (std::vector<int64_t>{1, 2, 3, 4, 5, 6}));
  std::vector<int64_t> src{9, 8, 7};
  SV w(src.begin(), src.end());
  EXPECT_EQ(items(w), src);
  EXPECT_EQ(w.back(), 7);
  EXPECT_EQ(w[1], 8);
}

TEST(SmallVector, PushBackGrowsPastInlineCapacity) {
  SV v = make(50);
  ASSERT_EQ(v.size(), 50u);
  for (int64_t i = 0; i < 50; ++i) EXPECT_EQ(v[static_cast<std::size_t>(i)], i * 10);
  v.pop_back();
  EXPECT_EQ(v.size(), 49u);
  EXPECT_EQ(v.back(), 480);
}

TEST(SmallVector, CopyInlineAndHeap) {
  for (int64_t n : {0, 3, 4, 5, 20}) {
    SV a = make(n);
    SV b(a);
    EXPECT_EQ(items(a), items(b));
    EXPECT_TRUE(a == b);
    if (n > 0) {
      b[0] = 12345;
      EXPECT_EQ(a[0], 0) << "copy must not alias the original (n=" << n << ")";
    }
    SV c = make(2);
    c = a;
    EXPECT_EQ(items(c), items(a));
    SV d = make(30);
    d = a;  // heap -> smaller
    EXPECT_EQ(items(d), items(a));
  }
}

TEST(SmallVector, SelfAssignment) {
  SV a = make(10);
  SV& ref = a;
  a = ref;
  EXPECT_EQ(items(a), items(make(10)));
  SV b = make(2);
  SV& ref_b = b;
  b = std::move(ref_b);
  EXPECT_EQ(items(b), items(make(2)));
}

TEST(SmallVector, MoveInlineAndHeap) {
  for (int64_t n : {0, 2, 4, 5, 33}) {
    SV a = make(n);
    SV b(std::move(a));
    EXPECT_EQ(items(b), items(make(n)));
    EXPECT_EQ(a.size(), 0u);  // NOLINT(bugprone-use-after-move): documented moved-from state
    a.push_back(1);           // moved-from vector stays usable
    EXPECT_EQ(items(a), (std::vector<int64_t>{1}));

    SV c = make(7);
    c = std::move(b);
    EXPECT_EQ(items(c), items(make(n)));
    SV d = make(1);
    d = std::move(c);
    EXPECT_EQ(items(d), items(make(n)));
  }
}

TEST(SmallVector, ResizeAssignClear) {
  SV v{1, 2};
  v.resize(6, 9);
  EXPECT_EQ(items(v), (std::vector<int64_t>{1, 2, 9, 9, 9, 9}));
  v.resize(1);
  EXPECT_EQ(items(v), (std::vector<int64_t>{1}));
  v.assign(std::size_t{5}, int64_t{4});
  EXPECT_EQ(items(v), (std::vector<int64_t>(5, 4)));
  v.clear();
  EXPECT_TRUE(v.empty());
  std::vector<int64_t> src(12, 3);
  v.assign(src.begin(), src.end());
  EXPECT_EQ(items(v), src);
}

TEST(SmallVector, InsertAndErase) {
  SV v{1, 2, 3, 4};  // full inline: insert must grow
  v.insert(0, 0);
  EXPECT_EQ(items(v), (std::vector<int64_t>{0, 1, 2, 3, 4}));
  v.insert(5, 5);  // at end
  EXPECT_EQ(items(v), (std::vector<int64_t>{0, 1, 2, 3, 4, 5}));
  v.insert(3, 99);
  EXPECT_EQ(items(v), (std::vector<int64_t>{0, 1, 2, 99, 3, 4, 5}));
  v.erase(3);
  EXPECT_EQ(items(v), (std::vector<int64_t>{0, 1, 2, 3, 4, 5}));
  v.erase(0);
  v.erase(v.size() - 1);
  EXPECT_EQ(items(v), (std::vector<int64_t>{1, 2, 3, 4}));
  SV e;
  e.insert(0, 42);  // into an empty vector
  EXPECT_EQ(items(e), (std::vector<int64_t>{42}));
}

TEST(SmallVector, Equality) {
  EXPECT_TRUE(SV({1, 2, 3}) == SV({1, 2, 3}));
  EXPECT_FALSE(SV({1, 2, 3}) == SV({1, 2}));
  EXPECT_FALSE(SV({1, 2, 3}) == SV({1, 2, 4}));
  EXPECT_TRUE(make(10) == make(10));  // heap vs heap
  EXPECT_TRUE(SV() == SV());
}

}  // namespace
