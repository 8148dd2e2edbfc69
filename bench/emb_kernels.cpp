// strata-bench-emb: embedding lookup and fused update throughput (embeddings/kernels.h) on
// SimpleTables in DRAM, uniform random indices — the issue's "lookup+update ≥ 60 % of the random
// gather bandwidth for 256-byte rows" figure (divide by strata-limits' gather_256).
//
//   strata-bench-emb [--threads T] [--json FILE] [--dims 16,32,64,128,256] [--type f32|bf16]
//                    [--table-mib M] [--tables N] [--batch B] [--bag-min L] [--bag-max L]
//                    [--optimizer sgd|rowwise_adagrad] [--pooling sum|mean] [--prefetch P]
//                    [--batches K] [--reps R] [--quick]
//
// Per feature size d: N tables of M MiB each (rows = M MiB / row bytes, contents random), K
// pregenerated batches of B bags per table with sizes uniform in [L_min, L_max] and rows uniform
// over the table, cycled over the repetitions. Each repetition times one lookup_ensemble (into a
// [B, N·d] buffer, like the DLRM interaction input) and then one update_ensemble with a fixed
// random gradient. Figures (GB/s = 1e9 bytes/s of table row bytes):
//   lookup:        nnz · row_bytes / t_lookup                     (rows read)
//   update:        2 · unique · row_bytes / t_update              (distinct rows read and written)
//   lookup_update: (nnz + 2 · unique) · row_bytes / (t_lookup + t_update)
// plus rows/s (nnz / t_lookup, unique / t_update). --prefetch sets the software prefetch distance
// in rows (0: none; default: the library's), to measure whether it helps.

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "bench/bench_common.h"
#include "core/error.h"
#include "core/threading.h"
#include "embeddings/detail/kernels.h"
#include "embeddings/kernels.h"
#include "memory/heap.h"

namespace {

using Clock = std::chrono::steady_clock;
using strata::bench::Json;
using strata::bench::summarize;
namespace emb = strata::emb;

constexpr const char* kProg = "strata-bench-emb";
constexpr const char* kUsage =
    "strata-bench-emb [--threads T] [--json FILE] [--dims 16,32,64,128,256] [--type f32|bf16] [--table-mib M] "
    "[--tables N] [--batch B] [--bag-min L] [--bag-max L] [--optimizer sgd|rowwise_adagrad] [--pooling sum|mean] "
    "[--prefetch P] [--batches K] [--reps R] [--quick]";

struct Options {
  int threads = 0;
  std::string json;
  std::vector<int64_t> dims = {16, 32, 64, 128, 256};
  emb::ElemType type = emb::ElemType::F32;
  int64_t table_mib = 1024;
  int64_t tables = 1;
  int64_t batch = 2048;
  int64_t bag_min = 1, bag_max = 100;
  emb::SparseOptimizer::Kind optimizer = emb::SparseOptimizer::Kind::SGD;
  emb::Pooling pooling = emb::Pooling::Sum;
  int prefetch = -1;
  int batches = 4;
  int reps = 10;
  bool quick = false;
};

Options parse(int argc, char** argv) {
  const strata::bench::Cli cli(kProg, kUsage);
  Options o;
  bool mib_set = false, reps_set = false, dims_set = false, batch_set = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--quick") {
      o.quick = true;
    } else if (a == "--threads") {
      o.threads = cli.threads(a, cli.value(argc, argv, i));
    } else if (a == "--json") {
      o.json = cli.value(argc, argv, i);
    } else if (a == "--dims") {
      const std::string v = cli.value(argc, argv, i);
      o.dims.clear();
      std::stringstream ss(v);
      std::string item;
      while (std::getline(ss, item, ',')) o.dims.push_back(cli.integer(a, item.c_str(), 1, 4096));
      if (o.dims.empty()) cli.fail("--dims: expected a comma-separated list of feature sizes, got '" + v + "'");
      dims_set = true;
    } else if (a == "--type") {
      const std::string v = cli.value(argc, argv, i);
      if (v == "f32") {
        o.type = emb::ElemType::F32;
      } else if (v == "bf16") {
        o.type = emb::ElemType::BF16;
      } else {
        cli.fail("--type: expected f32 or bf16, got '" + v + "'");
      }
    } else if (a == "--table-mib") {
      o.table_mib = cli.integer(a, cli.value(argc, argv, i), 1, 1 << 20), mib_set = true;
    } else if (a == "--tables") {
      o.tables = cli.integer(a, cli.value(argc, argv, i), 1, 1024);
    } else if (a == "--batch") {
      o.batch = cli.integer(a, cli.value(argc, argv, i), 1, 1 << 24), batch_set = true;
    } else if (a == "--bag-min") {
      o.bag_min = cli.integer(a, cli.value(argc, argv, i), 0, 1 << 20);
    } else if (a == "--bag-max") {
      o.bag_max = cli.integer(a, cli.value(argc, argv, i), 0, 1 << 20);
    } else if (a == "--optimizer") {
      const std::string v = cli.value(argc, argv, i);
      if (v == "sgd") {
        o.optimizer = emb::SparseOptimizer::Kind::SGD;
      } else if (v == "rowwise_adagrad") {
        o.optimizer = emb::SparseOptimizer::Kind::RowWiseAdagrad;
      } else {
        cli.fail("--optimizer: expected sgd or rowwise_adagrad, got '" + v + "'");
      }
    } else if (a == "--pooling") {
      const std::string v = cli.value(argc, argv, i);
      if (v == "sum") {
        o.pooling = emb::Pooling::Sum;
      } else if (v == "mean") {
        o.pooling = emb::Pooling::Mean;
      } else {
        cli.fail("--pooling: expected sum or mean, got '" + v + "'");
      }
    } else if (a == "--prefetch") {
      o.prefetch = static_cast<int>(cli.integer(a, cli.value(argc, argv, i), 0, emb::detail::kMaxPrefetch));
    } else if (a == "--batches") {
      o.batches = static_cast<int>(cli.integer(a, cli.value(argc, argv, i), 1, 64));
    } else if (a == "--reps") {
      o.reps = static_cast<int>(cli.integer(a, cli.value(argc, argv, i), 1, 1000)), reps_set = true;
    } else {
      cli.unknown(a);
    }
  }
  if (o.bag_min > o.bag_max)
    cli.fail("--bag-min " + std::to_string(o.bag_min) + " is larger than --bag-max " + std::to_string(o.bag_max));
  if (o.quick) {  // a smoke run for tests: small sizes (explicit flags still win)
    if (!mib_set) o.table_mib = 16;
    if (!reps_set) o.reps = 2;
    if (!dims_set) o.dims = {16, 64, 256};
    if (!batch_set) o.batch = 256;
  }
  return o;
}

