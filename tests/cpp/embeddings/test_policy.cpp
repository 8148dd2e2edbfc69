// Embedding policies (dissertation §5.6.1) and Auto (Note [Auto embedding policy]): the factory
// builds the right tables, the hooks behave, every policy computes the same values, and Auto's hit
// rate is at least the best of simple/static/dynamic on seeded uniform and Zipf traces.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <numeric>
#include <random>
#include <vector>

#include "core/error.h"
#include "embeddings/hit_rate.h"
#include "embeddings/kernels.h"
#include "embeddings/policy.h"
#include "embeddings/reference.h"
#include "memory/heap.h"
#include "memory/slow_tier_model.h"
#include "tests/cpp/embeddings/heaps.h"
#include "tests/cpp/error_text.h"

using namespace strata;
using namespace strata::emb;
using ::testing::HasSubstr;

namespace {

using strata::testing_util::message_of;

struct Heaps : testing_util::Heaps {
  explicit Heaps(std::size_t fast_bytes = 4 << 20, std::size_t slow_bytes = 8 << 20)
      : testing_util::Heaps(fast_bytes, slow_bytes) {}
};

using Batches = std::vector<std::vector<int64_t>>;

Batches uniform_batches(int64_t n, int nbatches, int per_batch, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int64_t> u(0, n - 1);
  Batches b(static_cast<std::size_t>(nbatches));
  for (auto& batch : b)
    for (int i = 0; i < per_batch; ++i) batch.push_back(u(rng));
  return b;
}

// Zipf(s) over ranks 1..n by inverse CDF, ranks scattered over the rows by a fixed permutation.
Batches zipf_batches(int64_t n, double s, int nbatches, int per_batch, uint64_t seed) {
  std::vector<double> cdf(static_cast<std::size_t>(n));
  double acc = 0;
  for (int64_t k = 0; k < n; ++k) cdf[static_cast<std::size_t>(k)] = acc += std::pow(static_cast<double>(k + 1), -s);
  for (double& c : cdf) c /= acc;
  std::mt19937_64 rng(seed);
  std::vector<int64_t> perm(static_cast<std::size_t>(n));
  std::iota(perm.begin(), perm.end(), int64_t{0});
  std::shuffle(perm.begin(), perm.end(), rng);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  Batches b(static_cast<std::size_t>(nbatches));
  for (auto& batch : b) {
    for (int i = 0; i < per_batch; ++i) {
      const auto k = std::lower_bound(cdf.begin(), cdf.end(), u(rng)) - cdf.begin();
      batch.push_back(perm[static_cast<std::size_t>(std::min<int64_t>(k, n - 1))]);
    }
  }
  return b;
}

struct PolicyRun {
  double hit_rate = 0;
  PolicyStats stats;
  std::vector<float> data;
};

// A training loop's embedding phase on one thread: hooks, Forward lookups of every index, an
// Update of every distinct row of the batch (row[0] += 1), hooks.
PolicyRun run_policy(EmbeddingPolicy policy, const Batches& batches, int64_t n, int64_t d, double fraction,
                     const PolicyOptions& options = {}) {
  Heaps h;
  auto m = make_table(policy, n, d, ElemType::F32, h.fast_mem(), h.slow_mem(), fraction, options);
  m->reset_stats();
  std::vector<int64_t> distinct;
  float sink = 0;
  for (const auto& batch : batches) {
    m->before_lookup(batch);
    Table& t = m->table();
    for (int64_t r : batch) sink += reinterpret_cast<const float*>(t.rowpointer(r, AccessContext::Forward))[0];
    distinct = batch;
    std::sort(distinct.begin(), distinct.end());
    distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
    for (int64_t r : distinct) reinterpret_cast<float*>(t.rowpointer(r, AccessContext::Update))[0] += 1.0f;
    m->after_update();
  }
  EXPECT_TRUE(std::isfinite(sink));
  PolicyRun out;
  out.stats = m->stats();
  out.hit_rate = out.stats.cache.hit_rate();
  out.data.resize(static_cast<std::size_t>(n * d));
  m->table().copy_to(out.data.data());
  return out;
}

// What every policy must compute: row r's first element counts the batches containing r.
std::vector<float> expected_data(const Batches& batches, int64_t n, int64_t d) {
  std::vector<float> v(static_cast<std::size_t>(n * d), 0.0f);
  std::vector<int64_t> distinct;
  for (const auto& batch : batches) {
    distinct = batch;
    std::sort(distinct.begin(), distinct.end());
    distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
    for (int64_t r : distinct) v[static_cast<std::size_t>(r * d)] += 1.0f;
  }
  return v;
}

}  // namespace

