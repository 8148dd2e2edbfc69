#pragma once
/// @file
/// Functional replay of a traced program (sim/active.h): executes a Trace's arithmetic and
/// memory (DRAM, scratchpad, streams) in order, from the Program's initial memory, to give the
/// outputs and gradients a trace computes. Used to check the tracer's REV and the TapeFlow
/// passes against finite differences; the timing model is sim/machine.h.
///
/// Note [Sim replay]
/// - DRAM is a sparse map of 8-byte words; it starts with every array's initial values and every
///   gradient array's seed. Reading a DRAM word nothing wrote (e.g. a tape entry before its
///   store) yields NaN and counts in `invalid_reads`.
/// - The scratchpad is a vector of 8-byte slots. StreamOut copies `bytes` from scratchpad offset
///   `addr` to DRAM `addr2`; StreamIn the reverse. With `poison_spad`, a StreamOut's source range
///   and each REV layer's region (from its SAlloc) at its Barrier are overwritten with NaN and
///   marked unwritten, so a SpadLoad that does not read the slot its SpadStore (or a StreamIn)
///   filled reads NaN and counts in `invalid_reads`.
/// - Cmp(a, b) = (a < b ? 1 : 0); Select(c, a, b) = (c != 0 ? a : b); Max(a, b) = (a < b ? b : a);
///   Min(a, b) = (b < a ? b : a).

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "sim/active.h"

namespace strata::sim {

struct ReplayOptions {
  bool poison_spad = false;  ///< poison scratchpad slots once streamed out or consumed
};

struct ReplayResult {
  std::vector<std::vector<double>> values;  ///< per Program array: values after the replay
  std::vector<std::vector<double>> grads;   ///< per Program array: gradients (empty if Constant)
  uint64_t invalid_reads = 0;               ///< loads of words nothing (validly) wrote
  uint64_t spad_slots_used = 0;             ///< highest scratchpad slot touched + 1

  /// The gradient of the array named `name` in `program` (throws strata::Error if absent).
  const std::vector<double>& grad(const Program& program, const std::string& name) const;
  const std::vector<double>& value(const Program& program, const std::string& name) const;
};

/// Executes `program.trace` (FWD then REV) functionally.
ReplayResult replay(const Program& program, const ReplayOptions& options = {});

}  // namespace strata::sim
