// strata-limits: the machine limits at the configured thread count, the denominators of the
// benchmark figures (docs/DESIGN.md §5: fractions of a measured machine limit).
//
//   strata-limits [--threads T] [--json FILE] [--gemm-size N] [--stream-mib M] [--table-mib M]
//                 [--reps R] [--quick]
//
// - sgemm: GFLOP/s (2·N³ / time) of an N×N·N×N row-major f32 product (no transposes) through
//   oneDNN's dnnl_sgemm and through the oneDNN matmul primitive (on Strata's engine and stream,
//   ops/detail/cpu/dnnl_engine.h); "sgemm" is the better of the two.
// - STREAM copy (c[i] = a[i]) and triad (a[i] = b[i] + s·c[i]) over arrays of M MiB each, split
//   statically over the threads; bytes counted the STREAM way (copy 2 words per element, triad 3),
//   GB/s = 1e9 bytes/s.
// - random gather: rows of 64, 256 and 1024 bytes picked by uniformly random row index (generated
//   before timing) from an M MiB table into a 4096-row output buffer per thread (reused); GB/s of
//   row bytes gathered.
// Every figure: a warm-up, then R timed repetitions (median, min, max and the raw samples).

#include <oneapi/dnnl/dnnl.h>
#include <sys/mman.h>
#include <tbb/parallel_for.h>
#include <tbb/partitioner.h>
#include <oneapi/dnnl/dnnl.hpp>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "bench/bench_common.h"
#include "core/error.h"
#include "core/threading.h"
#include "ops/detail/cpu/dnnl_engine.h"
#include "ops/dnnl_info.h"

namespace {

using Clock = std::chrono::steady_clock;
using strata::bench::Json;
using strata::bench::summarize;

constexpr const char* kProg = "strata-limits";
constexpr const char* kUsage =
    "strata-limits [--threads T] [--json FILE] [--gemm-size N] [--stream-mib M] [--table-mib M] [--reps R] "
    "[--quick]";

struct Options {
  int threads = 0;
  std::string json;
  int64_t gemm_n = 2048;
  int64_t stream_mib = 512;  // per array
  int64_t table_mib = 1024;
  int reps = 7;
  bool quick = false;
};

Options parse(int argc, char** argv) {
  const strata::bench::Cli cli(kProg, kUsage);
  Options o;
  bool gemm_set = false, stream_set = false, table_set = false, reps_set = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--quick") {
      o.quick = true;
    } else if (a == "--threads") {
      o.threads = cli.threads(a, cli.value(argc, argv, i));
    } else if (a == "--json") {
      o.json = cli.value(argc, argv, i);
    } else if (a == "--gemm-size") {
      o.gemm_n = cli.integer(a, cli.value(argc, argv, i), 16, 16384), gemm_set = true;
    } else if (a == "--stream-mib") {
      o.stream_mib = cli.integer(a, cli.value(argc, argv, i), 1, 1 << 16), stream_set = true;
    } else if (a == "--table-mib") {
      o.table_mib = cli.integer(a, cli.value(argc, argv, i), 1, 1 << 16), table_set = true;
    } else if (a == "--reps") {
      o.reps = static_cast<int>(cli.integer(a, cli.value(argc, argv, i), 1, 1000)), reps_set = true;
    } else {
      cli.unknown(a);
    }
  }
  if (o.quick) {  // a smoke run for tests: small sizes (explicit flags still win)
    if (!gemm_set) o.gemm_n = 256;
    if (!stream_set) o.stream_mib = 16;
    if (!table_set) o.table_mib = 32;
    if (!reps_set) o.reps = 3;
  }
  return o;
}

