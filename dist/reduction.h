#pragma once
/// @file
/// The fixed reduction order of strata::dist (Note [Deterministic reduction order]): a binary tree
/// over the global contributions that depends only on how many there are, never on how many ranks
/// hold them. `tree_sum` is the single-process reference every distributed sum equals bitwise.

#include <cstdint>
#include <functional>
#include <vector>

#include "core/tensor.h"

namespace strata::dist {

/// One node of the reduction tree: the sum of global contributions [lo, hi).
struct TreeNode {
  int64_t lo = 0;
  int64_t hi = 0;
  bool operator==(const TreeNode&) const = default;
};

/// Where the tree splits node [lo, hi) (hi - lo >= 2): lo plus the largest power of two below
/// hi - lo, so blocks of 2^k contributions starting at multiples of 2^k are whole subtrees.
int64_t tree_split(int64_t lo, int64_t hi);

/// The maximal nodes of the tree over [0, count) that lie inside [begin, end), left to right: what
/// a rank holding contributions [begin, end) can add up on its own. Empty when begin == end.
std::vector<TreeNode> tree_cover(int64_t count, int64_t begin, int64_t end);

/// Sums `contributions` (same shape; f32, f64 or i64) in the tree order on one process: the value
/// Communicator::allreduce returns for the same global list at any rank count. Throws
/// strata::Error for an empty list, an undefined tensor, or mismatched shapes or dtypes.
Tensor tree_sum(const std::vector<Tensor>& contributions);

namespace detail {

/// The data of a known node's value over the elements being reduced, or null if the node is not
/// known (then its children are evaluated). Every leaf [i, i + 1) must be known. Never called when
/// there are no elements.
using NodeLookup = std::function<const void*(TreeNode node)>;

/// Evaluates node `node` of the tree over `n` elements of dtype `dtype` into `out`, adding known
/// nodes' values in the tree order (element-wise, in the dtype's own arithmetic).
void tree_eval(TreeNode node, const NodeLookup& lookup, DType dtype, int64_t n, void* out);

/// True for the dtypes the collectives reduce: f32, f64 and i64.
bool reducible(DType dtype);

}  // namespace detail
}  // namespace strata::dist
