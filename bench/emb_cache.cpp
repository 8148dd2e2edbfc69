// strata-bench-emb-cache: the embedding policies of dissertation §5.6.1 (simple, static, dynamic)
// and Strata's auto on one table 4× larger than the fast-tier budget, with 10 % of its rows
// cacheable and the slow tier on the Optane-ratio model (issue 7's cache figure).
//
// For each input distribution (Zipf(--alpha), ranks scattered over the rows by the dissertation's
// maximal-length LFSR, and uniform) one trace of --warmup + --batches batches of --batch bags ×
// --lookups indices is generated up front with embeddings/zipf.h's sampler. The indices are iid
// (bags may repeat a row), so REFERENCE.md §2's H(fN, s) / H(N, s) is exactly the static optimum
// of the input; index_source.h's ZipfSource follows FBGEMM instead (the first L *distinct* ranks
// per bag), which lowers the hottest rows' share below that formula. Each policy then runs the
// embedding phase of a training step on it: before_lookup hook, emb::lookup (sum pooling) of every
// bag, emb::update (fused SGD, reindexed by row), after_update hook. After the warm-up
// batches the counters are reset and every batch's embedding-phase time is a sample. Reported per
// policy: median (min-max) ms per batch, the speed-up over simple, the cache hit rate against the
// static optimum of REFERENCE.md §2 (H(fN, s) / H(N, s) for Zipf, f for uniform; the hindsight
// optimum of the measured batches is shown too), and the slow-tier traffic (moves, write-backs,
// direct accesses).
// "dram" is a SimpleTable in an unconstrained DRAM heap: the all-fast reference.
//
// --json FILE writes {"binary", "threads", "dtype", "library", "dram_copy_gbps", "model",
// "params", "records": [{"distribution", "policy", "embedding_ms": {unit, samples, median, min,
// max}, "hooks_ms", "lookup_ms", "update_ms" (the same per phase), "hit_rate", "static_optimum",
// "static_optimum_hindsight", "speedup_vs_simple", "slow_bytes_read", "slow_bytes_written",
// "rows_cached", "rows_written_back", ...}]}.

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "bench/bench_common.h"
#include "core/error.h"
#include "core/threading.h"
#include "embeddings/hit_rate.h"
#include "embeddings/kernels.h"
#include "embeddings/policy.h"
#include "embeddings/zipf.h"
#include "memory/copy_engine.h"
#include "memory/heap.h"
#include "memory/slow_tier_model.h"

namespace {

using namespace strata;
using namespace strata::emb;
using Clock = std::chrono::steady_clock;

constexpr const char* kUsage =
    "strata-bench-emb-cache [--threads N] [--json FILE] [--quick] [--rows N] [--dim D] [--batch B] "
    "[--lookups L] [--batches N] [--warmup N] [--cache-fraction F] [--fast-factor X] [--alpha A] "
    "[--model default|off] [--dir DIR] [--policies LIST] [--distributions LIST] [--seed S]";

struct Options {
  int threads = 0;
  std::string json;
  bool quick = false;
  int64_t rows = 1000000;
  int64_t dim = 64;  // f32: 256-byte rows
  int64_t batch = 2048;
  int64_t lookups = 20;
  int64_t batches = 40;
  int64_t warmup = 40;
  double cache_fraction = 0.10;
  double fast_factor = 4.0;  // table bytes / fast-tier budget
  double alpha = 1.05;
  std::string model = "default";
  std::string dir = "/tmp";
  std::vector<std::string> policies = {"dram", "simple", "static", "dynamic", "auto"};
  std::vector<std::string> distributions = {"zipf", "uniform"};
  uint64_t seed = 2024;
};

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::size_t b = 0;
  while (b <= s.size()) {
    const std::size_t e = s.find(',', b);
    out.push_back(s.substr(b, e == std::string::npos ? std::string::npos : e - b));
    if (e == std::string::npos) break;
    b = e + 1;
  }
  return out;
}

