// strata-bench-migration: tier migration bandwidth of the copy engine against plain std::memcpy on
// the same buffers (issue 3).
//
// A fast buffer (anonymous mmap) and a slow buffer (a file-backed MAP_SHARED mmap in --dir) are
// copied fast->slow (CopyKind::ToSlow) and slow->fast (CopyKind::FromSlow) with
// strata::memory::copy_bytes_modeled and with std::memcpy, interleaved A B A B after a warm-up, for
// sizes 1 MiB .. 256 MiB. With --model default the copy engine is throttled by the Optane-ratio
// slow-tier model (memcpy never is: it is the unmodeled reference); with --model off it is not.
// The table gives medians, min-max, the time ratio strata/memcpy (< 1: strata faster), GB/s
// (bytes migrated per second) and the fraction of the machine's measured DRAM copy bandwidth
// (traffic = bytes read + bytes written per second, the STREAM convention of that figure).
//
// --json FILE also writes {"binary", "threads", "dtype", "library", "dram_copy_gbps", "params",
// "records": [{"model", "model_description", "direction", "kind", "bytes", "strata_us",
// "memcpy_us"}]}, each time an object {"unit": "us", "samples", "median", "min", "max"} (the
// interleaved repetitions, in order). --quick (a smoke run for tests): 1-4 MiB, 2 repetitions,
// unless the flags say otherwise.

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/statfs.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench_common.h"
#include "core/error.h"
#include "core/threading.h"
#include "memory/copy_engine.h"
#include "memory/slow_tier_model.h"

namespace {

using strata::memory::CopyKind;
using strata::memory::SlowTierModel;
using strata::memory::SlowTierThrottle;
using Clock = std::chrono::steady_clock;

struct Options {
  std::string dir = "/tmp";
  int threads = 0;  // 0: keep strata's default
  int reps = 9;
  std::size_t min_mib = 1, max_mib = 256;
  std::vector<std::string> models = {"off", "default"};
  std::string json;
  bool quick = false;
};

constexpr const char* kProg = "strata-bench-migration";
const strata::bench::Cli cli(kProg,
                             "strata-bench-migration [--dir DIR] [--threads N] [--reps N] [--min-mib N] [--max-mib N] "
                             "[--model off|default|both] [--json FILE] [--quick]");

Options parse(int argc, char** argv) {
  Options o;
  bool reps_set = false, max_set = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--quick") {
      o.quick = true;
      continue;
    }
    if (a != "--dir" && a != "--threads" && a != "--reps" && a != "--min-mib" && a != "--max-mib" && a != "--model" &&
        a != "--json")
      cli.unknown(a);
    const char* v = cli.value(argc, argv, i);
    if (a == "--json") {
      o.json = v;
    } else if (a == "--dir") {
      o.dir = v;
    } else if (a == "--threads") {
      o.threads = cli.threads(a, v);
    } else if (a == "--reps") {
      o.reps = static_cast<int>(cli.integer(a, v, 1, 1000));
      reps_set = true;
    } else if (a == "--min-mib") {
      o.min_mib = static_cast<std::size_t>(cli.integer(a, v, 1, 1 << 20));
    } else if (a == "--max-mib") {
      o.max_mib = static_cast<std::size_t>(cli.integer(a, v, 1, 1 << 20));
      max_set = true;
    } else if (a == "--model") {
      const std::string m = v;
      if (m == "both")
        o.models = {"off", "default"};
      else if (m == "off" || m == "default")
        o.models = {m};
      else
        cli.fail("--model: expected off, default or both, got '" + m + "'");
    } else {
      cli.unknown(a);
    }
  }
  if (o.quick) {
    if (!reps_set) o.reps = 2;
    if (!max_set) o.max_mib = std::max<std::size_t>(o.min_mib, 4);
  }
  if (o.min_mib > o.max_mib) cli.fail("--min-mib is larger than --max-mib");
  return o;
}

std::string fs_name(const std::string& dir) {
  struct statfs s{};
  if (statfs(dir.c_str(), &s) != 0) return "?";
  switch (static_cast<unsigned long>(s.f_type)) {
    case 0x01021994: return "tmpfs";
    case 0xEF53: return "ext4";
    case 0x58465342: return "xfs";
    case 0x9123683E: return "btrfs";
    case 0x794c7630: return "overlayfs";
    default: {
      char buf[32];
      std::snprintf(buf, sizeof buf, "fs 0x%lx", static_cast<unsigned long>(s.f_type));
      return buf;
    }
  }
}

struct Mapping {
  char* p = nullptr;
  std::size_t n = 0;
  ~Mapping() {
    if (p) munmap(p, n);
  }
};

void map_fast(Mapping& m, std::size_t n) {
  void* p = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  STRATA_CHECK(p != MAP_FAILED, "cannot map ", n, " bytes of anonymous memory: ", std::strerror(errno));
  m.p = static_cast<char*>(p);
  m.n = n;
}

