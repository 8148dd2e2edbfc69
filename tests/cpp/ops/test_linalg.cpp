// Tests of ops/linalg.h the harness cannot express: large f32 products against f64, strided and
// transposed operands against contiguous ones, empty shapes, linear_stack's row blocks against the
// chain of linear calls, the GEMM layer's kernels.

#include <gtest/gtest.h>
#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <type_traits>
#include <vector>

#include "autograd/engine.h"
#include "autograd/grad_mode.h"
#include "core/factories.h"
#include "core/threading.h"
#include "ops/detail/cpu/gemm.h"
#include "ops/linalg.h"
#include "tests/cpp/error_text.h"
#include "tests/cpp/ops/harness/op_harness.h"

namespace strata {
namespace {

std::vector<double> values(const Tensor& t) {
  Tensor c = t.to(DType::f64).contiguous();
  const double* p = c.data<double>();
  return {p, p + c.numel()};
}

/// Max |a - b| / (1 + |b|) over the elements.
double max_rel_diff(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.sizes(), b.sizes());
  const auto av = values(a), bv = values(b);
  double worst = 0;
  for (std::size_t i = 0; i < av.size(); ++i) worst = std::max(worst, std::abs(av[i] - bv[i]) / (1 + std::abs(bv[i])));
  return worst;
}

bool bitwise_equal(const Tensor& a, const Tensor& b) {
  if (a.sizes() != b.sizes() || a.dtype() != b.dtype()) return false;
  const auto av = values(a), bv = values(b);
  for (std::size_t i = 0; i < av.size(); ++i)
    if (av[i] != bv[i]) return false;
  return true;
}

TEST(Linalg, LargeF32LinearMatchesF64) {
  Generator gen(7);
  const Tensor x = randn({300, 500}, {DType::f64, nullptr}, &gen);
  const Tensor w = randn({400, 500}, {DType::f64, nullptr}, &gen);
  const Tensor b = randn({400}, {DType::f64, nullptr}, &gen);
  for (Activation act : {Activation::None, Activation::ReLU, Activation::GELU, Activation::Sigmoid, Activation::Tanh}) {
    const Tensor y64 = linear(x, w, b, act);
    const Tensor y32 = linear(x.to(DType::f32), w.to(DType::f32), b.to(DType::f32), act);
    EXPECT_EQ(y32.dtype(), DType::f32);
    // 500-term sums of N(0,1) products have magnitude ~22: f32 rounding gives ~1e-5 relative error.
    EXPECT_LT(max_rel_diff(y32, y64), 1e-4) << "activation " << static_cast<int>(act);
  }
  // And the f64 kernel against a plain loop.
  const Tensor y = linear(x, w, b);
  const auto xv = values(x), wv = values(w), bv = values(b), yv = values(y);
  double worst = 0;
  for (int64_t i = 0; i < 300; i += 7)
    for (int64_t j = 0; j < 400; j += 3) {
      double s = bv[j];
      for (int64_t p = 0; p < 500; ++p) s += xv[i * 500 + p] * wv[j * 500 + p];
      worst = std::max(worst, std::abs(s - yv[i * 400 + j]));
    }
  EXPECT_LT(worst, 1e-11);
}

TEST(Linalg, LargeF32MatmulAndGradientsMatchF64) {
  Generator gen(8);
  const Tensor a64 = randn({3, 150, 260}, {DType::f64, nullptr}, &gen);
  const Tensor b64 = randn({260, 170}, {DType::f64, nullptr}, &gen);
  const Tensor g64 = randn({3, 150, 170}, {DType::f64, nullptr}, &gen);
  std::vector<Tensor> grads[2];
  for (int which = 0; which < 2; ++which) {
    const DType dt = which == 0 ? DType::f64 : DType::f32;
    Tensor a = a64.to(dt, true), b = b64.to(dt, true);
    a.set_requires_grad(true);
    b.set_requires_grad(true);
    const Tensor y = matmul(a, b);
    y.backward(g64.to(dt));
    grads[which] = {y, a.grad(), b.grad()};
  }
  for (int i = 0; i < 3; ++i) EXPECT_LT(max_rel_diff(grads[1][i], grads[0][i]), 1e-4) << "tensor " << i;
}

TEST(Linalg, TransposedAndStridedOperandsMatchContiguous) {
  Generator gen(9);
  for (DType dt : {DType::f32, DType::f64}) {
    const Tensor a = randn({64, 48}, {dt, nullptr}, &gen);
    const Tensor b = randn({48, 80}, {dt, nullptr}, &gen);
    const Tensor ref = matmul(a, b);
    // Transposed views (unit stride in the other dim): passed to the GEMM with a transpose flag.
    const Tensor at = a.t().contiguous().t(), bt = b.t().contiguous().t();
    EXPECT_FALSE(at.is_contiguous());
    EXPECT_TRUE(bitwise_equal(matmul(at, b), ref)) << dt;
    EXPECT_TRUE(bitwise_equal(matmul(a, bt), ref)) << dt;
    EXPECT_TRUE(bitwise_equal(matmul(at, bt), ref)) << dt;
    // Neither stride 1 (every second column of a wider tensor): copied once, same result.
    const Tensor wide = zeros({64, 96}, {dt, nullptr});
    Tensor as = wide.slice(1, 0, std::nullopt, 2);
    as.copy_(a);
    EXPECT_TRUE(bitwise_equal(matmul(as, b), ref)) << dt;
    // A row-sliced view (leading dim larger than the row): no copy needed.
    const Tensor tall = randn({64, 60}, {dt, nullptr}, &gen);
    const Tensor sub = tall.narrow(1, 5, 48);
    EXPECT_TRUE(bitwise_equal(matmul(sub, b), matmul(sub.contiguous(), b))) << dt;
    // linear with a transposed weight view and a batched non-contiguous input.
    const Tensor w = randn({32, 48}, {dt, nullptr}, &gen);
    const Tensor bias = randn({32}, {dt, nullptr}, &gen);
    const Tensor wt = w.t().contiguous().t();
    EXPECT_TRUE(bitwise_equal(linear(a, wt, bias, Activation::ReLU), linear(a, w, bias, Activation::ReLU))) << dt;
    const Tensor x3 = randn({4, 16, 48}, {dt, nullptr}, &gen);
    const Tensor x3t = x3.transpose(0, 1).contiguous().transpose(0, 1);  // batch dims not foldable
    EXPECT_FALSE(x3t.is_contiguous());
    EXPECT_LT(max_rel_diff(linear(x3t, w, bias), linear(x3, w, bias)), dt == DType::f32 ? 1e-6 : 1e-14) << dt;
    // bmm with transposed batch matrices.
    const Tensor p = randn({5, 12, 20}, {dt, nullptr}, &gen), q = randn({5, 20, 9}, {dt, nullptr}, &gen);
    const Tensor pt = p.transpose(1, 2).contiguous().transpose(1, 2);
    EXPECT_TRUE(bitwise_equal(bmm(pt, q), bmm(p, q))) << dt;
  }
}

TEST(Linalg, EmptyShapes) {
  for (DType dt : {DType::f32, DType::f64}) {
    Tensor a = zeros({0, 3}, {dt, nullptr}), b = ones({3, 4}, {dt, nullptr});
    EXPECT_EQ(matmul(a, b).sizes(), Dims({0, 4}));
    // k = 0: the product is zeros, and so are the gradients.
    Tensor c = ones({2, 0}, {dt, nullptr}), d = ones({0, 3}, {dt, nullptr});
    c.set_requires_grad(true);
    d.set_requires_grad(true);
    Tensor y = matmul(c, d);
    EXPECT_EQ(y.sizes(), Dims({2, 3}));
    for (double v : values(y)) EXPECT_EQ(v, 0.0);
    y.backward(ones({2, 3}, {dt, nullptr}));
    EXPECT_EQ(c.grad().sizes(), Dims({2, 0}));
    EXPECT_EQ(d.grad().sizes(), Dims({0, 3}));
    // An empty batch broadcast against a weight that needs a (zero) gradient.
    Tensor e = ones({0, 2, 3}, {dt, nullptr}), w = ones({4, 3}, {dt, nullptr}), bias = ones({4}, {dt, nullptr});
    w.set_requires_grad(true);
    bias.set_requires_grad(true);
    Tensor z = linear(e, w, bias, Activation::ReLU);
    EXPECT_EQ(z.sizes(), Dims({0, 2, 4}));
    z.backward(zeros({0, 2, 4}, {dt, nullptr}));
    for (double v : values(w.grad())) EXPECT_EQ(v, 0.0);
    for (double v : values(bias.grad())) EXPECT_EQ(v, 0.0);
    EXPECT_EQ(bmm(zeros({0, 2, 3}, {dt, nullptr}), zeros({0, 3, 4}, {dt, nullptr})).sizes(), Dims({0, 2, 4}));
  }
}

TEST(Linalg, NoGradientThroughUnneededInputs) {
  Tensor x = ones({2, 3}, {DType::f64, nullptr}), w = ones({4, 3}, {DType::f64, nullptr});
  w.set_requires_grad(true);
  Tensor y = linear(x, w, Tensor(), Activation::Tanh);
  EXPECT_TRUE(y.requires_grad());
  y.backward(ones({2, 4}, {DType::f64, nullptr}));
  EXPECT_FALSE(x.grad().defined());
  // d tanh(3)/dz · Σ_rows x = (1 - tanh(3)²) · 2 for every weight entry.
  const double expect = (1 - std::tanh(3.0) * std::tanh(3.0)) * 2;
  for (double v : values(w.grad())) EXPECT_NEAR(v, expect, 1e-14);
}

// ---- linear_stack ---------------------------------------------------------------------------------

/// Restores the thread count at scope exit.
struct ThreadsGuard {
  int saved = get_num_threads();
  ~ThreadsGuard() { set_num_threads(saved); }
};

/// An MLP's layers: widths [in, out_0, out_1, ...], one activation per layer, layer `no_bias`
/// without a bias; weights of variance 1/in so that activations stay O(1).
std::vector<LinearLayer> stack_layers(const std::vector<int64_t>& widths, const std::vector<Activation>& acts, DType dt,
                                      Generator& gen, std::size_t no_bias = 99) {
  std::vector<LinearLayer> layers;
  for (std::size_t i = 0; i + 1 < widths.size(); ++i) {
    const double bound = std::sqrt(3.0 / static_cast<double>(widths[i]));
    const Tensor w = uniform({widths[i + 1], widths[i]}, -bound, bound, {dt, nullptr}, &gen);
    layers.push_back({w, i == no_bias ? Tensor() : randn({widths[i + 1]}, {dt, nullptr}, &gen), acts[i]});
  }
  return layers;
}

Tensor linear_chain(const Tensor& x, const std::vector<LinearLayer>& layers) {
  Tensor y = x;
  for (const LinearLayer& l : layers) y = linear(y, l.weight, l.bias, l.act);
  return y;
}

/// Max |a - b| / (1 + |b|) over the finite elements; non-finite ones must be equal (NaN = NaN).
double max_rel_diff_or_inf(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.sizes(), b.sizes());
  const auto av = values(a), bv = values(b);
  double worst = 0;
  for (std::size_t i = 0; i < av.size(); ++i) {
    if (std::isfinite(av[i]) && std::isfinite(bv[i]))
      worst = std::max(worst, std::abs(av[i] - bv[i]) / (1 + std::abs(bv[i])));
    else if (!(std::isnan(av[i]) && std::isnan(bv[i])) && av[i] != bv[i])
      return std::numeric_limits<double>::infinity();
  }
  return worst;
}

