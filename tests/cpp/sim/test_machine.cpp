// The machine model (sim/machine.h) on hand-built traces with known schedules: dataflow issue
// against dependencies, FU count, window and barriers; the cache and DRAM under a streaming
// kernel; REV-S run-ahead; the energy total against per-access charges; malformed traces. Then the
// named systems (sim/systems.h) and the benchmark registry's plans (sim/bench_registry.h).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <map>
#include <vector>

#include "sim/bench_registry.h"
#include "sim/machine.h"
#include "sim/systems.h"
#include "tests/cpp/error_text.h"

using namespace strata::sim;
using strata::sim::registry::benchmark_names;
using strata::sim::registry::trace_benchmark;
using strata::sim::registry::TraceOptions;

namespace {

// Appends instructions to a trace; returns the value each produces.
struct Builder {
  Trace t;
  Phase phase = Phase::Forward;

  uint32_t emit(Op op, uint32_t a = kNone, uint32_t b = kNone, bool produces = true) {
    Instr in;
    in.op = op;
    in.phase = phase;
    in.src[0] = a;
    in.src[1] = b;
    if (produces) in.dst = t.num_values++;
    t.instrs.push_back(in);
    return in.dst;
  }
  uint32_t input() { return emit(Op::Input); }
  uint32_t load(uint64_t addr, Op op = Op::Load) {
    const uint32_t v = emit(op);
    t.instrs.back().space = op == Op::SpadLoad ? Space::Spad : Space::Dram;
    t.instrs.back().addr = addr;
    return v;
  }
  void store(uint32_t v, uint64_t addr, Op op = Op::Store) {
    emit(op, v, kNone, false);
    t.instrs.back().space = op == Op::SpadStore ? Space::Spad : Space::Dram;
    t.instrs.back().addr = addr;
  }
  void stream(Op op, uint64_t spad, uint64_t dram, uint32_t bytes) {
    emit(op, kNone, kNone, false);
    t.instrs.back().space = Space::Spad;
    t.instrs.back().addr = spad;
    t.instrs.back().addr2 = dram;
    t.instrs.back().bytes = bytes;
  }
  void barrier() { emit(Op::Barrier, kNone, kNone, false); }
  void salloc(uint64_t base) {
    emit(Op::SAlloc, kNone, kNone, false);
    t.instrs.back().addr = base;
  }
};

MachineConfig enzyme_like() {
  MachineConfig c;
  c.name = "test";
  c.cache.size_bytes = 32768;
  c.cache.associativity = 4;
  return c;
}

MachineConfig tflow_like(uint64_t spad_bytes = 512) {
  MachineConfig c = enzyme_like();
  c.has_scratchpad = true;
  c.scratchpad.size_bytes = spad_bytes;
  return c;
}

}  // namespace

TEST(SimMachine, DependentChainTakesTheSumOfLatencies) {
  Builder b;
  const uint32_t x = b.input();
  const uint32_t a = b.emit(Op::Add, x, x);  // 4
  const uint32_t m = b.emit(Op::Mul, a, x);  // 4
  const uint32_t e = b.emit(Op::Exp, m);     // 20
  b.emit(Op::Div, e, a);                     // 16
  const MachineReport r = simulate(b.t, enzyme_like());
  EXPECT_EQ(r.fwd.cycles, 4u + 4u + 20u + 16u);
  EXPECT_EQ(r.rev.cycles, 0u);
  EXPECT_EQ(r.fwd.fu_ops, 4u);
  EXPECT_EQ(r.fwd.instrs, 5u);
}

TEST(SimMachine, IndependentOpsIssueSixteenPerCycle) {
  Builder b;
  const uint32_t x = b.input();
  for (int i = 0; i < 32; ++i) b.emit(Op::Add, x, x);
  EXPECT_EQ(simulate(b.t, enzyme_like()).fwd.cycles, 1u + 4u);  // two issue cycles, then 4
  Builder c;
  const uint32_t y = c.input();
  for (int i = 0; i < 33; ++i) c.emit(Op::Mul, y, y);
  EXPECT_EQ(simulate(c.t, enzyme_like()).fwd.cycles, 2u + 4u);
}

