#pragma once
/// @file
/// The recorded graph: Node, Edge, and the helpers ops use to record themselves.
///
/// Note [Recording an op]
/// An op that may need gradients does, after computing its outputs:
///
///     if (autograd::needs_grad({&a, &b})) {
///       auto node = autograd::make_node("MulBackward", {&a, &b},
///           [](autograd::Node& n, const TensorList& g) -> TensorList {
///             Tensor a = n.saved(0), b = n.saved(1);
///             return {n.needs_input_grad(0) ? mul(g[0], b) : Tensor(),
///                     n.needs_input_grad(1) ? mul(g[0], a) : Tensor()};
///           });
///       node->save(a); node->save(b);
///       autograd::set_history({&out}, node);
///     }
///
/// The backward function receives one gradient per forward output (zeros are filled in for an
/// output nobody used) and returns one gradient per forward input, each with that input's shape
/// and dtype (or undefined where the input needs none); the engine checks this. It runs with grad
/// mode off. It must not capture tensors: everything it needs from the forward goes through
/// save() (Note [Saved values]); non-tensor attributes may be captured by value.

#include <atomic>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "autograd/grad_mode.h"
#include "autograd/saved_tensor.h"
#include "core/tensor.h"

namespace strata::autograd {

using TensorList = std::vector<Tensor>;
class Node;

/// Where a gradient flows: input slot `input_nr` of `node` (null node: nowhere).
struct Edge {
  std::shared_ptr<Node> node;
  uint32_t input_nr = 0;
  bool valid() const { return node != nullptr; }
};

/// Shape and dtype of a tensor the node must produce or accept a gradient for.
struct TensorMeta {
  Dims sizes;
  DType dtype = DType::f32;
};

class Node : public std::enable_shared_from_this<Node> {
 public:
  Node();
  virtual ~Node() = default;
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  /// "MulBackward", "AccumulateGrad", ...
  virtual std::string name() const = 0;
  /// Gradients w.r.t. the forward outputs → gradients w.r.t. the forward inputs (one per next edge).
  virtual TensorList apply(TensorList&& grad_outputs) = 0;

  /// Order of creation (increasing); the engine runs ready nodes with the highest first.
  uint64_t sequence_nr() const { return sequence_nr_; }
  const std::vector<Edge>& next_edges() const { return next_edges_; }
  /// Forward inputs (one per next edge) and outputs (one per gradient this node receives).
  const std::vector<TensorMeta>& input_meta() const { return input_meta_; }
  const std::vector<TensorMeta>& output_meta() const { return output_meta_; }
  /// True when forward input `i` leads to something that wants a gradient.
  bool needs_input_grad(std::size_t i) const { return i < next_edges_.size() && next_edges_[i].valid(); }

  /// Saves a value for backward through the hooks (Note [Saved values]); returns its index.
  std::size_t save(const Tensor& value);
  /// Unpacks saved value `i` (checks its version).
  Tensor saved(std::size_t i) const;
  const std::vector<SavedTensor>& saved_values() const { return saved_; }
  /// Drops every saved value (the engine calls it once the node ran, unless the graph is retained).
  void release_saved();
  /// Whether the engine fills the gradient of an output nobody used with zeros before apply()
  /// (otherwise apply() receives an undefined tensor there). True but for custom functions that
  /// asked otherwise (ctx.set_materialize_grads(False)).
  virtual bool materialize_grads() const { return true; }

  /// Output `nr` is a tensor with gradient hooks or a retained gradient, whose record is `meta`
  /// (held weakly: the node does not keep the tensor's record alive); Note [Tensor hooks].
  void watch_output(uint32_t nr, const std::shared_ptr<::strata::detail::AutogradMeta>& meta);
  struct WatchedOutput {
    uint32_t output_nr;
    std::weak_ptr<::strata::detail::AutogradMeta> meta;
  };
  const std::vector<WatchedOutput>& watched_outputs() const { return watched_; }

  // For make_node/set_history and the engine.
  void add_input(const Tensor& input);
  void add_output(const Tensor& output) { output_meta_.push_back({output.sizes(), output.dtype()}); }

 protected:
  std::vector<Edge> next_edges_;
  std::vector<TensorMeta> input_meta_;
  std::vector<TensorMeta> output_meta_;
  std::vector<SavedTensor> saved_;

 private:
  std::vector<WatchedOutput> watched_;
  uint64_t sequence_nr_;
};

using BackwardFn = std::function<TensorList(Node& self, const TensorList& grad_outputs)>;

/// A node whose backward is a callable (what ops use; see Note [Recording an op]).
class FunctionNode final : public Node {
 public:
  FunctionNode(std::string name, BackwardFn fn) : name_(std::move(name)), fn_(std::move(fn)) {}
  std::string name() const override { return name_; }
  TensorList apply(TensorList&& grad_outputs) override { return fn_(*this, grad_outputs); }

 private:
  std::string name_;
  BackwardFn fn_;
};

/// Accumulates the gradient of a leaf into its `.grad`.
class AccumulateGrad final : public Node {
 public:
  explicit AccumulateGrad(Tensor leaf);
  std::string name() const override { return "AccumulateGrad"; }
  TensorList apply(TensorList&& grad_outputs) override;
  const Tensor& leaf() const { return leaf_; }

 private:
  Tensor leaf_;
};

/// True when grad mode is on and some defined input requires grad.
bool needs_grad(std::initializer_list<const Tensor*> inputs);
bool needs_grad(const TensorList& inputs);

/// The edge a gradient w.r.t. `t` must flow into: (grad_fn, output_nr) for an op's output, the
/// leaf's AccumulateGrad for a leaf that requires grad, an invalid edge otherwise.
Edge gradient_edge(const Tensor& t);

/// A FunctionNode whose next edges are the inputs' gradient edges (inputs may be undefined).
std::shared_ptr<Node> make_node(std::string name, std::initializer_list<const Tensor*> inputs, BackwardFn fn);
std::shared_ptr<Node> make_node(std::string name, const TensorList& inputs, BackwardFn fn);

/// Makes `outputs` the outputs of `node` (output i gets output_nr i).
void set_history(std::initializer_list<Tensor*> outputs, const std::shared_ptr<Node>& node);
void set_history(TensorList& outputs, const std::shared_ptr<Node>& node);
/// Makes `output` the next output of `node` (its output_nr is the node's output count so far).
/// An output that already has a history or requires grad is first replaced by a new handle
/// (detach()), so the tensor it was is left alone; with `in_place` the tensor itself gets the new
/// history instead, as one an in-place op modified does (it must not be a leaf that requires grad).
void append_history(Tensor& output, const std::shared_ptr<Node>& node, bool in_place = false);

}  // namespace strata::autograd