Options parse(int argc, char** argv) {
  bench::Cli cli("strata-bench-emb-cache", kUsage);
  Options o;
  bool rows_set = false, batch_set = false, lookups_set = false, batches_set = false, warmup_set = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--quick") {
      o.quick = true;
    } else if (a == "--threads") {
      o.threads = cli.threads(a, cli.value(argc, argv, i));
    } else if (a == "--json") {
      o.json = cli.value(argc, argv, i);
    } else if (a == "--rows") {
      o.rows = cli.integer(a, cli.value(argc, argv, i), 64, int64_t{1} << 34);
      rows_set = true;
    } else if (a == "--dim") {
      o.dim = cli.integer(a, cli.value(argc, argv, i), 1, 4096);
    } else if (a == "--batch") {
      o.batch = cli.integer(a, cli.value(argc, argv, i), 1, 1 << 20);
      batch_set = true;
    } else if (a == "--lookups") {
      o.lookups = cli.integer(a, cli.value(argc, argv, i), 1, 1 << 12);
      lookups_set = true;
    } else if (a == "--batches") {
      o.batches = cli.integer(a, cli.value(argc, argv, i), 1, 1 << 20);
      batches_set = true;
    } else if (a == "--warmup") {
      o.warmup = cli.integer(a, cli.value(argc, argv, i), 0, 1 << 20);
      warmup_set = true;
    } else if (a == "--cache-fraction") {
      o.cache_fraction = cli.real(a, cli.value(argc, argv, i), 0.0, 1.0);
    } else if (a == "--fast-factor") {
      o.fast_factor = cli.real(a, cli.value(argc, argv, i), 1.0, 1e6);
    } else if (a == "--alpha") {
      o.alpha = cli.real(a, cli.value(argc, argv, i), 0.0, 10.0);
    } else if (a == "--model") {
      o.model = cli.value(argc, argv, i);
      if (o.model != "default" && o.model != "off") cli.fail("--model: expected default or off, got '" + o.model + "'");
    } else if (a == "--dir") {
      o.dir = cli.value(argc, argv, i);
    } else if (a == "--policies") {
      o.policies = split(cli.value(argc, argv, i));
      for (const auto& p : o.policies) {
        if (p == "dram") continue;
        try {
          parse_embedding_policy(p);
        } catch (const Error&) {
          cli.fail("--policies: expected a comma-separated list of dram, simple, static, dynamic, auto; got '" + p +
                   "'");
        }
      }
    } else if (a == "--distributions") {
      o.distributions = split(cli.value(argc, argv, i));
      for (const auto& d : o.distributions)
        if (d != "zipf" && d != "uniform")
          cli.fail("--distributions: expected a comma-separated list of zipf, uniform; got '" + d + "'");
    } else if (a == "--seed") {
      o.seed = static_cast<uint64_t>(cli.integer(a, cli.value(argc, argv, i), 0, int64_t{1} << 62));
    } else {
      cli.unknown(a);
    }
  }
  if (o.quick) {
    if (!rows_set) o.rows = 100000;
    if (!batch_set) o.batch = 256;
    if (!lookups_set) o.lookups = 8;
    if (!batches_set) o.batches = 6;
    if (!warmup_set) o.warmup = 6;
  }
  return o;
}

// One table's indices for every batch: batches × (batch × lookups), bag b of a batch is
// [b × lookups, (b + 1) × lookups).
struct Trace {
  std::string name;
  std::vector<std::vector<int64_t>> batches;
};

// Zipf(alpha) ranks on {1..n} (rejection-inversion), rank k - 1 mapped to a row by a maximal-length
// LFSR at a seeded phase (the dissertation's scrambling); or uniform rows.
Trace make_trace(const std::string& dist, const Options& o) {
  Trace t;
  char name[32];
  std::snprintf(name, sizeof name, "zipf(%.2f)", o.alpha);
  t.name = dist == "zipf" ? name : "uniform";
  RandomStream rng(static_cast<uint32_t>(o.seed + (dist == "zipf" ? 1 : 2)));
  const int64_t n = o.rows;
  const int64_t per_batch = o.batch * o.lookups;
  t.batches.resize(static_cast<std::size_t>(o.warmup + o.batches));
  if (dist == "uniform") {
    for (auto& b : t.batches) {
      b.resize(static_cast<std::size_t>(per_batch));
      for (auto& x : b) x = static_cast<int64_t>(rng.below(static_cast<uint64_t>(n)));
    }
    return t;
  }
  const ZipfSampler zipf(n, o.alpha);
  const LfsrPermutation scramble(n, o.seed);
  for (auto& b : t.batches) {
    b.resize(static_cast<std::size_t>(per_batch));
    for (auto& x : b) x = scramble(zipf(rng) - 1);
  }
  return t;
}

