#pragma once
/// @file
/// Tensor: a cheap refcounted handle over Storage + sizes + strides (in elements) + offset + dtype.
/// Views share Storage. Row-major; dimension 0 is the outermost.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "core/shape.h"
#include "core/storage.h"

namespace strata {

namespace autograd {
class Node;
}

namespace detail {
struct AutogradMeta;
struct TensorImpl {
  Storage storage;
  Dims sizes;
  Dims strides;
  int64_t offset = 0;  // in elements
  DType dtype = DType::f32;
  int64_t numel = 0;
  bool contiguous = true;
  /// Null until autograd touches the tensor (Note [Autograd metadata]).
  std::shared_ptr<AutogradMeta> autograd;
};
}  // namespace detail

/// A strided view of typed elements in a Storage.
///
/// Copying a Tensor copies the handle, not the data (like `torch::Tensor`). View operations return
/// a new handle that shares the Storage; `contiguous()`, `clone()` and `to()` copy when needed.
/// A default-constructed Tensor is undefined; every accessor except `defined()` then throws.
class Tensor {
 public:
  Tensor() = default;
  /// Builds a tensor over `storage`; checks that the view fits inside it.
  Tensor(Storage storage, IntArrayRef sizes, IntArrayRef strides, int64_t offset, DType dtype);

  // ---- metadata -------------------------------------------------------------------------------
  bool defined() const { return impl_ != nullptr; }
  DType dtype() const { return impl().dtype; }
  int64_t dim() const { return static_cast<int64_t>(impl().sizes.size()); }
  const Dims& sizes() const { return impl().sizes; }
  const Dims& strides() const { return impl().strides; }
  /// Size of one dim; negative dims count from the end.
  int64_t size(int64_t dim) const;
  int64_t stride(int64_t dim) const;
  /// Offset of element [0, ..., 0] from the start of the storage, in elements.
  int64_t offset() const { return impl().offset; }
  int64_t numel() const { return impl().numel; }
  std::size_t itemsize() const { return strata::itemsize(dtype()); }
  /// numel() * itemsize(): the bytes the elements occupy when contiguous.
  std::size_t nbytes() const { return static_cast<std::size_t>(numel()) * itemsize(); }
  bool is_contiguous() const { return impl().contiguous; }
  const Storage& storage() const { return impl().storage; }
  /// True when both tensors view the same Storage.
  bool shares_storage(const Tensor& other) const;
  /// True when both handles refer to one tensor (the same TensorImpl, hence the same autograd
  /// identity), not merely to the same bytes; PyTorch's `is_same`.
  bool is_same(const Tensor& other) const { return impl_ == other.impl_; }
  /// Number of Tensor handles sharing this tensor (a view is a tensor of its own; see
  /// Storage::use_count for the views of one Storage). 0 when undefined.
  long use_count() const { return impl_.use_count(); }

  /// Address of element [0, ..., 0]; see Note [Storage does not know its tier].
  void* data_ptr() const;
  /// Typed address of element [0, ..., 0]; checks that T matches the dtype.
  template <typename T>
  T* data() const {
    STRATA_CHECK(dtype_of<T>() == dtype(), "Tensor::data<", dtype_of<T>(), ">: tensor has dtype ", dtype());
    return static_cast<T*>(data_ptr());
  }
  /// The value of a one-element tensor, converted to T.
  template <typename T>
  T item() const {
    T out{};
    item_into(dtype_of<T>(), &out);
    return out;
  }
  /// Element at `index` (one entry per dim; negative entries count from the end), as double.
  double at(IntArrayRef index) const;

  /// In-place version counter shared by all views of the storage.
  uint64_t version() const { return storage().version(); }
  void bump_version() const { storage().bump_version(); }

