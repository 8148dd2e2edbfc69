#pragma once
/// @file
/// Finding NaN and ±inf in a tensor: what the anomaly check (autograd/anomaly_mode.h) and
/// `strata-dlrm --check-finite` report.

#include <cstdint>
#include <string>

#include "core/tensor.h"

namespace strata {

/// How many elements of a tensor are NaN and ±inf, and the first non-finite one (row-major index).
struct NonFinite {
  int64_t nan = 0, inf = 0, numel = 0;
  int64_t first = -1;  // -1: every element is finite
  double first_value = 0;
  bool any() const { return first >= 0; }
  /// "2 NaN and 1 inf of 12 elements, the first at element 4 (nan)".
  std::string describe() const;
};

/// Scans `t` (any layout; integer and bool tensors are finite by definition). Pins its storage
/// while it reads (Note [Pinning kernel operands]).
NonFinite find_non_finite(const Tensor& t);

/// True when `t` holds no NaN or ±inf; stops at the first one (the cheap test for a hot loop).
bool all_finite(const Tensor& t);

}  // namespace strata
