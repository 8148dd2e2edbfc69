#pragma once
/// @file
/// The seam through which core's Tensor reaches the backward engine (internal).
///
/// Note [Autograd seam]
/// Tensor's autograd entry points (backward, register_hook, remove_hook, retain_grad) belong to
/// the Tensor API, as in PyTorch, but run the engine, which lives in autograd/ above core. core
/// defines them (core/tensor_autograd.cpp) by calling the AutogradHooks that autograd/ installs
/// from a static initializer (autograd/hooks.cpp); the `strata` target links strata_autograd as
/// a whole archive so the initializer is always part of the link, as memory/'s allocator is
/// (Note [Default allocator registration]). A program that links core without autograd gets an
/// error naming what to link instead of an undefined symbol. PyTorch has the same split (the
/// tensor's autograd methods dispatch to the autograd library through an interface).

#include <cstdint>
#include <memory>

#include "core/tensor.h"

namespace strata::detail {

class AutogradHooks {
 public:
  virtual ~AutogradHooks() = default;
  virtual void backward(const Tensor& self, const Tensor& grad, bool retain_graph) const = 0;
  /// `meta` is self's autograd record (created by the caller).
  virtual uint64_t register_hook(const Tensor& self, const std::shared_ptr<AutogradMeta>& meta,
                                 Tensor::GradHook hook) const = 0;
  virtual bool remove_hook(AutogradMeta& meta, uint64_t id) const = 0;
  /// Called for a non-leaf only.
  virtual void retain_grad(const Tensor& self, const std::shared_ptr<AutogradMeta>& meta) const = 0;
};

/// Installs the engine's hooks (autograd/ does, once, at static initialization).
void set_autograd_hooks(const AutogradHooks* hooks);
/// The installed hooks; throws strata::Error naming `op` when autograd/ is not linked.
const AutogradHooks& autograd_hooks(const char* op);

}  // namespace strata::detail