TEST(SimMachine, UnpipelinedOpsHoldTheirFunctionalUnit) {
  Builder b;
  const uint32_t x = b.input();
  for (int i = 0; i < 17; ++i) b.emit(Op::Div, x, x);
  EXPECT_EQ(simulate(b.t, enzyme_like()).fwd.cycles, 16u + 16u);  // the 17th waits for a free FU
  MachineConfig one = enzyme_like();
  one.fus = 1;
  Builder c;
  const uint32_t y = c.input();
  for (int i = 0; i < 4; ++i) c.emit(Op::Add, y, y);
  EXPECT_EQ(simulate(c.t, one).fwd.cycles, 3u + 4u);  // pipelined: one issue per cycle
}

TEST(SimMachine, TheWindowLimitsHowFarAheadIssueLooks) {
  Builder b;
  const uint32_t x = b.input();
  for (int i = 0; i < 4; ++i) b.emit(Op::Add, x, x);
  MachineConfig c = enzyme_like();
  c.window = 1;  // one instruction in flight: strictly serial
  EXPECT_EQ(simulate(b.t, c).fwd.cycles, 16u);
  c.window = 2;
  EXPECT_EQ(simulate(b.t, c).fwd.cycles, 8u);
}

TEST(SimMachine, StoresLeaveTheWindowWhenIssued) {
  Builder b;
  b.store(b.input(), 0);  // write miss: line fill 0..107
  b.load(4096);           // another line: fetched at 1 (the store left the window), queued behind
                          // the fill on the channel: transfer 6.7..13.3, data at 14 + 100
  MachineConfig c = enzyme_like();
  c.window = 1;
  EXPECT_EQ(simulate(b.t, c).fwd.cycles, 114u);
}

TEST(SimMachine, BarrierWaitsForTheLayersTapeAccessesAndHoldsBackTheNextLayer) {
  Builder b;
  const uint32_t x = b.input();
  b.salloc(0);                             // 0..1
  const uint32_t a = b.emit(Op::Exp, x);   // 0..20
  const uint32_t c1 = b.emit(Op::Exp, x);  // 0..20  (not tape)
  b.emit(Op::Exp, c1);                     // 20..40 (not tape)
  b.store(a, 0, Op::SpadStore);            // 20..21
  b.barrier();                             // tape done at 21: 21..23
  b.emit(Op::Add, x, x);                   // fetched at 23: 23..27
  const MachineReport r = simulate(b.t, tflow_like());
  EXPECT_EQ(r.fwd.cycles, 40u);  // the non-tape Exp stays in flight across the barrier
  EXPECT_EQ(r.fwd.layers, 1u);
  EXPECT_DOUBLE_EQ(r.fwd.ops_per_layer(), 4.0);
  // The next layer's op waited for the barrier: make it the long pole.
  Builder d = b;
  d.emit(Op::Exp, d.t.num_values - 1);  // Exp(Add): 27..47
  EXPECT_EQ(simulate(d.t, tflow_like()).fwd.cycles, 47u);
  Builder nob = d;  // without the barrier: Add 0..4, Exp 4..24
  nob.t.instrs.erase(nob.t.instrs.begin() + 6);
  EXPECT_EQ(simulate(nob.t, tflow_like()).fwd.cycles, 40u);
  MachineConfig drain = tflow_like();  // a draining barrier waits for the Exp chain: 40..42
  drain.barrier_drains = true;
  EXPECT_EQ(simulate(d.t, drain).fwd.cycles, 42u + 4u + 20u);
}

TEST(SimMachine, ReverseStartsAfterForwardAndKeepsTheCache) {
  Builder b;
  const uint32_t x = b.input();
  const uint32_t e = b.emit(Op::Exp, x);
  b.store(e, 4096, Op::TapeStore);  // FWD: write miss (107 cycles) + fill
  b.phase = Phase::Reverse;
  const uint32_t v = b.load(4096, Op::TapeLoad);  // REV: hit
  b.emit(Op::Mul, v, v);
  const MachineReport r = simulate(b.t, enzyme_like());
  EXPECT_EQ(r.fwd.cycles, 20u + 107u);
  EXPECT_EQ(r.rev.cycles, 2u + 4u);
  EXPECT_EQ(r.fwd.cache.cls[1].misses, 1u);
  EXPECT_EQ(r.rev.cache.cls[1].hits, 1u);
  EXPECT_DOUBLE_EQ(r.rev.cache.hit_rate(), 1.0);
  EXPECT_EQ(r.dram_read_bytes(), 64u);
  EXPECT_EQ(r.dram_write_bytes(), 0u);  // the dirty line stays in the cache
}

