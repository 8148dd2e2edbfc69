// strata-netmodel: projects hybrid-parallel DLRM's step time and scaling efficiency at 1..64 nodes
// with the network model (embeddings/dist/step_model.h, Note [DLRM step model]) for the standard
// configurations (strata-dlrm's presets random-bench, kaggle, mlperf40M) on the named fabrics, from
// per-phase compute times measured by `strata-dlrm --enable-profiling` on one process:
//   strata-netmodel --phases random-bench=2048:23.1,49.6,2.2,117.2,245.3,64.0 ... --json FILE
// (BATCH:bottom MLP,lookup,interaction,top MLP,backward,update in ms per iteration, as strata-dlrm's
// "phases (ms/it)" line and its JSON's phases_ms_per_it). bench/netmodel/run.sh measures them.
// The backward phase is split between the MLPs by their weight counts (multiply-adds per sample).
// Weak scaling: each node keeps the preset's batch (global batch N·b); efficiency T(1)/T(N).
// Strong scaling: a global batch of --strong-batch-factor × the preset's batch on every node count;
// efficiency T(1)/(N·T(N)). --compute-speedup S divides every measured compute time by S: a node S
// times this machine's measured throughput (S = 1, the default, is what was measured).
// --schedules DIR writes, for every configuration and --schedule-nodes count, the message schedule
// of the step's four collectives (weak scaling) for the SMPI program (bench/netmodel/smpi_collectives.cpp)
// with the model's time of each on each fabric in DIR/model.json.
// --validate RUN.json (repeatable) instead compares measured distributed steps with the model of
// the step as it runs (Note [Measured step model]): each RUN.json is `mpirun -np N strata-dlrm ...
// --dist-backend=mpi --json` (its per-rank phases, step times, plan and MLPs); --comm FILE
// (repeatable) gives `strata-bench-comm --json` fits (α, β per rank count: a run uses the fit of its
// rank count, else the nearest); --cores K (default: this machine's) the host's cores; the
// allreduce's local-work rate on one core is --host-rate B/s, else fitted from a 1-rank x 1-thread
// run among the RUN.json files (its allreduce busy time is that work alone), else the comm fit's.
// Prints model vs measured per run (median and mean step, their ratios), --json the same.
#include <cstdio>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench_common.h"
#include "core/file.h"
#include "core/json_reader.h"
#include "embeddings/dist/step_model.h"
#include "embeddings/dlrm_config.h"

