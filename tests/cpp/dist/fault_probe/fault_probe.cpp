// A job for the fault tests (run_fault.sh): every rank runs allreduces; at step 3 rank VICTIM
// either kills itself (`kill`: Open MPI's launcher ends the job) or stops answering (`stall`:
// the others' wait times out, Note [Communicator faults]). Usage: fault_probe kill|stall VICTIM
#include <csignal>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>

#include "core/factories.h"
#include "dist/communicator.h"

int main(int argc, char** argv) {
  if (argc != 3 || (std::strcmp(argv[1], "kill") != 0 && std::strcmp(argv[1], "stall") != 0)) {
    std::fprintf(stderr, "usage: %s kill|stall VICTIM\n", argv[0]);
    return 2;
  }
  const bool kill = std::strcmp(argv[1], "kill") == 0;
  const int victim = std::stoi(argv[2]);
  auto& comm = strata::dist::Communicator::world();
  for (int step = 0; step < 6; ++step) {
    if (step == 3 && comm.rank() == victim) {
      std::fprintf(stderr, "fault_probe: rank %d %s at step %d\n", victim, kill ? "kills itself" : "stalls", step);
      std::fflush(stderr);
      if (kill) std::raise(SIGKILL);
      std::this_thread::sleep_for(std::chrono::seconds(600));
    }
    comm.allreduce(strata::ones({1024}));
  }
  std::printf("fault_probe: rank %d finished (the fault did not end the job)\n", comm.rank());
  return 0;
}