// A file-backed shared mapping in dir; the file is unlinked at once (the mapping keeps it alive).
void map_slow(Mapping& m, const std::string& dir, std::size_t n) {
  std::string path = dir + "/strata-migration-XXXXXX";
  const int fd = mkstemp(path.data());
  STRATA_CHECK(fd >= 0, "--dir ", dir, ": cannot create a file there (", std::strerror(errno),
               "); expected a writable directory");
  unlink(path.c_str());
  const int rc = posix_fallocate(fd, 0, static_cast<off_t>(n));
  if (rc != 0) {
    close(fd);
    STRATA_FAIL("--dir ", dir, ": cannot allocate ", n, " bytes (", std::strerror(rc), ")");
  }
  void* p = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int err = errno;
  close(fd);
  STRATA_CHECK(p != MAP_FAILED, "--dir ", dir, ": cannot map ", n, " bytes: ", std::strerror(err));
  m.p = static_cast<char*>(p);
  m.n = n;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t k = v.size();
  return k % 2 ? v[k / 2] : 0.5 * (v[k / 2 - 1] + v[k / 2]);
}

struct Row {
  std::size_t bytes;
  CopyKind kind;
  std::vector<double> strata_s, memcpy_s;
};

std::string size_name(std::size_t b) { return std::to_string(b >> 20) + " MiB"; }

}  // namespace

