#include "core/factories.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numbers>
#include <vector>

#include "core/pin_set.h"
#include "core/threading.h"

namespace strata {

namespace {

Allocator& allocator_of(const TensorOptions& o) { return o.allocator ? *o.allocator : default_allocator(); }

// Fills a contiguous tensor: element i gets value_of(i). Elements are independent, so the result
// does not depend on how parallel_for splits the range.
template <typename T, typename ValueOf>
void fill_indexed(Tensor& t, ValueOf&& value_of) {
  PinSet pins;
  pins.add(t, AccessMode::Write).acquire();
  T* out = t.data<T>();
  parallel_for(t.numel(), 16384, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) out[i] = convert_element<T>(value_of(i));
  });
}

void check_floating(DType dtype, const char* op) {
  STRATA_CHECK(is_floating(dtype), op, ": expects a floating dtype (f32, f64, bf16, f16), got ", dtype);
}

// Fills a contiguous tensor from a reserved run of Philox blocks: block j yields the values of
// elements [j * per_block, (j + 1) * per_block) through values_of(block, out) (which writes
// per_block doubles). Each block is computed once, by whichever thread owns it, so results depend
// only on the seed and offset.
template <typename T, typename ValuesOf>
void fill_from_blocks(Tensor& t, Generator& gen, int per_block, ValuesOf&& values_of) {
  const int64_t numel = t.numel();
  const auto blocks = static_cast<uint64_t>((numel + per_block - 1) / per_block);
  const PhiloxRange range = gen.reserve(blocks);
  PinSet pins;
  pins.add(t, AccessMode::Write).acquire();
  T* out = t.data<T>();
  parallel_for(static_cast<int64_t>(blocks), 4096, [&](int64_t begin, int64_t end) {
    double v[4];
    for (int64_t j = begin; j < end; ++j) {
      values_of(range.block(static_cast<uint64_t>(j)), v);
      const int64_t base = j * per_block;
      const int64_t n = std::min<int64_t>(per_block, numel - base);
      for (int64_t k = 0; k < n; ++k) out[base + k] = convert_element<T>(v[k]);
    }
  });
}

uint64_t word_pair(const std::array<uint32_t, 4>& b, int pair) {
  return (static_cast<uint64_t>(b[2 * pair]) << 32) | b[2 * pair + 1];
}

// A new contiguous tensor; `op` names the factory in error messages.
Tensor empty_for(const char* op, IntArrayRef sizes, const TensorOptions& options) {
  const int64_t numel = checked_numel(sizes, op);
  int64_t nbytes = 0;
  STRATA_CHECK(!__builtin_mul_overflow(numel, static_cast<int64_t>(itemsize(options.dtype)), &nbytes), op, ": sizes ",
               sizes, " of dtype ", options.dtype, " need more than 2^63 bytes");
  Storage storage = Storage::allocate(static_cast<std::size_t>(nbytes), allocator_of(options));
  return Tensor(std::move(storage), sizes, contiguous_strides(sizes), 0, options.dtype);
}

Tensor full_for(const char* op, IntArrayRef sizes, double value, const TensorOptions& options) {
  Tensor t = empty_for(op, sizes, options);
  t.fill_(value);
  return t;
}

const Tensor& defined_source(const Tensor& t, const char* op) {
  STRATA_CHECK(t.defined(), op, ": the source tensor is undefined");
  return t;
}

}  // namespace

Tensor empty(IntArrayRef sizes, TensorOptions options) { return empty_for("empty", sizes, options); }
Tensor full(IntArrayRef sizes, double value, TensorOptions options) { return full_for("full", sizes, value, options); }
Tensor zeros(IntArrayRef sizes, TensorOptions options) { return full_for("zeros", sizes, 0.0, options); }
Tensor ones(IntArrayRef sizes, TensorOptions options) { return full_for("ones", sizes, 1.0, options); }
Tensor empty_like(const Tensor& t) {
  const Tensor& s = defined_source(t, "empty_like");
  return empty_for("empty_like", s.sizes(), {s.dtype(), nullptr});
}
Tensor zeros_like(const Tensor& t) {
  const Tensor& s = defined_source(t, "zeros_like");
  return full_for("zeros_like", s.sizes(), 0.0, {s.dtype(), nullptr});
}
Tensor ones_like(const Tensor& t) {
  const Tensor& s = defined_source(t, "ones_like");
  return full_for("ones_like", s.sizes(), 1.0, {s.dtype(), nullptr});
}

