// Copies between layouts and dtypes: contiguous(), clone(), to(), copy_(), fill_(), item().

#include <algorithm>
#include <cstring>

#include "core/detail/strided_loop.h"
#include "core/factories.h"
#include "core/pin_set.h"
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

// A same-dtype copy whose innermost destination dim is not the source's unit-stride dim (a
// transpose): copies 32×32 tiles so both sides touch whole cache lines, instead of walking the
// source with a large stride. Returns false when the layouts are not of that kind.
template <typename T>
bool copy_transposed_tiles(detail::StridedOperands<2> ops) {
  detail::coalesce(ops);
  const int64_t rank = static_cast<int64_t>(ops.sizes.size());
  const int64_t e = sizeof(T);
  if (rank < 2 || ops.strides[0][rank - 1] != e || ops.strides[1][rank - 1] == e) return false;
  int64_t b = -1;  // the dim in which the source is contiguous
  for (int64_t d = 0; d + 1 < rank; ++d)
    if (ops.strides[1][d] == e && ops.sizes[d] >= 8) b = d;
  if (b < 0 || ops.sizes[rank - 1] < 8) return false;
  // Move dim b next to the innermost one; the order of the other outer dims does not matter.
  Dims sizes, sd, ss;
  for (int64_t d = 0; d + 1 < rank; ++d)
    if (d != b) sizes.push_back(ops.sizes[d]), sd.push_back(ops.strides[0][d]), ss.push_back(ops.strides[1][d]);
  const int64_t rows = ops.sizes[b], cols = ops.sizes[rank - 1];
  const int64_t d_row = ops.strides[0][b], s_col = ops.strides[1][rank - 1];
  int64_t outer = 1;
  for (int64_t x : sizes) outer *= x;
  constexpr int64_t kTile = 32;
  const int64_t row_tiles = (rows + kTile - 1) / kTile;
  parallel_for(outer * row_tiles, std::max<int64_t>(1, 16384 / (kTile * cols) + 1), [&](int64_t begin, int64_t end) {
    for (int64_t task = begin; task < end; ++task) {
      int64_t o = task / row_tiles;
      const int64_t r0 = (task % row_tiles) * kTile, r1 = std::min(rows, r0 + kTile);
      char* dbase = ops.base[0];
      const char* sbase = ops.base[1];
      for (int64_t d = static_cast<int64_t>(sizes.size()) - 1; d >= 0; --d) {
        const int64_t i = o % sizes[d];
        o /= sizes[d];
        dbase += i * sd[d];
        sbase += i * ss[d];
      }
      for (int64_t c0 = 0; c0 < cols; c0 += kTile) {
        const int64_t c1 = std::min(cols, c0 + kTile);
        for (int64_t r = r0; r < r1; ++r) {
          T* drow = reinterpret_cast<T*>(dbase + r * d_row);
          const char* scol = sbase + r * e;
          for (int64_t c = c0; c < c1; ++c) drow[c] = *reinterpret_cast<const T*>(scol + c * s_col);
        }
      }
    }
  });
  return true;
}

// dst and src have the same sizes (src already broadcast) and do not overlap.
void copy_same_shape(const Tensor& dst, const Tensor& src) {
  if (dst.numel() == 0) return;
  PinSet pins;  // Note [Pinning kernel operands]
  pins.add(dst, AccessMode::Write).add(src, AccessMode::Read).acquire();
  const bool same_type = dst.dtype() == src.dtype();
  if (same_type) {
    bool done = false;
    switch (dst.itemsize()) {
      case 1: done = copy_transposed_tiles<uint8_t>(pair_operands(dst, src)); break;
      case 2: done = copy_transposed_tiles<uint16_t>(pair_operands(dst, src)); break;
      case 4: done = copy_transposed_tiles<uint32_t>(pair_operands(dst, src)); break;
      case 8: done = copy_transposed_tiles<uint64_t>(pair_operands(dst, src)); break;
      default: break;
    }
    if (done) return;
  }
  dispatch_dtype(dst.dtype(), [&](auto dst_tag) {
    using D = decltype(dst_tag);
    dispatch_dtype(src.dtype(), [&](auto src_tag) {
      using S = decltype(src_tag);
      detail::for_each_row<2>(pair_operands(dst, src),
                              [&](const std::array<char*, 2>& p, const std::array<int64_t, 2>& st, int64_t n) {
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
    STRATA_CHECK(b == sizes(), "copy_: source ", src.describe(), " cannot be broadcast to the destination ", describe(),
                 " (the broadcast shape would be ", b, ")");
    source = src.expand(sizes());
  }
  bool dst_has_internal_overlap = false;
  for (int64_t d = 0; d < dim(); ++d)
    if (strides()[d] == 0 && sizes()[d] > 1) dst_has_internal_overlap = true;
  STRATA_CHECK(!dst_has_internal_overlap, "copy_: the destination ", describe(), " with strides ", strides(),
               " has elements that alias each other (an expanded view); clone() it first");
  const bool identical = source.shares_storage(*this) && source.offset() == offset() && source.strides() == strides() &&
                         source.dtype() == dtype();
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
    detail::for_each_row<1>(ops, [&](const std::array<char*, 1>& p, const std::array<int64_t, 1>& st, int64_t n) {
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
  STRATA_CHECK(numel() == 1, "item: a tensor with ", numel(), " elements cannot be converted to a scalar (", describe(),
               ")");
  Tensor dst = from_blob(out, Dims(static_cast<std::size_t>(dim()), 1), target);
  copy_same_shape(dst, *this);
}

}  // namespace strata
