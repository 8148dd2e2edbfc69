// Module hooks: forward pre-hooks, forward hooks and full backward hooks on nn::Module.
//
// Note [Module hooks]
// A module's hooks run when it is called through operator() — what the containers (Sequential,
// the zoo's blocks that call their children that way) and Python's `module(x)` do — not when
// forward() is called directly, as in PyTorch. In order:
//  1. each forward pre-hook may replace the input;
//  2. with backward hooks and grad mode on, an input that requires grad is passed through an
//     identity node ("BackwardHookFunctionBackward", PyTorch's name) so that the gradient w.r.t.
//     the input the forward saw can be intercepted;
//  3. forward(), then each forward hook may replace the output;
//  4. with backward hooks, an output that requires grad is passed through a second identity node,
//     which records the gradient w.r.t. the output when backward reaches it. When the first node
//     later receives the gradient w.r.t. the input, each backward hook is called with
//     (grad_input, grad_output) and may replace grad_input. When the input needs no gradient
//     (the first layer) there is no first node: the hooks run at the output's node with an
//     undefined grad_input, and what they return is ignored.
// The hooks lists are copied when a call starts (so a hook removed during a forward still runs for
// it) and the backward hooks a graph runs are those registered when its forward ran. The nodes
// refer to the module by address: a module must outlive the backward of a graph it recorded with
// backward hooks (a Python module does: the hook holds it).

#include <algorithm>
#include <atomic>

#include "autograd/grad_mode.h"
#include "autograd/node.h"
#include "models/module.h"

namespace strata::nn {

namespace {
std::atomic<uint64_t> next_module_hook_id{1};
}  // namespace

struct Module::Hooks {
  std::vector<std::pair<uint64_t, ForwardPreHook>> forward_pre;
  std::vector<std::pair<uint64_t, ForwardHook>> forward;
  std::vector<std::pair<uint64_t, BackwardHook>> backward;
};

namespace {

template <typename Hook>
uint64_t add_hook(std::vector<std::pair<uint64_t, Hook>>& list, Hook hook, bool prepend, const char* what) {
  STRATA_CHECK(hook != nullptr, what, ": the hook is empty");
  const uint64_t id = next_module_hook_id.fetch_add(1, std::memory_order_relaxed);
  list.emplace(prepend ? list.begin() : list.end(), id, std::move(hook));
  return id;
}

template <typename Hook>
bool erase_hook(std::vector<std::pair<uint64_t, Hook>>& list, uint64_t id) {
  auto it = std::find_if(list.begin(), list.end(), [id](const auto& h) { return h.first == id; });
  if (it == list.end()) return false;
  list.erase(it);
  return true;
}

using BackwardHooks = std::vector<std::pair<uint64_t, Module::BackwardHook>>;

// What the two identity nodes of one call share (step 4 of Note [Module hooks]).
struct BackwardHookCall {
  Module* module = nullptr;
  BackwardHooks hooks;
  bool input_wrapped = false;
  std::vector<Tensor> grad_output;
};

std::vector<Tensor> run_backward_hooks(BackwardHookCall& call, std::vector<Tensor> grad_input) {
  for (const auto& [id, hook] : call.hooks) {
    std::vector<Tensor> r = hook(*call.module, grad_input, call.grad_output);
    if (r.empty()) continue;
    STRATA_CHECK(r.size() == grad_input.size(), call.module->type_name(), ": backward hook ", id, " returned ",
                 r.size(), " gradients for ", grad_input.size(), " inputs");
    for (std::size_t i = 0; i < r.size(); ++i) {
      STRATA_CHECK(!r[i].defined() || !grad_input[i].defined() ||
                       (r[i].sizes() == grad_input[i].sizes() && r[i].dtype() == grad_input[i].dtype()),
                   call.module->type_name(), ": backward hook ", id, " returned ", r[i].describe(),
                   " for the input gradient ", grad_input[i].describe());
    }
    grad_input = std::move(r);
  }
  return grad_input;
}

// An identity of `t` recorded with `backward` (Note [Module hooks], steps 2 and 4).
Tensor identity_node(const Tensor& t, autograd::BackwardFn backward) {
  auto node = autograd::make_node("BackwardHookFunctionBackward", {&t}, std::move(backward));
  Tensor out = t.detach();
  autograd::set_history({&out}, node);
  return out;
}

Tensor wrap_input(const Tensor& input, const std::shared_ptr<BackwardHookCall>& call) {
  if (!input.requires_grad()) return input;
  call->input_wrapped = true;
  return identity_node(input, [call](autograd::Node&, const autograd::TensorList& g) -> autograd::TensorList {
    std::vector<Tensor> out = run_backward_hooks(*call, {g[0]});
    return {out[0]};
  });
}

Tensor wrap_output(const Tensor& output, const std::shared_ptr<BackwardHookCall>& call) {
  if (!output.requires_grad()) return output;
  return identity_node(output, [call](autograd::Node&, const autograd::TensorList& g) -> autograd::TensorList {
    call->grad_output = {g[0]};
    if (!call->input_wrapped) run_backward_hooks(*call, {Tensor()});
    return {g[0]};
  });
}

}  // namespace

uint64_t Module::register_forward_pre_hook(ForwardPreHook hook, bool prepend) {
  if (!hooks_) hooks_ = std::make_shared<Hooks>();
  return add_hook(hooks_->forward_pre, std::move(hook), prepend, "register_forward_pre_hook");
}

uint64_t Module::register_forward_hook(ForwardHook hook, bool prepend) {
  if (!hooks_) hooks_ = std::make_shared<Hooks>();
  return add_hook(hooks_->forward, std::move(hook), prepend, "register_forward_hook");
}

uint64_t Module::register_full_backward_hook(BackwardHook hook, bool prepend) {
  if (!hooks_) hooks_ = std::make_shared<Hooks>();
  return add_hook(hooks_->backward, std::move(hook), prepend, "register_full_backward_hook");
}

bool Module::remove_hook(uint64_t id) {
  if (!hooks_) return false;
  return erase_hook(hooks_->forward_pre, id) || erase_hook(hooks_->forward, id) || erase_hook(hooks_->backward, id);
}

bool Module::has_hooks() const {
  return hooks_ && (!hooks_->forward_pre.empty() || !hooks_->forward.empty() || !hooks_->backward.empty());
}

Tensor Module::call_with_hooks(const Tensor& input) {
  const Hooks hooks = *hooks_;  // a copy: hooks may (un)register hooks
  Tensor x = input;
  for (const auto& [id, hook] : hooks.forward_pre)
    if (Tensor r = hook(*this, x); r.defined()) x = std::move(r);
  std::shared_ptr<BackwardHookCall> call;
  if (!hooks.backward.empty() && autograd::GradMode::is_enabled()) {
    call = std::make_shared<BackwardHookCall>();
    call->module = this;
    call->hooks = hooks.backward;
    x = wrap_input(x, call);
  }
  Tensor out = forward(x);
  for (const auto& [id, hook] : hooks.forward)
    if (Tensor r = hook(*this, x, out); r.defined()) out = std::move(r);
  return call ? wrap_output(out, call) : out;
}

}  // namespace strata::nn
