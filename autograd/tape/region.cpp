#include "autograd/tape/detail/region.h"

#include "core/error.h"

namespace strata::tape::detail {

Tensor view_in_tile(const Tile& tile, std::size_t byte_offset, const Dims& sizes, DType dtype) {
  const std::size_t item = itemsize(dtype);
  STRATA_ASSERT(byte_offset % item == 0, "tape: region offset ", byte_offset, " is not a multiple of ", item);
  Dims strides(sizes.size());
  int64_t s = 1;
  for (std::size_t i = sizes.size(); i-- > 0;) {
    strides[i] = s;
    s *= sizes[i];
  }
  return Tensor(tile.storage, sizes, strides, static_cast<int64_t>(byte_offset / item), dtype);
}

}  // namespace strata::tape::detail