namespace {

using namespace strata::emb;

constexpr const char* kUsage =
    "strata-netmodel --phases PRESET=BATCH:BOT,LOOKUP,INTER,TOP,BWD,UPDATE [--phases ...] [--nodes 1,2,...] "
    "[--strong-batch-factor F] [--compute-speedup S] [--schedules DIR] [--schedule-nodes 8,16,32,64] [--json FILE]\n"
    "       strata-netmodel --validate RUN.json [--validate ...] [--comm COMM.json ...] [--cores K] [--host-rate B/s] "
    "[--json FILE]";

struct Measured {
  int64_t batch = 0;
  double ms[6] = {};  // bottom MLP, lookup, interaction, top MLP, backward, update
};

struct Options {
  std::map<std::string, Measured> phases;  // by preset, in name order
  std::vector<int> nodes{1, 2, 4, 8, 16, 32, 64};
  std::vector<int> schedule_nodes{8, 16, 32, 64};
  int64_t strong_factor = 16;
  double compute_speedup = 1;
  std::string schedules;
  std::string json;
  std::vector<std::string> validate, comm;  // --validate mode
  int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  double host_rate = 0;
};

std::vector<int> int_list(const strata::bench::Cli& cli, const std::string& flag, const std::string& v) {
  std::vector<int> out;
  std::stringstream ss(v);
  for (std::string item; std::getline(ss, item, ',');) {
    out.push_back(static_cast<int>(cli.integer(flag, item.c_str(), 1, 4096)));
  }
  if (out.empty()) cli.fail(flag + ": expected a comma-separated list of node counts, got '" + v + "'");
  return out;
}

void parse_phases(const strata::bench::Cli& cli, const std::string& v, Options& o) {
  const auto eq = v.find('='), colon = v.find(':');
  if (eq == std::string::npos || colon == std::string::npos || colon < eq)
    cli.fail("--phases: expected PRESET=BATCH:BOT,LOOKUP,INTER,TOP,BWD,UPDATE, got '" + v + "'");
  const std::string preset = v.substr(0, eq);
  try {
    DLRMConfig c;
    apply_dlrm_preset(c, preset);
  } catch (const strata::Error& e) {
    cli.fail(std::string("--phases: ") + e.what());
  }
  Measured m;
  m.batch = cli.integer("--phases batch", v.substr(eq + 1, colon - eq - 1).c_str(), 1, int64_t{1} << 30);
  std::stringstream ss(v.substr(colon + 1));
  int k = 0;
  for (std::string item; std::getline(ss, item, ',');) {
    if (k == 6) cli.fail("--phases " + preset + ": more than 6 phase times in '" + v + "'");
    m.ms[k++] = cli.real("--phases " + preset, item.c_str(), 0, 1e9);
  }
  if (k != 6) cli.fail("--phases " + preset + ": expected 6 phase times, got " + std::to_string(k) + " in '" + v + "'");
  o.phases[preset] = m;
}

Options parse(int argc, char** argv) {
  strata::bench::Cli cli("strata-netmodel", kUsage);
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--phases") {
      parse_phases(cli, cli.value(argc, argv, i), o);
    } else if (a == "--nodes") {
      o.nodes = int_list(cli, a, cli.value(argc, argv, i));
    } else if (a == "--schedule-nodes") {
      o.schedule_nodes = int_list(cli, a, cli.value(argc, argv, i));
    } else if (a == "--strong-batch-factor") {
      o.strong_factor = cli.integer(a, cli.value(argc, argv, i), 1, 1 << 20);
    } else if (a == "--compute-speedup") {
      o.compute_speedup = cli.real(a, cli.value(argc, argv, i), 1e-3, 1e6);
    } else if (a == "--schedules") {
      o.schedules = cli.value(argc, argv, i);
    } else if (a == "--json") {
      o.json = cli.value(argc, argv, i);
    } else if (a == "--validate") {
      o.validate.push_back(cli.value(argc, argv, i));
    } else if (a == "--comm") {
      o.comm.push_back(cli.value(argc, argv, i));
    } else if (a == "--cores") {
      o.cores = static_cast<int>(cli.integer(a, cli.value(argc, argv, i), 1, 4096));
    } else if (a == "--host-rate") {
      o.host_rate = cli.real(a, cli.value(argc, argv, i), 1e3, 1e15);
    } else {
      cli.unknown(a);
    }
  }
  if (!o.validate.empty() && !o.phases.empty()) cli.fail("--validate and --phases are two modes; give one");
  if (o.validate.empty() && o.phases.empty())
    cli.fail("no --phases given (the measured compute times of at least one preset), nor --validate");
  try {  // refuse unwritable outputs before projecting
    if (!o.json.empty()) strata::check_writable_file_path(o.json, "--json");
    if (!o.schedules.empty()) strata::check_writable_file_path(o.schedules + "/kaggle_8.sched", "--schedules");
  } catch (const strata::Error& e) {
    cli.fail(e.what());
  }
  return o;
}

// A preset as the model sees it: tables, dense parameters, batch and per-sample phase times.
struct Config {
  std::string name;
  std::vector<TableSpec> tables;
  DenseParams dense;
  int64_t batch = 0;
  PhaseSeconds per_sample;
};

Config config_of(const std::string& preset, const Measured& m, double speedup) {
  DLRMConfig c;
  apply_dlrm_preset(c, preset);
  const DlrmShape shape = dlrm_shape(c);
  Config out{preset, shape.tables, shape.dense, shape.batch, {}};
  const auto b = static_cast<double>(m.batch);
  const double bottom_share =
      static_cast<double>(out.dense.bottom) / static_cast<double>(out.dense.bottom + out.dense.top);
  const double s = 1e-3 / b / speedup;
  out.per_sample = {m.ms[1] * s, m.ms[0] * s, (m.ms[2] + m.ms[3] + m.ms[4] * (1 - bottom_share)) * s,
                    m.ms[4] * bottom_share * s, m.ms[5] * s};
  return out;
}

