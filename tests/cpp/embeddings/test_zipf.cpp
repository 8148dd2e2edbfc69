// Zipf sampling, generalized harmonic numbers, the LFSR permutation, and ZipfSource (skewed requests
// with scrambling and reuse). Statistical checks use fixed seeds and 5-sigma binomial tolerances.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <numeric>
#include <set>
#include <vector>

#include "core/error.h"
#include "embeddings/index_source.h"
#include "embeddings/zipf.h"
#include "tests/cpp/error_text.h"

using namespace strata;
using namespace strata::emb;
using ::testing::HasSubstr;

namespace {

using strata::testing_util::message_of;

/// |observed - n p| within 5 binomial standard deviations.
void expect_binomial(int64_t observed, int64_t n, double p, const std::string& what) {
  const double sd = std::sqrt(static_cast<double>(n) * p * (1.0 - p));
  EXPECT_NEAR(static_cast<double>(observed), static_cast<double>(n) * p, 5.0 * sd + 1e-9) << what;
}

long double direct_harmonic(int64_t n, double s) {
  long double sum = 0.0L;
  for (int64_t k = n; k >= 1; --k) sum += std::pow(static_cast<long double>(k), -static_cast<long double>(s));
  return sum;
}

// ---- factoring 2^w - 1 for the primitivity check --------------------------------------------------

uint64_t mulmod(uint64_t a, uint64_t b, uint64_t m) {
  return static_cast<uint64_t>(static_cast<unsigned __int128>(a) * b % m);
}

uint64_t powmod(uint64_t a, uint64_t e, uint64_t m) {
  uint64_t r = 1 % m;
  a %= m;
  for (; e != 0; e >>= 1) {
    if (e & 1u) r = mulmod(r, a, m);
    a = mulmod(a, a, m);
  }
  return r;
}

bool is_prime(uint64_t n) {  // deterministic Miller-Rabin for 64-bit n
  if (n < 2) return false;
  for (uint64_t p : {2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37}) {
    if (n % p == 0) return n == p;
  }
  uint64_t d = n - 1;
  int r = 0;
  while ((d & 1u) == 0) {
    d >>= 1;
    ++r;
  }
  for (uint64_t a : {2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37}) {
    uint64_t x = powmod(a, d, n);
    if (x == 1 || x == n - 1) continue;
    bool composite = true;
    for (int i = 1; i < r && composite; ++i) {
      x = mulmod(x, x, n);
      if (x == n - 1) composite = false;
    }
    if (composite) return false;
  }
  return true;
}

uint64_t pollard_rho(uint64_t n) {
  if (n % 2 == 0) return 2;
  for (uint64_t c = 1;; ++c) {
    uint64_t x = 2, y = 2, d = 1;
    auto f = [&](uint64_t v) { return (mulmod(v, v, n) + c) % n; };
    while (d == 1) {
      x = f(x);
      y = f(f(y));
      d = std::gcd(x > y ? x - y : y - x, n);
    }
    if (d != n) return d;
  }
}

void factor(uint64_t n, std::set<uint64_t>& primes) {
  if (n == 1) return;
  if (is_prime(n)) {
    primes.insert(n);
    return;
  }
  for (uint64_t p = 2; p < 1000; ++p) {
    if (n % p == 0) {
      primes.insert(p);
      while (n % p == 0) n /= p;
      factor(n, primes);
      return;
    }
  }
  const uint64_t d = pollard_rho(n);
  factor(d, primes);
  factor(n / d, primes);
}

}  // namespace

// ---- generalized harmonic numbers ---------------------------------------------------------------

TEST(GeneralizedHarmonic, MatchesDirectSummationBeyondTheExactPart) {
  for (double s : {0.5, 1.0, 1.05, 2.0}) {
    for (int64_t n : {int64_t{1}, int64_t{1000}, int64_t{65536}, int64_t{65537}, int64_t{100000}}) {
      const long double ref = direct_harmonic(n, s);
      EXPECT_NEAR(generalized_harmonic(n, s), static_cast<double>(ref), 1e-12 * static_cast<double>(ref))
          << "n " << n << " s " << s;
    }
  }
  EXPECT_EQ(generalized_harmonic(0, 1.0), 0.0);
}

