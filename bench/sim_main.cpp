// strata-sim: runs the simulator's benchmarks (sim/bench_registry.h) under named system
// configurations (sim/systems.h) on the timing and energy model (sim/machine.h) and
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
// paper's Fig. 17), with FU ops per REV layer, Enzyme_32k's tape hit rate and, as a control
// without conflict misses, the speedup over the fully associative Enzyme_64k.
// After the per-benchmark tables a summary puts the paper's figures side by side (Tflow_32k FWD,
// REV and total speedup; DRAM traffic of Enzyme_1k, Tflow_1k, Tflow_32k and AoS_32k normalized
// to Enzyme_32k; on-chip energy reduction of Tflow_32k and Tflow_2k; the smallest simulated
// Tflow_<size> cache whose cycles are at most Enzyme_32k's; the tape's share of the Enzyme trace's
// memory accesses). A column whose system was not simulated (see --system) prints "-".
// Benchmarks: the nine Table II ones (all; --quick: their reduced sizes) and two synthetic
// kernels (synthetic), see sim/bench_registry.h.
// The model is deterministic: each figure is one simulation (samples hold that one value).
// --threads is accepted for the bench binaries' common interface; the simulator is single-threaded.

#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "bench/bench_common.h"
#include "core/error.h"
#include "sim/bench_registry.h"
#include "sim/machine.h"
#include "sim/systems.h"

using namespace strata;
using namespace strata::sim;
using namespace strata::sim::registry;

