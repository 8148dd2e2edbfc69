#pragma once
/// @file
/// nn::Module: the base of every layer and model, with PyTorch's registries (parameters, buffers,
/// children), names ("0.weight", "bn1.running_mean"), train/eval switch, state_dict and
/// load_state_dict, and repr.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "models/state_dict.h"

namespace strata::nn {

/// What load_state_dict did not match (PyTorch's `_IncompatibleKeys`).
struct LoadResult {
  std::vector<std::string> missing_keys;
  std::vector<std::string> unexpected_keys;
};

/// Base class of the nn modules, modelled on torch.nn.Module.
///
/// A module owns ordered registries of parameters, buffers and child modules. Names are non-empty,
/// contain no '.', and are unique across the three kinds. Modules are held by std::shared_ptr (a
/// child may be shared by several parents; it is then listed once by the `named_*` traversals,
/// as in PyTorch, but appears under every name in state_dict()).
class Module : public std::enable_shared_from_this<Module> {
 public:
  /// `type_name` is what repr and error messages call the module ("Linear").
  explicit Module(std::string type_name = "Module");
  virtual ~Module();
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  /// The forward computation. The default throws "<Type> has no forward(Tensor)"; modules with
  /// several inputs add their own non-virtual overloads.
  virtual Tensor forward(const Tensor& input);
  /// forward(input) through the module's hooks (Note [Module hooks]); what containers call.
  Tensor operator()(const Tensor& input) { return hooks_ == nullptr ? forward(input) : call_with_hooks(input); }

  // ---- hooks (Note [Module hooks] in models/module_hooks.cpp) -----------------------------------
  /// Runs before forward; returns a replacement input, or an undefined tensor to keep it.
  using ForwardPreHook = std::function<Tensor(Module& module, const Tensor& input)>;
  /// Runs after forward; returns a replacement output, or an undefined tensor to keep it.
  using ForwardHook = std::function<Tensor(Module& module, const Tensor& input, const Tensor& output)>;
  /// Runs when the gradient w.r.t. the module's input is computed, with it (undefined when the
  /// input needs none) and the gradient w.r.t. the output; returns replacement input gradients or
  /// an empty list to keep them.
  using BackwardHook = std::function<std::vector<Tensor>(Module& module, const std::vector<Tensor>& grad_input,
                                                         const std::vector<Tensor>& grad_output)>;
  /// PyTorch's register_forward_pre_hook / register_forward_hook / register_full_backward_hook:
  /// each returns an id for remove_hook(); `prepend` puts the hook before those already there.
  uint64_t register_forward_pre_hook(ForwardPreHook hook, bool prepend = false);
  uint64_t register_forward_hook(ForwardHook hook, bool prepend = false);
  uint64_t register_full_backward_hook(BackwardHook hook, bool prepend = false);
  /// Removes the hook with id `id`; false when this module has no such hook (any more).
  bool remove_hook(uint64_t id);
  /// True when some hook is registered on this module (not its children).
  bool has_hooks() const;

  /// Data a binding layer keeps with the module for as long as the module lives (Python: the
  /// arguments it was constructed with, for copy.deepcopy and pickle); C++ never looks at it.
  const std::shared_ptr<void>& binding_data() const { return binding_data_; }
  void set_binding_data(std::shared_ptr<void> data) { binding_data_ = std::move(data); }

  // ---- registries -----------------------------------------------------------------------------
  /// Registers (or replaces) parameter `name`. A defined tensor becomes a leaf that requires grad
  /// when `requires_grad` (it must then be floating). An undefined tensor is allowed (PyTorch's
  /// `bias=None`): the name is taken but the parameter is listed nowhere. Returns the stored tensor.
  Tensor& register_parameter(const std::string& name, Tensor value, bool requires_grad = true);
  /// Registers (or replaces) buffer `name`; non-persistent buffers are left out of state_dict().
  /// An undefined tensor is allowed and listed nowhere.
  Tensor& register_buffer(const std::string& name, Tensor value, bool persistent = true);
  /// Registers (or replaces) child module `name` (must not be null, nor this module).
  std::shared_ptr<Module> register_module(const std::string& name, std::shared_ptr<Module> module);
  template <typename M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> module) {
    register_module(name, std::static_pointer_cast<Module>(module));
    return module;
  }
  /// Removes parameter, buffer or child `name`; returns false when there is none.
  bool unregister(const std::string& name);

  bool has_parameter(const std::string& name) const;
  bool has_buffer(const std::string& name) const;
  bool has_child(const std::string& name) const;
  /// The parameter `name` (undefined if registered as undefined); throws if there is none.
  Tensor& parameter(const std::string& name);
  const Tensor& parameter(const std::string& name) const;
  /// The buffer `name`; throws if there is none.
  Tensor& buffer(const std::string& name);
  const Tensor& buffer(const std::string& name) const;
  bool is_persistent_buffer(const std::string& name) const;
  /// The child `name`; throws if there is none.
  std::shared_ptr<Module> child(const std::string& name) const;

