// What the harness cannot express for ops/indexing.h and ops/scatter.h: views for basic indices,
// in-place writes, the error type, integer and bool tensors, gradients of tensor values,
// refusing writes into tensors that require grad, determinism of accumulation.

#include <gtest/gtest.h>

#include "autograd/engine.h"
#include "autograd/grad_mode.h"
#include "core/factories.h"
#include "ops/indexing.h"
#include "ops/reduction.h"
#include "ops/scatter.h"
#include "tests/cpp/ops/harness/op_harness.h"

namespace strata {
namespace {

using indexing::Slice;
using testing::from_indices;
using testing::from_values;
using testing::indices_of;
using testing::values_of;

Tensor iota(IntArrayRef sizes) {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return arange(static_cast<double>(n)).to(DType::f64).reshape(sizes);
}

Tensor mask(const std::vector<double>& bits) {
  return from_values(bits, {static_cast<int64_t>(bits.size())}).to(DType::boolean);
}

TEST(Indexing, BasicIndexIsARecordedView) {
  Tensor x = iota({3, 4, 5});
  x.set_requires_grad(true);
  const TensorIndex ix[] = {1, indexing::None, Slice{1, std::nullopt, 2}, indexing::Ellipsis, -1};
  Tensor y = index(x, ix);
  EXPECT_TRUE(y.shares_storage(x));
  EXPECT_EQ(y.sizes(), (Dims{1, 2}));
  EXPECT_EQ(values_of(y), (std::vector<double>{29, 39}));
  sum(y).backward();
  const auto g = values_of(x.grad());
  EXPECT_EQ(g[29] + g[39], 2.0);
  EXPECT_EQ(sum(x.grad()).item<double>(), 2.0);
}

TEST(Indexing, BracedListsAsInPyTorchsCppApi) {
  Tensor x = iota({3, 4});
  Tensor y = index(x, {Slice{}, from_indices({3, 0}, {2})});
  EXPECT_EQ(values_of(y), (std::vector<double>{3, 0, 7, 4, 11, 8}));
  Tensor z = index_put(x, {mask({0, 1, 1})}, from_values({-1}, {1}));
  EXPECT_EQ(values_of(z)[4], -1.0);
  index_put_(x, {0, 0}, from_values({9}, {}));
  EXPECT_EQ(values_of(x)[0], 9.0);
}

TEST(Indexing, ZeroDimIntegerTensorSelects) {
  Tensor x = iota({4, 2});
  const TensorIndex ix[] = {from_indices({-1}, {})};
  Tensor y = index(x, ix);
  EXPECT_TRUE(y.shares_storage(x));
  EXPECT_EQ(values_of(y), (std::vector<double>{6, 7}));
}

TEST(Indexing, BoolScalarAndTwoDimMask) {
  Tensor x = iota({2, 3});
  const TensorIndex t[] = {true};
  EXPECT_EQ(index(x, t).sizes(), (Dims{1, 2, 3}));
  const TensorIndex f[] = {false};
  EXPECT_EQ(index(x, f).sizes(), (Dims{0, 2, 3}));
  const TensorIndex m[] = {from_values({1, 0, 0, 0, 1, 1}, {2, 3}).to(DType::boolean)};
  EXPECT_EQ(values_of(index(x, m)), (std::vector<double>{0, 4, 5}));
}

TEST(Indexing, OutOfRangeIsAnIndexError) {
  const TensorIndex ix[] = {from_indices({3}, {1})};
  EXPECT_THROW(index(iota({3}), ix), IndexError);
  const TensorIndex ints[] = {-4};
  EXPECT_THROW(index(iota({3}), ints), IndexError);
}

TEST(Indexing, IntegerAndBoolTensors) {
  Tensor x = from_indices({5, 6, 7, 8}, {4});
  const TensorIndex ix[] = {from_indices({3, 0}, {2})};
  Tensor y = index(x, ix);
  EXPECT_EQ(y.dtype(), DType::i64);
  EXPECT_EQ(indices_of(y), (std::vector<int64_t>{8, 5}));
  Tensor b = mask({1, 0, 1});
  const TensorIndex bi[] = {from_indices({2, 1, 2}, {3})};
  EXPECT_EQ(values_of(index(b, bi)), (std::vector<double>{1, 0, 1}));
}

TEST(Indexing, IndexPutInPlaceAccumulatesDuplicatesInOrder) {
  Tensor x = zeros({3}, {DType::f64, nullptr});
  const uint64_t v0 = x.version();
  const TensorIndex ix[] = {from_indices({1, 1, 2, 1}, {4})};
  index_put_(x, ix, from_values({1, 2, 3, 4}, {4}), /*accumulate=*/true);
  EXPECT_EQ(values_of(x), (std::vector<double>{0, 7, 3}));
  EXPECT_GT(x.version(), v0);
  Tensor b = zeros({3}, {DType::boolean, nullptr});
  index_put_(b, ix, mask({1, 1, 0, 1}), true);
  EXPECT_EQ(values_of(b), (std::vector<double>{0, 1, 0}));
}

TEST(Indexing, SetIndexBasicAndAdvanced) {
  Tensor x = zeros({2, 3}, {DType::i64, nullptr});
  const TensorIndex row[] = {1};
  set_index(x, row, Scalar(7));
  const TensorIndex cells[] = {Slice{}, from_indices({0, 2}, {2})};
  set_index(x, cells, from_indices({1, 2}, {2}));  // broadcast over rows
  EXPECT_EQ(indices_of(x), (std::vector<int64_t>{1, 0, 2, 1, 7, 2}));
  EXPECT_THROW(set_index(x, cells, from_values({1.5, 2.5}, {2})), Error);  // as PyTorch's index_put_
  const TensorIndex cols[] = {Slice{}, Slice{0, 2}};
  set_index(x, cols, from_values({1.5, 2.5}, {2}));  // a basic index converts
  EXPECT_EQ(indices_of(x), (std::vector<int64_t>{1, 2, 2, 1, 2, 2}));
}

TEST(Indexing, SetIndexReadsTheValueBeforeWriting) {
  Tensor x = iota({4});
  const TensorIndex dst[] = {from_indices({1, 2, 3}, {3})};
  const TensorIndex src[] = {Slice{0, 3}};
  set_index(x, dst, index(x, src));
  EXPECT_EQ(values_of(x), (std::vector<double>{0, 0, 1, 2}));
}

TEST(Indexing, WritesIntoLeavesThatRequireGradAreRefused) {
  Tensor x = iota({3});
  x.set_requires_grad(true);
  const TensorIndex ix[] = {from_indices({0}, {1})};
  EXPECT_THROW(index_put_(x, ix, from_values({1}, {1})), Error);
  EXPECT_THROW(masked_fill_(x, mask({1, 0, 0}), 1.0), Error);
  EXPECT_THROW(scatter_(x, 0, from_indices({0}, {1}), 1.0), Error);
  EXPECT_THROW(index_add_(x, 0, from_indices({0}, {1}), from_values({1}, {1})), Error);
  autograd::NoGradGuard no_grad;
  index_put_(x, ix, from_values({5}, {1}));
  EXPECT_EQ(values_of(x)[0], 5.0);
}

TEST(Indexing, MaskedFillTensorValueGradient) {
  Tensor x = iota({2, 3});
  x.set_requires_grad(true);
  Tensor v = from_values({2.0}, {});
  v.set_requires_grad(true);
  Tensor y = masked_fill(x, mask({1, 0, 1}), v);
  EXPECT_EQ(values_of(y), (std::vector<double>{2, 1, 2, 2, 4, 2}));
  sum(y).backward();
  EXPECT_EQ(v.grad().item<double>(), 4.0);
  EXPECT_EQ(values_of(x.grad()), (std::vector<double>{0, 1, 0, 0, 1, 0}));
}

TEST(Indexing, MaskedFillKeepsIntegerDtype) {
  Tensor x = from_indices({1, 2, 3}, {3});
  Tensor y = masked_fill(x, mask({0, 1, 0}), 2.7);
  EXPECT_EQ(y.dtype(), DType::i64);
  EXPECT_EQ(indices_of(y), (std::vector<int64_t>{1, 2, 3}));
}

TEST(Indexing, NonzeroTupleAndZeroDim) {
  auto parts = nonzero_tuple(from_values({0, 3, 0, 1}, {2, 2}));
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(indices_of(parts[0]), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(indices_of(parts[1]), (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(nonzero(from_values({5}, {})).sizes(), (Dims{1, 0}));
  EXPECT_EQ(nonzero_tuple(from_values({0}, {}))[0].numel(), 0);
}

TEST(Indexing, IndexAddInPlaceAndIntegers) {
  Tensor x = zeros({2, 3}, {DType::i64, nullptr});
  index_add_(x, 1, from_indices({2, 2}, {2}), from_indices({1, 2, 3, 4}, {2, 2}), 3);
  EXPECT_EQ(indices_of(x), (std::vector<int64_t>{0, 0, 9, 0, 0, 21}));
}

TEST(Scatter, InPlaceFormsAndIntegerReductions) {
  Tensor x = zeros({2, 2}, {DType::i64, nullptr});
  scatter_add_(x, 0, from_indices({1, 1, 1, 0}, {2, 2}), from_indices({1, 2, 3, 4}, {2, 2}));
  EXPECT_EQ(indices_of(x), (std::vector<int64_t>{0, 4, 4, 2}));
  scatter_(x, 1, from_indices({0}, {1, 1}), 9);
  EXPECT_EQ(indices_of(x), (std::vector<int64_t>{9, 4, 4, 2}));
  // Integer mean rounds toward -inf, as PyTorch's.
  Tensor m = scatter_reduce(from_indices({-7}, {1}), 0, from_indices({0}, {1}), from_indices({2}, {1}), "mean");
  EXPECT_EQ(indices_of(m), (std::vector<int64_t>{-3}));
}

TEST(Scatter, ProdGradientWithZeros) {
  Tensor x = from_values({0.0, 2.0}, {2});
  x.set_requires_grad(true);
  Tensor src = from_values({3.0, 0.0, 5.0}, {3});
  src.set_requires_grad(true);
  Tensor y = scatter_reduce(x, 0, from_indices({0, 1, 1}, {3}), src, "prod");
  EXPECT_EQ(values_of(y), (std::vector<double>{0, 0}));
  sum(y).backward();
  // Position 0: x0 * 3 with x0 = 0, so d/dx0 = 3 and d/dsrc0 = 0. Position 1: 2 * 0 * 5, one zero.
  EXPECT_EQ(values_of(x.grad()), (std::vector<double>{3, 0}));
  EXPECT_EQ(values_of(src.grad()), (std::vector<double>{0, 10, 0}));
}

TEST(Scatter, AmaxSplitsTheGradientBetweenTies) {
  Tensor x = from_values({1.0}, {1});
  x.set_requires_grad(true);
  Tensor src = from_values({1.0, 0.5}, {2});
  src.set_requires_grad(true);
  sum(scatter_reduce(x, 0, from_indices({0, 0}, {2}), src, "amax")).backward();
  EXPECT_EQ(values_of(x.grad()), (std::vector<double>{0.5}));
  EXPECT_EQ(values_of(src.grad()), (std::vector<double>{0.5, 0}));
}

}  // namespace
}  // namespace strata
