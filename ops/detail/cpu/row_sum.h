#pragma once
/// @file
/// Sums of short contiguous rows (internal to ops/): pooling to 1×1 and similar row reductions.

#include <cstdint>

namespace strata::ops::cpu {

/// x[0] + ... + x[n-1] accumulated in T with 16 independent partial sums, so the loop vectorizes
/// (two 8-float vectors) instead of running one dependent chain of scalar adds; the partial sums are
/// combined pairwise. The order of additions depends only on n.
template <typename T>
inline T row_sum(const T* __restrict x, int64_t n) {
  constexpr int kLanes = 16;
  T acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int k = 0; k < kLanes; ++k) acc[k] += x[i + k];
  for (int k = 0; i < n; ++i, ++k) acc[k] += x[i];
  for (int w = kLanes / 2; w > 0; w /= 2)
    for (int k = 0; k < w; ++k) acc[k] += acc[k + w];
  return acc[0];
}

}  // namespace strata::ops::cpu
