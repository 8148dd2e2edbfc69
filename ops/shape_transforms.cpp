#include "ops/shape_transforms.h"

#include <algorithm>
#include <vector>

#include "autograd/engine.h"
#include "core/factories.h"
#include "ops/binary.h"
#include "ops/comparison.h"
#include "ops/detail/op_util.h"
#include "ops/reduction.h"
#include "ops/shape_ops.h"

namespace strata {

namespace {

using namespace ops::detail;

/// `dim` wrapped into [0, rank) (a 0-D tensor takes 0 and -1, as one dim); errors name `op`.
int64_t wrap_dim(const char* op, int64_t dim, int64_t rank, const Tensor& x) {
  const int64_t r = std::max<int64_t>(rank, 1);
  STRATA_CHECK(dim >= -r && dim < r, op, ": dim ", dim, " is out of range for ", x.describe(), " (expected a dim in [",
               -r, ", ", r - 1, "])");
  return dim < 0 ? dim + r : dim;
}

/// An i64 index tensor of `values`.
Tensor index_tensor(const std::vector<int64_t>& values) { return tensor(values); }

/// A recorded copy of x (flip and roll return a new tensor even when nothing moves, as PyTorch).
Tensor recorded_copy(const Tensor& x) {
  return reshape(
      index_select(reshape(x, {x.numel()}), 0, arange(0.0, static_cast<double>(x.numel()), 1.0, {DType::i64, nullptr})),
      x.sizes());
}

/// Keeps x where `keep(row, col)` over its last two dims, zero elsewhere (tril and triu).
template <typename Keep>
Tensor triangle(const char* op, OpKind kind, const Tensor& x, Keep keep) {
  check_backend(kind);
  check_defined(op, x, "input");
  STRATA_CHECK(x.dim() >= 2, op, ": input must have at least 2 dims, got ", x.describe());
  const int64_t rows = x.size(-2), cols = x.size(-1);
  std::vector<bool> mask(static_cast<std::size_t>(rows * cols));
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) mask[static_cast<std::size_t>(i * cols + j)] = keep(i, j);
  return where(tensor(mask, IntArrayRef{rows, cols}), x, zeros({}, {x.dtype(), nullptr}));
}

}  // namespace

Tensor stack(const std::vector<Tensor>& tensors, int64_t dim) {
  check_backend(OpKind::stack);
  STRATA_CHECK(!tensors.empty(), "stack: expected a non-empty list of tensors");
  for (std::size_t k = 0; k < tensors.size(); ++k) {
    STRATA_CHECK(tensors[k].defined(), "stack: tensor ", k, " is undefined");
    STRATA_CHECK(tensors[k].sizes() == tensors[0].sizes(), "stack: expects each tensor to be equal size, but got ",
                 tensors[0].describe(), " at entry 0 and ", tensors[k].describe(), " at entry ", k);
    check_same_dtype("stack", tensors[0], tensors[k]);
  }
  const int64_t rank = tensors[0].dim() + 1;
  STRATA_CHECK(dim >= -rank && dim < rank, "stack: dim ", dim, " is out of range for tensors of ",
               tensors[0].describe(), " (expected a dim in [", -rank, ", ", rank - 1, "])");
  const int64_t d = dim < 0 ? dim + rank : dim;
  std::vector<Tensor> parts;
  for (const Tensor& t : tensors) {
    Dims sizes = t.sizes();
    sizes.insert(static_cast<std::size_t>(d), 1);
    parts.push_back(reshape(t, sizes));
  }
  return cat(parts, d);
}

std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim) {
  check_backend(OpKind::chunk);
  check_defined("chunk", x, "input");
  STRATA_CHECK(chunks > 0, "chunk: chunks must be greater than 0, got ", chunks, " (input ", x.describe(), ")");
  STRATA_CHECK(x.dim() > 0, "chunk: input must have at least one dim, got ", x.describe());
  const int64_t d = wrap_dim("chunk", dim, x.dim(), x);
  const int64_t size = x.size(d);
  return split(x, std::max<int64_t>((size + chunks - 1) / chunks, 1), d);
}

Tensor flip(const Tensor& x, IntArrayRef dims) {
  check_backend(OpKind::flip);
  check_defined("flip", x, "input");
  std::vector<bool> seen(static_cast<std::size_t>(std::max<int64_t>(x.dim(), 1)));
  Tensor y = x;
  bool moved = false;
  for (int64_t dim : dims) {
    const int64_t d = wrap_dim("flip", dim, x.dim(), x);
    STRATA_CHECK(!seen[static_cast<std::size_t>(d)], "flip: dim ", d, " appears multiple times in the list of dims");
    seen[static_cast<std::size_t>(d)] = true;
    if (x.dim() == 0 || x.size(d) <= 1) continue;
    y = index_select(y, d, arange(static_cast<double>(x.size(d) - 1), -1.0, -1.0, {DType::i64, nullptr}));
    moved = true;
  }
  return moved ? y : recorded_copy(x);
}

