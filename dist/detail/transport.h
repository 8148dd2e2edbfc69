#pragma once
/// @file
/// The byte mover under strata::dist::Communicator (internal): point-to-point exchanges with a
/// timeout, over MPI (transport/mpi.cpp) or, in a build without MPI, a single process
/// (transport/single.cpp). Only one thread calls a Transport at a time (the communicator's worker).

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace strata::dist::detail {

/// One message of an exchange: `bytes` bytes at `data`, to or from rank `peer` (never this rank).
struct Message {
  int peer = 0;
  void* data = nullptr;
  std::size_t bytes = 0;
};

/// What the job is doing when it waits; named by the fault messages.
struct ExchangeLabel {
  const char* op = "";
  int64_t seq = 0;
  const char* phase = "";
};

class Transport {
 public:
  virtual ~Transport() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// "Open MPI 4.1.4 ...", "MPICH ..." or "single process (built without MPI)".
  virtual std::string implementation() const = 0;
  /// Posts every receive and send and waits for all of them. Messages between one pair of ranks
  /// are matched in the order they are listed. A peer that does not answer within the timeout, or
  /// an MPI error, ends the whole job naming the peer (Note [Communicator faults]); it never hangs
  /// and never returns half done.
  virtual void exchange(const std::vector<Message>& sends, const std::vector<Message>& recvs,
                        const ExchangeLabel& label) = 0;
  /// MPI_Allreduce(MPI_SUM) in place: the opt-in fast path, in the MPI library's own order.
  virtual void allreduce_sum_fast(void* data, int64_t count, DType dtype, const ExchangeLabel& label) = 0;
};

/// The transport of this build: MPI (initialized here if nobody did) or the single process.
/// `timeout_seconds` <= 0 waits forever.
std::unique_ptr<Transport> make_transport(double timeout_seconds);

/// Checks the launcher's rank and size variables (OMPI_COMM_WORLD_RANK/SIZE, PMI_RANK/PMI_SIZE)
/// against the transport's; throws strata::Error naming the variable on a mismatch.
void check_launcher_environment(int rank, int size, const std::string& implementation);

}  // namespace strata::dist::detail