TEST(SimMachine, LoadsWaitForEarlierStoresToTheSameWord) {
  Builder b;
  const uint32_t x = b.input();
  const uint32_t e = b.emit(Op::Exp, x);
  b.load(0);                     // warms the line: 107
  b.store(e, 0);                 // after Exp (20) and the line: hit at >= 107 ... 109
  const uint32_t v = b.load(0);  // must follow the store: 109 + 2
  b.emit(Op::Add, v, v);         // +4
  const uint32_t w = b.load(8);  // independent word of the same line: 107 + 0
  (void)w;
  const MachineReport r = simulate(b.t, enzyme_like());
  EXPECT_EQ(r.fwd.cycles, 107u + 2u + 2u + 4u);
}

TEST(SimMachine, HitUnderMissWaitsForTheFillAndMshrsLimitOutstandingMisses) {
  Builder b;
  for (int i = 0; i < 8; ++i) b.load(8 * i);  // one line: 1 miss, 7 hits merged into it
  const MachineReport r = simulate(b.t, enzyme_like());
  EXPECT_EQ(r.fwd.cycles, 107u);
  EXPECT_EQ(r.cache.misses(), 1u);
  EXPECT_EQ(r.cache.hits(), 7u);
  // 3 lines with one MSHR: each miss waits for the previous fill.
  Builder c;
  for (int i = 0; i < 3; ++i) c.load(64 * i);
  MachineConfig m = enzyme_like();
  m.cache.mshrs = 1;
  EXPECT_EQ(simulate(c.t, m).fwd.cycles, 3u * 107u);
  m.cache.mshrs = 8;  // all three overlap; the channel serializes their transfers (3 x 64 / 9.6 = 20)
  EXPECT_EQ(simulate(c.t, m).fwd.cycles, 20u + 100u);
  m.cache.ports = 1;  // one access per cycle: the third issues at cycle 2; still channel-bound
  EXPECT_EQ(simulate(c.t, m).fwd.cycles, 20u + 100u);
}

TEST(SimMachine, StreamingLoadsSaturateTheDramBandwidth) {
  // y[i] = -x[i] over 64 KB of sequential doubles: with enough MSHRs to cover the latency
  // (bytes in flight >= bandwidth x latency) the kernel runs at the channel's 9.6 bytes/cycle.
  const uint64_t n = 8192;
  MachineConfig c = enzyme_like();
  c.cache.mshrs = 32;
  c.window = 512;
  const double ideal = 8.0 * n / c.dram.bytes_per_cycle();
  Builder s;
  for (uint64_t i = 0; i < n; ++i) s.emit(Op::Neg, s.load(8 * i));
  const MachineReport rs = simulate(s.t, c);
  EXPECT_EQ(rs.dram_read_bytes(), 8 * n);
  EXPECT_GT(static_cast<double>(rs.fwd.cycles), ideal);
  EXPECT_LT(static_cast<double>(rs.fwd.cycles), ideal * 1.05 + 110);  // within 5 % + one latency
  // With the default 8 MSHRs the cache can keep only 8 x 64 bytes in flight per 107-cycle miss.
  const MachineReport r8 = simulate(s.t, enzyme_like());
  EXPECT_GT(static_cast<double>(r8.fwd.cycles), 1.8 * ideal);
}

TEST(SimMachine, StreamEnginesSaturateTheDramBandwidth) {
  // REV: 2048 tiles of 64 bytes streamed into a 1 MB scratchpad, one SpadLoad each.
  Builder b;
  b.phase = Phase::Reverse;
  const uint64_t tiles = 2048;
  for (uint64_t k = 0; k < tiles; ++k) {
    b.stream(Op::StreamIn, 64 * k, 1 << 24 | 64 * k, 64);
    b.emit(Op::Neg, b.load(64 * k, Op::SpadLoad));
  }
  const MachineReport r = simulate(b.t, tflow_like(1 << 20));
  const double ideal = 64.0 * tiles / 9.6;
  EXPECT_EQ(r.dram_read_bytes(), 64 * tiles);
  EXPECT_EQ(r.rev.streams, tiles);
  EXPECT_GT(static_cast<double>(r.rev.cycles), ideal);
  EXPECT_LT(static_cast<double>(r.rev.cycles), ideal * 1.02 + 110);
}

