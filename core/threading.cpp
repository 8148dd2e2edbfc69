#include "core/threading.h"

#include <tbb/blocked_range.h>
#include <tbb/global_control.h>
#include <tbb/parallel_for.h>

#include <atomic>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "core/error.h"

namespace strata {

namespace {

struct ThreadSettings {
  std::mutex mutex;
  std::unique_ptr<tbb::global_control> control;
  std::atomic<int> num_threads{0};  // read lock-free on every parallel region

  ThreadSettings() {
    int n = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    if (const char* env = std::getenv("STRATA_NUM_THREADS")) {
      char* end = nullptr;
      const long v = std::strtol(env, &end, 10);
      STRATA_CHECK(end != env && *end == '\0' && v >= 1 && v <= 4096,
                   "STRATA_NUM_THREADS: expected a positive integer, got '", env, "'");
      n = static_cast<int>(v);
    }
    apply(n);
  }
  void apply(int n) {
    control.reset();  // at most one of ours alive at a time
    control = std::make_unique<tbb::global_control>(tbb::global_control::max_allowed_parallelism,
                                                    static_cast<std::size_t>(n));
    num_threads.store(n, std::memory_order_release);
  }
};

ThreadSettings& settings() {
  static ThreadSettings s;  // see Note [One thread count]
  return s;
}

}  // namespace

void set_num_threads(int n) {
  STRATA_CHECK(n >= 1, "set_num_threads: the thread count must be at least 1, got ", n);
  auto& s = settings();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.apply(n);
}

int get_num_threads() { return settings().num_threads.load(std::memory_order_acquire); }

void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  if (n <= grain || get_num_threads() == 1) {
    fn(0, n);
    return;
  }
  tbb::parallel_for(tbb::blocked_range<int64_t>(0, n, grain),
                    [&](const tbb::blocked_range<int64_t>& r) { fn(r.begin(), r.end()); });
}

}  // namespace strata
