#pragma once
/// @file
/// The configuration layer: every `STRATA_*` environment variable, and the setting types and
/// parsers shared by the environment, the programs' flags and the Python bindings.
///
/// Note [One configuration layer]
/// Every `STRATA_*` environment variable the library, the Python bindings or a program reads is
/// read by one of the `environment::` functions below and nowhere else
/// (scripts/check_config_reads.sh fails CI otherwise; tests may keep test-only variables). Each is
/// parsed strictly, with one error
/// style: a value that does not parse throws strata::Error
///     `<VARIABLE>: expected <what is accepted>, got '<value>'`
/// (the value quoted, Note [Quoting user data in messages]); nothing is ignored or guessed, and a
/// variable set to the empty string is such a value (unset it for the default). The functions read
/// the environment when called and cache nothing: each component reads its variables once, when it
/// is first used (the tiered memory on the first allocation, the thread cap on the first parallel
/// region, the oneDNN mode on the first op that consults it), and tests may change them in between.
/// The types a setting takes (PmBackend, SlowTierModelSpec, DnnlPrimitives) and their parsers live
/// here too, so a flag (`--slow-tier-model`), a Python argument (`strata.memory.configure(model=)`)
/// and the variable accept the same spellings with the same message. docs/CONFIG.md is the table of
/// all variables (the CI script checks that it names every variable read here).

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace strata {

/// Parses a byte count: a non-negative integer with an optional K/M/G/T suffix (powers of 1024,
/// optionally followed by "B" or "iB"), surrounding blanks allowed. Throws strata::Error
/// `<what>: expected a byte count (e.g. 1048576, 512M, 8G), got '<text>'` on anything else, and
/// `<what>: '<text>' is too large` past 2^64 - 1.
std::size_t parse_bytes(std::string_view text, std::string_view what);

/// How the slow heap gets its memory (memory/heap.h PmHeap).
enum class PmBackend : uint8_t {
  Auto,     ///< memkind on a DAX directory (when built with it), else Mmap
  Memkind,  ///< memkind's PMEM kind over `dir` (fsdax on real PMem/CXL, any filesystem otherwise)
  Mmap,     ///< a file in `dir` mapped shared
  Numa,     ///< anonymous memory bound to NUMA node `numa_node` (a CPU-less CXL expander)
};
/// "auto", "memkind", "mmap" or "numa".
std::string_view pm_backend_name(PmBackend backend);
/// The backend named `text`; throws strata::Error `<what>: expected auto, memkind, mmap or numa,
/// got '<text>'` for any other text.
PmBackend parse_pm_backend(std::string_view text, std::string_view what);

/// The slow-tier model a user asks for (Note [Slow-tier model], memory/slow_tier_model.h): `auto`
/// (on unless the slow heap is a real device), `off`, `default` (the dissertation's Optane ratios to
/// this machine's measured DRAM bandwidth) or a custom one. TieredMemory::model_for turns it into
/// the memory::SlowTierModel in force.
struct SlowTierModelSpec {
  enum class Mode : uint8_t { Auto, Off, Default, Custom } mode = Mode::Auto;
  double read_gbps = 0, write_gbps = 0, latency_ns = 0;  ///< Custom only

  static SlowTierModelSpec off() { return {Mode::Off}; }
  static SlowTierModelSpec defaults() { return {Mode::Default}; }
  /// A Custom spec. Throws strata::Error `<what>: read and write bandwidths must be positive and
  /// the latency non-negative (finite numbers), got read=R,write=W,latency=L` otherwise.
  static SlowTierModelSpec custom(double read_gbps, double write_gbps, double latency_ns, std::string_view what);
  /// "auto", "off", "default" or "R,W,L" (what parse_slow_tier_model reads back).
  std::string to_string() const;
  /// "auto", "off", "default" or "custom".
  std::string_view mode_name() const;
};

/// Parses a slow-tier model: `auto`, `off`, `default` (or `on`), `read=R,write=W,latency=L` or
/// `R,W,L` (read and write GB/s > 0, latency ns >= 0; plain decimal numbers, no blanks). Throws
/// strata::Error `<what>: expected auto, off, default, read=R,write=W,latency=L or R,W,L (...), got
/// '<text>'`, or SlowTierModelSpec::custom's message for numbers out of range.
SlowTierModelSpec parse_slow_tier_model(std::string_view text, std::string_view what);

/// When ops use oneDNN primitives rather than their own kernels (Note [When Strata uses oneDNN
/// primitives], ops/detail/cpu/dnnl_engine.h).
enum class DnnlPrimitives : uint8_t { Auto, Always, Never };

/// Where tensors are allocated by default: the tiered memory, or plain DRAM (tiering off).
enum class MemoryKind : uint8_t { Tiered, Dram };

/// The environment, one function a variable (Note [One configuration layer]); nullopt: unset.
namespace environment {

std::optional<std::size_t> fast_bytes();        ///< STRATA_FAST_BYTES: a byte count
std::optional<std::size_t> slow_bytes();        ///< STRATA_SLOW_BYTES: a byte count
std::optional<std::string> slow_dir();          ///< STRATA_SLOW_DIR: a non-empty path
std::optional<PmBackend> slow_backend();        ///< STRATA_SLOW_BACKEND: auto|memkind|mmap|numa
std::optional<int> slow_numa_node();            ///< STRATA_SLOW_NUMA_NODE: 0..4095
std::optional<SlowTierModelSpec> slow_model();  ///< STRATA_SLOW_MODEL: parse_slow_tier_model
std::optional<double> dram_gbps();              ///< STRATA_DRAM_GBPS: a positive number
std::optional<double> dram_gather_gbps();       ///< STRATA_DRAM_GATHER_GBPS: a positive number
/// STRATA_MEMORY: `tiered` (the default when unset) or `dram`.
MemoryKind memory_kind();
/// STRATA_NUM_THREADS: a thread count in [1, kMaxThreads] (core/threading.h parse_num_threads).
std::optional<int> num_threads();
/// STRATA_DNNL_PRIMITIVES: `auto`, `1`/`on`/`always` (Always) or `0`/`off`/`never` (Never).
std::optional<DnnlPrimitives> dnnl_primitives();
/// STRATA_DIST_TIMEOUT: how long a collective waits for a peer, in seconds (a finite number; <= 0
/// waits forever); strata::dist's default when unset.
std::optional<double> dist_timeout_seconds();
/// A rank or size the MPI launcher exports (OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE, PMI_RANK,
/// PMI_SIZE; not Strata's own, read only to cross-check MPI's view): a non-negative integer.
std::optional<int64_t> launcher_count(const char* variable);

}  // namespace environment

}  // namespace strata