ShardPlan plan_for(const Config& c, int nodes) {
  // Every node holds what the plan gives it (Note [Shard planning]); budgets do not bind here.
  return plan_shards(c.tables, {.ranks = nodes, .fast_budget_bytes = int64_t{1} << 50});
}

void write_projection(strata::bench::Json& json, const StepProjection& p, double efficiency) {
  json.begin_object()
      .kv("nodes", p.nodes)
      .kv("global_batch", static_cast<long long>(p.global_batch))
      .kv("step_s", p.step_seconds)
      .kv("compute_s", p.compute_seconds)
      .kv("comm_s", p.comm_seconds)
      .kv("exposed_s", p.exposed_seconds)
      .kv("forward_a2a_s", p.forward_a2a_seconds)
      .kv("backward_a2a_s", p.backward_a2a_seconds)
      .kv("allreduce_top_s", p.allreduce_top_seconds)
      .kv("allreduce_bottom_s", p.allreduce_bottom_seconds)
      .kv("efficiency", efficiency)
      .end_object();
}

// One configuration on one fabric, weak or strong: a table row per node count and a JSON record.
void project(strata::bench::Json& json, const Config& c, const Fabric& f, bool weak, const Options& o) {
  const int64_t strong_batch = c.batch * o.strong_factor;
  const int64_t one_batch = weak ? c.batch : strong_batch;
  const double t1 = project_step(plan_for(c, 1), one_batch, c.per_sample, c.dense, f).step_seconds;
  json.begin_object().kv("config", c.name).kv("fabric", f.name).kv("scaling", weak ? "weak" : "strong");
  json.kv("per_node_batch", static_cast<long long>(weak ? c.batch : 0))
      .kv("global_batch", static_cast<long long>(weak ? 0 : strong_batch));
  json.key("points").begin_array();
  for (int n : o.nodes) {
    const int64_t batch = weak ? c.batch * n : strong_batch;
    const StepProjection p = project_step(plan_for(c, n), batch, c.per_sample, c.dense, f);
    const double eff = weak ? t1 / p.step_seconds : t1 / (n * p.step_seconds);
    std::printf("| %s | %s | %s | %d | %lld | %.2f | %.2f | %.2f | %.2f | %.1f %% |\n", c.name.c_str(), f.name.c_str(),
                weak ? "weak" : "strong", n, static_cast<long long>(batch), p.step_seconds * 1e3,
                p.compute_seconds * 1e3, p.comm_seconds * 1e3, p.exposed_seconds * 1e3, 100 * eff);
    write_projection(json, p, eff);
  }
  json.end_array().end_object();
}

void write_schedule(std::ostream& out, const Schedule& s) {
  std::string name = s.name;
  for (char& ch : name) ch = ch == ' ' ? '_' : ch;
  out << "collective " << name << "\n";
  for (const Round& r : s.rounds) {
    out << "round\n";
    for (int i = 0; i < r.ranks; ++i) {
      for (int j = 0; j < r.ranks; ++j) {
        if (r.messages_at(i, j) > 0) out << i << " " << j << " " << r.at(i, j) << " " << r.messages_at(i, j) << "\n";
      }
    }
  }
}

// The step's collectives at n nodes (weak scaling) for SMPI, and the model's times of each.
void schedules(strata::bench::Json& json, const Config& c, int n, const std::string& dir) {
  const ShardPlan plan = plan_for(c, n);
  const int64_t batch = c.batch * n;
  const std::vector<int64_t> one(static_cast<std::size_t>(n), 1);
  const Schedule all[] = {forward_schedule(plan, batch), backward_schedule(plan, batch),
                          allreduce_schedule("top allreduce", c.dense.top, 4, one),
                          allreduce_schedule("bottom allreduce", c.dense.bottom, 4, one)};
  const std::string path = dir + "/" + c.name + "_" + std::to_string(n) + ".sched";
  std::ostringstream text;
  text << "ranks " << n << "\n";
  for (const Schedule& s : all) write_schedule(text, s);
  strata::write_file_atomically(path, text.str(), "--schedules");
  for (const std::string& fname : fabric_names()) {
    const Fabric f = fabric_named(fname);
    for (const Schedule& s : all) {
      json.begin_object()
          .kv("config", c.name)
          .kv("nodes", n)
          .kv("fabric", fname)
          .kv("collective", s.name)
          .kv("model_s", schedule_seconds(s, f))
          .end_object();
    }
  }
}