TEST(EmbeddingPolicy, NamesParseAndBadNamesAreRefused) {
  for (auto p : {EmbeddingPolicy::Simple, EmbeddingPolicy::Static, EmbeddingPolicy::Dynamic, EmbeddingPolicy::Auto})
    EXPECT_EQ(parse_embedding_policy(policy_name(p)), p);
  EXPECT_STREQ(policy_name(EmbeddingPolicy::Auto), "auto");
  EXPECT_THAT(message_of([] { parse_embedding_policy("lru"); }),
              HasSubstr("embedding policy 'lru' is not known; expected simple, static, dynamic or auto"));
  EXPECT_THAT(message_of([] { parse_embedding_policy("Static"); }), HasSubstr("'Static' is not known"));
}

TEST(EmbeddingPolicy, FactoryBuildsTheTableEachPolicyNeeds) {
  Heaps h;
  const int64_t n = 1000, d = 16;
  // simple: a SimpleTable in the slow heap, no cache.
  auto s = make_table(EmbeddingPolicy::Simple, n, d, ElemType::F32, h.fast_mem(), h.slow_mem(), 0.1);
  EXPECT_EQ(s->table().kind(), "simple");
  EXPECT_EQ(s->cached_table(), nullptr);
  EXPECT_EQ(s->cache_rows(), 0);
  EXPECT_TRUE(s->table().in_slow(s->table().rowpointer(3, AccessContext::Forward)));

  // static: the whole cache filled with random rows at the start, dynamic caching off.
  auto st = make_table(EmbeddingPolicy::Static, n, d, ElemType::F32, h.fast_mem(), h.slow_mem(), 0.1, {.pages = 4});
  ASSERT_NE(st->cached_table(), nullptr);
  CachedTable& ct = *st->cached_table();
  EXPECT_EQ(st->cache_rows(), 100);
  EXPECT_EQ(ct.page_rows(), 25);
  EXPECT_EQ(ct.cached_rows(), 100);
  EXPECT_TRUE(ct.is_full());
  EXPECT_FALSE(ct.caching());
  EXPECT_EQ(ct.cache_counters().rows_cached, 0u);  // the fill is not counted as training traffic
  int64_t uncached = 0;
  while (ct.is_cached(uncached)) ++uncached;
  EXPECT_EQ(ct.rowpointer(uncached, AccessContext::Forward), ct.home(uncached));
  EXPECT_FALSE(ct.is_cached(uncached));
  // ... the fill is random but seeded: the same seed caches the same rows, another seed others.
  auto st2 = make_table(EmbeddingPolicy::Static, n, d, ElemType::F32, h.fast_mem(), h.slow_mem(), 0.1, {.pages = 4});
  auto st3 = make_table(EmbeddingPolicy::Static, n, d, ElemType::F32, h.fast_mem(), h.slow_mem(), 0.1,
                        {.pages = 4, .seed = 77});
  int same = 0, same3 = 0;
  for (int64_t r = 0; r < n; ++r) {
    same += ct.is_cached(r) == st2->cached_table()->is_cached(r);
    same3 += ct.is_cached(r) && st3->cached_table()->is_cached(r);
  }
  EXPECT_EQ(same, n);
  EXPECT_LT(same3, 40);  // ~10 expected by chance

  // static with an access profile: the hottest rows first.
  const std::vector<int64_t> hot = {5, 500, 999, 5, 77};
  auto sh = make_table(EmbeddingPolicy::Static, n, d, ElemType::F32, h.fast_mem(), h.slow_mem(), 0.004,
                       {.pages = 2, .hot_rows = hot});
  EXPECT_EQ(sh->cache_rows(), 4);
  for (int64_t r : {5, 500, 999, 77}) EXPECT_TRUE(sh->cached_table()->is_cached(r)) << r;
  EXPECT_EQ(sh->cached_table()->cached_rows(), 4);

  // dynamic: empty at the start, caches on lookup; the limit is whole pages of the fraction.
  auto dy = make_table(EmbeddingPolicy::Dynamic, n, d, ElemType::F32, h.fast_mem(), h.slow_mem(), 0.1, {.pages = 4});
  CachedTable& dt = *dy->cached_table();
  EXPECT_EQ(dt.cached_rows(), 0);
  EXPECT_TRUE(dt.caching());
  EXPECT_EQ(dt.cachelower() + dt.cacheslack(), 4 * dt.page_bytes());
  EXPECT_EQ(dt.cacheslack(), dt.page_bytes());
  EXPECT_NE(dt.rowpointer(3, AccessContext::Forward), dt.home(3));

  // auto: filled exactly like static with the same seed.
  auto au = make_table(EmbeddingPolicy::Auto, n, d, ElemType::F32, h.fast_mem(), h.slow_mem(), 0.1, {.pages = 4});
  for (int64_t r = 0; r < n; ++r) EXPECT_EQ(au->cached_table()->is_cached(r), ct.is_cached(r)) << r;
  // Without skew nothing is admitted.
  EXPECT_EQ(au->table().rowpointer(uncached, AccessContext::Forward), au->cached_table()->home(uncached));
}

