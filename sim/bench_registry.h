#pragma once
/// @file
/// The benchmarks `strata-sim` runs (bench/sim_main.cpp), traced for a system's TraceMode:
/// - the nine Table II benchmarks of sim/benchmarks.h (gravity, nn, logsum, matdescent,
///   mttkrp, somier, lenet, pathfinder, mass_spring), traced by the active-type tracer; Enzyme
///   mode runs its program as traced (struct-of-arrays tape), AoS mode pass 1 (aos_layout), and
///   TapeFlow mode passes 1–4 for the scratchpad size (tapeflow(), sim/tapeflow.h); `unroll`
///   is pathfinder's unroll factor (BenchmarkParams::unroll) and `quick` selects the reduced sizes;
/// - two hand-built synthetic kernels (not in `all`), used by the machine's tests:
///   stream   y[i] = exp(x[i]) * v[i] over sequential arrays (regular, streaming);
///   strided  the same with x walked column-wise through a 64x64 row-major matrix (a 512-byte
///            stride: every access of a column touches a new line, so small caches thrash).
/// Both store two tape values per iteration (exp(x[i]) and v[i]), read back together in REV.
///
/// Note [Synthetic trace plans] (the synthetic kernels only)
/// - Enzyme: tape as struct-of-arrays, one array per stored value, through the cache
///   (TapeStore/TapeLoad).
/// - AoS: one region per loop, a 16-byte struct per iteration holding both values (pass 1).
/// - TapeFlow: layers of K iterations, K = min(unroll (when > 0), (spad_bytes / 2) / 16, n); the
///   scratchpad is split into two halves used by alternate layers, so FWD-S drains one while the
///   next layer fills the other and REV-S fills one while the current layer reads the other. Each
///   FWD layer is SAlloc, its iterations with SpadStores at base + 16 j (+8), Barrier, then a
///   StreamOut of the layer's tile to the tape's end; each REV layer (in reverse order) is a
///   StreamIn of its tile at its head, SAlloc, its iterations in reverse with SpadLoads from the
///   same slots, Barrier. This is a plain double-buffered plan, not the tracer's Algorithms 1–3.

#include <cstdint>
#include <string>
#include <vector>

#include "sim/systems.h"
#include "sim/trace.h"

namespace strata::sim::registry {

// (A nested namespace: sim/benchmarks.h declares its own strata::sim::benchmark_names().)

struct TraceOptions {
  uint64_t spad_bytes = 512;  ///< the scratchpad a TapeFlow plan must fit
  uint32_t unroll = 0;        ///< bound on iterations per layer (0: the benchmark's default)
  bool quick = false;         ///< a small problem size, for smoke tests
};

/// The Table II benchmark names, in the paper's order (what `--bench all` runs).
std::vector<std::string> benchmark_names();

/// The synthetic kernels: stream, strided.
std::vector<std::string> synthetic_benchmark_names();

/// The trace of benchmark `name` for `mode`. Throws strata::Error naming the benchmark and the
/// registered ones when it is unknown, or when the scratchpad cannot hold a layer.
Trace trace_benchmark(const std::string& name, TraceMode mode, const TraceOptions& options);

}  // namespace strata::sim::registry
