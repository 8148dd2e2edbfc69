#pragma once
/// @file
/// Shape transforms with PyTorch's names and semantics (issue 26 part 4): stack, chunk, flip, roll,
/// repeat, repeat_interleave, tril and triu. They move elements without arithmetic, so they accept
/// every dtype; gradients exist for floating inputs. Dims may be negative (counting from the end).
///
/// Note [Shape transforms as compositions]
/// Each op but repeat is a composition of the differentiable ops of ops/shape_ops.h and
/// ops/binary.h (reshape, cat, split, slice, index_select, where), so its backward is theirs:
/// stack is cat of unsqueezed views, chunk is split, flip and repeat_interleave are index_select
/// with a built index (backward: a deterministic scatter-add), roll is cat of two slices, tril and
/// triu select with a mask (backward: the same mask on the gradient). repeat copies an expanded
/// view and records its own node (backward: the gradient summed over the repeats).

#include <optional>
#include <vector>

#include "core/tensor.h"

namespace strata {

/// Joins tensors of one shape along a new dim `dim` in [-(rank+1), rank] (torch.stack). At
/// least one tensor; shapes and dtypes must match.
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim = 0);

/// Splits into `chunks` (> 0) views along `dim` of ceil(size / chunks) elements each, the last
/// possibly smaller; fewer than `chunks` when the size does not allow more (torch.chunk).
std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim = 0);

/// x with the order of the elements reversed along each of `dims` (distinct; torch.flip).
Tensor flip(const Tensor& x, IntArrayRef dims);

/// x rotated by shifts[i] along dims[i] (elements leaving one end enter at the other; negative
/// shifts go the other way). With no dims, x is flattened, rolled by the single shift and
/// reshaped back (torch.roll). shifts and dims have equal lengths.
Tensor roll(const Tensor& x, IntArrayRef shifts, IntArrayRef dims = {});

/// x tiled repeats[i] times along each dim (torch.Tensor.repeat): repeats has at least x.dim()
/// entries, >= 0; extra leading entries add dims. Backward: grad summed over the tiles.
Tensor repeat(const Tensor& x, IntArrayRef repeats);

/// Each element repeated `repeats` (>= 0) times along `dim`, or along the flattened x without
/// a dim (torch.repeat_interleave).
Tensor repeat_interleave(const Tensor& x, int64_t repeats, std::optional<int64_t> dim = std::nullopt);
/// The same with a count per element: `repeats` an integer tensor of x.size(dim) non-negative
/// counts (or of one count for all).
Tensor repeat_interleave(const Tensor& x, const Tensor& repeats, std::optional<int64_t> dim = std::nullopt);

/// The lower triangle of the last two dims (x.dim() >= 2): elements with column - row <=
/// `diagonal` kept, the others zero (torch.tril).
Tensor tril(const Tensor& x, int64_t diagonal = 0);
/// The upper triangle: column - row >= `diagonal` kept (torch.triu).
Tensor triu(const Tensor& x, int64_t diagonal = 0);

}  // namespace strata
