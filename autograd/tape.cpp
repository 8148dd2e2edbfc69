#include "autograd/tape.h"

#include <algorithm>
#include <iomanip>
#include <sstream>
#include <unordered_set>

namespace strata::autograd {

std::vector<NodeRecord> recorded_nodes(const TensorList& roots) {
  std::vector<Node*> nodes;
  std::unordered_set<Node*> seen;
  std::vector<Node*> stack;
  for (const Tensor& r : roots) {
    STRATA_CHECK(r.defined(), "recorded_nodes: undefined root tensor");
    if (Node* n = r.grad_fn().get(); n != nullptr && seen.insert(n).second) stack.push_back(n);
  }
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    if (dynamic_cast<AccumulateGrad*>(n) == nullptr) nodes.push_back(n);
    for (const Edge& e : n->next_edges())
      if (e.valid() && seen.insert(e.node.get()).second) stack.push_back(e.node.get());
  }
  std::sort(nodes.begin(), nodes.end(), [](Node* a, Node* b) { return a->sequence_nr() < b->sequence_nr(); });
  std::vector<NodeRecord> out;
  out.reserve(nodes.size());
  for (Node* n : nodes) {
    NodeRecord rec{n->sequence_nr(), n->name(), n->output_meta(), {}};
    for (const SavedTensor& s : n->saved_values()) rec.saved.push_back(s.info());
    out.push_back(std::move(rec));
  }
  return out;
}

std::size_t saved_bytes(const TensorList& roots) {
  std::size_t total = 0;
  for (const NodeRecord& r : recorded_nodes(roots))
    for (const SavedInfo& s : r.saved)
      if (!s.released) total += s.bytes;
  return total;
}

std::string format_saved_residuals(const TensorList& roots) {
  std::ostringstream os;
  std::size_t total = 0, count = 0;
  const auto nodes = recorded_nodes(roots);
  os << std::left << std::setw(6) << "seq" << std::setw(24) << "node" << std::setw(4) << "#" << std::setw(22) << "shape"
     << std::setw(6) << "dtype" << std::right << std::setw(12) << "bytes" << "  tier\n";
  for (const NodeRecord& r : nodes) {
    for (std::size_t i = 0; i < r.saved.size(); ++i) {
      const SavedInfo& s = r.saved[i];
      std::ostringstream shape;
      if (s.tier == "undefined")
        shape << "-";
      else
        shape << IntArrayRef(s.sizes);
      std::ostringstream dt;
      dt << s.dtype;
      os << std::left << std::setw(6) << r.sequence_nr << std::setw(24) << r.name << std::setw(4) << i << std::setw(22)
         << shape.str() << std::setw(6) << dt.str() << std::right << std::setw(12) << s.bytes << "  " << s.tier << "\n";
      if (!s.released) {
        total += s.bytes;
        ++count;
      }
    }
  }
  os << nodes.size() << " nodes, " << count << " saved values held, " << total << " bytes\n";
  return os.str();
}

}  // namespace strata::autograd
