#include "sim/detail/scratchpad.h"

#include <bit>

#include "core/error.h"

namespace strata::sim::detail {

Scratchpad::Scratchpad(const ScratchpadConfig& c) : config_(c) {
  STRATA_CHECK(c.size_bytes >= 8 && c.size_bytes % 8 == 0,
               "sim::Scratchpad: size_bytes must be a positive multiple of 8 (slots are 8 bytes), got ", c.size_bytes);
  STRATA_CHECK(c.banks > 0 && std::has_single_bit(c.banks) && c.banks <= c.size_bytes / 8,
               "sim::Scratchpad: banks must be a power of two <= the ", c.size_bytes / 8, " slots, got ", c.banks);
  STRATA_CHECK(c.latency > 0, "sim::Scratchpad: latency must be > 0");
  full_.assign(c.size_bytes / 8, 0);
  bank_busy_.assign(c.banks, 0);
}

void Scratchpad::check_range(uint64_t addr, uint64_t bytes, const std::string& what) const {
  STRATA_CHECK(addr % 8 == 0 && bytes % 8 == 0 && bytes > 0, what, ": scratchpad access at offset ", addr, " of ",
               bytes, " bytes is not a whole number of 8-byte slots");
  STRATA_CHECK(addr + bytes <= config_.size_bytes && addr + bytes > addr, what, ": scratchpad bytes [", addr, ", ",
               addr + bytes, ") exceed the ", config_.size_bytes, "-byte scratchpad");
}

void Scratchpad::set_full(uint64_t addr, uint64_t bytes, bool full) {
  for (uint64_t s = addr / 8; s < (addr + bytes) / 8; ++s) full_[s] = full ? 1 : 0;
}

bool Scratchpad::all_full(uint64_t addr, uint64_t bytes) const {
  for (uint64_t s = addr / 8; s < (addr + bytes) / 8; ++s)
    if (!full_[s]) return false;
  return true;
}

uint64_t StreamEngine::start(const Instr& in, uint64_t cycle, Dram& dram, Scratchpad& spad) {
  ++streams;
  bytes += in.bytes;
  last_start = cycle;
  const uint64_t words = in.bytes / 8;
  if (in.op == Op::StreamIn) {
    spad.stream_words_in += words;
    spad.set_full(in.addr, in.bytes, false);  // being overwritten
    return dram.read(cycle, in.bytes) + 1;    // + the bank write
  }
  spad.stream_words_out += words;
  return dram.write(cycle + 1, in.bytes);  // the bank read, then the posted write
}

}  // namespace strata::sim::detail
