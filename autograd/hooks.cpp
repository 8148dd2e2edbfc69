#include "autograd/hooks.h"

#include <atomic>
#include <mutex>

#include "autograd/accumulate.h"

namespace strata::autograd {

namespace {

std::atomic<uint64_t> next_hook_id{1};
// Registration, removal and the engine's reads of a tensor's hook list may happen on different
// threads (a hook removed while another thread runs backward).
std::mutex hooks_mutex;

using Meta = ::strata::detail::AutogradMeta;

// Runs `meta`'s hooks on `grad` (defined), then accumulates into a retained gradient.
void run_hooks_of(Meta& meta, Tensor& grad, const Node& node, uint32_t slot) {
  std::vector<std::pair<uint64_t, Tensor::GradHook>> hooks;
  {
    std::lock_guard<std::mutex> lock(hooks_mutex);
    hooks = meta.hooks;
  }
  for (const auto& [id, hook] : hooks) {
    Tensor out = hook(grad);
    if (!out.defined()) continue;
    STRATA_CHECK(out.sizes() == grad.sizes() && out.dtype() == grad.dtype(), "register_hook: hook ", id,
                 " on output ", slot, " of ", node.name(), " returned ", out.describe(), " for a gradient ",
                 grad.describe(), "; a hook must not change the gradient's shape or dtype");
    grad = std::move(out);
  }
  if (!meta.retains_grad) return;
  // The retained gradient is a copy: backward goes on consuming (and may overwrite) `grad`.
  meta.grad = meta.grad.defined() ? detail::sum_gradients(meta.grad, grad) : grad.clone();
}

}  // namespace

void detail::run_tensor_hooks(const Node& node, TensorList& grads) {
  if (const auto* acc = dynamic_cast<const AccumulateGrad*>(&node)) {
    Meta* meta = acc->leaf().autograd_meta_if_any();
    if (meta != nullptr && !grads.empty() && grads[0].defined())
      run_hooks_of(*meta, grads[0], node, 0);
    return;
  }
  for (const Node::WatchedOutput& w : node.watched_outputs()) {
    std::shared_ptr<Meta> meta = w.meta.lock();
    if (meta == nullptr || w.output_nr >= grads.size() || !grads[w.output_nr].defined()) continue;
    run_hooks_of(*meta, grads[w.output_nr], node, w.output_nr);
  }
}

}  // namespace strata::autograd

namespace strata {

namespace {
void check_hookable(const Tensor& t, const char* op) {
  STRATA_CHECK(t.requires_grad(), op, ": cannot register a hook on a tensor that doesn't require gradient (",
               t.describe(), ")");
}
}  // namespace

uint64_t Tensor::register_hook(GradHook hook) const {
  require_defined("register_hook");
  check_hookable(*this, "register_hook");
  STRATA_CHECK(hook != nullptr, "register_hook: the hook is empty");
  const uint64_t id = autograd::next_hook_id.fetch_add(1, std::memory_order_relaxed);
  autograd_meta();  // creates impl_->autograd
  {
    std::lock_guard<std::mutex> lock(autograd::hooks_mutex);
    impl_->autograd->hooks.emplace_back(id, std::move(hook));
  }
  if (const auto& fn = grad_fn()) fn->watch_output(output_nr(), impl_->autograd);
  return id;
}

bool Tensor::remove_hook(uint64_t id) const {
  require_defined("remove_hook");
  detail::AutogradMeta* meta = autograd_meta_if_any();
  if (meta == nullptr) return false;
  std::lock_guard<std::mutex> lock(autograd::hooks_mutex);
  for (auto it = meta->hooks.begin(); it != meta->hooks.end(); ++it) {
    if (it->first == id) {
      meta->hooks.erase(it);
      return true;
    }
  }
  return false;
}

void Tensor::retain_grad() const {
  require_defined("retain_grad");
  STRATA_CHECK(requires_grad(), "retain_grad: can't retain_grad on a tensor that has requires_grad=False (",
               describe(), ")");
  if (is_leaf()) return;
  autograd_meta().retains_grad = true;
  grad_fn()->watch_output(output_nr(), impl_->autograd);
}

bool Tensor::retains_grad() const {
  const detail::AutogradMeta* meta = autograd_meta_if_any();
  return meta != nullptr && meta->retains_grad && !is_leaf();
}

}  // namespace strata
