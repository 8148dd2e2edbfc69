#pragma once
/// @file
/// Resampling ops (differentiable; f32 and f64; any strides; outputs contiguous): pad and
/// interpolate, as torch.nn.functional's.
///
/// Note [Resampling along one dim]
/// Both ops are sequences of one step per affected dim: output position o of that dim reads at
/// most two input positions i0[o], i1[o] of the same dim with weights w0[o], w1[o] (i0 < 0: the
/// constant fill value). Padding is one tap per position (the map of the padding mode); linear
/// interpolation two; nearest one. The forward applies the steps dim by dim (last dim first),
/// the backward their adjoints in the reverse order (gradient scattered back to i0, i1 with the
/// same weights). A bilinear resize is the linear one along W, then along H; its result equals
/// the four-tap formula up to rounding.

#include <optional>
#include <string_view>
#include <vector>

#include "core/tensor.h"

namespace strata {

/// Pads `x` like torch.nn.functional.pad. `pad` holds (left, right) pairs, last dim first:
/// {l_W, r_W, l_H, r_H, ...}; its length is even and at most 2·x.dim(). Modes:
///  - "constant": any rank, the new elements hold `value`; negative amounts crop.
///  - "reflect" (mirror without repeating the edge; each amount < the dim's size),
///    "replicate" (repeat the edge; the dim must be non-empty), "circular" (wrap around; each
///    amount <= the dim's size): pad the last 1, 2 or 3 dims of a 2-D/3-D, 3-D/4-D or 4-D/5-D
///    input (PyTorch's supported combinations); amounts may be negative (crop).
/// `value` must be 0 unless the mode is "constant". Backward: the gradient of x (elements that
/// several outputs read sum their gradients).
Tensor pad(const Tensor& x, IntArrayRef pad, std::string_view mode = "constant", double value = 0.0);

/// Resizes the spatial dims (all but the first two) of `x` like
/// torch.nn.functional.interpolate. Exactly one of `size` (the output spatial sizes) and
/// `scale_factor` (multipliers; output size floor(in · factor)) is non-empty; either holds one
/// value (for every spatial dim) or one per spatial dim. Modes: "nearest" (source floor(o · s)),
/// "nearest-exact" (floor((o + 0.5) · s)), "linear" (3-D input), "bilinear" (4-D input), where
/// s = 1 / factor when `scale_factor` is given and `recompute_scale_factor` is false, else
/// in / out. `align_corners` (linear modes only; default false) maps corner to corner:
/// source o · (in − 1) / (out − 1). Nearest modes take 3-, 4- and 5-D inputs. Output sizes must be
/// positive. Backward: the gradient of x (Note [Resampling along one dim]).
Tensor interpolate(const Tensor& x, IntArrayRef size, const std::vector<double>& scale_factor,
                   std::string_view mode = "nearest", std::optional<bool> align_corners = std::nullopt,
                   bool recompute_scale_factor = false);

}  // namespace strata
