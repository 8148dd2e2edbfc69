#pragma once
// The op harness: one registry of cases covering every op of ops/op_list.h. The same cases drive
// the generic tests (tests/cpp/ops/test_op_harness.cpp) and the op micro-benchmarks
// (bench/ops_micro.cpp).
//
// A case gives inputs in f64, the op under test, and a naive f64 reference. The generic tests
//  - compare the op in f64 and in f32 with the reference (forward),
//  - check every gradient input by central finite differences in f64,
//  - rerun forward and backward with non-contiguous views of the inputs and compare,
//  - for cases with two or more floating inputs, mix f32 and f64 and expect an error naming both,
//    or, for ops that promote (`promotes`), an f64 result that matches the reference and an f32
//    gradient for the f32 input (Note [Type promotion] in core/type_promotion.h),
//  - check that every op in the op list has at least one case,
//  - for cases with NaN or ±inf inputs (Note [Non-finite cases]), compare the gradients with an f64
//    reference of PyTorch's rules instead of finite differences.
// Bad-input cases (BadInputCase) each call the op wrongly and list substrings the error must hold.

#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "autograd/node.h"
#include "core/factories.h"
#include "core/rng.h"
#include "core/tensor.h"
#include "ops/op_list.h"

namespace strata::testing {

using TensorList = std::vector<Tensor>;

struct OpCase {
  std::string name;  // "<op>/<variant>", unique, e.g. "relu/basic", "add/broadcast"
  OpKind op;
  /// Inputs at the test size. Floating inputs are f64; the harness converts them to the tested
  /// dtype. Integer inputs (indices, targets) are passed through unchanged.
  std::function<TensorList(Generator&)> inputs;
  /// The op under test (differentiable); returns its outputs.
  std::function<TensorList(const TensorList&)> run;
  /// Naive f64 reference on contiguous f64 copies of the inputs (written with plain loops, not
  /// with Strata ops); returns f64 outputs with the op's shapes.
  std::function<TensorList(const TensorList&)> reference;
  /// Indices of the inputs whose gradients are checked by finite differences (floating only).
  std::vector<int> grad_inputs;
  double f32_rtol = 1e-4, f32_atol = 1e-5;    // f32 forward vs the f64 reference
  double f64_rtol = 1e-10, f64_atol = 1e-12;  // f64 forward vs the f64 reference
  double fd_eps = 1e-6, fd_rtol = 1e-5, fd_atol = 1e-7;
  /// Cases whose inputs hold NaN or ±inf (Note [Non-finite cases]): the f64 gradients of
  /// Σ_k out_k · weights_k w.r.t. each of grad_inputs, by PyTorch 2.13's rules. When set, the
  /// analytic f64 and f32 gradients are compared with it instead of with finite differences.
  std::function<TensorList(const TensorList& inputs, const TensorList& weights)> grad_reference;
  /// Also run with non-contiguous views of every input of rank >= 1.
  bool noncontiguous = true;
  /// Benchmark-sized f32 inputs (same layout as `inputs`); unset: not benchmarked.
  std::function<TensorList(Generator&)> bench_inputs;
  /// The op promotes mixed floating inputs to their result type instead of refusing them.
  bool promotes = false;
};

struct BadInputCase {
  std::string name;  // "<op>/<what is wrong>"
  OpKind op;
  std::function<void()> call;       // must throw strata::Error
  std::vector<std::string> expect;  // substrings the message must contain
};

std::vector<OpCase>& op_cases();
std::vector<BadInputCase>& bad_input_cases();

struct Register {
  explicit Register(OpCase c) { op_cases().push_back(std::move(c)); }
  explicit Register(BadInputCase c) { bad_input_cases().push_back(std::move(c)); }
};

// ---- helpers for writing cases ------------------------------------------------------------------

/// f64 tensor with values uniform in [lo, hi).
Tensor uniform64(IntArrayRef sizes, Generator& gen, double lo = -1.0, double hi = 1.0);
/// f64 tensor of normal values.
Tensor randn64(IntArrayRef sizes, Generator& gen);
/// f32 tensor of normal values (for bench_inputs).
Tensor randn32(IntArrayRef sizes, Generator& gen);
/// `c` with benchmark inputs made by `make` (f32 floating inputs, same layout as c.inputs; for
/// cases whose inputs are not one tensor). See bench/ops_micro.cpp.
OpCase with_bench_inputs(OpCase c, std::function<TensorList(Generator&)> make);
/// `c` with one f32 benchmark input of `sizes`: normal values (randn32), or uniform in [lo, hi).
OpCase with_bench(OpCase c, Dims sizes);
OpCase with_bench(OpCase c, Dims sizes, double lo, double hi);
/// i64 tensor of values in [lo, hi).
Tensor randint64(int64_t lo, int64_t hi, IntArrayRef sizes, Generator& gen);
/// Contiguous f64 tensor from values.
Tensor from_values(const std::vector<double>& values, IntArrayRef sizes);
/// Contiguous i64 tensor from values.
Tensor from_indices(const std::vector<int64_t>& values, IntArrayRef sizes);
/// A contiguous f64 copy's elements as a vector (for writing references).
std::vector<double> values_of(const Tensor& t);
std::vector<int64_t> indices_of(const Tensor& t);
/// A case "name" for y = fn(x), x made by `input`, against the f64 reference `ref` applied to each
/// element; the gradient of x is checked by finite differences.
OpCase unary_case(std::string name, OpKind op, std::function<Tensor(const Tensor&)> fn,
                  std::function<double(double)> ref, std::function<Tensor(Generator&)> input);
/// The f64 reference of a broadcasting binary op: f(a, b) over the broadcast shape of in[0], in[1].
Tensor broadcast_reference(const TensorList& in, const std::function<double(double, double)>& f);
/// A non-contiguous view holding the same values (rank >= 1; rank-0 tensors are returned as is).
Tensor noncontiguous(const Tensor& t);

// Note [Non-finite cases]
// Issue 24: NaN and ±inf propagate through every op as through PyTorch 2.13's. Cases named
// "<op>/nonfinite..." feed NaN, +inf, -inf (and ±0) and their references follow PyTorch's rules
// (checked with torch 2.13 when written; tests/python/test_nonfinite.py compares the same ops with
// torch itself). The forward comparison treats NaN as equal to NaN and ±inf as equal to themselves;
// gradients come from `grad_reference`, since finite differences mean nothing there.
inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
inline constexpr double kInf = std::numeric_limits<double>::infinity();
/// f64 values in [-1, 1) of `sizes` with NaN, +inf, -inf, +0 and -0 at every 5th, 7th, 11th, 13th
/// and 17th element (offset by `shift`), the rest uniform.
Tensor with_nonfinite(IntArrayRef sizes, Generator& gen, int64_t shift = 0);

}  // namespace strata::testing

#define STRATA_CONCAT_INNER(a, b) a##b
#define STRATA_CONCAT(a, b) STRATA_CONCAT_INNER(a, b)
/// Registers an OpCase or BadInputCase at static-initialization time:
///   STRATA_REGISTER_CASE(OpCase{...});
#define STRATA_REGISTER_CASE(...) static ::strata::testing::Register STRATA_CONCAT(strata_case_, __LINE__)(__VA_ARGS__)
