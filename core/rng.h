#pragma once
/// @file
/// Counter-based random numbers (Philox4x32-10). Element i of a draw uses counter (offset + i/4),
/// so a draw's values depend only on the seed and the generator's offset, not on how the work is
/// split across threads.

#include <array>
#include <cstdint>
#include <mutex>

namespace strata {

/// Philox4x32 with 10 rounds (Salmon et al., SC'11): maps (key, counter) to 4 random 32-bit words.
std::array<uint32_t, 4> philox4x32_10(std::array<uint32_t, 2> key, std::array<uint32_t, 4> counter);

/// A reserved run of Philox blocks under one key; computing a block needs no lock.
struct PhiloxRange {
  std::array<uint32_t, 2> key{};
  uint64_t first = 0;  // index of the run's first block in the generator's stream
  uint64_t count = 0;
  /// Block `j` of the run (0 <= j < count).
  std::array<uint32_t, 4> block(uint64_t j) const {
    const uint64_t index = first + j;
    return philox4x32_10(key, {static_cast<uint32_t>(index), static_cast<uint32_t>(index >> 32), 0u, 0u});
  }
};

/// A seeded stream of Philox blocks. Thread-safe: `reserve` hands out disjoint counter ranges.
class Generator {
 public:
  explicit Generator(uint64_t seed = kDefaultSeed) : seed_(seed) {}

  void manual_seed(uint64_t seed);
  uint64_t seed() const;
  /// Number of 128-bit blocks consumed so far.
  uint64_t offset() const;
  void set_offset(uint64_t offset);

  /// Reserves `blocks` consecutive 128-bit blocks and advances the offset past them. Fill kernels
  /// then compute any block of the range independently, in parallel.
  PhiloxRange reserve(uint64_t blocks);
  /// The 4 words of block `index` of this generator's stream under its current seed.
  std::array<uint32_t, 4> block(uint64_t index) const;

  static constexpr uint64_t kDefaultSeed = 67280421310721ull;

 private:
  mutable std::mutex mutex_;
  uint64_t seed_;
  uint64_t offset_ = 0;
};

/// The process-wide generator the factories use when none is passed.
Generator& default_generator();
/// Seeds the default generator and resets its offset (like torch.manual_seed).
void manual_seed(uint64_t seed);

/// Uniform float in [0, 1) from 24 random bits.
inline float uint32_to_unit_float(uint32_t x) { return static_cast<float>(x >> 8) * 0x1.0p-24f; }
/// Uniform double in [0, 1) from 53 random bits.
inline double uint64_to_unit_double(uint64_t x) { return static_cast<double>(x >> 11) * 0x1.0p-53; }

}  // namespace strata
