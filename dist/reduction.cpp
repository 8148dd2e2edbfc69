#include "dist/reduction.h"

#include <bit>
#include <cstring>
#include <memory>

#include "core/factories.h"

namespace strata::dist {

// Note [Deterministic reduction order]
// ------------------------------------
// A sum of floating-point tensors depends on the order of its additions, and MPI_Allreduce leaves
// that order to the implementation (it changes with the rank count, the message size and the
// algorithm the library selects). strata::dist fixes its own order: the global contributions are
// numbered rank-major (rank 0's local contributions in the order it passed them, then rank 1's,
// ...), and their sum is the binary tree T(lo, hi) = T(lo, mid) + T(mid, hi), T(i, i + 1) = c_i,
// with mid = lo + the largest power of two below hi - lo (tree_split). The tree depends only on
// the number K of contributions, so the result is bitwise the same on 1, 2, 4 or any number of
// ranks holding the same K contributions, and equals tree_sum() of the list on one process.
// (With one contribution per rank and N = 2 or 3 it is the rank-order sum ((c0 + c1) + c2); at
// N = 4 it is (c0 + c1) + (c2 + c3).)
// A rank adds up on its own the nodes lying wholly inside its block of contributions (tree_cover:
// O(log K) nodes, one when its block is an aligned power of two, as with one contribution per
// rank), sends each node's element chunk j to rank j, and rank j finishes the tree for its chunk
// (tree_eval); allreduce then gathers the chunks. Each addition is element-wise in the dtype, so
// splitting the elements into chunks changes nothing.

int64_t tree_split(int64_t lo, int64_t hi) {
  const auto n = static_cast<uint64_t>(hi - lo);
  STRATA_ASSERT(n >= 2, "tree_split: node [", lo, ", ", hi, ") has fewer than 2 contributions");
  return lo + static_cast<int64_t>(std::bit_floor(n - 1));
}

namespace {

void cover_node(TreeNode node, int64_t begin, int64_t end, std::vector<TreeNode>& out) {
  if (node.hi <= begin || node.lo >= end) return;
  if (node.lo >= begin && node.hi <= end) {
    out.push_back(node);
    return;
  }
  const int64_t mid = tree_split(node.lo, node.hi);
  cover_node({node.lo, mid}, begin, end, out);
  cover_node({mid, node.hi}, begin, end, out);
}

// The value of `node`, whose lookup gave `known` (each node is looked up once): `known` itself when
// the lookup knows it (a leaf, or a node computed elsewhere), else left + right computed into
// `out`, operands read in place where the lookup knows them, so that a node of two known children
// costs one pass and no copy. Returns where the value is.
template <typename T>
const T* eval_node(TreeNode node, const void* known, const detail::NodeLookup& lookup, int64_t n, T* out) {
  if (known != nullptr) return static_cast<const T*>(known);
  STRATA_ASSERT(node.hi - node.lo >= 2, "tree_eval: leaf [", node.lo, ", ", node.hi, ") has no value");
  const int64_t mid = tree_split(node.lo, node.hi);
  const TreeNode l{node.lo, mid}, r{mid, node.hi};
  const T* left = eval_node<T>(l, lookup(l), lookup, n, out);
  const void* right_known = lookup(r);
  std::unique_ptr<T[]> scratch;  // the right child's value when it must be computed (uninitialized)
  if (right_known == nullptr) scratch.reset(new T[static_cast<std::size_t>(n)]);
  const T* right = eval_node<T>(r, right_known, lookup, n, scratch.get());
  for (int64_t i = 0; i < n; ++i) out[i] = left[i] + right[i];
  return out;
}

template <typename T>
void eval_typed(TreeNode node, const detail::NodeLookup& lookup, int64_t n, T* out) {
  const T* value = eval_node<T>(node, lookup(node), lookup, n, out);
  if (value != out) std::memcpy(out, value, static_cast<std::size_t>(n) * sizeof(T));
}

}  // namespace

std::vector<TreeNode> tree_cover(int64_t count, int64_t begin, int64_t end) {
  STRATA_ASSERT(0 <= begin && begin <= end && end <= count, "tree_cover: block [", begin, ", ", end, ") outside [0, ",
                count, ")");
  std::vector<TreeNode> out;
  if (begin < end) cover_node({0, count}, begin, end, out);
  return out;
}

namespace detail {

bool reducible(DType dtype) { return dtype == DType::f32 || dtype == DType::f64 || dtype == DType::i64; }

void tree_eval(TreeNode node, const NodeLookup& lookup, DType dtype, int64_t n, void* out) {
  if (n == 0) return;  // nothing to add (and empty buffers may have null data)
  switch (dtype) {
    case DType::f32: return eval_typed(node, lookup, n, static_cast<float*>(out));
    case DType::f64: return eval_typed(node, lookup, n, static_cast<double*>(out));
    case DType::i64: return eval_typed(node, lookup, n, static_cast<int64_t*>(out));
    default: STRATA_ASSERT(false, "tree_eval: dtype ", dtype, " is not reducible");
  }
}

}  // namespace detail

Tensor tree_sum(const std::vector<Tensor>& contributions) {
  STRATA_CHECK(!contributions.empty(), "dist::tree_sum: no contributions");
  std::vector<Tensor> dense;
  for (std::size_t i = 0; i < contributions.size(); ++i) {
    const Tensor& c = contributions[i];
    STRATA_CHECK(c.defined(), "dist::tree_sum: contribution ", i, " is undefined");
    STRATA_CHECK(detail::reducible(c.dtype()), "dist::tree_sum: contribution ", i, " has dtype ", c.dtype(),
                 " (f32, f64 or i64 expected)");
    STRATA_CHECK(c.dtype() == contributions[0].dtype() && c.sizes() == contributions[0].sizes(),
                 "dist::tree_sum: contribution ", i, " is ", c.dtype(), " ", c.sizes(), " but contribution 0 is ",
                 contributions[0].dtype(), " ", contributions[0].sizes());
    dense.push_back(c.contiguous());
  }
  Tensor out = empty(contributions[0].sizes(), {contributions[0].dtype()});
  const auto count = static_cast<int64_t>(dense.size());
  detail::tree_eval(
      {0, count},
      [&](TreeNode node) -> const void* { return node.hi - node.lo == 1 ? dense[node.lo].data_ptr() : nullptr; },
      out.dtype(), out.numel(), out.data_ptr());
  return out;
}

}  // namespace strata::dist