TEST(LinearStack, RowBlocksMatchTheChainOfLinears) {
  // Note [Row blocks through a linear stack]: every activation, a layer without bias, 1 and 2
  // threads, block counts that do not divide the rows; f32 within its rounding (sgemm may order a
  // block's sums differently), f64 (Strata's blocked kernel) to the last bits.
  ThreadsGuard threads;
  Generator gen(21);
  autograd::NoGradGuard no_grad;
  // The 1024-wide layer makes blocks of 128 (f32) and 64 (f64) rows: 5 to 17 blocks here.
  for (int n : {1, 2}) {
    set_num_threads(n);
    for (DType dt : {DType::f32, DType::f64}) {
      const auto layers =
          stack_layers({37, 1024, 64, 17, 9, 1},
                       {Activation::ReLU, Activation::GELU, Activation::Tanh, Activation::None, Activation::Sigmoid},
                       dt, gen, /*no_bias=*/2);
      const int64_t rows = n == 1 ? 600 : 1031;
      const Tensor x = randn({rows, 37}, {dt, nullptr}, &gen);
      EXPECT_GE(linear_stack_blocks(x, layers), 2 * n) << rows << " rows, " << dt;
      const Tensor y = linear_stack(x, layers);
      EXPECT_EQ(y.sizes(), Dims({rows, 1}));
      EXPECT_LT(max_rel_diff(y, linear_chain(x, layers)), dt == DType::f32 ? 1e-5 : 1e-13)
          << rows << " rows, " << dt << ", " << n << " threads";
    }
  }
}