// ---- --validate: measured distributed steps against Note [Measured step model] ------------------

using strata::JsonValue;

JsonValue read_json(const std::string& path, const char* flag) {
  const std::string text = strata::read_file(path, flag);
  try {
    return strata::parse_json(text);
  } catch (const strata::Error& e) {
    STRATA_FAIL(flag, " ", strata::quote_path(path), ": ", e.what());
  }
}

std::vector<int64_t> integers(const JsonValue& array) {
  std::vector<int64_t> out;
  for (const JsonValue& v : array.items) out.push_back(static_cast<int64_t>(v.number));
  return out;
}

// A distributed strata-dlrm run as measured (rank 0's step times) and as the model takes it: the
// phases averaged over the steps (`input`), and each step's (`steps`, [step][rank]).
struct Run {
  std::string path;
  int threads = 1;
  MeasuredStepInput input;
  std::vector<std::vector<RankPhases>> steps;
  double median_s = 0, mean_s = 0;
  double allreduce_busy_s = 0;  // per step, rank 0
  double waited_s = 0;          // per step, the most any rank was blocked
};

// The run's plan: re-planned from its tables and --fast-budget (plan_shards is deterministic; the
// same options as plan_dlrm_shards), checked against the plan the run printed.
ShardPlan run_plan(const JsonValue& j, const std::string& path, int ranks) {
  std::vector<TableSpec> tables;
  const std::vector<int64_t> rows = integers(j["rows"]);
  for (std::size_t k = 0; k < rows.size(); ++k)
    tables.push_back({"emb_l." + std::to_string(k), rows[k], static_cast<int64_t>(j["sparse_feature_size"].number), 4});
  ShardPlan plan =
      plan_shards(tables, {.ranks = ranks, .fast_budget_bytes = static_cast<int64_t>(j["fast_budget"].number)});
  const JsonValue& printed = j["plan"]["tables"];
  STRATA_CHECK(printed.items.size() == tables.size(), "--validate ", strata::quote_path(path), ": its plan has ",
               printed.items.size(), " tables, its architecture ", tables.size());
  for (std::size_t t = 0; t < tables.size(); ++t) {
    STRATA_CHECK(printed[t]["kind"].raw == shard_kind_name(plan.shards[t].kind), "--validate ",
                 strata::quote_path(path), ": table ", t, " is ", printed[t]["kind"].raw,
                 " in the run's plan but the planner now makes it ", shard_kind_name(plan.shards[t].kind));
  }
  return plan;
}

// Phases from a rank's "phases_s" (sums over `steps`) or step `i` of its "phase_steps_s" (steps 1).
RankPhases rank_phases(const JsonValue& p, double steps, std::size_t i = 0) {
  const auto at = [&](const char* name) {
    const JsonValue& v = p[name];
    return (v.kind == JsonValue::Array ? v[i].number : v.number) / steps;
  };
  return {at("other"),   at("lookup_remote"), at("lookup"),        at("bottom_mlp"),     at("interaction"),
          at("top_mlp"), at("backward"),      at("sparse_update"), at("dense_optimizer")};
}