namespace {

// REV layers: each streams a 64-byte tile into scratchpad offset `base(k)`, sums its 8 slots with
// a tree of Adds and divides a running value by the sum (a 16-cycle serial chain across layers, so
// the datapath needs longer per layer than the channel needs per tile), then syncs.
Trace layered_rev(uint64_t layers, const std::function<uint64_t(uint64_t)>& base) {
  Builder b;
  b.phase = Phase::Reverse;
  uint32_t acc = b.input();
  for (uint64_t k = 0; k < layers; ++k) {
    b.stream(Op::StreamIn, base(k), 4096 + 64 * k, 64);
    b.salloc(base(k));
    std::vector<uint32_t> v;
    for (int s = 0; s < 8; ++s) v.push_back(b.load(base(k) + 8 * s, Op::SpadLoad));
    while (v.size() > 1) {
      std::vector<uint32_t> w;
      for (size_t i = 0; i < v.size(); i += 2) w.push_back(b.emit(Op::Add, v[i], v[i + 1]));
      v = w;
    }
    acc = b.emit(Op::Div, acc, v[0]);
    b.barrier();
  }
  b.t.spad_bytes = 0;
  for (uint64_t k = 0; k < layers; ++k) b.t.spad_bytes = std::max(b.t.spad_bytes, base(k) + 64);
  return b.t;
}

}  // namespace

TEST(SimMachine, RevStreamRunAheadHidesDramLatencyWhenBandwidthAllows) {
  const uint64_t layers = 32;
  // Every layer in its own region (a 2 KB scratchpad): REV-S streams all tiles ahead.
  const Trace ahead = layered_rev(layers, [](uint64_t k) { return 64 * k; });
  // One region reused by every layer: each tile can only come in after the previous layer read it.
  const Trace single = layered_rev(layers, [](uint64_t) { return 0; });
  const MachineReport ra = simulate(ahead, tflow_like(2048));
  const MachineReport rs = simulate(single, tflow_like(2048));
  // With the data on chip the layers pipeline behind the Div chain: 16 cycles per layer, after the
  // first tile's trip (108), its load (1) and Add tree (12).
  EXPECT_LE(ra.rev.cycles, 108 + 1 + 12 + layers * 16 + 4);  // one exposed tile latency
  EXPECT_GE(ra.rev.cycles, 108 + 1 + 12 + layers * 16);
  // Single region: tile k+1 can only start once layer k's SpadLoads have read the slots, so a
  // tile's 108-cycle trip is exposed per layer (the layer's Adds overlap it).
  EXPECT_GE(rs.rev.cycles, layers * 108);
  EXPECT_LT(4 * ra.rev.cycles, rs.rev.cycles);
  // Early layers' loads are fetched before their tiles arrive (the datapath races ahead of the
  // channel until the Div chain fills the window), but they wait far less than with one region.
  EXPECT_LT(4 * ra.rev.spad_empty_wait_cycles, rs.rev.spad_empty_wait_cycles);
  EXPECT_GE(rs.rev.spad_empty_waits, (layers - 1) * 8);  // every layer waits
  EXPECT_EQ(ra.rev.layers, layers);
  EXPECT_EQ(ra.dram_read_bytes(), rs.dram_read_bytes());
  // When bandwidth does not allow, run-ahead cannot beat the channel.
  MachineConfig slow = tflow_like(2048);
  slow.dram.bandwidth_gbps = 0.2;  // 0.1 B/cycle: 640 cycles per tile
  const MachineReport rslow = simulate(ahead, slow);
  EXPECT_GE(rslow.rev.cycles, layers * 640);
}