TEST(LinearStack, BatchedStridedAndNonFiniteInputs) {
  ThreadsGuard threads;
  set_num_threads(2);
  Generator gen(22);
  autograd::NoGradGuard no_grad;
  auto layers = stack_layers({40, 256, 64}, {Activation::ReLU, Activation::Sigmoid}, DType::f32, gen);
  layers[0].weight = layers[0].weight.t().contiguous().t();  // a transposed view
  EXPECT_FALSE(layers[0].weight.is_contiguous());
  Tensor x = randn({700, 3, 40}, {}, &gen);
  float* p = x.data<float>();
  p[5 * 40 + 7] = std::numeric_limits<float>::quiet_NaN();  // NaN passes ReLU (Note [ReLU and NaN])
  p[1200 * 40 + 3] = std::numeric_limits<float>::infinity();
  const Tensor xt = x.transpose(0, 1);  // [3, 700, 40], batch dims not foldable
  EXPECT_FALSE(xt.is_contiguous());
  ASSERT_GT(linear_stack_blocks(xt, layers), 0);
  const Tensor y = linear_stack(xt, layers), ref = linear_chain(xt, layers);
  EXPECT_EQ(y.sizes(), Dims({3, 700, 64}));
  EXPECT_LT(max_rel_diff_or_inf(y, ref), 1e-5);
  int64_t nan_rows = 0;
  for (double v : values(y)) nan_rows += std::isnan(v);
  EXPECT_GT(nan_rows, 0);  // the non-finite inputs reached the output, as in the chain
}

