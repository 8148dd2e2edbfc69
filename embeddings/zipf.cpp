#include "embeddings/zipf.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

#include "core/error.h"

namespace strata::emb {

// ---- RandomStream ----------------------------------------------------------------------------

double RandomStream::gauss() {
  if (has_gauss_) {
    has_gauss_ = false;
    const double g = gauss_;
    gauss_ = 0.0;
    return g;
  }
  double x1 = 0.0, x2 = 0.0, r2 = 0.0;
  do {
    x1 = 2.0 * uniform() - 1.0;
    x2 = 2.0 * uniform() - 1.0;
    r2 = x1 * x1 + x2 * x2;
  } while (r2 >= 1.0 || r2 == 0.0);
  const double f = std::sqrt(-2.0 * std::log(r2) / r2);
  gauss_ = f * x1;
  has_gauss_ = true;
  return f * x2;
}

uint64_t RandomStream::interval(uint64_t max) {
  if (max == 0) return 0;
  uint64_t mask = max;
  for (int shift = 1; shift <= 32; shift *= 2) mask |= mask >> shift;
  uint64_t v;
  if (max <= 0xffffffffu) {
    do v = next32() & mask;
    while (v > max);
  } else {
    do v = bits64() & mask;
    while (v > max);
  }
  return v;
}

uint64_t RandomStream::below(uint64_t n) {
  STRATA_ASSERT(n > 0);
  if ((n & (n - 1)) == 0) return bits64() & (n - 1);
  // Lemire's multiply-shift with rejection of the (2^64 mod n) biased low products.
  unsigned __int128 m = static_cast<unsigned __int128>(bits64()) * n;
  auto low = static_cast<uint64_t>(m);
  if (low < n) {
    const uint64_t threshold = (0 - n) % n;
    while (low < threshold) {
      m = static_cast<unsigned __int128>(bits64()) * n;
      low = static_cast<uint64_t>(m);
    }
  }
  return static_cast<uint64_t>(m >> 64);
}

// ---- generalized harmonic numbers --------------------------------------------------------------

namespace {

/// (b^(1-s) - a^(1-s)) / (1 - s), or log(b / a) at s = 1, without cancellation near s = 1.
double power_integral(double a, double b, double s) {
  const double t = (1.0 - s) * std::log(b / a);
  const double ratio = std::abs(t) > 1e-12 ? std::expm1(t) / t : 1.0 + 0.5 * t;
  return std::pow(a, 1.0 - s) * std::log(b / a) * ratio;
}

}  // namespace

double generalized_harmonic(int64_t n, double s) {
  STRATA_CHECK(s > 0.0 && std::isfinite(s), "generalized_harmonic: exponent must be positive and finite, got ", s);
  if (n <= 0) return 0.0;
  constexpr int64_t kExact = 1 << 16;
  const int64_t m = n < kExact ? n : kExact;
  double sum = 0.0;
  for (int64_t k = m; k >= 1; --k) sum += std::pow(static_cast<double>(k), -s);  // small terms first
  if (n == m) return sum;
  // Euler–Maclaurin for sum_{k=a..b} k^-s with a = m + 1, b = n.
  const double a = static_cast<double>(m + 1);
  const double b = static_cast<double>(n);
  auto f = [s](double x) { return std::pow(x, -s); };
  auto d1 = [s](double x) { return -s * std::pow(x, -s - 1.0); };
  auto d3 = [s](double x) { return -s * (s + 1.0) * (s + 2.0) * std::pow(x, -s - 3.0); };
  const double tail = power_integral(a, b, s) + 0.5 * (f(a) + f(b)) + (d1(b) - d1(a)) / 12.0 - (d3(b) - d3(a)) / 720.0;
  return sum + tail;
}

double zipf_static_hit_rate(int64_t n, double s, int64_t cached) {
  STRATA_CHECK(n >= 1, "zipf_static_hit_rate: n must be positive, got ", n);
  if (cached <= 0) return 0.0;
  if (cached >= n) return 1.0;
  return generalized_harmonic(cached, s) / generalized_harmonic(n, s);
}

// ---- ZipfSampler -------------------------------------------------------------------------------

namespace {

/// log1p(t) / t, continuous at 0.
double log1p_over(double t) {
  if (std::abs(t) > 1e-8) return std::log1p(t) / t;
  return 1.0 - t * (0.5 - t * (1.0 / 3.0 - 0.25 * t));
}

/// expm1(t) / t, continuous at 0.
double expm1_over(double t) {
  if (std::abs(t) > 1e-8) return std::expm1(t) / t;
  return 1.0 + 0.5 * t * (1.0 + t / 3.0 * (1.0 + 0.25 * t));
}

}  // namespace

ZipfSampler::ZipfSampler(int64_t n, double s) : n_(n), s_(s) {
  STRATA_CHECK(n >= 1, "Zipf sampler: the number of values must be positive, got ", n);
  STRATA_CHECK(n <= (int64_t{1} << 62), "Zipf sampler: at most 2^62 values are supported, got ", n);
  STRATA_CHECK(s > 0.0 && std::isfinite(s), "Zipf sampler: the exponent must be positive and finite, got ", s);
  hint_x1_ = hint(1.5) - 1.0;
  hint_n_ = hint(static_cast<double>(n) + 0.5);
  squeeze_ = 2.0 - hint_inv(hint(2.5) - h(2.0));
}

double ZipfSampler::h(double x) const { return std::exp(-s_ * std::log(x)); }

double ZipfSampler::hint(double x) const {
  const double lx = std::log(x);
  return expm1_over((1.0 - s_) * lx) * lx;
}

double ZipfSampler::hint_inv(double y) const {
  double t = y * (1.0 - s_);
  if (t < -1.0) t = -1.0;  // rounding at the end of the support
  return std::exp(log1p_over(t) * y);
}

int64_t ZipfSampler::operator()(RandomStream& rng) const {
  // The hat h(x) = x^-s is integrated by hint; the value k owns the interval
  // [hint(k + 1/2) - h(k), hint(k + 1/2)] of length h(k), and these intervals are disjoint because
  // h is convex. A uniform u over [hint(3/2) - 1, hint(n + 1/2)] is accepted when it falls into the
  // interval of k = round(hint^-1(u)); `squeeze_` accepts most draws without evaluating hint.
  for (;;) {
    const double u = hint_n_ + rng.uniform() * (hint_x1_ - hint_n_);
    const double x = hint_inv(u);
    int64_t k = static_cast<int64_t>(x + 0.5);
    if (k < 1) {
      k = 1;
    } else if (k > n_) {
      k = n_;
    }
    if (k == 1) return 1;  // k = 1 owns [hint_x1_, hint(3/2)], which holds every u
    const double kd = static_cast<double>(k);
    if (kd - x <= squeeze_ || u >= hint(kd + 0.5) - h(kd)) return k;
  }
}

// ---- LfsrPermutation ---------------------------------------------------------------------------

namespace {

// Primitive feedback masks of the right-shift Galois LFSR, widths 4..63: the lowest-weight (then
// smallest) mask with the top bit set whose register has period 2^w - 1, found by checking
// A^(2^w - 1) = I and A^((2^w - 1) / q) != I for every prime q dividing 2^w - 1. The test suite
// re-checks every entry (full enumeration up to 22 bits, the order test above for all).
constexpr uint64_t kFeedbackMasks[] = {
    // clang-format off
    0x9, 0x12, 0x21, 0x41, 0x8e, 0x108, 0x204, 0x402,                                       // 4..11
    0x829, 0x100d, 0x2015, 0x4001, 0x8016, 0x10004, 0x20040, 0x40013,                      // 12..19
    0x80004, 0x100002, 0x200001, 0x400010, 0x80000d, 0x1000004, 0x2000023, 0x4000013,      // 20..27
    0x8000004, 0x10000002, 0x20000029, 0x40000004, 0x80000062, 0x100001000, 0x20000008c,   // 28..34
    0x400000002, 0x800000400, 0x1000000029, 0x2000000031, 0x4000000008, 0x800000001c,      // 35..40
    0x10000000004, 0x2000000004c, 0x4000000002c, 0x80000000032, 0x10000000000d,            // 41..45
    0x2000000000e0, 0x400000000010, 0x800000000148, 0x1000000000100, 0x200000000000e,      // 46..50
    0x4000000000025, 0x8000000000004, 0x10000000000023, 0x200000000000a4,                  // 51..54
    0x40000000800000, 0x8000000000004a, 0x100000000000040, 0x200000000040000,             // 55..58
    0x40000000000004a, 0x800000000000001, 0x1000000000000013, 0x2000000000000034,          // 59..62
    0x4000000000000001,                                                                    // 63
    // clang-format on
};

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

using Columns = std::vector<uint64_t>;  // a w x w GF(2) matrix as its columns (column j = M e_j)

uint64_t apply_columns(const Columns& m, uint64_t v) {
  uint64_t r = 0;
  while (v != 0) {
    r ^= m[static_cast<std::size_t>(std::countr_zero(v))];
    v &= v - 1;
  }
  return r;
}

Columns multiply(const Columns& a, const Columns& b) {  // (a b) e_j = a (b e_j)
  Columns c(b.size());
  for (std::size_t j = 0; j < b.size(); ++j) c[j] = apply_columns(a, b[j]);
  return c;
}

}  // namespace

int LfsrPermutation::width_for(int64_t n) {
  STRATA_CHECK(n >= 1, "LFSR permutation: n must be positive, got ", n);
  const int bits = std::bit_width(static_cast<uint64_t>(n));  // smallest w with 2^w - 1 >= n
  return bits < 4 ? 4 : bits;
}

uint64_t LfsrPermutation::feedback_mask(int width) {
  STRATA_CHECK(width >= 4 && width <= 63, "LFSR permutation: register width must be in [4, 63], got ", width);
  return kFeedbackMasks[width - 4];
}

LfsrPermutation::LfsrPermutation(int64_t n, uint64_t phase_seed) : n_(n) {
  STRATA_CHECK(n >= 1 && n <= (int64_t{1} << 62), "LFSR permutation: n must be in [1, 2^62], got ", n);
  width_ = width_for(n);
  nibbles_ = (width_ + 3) / 4;
  mask_ = feedback_mask(width_);
  const uint64_t state_mask = (uint64_t{1} << width_) - 1;
  start_ = splitmix64(phase_seed) & state_mask;
  if (start_ == 0) start_ = 1;

  // Nibble-sliced tables of A^(d·16^i), i < nibbles_, d in 1..15 (Note [LFSR scrambling]).
  const auto w = static_cast<std::size_t>(width_);
  Columns base(w);  // A^(16^i), starting with the step matrix A
  for (std::size_t j = 0; j < w; ++j) base[j] = step(uint64_t{1} << j);
  const auto nib = static_cast<std::size_t>(nibbles_);
  tables_.assign(nib * 15 * nib * 16, 0);
  for (std::size_t i = 0; i < nib; ++i) {
    Columns power = base;  // A^(d·16^i) for d = 1
    for (std::size_t d = 1; d <= 15; ++d) {
      if (d > 1) power = multiply(power, base);
      uint64_t* t = tables_.data() + ((i * 15 + (d - 1)) * nib) * 16;
      for (std::size_t p = 0; p < nib; ++p) {
        for (uint64_t v = 0; v < 16; ++v) {
          const uint64_t bits = (v << (4 * p)) & state_mask;
          t[p * 16 + v] = apply_columns(power, bits);
        }
      }
    }
    base = multiply(power, base);  // A^(15·16^i) A^(16^i) = A^(16^(i+1))
  }
  hot_.resize(static_cast<std::size_t>(std::min<int64_t>(n_, int64_t{1} << 15)));
  for (std::size_t k = 0; k < hot_.size(); ++k) hot_[k] = walk(static_cast<int64_t>(k));
}

uint64_t LfsrPermutation::apply(int power_nibble, int digit, uint64_t v) const {
  const auto nib = static_cast<std::size_t>(nibbles_);
  const uint64_t* t =
      tables_.data() + ((static_cast<std::size_t>(power_nibble) * 15 + static_cast<std::size_t>(digit - 1)) * nib) * 16;
  uint64_t r = 0;
  for (std::size_t p = 0; p < nib; ++p, v >>= 4) r ^= t[p * 16 + (v & 15u)];
  return r;
}

uint64_t LfsrPermutation::jump(uint64_t state, uint64_t k) const {
  STRATA_ASSERT(width_ == 64 || (k >> width_) == 0, "jump distance ", k, " exceeds the register width ", width_);
  for (int i = 0; k != 0; ++i, k >>= 4) {
    const int digit = static_cast<int>(k & 15u);
    if (digit != 0) state = apply(i, digit, state);
  }
  return state;
}

int64_t LfsrPermutation::walk(int64_t k) const {
  // f(x) = state x steps after start - 1 permutes [0, 2^w - 1); walk the cycle until it lands in [0, n).
  uint64_t y = jump(start_, static_cast<uint64_t>(k)) - 1;
  while (y >= static_cast<uint64_t>(n_)) y = jump(start_, y) - 1;
  return static_cast<int64_t>(y);
}

int64_t LfsrPermutation::operator()(int64_t k) const {
  STRATA_CHECK(k >= 0 && k < n_, "LFSR permutation: rank ", k, " is out of range [0, ", n_, ")");
  if (k < static_cast<int64_t>(hot_.size())) return hot_[static_cast<std::size_t>(k)];
  return walk(k);
}

}  // namespace strata::emb
