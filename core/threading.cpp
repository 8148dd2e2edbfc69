#include "core/threading.h"

#include <tbb/blocked_range.h>
#include <tbb/global_control.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "core/config.h"
#include "core/error.h"
#include "core/text.h"

// Note [TSan and TBB]
// libtbb is not instrumented, so ThreadSanitizer cannot see its synchronization and reports
// hundreds of races in TBB's own task bookkeeping (partitioner tree nodes recycled through its
// small-object pool). No suppression can hide only those: Strata's kernel bodies run inside the
// same partitioner frames. So a TSan build runs parallel_for on plain std::threads (chunks split
// like TBB's, at most get_num_threads() of them), which TSan understands completely: every race in
// a Strata kernel is reported and nothing is suppressed. The Release and ASan trees test the TBB
// path itself.
#if defined(__SANITIZE_THREAD__)
#define STRATA_TSAN 1
#include <thread>
#include <vector>
#else
#define STRATA_TSAN 0
#endif

namespace strata {

namespace {

struct ThreadSettings {
  std::mutex mutex;
  std::unique_ptr<tbb::global_control> control;
  std::atomic<int> num_threads{0};  // read lock-free on every parallel region

  ThreadSettings() {
    int n = static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, static_cast<unsigned>(kMaxThreads)));
    if (const std::optional<int> env = environment::num_threads()) n = *env;
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

thread_local int serial_depth = 0;  // run_serially regions open on this thread

/// Marks the thread serial for its lifetime (Note [Serial regions]).
struct SerialScope {
  SerialScope() { ++serial_depth; }
  ~SerialScope() { --serial_depth; }
  SerialScope(const SerialScope&) = delete;
  SerialScope& operator=(const SerialScope&) = delete;
};

}  // namespace

std::string bad_num_threads_message(std::string_view what, std::string_view got) {
  return detail::format_message(what, ": expected a thread count in [1, ", kMaxThreads, "], got ", got);
}

void check_num_threads(int64_t n, std::string_view what) {
  // See Note [One thread count bound].
  STRATA_CHECK(valid_num_threads(n), bad_num_threads_message(what, std::to_string(n)));
}

int parse_num_threads(std::string_view text, std::string_view what) {
  int64_t n = 0;
  const char* last = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), last, n);
  const bool digits = !text.empty() && text.front() != '-';
  STRATA_CHECK(digits && ec == std::errc() && ptr == last && valid_num_threads(n),
               bad_num_threads_message(what, quote_field(text)));
  return static_cast<int>(n);
}

void set_num_threads(int n) {
  check_num_threads(n, "set_num_threads");
  auto& s = settings();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.apply(n);
}

int get_num_threads() { return settings().num_threads.load(std::memory_order_acquire); }

void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  if (n <= grain || get_num_threads() == 1 || serial_depth > 0) {
    fn(0, n);
    return;
  }
#if STRATA_TSAN
  // Even split into at most n / grain chunks: every chunk holds at least `grain` elements.
  const int64_t chunks = std::max<int64_t>(1, std::min<int64_t>(get_num_threads(), n / grain));
  const int64_t base = n / chunks, rem = n % chunks;
  auto bound = [&](int64_t c) { return c * base + std::min(c, rem); };
  std::vector<std::thread> workers;
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(chunks));
  for (int64_t c = 1; c < chunks; ++c) {
    workers.emplace_back([&, c] {
      try {
        fn(bound(c), bound(c + 1));
      } catch (...) {
        errors[static_cast<std::size_t>(c)] = std::current_exception();
      }
    });
  }
  try {
    fn(0, bound(1));
  } catch (...) {
    errors[0] = std::current_exception();
  }
  for (auto& w : workers) w.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
#else
  // TBB halves a range while it is larger than its grainsize, so a grainsize of 2*grain-1 leaves
  // chunks of at least `grain` elements.
  tbb::parallel_for(tbb::blocked_range<int64_t>(0, n, 2 * std::min<int64_t>(grain, INT64_MAX / 2) - 1),
                    [&](const tbb::blocked_range<int64_t>& r) { fn(r.begin(), r.end()); });
#endif
}

void run_serially(const std::function<void()>& fn) {
#if STRATA_TSAN
  SerialScope scope;  // no TBB here (Note [TSan and TBB]); the GEMMs take Strata's own kernel
  fn();
#else
  // The scope opens inside execute(): it marks whichever thread runs fn (the caller, whose slot
  // a fresh arena of one always has free).
  tbb::task_arena one(1);
  one.execute([&] {
    SerialScope scope;
    fn();
  });
#endif
}

bool in_serial_region() { return serial_depth > 0; }

}  // namespace strata
