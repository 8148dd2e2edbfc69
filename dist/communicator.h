#pragma once
/// @file
/// strata::dist::Communicator: the collectives a multi-process training step needs — alltoallv,
/// allgatherv, reduce-scatter and a deterministic allreduce on Tensors (f32, f64, i64), blocking
/// or non-blocking — over MPI, with byte counters per collective. A build without MPI
/// (-DSTRATA_WITH_MPI=OFF, or no MPI found) has the same API on one process (rank 0 of 1).
///
/// Ranks come from the launcher: `mpirun -np N prog` (MPI_Init_thread); the launcher's
/// OMPI_COMM_WORLD_* / PMI_* variables are only checked against MPI's view. Every rank must issue
/// the same collectives in the same order (as with MPI); inputs are validated collectively, so a
/// bad input on one rank raises the same strata::Error on every rank naming that rank. A rank that
/// dies or hangs ends the job (Note [Communicator faults] in dist/transport/mpi.cpp).
///
/// Rows: every collective moves whole rows, i.e. slices along dim 0; the trailing dims ("row
/// shape") and the dtype must agree across ranks. A non-contiguous input is copied first.

#include <array>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "core/tensor.h"
#include "dist/reduction.h"

namespace strata::dist {

namespace detail {
class Transport;
struct WorkState;
struct Message;
}  // namespace detail

/// The collectives, for the per-collective counters.
enum class Op : int { alltoallv = 0, allgatherv = 1, reduce_scatter = 2, allreduce = 3 };
inline constexpr int kNumOps = 4;
/// "alltoallv", "allgatherv", "reduce_scatter", "allreduce".
std::string_view op_name(Op op);

/// Counters of one collective on this rank. Bytes are payload bytes to and from other ranks
/// (rows moved; a rank's rows for itself are copied locally and not counted); the header each
/// call exchanges first (Note [Collective headers]) is counted in header_bytes_sent.
struct OpStats {
  int64_t calls = 0;
  int64_t bytes_sent = 0;
  int64_t bytes_received = 0;
  int64_t header_bytes_sent = 0;
  /// Seconds the worker spent running the collective (communication and local reduction).
  double busy_seconds = 0;
  /// Seconds callers spent blocked in wait() (or in a blocking call): the exposed communication.
  double wait_seconds = 0;
};

/// Counters of every collective of one communicator.
struct CommStats {
  std::array<OpStats, kNumOps> ops{};
  const OpStats& operator[](Op op) const { return ops[static_cast<std::size_t>(op)]; }
  /// The sum over the collectives.
  OpStats total() const;
};

/// How allreduce adds.
enum class ReduceMode {
  /// Strata's fixed tree over the global contributions (Note [Deterministic reduction order]):
  /// bitwise the same at any rank count.
  deterministic,
  /// MPI_Allreduce with MPI_SUM: the library's order, which may change with the rank count and the
  /// message size. Opt-in; one contribution per rank.
  fast,
};

/// Communicator settings, read when the world communicator is created.
struct Options {
  /// A wait longer than this ends the job naming the late ranks (Note [Communicator faults]);
  /// <= 0 waits forever. The environment variable STRATA_DIST_TIMEOUT (seconds) overrides it.
  double timeout_seconds = 60.0;
};

/// The handle of a non-blocking collective. Copies share one operation. wait() may be called from
/// any thread, by several threads at once, and more than once; each returns the same result.
class Work {
 public:
  Work() = default;
  bool defined() const { return state_ != nullptr; }
  /// True once the collective finished (successfully or not); never blocks.
  bool ready() const;
  /// Blocks until the collective finished and returns its output, or rethrows its strata::Error.
  /// The time blocked is added to the collective's wait_seconds.
  Tensor wait() const;

 private:
  friend class Communicator;
  explicit Work(std::shared_ptr<detail::WorkState> state) : state_(std::move(state)) {}
  std::shared_ptr<detail::WorkState> state_;
};

class Communicator {
 public:
  /// The communicator of all the job's ranks, created (and MPI initialized) on first use with
  /// `options` (ignored afterwards). Throws strata::Error when the launcher's variables disagree
  /// with MPI's rank and size (e.g. a build without MPI launched with mpirun -np 2).
  static Communicator& world(const Options& options = {});

  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  /// The transport: "Open MPI v4.1.4", "MPICH Version: 4.0.2", "single process (built without MPI)".
  const std::string& implementation() const { return implementation_; }
  /// True when this build has MPI (STRATA_WITH_MPI and MPI found).
  static bool built_with_mpi();
  double timeout_seconds() const { return timeout_seconds_; }

