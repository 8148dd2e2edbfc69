#pragma once
/// @file
/// PyTorch's indexing as ops: `x[...]` reads (`index`) and writes (`index_put_`, `set_index`) with
/// basic and advanced indices, and the indexed ops built on the same machinery (masked_fill,
/// masked_select, index_add, take_along_dim, nonzero, one_hot). The scatter family is in
/// ops/scatter.h.
///
/// Note [Advanced indexing]
/// An index is a list of TensorIndex entries, as PyTorch's C++ `Tensor::index`. Integers, slices,
/// None and Ellipsis are basic: they give a view (select, slice, unsqueeze), and an index made of
/// them only returns a view recorded with the view ops of ops/shape_ops.h. Index tensors (i64/i32,
/// or bool/u8 masks, which stand for the index tensors of their nonzero() positions over as many
/// dims as the mask has) and bool scalars (a new dim of size 1 indexed by [0] for true, by [] for
/// false) are advanced; an index with one of them returns a copy. The rules, as PyTorch's (and
/// NumPy's, except that integers stay basic): the basic entries are applied first; the advanced
/// index tensors broadcast together to a shape B; each position of B picks one element from the
/// dims they index. When the advanced entries are adjacent in the index, B replaces those dims in
/// place (`x[:, [0, 2]]` of [4, 5] is [4, 2]); when a basic entry separates them, B comes first
/// (`x[[0], :, [1]]` of [2, 3, 4] is [1, 3]). Negative index values count from the end; values
/// out of range, index tensors of another dtype, masks whose shape differs from the dims they
/// cover and index tensors that do not broadcast are IndexErrors (strata::IndexError).
/// Reads are differentiable: the backward of `index` is index_put with accumulate into zeros.

#include <concepts>
#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/scalar.h"
#include "core/tensor.h"

namespace strata {

/// An index out of range or an index that cannot index the tensor (PyTorch's IndexError; the
/// Python bindings raise it as strata.StrataIndexError, an IndexError).
class IndexError : public Error {
 public:
  explicit IndexError(const std::string& what) : Error(what) {}
};

namespace indexing {

/// Python's start:stop:step (each bound optional; step > 0, as in PyTorch).
struct Slice {
  std::optional<int64_t> start, stop;
  int64_t step = 1;
};
/// A new dim of size 1 (Python's None / numpy.newaxis).
struct NoneIndex {};
inline constexpr NoneIndex None{};
/// As many full slices as the dims the rest of the index leaves (Python's `...`).
struct EllipsisIndex {};
inline constexpr EllipsisIndex Ellipsis{};

}  // namespace indexing

/// One entry of an index (Note [Advanced indexing]).
class TensorIndex {
 public:
  enum class Kind { integer, slice, none, ellipsis, boolean, tensor };

  template <std::integral T>
    requires(!std::same_as<T, bool>)
  TensorIndex(T i) : kind_(Kind::integer), integer_(static_cast<int64_t>(i)) {}  // NOLINT: implicit, as PyTorch
  TensorIndex(bool b) : kind_(Kind::boolean), integer_(b ? 1 : 0) {}             // NOLINT
  TensorIndex(indexing::Slice s) : kind_(Kind::slice), slice_(s) {}              // NOLINT
  TensorIndex(indexing::NoneIndex) : kind_(Kind::none) {}                        // NOLINT
  TensorIndex(indexing::EllipsisIndex) : kind_(Kind::ellipsis) {}                // NOLINT
  TensorIndex(Tensor t) : kind_(Kind::tensor), tensor_(std::move(t)) {}          // NOLINT

  Kind kind() const { return kind_; }
  int64_t integer() const { return integer_; }
  bool boolean() const { return integer_ != 0; }
  const indexing::Slice& slice() const { return slice_; }
  const Tensor& tensor() const { return tensor_; }
  /// An index tensor, bool scalar or mask: the entry makes the index advanced.
  bool is_advanced() const { return kind_ == Kind::tensor || kind_ == Kind::boolean; }

