#pragma once
/// @file
/// Convolutions (differentiable; f32 and f64; NCHW).

#include <string_view>

#include "core/tensor.h"

namespace strata {

/// 2-D convolution like torch.nn.functional.conv2d: `x` is (N, C, H, W) or unbatched (C, H, W),
/// `weight` is (O, C / groups, KH, KW), `bias` (optional) is (O). `stride`, `padding` and
/// `dilation` hold 1 (used for both dims) or 2 values; stride and dilation must be positive,
/// padding non-negative; `groups` must divide C and O. Output (N, O, OH, OW) with
/// OH = (H + 2·pad − dilation·(KH − 1) − 1) / stride + 1 (floor), which must be positive.
/// f32 runs oneDNN convolution primitives (cached, weights reordered to the blocked layout once
/// per weight version) for typical CNN layer sizes and im2col + GEMM for small ones
/// (Note [When Strata uses oneDNN primitives] in ops/detail/cpu/dnnl_engine.h); f64 always runs
/// im2col + GEMM. Backward: gradients for input, weight and bias.
Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(), IntArrayRef stride = {1, 1},
              IntArrayRef padding = {0, 0}, IntArrayRef dilation = {1, 1}, int64_t groups = 1);

/// Note [Conv backward in two steps]
/// conv2d as two ops, for rematerialization graphs (models/conv.h: Conv2d::append_remat_steps):
/// conv2d_data_step computes conv2d(x, weight, bias) and records a node that returns only the
/// gradient w.r.t. x (it saves the weight, not x); conv2d_weight_step(y, x, ...) returns y again
/// (a tensor sharing y's storage) and records a node that passes y's gradient through and returns
/// the weight's and bias's gradients, computed from the x it saves. The backward runs the weight
/// step first, then the data step: x is read only by the first, so a planner can let it leave the
/// fast tier before the input gradient is allocated (where one conv2d backward holds x, the output
/// gradient and the input gradient at once). The kernels are conv2d's backward's, on the same
/// operands: gradients are bitwise conv2d's. Same arguments and checks as conv2d.
Tensor conv2d_data_step(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(),
                        IntArrayRef stride = {1, 1}, IntArrayRef padding = {0, 0}, IntArrayRef dilation = {1, 1},
                        int64_t groups = 1);
/// The weight half of Note [Conv backward in two steps]: `y` must be conv2d_data_step's output for
/// these arguments (checked by shape).
Tensor conv2d_weight_step(const Tensor& y, const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(),
                          IntArrayRef stride = {1, 1}, IntArrayRef padding = {0, 0}, IntArrayRef dilation = {1, 1},
                          int64_t groups = 1);

/// 1-D convolution like torch.nn.functional.conv1d: `x` is (N, C, L) or unbatched (C, L), `weight`
/// (O, C / groups, K), `bias` (optional) (O); `stride`, `padding`, `dilation` hold one value.
/// Runs as conv2d with H = 1 (recorded reshapes around it), so it has conv2d's kernels, checks
/// and gradients. Output (N, O, (L + 2·pad − dilation·(K − 1) − 1) / stride + 1).
Tensor conv1d(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(), IntArrayRef stride = {1},
              IntArrayRef padding = {0}, IntArrayRef dilation = {1}, int64_t groups = 1);
/// conv1d with PyTorch's string padding: "valid" (none) or "same" (output length L; stride must
/// be 1; the total dilation·(K − 1) split in half, the odd element on the right, padded first).
Tensor conv1d(const Tensor& x, const Tensor& weight, const Tensor& bias, IntArrayRef stride, std::string_view padding,
              IntArrayRef dilation = {1}, int64_t groups = 1);

/// 2-D transposed convolution like torch.nn.functional.conv_transpose2d (PyTorch's argument
/// order): `x` (N, C_in, H, W) or unbatched (C_in, H, W), `weight` (C_in, C_out / groups, KH, KW),
/// `bias` (optional) (C_out). Output (N, C_out, OH, OW) with OH = (H − 1)·stride − 2·padding +
/// dilation·(KH − 1) + output_padding + 1; output_padding must be smaller than stride or dilation.
/// Computed as the adjoint of conv2d (Note [Transposed conv as the conv's adjoint] in
/// ops/conv.cpp). Backward: gradients for input, weight and bias.
Tensor conv_transpose2d(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(),
                        IntArrayRef stride = {1, 1}, IntArrayRef padding = {0, 0}, IntArrayRef output_padding = {0, 0},
                        int64_t groups = 1, IntArrayRef dilation = {1, 1});

namespace ops {
/// Which implementation conv2d picks for an f32 problem of this size under the current
/// `dnnl_primitives_mode()` (true: oneDNN primitives). For tests and benchmarks.
bool conv2d_uses_primitives(const Tensor& x, const Tensor& weight, IntArrayRef stride = {1, 1},
                            IntArrayRef padding = {0, 0}, IntArrayRef dilation = {1, 1}, int64_t groups = 1);
}  // namespace ops

}  // namespace strata
