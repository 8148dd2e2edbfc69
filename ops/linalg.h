#pragma once
/// @file
/// Matrix products (differentiable; f32 and f64; any strides; outputs contiguous).
///
/// f32 products run on oneDNN's `dnnl_sgemm`, f64 products (and tiny f32 ones) on Strata's own
/// cache-blocked kernel (ops/detail/cpu/gemm.h). Transposed operands are passed as transposed views, never
/// copied.

#include <span>

#include "core/tensor.h"

namespace strata {

/// Matrix product with torch.matmul's semantics:
/// - 1-D · 1-D: dot product (0-D result);
/// - 2-D · 2-D: matrix product;
/// - 1-D · N-D: `a` is treated as a row [1, k] and the added dim is removed from the result;
/// - N-D · 1-D: `b` is treated as a column [k, 1] and the added dim is removed from the result;
/// - otherwise the last two dims are multiplied and the leading (batch) dims broadcast, e.g.
///   [2, 1, 3, 4] · [5, 4, 2] → [2, 5, 3, 2].
/// Both arguments must be at least 1-D, floating and of the same dtype.
Tensor matmul(const Tensor& a, const Tensor& b);

/// The activation fused into linear's epilogue.
enum class Activation {
  None,
  ReLU,
  GELU,  ///< exact form 0.5·x·(1 + erf(x/√2)) (PyTorch's default)
  Sigmoid,
  Tanh,
};

/// y = act(x · weightᵀ + bias) like torch.nn.functional.linear followed by the activation, with
/// the bias add and the activation applied in one pass over the GEMM's output.
/// x: [..., in] (at least 1-D), weight: [out, in], bias: [out] or undefined. Result: [..., out].
/// Backward goes through the activation, then the two GEMMs; the bias gradient is the column sum.
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(), Activation act = Activation::None);

/// One layer of linear_stack: act(x · weightᵀ + bias), linear's arguments.
struct LinearLayer {
  Tensor weight, bias;  ///< [out, in] and [out] or undefined
  Activation act = Activation::None;
};

/// The layers applied in order, each as linear(x, weight, bias, act): an MLP of fused Linear +
/// activation pairs (models/zoo's FusedMLP runs through it). Where no gradient is recorded and x
/// has enough rows, each thread takes whole row blocks through every layer while they are in its
/// cache, and only the last layer's output is written out (Note [Row blocks through a linear stack]
/// in ops/linalg.cpp); otherwise, and whenever autograd records, it is exactly the chain of linear
/// calls. x: [..., in] (at least 1-D); layer i's weight [out_i, in_i] with in_0 = in and
/// in_i = out_{i-1}; at least one layer. Result: [..., out_last].
Tensor linear_stack(const Tensor& x, std::span<const LinearLayer> layers);

/// How many row blocks linear_stack(x, layers) runs in now (grad mode, the thread count and x's
/// rows decide), or 0 when it runs the chain of linear calls. Checks its arguments as linear_stack.
int64_t linear_stack_blocks(const Tensor& x, std::span<const LinearLayer> layers);

/// Batched matrix product: a [B, n, k] · b [B, k, m] → [B, n, m] (no broadcasting, like torch.bmm).
Tensor bmm(const Tensor& a, const Tensor& b);

}  // namespace strata
