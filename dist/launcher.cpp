// Validates the launcher's view of the job against the transport's.
#include <cstdlib>
#include <string>

#include "core/config.h"
#include "core/error.h"
#include "dist/detail/transport.h"

namespace strata::dist::detail {
namespace {

// The launcher's value of `name`, or -1 when unset (environment::launcher_count throws when malformed).
long env_int(const char* name) { return static_cast<long>(environment::launcher_count(name).value_or(-1)); }

void check_pair(const char* rank_var, const char* size_var, int rank, int size, const std::string& impl) {
  const long env_size = env_int(size_var);
  const long env_rank = env_int(rank_var);
  STRATA_CHECK(env_size < 0 || env_size == size, "dist: the launcher set ", size_var, "=", env_size, " but ", impl,
               " reports ", size, " rank(s)",
               size == 1 ? " (a build without MPI, or a program not linked with the launcher's MPI, runs "
                           "every rank as a separate job of size 1)"
                         : "");
  STRATA_CHECK(env_rank < 0 || env_rank == rank, "dist: the launcher set ", rank_var, "=", env_rank, " but ", impl,
               " reports rank ", rank);
}

}  // namespace

void check_launcher_environment(int rank, int size, const std::string& implementation) {
  check_pair("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", rank, size, implementation);
  check_pair("PMI_RANK", "PMI_SIZE", rank, size, implementation);
}

}  // namespace strata::dist::detail