  /// Sends rows [sum(send_rows[0..j)), +send_rows[j]) of `input` to rank j and returns the rows
  /// received, rank 0's first. `send_rows` has size() entries summing to input.size(0).
  /// `recv_rows[i]` is the number of rows this rank expects from rank i: each pair is checked
  /// against what rank i sends, and a mismatch throws on every rank naming the pair.
  Tensor alltoallv(const Tensor& input, const std::vector<int64_t>& send_rows, const std::vector<int64_t>& recv_rows);
  /// The same, receiving whatever the others send (learned from the header exchange).
  Tensor alltoallv(const Tensor& input, const std::vector<int64_t>& send_rows);
  /// Every rank's rows concatenated in rank order; ranks may pass different row counts.
  Tensor allgatherv(const Tensor& input);
  /// The sum over ranks of `input` (same shape on every rank), in the tree order; this rank gets
  /// rows [sum(rows_per_rank[0..rank)), +rows_per_rank[rank]). Empty `rows_per_rank`: dim 0 split
  /// as evenly as possible, the first ranks taking one row more.
  Tensor reduce_scatter(const Tensor& input, const std::vector<int64_t>& rows_per_rank = {});
  /// The sum over ranks of `input` (same shape on every rank); see ReduceMode.
  Tensor allreduce(const Tensor& input, ReduceMode mode = ReduceMode::deterministic);
  /// The sum of every rank's `contributions` in the tree order over the global list (rank 0's
  /// first): bitwise equal to tree_sum() of that list on one process, whichever ranks hold which
  /// contributions. A rank may pass none; the job must pass at least one.
  Tensor allreduce(const std::vector<Tensor>& contributions);

  /// Non-blocking versions: they return at once; the worker thread runs collectives in call order
  /// while the caller computes. Inputs must not be written until the Work finished.
  Work ialltoallv(const Tensor& input, const std::vector<int64_t>& send_rows, const std::vector<int64_t>& recv_rows);
  Work ialltoallv(const Tensor& input, const std::vector<int64_t>& send_rows);
  Work iallgatherv(const Tensor& input);
  Work ireduce_scatter(const Tensor& input, const std::vector<int64_t>& rows_per_rank = {});
  Work iallreduce(const Tensor& input, ReduceMode mode = ReduceMode::deterministic);
  Work iallreduce(const std::vector<Tensor>& contributions);

  /// A snapshot of the counters (thread-safe).
  CommStats stats() const;
  void reset_stats();

 private:
  explicit Communicator(const Options& options);
  struct Call;
  Work submit(Op op, std::function<Tensor(int64_t seq)> run);
  void worker_loop();
  void add_wait(Op op, double seconds);
  friend class Work;

  Tensor run_alltoallv(int64_t seq, const Tensor& input, const std::vector<int64_t>& send_rows,
                       const std::vector<int64_t>* recv_rows);
  Tensor run_allgatherv(int64_t seq, const Tensor& input);
  Tensor run_reduce_scatter(int64_t seq, const Tensor& input, const std::vector<int64_t>& rows_per_rank);
  Tensor run_allreduce(int64_t seq, Op op, const std::vector<Tensor>& contributions);
  Tensor run_allreduce_fast(int64_t seq, const Tensor& input);
  // Phases shared by the collectives (communicator.cpp).
  std::vector<int64_t> exchange_headers(Op op, int64_t seq, std::vector<int64_t> mine);
  void move(Op op, int64_t seq, const char* phase, const std::vector<detail::Message>& sends,
            const std::vector<detail::Message>& recvs);
  void reduce_chunks(Op op, int64_t seq, const std::vector<Tensor>& contributions, const std::vector<int64_t>& counts,
                     const std::vector<int64_t>& chunk_begin, DType dtype, void* out);
  Tensor gather_chunks(Op op, int64_t seq, Tensor chunks, const std::vector<int64_t>& chunk_begin);

  std::unique_ptr<detail::Transport> transport_;
  int rank_ = 0;
  int size_ = 1;
  std::string implementation_;
  double timeout_seconds_ = 0;

  mutable std::mutex stats_mutex_;
  CommStats stats_;

  std::mutex queue_mutex_;
  std::condition_variable queue_cv_;
  std::deque<std::function<void()>> queue_;
  int64_t next_seq_ = 0;
  bool stopping_ = false;
  std::thread worker_;
};

}  // namespace strata::dist
