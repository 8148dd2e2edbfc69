#pragma once
/// @file
/// torch.einsum (issue 26 part 4): Einstein summation over operands named by subscripts.
///
/// Note [einsum as permute, reshape and bmm]
/// The equation is "ab,bc->ac" (letters a-z and A-Z, spaces ignored; without "->" the output is
/// every letter used exactly once, in alphabetical order, as in PyTorch). Operands are contracted
/// left to right; each step classifies the letters of the two operands: batch letters (in both and
/// still needed later), contracted letters (in both, not needed later), and letters of one operand
/// only (kept if needed later, else summed away first). The left operand is permuted to [batch,
/// left, contracted] and the right to [batch, contracted, right], reshaped to 3-D and multiplied
/// with bmm; the result is reshaped back and, at the end, permuted into the output's order. A single
/// operand is summed over the letters not in the output and permuted. Every step is a
/// differentiable op (sum, permute, reshape, bmm), so the backward is theirs. Not supported (a
/// clear error): "..." (ellipsis), a letter repeated within one operand (diagonals), and size-1
/// broadcasting between operands (a letter's sizes must match exactly).

#include <string>
#include <vector>

#include "core/tensor.h"

namespace strata {

/// Evaluates `equation` over `operands` (at least one; f32 or f64, one dtype, as bmm needs for two
/// or more). Errors name the equation, the operand and the letter at fault.
Tensor einsum(const std::string& equation, const std::vector<Tensor>& operands);

}  // namespace strata
