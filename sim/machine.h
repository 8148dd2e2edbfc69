#pragma once
/// @file
/// The simulated accelerator's timing and energy model (TapeFlow §III, Table III; DESIGN.md §3
/// "sim"): executes a Trace (sim/trace.h) on a 4x4 grid of double-precision functional
/// units with dataflow issue, a set-associative cache (sim/detail/cache.h) for Load/Store (and, in
/// Enzyme-style traces, TapeLoad/TapeStore), a banked scratchpad with FWD-S/REV-S stream engines
/// (sim/detail/scratchpad.h) for TapeFlow-style traces, over a bandwidth-limited DRAM
/// (sim/detail/dram.h). Reports forward and reverse cycles, DRAM bytes, cache hit rates, on-chip
/// energy (sim/energy.h) and SRAM size.
///
/// Note [Sim machine model]
/// - Datapath: instructions (all but StreamIn/StreamOut) enter a window of `window` instructions
///   in program order; the window's head is the oldest instruction not yet completed (so a long
///   miss at the head holds back fetch, as a spatially mapped, pipelined loop body would stall).
///   Stores leave the window once issued (a store buffer); a later access to their word still
///   waits for them to complete.
///   A fetched instruction issues once its sources are ready and its resource is free this cycle,
///   oldest first: arithmetic needs one of `fus` identical functional units (any FU runs any op);
///   cache accesses need one of the cache's ports and, on a miss, a free MSHR; scratchpad accesses
///   need their bank. Const and Input are live-ins configured into the fabric: they complete when
///   fetched and take no FU.
/// - Op latencies (Note [Sim op latencies], our choice — the paper gives none): Add/Sub/Mul 4
///   cycles pipelined (a new op each cycle), Neg/Max/Min/Cmp/Select 1 pipelined, Div and Sqrt 16
///   and Exp/Log/Sin/Cos/Tanh 20 unpipelined (they hold their FU until done); SAlloc 1 and no FU;
///   SpadLoad/SpadStore the scratchpad latency (1); cache hits the cache's hit latency (2).
/// - Memory ordering: loads wait for the last earlier store to the same 8-byte word, stores for the
///   earlier loads and store of it (addresses are static in the unrolled trace, as the paper's
///   compiler knows them); the scratchpad's full/empty bits are the same rule on slots
///   (Note [Sim scratchpad and streams]).
/// - Cache: a hit completes after the hit latency, or when its line's fill completes if that is
///   later (a hit under a pending miss merges into its MSHR and counts as a hit); a miss takes an
///   MSHR, queues a line read on DRAM (and the dirty victim's posted write) and completes when the
///   line arrives. Dirty lines left at the end are not flushed (not counted as DRAM traffic).
/// - Layers: a Barrier issues once every older scratchpad access and SAlloc has completed (the
///   layer's tape region is complete: its full/empty bits are settled — paper §III, "we overload
///   the full/empty bits to serve as synchronization and write barriers") and takes
///   `barrier_cycles`; nothing younger is fetched before it completes, so small layers limit the
///   parallelism in the window (the sync overhead of paper §VII-A). Older non-tape work (program
///   loads, arithmetic not feeding the region) may still be in flight. With `barrier_drains` the
///   Barrier instead waits for every older datapath instruction (a full pipeline drain). SAlloc
///   marks a layer's start. Stream instructions run on the engines, outside the window and the
///   barriers (REV-S runs ahead).
/// - Phases: REV starts when every FWD instruction (streams included) has completed; the cache
///   keeps its contents across. FWD cycles run from 0 to the last FWD completion, REV cycles from
///   there to the last REV completion.

#include <cstdint>
#include <string>

#include "sim/energy.h"
#include "sim/trace.h"