TEST(LinearStack, RecordsAsTheChainWhenAGradientIsNeeded) {
  ThreadsGuard threads;
  set_num_threads(2);
  Generator gen(23);
  auto layers = stack_layers({13, 64, 16}, {Activation::ReLU, Activation::Tanh}, DType::f64, gen);
  for (LinearLayer& l : layers) {
    l.weight.set_requires_grad(true);
    l.bias.set_requires_grad(true);
  }
  const Tensor x = randn({2048, 13}, {DType::f64, nullptr}, &gen);
  EXPECT_EQ(linear_stack_blocks(x, layers), 0);  // grad mode and parameters that require grad
  const Tensor g = randn({2048, 16}, {DType::f64, nullptr}, &gen);
  const Tensor y = linear_stack(x, layers);
  ASSERT_TRUE(y.requires_grad());
  y.backward(g);
  std::vector<Tensor> grads;
  for (LinearLayer& l : layers) {
    grads.push_back(l.weight.grad());
    l.weight.set_grad(Tensor());
    l.bias.set_grad(Tensor());
  }
  linear_chain(x, layers).backward(g);
  for (std::size_t i = 0; i < layers.size(); ++i) EXPECT_TRUE(bitwise_equal(grads[i], layers[i].weight.grad())) << i;
  // Without grad mode the same call takes row blocks and records nothing; few rows never do.
  autograd::NoGradGuard no_grad;
  EXPECT_GT(linear_stack_blocks(x, layers), 0);
  EXPECT_FALSE(linear_stack(x, layers).requires_grad());
  EXPECT_EQ(linear_stack_blocks(x.narrow(0, 0, 10), layers), 0);
  EXPECT_LT(max_rel_diff(linear_stack(x, layers), y.detach()), 1e-13);
}

