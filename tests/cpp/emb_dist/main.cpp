// The sharded-embeddings suite's main (as tests/cpp/dist/main.cpp): every rank runs every test (the
// exchange is collective); ranks other than 0 print only failures. A failure on any rank makes
// mpirun exit non-zero. --reshard-dir=<dir> names the directory of the resharding checkpoint tests
// (reshard_dir.h).
#include <gtest/gtest.h>

#include <string>

#include "dist/communicator.h"
#include "tests/cpp/emb_dist/reshard_dir.h"

namespace {
std::string g_reshard_dir;
}  // namespace

const std::string& strata::emb::dlrm_test::reshard_dir() { return g_reshard_dir; }

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  const std::string flag = "--reshard-dir=";
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.starts_with(flag)) g_reshard_dir = arg.substr(flag.size());
  }
  const auto& comm = strata::dist::Communicator::world();
  if (comm.rank() != 0) GTEST_FLAG_SET(brief, true);
  return RUN_ALL_TESTS();
}