Tensor arange(double end) { return arange(0.0, end, 1.0); }

Tensor arange(double start, double end, double step) {
  auto integral = [](double v) { return std::isfinite(v) && v == std::floor(v); };
  const DType dtype = integral(start) && integral(end) && integral(step) ? DType::i64 : DType::f32;
  return arange(start, end, step, {dtype, nullptr});
}

Tensor arange(double start, double end, double step, TensorOptions options) {
  STRATA_CHECK(std::isfinite(start) && std::isfinite(end), "arange: start ", start, " and end ", end,
               " must be finite");
  STRATA_CHECK(step != 0.0 && std::isfinite(step), "arange: step must be finite and non-zero, got ", step);
  STRATA_CHECK((step > 0 && end >= start) || (step < 0 && end <= start), "arange: the range [", start, ", ", end,
               ") is inconsistent with the sign of step ", step);
  STRATA_CHECK(options.dtype != DType::boolean, "arange: dtype bool is not supported");
  const double count = std::ceil((end - start) / step);
  STRATA_CHECK(count < 9.0e18, "arange: the range [", start, ", ", end, ") with step ", step, " has too many elements");
  const auto n = static_cast<int64_t>(count);
  if (n > 0 && is_integral(options.dtype)) {
    const double last = start + static_cast<double>(n - 1) * step;
    dispatch_dtype(options.dtype, [&](auto tag) {
      using T = decltype(tag);
      if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
        const auto lo = static_cast<double>(std::numeric_limits<T>::min());
        const auto hi = static_cast<double>(std::numeric_limits<T>::max());
        STRATA_CHECK(std::min(start, last) >= lo && std::max(start, last) <= hi, "arange: values from ", start, " to ",
                     last, " do not fit dtype ", options.dtype);
      }
    });
  }
  Tensor t = empty_for("arange", {n}, options);
  dispatch_dtype(options.dtype, [&](auto tag) {
    using T = decltype(tag);
    fill_indexed<T>(t, [&](int64_t i) { return start + static_cast<double>(i) * step; });
  });
  return t;
}

namespace {

// The largest value of T strictly below `high` (as a double, exactly representable in T).
template <typename T>
double largest_below(double high) {
  const T c = convert_element<T>(high);  // nearest T; at most one step above high
  if (static_cast<double>(c) < high) return static_cast<double>(c);
  if constexpr (is_reduced_float_v<T>) {
    T b = c;
    const float f = static_cast<float>(b);
    if (f > 0.0f)
      b.bits = static_cast<uint16_t>(b.bits - 1);
    else if (f == 0.0f)
      b.bits = 0x8001;  // the negative subnormal closest to zero
    else
      b.bits = static_cast<uint16_t>(b.bits + 1);
    return static_cast<double>(static_cast<float>(b));
  } else {
    return static_cast<double>(std::nextafter(c, -std::numeric_limits<T>::infinity()));
  }
}

Tensor uniform_for(const char* op, IntArrayRef sizes, double low, double high, TensorOptions options, Generator* gen) {
  check_floating(options.dtype, op);
  STRATA_CHECK(low <= high && std::isfinite(low) && std::isfinite(high), op, ": expects finite low <= high, got [", low,
               ", ", high, ")");
  Tensor t = empty_for(op, sizes, options);
  Generator& g = gen ? *gen : default_generator();
  const double span = high - low;
  dispatch_dtype(options.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, double> || std::is_same_v<T, float> || is_reduced_float_v<T>) {
      // Rounding low + span * u to T can reach `high`; such draws take the largest T below high
      // (low itself when the interval holds no other T value), so results stay in [low, high).
      const double top = std::max(low, largest_below<T>(high));
      auto in_range = [&](double x) {
        const auto r = static_cast<double>(convert_element<T>(x));
        return r >= high && high > low ? top : r;
      };
      if constexpr (std::is_same_v<T, double>) {
        // 64 random bits (two words) per element, 53 of them used.
        fill_from_blocks<T>(t, g, 2, [&](const std::array<uint32_t, 4>& b, double* v) {
          for (int k = 0; k < 2; ++k) v[k] = in_range(low + span * uint64_to_unit_double(word_pair(b, k)));
        });
      } else {
        fill_from_blocks<T>(t, g, 4, [&](const std::array<uint32_t, 4>& b, double* v) {
          for (int k = 0; k < 4; ++k) v[k] = in_range(low + span * static_cast<double>(uint32_to_unit_float(b[k])));
        });
      }
    }
  });
  return t;
}