TEST(LinearStack, BadInputIsNamed) {
  Generator gen(24);
  const auto layers = stack_layers({5, 6, 4}, {Activation::ReLU, Activation::None}, DType::f32, gen);
  const Tensor x = randn({3, 5}, {}, &gen);
  EXPECT_ERROR_HAS(linear_stack(x, {}), "linear_stack: no layers");
  EXPECT_ERROR_HAS(linear_stack(randn({3, 4}, {}, &gen), layers),
                   "linear_stack: layer 0's weight Tensor[6, 5] f32 does not take the input Tensor[3, 4] f32 "
                   "(in_features 4 and 5)");
  auto bad = layers;
  bad[1].weight = randn({4, 7}, {}, &gen);
  EXPECT_ERROR_HAS(linear_stack(x, bad), "layer 1's weight");
  EXPECT_ERROR_HAS(linear_stack(x, bad), "does not take layer 0's output (in_features 6 and 7)");
  bad = layers;
  bad[1].bias = randn({5}, {}, &gen);
  EXPECT_ERROR_HAS(linear_stack(x, bad), "linear_stack: layer 1's bias must be [4]");
  bad = layers;
  bad[0].weight = randn({6, 5}, {DType::f64, nullptr}, &gen);
  EXPECT_ERROR_HAS(linear_stack(x, bad), "linear_stack: dtype mismatch");
  bad = layers;
  bad[0].weight = Tensor();
  EXPECT_ERROR_HAS(linear_stack(x, bad), "linear_stack: layer 0's weight is undefined");
  bad = layers;
  bad[1].weight = randn({24}, {}, &gen);
  EXPECT_ERROR_HAS(linear_stack(x, bad), "linear_stack: layer 1's weight must be 2-D");
  EXPECT_ERROR_HAS(linear_stack(tensor<int64_t>({1, 2, 3, 4, 5}), layers), "linear_stack: input must be f32 or f64");
  EXPECT_ERROR_HAS(linear_stack(full({}, 1.0), layers), "linear_stack: input must be at least 1-D");
  EXPECT_ERROR_HAS(linear_stack_blocks(full({}, 1.0), layers), "linear_stack: input must be at least 1-D");
  EXPECT_ERROR_HAS(linear_stack_blocks(x, {}), "linear_stack: no layers");
  // The same checks on the row-block path (many rows, no gradient).
  autograd::NoGradGuard no_grad;
  bad = layers;
  bad[1].weight = randn({4, 7}, {}, &gen);
  EXPECT_ERROR_HAS(linear_stack(randn({5000, 5}, {}, &gen), bad), "does not take layer 0's output");
}

// ---- the GEMM layer ---------------------------------------------------------------------------------

template <typename T>
void check_gemm_against_naive(int64_t M, int64_t N, int64_t K, bool accumulate, bool blocked) {
  Generator gen(static_cast<uint64_t>(M * 1000003 + N * 1009 + K));
  const DType dt = std::is_same_v<T, float> ? DType::f32 : DType::f64;
  const Tensor a = randn({M, K}, {dt, nullptr}, &gen), b = randn({K, N}, {dt, nullptr}, &gen);
  // C starts as NaN: with accumulate=false (beta = 0) it must never be read.
  Tensor c = full({M, N}, accumulate ? 1.0 : std::numeric_limits<double>::quiet_NaN(), {dt, nullptr});
  const ops::cpu::MatRef<T> am{a.data<T>(), M, K, K, 1}, bm{b.data<T>(), K, N, N, 1};
  if (blocked)
    ops::cpu::gemm_blocked<T>(am, bm, c.data<T>(), N, accumulate, true);
  else
    ops::cpu::gemm(am, bm, c.data<T>(), N, accumulate);
  const auto av = values(a), bv = values(b), cv = values(c);
  double worst = 0;
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double s = accumulate ? 1.0 : 0.0;
      for (int64_t p = 0; p < K; ++p) s += av[i * K + p] * bv[p * N + j];
      worst = std::max(worst, std::abs(s - cv[i * N + j]) / (1 + std::abs(s)));
    }
  const double tol = std::is_same_v<T, float> ? 2e-5 : 1e-13;
  EXPECT_LT(worst, tol) << M << "x" << N << "x" << K << " accumulate " << accumulate << " blocked " << blocked;
}