/// 64-byte aligned, uninitialized float/byte storage.
/// Page-aligned anonymous memory, transparent huge pages requested (madvise), so that random
/// gathers measure DRAM and not page walks; a limit is the best the machine can do.
struct Buffer {
  void* p = nullptr;
  std::size_t bytes = 0;
  std::size_t mapped = 0;
  explicit Buffer(std::size_t n) : bytes(n) {
    mapped = (n + (std::size_t{2} << 20) - 1) / (std::size_t{2} << 20) * (std::size_t{2} << 20);
    p = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    STRATA_CHECK(p != MAP_FAILED, "cannot map ", n, " bytes");
    madvise(p, mapped, MADV_HUGEPAGE);  // advisory: without THP the figures are simply lower
  }
  ~Buffer() { munmap(p, mapped); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  template <typename T>
  T* as() const {
    return static_cast<T*>(p);
  }
};

/// Runs fn(part, begin, end) for the T static parts of [0, n) on T threads (T = get_num_threads()).
template <typename Fn>
void static_parts(int64_t n, Fn&& fn) {
  const int parts = strata::get_num_threads();
  tbb::parallel_for(
      tbb::blocked_range<int>(0, parts, 1),
      [&](const tbb::blocked_range<int>& r) {
        for (int t = r.begin(); t != r.end(); ++t) fn(t, n * t / parts, n * (t + 1) / parts);
      },
      tbb::static_partitioner());
}

template <typename Fn>
std::vector<double> time_seconds(int reps, Fn&& fn) {
  fn();  // warm-up
  std::vector<double> s;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = Clock::now();
    fn();
    s.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  return s;
}

/// rate = work / seconds for each sample.
std::vector<double> rates(const std::vector<double>& seconds, double work) {
  std::vector<double> r;
  for (double s : seconds) r.push_back(work / s);
  return r;
}

struct Record {
  std::string name, unit, note;
  std::vector<double> samples;
  std::string params_json;  // an object
  bool with_best = false;
};

void print_row(const Record& r) {
  const auto s = summarize(r.samples);
  std::printf("%-20s %10.2f %10.2f %10.2f  %-7s %s\n", r.name.c_str(), s.median, s.min, s.max, r.unit.c_str(),
              r.note.c_str());
  std::fflush(stdout);
}

// ---- sgemm ----------------------------------------------------------------------------------------

void fill(float* p, int64_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  for (int64_t i = 0; i < n; ++i) p[i] = d(gen);
}

std::vector<Record> run_sgemm(const Options& o) {
  const int64_t n = o.gemm_n;
  const std::size_t bytes = static_cast<std::size_t>(n * n) * sizeof(float);
  Buffer a(bytes), b(bytes), c(bytes);
  fill(a.as<float>(), n * n, 1);
  fill(b.as<float>(), n * n, 2);
  std::memset(c.p, 0, bytes);
  const double flop = 2.0 * static_cast<double>(n) * n * n;
  char params[160];
  std::snprintf(params, sizeof params, "{\"m\": %lld, \"n\": %lld, \"k\": %lld, \"layout\": \"row-major NN\"}",
                static_cast<long long>(n), static_cast<long long>(n), static_cast<long long>(n));

  std::vector<Record> out;
  {
    auto secs = time_seconds(o.reps, [&] {
      const dnnl_status_t st =
          dnnl_sgemm('N', 'N', n, n, n, 1.f, a.as<float>(), n, b.as<float>(), n, 0.f, c.as<float>(), n);
      STRATA_CHECK(st == dnnl_success, "dnnl_sgemm failed with status ", static_cast<int>(st));
    });
    out.push_back({"sgemm_dnnl_sgemm", "GFLOP/s", "dnnl_sgemm", rates(secs, flop * 1e-9), params});
  }
  {
    using dnnl::memory;
    const memory::desc md({n, n}, memory::data_type::f32, memory::format_tag::ab);
    const auto& eng = strata::ops::cpu::dnnl_engine();
    const dnnl::matmul::primitive_desc pd(eng, md, md, md);
    const dnnl::matmul prim(pd);
    const std::unordered_map<int, memory> args = {{DNNL_ARG_SRC, strata::ops::cpu::dnnl_wrap(md, a.p)},
                                                  {DNNL_ARG_WEIGHTS, strata::ops::cpu::dnnl_wrap(md, b.p)},
                                                  {DNNL_ARG_DST, strata::ops::cpu::dnnl_wrap(md, c.p)}};
    auto secs = time_seconds(o.reps, [&] { strata::ops::cpu::dnnl_execute(prim, args); });
    out.push_back({"sgemm_dnnl_matmul", "GFLOP/s", std::string("matmul primitive (") + pd.impl_info_str() + ")",
                   rates(secs, flop * 1e-9), params});
  }
  // The better of the two by median.
  const bool matmul_wins = summarize(out[1].samples).median > summarize(out[0].samples).median;
  Record best = out[matmul_wins ? 1 : 0];
  best.note = std::string("best of the two: ") + (matmul_wins ? "sgemm_dnnl_matmul" : "sgemm_dnnl_sgemm");
  best.name = "sgemm";
  out.push_back(best);
  return out;
}

// ---- STREAM ---------------------------------------------------------------------------------------

std::vector<Record> run_stream(const Options& o) {
  const int64_t n = o.stream_mib * (int64_t{1} << 20) / static_cast<int64_t>(sizeof(float));
  const std::size_t bytes = static_cast<std::size_t>(n) * sizeof(float);
  Buffer ba(bytes), bb(bytes), bc(bytes);
  float* __restrict a = ba.as<float>();
  float* __restrict b = bb.as<float>();
  float* __restrict c = bc.as<float>();
  // First touch with the same static partition the kernels use.
  static_parts(n, [&](int, int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) a[i] = 1.f, b[i] = 2.f, c[i] = 0.f;
  });
  const float s = 3.f;
  char params[200];
  std::snprintf(params, sizeof params,
                "{\"array_mib\": %lld, \"elements\": %lld, \"arrays\": 3, \"word_bytes\": 4, \"partition\": "
                "\"static, one part per thread\"}",
                static_cast<long long>(o.stream_mib), static_cast<long long>(n));
  std::vector<Record> out;
  auto copy_secs = time_seconds(o.reps, [&] {
    static_parts(n, [&](int, int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) c[i] = a[i];
    });
  });
  out.push_back({"stream_copy", "GB/s", "c[i] = a[i]; 2 words/element",
                 rates(copy_secs, 2.0 * static_cast<double>(bytes) * 1e-9), params, true});
  auto triad_secs = time_seconds(o.reps, [&] {
    static_parts(n, [&](int, int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) a[i] = b[i] + s * c[i];
    });
  });
  out.push_back({"stream_triad", "GB/s", "a[i] = b[i] + s*c[i]; 3 words/element",
                 rates(triad_secs, 3.0 * static_cast<double>(bytes) * 1e-9), params, true});
  // Keep the results observable so no loop can be dropped.
  volatile float sink = a[n / 2] + c[n / 3];
  (void)sink;
  return out;
}