Tensor normal_for(const char* op, IntArrayRef sizes, double mean, double std, TensorOptions options, Generator* gen) {
  check_floating(options.dtype, op);
  STRATA_CHECK(std >= 0.0 && std::isfinite(std) && std::isfinite(mean), op,
               ": expects finite mean and std >= 0, got mean ", mean, ", std ", std);
  Tensor t = empty_for(op, sizes, options);
  Generator& g = gen ? *gen : default_generator();
  // Box-Muller: a pair of uniforms (u1 in (0, 1] so the log is finite, u2 in [0, 1)) gives two
  // normals. f64 uses 53-bit uniforms (one block per pair); f32/bf16 use 24-bit ones (two pairs).
  auto box_muller = [&](double u1, double u2, double* v) {
    const double r = std::sqrt(-2.0 * std::log(u1));
    const double theta = 2.0 * std::numbers::pi * u2;
    v[0] = mean + std * r * std::cos(theta);
    v[1] = mean + std * r * std::sin(theta);
  };
  dispatch_dtype(options.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, double>) {
      fill_from_blocks<T>(t, g, 2, [&](const std::array<uint32_t, 4>& b, double* v) {
        box_muller(1.0 - uint64_to_unit_double(word_pair(b, 0)), uint64_to_unit_double(word_pair(b, 1)), v);
      });
    } else if constexpr (std::is_same_v<T, float> || is_reduced_float_v<T>) {
      fill_from_blocks<T>(t, g, 4, [&](const std::array<uint32_t, 4>& b, double* v) {
        for (int pair = 0; pair < 2; ++pair)
          box_muller(1.0 - static_cast<double>(uint32_to_unit_float(b[2 * pair])),
                     static_cast<double>(uint32_to_unit_float(b[2 * pair + 1])), v + 2 * pair);
      });
    }
  });
  return t;
}

}  // namespace

Tensor uniform(IntArrayRef sizes, double low, double high, TensorOptions options, Generator* gen) {
  return uniform_for("uniform", sizes, low, high, options, gen);
}
Tensor rand(IntArrayRef sizes, TensorOptions options, Generator* gen) {
  return uniform_for("rand", sizes, 0.0, 1.0, options, gen);
}
Tensor normal(IntArrayRef sizes, double mean, double std, TensorOptions options, Generator* gen) {
  return normal_for("normal", sizes, mean, std, options, gen);
}
Tensor randn(IntArrayRef sizes, TensorOptions options, Generator* gen) {
  return normal_for("randn", sizes, 0.0, 1.0, options, gen);
}

Tensor eye(int64_t n, std::optional<int64_t> m, TensorOptions options) {
  const int64_t cols = m.value_or(n);
  STRATA_CHECK(n >= 0 && cols >= 0, "eye: n and m must be non-negative, got n = ", n, ", m = ", cols);
  Tensor t = zeros({n, cols}, options);
  PinSet pins;
  pins.add(t, AccessMode::Write).acquire();
  dispatch_dtype(options.dtype, [&](auto tag) {
    using T = decltype(tag);
    T* out = t.data<T>();
    for (int64_t i = 0; i < std::min(n, cols); ++i) out[i * cols + i] = convert_element<T>(1.0);
  });
  return t;
}