TEST(EmbeddingPolicy, DynamicFlushesTheOldestPageWhenFull) {
  Heaps h;
  const int64_t n = 100, d = 4;
  auto m = make_table(EmbeddingPolicy::Dynamic, n, d, ElemType::F32, h.fast_mem(), h.slow_mem(), 0.2, {.pages = 4});
  CachedTable& t = *m->cached_table();
  ASSERT_EQ(t.page_rows(), 5);
  for (int64_t r = 0; r < 15; ++r) t.rowpointer(r, AccessContext::Forward);
  m->after_update();  // not full: nothing happens
  EXPECT_EQ(t.cached_rows(), 15);
  for (int64_t r = 15; r < 30; ++r) t.rowpointer(r, AccessContext::Forward);
  EXPECT_TRUE(t.is_full());
  EXPECT_EQ(t.cached_rows(), 20);
  reinterpret_cast<float*>(t.rowpointer(2, AccessContext::Update))[1] = 42.0f;
  m->after_update();  // full: the oldest page (rows 0-4) goes, row 2 written home
  EXPECT_EQ(t.cached_rows(), 15);
  for (int64_t r = 0; r < 5; ++r) EXPECT_FALSE(t.is_cached(r));
  EXPECT_EQ(reinterpret_cast<const float*>(t.home(2))[1], 42.0f);
  EXPECT_EQ(t.cache_counters().rows_written_back, 1u);
  EXPECT_EQ(t.cache_counters().pages_flushed, 1u);
  EXPECT_FALSE(t.is_full());
  EXPECT_NE(t.rowpointer(50, AccessContext::Forward), t.home(50));
}

