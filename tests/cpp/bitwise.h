#pragma once
// Bitwise comparison of tensors for tests that promise identical results (rematerialization, tape
// streaming): the bytes of the contiguous values, read under a pin.

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "core/pin_set.h"
#include "core/tensor.h"

namespace strata::testing_util {

/// Same length and the same bytes (the embeddings kernels promise exact equality with their references).
inline bool bitwise_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

inline std::vector<unsigned char> bytes_of(const Tensor& t) {
  Tensor c = t.contiguous();
  std::vector<unsigned char> out(c.nbytes());
  PinSet pins;
  pins.add(c, AccessMode::Read).acquire();
  if (!out.empty()) std::memcpy(out.data(), c.data_ptr(), out.size());
  return out;
}

/// Success when both are undefined, or both have the same sizes, dtype and bytes.
inline ::testing::AssertionResult same_bits(const Tensor& a, const Tensor& b) {
  if (a.defined() != b.defined()) return ::testing::AssertionFailure() << "one gradient is undefined";
  if (!a.defined()) return ::testing::AssertionSuccess();
  if (a.sizes() != b.sizes() || a.dtype() != b.dtype())
    return ::testing::AssertionFailure() << a.describe() << " vs " << b.describe();
  if (bytes_of(a) != bytes_of(b)) return ::testing::AssertionFailure() << "values differ: " << a.describe();
  return ::testing::AssertionSuccess();
}

}  // namespace strata::testing_util