Tensor linspace(double start, double end, int64_t steps, TensorOptions options) {
  STRATA_CHECK(steps >= 0, "linspace: number of steps must be non-negative, got ", steps);
  STRATA_CHECK(std::isfinite(start) && std::isfinite(end), "linspace: start ", start, " and end ", end,
               " must be finite");
  if (is_integral(options.dtype)) {  // PyTorch converts the ends to the dtype first
    start = std::trunc(start);
    end = std::trunc(end);
  }
  Tensor t = empty_for("linspace", {steps}, options);
  const double step = steps > 1 ? (end - start) / static_cast<double>(steps - 1) : 0.0;
  const int64_t half = steps / 2;
  dispatch_dtype(options.dtype, [&](auto tag) {
    using T = decltype(tag);
    fill_indexed<T>(t, [&](int64_t i) {
      return i < half ? start + static_cast<double>(i) * step : end - static_cast<double>(steps - 1 - i) * step;
    });
  });
  return t;
}

namespace {

/// The largest integer every smaller non-negative integer of which `dtype` holds exactly.
double largest_exact_integer(DType dtype) {
  switch (dtype) {
    case DType::u8: return 255.0;
    case DType::i32: return 2147483647.0;
    case DType::i64: return 9.2e18;
    case DType::bf16: return 256.0;
    case DType::f16: return 2048.0;
    case DType::f32: return 16777216.0;
    case DType::f64: return 9007199254740992.0;
    default: return 0.0;
  }
}

}  // namespace

Tensor randperm(int64_t n, TensorOptions options, Generator* gen) {
  STRATA_CHECK(n >= 0, "randperm: n must be non-negative, got ", n);
  STRATA_CHECK(options.dtype != DType::boolean, "randperm: dtype bool is not supported");
  STRATA_CHECK(n == 0 || static_cast<double>(n - 1) <= largest_exact_integer(options.dtype), "randperm: n = ", n,
               " is too large for dtype ", options.dtype, " (it must hold n - 1 exactly)");
  std::vector<int64_t> perm(static_cast<std::size_t>(n));
  for (int64_t i = 0; i < n; ++i) perm[static_cast<std::size_t>(i)] = i;
  Generator& g = gen ? *gen : default_generator();
  const PhiloxRange r = g.reserve(static_cast<uint64_t>((n + 1) / 2));
  for (int64_t i = n - 1; i > 0; --i) {  // element i swaps with one of 0..i, word i of the stream
    const uint64_t w = word_pair(r.block(static_cast<uint64_t>(i / 2)), static_cast<int>(i % 2));
    std::swap(perm[static_cast<std::size_t>(i)], perm[static_cast<std::size_t>(w % static_cast<uint64_t>(i + 1))]);
  }
  Tensor t = empty_for("randperm", {n}, options);
  dispatch_dtype(options.dtype, [&](auto tag) {
    using T = decltype(tag);
    fill_indexed<T>(t, [&](int64_t i) { return static_cast<double>(perm[static_cast<std::size_t>(i)]); });
  });
  return t;
}

