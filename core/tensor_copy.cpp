// Copies between layouts and dtypes: contiguous(), clone(), to(), copy_(), fill_(), item().

#include <cstring>

#include "core/factories.h"
#include "core/pin_set.h"
#include "core/strided_loop.h"
#include "core/tensor.h"

namespace strata {

namespace {

detail::StridedOperands<2> pair_operands(const Tensor& dst, const Tensor& src) {
  detail::StridedOperands<2> ops;
  ops.sizes = dst.sizes();
  ops.strides[0] = dst.strides();
  ops.strides[1] = src.strides();
  for (int k = 0; k < 2; ++k)
    for (auto& s : ops.strides[k]) s *= static_cast<int64_t>(k == 0 ? dst.itemsize() : src.itemsize());
  ops.base[0] = static_cast<char*>(dst.data_ptr());
  ops.base[1] = static_cast<char*>(src.data_ptr());
  return ops;
}

// dst and src have the same sizes (src already broadcast) and do not overlap.
void copy_same_shape(const Tensor& dst, const Tensor& src) {
  if (dst.numel() == 0) return;
  PinSet pins;  // Note [Pinning kernel operands]
  pins.add(dst, AccessMode::Write).add(src, AccessMode::Read).acquire();
  const bool same_type = dst.dtype() == src.dtype();
  dispatch_dtype(dst.dtype(), [&](auto dst_tag) {
    using D = decltype(dst_tag);
    dispatch_dtype(src.dtype(), [&](auto src_tag) {
      using S = decltype(src_tag);
      detail::for_each_row<2>(pair_operands(dst, src), [&](const std::array<char*, 2>& p,
                                                            const std::array<int64_t, 2>& st,
                                                            int64_t n) {
        if (same_type && st[0] == static_cast<int64_t>(sizeof(D)) && st[1] == st[0]) {
          std::memcpy(p[0], p[1], static_cast<std::size_t>(n) * sizeof(D));
          return;
        }
        char* d = p[0];
        const char* s = p[1];
        for (int64_t i = 0; i < n; ++i, d += st[0], s += st[1]) {
          S v;
          std::memcpy(&v, s, sizeof(S));
          const D out = convert_element<D>(v);
          std::memcpy(d, &out, sizeof(D));
        }
      });
    });
  });
}

// True when the element ranges the two views address may overlap in memory.
bool may_overlap(const Tensor& a, const Tensor& b) {
  if (!a.shares_storage(b) || a.numel() == 0 || b.numel() == 0) return false;
  auto range = [](const Tensor& t) {
    int64_t extent = 0;
    for (int64_t d = 0; d < t.dim(); ++d) extent += (t.sizes()[d] - 1) * t.strides()[d];
    const auto lo = t.offset() * static_cast<int64_t>(t.itemsize());
    return std::pair<int64_t, int64_t>{lo, lo + (extent + 1) * static_cast<int64_t>(t.itemsize())};
  };
  const auto [alo, ahi] = range(a);
  const auto [blo, bhi] = range(b);
  return alo < bhi && blo < ahi;
}

}  // namespace

Tensor& Tensor::copy_(const Tensor& src) {
  require_defined("copy_");
  STRATA_CHECK(src.defined(), "copy_: source tensor is undefined");
  Tensor source = src;
  if (source.sizes() != sizes()) {
    // Validates broadcastability with a message naming both shapes.
    const Dims b = broadcast_shapes(sizes(), src.sizes(), "copy_");
    STRATA_CHECK(b == sizes(), "copy_: source ", src.describe(), " cannot be broadcast to the destination ",
                 describe(), " (the broadcast shape would be ", b, ")");
    source = src.expand(sizes());
  }
  bool dst_has_internal_overlap = false;
  for (int64_t d = 0; d < dim(); ++d)
    if (strides()[d] == 0 && sizes()[d] > 1) dst_has_internal_overlap = true;
  STRATA_CHECK(!dst_has_internal_overlap, "copy_: the destination ", describe(), " with strides ",
               strides(), " has elements that alias each other (an expanded view); clone() it first");
  const bool identical = source.shares_storage(*this) && source.offset() == offset() &&
                         source.strides() == strides() && source.dtype() == dtype();
  if (!identical) {
    if (may_overlap(*this, source)) source = source.clone();
    copy_same_shape(*this, source);
  }
  bump_version();
  return *this;
}

Tensor& Tensor::fill_(double value) {
  require_defined("fill_");
  PinSet pins;
  pins.add(*this, AccessMode::Write).acquire();
  dispatch_dtype(dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T v = convert_element<T>(value);
    detail::StridedOperands<1> ops;
    ops.sizes = sizes();
    ops.strides[0] = strides();
    for (auto& s : ops.strides[0]) s *= static_cast<int64_t>(sizeof(T));
    ops.base[0] = static_cast<char*>(data_ptr());
    detail::for_each_row<1>(ops, [&](const std::array<char*, 1>& p, const std::array<int64_t, 1>& st,
                                     int64_t n) {
      char* d = p[0];
      for (int64_t i = 0; i < n; ++i, d += st[0]) std::memcpy(d, &v, sizeof(T));
    });
  });
  bump_version();
  return *this;
}

Tensor Tensor::contiguous() const {
  require_defined("contiguous");
  return is_contiguous() ? *this : clone();
}

Tensor Tensor::clone() const {
  require_defined("clone");
  Tensor out = empty(sizes(), {dtype(), nullptr});
  copy_same_shape(out, *this);
  return out;
}

Tensor Tensor::to(DType target, bool copy) const {
  require_defined("to");
  if (target == dtype() && !copy) return *this;
  Tensor out = empty(sizes(), {target, nullptr});
  copy_same_shape(out, *this);
  return out;
}

void Tensor::item_into(DType target, void* out) const {
  require_defined("item");
  STRATA_CHECK(numel() == 1, "item: a tensor with ", numel(),
               " elements cannot be converted to a scalar (", describe(), ")");
  Tensor dst = from_blob(out, Dims(static_cast<std::size_t>(dim()), 1), target);
  copy_same_shape(dst, *this);
}

}  // namespace strata
