#include "memory/detail/fault_guard.h"

#include <signal.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <csetjmp>
#include <cstdint>
#include <cstring>
#include <deque>
#include <mutex>

namespace strata::memory {

// Note [Slow-tier faults]
// A file-backed mapping faults with SIGBUS when the file system cannot supply a page: a sparse
// file on a disk that filled up after the mapping was made. Heaps reserve their file space before
// mapping it (Note [Heaps grow on demand]), so this should not happen; where a backend cannot
// reserve (memkind's own file), its pages are touched under `touch_pages`, whose fault returns
// false through siglongjmp instead of killing the process. Any fault still met on a registered
// range (a file truncated behind our back, a device error) prints the heap's name and exits with
// kSlowTierFaultExitCode, written with async-signal-safe calls only. The handler chains to the
// one installed before it (Python's faulthandler, a sanitizer) for addresses that are not ours.

namespace {

struct Range {
  std::atomic<std::uintptr_t> begin{0};
  std::atomic<std::uintptr_t> end{0};
  std::atomic<const char*> what{nullptr};
};

constexpr int kMaxRanges = 1024;
std::array<Range, kMaxRanges> g_ranges;
std::mutex g_ranges_mutex;  // registration only; the handler reads the atomics
// Heap names, interned and never freed (a handler on another thread may be reading one): a deque
// keeps each string where it is as it grows.
std::deque<std::string>* g_names = new std::deque<std::string>;

const char* intern(const std::string& name) {
  for (const std::string& n : *g_names) {
    if (n == name) return n.c_str();
  }
  return g_names->emplace_back(name).c_str();
}
struct sigaction g_previous{};
std::once_flag g_install_once;

// volatile: the stores around the touching loop must not be merged away (the loop's faults are
// the only readers).
thread_local sigjmp_buf* volatile t_touch_env = nullptr;

void write_all(const char* s) {
  std::size_t n = std::strlen(s);
  while (n > 0) {
    const ssize_t w = ::write(STDERR_FILENO, s, n);
    if (w <= 0) return;
    s += w;
    n -= static_cast<std::size_t>(w);
  }
}

void on_sigbus(int sig, siginfo_t* info, void* context) {
  if (sigjmp_buf* env = t_touch_env) siglongjmp(*env, 1);
  const auto addr = reinterpret_cast<std::uintptr_t>(info->si_addr);
  for (const Range& r : g_ranges) {
    const std::uintptr_t b = r.begin.load(std::memory_order_acquire);
    if (b == 0 || addr < b || addr >= r.end.load(std::memory_order_acquire)) continue;
    write_all("strata: fatal: a page of the slow-tier heap '");
    const char* what = r.what.load(std::memory_order_acquire);
    write_all(what != nullptr ? what : "?");
    write_all(
        "' could not be backed (SIGBUS: its file system is full, or the file was truncated or failed); "
        "free space there or choose another slow-tier directory (STRATA_SLOW_DIR, --slow-dir)\n");
    _exit(kSlowTierFaultExitCode);
  }
  // Not ours: hand it to whoever was there before, or die of it as the default action would.
  if (g_previous.sa_flags & SA_SIGINFO) {
    if (g_previous.sa_sigaction != nullptr) return g_previous.sa_sigaction(sig, info, context);
  } else if (g_previous.sa_handler != SIG_DFL && g_previous.sa_handler != SIG_IGN && g_previous.sa_handler != nullptr) {
    return g_previous.sa_handler(sig);
  }
  signal(sig, SIG_DFL);  // returning re-executes the faulting access, which now kills the process
}

void install_handler() {
  struct sigaction sa{};
  sa.sa_sigaction = on_sigbus;
  sa.sa_flags = SA_SIGINFO | SA_NODEFER;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGBUS, &sa, &g_previous);
}

}  // namespace

void register_fault_range(const void* base, std::size_t bytes, const std::string& what) {
  std::call_once(g_install_once, install_handler);
  std::lock_guard<std::mutex> lock(g_ranges_mutex);
  for (Range& r : g_ranges) {
    if (r.begin.load(std::memory_order_relaxed) != 0) continue;
    r.what.store(intern(what), std::memory_order_release);
    r.end.store(reinterpret_cast<std::uintptr_t>(base) + bytes, std::memory_order_release);
    r.begin.store(reinterpret_cast<std::uintptr_t>(base), std::memory_order_release);
    return;
  }
  // More ranges than slots: the range is still backed, only an unguarded fault on it goes unnamed.
}

void unregister_fault_range(const void* base) {
  std::lock_guard<std::mutex> lock(g_ranges_mutex);
  for (Range& r : g_ranges) {
    if (r.begin.load(std::memory_order_relaxed) == reinterpret_cast<std::uintptr_t>(base)) {
      r.begin.store(0, std::memory_order_release);
      return;
    }
  }
}

bool touch_pages(void* base, std::size_t bytes) {
  std::call_once(g_install_once, install_handler);
  const auto page = static_cast<std::size_t>(sysconf(_SC_PAGE_SIZE));
  volatile char* p = static_cast<char*>(base);
  sigjmp_buf env;
  // sigsetjmp(..., 1) restores the signal mask on the jump, so SIGBUS is deliverable again.
  if (sigsetjmp(env, 1) != 0) {
    t_touch_env = nullptr;
    return false;
  }
  t_touch_env = &env;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  for (std::size_t off = 0; off < bytes; off += page) p[off] = p[off];
  if (bytes > 0) p[bytes - 1] = p[bytes - 1];
  std::atomic_signal_fence(std::memory_order_seq_cst);
  t_touch_env = nullptr;
  return true;
}

}  // namespace strata::memory