TEST(Gemm, KernelsMatchNaiveOnOddShapes) {
  // Edges of every register tile and cache block: MR 6, NR 16/8, KC 256, MC 96/72, NC 1024/512.
  for (auto [M, N, K] : std::vector<std::array<int64_t, 3>>{
           {1, 1, 1}, {5, 7, 3}, {37, 53, 71}, {97, 17, 300}, {130, 530, 260}, {7, 1100, 40}, {200, 3, 513}}) {
    for (bool acc : {false, true}) {
      check_gemm_against_naive<double>(M, N, K, acc, true);
      check_gemm_against_naive<float>(M, N, K, acc, true);
      check_gemm_against_naive<float>(M, N, K, acc, false);
    }
  }
}

TEST(Gemm, BlockedKernelReadsAnyStrides) {
  Generator gen(11);
  const Tensor a = randn({40, 30}, {DType::f64, nullptr}, &gen), b = randn({30, 50}, {DType::f64, nullptr}, &gen);
  const Tensor ref = matmul(a, b);
  // Store a and b column-major with a gap, and pass them as strided views.
  const Tensor ab = zeros({30, 41 * 2}, {DType::f64, nullptr});
  Tensor av = ab.slice(1, 0, 80, 2).t();  // [40, 30] strides (2, 82)
  av.copy_(a);
  Tensor c = empty({40, 50}, {DType::f64, nullptr});
  ops::cpu::gemm_blocked<double>({av.data<double>(), 40, 30, av.stride(0), av.stride(1)},
                                 {b.data<double>(), 30, 50, 50, 1}, c.data<double>(), 50, false, true);
  EXPECT_LT(max_rel_diff(c, ref), 1e-14);
}

// ---- every GEMM path over stored layouts -------------------------------------------------------------

/// One f32 operand stored 'N' (row-major, leading dim ld >= cols) or 'T' (column-major, ld >=
/// rows), with padding between rows or columns, filled from `gen`.
struct StoredOperand {
  std::vector<float> data;
  ops::cpu::MatRef<float> ref;
};

StoredOperand stored_operand(int64_t rows, int64_t cols, char trans, int64_t pad, Generator& gen) {
  StoredOperand s;
  const int64_t ld = (trans == 'N' ? cols : rows) + pad;
  const int64_t outer = trans == 'N' ? rows : cols;
  const Tensor v = randn({outer * ld}, {DType::f32, nullptr}, &gen);
  s.data.assign(v.data<float>(), v.data<float>() + outer * ld);
  s.ref = trans == 'N' ? ops::cpu::MatRef<float>{nullptr, rows, cols, ld, 1}
                       : ops::cpu::MatRef<float>{nullptr, rows, cols, 1, ld};
  s.ref.data = s.data.data();
  return s;
}

/// The double-precision product of two stored operands and, per element, Σ|terms| (the scale of
/// f32 rounding, which grows with it and not with the possibly cancelling sum).
struct NaiveProduct {
  std::vector<double> sum, magnitude;
};

NaiveProduct naive_product(const StoredOperand& a, const StoredOperand& b) {
  const int64_t M = a.ref.rows, K = a.ref.cols, N = b.ref.cols;
  NaiveProduct r{std::vector<double>(M * N, 0.0), std::vector<double>(M * N, 0.0)};
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j)
      for (int64_t p = 0; p < K; ++p) {
        const double t =
            double(a.ref.data[i * a.ref.rs + p * a.ref.cs]) * double(b.ref.data[p * b.ref.rs + j * b.ref.cs]);
        r.sum[i * N + j] += t;
        r.magnitude[i * N + j] += std::abs(t);
      }
  return r;
}