struct Batch {
  std::vector<std::vector<int64_t>> indices, offsets;  // per table
  std::vector<int64_t> unique;                         // distinct rows per table (after an update)
  int64_t nnz = 0;
};

Batch make_batch(const Options& o, int64_t rows, std::mt19937_64& gen) {
  Batch b;
  std::uniform_int_distribution<int64_t> len(o.bag_min, o.bag_max), row(0, rows - 1);
  for (int64_t t = 0; t < o.tables; ++t) {
    std::vector<int64_t> idx, off{0};
    for (int64_t i = 0; i < o.batch; ++i) {
      const int64_t n = len(gen);
      for (int64_t k = 0; k < n; ++k) idx.push_back(row(gen));
      off.push_back(static_cast<int64_t>(idx.size()));
    }
    b.nnz += static_cast<int64_t>(idx.size());
    b.indices.push_back(std::move(idx));
    b.offsets.push_back(std::move(off));
  }
  return b;
}

struct Result {
  int64_t d = 0, row_bytes = 0, rows = 0;
  double nnz = 0, unique = 0;  // per repetition, averaged over the batches
  std::vector<double> lookup_s, update_s;
};

Result run_dim(const Options& o, int64_t d) {
  Result r;
  r.d = d;
  r.row_bytes = static_cast<int64_t>(static_cast<std::size_t>(d) * emb::elem_size(o.type));
  r.rows = std::max<int64_t>(1, (o.table_mib << 20) / r.row_bytes);
  const std::size_t table_bytes = static_cast<std::size_t>(r.rows * r.row_bytes);
  strata::memory::DramHeap heap(static_cast<std::size_t>(o.tables) * table_bytes + (std::size_t{1} << 20));
  std::vector<std::unique_ptr<emb::SimpleTable>> tables;
  const emb::SparseOptimizer opt{o.optimizer, 1e-4f, 1e-8f, 0.0f};
  std::vector<std::unique_ptr<emb::SparseOptimizerState>> states;
  std::vector<std::unique_ptr<emb::UpdateWorkspace>> wss;
  for (int64_t t = 0; t < o.tables; ++t) {
    tables.push_back(std::make_unique<emb::SimpleTable>(r.rows, d, o.type, emb::TableMemory{&heap, nullptr}));
    // Random-looking contents written in parallel (first touch spread over the threads).
    std::byte* base = tables.back()->data();
    strata::parallel_for(static_cast<int64_t>(table_bytes / 4), 1 << 16, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) {
        const uint32_t h = static_cast<uint32_t>(i) * 2654435761u;
        // Small finite values for both f32 and (pairs of) bf16.
        const uint32_t v = o.type == emb::ElemType::F32 ? 0x3c000000u | (h >> 9) : 0x3c003c00u | (h & 0x007f007fu);
        std::memcpy(base + i * 4, &v, 4);
      }
    });
    states.push_back(std::make_unique<emb::SparseOptimizerState>(*tables.back(), opt));
    wss.push_back(std::make_unique<emb::UpdateWorkspace>());
  }
  std::mt19937_64 gen(1234 + static_cast<uint64_t>(d));
  std::vector<Batch> batches;
  for (int k = 0; k < o.batches; ++k) batches.push_back(make_batch(o, r.rows, gen));
  const int64_t width = o.tables * d;
  std::vector<float> out(static_cast<std::size_t>(o.batch * width));
  std::vector<float> grad(out.size());
  std::mt19937 g32(7);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (auto& x : grad) x = u(g32);

  std::vector<emb::Table*> tptr;
  std::vector<emb::SparseOptimizerState*> sptr;
  std::vector<emb::UpdateWorkspace*> wptr;
  std::vector<emb::OutputSlice> outs, grads;
  for (int64_t t = 0; t < o.tables; ++t) {
    tptr.push_back(tables[t].get());
    sptr.push_back(states[t].get());
    wptr.push_back(wss[t].get());
    outs.push_back({out.data() + t * d, width});
    grads.push_back({grad.data() + t * d, width});
  }
  auto step = [&](Batch& b, double* lookup_s, double* update_s) {
    std::vector<emb::Bags> bags;
    for (int64_t t = 0; t < o.tables; ++t) bags.push_back({b.indices[t], b.offsets[t]});
    const auto t0 = Clock::now();
    emb::lookup_ensemble(tptr, bags, o.pooling, outs);
    const auto t1 = Clock::now();
    emb::update_ensemble(tptr, bags, o.pooling, grads, opt, sptr, wptr);
    const auto t2 = Clock::now();
    if (lookup_s) *lookup_s = std::chrono::duration<double>(t1 - t0).count();
    if (update_s) *update_s = std::chrono::duration<double>(t2 - t1).count();
    b.unique.clear();
    for (auto* w : wptr) b.unique.push_back(w->last_unique_rows());
  };
  for (auto& b : batches) step(b, nullptr, nullptr);  // warm-up (also grows the workspaces)
  for (int rep = 0; rep < o.reps; ++rep) {
    double ls = 0, us = 0;
    step(batches[static_cast<std::size_t>(rep % o.batches)], &ls, &us);
    r.lookup_s.push_back(ls);
    r.update_s.push_back(us);
  }
  for (int rep = 0; rep < o.reps; ++rep) {
    const Batch& b = batches[static_cast<std::size_t>(rep % o.batches)];
    r.nnz += static_cast<double>(b.nnz) / o.reps;
    for (int64_t u : b.unique) r.unique += static_cast<double>(u) / o.reps;
  }
  volatile float sink = out[out.size() / 2];
  (void)sink;
  return r;
}

}  // namespace

