#pragma once
// Tensor comparisons shared by the sim backend's tests (values computed in f64 on the simulator
// against f32/f64 CPU results).

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "core/tensor.h"

namespace strata::testing_util {

/// Largest |a - b| / max(1, |b|) over the elements (a and b must have as many elements).
inline double max_rel_diff(const Tensor& a, const Tensor& b) {
  const Tensor x = a.contiguous().to(DType::f64), y = b.contiguous().to(DType::f64);
  EXPECT_EQ(x.numel(), y.numel());
  double worst = 0;
  for (int64_t i = 0; i < x.numel() && i < y.numel(); ++i) {
    const double u = x.data<double>()[i], v = y.data<double>()[i];
    worst = std::max(worst, std::abs(u - v) / std::max(1.0, std::abs(v)));
  }
  return worst;
}

/// Largest |a| over the elements.
inline double max_abs(const Tensor& a) {
  const Tensor x = a.contiguous().to(DType::f64);
  double m = 0;
  for (int64_t i = 0; i < x.numel(); ++i) m = std::max(m, std::abs(x.data<double>()[i]));
  return m;
}

}  // namespace strata::testing_util
