// Fault injection on DLRM checkpoints (Note [Fault-injection suite], Note [DLRM checkpoints]): a
// save killed with SIGKILL and a save onto a full disk keep the previous checkpoint loadable bit
// for bit, and the temporaries killed saves leave are removed by the next save.

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mount.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "embeddings/dlrm.h"
#include "embeddings/dlrm_config.h"
#include "fault_env.h"
#include "tests/cpp/bitwise.h"
#include "tests/cpp/error_text.h"

using ::testing::AllOf;
using ::testing::HasSubstr;

namespace strata::fault {
namespace {

/// Every parameter of `m`: the dense ones in state_dict order, then every table's rows.
std::vector<std::vector<unsigned char>> parameters(emb::TieredDLRM& m) {
  std::vector<std::vector<unsigned char>> out;
  for (const auto& [k, t] : m.state_dict()) out.push_back(testing_util::bytes_of(t));
  for (int64_t k = 0; k < m.num_tables(); ++k) {
    emb::Table& t = m.table(k);
    std::vector<unsigned char> rows(static_cast<std::size_t>(t.nvectors() * t.featuresize()) * sizeof(float));
    for (int64_t r = 0; r < t.nvectors(); ++r)
      t.read_row(r, reinterpret_cast<float*>(rows.data()) + r * t.featuresize());
    out.push_back(std::move(rows));
  }
  return out;
}

void train_steps(emb::TieredDLRM& m, const emb::DLRMConfig& c, int steps) {
  auto src = emb::make_index_source(c);
  emb::Batch b;
  std::vector<emb::Bags> bags(static_cast<std::size_t>(m.num_tables()));
  for (int s = 0; s < steps && src->next(b); ++s) {
    for (int64_t k = 0; k < m.num_tables(); ++k) bags[static_cast<std::size_t>(k)] = b.bags(k);
    m.train_step(b.dense, bags, b.targets);
  }
}

/// The temporaries of `name` in `dir` (Note [Stale checkpoint temporaries]).
std::vector<std::string> temporaries(const std::string& dir, const std::string& name) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().filename().string().starts_with("." + name + ".tmp.")) out.push_back(e.path().string());
  return out;
}

// 4 tables of 32768 rows x 64 f32 (32 MiB) behind an 8 MiB fast budget: cached tables, and a save
// that takes long enough to be killed in the middle.
std::vector<std::string> job(const std::string& seed) {
  return {"--arch-embedding-size",
          "32768-32768-32768-32768",
          "--arch-sparse-feature-size",
          "64",
          "--arch-mlp-bot",
          "13-64",
          "--arch-mlp-top",
          "64-1",
          "--fast-budget",
          "8M",
          "--mini-batch-size",
          "64",
          "--num-batches",
          "4",
          "--optimizer",
          "rwsadagrad",
          "--slow-tier-model",
          "off",
          "--slow-dir",
          ::testing::TempDir(),
          "--numpy-rand-seed",
          seed};
}

// Saves the untrained model of job(seed) to a path again and again until killed.
const bool kSaver = register_scenario("dlrm-save-forever", [](const std::vector<std::string>& args) {
  const emb::DLRMConfig c = emb::parse_dlrm_args(job(args.at(1)));
  emb::configure_process_memory(c);
  emb::TieredDLRM model(c);
  for (;;) model.save(args.at(0));
  return 0;
});