int main(int argc, char** argv) try {
  const Options o = parse(argc, argv);
  if (o.threads > 0) strata::set_num_threads(o.threads);
  if (o.prefetch >= 0) emb::detail::prefetch_distance().store(o.prefetch);
  const int threads = strata::get_num_threads();
  const int prefetch = emb::detail::prefetch_distance().load();
  std::printf(
      "strata-bench-emb — %d threads, %s rows, %lld table(s) of %lld MiB, batch %lld, bags %lld..%lld, %s, "
      "%s pooling, prefetch %d, %d reps after a warm-up (median [min, max])\n",
      threads, emb::elem_name(o.type), static_cast<long long>(o.tables), static_cast<long long>(o.table_mib),
      static_cast<long long>(o.batch), static_cast<long long>(o.bag_min), static_cast<long long>(o.bag_max),
      emb::optimizer_name(o.optimizer), emb::pooling_name(o.pooling), prefetch, o.reps);
  std::printf("%5s %9s %22s %22s %22s %12s %12s\n", "d", "row B", "lookup GB/s", "update GB/s", "lookup+update GB/s",
              "lookup Mrow/s", "update Mrow/s");
  std::fflush(stdout);
  std::vector<Result> results;
  for (int64_t d : o.dims) {
    results.push_back(run_dim(o, d));
    const Result& r = results.back();
    std::vector<double> lk, up, both;
    for (std::size_t i = 0; i < r.lookup_s.size(); ++i) {
      lk.push_back(r.nnz * r.row_bytes / r.lookup_s[i] * 1e-9);
      up.push_back(2 * r.unique * r.row_bytes / r.update_s[i] * 1e-9);
      both.push_back((r.nnz + 2 * r.unique) * r.row_bytes / (r.lookup_s[i] + r.update_s[i]) * 1e-9);
    }
    const auto sl = summarize(lk), su = summarize(up), sb = summarize(both);
    std::printf("%5lld %9lld %8.2f [%5.2f,%5.2f] %8.2f [%5.2f,%5.2f] %8.2f [%5.2f,%5.2f] %12.1f %12.1f\n",
                static_cast<long long>(r.d), static_cast<long long>(r.row_bytes), sl.median, sl.min, sl.max, su.median,
                su.min, su.max, sb.median, sb.min, sb.max, r.nnz / summarize(r.lookup_s).median * 1e-6,
                r.unique / summarize(r.update_s).median * 1e-6);
    std::fflush(stdout);
  }
  if (!o.json.empty()) {
    Json j;
    j.begin_object();
    j.kv("binary", kProg).kv("threads", threads).kv("dtype", emb::elem_name(o.type)).kv("library", "strata");
    j.kv("reps", o.reps).kv("quick", o.quick);
    j.key("params").begin_object();
    j.kv("tables", static_cast<long long>(o.tables)).kv("table_mib", static_cast<long long>(o.table_mib));
    j.kv("batch", static_cast<long long>(o.batch)).kv("bag_min", static_cast<long long>(o.bag_min));
    j.kv("bag_max", static_cast<long long>(o.bag_max)).kv("optimizer", emb::optimizer_name(o.optimizer));
    j.kv("pooling", emb::pooling_name(o.pooling)).kv("prefetch", prefetch).kv("batches", o.batches);
    j.kv("indices", "uniform").kv("tier", "dram");
    j.end_object();
    j.key("records").begin_array();
    for (const Result& r : results) {
      std::vector<double> lk, up, both, lk_rows, up_rows;
      for (std::size_t i = 0; i < r.lookup_s.size(); ++i) {
        lk.push_back(r.nnz * r.row_bytes / r.lookup_s[i] * 1e-9);
        up.push_back(2 * r.unique * r.row_bytes / r.update_s[i] * 1e-9);
        both.push_back((r.nnz + 2 * r.unique) * r.row_bytes / (r.lookup_s[i] + r.update_s[i]) * 1e-9);
        lk_rows.push_back(r.nnz / r.lookup_s[i]);
        up_rows.push_back(r.unique / r.update_s[i]);
      }
      j.begin_object();
      j.kv("d", static_cast<long long>(r.d)).kv("row_bytes", static_cast<long long>(r.row_bytes));
      j.kv("rows", static_cast<long long>(r.rows)).kv("nnz", r.nnz).kv("unique", r.unique);
      j.timed("lookup_gbps", "GB/s", lk).timed("update_gbps", "GB/s", up).timed("lookup_update_gbps", "GB/s", both);
      j.timed("lookup_rows_per_s", "rows/s", lk_rows).timed("update_rows_per_s", "rows/s", up_rows);
      std::vector<double> ls_us, us_us;
      for (double s : r.lookup_s) ls_us.push_back(s * 1e6);
      for (double s : r.update_s) us_us.push_back(s * 1e6);
      j.timed("lookup_us", "us", ls_us).timed("update_us", "us", us_us);
      j.end_object();
    }
    j.end_array();
    j.end_object();
    if (!strata::bench::write_file_atomically(o.json, j.str(), kProg)) return 1;
  }
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "%s: %s\n", kProg, e.what());
  return 1;
}
