#pragma once
/// @file
/// SavedTensor: a value an op keeps for its backward, and the pack/unpack hooks every saved value
/// goes through.
///
/// Note [Saved values]
/// An op never captures a tensor for its backward any other way than through Node::save(), so the
/// hooks below see every saved value, including those saved inside built-in ops; this is the seam
/// the tape streamer and the rematerialization planner use. A SavedTensor
///  - stores the value detached from the graph (so an op may save its own output without a cycle),
///  - records the storage's version when saved and refuses to unpack once the value was modified in
///    place (the version is checked through a weak reference, so a pack hook that moved the value
///    elsewhere does not keep the original bytes alive),
///  - is released as soon as its node has run (unless the graph is retained); unpacking a released
///    value says the graph was already freed.

#include <any>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "core/tensor.h"

namespace strata::autograd {

/// A pair of hooks applied to every value saved while they are installed (see SavedTensorHooksGuard).
/// `pack` receives the value (detached) when an op saves it and returns whatever should be kept in
/// its place; `unpack` turns that back into a tensor of the same shape and dtype during backward.
class SavedTensorHooks {
 public:
  virtual ~SavedTensorHooks() = default;
  virtual std::any pack(const Tensor& value) = 0;
  virtual Tensor unpack(std::any& packed) = 0;
};

/// Hooks from two callables.
std::shared_ptr<SavedTensorHooks> make_saved_tensor_hooks(std::function<std::any(const Tensor&)> pack,
                                                          std::function<Tensor(std::any&)> unpack);

/// Installs hooks for this thread until destroyed (innermost wins; like
/// `torch.autograd.graph.saved_tensors_hooks`). A value saved under the guard is unpacked with the
/// same hooks even if backward runs after the guard is gone.
class SavedTensorHooksGuard {
 public:
  explicit SavedTensorHooksGuard(std::shared_ptr<SavedTensorHooks> hooks);
  ~SavedTensorHooksGuard();
  SavedTensorHooksGuard(const SavedTensorHooksGuard&) = delete;
  SavedTensorHooksGuard& operator=(const SavedTensorHooksGuard&) = delete;
};

/// The innermost installed hooks of this thread, or null.
SavedTensorHooks* current_saved_tensor_hooks();

/// While a pack hook runs inside Node::save(), the sequence number of the saving node; otherwise
/// kNoSavingNode. Lets a hook group the values one node saves (the tape streamer's regions).
inline constexpr uint64_t kNoSavingNode = ~uint64_t{0};
uint64_t saving_node_sequence_nr();

/// While a pack hook runs, whether the value being saved is a leaf that requires grad (a parameter,
/// or an input the caller asked gradients for). The hook receives the value detached, as PyTorch's
/// does, so this is how it can tell (the tape streamer keeps parameters instead of copying them).
bool saving_requires_grad_leaf();

namespace detail {
/// Sets saving_node_sequence_nr() for this thread for its lifetime (Node::save uses it).
class SavingNodeScope {
 public:
  explicit SavingNodeScope(uint64_t sequence_nr);
  ~SavingNodeScope();
  SavingNodeScope(const SavingNodeScope&) = delete;
  SavingNodeScope& operator=(const SavingNodeScope&) = delete;

 private:
  uint64_t previous_;
};
}  // namespace detail

/// What introspection reports about one saved value.
struct SavedInfo {
  Dims sizes;
  DType dtype = DType::f32;
  std::size_t bytes = 0;  // numel * itemsize of the saved view
  std::string tier;       // "fast" / "slow" / "dram" when saved; "packed" if a hook holds it;
                          // "released" once the node has run
  bool packed = false;    // true when a pack hook replaced the value
  bool released = false;
};

class SavedTensor {
 public:
  SavedTensor() = default;
  /// Saves `value` (an undefined tensor saves "nothing"), running the current pack hook if any.
  explicit SavedTensor(const Tensor& value);

  /// The saved value. `node` names the owner in error messages. Throws strata::Error if the value
  /// was released (graph already freed) or modified in place since it was saved.
  Tensor unpack(const char* node) const;
  /// Drops the value (and whatever a hook packed).
  void release();
  bool defined() const { return defined_; }
  bool released() const { return released_; }
  SavedInfo info() const;

 private:
  bool defined_ = false;
  bool released_ = false;
  Tensor value_;             // when no hook was installed
  mutable std::any packed_;  // when a hook was
  std::shared_ptr<SavedTensorHooks> hooks_;
  WeakStorage storage_;
  uint64_t version_ = 0;
  Dims sizes_;
  DType dtype_ = DType::f32;
  std::string tier_at_save_;
};

}  // namespace strata::autograd
