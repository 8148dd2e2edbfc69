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

// sum_{k=lo..hi} k^-s, smallest terms first.
double direct_sum(int64_t lo, int64_t hi, double s) {
  double sum = 0.0;
  for (int64_t k = hi; k >= lo; --k) sum += std::pow(static_cast<double>(k), -s);
  return sum;
}

}  // namespace

double generalized_harmonic(int64_t n, double s) {
  check_exponent(s, "generalized_harmonic");
  STRATA_CHECK(n >= 0, "generalized_harmonic: n must be >= 0, got ", n);
  constexpr int64_t kExact = 2000;
  constexpr int64_t kHead = 1000;  // Euler–Maclaurin from m = kHead: its error terms are ~m^-(s+7)
  if (n <= kExact) return direct_sum(1, n, s);
  const double m = static_cast<double>(kHead);
  const double x = static_cast<double>(n);
  // integral_m^n x^-s dx, written to stay accurate as s -> 1.
  const double log_ratio = std::log(x / m);
  const double integral =
      std::abs(1.0 - s) < 1e-300 ? log_ratio : std::pow(m, 1.0 - s) * std::expm1((1.0 - s) * log_ratio) / (1.0 - s);
  auto f = [s](double t) { return std::pow(t, -s); };
  // Odd derivatives of f(t) = t^-s: f' = -s t^(-s-1), f''' = -s(s+1)(s+2) t^(-s-3), f^(5) = ...
  auto d1 = [s](double t) { return -s * std::pow(t, -s - 1.0); };
  auto d3 = [s](double t) { return -s * (s + 1.0) * (s + 2.0) * std::pow(t, -s - 3.0); };
  auto d5 = [s](double t) { return -s * (s + 1.0) * (s + 2.0) * (s + 3.0) * (s + 4.0) * std::pow(t, -s - 5.0); };
  // sum_{k=m..n} f(k) = integral + (f(m) + f(n)) / 2 + sum_j B_2j / (2j)! (f^(2j-1)(n) - f^(2j-1)(m)) + R
  const double tail = integral + 0.5 * (f(m) + f(x)) + (d1(x) - d1(m)) / 12.0 - (d3(x) - d3(m)) / 720.0 +
                      (d5(x) - d5(m)) / 30240.0;
  return direct_sum(1, kHead - 1, s) + tail;
}

double zipf_static_optimal_hit_rate(int64_t n, double s, double fraction) {
  check_exponent(s, "zipf_static_optimal_hit_rate");
  STRATA_CHECK(n > 0, "zipf_static_optimal_hit_rate: the number of rows must be positive, got ", n);
  STRATA_CHECK(std::isfinite(fraction) && fraction >= 0.0 && fraction <= 1.0,
               "zipf_static_optimal_hit_rate: the cached fraction must be in [0, 1], got ", fraction);
  const auto k = std::min<int64_t>(n, static_cast<int64_t>(std::floor(fraction * static_cast<double>(n))));
  if (k == 0) return 0.0;
  return generalized_harmonic(k, s) / generalized_harmonic(n, s);
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
