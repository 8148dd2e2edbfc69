// Byte counters per collective, and non-blocking handles (waited on from several threads).
#include <gtest/gtest.h>

#include <thread>

#include "core/factories.h"
#include "tests/cpp/bitwise.h"
#include "tests/cpp/dist/dist_test_util.h"
#include "tests/cpp/error_text.h"

namespace strata::dist {
namespace {

using testing::comm;
using testing::seeded;
using testing_util::same_bits;

// Header bytes one call sends (Note [Collective headers]): 16 + 2N int64 to each other rank.
int64_t header_bytes(int n) { return (n - 1) * (16 + 2 * n) * 8; }

TEST(DistStats, AlltoallvCountsRowsToAndFromOtherRanks) {
  const int me = comm().rank(), n = comm().size();
  std::vector<int64_t> send, recv;
  int64_t out_rows = 0, in_rows = 0;
  for (int j = 0; j < n; ++j) {
    send.push_back(j + 1), recv.push_back(me + 1);
    if (j != me) out_rows += j + 1, in_rows += me + 1;
  }
  const Tensor in = zeros({n * (n + 1) / 2, 3}, {DType::f64});
  comm().reset_stats();
  comm().alltoallv(in, send, recv);
  const OpStats s = comm().stats()[Op::alltoallv];
  EXPECT_EQ(s.calls, 1);
  EXPECT_EQ(s.bytes_sent, out_rows * 3 * 8);
  EXPECT_EQ(s.bytes_received, in_rows * 3 * 8);
  EXPECT_EQ(s.header_bytes_sent, header_bytes(n));
  EXPECT_GE(s.wait_seconds, 0.0);
  EXPECT_EQ(comm().stats()[Op::allreduce].calls, 0);
}

TEST(DistStats, AllreduceSendsTheRingVolume) {
  // P elements divisible by N: reduce-scatter (N - 1) chunks of P / N out, then the allgather the
  // same: 2 (N - 1) / N * P * s, the ring allreduce's volume (REFERENCE.md section 5).
  const int n = comm().size();
  const int64_t p = 1024;
  comm().reset_stats();
  comm().allreduce(zeros({p}));
  comm().allreduce(zeros({p}));
  const OpStats s = comm().stats()[Op::allreduce];
  EXPECT_EQ(s.calls, 2);
  EXPECT_EQ(s.bytes_sent, 2 * (2 * (n - 1) * (p / n) * 4));
  EXPECT_EQ(s.bytes_received, s.bytes_sent);
  EXPECT_EQ(comm().stats().total().calls, 2);
}

TEST(DistStats, AllgathervAndReduceScatterCount) {
  const int me = comm().rank(), n = comm().size();
  comm().reset_stats();
  comm().allgatherv(zeros({me + 1, 2}, {DType::i64}));
  int64_t others = 0;
  for (int r = 0; r < n; ++r) others += r == me ? 0 : r + 1;
  EXPECT_EQ(comm().stats()[Op::allgatherv].bytes_sent, (n - 1) * (me + 1) * 2 * 8);
  EXPECT_EQ(comm().stats()[Op::allgatherv].bytes_received, others * 2 * 8);
  // reduce_scatter of 4N rows of 1 f32: 4 rows to each other rank.
  comm().reduce_scatter(zeros({4 * n, 1}));
  EXPECT_EQ(comm().stats()[Op::reduce_scatter].bytes_sent, (n - 1) * 4 * 4);
  comm().reset_stats();
  EXPECT_EQ(comm().stats().total().calls, 0);
}

TEST(DistWork, NonBlockingCallsRunInOrderAndMatchBlockingOnes) {
  const int me = comm().rank(), n = comm().size();
  std::vector<Tensor> inputs;
  for (int r = 0; r < n; ++r) inputs.push_back(seeded(700 + r, {257}, DType::f32));
  Work a = comm().iallreduce(inputs[me]);
  Work b = comm().iallgatherv(inputs[me].view({257, 1}));
  Work c = comm().ireduce_scatter(inputs[me].view({257, 1}));
  // Compute while they run, then wait out of order.
  const Tensor expected = tree_sum(inputs);
  EXPECT_EQ(c.wait().size(0), 257 / n + (me < 257 % n ? 1 : 0));
  EXPECT_EQ(b.wait().size(0), 257 * n);
  EXPECT_TRUE(same_bits(a.wait(), expected));
  EXPECT_TRUE(a.ready());
  EXPECT_TRUE(same_bits(a.wait(), expected));  // waiting again returns the same result
}

TEST(DistWork, OneHandleWaitedOnFromManyThreads) {
  const int me = comm().rank(), n = comm().size();
  std::vector<Tensor> inputs;
  for (int r = 0; r < n; ++r) inputs.push_back(seeded(800 + r, {4096}, DType::f64));
  for (int round = 0; round < 5; ++round) {
    const Work w = comm().iallreduce(inputs[me]);
    std::vector<Tensor> got(4);
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) threads.emplace_back([&, t] { got[t] = w.wait(); });
    const Tensor main_got = w.wait();
    for (auto& t : threads) t.join();
    for (const Tensor& g : got) EXPECT_TRUE(g.is_same(main_got));
    EXPECT_TRUE(same_bits(main_got, tree_sum(inputs)));
  }
  // Collectives issued from two threads still run one at a time, in one order per thread pair:
  // each thread waits for its own before the other issues (the order must match across ranks).
  Work first;
  std::thread issuer([&] { first = comm().iallreduce(inputs[me]); });
  issuer.join();
  std::thread waiter([&] { EXPECT_TRUE(same_bits(first.wait(), tree_sum(inputs))); });
  waiter.join();
}

TEST(DistWork, AnErrorReachesEveryWaiterAndTheCommunicatorGoesOn) {
  const Work w = comm().iallreduce(Tensor());
  std::string from_thread;
  std::thread t([&] { from_thread = testing_util::error_of([&] { w.wait(); }); });
  const std::string from_main = testing_util::error_of([&] { w.wait(); });
  t.join();
  EXPECT_NE(from_main.find("undefined"), std::string::npos) << from_main;
  EXPECT_EQ(from_thread, from_main);
  EXPECT_TRUE(w.ready());
  const Tensor after = comm().allreduce(ones({3}, {DType::i64}));
  for (int64_t i = 0; i < 3; ++i) EXPECT_EQ(after.data<int64_t>()[i], comm().size());
}

TEST(DistWork, AnEmptyHandleRefusesToWait) {
  Work w;
  EXPECT_FALSE(w.defined());
  EXPECT_ERROR_HAS(w.wait(), "the handle is empty");
  EXPECT_ERROR_HAS(w.ready(), "the handle is empty");
}

}  // namespace
}  // namespace strata::dist
