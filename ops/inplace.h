#pragma once
/// @file
/// In-place ops under autograd (PyTorch's `x.add_(y)`, `x[s] = e`, `v.mul_(w)` on a view, ...).
///
/// Note [In-place ops]
/// Every in-place op is one out-of-place op (recorded as usual) whose result is written into
/// `self`, through apply_in_place():
///  1. Refusals, as PyTorch's: while grad mode is on, a leaf that requires grad ("a leaf Variable
///     that requires grad is being used in an in-place operation.") and a tracked view of one ("a
///     view of a leaf Variable ..."); always, a tensor whose elements overlap (an expanded view).
///  2. The op is recorded when grad mode is on and `self`, or another operand, requires grad. If
///     the op's node saves its self operand (mul, div, clamp, ...), self is first copied (a recorded
///     clone), so the saved value is not the storage about to be overwritten.
///  3. The result — checked to have self's shape, converted to self's dtype by PyTorch's can_cast
///     rule (f32 += f64 is fine, i64 += 1.5 is not) — is copied into self. The copy bumps the
///     version counter every view of the storage shares, so a value some node saved and the op
///     overwrote is detected at backward (autograd/saved_tensor.h: "one of the variables needed
///     for gradient computation has been modified by an inplace operation").
///  4. When recorded, self's history is rebased onto the op's node; when self is a tracked view,
///     its base's history is rebased onto a CopySlices node and self's own history regenerated
///     from the base (Note [CopySlices] and Note [View tracking] in autograd/view.h). Other views
///     of the storage see the version move and regenerate theirs on first use.
/// Nothing is recorded while grad mode is off: an optimizer's update of a parameter is a plain
/// write (with the version bump).

#include <functional>
#include <optional>

#include "core/scalar.h"
#include "core/tensor.h"

namespace strata {

/// One in-place op for apply_in_place (Note [In-place ops]).
struct InPlaceOp {
  /// The op's name in errors ("add_", "__setitem__").
  const char* name = "";
  /// The out-of-place op on self's value (recorded as usual); its result must have self's shape.
  std::function<Tensor(const Tensor& self)> compute;
  /// compute's node saves its self operand, which must then not be self's storage.
  bool saves_self = false;
  /// An operand other than self requires grad.
  bool other_requires_grad = false;
  /// Optional: the same write done directly into self, used when nothing is recorded.
  std::function<void(Tensor& self)> direct;
};

/// Writes op.compute(self) into self with the refusals, version bump and history rebasing of
/// Note [In-place ops]. Returns self.
Tensor& apply_in_place(Tensor& self, const InPlaceOp& op);

/// Throws PyTorch's errors for an in-place write into `self` (step 1 of Note [In-place ops]);
/// `op` names the op.
void check_in_place(const Tensor& self, const char* op);

/// self += alpha * other (other broadcast to self's shape). Backward as add's.
Tensor& add_(Tensor& self, const Tensor& other, Scalar alpha = 1);
Tensor& add_(Tensor& self, Scalar other, Scalar alpha = 1);
/// self -= alpha * other.
Tensor& sub_(Tensor& self, const Tensor& other, Scalar alpha = 1);
Tensor& sub_(Tensor& self, Scalar other, Scalar alpha = 1);
/// self *= other.
Tensor& mul_(Tensor& self, const Tensor& other);
Tensor& mul_(Tensor& self, Scalar other);
/// self /= other (true division; an integer self cannot hold the result).
Tensor& div_(Tensor& self, const Tensor& other);
Tensor& div_(Tensor& self, Scalar other);
/// self clamped to [min, max] (either bound may be omitted, not both).
Tensor& clamp_(Tensor& self, std::optional<double> min, std::optional<double> max);
/// Copies src (broadcast to self's shape, converted to self's dtype) into self. Backward: the
/// gradient to src (summed over the broadcast dims, converted to src's dtype), none to self's old
/// value (PyTorch's CopyBackwards).
Tensor& copy_(Tensor& self, const Tensor& src);
/// Sets every element to `value`. Backward: zeros to self's old value (FillBackward).
Tensor& fill_(Tensor& self, Scalar value);
/// fill_(self, 0).
Tensor& zero_(Tensor& self);

}  // namespace strata
