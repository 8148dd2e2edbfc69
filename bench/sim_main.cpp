// strata-sim: runs the simulator's benchmarks (ops/sim/bench_registry.h) under named system
// configurations (ops/sim/systems.h) on the timing and energy model (ops/sim/machine.h) and
// prints TapeFlow's evaluation tables (§VI–VII), optionally the scratchpad-size and unroll sweeps.
//
//   strata-sim [--bench NAME[,NAME...]|all|synthetic] [--system NAME[,NAME...]] [--spad-sweep] [--unroll-sweep]
//              [--threads T] [--json FILE] [--quick]
//
// Per benchmark and system: FWD and REV cycles, speedup over Enzyme_32k (total, FWD, REV), DRAM
// bytes and their ratio to Enzyme_32k's, cache hit rate (FWD and REV), on-chip energy and its
// reduction over Enzyme_32k, SRAM bytes. Enzyme_32k is always simulated as the baseline.
// --spad-sweep: Tflow_32k with scratchpads of 64 B … 1 MB (×2 steps), speedup over Enzyme_32k.
// --unroll-sweep: Tflow_32k against Enzyme_32k at unroll factors 1 … 64 on pathfinder (the
// paper's Fig. 17), with FU ops per REV layer.
// Benchmarks: the nine Table II ones (all; --quick: their reduced sizes) and two synthetic
// kernels (synthetic), see ops/sim/bench_registry.h.
// The model is deterministic: each figure is one simulation (samples hold that one value).
// --threads is accepted for the bench binaries' common interface; the simulator is single-threaded.

#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "bench/bench_common.h"
#include "core/error.h"
#include "ops/sim/bench_registry.h"
#include "ops/sim/machine.h"
#include "ops/sim/systems.h"

using namespace strata;
using namespace strata::sim;
using namespace strata::sim::registry;

namespace {

constexpr const char* kUsage =
    "strata-sim [--bench NAME[,NAME...]|all|synthetic] [--system NAME[,NAME...]] [--spad-sweep] [--unroll-sweep] [--threads T] "
    "[--json FILE] [--quick]";

struct Options {
  std::vector<std::string> benches;
  std::vector<std::string> systems;
  bool spad_sweep = false, unroll_sweep = false, quick = false;
  std::string json;
};

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    const size_t end = s.find(',', start);
    out.push_back(s.substr(start, end == std::string::npos ? std::string::npos : end - start));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return out;
}

Options parse(int argc, char** argv) {
  bench::Cli cli("strata-sim", kUsage);
  Options o;
  std::string bench = "all";
  std::string systems;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--bench") {
      bench = cli.value(argc, argv, i);
    } else if (a == "--system") {
      systems = cli.value(argc, argv, i);
    } else if (a == "--spad-sweep") {
      o.spad_sweep = true;
    } else if (a == "--unroll-sweep") {
      o.unroll_sweep = true;
    } else if (a == "--quick") {
      o.quick = true;
    } else if (a == "--threads") {
      cli.integer(a, cli.value(argc, argv, i), 1, 1024);
    } else if (a == "--json") {
      o.json = cli.value(argc, argv, i);
    } else {
      cli.fail("unknown flag " + a);
    }
  }
  std::vector<std::string> known = benchmark_names();
  for (const std::string& b : synthetic_benchmark_names()) known.push_back(b);
  if (bench == "all") {
    o.benches = benchmark_names();
  } else if (bench == "synthetic") {
    o.benches = synthetic_benchmark_names();
  } else {
    for (const std::string& b : split(bench)) {
      bool ok = false;
      for (const std::string& k : known) ok = ok || k == b;
      if (!ok) {
        std::string list;
        for (const std::string& k : known) list += (list.empty() ? "" : ", ") + k;
        cli.fail("--bench: unknown benchmark '" + b + "'; expected all, synthetic or one of: " + list);
      }
      o.benches.push_back(b);
    }
  }
  o.systems = systems.empty() ? paper_system_names() : split(systems);
  for (const std::string& s : o.systems) {
    try {
      system_by_name(s);
    } catch (const Error& e) {
      cli.fail(std::string("--system: ") + e.what());
    }
  }
  return o;
}

struct Row {
  std::string system;
  MachineReport r;
};

double ratio(double a, double b) { return b > 0 ? a / b : 0; }

double hit_rate(const PhaseReport& p) { return p.cache.hit_rate(); }

MachineReport run(const std::string& bench, const System& s, const TraceOptions& topt) {
  const Trace t = trace_benchmark(bench, s.mode, topt);
  return simulate(t, s.machine);
}

