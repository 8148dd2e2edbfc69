#pragma once
/// @file
/// Sizes, strides and the shape arithmetic shared by views and ops.

#include <cstdint>
#include <initializer_list>
#include <ostream>
#include <string>
#include <vector>

#include "core/detail/small_vector.h"

namespace strata {

/// Sizes or strides of a tensor (in elements). Rank up to 6 stays inline.
using Dims = SmallVector<int64_t, 6>;

/// A non-owning view of a list of integers: accepts `{2, 3}`, `std::vector<int64_t>` and `Dims`.
/// An IntArrayRef built from a braced list must not outlive the full expression.
class IntArrayRef {
 public:
  IntArrayRef() = default;
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Winit-list-lifetime"  // by design: see the class comment
  IntArrayRef(std::initializer_list<int64_t> list) : data_(list.begin()), size_(list.size()) {}
#pragma GCC diagnostic pop
  IntArrayRef(const std::vector<int64_t>& v) : data_(v.data()), size_(v.size()) {}
  IntArrayRef(const Dims& d) : data_(d.data()), size_(d.size()) {}
  IntArrayRef(const int64_t* data, std::size_t size) : data_(data), size_(size) {}

  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  const int64_t* data() const { return data_; }
  const int64_t* begin() const { return data_; }
  const int64_t* end() const { return data_ + size_; }
  int64_t operator[](std::size_t i) const { return data_[i]; }
  int64_t back() const { return data_[size_ - 1]; }
  Dims to_dims() const { return Dims(begin(), end()); }
  std::vector<int64_t> vec() const { return {begin(), end()}; }

 private:
  const int64_t* data_ = nullptr;
  std::size_t size_ = 0;
};

bool operator==(IntArrayRef a, IntArrayRef b);
std::ostream& operator<<(std::ostream& os, IntArrayRef dims);
inline std::ostream& operator<<(std::ostream& os, const Dims& dims) { return os << IntArrayRef(dims); }
/// "[2, 3]"
std::string to_string(IntArrayRef dims);

/// Product of sizes; checks every size is non-negative and the product does not overflow.
/// @param op  the calling op's name, used in error messages
int64_t checked_numel(IntArrayRef sizes, const char* op);

/// Row-major (C-contiguous) strides for `sizes`.
Dims contiguous_strides(IntArrayRef sizes);

/// True when a tensor with these sizes/strides is row-major contiguous (size-1 dims ignored).
bool is_contiguous_layout(IntArrayRef sizes, IntArrayRef strides);

/// Wraps a possibly negative dim into [0, rank). For rank 0, dims -1 and 0 wrap to 0 when
/// `scalar_ok`. Throws strata::Error naming `op` when out of range.
int64_t wrap_dim(int64_t dim, int64_t rank, const char* op, bool scalar_ok = false);

/// Resolves a single -1 in `shape` so that the product equals `numel`.
Dims infer_size(IntArrayRef shape, int64_t numel, const char* op);

/// NumPy/PyTorch broadcasting of two shapes; throws naming `op` and both shapes when incompatible.
Dims broadcast_shapes(IntArrayRef a, IntArrayRef b, const char* op = "broadcast_shapes");

/// Strides that make a view with `new_sizes` over the memory described by (sizes, strides), or an
/// empty result when no such view exists (the data must then be copied). Same rule as PyTorch's
/// `view`: dims may only be merged/split within runs of contiguous-compatible dims.
bool compute_view_strides(IntArrayRef sizes, IntArrayRef strides, IntArrayRef new_sizes, Dims& new_strides);

}  // namespace strata