Tensor randint(int64_t low, int64_t high, IntArrayRef sizes, TensorOptions options, Generator* gen) {
  STRATA_CHECK(is_integral(options.dtype), "randint: expects an integral dtype (i32, i64, u8), got ", options.dtype);
  STRATA_CHECK(low < high, "randint: expects low < high, got low ", low, ", high ", high);
  Tensor t = empty_for("randint", sizes, options);
  Generator& g = gen ? *gen : default_generator();
  const auto range = static_cast<uint64_t>(high) - static_cast<uint64_t>(low);
  dispatch_dtype(options.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
      STRATA_CHECK(low >= static_cast<int64_t>(std::numeric_limits<T>::min()) &&
                       high - 1 <= static_cast<int64_t>(std::numeric_limits<T>::max()),
                   "randint: range [", low, ", ", high, ") does not fit dtype ", options.dtype);
      // 64 random bits mod range: the bias is below range / 2^64, negligible at tensor sizes.
      const int64_t numel = t.numel();
      const auto blocks = static_cast<uint64_t>((numel + 1) / 2);
      const PhiloxRange r = g.reserve(blocks);
      PinSet pins;
      pins.add(t, AccessMode::Write).acquire();
      T* out = t.data<T>();
      parallel_for(static_cast<int64_t>(blocks), 4096, [&](int64_t begin, int64_t end) {
        for (int64_t j = begin; j < end; ++j) {
          const auto b = r.block(static_cast<uint64_t>(j));
          for (int k = 0; k < 2 && 2 * j + k < numel; ++k)
            out[2 * j + k] = static_cast<T>(static_cast<int64_t>(static_cast<uint64_t>(low) + word_pair(b, k) % range));
        }
      });
    }
  });
  return t;
}

Tensor from_blob(void* data, IntArrayRef sizes, DType dtype, std::function<void(void*)> deleter,
                 std::optional<IntArrayRef> strides) {
  const int64_t numel = checked_numel(sizes, "from_blob");
  STRATA_CHECK(data != nullptr || numel == 0, "from_blob: null data pointer for ", numel, " elements");
  const Dims st = strides ? strides->to_dims() : contiguous_strides(sizes);
  STRATA_CHECK(st.size() == sizes.size(), "from_blob: sizes ", sizes, " and strides ", st, " have different lengths");
  int64_t extent = 0;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    STRATA_CHECK(st[i] >= 0, "from_blob: negative stride ", st[i], " at dim ", i, " is not supported");
    extent += (sizes[i] - 1) * st[i];
  }
  const std::size_t nbytes = numel == 0 ? 0 : static_cast<std::size_t>(extent + 1) * itemsize(dtype);
  Storage storage = Storage::wrap(std::make_unique<ExternalAllocation>(data, nbytes, std::move(deleter)));
  return Tensor(std::move(storage), sizes, st, 0, dtype);
}

Tensor from_buffer(const void* data, std::size_t nbytes, IntArrayRef sizes, DType dtype, TensorOptions options) {
  options.dtype = dtype;
  Tensor t = empty_for("from_buffer", sizes, options);
  STRATA_CHECK(nbytes == t.nbytes(), "from_buffer: got ", nbytes, " bytes but sizes ", sizes, " of dtype ", dtype,
               " need ", t.nbytes());
  STRATA_CHECK(data != nullptr || nbytes == 0, "from_buffer: null data pointer for ", nbytes, " bytes");
  if (nbytes == 0) return t;
  PinSet pins;
  pins.add(t, AccessMode::Write).acquire();
  if (dtype == DType::boolean) {
    // Any non-zero byte is true; store canonical 0/1 so later reads as `bool` are well defined.
    const auto* src = static_cast<const uint8_t*>(data);
    auto* dst = static_cast<uint8_t*>(t.data_ptr());
    for (std::size_t i = 0; i < nbytes; ++i) dst[i] = src[i] != 0;
  } else {
    std::memcpy(t.data_ptr(), data, nbytes);
  }
  return t;
}

Tensor scalar_tensor(double value, DType dtype) { return full_for("scalar_tensor", {}, value, {dtype, nullptr}); }

Tensor scalar_tensor(const Scalar& value, DType dtype) {
  Tensor t = empty_for("scalar_tensor", {}, {dtype, nullptr});
  PinSet pins;
  pins.add(t, AccessMode::Write).acquire();
  dispatch_dtype(dtype, [&](auto tag) { *static_cast<decltype(tag)*>(t.data_ptr()) = value.to<decltype(tag)>(); });
  return t;
}

}  // namespace strata