TEST(SimMachine, FwdStreamWaitsForFullSlotsAndNextWritersWaitForTheStream) {
  Builder b;
  const uint32_t x = b.input();
  const uint32_t e = b.emit(Op::Exp, x);  // 20
  b.salloc(0);
  b.store(e, 0, Op::SpadStore);             // 20..21
  b.store(x, 8, Op::SpadStore);             // 0..1
  b.barrier();                              // 21..23
  b.stream(Op::StreamOut, 0, 1 << 20, 16);  // starts at 21 (slots full), bank read 22, 2 cycles
  b.salloc(0);
  b.store(x, 0, Op::SpadStore);  // waits for the stream's read of slot 0: 24..25
  const MachineReport r = simulate(b.t, tflow_like());
  EXPECT_EQ(r.fwd.cycles, 25u);
  EXPECT_EQ(r.dram_write_bytes(), 16u);
  EXPECT_EQ(r.fwd.spad_stores, 3u);
  EXPECT_EQ(r.fwd.streams, 1u);
}

TEST(SimMachine, EnergyTotalIsTheSumOfPerAccessCharges) {
  Builder b;
  const uint32_t x = b.input();
  for (int i = 0; i < 4; ++i) b.load(8 * i);  // 4 demand, 1 fill
  b.store(x, 1 << 16, Op::TapeStore);         // 1 demand, 1 fill
  b.store(x, 0, Op::SpadStore);               // 1 spad
  b.store(x, 8, Op::SpadStore);               // 1 spad
  b.stream(Op::StreamOut, 0, 1 << 20, 16);    // 2 words
  b.phase = Phase::Reverse;
  b.stream(Op::StreamIn, 16, 1 << 20, 16);    // 2 words
  b.emit(Op::Neg, b.load(16, Op::SpadLoad));  // 1 spad
  MachineConfig c = tflow_like();
  c.energy.cache_access_pj = 440;
  c.energy.spad_access_pj = 100;
  const MachineReport r = simulate(b.t, c);
  EXPECT_EQ(r.energy.cache_demand, 5u);
  EXPECT_EQ(r.energy.cache_fills, 2u);
  EXPECT_EQ(r.energy.cache_writebacks, 0u);
  EXPECT_EQ(r.energy.spad_datapath, 3u);
  EXPECT_EQ(r.energy.spad_stream_words, 4u);
  EXPECT_DOUBLE_EQ(r.energy.cache_pj, 7 * 440.0);
  EXPECT_DOUBLE_EQ(r.energy.spad_pj, 7 * 100.0);
  EXPECT_DOUBLE_EQ(r.energy.total_pj(), 7 * 440.0 + 7 * 100.0);
  EXPECT_EQ(r.sram_bytes, 32768u + 512u);
}

TEST(SimMachine, EnergyCountsWritebacksOfEvictedDirtyLines) {
  Builder b;
  const uint32_t x = b.input();
  MachineConfig c = enzyme_like();
  c.cache.size_bytes = 1024;
  c.cache.associativity = 2;
  c.energy.cache_access_pj = 120;
  for (int k = 0; k < 3; ++k) b.store(x, 512 * k, Op::TapeStore);  // the third evicts the first, dirty
  const MachineReport r = simulate(b.t, c);
  EXPECT_EQ(r.energy.cache_demand, 3u);
  EXPECT_EQ(r.energy.cache_fills, 3u);
  EXPECT_EQ(r.energy.cache_writebacks, 1u);
  EXPECT_EQ(r.cache.cls[1].writebacks, 1u);
  EXPECT_DOUBLE_EQ(r.energy.total_pj(), 7 * 120.0);
  EXPECT_EQ(r.dram_write_bytes(), 64u);
  EXPECT_EQ(r.dram_read_bytes(), 3 * 64u);
}

