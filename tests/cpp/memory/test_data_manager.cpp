#include <gtest/gtest.h>

#include "core/error.h"
#include "memory_test_util.h"

namespace strata::memory {
namespace {
using test::fill_pattern;
using test::first_mismatch;

TEST(DataManager, ObjectsRegionsAndPrimary) {
  auto dm = test::make_manager(1 << 20, 4 << 20);
  Region* r = dm->allocate(dm->fast(), 1000);
  ASSERT_NE(r, nullptr);
  Object* o = dm->new_object(r);
  EXPECT_EQ(dm->primary(o), r);
  EXPECT_EQ(dm->parent(r), o);
  EXPECT_EQ(dm->size_of(r), 1000u);
  EXPECT_TRUE(dm->in(r, dm->fast()));
  EXPECT_FALSE(dm->in(r, dm->slow()));
  EXPECT_EQ(dm->live_objects(), 1u);
  dm->delete_object(o);
  EXPECT_EQ(dm->live_objects(), 0u);
  EXPECT_EQ(dm->fast().used(), 0u);
}

TEST(DataManager, LinkCopySetUnlinkMovesBytesExactly) {
  auto dm = test::make_manager(1 << 20, 4 << 20);
  const std::size_t n = 123457;
  Region* fast = dm->allocate(dm->fast(), n);
  Object* o = dm->new_object(fast);
  fill_pattern(fast->data(), n, 11);
  Region* slow = dm->allocate(dm->slow(), n, o);
  dm->copyto(slow, fast);
  EXPECT_EQ(first_mismatch(slow->data(), n, 11), n);
  dm->link(fast, slow);
  EXPECT_EQ(dm->getlinked(fast, dm->slow()), slow);
  EXPECT_EQ(dm->getlinked(slow, dm->fast()), fast);
  EXPECT_EQ(dm->getlinked(fast, dm->fast()), nullptr);
  dm->set(o, slow);
  EXPECT_EQ(dm->primary(o), slow);
  dm->unlink(fast, slow);
  EXPECT_EQ(dm->getlinked(slow, dm->fast()), nullptr);
  dm->free(fast);
  EXPECT_EQ(dm->fast().used(), 0u);
  EXPECT_EQ(first_mismatch(dm->primary(o)->data(), n, 11), n);
  EXPECT_EQ(dm->stats().snapshot().moved_to_slow.bytes, n);
  dm->delete_object(o);
  EXPECT_EQ(dm->slow().used(), 0u);
}

TEST(DataManager, DirtyBits) {
  auto dm = test::make_manager(1 << 20, 1 << 20);
  Region* r = dm->allocate(dm->fast(), 64);
  EXPECT_FALSE(dm->isdirty(r));
  dm->markdirty(r);
  EXPECT_TRUE(dm->isdirty(r));
  dm->markclean(r);
  EXPECT_FALSE(dm->isdirty(r));
  dm->free(r);
}

TEST(DataManager, SetRejectsAForeignRegion) {
  auto dm = test::make_manager(1 << 20, 1 << 20);
  Object* a = dm->new_object(dm->allocate(dm->fast(), 64));
  Object* b = dm->new_object(dm->allocate(dm->fast(), 64));
  EXPECT_THROW(dm->set(a, dm->primary(b)), Error);
  dm->delete_object(a);
  dm->delete_object(b);
}

TEST(DataManager, EvictfromThroughTheManager) {
  auto dm = test::make_manager(64 * 4, 1 << 20);
  std::vector<Object*> objs;
  for (int i = 0; i < 4; ++i) objs.push_back(dm->new_object(dm->allocate(dm->fast(), 64)));
  int called = 0;
  EXPECT_TRUE(dm->evictfrom(
      [&](Region* r) {
        ++called;
        Object* o = dm->parent(r);
        Region* s = dm->allocate(dm->slow(), 64, o);
        dm->copyto(s, r);
        dm->set(o, s);
        dm->free(r);
        return true;
      },
      dm->fast(), dm->primary(objs[1]), 128));
  EXPECT_EQ(called, 2);
  EXPECT_EQ(dm->fast().used(), 128u);
  for (Object* o : objs) dm->delete_object(o);
}

}  // namespace
}  // namespace strata::memory