  // ---- traversals (PyTorch's order and names) -------------------------------------------------
  /// Every defined parameter of this module and (with `recurse`) its descendants, module by module
  /// in pre-order, each tensor once.
  std::vector<std::pair<std::string, Tensor>> named_parameters(const std::string& prefix = "",
                                                               bool recurse = true) const;
  std::vector<Tensor> parameters(bool recurse = true) const;
  std::vector<std::pair<std::string, Tensor>> named_buffers(const std::string& prefix = "", bool recurse = true) const;
  std::vector<Tensor> buffers(bool recurse = true) const;
  /// The direct children in registration order (each module once).
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> named_children() const;
  std::vector<std::shared_ptr<Module>> children() const;
  /// This module (named `prefix`) and every descendant in pre-order, each module once. (For a
  /// module not owned by a shared_ptr, the first entry is a non-owning handle to it.)
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> named_modules(const std::string& prefix = "");
  std::vector<std::shared_ptr<Module>> modules();

  // ---- modes and gradients --------------------------------------------------------------------
  /// Sets training mode on this module and every descendant.
  Module& train(bool on = true);
  Module& eval() { return train(false); }
  bool is_training() const { return training_; }
  /// Clears (sets to undefined) the gradient of every parameter.
  void zero_grad();

  // ---- state ----------------------------------------------------------------------------------
  /// Per module (pre-order, following every registration, no de-duplication): its parameters,
  /// then its persistent buffers, then its children. Tensors are detached views of the module's.
  StateDict state_dict() const;
  /// Copies matching entries into the parameters and persistent buffers in place (no autograd,
  /// versions bumped; dtypes are converted like copy_). A shape mismatch is always an error; with
  /// `strict`, so are missing and unexpected keys. The error lists every problem, with PyTorch's
  /// wording. On error nothing is copied.
  LoadResult load_state_dict(const StateDict& state, bool strict = true);
  /// Throws exactly what load_state_dict(state, strict) would throw and returns what it would
  /// return, copying nothing (so a caller loading several parts can validate them all first).
  LoadResult check_state_dict(const StateDict& state, bool strict = true);

  // ---- printing -------------------------------------------------------------------------------
  const std::string& type_name() const { return type_name_; }
  void set_type_name(std::string name) { type_name_ = std::move(name); }
  /// The text inside the parentheses of repr (e.g. "in_features=4, out_features=3, bias=True").
  virtual std::string extra_repr() const;
  /// PyTorch's repr layout.
  std::string to_string() const;

 protected:
  /// Entries of a registry, in registration order.
  struct TensorSlot {
    std::string name;
    Tensor value;
    bool persistent = true;
  };
  struct ModuleSlot {
    std::string name;
    std::shared_ptr<Module> module;
  };

  /// Every registered child in order, without de-duplication (a container runs a module it holds
  /// twice twice).
  const std::vector<ModuleSlot>& child_slots() const { return children_; }

  /// Hook for modules whose state_dict format has optional keys (BatchNorm's num_batches_tracked,
  /// like PyTorch's version-1 checkpoints): returns true when a missing `name` is acceptable.
  virtual bool missing_key_ok(const std::string& name) const;

 private:
  void check_new_name(const std::string& name, const char* what, int kind) const;
  TensorSlot* find_slot(std::vector<TensorSlot>& slots, const std::string& name);
  const TensorSlot* find_slot(const std::vector<TensorSlot>& slots, const std::string& name) const;
  void collect_state(const std::string& prefix, StateDict& out) const;
  std::vector<std::pair<std::string, Tensor>> named_slots(std::vector<TensorSlot> Module::* registry,
                                                          const std::string& prefix, bool recurse) const;
  struct Expected;
  void collect_expected(const std::string& prefix, std::vector<Expected>& out);
  // load_state_dict's validation: the result, and the (target, source) copies to make.
  LoadResult plan_load(const StateDict& state, bool strict, std::vector<std::pair<Tensor, Tensor>>& copies);

  struct Hooks;
  /// operator()'s path when hooks are registered (models/module_hooks.cpp).
  Tensor call_with_hooks(const Tensor& input);

  std::string type_name_;
  bool training_ = true;
  std::shared_ptr<Hooks> hooks_;  // null until a hook is registered
  std::shared_ptr<void> binding_data_;
  std::vector<TensorSlot> parameters_;
  std::vector<TensorSlot> buffers_;
  std::vector<ModuleSlot> children_;
};

/// A pair of sizes given as one number (used for both dims) or two: `3` or `{3, 5}`. Remembers
/// which, because PyTorch's pooling reprs print what the user passed ("2" or "(2, 2)").
struct Size2 {
  int64_t h = 0, w = 0;
  bool scalar = true;
  Size2(int64_t v) : h(v), w(v), scalar(true) {}  // NOLINT: implicit like PyTorch's int-or-tuple
  Size2(int64_t h_, int64_t w_) : h(h_), w(w_), scalar(false) {}
  std::vector<int64_t> vec() const { return {h, w}; }
  /// "(3, 5)" always.
  std::string tuple_repr() const;
  /// "3" for a scalar, "(3, 5)" otherwise.
  std::string repr() const { return scalar ? std::to_string(h) : tuple_repr(); }
};

/// Python's repr of a float (shortest round-trip digits; "1e-05", "0.1", "1.0").
std::string py_float_repr(double value);
/// "True" / "False".
inline const char* py_bool(bool b) { return b ? "True" : "False"; }

}  // namespace strata::nn
