// Index sources: the reference's random and synthetic generators (checked batch for batch against
// values the reference's own numpy code produces), Zipf requests with scrambling and reuse.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <vector>

#include "core/error.h"
#include "embeddings/index_source.h"
#include "tests/cpp/error_text.h"

using namespace strata;
using namespace strata::emb;
using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

namespace {

using strata::testing_util::message_of;

std::vector<int64_t> vec(const std::vector<int64_t>& v) { return v; }

struct TempDir {
  std::filesystem::path path;
  TempDir() {
    path = std::filesystem::temp_directory_path() /
           ("strata_index_source_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  std::string write(const std::string& name, const std::string& text) const {
    const auto p = path / name;
    std::ofstream(p) << text;
    return p.string();
  }
};

/// Checks that a batch's CSR arrays are well formed and every index is a row of its table.
void expect_well_formed(const Batch& b, std::span<const int64_t> rows) {
  ASSERT_EQ(b.num_tables(), static_cast<int64_t>(rows.size()));
  ASSERT_EQ(b.dense.size(), static_cast<std::size_t>(b.batch * b.num_dense));
  ASSERT_EQ(b.targets.size(), static_cast<std::size_t>(b.batch));
  for (int64_t t = 0; t < b.num_tables(); ++t) {
    const Bags bags = b.bags(t);
    ASSERT_EQ(bags.batch(), b.batch);
    ASSERT_EQ(bags.offsets[0], 0);
    for (int64_t i = 0; i < b.batch; ++i) ASSERT_LE(bags.offsets[i], bags.offsets[i + 1]);
    ASSERT_EQ(bags.offsets[b.batch], static_cast<int64_t>(bags.indices.size()));
    for (int64_t x : bags.indices) {
      ASSERT_GE(x, 0);
      ASSERT_LT(x, rows[static_cast<std::size_t>(t)]);
    }
  }
}

}  // namespace

// ---- numpy-compatible stream ---------------------------------------------------------------------

TEST(RandomStream, MatchesNumpyLegacySeeding) {
  // np.random.seed(123); np.random.random_sample(3); np.random.normal(0, 1, 3)
  RandomStream r(123);
  EXPECT_EQ(r.uniform(), 0.6964691855978616);
  EXPECT_EQ(r.uniform(), 0.28613933495037946);
  EXPECT_EQ(r.uniform(), 0.2268514535642031);
  EXPECT_NEAR(r.normal(0.0, 1.0), 1.7383701332168267, 1e-15);
  EXPECT_NEAR(r.normal(0.0, 1.0), 0.4064540971499301, 1e-15);
  EXPECT_NEAR(r.normal(0.0, 1.0), 0.32210606833962163, 1e-15);
  r.seed(123);
  EXPECT_EQ(r.uniform(), 0.6964691855978616);
}

TEST(RandomStream, BelowIsUniformAndInRange) {
  RandomStream r(9);
  std::vector<int> counts(7, 0);
  const int n = 70000;
  for (int i = 0; i < n; ++i) {
    const uint64_t x = r.below(7);
    ASSERT_LT(x, 7u);
    ++counts[x];
  }
  const double sd = std::sqrt(n * (1.0 / 7) * (6.0 / 7));
  for (int c : counts) EXPECT_NEAR(c, n / 7.0, 5 * sd);
}

// ---- epochs and batches --------------------------------------------------------------------------

TEST(EpochShape, FollowsTheReference) {
  auto e = EpochShape::of(5, 3, 0);
  EXPECT_EQ(e.num_batches, 2);
  EXPECT_EQ(e.samples_in(0, 3), 3);
  EXPECT_EQ(e.samples_in(1, 3), 2);
  e = EpochShape::of(5, 3, 4);  // --num-batches overrides --data-size
  EXPECT_EQ(e.num_batches, 4);
  EXPECT_EQ(e.samples_in(3, 3), 3);
  EXPECT_THAT(message_of([] { EpochShape::of(5, 0, 0); }), HasSubstr("--mini-batch-size must be positive, got 0"));
  EXPECT_THAT(message_of([] { EpochShape::of(0, 4, 0); }), HasSubstr("--data-size must be positive, got 0"));
  EXPECT_THAT(message_of([] { EpochShape::of(4, 4, -1); }), HasSubstr("--num-batches must be 0"));
}

TEST(Batch, BagsViewTheStorage) {
  Batch b;
  b.reshape(2, 3, 2);
  EXPECT_EQ(b.dense.size(), 6u);
  b.tables[1].indices = {4, 5, 6};
  b.tables[1].offsets = {0, 1, 3};
  b.tables[1].weights = {0.5f, 1.0f, 2.0f};
  const Bags bags = b.bags(1);
  EXPECT_EQ(bags.batch(), 2);
  EXPECT_EQ(bags.indices.data(), b.tables[1].indices.data());
  EXPECT_EQ(bags.offsets[2], 3);
  EXPECT_EQ(bags.weights[2], 2.0f);
  EXPECT_TRUE(b.bags(0).weights.empty());
  EXPECT_THAT(message_of([&] { b.bags(2); }), HasSubstr("table 2 does not exist; the batch has 2 tables"));
  EXPECT_THAT(message_of([&] { b.bags(-1); }), HasSubstr("table -1 does not exist"));
}

// ---- RandomSource --------------------------------------------------------------------------------

// Expected values: the reference's generate_dist_input_batch / generate_random_output_batch run
// with numpy's legacy generator (np.random.seed(123), tables 4-3-2, 4 dense features, batch 3,
// data size 5, up to 10 indices per lookup).
TEST(RandomSource, UniformReplaysTheReferenceBatchForBatch) {
  RandomConfig c;
  c.rows = {4, 3, 2};
  c.num_dense = 4;
  c.batch_size = 3;
  c.data_size = 5;
  RandomSource src(c);
  EXPECT_EQ(src.num_batches(), 2);
  EXPECT_EQ(src.num_tables(), 3);
  Batch b;
  ASSERT_TRUE(src.next(b));
  expect_well_formed(b, src.rows());
  EXPECT_EQ(b.batch, 3);
  EXPECT_THAT(b.dense,
              ElementsAre(0.6964691877365112f, 0.2861393392086029f, 0.2268514484167099f, 0.5513147711753845f,
                          0.7194689512252808f, 0.42310646176338196f, 0.9807642102241516f, 0.6848297119140625f,
                          0.4809319078922272f, 0.39211753010749817f, 0.34317800402641296f, 0.7290496826171875f));
  EXPECT_EQ(b.tables[0].offsets, vec({0, 2, 4, 6}));
  EXPECT_EQ(b.tables[0].indices, vec({0, 1, 1, 2, 2, 3}));
  EXPECT_EQ(b.tables[1].offsets, vec({0, 1, 2, 3}));
  EXPECT_EQ(b.tables[1].indices, vec({1, 1, 1}));
  EXPECT_EQ(b.tables[2].indices, vec({0, 0, 0}));
  EXPECT_THAT(b.targets, ElementsAre(0.3122612237930298f, 0.42635130882263184f, 0.8933891654014587f));
  EXPECT_TRUE(b.tables[0].weights.empty());

  ASSERT_TRUE(src.next(b));  // the last batch holds data_size - 3 = 2 samples
  expect_well_formed(b, src.rows());
  EXPECT_EQ(b.batch, 2);
  EXPECT_THAT(b.dense, ElementsAre(0.9441600441932678f, 0.5018366575241089f, 0.6239529252052307f, 0.11561839282512665f,
                                   0.3172854781150818f, 0.4148262143135071f, 0.8663091659545898f, 0.250455379486084f));
  EXPECT_EQ(b.tables[0].offsets, vec({0, 2, 4}));
  EXPECT_EQ(b.tables[0].indices, vec({2, 3, 0, 2}));
  EXPECT_EQ(b.tables[1].indices, vec({1, 1}));
  EXPECT_EQ(b.tables[2].indices, vec({1, 1}));
  EXPECT_THAT(b.targets, ElementsAre(0.5859365463256836f, 0.6249035000801086f));

  EXPECT_FALSE(src.next(b));
  EXPECT_EQ(b.batch, 2);  // untouched
  src.reset();            // the reference reseeds at batch 0 of every epoch
  ASSERT_TRUE(src.next(b));
  EXPECT_EQ(b.tables[0].indices, vec({0, 1, 1, 2, 2, 3}));
  EXPECT_EQ(b.dense[0], 0.6964691877365112f);
}

// np.random.seed(7), tables 50-40, 3 dense, batch 2, 6 fixed indices per lookup, gaussian with
// min 3, max 30, mu -1 (-> 16.5), sigma 8, --round-targets.
TEST(RandomSource, GaussianReplaysTheReference) {
  RandomConfig c;
  c.rows = {50, 40};
  c.num_dense = 3;
  c.batch_size = 2;
  c.data_size = 2;
  c.num_indices_per_lookup = 6;
  c.num_indices_per_lookup_fixed = true;
  c.dist = RandomDist::Gaussian;
  c.rand_data_min = 3.0;
  c.rand_data_max = 30.0;
  c.rand_data_sigma = 8.0;
  c.round_targets = true;
  c.seed = 7;
  RandomSource src(c);
  Batch b;
  ASSERT_TRUE(src.next(b));
  expect_well_formed(b, src.rows());
  EXPECT_THAT(b.dense, ElementsAre(0.07630828768014908f, 0.7799187898635864f, 0.4384092390537262f, 0.7234652042388916f,
                                   0.9779894948005676f, 0.5384958982467651f));
  // Truncation after np.unique repeats indices (16, 16), as in the reference.
  EXPECT_EQ(b.tables[0].offsets, vec({0, 6, 12}));
  EXPECT_EQ(b.tables[0].indices, vec({3, 10, 16, 16, 21, 24, 4, 11, 14, 14, 15, 20}));
  EXPECT_EQ(b.tables[1].indices, vec({4, 17, 17, 18, 20, 29, 3, 4, 13, 13, 16, 30}));
  EXPECT_THAT(b.targets, ElementsAre(0.0f, 1.0f));
  EXPECT_EQ(src.describe(), "random(gaussian)");
}

TEST(RandomSource, UniformBagsAreSortedDistinctAndSizedByTheRule) {
  RandomConfig c;
  c.rows = {1000, 7};
  c.num_dense = 2;
  c.batch_size = 4000;
  c.num_batches = 2;
  c.num_indices_per_lookup = 10;
  RandomSource src(c);
  Batch b;
  std::vector<int64_t> size_counts(11, 0);
  while (src.next(b)) {
    expect_well_formed(b, src.rows());
    for (int64_t t = 0; t < 2; ++t) {
      const auto& s = b.tables[static_cast<std::size_t>(t)];
      for (int64_t i = 0; i < b.batch; ++i) {
        const auto begin = s.indices.begin() + s.offsets[i], end = s.indices.begin() + s.offsets[i + 1];
        ASSERT_TRUE(std::adjacent_find(begin, end, std::greater_equal<>()) == end) << "bag not sorted and distinct";
        const int64_t n = end - begin;
        ASSERT_GE(n, 1);
        ASSERT_LE(n, t == 0 ? 10 : 7);
        if (t == 0) ++size_counts[static_cast<std::size_t>(n)];
      }
    }
    for (float x : b.dense) ASSERT_TRUE(x >= 0.0f && x < 1.0f);
  }
  // Table 0 (1000 rows): L = round(max(1, 10 U)) (half to even) -> P(L = 10) = 0.05 and
  // duplicates among 10 draws from 1000 rows are rare, so about 5 % of bags hold 10 indices.
  const double p10 = static_cast<double>(size_counts[10]) / 8000.0;
  EXPECT_NEAR(p10, 0.05 * 0.956, 5 * std::sqrt(0.05 / 8000));
  EXPECT_NEAR(static_cast<double>(size_counts[1]) / 8000.0, 0.15, 5 * std::sqrt(0.15 * 0.85 / 8000));  // U < 0.15
}

TEST(RandomSource, PerSampleWeightsLeaveTheIndicesOfTheReference) {
  RandomConfig c;
  c.rows = {100, 50};
  c.batch_size = 500;
  c.data_size = 500;
  RandomSource plain(c);
  c.per_sample_weights = true;
  RandomSource weighted(c);
  Batch a, b;
  ASSERT_TRUE(plain.next(a));
  ASSERT_TRUE(weighted.next(b));
  double sum = 0.0, sq = 0.0;
  std::size_t n = 0;
  for (std::size_t t = 0; t < 2; ++t) {
    EXPECT_EQ(a.tables[t].indices, b.tables[t].indices);
    ASSERT_EQ(b.tables[t].weights.size(), b.tables[t].indices.size());
    EXPECT_EQ(b.bags(static_cast<int64_t>(t)).weights.size(), b.tables[t].indices.size());
    for (float w : b.tables[t].weights) {
      sum += w;
      sq += static_cast<double>(w) * w;
      ++n;
    }
  }
  EXPECT_EQ(a.targets, b.targets);
  const double mean = sum / static_cast<double>(n);
  EXPECT_NEAR(mean, 0.0, 5.0 / std::sqrt(static_cast<double>(n)));
  EXPECT_NEAR(sq / static_cast<double>(n) - mean * mean, 1.0, 0.15);
}

TEST(RandomSource, BadConfigurationsNameTheFlag) {
  RandomConfig c;
  c.rows = {};
  EXPECT_THAT(message_of([&] { RandomSource s(c); }), HasSubstr("--arch-embedding-size: no embedding tables"));
  c.rows = {4, 0, 2};
  EXPECT_THAT(message_of([&] { RandomSource s(c); }),
              HasSubstr("--arch-embedding-size: table 1 has 0 rows; expected a positive count"));
  c.rows = {4, 3, 2};
  c.batch_size = 0;
  EXPECT_THAT(message_of([&] { RandomSource s(c); }), HasSubstr("--mini-batch-size must be positive, got 0"));
  c.batch_size = 1;
  c.num_indices_per_lookup = 0;
  EXPECT_THAT(message_of([&] { RandomSource s(c); }), HasSubstr("--num-indices-per-lookup must be positive, got 0"));
  c.num_indices_per_lookup = 10;
  c.dist = RandomDist::Gaussian;  // the defaults [0, 1] fit every table
  EXPECT_NO_THROW(RandomSource s(c));
  c.rand_data_max = 2.5;  // truncates to 2, which table 2 (2 rows) does not have
  EXPECT_THAT(message_of([&] { RandomSource s(c); }),
              HasSubstr("must lie within [0, rows) of every table; table 2 has 2 rows"));
  c.rand_data_max = 1.0;
  c.rand_data_min = -3.0;
  EXPECT_THAT(message_of([&] { RandomSource s(c); }), HasSubstr("--rand-data-dist gaussian"));
  c.rand_data_min = 2.0;
  EXPECT_THAT(message_of([&] { RandomSource s(c); }), HasSubstr("do not form a range"));
  c.rand_data_min = 0.0;
  c.rand_data_sigma = -1.0;
  EXPECT_THAT(message_of([&] { RandomSource s(c); }), HasSubstr("--rand-data-sigma must be non-negative"));
  EXPECT_THAT(message_of([] { parse_random_dist("normal"); }),
              HasSubstr("--rand-data-dist 'normal' is not supported; expected uniform or gaussian"));
  EXPECT_EQ(parse_random_dist("gaussian"), RandomDist::Gaussian);
}

// ---- synthetic traces ----------------------------------------------------------------------------

namespace {

// The reference's own input/dist_emb_2.log, with the lines renamed to 10..15.
const char* kProfile0 = "10, 11, 12, 13, 14, 15\n0, 1, 3, 4, 5\n0.55, 0.64, 0.82, 0.91, 1.0\n";
const char* kProfile1 = "7, 300, 42, 5\n0, 2, 4\n0.3, 0.8, 1.0\n";

/// trace_generate_lru with a real list (a copy of the profile's), as the reference does it.
std::vector<int64_t> naive_lru(const TraceProfile& p, int64_t length, bool padding, RandomStream& rng) {
  std::deque<int64_t> lines(p.unique_accesses.begin(), p.unique_accesses.end());
  const auto l = static_cast<int64_t>(lines.size());
  int64_t i = 0;
  std::vector<int64_t> out;
  for (int64_t s = 0; s < length; ++s) {
    double u = rng.uniform();
    if (i < p.stack_distances.back()) {
      const auto j =
          std::upper_bound(p.stack_distances.begin(), p.stack_distances.end(), i) - p.stack_distances.begin() - 1;
      u *= j >= 0 ? p.cumulative[static_cast<std::size_t>(j)] : p.cumulative.back();
    } else if (padding) {
      u = (1.0 - p.cumulative[0]) * u + p.cumulative[0];
    }
    int64_t sd = p.stack_distances.back();
    for (std::size_t j = 0; j < p.cumulative.size(); ++j) {
      if (u <= p.cumulative[j]) {
        sd = p.stack_distances[j];
        break;
      }
    }
    const auto pos = static_cast<std::size_t>(sd == 0 ? 0 : l - sd);
    const int64_t line = lines[pos];
    lines.erase(lines.begin() + static_cast<std::ptrdiff_t>(pos));
    lines.push_back(line);
    if (sd == 0) ++i;
    out.push_back(line);
  }
  return out;
}

}  // namespace

TEST(TraceProfile, ParsesTheReferenceFormat) {
  const auto p = TraceProfile::parse(kProfile0, "dist_emb_0.log");
  EXPECT_EQ(p.unique_accesses, vec({10, 11, 12, 13, 14, 15}));
  EXPECT_EQ(p.stack_distances, vec({0, 1, 3, 4, 5}));
  EXPECT_THAT(p.cumulative, ElementsAre(0.55, 0.64, 0.82, 0.91, 1.0));
  // CRLF, no final newline, extra spaces.
  const auto q = TraceProfile::parse("1,2 ,  3\r\n0, 2\r\n0.5,1", "x");
  EXPECT_EQ(q.unique_accesses, vec({1, 2, 3}));
  EXPECT_EQ(q.stack_distances, vec({0, 2}));
}

TEST(TraceProfile, MalformedFilesNameFileLineAndEntry) {
  EXPECT_THAT(message_of([] { TraceProfile::parse("1, 2\n0, 1\n", "a.log"); }),
              HasSubstr("trace file 'a.log': expected 3 lines (unique accesses, stack distances, cumulative "
                        "probabilities), found 2"));
  EXPECT_THAT(message_of([] { TraceProfile::parse("1, 2\n0, 1, x\n0.5, 0.7, 1\n", "a.log"); }),
              HasSubstr("trace file 'a.log' line 2, entry 3: 'x' is not an integer"));
  EXPECT_THAT(message_of([] { TraceProfile::parse("1, 2\n0, 1\n0.5, abc\n", "a.log"); }),
              HasSubstr("trace file 'a.log' line 3, entry 2: 'abc' is not a number"));
  EXPECT_THAT(message_of([] { TraceProfile::parse("1, 2\n0, 1\n0.5\n", "a.log"); }),
              HasSubstr("line 2 has 2 stack distances but line 3 has 1 cumulative probabilities"));
  EXPECT_THAT(message_of([] { TraceProfile::parse("1, 2, 3\n0, 2, 1\n0.2, 0.5, 1\n", "a.log"); }),
              HasSubstr("line 2, entry 3: stack distances must be strictly increasing, but 1 follows 2"));
  EXPECT_THAT(message_of([] { TraceProfile::parse("1, 2\n0, 3\n0.5, 1\n", "a.log"); }),
              HasSubstr("line 2, entry 2: stack distance 3 exceeds the 2 unique accesses of line 1"));
  EXPECT_THAT(message_of([] { TraceProfile::parse("1, 2\n-1, 1\n0.5, 1\n", "a.log"); }),
              HasSubstr("line 2, entry 1: stack distance -1 is negative"));
  EXPECT_THAT(message_of([] { TraceProfile::parse("1, 2\n0, 1\n0.5, 1.5\n", "a.log"); }),
              HasSubstr("line 3, entry 2: probability 1.5 is outside [0, 1]"));
  EXPECT_THAT(message_of([] { TraceProfile::parse("1, 2\n0, 1\n0.7, 0.5\n", "a.log"); }),
              HasSubstr("line 3, entry 2: cumulative probabilities must not decrease"));
  EXPECT_THAT(message_of([] { TraceProfile::parse("\n0, 1\n0.7, 1\n", "a.log"); }),
              HasSubstr("line 1: no unique accesses"));
  EXPECT_THAT(message_of([] { TraceProfile::read("/nonexistent/dist_emb_0.log"); }),
              HasSubstr("trace file: cannot open '/nonexistent/dist_emb_0.log' (no such file)"));
}

TEST(TraceFile, TableNumberSubstitution) {
  EXPECT_EQ(trace_file_for_table("./input/dist_emb_j.log", 3), "./input/dist_emb_3.log");
  EXPECT_EQ(trace_file_for_table("/data/jobs/dist_emb_j.log", 12), "/data/jobs/dist_emb_12.log");  // not the dir
  EXPECT_EQ(trace_file_for_table("/home/jj/t{j}_dist_{j}.txt", 0), "/home/jj/t0_dist_0.txt");
  EXPECT_EQ(trace_file_for_table("dist.log", 5), "dist.log");
}

TEST(SyntheticTraceSource, LruReplayMatchesTheReferenceSequence) {
  // trace_generate_lru(dist_emb_2 profile, 12) after np.random.seed(5), without and with padding.
  const auto p = TraceProfile::parse(kProfile0, "p0");
  SyntheticTraceSource::LruScratch scratch;
  std::vector<int64_t> out;
  RandomStream rng(5);
  SyntheticTraceSource::generate_lru(p, 12, false, rng, out, scratch);
  EXPECT_EQ(out, vec({10, 10, 11, 11, 12, 13, 11, 14, 15, 10, 12, 15}));
  out.clear();
  rng.seed(5);
  SyntheticTraceSource::generate_lru(p, 12, true, rng, out, scratch);
  EXPECT_EQ(out, vec({10, 10, 11, 11, 12, 13, 11, 14, 13, 13, 13, 12}));
}

TEST(SyntheticTraceSource, OverlaidListEqualsTheCopiedList) {
  // Random profiles: the O(L)-memory overlay must pick exactly the lines a copied list would.
  RandomStream gen(77);
  for (int trial = 0; trial < 200; ++trial) {
    TraceProfile p;
    const auto unique = static_cast<int64_t>(1 + gen.below(40));
    for (int64_t i = 0; i < unique; ++i) p.unique_accesses.push_back(static_cast<int64_t>(gen.below(1000)) - 100);
    std::set<int64_t> sds{0};
    const auto k = 1 + gen.below(6);
    for (uint64_t i = 0; i < k; ++i) sds.insert(static_cast<int64_t>(gen.below(static_cast<uint64_t>(unique) + 1)));
    p.stack_distances.assign(sds.begin(), sds.end());
    double c = 0.0;
    for (std::size_t i = 0; i < p.stack_distances.size(); ++i) {
      c += (1.0 - c) * (i + 1 == p.stack_distances.size() ? 1.0 : gen.uniform());
      p.cumulative.push_back(c);
    }
    const bool padding = trial % 2 == 1;
    const auto length = static_cast<int64_t>(1 + gen.below(60));
    RandomStream a(static_cast<uint32_t>(trial)), b(static_cast<uint32_t>(trial));
    SyntheticTraceSource::LruScratch scratch;
    std::vector<int64_t> out;
    SyntheticTraceSource::generate_lru(p, length, padding, a, out, scratch);
    ASSERT_EQ(out, naive_lru(p, length, padding, b)) << "trial " << trial;
  }
}

// np.random.seed(123), tables of 5 and 100 rows, 2 dense, batch 3, up to 4 indices per lookup,
// profiles kProfile0 / kProfile1 (its line 300 wraps to 0 in the 100-row table).
TEST(SyntheticTraceSource, ReplaysTheReferenceBatchForBatch) {
  TempDir dir;
  dir.write("dist_emb_0.log", kProfile0);
  dir.write("dist_emb_1.log", kProfile1);
  SyntheticConfig c;
  c.rows = {5, 100};
  c.num_dense = 2;
  c.batch_size = 3;
  c.num_batches = 2;
  c.num_indices_per_lookup = 4;
  c.trace_file = (dir.path / "dist_emb_j.log").string();
  SyntheticTraceSource src(c);
  EXPECT_EQ(src.num_batches(), 2);
  EXPECT_EQ(src.profile(1).unique_accesses, vec({7, 300, 42, 5}));
  Batch b;
  ASSERT_TRUE(src.next(b));
  expect_well_formed(b, src.rows());
  EXPECT_THAT(b.dense, ElementsAre(0.6964691877365112f, 0.2861393392086029f, 0.2268514484167099f, 0.5513147711753845f,
                                   0.7194689512252808f, 0.42310646176338196f));
  EXPECT_EQ(b.tables[0].offsets, vec({0, 4, 7, 10}));
  EXPECT_EQ(b.tables[0].indices, vec({0, 1, 2, 3, 0, 1, 2, 0, 1, 2}));
  EXPECT_EQ(b.tables[1].offsets, vec({0, 2, 5, 6}));
  EXPECT_EQ(b.tables[1].indices, vec({7, 0, 7, 42, 0, 7}));
  EXPECT_THAT(b.targets, ElementsAre(0.2937140464782715f, 0.630976140499115f, 0.0921049416065216f));
  ASSERT_TRUE(src.next(b));
  EXPECT_THAT(b.dense, ElementsAre(0.43370118737220764f, 0.43086275458335876f, 0.4936850965023041f,
                                   0.42583030462265015f, 0.3122612237930298f, 0.42635130882263184f));
  EXPECT_EQ(b.tables[0].offsets, vec({0, 4, 5, 7}));
  EXPECT_EQ(b.tables[0].indices, vec({0, 1, 2, 3, 0, 0, 1}));
  EXPECT_EQ(b.tables[1].indices, vec({7, 0, 7, 42, 0, 7}));
  EXPECT_THAT(b.targets, ElementsAre(0.6813007593154907f, 0.8754568696022034f, 0.5104223489761353f));
  EXPECT_FALSE(src.next(b));
}

TEST(SyntheticTraceSource, MissingOrMalformedFilesNameFlagTableAndFile) {
  TempDir dir;
  dir.write("dist_emb_0.log", kProfile0);
  dir.write("dist_emb_1.log", "1, 2\n0, 1\n0.5, nope\n");
  SyntheticConfig c;
  c.rows = {5, 100, 7};
  c.trace_file = (dir.path / "dist_emb_j.log").string();
  const std::string bad = (dir.path / "dist_emb_1.log").string();
  EXPECT_THAT(
      message_of([&] { SyntheticTraceSource s(c); }),
      HasSubstr("--data-trace-file (table 1): trace file '" + bad + "' line 3, entry 2: 'nope' is not a number"));
  dir.write("dist_emb_1.log", kProfile1);
  const std::string missing = (dir.path / "dist_emb_2.log").string();
  EXPECT_THAT(message_of([&] { SyntheticTraceSource s(c); }),
              HasSubstr("--data-trace-file (table 2): trace file: cannot open '" + missing + "' (no such file)"));
  c.rows = {5, 0};
  EXPECT_THAT(message_of([&] { SyntheticTraceSource s(c); }), HasSubstr("table 1 has 0 rows"));
  c.rows = {5};
  EXPECT_THAT(message_of([&] {
                SyntheticTraceSource s(c, {TraceProfile::parse(kProfile0, "a"), TraceProfile::parse(kProfile1, "b")});
              }),
              HasSubstr("2 trace profiles for 1 tables"));
}