int main(int argc, char** argv) try {
  const Options opt = parse(argc, argv);
  if (opt.threads > 0) strata::set_num_threads(opt.threads);
  const int threads = strata::get_num_threads();

  std::vector<std::size_t> sizes;
  for (std::size_t m = opt.min_mib; m <= opt.max_mib; m *= 2) sizes.push_back(m << 20);
  const std::size_t max_bytes = sizes.back();

  Mapping fast, slow;
  map_fast(fast, max_bytes);
  map_slow(slow, opt.dir, max_bytes);
  for (std::size_t i = 0; i < max_bytes; ++i) fast.p[i] = static_cast<char>(i * 131 + 7);
  std::memset(slow.p, 0x5a, max_bytes);

  const double dram_gbps = strata::memory::measure_dram_copy_gbps();

  char date[64];
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof date, "%Y-%m-%d %H:%M:%S %Z", std::localtime(&now));
  struct utsname un{};
  uname(&un);
  std::printf("# strata-bench-migration\n\n");
  std::printf("- date: %s; host %s (%s), %u hardware threads, %s\n", date, un.nodename, un.machine,
              std::thread::hardware_concurrency(), un.release);
  std::printf("- threads: %d (strata::set_num_threads; std::memcpy is single-threaded)\n", threads);
  std::printf(
      "- machine limit: DRAM copy bandwidth %.2f GB/s (measure_dram_copy_gbps: STREAM-copy "
      "convention, bytes read + written per second, %d threads)\n",
      dram_gbps, threads);
  std::printf("- non-temporal kernel: %s; Normal/FromSlow copies switch to it above %.1f MiB\n",
              std::string(strata::memory::detail::stream_store_isa()).c_str(),
              static_cast<double>(strata::memory::detail::nontemporal_threshold_bytes()) / (1 << 20));
  std::printf("- fast buffer: anonymous mmap; slow buffer: file-backed MAP_SHARED mmap in %s (%s)\n", opt.dir.c_str(),
              fs_name(opt.dir).c_str());
  std::printf("- %d interleaved repetitions (A = strata, B = memcpy) after one warm-up of each\n", opt.reps);
  std::fflush(stdout);

  strata::bench::Json json;
  json.begin_object()
      .kv("binary", "strata-bench-migration")
      .kv("threads", threads)
      .kv("dtype", "f32")
      .kv("library",
          "strata copy engine (non-temporal kernel " + std::string(strata::memory::detail::stream_store_isa()) + ")")
      .kv("dram_copy_gbps", dram_gbps);
  json.key("params")
      .begin_object()
      .kv("dir", opt.dir)
      .kv("fs", fs_name(opt.dir))
      .kv("reps", opt.reps)
      .kv("min_mib", static_cast<long long>(opt.min_mib))
      .kv("max_mib", static_cast<long long>(opt.max_mib))
      .kv("nontemporal_threshold_bytes", static_cast<long long>(strata::memory::detail::nontemporal_threshold_bytes()))
      .kv("memcpy_threads", 1)
      .end_object();
  json.key("records").begin_array();

  for (const std::string& mode : opt.models) {
    const SlowTierModel model = mode == "default" ? SlowTierModel::defaults(dram_gbps) : SlowTierModel::off();
    SlowTierThrottle throttle(model);
    std::vector<Row> rows;
    for (std::size_t n : sizes) {
      for (CopyKind kind : {CopyKind::ToSlow, CopyKind::FromSlow}) {
        char* dst = kind == CopyKind::ToSlow ? slow.p : fast.p;
        const char* src = kind == CopyKind::ToSlow ? fast.p : slow.p;
        Row row{n, kind, {}, {}};
        auto time_strata = [&] {
          const auto t0 = Clock::now();
          strata::memory::copy_bytes_modeled(dst, src, n, kind, &throttle);
          return std::chrono::duration<double>(Clock::now() - t0).count();
        };
        auto time_memcpy = [&] {
          const auto t0 = Clock::now();
          std::memcpy(dst, src, n);
          return std::chrono::duration<double>(Clock::now() - t0).count();
        };
        time_strata();  // warm-up
        time_memcpy();
        for (int r = 0; r < opt.reps; ++r) {
          row.strata_s.push_back(time_strata());
          row.memcpy_s.push_back(time_memcpy());
        }
        STRATA_CHECK(std::memcmp(dst, src, n) == 0, "copy of ", n, " bytes is not exact");
        auto micros = [](const std::vector<double>& secs) {
          std::vector<double> us;
          for (double x : secs) us.push_back(x * 1e6);
          return us;
        };
        json.begin_object()
            .kv("model", mode)
            .kv("model_description", model.describe())
            .kv("direction", kind == CopyKind::ToSlow ? "fast->slow" : "slow->fast")
            .kv("kind", kind == CopyKind::ToSlow ? "ToSlow" : "FromSlow")
            .kv("bytes", static_cast<long long>(n))
            .timed("strata_us", "us", micros(row.strata_s))
            .timed("memcpy_us", "us", micros(row.memcpy_s))
            .end_object();
        rows.push_back(std::move(row));
      }
    }

    std::printf("\n## --model %s: %s\n\n", mode.c_str(), model.describe().c_str());
    std::printf(
        "| size | direction | strata ms median (min-max) | memcpy ms median (min-max) | "
        "time ratio strata/memcpy | strata GB/s | memcpy GB/s | strata / DRAM copy | "
        "memcpy / DRAM copy |%s\n",
        model.enabled ? " strata / model |" : "");
    std::printf("|---|---|---|---|---|---|---|---|---|%s\n", model.enabled ? "---|" : "");
    double log_ratio_sum[2] = {0, 0};
    int count[2] = {0, 0};
    for (const Row& r : rows) {
      const double ms = median(r.strata_s), mm = median(r.memcpy_s);
      const double gs = static_cast<double>(r.bytes) / ms / 1e9;
      const double gm = static_cast<double>(r.bytes) / mm / 1e9;
      const int d = r.kind == CopyKind::ToSlow ? 0 : 1;
      log_ratio_sum[d] += std::log(ms / mm);
      ++count[d];
      std::printf("| %s | %s | %.3f (%.3f-%.3f) | %.3f (%.3f-%.3f) | %.2f | %.2f | %.2f | %.2f | %.2f |",
                  size_name(r.bytes).c_str(), d == 0 ? "fast->slow (ToSlow)" : "slow->fast (FromSlow)", ms * 1e3,
                  *std::min_element(r.strata_s.begin(), r.strata_s.end()) * 1e3,
                  *std::max_element(r.strata_s.begin(), r.strata_s.end()) * 1e3, mm * 1e3,
                  *std::min_element(r.memcpy_s.begin(), r.memcpy_s.end()) * 1e3,
                  *std::max_element(r.memcpy_s.begin(), r.memcpy_s.end()) * 1e3, ms / mm, gs, gm, 2 * gs / dram_gbps,
                  2 * gm / dram_gbps);
      if (model.enabled) std::printf(" %.2f |", gs / (d == 0 ? model.write_gbps : model.read_gbps));
      std::printf("\n");
    }
    std::printf(
        "\nGeometric mean of the time ratio strata/memcpy over %zu sizes: fast->slow %.2f, "
        "slow->fast %.2f (--model %s)\n",
        sizes.size(), std::exp(log_ratio_sum[0] / count[0]), std::exp(log_ratio_sum[1] / count[1]), mode.c_str());
    const auto c = throttle.counters();
    std::printf("Throttle: %.1f MiB read, %.1f MiB written, %.3f s stalled\n",
                static_cast<double>(c.bytes_read) / (1 << 20), static_cast<double>(c.bytes_written) / (1 << 20),
                static_cast<double>(c.stall_ns) * 1e-9);
    std::fflush(stdout);
  }
  json.end_array().end_object();
  if (!opt.json.empty() && !strata::bench::write_file_atomically(opt.json, json.str(), kProg)) return 1;
  return 0;
} catch (const strata::Error& e) {
  std::fprintf(stderr, "strata-bench-migration: %s\n", e.what());
  return 1;
}