 private:
  Kind kind_;
  int64_t integer_ = 0;
  indexing::Slice slice_;
  Tensor tensor_;
};

using TensorIndices = std::span<const TensorIndex>;

/// x[indices] (Note [Advanced indexing]): a view for a basic index, a fresh contiguous tensor for
/// an advanced one. Every dtype. Backward: index_put(zeros, indices, grad, accumulate=true).
Tensor index(const Tensor& x, TensorIndices indices);

/// x[indices] = values in place, every element of `values` (broadcast to the shape of
/// index(x, indices)) written to the element it indexes; with `accumulate`, added to it instead
/// (duplicate indices then sum up; without, which duplicate wins is unspecified, as in PyTorch).
/// values has x's dtype. Recorded as an in-place op (Note [In-place ops] in ops/inplace.h). Returns x.
Tensor& index_put_(Tensor& x, TensorIndices indices, const Tensor& values, bool accumulate = false);

/// Out-of-place index_put_: a copy of x with the writes applied. Backward: to x, the gradient with
/// the written elements zeroed (unchanged with accumulate); to values, the gradient at the written
/// positions summed back to values' shape.
Tensor index_put(const Tensor& x, TensorIndices indices, const Tensor& values, bool accumulate = false);

/// Python's `x[indices] = value` (__setitem__), value broadcast: a basic index copies into the view
/// (converting the value to x's dtype), an advanced one is index_put_ (the value must have x's
/// dtype, as in PyTorch). Recorded as PyTorch records `x[s].copy_(value)`: a basic index rebases x's
/// history onto CopySlices (Note [CopySlices] in autograd/view.h).
void set_index(Tensor& x, TensorIndices indices, const Tensor& value);
/// The same with a number.
void set_index(Tensor& x, TensorIndices indices, Scalar value);

/// The same with a braced list, as PyTorch's C++ `x.index({Slice(), idx})`:
/// `index(x, {Slice{}, idx})`, `index_put_(x, {mask}, values)`.
inline Tensor index(const Tensor& x, std::initializer_list<TensorIndex> indices) {
  return index(x, TensorIndices(indices.begin(), indices.size()));
}
inline Tensor& index_put_(Tensor& x, std::initializer_list<TensorIndex> indices, const Tensor& values,
                          bool accumulate = false) {
  return index_put_(x, TensorIndices(indices.begin(), indices.size()), values, accumulate);
}
inline Tensor index_put(const Tensor& x, std::initializer_list<TensorIndex> indices, const Tensor& values,
                        bool accumulate = false) {
  return index_put(x, TensorIndices(indices.begin(), indices.size()), values, accumulate);
}
inline void set_index(Tensor& x, std::initializer_list<TensorIndex> indices, const Tensor& value) {
  set_index(x, TensorIndices(indices.begin(), indices.size()), value);
}
inline void set_index(Tensor& x, std::initializer_list<TensorIndex> indices, Scalar value) {
  set_index(x, TensorIndices(indices.begin(), indices.size()), value);
}

/// x with the elements where `mask` (bool or u8, broadcastable to x's shape) is true replaced by
/// `value` (a number, or a 0-dim tensor; converted to x's dtype). Backward: the gradient with the
/// masked elements zeroed to x; to a tensor value, the sum of the gradient over the masked elements.
Tensor masked_fill(const Tensor& x, const Tensor& mask, Scalar value);
Tensor masked_fill(const Tensor& x, const Tensor& mask, const Tensor& value);
/// masked_fill in place (Note [In-place ops] in ops/inplace.h). Returns x.
Tensor& masked_fill_(Tensor& x, const Tensor& mask, Scalar value);
Tensor& masked_fill_(Tensor& x, const Tensor& mask, const Tensor& value);

/// The elements of x where `mask` is true, as a 1-D tensor in row-major order; x and mask broadcast
/// together. Backward: the gradient scattered back (summed over broadcast dims).
Tensor masked_select(const Tensor& x, const Tensor& mask);

/// The positions of x's non-zero elements, an i64 tensor [n, x.dim()] in row-major order. Not
/// differentiable.
Tensor nonzero(const Tensor& x);
/// The same as x.dim() 1-D i64 tensors, one per dim (a 0-dim x gives one tensor, as PyTorch).
std::vector<Tensor> nonzero_tuple(const Tensor& x);

/// x with alpha * source added along `dim` at `index` (1-D or 0-D i64/i32, values in
/// [-size, size)): out[..., index[j], ...] += alpha * source[..., j, ...], duplicates summing up.
/// source has x's shape except size(dim) = index.numel() (x's dtype). Backward: the gradient to x,
/// alpha * index_select(gradient) to source.
Tensor index_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& source, Scalar alpha = 1);
/// index_add in place (Note [In-place ops] in ops/inplace.h). Returns x.
Tensor& index_add_(Tensor& x, int64_t dim, const Tensor& index, const Tensor& source, Scalar alpha = 1);

/// gather along `dim` after broadcasting x and indices against each other in every other dim
/// (torch.take_along_dim); without `dim`, both are flattened. Backward: scatter-add.
Tensor take_along_dim(const Tensor& x, const Tensor& indices, std::optional<int64_t> dim = std::nullopt);

/// An i64 tensor of x's shape + [num_classes] with 1 at each class of x (i64, values in
/// [0, num_classes)); num_classes = -1 takes max(x) + 1. Not differentiable.
Tensor one_hot(const Tensor& x, int64_t num_classes = -1);

}  // namespace strata