void print_table(const std::string& bench, uint64_t instrs, const std::vector<Row>& rows, const MachineReport& base) {
  std::printf("\n== %s (%llu instructions in the Enzyme trace; baseline Enzyme_32k) ==\n", bench.c_str(),
              static_cast<unsigned long long>(instrs));
  std::printf("%-16s %10s %10s %8s %7s %7s %10s %7s %6s %6s %6s %11s %7s %8s\n", "system", "FWD cyc", "REV cyc",
              "speedup", "FWD x", "REV x", "DRAM KB", "DRAM/E", "hit%", "hitF%", "hitR%", "energy nJ", "E red.",
              "SRAM B");
  for (const Row& row : rows) {
    const MachineReport& r = row.r;
    std::printf("%-16s %10llu %10llu %8.2f %7.2f %7.2f %10.1f %7.3f %6.1f %6.1f %6.1f %11.1f %7.2f %8llu\n",
                row.system.c_str(), static_cast<unsigned long long>(r.fwd.cycles),
                static_cast<unsigned long long>(r.rev.cycles), ratio(base.cycles(), r.cycles()),
                ratio(base.fwd.cycles, r.fwd.cycles), ratio(base.rev.cycles, r.rev.cycles), r.dram_bytes() / 1024.0,
                ratio(r.dram_bytes(), base.dram_bytes()), 100 * r.cache.hit_rate(), 100 * hit_rate(r.fwd),
                100 * hit_rate(r.rev), r.energy.total_pj() / 1000.0, ratio(base.energy.total_pj(), r.energy.total_pj()),
                static_cast<unsigned long long>(r.sram_bytes));
  }
}