  // ---- autograd (Note [Autograd metadata]) ---------------------------------------------------
  /// True for a leaf created with requires_grad, or for the output of a recorded op.
  bool requires_grad() const;
  /// Marks a leaf as needing gradients (only floating dtypes). Throws for a non-leaf.
  Tensor& set_requires_grad(bool requires_grad = true);
  /// Alias of set_requires_grad under PyTorch's name.
  Tensor& requires_grad_(bool requires_grad = true) { return set_requires_grad(requires_grad); }
  /// The accumulated gradient of a leaf (undefined until a backward pass reached it).
  Tensor grad() const;
  /// Replaces (or, with an undefined tensor, clears) the accumulated gradient.
  void set_grad(const Tensor& grad);
  /// Makes this tensor view `data`'s elements (storage, sizes, strides, offset and dtype), keeping
  /// its autograd identity (requires_grad, grad): PyTorch's `t.data = data`, which is how a module
  /// converts its parameters in place (every handle to the tensor sees the new data). `data` must be
  /// defined; a tensor that requires grad only takes floating data. Not recorded by autograd.
  void set_data(const Tensor& data);
  /// The node that produced this tensor (null for leaves and for tensors made without grad).
  const std::shared_ptr<autograd::Node>& grad_fn() const;
  /// Which output of grad_fn() this tensor is.
  uint32_t output_nr() const;
  /// True unless the tensor was produced by a recorded op.
  bool is_leaf() const { return grad_fn() == nullptr; }
  /// A tensor sharing this one's storage and view but detached from the graph.
  Tensor detach() const;
  /// Runs the backward pass from this tensor (through autograd/'s engine: Note [Autograd seam] in
  /// core/detail/autograd_hooks.h; link `strata`).
  /// `grad` may be omitted only for one-element tensors. Frees the graph's saved values unless
  /// `retain_graph`.
  void backward(const Tensor& grad = Tensor(), bool retain_graph = false) const;
  /// A function of the gradient w.r.t. a tensor: returns a replacement, or an undefined tensor to
  /// keep the gradient as it is.
  using GradHook = std::function<Tensor(const Tensor& grad)>;
  /// Registers `hook` to run on the gradient w.r.t. this tensor each time one is computed, before
  /// it reaches `.grad` (a leaf) or flows on (a non-leaf); hooks run in registration order, each on
  /// the previous one's result (Note [Tensor hooks] in autograd/hooks.h). Throws
  /// unless the tensor requires grad. Returns an id for remove_hook().
  uint64_t register_hook(GradHook hook) const;
  /// Removes the hook with id `id`; false when this tensor has no such hook (any more).
  bool remove_hook(uint64_t id) const;
  /// Makes a non-leaf keep the gradient that reaches it in `.grad`, accumulated as a leaf's is
  /// (a no-op for a leaf). Throws unless the tensor requires grad.
  void retain_grad() const;
  /// True after retain_grad() on a non-leaf.
  bool retains_grad() const;
  /// The autograd record, created on first use. For autograd/; not for users.
  detail::AutogradMeta& autograd_meta() const;
  /// The autograd record or null.
  detail::AutogradMeta* autograd_meta_if_any() const { return impl().autograd.get(); }

  // ---- views (share storage) ------------------------------------------------------------------
  /// View with new sizes (one entry may be -1); fails if the strides cannot express it.
  Tensor view(IntArrayRef sizes) const;
  /// Like view(), but copies when no view exists.
  Tensor reshape(IntArrayRef sizes) const;
  /// Elements [start, start + length) along `dim`.
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
  /// Python-style slice along `dim`: start/end may be negative or omitted and are clamped; step > 0.
  Tensor slice(int64_t dim, std::optional<int64_t> start = std::nullopt, std::optional<int64_t> end = std::nullopt,
               int64_t step = 1) const;
  /// Removes `dim`, keeping the entry `index` (negative counts from the end).
  Tensor select(int64_t dim, int64_t index) const;
  Tensor transpose(int64_t dim0, int64_t dim1) const;
  Tensor permute(IntArrayRef dims) const;
  /// Transpose of a tensor of rank <= 2.
  Tensor t() const;
  /// Broadcast view with stride 0 in expanded dims; -1 keeps a size. New leading dims allowed.
  Tensor expand(IntArrayRef sizes) const;
  Tensor expand_as(const Tensor& other) const {
    other.require_defined("expand_as");
    return expand(other.sizes());
  }
  /// expand() under NumPy's name.
  Tensor broadcast_to(IntArrayRef sizes) const { return expand(sizes); }
  /// Removes all size-1 dims.
  Tensor squeeze() const;
  /// Removes `dim` if its size is 1; otherwise returns an identical view (PyTorch semantics).
  Tensor squeeze(int64_t dim) const;
  /// Inserts a size-1 dim at position `dim` in [-(rank+1), rank].
  Tensor unsqueeze(int64_t dim) const;
  /// Merges dims [start_dim, end_dim] into one (a view when possible, otherwise a copy).
  Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;
  /// Raw strided view; checks that every addressed element lies inside the storage.
  Tensor as_strided(IntArrayRef sizes, IntArrayRef strides, std::optional<int64_t> offset = std::nullopt) const;

