#include "ops/custom_function.h"

#include "ops/detail/op_util.h"

namespace strata {

using autograd::TensorList;

namespace {

bool contains(const TensorList& list, const Tensor& t) {
  for (const Tensor& x : list)
    if (x.defined() && x.is_same(t)) return true;
  return false;
}

// True when a tensor of `shape` broadcasts to `target` (so a gradient of `target` sums down to it).
bool broadcasts_to(IntArrayRef shape, IntArrayRef target) {
  if (shape.size() > target.size()) return false;
  const std::size_t lead = target.size() - shape.size();
  for (std::size_t d = 0; d < shape.size(); ++d)
    if (shape[d] != 1 && shape[d] != target[lead + d]) return false;
  return true;
}

// ctx.mark_dirty / mark_non_differentiable name inputs and outputs of this call only.
void check_spec(const CustomFunctionSpec& spec, const TensorList& outputs) {
  for (std::size_t i = 0; i < outputs.size(); ++i)
    STRATA_CHECK(outputs[i].defined(), spec.name, ": output ", i, " of the forward is undefined");
  for (std::size_t i = 0; i < spec.dirty.size(); ++i) {
    STRATA_CHECK(contains(spec.inputs, spec.dirty[i]), spec.name,
                 ": mark_dirty only accepts input tensors, but argument ", i, " isn't one");
    STRATA_CHECK(contains(outputs, spec.dirty[i]), spec.name,
                 ": some elements marked as dirty during the forward "
                 "method were not returned as output. The inputs that are modified inplace must all be outputs of the "
                 "Function (argument ",
                 i, " of mark_dirty, ", spec.dirty[i].describe(), ")");
  }
  for (std::size_t i = 0; i < spec.non_differentiable.size(); ++i)
    STRATA_CHECK(contains(outputs, spec.non_differentiable[i]), spec.name,
                 ": mark_non_differentiable only accepts output tensors, but argument ", i, " isn't one");
}

}  // namespace

CustomFunctionNode::CustomFunctionNode(std::string name, CustomBackward backward, std::vector<bool> tensor_inputs,
                                       bool materialize_grads)
    : name_(std::move(name)),
      backward_(std::move(backward)),
      tensor_inputs_(std::move(tensor_inputs)),
      materialize_grads_(materialize_grads) {}

TensorList CustomFunctionNode::apply(TensorList&& grad_outputs) { return check_gradients(backward_(grad_outputs)); }

TensorList CustomFunctionNode::check_gradients(TensorList grads) const {
  const std::size_t n = tensor_inputs_.size();
  bool extra_defined = false;
  for (std::size_t i = n; i < grads.size(); ++i) extra_defined = extra_defined || grads[i].defined();
  STRATA_CHECK(grads.size() >= n && !extra_defined, "function ", name_,
               " returned an incorrect number of gradients (expected ", n, ", got ", grads.size(), ")");
  grads.resize(n);
  for (std::size_t i = 0; i < n; ++i) grads[i] = check_gradient(i, std::move(grads[i]));
  return grads;
}

Tensor CustomFunctionNode::check_gradient(std::size_t i, Tensor grad) const {
  if (!grad.defined()) return grad;
  STRATA_CHECK(tensor_inputs_[i], "function ", name_, " returned a gradient different than None at position ", i + 1,
               ", but the corresponding forward input was not a Variable");
  if (!needs_input_grad(i)) return Tensor();
  const autograd::TensorMeta& meta = input_meta()[i];
  if (grad.sizes() != meta.sizes) {
    STRATA_CHECK(broadcasts_to(meta.sizes, grad.sizes()), "Function ", name_, " returned an invalid gradient at index ",
                 i, " - got ", grad.sizes(), " but expected shape compatible with ", meta.sizes);
    grad = ops::detail::sum_to_shape(grad, meta.sizes);
  }
  if (grad.dtype() != meta.dtype) {
    STRATA_CHECK(is_floating(grad.dtype()), "Function ", name_, " returned an invalid gradient at index ", i,
                 " - expected dtype ", meta.dtype, " but got ", grad.dtype());
    grad = grad.to(meta.dtype);
  }
  return grad;
}

std::vector<bool> custom_function_needs_input_grad(const TensorList& inputs) {
  std::vector<bool> out;
  const bool on = autograd::GradMode::is_enabled();
  for (const Tensor& t : inputs) out.push_back(on && t.defined() && t.requires_grad());
  return out;
}

std::shared_ptr<CustomFunctionNode> record_custom_function(const CustomFunctionSpec& spec, TensorList& outputs,
                                                           CustomBackward backward) {
  check_spec(spec, outputs);
  if (!autograd::needs_grad(spec.inputs)) return nullptr;
  for (const Tensor& d : spec.dirty)
    STRATA_CHECK(!(d.is_leaf() && d.requires_grad()), spec.name, ": a leaf Variable that requires grad (", d.describe(),
                 ") has been used in an in-place operation (marked dirty)");
  std::vector<bool> tensor_inputs;
  for (const Tensor& t : spec.inputs) tensor_inputs.push_back(t.defined());
  auto node = std::make_shared<CustomFunctionNode>(spec.name, std::move(backward), std::move(tensor_inputs),
                                                   spec.materialize_grads);
  for (const Tensor& t : spec.inputs) node->add_input(t);
  for (const Tensor& t : spec.to_save) node->save(t);
  for (Tensor& out : outputs) {
    if (contains(spec.non_differentiable, out) || !is_floating(out.dtype())) {
      if (out.requires_grad()) out = out.detach();
      node->add_output(out);
    } else {
      autograd::append_history(out, node, contains(spec.dirty, out));
    }
  }
  return node;
}

}  // namespace strata
