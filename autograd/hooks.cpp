#include "autograd/hooks.h"

#include <atomic>
#include <mutex>

#include "autograd/accumulate.h"
#include "autograd/engine.h"
#include "core/detail/autograd_hooks.h"

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
    STRATA_CHECK(out.sizes() == grad.sizes() && out.dtype() == grad.dtype(), "register_hook: hook ", id, " on output ",
                 slot, " of ", node.name(), " returned ", out.describe(), " for a gradient ", grad.describe(),
                 "; a hook must not change the gradient's shape or dtype");
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
    if (meta != nullptr && !grads.empty() && grads[0].defined()) run_hooks_of(*meta, grads[0], node, 0);
    return;
  }
  for (const Node::WatchedOutput& w : node.watched_outputs()) {
    std::shared_ptr<Meta> meta = w.meta.lock();
    if (meta == nullptr || w.output_nr >= grads.size() || !grads[w.output_nr].defined()) continue;
    run_hooks_of(*meta, grads[w.output_nr], node, w.output_nr);
  }
}

}  // namespace strata::autograd

namespace strata::autograd {

namespace {

/// The engine side of Tensor's autograd entry points (Note [Autograd seam] in
/// core/detail/autograd_hooks.h); core checked the arguments and made the autograd record.
class EngineHooks final : public ::strata::detail::AutogradHooks {
 public:
  void backward(const Tensor& self, const Tensor& grad, bool retain_graph) const override {
    autograd::backward({self}, grad.defined() ? TensorList{grad} : TensorList{}, retain_graph);
  }

  uint64_t register_hook(const Tensor& self, const std::shared_ptr<::strata::detail::AutogradMeta>& meta,
                         Tensor::GradHook hook) const override {
    const uint64_t id = next_hook_id.fetch_add(1, std::memory_order_relaxed);
    {
      std::lock_guard<std::mutex> lock(hooks_mutex);
      meta->hooks.emplace_back(id, std::move(hook));
    }
    if (const auto& fn = self.grad_fn()) fn->watch_output(self.output_nr(), meta);
    return id;
  }

  bool remove_hook(::strata::detail::AutogradMeta& meta, uint64_t id) const override {
    std::lock_guard<std::mutex> lock(hooks_mutex);
    for (auto it = meta.hooks.begin(); it != meta.hooks.end(); ++it) {
      if (it->first == id) {
        meta.hooks.erase(it);
        return true;
      }
    }
    return false;
  }

  void retain_grad(const Tensor& self, const std::shared_ptr<::strata::detail::AutogradMeta>& meta) const override {
    self.grad_fn()->watch_output(self.output_nr(), meta);
  }
};

// The `strata` target links strata_autograd as a whole archive, so this initializer always runs.
const bool kHooksInstalled = [] {
  static const EngineHooks hooks;
  ::strata::detail::set_autograd_hooks(&hooks);
  return true;
}();

}  // namespace

}  // namespace strata::autograd
