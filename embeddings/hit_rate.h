#pragma once
/// @file
/// Reference hit rates for embedding caches (REFERENCE.md §2): the static-optimal hit rate of a
/// cache holding the hottest fraction f of N rows under Zipf(s), H(fN, s) / H(N, s) (the
/// generalized harmonic numbers are embeddings/zipf.h's generalized_harmonic: an exact head plus
/// Euler–Maclaurin, so N up to 1e9 and beyond costs no more than a small N), and the empirical
/// static optimum of a recorded access trace (the share of its accesses that go to its k most
/// accessed rows: what a static cache filled with hindsight would hit).

#include <cstdint>
#include <span>
#include <vector>

#include "embeddings/zipf.h"

namespace strata::emb {

/// H(floor(fraction × n), s) / H(n, s): the hit rate of a cache holding the fraction of the n rows
/// that are most popular under Zipf(s) (rank k accessed with probability k^-s / H(n, s)); s = 0 is
/// the uniform distribution (floor(fraction × n) / n). Throws strata::Error for n <= 0, s not a
/// finite number >= 0, or fraction outside [0, 1].
double zipf_static_optimal_hit_rate(int64_t n, double s, double fraction);

/// Accesses per row of `trace` (indices in [0, nvectors)). Throws strata::Error naming the
/// position and the row of the first index out of range, or for nvectors <= 0.
std::vector<uint64_t> access_counts(std::span<const int64_t> trace, int64_t nvectors);

/// The share of `trace`'s accesses that go to its k most accessed rows (k clamped to nvectors;
/// 0 for an empty trace). Errors as access_counts, and for k < 0.
double empirical_static_optimum(std::span<const int64_t> trace, int64_t nvectors, int64_t k);

/// The (at most) k most accessed rows of `trace`, most accessed first, ties broken by the lower
/// row; rows never accessed are not listed. The static policy's fill when an access profile is
/// given. Errors as empirical_static_optimum.
std::vector<int64_t> hottest_rows(std::span<const int64_t> trace, int64_t nvectors, int64_t k);

}  // namespace strata::emb
