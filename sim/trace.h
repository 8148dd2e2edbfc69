#pragma once
/// @file
/// The simulated accelerator's program format (DESIGN.md §3 "sim"; TapeFlow §III–IV): a flat,
/// fully unrolled dataflow trace of one forward (FWD) and one reverse (REV) pass over scalar
/// doubles, as the tracer records it and the TapeFlow passes rewrite it. The timing and energy
/// model (sim/machine.h) executes a Trace; the tracer (sim/active.h) and the passes
/// (sim/tapeflow.h) produce them. This header is the seam between those parts: change it only
/// additively.
///
/// Note [Sim trace semantics]
/// - Values are SSA: every instruction that produces a value names it with a fresh `dst` id
///   (dense, from 0); `src` ids refer to earlier instructions' dst (dataflow edges — the CGRA
///   issues an instruction once its sources are ready and a functional unit is free).
/// - Memory instructions carry an address space and a byte address inside it:
///     Load / Store        program arrays (inputs, outputs, gradients): Space::Dram, through the
///                         cache in both Enzyme-style and TapeFlow-style execution;
///     TapeStore/TapeLoad  Enzyme-style tape, Space::Dram, through the cache (struct-of-arrays:
///                         one tape array per stored value, laid out by the tracer);
///     SpadStore/SpadLoad  TapeFlow scratchpad slots, Space::Spad, `addr` = slot byte offset;
///     StreamOut           FWD-S: writes `bytes` from scratchpad offset `addr` to the tape's end
///                         in DRAM (`addr2` = the DRAM tape address); StreamIn (REV-S): reads
///                         `bytes` from DRAM `addr2` into scratchpad offset `addr`.
///     SAlloc / Barrier    layer begin (scratchpad base in `addr`) and end (full/empty sync).
/// - Stores consume their value in src[0] (and address operands are folded into `addr`, as the
///   fully unrolled IR has them); loads produce `dst`.
/// - `phase` says FWD or REV; the machine reports cycles per phase. REV instructions follow all
///   FWD instructions in `instrs`.
/// - `loop` is the id of the innermost source loop (TapeFlow's passes work per loop; kNone
///   outside loops); `iter` the iteration number within it.

#include <cstdint>
#include <string>
#include <vector>

namespace strata::sim {

inline constexpr uint32_t kNone = 0xffffffffu;

enum class Op : uint8_t {
  // arithmetic on doubles (one functional unit each; latencies are the machine's)
  Const,
  Input,
  Add,
  Sub,
  Mul,
  Div,
  Neg,
  Exp,
  Log,
  Sqrt,
  Sin,
  Cos,
  Tanh,
  Max,
  Min,
  Select,
  Cmp,
  // memory
  Load,
  Store,
  TapeLoad,
  TapeStore,
  SpadLoad,
  SpadStore,
  // TapeFlow streaming and layering
  StreamOut,
  StreamIn,
  SAlloc,
  Barrier,
};

enum class Space : uint8_t { None, Dram, Spad };
enum class Phase : uint8_t { Forward, Reverse };

struct Instr {
  Op op = Op::Const;
  Phase phase = Phase::Forward;
  Space space = Space::None;
  uint32_t dst = kNone;                     ///< value produced, or kNone
  uint32_t src[3] = {kNone, kNone, kNone};  ///< values consumed (Select uses three)
  uint64_t addr = 0;                        ///< byte address in `space` (memory ops), slot offset (Spad*)
  uint64_t addr2 = 0;                       ///< DRAM address of a stream's tape tile
  uint32_t bytes = 8;                       ///< access size in bytes (8 for a double; a stream's length)
  uint32_t loop = kNone;                    ///< innermost source loop id
  uint32_t iter = 0;                        ///< iteration within that loop
  double imm = 0;                           ///< Const's value (and Input's, for functional replay)
};

/// A traced program: instructions (FWD then REV) and what a report needs to name it.
struct Trace {
  std::string name;
  std::vector<Instr> instrs;
  uint32_t num_values = 0;              ///< dst ids are < num_values
  uint64_t tape_bytes = 0;              ///< bytes the FWD writes to the tape
  uint64_t spad_bytes = 0;              ///< scratchpad bytes the plan uses (TapeFlow traces; 0 otherwise)
  std::vector<std::string> loop_names;  ///< by loop id
};

}  // namespace strata::sim