void json_report(bench::Json& j, const std::string& system, const MachineReport& r, const MachineReport& base) {
  j.begin_object();
  j.kv("system", system);
  j.kv("fwd_cycles", static_cast<long long>(r.fwd.cycles)).kv("rev_cycles", static_cast<long long>(r.rev.cycles));
  j.timed("cycles", "cycles", {static_cast<double>(r.cycles())});
  j.kv("speedup", ratio(base.cycles(), r.cycles()));
  j.kv("fwd_speedup", ratio(base.fwd.cycles, r.fwd.cycles)).kv("rev_speedup", ratio(base.rev.cycles, r.rev.cycles));
  j.kv("dram_read_bytes", static_cast<long long>(r.dram_read_bytes()));
  j.kv("dram_write_bytes", static_cast<long long>(r.dram_write_bytes()));
  j.kv("dram_norm", ratio(r.dram_bytes(), base.dram_bytes()));
  j.kv("hit_rate", r.cache.hit_rate()).kv("fwd_hit_rate", hit_rate(r.fwd)).kv("rev_hit_rate", hit_rate(r.rev));
  j.kv("tape_hits", static_cast<long long>(r.cache.cls[1].hits));
  j.kv("tape_misses", static_cast<long long>(r.cache.cls[1].misses));
  j.kv("energy_pj", r.energy.total_pj()).kv("cache_pj", r.energy.cache_pj).kv("spad_pj", r.energy.spad_pj);
  j.kv("energy_reduction", ratio(base.energy.total_pj(), r.energy.total_pj()));
  j.kv("sram_bytes", static_cast<long long>(r.sram_bytes));
  j.kv("spad_bytes_used", static_cast<long long>(r.spad_bytes_used));
  j.kv("fwd_layers", static_cast<long long>(r.fwd.layers)).kv("rev_layers", static_cast<long long>(r.rev.layers));
  j.kv("rev_ops_per_layer", r.rev.ops_per_layer());
  j.kv("spad_empty_waits", static_cast<long long>(r.rev.spad_empty_waits));
  j.end_object();
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  bench::Json j;
  j.begin_object();
  j.kv("binary", "strata-sim").kv("threads", 1).kv("dtype", "f64").kv("library", "strata-sim (TapeFlow machine model)");
  j.kv("quick", o.quick);
  try {
    TraceOptions topt;
    topt.quick = o.quick;
    const System base_sys = system_by_name("Enzyme_32k");
    std::map<std::string, MachineReport> base;
    j.key("benchmarks").begin_array();
    for (const std::string& b : o.benches) {
      // One trace per mode, shared by the systems that execute it.
      std::vector<System> systems = {base_sys};
      for (const std::string& s : o.systems) systems.push_back(system_by_name(s));
      std::map<std::string, MachineReport> by_name;
      for (TraceMode mode : {TraceMode::Enzyme, TraceMode::AoS, TraceMode::TapeFlow}) {
        bool needed = false;
        for (const System& s : systems) needed = needed || s.mode == mode;
        if (!needed) continue;
        const Trace t = trace_benchmark(b, mode, topt);
        for (const System& s : systems)
          if (s.mode == mode && !by_name.count(s.name)) by_name[s.name] = simulate(t, s.machine);
      }
      base[b] = by_name.at(base_sys.name);
      std::vector<Row> rows;
      for (const std::string& s : o.systems) rows.push_back({s, by_name.at(s)});
      print_table(b, base[b].fwd.instrs + base[b].rev.instrs, rows, base[b]);
      j.begin_object().kv("name", b).kv("instrs", static_cast<long long>(base[b].fwd.instrs + base[b].rev.instrs));
      j.key("systems").begin_array();
      for (const Row& row : rows) json_report(j, row.system, row.r, base[b]);
      j.end_array().end_object();
      std::fflush(stdout);
    }
    j.end_array();

    if (o.spad_sweep) {
      std::vector<uint64_t> sizes;
      for (uint64_t s = 64; s <= (1u << 20); s *= 2) sizes.push_back(s);
      if (o.quick) sizes = {64, 512, 4096};
      std::printf("\n== scratchpad sweep: Tflow_32k speedup over Enzyme_32k (FU ops per REV layer) ==\n%-10s", "bench");
      for (uint64_t s : sizes) std::printf(" %9llu", static_cast<unsigned long long>(s));
      std::printf("\n");
      j.key("spad_sweep").begin_array();
      for (const std::string& b : o.benches) {
        std::printf("%-10s", b.c_str());
        std::vector<std::pair<uint64_t, MachineReport>> pts;
        for (uint64_t s : sizes) {
          TraceOptions t = topt;
          t.spad_bytes = s;
          pts.emplace_back(s, run(b, make_system(TraceMode::TapeFlow, 32768, s), t));
          std::printf(" %5.2f(%2.0f)", ratio(base[b].cycles(), pts.back().second.cycles()),
                      pts.back().second.rev.ops_per_layer());
        }
        std::printf("\n");
        j.begin_object().kv("benchmark", b).key("points").begin_array();
        for (auto& [s, r] : pts) {
          j.begin_object().kv("spad_bytes", static_cast<long long>(s));
          j.kv("speedup", ratio(base[b].cycles(), r.cycles()));
          j.kv("fwd_cycles", static_cast<long long>(r.fwd.cycles)).kv("rev_cycles", static_cast<long long>(r.rev.cycles));
          j.kv("rev_layers", static_cast<long long>(r.rev.layers)).kv("rev_ops_per_layer", r.rev.ops_per_layer());
          j.end_object();
        }
        j.end_array().end_object();
      }
      j.end_array();
    }

    if (o.unroll_sweep) {
      const std::vector<std::string> targets = {"pathfinder"};
      std::vector<uint32_t> unrolls = {1, 2, 4, 8, 16, 32, 64};
      if (o.quick) unrolls = {1, 4, 16};
      std::printf("\n== unroll sweep: Tflow_32k speedup over Enzyme_32k (FU ops per REV layer) ==\n%-10s", "bench");
      for (uint32_t u : unrolls) std::printf(" %9u", u);
      std::printf("\n");
      j.key("unroll_sweep").begin_array();
      const System tf = system_by_name("Tflow_32k");
      for (const std::string& b : targets) {
        std::printf("%-10s", b.c_str());
        j.begin_object().kv("benchmark", b).key("points").begin_array();
        for (uint32_t u : unrolls) {
          TraceOptions t = topt;
          t.unroll = u;
          const MachineReport e = run(b, base_sys, t);
          const MachineReport r = run(b, tf, t);
          std::printf(" %5.2f(%2.0f)", ratio(e.cycles(), r.cycles()), r.rev.ops_per_layer());
          j.begin_object().kv("unroll", static_cast<long long>(u)).kv("speedup", ratio(e.cycles(), r.cycles()));
          j.kv("enzyme_cycles", static_cast<long long>(e.cycles())).kv("tflow_cycles", static_cast<long long>(r.cycles()));
          j.kv("rev_ops_per_layer", r.rev.ops_per_layer());
          j.end_object();
        }
        std::printf("\n");
        j.end_array().end_object();
      }
      j.end_array();
    }
  } catch (const Error& e) {
    std::fprintf(stderr, "strata-sim: %s\n", e.what());
    return 1;
  }
  j.end_object();
  if (!o.json.empty() && !bench::write_file_atomically(o.json, j.str(), "strata-sim")) return 1;
  return 0;
}
