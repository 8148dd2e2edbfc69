#pragma once
/// @file
/// Thread settings: the one place that sets how many threads Strata's kernels use.
///
/// Note [One thread count]
/// Strata's own kernels run on TBB and oneDNN's CPU kernels run on TBB too, so a single
/// `tbb::global_control` caps both. `set_num_threads(n)` installs it; every parallel region in
/// Strata (and every oneDNN primitive executed from a Strata thread) then uses at most n threads.
/// Benchmarks compare against peers at the same count (PyTorch: torch.set_num_threads).

#include <cstdint>
#include <functional>

namespace strata {

/// Caps the threads used by Strata's kernels and oneDNN. n >= 1; throws strata::Error otherwise.
void set_num_threads(int n);
/// The current cap (by default the number of hardware threads, or STRATA_NUM_THREADS if set).
int get_num_threads();

/// Runs fn(begin, end) over [0, n) in chunks of at least `grain` elements (fewer only when n itself
/// is smaller), in parallel when n > grain; serially (one call) otherwise. Exceptions from fn
/// propagate.
void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

}  // namespace strata
