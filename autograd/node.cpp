#include "autograd/node.h"

#include "autograd/accumulate.h"
#include "autograd/anomaly_mode.h"
#include "autograd/view.h"

#include <mutex>

namespace strata::autograd {

namespace {
std::atomic<uint64_t> next_sequence_nr{0};
// Serializes accumulation into leaves' .grad and the lazy creation of their AccumulateGrad nodes:
// independent backward passes on several threads may share parameters.
std::mutex leaf_mutex;
}  // namespace

Node::Node() : sequence_nr_(next_sequence_nr.fetch_add(1, std::memory_order_relaxed)) {}

std::size_t Node::save(const Tensor& value) {
  detail::SavingNodeScope scope(sequence_nr_);
  saved_.emplace_back(value);
  return saved_.size() - 1;
}

Tensor Node::saved(std::size_t i) const {
  STRATA_ASSERT(i < saved_.size(), name(), ": saved value ", i, " does not exist (", saved_.size(), " saved)");
  const std::string n = name();
  return saved_[i].unpack(n.c_str());
}

void Node::release_saved() {
  for (auto& s : saved_) s.release();
}

void Node::watch_output(uint32_t nr, const std::shared_ptr<::strata::detail::AutogradMeta>& meta) {
  for (const WatchedOutput& w : watched_)
    if (w.output_nr == nr && w.meta.lock() == meta) return;
  watched_.push_back({nr, meta});
}

void Node::add_input(const Tensor& input) {
  if (input.defined()) {
    next_edges_.push_back(gradient_edge(input));
    input_meta_.push_back({input.sizes(), input.dtype()});
  } else {
    next_edges_.push_back({});
    input_meta_.push_back({});
  }
}

AccumulateGrad::AccumulateGrad(Tensor leaf) : leaf_(std::move(leaf)) {
  input_meta_.push_back({leaf_.sizes(), leaf_.dtype()});
  output_meta_.push_back({leaf_.sizes(), leaf_.dtype()});
}

TensorList AccumulateGrad::apply(TensorList&& grad_outputs) {
  Tensor g = std::move(grad_outputs.at(0));
  if (!g.defined()) return {};
  std::lock_guard<std::mutex> lock(leaf_mutex);
  ::strata::detail::AutogradMeta& meta = leaf_.autograd_meta();
  if (!meta.grad.defined()) {
    // Take the incoming gradient when nothing else refers to its bytes; otherwise copy, so that a
    // later in-place accumulation cannot write into someone else's tensor.
    meta.grad =
        (g.is_contiguous() && g.storage().use_count() == 1 && g.offset() == 0 && g.storage().nbytes() == g.nbytes())
            ? g
            : g.clone();
  } else {
    detail::accumulate_into(meta.grad, g);
  }
  return {};
}

bool needs_grad(std::initializer_list<const Tensor*> inputs) {
  if (!GradMode::is_enabled()) return false;
  for (const Tensor* t : inputs)
    if (t != nullptr && t->defined() && t->requires_grad()) return true;
  return false;
}

bool needs_grad(const TensorList& inputs) {
  if (!GradMode::is_enabled()) return false;
  for (const Tensor& t : inputs)
    if (t.defined() && t.requires_grad()) return true;
  return false;
}

Edge gradient_edge(const Tensor& t) {
  if (!t.defined()) return {};
  refresh_view(t);  // Note [View tracking]
  ::strata::detail::AutogradMeta* m = t.autograd_meta_if_any();
  if (m == nullptr) return {};
  if (m->grad_fn) return {m->grad_fn, m->output_nr};
  if (!m->requires_grad) return {};
  std::lock_guard<std::mutex> lock(leaf_mutex);
  std::shared_ptr<Node> acc = m->grad_accumulator.lock();
  if (!acc) {
    acc = std::make_shared<AccumulateGrad>(t);
    m->grad_accumulator = acc;
  }
  return {acc, 0};
}

std::shared_ptr<Node> make_node(std::string name, std::initializer_list<const Tensor*> inputs, BackwardFn fn) {
  auto node = std::make_shared<FunctionNode>(std::move(name), std::move(fn));
  for (const Tensor* t : inputs) node->add_input(t != nullptr ? *t : Tensor());
  if (AnomalyMode::should_check_nan()) detail::note_forward_inputs(*node, std::vector<const Tensor*>(inputs));
  return node;
}

std::shared_ptr<Node> make_node(std::string name, const TensorList& inputs, BackwardFn fn) {
  auto node = std::make_shared<FunctionNode>(std::move(name), std::move(fn));
  for (const Tensor& t : inputs) node->add_input(t);
  if (AnomalyMode::should_check_nan()) {  // Note [Anomaly detection]
    std::vector<const Tensor*> ptrs;
    for (const Tensor& t : inputs) ptrs.push_back(&t);
    detail::note_forward_inputs(*node, ptrs);
  }
  return node;
}

void append_history(Tensor& out, const std::shared_ptr<Node>& node, bool in_place) {
  const auto nr = static_cast<uint32_t>(node->output_meta().size());
  STRATA_ASSERT(out.defined(), node->name(), ": output ", nr, " is undefined");
  ::strata::detail::AutogradMeta* m = out.autograd_meta_if_any();
  if (in_place) {
    STRATA_CHECK(m == nullptr || m->grad_fn || !m->requires_grad, node->name(), ": output ", nr, " (", out.describe(),
                 ") is a leaf Variable that requires grad and has been used in an in-place operation");
  } else if (m != nullptr && (m->grad_fn || m->requires_grad)) {
    // An op that hands back one of its inputs (or any tensor already in a graph) must not rewrite
    // that tensor's history: give the output a handle of its own.
    out = out.detach();
  }
  ::strata::detail::AutogradMeta& meta = out.autograd_meta();
  meta.grad_fn = node;
  meta.output_nr = nr;
  node->add_output(out);
  if (AnomalyMode::should_check_nan()) detail::check_forward_output(*node, out, nr);  // Note [Anomaly detection]
}

void set_history(std::initializer_list<Tensor*> outputs, const std::shared_ptr<Node>& node) {
  for (Tensor* t : outputs) append_history(*t, node);
}

void set_history(TensorList& outputs, const std::shared_ptr<Node>& node) {
  for (Tensor& t : outputs) append_history(t, node);
}

}  // namespace strata::autograd
