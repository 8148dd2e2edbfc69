#pragma once
/// @file
/// Differentiable views and the base's history after an in-place write (PyTorch's view tracking
/// and CopySlices), the autograd side of ops/inplace.h.
///
/// Note [View tracking]
/// A differentiable view op of ops/shape_ops.h (reshape as a view, flatten, transpose, permute,
/// split, slice, and what is built from them: select, narrow, squeeze, unsqueeze, basic indexing)
/// run while grad mode is on calls mark_view() — as do basic indexing and the Python view methods
/// for the raw views (with the raw strides) they hand out for a tensor that needs no gradient, so
/// that `buf[1:3].copy_(y)` still records —: the output remembers its *base*, the tensor that is
/// not itself a tracked view at the root of the chain (a view of a view has the first one's base),
/// and the storage version at which its history was made. Its geometry needs no copy: a view's
/// sizes, strides and storage offset are its own (PyTorch's as_strided fallback, enough for every
/// view Strata makes). Views whose elements overlap (stride 0 over a dim of size > 1, as expand
/// makes) are not tracked: nothing may be written into them (ops/inplace.h refuses), so their
/// history never needs rebasing.
///
/// After an in-place write through any tensor sharing the storage, the version has moved on, and
/// a view's recorded history (SliceBackward of the base's *old* history, say) is stale. A stale
/// view's history is regenerated on first use — Tensor::requires_grad(), grad_fn(), and every
/// gradient_edge() of a recorded op — from its base's current history: an AsStridedBackward node
/// that writes the view's gradient into zeros laid out as the base (PyTorch does the same: a
/// view's grad_fn after its base was modified in place is AsStridedBackward0).
///
/// Note [CopySlices]
/// An in-place op on a tracked view `v` of base `b` (v.mul_(w), b[1:3] += y, b[0] = e) changes
/// `b`'s value too, so `b`'s history is rebased onto a CopySlices node with two inputs: `b`'s old
/// history and the op's out-of-place result `r` (v's new value, whose node has v's old history —
/// itself a view of b's old history — and the op's other operands as inputs). Its backward takes
/// the base's gradient G, clones it into a buffer laid out as b's storage, reads the view's region
/// of it (v's geometry) as r's gradient, and zeroes that region for b's old history: the elements
/// the op overwrote get their gradient only through the op. The op's own node then applies its
/// backward to the region's gradient and routes it to v's old value (and so into b's old history,
/// region by region) and to the other operands. This is PyTorch's CopySlices with the wrapped
/// op's node kept as a separate node below it (the same sums, one more node); `v` itself gets the
/// regenerated history of Note [View tracking].

#include <memory>

#include "autograd/node.h"

namespace strata::autograd {

/// True when `t` is a tracked differentiable view (Note [View tracking]).
bool is_view(const Tensor& t);

/// The base of a tracked view (undefined for any other tensor).
Tensor view_base(const Tensor& t);

/// Makes `out`, a view of `in` made by a differentiable view op, a tracked view of `in`'s base
/// (or of `in`). A no-op while grad mode is off, when `out` is `in` itself or a copy, and when
/// `out`'s elements overlap.
void mark_view(Tensor& out, const Tensor& in);

/// Regenerates a tracked view's history if an in-place write made it stale (a no-op otherwise).
void refresh_view(const Tensor& view);

/// True when two elements of `t` share a memory location (a stride 0 over a dim of size > 1).
bool has_internal_overlap(const Tensor& t);

/// Note [CopySlices]: rebases `base`'s history onto a CopySlices node over `base`'s old history
/// and `value`, the new value of `view` (a tracked view of `base`, already written), then
/// regenerates `view`'s history from the base's new one.
void rebase_view_history(const Tensor& view, const Tensor& value);

}  // namespace strata::autograd
