// strata-bench-comm: calibrates the network model (embeddings/dist/step_model.h) on this machine and
// checks it. Run under the MPI launcher, one thread per rank:
//   mpirun --oversubscribe --allow-run-as-root -np 2 strata-bench-comm --threads 1 --json FILE
// 1. Sweep: alltoallv with n bytes to every other rank, n from 64 B to 16 MiB; the line through
//    (bytes per rank, time), fitted in relative error, gives β (slope) and the rounds' fixed cost
//    (intercept) of Note [Collective time model]: at N ranks, T(n) = 2·latency + 2(N−1)·o +
//    (N−1)(header + n)/β. One rank count cannot tell latency from o: the fit splits it evenly.
//    Then allreduces of 16K to 4M floats: their time beyond the fitted rounds, against their local
//    bytes (Schedule::local_bytes), gives the host rate.
// 2. Check, on exchanges the sweeps did not time: the DLRM exchanges of a table-wise plan
//    (random-bench's 8 tables), a row-wise plan (one 8M-row table) and a mixed plan (the MLPerf
//    tables), forward and backward alltoallv at a global batch of 2048, and the deterministic
//    allreduce of random-bench's bottom and top MLP gradients: measured (the minimum over --reps
//    calls, and the median) against the model with the fitted figures.
// Rank 0 prints a Markdown table and writes the JSON (bench/bench_common.h conventions).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "bench/bench_common.h"
#include "core/factories.h"
#include "dist/communicator.h"
#include "embeddings/dist/step_model.h"
#include "embeddings/dlrm_config.h"

namespace {

using strata::Tensor;
using namespace strata::emb;

constexpr const char* kUsage =
    "strata-bench-comm [--threads T] [--reps R] [--batch B] [--quick] [--json FILE]  (under mpirun -np N)";

struct Options {
  int threads = 1;
  int reps = 30;
  int64_t batch = 2048;
  bool quick = false;
  std::string json;
};

Options parse(int argc, char** argv) {
  strata::bench::Cli cli("strata-bench-comm", kUsage);
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--threads") {
      o.threads = cli.threads(a, cli.value(argc, argv, i));
    } else if (a == "--reps") {
      o.reps = static_cast<int>(cli.integer(a, cli.value(argc, argv, i), 3, 100000));
    } else if (a == "--batch") {
      o.batch = cli.integer(a, cli.value(argc, argv, i), 1, int64_t{1} << 30);
    } else if (a == "--quick") {
      o.quick = true;
    } else if (a == "--json") {
      o.json = cli.value(argc, argv, i);
    } else {
      cli.unknown(a);
    }
  }
  if (o.quick) o.reps = 3;
  return o;
}

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// Seconds of one collective: the minimum and the median over calls, each the slowest rank's (the
// collective ends when its last rank does). The machine is shared (2 cores, CI jobs running): the
// minimum is the estimate free of interference and what the fit and the check use.
struct Timing {
  double min = 0, median = 0;
};

template <class F>
Timing time_calls(strata::dist::Communicator& comm, int reps, F&& call) {
  for (int k = 0; k < 3; ++k) call();  // warm-up: buffers, caches, MPI's connections
  std::vector<double> t;
  for (int k = 0; k < reps; ++k) {
    const double start = now();
    call();
    t.push_back(now() - start);
  }
  const strata::bench::Summary s = strata::bench::summarize(t);
  Tensor mine = strata::empty({1, 2}, strata::TensorOptions{strata::DType::f64});
  mine.data<double>()[0] = s.min;
  mine.data<double>()[1] = s.median;
  const Tensor all = comm.allgatherv(mine);
  Timing worst;
  for (int r = 0; r < comm.size(); ++r) {
    worst.min = std::max(worst.min, all.data<double>()[2 * r]);
    worst.median = std::max(worst.median, all.data<double>()[2 * r + 1]);
  }
  return worst;
}

// An alltoallv carrying `round`'s bytes (1-float rows; every pair's bytes are multiples of 4).
Timing time_alltoallv(strata::dist::Communicator& comm, const Round& round, int reps) {
  const int me = comm.rank();
  std::vector<int64_t> send(static_cast<std::size_t>(comm.size())), recv(send.size());
  for (int j = 0; j < comm.size(); ++j) {
    send[j] = j == me ? 0 : round.at(me, j) / 4;
    recv[j] = j == me ? 0 : round.at(j, me) / 4;
  }
  int64_t rows = 0;
  for (int64_t s : send) rows += s;
  const Tensor input = strata::full({rows}, 1.0f);
  return time_calls(comm, reps, [&] { comm.alltoallv(input, send, recv); });
}

Timing time_allreduce(strata::dist::Communicator& comm, int64_t numel, int reps) {
  const Tensor input = strata::full({numel}, 0.5f);
  return time_calls(comm, reps, [&] { comm.allreduce(input); });
}

