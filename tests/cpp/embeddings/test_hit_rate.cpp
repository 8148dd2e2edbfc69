// Static-optimal hit rates (REFERENCE.md §2): the Zipf static optimum H(fN, s) / H(N, s) (over
// zipf.h's generalized harmonic numbers), and the empirical optimum of a recorded trace.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <vector>

#include "core/error.h"
#include "embeddings/hit_rate.h"
#include "tests/cpp/error_text.h"

using namespace strata;
using namespace strata::emb;
using ::testing::HasSubstr;

namespace {

using strata::testing_util::message_of;

long double direct(int64_t n, long double s) {
  long double sum = 0;
  for (int64_t k = n; k >= 1; --k) sum += std::pow(static_cast<long double>(k), -s);
  return sum;
}

}  // namespace

TEST(HitRate, ZipfStaticOptimumMatchesDirectSummation) {
  // H(k, s) / H(n, s) against long-double sums of every term, on both sides of zipf.h's switch
  // from exact summation to Euler–Maclaurin (2^16 terms).
  for (double s : {0.5, 1.0, 1.05, 1.5, 2.0}) {
    for (int64_t n : {7, 2000, 70000, 200000}) {
      const long double hn = direct(n, s);
      for (double f : {0.01, 0.1, 0.5}) {
        const auto k = static_cast<int64_t>(std::floor(f * static_cast<double>(n)));
        const double ref = k == 0 ? 0.0 : static_cast<double>(direct(k, s) / hn);
        EXPECT_NEAR(zipf_static_optimal_hit_rate(n, s, f), ref, 1e-12) << "n " << n << " s " << s << " f " << f;
      }
    }
  }
}

TEST(HitRate, ZipfStaticOptimumReproducesTheReferenceValues) {
  // REFERENCE.md §2: N = 10M, s = 1.05: 0.88 at 5 %, 0.91 at 10 % (f64 summation of all 10M terms:
  // 0.8760592815, 0.9064088213).
  EXPECT_NEAR(zipf_static_optimal_hit_rate(10000000, 1.05, 0.05), 0.8760592815, 1e-9);
  EXPECT_NEAR(zipf_static_optimal_hit_rate(10000000, 1.05, 0.10), 0.9064088213, 1e-9);
  EXPECT_EQ(zipf_static_optimal_hit_rate(10000000, 1.05, 0.0), 0.0);
  EXPECT_EQ(zipf_static_optimal_hit_rate(10000000, 1.05, 1.0), 1.0);
  // Uniform (s = 0): the fraction itself.
  EXPECT_NEAR(zipf_static_optimal_hit_rate(1000000, 0.0, 0.1), 0.1, 1e-12);
  // A billion rows costs no more than a thousand. Independent reference for s > 1: the
  // Euler–Maclaurin expansion at infinity, H(n, s) = ζ(s) − n^(1−s) / (s − 1) + n^−s / 2 + O(n^(−s−1)).
  auto h_zeta = [](double n, double s) {
    return std::riemann_zeta(s) - std::pow(n, 1 - s) / (s - 1) + std::pow(n, -s) / 2;
  };
  for (double s : {1.05, 1.2, 2.0})
    EXPECT_NEAR(zipf_static_optimal_hit_rate(1000000000, s, 0.1), h_zeta(1e8, s) / h_zeta(1e9, s), 1e-10) << s;
}

TEST(HitRate, EmpiricalOptimumOfATrace) {
  const std::vector<int64_t> trace = {3, 3, 3, 1, 1, 2, 0, 3};
  EXPECT_DOUBLE_EQ(empirical_static_optimum(trace, 5, 0), 0.0);
  EXPECT_DOUBLE_EQ(empirical_static_optimum(trace, 5, 1), 4.0 / 8.0);
  EXPECT_DOUBLE_EQ(empirical_static_optimum(trace, 5, 2), 6.0 / 8.0);
  EXPECT_DOUBLE_EQ(empirical_static_optimum(trace, 5, 3), 7.0 / 8.0);
  EXPECT_DOUBLE_EQ(empirical_static_optimum(trace, 5, 99), 1.0);
  EXPECT_EQ(hottest_rows(trace, 5, 3), (std::vector<int64_t>{3, 1, 0}));      // tie 0/2: lower row first
  EXPECT_EQ(hottest_rows(trace, 5, 10), (std::vector<int64_t>{3, 1, 0, 2}));  // row 4 never accessed
  EXPECT_EQ(access_counts(trace, 5), (std::vector<uint64_t>{1, 2, 1, 4, 0}));
  EXPECT_DOUBLE_EQ(empirical_static_optimum({}, 5, 2), 0.0);
}

TEST(HitRate, BadInputGetsClearErrors) {
  EXPECT_THAT(message_of([] { zipf_static_optimal_hit_rate(10, -0.5, 0.1); }),
              HasSubstr("the Zipf exponent s must be a finite number >= 0, got -0.5"));
  EXPECT_THAT(message_of([] { zipf_static_optimal_hit_rate(10, std::numeric_limits<double>::quiet_NaN(), 0.1); }),
              HasSubstr("Zipf exponent s must be a finite number"));
  EXPECT_THAT(message_of([] { zipf_static_optimal_hit_rate(0, 1.0, 0.1); }),
              HasSubstr("the number of rows must be positive, got 0"));
  EXPECT_THAT(message_of([] { zipf_static_optimal_hit_rate(10, 1.0, 1.5); }),
              HasSubstr("the cached fraction must be in [0, 1], got 1.5"));
  const std::vector<int64_t> bad = {1, 2, 7, 0};
  EXPECT_THAT(message_of([&] { empirical_static_optimum(bad, 5, 1); }),
              HasSubstr("access trace: index 7 at position 2 is out of range [0, 5)"));
  EXPECT_THAT(message_of([&] { hottest_rows(std::vector<int64_t>{-3}, 5, 1); }),
              HasSubstr("index -3 at position 0 is out of range"));
  EXPECT_THAT(message_of([&] { hottest_rows({}, 5, -1); }), HasSubstr("k must be >= 0, got -1"));
  EXPECT_THAT(message_of([&] { access_counts({}, 0); }), HasSubstr("the number of rows must be positive, got 0"));
}
