#pragma once
/// @file
/// User-defined functions with their own backward (what `torch.autograd.Function` gives Python
/// users): the node that calls the user's backward, and the recording of the forward's outputs.
///
/// Note [Custom functions]
/// A custom function's forward runs with grad mode off (nothing inside it is recorded); then
/// record_custom_function() records one CustomFunctionNode for the whole call, as if it were an
/// op: its next edges are the tensor arguments' gradient edges (a non-tensor argument is an
/// undefined entry with no edge), the values the forward asked to save go through Node::save()
/// (so the version check and the saved-tensor hooks apply to them: Note [Saved values]), and each
/// differentiable output becomes one of its outputs. As in PyTorch:
///  - an output that is one of the inputs, returned unchanged, becomes a new handle with the new
///    history; an input the forward modified in place (marked dirty) gets the new history itself,
///    which is refused for a leaf that requires grad; a dirty tensor must be an input and returned;
///  - outputs marked non-differentiable, and integer or bool outputs, get no history; the node
///    still counts them, and their gradient is zeros (or undefined without materialize_grads);
///  - the user's backward gets one gradient per output and must return one per argument (extra
///    trailing undefined entries are allowed). A gradient for a non-tensor argument is an error;
///    one for an input that needs none is dropped; one whose shape the input's broadcasts to is
///    summed down to it, another shape is an error; a floating gradient of another dtype is
///    converted to the input's.

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "autograd/node.h"

namespace strata {

/// The user's backward: gradients w.r.t. the outputs → one gradient per forward argument
/// (undefined for none).
using CustomBackward = std::function<autograd::TensorList(const autograd::TensorList& grad_outputs)>;

/// What a custom function's forward produced besides its outputs (PyTorch's ctx calls).
struct CustomFunctionSpec {
  /// "<Class>Backward", the node's name.
  std::string name;
  /// One entry per forward argument; undefined for an argument that is not a tensor.
  autograd::TensorList inputs;
  /// Inputs the forward modified in place (ctx.mark_dirty).
  autograd::TensorList dirty;
  /// Outputs that get no gradient (ctx.mark_non_differentiable).
  autograd::TensorList non_differentiable;
  /// Values to save for backward (ctx.save_for_backward); undefined entries save "nothing".
  autograd::TensorList to_save;
  /// ctx.set_materialize_grads: unused outputs' gradients are zeros (true) or undefined (false).
  bool materialize_grads = true;
};

/// The node of one call of a custom function (Note [Custom functions]).
class CustomFunctionNode final : public autograd::Node {
 public:
  CustomFunctionNode(std::string name, CustomBackward backward, std::vector<bool> tensor_inputs,
                     bool materialize_grads);
  std::string name() const override { return name_; }
  autograd::TensorList apply(autograd::TensorList&& grad_outputs) override;
  bool materialize_grads() const override { return materialize_grads_; }

 private:
  /// Checks and adjusts what the user's backward returned (count, positions, shapes, dtypes).
  autograd::TensorList check_gradients(autograd::TensorList grads) const;
  Tensor check_gradient(std::size_t i, Tensor grad) const;

  std::string name_;
  CustomBackward backward_;
  std::vector<bool> tensor_inputs_;
  bool materialize_grads_;
};

/// Per argument: whether grad mode is on and it is a tensor that requires grad (ctx.needs_input_grad
/// during forward).
std::vector<bool> custom_function_needs_input_grad(const autograd::TensorList& inputs);

/// Checks the spec against `outputs` (the forward's tensor outputs) and, when grad mode is on and
/// some input requires grad, records a CustomFunctionNode calling `backward` and gives the
/// outputs their history in place (Note [Custom functions]). Returns the node, or null when
/// nothing was recorded (the outputs are then left as they are).
std::shared_ptr<CustomFunctionNode> record_custom_function(const CustomFunctionSpec& spec,
                                                           autograd::TensorList& outputs, CustomBackward backward);

}  // namespace strata