struct Fit {
  double slope = 0, intercept = 0;
};

// Least squares of relative errors (weights 1/y²): the model's check is relative (±25 %), and the
// sweep spans five decades of time.
Fit least_squares(const std::vector<double>& x, const std::vector<double>& y) {
  double sw = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double w = 1.0 / (y[i] * y[i]);
    sw += w, sx += w * x[i], sy += w * y[i], sxx += w * x[i] * x[i], sxy += w * x[i] * y[i];
  }
  const double slope = (sw * sxy - sx * sy) / (sw * sxx - sx * sx);
  return {slope, (sy - slope * sx) / sw};
}

// Phase 1b: the allreduce's local work (Schedule::local_bytes) at the host's rate: allreduces of 16K
// to 4M floats, their time beyond the fitted rounds' time against their local bytes (a line
// through the origin, relative errors); returns bytes per second.
double fit_host(strata::dist::Communicator& comm, const Options& o, const Fabric& rounds_only,
                strata::bench::Json& json) {
  const std::vector<int64_t> one(static_cast<std::size_t>(comm.size()), 1);
  double num = 0, den = 0;
  json.key("allreduce_sweep").begin_array();
  for (int64_t n = 16384; n <= (o.quick ? 65536 : 4 << 20); n *= 4) {
    const Schedule s = allreduce_schedule("allreduce", n, 4, one);
    const Timing t = time_allreduce(comm, n, o.reps);
    const double rest = t.min - schedule_seconds(s, rounds_only), local = static_cast<double>(s.local_bytes);
    num += local * rest / (t.min * t.min);
    den += local * local / (t.min * t.min);
    json.begin_object().kv("numel", static_cast<long long>(n)).kv("min_s", t.min).kv("median_s", t.median).end_object();
    if (comm.rank() == 0)
      std::printf("allreduce sweep: %lld floats: min %.1f us\n", static_cast<long long>(n), t.min * 1e6);
  }
  json.end_array();
  STRATA_CHECK(num > 0,
               "strata-bench-comm: the allreduces took no longer than their rounds' model (no local work to fit)");
  return den / num;
}

// Phase 1: the sweep and the fitted fabric "local".
Fabric calibrate(strata::dist::Communicator& comm, const Options& o, strata::bench::Json& json) {
  const int n_ranks = comm.size();
  std::vector<double> x, y;
  json.key("sweep").begin_array();
  for (int64_t n = 64; n <= (o.quick ? 65536 : 16 << 20); n *= 4) {
    Round round(n_ranks);
    for (int i = 0; i < n_ranks; ++i) {
      for (int j = 0; j < n_ranks; ++j) {
        if (i != j) round.set(i, j, n);
      }
    }
    const Timing t = time_alltoallv(comm, round, o.reps);
    x.push_back(static_cast<double>((n_ranks - 1) * (header_bytes(n_ranks) + n)));
    y.push_back(t.min);
    json.begin_object()
        .kv("bytes_per_pair", static_cast<long long>(n))
        .kv("min_s", t.min)
        .kv("median_s", t.median)
        .end_object();
  }
  json.end_array();
  const Fit fit = least_squares(x, y);
  // intercept = 2·latency + 2(N−1)·o, split as latency = o.
  const double o_msg = fit.intercept / (2.0 + 2.0 * (n_ranks - 1));
  STRATA_CHECK(fit.slope > 0 && fit.intercept > 0, "strata-bench-comm: the sweep's fit has slope ", fit.slope,
               " s/byte and intercept ", fit.intercept, " s (expected both > 0; a loaded machine? more --reps)");
  Fabric f{"local (fitted)", o_msg, o_msg, 1.0 / fit.slope};
  f.host_bytes_per_second = fit_host(comm, o, f, json);
  json.key("fit")
      .begin_object()
      .kv("slope_s_per_byte", fit.slope)
      .kv("intercept_s", fit.intercept)
      .kv("latency_s", f.latency_seconds)
      .kv("per_message_s", f.per_message_seconds)
      .kv("bytes_per_second", f.bytes_per_second)
      .kv("host_bytes_per_second", f.host_bytes_per_second)
      .end_object();
  if (comm.rank() == 0) {
    for (std::size_t i = 0; i < x.size(); ++i)
      std::printf("alltoallv sweep: %.0f bytes per rank: min %.1f us\n", x[i], y[i] * 1e6);
  }
  return f;
}

struct Case {
  std::string plan;
  Schedule schedule;
  bool allreduce = false;
  int64_t numel = 0;
};

DlrmShape shape_of(const std::string& preset) {
  DLRMConfig c;
  apply_dlrm_preset(c, preset);
  return dlrm_shape(c);
}

