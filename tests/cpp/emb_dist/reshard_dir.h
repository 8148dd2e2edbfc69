#pragma once
// The directory given by --reshard-dir=<dir> (tests/cpp/emb_dist/main.cpp): where
// DistCheckpointReshard.Save writes checkpoints at one rank count and DistCheckpointReshard.Load,
// in a later mpirun at another, reads them (ctest orders the runs with fixtures). Empty when the
// flag is absent.
#include <string>

namespace strata::emb::dlrm_test {
const std::string& reshard_dir();
}  // namespace strata::emb::dlrm_test
