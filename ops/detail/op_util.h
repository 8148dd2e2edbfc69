#pragma once
/// @file
/// Shared pieces of op implementations (internal to ops/; not a public header).
///
/// Note [Anatomy of an op]
/// Every op in ops/ follows the same steps (see relu in ops/unary.cpp for the smallest example):
///  1. `check_backend(OpKind::x)`, then validate inputs with the checks below; every message
///     starts with the op's name and names the shapes/dtypes involved (`Tensor::describe()`).
///  2. Allocate outputs with `empty(...)`: the default allocator is the tiered memory, whose
///     allocation is the policy's `alloc_fast` (forced: other objects are evicted to make room).
///  3. Pin operands for the kernel's duration with a PinSet (inputs Read, outputs Write): acquire()
///     reports each to the memory policy (`read_use` / `write_use`) and then pins, so no migration
///     can move the bytes under the kernel (Note [Pinning kernel operands] in core/pin_set.h).
///     Only then call data_ptr().
///  4. Run the kernel (f32 and f64 at least; parallel with `parallel_for` / `for_each_row`).
///  5. If `autograd::needs_grad(...)`, record a node (Note [Recording an op] in autograd/node.h);
///     its backward calls the op's backward kernel, which follows steps 2–4 itself.
/// Ops never modify their inputs (the optimizers' in-place updates are the exception and bump the
/// version).

#include <cstdint>
#include <type_traits>
#include <vector>

#include "autograd/node.h"
#include "core/error.h"
#include "core/factories.h"
#include "core/pin_set.h"
#include "core/scalar.h"
#include "core/tensor.h"
#include "core/threading.h"
#include "ops/backend.h"

namespace strata::ops::detail {

using autograd::TensorList;

/// Throws unless `t` is defined. `what` names the argument ("input", "weight", ...).
inline void check_defined(const char* op, const Tensor& t, const char* what) {
  STRATA_CHECK(t.defined(), op, ": ", what, " is undefined");
}

/// Throws unless `t` is defined and f32 or f64 (the dtypes every op computes in).
inline void check_float(const char* op, const Tensor& t, const char* what) {
  check_defined(op, t, what);
  STRATA_CHECK(t.dtype() == DType::f32 || t.dtype() == DType::f64, op, ": ", what, " must be f32 or f64, got ",
               t.describe());
}

/// Throws unless both have the same dtype; the message names both tensors.
inline void check_same_dtype(const char* op, const Tensor& a, const Tensor& b) {
  STRATA_CHECK(a.dtype() == b.dtype(), op, ": dtype mismatch between ", a.describe(), " and ", b.describe());
}

/// Throws unless `t` has rank `rank`.
inline void check_rank(const char* op, const Tensor& t, int64_t rank, const char* what) {
  STRATA_CHECK(t.dim() == rank, op, ": ", what, " must be ", rank, "-D, got ", t.describe());
}

/// Throws unless `t` is an integer index tensor (i32 or i64).
inline void check_index(const char* op, const Tensor& t, const char* what) {
  check_defined(op, t, what);
  STRATA_CHECK(t.dtype() == DType::i64 || t.dtype() == DType::i32, op, ": ", what, " must be i64 or i32, got ",
               t.describe());
}

/// `t` converted to `dtype` for an op that computes in it (Note [Type promotion] in
/// core/type_promotion.h); `t` itself when it has that dtype. Converting a tensor that requires
/// grad is recorded (ToCopyBackward converts the gradient back to t's dtype). In ops/binary.cpp.
Tensor convert_operand(const Tensor& t, DType dtype);

/// The broadcast shape of a and b; the error names `op` and both tensors. In ops/binary.cpp.
Dims broadcast_pair(const char* op, const Tensor& a, const Tensor& b);

/// A binary op's operands converted to their result type (convert_operand) and their broadcast
/// shape.
struct PromotedPair {
  Tensor a, b;
  Dims shape;
  DType dtype = DType::f32;
};
/// Checks a binary op's operands (backend, defined, broadcastable) and promotes them;
/// `true_division` computes integers and bool in the default float dtype. In ops/binary.cpp.
PromotedPair promote_pair(const char* op, OpKind kind, const Tensor& a, const Tensor& b, bool true_division = false);
/// The same for a tensor and a number: the tensor converted to their result type.
Tensor promote_with_scalar(const char* op, OpKind kind, const Tensor& a, const Scalar& s, bool true_division = false);

/// Sums `g` over the dims that were broadcast to reach g's shape from `shape` (g itself when the
/// shapes already match). In ops/binary.cpp.
Tensor sum_to_shape(const Tensor& g, IntArrayRef shape);

/// Which dims of x a reduction over `dims` reduces (empty `dims` = all; none for a 0-D x); checks
/// them (range, repeats) with errors naming `op`. In ops/reduction.cpp.
std::vector<bool> reduce_mask(const char* op, const Tensor& x, IntArrayRef dims);
/// x's sizes with the dims of `mask` kept as 1 (keepdim) or dropped. In ops/reduction.cpp.
Dims reduced_sizes(const Tensor& x, const std::vector<bool>& mask, bool keepdim);

/// `x` with `dim` moved last and made contiguous: one row of x.size(dim) elements per position of
/// the other dims, the rows in those dims' row-major order (a 0-dim x is one row of one element).
/// Raw core views and a copy: never recorded.
inline Tensor rows_along(const Tensor& x, int64_t dim) {
  if (x.dim() == 0) return x.reshape({1});
  Dims perm;
  for (int64_t d = 0; d < x.dim(); ++d)
    if (d != dim) perm.push_back(d);
  perm.push_back(dim);
  return x.permute(perm).contiguous();
}

/// The inverse of rows_along for a tensor of rows (any row length): a contiguous tensor of rank
/// `rank` whose dim `dim` holds the rows.
inline Tensor from_rows(const Tensor& rows, int64_t dim, int64_t rank) {
  if (rank == 0) return rows.reshape({});
  Dims inverse(static_cast<std::size_t>(rank));
  for (int64_t pos = 0, d = 0; d < rank; ++d)
    if (d != dim) inverse[static_cast<std::size_t>(d)] = pos++;
  inverse[static_cast<std::size_t>(dim)] = rank - 1;
  return rows.permute(inverse).contiguous();
}

/// Calls fn(T{}) for the dtypes the reduction and sort kernels run on: f32, f64, i32, i64 and u8
/// (the callers bring bf16 and f16 to f32 and view bool as u8 first).
template <typename Fn>
void dispatch_kernel_dtype(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::f32: fn(float{}); return;
    case DType::f64: fn(double{}); return;
    case DType::i32: fn(int32_t{}); return;
    case DType::i64: fn(int64_t{}); return;
    case DType::u8: fn(uint8_t{}); return;
    default: STRATA_ASSERT(false, "kernel dispatch: unexpected dtype ", dtype);
  }
}

