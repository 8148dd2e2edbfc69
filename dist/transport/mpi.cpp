// The MPI transport: standard MPI-3 point-to-point calls only (MPICH builds too).
#include <mpi.h>

#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <thread>

#include "core/error.h"
#include "dist/detail/transport.h"

namespace strata::dist::detail {
namespace {

// Note [Communicator faults]
// --------------------------------
// What Open MPI does on its own: when a process of the job dies (a signal, or an exit without
// MPI_Finalize), mpirun notices, prints "mpirun noticed that process rank R with PID P on node H
// exited on signal S" (or "... exited without calling finalize") and kills the other ranks; mpirun
// exits non-zero. MPICH's hydra does the same. Nothing of that needs Strata, but it relies on the
// launcher seeing the process die.
// What Strata adds: (1) the communicator's own duplicate of MPI_COMM_WORLD uses MPI_ERRORS_RETURN,
// so an MPI error is reported naming the collective, its sequence number and the peer, then the
// job is aborted; (2) every wait polls its requests against a deadline (Options::timeout_seconds,
// STRATA_DIST_TIMEOUT): a peer that is alive but never arrives (a hung or stopped rank, a rank
// that skipped a collective, a launcher that missed a death) ends the job within that time with
// "rank R: <op> #<seq> (<phase>) waited T s for rank(s) P" naming the ranks whose messages never
// came. Both end with MPI_Abort(MPI_COMM_WORLD), so every rank exits non-zero and none hangs.
// (3) Collectives exchange a header first (dist/communicator.cpp), so mismatched sizes, dtypes or
// calls are refused with a strata::Error on every rank instead of corrupting or hanging.

constexpr int kTag = 7;
constexpr std::size_t kMaxPiece = std::size_t{1} << 30;  // MPI counts are int

[[noreturn]] void fatal(int rank, const std::string& what) {
  std::fprintf(stderr, "strata::dist: rank %d: %s; aborting the job\n", rank, what.c_str());
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 3);
  std::_Exit(3);
}

std::string mpi_error_text(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) return "MPI error " + std::to_string(code);
  return std::string(text, static_cast<std::size_t>(len));
}

std::string describe(const ExchangeLabel& label) {
  std::ostringstream os;
  os << label.op << " #" << label.seq << " (" << label.phase << ")";
  return os.str();
}

MPI_Datatype mpi_type(DType dtype) {
  switch (dtype) {
    case DType::f32: return MPI_FLOAT;
    case DType::f64: return MPI_DOUBLE;
    case DType::i64: return MPI_INT64_T;
    default: STRATA_ASSERT(false, "dist: no MPI type for ", dtype);
  }
}

class MpiTransport final : public Transport {
 public:
  explicit MpiTransport(double timeout_seconds) : timeout_seconds_(timeout_seconds) {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized) {
      int provided = 0;
      MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
      STRATA_CHECK(provided >= MPI_THREAD_SERIALIZED, "dist: the MPI library provides thread level ", provided,
                   " but the communicator's worker thread needs MPI_THREAD_SERIALIZED");
      owns_init_ = true;
    }
    MPI_Comm_dup(MPI_COMM_WORLD, &comm_);
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
  }
  ~MpiTransport() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized) return;
    MPI_Comm_free(&comm_);
    if (owns_init_) MPI_Finalize();
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string implementation() const override {
    char text[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    MPI_Get_library_version(text, &len);
    std::string s(text, static_cast<std::size_t>(len));
    if (auto nl = s.find_first_of("\n,"); nl != std::string::npos) s.resize(nl);
    return s;
  }

  void exchange(const std::vector<Message>& sends, const std::vector<Message>& recvs,
                const ExchangeLabel& label) override {
    requests_.clear();
    peers_.clear();
    for (const Message& m : recvs) post(m, /*send=*/false, label);
    for (const Message& m : sends) post(m, /*send=*/true, label);
    wait_all(label);
  }

  void allreduce_sum_fast(void* data, int64_t count, DType dtype, const ExchangeLabel& label) override {
    STRATA_CHECK(count <= INT_MAX, "dist: allreduce fast path: ", count, " elements exceed MPI's int count");
    MPI_Request request;
    int rc = MPI_Iallreduce(MPI_IN_PLACE, data, static_cast<int>(count), mpi_type(dtype), MPI_SUM, comm_, &request);
    if (rc != MPI_SUCCESS) fatal(rank_, describe(label) + ": MPI_Iallreduce failed: " + mpi_error_text(rc));
    requests_.assign(1, request);
    peers_.assign(1, {-1, false});
    wait_all(label);
  }

 private:
  struct Pending {
    int peer;
    bool send;
  };

  void post(const Message& m, bool send, const ExchangeLabel& label) {
    auto* bytes = static_cast<char*>(m.data);
    for (std::size_t done = 0; done < m.bytes; done += kMaxPiece) {
      const int n = static_cast<int>(std::min(kMaxPiece, m.bytes - done));
      MPI_Request request;
      const int rc = send ? MPI_Isend(bytes + done, n, MPI_BYTE, m.peer, kTag, comm_, &request)
                          : MPI_Irecv(bytes + done, n, MPI_BYTE, m.peer, kTag, comm_, &request);
      if (rc != MPI_SUCCESS) {
        fatal(rank_, describe(label) + ": posting a " + (send ? "send to" : "receive from") + " rank " +
                         std::to_string(m.peer) + " failed: " + mpi_error_text(rc));
      }
      requests_.push_back(request);
      peers_.push_back({m.peer, send});
    }
  }

  void wait_all(const ExchangeLabel& label);
  [[noreturn]] void fail_timeout(const ExchangeLabel& label, double waited);
  [[noreturn]] void fail_status(const ExchangeLabel& label, const std::vector<int>& done,
                                const std::vector<MPI_Status>& statuses, int outcount, int rc);

  double timeout_seconds_;
  bool owns_init_ = false;
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  int size_ = 1;
  std::vector<MPI_Request> requests_;
  std::vector<Pending> peers_;
};

