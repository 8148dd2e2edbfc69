#pragma once
/// @file
/// The random machinery behind the skewed index sources (index_source.h): a numpy-compatible
/// uniform/normal stream, a Zipf(s) sampler on {1..N} by rejection-inversion, generalized harmonic
/// numbers (the static-optimal hit rate of REFERENCE.md §2), and the maximal-length LFSR
/// permutation the dissertation scrambles Zipf ranks with (§5.4.1, §5.6.2).

#include <cstdint>
#include <random>
#include <vector>

namespace strata::emb {

/// numpy's legacy `RandomState` draws on std::mt19937: `seed(s)` is `np.random.seed(s)`,
/// `uniform()` is `np.random.random_sample()` (53 random bits), `normal(mu, sigma)` is
/// `np.random.normal` (Marsaglia's polar method, the second value cached). The same seed gives the
/// same numbers as numpy, so the reference's `random` and `synthetic` generators can be replayed.
class RandomStream {
 public:
  explicit RandomStream(uint32_t seed = 123) { this->seed(seed); }
  void seed(uint32_t seed) {
    mt_.seed(seed);
    has_gauss_ = false;
    gauss_ = 0.0;
  }
  /// Uniform in [0, 1) with 53 random bits.
  double uniform() {
    const uint32_t a = static_cast<uint32_t>(mt_()) >> 5;
    const uint32_t b = static_cast<uint32_t>(mt_()) >> 6;
    return (a * 67108864.0 + b) / 9007199254740992.0;
  }
  /// Normal(mu, sigma).
  double normal(double mu, double sigma) { return mu + sigma * gauss(); }
  /// A standard normal variate.
  double gauss();
  /// Uniform integer in [0, n) (n > 0), unbiased (rejection on 64-bit words).
  uint64_t below(uint64_t n);
  /// One MT19937 output (32 random bits).
  uint32_t next32() { return static_cast<uint32_t>(mt_()); }
  /// numpy legacy `random_interval(max)`: uniform in [0, max] by masking to max's bit width and
  /// rejecting values above max (32-bit draws while max fits, else 64-bit ones, high word first).
  /// np.random.shuffle and permutation use it, so Fisher-Yates with it equals numpy's.
  uint64_t interval(uint64_t max);
  /// Skips n uniform() draws (two outputs each), as if they had been drawn.
  void discard_uniforms(uint64_t n) { mt_.discard(2 * n); }
  /// 64 random bits.
  uint64_t bits64() {
    const uint64_t hi = static_cast<uint32_t>(mt_());
    return (hi << 32) | static_cast<uint32_t>(mt_());
  }

 private:
  std::mt19937 mt_;
  bool has_gauss_ = false;
  double gauss_ = 0.0;
};

/// A 64-bit hash of two words (the splitmix64 finalizer over a·φ + b): seeds per-table streams
/// and scrambling phases, and the click generator's hidden per-row effects (click_source.h).
inline uint64_t hash_mix(uint64_t a, uint64_t b) {
  uint64_t x = a * 0x9e3779b97f4a7c15ULL + b + 0x632be59bd9b4e019ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

/// Generalized harmonic number H(n, s) = sum_{k=1..n} k^-s (n >= 0, s > 0). Exact summation up to
/// 2^16 terms, Euler–Maclaurin for the rest (relative error below 1e-12).
double generalized_harmonic(int64_t n, double s);

/// Hit rate of a cache that holds the `cached` hottest of n rows under Zipf(s) on {1..n}:
/// H(cached, s) / H(n, s) (REFERENCE.md §2's static optimum).
double zipf_static_hit_rate(int64_t n, double s, int64_t cached);

/// Zipf(s) on {1, ..., n}: P(k) = k^-s / H(n, s), for any s > 0 (s = 1 included) and n up to 2^62.
/// Rejection-inversion (Hörmann & Derflinger, "Rejection-inversion to generate variates from
/// monotone discrete distributions", ACM TOMACS 1996): O(1) expected time per sample, no tables.
class ZipfSampler {
 public:
  /// Throws strata::Error for n < 1 or s <= 0 (or not finite).
  ZipfSampler(int64_t n, double s);
  int64_t n() const { return n_; }
  double s() const { return s_; }
  /// One sample in [1, n].
  int64_t operator()(RandomStream& rng) const;

 private:
  double h(double x) const;         // x^-s
  double hint(double x) const;      // H(x) = (x^(1-s) - 1) / (1 - s), log x at s = 1
  double hint_inv(double y) const;  // inverse of hint
  int64_t n_;
  double s_;
  double hint_x1_;  // H(1.5) - 1
  double hint_n_;   // H(n + 0.5)
  double squeeze_;  // 2 - H^-1(H(2.5) - h(2))
};

/// A bijection of [0, n) built from a maximal-length Galois LFSR, the way the dissertation
/// scrambles Zipf ranks "using a maximum length LFSR starting at a random phase" per table.
///
/// Note [LFSR scrambling]
/// The register has w = max(4, bit width of n) bits (so 2^w - 1 >= n) and the right-shift Galois
/// step x -> (x >> 1) ^ (x odd ? mask_w : 0), whose masks (feedback_mask) are primitive: from any
/// nonzero state the register visits all 2^w - 1 nonzero states before repeating. Started at a
/// random nonzero state s0 (the phase), f(k) = state after k steps - 1 is a permutation of
/// [0, 2^w - 1). Rank k maps to f(k), cycle-walked into [0, n): while the value is >= n apply f
/// again (a bijection of [0, n); for n >= 8, 2^w - 1 < 2n + 1, so under one extra step on average).
/// "State after k steps" is computed in O(w/4) table lookups per nonzero hex digit of k from
/// precomputed nibble-sliced powers A^(d·16^i) of the step matrix, so the permutation needs no
/// O(n) table and works for tables of any size (a fixed random permutation of 10^9 rows would
/// take 4-8 GB). The values of the 2^15 hottest ranks are cached (256 KB at most), since Zipf
/// draws mostly land there.
class LfsrPermutation {
 public:
  /// `phase_seed` selects the starting state (any value; 0 is mapped to a nonzero state).
  /// Throws strata::Error for n < 1 or n > 2^62.
  LfsrPermutation(int64_t n, uint64_t phase_seed);
  int64_t n() const { return n_; }
  int width() const { return width_; }
  uint64_t mask() const { return mask_; }
  uint64_t start_state() const { return start_; }
  /// The permuted value of rank k in [0, n).
  int64_t operator()(int64_t k) const;

  /// One register step.
  uint64_t step(uint64_t state) const { return (state >> 1) ^ ((state & 1u) ? mask_ : 0u); }
  /// The state `k` steps after `state` (k < 2^width).
  uint64_t jump(uint64_t state, uint64_t k) const;

  /// The primitive feedback mask of the width-w register (4 <= w <= 63).
  static uint64_t feedback_mask(int width);
  /// max(4, bits needed so that 2^w - 1 >= n).
  static int width_for(int64_t n);

 private:
  uint64_t apply(int power_nibble, int digit, uint64_t v) const;
  int64_t n_;
  int width_;
  int nibbles_;
  uint64_t mask_;
  uint64_t start_;
  int64_t walk(int64_t k) const;
  // tables_[((i * 15 + (d - 1)) * nibbles_ + p) * 16 + v] = A^(d·16^i) applied to v << 4p.
  std::vector<uint64_t> tables_;
  std::vector<int64_t> hot_;  // the values of ranks [0, min(n, 2^15))
};

}  // namespace strata::emb