Tensor roll(const Tensor& x, IntArrayRef shifts, IntArrayRef dims) {
  check_backend(OpKind::roll);
  check_defined("roll", x, "input");
  if (dims.empty()) {
    STRATA_CHECK(shifts.size() == 1, "roll: without dims, expected one shift, got ", shifts.size());
    return reshape(roll(reshape(x, {x.numel()}), shifts, {0}), x.sizes());
  }
  STRATA_CHECK(shifts.size() == dims.size(), "roll: shifts and dims must have the same length, got ", shifts.size(),
               " shifts and ", dims.size(), " dims");
  Tensor y = x;
  bool moved = false;
  for (std::size_t k = 0; k < dims.size(); ++k) {
    const int64_t d = wrap_dim("roll", dims[k], x.dim(), x);
    const int64_t n = x.dim() == 0 ? 1 : x.size(d);
    if (n == 0 || x.dim() == 0) continue;
    const int64_t s = ((shifts[k] % n) + n) % n;
    if (s == 0) continue;
    y = cat({slice(y, d, n - s, std::nullopt), slice(y, d, std::nullopt, n - s)}, d);
    moved = true;
  }
  return moved ? y : recorded_copy(x);
}

Tensor repeat(const Tensor& x, IntArrayRef repeats) {
  check_backend(OpKind::repeat);
  check_defined("repeat", x, "input");
  const int64_t rank = static_cast<int64_t>(repeats.size());
  STRATA_CHECK(rank >= x.dim(), "repeat: number of repeat dims (", rank,
               ") can not be smaller than number of dimensions of tensor ", x.describe());
  Dims interleaved, tiled, out;  // [1, s0, 1, s1, ...] -> [r0, s0, r1, s1, ...] -> [r0 s0, r1 s1, ...]
  std::vector<int64_t> tile_dims;
  for (int64_t k = 0; k < rank; ++k) {
    const int64_t r = repeats[static_cast<std::size_t>(k)];
    STRATA_CHECK(r >= 0, "repeat: repeats must be non-negative, got ", r, " for dim ", k);
    const int64_t s = k < rank - x.dim() ? 1 : x.size(k - (rank - x.dim()));
    interleaved.push_back(1);
    interleaved.push_back(s);
    tiled.push_back(r);
    tiled.push_back(s);
    tile_dims.push_back(2 * k);
    out.push_back(r * s);
  }
  Tensor y = x.reshape(interleaved).expand(tiled).contiguous().reshape(out);
  if (autograd::needs_grad({&x})) {
    const Dims xs = x.sizes();
    auto node = autograd::make_node("RepeatBackward", {&x},
                                    [tiled, tile_dims, xs](autograd::Node&, const TensorList& g) -> TensorList {
                                      return {sum(g[0].reshape(tiled), tile_dims).reshape(xs)};
                                    });
    autograd::set_history({&y}, node);
  }
  return y;
}

Tensor repeat_interleave(const Tensor& x, int64_t repeats, std::optional<int64_t> dim) {
  check_backend(OpKind::repeat_interleave);
  check_defined("repeat_interleave", x, "input");
  STRATA_CHECK(repeats >= 0, "repeat_interleave: repeats must be non-negative, got ", repeats);
  if (!dim) return repeat_interleave(reshape(x, {x.numel()}), repeats, 0);
  const int64_t d = wrap_dim("repeat_interleave", *dim, x.dim(), x);
  const Tensor xv = x.dim() == 0 ? reshape(x, {1}) : x;
  std::vector<int64_t> index;
  for (int64_t i = 0; i < xv.size(d); ++i) index.insert(index.end(), static_cast<std::size_t>(repeats), i);
  return index_select(xv, d, index_tensor(index));
}

Tensor repeat_interleave(const Tensor& x, const Tensor& repeats, std::optional<int64_t> dim) {
  check_backend(OpKind::repeat_interleave);
  check_defined("repeat_interleave", x, "input");
  check_defined("repeat_interleave", repeats, "repeats");
  STRATA_CHECK(is_integral(repeats.dtype()) && repeats.dim() <= 1,
               "repeat_interleave: repeats must be a 0-D or 1-D "
               "integer tensor, got ",
               repeats.describe());
  if (!dim) return repeat_interleave(reshape(x, {x.numel()}), repeats, 0);
  const int64_t d = wrap_dim("repeat_interleave", *dim, x.dim(), x);
  const Tensor xv = x.dim() == 0 ? reshape(x, {1}) : x;
  const Tensor counts = repeats.to(DType::i64).contiguous();
  const int64_t n = xv.size(d);
  STRATA_CHECK(counts.numel() == 1 || counts.numel() == n,
               "repeat_interleave: repeats must have the same size as "
               "input along dim ",
               d, " (", n, ") or one element, got ", repeats.describe());
  PinSet pins;
  pins.add(counts, AccessMode::Read).acquire();
  std::vector<int64_t> index;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t r = counts.data<int64_t>()[counts.numel() == 1 ? 0 : i];
    STRATA_CHECK(r >= 0, "repeat_interleave: repeats can not be negative, got ", r, " at position ", i);
    index.insert(index.end(), static_cast<std::size_t>(r), i);
  }
  return index_select(xv, d, index_tensor(index));
}

Tensor tril(const Tensor& x, int64_t diagonal) {
  return triangle("tril", OpKind::tril, x, [diagonal](int64_t i, int64_t j) { return j - i <= diagonal; });
}

Tensor triu(const Tensor& x, int64_t diagonal) {
  return triangle("triu", OpKind::triu, x, [diagonal](int64_t i, int64_t j) { return j - i >= diagonal; });
}

}  // namespace strata
