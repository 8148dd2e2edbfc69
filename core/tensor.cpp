#include "core/tensor.h"

#include <algorithm>
#include <numeric>
#include <sstream>

namespace strata {

namespace {

// Largest element offset (relative to the tensor's offset) that the view addresses, or -1 when
// the view is empty.
int64_t max_extent(IntArrayRef sizes, IntArrayRef strides) {
  int64_t extent = 0;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] == 0) return -1;
    extent += (sizes[i] - 1) * strides[i];
  }
  return extent;
}

}  // namespace

Tensor::Tensor(Storage storage, IntArrayRef sizes, IntArrayRef strides, int64_t offset, DType dtype) {
  STRATA_CHECK(storage.defined(), "Tensor: storage is undefined");
  STRATA_CHECK(sizes.size() == strides.size(), "Tensor: sizes ", sizes, " and strides ", strides,
               " have different lengths");
  STRATA_CHECK(offset >= 0, "Tensor: negative storage offset ", offset);
  const int64_t numel = checked_numel(sizes, "Tensor");
  for (std::size_t i = 0; i < strides.size(); ++i)
    STRATA_CHECK(strides[i] >= 0, "Tensor: negative stride ", strides[i], " at dim ", i,
                 " (strides ", strides, ") is not supported");
  const int64_t extent = max_extent(sizes, strides);
  if (extent >= 0) {
    const int64_t last = offset + extent;  // element index of the last addressed element
    const auto need = static_cast<std::size_t>(last + 1) * strata::itemsize(dtype);
    STRATA_CHECK(need <= storage.nbytes(), "Tensor: view with sizes ", sizes, ", strides ", strides,
                 ", offset ", offset, " and dtype ", dtype, " needs ", need,
                 " bytes but the storage has ", storage.nbytes());
  }
  auto impl = std::make_shared<detail::TensorImpl>();
  impl->storage = std::move(storage);
  impl->sizes = sizes.to_dims();
  impl->strides = strides.to_dims();
  impl->offset = offset;
  impl->dtype = dtype;
  impl->numel = numel;
  impl->contiguous = is_contiguous_layout(sizes, strides);
  impl_ = std::move(impl);
}

int64_t Tensor::size(int64_t dim) const {
  return sizes()[static_cast<std::size_t>(wrap_dim(dim, this->dim(), "size"))];
}

int64_t Tensor::stride(int64_t dim) const {
  return strides()[static_cast<std::size_t>(wrap_dim(dim, this->dim(), "stride"))];
}

bool Tensor::shares_storage(const Tensor& other) const {
  return storage().is_same(other.storage());
}

void* Tensor::data_ptr() const {
  auto* base = static_cast<char*>(storage().data());
  return base ? base + offset() * static_cast<int64_t>(itemsize()) : nullptr;
}

double Tensor::at(IntArrayRef index) const {
  STRATA_CHECK(static_cast<int64_t>(index.size()) == dim(), "at: index ", index, " has ",
               index.size(), " entries but the tensor has rank ", dim(), " (", describe(), ")");
  int64_t off = 0;
  for (std::size_t i = 0; i < index.size(); ++i) {
    int64_t ix = index[i];
    const int64_t n = sizes()[i];
    STRATA_CHECK(ix >= -n && ix < n, "at: index ", ix, " is out of bounds for dim ", i, " with size ",
                 n, " (", describe(), ")");
    if (ix < 0) ix += n;
    off += ix * strides()[i];
  }
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
  return Tensor(storage(), sizes, strides, offset.value_or(this->offset()), dtype());
}

Tensor Tensor::view(IntArrayRef sizes) const {
  const Dims shape = infer_size(sizes, numel(), "view");
  Dims new_strides;
  STRATA_CHECK(compute_view_strides(this->sizes(), strides(), shape, new_strides), "view: size ", shape,
               " is not compatible with the input's sizes ", this->sizes(), " and strides ", strides(),
               " (a dimension spans two non-contiguous subspaces); use reshape() instead");
  return as_strided(shape, new_strides);
}

Tensor Tensor::reshape(IntArrayRef sizes) const {
  const Dims shape = infer_size(sizes, numel(), "reshape");
  Dims new_strides;
  if (compute_view_strides(this->sizes(), strides(), shape, new_strides))
    return as_strided(shape, new_strides);
  return contiguous().view(shape);
}

Tensor Tensor::narrow(int64_t dim, int64_t start, int64_t length) const {
  STRATA_CHECK(this->dim() > 0, "narrow: cannot narrow a 0-dim tensor");
  const int64_t d = wrap_dim(dim, this->dim(), "narrow");
  const int64_t n = sizes()[d];
  STRATA_CHECK(start >= -n && start <= n, "narrow: start ", start, " is out of range for dim ", d,
               " of size ", n, " (", describe(), ")");
  if (start < 0) start += n;
  STRATA_CHECK(length >= 0 && start + length <= n, "narrow: start ", start, " + length ", length,
               " exceeds size ", n, " of dim ", d, " (", describe(), ")");
  Dims s = sizes();
  s[d] = length;
  return as_strided(s, strides(), offset() + start * strides()[d]);
}