// Polls rather than blocking in MPI_Waitall so that a peer that never answers is detected (Note
// [Communicator faults]): spins briefly, then sleeps 50 us between polls.
void MpiTransport::wait_all(const ExchangeLabel& label) {
  const auto start = std::chrono::steady_clock::now();
  std::size_t remaining = requests_.size();
  std::vector<int> done(requests_.size());
  std::vector<MPI_Status> statuses(requests_.size());
  for (int idle = 0; remaining > 0;) {
    int outcount = 0;
    const int rc =
        MPI_Testsome(static_cast<int>(requests_.size()), requests_.data(), &outcount, done.data(), statuses.data());
    if (rc != MPI_SUCCESS) fail_status(label, done, statuses, outcount, rc);
    if (outcount > 0 && outcount != MPI_UNDEFINED) {
      remaining -= static_cast<std::size_t>(outcount);
      idle = 0;
      continue;
    }
    if (++idle < 1000) continue;
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (timeout_seconds_ > 0 && waited > timeout_seconds_) fail_timeout(label, waited);
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

void MpiTransport::fail_timeout(const ExchangeLabel& label, double waited) {
  std::ostringstream os;
  os << describe(label) << " waited " << waited << " s (timeout " << timeout_seconds_ << " s, STRATA_DIST_TIMEOUT)";
  std::vector<int> late_recv, late_send;
  for (std::size_t i = 0; i < requests_.size(); ++i) {
    if (requests_[i] == MPI_REQUEST_NULL) continue;
    auto& list = peers_[i].send ? late_send : late_recv;
    if (list.empty() || list.back() != peers_[i].peer) list.push_back(peers_[i].peer);
  }
  auto names = [](const std::vector<int>& ranks) {
    std::string s;
    for (int r : ranks) s += (s.empty() ? "rank " : ", rank ") + std::to_string(r);
    return s;
  };
  if (!late_recv.empty()) os << " for " << names(late_recv) << " (nothing received)";
  if (!late_send.empty()) os << (late_recv.empty() ? " for " : "; unsent to ") << names(late_send);
  if (peers_.size() == 1 && peers_[0].peer < 0) os << " in MPI_Iallreduce";
  os << ": that rank died or hangs";
  fatal(rank_, os.str());
}

void MpiTransport::fail_status(const ExchangeLabel& label, const std::vector<int>& done,
                               const std::vector<MPI_Status>& statuses, int outcount, int rc) {
  std::ostringstream os;
  os << describe(label) << ": MPI error " << mpi_error_text(rc);
  if (rc == MPI_ERR_IN_STATUS) {
    for (int k = 0; k < outcount; ++k) {
      const int err = statuses[static_cast<std::size_t>(k)].MPI_ERROR;
      if (err == MPI_SUCCESS) continue;
      const Pending& p = peers_[static_cast<std::size_t>(done[static_cast<std::size_t>(k)])];
      os << "; " << (p.send ? "send to" : "receive from") << " rank " << p.peer << ": " << mpi_error_text(err);
    }
  }
  fatal(rank_, os.str());
}

}  // namespace

std::unique_ptr<Transport> make_transport(double timeout_seconds) {
  return std::make_unique<MpiTransport>(timeout_seconds);
}

}  // namespace strata::dist::detail