TEST(SimMachine, MalformedTracesAreRejectedNamingTheInstruction) {
  {
    Builder b;
    b.emit(Op::Add, 5, kNone);
    b.t.num_values = 6;
    EXPECT_ERROR_HAS(simulate(b.t, enzyme_like()),
                     "instr 0 (Add) reads value 5, which no earlier instruction produces");
  }
  {
    Builder b;
    b.phase = Phase::Reverse;
    b.input();
    b.phase = Phase::Forward;
    b.input();
    EXPECT_ERROR_HAS(simulate(b.t, enzyme_like()), "instr 1 (Input): a FWD instruction after REV ones");
  }
  {
    Builder b;
    b.store(b.input(), 0, Op::SpadStore);
    EXPECT_ERROR_HAS(simulate(b.t, enzyme_like()), "instr 1 (SpadStore) uses the scratchpad, but system test has none");
  }
  {
    Builder b;
    b.store(b.input(), 512, Op::SpadStore);
    EXPECT_ERROR_HAS(simulate(b.t, tflow_like()),
                     "instr 1 (SpadStore): scratchpad bytes [512, 520) exceed the 512-byte");
  }
  {
    Builder b;
    b.emit(Op::Neg, b.load(8, Op::SpadLoad));
    EXPECT_ERROR_HAS(
        simulate(b.t, tflow_like()),
        "instr 0 (SpadLoad) reads scratchpad slot at offset 8, which no earlier SpadStore or StreamIn wrote");
  }
  {
    Builder b;
    b.input();
    b.t.spad_bytes = 1024;
    EXPECT_ERROR_HAS(simulate(b.t, tflow_like()), "the trace's plan uses 1024 scratchpad bytes, more than the 512");
  }
  {
    Builder b;
    b.load(0);
    b.t.instrs[0].space = Space::Spad;
    EXPECT_ERROR_HAS(simulate(b.t, enzyme_like()), "instr 0 (Load): expected address space Dram");
  }
  {
    Builder b;
    b.input();
    b.input();
    b.t.instrs[1].dst = 0;
    EXPECT_ERROR_HAS(simulate(b.t, enzyme_like()), "instr 1 (Input) produces value 0, already produced by instr 0");
  }
  {
    Builder b;
    b.store(kNone, 0);
    EXPECT_ERROR_HAS(simulate(b.t, enzyme_like()), "instr 0 (Store) stores no value");
  }
  {
    Builder b;
    b.input();
    MachineConfig c = enzyme_like();
    c.cache.size_bytes = 3000;
    EXPECT_ERROR_HAS(simulate(b.t, c), "size_bytes must be a power of two");
    c = enzyme_like();
    c.fus = 0;
    EXPECT_ERROR_HAS(simulate(b.t, c), "has no functional units");
  }
}

// ---- named systems (sim/systems.h) and the benchmark registry (sim/bench_registry.h) ----

TEST(SimSystems, PaperSystemsFollowTable3) {
  const System e32 = system_by_name("Enzyme_32k");
  EXPECT_EQ(e32.mode, TraceMode::Enzyme);
  EXPECT_EQ(e32.machine.cache.size_bytes, 32768u);
  EXPECT_EQ(e32.machine.cache.associativity, 4u);
  EXPECT_EQ(e32.machine.energy.cache_access_pj, 2990);
  EXPECT_FALSE(e32.machine.has_scratchpad);
  EXPECT_EQ(e32.machine.sram_bytes(), 32768u);
  EXPECT_DOUBLE_EQ(e32.machine.dram.bytes_per_cycle(), 9.6);
  const System t2 = system_by_name("Tflow_2k");
  EXPECT_EQ(t2.mode, TraceMode::TapeFlow);
  EXPECT_EQ(t2.machine.cache.associativity, 2u);
  EXPECT_EQ(t2.machine.energy.cache_access_pj, 440);
  EXPECT_TRUE(t2.machine.has_scratchpad);
  EXPECT_EQ(t2.machine.scratchpad.size_bytes, 512u);
  EXPECT_EQ(t2.machine.scratchpad.banks, 8u);
  EXPECT_EQ(t2.machine.energy.spad_access_pj, 100);
  EXPECT_EQ(t2.machine.sram_bytes(), 2048u + 512u);
  EXPECT_EQ(system_by_name("Enzyme_64k").machine.cache.associativity, 0u);
  EXPECT_EQ(system_by_name("Enzyme_128k").machine.cache.associativity, 8u);
  EXPECT_EQ(system_by_name("AoS_32k").mode, TraceMode::AoS);
  EXPECT_EQ(system_by_name("Tflow_1k").machine.energy.cache_access_pj, 120);
  EXPECT_EQ(system_names().size(), 24u);
  for (const std::string& n : paper_system_names()) EXPECT_EQ(system_by_name(n).name, n);
}

