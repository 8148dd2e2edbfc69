// The transport of a build without MPI (STRATA_WITH_MPI=OFF or no MPI found): one process, rank 0
// of 1. Collectives only copy and add locally; nothing here is ever asked to reach a peer.
#include <cstring>

#include "core/error.h"
#include "dist/detail/transport.h"

namespace strata::dist::detail {
namespace {

class SingleTransport final : public Transport {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string implementation() const override { return "single process (built without MPI)"; }
  void exchange(const std::vector<Message>& sends, const std::vector<Message>& recvs,
                const ExchangeLabel& label) override {
    STRATA_ASSERT(sends.empty() && recvs.empty(), "dist: ", label.op, " #", label.seq,
                  " addressed a peer in a single-process build");
  }
  void allreduce_sum_fast(void*, int64_t, DType, const ExchangeLabel&) override {}
};

}  // namespace

std::unique_ptr<Transport> make_transport(double) { return std::make_unique<SingleTransport>(); }

}  // namespace strata::dist::detail