/// Runs gemm on the stored operands into C (leading dim N + 3, padding holding a sentinel) and
/// checks every element against the double-precision product and the padding as untouched. A
/// misread element is off by a whole term, ~1/√K of Σ|terms|, far above the tolerance.
void check_gemm_call(const StoredOperand& a, const StoredOperand& b, const NaiveProduct& ref, bool accumulate,
                     bool parallel, const char* what) {
  const int64_t M = a.ref.rows, K = a.ref.cols, N = b.ref.cols;
  const int64_t ldc = N + 3;
  constexpr float kSentinel = 12345.0f;
  std::vector<float> c(static_cast<std::size_t>(M * ldc), kSentinel);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j)  // beta = 0 must not read C: NaN; beta = 1 adds to a known value
      c[i * ldc + j] =
          accumulate ? static_cast<float>(0.25 * ((i + 2 * j) % 7)) : std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> c0 = c;
  ops::cpu::gemm(a.ref, b.ref, c.data(), ldc, accumulate, parallel);
  double worst = 0;
  int64_t bad_padding = 0;
  for (int64_t i = 0; i < M; ++i) {
    for (int64_t j = 0; j < N; ++j) {
      const double base = accumulate ? c0[i * ldc + j] : 0.0;
      const double sum = base + ref.sum[i * N + j], magnitude = std::abs(base) + ref.magnitude[i * N + j];
      const double got = c[i * ldc + j];
      worst = std::max(worst, std::isnan(got) ? INFINITY : std::abs(got - sum) / (1 + magnitude));
    }
    for (int64_t j = N; j < ldc; ++j) bad_padding += c[i * ldc + j] != kSentinel;
  }
  EXPECT_LT(worst, 1e-5) << what << " " << M << "x" << N << "x" << K << " accumulate " << accumulate << " parallel "
                         << parallel;
  EXPECT_EQ(bad_padding, 0) << what << ": C's padding between rows was written";
}

TEST(Gemm, EveryPathMatchesNaiveOverTransposesAndOddShapes) {
  // Tiny products take the own kernel, the rest dnnl_sgemm (the own kernel everywhere under TSan);
  // parallel = false is how batched callers run them.
  for (auto [M, N, K] :
       std::vector<std::array<int64_t, 3>>{{5, 7, 3}, {37, 53, 71}, {1, 700, 9}, {130, 29, 260}, {33, 1030, 1025}}) {
    for (char ta : {'N', 'T'})
      for (char tb : {'N', 'T'}) {
        SCOPED_TRACE(::testing::Message() << ta << tb);
        Generator gen(static_cast<uint64_t>(M * 7 + N * 11 + K * 13 + ta * 17 + tb));
        const StoredOperand a = stored_operand(M, K, ta, ta == 'N' ? 2 : 5, gen);
        const StoredOperand b = stored_operand(K, N, tb, tb == 'N' ? 3 : 1, gen);
        const NaiveProduct ref = naive_product(a, b);
        for (bool acc : {false, true})
          for (bool par : {true, false}) check_gemm_call(a, b, ref, acc, par, "gemm");
      }
  }
}

TEST(Gemm, OperandsModifiedInPlaceAreReadAfresh) {
  Generator gen(5);
  StoredOperand x = stored_operand(48, 1024, 'N', 0, gen);
  StoredOperand w = stored_operand(1024, 1031, 'T', 0, gen);
  check_gemm_call(x, w, naive_product(x, w), false, true, "first call");
  // Same addresses, new values: nothing derived from the old values may be reused.
  for (float& v : x.data) v = -0.5f * v + 0.125f;
  for (float& v : w.data) v = 2.0f * v - 0.25f;
  check_gemm_call(x, w, naive_product(x, w), false, true, "after in-place modification");
}

}  // namespace
}  // namespace strata
