// Tensor's autograd entry points, defined in core through the seam autograd/ installs
// (Note [Autograd seam] in core/detail/autograd_hooks.h).
#include <atomic>

#include "core/detail/autograd_hooks.h"
#include "core/error.h"

namespace strata {

namespace {
std::atomic<const detail::AutogradHooks*> installed_hooks{nullptr};
}  // namespace

void detail::set_autograd_hooks(const AutogradHooks* hooks) { installed_hooks.store(hooks, std::memory_order_release); }

const detail::AutogradHooks& detail::autograd_hooks(const char* op) {
  const AutogradHooks* hooks = installed_hooks.load(std::memory_order_acquire);
  if (hooks == nullptr) {
    STRATA_FAIL(op,
                ": the autograd engine is not linked into this program; link the `strata` target "
                "(or strata_autograd as a whole archive)");
  }
  return *hooks;
}

void Tensor::backward(const Tensor& grad, bool retain_graph) const {
  require_defined("backward");
  detail::autograd_hooks("backward").backward(*this, grad, retain_graph);
}

uint64_t Tensor::register_hook(GradHook hook) const {
  require_defined("register_hook");
  STRATA_CHECK(requires_grad(), "register_hook: cannot register a hook on a tensor that doesn't require gradient (",
               describe(), ")");
  STRATA_CHECK(hook != nullptr, "register_hook: the hook is empty");
  const detail::AutogradHooks& hooks = detail::autograd_hooks("register_hook");
  autograd_meta();  // creates impl_->autograd
  return hooks.register_hook(*this, impl_->autograd, std::move(hook));
}

bool Tensor::remove_hook(uint64_t id) const {
  require_defined("remove_hook");
  detail::AutogradMeta* meta = autograd_meta_if_any();
  if (meta == nullptr) return false;
  return detail::autograd_hooks("remove_hook").remove_hook(*meta, id);
}

void Tensor::retain_grad() const {
  require_defined("retain_grad");
  STRATA_CHECK(requires_grad(), "retain_grad: can't retain_grad on a tensor that has requires_grad=False (", describe(),
               ")");
  if (is_leaf()) return;
  const detail::AutogradHooks& hooks = detail::autograd_hooks("retain_grad");
  autograd_meta().retains_grad = true;
  hooks.retain_grad(*this, impl_->autograd);
}

bool Tensor::retains_grad() const {
  const detail::AutogradMeta* meta = autograd_meta_if_any();
  return meta != nullptr && meta->retains_grad && !is_leaf();
}

}  // namespace strata
