#pragma once
/// @file
/// Tape introspection: what the recorded graph keeps for backward (the equivalent of JAX's
/// `print_saved_residuals`).

#include <cstdint>
#include <string>
#include <vector>

#include "autograd/node.h"

namespace strata::autograd {

struct NodeRecord {
  uint64_t sequence_nr = 0;
  std::string name;
  std::vector<TensorMeta> outputs;  // the forward outputs the node differentiates
  std::vector<SavedInfo> saved;     // in the order the op saved them
};

/// Every node reachable from the roots' grad_fns (AccumulateGrad nodes excluded), in recording
/// order (oldest first).
std::vector<NodeRecord> recorded_nodes(const TensorList& roots);

/// Total bytes of the saved values still held by the graph below `roots` (released ones excluded;
/// a storage saved twice is counted twice, as each save may be packed separately).
std::size_t saved_bytes(const TensorList& roots);

/// A table, one line per saved value: node, index, shape, dtype, bytes, tier; and a total.
std::string format_saved_residuals(const TensorList& roots);

}  // namespace strata::autograd
