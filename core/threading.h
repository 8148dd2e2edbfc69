#pragma once
/// @file
/// Thread settings: the one place that sets how many threads Strata's kernels use.
///
/// Note [One thread count]
/// Strata's own kernels run on TBB and oneDNN's CPU kernels run on TBB too, so a single
/// `tbb::global_control` caps both. `set_num_threads(n)` installs it; every parallel region in
/// Strata (and every oneDNN primitive executed from a Strata thread) then uses at most n threads.
/// Benchmarks compare against peers at the same count (PyTorch: torch.set_num_threads).
///
/// Note [One thread count bound]
/// TBB takes any count: after set_num_threads(10^9) one 512x512 matmul used 12.5 GB and did not
/// finish. Every
/// way to set the count therefore checks it against kMaxThreads with the same message
/// (bad_num_threads_message): set_num_threads, STRATA_NUM_THREADS, the Python binding (where an
/// int too large for C is the same ValueError) and the binaries' --threads flags.

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace strata {

/// The most threads Strata accepts from any caller: set_num_threads, STRATA_NUM_THREADS,
/// strata.set_num_threads and the binaries' --threads (Note [One thread count bound]).
inline constexpr int kMaxThreads = 4096;

/// Whether n is a thread count Strata accepts: 1 <= n <= kMaxThreads.
constexpr bool valid_num_threads(int64_t n) { return n >= 1 && n <= kMaxThreads; }
/// The one message for a rejected thread count: "<what>: expected a thread count in [1, 4096],
/// got <got>" (`got` already formatted: a number, or quoted text).
std::string bad_num_threads_message(std::string_view what, std::string_view got);
/// Throws strata::Error with bad_num_threads_message unless valid_num_threads(n).
void check_num_threads(int64_t n, std::string_view what);
/// Parses a thread count given as text (an environment variable, a flag's value): decimal digits
/// only, in [1, kMaxThreads]; throws strata::Error with bad_num_threads_message otherwise.
int parse_num_threads(std::string_view text, std::string_view what);

/// Caps the threads used by Strata's kernels and oneDNN. 1 <= n <= kMaxThreads; throws
/// strata::Error otherwise.
void set_num_threads(int n);
/// The current cap (by default the number of hardware threads, or STRATA_NUM_THREADS if set).
int get_num_threads();

/// Runs fn(begin, end) over [0, n) in chunks of at least `grain` elements (fewer only when n itself
/// is smaller), in parallel when n > grain; serially (one call) otherwise, and always serially inside
/// run_serially. Exceptions from fn propagate.
void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

/// Note [Serial regions]
/// A kernel that hands each thread its own share of a job (the row blocks of linear_stack, Note
/// [Row blocks through a linear stack] in ops/linalg.cpp) and calls parallel routines on that share
/// wants them on the calling thread alone: nested, they would split every small GEMM across the
/// threads that are busy with their own shares. run_serially(fn) runs fn() on the calling thread
/// inside a TBB arena of one slot, so oneDNN (whose threads are TBB's) runs on this thread only, and
/// marks the thread so that parallel_for inside runs as one chunk without entering TBB at all.
/// Exceptions from fn propagate; regions nest.
void run_serially(const std::function<void()>& fn);
/// Whether the calling thread is inside run_serially.
bool in_serial_region();

}  // namespace strata
