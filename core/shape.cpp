#include "core/shape.h"

#include <algorithm>
#include <sstream>

#include "core/error.h"

namespace strata {

bool operator==(IntArrayRef a, IntArrayRef b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin());
}

std::ostream& operator<<(std::ostream& os, IntArrayRef dims) {
  os << '[';
  for (std::size_t i = 0; i < dims.size(); ++i) os << (i ? ", " : "") << dims[i];
  return os << ']';
}

std::string to_string(IntArrayRef dims) {
  std::ostringstream os;
  os << dims;
  return os.str();
}

int64_t checked_numel(IntArrayRef sizes, const char* op) {
  int64_t n = 1;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    STRATA_CHECK(sizes[i] >= 0, op, ": negative size ", sizes[i], " at dim ", i, " in sizes ", sizes);
    STRATA_CHECK(!__builtin_mul_overflow(n, sizes[i], &n), op, ": sizes ", sizes,
                 " have more elements than fit in int64");
  }
  return n;
}

Dims contiguous_strides(IntArrayRef sizes) {
  Dims strides(sizes.size());
  int64_t s = 1;
  for (std::size_t i = sizes.size(); i-- > 0;) {
    strides[i] = s;
    s *= std::max<int64_t>(sizes[i], 1);
  }
  return strides;
}

bool is_contiguous_layout(IntArrayRef sizes, IntArrayRef strides) {
  for (int64_t s : sizes)
    if (s == 0) return true;  // an empty tensor is contiguous whatever its strides
  int64_t expected = 1;
  for (std::size_t i = sizes.size(); i-- > 0;) {
    if (sizes[i] == 1) continue;
    if (strides[i] != expected) return false;
    expected *= sizes[i];
  }
  return true;
}

int64_t wrap_dim(int64_t dim, int64_t rank, const char* op, bool scalar_ok) {
  if (rank == 0 && scalar_ok) {
    STRATA_CHECK(dim == 0 || dim == -1, op, ": dimension ", dim, " out of range for a 0-dim tensor (expected 0 or -1)");
    return 0;
  }
  STRATA_CHECK(rank > 0, op, ": dimension ", dim, " out of range: the tensor has rank 0 (no dimensions)");
  STRATA_CHECK(dim >= -rank && dim < rank, op, ": dimension ", dim, " out of range for a tensor of rank ", rank,
               " (expected in [", -rank, ", ", rank - 1, "])");
  return dim < 0 ? dim + rank : dim;
}

Dims infer_size(IntArrayRef shape, int64_t numel, const char* op) {
  Dims out = shape.to_dims();
  int64_t known = 1;
  int64_t infer_at = -1;
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (out[i] == -1) {
      STRATA_CHECK(infer_at < 0, op, ": only one dimension can be -1, got shape ", shape);
      infer_at = static_cast<int64_t>(i);
    } else {
      STRATA_CHECK(out[i] >= 0, op, ": invalid size ", out[i], " at dim ", i, " in shape ", shape);
      STRATA_CHECK(!__builtin_mul_overflow(known, out[i], &known), op, ": shape ", shape,
                   " has more elements than fit in int64");
    }
  }
  if (infer_at >= 0) {
    STRATA_CHECK(known != 0 && numel % known == 0, op, ": shape ", shape, " is invalid for input of ", numel,
                 " elements");
    out[static_cast<std::size_t>(infer_at)] = numel / known;
  } else {
    STRATA_CHECK(known == numel, op, ": shape ", shape, " is invalid for input of ", numel, " elements");
  }
  return out;
}

Dims broadcast_shapes(IntArrayRef a, IntArrayRef b, const char* op) {
  const std::size_t rank = std::max(a.size(), b.size());
  Dims out(rank);
  for (std::size_t i = 0; i < rank; ++i) {
    const int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    const int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    STRATA_CHECK(da == db || da == 1 || db == 1, op, ": shapes ", a, " and ", b, " cannot be broadcast together (dim ",
                 i, ": ", da, " vs ", db, ")");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

bool compute_view_strides(IntArrayRef sizes, IntArrayRef strides, IntArrayRef new_sizes, Dims& new_strides) {
  new_strides.assign(new_sizes.size(), 0);
  int64_t numel = 1;
  for (int64_t s : sizes) numel *= s;
  if (numel == 0 && sizes == new_sizes) {  // PyTorch keeps the strides of an unchanged empty shape
    new_strides = strides.to_dims();
    return true;
  }
  if (numel == 0 || sizes.empty()) {
    new_strides = contiguous_strides(new_sizes);
    return true;
  }
  // Walk the old dims from the innermost, grouping them into chunks that are contiguous with
  // respect to each other; each chunk of old dims must map onto a whole run of new dims.
  int64_t view_d = static_cast<int64_t>(new_sizes.size()) - 1;
  int64_t chunk_base_stride = strides.empty() ? 1 : strides.back();
  int64_t tensor_numel = 1;
  int64_t view_numel = 1;
  for (int64_t d = static_cast<int64_t>(sizes.size()) - 1; d >= 0; --d) {
    tensor_numel *= sizes[d];
    const bool chunk_ends = d == 0 || (sizes[d - 1] != 1 && strides[d - 1] != tensor_numel * chunk_base_stride);
    if (chunk_ends) {
      while (view_d >= 0 && (view_numel < tensor_numel || new_sizes[view_d] == 1)) {
        new_strides[view_d] = view_numel * chunk_base_stride;
        view_numel *= new_sizes[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) return false;
      if (d > 0) {
        chunk_base_stride = strides[d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  return view_d == -1;
}

}  // namespace strata