Run read_run(const std::string& path) {
  const JsonValue j = read_json(path, "--validate");
  STRATA_CHECK(
      j.has("ranks") && j.has("world_size") && j["ranks"].items.size() >= 1 && j["ranks"][0].has("phase_steps_s"),
      "--validate ", strata::quote_path(path),
      ": not the --json of a distributed strata-dlrm run with phase times (run it with --dist-backend=mpi)");
  Run run;
  run.path = path;
  run.threads = static_cast<int>(j["threads"].number);
  const int ranks = static_cast<int>(j["world_size"].number);
  const auto steps = static_cast<double>(std::max(1.0, j["iterations"].number));
  MeasuredStepInput& in = run.input;
  in.plan = run_plan(j, path, ranks);
  in.batch = static_cast<int64_t>(j["batch"].number);
  in.chunks = static_cast<int64_t>(j["chunks"].number);
  in.bottom_mlp = integers(j["mlp_bot"]);
  const auto f = static_cast<int64_t>(in.plan.tables.size()) + 1, d = in.bottom_mlp.back();
  const bool cat = j.has("interaction") && j["interaction"].raw == "cat";
  in.top_mlp = integers(j["mlp_top"]);
  in.top_mlp.insert(in.top_mlp.begin(), cat ? f * d : f * (f - 1) / 2 + d);
  for (const JsonValue& r : j["ranks"].items) {
    in.ranks.push_back(rank_phases(r["phases_s"], steps));
    run.waited_s = std::max(run.waited_s, r["phases_s"]["waited"].number / steps);
  }
  run.allreduce_busy_s = j["ranks"][0]["collectives"]["allreduce"]["busy_s"].number / steps;
  for (std::size_t i = 0; i < static_cast<std::size_t>(steps); ++i) {
    run.steps.emplace_back();
    for (const JsonValue& r : j["ranks"].items) run.steps.back().push_back(rank_phases(r["phase_steps_s"], 1, i));
  }
  const std::vector<double> ms = [&] {
    std::vector<double> v;
    for (const JsonValue& x : j["step_ms"]["samples"].items) v.push_back(x.number);
    return v;
  }();
  STRATA_CHECK(!ms.empty(), "--validate ", strata::quote_path(path), ": no step times (step_ms.samples is empty)");
  run.median_s = strata::bench::summarize(ms).median * 1e-3;
  for (double x : ms) run.mean_s += x * 1e-3 / static_cast<double>(ms.size());
  return run;
}

// strata-bench-comm's fit: ranks and the fabric.
std::map<int, Fabric> read_comm(const std::vector<std::string>& paths) {
  std::map<int, Fabric> fits;
  for (const std::string& path : paths) {
    const JsonValue j = read_json(path, "--comm");
    STRATA_CHECK(j.has("fit") && j.has("ranks"), "--comm ", strata::quote_path(path),
                 ": not a strata-bench-comm --json (no \"fit\")");
    const JsonValue& fit = j["fit"];
    fits[static_cast<int>(j["ranks"].number)] = {
        "fitted at " + std::to_string(static_cast<int>(j["ranks"].number)) + " ranks", fit["latency_s"].number,
        fit["per_message_s"].number, fit["bytes_per_second"].number, fit["host_bytes_per_second"].number};
  }
  return fits;
}

// The fit of `ranks` ranks, else the nearest; its ranks in `fitted_at`.
Fabric fabric_for(const std::map<int, Fabric>& fits, int ranks, int& fitted_at) {
  STRATA_CHECK(!fits.empty() || ranks == 1, "--comm: no strata-bench-comm fit given for the ", ranks,
               "-rank run (α and β of this host)");
  if (fits.empty()) {
    fitted_at = 1;
    return {"none", 0, 0, 1e30};
  }
  auto best = fits.begin();
  for (auto it = fits.begin(); it != fits.end(); ++it)
    if (std::abs(it->first - ranks) < std::abs(best->first - ranks)) best = it;
  fitted_at = best->first;
  return best->second;
}

// The top MLP's forward per chunk, averaged over the ranks: the same GEMMs at any rank count (Note
// [Measured step model]'s probe of how fast the run's compute threads ran).
double top_per_chunk(const Run& run) {
  const int n = run.input.plan.ranks;
  const int64_t c = run.input.chunks;
  double sum = 0;
  for (int r = 0; r < n; ++r) sum += run.input.ranks[r].top_mlp / static_cast<double>(c / n + (r < c % n ? 1 : 0));
  return sum / n;
}

