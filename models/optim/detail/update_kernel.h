#pragma once
// The fused element loop the optimizers share (internal to models/optim; not a public header).
//
// Note [Optimizer update kernels]
// An optimizer updates each parameter with one fused loop over its elements that reads the
// gradient and reads/writes the parameter and its state buffers in place: no temporaries, and no
// allocation after the state was created at the first step. The operands (same sizes, any
// strides) are pinned for the loop's duration with a PinSet (parameter and state Write, gradient
// Read; Note [Pinning kernel operands] in core/pin_set.h) and iterated with
// strata::detail::for_each_row, which runs rows in parallel through parallel_for above a grain
// size — so the element function runs on several threads at once and must only touch its own
// element. Rows whose operands are all contiguous get a plain indexed loop the compiler
// vectorizes. The parameter's and the buffers' versions are bumped (they are modified in place).
// Updates are not ops: nothing is recorded by autograd (Optimizer::step holds a NoGradGuard).
// Each optimizer follows the operation order of PyTorch 2.13's single-tensor (foreach=False)
// implementation, computing in the parameter's dtype with the hyperparameters converted to it,
// so float32 results track PyTorch's closely.

#include <array>
#include <cstdint>
#include <utility>

#include "core/detail/strided_loop.h"
#include "core/pin_set.h"
#include "core/tensor.h"

namespace strata::optim::detail {

/// Minimum number of elements a parallel task updates.
inline constexpr int64_t kUpdateGrain = 32768;

template <typename T, std::size_t K, typename Fn, std::size_t... I>
inline void update_row(const std::array<char*, K>& ptr, const std::array<int64_t, K>& strides, int64_t n, Fn& fn,
                       std::index_sequence<I...>) {
  const bool contiguous = ((strides[I] == static_cast<int64_t>(sizeof(T))) && ...);
  if (contiguous) {
    std::array<T*, K> p{reinterpret_cast<T*>(ptr[I])...};
    for (int64_t i = 0; i < n; ++i) fn(p[I][i]...);
  } else {
    for (int64_t i = 0; i < n; ++i) fn(*reinterpret_cast<T*>(ptr[I] + i * strides[I])...);
  }
}

/// Calls fn(param[i], grad[i], buffers[0][i], ...) (all T&) for every element, in parallel chunks.
/// operands = {param, grad, buffers...}: same sizes, dtype T. Pins them, bumps the versions of
/// everything except the gradient.
template <typename T, std::size_t K, typename Fn>
void update_elements(const std::array<const Tensor*, K>& operands, Fn fn) {
  static_assert(K >= 2, "update_elements: param and grad at least");
  PinSet pins;
  for (std::size_t k = 0; k < K; ++k) pins.add(*operands[k], k == 1 ? AccessMode::Read : AccessMode::Write);
  pins.acquire();
  strata::detail::StridedOperands<static_cast<int>(K)> ops;
  ops.sizes = operands[0]->sizes();
  for (std::size_t k = 0; k < K; ++k) {
    const Tensor& t = *operands[k];
    Dims s;
    for (int64_t x : t.strides()) s.push_back(x * static_cast<int64_t>(sizeof(T)));
    ops.strides[k] = s;
    ops.base[k] = static_cast<char*>(t.data_ptr());
  }
  strata::detail::for_each_row<static_cast<int>(K)>(
      std::move(ops),
      [&fn](const std::array<char*, K>& ptr, const std::array<int64_t, K>& strides, int64_t n) {
        update_row<T, K>(ptr, strides, n, fn, std::make_index_sequence<K>{});
      },
      kUpdateGrain);
  for (std::size_t k = 0; k < K; ++k)
    if (k != 1) operands[k]->bump_version();
}

/// Calls fn(std::integral_constant<bool, b>{}) — turns a runtime flag into a compile-time one, so
/// the element loops carry no per-element branches on options.
template <typename Fn>
decltype(auto) dispatch_bool(bool b, Fn&& fn) {
  if (b) return fn(std::true_type{});
  return fn(std::false_type{});
}

}  // namespace strata::optim::detail
