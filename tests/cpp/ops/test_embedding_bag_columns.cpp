// embedding_bag's forward accumulates column blocks of 64 and 16 in registers with a scalar tail
// (ops/embedding.cpp bag_columns). These cases cover every block mix against a plain loop in the
// same order: rows in position order per element, in the tensor's own dtype.

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "autograd/grad_mode.h"
#include "ops/embedding.h"
#include "tests/cpp/ops/harness/op_harness.h"

namespace strata {
namespace {

using testing::from_indices;
using testing::randint64;
using testing::randn64;
using testing::values_of;

/// The plain loop's values, and per element the bag size times the sum of the magnitudes of its
/// terms: the recursive-summation error bound's scale, within which two evaluations that round
/// differently (fused multiply-adds or not) may differ.
template <typename T>
std::vector<double> plain_bags(const std::vector<double>& w, int64_t dim, const std::vector<int64_t>& idx,
                               const std::vector<int64_t>& bounds, const std::vector<double>* psw, bool mean,
                               std::vector<double>& magnitude) {
  std::vector<double> out;
  for (std::size_t b = 0; b + 1 < bounds.size(); ++b) {
    for (int64_t k = 0; k < dim; ++k) {
      T acc = T(0);
      double mag = 0;
      for (int64_t i = bounds[b]; i < bounds[b + 1]; ++i) {
        const T r = static_cast<T>(w[static_cast<std::size_t>(idx[i] * dim + k)]);
        const T term = psw ? static_cast<T>((*psw)[i]) * r : r;
        acc += term;
        mag += std::abs(static_cast<double>(term));
      }
      if (mean && bounds[b + 1] > bounds[b]) acc *= T(1) / static_cast<T>(bounds[b + 1] - bounds[b]);
      out.push_back(static_cast<double>(acc));
      magnitude.push_back(mag * static_cast<double>(bounds[b + 1] - bounds[b]));
    }
  }
  return out;
}

template <typename T>
void check_dims(DType dt) {
  Generator gen(5);
  for (int64_t dim : {1, 3, 15, 16, 17, 48, 64, 65, 80, 83, 130, 256}) {
    for (int mode = 0; mode < 3; ++mode) {  // sum, mean, sum with per-sample weights
      const int64_t rows = 50, n = 37;
      const Tensor w = randn64({rows, dim}, gen).to(dt);
      const Tensor idx = randint64(0, rows, {n}, gen);
      const std::vector<int64_t> off = {0, 5, 5, 12, 30};  // an empty bag too
      const Tensor psw = randn64({n}, gen).to(dt);
      autograd::NoGradGuard ng;
      const Tensor y =
          embedding_bag(w, idx, from_indices(off, {static_cast<int64_t>(off.size())}),
                        mode == 1 ? EmbeddingBagMode::Mean : EmbeddingBagMode::Sum, mode == 2 ? psw : Tensor());
      std::vector<int64_t> bounds = off;
      bounds.push_back(n);
      const std::vector<double> wv = values_of(w), pv = values_of(psw);
      std::vector<double> mag;
      const std::vector<double> want =
          plain_bags<T>(wv, dim, testing::indices_of(idx), bounds, mode == 2 ? &pv : nullptr, mode == 1, mag);
      const std::vector<double> got = values_of(y);
      ASSERT_EQ(got.size(), want.size()) << "dim " << dim;
      const double eps = sizeof(T) == 4 ? 0x1p-24 : 0x1p-53;
      for (std::size_t i = 0; i < got.size(); ++i) {
        // Same order, same dtype: without weights bitwise equal; with them, each term's product
        // may be fused into its addition (one rounding saved per term, changing later roundings).
        if (mode != 2)
          ASSERT_EQ(got[i], want[i]) << "dim " << dim << " mode " << mode << " element " << i;
        else
          ASSERT_NEAR(got[i], want[i], 2 * eps * mag[i]) << "dim " << dim << " element " << i;
      }
    }
  }
}

TEST(EmbeddingBagColumns, F32EveryBlockMix) { check_dims<float>(DType::f32); }
TEST(EmbeddingBagColumns, F64EveryBlockMix) { check_dims<double>(DType::f64); }

}  // namespace
}  // namespace strata
