// What the harness cannot express for ops/pooling.h: max pooling's kernels for windows inside the
// plane (the vectorized f32 2x2 stride-2 rows and the select-based rows) against a direct scalar
// reference, on rows long enough for the vector blocks and their tails, with ties and NaNs, in f32
// (the harness differentiates in f64 only, and the vector path is f32).

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "autograd/engine.h"
#include "ops/pooling.h"
#include "tests/cpp/ops/harness/op_harness.h"

namespace strata {
namespace {

using testing::from_values;
using testing::values_of;

/// Max pooling without padding or dilation, PyTorch's tie rule (first maximum in window order) and
/// NaN rule (the last NaN in window order wins, Note [Max pooling and NaN]): values and flat
/// in-plane argmax.
void reference_max_pool(const std::vector<double>& x, int64_t planes, int64_t H, int64_t W, int64_t k, int64_t s,
                        std::vector<double>& y, std::vector<int64_t>& arg) {
  const int64_t OH = (H - k) / s + 1, OW = (W - k) / s + 1;
  y.assign(planes * OH * OW, 0.0);
  arg.assign(planes * OH * OW, -1);
  for (int64_t p = 0; p < planes; ++p)
    for (int64_t oh = 0; oh < OH; ++oh)
      for (int64_t ow = 0; ow < OW; ++ow) {
        double best = 0;
        int64_t a = -1;
        for (int64_t i = 0; i < k; ++i)
          for (int64_t j = 0; j < k; ++j) {
            const int64_t at = (oh * s + i) * W + ow * s + j;
            const double v = x[p * H * W + at];
            if (a < 0 || std::isnan(v) || v > best) {
              best = v;
              a = at;
            }
          }
        y[(p * OH + oh) * OW + ow] = best;
        arg[(p * OH + oh) * OW + ow] = a;
      }
}

/// Values with many ties (a few distinct levels) and a sprinkling of NaNs, exactly representable in f32.
std::vector<double> tricky_values(int64_t n, bool nans) {
  std::vector<double> v(n);
  for (int64_t i = 0; i < n; ++i) {
    v[i] = static_cast<double>((i * 7919) % 5) - 2.0;  // levels -2..2: ties in most windows
    if (nans && (i * 104729) % 7 == 0) v[i] = std::numeric_limits<double>::quiet_NaN();  // windows with two NaNs too
  }
  return v;
}

void expect_matches_reference(int64_t planes, int64_t H, int64_t W, int64_t k, int64_t s, bool nans, DType dtype) {
  SCOPED_TRACE(::testing::Message() << "planes " << planes << " H " << H << " W " << W << " k " << k << " s " << s
                                    << " nans " << nans << " " << dtype);
  const std::vector<double> xv = tricky_values(planes * H * W, nans);
  std::vector<double> ry;
  std::vector<int64_t> rarg;
  reference_max_pool(xv, planes, H, W, k, s, ry, rarg);
  Tensor x = from_values(xv, {1, planes, H, W}).to(dtype);
  x.set_requires_grad(true);
  Tensor y = max_pool2d(x, {k, k}, {s, s});
  const auto yv = values_of(y);
  ASSERT_EQ(yv.size(), ry.size());
  for (std::size_t i = 0; i < ry.size(); ++i) {
    if (std::isnan(ry[i]))
      EXPECT_TRUE(std::isnan(yv[i])) << "output " << i;
    else
      EXPECT_EQ(yv[i], ry[i]) << "output " << i;
  }
  // The backward routes output o's gradient (o + 1) to the saved argmax: checks every index.
  std::vector<double> go(ry.size());
  for (std::size_t i = 0; i < go.size(); ++i) go[i] = static_cast<double>(i + 1);
  y.backward(from_values(go, y.sizes()).to(dtype));
  std::vector<double> expect(xv.size(), 0.0);
  const int64_t ohw = static_cast<int64_t>(ry.size()) / planes;
  for (std::size_t i = 0; i < ry.size(); ++i) expect[(static_cast<int64_t>(i) / ohw) * H * W + rarg[i]] += go[i];
  const auto gx = values_of(x.grad());
  ASSERT_EQ(gx.size(), expect.size());
  for (std::size_t i = 0; i < expect.size(); ++i) EXPECT_EQ(gx[i], expect[i]) << "input " << i;
}

TEST(MaxPool, InsideWindowKernelsMatchTheReference) {
  for (DType dtype : {DType::f32, DType::f64}) {
    for (bool nans : {false, true}) {
      // 2x2 stride 2: rows of 8 (one vector block), 10 and 21 (blocks and tails), 3 (tail only).
      expect_matches_reference(3, 4, 16, 2, 2, nans, dtype);
      expect_matches_reference(2, 5, 21, 2, 2, nans, dtype);
      expect_matches_reference(2, 6, 41, 2, 2, nans, dtype);
      expect_matches_reference(2, 4, 7, 2, 2, nans, dtype);
      // Other inside-window shapes: 2x2 stride 1, 3x3 strides 2 and 1, 4x4 stride 3 (generic).
      expect_matches_reference(2, 5, 19, 2, 1, nans, dtype);
      expect_matches_reference(2, 7, 23, 3, 2, nans, dtype);
      expect_matches_reference(2, 6, 12, 3, 1, nans, dtype);
      expect_matches_reference(2, 10, 17, 4, 3, nans, dtype);
    }
  }
}

}  // namespace
}  // namespace strata