/// Calls fn(U{}) with an unsigned type of the dtype's size, for kernels that only move elements.
template <typename Fn>
void dispatch_itemsize(std::size_t size, Fn&& fn) {
  switch (size) {
    case 1: fn(uint8_t{}); return;
    case 2: fn(uint16_t{}); return;
    case 4: fn(uint32_t{}); return;
    case 8: fn(uint64_t{}); return;
    default: STRATA_ASSERT(false, "dispatch_itemsize: unexpected item size ", size);
  }
}

/// Calls fn(int64_t{}) or fn(int32_t{}) by the index dtype (checked with check_index before).
template <typename Fn>
void dispatch_index(DType dtype, Fn&& fn) {
  if (dtype == DType::i64)
    fn(int64_t{});
  else
    fn(int32_t{});
}

/// The element offsets of a strided block with `sizes` and `strides`, in row-major order (for
/// kernels that visit the elements of a view, e.g. the advanced-indexing and scatter kernels).
inline std::vector<int64_t> strided_offsets(IntArrayRef sizes, IntArrayRef strides) {
  std::vector<int64_t> out{0};
  for (std::size_t d = 0; d < sizes.size(); ++d) {
    std::vector<int64_t> next;
    next.reserve(out.size() * static_cast<std::size_t>(sizes[d]));
    for (int64_t base : out)
      for (int64_t i = 0; i < sizes[d]; ++i) next.push_back(base + i * strides[d]);
    out = std::move(next);
  }
  return out;
}

/// The same bytes viewed as another dtype of the same size (bool as u8 and back).
inline Tensor reinterpret_dtype(const Tensor& t, DType dtype) {
  return Tensor(t.storage(), t.sizes(), t.strides(), t.offset(), dtype);
}

/// Calls fn(float{}) or fn(double{}) by dtype (checked with check_float before).
template <typename Fn>
decltype(auto) dispatch_float(DType dtype, Fn&& fn) {
  if (dtype == DType::f64) return fn(double{});
  STRATA_ASSERT(dtype == DType::f32, "dispatch_float: unexpected dtype ", dtype);
  return fn(float{});
}

/// Byte strides of `t` (what detail::StridedOperands wants).
inline Dims byte_strides(const Tensor& t) {
  Dims s;
  for (int64_t x : t.strides()) s.push_back(x * static_cast<int64_t>(t.itemsize()));
  return s;
}

/// An uninitialized contiguous output with `t`'s dtype.
inline Tensor empty_output(IntArrayRef sizes, DType dtype) { return empty(sizes, {dtype, nullptr}); }

}  // namespace strata::ops::detail
