#pragma once
/// @file
/// 2-D pooling (differentiable; f32 and f64; NCHW or unbatched CHW; own kernels).

#include "core/tensor.h"

namespace strata {

/// Max pooling like torch.nn.functional.max_pool2d. `kernel_size`, `stride` (empty: the kernel
/// size), `padding`, `dilation` hold 1 or 2 values; padding at most half the kernel size.
/// Padding counts as −∞; NaN propagates. Backward sends each output's gradient to its argmax
/// (the first maximum in window order), whose index is saved by the forward.
Tensor max_pool2d(const Tensor& x, IntArrayRef kernel_size, IntArrayRef stride = {}, IntArrayRef padding = {0, 0},
                  IntArrayRef dilation = {1, 1}, bool ceil_mode = false);

/// Average pooling like torch.nn.functional.avg_pool2d (no divisor_override).
/// `count_include_pad`: the divisor counts the padding cells inside the window (not beyond it).
Tensor avg_pool2d(const Tensor& x, IntArrayRef kernel_size, IntArrayRef stride = {}, IntArrayRef padding = {0, 0},
                  bool ceil_mode = false, bool count_include_pad = true);

/// Adaptive average pooling like torch.nn.functional.adaptive_avg_pool2d: output cell (i, j)
/// averages rows [⌊i·H/OH⌋, ⌈(i+1)·H/OH⌉) and the same for columns. `output_size` has 1 or 2
/// positive values.
Tensor adaptive_avg_pool2d(const Tensor& x, IntArrayRef output_size);

}  // namespace strata