TEST(SimSystems, ScratchpadSweepSystems) {
  const System s64 = make_system(TraceMode::TapeFlow, 32768, 64);
  EXPECT_EQ(s64.name, "Tflow_32k_spad64B");
  EXPECT_EQ(s64.machine.scratchpad.banks, 8u);
  EXPECT_EQ(make_system(TraceMode::TapeFlow, 32768, 32).machine.scratchpad.banks, 4u);
  EXPECT_EQ(make_system(TraceMode::TapeFlow, 32768, 1 << 20).name, "Tflow_32k_spad1024k");
  EXPECT_ERROR_HAS(make_system(TraceMode::TapeFlow, 32768, 12), "scratchpad size must be a positive multiple of 8");
}

TEST(SimSystems, UnknownNamesAreRejectedWithTheAcceptedOnes) {
  EXPECT_ERROR_HAS(system_by_name("Tflow_3k"),
                   "unknown system 'Tflow_3k'; expected Enzyme_<size>, AoS_<size> or Tflow_<size>");
  EXPECT_ERROR_HAS(system_by_name("enzyme_32k"), "the paper's: Enzyme_32k, Enzyme_1k, Tflow_32k, Tflow_2k, Tflow_1k");
  EXPECT_ERROR_HAS(make_system(TraceMode::Enzyme, 3000), "no Table III cache of 3000 bytes");
}

namespace {

// Follows every tape value through the TapeFlow plan (SpadStore -> slot -> StreamOut -> DRAM tape
// -> StreamIn -> slot -> SpadLoad) and returns, per REV SpadLoad, the FWD value it reads.
std::map<size_t, uint32_t> follow_tape(const Trace& t) {
  std::map<uint64_t, uint32_t> slot, tape;
  std::map<size_t, uint32_t> got;
  for (size_t i = 0; i < t.instrs.size(); ++i) {
    const Instr& in = t.instrs[i];
    switch (in.op) {
      case Op::SpadStore: slot[in.addr] = in.src[0]; break;
      case Op::StreamOut:
        for (uint64_t w = 0; w < in.bytes; w += 8) tape[in.addr2 + w] = slot.at(in.addr + w);
        break;
      case Op::StreamIn:
        for (uint64_t w = 0; w < in.bytes; w += 8) slot[in.addr + w] = tape.at(in.addr2 + w);
        break;
      case Op::SpadLoad: got[i] = slot.at(in.addr); break;
      default: break;
    }
  }
  return got;
}

}  // namespace

TEST(SimRegistry, SyntheticPlansFitTheScratchpadAndEveryTapeLoadReadsItsOwnStore) {
  for (const std::string& name : strata::sim::registry::synthetic_benchmark_names()) {
    for (uint64_t spad : {32u, 64u, 512u, 4096u}) {
      for (uint32_t unroll : {0u, 3u}) {
        TraceOptions o;
        o.quick = true;
        o.spad_bytes = spad;
        o.unroll = unroll;
        const Trace t = trace_benchmark(name, TraceMode::TapeFlow, o);
        EXPECT_LE(t.spad_bytes, spad) << name;
        std::vector<uint32_t> producer(t.num_values, kNone);
        for (size_t i = 0; i < t.instrs.size(); ++i)
          if (t.instrs[i].dst != kNone) producer[t.instrs[i].dst] = static_cast<uint32_t>(i);
        const auto got = follow_tape(t);
        ASSERT_EQ(got.size(), 2u * 512u) << name << " " << spad;
        std::map<uint32_t, int> seen;  // per iteration: Exp value first, then the v[i] load
        for (auto [i, v] : got) {
          const Instr& load = t.instrs[i];
          const Instr& def = t.instrs[producer[v]];
          EXPECT_EQ(def.iter, load.iter) << name << " spad " << spad << " instr " << i;
          const int k = seen[load.iter]++;
          EXPECT_EQ(def.op, k == 0 ? Op::Exp : Op::Load) << name << " instr " << i;
        }
        // ... and the machine accepts it on a scratchpad of that size.
        const MachineReport r = simulate(t, make_system(TraceMode::TapeFlow, 32768, spad).machine);
        EXPECT_EQ(r.cache.cls[1].accesses(), 0u);  // no tape access reaches the cache
        EXPECT_EQ(r.fwd.spad_stores, 1024u);
        EXPECT_EQ(r.rev.spad_loads, 1024u);
        EXPECT_EQ(r.dram_write_bytes() >= 512u * 16u, true);
      }
    }
  }
}

