#include "core/tensor.h"

#include "core/pin_set.h"

#include <algorithm>
#include <atomic>
#include <numeric>
#include <sstream>

namespace strata {

Tensor::Tensor(Storage storage, IntArrayRef sizes, IntArrayRef strides, int64_t offset, DType dtype)
    : Tensor(make_checked("Tensor", std::move(storage), sizes, strides, offset, dtype)) {}

void Tensor::throw_undefined(const char* op) {
  STRATA_FAIL(op, ": the tensor is undefined (default-constructed or moved-from)");
}

Tensor Tensor::make_checked(const char* op, Storage storage, IntArrayRef sizes, IntArrayRef strides, int64_t offset,
                            DType dtype) {
  STRATA_CHECK(storage.defined(), op, ": storage is undefined");
  STRATA_CHECK(sizes.size() == strides.size(), op, ": sizes ", sizes, " and strides ", strides,
               " have different lengths");
  STRATA_CHECK(offset >= 0, op, ": negative storage offset ", offset);
  const int64_t numel = checked_numel(sizes, op);
  for (std::size_t i = 0; i < strides.size(); ++i)
    STRATA_CHECK(strides[i] >= 0, op, ": negative stride ", strides[i], " at dim ", i, " (strides ", strides,
                 ") is not supported");
  if (numel > 0) {
    // Byte offset one past the last addressed element, computed without overflow.
    int64_t last = offset;
    bool overflow = false;
    for (std::size_t i = 0; i < sizes.size() && !overflow; ++i) {
      int64_t step;
      overflow = __builtin_mul_overflow(sizes[i] - 1, strides[i], &step) || __builtin_add_overflow(last, step, &last);
    }
    int64_t need = 0;
    overflow = overflow || __builtin_add_overflow(last, 1, &need) ||
               __builtin_mul_overflow(need, static_cast<int64_t>(strata::itemsize(dtype)), &need);
    STRATA_CHECK(!overflow && static_cast<std::size_t>(need) <= storage.nbytes(), op, ": view with sizes ", sizes,
                 ", strides ", strides, ", offset ", offset, " and dtype ", dtype, " needs ",
                 overflow ? std::string("more than 2^63") : std::to_string(need), " bytes but the storage has ",
                 storage.nbytes());
  }
  Tensor t;
  auto impl = std::make_shared<detail::TensorImpl>();
  impl->storage = std::move(storage);
  impl->sizes = sizes.to_dims();
  impl->strides = strides.to_dims();
  impl->offset = offset;
  impl->dtype = dtype;
  impl->numel = numel;
  impl->contiguous = is_contiguous_layout(sizes, strides);
  t.impl_ = std::move(impl);
  return t;
}

Tensor Tensor::make_view(Dims sizes, Dims strides, int64_t offset) const {
  int64_t numel = 1;
  for (int64_t s : sizes) numel *= s;
  auto impl = std::make_shared<detail::TensorImpl>();
  impl->storage = storage();
  impl->contiguous = is_contiguous_layout(sizes, strides);
  impl->sizes = std::move(sizes);
  impl->strides = std::move(strides);
  impl->offset = offset;
  impl->dtype = dtype();
  impl->numel = numel;
  Tensor t;
  t.impl_ = std::move(impl);
  return t;
}

int64_t Tensor::size(int64_t dim) const {
  return sizes()[static_cast<std::size_t>(wrap_dim(dim, this->dim(), "size"))];
}

int64_t Tensor::stride(int64_t dim) const {
  return strides()[static_cast<std::size_t>(wrap_dim(dim, this->dim(), "stride"))];
}

bool Tensor::shares_storage(const Tensor& other) const { return storage().is_same(other.storage()); }

void* Tensor::data_ptr() const {
  require_defined("data_ptr");
  auto* base = static_cast<char*>(storage().data());
  return base ? base + offset() * static_cast<int64_t>(itemsize()) : nullptr;
}

double Tensor::at(IntArrayRef index) const {
  require_defined("at");
  STRATA_CHECK(static_cast<int64_t>(index.size()) == dim(), "at: index ", index, " has ", index.size(),
               " entries but the tensor has rank ", dim(), " (", describe(), ")");
  int64_t off = 0;
  for (std::size_t i = 0; i < index.size(); ++i) {
    int64_t ix = index[i];
    const int64_t n = sizes()[i];
    STRATA_CHECK(ix >= -n && ix < n, "at: index ", ix, " is out of bounds for dim ", i, " with size ", n, " (",
                 describe(), ")");
    if (ix < 0) ix += n;
    off += ix * strides()[i];
  }
  PinSet pins;
  pins.add(*this, AccessMode::Read, itemsize()).acquire();  // one element
  const char* p = static_cast<const char*>(data_ptr()) + off * static_cast<int64_t>(itemsize());
  return dispatch_dtype(dtype(), [&](auto tag) -> double {
    using T = decltype(tag);
    T v;
    std::memcpy(&v, p, sizeof(T));
    return static_cast<double>(v);
  });
}

// ---- views --------------------------------------------------------------------------------------

Tensor Tensor::as_strided(IntArrayRef sizes, IntArrayRef strides, std::optional<int64_t> offset) const {
  require_defined("as_strided");
  return make_checked("as_strided", storage(), sizes, strides, offset.value_or(this->offset()), dtype());
}

Tensor Tensor::view(IntArrayRef sizes) const {
  require_defined("view");
  const Dims shape = infer_size(sizes, numel(), "view");
  Dims new_strides;
  STRATA_CHECK(compute_view_strides(this->sizes(), strides(), shape, new_strides), "view: size ", shape,
               " is not compatible with the input's sizes ", this->sizes(), " and strides ", strides(),
               " (a dimension spans two non-contiguous subspaces); use reshape() instead");
  return make_view(shape, new_strides, offset());
}

Tensor Tensor::reshape(IntArrayRef sizes) const {
  require_defined("reshape");
  const Dims shape = infer_size(sizes, numel(), "reshape");
  Dims new_strides;
  if (compute_view_strides(this->sizes(), strides(), shape, new_strides))
    return make_view(shape, new_strides, offset());
  return contiguous().view(shape);
}

Tensor Tensor::narrow(int64_t dim, int64_t start, int64_t length) const {
  require_defined("narrow");
  STRATA_CHECK(this->dim() > 0, "narrow: cannot narrow a 0-dim tensor");
  const int64_t d = wrap_dim(dim, this->dim(), "narrow");
  const int64_t n = sizes()[d];
  STRATA_CHECK(start >= -n && start <= n, "narrow: start ", start, " is out of range for dim ", d, " of size ", n, " (",
               describe(), ")");
  if (start < 0) start += n;
  STRATA_CHECK(length >= 0, "narrow: length ", length, " must be non-negative (", describe(), ")");
  STRATA_CHECK(start + length <= n, "narrow: start ", start, " + length ", length, " exceeds size ", n, " of dim ", d,
               " (", describe(), ")");
  Dims s = sizes();
  s[d] = length;
  return make_view(s, strides(), offset() + start * strides()[d]);
}

Tensor Tensor::slice(int64_t dim, std::optional<int64_t> start, std::optional<int64_t> end, int64_t step) const {
  require_defined("slice");
  STRATA_CHECK(this->dim() > 0, "slice: cannot slice a 0-dim tensor");
  const int64_t d = wrap_dim(dim, this->dim(), "slice");
  STRATA_CHECK(step > 0, "slice: step must be positive, got ", step);
  const int64_t n = sizes()[d];
  auto clamp = [n](int64_t v) {
    if (v < 0) v += n;
    return std::clamp<int64_t>(v, 0, n);
  };
  const int64_t b = start ? clamp(*start) : 0;
  const int64_t e = std::max(b, end ? clamp(*end) : n);
  Dims s = sizes();
  Dims st = strides();
  const int64_t len = e - b;
  s[d] = len == 0 ? 0 : 1 + (len - 1) / step;  // ceil(len / step) without overflow
  // PyTorch scales the stride by the step even for a single-element result; only when that
  // overflows and the dim holds at most one element (so the stride never addresses memory) does
  // the original stride stay.
  int64_t scaled = 0;
  if (!__builtin_mul_overflow(st[d], step, &scaled)) {
    st[d] = scaled;
  } else {
    STRATA_CHECK(s[d] <= 1, "slice: step ", step, " times stride ", strides()[d], " of dim ", d, " overflows int64");
  }
  return make_view(s, st, offset() + b * strides()[d]);
}

Tensor Tensor::select(int64_t dim, int64_t index) const {
  require_defined("select");
  STRATA_CHECK(this->dim() > 0, "select: cannot select from a 0-dim tensor");
  const int64_t d = wrap_dim(dim, this->dim(), "select");
  const int64_t n = sizes()[d];
  STRATA_CHECK(index >= -n && index < n, "select: index ", index, " is out of range for dim ", d, " of size ", n, " (",
               describe(), ")");
  if (index < 0) index += n;
  Dims s = sizes();
  Dims st = strides();
  s.erase(d);
  st.erase(d);
  return make_view(s, st, offset() + index * strides()[d]);
}

Tensor Tensor::transpose(int64_t dim0, int64_t dim1) const {
  require_defined("transpose");
  const int64_t a = wrap_dim(dim0, dim(), "transpose", true);
  const int64_t b = wrap_dim(dim1, dim(), "transpose", true);
  if (dim() == 0) return make_view(sizes(), strides(), offset());
  Dims s = sizes();
  Dims st = strides();
  std::swap(s[a], s[b]);
  std::swap(st[a], st[b]);
  return make_view(s, st, offset());
}

Tensor Tensor::permute(IntArrayRef dims) const {
  require_defined("permute");
  STRATA_CHECK(static_cast<int64_t>(dims.size()) == dim(), "permute: got ", dims.size(), " dims ", dims,
               " for a tensor of rank ", dim(), " (", describe(), ")");
  Dims s(dims.size());
  Dims st(dims.size());
  SmallVector<bool, 8> seen(dims.size(), false);
  for (std::size_t i = 0; i < dims.size(); ++i) {
    const int64_t d = wrap_dim(dims[i], dim(), "permute");
    STRATA_CHECK(!seen[d], "permute: dim ", d, " appears more than once in ", dims);
    seen[d] = true;
    s[i] = sizes()[d];
    st[i] = strides()[d];
  }
  return make_view(s, st, offset());
}

Tensor Tensor::t() const {
  require_defined("t");
  STRATA_CHECK(dim() <= 2, "t: expects a tensor of rank <= 2, got ", describe(),
               "; use transpose(dim0, dim1) or permute()");
  return dim() < 2 ? make_view(sizes(), strides(), offset()) : transpose(0, 1);
}

Tensor Tensor::expand(IntArrayRef sizes) const {
  require_defined("expand");
  const auto rank = static_cast<int64_t>(sizes.size());
  STRATA_CHECK(rank >= dim(), "expand: the number of sizes ", rank, " in ", sizes,
               " must be at least the tensor's rank ", dim(), " (", describe(), ")");
  Dims s(sizes.size());
  Dims st(sizes.size());
  const int64_t lead = rank - dim();
  for (int64_t i = rank - 1; i >= 0; --i) {
    const int64_t want = sizes[i];
    if (i < lead) {
      STRATA_CHECK(want >= 0, "expand: size ", want, " at new leading dim ", i, " of ", sizes, " must be non-negative");
      s[i] = want;
      st[i] = 0;
      continue;
    }
    const int64_t have = this->sizes()[i - lead];
    if (want == -1 || want == have) {
      s[i] = have;
      st[i] = strides()[i - lead];
    } else {
      STRATA_CHECK(have == 1 && want >= 0, "expand: the size ", have, " at dim ", i - lead, " of ", describe(),
                   " must match ", want, " at dim ", i, " of ", sizes, " (only size-1 dims can be expanded)");
      s[i] = want;
      st[i] = 0;
    }
  }
  return make_view(s, st, offset());
}

Tensor Tensor::squeeze() const {
  require_defined("squeeze");
  Dims s;
  Dims st;
  for (int64_t i = 0; i < dim(); ++i) {
    if (sizes()[i] != 1) {
      s.push_back(sizes()[i]);
      st.push_back(strides()[i]);
    }
  }
  return make_view(s, st, offset());
}

Tensor Tensor::squeeze(int64_t dim) const {
  require_defined("squeeze");
  const int64_t d = wrap_dim(dim, this->dim(), "squeeze", true);
  if (this->dim() == 0 || sizes()[d] != 1) return make_view(sizes(), strides(), offset());
  Dims s = sizes();
  Dims st = strides();
  s.erase(d);
  st.erase(d);
  return make_view(s, st, offset());
}

Tensor Tensor::unsqueeze(int64_t dim) const {
  require_defined("unsqueeze");
  const int64_t d = wrap_dim(dim, this->dim() + 1, "unsqueeze");
  Dims s = sizes();
  Dims st = strides();
  const int64_t stride = d < this->dim() ? sizes()[d] * strides()[d] : 1;
  s.insert(d, 1);
  st.insert(d, stride);
  return make_view(s, st, offset());
}

Tensor Tensor::flatten(int64_t start_dim, int64_t end_dim) const {
  require_defined("flatten");
  if (dim() == 0) {
    wrap_dim(start_dim, 0, "flatten", true);
    wrap_dim(end_dim, 0, "flatten", true);
    return reshape({1});
  }
  const int64_t a = wrap_dim(start_dim, dim(), "flatten");
  const int64_t b = wrap_dim(end_dim, dim(), "flatten");
  STRATA_CHECK(a <= b, "flatten: start_dim ", start_dim, " must not come after end_dim ", end_dim, " (", describe(),
               ")");
  Dims s;
  for (int64_t i = 0; i < a; ++i) s.push_back(sizes()[i]);
  int64_t merged = 1;
  for (int64_t i = a; i <= b; ++i) merged *= sizes()[i];
  s.push_back(merged);
  for (int64_t i = b + 1; i < dim(); ++i) s.push_back(sizes()[i]);
  return reshape(s);
}

std::string Tensor::describe() const {
  if (!defined()) return "Tensor(undefined)";
  std::ostringstream os;
  os << "Tensor" << sizes() << ' ' << dtype();
  return os.str();
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) { return os << t.to_string(); }

// ---- autograd metadata ------------------------------------------------------------------------

namespace {

std::atomic<detail::ViewRefresh> view_refresh{nullptr};

/// Note [View tracking] in autograd/view.h: a view whose storage was written since its history
/// was made gets it regenerated before anyone reads it.
void refresh_if_stale(const Tensor& t, const detail::AutogradMeta* m) {
  if (m == nullptr || !m->view_base.defined() || m->view_version == t.version()) return;
  if (const detail::ViewRefresh refresh = view_refresh.load(std::memory_order_acquire)) refresh(t);
}

}  // namespace

void detail::set_view_refresh(ViewRefresh refresh) { view_refresh.store(refresh, std::memory_order_release); }

bool Tensor::requires_grad() const {
  const detail::AutogradMeta* m = impl().autograd.get();
  refresh_if_stale(*this, m);
  return m != nullptr && (m->requires_grad || m->grad_fn != nullptr);
}

Tensor& Tensor::set_requires_grad(bool requires_grad) {
  require_defined("requires_grad_");
  STRATA_CHECK(is_leaf(), "requires_grad_: ", describe(),
               " is not a leaf (it was produced by a recorded op); use detach() to get a leaf");
  STRATA_CHECK(!requires_grad || is_floating(dtype()),
               "requires_grad_: only floating-point tensors can "
               "require gradients, got ",
               describe());
  autograd_meta().requires_grad = requires_grad;
  return *this;
}

Tensor Tensor::grad() const {
  const detail::AutogradMeta* m = impl().autograd.get();
  return m != nullptr ? m->grad : Tensor();
}

void Tensor::set_data(const Tensor& data) {
  require_defined("set_data");
  STRATA_CHECK(data.defined(), "set_data: the new data of ", describe(), " is undefined");
  STRATA_CHECK(!requires_grad() || is_floating(data.dtype()),
               "set_data: data set to a tensor that requires "
               "gradients must be floating point, got ",
               data.describe());
  detail::TensorImpl& self = *impl_;
  const detail::TensorImpl& src = data.impl();
  self.storage = src.storage;
  self.sizes = src.sizes;
  self.strides = src.strides;
  self.offset = src.offset;
  self.dtype = src.dtype;
  self.numel = src.numel;
  self.contiguous = src.contiguous;
}

void Tensor::set_grad(const Tensor& grad) {
  require_defined("set_grad");
  if (grad.defined()) {
    STRATA_CHECK(grad.sizes() == sizes() && grad.dtype() == dtype(), "set_grad: gradient ", grad.describe(),
                 " does not match tensor ", describe());
  }
  autograd_meta().grad = grad;
}

const std::shared_ptr<autograd::Node>& Tensor::grad_fn() const {
  static const std::shared_ptr<autograd::Node> none;
  const detail::AutogradMeta* m = impl().autograd.get();
  refresh_if_stale(*this, m);
  return m != nullptr ? m->grad_fn : none;
}

uint32_t Tensor::output_nr() const {
  const detail::AutogradMeta* m = impl().autograd.get();
  refresh_if_stale(*this, m);
  return m != nullptr ? m->output_nr : 0;
}

Tensor Tensor::detach() const {
  require_defined("detach");
  return make_view(sizes(), strides(), offset());
}

detail::AutogradMeta& Tensor::autograd_meta() const {
  require_defined("autograd_meta");
  if (impl_->autograd == nullptr) impl_->autograd = std::make_shared<detail::AutogradMeta>();
  return *impl_->autograd;
}

}  // namespace strata
