// Compiled without trapping math: Note [No trapping math in element-wise kernels] (ops/unary.cpp).

#include "ops/comparison.h"

#include <type_traits>

#include "core/type_promotion.h"
#include "ops/detail/op_util.h"
#include "ops/detail/typed_kernels.h"

namespace strata {

namespace {

using namespace ops::detail;

/// f(a, b) -> bool, both operands converted to their result type (never recorded).
template <typename F>
Tensor compare(const char* op, OpKind kind, const Tensor& a, const Tensor& b, F f) {
  const PromotedPair p = promote_pair(op, kind, a, b);
  return typed_predicate(p.a, p.b, p.shape, f);
}

template <typename F>
Tensor compare(const char* op, OpKind kind, const Tensor& a, const Scalar& s, F f) {
  const Tensor x = promote_with_scalar(op, kind, a, s);
  return typed_predicate(x, scalar_tensor(s, x.dtype()), x.sizes(), f);
}

/// f(bool(a), bool(b)) -> bool for operands of any dtypes.
template <typename F>
Tensor logical(const char* op, OpKind kind, const Tensor& a, const Tensor& b, F f) {
  check_backend(kind);
  check_defined(op, a, "input");
  check_defined(op, b, "other");
  const Dims shape = broadcast_pair(op, a, b);
  return typed_predicate(a.to(DType::boolean), b.to(DType::boolean), shape, f);
}

void check_bitwise(const char* op, DType dt, const Tensor& a) {
  STRATA_CHECK(!is_floating(dt), op, ": only integer and bool tensors are supported, got ", a.describe(),
               " with result type ", dt, " (PyTorch has no bitwise ops on floating tensors)");
}

/// Integer bit operations; on bool they are the logical ones (the values are 0 and 1).
template <typename F>
auto bitwise_fn(F f) {
  return [f](auto x, auto y) {
    using C = decltype(x);
    if constexpr (std::is_integral_v<C>)
      return static_cast<C>(f(x, y));
    else
      return x;  // floating: refused before dispatch
  };
}

template <typename F>
Tensor bitwise(const char* op, OpKind kind, const Tensor& a, const Tensor& b, F f) {
  const PromotedPair p = promote_pair(op, kind, a, b);
  check_bitwise(op, p.dtype, is_floating(a.dtype()) ? a : b);
  return typed_binary(p.a, p.b, p.shape, bitwise_fn(f));
}

template <typename F>
Tensor bitwise(const char* op, OpKind kind, const Tensor& a, const Scalar& s, F f) {
  const Tensor x = promote_with_scalar(op, kind, a, s);
  check_bitwise(op, x.dtype(), a);
  return typed_binary(x, scalar_tensor(s, x.dtype()), x.sizes(), bitwise_fn(f));
}

}  // namespace

// The comparison and binary bitwise ops, each as a tensor-tensor and a tensor-scalar overload.
#define STRATA_COMPARISON_OPS(X) X(eq, ==) X(ne, !=) X(lt, <) X(le, <=) X(gt, >) X(ge, >=)
#define STRATA_BITWISE_OPS(X) X(bitwise_and, &) X(bitwise_or, |) X(bitwise_xor, ^)

#define STRATA_DEFINE_BINARY_PREDICATE(IMPL, NAME, OP)                             \
  Tensor NAME(const Tensor& a, const Tensor& b) {                                  \
    return IMPL(#NAME, OpKind::NAME, a, b, [](auto x, auto y) { return x OP y; }); \
  }                                                                                \
  Tensor NAME(const Tensor& a, Scalar b) {                                         \
    return IMPL(#NAME, OpKind::NAME, a, b, [](auto x, auto y) { return x OP y; }); \
  }
#define STRATA_DEFINE_COMPARISON(NAME, OP) STRATA_DEFINE_BINARY_PREDICATE(compare, NAME, OP)
#define STRATA_DEFINE_BITWISE(NAME, OP) STRATA_DEFINE_BINARY_PREDICATE(bitwise, NAME, OP)
STRATA_COMPARISON_OPS(STRATA_DEFINE_COMPARISON)
STRATA_BITWISE_OPS(STRATA_DEFINE_BITWISE)
#undef STRATA_DEFINE_BITWISE
#undef STRATA_DEFINE_COMPARISON
#undef STRATA_DEFINE_BINARY_PREDICATE

Tensor logical_and(const Tensor& a, const Tensor& b) {
  return logical("logical_and", OpKind::logical_and, a, b, [](auto x, auto y) { return x && y; });
}
Tensor logical_or(const Tensor& a, const Tensor& b) {
  return logical("logical_or", OpKind::logical_or, a, b, [](auto x, auto y) { return x || y; });
}
Tensor logical_xor(const Tensor& a, const Tensor& b) {
  return logical("logical_xor", OpKind::logical_xor, a, b, [](auto x, auto y) { return x != y; });
}
Tensor logical_not(const Tensor& a) {
  check_backend(OpKind::logical_not);
  check_defined("logical_not", a, "input");
  const Tensor x = a.to(DType::boolean);
  return typed_predicate(x, x, x.sizes(), [](auto v, auto) { return !v; });
}

Tensor bitwise_not(const Tensor& a) {
  check_backend(OpKind::bitwise_not);
  check_defined("bitwise_not", a, "input");
  check_bitwise("bitwise_not", a.dtype(), a);
  if (a.dtype() == DType::boolean) return logical_not(a);
  return typed_unary(a, [](auto v) {
    using C = decltype(v);
    if constexpr (std::is_integral_v<C>)
      return static_cast<C>(~v);
    else
      return v;
  });
}

}  // namespace strata