TEST(SimRegistry, EveryModeRunsOnItsSystemsAndTheSmallCacheThrashesOnStrides) {
  TraceOptions o;
  o.quick = true;
  std::map<std::string, MachineReport> r;
  for (const char* s : {"Enzyme_32k", "Enzyme_1k", "AoS_32k", "Tflow_32k", "Tflow_1k"}) {
    const System sys = system_by_name(s);
    r[s] = simulate(trace_benchmark("strided", sys.mode, o), sys.machine);
    EXPECT_GT(r[s].fwd.cycles, 0u);
    EXPECT_GT(r[s].rev.cycles, 0u);
  }
  EXPECT_GT(r["Enzyme_1k"].dram_bytes(), 2 * r["Enzyme_32k"].dram_bytes());
  EXPECT_GT(r["Enzyme_32k"].cache.cls[1].accesses(), 0u);
  EXPECT_EQ(r["Tflow_32k"].cache.cls[1].accesses(), 0u);
  EXPECT_LT(r["Tflow_1k"].energy.total_pj(), r["Enzyme_32k"].energy.total_pj());
  // Enzyme-style traces do not run on a TapeFlow system's scratchpad, and vice versa.
  EXPECT_ERROR_HAS(simulate(trace_benchmark("stream", TraceMode::TapeFlow, o), system_by_name("Enzyme_32k").machine),
                   "uses the scratchpad, but system Enzyme_32k has none");
}

TEST(SimRegistry, UnknownBenchmarkAndTooSmallScratchpadAreRejected) {
  EXPECT_ERROR_HAS(trace_benchmark("gravity2", TraceMode::Enzyme, {}),
                   "unknown benchmark 'gravity2'; expected one of: gravity, nn, logsum, matdescent, mttkrp, somier, "
                   "lenet, pathfinder, mass_spring, stream, strided");
  TraceOptions o;
  o.spad_bytes = 16;
  EXPECT_ERROR_HAS(trace_benchmark("stream", TraceMode::TapeFlow, o),
                   "a 16-byte scratchpad cannot hold two 16-byte layers");
}

TEST(SimRegistry, TableTwoBenchmarksRunInEveryModeOnTheirSystems) {
  EXPECT_EQ(benchmark_names().size(), 9u);
  TraceOptions o;
  o.quick = true;  // the reduced sizes
  for (const std::string& name : benchmark_names()) {
    const Trace e = trace_benchmark(name, TraceMode::Enzyme, o);
    const Trace a = trace_benchmark(name, TraceMode::AoS, o);
    const Trace t = trace_benchmark(name, TraceMode::TapeFlow, o);
    EXPECT_EQ(e.tape_bytes, t.tape_bytes) << name;
    EXPECT_LE(t.spad_bytes, 512u) << name;
    const MachineReport re = simulate(e, system_by_name("Enzyme_32k").machine);
    const MachineReport ra = simulate(a, system_by_name("AoS_32k").machine);
    const MachineReport rt = simulate(t, system_by_name("Tflow_2k").machine);
    // Every taped byte is a TapeStore through the cache in Enzyme/AoS and a SpadStore in TapeFlow.
    EXPECT_EQ(re.fwd.cache.cls[1].accesses() * 8, e.tape_bytes) << name;
    EXPECT_EQ(ra.fwd.cache.cls[1].accesses() * 8, a.tape_bytes) << name;
    EXPECT_EQ(rt.cache.cls[1].accesses(), 0u) << name;
    EXPECT_EQ(rt.fwd.spad_stores * 8, t.tape_bytes) << name;
    EXPECT_GT(rt.fwd.layers, 0u) << name;
    EXPECT_GT(re.cycles(), 0u);
  }
  o.unroll = 4;
  const MachineReport r4 =
      simulate(trace_benchmark("pathfinder", TraceMode::TapeFlow, o), system_by_name("Tflow_32k").machine);
  EXPECT_GT(r4.rev.cycles, 0u);
}