TEST(DlrmCheckpointFaults, KilledSavesKeepThePreviousCheckpointAndTheNextSaveRemovesTheirTemporaries) {
  const std::string dir = ::testing::TempDir() + "/strata-dlrm-kill-" + std::to_string(getpid());
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/model.ckpt";
  const emb::DLRMConfig c = emb::parse_dlrm_args(job("1"));
  emb::TieredDLRM saved(c);
  train_steps(saved, c, 2);
  saved.save(path);
  const auto saved_params = parameters(saved);
  emb::TieredDLRM child_model(emb::parse_dlrm_args(job("2")));  // what the child saves
  const auto child_params = parameters(child_model);
  emb::TieredDLRM loaded(emb::parse_dlrm_args(job("3")));

  std::mt19937 rng(25);
  int killed_mid_save = 0;
  for (int round = 0; round < 4; ++round) {
    const int pid = start_child("dlrm-save-forever", with_args({path, "2"}));
    // Kill once a save is under way (its temporary exists), a random moment into it: the child's
    // start-up takes seconds under the sanitizers, so a fixed delay would often kill it before.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (temporaries(dir, "model.ckpt").empty() && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    std::this_thread::sleep_for(std::chrono::milliseconds(rng() % 40));
    kill(pid, SIGKILL);
    const ChildResult r = wait_child(pid);
    ASSERT_FALSE(r.exited) << r.describe();  // it was still saving
    // The file is always a whole checkpoint: the parent's, or one the child finished.
    loaded.load(path);
    const auto got = parameters(loaded);
    EXPECT_TRUE(got == saved_params || got == child_params) << "round " << round;
    const auto stale = temporaries(dir, "model.ckpt");
    killed_mid_save += !stale.empty();
    ::testing::internal::CaptureStderr();
    saved.save(path);
    const std::string said = ::testing::internal::GetCapturedStderr();
    EXPECT_TRUE(temporaries(dir, "model.ckpt").empty()) << "round " << round;
    for (const std::string& t : stale)
      EXPECT_THAT(said, AllOf(HasSubstr("removed the stale temporary file '" + t + "'"),
                              HasSubstr("(its process " + std::to_string(pid) + " no longer runs)")));
    loaded.load(path);
    EXPECT_TRUE(parameters(loaded) == saved_params) << "round " << round;
  }
  std::printf("kills inside a save: %d of 4\n", killed_mid_save);
  EXPECT_GE(killed_mid_save, 1) << "no kill landed inside a save";
  std::filesystem::remove_all(dir);
}

TEST(DlrmCheckpointFaults, SavingOntoAFullDiskFailsAndKeepsThePreviousCheckpoint) {
  STRATA_REQUIRE_TMPFS();
  Tmpfs fs(5 << 20);
  const std::string path = fs.path() + "/model.ckpt";
  // 3 tables of 16384 rows x 16 f32 (3 MiB) in DRAM: one checkpoint fits the disk, two do not.
  const emb::DLRMConfig c = emb::parse_dlrm_args(
      {"--arch-embedding-size", "16384-16384-16384", "--arch-sparse-feature-size", "16", "--arch-mlp-bot", "13-16",
       "--arch-mlp-top", "16-1", "--fast-budget", "16M", "--mini-batch-size", "64", "--num-batches", "4", "--optimizer",
       "rwsadagrad", "--slow-tier-model", "off"});
  emb::TieredDLRM m(c);
  train_steps(m, c, 1);
  m.save(path);
  const auto first = parameters(m);
  train_steps(m, c, 2);
  EXPECT_THAT(testing_util::error_of([&] { m.save(path); }),
              AllOf(HasSubstr(path), HasSubstr("No space left on device"),
                    HasSubstr("the previous file, if any, is untouched")));
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(fs.path())) files += e.is_regular_file();
  EXPECT_EQ(files, 1);  // no temporary left to fill the disk further
  emb::TieredDLRM loaded(c);
  loaded.load(path);
  EXPECT_TRUE(parameters(loaded) == first);
}

TEST(DlrmCheckpointFaults, AReadOnlyOutputDirectoryIsRefusedBeforeTraining) {
  STRATA_REQUIRE_TMPFS();
  Tmpfs fs(1 << 20);
  // Root ignores permission bits; a read-only mount binds it too.
  ASSERT_EQ(::mount(nullptr, fs.path().c_str(), nullptr, MS_REMOUNT | MS_RDONLY, nullptr), 0) << std::strerror(errno);
  auto flags = job("1");
  flags.insert(flags.end(), {"--save-model", fs.path() + "/model.ckpt"});
  EXPECT_THAT(testing_util::error_of([&] { emb::check_output_paths(emb::parse_dlrm_args(flags)); }),
              HasSubstr("--save-model: cannot write '" + fs.path() + "/model.ckpt' (read-only file system)"));
  ASSERT_EQ(::mount(nullptr, fs.path().c_str(), nullptr, MS_REMOUNT, nullptr), 0) << std::strerror(errno);
  EXPECT_NO_THROW(emb::check_output_paths(emb::parse_dlrm_args(flags)));
}

}  // namespace
}  // namespace strata::fault