TEST(EmbeddingPolicy, BadInputGetsClearErrors) {
  Heaps h(1 << 16, 1 << 20);
  auto make = [&](EmbeddingPolicy p, int64_t rows, double f, PolicyOptions o = {}) {
    return make_table(p, rows, 4, ElemType::F32, h.fast_mem(), h.slow_mem(), f, o);
  };
  EXPECT_THAT(message_of([&] { make(EmbeddingPolicy::Static, 0, 0.1); }),
              HasSubstr("make_table(static): rows must be positive, got 0"));
  EXPECT_THAT(message_of([&] { make(EmbeddingPolicy::Auto, 10, 1.5); }),
              HasSubstr("make_table(auto): cache_fraction must be in [0, 1], got 1.5"));
  EXPECT_THAT(message_of([&] { make(EmbeddingPolicy::Dynamic, 10, 0.1, {.pages = 0}); }),
              HasSubstr("PolicyOptions::pages must be >= 1, got 0"));
  EXPECT_THAT(message_of([&] { make(EmbeddingPolicy::Auto, 10, 0.1, {.auto_window = 0}); }),
              HasSubstr("PolicyOptions::auto_window must be >= 1, got 0"));
  EXPECT_THAT(message_of([&] { make(EmbeddingPolicy::Auto, 10, 0.1, {.auto_max_pages = 0}); }),
              HasSubstr("PolicyOptions::auto_max_pages must be >= 1, got 0"));
  EXPECT_THAT(message_of([&] { make(EmbeddingPolicy::Auto, 10, 0.1, {.auto_min_swap = 1.5}); }),
              HasSubstr("PolicyOptions::auto_min_swap must be in [0, 1], got 1.5"));
  const std::vector<int64_t> hot = {1, 10};
  EXPECT_THAT(message_of([&] { make(EmbeddingPolicy::Static, 10, 0.5, {.hot_rows = hot}); }),
              HasSubstr("make_table(static): hot row 10 at position 1 is out of range [0, 10)"));
  EXPECT_THAT(message_of([&] {
                make_table(EmbeddingPolicy::Dynamic, 10, 4, ElemType::F32, {nullptr, nullptr}, h.slow_mem(), 0.1);
              }),
              HasSubstr("make_table(dynamic): no fast heap given for the cache"));
  EXPECT_THAT(message_of([&] { make(EmbeddingPolicy::Auto, 100000, 0.1); }), HasSubstr("has no room"));
  // Auto's hook validates the whole batch before counting any of it.
  auto m = make(EmbeddingPolicy::Auto, 10, 0.5);
  m->table().set_name("table 4");
  const std::vector<int64_t> bad = {1, 2, 10};
  EXPECT_THAT(message_of([&] { m->before_lookup(bad); }),
              HasSubstr("embedding table 4: index 10 at position 2 is out of range [0, 10)"));
  EXPECT_THAT(message_of([&] { m->before_lookup(std::vector<int64_t>{-1}); }),
              HasSubstr("index -1 at position 0 is out of range"));
  for (int64_t r = 0; r < 10; ++r) EXPECT_EQ(m->access_count(r), 0) << r;
  // A large batch (counted in parallel) is checked in the pass that groups it, still before
  // anything is counted.
  std::vector<int64_t> large(20000, 5);
  large.back() = -7;
  EXPECT_THAT(message_of([&] { m->before_lookup(large); }),
              HasSubstr("embedding table 4: index -7 at position 19999 is out of range [0, 10)"));
  large.back() = 10;
  large[12345] = 11;
  EXPECT_THAT(message_of([&] { m->before_lookup(large); }), HasSubstr("index 11 at position 12345 is out of range"));
  for (int64_t r = 0; r < 10; ++r) EXPECT_EQ(m->access_count(r), 0) << r;
  m->before_lookup(std::vector<int64_t>{3, 3, 4});
  EXPECT_EQ(m->access_count(3), 2);
  EXPECT_EQ(m->access_count(4), 1);
  // A fraction of 0 builds a cache that never holds anything.
  auto z = make(EmbeddingPolicy::Dynamic, 10, 0.0);
  EXPECT_EQ(z->cache_rows(), 0);
  EXPECT_EQ(z->table().rowpointer(3, AccessContext::Forward), z->cached_table()->home(3));
}