struct Result {
  std::string distribution, policy;
  std::vector<double> ms;
  std::vector<double> hooks_ms, lookup_ms, update_ms;  // the phases of each measured batch
  double hit_rate = 0;
  PolicyStats stats;
  memory::SlowTierCounters throttle;
  int64_t cache_rows = 0;
  double construct_s = 0;
};

Result run_policy(const std::string& policy, const Trace& trace, const Options& o, const memory::SlowTierModel& model,
                  std::size_t fast_budget) {
  Result res;
  res.distribution = trace.name;
  res.policy = policy;
  const std::size_t stride = (static_cast<std::size_t>(o.dim) * 4 + 7) / 8 * 8;
  const std::size_t table_bytes = static_cast<std::size_t>(o.rows) * stride;
  memory::SlowTierThrottle throttle(model);
  std::unique_ptr<memory::DramHeap> fast;
  std::unique_ptr<memory::PmHeap> slow;
  std::unique_ptr<ManagedTable> managed;
  std::unique_ptr<SimpleTable> dram_table;
  const auto t0 = Clock::now();
  Table* table = nullptr;
  if (policy == "dram") {
    fast = std::make_unique<memory::DramHeap>(table_bytes + (1 << 20));
    dram_table = std::make_unique<SimpleTable>(o.rows, o.dim, ElemType::F32, TableMemory{fast.get(), nullptr});
    table = dram_table.get();
  } else {
    fast = std::make_unique<memory::DramHeap>(fast_budget);
    slow = std::make_unique<memory::PmHeap>(
        memory::PmHeapOptions{.capacity = table_bytes + (1 << 20), .dir = o.dir, .backend = memory::PmBackend::Mmap});
    managed = make_table(parse_embedding_policy(policy), o.rows, o.dim, ElemType::F32, {fast.get(), nullptr},
                         {slow.get(), &throttle}, o.cache_fraction);
    table = &managed->table();
    res.cache_rows = managed->cache_rows();
  }
  table->set_name("bench table");
  res.construct_s = std::chrono::duration<double>(Clock::now() - t0).count();

  std::vector<float> out(static_cast<std::size_t>(o.batch * o.dim));
  std::vector<float> grad(static_cast<std::size_t>(o.batch * o.dim));
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> ug(-1e-3f, 1e-3f);
  for (float& g : grad) g = ug(rng);
  std::vector<int64_t> offsets(static_cast<std::size_t>(o.batch + 1));
  for (int64_t b = 0; b <= o.batch; ++b) offsets[static_cast<std::size_t>(b)] = b * o.lookups;
  const SparseOptimizer sgd{.kind = SparseOptimizer::Kind::SGD, .lr = 0.01f};
  SparseOptimizerState state(*table, sgd);
  UpdateWorkspace ws;
  for (std::size_t i = 0; i < trace.batches.size(); ++i) {
    if (static_cast<int64_t>(i) == o.warmup) {
      if (managed) managed->reset_stats();
      table->reset_counters();
      throttle.reset_counters();
    }
    const auto& idx = trace.batches[i];
    const Bags bags{idx, offsets};
    const auto b0 = Clock::now();
    if (managed) managed->before_lookup(idx);
    const auto b1 = Clock::now();
    lookup(*table, bags, Pooling::Sum, {out.data(), o.dim});
    const auto b2 = Clock::now();
    update(*table, bags, Pooling::Sum, {grad.data(), o.dim}, sgd, state, ws);
    const auto b3 = Clock::now();
    if (managed) managed->after_update();
    const auto b4 = Clock::now();
    auto ms = [](Clock::time_point a, Clock::time_point b) {
      return std::chrono::duration<double, std::milli>(b - a).count();
    };
    if (static_cast<int64_t>(i) >= o.warmup) {
      res.ms.push_back(ms(b0, b4));
      res.hooks_ms.push_back(ms(b0, b1) + ms(b3, b4));
      res.lookup_ms.push_back(ms(b1, b2));
      res.update_ms.push_back(ms(b2, b3));
    }
  }
  if (managed) {
    res.stats = managed->stats();
    res.hit_rate = res.stats.cache.hit_rate();
  } else {
    res.stats.slow = table->counters();
    res.hit_rate = 1.0;
  }
  res.throttle = throttle.counters();
  return res;
}

}  // namespace

