#include "autograd/engine.h"

#include <queue>
#include <unordered_map>
#include <unordered_set>

#include "autograd/accumulate.h"
#include "autograd/anomaly_mode.h"
#include "autograd/hooks.h"
#include "core/factories.h"

namespace strata::autograd {

bool reusable_gradient(const Tensor& t) {
  return t.defined() && t.use_count() == 1 && t.storage().use_count() == 1 && t.is_contiguous() && t.offset() == 0 &&
         t.nbytes() == t.storage().nbytes() &&
         dynamic_cast<const ExternalAllocation*>(t.storage().allocation()) == nullptr;
}

namespace {

// AccumulateGrad nodes go first once ready (PyTorch gives them the highest priority too): a leaf's
// node is created once and keeps its old sequence number when the leaf is used again in a later
// step, and running it last would keep every parameter gradient buffer alive until the end of
// backward instead of handing it to `.grad` as soon as it is complete.
uint64_t priority(const Node* n) {
  return dynamic_cast<const AccumulateGrad*>(n) != nullptr ? UINT64_MAX : n->sequence_nr();
}

struct BySequence {
  bool operator()(const Node* a, const Node* b) const { return priority(a) < priority(b); }
};

// Note [In-place gradient accumulation]
// A gradient reaching a slot that already holds one is added into whichever of the two nothing
// else can see, as PyTorch's InputBuffer does: the only handle to its tensor, the only tensor on its
// storage, which it covers exactly, and bytes Strata allocated (not a wrapped NumPy buffer). A node
// that hands one tensor to two inputs (add), a root gradient the caller holds, a view of a saved
// value or a tile: all are seen by someone else and get a new sum instead. In place saves a
// gradient-sized allocation at every residual join, which is what bounds the backward's peak
// under tape streaming. Addition commutes, so the bits are those of the out-of-place sum.

void add_to_slot(TensorList& buffer, std::size_t slot, Tensor g) {
  if (buffer.size() <= slot) buffer.resize(slot + 1);
  Tensor& b = buffer[slot];
  if (!b.defined()) {
    b = std::move(g);
  } else if (b.sizes() != g.sizes() || b.dtype() != g.dtype()) {
    b = detail::sum_gradients(b, g);  // reports the mismatch
  } else if (reusable_gradient(b)) {
    detail::accumulate_into(b, g);
  } else if (reusable_gradient(g)) {
    detail::accumulate_into(g, b);
    b = std::move(g);
  } else {
    b = detail::sum_gradients(b, g);
  }
}

struct Capture {
  Node* node;
  uint32_t slot;
};

// Runs the graph below `root_edges` (Note [Engine order]). With `captures`, no AccumulateGrad runs,
// only nodes leading to a capture target run, and the gradient arriving at each target is returned.
// The root gradients are moved into the buffers (Note [In-place backward]).
TensorList run_graph(const std::vector<Edge>& root_edges, TensorList root_grads, bool retain_graph,
                     const std::vector<Capture>* captures) {
  std::unordered_map<Node*, TensorList> buffers;
  for (std::size_t i = 0; i < root_edges.size(); ++i)
    add_to_slot(buffers[root_edges[i].node.get()], root_edges[i].input_nr, std::move(root_grads[i]));
  root_grads.clear();

  // Which nodes run: all of them for backward(); for grad(), those from which a target is reachable
  // through at least one edge (a target itself runs only if something below it is needed too).
  std::unordered_set<Node*> targets;
  if (captures != nullptr)
    for (const Capture& c : *captures) targets.insert(c.node);
  std::unordered_map<Node*, bool> needed;
  std::vector<Node*> order;  // every node reachable from the roots
  {
    std::unordered_set<Node*> seen;
    std::vector<Node*> stack;
    for (const Edge& e : root_edges)
      if (seen.insert(e.node.get()).second) stack.push_back(e.node.get());
    while (!stack.empty()) {
      Node* n = stack.back();
      stack.pop_back();
      order.push_back(n);
      for (const Edge& e : n->next_edges())
        if (e.valid() && seen.insert(e.node.get()).second) stack.push_back(e.node.get());
    }
  }
  auto is_needed = [&](auto&& self, Node* n) -> bool {
    if (captures == nullptr) return true;
    if (auto it = needed.find(n); it != needed.end()) return it->second;
    needed[n] = false;  // graphs are acyclic; this only guards the recursion
    bool any = false;
    for (const Edge& e : n->next_edges())
      if (e.valid() && (targets.count(e.node.get()) > 0 || self(self, e.node.get()))) any = true;
    needed[n] = any;
    return any;
  };
  std::unordered_map<Node*, int> deps;
  for (Node* n : order) {
    if (!is_needed(is_needed, n)) continue;
    for (const Edge& e : n->next_edges())
      if (e.valid()) ++deps[e.node.get()];
  }

  std::priority_queue<Node*, std::vector<Node*>, BySequence> ready;
  {
    std::unordered_set<Node*> pushed;
    for (const Edge& e : root_edges)
      if (deps[e.node.get()] == 0 && pushed.insert(e.node.get()).second) ready.push(e.node.get());
  }

  std::unordered_map<Node*, TensorList> captured_at;
  NoGradGuard no_grad;
  while (!ready.empty()) {
    Node* node = ready.top();
    ready.pop();
    TensorList inputs = std::move(buffers[node]);
    buffers.erase(node);
    inputs.resize(node->output_meta().size());
    detail::run_tensor_hooks(*node, inputs);  // Note [Tensor hooks]
    if (targets.count(node) > 0) captured_at[node] = inputs;
    if (!is_needed(is_needed, node)) continue;

    const bool accumulate = dynamic_cast<AccumulateGrad*>(node) != nullptr;
    const bool check = AnomalyMode::should_check_nan();  // Note [Anomaly detection]
    if (check && accumulate && !inputs.empty()) detail::check_leaf_gradient(*node, inputs[0]);
    if (!accumulate && node->materialize_grads()) {
      for (std::size_t i = 0; i < inputs.size(); ++i)
        if (!inputs[i].defined())
          inputs[i] = zeros(node->output_meta()[i].sizes, {node->output_meta()[i].dtype, nullptr});
    }
    TensorList outputs = node->apply(std::move(inputs));
    if (!retain_graph) node->release_saved();
    const auto& edges = node->next_edges();
    STRATA_ASSERT(outputs.size() == edges.size() || (accumulate && outputs.empty()), node->name(), " returned ",
                  outputs.size(), " gradients for ", edges.size(), " inputs");
    for (std::size_t i = 0; i < edges.size(); ++i) {
      const Edge& e = edges[i];
      if (!e.valid()) continue;
      if (i < outputs.size() && outputs[i].defined()) {
        const TensorMeta& m = node->input_meta()[i];
        STRATA_ASSERT(outputs[i].sizes() == m.sizes && outputs[i].dtype() == m.dtype, node->name(),
                      " returned a gradient ", outputs[i].describe(), " for input ", i, " of shape ",
                      IntArrayRef(m.sizes), " ", m.dtype);
        if (check) detail::check_backward_output(*node, i, outputs[i]);
        add_to_slot(buffers[e.node.get()], e.input_nr, std::move(outputs[i]));
      }
      if (--deps[e.node.get()] == 0) ready.push(e.node.get());
    }
  }

  TensorList result;
  if (captures != nullptr) {
    for (const Capture& c : *captures) {
      auto it = captured_at.find(c.node);
      result.push_back(it != captured_at.end() && c.slot < it->second.size() ? it->second[c.slot] : Tensor());
    }
  }
  return result;
}

// Takes the root gradients over (a caller that keeps its list passes a copy).
void prepare_roots(const char* op, const TensorList& roots, TensorList grad_roots, std::vector<Edge>& edges,
                   TensorList& grads) {
  STRATA_CHECK(!roots.empty(), op, ": no tensors to differentiate");
  STRATA_CHECK(grad_roots.empty() || grad_roots.size() == roots.size(), op, ": got ", grad_roots.size(),
               " gradients for ", roots.size(), " tensors");
  for (std::size_t i = 0; i < roots.size(); ++i) {
    const Tensor& r = roots[i];
    STRATA_CHECK(r.defined(), op, ": tensor ", i, " is undefined");
    Edge e = gradient_edge(r);
    STRATA_CHECK(e.valid(), op, ": element ", i, " of tensors (", r.describe(),
                 ") does not require grad and does not have a grad_fn");
    Tensor g = grad_roots.empty() ? Tensor() : std::move(grad_roots[i]);
    if (!g.defined()) {
      STRATA_CHECK(r.numel() == 1, op, ": grad can be implicitly created only for one-element outputs; ", r.describe(),
                   " needs an explicit gradient of the same shape");
      g = ones(r.sizes(), {r.dtype(), nullptr});
    } else {
      STRATA_CHECK(g.sizes() == r.sizes() && g.dtype() == r.dtype(), op, ": gradient ", g.describe(),
                   " does not match output ", r.describe());
      if (AnomalyMode::should_check_nan()) detail::check_root_gradient(op, i, g);
    }
    edges.push_back(std::move(e));
    grads.push_back(std::move(g));
  }
}

}  // namespace

void backward(const TensorList& roots, const TensorList& grad_roots, bool retain_graph) {
  std::vector<Edge> edges;
  TensorList grads;
  prepare_roots("backward", roots, grad_roots, edges, grads);
  run_graph(edges, std::move(grads), retain_graph, nullptr);
}

TensorList grad(const TensorList& outputs, const TensorList& inputs, const TensorList& grad_outputs, bool retain_graph,
                bool allow_unused) {
  return grad_consuming(outputs, inputs, TensorList(grad_outputs), retain_graph, allow_unused);
}

TensorList grad_consuming(const TensorList& outputs, const TensorList& inputs, TensorList grad_outputs,
                          bool retain_graph, bool allow_unused) {
  std::vector<Edge> edges;
  TensorList grads;
  prepare_roots("grad", outputs, std::move(grad_outputs), edges, grads);
  STRATA_CHECK(!inputs.empty(), "grad: no inputs to differentiate with respect to");
  std::vector<Capture> captures;
  std::vector<Edge> keep;  // holds AccumulateGrad nodes made for leaves alive during the run
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    STRATA_CHECK(inputs[i].defined(), "grad: input ", i, " is undefined");
    Edge e = gradient_edge(inputs[i]);
    STRATA_CHECK(e.valid(), "grad: input ", i, " (", inputs[i].describe(), ") does not require grad");
    captures.push_back({e.node.get(), e.input_nr});
    keep.push_back(std::move(e));
  }
  TensorList result = run_graph(edges, std::move(grads), retain_graph, &captures);
  for (std::size_t i = 0; i < result.size(); ++i) {
    STRATA_CHECK(result[i].defined() || allow_unused, "grad: input ", i, " (", inputs[i].describe(),
                 ") was not used to compute the outputs; pass allow_unused=true to get an undefined gradient");
  }
  return result;
}

}  // namespace strata::autograd
