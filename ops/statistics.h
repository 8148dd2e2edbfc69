#pragma once
/// @file
/// Statistical reductions and scans (issue 26 part 4): var, std, norm, logsumexp and cumsum, with
/// PyTorch's names, dtypes and derivatives. `dims` as in ops/reduction.h (negative dims count from
/// the end, an empty list reduces every dim, repeats are an error; `keepdim` keeps them as size 1).
/// var, std, norm and logsumexp refuse integer and bool inputs (PyTorch's rule), except logsumexp,
/// which computes integers in the default float dtype; bf16 and f16 compute in f32 and return
/// their own dtype.
///
/// Note [Statistics as composed kernels]
/// The forward passes are compositions of the element-wise and reduction ops (run without
/// recording) and each op records one node whose backward is again such a composition: the
/// gradient formulas are PyTorch's and are written once, beside the forward, and the kernels stay
/// the reductions' (accumulating in f64, thread-count independent). cumsum has a scan kernel of
/// its own.

#include <optional>

#include "core/tensor.h"

namespace strata {

/// Variance over `dims`: sum((x - mean)^2) / (N - correction), N the number of reduced elements
/// (correction 1 is the unbiased estimate, torch.var's default). N - correction <= 0 gives inf or
/// NaN, as in PyTorch. Backward: grad * 2 (x - mean) / (N - correction).
Tensor var(const Tensor& x, IntArrayRef dims = {}, double correction = 1.0, bool keepdim = false);

/// Standard deviation: sqrt(var). Backward: grad * (x - mean) / ((N - correction) * std) (NaN
/// where std is 0, as in PyTorch).
Tensor std(const Tensor& x, IntArrayRef dims = {}, double correction = 1.0, bool keepdim = false);

/// The vector p-norm over `dims` (torch.linalg.vector_norm; torch.norm with a number p): p = 2
/// sqrt(sum x^2), p = 1 sum |x|, p = inf max |x|, p = -inf min |x|, p = 0 the count of non-zeros,
/// other p (sum |x|^p)^(1/p). Backward: PyTorch's — x * |x|^(p-2) * grad / norm^(p-1) (sign(x) *
/// grad for p = 1), 0 where the norm is 0; for ±inf the gradient is split among the elements
/// whose |x| is the extremum (the composition abs → amax/amin); none for p = 0 (x.grad stays
/// unset, as in PyTorch).
Tensor norm(const Tensor& x, double p = 2.0, IntArrayRef dims = {}, bool keepdim = false);

/// log(sum(exp(x))) over `dims`, computed as m + log(sum(exp(x - m))) with m the (finite)
/// maximum, so it neither overflows nor underflows; all -inf gives -inf, a +inf gives +inf.
/// Integer and bool inputs compute in the default float dtype. Backward: grad * exp(x - result).
Tensor logsumexp(const Tensor& x, IntArrayRef dims, bool keepdim = false);

/// Running sum along `dim` (out[i] = x[0] + ... + x[i]), in `dtype` when given (x converted
/// first, like torch.cumsum's dtype=), else in x's dtype with integers and bool widened to i64
/// (PyTorch's rule). Floating sums accumulate in f64. Backward: the reversed running sum of grad.
Tensor cumsum(const Tensor& x, int64_t dim, std::optional<DType> dtype = std::nullopt);

}  // namespace strata