int main(int argc, char** argv) try {
  const Options o = parse(argc, argv);
  if (o.threads > 0) set_num_threads(o.threads);
  const int threads = get_num_threads();
  const std::size_t stride = (static_cast<std::size_t>(o.dim) * 4 + 7) / 8 * 8;
  const std::size_t table_bytes = static_cast<std::size_t>(o.rows) * stride;
  const auto fast_budget = static_cast<std::size_t>(static_cast<double>(table_bytes) / o.fast_factor);
  const double dram_gbps = memory::measure_dram_copy_gbps();
  const memory::SlowTierModel model =
      o.model == "default" ? memory::SlowTierModel::defaults(dram_gbps, memory::measure_dram_gather_gbps(256))
                           : memory::SlowTierModel::off();
  const int64_t per_batch = o.batch * o.lookups;

  std::printf("# strata-bench-emb-cache\n\n");
  std::printf(
      "- table: %lld rows x %lld f32 (%zu-byte rows, %.1f MiB); fast-tier budget %.1f MiB (table / %.2f); "
      "cache %.0f %% of the rows\n",
      static_cast<long long>(o.rows), static_cast<long long>(o.dim), stride,
      static_cast<double>(table_bytes) / (1 << 20), static_cast<double>(fast_budget) / (1 << 20), o.fast_factor,
      100 * o.cache_fraction);
  std::printf("- batches: %lld warm-up + %lld measured, each %lld bags x %lld lookups (%lld indices); threads %d\n",
              static_cast<long long>(o.warmup), static_cast<long long>(o.batches), static_cast<long long>(o.batch),
              static_cast<long long>(o.lookups), static_cast<long long>(per_batch), threads);
  std::printf("- slow tier: file-backed mmap in %s; %s\n", o.dir.c_str(), model.describe().c_str());
  std::printf(
      "- embedding phase = before_lookup + emb::lookup (sum) + emb::update (fused SGD) + after_update; "
      "iid indices (Zipf ranks scrambled by an LFSR)\n\n");
  std::fflush(stdout);

  bench::Json json;
  json.begin_object()
      .kv("binary", "strata-bench-emb-cache")
      .kv("threads", threads)
      .kv("dtype", "f32")
      .kv("library", "strata embeddings (CachedTable, policies)")
      .kv("dram_copy_gbps", dram_gbps)
      .kv("model", model.describe());
  json.key("params")
      .begin_object()
      .kv("rows", static_cast<long long>(o.rows))
      .kv("dim", static_cast<long long>(o.dim))
      .kv("row_bytes", static_cast<long long>(stride))
      .kv("batch", static_cast<long long>(o.batch))
      .kv("lookups", static_cast<long long>(o.lookups))
      .kv("batches", static_cast<long long>(o.batches))
      .kv("warmup", static_cast<long long>(o.warmup))
      .kv("cache_fraction", o.cache_fraction)
      .kv("fast_budget_bytes", static_cast<long long>(fast_budget))
      .kv("alpha", o.alpha)
      .kv("dir", o.dir)
      .end_object();
  json.key("records").begin_array();

  for (const std::string& dist : o.distributions) {
    const Trace trace = make_trace(dist, o);
    std::vector<int64_t> measured;
    for (std::size_t i = static_cast<std::size_t>(o.warmup); i < trace.batches.size(); ++i)
      measured.insert(measured.end(), trace.batches[i].begin(), trace.batches[i].end());
    std::vector<Result> rs;
    for (const std::string& p : o.policies) rs.push_back(run_policy(p, trace, o, model, fast_budget));
    int64_t cache_rows = 0;
    for (const Result& r : rs) cache_rows = std::max(cache_rows, r.cache_rows);
    // REFERENCE.md §2's static optimum: the hottest rows' share under the true distribution,
    // H(fN, s) / H(N, s) for Zipf and f for uniform. The hindsight optimum of the measured batches
    // is larger for short traces (noise makes some rows look hot) and is shown for reference.
    const double hindsight = empirical_static_optimum(measured, o.rows, cache_rows);
    const double f = static_cast<double>(cache_rows) / static_cast<double>(o.rows);
    const double optimum = dist == "zipf" ? zipf_static_optimal_hit_rate(o.rows, o.alpha, f) : f;
    double simple_ms = 0;
    for (const Result& r : rs)
      if (r.policy == "simple") simple_ms = bench::summarize(r.ms).median;

    std::printf("## %s: cache %lld rows; static optimum %s = %.4f (with hindsight over the measured batches %.4f)\n\n",
                trace.name.c_str(), static_cast<long long>(cache_rows), dist == "zipf" ? "H(fN,s)/H(N,s)" : "f",
                optimum, hindsight);
    std::printf(
        "| policy | ms/batch median (min-max) | vs simple | hooks / lookup / update ms | hit rate | "
        "hit - optimum | slow MiB read | slow MiB written | rows cached | rows written back | "
        "throttle stall s |\n");
    std::printf("|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (const Result& r : rs) {
      const auto s = bench::summarize(r.ms);
      const bool cached = r.policy != "dram" && r.policy != "simple";
      char hit[32] = "0", gap[32] = "-";
      if (r.policy == "dram") std::snprintf(hit, sizeof hit, "(all fast)");
      if (cached) {
        std::snprintf(hit, sizeof hit, "%.4f", r.hit_rate);
        std::snprintf(gap, sizeof gap, "%+.2f pt", 100 * (r.hit_rate - optimum));
      }
      std::printf(
          "| %s | %.2f (%.2f-%.2f) | %.2fx | %.2f / %.2f / %.2f | %s | %s | %.1f | %.1f | %llu | %llu | "
          "%.2f |\n",
          r.policy.c_str(), s.median, s.min, s.max, simple_ms > 0 ? simple_ms / s.median : 0.0,
          bench::summarize(r.hooks_ms).median, bench::summarize(r.lookup_ms).median,
          bench::summarize(r.update_ms).median, hit, gap, static_cast<double>(r.throttle.bytes_read) / (1 << 20),
          static_cast<double>(r.throttle.bytes_written) / (1 << 20),
          static_cast<unsigned long long>(r.stats.cache.rows_cached),
          static_cast<unsigned long long>(r.stats.cache.rows_written_back),
          static_cast<double>(r.throttle.stall_ns) * 1e-9);
      json.begin_object()
          .kv("distribution", trace.name)
          .kv("policy", r.policy)
          .timed("embedding_ms", "ms", r.ms)
          .timed("hooks_ms", "ms", r.hooks_ms)
          .timed("lookup_ms", "ms", r.lookup_ms)
          .timed("update_ms", "ms", r.update_ms)
          .kv("hit_rate", r.policy == "simple" ? 0.0 : r.hit_rate)
          .kv("static_optimum", optimum)
          .kv("static_optimum_hindsight", hindsight)
          .kv("speedup_vs_simple", simple_ms > 0 ? simple_ms / s.median : 0.0)
          .kv("cache_rows", static_cast<long long>(r.cache_rows))
          .kv("slow_bytes_read", static_cast<long long>(r.throttle.bytes_read))
          .kv("slow_bytes_written", static_cast<long long>(r.throttle.bytes_written))
          .kv("throttle_stall_s", static_cast<double>(r.throttle.stall_ns) * 1e-9)
          .kv("rows_cached", static_cast<long long>(r.stats.cache.rows_cached))
          .kv("rows_written_back", static_cast<long long>(r.stats.cache.rows_written_back))
          .kv("pages_flushed", static_cast<long long>(r.stats.cache.pages_flushed))
          .kv("construct_s", r.construct_s)
          .end_object();
    }
    std::printf("\n");
    std::fflush(stdout);
  }
  json.end_array().end_object();
  if (!o.json.empty() && !bench::write_file_atomically(o.json, json.str(), "strata-bench-emb-cache")) return 1;
  return 0;
} catch (const strata::Error& e) {
  std::fprintf(stderr, "strata-bench-emb-cache: %s\n", e.what());
  return 1;
}