std::vector<Case> dlrm_cases(int ranks, int64_t batch) {
  const ShardPlanOptions roomy{.ranks = ranks, .fast_budget_bytes = int64_t{1} << 40};
  const std::pair<std::string, std::vector<TableSpec>> plans[] = {
      {"table-wise (random-bench)", shape_of("random-bench").tables},
      {"row-wise (one 8M x 64 table)", {{"big", 8000000, 64, 4}}},
      {"mixed (MLPerf tables)", shape_of("mlperf40M").tables}};
  std::vector<Case> out;
  for (const auto& [name, tables] : plans) {
    const ShardPlan plan = plan_shards(tables, roomy);
    out.push_back({name, forward_schedule(plan, batch)});
    out.push_back({name, backward_schedule(plan, batch)});
  }
  const DenseParams dense = shape_of("random-bench").dense;
  const std::vector<int64_t> one(static_cast<std::size_t>(ranks), 1);
  for (const auto& [name, numel] : {std::pair<std::string, int64_t>{"random-bench bottom MLP", dense.bottom},
                                    {"random-bench top MLP", dense.top}}) {
    out.push_back({name, allreduce_schedule("allreduce", numel, 4, one), true, numel});
  }
  return out;
}

// Phase 2: the DLRM collectives, measured against the model.
void check(strata::dist::Communicator& comm, const Options& o, const Fabric& f, strata::bench::Json& json) {
  if (comm.rank() == 0) {
    std::printf(
        "\n| plan | collective | MB sent (max rank) | measured ms (min) | median ms | model ms | model/min |\n");
    std::printf("|---|---|---|---|---|---|---|\n");
  }
  json.key("records").begin_array();
  for (const Case& c : dlrm_cases(comm.size(), o.batch)) {
    const Timing t =
        c.allreduce ? time_allreduce(comm, c.numel, o.reps) : time_alltoallv(comm, c.schedule.rounds[1], o.reps);
    const double measured = t.min;
    const double model = schedule_seconds(c.schedule, f);
    int64_t sent = 0;
    for (int r = 0; r < comm.size(); ++r) {
      int64_t s = 0;
      for (std::size_t k = 1; k < c.schedule.rounds.size(); ++k) s += c.schedule.rounds[k].sent(r);
      sent = std::max(sent, s);
    }
    if (comm.rank() == 0) {
      std::printf("| %s | %s | %.3f | %.3f | %.3f | %.3f | %.2f |\n", c.plan.c_str(), c.schedule.name.c_str(),
                  static_cast<double>(sent) / 1e6, measured * 1e3, t.median * 1e3, model * 1e3, model / measured);
    }
    json.begin_object()
        .kv("plan", c.plan)
        .kv("collective", c.schedule.name)
        .kv("max_rank_bytes_sent", static_cast<long long>(sent))
        .kv("measured_min_s", t.min)
        .kv("measured_median_s", t.median)
        .kv("model_s", model)
        .kv("ratio", model / measured)
        .end_object();
  }
  json.end_array();
}

}  // namespace

int main(int argc, char** argv) try {
  const Options o = parse(argc, argv);
  strata::set_num_threads(o.threads);
  auto& comm = strata::dist::Communicator::world();
  if (comm.size() < 2) {
    strata::bench::Cli("strata-bench-comm", kUsage)
        .fail("needs at least 2 ranks, got " + std::to_string(comm.size()) +
              " (run it under mpirun -np 2 or more; the model's rounds have no messages on one rank)");
  }
  strata::bench::Json json;
  json.begin_object()
      .kv("binary", "strata-bench-comm")
      .kv("threads", strata::get_num_threads())
      .kv("dtype", "f32")
      .kv("library", comm.implementation())
      .kv("ranks", comm.size())
      .kv("reps", o.reps)
      .kv("batch", static_cast<long long>(o.batch));
  const Fabric f = calibrate(comm, o, json);
  if (comm.rank() == 0) {
    std::printf("# strata-bench-comm: %d ranks, %s, %d thread(s) per rank, %d reps\n", comm.size(),
                comm.implementation().c_str(), strata::get_num_threads(), o.reps);
    std::printf("fitted: latency = o = %.2f us, beta = %.3f GB/s; host (allreduce local work) %.2f GB/s\n",
                f.latency_seconds * 1e6, f.bytes_per_second / 1e9, f.host_bytes_per_second / 1e9);
  }
  check(comm, o, f, json);
  json.end_object();
  if (comm.rank() == 0 && !o.json.empty() &&
      !strata::bench::write_file_atomically(o.json, json.str(), "strata-bench-comm"))
    return 1;
  return 0;
} catch (const strata::Error& e) {
  std::fprintf(stderr, "strata-bench-comm: %s\n", e.what());
  return 1;
}