// --host-rate, else the 1-rank x 1-thread run's allreduce (its local work alone, the worker on a
// core of its own; `probe` gets that run's top_per_chunk), else the comm fit's rate (measured at
// its share: divided by it).
double host_rate(const Options& o, const std::vector<Run>& runs, const std::map<int, Fabric>& fits, std::string& from,
                 double& probe) {
  probe = 0;
  if (o.host_rate > 0) {
    from = "--host-rate";
    return o.host_rate;
  }
  for (const Run& run : runs) {
    if (run.input.plan.ranks != 1 || run.threads != 1 || run.allreduce_busy_s <= 0) continue;
    const std::vector<int64_t> one{run.input.chunks};
    double bytes = 0;
    for (int64_t numel : layer_buckets(run.input.bottom_mlp, run.input.top_mlp))
      bytes += static_cast<double>(allreduce_schedule("bucket", numel, 4, one).local_bytes);
    from = run.path;
    probe = top_per_chunk(run);
    return bytes / run.allreduce_busy_s;
  }
  from = fits.empty() ? "none" : "--comm";
  if (fits.empty()) return 0;
  const auto& [ranks, f] = *fits.begin();
  return f.host_bytes_per_second / std::min(1.0, static_cast<double>(o.cores) / ranks);
}

// One run against the model: each step's phases through the timeline (the model's median and
// mean step against the measured ones), and the mean phases' timeline for its parts.
// `probe`: the host-rate run's top_per_chunk (0: the worker at HostShare::worker_share).
void report_run(strata::bench::Json& json, const Run& run, const std::map<int, Fabric>& fits, const Options& o,
                double rate, double probe) {
  int fitted_at = 1;
  const Fabric f = fabric_for(fits, run.input.plan.ranks, fitted_at);
  const double top = top_per_chunk(run);
  const HostShare host{.cores = o.cores,
                       .threads_per_rank = run.threads,
                       .calibrated_share = std::min(1.0, static_cast<double>(o.cores) / fitted_at),
                       .host_bytes_per_second = rate,
                       .worker_speed = probe > 0 && top > 0 ? probe / top : 0};
  const StepTimeline m = project_measured_step(run.input, f, host);
  std::vector<double> per_step;
  MeasuredStepInput step = run.input;
  for (const std::vector<RankPhases>& phases : run.steps) {
    step.ranks = phases;
    per_step.push_back(project_measured_step(step, f, host).step_seconds);
  }
  const double median = strata::bench::summarize(per_step).median;
  double mean = 0;
  for (double t : per_step) mean += t / static_cast<double>(per_step.size());
  const double speed = host.worker_speed > 0 ? host.worker_speed : host.worker_share(m.ranks);
  std::printf("| %s | %d x %d | %.1f | %.1f | %.1f | %.1f | %.3f | %.3f | %.2f | %.1f | %.1f | %.1f | %.1f | %.1f |\n",
              run.path.c_str(), m.ranks, run.threads, run.median_s * 1e3, median * 1e3, run.mean_s * 1e3, mean * 1e3,
              median / run.median_s, mean / run.mean_s, speed, m.compute_seconds * 1e3, m.exposed_seconds * 1e3,
              run.waited_s * 1e3, m.allreduce_seconds * 1e3, run.allreduce_busy_s * 1e3);
  json.begin_object().kv("run", run.path).kv("ranks", m.ranks).kv("threads_per_rank", run.threads);
  json.kv("steps", static_cast<long long>(per_step.size())).kv("fabric_fitted_at_ranks", fitted_at);
  json.kv("top_mlp_per_chunk_s", top).kv("worker_speed", speed).kv("worker_share", host.worker_share(m.ranks));
  json.kv("measured_median_s", run.median_s).kv("measured_mean_s", run.mean_s);
  json.kv("model_median_s", median).kv("model_mean_s", mean);
  json.kv("ratio_median", median / run.median_s).kv("ratio_mean", mean / run.mean_s);
  json.key("of_mean_phases").begin_object().kv("step_s", m.step_seconds).kv("compute_s", m.compute_seconds);
  json.kv("exposed_s", m.exposed_seconds).kv("check_s", m.check_seconds).kv("forward_a2a_s", m.forward_a2a_seconds);
  json.kv("gather_s", m.gather_seconds).kv("allreduce_s", m.allreduce_seconds);
  json.kv("allreduce_local_s", m.allreduce_local_seconds).kv("backward_a2a_s", m.backward_a2a_seconds).end_object();
  json.kv("measured_blocked_s", run.waited_s).kv("measured_allreduce_busy_s", run.allreduce_busy_s);
  json.end_object();
}

