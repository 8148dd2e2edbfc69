// Fault injection on checkpoints (Note [Fault-injection suite]): a save onto a full file system,
// and a process killed at random points of its saves. What was saved before must load unchanged.

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <random>
#include <string>
#include <thread>

#include "core/factories.h"
#include "fault_env.h"
#include "models/checkpoint.h"
#include "ops/operators.h"
#include "ops/reduction.h"
#include "tests/cpp/error_text.h"

using ::testing::AllOf;
using ::testing::HasSubstr;

namespace strata::fault {
namespace {

// A checkpoint whose tensors are all `value` and whose metadata says so.
void save_version(const std::string& path, int value, int64_t elements) {
  StateDict model = {{"w", full({elements}, static_cast<double>(value))}, {"b", full({7}, static_cast<double>(value))}};
  save_checkpoint(path, model, {}, {{"version", std::to_string(value)}});
}

// The version of the checkpoint at `path`, checked against its tensors.
int loaded_version(const std::string& path) {
  const Checkpoint c = load_checkpoint(path);
  EXPECT_EQ(c.metadata.size(), 1u);
  const int v = std::stoi(c.metadata.at(0).second);
  for (const auto& [key, t] : c.model) {
    EXPECT_EQ(max(-t).item<double>(), -v) << key;
    EXPECT_EQ(max(t).item<double>(), v) << key;
  }
  return v;
}

TEST(CheckpointFaults, SavingOntoAFullDiskFailsAndKeepsThePreviousFile) {
  STRATA_REQUIRE_TMPFS();
  Tmpfs fs(4 << 20);
  const std::string path = fs.path() + "/model.ckpt";
  save_version(path, 1, 1000);
  // 2M floats (8 MiB) cannot fit: the save fails naming the path, and version 1 is still there.
  EXPECT_THAT(testing_util::message_of([&] { save_version(path, 2, 2'000'000); }),
              AllOf(HasSubstr(path), HasSubstr("No space left on device")));
  EXPECT_EQ(loaded_version(path), 1);
  // Nothing of the failed save is left behind to fill the disk further.
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(fs.path())) files += e.is_regular_file();
  EXPECT_EQ(files, 1);
  // A disk filled by something else between two saves: the same.
  fs.fill("ballast");
  EXPECT_THAT(testing_util::message_of([&] { save_version(path, 3, 1000); }), HasSubstr("No space left on device"));
  EXPECT_EQ(loaded_version(path), 1);
}

const bool kSaver = register_scenario("save-forever", [](const std::vector<std::string>& args) {
  for (int v = 100;; ++v) save_version(args.at(0), v, 4'000'000);  // 16 MiB each
  return 0;
});

TEST(CheckpointFaults, KillsDuringSavesNeverLoseTheLastCheckpoint) {
  const std::string dir = ::testing::TempDir() + "/strata-kill-" + std::to_string(getpid());
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/model.ckpt";
  save_version(path, 1, 1000);
  std::mt19937 rng(24);
  int last = 1;
  for (int round = 0; round < 6; ++round) {
    const int pid = start_child("save-forever", with_args({path}));
    std::this_thread::sleep_for(std::chrono::milliseconds(50 + rng() % 400));
    kill(pid, SIGKILL);
    const ChildResult r = wait_child(pid);
    ASSERT_FALSE(r.exited) << r.describe();  // it was still saving
    const int v = loaded_version(path);      // the file is always a whole checkpoint
    EXPECT_TRUE(v == last || v >= 100) << "version " << v << " after round " << round;
    last = v;
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace strata::fault