namespace {

constexpr const char* kUsage =
    "strata-sim [--bench NAME[,NAME...]|all|synthetic] [--system NAME[,NAME...]] [--spad-sweep] [--unroll-sweep] "
    "[--threads T] "
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
      cli.threads(a, cli.value(argc, argv, i));
    } else if (a == "--json") {
      o.json = cli.value(argc, argv, i);
    } else {
      cli.unknown(a);
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

// Tape accesses (TapeLoad/TapeStore) over all memory accesses of an Enzyme-style trace (paper
// Observation 1.1: 20-40 %).
double tape_share(const Trace& t) {
  uint64_t tape = 0, mem = 0;
  for (const Instr& in : t.instrs) {
    const bool is_tape = in.op == Op::TapeLoad || in.op == Op::TapeStore;
    tape += is_tape ? 1 : 0;
    mem += (is_tape || in.op == Op::Load || in.op == Op::Store) ? 1 : 0;
  }
  return ratio(static_cast<double>(tape), static_cast<double>(mem));
}

// One benchmark's reports by system name, for the summary.
struct BenchResult {
  std::string name;
  std::map<std::string, MachineReport> by_system;
  double tape_share = 0;
  const MachineReport* get(const std::string& s) const {
    auto it = by_system.find(s);
    return it == by_system.end() ? nullptr : &it->second;
  }
};

// The smallest simulated Tflow_<size> cache whose total cycles are at most Enzyme_32k's (0: none).
uint64_t iso_perform_cache(const BenchResult& r) {
  const MachineReport& base = *r.get("Enzyme_32k");
  for (uint64_t size : kTable3CacheSizes) {
    const MachineReport* t = r.get("Tflow_" + std::to_string(size / 1024) + "k");
    if (t != nullptr && t->cycles() <= base.cycles()) return size;
  }
  return 0;
}

void print_summary(const std::vector<BenchResult>& results, bench::Json& j) {
  std::printf("\n== summary: Tflow_32k vs Enzyme_32k and the paper's other figures ('-': system not simulated) ==\n");
  std::printf("%-12s %6s %6s %6s | %7s %7s %7s %7s | %6s | %8s %8s | %8s | %6s\n", "bench", "FWD x", "REV x", "x",
              "E1k", "T1k", "T32k", "AoS32k", "AoS x", "E T32k", "E T2k", "ISO-perf", "tape%");
  std::printf("%-12s %20s | %31s | %6s | %17s | %8s | %6s\n", "(paper)", "1.3-2.5x", "DRAM / Enzyme_32k (to 1/14)",
              "<=30%", "energy red. (8x)", "4-8x", "20-40");
  auto cell = [](const MachineReport* r, double v, const char* fmt, char* buf, size_t n) {
    if (r == nullptr)
      std::snprintf(buf, n, "-");
    else
      std::snprintf(buf, n, fmt, v);
    return buf;
  };
  j.key("summary").begin_array();
  for (const BenchResult& r : results) {
    const MachineReport& base = *r.get("Enzyme_32k");
    const MachineReport* t32 = r.get("Tflow_32k");
    const MachineReport* t2 = r.get("Tflow_2k");
    const MachineReport* t1 = r.get("Tflow_1k");
    const MachineReport* e1 = r.get("Enzyme_1k");
    const MachineReport* a32 = r.get("AoS_32k");
    auto dram = [&](const MachineReport* x) { return x ? ratio(x->dram_bytes(), base.dram_bytes()) : 0.0; };
    auto red = [&](const MachineReport* x) { return x ? ratio(base.energy.total_pj(), x->energy.total_pj()) : 0.0; };
    const uint64_t iso = iso_perform_cache(r);
    char b[12][32];
    std::printf("%-12s %6s %6s %6s | %7s %7s %7s %7s | %6s | %8s %8s | %8s | %6.1f\n", r.name.c_str(),
                cell(t32, t32 ? ratio(base.fwd.cycles, t32->fwd.cycles) : 0, "%.2f", b[0], 32),
                cell(t32, t32 ? ratio(base.rev.cycles, t32->rev.cycles) : 0, "%.2f", b[1], 32),
                cell(t32, t32 ? ratio(base.cycles(), t32->cycles()) : 0, "%.2f", b[2], 32),
                cell(e1, dram(e1), "%.3f", b[3], 32), cell(t1, dram(t1), "%.3f", b[4], 32),
                cell(t32, dram(t32), "%.3f", b[5], 32), cell(a32, dram(a32), "%.3f", b[6], 32),
                cell(a32, a32 ? ratio(base.cycles(), a32->cycles()) : 0, "%.2f", b[7], 32),
                cell(t32, red(t32), "%.2f", b[8], 32), cell(t2, red(t2), "%.2f", b[9], 32),
                iso ? (std::to_string(iso / 1024) + "k").c_str() : ">32k", 100 * r.tape_share);
    j.begin_object().kv("benchmark", r.name).kv("tape_share", r.tape_share);
    if (t32) {
      j.kv("tflow32k_fwd_speedup", ratio(base.fwd.cycles, t32->fwd.cycles));
      j.kv("tflow32k_rev_speedup", ratio(base.rev.cycles, t32->rev.cycles));
      j.kv("tflow32k_speedup", ratio(base.cycles(), t32->cycles()));
      j.kv("tflow32k_dram_norm", dram(t32)).kv("tflow32k_energy_reduction", red(t32));
    }
    if (t2) j.kv("tflow2k_energy_reduction", red(t2));
    if (t1) j.kv("tflow1k_dram_norm", dram(t1));
    if (e1) j.kv("enzyme1k_dram_norm", dram(e1));
    if (a32) j.kv("aos32k_dram_norm", dram(a32)).kv("aos32k_speedup", ratio(base.cycles(), a32->cycles()));
    j.kv("iso_perform_cache_bytes", static_cast<long long>(iso));
    j.end_object();
  }
  j.end_array();
}

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
    std::vector<BenchResult> results;
    j.key("benchmarks").begin_array();
    for (const std::string& b : o.benches) {
      // One trace per mode, shared by the systems that execute it.
      std::vector<System> systems = {base_sys};
      for (const std::string& s : o.systems) systems.push_back(system_by_name(s));
      std::map<std::string, MachineReport> by_name;
      double share = 0;
      for (TraceMode mode : {TraceMode::Enzyme, TraceMode::AoS, TraceMode::TapeFlow}) {
        bool needed = false;
        for (const System& s : systems) needed = needed || s.mode == mode;
        if (!needed) continue;
        const Trace t = trace_benchmark(b, mode, topt);
        if (mode == TraceMode::Enzyme) share = tape_share(t);
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
      results.push_back({b, by_name, share});
      std::fflush(stdout);
    }
    j.end_array();
    print_summary(results, j);

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
          j.kv("fwd_cycles", static_cast<long long>(r.fwd.cycles))
              .kv("rev_cycles", static_cast<long long>(r.rev.cycles));
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
      std::printf(
          "\n== unroll sweep: Tflow_32k speedup over Enzyme_32k (FU ops per REV layer) / Enzyme_32k tape hit %% / "
          "speedup over the fully associative Enzyme_64k ==\n%-10s",
          "bench");
      for (uint32_t u : unrolls) std::printf(" %16u", u);
      std::printf("\n");
      j.key("unroll_sweep").begin_array();
      const System tf = system_by_name("Tflow_32k");
      const System fa = system_by_name("Enzyme_64k");
      for (const std::string& b : targets) {
        std::printf("%-10s", b.c_str());
        j.begin_object().kv("benchmark", b).key("points").begin_array();
        for (uint32_t u : unrolls) {
          TraceOptions t = topt;
          t.unroll = u;
          const Trace et = trace_benchmark(b, TraceMode::Enzyme, t);
          const MachineReport e = simulate(et, base_sys.machine);
          const MachineReport e64 = simulate(et, fa.machine);
          const MachineReport r = run(b, tf, t);
          const CacheClassStats& tape = e.cache.cls[static_cast<int>(AccessClass::Tape)];
          const double tape_hit = ratio(static_cast<double>(tape.hits), static_cast<double>(tape.accesses()));
          std::printf(" %5.2f(%2.0f)/%3.0f/%4.2f", ratio(e.cycles(), r.cycles()), r.rev.ops_per_layer(), 100 * tape_hit,
                      ratio(e64.cycles(), r.cycles()));
          j.begin_object().kv("unroll", static_cast<long long>(u)).kv("speedup", ratio(e.cycles(), r.cycles()));
          j.kv("enzyme_cycles", static_cast<long long>(e.cycles()))
              .kv("tflow_cycles", static_cast<long long>(r.cycles()));
          j.kv("enzyme_tape_hit_rate", tape_hit).kv("enzyme_dram_bytes", static_cast<long long>(e.dram_bytes()));
          j.kv("enzyme64k_fa_cycles", static_cast<long long>(e64.cycles()));
          j.kv("speedup_vs_enzyme64k_fa", ratio(e64.cycles(), r.cycles()));
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
