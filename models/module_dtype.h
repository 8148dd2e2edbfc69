#pragma once
/// @file
/// Converting a module's floating-point state to another dtype in place — the C++ half of
/// torch.nn.Module.to(dtype) / .float() / .double() / .half() / .bfloat16().

#include "core/dtype.h"
#include "models/module.h"

namespace strata::nn {

/// Converts every floating parameter and buffer of `module` and its descendants, and the
/// parameters' gradients, to `dtype` in place (Tensor::set_data: every handle — an optimizer's, a
/// Python Parameter — sees the converted tensor, as after PyTorch's `param.data = ...`). Integer and
/// bool tensors (BatchNorm's num_batches_tracked) keep their dtype. `dtype` must be floating.
/// Optimizer state is not converted (PyTorch's advice holds: convert before creating the optimizer).
void convert_floating(Module& module, DType dtype);

}  // namespace strata::nn