TEST(EmbeddingPolicy, AutoCountsLargeBatchesExactly) {
  // Batches of 16384 indices or more are counted in parallel over row partitions: the counts must
  // be exact and the repeating rows admitted on their first miss, as in the serial pass.
  Heaps h;
  const int64_t n = 50000;
  auto m = make_table(EmbeddingPolicy::Auto, n, 4, ElemType::F32, h.fast_mem(), h.slow_mem(), 0.1,
                      {.pages = 8, .auto_window = 1000});  // no aging within these batches
  const Batches batches = uniform_batches(n, 3, 20000, 5);
  std::vector<int> expect(static_cast<std::size_t>(n), 0);
  for (const auto& batch : batches) {
    m->before_lookup(batch);
    std::vector<int> in_batch(static_cast<std::size_t>(n), 0);
    for (int64_t r : batch) {
      ++expect[static_cast<std::size_t>(r)];
      ++in_batch[static_cast<std::size_t>(r)];
    }
    for (int64_t r = 0; r < n; ++r)
      ASSERT_EQ(m->access_count(r), std::min(expect[static_cast<std::size_t>(r)], 255)) << r;
    // A repeating row that is not cached is cached by its first lookup (while there is room).
    CachedTable& t = *m->cached_table();
    int64_t admitted = 0, refused = 0;
    for (int64_t r : batch) {
      if (t.is_cached(r) || t.is_full()) continue;
      t.rowpointer(r, AccessContext::Forward);
      (t.is_cached(r) ? admitted : refused) += 1;
      EXPECT_EQ(t.is_cached(r), in_batch[static_cast<std::size_t>(r)] >= 2) << r;
    }
    EXPECT_GT(admitted, 0);
    EXPECT_GT(refused, 0);
    m->after_update();
  }
}

TEST(EmbeddingPolicy, PoissonRareCount) {
  // n × P(Poisson(λ) >= t) < 1 at t, not at t − 1.
  auto tail = [](double lambda, int t) {
    double cdf = 0, p = std::exp(-lambda);
    for (int k = 0; k < t; ++k, p *= lambda / k) cdf += p;
    return 1.0 - cdf;
  };
  for (double lambda : {0.01, 0.5, 2.0, 6.4, 20.0}) {
    for (int64_t n : {1000, 100000, 10000000}) {
      const int t = poisson_rare_count(lambda, n);
      EXPECT_LT(static_cast<double>(n) * tail(lambda, t), 1.0) << lambda << " " << n;
      EXPECT_GE(static_cast<double>(n) * tail(lambda, t - 1), 1.0) << lambda << " " << n;
    }
  }
  EXPECT_EQ(poisson_rare_count(0.0, 100), 1);
  EXPECT_THAT(message_of([] { poisson_rare_count(-1.0, 10); }), HasSubstr("lambda must be finite and >= 0"));
}

// The comparison the issue asks for: Auto never below the best of the three on uniform and Zipf
// inputs. All policies must also compute exactly the same table.
TEST(EmbeddingPolicy, AutoHitRateIsAtLeastTheBestOfTheOthers) {
  const int64_t n = 20000, d = 4;
  const double fraction = 0.1;
  const int nbatches = 100, per_batch = 2048;
  struct Input {
    const char* name;
    Batches batches;
  };
  for (const Input& in : {Input{"uniform", uniform_batches(n, nbatches, per_batch, 11)},
                          Input{"zipf(1.05)", zipf_batches(n, 1.05, nbatches, per_batch, 12)}}) {
    const auto expect = expected_data(in.batches, n, d);
    const PolicyRun simple = run_policy(EmbeddingPolicy::Simple, in.batches, n, d, fraction);
    const PolicyRun stat = run_policy(EmbeddingPolicy::Static, in.batches, n, d, fraction);
    const PolicyRun dyn = run_policy(EmbeddingPolicy::Dynamic, in.batches, n, d, fraction);
    const PolicyRun aut = run_policy(EmbeddingPolicy::Auto, in.batches, n, d, fraction);
    for (const PolicyRun* r : {&simple, &stat, &dyn, &aut}) EXPECT_EQ(r->data, expect) << in.name;
    std::vector<int64_t> all;
    for (const auto& b : in.batches) all.insert(all.end(), b.begin(), b.end());
    const double optimum = empirical_static_optimum(all, n, aut.stats.cache_rows);
    const double best = std::max({simple.hit_rate, stat.hit_rate, dyn.hit_rate});
    std::printf(
        "[ %s ] hit rates: simple %.4f static %.4f dynamic %.4f auto %.4f (static optimum with hindsight "
        "%.4f); auto swapped in %llu batches, evicted %llu rows\n",
        in.name, simple.hit_rate, stat.hit_rate, dyn.hit_rate, aut.hit_rate, optimum,
        static_cast<unsigned long long>(aut.stats.swap_batches),
        static_cast<unsigned long long>(aut.stats.rows_evicted));
    EXPECT_EQ(simple.hit_rate, 0.0);
    EXPECT_GE(aut.hit_rate, best) << in.name;
    if (std::string(in.name) == "uniform") {
      // No skew: Auto only admits rows that repeat within their batch.
      EXPECT_FALSE(aut.stats.skewed);
      EXPECT_GT(aut.stats.cache.rows_cached, 0u);
    } else {
      EXPECT_TRUE(aut.stats.skewed);
      EXPECT_GT(aut.hit_rate, dyn.hit_rate + 0.03);  // frequency beats FIFO pages
      EXPECT_GT(aut.hit_rate, optimum - 0.06);       // including the warm-up from a random fill
    }
  }
}

