#pragma once
/// @file
/// Internal: the simulated accelerator's tape scratchpad and its stream engines (TapeFlow §III):
/// a banked set of stream registers indexed by the datapath (SpadLoad/SpadStore at a slot's byte
/// offset), with a full/empty bit per 8-byte slot, filled from and drained to DRAM by two decoupled
/// stream engines: FWD-S (StreamOut: scratchpad -> end of the tape in DRAM) and REV-S (StreamIn:
/// DRAM -> scratchpad). ScratchpadConfig is public (sim/machine.h); the model is not part of the
/// public API.
///
/// Note [Sim scratchpad and streams]
/// - Slots are 8 bytes; slot s lives in bank s % banks (word interleaving, so the consecutive
///   slots of an array-of-structs region sit in different banks). Each bank accepts one datapath
///   access per cycle; an access takes `latency` cycles (1: indexed like a register file). The
///   stream engines write and read the banks through their own port (stream registers are
///   dual-ported), so they never take a datapath bank slot.
/// - Full/empty bits: a slot is empty while a write to it (a SpadStore, or the REV-S stream
///   covering it) is in flight and full once it has completed. FWD-S streaming a slot out leaves
///   its value in place (no dirty bits, lazy consistency: paper §III, Choice 3); the slot is free
///   for the next writer once every read of the current value (SpadLoads, the FWD-S stream) is
///   done. The machine (sim/machine.h) derives, from the trace's static slot
///   offsets, which write each SpadLoad/StreamOut waits for (full) and which reads each new write
///   waits for (empty) — the compiler-generated tape accesses are statically analyzable (paper
///   §III, Choice 2) — and checks the bits agree when the access issues.
/// - The engines process their stream instructions in program order, each as soon as its slots
///   allow (REV-S: the previous contents of its destination slots have been read; FWD-S: its
///   source slots are full). They are not held back by the datapath's window or barriers, so REV-S
///   runs ahead of the REV layers and a SpadLoad waits only while its slot is still empty. One
///   stream starts per engine per cycle; its bytes queue on the DRAM channel (sim/dram.h).

#include <cstdint>
#include <string>
#include <vector>

#include "sim/detail/dram.h"
#include "sim/machine.h"
#include "sim/trace.h"

namespace strata::sim::detail {

class Scratchpad {
 public:
  /// Throws strata::Error unless size_bytes is a positive multiple of 8 and banks is a power of two
  /// no larger than the number of slots.
  explicit Scratchpad(const ScratchpadConfig& config);

  const ScratchpadConfig& config() const { return config_; }
  uint64_t slots() const { return config_.size_bytes / 8; }
  uint32_t bank_of(uint64_t addr) const { return static_cast<uint32_t>((addr / 8) % config_.banks); }

  /// Throws strata::Error naming `what` (e.g. "instr 12 (SpadLoad)") unless [addr, addr+bytes) is
  /// inside the scratchpad and 8-byte aligned.
  void check_range(uint64_t addr, uint64_t bytes, const std::string& what) const;

  /// Whether the bank of `addr` is free for a datapath access at `cycle`; take_bank() claims it.
  bool bank_free(uint64_t addr, uint64_t cycle) const { return bank_busy_[bank_of(addr)] != cycle + 1; }
  void take_bank(uint64_t addr, uint64_t cycle) { bank_busy_[bank_of(addr)] = cycle + 1; }

  /// Full/empty bits of the slots covering [addr, addr+bytes).
  void set_full(uint64_t addr, uint64_t bytes, bool full);
  bool all_full(uint64_t addr, uint64_t bytes) const;

  // counters
  uint64_t datapath_reads = 0, datapath_writes = 0;
  uint64_t stream_words_in = 0, stream_words_out = 0;  ///< written by REV-S, read by FWD-S

 private:
  ScratchpadConfig config_;
  std::vector<uint8_t> full_;
  std::vector<uint64_t> bank_busy_;  // cycle + 1 of the last datapath access per bank
};

/// One stream engine: its stream instructions (indices into the trace) in program order.
struct StreamEngine {
  const char* name = "REV-S";
  std::vector<uint32_t> queue;
  size_t head = 0;
  uint64_t last_start = UINT64_MAX;  ///< cycle of the last start (one start per cycle)
  uint64_t streams = 0, bytes = 0;

  /// Moves the tile of stream instruction `in` starting at `cycle`: StreamIn reads DRAM and fills
  /// the slots, StreamOut reads the slots and writes DRAM. Returns the cycle it completes (a
  /// StreamIn when its data is in the slots, a StreamOut when its posted write has left).
  uint64_t start(const Instr& in, uint64_t cycle, Dram& dram, Scratchpad& spad);
};

}  // namespace strata::sim::detail