  // ---- copies ---------------------------------------------------------------------------------
  /// This tensor if already contiguous, otherwise a contiguous copy.
  Tensor contiguous() const;
  /// A contiguous copy with its own storage.
  Tensor clone() const;
  /// Converts to `dtype` (returns *this when the dtype already matches and `copy` is false).
  Tensor to(DType dtype, bool copy = false) const;
  /// Copies `src` into this tensor, broadcasting src to this shape and converting dtypes. Handles
  /// overlapping src/dst (copies through a temporary). Bumps the version.
  Tensor& copy_(const Tensor& src);
  /// Sets every element to `value` (converted to the dtype). Bumps the version.
  Tensor& fill_(double value);
  Tensor& zero_() { return fill_(0.0); }

  // ---- printing -------------------------------------------------------------------------------
  /// PyTorch-like text, e.g. "tensor([[1., 2.],\n        [3., 4.]], dtype=f32)"; long tensors are
  /// summarized with "...".
  std::string to_string() const;
  /// "Tensor[2, 3] f32" — the form used in error messages.
  std::string describe() const;

 private:
  const detail::TensorImpl& impl() const {
    if (impl_ == nullptr) [[unlikely]]
      throw_undefined("Tensor");
    return *impl_;
  }
  /// Throws unless defined, naming `op` in the message.
  void require_defined(const char* op) const {
    if (impl_ == nullptr) [[unlikely]]
      throw_undefined(op);
  }
  [[noreturn]] static void throw_undefined(const char* op);
  /// Checks that a view fits its storage (overflow-safe) and builds it; `op` names the caller.
  static Tensor make_checked(const char* op, Storage storage, IntArrayRef sizes, IntArrayRef strides, int64_t offset,
                             DType dtype);
  /// A view of this tensor's storage that is in bounds by construction (no check).
  Tensor make_view(Dims sizes, Dims strides, int64_t offset) const;
  /// Converts the single element to `dtype` and writes it to `out`.
  void item_into(DType dtype, void* out) const;

  std::shared_ptr<detail::TensorImpl> impl_;
};

std::ostream& operator<<(std::ostream& os, const Tensor& t);

namespace detail {
/// Note [Autograd metadata]
/// A tensor's autograd state lives in its TensorImpl, so every copy of the handle shares it (as in
/// PyTorch) while views made by the Tensor methods above get a fresh TensorImpl *without* it: the
/// core view methods are raw and never recorded. The differentiable views (reshape, transpose,
/// permute, slice, ...) are the free functions of ops/shape_ops.h. core only stores this record;
/// autograd/ gives it meaning.
struct AutogradMeta {
  bool requires_grad = false;
  Tensor grad;
  std::shared_ptr<autograd::Node> grad_fn;
  uint32_t output_nr = 0;
  /// The AccumulateGrad node of a leaf, shared by every graph that uses the leaf.
  std::weak_ptr<autograd::Node> grad_accumulator;
  /// Tensor::register_hook's hooks with their ids, in registration order.
  std::vector<std::pair<uint64_t, Tensor::GradHook>> hooks;
  /// Set by Tensor::retain_grad() on a non-leaf.
  bool retains_grad = false;
  /// A tracked differentiable view's base, undefined for other tensors, and the storage version
  /// its grad_fn was made at (Note [View tracking] in autograd/view.h).
  Tensor view_base;
  uint64_t view_version = 0;
};

/// Regenerates a stale view's history; installed by autograd/ (autograd/view.cpp) when it tracks
/// its first view, called by requires_grad() and grad_fn() (Note [View tracking]).
using ViewRefresh = void (*)(const Tensor& view);
void set_view_refresh(ViewRefresh refresh);
}  // namespace detail

}  // namespace strata
