#pragma once
// The fault-injection suite's environment (Note [Fault-injection suite]): small tmpfs mounts that
// stand for a filling disk, and scenarios run in a child process (this test binary re-executed),
// whose exit status and output the parent checks, so a signal or a hang in the code under test
// fails a test instead of killing the suite.

#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "tests/cpp/sanitizers.h"

namespace strata::fault {

/// Writes the file `dir`/`name` until at most `leave` bytes are free in its file system (or it is full).
void fill_directory(const std::string& dir, const std::string& name, std::size_t leave = 0);
/// Bytes free for an unprivileged writer in the file system holding `dir`.
std::size_t free_bytes_in(const std::string& dir);

/// A tmpfs of `bytes` mounted on a fresh directory, unmounted (and the directory removed) on
/// destruction. Mounting needs root (CI runs as root): `available()` says whether it can.
class Tmpfs {
 public:
  explicit Tmpfs(std::size_t bytes);
  ~Tmpfs();
  Tmpfs(const Tmpfs&) = delete;
  Tmpfs& operator=(const Tmpfs&) = delete;
  const std::string& path() const { return path_; }
  /// Bytes free for an unprivileged writer.
  std::size_t free_bytes() const { return free_bytes_in(path_); }
  /// Writes a file `name` until at most `leave` bytes are free (or the file system is full).
  void fill(const std::string& name, std::size_t leave = 0) const { fill_directory(path_, name, leave); }
  /// Whether this process can mount a tmpfs (root, and mount allowed); the reason when it cannot.
  static bool available(std::string* why);

 private:
  std::string path_;
};

/// Skips the test unless a tmpfs can be mounted.
#define STRATA_REQUIRE_TMPFS()                                           \
  do {                                                                   \
    std::string why_;                                                    \
    if (!::strata::fault::Tmpfs::available(&why_)) GTEST_SKIP() << why_; \
  } while (0)

/// True in a build under AddressSanitizer or ThreadSanitizer (their shadow memory needs terabytes
/// of address space, so address-space limits cannot be tested there).
using testing_util::sanitized_build;

/// How a child ended.
struct ChildResult {
  bool exited = false;  // by exit(), not by a signal
  int exit_code = -1;
  int signal = 0;
  bool timed_out = false;
  std::string output;  // stdout and stderr
  std::string describe() const;
};

/// A scenario runs in the child; its return value is the child's exit status. Exit status 3 is
/// reserved for "a strata::Error was thrown" (its message is printed first).
using Scenario = std::function<int(const std::vector<std::string>& args)>;
/// Registers a scenario under `name` (at static initialization); returns true.
bool register_scenario(const std::string& name, Scenario scenario);

struct ChildOptions {
  std::vector<std::string> args;
  double timeout_s = 120;
  long address_space_limit = 0;                          // RLIMIT_AS in bytes for the child; 0: none
  std::vector<std::pair<std::string, std::string>> env;  // set in the child
};

/// Options with just the scenario's arguments.
inline ChildOptions with_args(std::vector<std::string> args) {
  ChildOptions o;
  o.args = std::move(args);
  return o;
}

/// Starts this test binary again running scenario `name`. start_child returns the pid; wait_child
/// waits for it (killing it after the timeout) and collects its output.
int start_child(const std::string& name, const ChildOptions& options = {});
ChildResult wait_child(int pid);
ChildResult run_child(const std::string& name, const ChildOptions& options = {});

/// A test's whole body for a job that must run in a small address space (issue 24): runs scenario
/// `name` in a child limited to 3 GiB of address space and expects it to exit 0 having printed
/// `expected`. Skips under sanitizers, whose shadow memory needs terabytes of address space.
void expect_runs_in_three_gib(const std::string& name, ChildOptions options, const std::string& expected);

/// Exit status of a child whose scenario threw strata::Error.
inline constexpr int kErrorExit = 3;

}  // namespace strata::fault
