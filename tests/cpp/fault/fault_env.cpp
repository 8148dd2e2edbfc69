#include "fault_env.h"

#include <gmock/gmock.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "core/error.h"
#include "core/file.h"

// Note [Fault-injection suite]
// Each fault of issue 24's list is provoked for real: the slow tier and checkpoints on a tmpfs that
// is full before start, filled by another process during a run, or shared by two processes; a
// child under an address-space limit; a child killed while saving. A scenario that could die of
// a signal runs in a child (this binary re-executed with --gtest_filter=FaultChild.Run and the
// scenario's name in STRATA_FAULT_SCENARIO, never a bare fork: TSan forbids threads in a forked
// child of a threaded process), and the parent asserts that it ended by exit with a clean
// message, or succeeded, and that what was saved before is still there.

namespace strata::fault {
namespace {

std::map<std::string, Scenario>& registry() {
  static std::map<std::string, Scenario> r;
  return r;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

}  // namespace

Tmpfs::Tmpfs(std::size_t bytes) {
  std::string tmpl = (std::filesystem::temp_directory_path() / "strata-fault-XXXXXX").string();
  STRATA_CHECK(mkdtemp(tmpl.data()) != nullptr, "Tmpfs: mkdtemp failed: ", std::strerror(errno));
  path_ = tmpl;
  const std::string opts = "size=" + std::to_string(bytes) + ",mode=0777";
  if (mount("tmpfs", path_.c_str(), "tmpfs", 0, opts.c_str()) != 0) {
    const int err = errno;
    rmdir(path_.c_str());
    STRATA_FAIL("Tmpfs: mounting a tmpfs on ", path_, " failed: ", std::strerror(err));
  }
}

Tmpfs::~Tmpfs() {
  if (umount2(path_.c_str(), MNT_DETACH) == 0) rmdir(path_.c_str());
}

std::size_t free_bytes_in(const std::string& dir) { return free_disk_bytes(dir).value_or(0); }

void fill_directory(const std::string& dir, const std::string& name, std::size_t leave) {
  const int fd = ::open((dir + "/" + name).c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  STRATA_CHECK(fd >= 0, "fill_directory: cannot create ", name, " in ", dir, ": ", std::strerror(errno));
  std::vector<char> chunk(64 << 10, 'x');
  while (free_bytes_in(dir) > leave) {
    const std::size_t n = std::min(chunk.size(), free_bytes_in(dir) - leave);
    if (::write(fd, chunk.data(), n) <= 0) break;  // ENOSPC: as full as it gets
  }
  ::close(fd);
}

bool Tmpfs::available(std::string* why) {
  static const std::string reason = [] {
    if (geteuid() != 0) return std::string("mounting a tmpfs needs root (CI runs as root)");
    try {
      Tmpfs probe(1 << 20);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  }();
  if (why != nullptr) *why = reason;
  return reason.empty();
}

std::string ChildResult::describe() const {
  std::ostringstream os;
  if (timed_out) os << "timed out; ";
  if (exited)
    os << "exited with " << exit_code;
  else
    os << "killed by signal " << signal << " (" << strsignal(signal) << ")";
  os << "; output:\n" << output;
  return os.str();
}

bool register_scenario(const std::string& name, Scenario scenario) {
  registry()[name] = std::move(scenario);
  return true;
}

namespace {
struct Running {
  std::string out_path;
  double timeout_s;
  std::chrono::steady_clock::time_point start;
};
std::map<int, Running>& running() {
  static std::map<int, Running> r;
  return r;
}
}  // namespace

int start_child(const std::string& name, const ChildOptions& o) {
  STRATA_CHECK(registry().count(name) == 1, "start_child: no scenario named ", name);
  std::string out = (std::filesystem::temp_directory_path() / "strata-fault-out-XXXXXX").string();
  const int out_fd = mkstemp(out.data());
  STRATA_CHECK(out_fd >= 0, "start_child: mkstemp failed: ", std::strerror(errno));
  std::vector<std::string> argv_s = {"/proc/self/exe", "--gtest_filter=FaultChild.Run", "--gtest_brief=1"};
  std::vector<std::string> env_s = {"STRATA_FAULT_SCENARIO=" + name};
  for (std::size_t i = 0; i < o.args.size(); ++i)
    env_s.push_back("STRATA_FAULT_ARG" + std::to_string(i) + "=" + o.args[i]);
  for (const auto& [k, v] : o.env) env_s.push_back(k + "=" + v);
  // Not the parent's scenario variables, nor its gtest sharding (scripts/test.sh runs suites as
  // shards): the child runs FaultChild.Run alone, which another shard index would filter out.
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::strncmp(*e, "STRATA_FAULT_", 13) != 0 && std::strncmp(*e, "GTEST_", 6) != 0) env_s.emplace_back(*e);
  }
  std::vector<char*> argv, envp;
  for (auto& s : argv_s) argv.push_back(s.data());
  argv.push_back(nullptr);
  for (auto& s : env_s) envp.push_back(s.data());
  envp.push_back(nullptr);
  // Resolve the executable now: /proc/self/exe names the child itself after the exec.
  const std::string exe = std::filesystem::read_symlink("/proc/self/exe").string();
  const pid_t pid = fork();
  STRATA_CHECK(pid >= 0, "start_child: fork failed: ", std::strerror(errno));
  if (pid == 0) {  // only async-signal-safe calls until exec
    dup2(out_fd, STDOUT_FILENO);
    dup2(out_fd, STDERR_FILENO);
    if (o.address_space_limit > 0) {
      struct rlimit lim{static_cast<rlim_t>(o.address_space_limit), static_cast<rlim_t>(o.address_space_limit)};
      setrlimit(RLIMIT_AS, &lim);
    }
    execve(exe.c_str(), argv.data(), envp.data());
    _exit(127);
  }
  ::close(out_fd);
  running()[pid] = Running{out, o.timeout_s, std::chrono::steady_clock::now()};
  return pid;
}

ChildResult wait_child(int pid) {
  const Running r = running().at(pid);
  running().erase(pid);
  ChildResult result;
  int status = 0;
  while (true) {
    const pid_t w = waitpid(pid, &status, WNOHANG);
    if (w == pid) break;
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - r.start).count();
    if (elapsed > r.timeout_s && !result.timed_out) {
      result.timed_out = true;
      kill(pid, SIGKILL);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  result.exited = WIFEXITED(status);
  result.exit_code = result.exited ? WEXITSTATUS(status) : -1;
  result.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  result.output = read_file(r.out_path);
  std::filesystem::remove(r.out_path);
  return result;
}

ChildResult run_child(const std::string& name, const ChildOptions& options) {
  return wait_child(start_child(name, options));
}

void expect_runs_in_three_gib(const std::string& name, ChildOptions options, const std::string& expected) {
  if (sanitized_build()) GTEST_SKIP() << "sanitizer shadow memory needs terabytes of address space";
  options.address_space_limit = 3L << 30;
  const ChildResult r = run_child(name, options);
  EXPECT_TRUE(r.exited && r.exit_code == 0) << r.describe();
  EXPECT_THAT(r.output, ::testing::HasSubstr(expected));
}

}  // namespace strata::fault

// The child's side: runs the scenario named in the environment and exits with its status.
TEST(FaultChild, Run) {
  const char* name = std::getenv("STRATA_FAULT_SCENARIO");
  if (name == nullptr) GTEST_SKIP() << "runs only as a child of the fault-injection tests";
  std::vector<std::string> args;
  for (int i = 0;; ++i) {
    const char* a = std::getenv(("STRATA_FAULT_ARG" + std::to_string(i)).c_str());
    if (a == nullptr) break;
    args.emplace_back(a);
  }
  int code = 0;
  try {
    code = strata::fault::registry().at(name)(args);
  } catch (const strata::Error& e) {
    std::printf("strata::Error: %s\n", e.what());
    code = strata::fault::kErrorExit;
  }
  std::fflush(stdout);
  std::fflush(stderr);
  std::_Exit(code);
}
