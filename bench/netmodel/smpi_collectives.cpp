// The step's collectives of a schedule file written by `strata-netmodel --schedules DIR`, carried out
// with MPI point-to-point exactly as strata::dist's transport does (dist/transport/mpi.cpp): per
// round, every rank posts all its receives, then all its sends (a pair's bytes split into its
// listed number of messages), and waits for all of them. Built with smpicxx and run under SimGrid's
// smpirun on a simulated cluster (bench/netmodel/run_smpi.sh); it needs neither Strata nor real data
// (buffers come from SMPI_SHARED_MALLOC, so 64 simulated ranks fit in one process).
//   smpirun -np N -platform P.xml -hostfile H smpi_collectives FILE.sched
// Rank 0 prints one line per collective: "<name> <seconds>", the slowest rank's simulated time from
// a barrier to the end of its last round.
#include <mpi.h>
#include <smpi/smpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

struct Message {
  int src = 0, dst = 0;
  long long bytes = 0, count = 1;
};
using Round = std::vector<Message>;
struct Collective {
  std::string name;
  std::vector<Round> rounds;
};

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "smpi_collectives: %s\n", what.c_str());
  MPI_Abort(MPI_COMM_WORLD, 2);
  std::exit(2);
}

std::vector<Collective> read_schedule(const char* path, int ranks) {
  std::ifstream in(path);
  if (!in) fail(std::string("cannot open ") + path);
  std::vector<Collective> out;
  std::string line;
  int file_ranks = -1, line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    std::istringstream ls(line);
    std::string word;
    ls >> word;
    if (word == "ranks") {
      ls >> file_ranks;
    } else if (word == "collective") {
      out.push_back({});
      ls >> out.back().name;
    } else if (word == "round") {
      if (out.empty()) fail(std::string(path) + ":" + std::to_string(line_no) + ": a round before any collective");
      out.back().rounds.emplace_back();
    } else if (!word.empty()) {
      Message m;
      m.src = std::stoi(word);
      if (!(ls >> m.dst >> m.bytes >> m.count) || out.empty() || out.back().rounds.empty() || m.src < 0 ||
          m.src >= ranks || m.dst < 0 || m.dst >= ranks || m.bytes < 0 || m.count < 1)
        fail(std::string(path) + ":" + std::to_string(line_no) + ": bad message line '" + line + "'");
      out.back().rounds.back().push_back(m);
    }
  }
  if (file_ranks != ranks)
    fail(std::string(path) + ": written for " + std::to_string(file_ranks) + " ranks, run with " +
         std::to_string(ranks));
  return out;
}

// One round as dist's transport runs it: receives first, then sends, then wait for all.
void run_round(const Round& round, int me, char* buf) {
  std::vector<MPI_Request> requests;
  auto post = [&](const Message& m, bool send) {
    const long long piece = m.bytes / m.count;
    for (long long k = 0; k < m.count; ++k) {
      const long long n = k + 1 == m.count ? m.bytes - piece * (m.count - 1) : piece;
      requests.emplace_back();
      if (send)
        MPI_Isend(buf, static_cast<int>(n), MPI_BYTE, m.dst, 7, MPI_COMM_WORLD, &requests.back());
      else
        MPI_Irecv(buf, static_cast<int>(n), MPI_BYTE, m.src, 7, MPI_COMM_WORLD, &requests.back());
    }
  };
  for (const Message& m : round) {
    if (m.dst == me) post(m, false);
  }
  for (const Message& m : round) {
    if (m.src == me) post(m, true);
  }
  MPI_Waitall(static_cast<int>(requests.size()), requests.data(), MPI_STATUSES_IGNORE);
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int me = 0, ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  if (argc != 2) fail("usage: smpi_collectives FILE.sched");
  const std::vector<Collective> collectives = read_schedule(argv[1], ranks);
  long long largest = 1;
  for (const Collective& c : collectives) {
    for (const Round& r : c.rounds) {
      for (const Message& m : r) largest = std::max(largest, m.bytes);
    }
  }
  if (largest > (1LL << 31) - 1) fail("a message of " + std::to_string(largest) + " bytes exceeds MPI's int count");
  char* buf = static_cast<char*>(SMPI_SHARED_MALLOC(static_cast<size_t>(largest)));
  for (const Collective& c : collectives) {
    MPI_Barrier(MPI_COMM_WORLD);
    const double start = MPI_Wtime();
    for (const Round& r : c.rounds) run_round(r, me, buf);
    const double mine = MPI_Wtime() - start;
    double slowest = 0;
    MPI_Reduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (me == 0) std::printf("%s %.9g\n", c.name.c_str(), slowest);
  }
  SMPI_SHARED_FREE(buf);
  MPI_Finalize();
  return 0;
}