// ---- random gather --------------------------------------------------------------------------------

constexpr int64_t kOutRows = 4096;

template <std::size_t R>
void gather_rows(const char* table, const int64_t* idx, int64_t lo, int64_t hi, char* out) {
  char* o = out;
  char* const end = out + kOutRows * R;
  // Rows a few iterations ahead are prefetched so that many misses are in flight per thread.
  constexpr int64_t kAhead = R >= 1024 ? 4 : 16;
  for (int64_t i = lo; i < hi; ++i) {
    if (i + kAhead < hi) {
      const char* ahead = table + idx[i + kAhead] * R;
      for (std::size_t b = 0; b < R; b += 64) __builtin_prefetch(ahead + b, 0, 0);
    }
    std::memcpy(o, table + idx[i] * R, R);
    o += R;
    if (o == end) o = out;
  }
}

template <std::size_t R>
Record run_gather_rows(const Options& o, const char* table, std::size_t table_bytes, std::mt19937_64& gen) {
  const int64_t rows = static_cast<int64_t>(table_bytes / R);
  // Bytes gathered per repetition: ~0.1 s at 1 GB/s (2 threads on a loaded machine), 1/8 of the
  // default table.
  const int64_t gathered_bytes = o.quick ? (int64_t{8} << 20) : (int64_t{128} << 20);
  const int64_t count = gathered_bytes / static_cast<int64_t>(R);
  std::vector<int64_t> idx(static_cast<std::size_t>(count));
  std::uniform_int_distribution<int64_t> d(0, rows - 1);
  for (auto& x : idx) x = d(gen);
  const int parts = strata::get_num_threads();
  Buffer out(static_cast<std::size_t>(parts) * kOutRows * R);
  std::memset(out.p, 0, out.bytes);
  auto secs = time_seconds(o.reps, [&] {
    static_parts(count, [&](int t, int64_t lo, int64_t hi) {
      gather_rows<R>(table, idx.data(), lo, hi, out.as<char>() + static_cast<std::size_t>(t) * kOutRows * R);
    });
  });
  char params[260];
  std::snprintf(params, sizeof params,
                "{\"row_bytes\": %zu, \"table_mib\": %lld, \"table_rows\": %lld, \"rows_per_rep\": %lld, "
                "\"output_rows_per_thread\": %lld, \"index_dtype\": \"i64\"}",
                R, static_cast<long long>(o.table_mib), static_cast<long long>(rows), static_cast<long long>(count),
                static_cast<long long>(kOutRows));
  volatile char sink = out.as<char>()[R / 2];
  (void)sink;
  return {"gather_" + std::to_string(R), "GB/s", "uniform random rows into a reused buffer",
          rates(secs, static_cast<double>(count) * R * 1e-9), params};
}