// Note [Auto embedding policy], step 4: when the slow tier's row writes are dearer than its reads,
// a uniform input's repeats take only free slots (an eviction's write-back would cost more than
// the reads a repeat saves), so Auto keeps Static's content — and counts only a sample of batches.
TEST(EmbeddingPolicy, AutoDoesNotEvictForRepeatsWhenWritesAreDearer) {
  const int64_t n = 20000, d = 4;
  const Batches batches = uniform_batches(n, 60, 2048, 11);
  struct DearWrites {
    memory::DramHeap fast{std::size_t{4} << 20};
    memory::PmHeap slow{{.capacity = std::size_t{8} << 20,
                         .dir = std::filesystem::temp_directory_path().string(),
                         .backend = memory::PmBackend::Mmap}};
    memory::SlowTierThrottle throttle{memory::SlowTierModel::custom(1000.0, 500.0, 0.0)};
  } h;
  auto m = make_table(EmbeddingPolicy::Auto, n, d, ElemType::F32, {&h.fast, nullptr}, {&h.slow, &h.throttle}, 0.1);
  auto st = make_table(EmbeddingPolicy::Static, n, d, ElemType::F32, {&h.fast, nullptr}, {&h.slow, &h.throttle}, 0.1);
  for (ManagedTable* t : {m.get(), st.get()}) {
    t->reset_stats();
    for (const auto& batch : batches) {
      t->before_lookup(batch);
      for (int64_t r : batch) (void)t->table().rowpointer(r, AccessContext::Forward);
      for (int64_t r : batch) reinterpret_cast<float*>(t->table().rowpointer(r, AccessContext::Update))[0] += 1.0f;
      t->after_update();
    }
  }
  const PolicyStats a = m->stats(), s = st->stats();
  EXPECT_FALSE(a.skewed);
  EXPECT_EQ(a.swap_batches, 0u);
  EXPECT_EQ(a.rows_evicted, 0u);
  EXPECT_EQ(a.cache.rows_cached, 0u);
  EXPECT_EQ(a.cache.hit_rate(), s.cache.hit_rate());  // the same random fill, the same hits
  // Sampling: of four batches in this state one is counted and three are not read at all, so a
  // bad index is the hook's error only in the counted one; the lookup reports it in every batch.
  const std::vector<int64_t> bad = {1, n};
  const std::vector<int64_t> offsets = {0, 2};
  int hook_errors = 0;
  for (int b = 0; b < 4; ++b) {
    const std::string hook = message_of([&] { m->before_lookup(bad); });
    if (hook != "(no error)") {
      ++hook_errors;
      EXPECT_THAT(hook, HasSubstr("index 20000 at position 1 is out of range [0, 20000)"));
    }
    std::vector<float> out(d);
    EXPECT_THAT(message_of([&] { lookup(m->table(), {bad, offsets}, Pooling::Sum, {out.data(), d}); }),
                HasSubstr("bag 0, position 1 (index 1): row 20000 is out of range [0, 20000)"));
  }
  EXPECT_EQ(hook_errors, 1);
  // With equal read and write costs (the other tests' throttle) the same input admits repeats.
  const PolicyRun cheap = run_policy(EmbeddingPolicy::Auto, batches, n, d, 0.1);
  EXPECT_GT(cheap.stats.cache.rows_cached, 0u);
  EXPECT_GT(cheap.hit_rate, a.cache.hit_rate());
}

