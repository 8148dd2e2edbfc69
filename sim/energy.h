#pragma once
/// @file
/// Per-access on-chip energies of the simulated accelerator (TapeFlow Table III) and the energy
/// breakdown the machine model reports (sim/machine.h).
///
/// Note [Sim energy accounting]
/// On-chip energy is the sum of per-access charges of the SRAM structures, as TapeFlow's Fig. 14
/// counts it (Table III lists storage energies only; functional-unit energy is not modeled):
/// - cache: every demand access (Load/Store/TapeLoad/TapeStore, per cache line touched), every
///   line fill from DRAM and every dirty-line writeback is one access at the cache's per-access
///   energy (Table III by size: 1k 120 pJ, 2k 440, 4k 450, 8k 460, 16k 470, 32k 2990,
///   64k 10800, 128k 11350);
/// - scratchpad: every datapath SpadLoad/SpadStore is one access at 100 pJ (Table III), and so is
///   every 8-byte word the stream engines (FWD-S reads, REV-S writes) move through it. The
///   paper's text quotes "< 10 pJ" per tape access beside Table III's 100 pJ; we use the table.
///   The same 100 pJ is used for every scratchpad size of the sweep (the paper gives no scaling).
/// The total is exactly sum(count x charge) over these five classes (tests/cpp/sim/test_machine.cpp).

#include <cstdint>
#include <string>

#include "core/error.h"

namespace strata::sim {

/// Table III's cache sizes in bytes, in increasing order.
inline constexpr uint64_t kTable3CacheSizes[] = {1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072};

namespace detail {
inline int table3_index(uint64_t size_bytes, const char* what) {
  for (int i = 0; i < 8; ++i)
    if (kTable3CacheSizes[i] == size_bytes) return i;
  STRATA_FAIL(what, ": no Table III cache of ", size_bytes,
              " bytes; expected one of 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072");
}
}  // namespace detail

/// Table III's per-access energy of a cache of `size_bytes` (pJ); throws strata::Error naming the
/// size and the supported sizes for any other size.
inline double table3_cache_energy_pj(uint64_t size_bytes) {
  static constexpr double kPj[] = {120, 440, 450, 460, 470, 2990, 10800, 11350};
  return kPj[detail::table3_index(size_bytes, "table3_cache_energy_pj")];
}

/// Table III's associativity for a cache of `size_bytes` (0 = fully associative); throws for sizes
/// Table III does not list.
inline uint32_t table3_cache_associativity(uint64_t size_bytes) {
  static constexpr uint32_t kWays[] = {2, 2, 2, 2, 2, 4, 0, 8};
  return kWays[detail::table3_index(size_bytes, "table3_cache_associativity")];
}

/// Table III's scratchpad per-access energy (pJ).
inline constexpr double kTable3ScratchpadEnergyPj = 100.0;

/// Per-access charges used by one machine configuration (pJ).
struct EnergyConfig {
  double cache_access_pj = 2990;                      ///< cache demand access, fill or writeback
  double spad_access_pj = kTable3ScratchpadEnergyPj;  ///< datapath access or streamed 8-byte word
};

/// Access counts and the energy they add up to (Note [Sim energy accounting]).
struct EnergyReport {
  uint64_t cache_demand = 0, cache_fills = 0, cache_writebacks = 0;
  uint64_t spad_datapath = 0, spad_stream_words = 0;
  double cache_pj = 0, spad_pj = 0;
  double total_pj() const { return cache_pj + spad_pj; }
};

/// Fills the energies of `r` from its counts and the charges in `e`.
inline void price(EnergyReport& r, const EnergyConfig& e) {
  r.cache_pj = static_cast<double>(r.cache_demand + r.cache_fills + r.cache_writebacks) * e.cache_access_pj;
  r.spad_pj = static_cast<double>(r.spad_datapath + r.spad_stream_words) * e.spad_access_pj;
}

}  // namespace strata::sim
