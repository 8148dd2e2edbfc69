#pragma once
/// @file
/// The named system configurations of TapeFlow §V (Table III), by name:
///   Enzyme_<size>  Enzyme-style execution: the struct-of-arrays tape goes through the cache;
///   AoS_<size>     the array-of-structs layout of pass 1 alone, tape still through the cache
///                  (paper Fig. 13, "Enzyme's vs. Tapeflow's layout");
///   Tflow_<size>   TapeFlow: tape in the 512-byte, 8-bank scratchpad with stream engines, the
///                  cache for non-tape accesses only;
/// with <size> one of Table III's caches 1k, 2k, 4k, 8k, 16k, 32k, 64k, 128k (associativity and
/// per-access energy from Table III). The paper's evaluated systems are Enzyme_32k (baseline),
/// Enzyme_1k, Tflow_32k (ISO-Energy), Tflow_2k (ISO-Perform) and Tflow_1k; the other sizes are its
/// cache-size sweeps (Figs. 12, 15).
///
/// Note [Sim system defaults]
/// Every system shares the machine defaults of sim/machine.h (16 FUs, a 128-instruction
/// window, 2-cycle barriers), a 64-byte line, a 2-cycle hit latency, 2 cache ports and 8 MSHRs for
/// every cache size (the paper gives neither latencies nor ports; keeping them equal makes the
/// comparison one of capacity, associativity and tape placement), and DDR4 at 19.2 GB/s with a
/// 100-cycle latency at the 2 GHz clock (sim/detail/dram.h).

#include <cstdint>
#include <string>
#include <vector>

#include "sim/machine.h"

namespace strata::sim {

/// How a system executes the tape, and so which trace of a benchmark it runs.
enum class TraceMode : uint8_t {
  Enzyme,    ///< struct-of-arrays tape (one array per stored value) through the cache
  AoS,       ///< TapeFlow's array-of-structs regions (pass 1), through the cache
  TapeFlow,  ///< passes 1-4: regions, layers, streams, scratchpad slots
};

const char* trace_mode_name(TraceMode mode);

struct System {
  std::string name;
  TraceMode mode = TraceMode::Enzyme;
  MachineConfig machine;
};

/// A system of kind `mode` with a Table III cache of `cache_bytes` and, for TapeFlow, a scratchpad
/// of `spad_bytes` (8 banks, fewer when it has fewer than 8 slots). Throws strata::Error for a
/// cache size Table III does not list.
System make_system(TraceMode mode, uint64_t cache_bytes, uint64_t spad_bytes = 512);

/// The system called `name` (see the file comment); throws strata::Error naming it and the
/// accepted names otherwise.
System system_by_name(const std::string& name);

/// Every name system_by_name() accepts.
std::vector<std::string> system_names();

/// The paper's five evaluated systems: Enzyme_32k, Enzyme_1k, Tflow_32k, Tflow_2k, Tflow_1k.
std::vector<std::string> paper_system_names();

}  // namespace strata::sim