int validate(const Options& o) {
  std::vector<Run> runs;
  std::map<int, Fabric> fits;
  try {  // bad input files are usage errors (exit 2), naming the flag and the file
    for (const std::string& path : o.validate) runs.push_back(read_run(path));
    fits = read_comm(o.comm);
    for (const Run& run : runs) {
      int fitted_at = 0;
      fabric_for(fits, run.input.plan.ranks, fitted_at);
    }
  } catch (const strata::Error& e) {
    strata::bench::Cli("strata-netmodel", kUsage).fail(e.what());
  }
  std::string rate_from;
  double probe = 0;
  const double rate = host_rate(o, runs, fits, rate_from, probe);
  std::printf("# strata-netmodel --validate: %d cores; allreduce local work %.3f GB/s on one core (from %s)\n", o.cores,
              rate * 1e-9, rate_from.c_str());
  std::printf(
      "| run | ranks x threads | measured median ms | model median ms | measured mean ms | model mean ms | "
      "model/measured median | model/measured mean | worker speed | compute ms (mean phases) | model exposed ms | "
      "measured blocked ms (max rank) | model allreduces ms | measured allreduce busy ms |\n"
      "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  strata::bench::Json json;
  json.begin_object().kv("binary", "strata-netmodel").kv("mode", "validate").kv("threads", 1).kv("dtype", "f32");
  json.kv("library", "model").kv("cores", o.cores).kv("host_bytes_per_second", rate).kv("host_rate_from", rate_from);
  json.kv("host_rate_top_mlp_per_chunk_s", probe).key("records").begin_array();
  for (const Run& run : runs) report_run(json, run, fits, o, rate, probe);
  json.end_array().end_object();
  if (!o.json.empty() && !strata::bench::write_file_atomically(o.json, json.str(), "strata-netmodel")) return 1;
  return 0;
}

}  // namespace

int main(int argc, char** argv) try {
  const Options o = parse(argc, argv);
  if (!o.validate.empty()) return validate(o);
  std::vector<Config> configs;
  for (const auto& [preset, m] : o.phases) configs.push_back(config_of(preset, m, o.compute_speedup));
  strata::bench::Json json;
  json.begin_object().kv("binary", "strata-netmodel").kv("threads", 1).kv("dtype", "f32").kv("library", "model");
  json.kv("strong_batch_factor", static_cast<long long>(o.strong_factor)).kv("compute_speedup", o.compute_speedup);
  json.key("fabrics").begin_array();
  for (const std::string& name : fabric_names()) {
    const Fabric f = fabric_named(name);
    json.begin_object()
        .kv("name", name)
        .kv("latency_s", f.latency_seconds)
        .kv("per_message_s", f.per_message_seconds)
        .kv("bytes_per_second", f.bytes_per_second)
        .end_object();
  }
  json.end_array();
  std::printf(
      "| config | fabric | scaling | nodes | global batch | step ms | compute ms | comm ms | exposed ms | efficiency "
      "|\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|\n");
  json.key("records").begin_array();
  for (const Config& c : configs) {
    for (const std::string& name : fabric_names()) {
      for (bool weak : {true, false}) project(json, c, fabric_named(name), weak, o);
    }
  }
  json.end_array();
  if (!o.schedules.empty()) {
    json.key("schedules").begin_array();
    for (const Config& c : configs) {
      for (int n : o.schedule_nodes) schedules(json, c, n, o.schedules);
    }
    json.end_array();
  }
  json.end_object();
  if (!o.json.empty() && !strata::bench::write_file_atomically(o.json, json.str(), "strata-netmodel")) return 1;
  return 0;
} catch (const strata::Error& e) {
  std::fprintf(stderr, "strata-netmodel: %s\n", e.what());
  return 1;
}
