#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/error.h"
#include "memory/policy.h"
#include "memory_test_util.h"

namespace strata::memory {
namespace {
using test::fill_pattern;
using test::first_mismatch;

class LruPolicyTest : public ::testing::Test {
 protected:
  static constexpr std::size_t kObj = 64 * 1024;
  void SetUp() override {
    dm_ = test::make_manager(4 * kObj, 64 * kObj);
    policy_ = std::make_unique<LruPolicy>(*dm_);
  }
  Object* fast_object(uint32_t seed) {
    Object* o = policy_->alloc_fast(kObj, true);
    EXPECT_NE(o, nullptr);
    fill_pattern(dm_->primary(o)->data(), kObj, seed);
    policy_->write_use(o);
    return o;
  }
  bool holds(Object* o, uint32_t seed) { return first_mismatch(dm_->primary(o)->data(), kObj, seed) == kObj; }
  std::unique_ptr<DataManager> dm_;
  std::unique_ptr<LruPolicy> policy_;
};

TEST_F(LruPolicyTest, NewFastObjectsAreFastOnly) {
  Object* o = fast_object(1);
  EXPECT_TRUE(policy_->in_fast(o));
  EXPECT_EQ(dm_->getlinked(dm_->primary(o), dm_->slow()), nullptr);  // local allocation
  EXPECT_EQ(dm_->slow().used(), 0u);
  policy_->unsafe_free(o);
}

TEST_F(LruPolicyTest, EvictCopiesAFastOnlyObjectAndKeepsItsBytes) {
  Object* o = fast_object(2);
  EXPECT_TRUE(policy_->evict(o));
  EXPECT_FALSE(policy_->in_fast(o));
  EXPECT_TRUE(holds(o, 2));
  EXPECT_EQ(dm_->fast().used(), 0u);
  EXPECT_EQ(dm_->stats().snapshot().moved_to_slow.bytes, kObj);
  policy_->unsafe_free(o);
  EXPECT_EQ(dm_->slow().used(), 0u);
}

TEST_F(LruPolicyTest, PrefetchKeepsTheSlowSiblingAndCleanEvictionElidesTheCopy) {
  Object* o = fast_object(3);
  ASSERT_TRUE(policy_->evict(o));
  const auto to_slow = dm_->stats().snapshot().moved_to_slow.bytes;
  ASSERT_TRUE(policy_->prefetch(o));
  EXPECT_TRUE(policy_->in_fast(o));
  EXPECT_TRUE(holds(o, 3));
  Region* slow = dm_->getlinked(dm_->primary(o), dm_->slow());
  ASSERT_NE(slow, nullptr);  // the slow copy stays
  policy_->read_use(o);
  ASSERT_TRUE(policy_->evict(o));  // clean: no copy
  EXPECT_EQ(dm_->stats().snapshot().moved_to_slow.bytes, to_slow);
  EXPECT_EQ(dm_->stats().snapshot().copies_elided.count, 1u);
  EXPECT_EQ(dm_->stats().snapshot().copies_elided.bytes, kObj);
  EXPECT_EQ(dm_->primary(o), slow);
  EXPECT_TRUE(holds(o, 3));
  policy_->unsafe_free(o);
}

TEST_F(LruPolicyTest, DirtyEvictionWritesBack) {
  Object* o = fast_object(4);
  ASSERT_TRUE(policy_->evict(o));
  ASSERT_TRUE(policy_->prefetch(o));
  fill_pattern(dm_->primary(o)->data(), kObj, 5);  // modify the fast copy
  policy_->write_use(o);
  const auto to_slow = dm_->stats().snapshot().moved_to_slow.bytes;
  ASSERT_TRUE(policy_->evict(o));
  EXPECT_EQ(dm_->stats().snapshot().moved_to_slow.bytes, to_slow + kObj);
  EXPECT_TRUE(holds(o, 5));
  policy_->unsafe_free(o);
}

TEST_F(LruPolicyTest, FreedFastObjectsAreNeverWrittenBack) {
  Object* o = fast_object(6);
  ASSERT_TRUE(policy_->evict(o));
  ASSERT_TRUE(policy_->prefetch(o));
  fill_pattern(dm_->primary(o)->data(), kObj, 7);
  policy_->write_use(o);
  const auto to_slow = dm_->stats().snapshot().moved_to_slow.bytes;
  policy_->unsafe_free(o);
  EXPECT_EQ(dm_->stats().snapshot().moved_to_slow.bytes, to_slow);
  EXPECT_EQ(dm_->stats().snapshot().writebacks_avoided.count, 1u);
  EXPECT_EQ(dm_->stats().snapshot().writebacks_avoided.bytes, kObj);
  EXPECT_EQ(dm_->stats().snapshot().fast.current_bytes, 0u);
  EXPECT_EQ(dm_->fast().used(), 0u);
  EXPECT_EQ(dm_->slow().used(), 0u);
}

TEST_F(LruPolicyTest, ForcedAllocationEvictsLeastRecentlyUsedAndStaysWithinBudget) {
  std::vector<Object*> objs;
  for (uint32_t i = 0; i < 4; ++i) objs.push_back(fast_object(10 + i));
  EXPECT_EQ(dm_->fast().used(), dm_->fast().capacity());
  policy_->read_use(objs[0]);                            // objs[1] is now the least recently used
  EXPECT_EQ(policy_->alloc_fast(kObj, false), nullptr);  // unforced: no room, no eviction
  Object* extra = policy_->alloc_fast(kObj, true);
  ASSERT_NE(extra, nullptr);
  EXPECT_FALSE(policy_->in_fast(objs[1]));
  EXPECT_TRUE(policy_->in_fast(objs[0]));
  EXPECT_LE(dm_->fast().peak(), dm_->fast().capacity());
  for (uint32_t i = 0; i < 4; ++i) EXPECT_TRUE(holds(objs[i], 10 + i)) << i;
  for (Object* o : objs) policy_->unsafe_free(o);
  policy_->unsafe_free(extra);
}

TEST_F(LruPolicyTest, SoftevictMakesAnObjectTheNextVictim) {
  std::vector<Object*> objs;
  for (uint32_t i = 0; i < 4; ++i) objs.push_back(fast_object(20 + i));
  policy_->softevict(objs[3]);  // most recent, but flagged
  EXPECT_EQ(policy_->lru_order().front(), objs[3]);
  EXPECT_TRUE(policy_->in_fast(objs[3]));  // softevict moves nothing by itself
  Object* extra = policy_->alloc_fast(kObj, true);
  ASSERT_NE(extra, nullptr);
  EXPECT_FALSE(policy_->in_fast(objs[3]));
  for (uint32_t i = 0; i < 3; ++i) EXPECT_TRUE(policy_->in_fast(objs[i]));
  for (Object* o : objs) policy_->unsafe_free(o);
  policy_->unsafe_free(extra);
}

TEST_F(LruPolicyTest, PinnedObjectsAreNeverMoved) {
  std::vector<Object*> objs;
  for (uint32_t i = 0; i < 4; ++i) objs.push_back(fast_object(30 + i));
  objs[0]->pin_write();
  objs[1]->pin_read();
  EXPECT_FALSE(policy_->evict(objs[0]));
  EXPECT_FALSE(policy_->evict(objs[1]));
  // Forced allocation must pass over the pinned least-recently-used objects.
  Object* extra = policy_->alloc_fast(kObj, true);
  ASSERT_NE(extra, nullptr);
  EXPECT_TRUE(policy_->in_fast(objs[0]));
  EXPECT_TRUE(policy_->in_fast(objs[1]));
  objs[0]->unpin_write();
  objs[1]->unpin_read();
  EXPECT_TRUE(policy_->evict(objs[0]));
  for (uint32_t i = 0; i < 4; ++i) EXPECT_TRUE(holds(objs[i], 30 + i)) << i;
  for (Object* o : objs) policy_->unsafe_free(o);
  policy_->unsafe_free(extra);
}

TEST_F(LruPolicyTest, AllPinnedMeansForcedAllocationFailsCleanly) {
  std::vector<Object*> objs;
  for (uint32_t i = 0; i < 4; ++i) objs.push_back(fast_object(40 + i));
  for (Object* o : objs) o->pin_read();
  EXPECT_EQ(policy_->alloc_fast(kObj, true), nullptr);
  EXPECT_LE(dm_->fast().peak(), dm_->fast().capacity());
  for (Object* o : objs) o->unpin_read();
  for (Object* o : objs) policy_->unsafe_free(o);
}

TEST_F(LruPolicyTest, ObjectsLargerThanTheFastTierGoSlow) {
  EXPECT_EQ(policy_->alloc_fast(5 * kObj, true), nullptr);
  Object* big = policy_->alloc_slow(5 * kObj);
  EXPECT_FALSE(policy_->in_fast(big));
  EXPECT_FALSE(policy_->prefetch(big, true));  // can never fit
  policy_->unsafe_free(big);
}

TEST_F(LruPolicyTest, SlowTierFullIsAClearError) {
  std::vector<Object*> objs;
  for (int i = 0; i < 64; ++i) objs.push_back(policy_->alloc_slow(kObj));
  try {
    policy_->alloc_slow(kObj);
    FAIL() << "expected strata::Error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("slow tier"));
  }
  Object* f = fast_object(50);
  try {
    policy_->evict(f);
    FAIL() << "expected strata::Error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("is full"));
  }
  EXPECT_TRUE(policy_->in_fast(f));  // a failed eviction leaves the object where it was
  EXPECT_TRUE(holds(f, 50));
  EXPECT_EQ(f->access(), Object::Access::NotBusy);
  policy_->unsafe_free(f);
  for (Object* o : objs) policy_->unsafe_free(o);
}

}  // namespace
}  // namespace strata::memory
