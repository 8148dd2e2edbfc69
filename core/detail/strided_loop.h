#pragma once
/// @file
/// The strided iteration that element-wise kernels share: K operands with the same sizes and their
/// own byte strides; dims that are contiguous in every operand are merged; the work is split into
/// rows of the innermost dim and rows are run in parallel when there are enough elements.

#include <array>
#include <cstdint>

#include "core/shape.h"
#include "core/threading.h"

namespace strata::detail {

template <int K>
struct StridedOperands {
  Dims sizes;                   // shared sizes, outermost first
  std::array<Dims, K> strides;  // byte strides per operand
  std::array<char*, K> base{};  // address of element [0, ..., 0] per operand
};

/// Drops size-1 dims and merges dim i into dim i+1 when every operand has
/// stride[i] == stride[i+1] * size[i+1].
template <int K>
void coalesce(StridedOperands<K>& ops) {
  Dims sizes;
  std::array<Dims, K> strides;
  for (std::size_t d = 0; d < ops.sizes.size(); ++d) {
    if (ops.sizes[d] == 1) continue;
    bool merge = !sizes.empty();
    for (int k = 0; k < K && merge; ++k) merge = strides[k].back() == ops.strides[k][d] * ops.sizes[d];
    if (merge) {
      sizes.back() *= ops.sizes[d];
      for (int k = 0; k < K; ++k) strides[k].back() = ops.strides[k][d];
    } else {
      sizes.push_back(ops.sizes[d]);
      for (int k = 0; k < K; ++k) strides[k].push_back(ops.strides[k][d]);
    }
  }
  if (sizes.empty()) {  // a single element
    sizes.push_back(1);
    for (int k = 0; k < K; ++k) strides[k].push_back(0);
  }
  ops.sizes = std::move(sizes);
  ops.strides = std::move(strides);
}

/// Calls row(ptrs, inner_strides, n) for every innermost row; rows may run concurrently.
/// `grain_elems` is the minimum number of elements a parallel task handles.
template <int K, typename RowFn>
void for_each_row(StridedOperands<K> ops, RowFn&& row, int64_t grain_elems = 32768) {
  coalesce(ops);
  for (int64_t s : ops.sizes)
    if (s == 0) return;
  const int64_t rank = static_cast<int64_t>(ops.sizes.size());
  const int64_t inner = ops.sizes.back();
  std::array<int64_t, K> inner_strides;
  for (int k = 0; k < K; ++k) inner_strides[k] = ops.strides[k].back();
  int64_t rows = 1;
  for (int64_t d = 0; d + 1 < rank; ++d) rows *= ops.sizes[d];

  auto run_rows = [&](int64_t begin, int64_t end) {
    // Decompose `begin` into an index over the outer dims, then step it like an odometer.
    Dims idx(static_cast<std::size_t>(std::max<int64_t>(rank - 1, 0)), 0);
    int64_t rem = begin;
    for (int64_t d = rank - 2; d >= 0; --d) {
      idx[d] = rem % ops.sizes[d];
      rem /= ops.sizes[d];
    }
    std::array<char*, K> ptr;
    for (int k = 0; k < K; ++k) {
      ptr[k] = ops.base[k];
      for (int64_t d = 0; d + 1 < rank; ++d) ptr[k] += idx[d] * ops.strides[k][d];
    }
    for (int64_t r = begin; r < end; ++r) {
      row(ptr, inner_strides, inner);
      for (int64_t d = rank - 2; d >= 0; --d) {
        for (int k = 0; k < K; ++k) ptr[k] += ops.strides[k][d];
        if (++idx[d] < ops.sizes[d]) break;
        for (int k = 0; k < K; ++k) ptr[k] -= ops.strides[k][d] * ops.sizes[d];
        idx[d] = 0;
      }
    }
  };
  if (rows == 1) {
    // One long row (a contiguous tensor coalesces to this): split the row itself.
    parallel_for(inner, std::max<int64_t>(grain_elems, 1), [&](int64_t begin, int64_t end) {
      std::array<char*, K> ptr;
      for (int k = 0; k < K; ++k) ptr[k] = ops.base[k] + begin * inner_strides[k];
      row(ptr, inner_strides, end - begin);
    });
    return;
  }
  const int64_t grain_rows = std::max<int64_t>(1, grain_elems / std::max<int64_t>(inner, 1));
  parallel_for(rows, grain_rows, run_rows);
}

}  // namespace strata::detail
