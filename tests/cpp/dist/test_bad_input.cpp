// Bad inputs: refused with the same strata::Error on every rank, naming the rank (or rank pair),
// and the communicator stays usable.
#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>

#include "core/factories.h"
#include "dist/detail/transport.h"
#include "tests/cpp/dist/dist_test_util.h"
#include "tests/cpp/error_text.h"

namespace strata::dist {
namespace {

using testing::comm;

TEST(DistBadInput, UndefinedOrUnsupportedTensorsAreNamed) {
  const int last = comm().size() - 1;
  const bool bad = comm().rank() == last;
  const std::string rank_text = "rank " + std::to_string(last) + " passed ";
  // The bad rank sees its own error; the others see which rank it was.
  const std::string undefined = bad ? "input tensor is undefined" : rank_text + "an undefined tensor";
  EXPECT_ERROR_HAS(comm().allgatherv(bad ? Tensor() : zeros({1})), undefined);
  EXPECT_ERROR_HAS(comm().allreduce(bad ? Tensor() : zeros({1})), undefined);
  EXPECT_ERROR_HAS(comm().reduce_scatter(bad ? Tensor() : zeros({4})), undefined);
  const std::string dtype =
      bad ? "input dtype i32 is not supported (f32, f64 or i64)" : rank_text + "an unsupported dtype";
  EXPECT_ERROR_HAS(comm().allreduce(zeros({2}, {bad ? DType::i32 : DType::f32})), dtype);
  EXPECT_ERROR_HAS(comm().allgatherv(bad ? scalar_tensor(1.0) : zeros({1})),
                   bad ? "the input is 0-dim" : rank_text + "a bad shape");
  EXPECT_ERROR_HAS(comm().allreduce(std::vector<Tensor>{}), "no rank passed a contribution");
  std::vector<Tensor> uneven{zeros({2}), zeros({3})};
  EXPECT_ERROR_HAS(comm().allreduce(uneven), comm().rank() == 0 ? "local contribution 1 is f32 [3]" : "rank 0 passed");
  EXPECT_EQ(comm().allgatherv(zeros({1})).size(0), comm().size());  // still usable
}

TEST(DistBadInput, DtypesAndShapesMustAgreeAcrossRanks) {
  if (comm().size() < 2) GTEST_SKIP() << "needs 2 ranks";
  const bool last = comm().rank() == comm().size() - 1;
  const std::string r = std::to_string(comm().size() - 1);
  EXPECT_ERROR_HAS(comm().allreduce(zeros({4}, {last ? DType::f64 : DType::f32})),
                   "rank 0 passes f32 but rank " + r + " passes f64");
  EXPECT_ERROR_HAS(comm().allreduce(zeros({last ? 5 : 4})), "rank 0's input has shape [4] but rank " + r + "'s [5]");
  EXPECT_ERROR_HAS(comm().allgatherv(zeros({2, last ? 3 : 2})),
                   "rank 0's input has rows of shape [2] but rank " + r + "'s [3]");
  EXPECT_ERROR_HAS(comm().reduce_scatter(zeros({last ? 6 : 4, 1})), "shape [4, 1] but rank " + r + "'s [6, 1]");
  const int n = comm().size();
  std::vector<int64_t> split(n, 1);
  if (last) split[0] = 0, split[1] = 2;
  EXPECT_ERROR_HAS(comm().reduce_scatter(zeros({n, 1}), split), "rank 0 and rank " + r + " split the rows differently");
}

TEST(DistBadInput, AlltoallvCountMismatchNamesTheRankPair) {
  const int me = comm().rank(), n = comm().size();
  // Every rank sends 2 rows to every rank; the last rank expects 3 from rank 0.
  std::vector<int64_t> send(n, 2), recv(n, 2);
  if (me == n - 1) recv[0] = 3;
  const std::string r = std::to_string(n - 1);
  EXPECT_ERROR_HAS(comm().alltoallv(zeros({2 * n, 4}), send, recv),
                   "rank 0 sends 2 rows to rank " + r + " but rank " + r + " expects 3 rows from rank 0");
  // Local count errors name the argument.
  const bool bad = me == n - 1;
  std::vector<int64_t> short_send(bad ? n + 1 : n, 2);
  EXPECT_ERROR_HAS(comm().alltoallv(zeros({2 * n, 4}), short_send),
                   bad ? "send_rows has " + std::to_string(n + 1) + " entries for " + std::to_string(n) + " ranks"
                       : "rank " + r + " passed bad row counts");
  std::vector<int64_t> wrong_sum(n, 2);
  EXPECT_ERROR_HAS(
      comm().alltoallv(zeros({2 * n + (bad ? 1 : 0), 4}), wrong_sum),
      bad ? "send_rows sums to " + std::to_string(2 * n) + " rows but the input has " + std::to_string(2 * n + 1)
          : "bad row counts");
  std::vector<int64_t> negative(n, 2);
  if (bad) negative[0] = -1;  // refused before the sum is looked at
  EXPECT_ERROR_HAS(comm().alltoallv(zeros({2 * n, 4}), negative),
                   bad ? "send_rows[0] = -1 is negative" : "bad row counts");
  std::vector<int64_t> recv_short(bad ? 1 : n, 2);
  if (n > 1 || !bad) {
    EXPECT_ERROR_HAS(comm().alltoallv(zeros({2 * n, 4}), std::vector<int64_t>(n, 2), recv_short),
                     bad ? "recv_rows has 1 entries" : "bad row counts");
  }
  EXPECT_EQ(comm().alltoallv(zeros({2 * n, 4}), send).size(0), 2 * n);  // still usable
}

TEST(DistBadInput, RanksMustCallTheSameCollectives) {
  if (comm().size() < 2) GTEST_SKIP() << "needs 2 ranks";
  const bool last = comm().rank() == comm().size() - 1;
  const std::string msg = testing_util::error_of([&] {
    if (last)
      comm().allgatherv(zeros({1}));
    else
      comm().allreduce(zeros({1}));
  });
  EXPECT_NE(msg.find("rank 0 called allreduce"), std::string::npos) << msg;
  EXPECT_NE(msg.find("called allgatherv"), std::string::npos) << msg;
}

// Sets (or, with nullptr, unsets) an environment variable for one scope, then restores it.
struct EnvVar {
  std::string name;
  std::optional<std::string> old;
  EnvVar(const char* n, const char* value) : name(n) {
    if (const char* v = std::getenv(n)) old = v;
    if (value != nullptr)
      setenv(n, value, 1);
    else
      unsetenv(n);
  }
  ~EnvVar() {
    if (old)
      setenv(name.c_str(), old->c_str(), 1);
    else
      unsetenv(name.c_str());
  }
};

TEST(DistBadInput, LauncherVariablesMustMatchTheTransport) {
  // Local checks: mpirun's own variables are hidden for the duration.
  EnvVar ompi_size("OMPI_COMM_WORLD_SIZE", nullptr), ompi_rank("OMPI_COMM_WORLD_RANK", nullptr);
  EnvVar pmi_size("PMI_SIZE", nullptr), pmi_rank("PMI_RANK", nullptr);
  EXPECT_NO_THROW(detail::check_launcher_environment(0, 1, "X"));
  {
    EnvVar size("PMI_SIZE", "2");
    EnvVar rank("PMI_RANK", "0");
    EXPECT_ERROR_HAS(detail::check_launcher_environment(0, 1, "single process (built without MPI)"),
                     "the launcher set PMI_SIZE=2 but single process (built without MPI) reports 1 rank(s)");
  }
  {
    EnvVar size("PMI_SIZE", "4");
    EnvVar rank("PMI_RANK", "3");
    EXPECT_ERROR_HAS(detail::check_launcher_environment(1, 4, "X"), "the launcher set PMI_RANK=3 but X reports rank 1");
  }
  {
    EnvVar size("OMPI_COMM_WORLD_SIZE", "3");
    EXPECT_ERROR_HAS(detail::check_launcher_environment(0, 1, "X"), "the launcher set OMPI_COMM_WORLD_SIZE=3 but X");
  }
  {
    EnvVar size("PMI_SIZE", "two");
    EXPECT_ERROR_HAS(detail::check_launcher_environment(0, 1, "X"),
                     "PMI_SIZE: expected a non-negative integer, got 'two'");
  }
}

}  // namespace
}  // namespace strata::dist
