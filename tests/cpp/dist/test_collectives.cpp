// Every collective against a serial reference each rank computes on its own, at whatever rank
// count the suite runs (ctest: 1, 2 and 4 ranks, and the build without MPI).
#include <gtest/gtest.h>

#include "core/factories.h"
#include "tests/cpp/bitwise.h"
#include "tests/cpp/dist/dist_test_util.h"

namespace strata::dist {
namespace {

using testing::comm;
using testing::seeded;
using testing_util::same_bits;

// alltoallv: rank i sends rows_between(i, j) rows to rank j; each element encodes (i, j, row, col).
int64_t rows_between(int i, int j) { return (i + 2 * j) % 3 + (i == j ? 1 : 0); }
double code(int i, int j, int64_t row, int64_t col) { return i * 1000 + j * 100 + row * 10 + col; }

// The rows rank `me` sends (outgoing) or receives in alltoallv, in rank order.
Tensor encoded_rows(int me, int n, DType dtype, bool outgoing) {
  auto pair = [&](int other) { return outgoing ? std::pair{me, other} : std::pair{other, me}; };
  int64_t total = 0;
  for (int o = 0; o < n; ++o) total += rows_between(pair(o).first, pair(o).second);
  Tensor t = empty({total, 2, 3}, {dtype});
  int64_t at = 0;
  for (int o = 0; o < n; ++o) {
    const auto [src, dst] = pair(o);
    for (int64_t k = 0; k < rows_between(src, dst); ++k, ++at) {
      for (int64_t c = 0; c < 6; ++c) t.select(0, at).flatten().select(0, c).fill_(code(src, dst, k, c));
    }
  }
  return t;
}
Tensor alltoallv_input(int me, int n, DType dtype) { return encoded_rows(me, n, dtype, true); }
Tensor alltoallv_expected(int me, int n, DType dtype) { return encoded_rows(me, n, dtype, false); }

TEST(DistCollectives, AlltoallvMovesEveryRowToItsRank) {
  const int me = comm().rank(), n = comm().size();
  std::vector<int64_t> send, recv;
  for (int j = 0; j < n; ++j) send.push_back(rows_between(me, j)), recv.push_back(rows_between(j, me));
  for (DType dtype : testing::reducible_dtypes()) {
    const Tensor in = alltoallv_input(me, n, dtype);
    EXPECT_TRUE(same_bits(comm().alltoallv(in, send, recv), alltoallv_expected(me, n, dtype))) << dtype;
    EXPECT_TRUE(same_bits(comm().alltoallv(in, send), alltoallv_expected(me, n, dtype))) << dtype;
  }
}

TEST(DistCollectives, AlltoallvTakesNonContiguousInput) {
  const int me = comm().rank(), n = comm().size();
  std::vector<int64_t> send;
  for (int j = 0; j < n; ++j) send.push_back(rows_between(me, j));
  const Tensor in = alltoallv_input(me, n, DType::f64);
  const Tensor strided = in.transpose(1, 2).contiguous().transpose(1, 2);  // same values, other strides
  ASSERT_FALSE(strided.is_contiguous());
  EXPECT_TRUE(same_bits(comm().alltoallv(strided, send), alltoallv_expected(me, n, DType::f64)));
}

TEST(DistCollectives, AllgathervConcatenatesInRankOrder) {
  const int me = comm().rank(), n = comm().size();
  for (DType dtype : testing::reducible_dtypes()) {
    // Rank r has (r * 2) % 3 rows: rank 0 none.
    auto rows = [](int r) { return static_cast<int64_t>((r * 2) % 3); };
    std::vector<Tensor> parts;
    for (int r = 0; r < n; ++r) parts.push_back(seeded(100 + r, {rows(r), 5}, dtype));
    Tensor expected = empty({0, 5}, {dtype});
    for (int r = 0; r < n; ++r) {
      Tensor grown = empty({expected.size(0) + rows(r), 5}, {dtype});
      grown.narrow(0, 0, expected.size(0)).copy_(expected);
      grown.narrow(0, expected.size(0), rows(r)).copy_(parts[r]);
      expected = grown;
    }
    EXPECT_TRUE(same_bits(comm().allgatherv(parts[me]), expected)) << dtype;
  }
}

TEST(DistCollectives, ReduceScatterIsTheTreeSumOfEachRanksRows) {
  const int me = comm().rank(), n = comm().size();
  for (DType dtype : testing::reducible_dtypes()) {
    std::vector<Tensor> inputs;
    for (int r = 0; r < n; ++r) inputs.push_back(seeded(200 + r, {7, 3}, dtype));
    const Tensor sum = tree_sum(inputs);
    // Default split: 7 rows as evenly as possible, the first ranks one more.
    const int64_t base = 7 / n, extra = 7 % n;
    const int64_t start = me * base + std::min<int64_t>(me, extra), rows = base + (me < extra ? 1 : 0);
    EXPECT_TRUE(same_bits(comm().reduce_scatter(inputs[me]), sum.narrow(0, start, rows).contiguous())) << dtype;
    // An explicit split: everything to the last rank.
    std::vector<int64_t> split(n, 0);
    split.back() = 7;
    const Tensor got = comm().reduce_scatter(inputs[me], split);
    EXPECT_TRUE(same_bits(got, me == n - 1 ? sum : sum.narrow(0, 0, 0).contiguous())) << dtype;
  }
}

TEST(DistCollectives, AllreduceIsTheTreeSumOfOneContributionPerRank) {
  const int me = comm().rank(), n = comm().size();
  for (DType dtype : testing::reducible_dtypes()) {
    std::vector<Tensor> inputs;
    for (int r = 0; r < n; ++r) inputs.push_back(seeded(300 + r, {4, 37}, dtype));
    EXPECT_TRUE(same_bits(comm().allreduce(inputs[me]), tree_sum(inputs))) << dtype;
  }
}

// Note [Deterministic reduction order]: the same global list of contributions, spread over the
// ranks in blocks, gives tree_sum of the list at every rank count; the suite runs at 1, 2 and 4
// ranks, so the three runs produce the same bits.
void expect_global_sum(int64_t count, DType dtype, const std::function<int(int64_t)>& owner) {
  std::vector<Tensor> all, mine;
  for (int64_t g = 0; g < count; ++g) {
    all.push_back(seeded(400 + g, {1000}, dtype));
    if (owner(g) == comm().rank()) mine.push_back(all.back());
  }
  EXPECT_TRUE(same_bits(comm().allreduce(mine), tree_sum(all))) << "count " << count << " " << dtype;
}

TEST(DistCollectives, AllreduceOfAGlobalListIsBitwiseTheSameAtAnyRankCount) {
  const int n = comm().size();
  for (DType dtype : testing::reducible_dtypes()) {
    expect_global_sum(8, dtype, [&](int64_t g) { return static_cast<int>(g * n / 8); });        // equal blocks
    expect_global_sum(7, dtype, [&](int64_t g) { return static_cast<int>(g * n / 7); });        // unequal blocks
    expect_global_sum(3, dtype, [&](int64_t g) { return static_cast<int>((g + 1) * n / 4); });  // rank 0 may hold none
    expect_global_sum(5, dtype, [&](int64_t) { return n - 1; });                                // all on the last rank
  }
}

TEST(DistCollectives, FastAllreduceMatchesTheTreeSumToRounding) {
  const int me = comm().rank(), n = comm().size();
  std::vector<Tensor> inputs;
  for (int r = 0; r < n; ++r) inputs.push_back(seeded(500 + r, {64}, DType::f64));
  const Tensor fast = comm().allreduce(inputs[me], ReduceMode::fast);
  const Tensor exact = tree_sum(inputs);
  for (int64_t i = 0; i < 64; ++i) {
    EXPECT_NEAR(fast.data<double>()[i], exact.data<double>()[i], 1e-6 * (1 + std::abs(exact.data<double>()[i])));
  }
  std::vector<Tensor> ints;
  for (int r = 0; r < n; ++r) ints.push_back(seeded(600 + r, {16}, DType::i64));
  EXPECT_TRUE(same_bits(comm().allreduce(ints[me], ReduceMode::fast), tree_sum(ints)));  // integers: exact
}

TEST(DistCollectives, SizeOneAndBuildMatchTheLauncher) {
  EXPECT_GE(comm().size(), 1);
  EXPECT_GE(comm().rank(), 0);
  EXPECT_LT(comm().rank(), comm().size());
  EXPECT_EQ(Communicator::built_with_mpi(), STRATA_DIST_EXPECT_MPI != 0);
  if (!Communicator::built_with_mpi()) {
    EXPECT_EQ(comm().size(), 1);
    EXPECT_EQ(comm().implementation(), "single process (built without MPI)");
  }
}

}  // namespace
}  // namespace strata::dist