namespace strata::sim {

// ---- the components' configurations and statistics (the models are internal: sim/detail/) ----

/// Which kind of access touched the cache (statistics are kept per class).
enum class AccessClass : uint8_t { Program = 0, Tape = 1 };

/// The data cache (Table III's sizes and associativities: sim/systems.h make_system).
struct CacheConfig {
  uint64_t size_bytes = 32 * 1024;
  uint32_t associativity = 4;  ///< ways per set; 0 = fully associative
  uint32_t line_bytes = 64;
  uint32_t hit_latency = 2;  ///< cycles from issue to data on a hit
  uint32_t ports = 2;        ///< demand accesses accepted per cycle
  uint32_t mshrs = 8;        ///< outstanding line fills (misses to distinct lines)
};

/// Counts of one access class.
struct CacheClassStats {
  uint64_t hits = 0, misses = 0;
  uint64_t writebacks = 0;  ///< dirty lines of this class evicted
  uint64_t accesses() const { return hits + misses; }
};

struct CacheStats {
  CacheClassStats cls[2];  ///< by AccessClass
  uint64_t hits() const { return cls[0].hits + cls[1].hits; }
  uint64_t misses() const { return cls[0].misses + cls[1].misses; }
  uint64_t writebacks() const { return cls[0].writebacks + cls[1].writebacks; }
  uint64_t accesses() const { return hits() + misses(); }
  /// hits / accesses, or 1 when nothing accessed the cache.
  double hit_rate() const { return accesses() ? static_cast<double>(hits()) / static_cast<double>(accesses()) : 1.0; }
};

/// The DRAM channel (Note [Sim DRAM timing] in sim/detail/dram.h).
struct DramConfig {
  double bandwidth_gbps = 19.2;  ///< GB/s (1e9 bytes per second)
  double clock_ghz = 2.0;        ///< the accelerator clock the bandwidth is converted at
  uint32_t latency = 100;        ///< cycles added to a read after its transfer
  double bytes_per_cycle() const { return bandwidth_gbps / clock_ghz; }
};

/// The tape scratchpad (Note [Sim scratchpad and streams] in sim/detail/scratchpad.h).
struct ScratchpadConfig {
  uint64_t size_bytes = 512;  ///< Table III: 512 B (64 slots of 8 bytes)
  uint32_t banks = 8;         ///< Table III: 8 banks
  uint32_t latency = 1;       ///< cycles per datapath access
};

// ---- the machine --------------------------------------------------------------------------------

/// Latency in cycles of an arithmetic op on a functional unit (Note [Sim machine model]).
uint32_t op_latency(Op op);
/// Whether an arithmetic op's FU accepts a new op the next cycle (pipelined) or stays busy for the
/// op's whole latency.
bool op_pipelined(Op op);
/// The op's name ("Add", "SpadLoad", ...).
const char* op_name(Op op);

/// One simulated system (see sim/systems.h for the paper's named ones).
struct MachineConfig {
  std::string name = "custom";
  uint32_t fus = 16;            ///< 4x4 grid of double-precision FUs
  uint32_t window = 128;        ///< datapath instructions in flight (16 FUs x 8 operand buffers)
  uint32_t barrier_cycles = 2;  ///< layer-sync cost once the layer's tape accesses completed
  bool barrier_drains = false;  ///< Barrier waits for all older datapath instructions, not only tape
  CacheConfig cache;
  bool has_scratchpad = false;  ///< TapeFlow systems
  ScratchpadConfig scratchpad;
  DramConfig dram;
  EnergyConfig energy;
  /// On-chip SRAM the system spends: the cache plus, when present, the scratchpad.
  uint64_t sram_bytes() const { return cache.size_bytes + (has_scratchpad ? scratchpad.size_bytes : 0); }
};

/// What one phase (FWD or REV) did.
struct PhaseReport {
  uint64_t cycles = 0;
  uint64_t instrs = 0;  ///< every instruction of the phase
  uint64_t fu_ops = 0;  ///< arithmetic instructions that took a functional unit
  uint64_t layers = 0;  ///< Barriers
  CacheStats cache;     ///< cache accesses of this phase
  uint64_t dram_read_bytes = 0, dram_write_bytes = 0;
  uint64_t spad_loads = 0, spad_stores = 0;
  uint64_t streams = 0, stream_bytes = 0;
  uint64_t spad_empty_waits = 0;        ///< SpadLoads whose operands were ready before their slot
  uint64_t spad_empty_wait_cycles = 0;  ///< ... and the cycles they waited for REV-S
  /// Average FU ops per layer (all of them when the phase has no Barrier).
  double ops_per_layer() const { return static_cast<double>(fu_ops) / static_cast<double>(layers ? layers : 1); }
};

struct MachineReport {
  std::string trace;
  std::string system;
  PhaseReport fwd, rev;
  uint64_t cycles() const { return fwd.cycles + rev.cycles; }
  uint64_t dram_read_bytes() const { return fwd.dram_read_bytes + rev.dram_read_bytes; }
  uint64_t dram_write_bytes() const { return fwd.dram_write_bytes + rev.dram_write_bytes; }
  uint64_t dram_bytes() const { return dram_read_bytes() + dram_write_bytes(); }
  CacheStats cache;              ///< both phases
  EnergyReport energy;           ///< Note [Sim energy accounting]
  uint64_t sram_bytes = 0;       ///< MachineConfig::sram_bytes()
  uint64_t spad_bytes_used = 0;  ///< the trace's plan (Trace::spad_bytes)
};

/// Executes `trace` on `config`. Throws strata::Error naming the instruction for a malformed trace
/// (a source no earlier instruction produces, a memory op in the wrong address space, FWD after
/// REV, a scratchpad access outside the scratchpad or on a system without one, a scratchpad read
/// of a slot nothing wrote) and for an invalid configuration.
MachineReport simulate(const Trace& trace, const MachineConfig& config);

}  // namespace strata::sim
