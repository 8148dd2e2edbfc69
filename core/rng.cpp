#include "core/rng.h"

namespace strata {

namespace {
constexpr uint32_t kPhiloxM0 = 0xD2511F53u;
constexpr uint32_t kPhiloxM1 = 0xCD9E8D57u;
constexpr uint32_t kPhiloxW0 = 0x9E3779B9u;
constexpr uint32_t kPhiloxW1 = 0xBB67AE85u;

inline void mulhilo(uint32_t a, uint32_t b, uint32_t& hi, uint32_t& lo) {
  const uint64_t p = static_cast<uint64_t>(a) * b;
  hi = static_cast<uint32_t>(p >> 32);
  lo = static_cast<uint32_t>(p);
}
}  // namespace

std::array<uint32_t, 4> philox4x32_10(std::array<uint32_t, 2> key, std::array<uint32_t, 4> ctr) {
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      key[0] += kPhiloxW0;
      key[1] += kPhiloxW1;
    }
    uint32_t hi0, lo0, hi1, lo1;
    mulhilo(kPhiloxM0, ctr[0], hi0, lo0);
    mulhilo(kPhiloxM1, ctr[2], hi1, lo1);
    ctr = {hi1 ^ ctr[1] ^ key[0], lo1, hi0 ^ ctr[3] ^ key[1], lo0};
  }
  return ctr;
}

void Generator::manual_seed(uint64_t seed) {
  std::lock_guard<std::mutex> lock(mutex_);
  seed_ = seed;
  offset_ = 0;
}

uint64_t Generator::seed() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return seed_;
}

uint64_t Generator::offset() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return offset_;
}

void Generator::set_offset(uint64_t offset) {
  std::lock_guard<std::mutex> lock(mutex_);
  offset_ = offset;
}

namespace {
std::array<uint32_t, 2> key_of(uint64_t seed) {
  return {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)};
}
}  // namespace

PhiloxRange Generator::reserve(uint64_t blocks) {
  std::lock_guard<std::mutex> lock(mutex_);
  PhiloxRange range{key_of(seed_), offset_, blocks};
  offset_ += blocks;
  return range;
}

std::array<uint32_t, 4> Generator::block(uint64_t index) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return PhiloxRange{key_of(seed_), index, 1}.block(0);
}

Generator& default_generator() {
  static Generator gen;
  return gen;
}

void manual_seed(uint64_t seed) { default_generator().manual_seed(seed); }

}  // namespace strata
