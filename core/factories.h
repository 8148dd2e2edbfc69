#pragma once
/// @file
/// Tensor factories. Random factories draw from one seeded counter-based generator, so their
/// results depend only on the seed and the generator's position, never on the thread count.

#include <functional>
#include <vector>

#include "core/rng.h"
#include "core/scalar.h"
#include "core/tensor.h"

namespace strata {

/// Options shared by the factories.
struct TensorOptions {
  DType dtype = DType::f32;
  /// Allocator for the storage; null means default_allocator().
  Allocator* allocator = nullptr;
};

/// Uninitialized contiguous tensor. Sizes must be non-negative.
Tensor empty(IntArrayRef sizes, TensorOptions options = {});
Tensor zeros(IntArrayRef sizes, TensorOptions options = {});
Tensor ones(IntArrayRef sizes, TensorOptions options = {});
Tensor full(IntArrayRef sizes, double value, TensorOptions options = {});
Tensor empty_like(const Tensor& t);
Tensor zeros_like(const Tensor& t);
Tensor ones_like(const Tensor& t);

/// Values start, start+step, ... < end (> end for negative step), like torch.arange. The default
/// dtype is i64 when start, end and step are all integral values, otherwise f32.
Tensor arange(double end);
Tensor arange(double start, double end, double step = 1.0);
Tensor arange(double start, double end, double step, TensorOptions options);

/// Uniform on [low, high). Floating dtypes only.
Tensor rand(IntArrayRef sizes, TensorOptions options = {}, Generator* gen = nullptr);
Tensor uniform(IntArrayRef sizes, double low, double high, TensorOptions options = {}, Generator* gen = nullptr);
/// Normal(mean, std). Floating dtypes only.
Tensor randn(IntArrayRef sizes, TensorOptions options = {}, Generator* gen = nullptr);
Tensor normal(IntArrayRef sizes, double mean, double std, TensorOptions options = {}, Generator* gen = nullptr);
/// Integers uniform on [low, high). Integral dtypes (default i64).
Tensor randint(int64_t low, int64_t high, IntArrayRef sizes, TensorOptions options = {DType::i64, nullptr},
               Generator* gen = nullptr);

/// The n x m identity (ones on the diagonal, zeros elsewhere; m = n when omitted), like
/// torch.eye. Every dtype; n and m non-negative.
Tensor eye(int64_t n, std::optional<int64_t> m = std::nullopt, TensorOptions options = {});

/// `steps` (>= 0) values evenly spaced from start to end, both included, like torch.linspace:
/// start + i * step for the first half and end - (steps - 1 - i) * step for the rest, so both ends
/// are exact; computed in f64 and converted. Integer dtypes truncate start and end first, then each
/// value (PyTorch's integer linspace). Default dtype f32.
Tensor linspace(double start, double end, int64_t steps, TensorOptions options = {});

/// A random permutation of 0 .. n-1 (torch.randperm), by a Fisher-Yates shuffle drawing 64-bit
/// words from `gen` (default_generator() when null): the same seed gives the same permutation on
/// any thread count. Integer or floating dtype (default i64) that holds n - 1 exactly.
Tensor randperm(int64_t n, TensorOptions options = {DType::i64, nullptr}, Generator* gen = nullptr);

/// Wraps caller-owned memory without copying. `strides` defaults to contiguous; `deleter` (may be
/// empty) runs when the last tensor referring to the memory goes away.
Tensor from_blob(void* data, IntArrayRef sizes, DType dtype, std::function<void(void*)> deleter = {},
                 std::optional<IntArrayRef> strides = std::nullopt);

/// Copies `numel(sizes)` contiguous elements of type `dtype` from `data` into a new tensor.
Tensor from_buffer(const void* data, std::size_t nbytes, IntArrayRef sizes, DType dtype, TensorOptions options = {});

/// A new tensor holding a copy of `values` with the given sizes (default: 1-D).
template <typename T>
Tensor tensor(const std::vector<T>& values, std::optional<IntArrayRef> sizes = std::nullopt) {
  if constexpr (std::is_same_v<T, bool>) {
    std::vector<uint8_t> bytes(values.begin(), values.end());
    const int64_t n = static_cast<int64_t>(values.size());
    return from_buffer(bytes.data(), bytes.size(), sizes ? *sizes : IntArrayRef{&n, 1}, DType::boolean);
  } else {
    const int64_t n = static_cast<int64_t>(values.size());
    return from_buffer(values.data(), values.size() * sizeof(T), sizes ? *sizes : IntArrayRef{&n, 1}, dtype_of<T>());
  }
}

/// A zero-dim tensor holding `value`.
Tensor scalar_tensor(double value, DType dtype = DType::f32);
/// A zero-dim tensor of `dtype` holding `value` converted exactly as Scalar::to does (an int64
/// stays exact, unlike through a double).
Tensor scalar_tensor(const Scalar& value, DType dtype);

}  // namespace strata
