#pragma once
// Helpers of the dist suite: tensors every rank can rebuild for any (rank, index), so each rank
// computes the serial reference of a collective on its own.

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "core/factories.h"
#include "dist/communicator.h"

namespace strata::dist::testing {

inline Communicator& comm() { return Communicator::world(); }

/// A value that depends on (seed, i) and spans several orders of magnitude, so that the order of a
/// floating-point sum shows in its bits.
inline double spread_value(uint64_t seed, int64_t i) {
  uint64_t h = (seed + 1) * 0x9E3779B97F4A7C15ull ^ (static_cast<uint64_t>(i) + 0x632BE59BD9B4E019ull);
  h ^= h >> 31;
  h *= 0xBF58476D1CE4E5B9ull;
  h ^= h >> 29;
  const double mantissa = static_cast<double>(static_cast<int64_t>(h % 2001) - 1000) / 7.0;
  static const double scales[] = {1e-3, 1e-1, 1.0, 1e2, 1e4, 1e6, 1e8};
  return mantissa * scales[(h >> 20) % 7];
}

/// A tensor of `sizes` and `dtype` filled with spread_value(seed, i) (integers for i64).
inline Tensor seeded(uint64_t seed, IntArrayRef sizes, DType dtype) {
  Tensor t = empty(sizes, {dtype});
  for (int64_t i = 0; i < t.numel(); ++i) {
    const double v = spread_value(seed, i);
    if (dtype == DType::f32)
      t.data<float>()[i] = static_cast<float>(v);
    else if (dtype == DType::f64)
      t.data<double>()[i] = v;
    else
      t.data<int64_t>()[i] = static_cast<int64_t>(v);
  }
  return t;
}

inline const std::vector<DType>& reducible_dtypes() {
  static const std::vector<DType> d{DType::f32, DType::f64, DType::i64};
  return d;
}

}  // namespace strata::dist::testing