std::vector<Record> run_gather(const Options& o) {
  const std::size_t bytes = static_cast<std::size_t>(o.table_mib) << 20;
  Buffer table(bytes);
  static_parts(static_cast<int64_t>(bytes), [&](int, int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) table.as<char>()[i] = static_cast<char>(i * 131 + 7);
  });
  std::mt19937_64 gen(12345);
  std::vector<Record> out;
  out.push_back(run_gather_rows<64>(o, table.as<char>(), bytes, gen));
  print_row(out.back());
  out.push_back(run_gather_rows<256>(o, table.as<char>(), bytes, gen));
  print_row(out.back());
  out.push_back(run_gather_rows<1024>(o, table.as<char>(), bytes, gen));
  print_row(out.back());
  return out;
}

}  // namespace

int main(int argc, char** argv) try {
  const Options o = parse(argc, argv);
  if (o.threads > 0) strata::set_num_threads(o.threads);
  const int threads = strata::get_num_threads();
  const std::string library = strata::ops::dnnl_summary();
  std::printf("strata-limits — %s, %d threads, %d reps after a warm-up (median [min, max])\n", library.c_str(), threads,
              o.reps);
  std::printf("%-20s %10s %10s %10s  %-7s %s\n", "figure", "median", "min", "max", "unit", "");
  std::fflush(stdout);

  std::vector<Record> records;
  for (auto& r : run_sgemm(o)) {
    print_row(r);
    records.push_back(std::move(r));
  }
  for (auto& r : run_stream(o)) {
    print_row(r);
    records.push_back(std::move(r));
  }
  for (auto& r : run_gather(o)) records.push_back(std::move(r));

  if (!o.json.empty()) {
    Json j;
    j.begin_object();
    j.kv("binary", kProg).kv("threads", threads).kv("dtype", "f32").kv("library", library);
    j.kv("reps", o.reps).kv("quick", o.quick);
    for (const Record& r : records) {
      j.begin_timed(r.name, r.unit, r.samples);
      if (r.with_best) j.kv("best", summarize(r.samples).max);
      if (r.name == "sgemm") j.kv("source", r.note.substr(r.note.find(": ") + 2));
      j.kv("method", r.note);
      j.key("params").raw(r.params_json);
      j.end_object();
    }
    j.end_object();
    if (!strata::bench::write_file_atomically(o.json, j.str(), kProg)) return 1;
  }
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "%s: %s\n", kProg, e.what());
  return 1;
}
