// PrefetchSource (Note [Prefetching batches]) under stress: batches arrive complete and in order
// while the producer races ahead with random delays, across resets at random points, with an
// exception in the wrapped source, and with destruction while the producer is busy. Runs under
// ThreadSanitizer in CI, so the sizes are small.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <random>
#include <thread>

#include "core/error.h"
#include "embeddings/prefetch_source.h"

using namespace strata;
using namespace strata::emb;

namespace {

/// Batch j of an epoch: dense[0] == j, targets == j + 0.5, table 0's index j (one bag per sample);
/// sleeps a random few microseconds; throws at batch `fail_at` (when >= 0).
class SlowCounter final : public IndexSource {
 public:
  SlowCounter(int64_t batches, int64_t fail_at, uint32_t seed)
      : IndexSource({1000}, 1, 2, batches), fail_at_(fail_at), rng_(seed) {}
  bool next(Batch& b) override {
    if (j_ >= num_batches_) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(rng_() % 50));
    if (j_ == fail_at_) throw Error("batch " + std::to_string(j_) + " is broken");
    b.reshape(2, 1, 1);
    b.dense.assign(2, static_cast<float>(j_));
    b.targets.assign(2, static_cast<float>(j_) + 0.5f);
    b.tables[0].indices.assign(2, j_);
    b.tables[0].offsets = {0, 1, 2};
    ++j_;
    return true;
  }
  void reset() override { j_ = 0; }
  std::string describe() const override { return "counter"; }

 private:
  int64_t j_ = 0;
  int64_t fail_at_;
  std::mt19937 rng_;
};

void expect_batch(const Batch& b, int64_t j) {
  ASSERT_EQ(b.batch, 2);
  EXPECT_EQ(b.dense[1], static_cast<float>(j));
  EXPECT_EQ(b.targets[0], static_cast<float>(j) + 0.5f);
  EXPECT_EQ(b.tables[0].indices[1], j);
  EXPECT_EQ(b.tables[0].offsets[2], 2);
}

}  // namespace

TEST(PrefetchStress, InOrderAcrossResetsAndSlowConsumers) {
  std::mt19937 rng(7);
  PrefetchSource p(std::make_unique<SlowCounter>(40, -1, 1), 2);
  EXPECT_EQ(p.num_batches(), 40);
  EXPECT_EQ(p.describe(), "counter, prefetched");
  Batch b;
  for (int round = 0; round < 30; ++round) {
    const int64_t stop = rng() % 2 ? 40 : static_cast<int64_t>(rng() % 40);
    for (int64_t j = 0; j < stop; ++j) {
      ASSERT_TRUE(p.next(b));
      expect_batch(b, j);
      if (rng() % 4 == 0) std::this_thread::sleep_for(std::chrono::microseconds(rng() % 60));
    }
    if (stop == 40) EXPECT_FALSE(p.next(b));
    p.reset();
  }
}

TEST(PrefetchStress, ErrorsArriveAfterTheBatchesBeforeThem) {
  for (int depth : {1, 2, 3}) {
    PrefetchSource p(std::make_unique<SlowCounter>(20, 7, 2), depth);
    Batch b;
    for (int64_t j = 0; j < 7; ++j) {
      ASSERT_TRUE(p.next(b));
      expect_batch(b, j);
    }
    for (int again = 0; again < 2; ++again) {
      try {
        p.next(b);
        ADD_FAILURE() << "no error";
      } catch (const Error& e) {
        EXPECT_THAT(e.what(), ::testing::HasSubstr("batch 7 is broken"));
      }
    }
    p.reset();  // starts over: the first batches come again, then the error again
    ASSERT_TRUE(p.next(b));
    expect_batch(b, 0);
  }
}

TEST(PrefetchStress, DestructionWhileBusyAndBadArguments) {
  for (int i = 0; i < 50; ++i) {
    PrefetchSource p(std::make_unique<SlowCounter>(100, -1, static_cast<uint32_t>(i)), 2);
    Batch b;
    for (int j = 0; j < i % 5; ++j) ASSERT_TRUE(p.next(b));
  }
  EXPECT_THROW(PrefetchSource(nullptr, 2), Error);
  EXPECT_THROW(PrefetchSource(std::make_unique<SlowCounter>(1, -1, 1), 0), Error);
}
