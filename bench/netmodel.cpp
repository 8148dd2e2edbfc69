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
#include <cstdio>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "bench/bench_common.h"
#include "embeddings/dist/step_model.h"
#include "embeddings/dlrm_config.h"

namespace {

using namespace strata::emb;

constexpr const char* kUsage =
    "strata-netmodel --phases PRESET=BATCH:BOT,LOOKUP,INTER,TOP,BWD,UPDATE [--phases ...] [--nodes 1,2,...] "
    "[--strong-batch-factor F] [--compute-speedup S] [--schedules DIR] [--schedule-nodes 8,16,32,64] [--json FILE]";

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
    } else {
      cli.unknown(a);
    }
  }
  if (o.phases.empty()) cli.fail("no --phases given (the measured compute times of at least one preset)");
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

}  // namespace

int main(int argc, char** argv) try {
  const Options o = parse(argc, argv);
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
