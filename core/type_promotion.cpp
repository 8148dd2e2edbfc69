#include "core/type_promotion.h"

namespace strata {

namespace {

/// 0 bool, 1 integer, 2 floating.
int category(DType t) { return t == DType::boolean ? 0 : is_floating(t) ? 2 : 1; }

/// Rank inside a category (bf16 and f16 share a rank: together they give f32).
int width(DType t) {
  switch (t) {
    case DType::boolean: return 0;
    case DType::u8: return 1;
    case DType::i32: return 2;
    case DType::i64: return 3;
    case DType::bf16:
    case DType::f16: return 1;
    case DType::f32: return 2;
    case DType::f64: return 3;
  }
  return 0;
}

/// Combines a stronger group's dtype with a weaker group's (PyTorch's combine_categories).
DType combine(bool has_high, DType high, bool has_low, DType low) {
  if (!has_high) return low;
  if (!has_low) return high;
  if (is_floating(high)) return high;
  if (high == DType::boolean || is_floating(low)) return promote_types(high, low);
  return high;
}

}  // namespace

DType promote_types(DType a, DType b) {
  if (a == b) return a;
  const int ca = category(a), cb = category(b);
  if (ca != cb) return ca > cb ? a : b;
  if (width(a) == width(b)) return DType::f32;  // bf16 with f16
  return width(a) > width(b) ? a : b;
}

bool can_cast(DType from, DType to) {
  if (is_floating(from) && !is_floating(to)) return false;
  if (from != DType::boolean && to == DType::boolean) return false;
  return true;
}

ResultType& ResultType::add(const Tensor& t) {
  STRATA_CHECK(t.defined(), "result_type: an operand is an undefined tensor");
  if (t.dim() == 0) {
    zero_dim_ = has_zero_dim_ ? promote_types(zero_dim_, t.dtype()) : t.dtype();
    has_zero_dim_ = true;
  } else {
    dim_ = has_dim_ ? promote_types(dim_, t.dtype()) : t.dtype();
    has_dim_ = true;
  }
  return *this;
}

ResultType& ResultType::add(const Scalar& s) {
  const DType d = s.is_floating() ? kDefaultFloat : s.dtype();
  number_ = has_number_ ? promote_types(number_, d) : d;
  has_number_ = true;
  return *this;
}

DType ResultType::get() const {
  STRATA_CHECK(has_dim_ || has_zero_dim_ || has_number_, "result_type: no operands");
  const bool has_low = has_zero_dim_ || has_number_;
  const DType low = combine(has_zero_dim_, zero_dim_, has_number_, number_);
  return combine(has_dim_, dim_, has_low, low);
}

DType result_type(const Tensor& a, const Tensor& b) { return ResultType().add(a).add(b).get(); }
DType result_type(const Tensor& a, const Scalar& b) { return ResultType().add(a).add(b).get(); }
DType result_type(const Scalar& a, const Tensor& b) { return ResultType().add(a).add(b).get(); }

}  // namespace strata
