// Fault injection on DLRM training with its tables in the slow tier (Note [Fault-injection
// suite]): strata-dlrm's job, run in children on a tmpfs --slow-dir that is full, or shared by two
// jobs, must end in success or a clean error naming --slow-dir, never in SIGBUS.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "embeddings/dlrm.h"
#include "embeddings/dlrm_config.h"
#include "fault_env.h"

using ::testing::AllOf;
using ::testing::AnyOf;
using ::testing::HasSubstr;

namespace strata::fault {
namespace {

// Trains the DLRM the flags describe for its batches; prints the last loss.
const bool kTrain = register_scenario("dlrm-train", [](const std::vector<std::string>& flags) {
  const emb::DLRMConfig c = emb::parse_dlrm_args(flags);
  emb::configure_process_memory(c);  // as strata-dlrm does
  emb::TieredDLRM model(c);
  std::unique_ptr<emb::IndexSource> source = emb::make_index_source(c);
  emb::Batch data;
  std::vector<emb::Bags> bags(static_cast<std::size_t>(model.num_tables()));
  float loss = 0;
  while (source->next(data)) {
    for (std::size_t t = 0; t < bags.size(); ++t) bags[t] = data.bags(static_cast<int64_t>(t));
    loss = model.train_step(data.dense, bags, data.targets);
  }
  std::printf("loss %.6f\n", static_cast<double>(loss));
  return 0;
});

// 8 tables of 20000 rows x 64 floats: 41 MiB of rows, behind a 4 MiB fast budget.
std::vector<std::string> job(const std::string& slow_dir) {
  return {"--arch-embedding-size",
          "20000-20000-20000-20000-20000-20000-20000-20000",
          "--arch-sparse-feature-size",
          "64",
          "--arch-mlp-bot",
          "13-64",
          "--arch-mlp-top",
          "64-1",
          "--fast-budget",
          "4M",
          "--slow-dir",
          slow_dir,
          "--mini-batch-size",
          "64",
          "--num-batches",
          "4",
          "--slow-tier-model",
          "off"};
}

TEST(DlrmFaults, AFullSlowDirIsAnErrorNamingTheFlag) {
  STRATA_REQUIRE_TMPFS();
  Tmpfs fs(64 << 20);
  fs.fill("ballast", 4 << 20);
  const ChildResult r = run_child("dlrm-train", with_args(job(fs.path())));
  ASSERT_TRUE(r.exited) << r.describe();
  EXPECT_EQ(r.exit_code, kErrorExit) << r.describe();
  EXPECT_THAT(r.output, AllOf(HasSubstr("--slow-dir"), HasSubstr(fs.path())));
}

TEST(DlrmFaults, TwoJobsSharingASlowDirEndCleanly) {
  STRATA_REQUIRE_TMPFS();
  Tmpfs fs(64 << 20);  // room for one job's tables, not two
  for (int round = 0; round < 3; ++round) {
    const int a = start_child("dlrm-train", with_args(job(fs.path())));
    const int b = start_child("dlrm-train", with_args(job(fs.path())));
    const ChildResult ra = wait_child(a), rb = wait_child(b);
    int ok = 0;
    for (const ChildResult* r : {&ra, &rb}) {
      ASSERT_TRUE(r->exited) << r->describe();  // never a SIGBUS
      ASSERT_TRUE(r->exit_code == 0 || r->exit_code == kErrorExit) << r->describe();
      if (r->exit_code == 0) {
        EXPECT_THAT(r->output, HasSubstr("loss "));
        ++ok;
      } else {
        EXPECT_THAT(r->output, AllOf(HasSubstr(fs.path()), AnyOf(HasSubstr("No space left"), HasSubstr("free"))));
      }
    }
    EXPECT_GE(ok, 1) << ra.describe() << "\n" << rb.describe();
  }
}

// Issue 24: a --preset tiny run mapped half the RAM and a 50 GB slow-tier file, so it failed under
// `ulimit -v` below ~62 GB. Its heaps now grow from what the job uses.
TEST(DlrmFaults, ATinyJobRunsUnderAThreeGiBAddressSpaceLimit) {
  expect_runs_in_three_gib("dlrm-train",
                           with_args({"--preset", "tiny", "--num-batches", "20", "--slow-dir", ::testing::TempDir()}),
                           "loss ");
}

}  // namespace
}  // namespace strata::fault
