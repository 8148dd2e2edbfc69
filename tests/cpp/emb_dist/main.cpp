// The sharded-embeddings suite's main (as tests/cpp/dist/main.cpp): every rank runs every test (the
// exchange is collective); ranks other than 0 print only failures. A failure on any rank makes
// mpirun exit non-zero.
#include <gtest/gtest.h>

#include "dist/communicator.h"

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  const auto& comm = strata::dist::Communicator::world();
  if (comm.rank() != 0) GTEST_FLAG_SET(brief, true);
  return RUN_ALL_TESTS();
}