TEST(GeneralizedHarmonic, StaticOptimumOfReference) {
  // REFERENCE.md §2: N = 10M, s = 1.05: 0.88 at 5 %, 0.91 at 10 %.
  EXPECT_NEAR(zipf_static_hit_rate(10'000'000, 1.05, 500'000), 0.88, 0.005);
  EXPECT_NEAR(zipf_static_hit_rate(10'000'000, 1.05, 1'000'000), 0.91, 0.005);
  EXPECT_EQ(zipf_static_hit_rate(100, 1.05, 0), 0.0);
  EXPECT_EQ(zipf_static_hit_rate(100, 1.05, 100), 1.0);
}

// ---- ZipfSampler ---------------------------------------------------------------------------------

TEST(ZipfSampler, SmallSupportMatchesTheExactDistribution) {
  for (double s : {0.6, 1.0, 1.2, 3.0}) {
    const int64_t n_values = 10;
    ZipfSampler zipf(n_values, s);
    RandomStream rng(42);
    const int64_t samples = 200000;
    std::vector<int64_t> counts(static_cast<std::size_t>(n_values + 1), 0);
    for (int64_t i = 0; i < samples; ++i) {
      const int64_t k = zipf(rng);
      ASSERT_GE(k, 1);
      ASSERT_LE(k, n_values);
      ++counts[static_cast<std::size_t>(k)];
    }
    const double h = static_cast<double>(direct_harmonic(n_values, s));
    for (int64_t k = 1; k <= n_values; ++k) {
      expect_binomial(counts[static_cast<std::size_t>(k)], samples, std::pow(static_cast<double>(k), -s) / h,
                      "s " + std::to_string(s) + " k " + std::to_string(k));
    }
  }
}

TEST(ZipfSampler, TopRowsOfAHugeSupport) {
  // N = 1e9, s = 1.05: P(1) = 1 / H(N, s), P(X <= 100) = H(100, s) / H(N, s).
  const int64_t n = 1'000'000'000;
  const double s = 1.05;
  ZipfSampler zipf(n, s);
  RandomStream rng(7);
  const int64_t samples = 400000;
  int64_t ones = 0, top100 = 0, upper_half = 0;
  for (int64_t i = 0; i < samples; ++i) {
    const int64_t k = zipf(rng);
    ASSERT_GE(k, 1);
    ASSERT_LE(k, n);
    ones += k == 1;
    top100 += k <= 100;
    upper_half += k > n / 2;
  }
  const double hn = generalized_harmonic(n, s);
  expect_binomial(ones, samples, 1.0 / hn, "P(1)");
  expect_binomial(top100, samples, generalized_harmonic(100, s) / hn, "P(X <= 100)");
  expect_binomial(upper_half, samples, (hn - generalized_harmonic(n / 2, s)) / hn, "P(X > N/2)");
}

TEST(ZipfSampler, SingleValueAndBadParameters) {
  ZipfSampler one(1, 1.5);
  RandomStream rng(1);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(one(rng), 1);
  EXPECT_THAT(message_of([] { ZipfSampler z(0, 1.0); }), HasSubstr("number of values must be positive, got 0"));
  EXPECT_THAT(message_of([] { ZipfSampler z(10, 0.0); }), HasSubstr("exponent must be positive and finite, got 0"));
  EXPECT_THAT(message_of([] { ZipfSampler z(10, -1.0); }), HasSubstr("exponent must be positive"));
}

// ---- LFSR permutation -----------------------------------------------------------------------------

TEST(LfsrPermutation, MasksHaveFullPeriodUpTo22Bits) {
  for (int w = 4; w <= 22; ++w) {
    LfsrPermutation lfsr((int64_t{1} << (w - 1)), 1);  // a width-w register
    ASSERT_EQ(lfsr.width(), w);
    const uint64_t period = (uint64_t{1} << w) - 1;
    uint64_t x = 1;
    uint64_t steps = 0;
    do {
      x = lfsr.step(x);
      ++steps;
      ASSERT_NE(x, 0u);
    } while (x != 1 && steps <= period);
    EXPECT_EQ(steps, period) << "width " << w;
  }
}

TEST(LfsrPermutation, MasksArePrimitiveUpTo63Bits) {
  // The step matrix A has order 2^w - 1 (so every nonzero state is on one cycle) iff
  // A^(2^w - 1) x = x and A^((2^w - 1) / q) x != x for each prime q of 2^w - 1 (x != 0).
  for (int w = 4; w <= 63; ++w) {
    LfsrPermutation lfsr((int64_t{1} << (w - 1)), 3);
    ASSERT_EQ(lfsr.width(), w);
    const uint64_t order = (uint64_t{1} << w) - 1;
    std::set<uint64_t> primes;
    factor(order, primes);
    const uint64_t x = lfsr.start_state();
    EXPECT_EQ(lfsr.jump(x, order), x) << "width " << w;
    for (uint64_t q : primes) EXPECT_NE(lfsr.jump(x, order / q), x) << "width " << w << " prime " << q;
  }
}

TEST(LfsrPermutation, JumpEqualsSteppingAndComposes) {
  LfsrPermutation lfsr(1'000'003, 99);
  uint64_t x = lfsr.start_state();
  for (uint64_t k = 0; k < 5000; ++k) {
    ASSERT_EQ(lfsr.jump(lfsr.start_state(), k), x) << k;
    x = lfsr.step(x);
  }
  RandomStream rng(3);
  const uint64_t period = (uint64_t{1} << lfsr.width()) - 1;
  for (int i = 0; i < 1000; ++i) {
    const uint64_t a = rng.below(period / 2), b = rng.below(period / 2);
    ASSERT_EQ(lfsr.jump(lfsr.jump(lfsr.start_state(), a), b), lfsr.jump(lfsr.start_state(), a + b));
  }
}

TEST(LfsrPermutation, IsABijectionForEverySize) {
  for (int64_t n : {int64_t{1}, int64_t{2}, int64_t{3}, int64_t{15}, int64_t{16}, int64_t{17}, int64_t{1000},
                    int64_t{65536}, int64_t{100003}}) {
    for (uint64_t seed : {uint64_t{0}, uint64_t{1}, uint64_t{12345}}) {
      LfsrPermutation perm(n, seed);
      std::vector<char> hit(static_cast<std::size_t>(n), 0);
      for (int64_t k = 0; k < n; ++k) {
        const int64_t v = perm(k);
        ASSERT_GE(v, 0);
        ASSERT_LT(v, n);
        ASSERT_EQ(hit[static_cast<std::size_t>(v)], 0) << "n " << n << " value " << v << " twice";
        hit[static_cast<std::size_t>(v)] = 1;
      }
    }
  }
}

TEST(LfsrPermutation, ScattersHotRanksDifferentlyPerPhase) {
  const int64_t n = 1'000'000;
  LfsrPermutation a(n, 1), b(n, 2);
  std::vector<int64_t> first_a, first_b;
  for (int64_t k = 0; k < 64; ++k) {
    first_a.push_back(a(k));
    first_b.push_back(b(k));
  }
  EXPECT_NE(first_a, first_b);
  const auto [lo, hi] = std::minmax_element(first_a.begin(), first_a.end());
  EXPECT_GT(*hi - *lo, n / 2);  // the 64 hottest rows spread over the table
  EXPECT_FALSE(std::is_sorted(first_a.begin(), first_a.end()));
  // Huge tables: no table, values in range and distinct.
  const int64_t huge = (int64_t{1} << 40) + 5;
  LfsrPermutation h(huge, 5);
  std::set<int64_t> seen;
  for (int64_t k = 0; k < 20000; ++k) {
    const int64_t v = h(k * 54'975'581);  // ranks spread over [0, huge)
    ASSERT_GE(v, 0);
    ASSERT_LT(v, huge);
    seen.insert(v);
  }
  EXPECT_EQ(seen.size(), 20000u);
  EXPECT_THAT(message_of([&] { a(n); }), HasSubstr("rank 1000000 is out of range [0, 1000000)"));
  EXPECT_THAT(message_of([] { LfsrPermutation p(0, 1); }), HasSubstr("n must be in [1, 2^62], got 0"));
}

// ---- ZipfSource -----------------------------------------------------------------------------------

namespace {

ZipfConfig base_config() {
  ZipfConfig c;
  c.rows = {1000};
  c.num_dense = 3;
  c.batch_size = 4096;
  c.num_batches = 5;
  c.bag_size = 1;
  c.alpha = 1.2;
  return c;
}

std::map<int64_t, int64_t> row_counts(ZipfSource& src, int64_t table, int64_t* total) {
  std::map<int64_t, int64_t> counts;
  Batch b;
  *total = 0;
  while (src.next(b)) {
    for (int64_t x : b.tables[static_cast<std::size_t>(table)].indices) {
      EXPECT_GE(x, 0);
      ++counts[x];
      ++*total;
    }
  }
  return counts;
}

}  // namespace

TEST(ZipfSource, AlphaAtMostOneIsUniform) {
  ZipfConfig c = base_config();
  c.rows = {10};
  c.alpha = 1.0;
  c.bag_size = 3;
  ZipfSource src(c);
  EXPECT_FALSE(src.zipf());
  EXPECT_EQ(src.describe(), "uniform(L=3, reuse=0)");
  Batch b;
  int64_t total = 0;
  std::vector<int64_t> counts(10, 0);
  while (src.next(b)) {
    const auto& s = b.tables[0];
    ASSERT_EQ(b.batch, 4096);
    for (int64_t i = 0; i < b.batch; ++i) {
      ASSERT_EQ(s.offsets[i + 1] - s.offsets[i], 3);
      ASSERT_TRUE(std::is_sorted(s.indices.begin() + s.offsets[i], s.indices.begin() + s.offsets[i + 1]));
    }
    for (int64_t x : s.indices) {
      ASSERT_LT(x, 10);
      ++counts[static_cast<std::size_t>(x)];
      ++total;
    }
    for (float x : b.dense) ASSERT_TRUE(x >= 0.0f && x < 1.0f);
  }
  for (int64_t r = 0; r < 10; ++r) {
    expect_binomial(counts[static_cast<std::size_t>(r)], total, 0.1, "row " + std::to_string(r));
  }
}

TEST(ZipfSource, UnscrambledRanksFollowZipf) {
  ZipfConfig c = base_config();
  c.scramble = Scramble::None;
  ZipfSource src(c);
  EXPECT_TRUE(src.zipf());
  int64_t total = 0;
  auto counts = row_counts(src, 0, &total);
  EXPECT_EQ(total, 5 * 4096);
  const double h = generalized_harmonic(1000, 1.2);
  for (int64_t r : {0, 1, 2, 9}) {
    expect_binomial(counts[r], total, std::pow(static_cast<double>(r + 1), -1.2) / h, "rank " + std::to_string(r));
  }
}

TEST(ZipfSource, LfsrScramblingMovesTheHotRowsPerTable) {
  ZipfConfig c = base_config();
  c.rows = {1000, 1000};
  c.scramble = Scramble::Lfsr;
  ZipfSource src(c);
  EXPECT_EQ(src.describe(), "zipf(alpha=1.2, lfsr, L=1, reuse=0)");
  // row_of_rank is a bijection per table and differs between tables (a phase per table).
  std::set<int64_t> rows0;
  int64_t same = 0;
  for (int64_t k = 0; k < 1000; ++k) {
    rows0.insert(src.row_of_rank(0, k));
    same += src.row_of_rank(0, k) == src.row_of_rank(1, k);
  }
  EXPECT_EQ(rows0.size(), 1000u);
  EXPECT_LT(same, 20);
  EXPECT_NE(src.row_of_rank(0, 0), 0);
  int64_t total = 0;
  auto counts = row_counts(src, 1, &total);
  const double h = generalized_harmonic(1000, 1.2);
  for (int64_t k : {0, 1, 5}) {
    expect_binomial(counts[src.row_of_rank(1, k)], total, std::pow(static_cast<double>(k + 1), -1.2) / h,
                    "rank " + std::to_string(k));
  }
}

TEST(ZipfSource, PermutationScramblingIsABijection) {
  ZipfConfig c = base_config();
  c.scramble = Scramble::Permutation;
  c.num_batches = 1;
  ZipfSource src(c);
  std::set<int64_t> rows;
  for (int64_t k = 0; k < 1000; ++k) rows.insert(src.row_of_rank(0, k));
  EXPECT_EQ(rows.size(), 1000u);
  EXPECT_EQ(*rows.rbegin(), 999);
  c.max_permutation_rows = 999;
  EXPECT_THAT(message_of([&] { ZipfSource s(c); }),
              HasSubstr("table 0 has 1000 rows; a permutation of more than 999 rows is not built"));
  EXPECT_EQ(parse_scramble("lfsr"), Scramble::Lfsr);
  EXPECT_THAT(message_of([] { parse_scramble("hash"); }),
              HasSubstr("scramble 'hash' is not supported; expected none, permutation or lfsr"));
}

TEST(ZipfSource, ZipfBagsHoldTheFirstDistinctIndices) {
  ZipfConfig c = base_config();
  c.rows = {50, 1000};
  c.alpha = 1.5;
  c.bag_size = 8;
  c.num_batches = 2;
  ZipfSource src(c);
  Batch b;
  while (src.next(b)) {
    for (int64_t t = 0; t < 2; ++t) {
      const auto& s = b.tables[static_cast<std::size_t>(t)];
      for (int64_t i = 0; i < b.batch; ++i) {
        std::set<int64_t> bag(s.indices.begin() + s.offsets[i], s.indices.begin() + s.offsets[i + 1]);
        ASSERT_EQ(bag.size(), 8u);
        ASSERT_LT(*bag.rbegin(), c.rows[static_cast<std::size_t>(t)]);
      }
    }
  }
  c.rows = {7};
  EXPECT_THAT(message_of([&] { ZipfSource s(c); }),
              HasSubstr("bag size 8 exceeds the 7 distinct indices table 0 can produce"));
  c.rows = {1000000};
  c.alpha = 40.0;  // virtually every draw is rank 1
  ZipfSource skewed(c);
  EXPECT_THAT(message_of([&] { skewed.next(b); }), HasSubstr("distinct indices for a bag of 8"));
}

TEST(ZipfSource, ReuseCopiesTheRequestedFractionOfSlots) {
  ZipfConfig c = base_config();
  c.rows = {int64_t{1} << 40, int64_t{1} << 40};  // uniform over 2^40 rows: chance repeats are negligible
  c.alpha = 0.5;
  c.bag_size = 4;
  c.batch_size = 1024;
  c.num_batches = 4;
  c.reuse = 0.3;
  ZipfSource src(c);
  Batch b;
  std::vector<std::vector<int64_t>> prev(2);
  for (int64_t j = 0; src.next(b); ++j) {
    for (std::size_t t = 0; t < 2; ++t) {
      const auto& cur = b.tables[t].indices;
      ASSERT_EQ(cur.size(), 4096u);
      if (j > 0) {
        int64_t same = 0;
        for (std::size_t i = 0; i < cur.size(); ++i) same += cur[i] == prev[t][i];
        EXPECT_EQ(same, 1228) << "batch " << j << " table " << t;  // floor(4096 * 0.3)
      }
      prev[t] = cur;
    }
  }
}

TEST(ZipfSource, DeterministicResettableAndVariableBags) {
  ZipfConfig c = base_config();
  c.rows = {5000, 300};
  c.bag_size = 6;
  c.variable_bag_size = true;
  c.num_batches = 2;
  c.batch_size = 512;
  c.reuse = 0.2;
  c.per_sample_weights = true;
  ZipfSource a(c), b(c);
  Batch x, y;
  ASSERT_TRUE(a.next(x));
  ASSERT_TRUE(a.next(x));
  ASSERT_TRUE(b.next(y));
  ASSERT_TRUE(b.next(y));
  for (std::size_t t = 0; t < 2; ++t) {
    EXPECT_EQ(x.tables[t].indices, y.tables[t].indices);
    EXPECT_EQ(x.tables[t].weights, y.tables[t].weights);
    EXPECT_EQ(x.tables[t].weights.size(), x.tables[t].indices.size());
    for (int64_t i = 0; i < x.batch; ++i) {
      const int64_t n = x.tables[t].offsets[i + 1] - x.tables[t].offsets[i];
      ASSERT_GE(n, 1);
      ASSERT_LE(n, 6);
    }
  }
  EXPECT_FALSE(a.next(x));
  a.reset();
  b.reset();
  ASSERT_TRUE(a.next(x));
  ASSERT_TRUE(b.next(y));
  EXPECT_EQ(x.tables[0].indices, y.tables[0].indices);
  EXPECT_EQ(x.dense, y.dense);
  EXPECT_EQ(x.targets, y.targets);
  // The Zipf(1) of the dissertation: alpha = 1 with uniform_at_or_below_one off.
  c.alpha = 1.0;
  c.uniform_at_or_below_one = false;
  EXPECT_TRUE(ZipfSource(c).zipf());
}

TEST(ZipfSource, BadConfigurationsAreRejected) {
  ZipfConfig c = base_config();
  c.alpha = 0.0;
  EXPECT_THAT(message_of([&] { ZipfSource s(c); }), HasSubstr("alpha must be positive, got 0"));
  c.alpha = 1.1;
  c.reuse = 1.5;
  EXPECT_THAT(message_of([&] { ZipfSource s(c); }), HasSubstr("reuse must be in [0, 1], got 1.5"));
  c.reuse = 0.0;
  c.rows = {};
  EXPECT_THAT(message_of([&] { ZipfSource s(c); }), HasSubstr("zipf source: no embedding tables"));
  c.rows = {-5};
  EXPECT_THAT(message_of([&] { ZipfSource s(c); }), HasSubstr("table 0 has -5 rows"));
  c.rows = {10};
  c.batch_size = 0;
  EXPECT_THAT(message_of([&] { ZipfSource s(c); }), HasSubstr("batch_size must be positive, got 0"));
  c.batch_size = 4;
  c.bag_size = -1;
  EXPECT_THAT(message_of([&] { ZipfSource s(c); }), HasSubstr("bag_size must not be negative, got -1"));
  c.bag_size = 1;
  EXPECT_THAT(message_of([&] {
                ZipfSource s(c);
                s.row_of_rank(1, 0);
              }),
              HasSubstr("table 1 does not exist"));
}