// The exactness requirement for every table type and policy: emb::lookup and emb::update
// (multi-threaded, caching on Forward, dirtying on Update, flushes between steps) give exactly
// the naive reference's values, with duplicates within bags and across the batch.
TEST(EmbeddingPolicy, KernelsOnEveryPolicyMatchTheReferenceExactly) {
  struct Mode {
    Pooling pooling;
    bool weighted;
    SparseOptimizer::Kind opt;
  };
  const Mode modes[] = {{Pooling::Sum, false, SparseOptimizer::Kind::SGD},
                        {Pooling::Mean, false, SparseOptimizer::Kind::RowWiseAdagrad},
                        {Pooling::Sum, true, SparseOptimizer::Kind::RowWiseAdagrad}};
  for (auto policy :
       {EmbeddingPolicy::Simple, EmbeddingPolicy::Static, EmbeddingPolicy::Dynamic, EmbeddingPolicy::Auto}) {
    for (ElemType type : {ElemType::F32, ElemType::BF16}) {
      for (int64_t d : {16, 5}) {
        for (const Mode& mode : modes) {
          SCOPED_TRACE(std::string(policy_name(policy)) + " " + elem_name(type) + " d=" + std::to_string(d) + " " +
                       pooling_name(mode.pooling) + (mode.weighted ? " weighted " : " ") + optimizer_name(mode.opt));
          Heaps h;
          const int64_t rows = 300, batch = 48;
          auto m = make_table(policy, rows, d, type, h.fast_mem(), h.slow_mem(), 0.2, {.pages = 4});
          Table& t = m->table();
          reference::DenseTable ref = reference::fill_random(t, 17);
          const SparseOptimizer opt{.kind = mode.opt, .lr = 0.05f, .eps = 1e-8f, .initial_accumulator = 0.1f};
          SparseOptimizerState state(t, opt);
          UpdateWorkspace ws;
          std::mt19937 rng(3);
          for (int step = 0; step < 6; ++step) {
            const auto bags = reference::random_bags(rng, batch, 8, rows, mode.weighted, /*hot=*/24);
            m->before_lookup(bags.indices);
            std::vector<float> out(static_cast<std::size_t>(batch * d)), expect(out.size());
            lookup(t, bags.view(), mode.pooling, {out.data(), d});
            reference::lookup(ref, bags.view(), mode.pooling, expect.data(), d);
            ASSERT_EQ(out, expect) << "lookup, step " << step;
            const auto grad = reference::random_floats(rng, static_cast<std::size_t>(batch * d));
            update(t, bags.view(), mode.pooling, {const_cast<float*>(grad.data()), d}, opt, state, ws);
            reference::update(ref, bags.view(), mode.pooling, grad.data(), d, opt);
            m->after_update();
            ASSERT_EQ(reference::snapshot(t).w, ref.w) << "table after step " << step;
          }
          if (m->cached_table() != nullptr) {
            EXPECT_GT(m->cached_table()->cache_counters().hits, 0u);
            // Everything home: the base rows alone hold the trained values.
            CachedTable& ct = *m->cached_table();
            ct.set_cachelower(0);
            ct.flush_dirty();
            EXPECT_EQ(ct.npages(), 0u);
            ASSERT_EQ(reference::snapshot(t).w, ref.w) << "after the final flush";
          }
        }
      }
    }
  }
}
