#pragma once
/// @file
/// Gradient hooks on tensors (Tensor::register_hook, Tensor::retain_grad): the engine's side.
///
/// Note [Tensor hooks]
/// Tensor::register_hook stores the hook in the tensor's AutogradMeta, so every handle to the
/// tensor sees it and remove_hook() finds it. Where it runs depends on what the tensor is:
///  - a leaf that requires grad: in its AccumulateGrad node, on the gradient arriving there
///    (summed over every use of the leaf), before it is accumulated into `.grad` — or captured by
///    grad() at that leaf;
///  - a non-leaf: its grad_fn is told to watch that output (Node::watch_output, a weak reference,
///    so the node does not keep the tensor's record alive and no cycle forms), and the engine runs
///    the hooks on the gradient arriving at that output slot, summed over every consumer, before
///    the node runs or grad() captures it.
/// Hooks run in registration order, each on the previous one's result; a hook returning an
/// undefined tensor leaves the gradient as it was, one returning a tensor replaces it (it must have
/// the gradient's shape and dtype). Then a non-leaf that retains its gradient (retain_grad) gets
/// the result accumulated into its `.grad` — after every hook, whatever the registration order,
/// as in PyTorch 2. Hooks run on the thread that runs backward, with grad mode off; a slot that
/// received no gradient (an output nobody used) runs no hook.

#include "autograd/node.h"

namespace strata::autograd::detail {

/// The engine's part: runs the hooks of every watched output of `node` (for an AccumulateGrad,
/// of its leaf) on `grads`, the gradients arriving at its output slots, in place.
void run_tensor_hooks(const Node& node, TensorList& grads);

}  // namespace strata::autograd::detail