Tensor Tensor::slice(int64_t dim, std::optional<int64_t> start, std::optional<int64_t> end,
                     int64_t step) const {
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
  s[d] = (e - b + step - 1) / step;
  st[d] *= step;
  return as_strided(s, st, offset() + b * strides()[d]);
}

Tensor Tensor::select(int64_t dim, int64_t index) const {
  STRATA_CHECK(this->dim() > 0, "select: cannot select from a 0-dim tensor");
  const int64_t d = wrap_dim(dim, this->dim(), "select");
  const int64_t n = sizes()[d];
  STRATA_CHECK(index >= -n && index < n, "select: index ", index, " is out of range for dim ", d,
               " of size ", n, " (", describe(), ")");
  if (index < 0) index += n;
  Dims s = sizes();
  Dims st = strides();
  s.erase(d);
  st.erase(d);
  return as_strided(s, st, offset() + index * strides()[d]);
}

Tensor Tensor::transpose(int64_t dim0, int64_t dim1) const {
  const int64_t a = wrap_dim(dim0, dim(), "transpose", true);
  const int64_t b = wrap_dim(dim1, dim(), "transpose", true);
  if (dim() == 0) return as_strided(sizes(), strides());
  Dims s = sizes();
  Dims st = strides();
  std::swap(s[a], s[b]);
  std::swap(st[a], st[b]);
  return as_strided(s, st);
}

Tensor Tensor::permute(IntArrayRef dims) const {
  STRATA_CHECK(static_cast<int64_t>(dims.size()) == dim(), "permute: got ", dims.size(),
               " dims ", dims, " for a tensor of rank ", dim(), " (", describe(), ")");
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
  return as_strided(s, st);
}

Tensor Tensor::t() const {
  STRATA_CHECK(dim() <= 2, "t: expects a tensor of rank <= 2, got ", describe(),
               "; use transpose(dim0, dim1) or permute()");
  return dim() < 2 ? as_strided(sizes(), strides()) : transpose(0, 1);
}

Tensor Tensor::expand(IntArrayRef sizes) const {
  const auto rank = static_cast<int64_t>(sizes.size());
  STRATA_CHECK(rank >= dim(), "expand: the number of sizes ", rank, " in ", sizes,
               " must be at least the tensor's rank ", dim(), " (", describe(), ")");
  Dims s(sizes.size());
  Dims st(sizes.size());
  const int64_t lead = rank - dim();
  for (int64_t i = rank - 1; i >= 0; --i) {
    const int64_t want = sizes[i];
    if (i < lead) {
      STRATA_CHECK(want >= 0, "expand: size ", want, " at new leading dim ", i, " of ", sizes,
                   " must be non-negative");
      s[i] = want;
      st[i] = 0;
      continue;
    }
    const int64_t have = this->sizes()[i - lead];
    if (want == -1 || want == have) {
      s[i] = have;
      st[i] = strides()[i - lead];
    } else {
      STRATA_CHECK(have == 1 && want >= 0, "expand: the size ", have, " at dim ", i - lead,
                   " of ", describe(), " must match ", want, " at dim ", i, " of ", sizes,
                   " (only size-1 dims can be expanded)");
      s[i] = want;
      st[i] = 0;
    }
  }
  return as_strided(s, st);
}

Tensor Tensor::squeeze() const {
  Dims s;
  Dims st;
  for (int64_t i = 0; i < dim(); ++i) {
    if (sizes()[i] != 1) {
      s.push_back(sizes()[i]);
      st.push_back(strides()[i]);
    }
  }
  return as_strided(s, st);
}

Tensor Tensor::squeeze(int64_t dim) const {
  const int64_t d = wrap_dim(dim, this->dim(), "squeeze", true);
  if (this->dim() == 0 || sizes()[d] != 1) return as_strided(sizes(), strides());
  Dims s = sizes();
  Dims st = strides();
  s.erase(d);
  st.erase(d);
  return as_strided(s, st);
}

Tensor Tensor::unsqueeze(int64_t dim) const {
  const int64_t d = wrap_dim(dim, this->dim() + 1, "unsqueeze");
  Dims s = sizes();
  Dims st = strides();
  const int64_t stride = d < this->dim() ? sizes()[d] * strides()[d] : 1;
  s.insert(d, 1);
  st.insert(d, stride);
  return as_strided(s, st);
}

Tensor Tensor::flatten(int64_t start_dim, int64_t end_dim) const {
  if (dim() == 0) return reshape({1});
  const int64_t a = wrap_dim(start_dim, dim(), "flatten");
  const int64_t b = wrap_dim(end_dim, dim(), "flatten");
  STRATA_CHECK(a <= b, "flatten: start_dim ", start_dim, " must not come after end_dim ", end_dim,
               " (", describe(), ")");
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

}  // namespace strata
