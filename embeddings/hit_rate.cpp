#include "embeddings/hit_rate.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/error.h"

namespace strata::emb {

namespace {

void check_exponent(double s, const char* who) {
  STRATA_CHECK(std::isfinite(s) && s >= 0.0, who, ": the Zipf exponent s must be a finite number >= 0, got ", s);
}

}  // namespace

double zipf_static_optimal_hit_rate(int64_t n, double s, double fraction) {
  check_exponent(s, "zipf_static_optimal_hit_rate");
  STRATA_CHECK(n > 0, "zipf_static_optimal_hit_rate: the number of rows must be positive, got ", n);
  STRATA_CHECK(std::isfinite(fraction) && fraction >= 0.0 && fraction <= 1.0,
               "zipf_static_optimal_hit_rate: the cached fraction must be in [0, 1], got ", fraction);
  const auto k = std::min<int64_t>(n, static_cast<int64_t>(std::floor(fraction * static_cast<double>(n))));
  if (s == 0.0) return static_cast<double>(k) / static_cast<double>(n);
  return zipf_static_hit_rate(n, s, k);
}

std::vector<uint64_t> access_counts(std::span<const int64_t> trace, int64_t nvectors) {
  STRATA_CHECK(nvectors > 0, "access_counts: the number of rows must be positive, got ", nvectors);
  std::vector<uint64_t> counts(static_cast<std::size_t>(nvectors), 0);
  for (std::size_t i = 0; i < trace.size(); ++i) {
    const int64_t r = trace[i];
    STRATA_CHECK(r >= 0 && r < nvectors, "access trace: index ", r, " at position ", i, " is out of range [0, ",
                 nvectors, ")");
    ++counts[static_cast<std::size_t>(r)];
  }
  return counts;
}

namespace {

std::vector<int64_t> ranked_rows(const std::vector<uint64_t>& counts, int64_t k) {
  std::vector<int64_t> rows(counts.size());
  std::iota(rows.begin(), rows.end(), int64_t{0});
  auto hotter = [&](int64_t a, int64_t b) {
    const auto ca = counts[static_cast<std::size_t>(a)], cb = counts[static_cast<std::size_t>(b)];
    return ca != cb ? ca > cb : a < b;
  };
  const auto kk = static_cast<std::ptrdiff_t>(std::min<int64_t>(k, static_cast<int64_t>(rows.size())));
  std::partial_sort(rows.begin(), rows.begin() + kk, rows.end(), hotter);
  rows.resize(static_cast<std::size_t>(kk));
  return rows;
}

}  // namespace

double empirical_static_optimum(std::span<const int64_t> trace, int64_t nvectors, int64_t k) {
  STRATA_CHECK(k >= 0, "empirical_static_optimum: k must be >= 0, got ", k);
  const auto counts = access_counts(trace, nvectors);
  if (trace.empty()) return 0.0;
  uint64_t top = 0;
  for (int64_t r : ranked_rows(counts, k)) top += counts[static_cast<std::size_t>(r)];
  return static_cast<double>(top) / static_cast<double>(trace.size());
}

std::vector<int64_t> hottest_rows(std::span<const int64_t> trace, int64_t nvectors, int64_t k) {
  STRATA_CHECK(k >= 0, "hottest_rows: k must be >= 0, got ", k);
  const auto counts = access_counts(trace, nvectors);
  auto rows = ranked_rows(counts, k);
  while (!rows.empty() && counts[static_cast<std::size_t>(rows.back())] == 0) rows.pop_back();
  return rows;
}

}  // namespace strata::emb
