#include "autograd/saved_tensor.h"

#include <vector>

#include "memory/tiered_memory.h"

namespace strata::autograd {

namespace {

thread_local std::vector<std::shared_ptr<SavedTensorHooks>> hook_stack;
thread_local uint64_t saving_node = kNoSavingNode;
thread_local bool saving_leaf = false;

class FunctionHooks final : public SavedTensorHooks {
 public:
  FunctionHooks(std::function<std::any(const Tensor&)> pack, std::function<Tensor(std::any&)> unpack)
      : pack_(std::move(pack)), unpack_(std::move(unpack)) {}
  std::any pack(const Tensor& value) override { return pack_(value); }
  Tensor unpack(std::any& packed) override { return unpack_(packed); }

 private:
  std::function<std::any(const Tensor&)> pack_;
  std::function<Tensor(std::any&)> unpack_;
};

}  // namespace

std::shared_ptr<SavedTensorHooks> make_saved_tensor_hooks(std::function<std::any(const Tensor&)> pack,
                                                          std::function<Tensor(std::any&)> unpack) {
  STRATA_CHECK(pack && unpack, "make_saved_tensor_hooks: both pack and unpack must be callable");
  return std::make_shared<FunctionHooks>(std::move(pack), std::move(unpack));
}

SavedTensorHooksGuard::SavedTensorHooksGuard(std::shared_ptr<SavedTensorHooks> hooks) {
  STRATA_CHECK(hooks != nullptr, "SavedTensorHooksGuard: hooks must not be null");
  hook_stack.push_back(std::move(hooks));
}

SavedTensorHooksGuard::~SavedTensorHooksGuard() { hook_stack.pop_back(); }

SavedTensorHooks* current_saved_tensor_hooks() { return hook_stack.empty() ? nullptr : hook_stack.back().get(); }

uint64_t saving_node_sequence_nr() { return saving_node; }

bool saving_requires_grad_leaf() { return saving_leaf; }

detail::SavingNodeScope::SavingNodeScope(uint64_t sequence_nr) : previous_(saving_node) { saving_node = sequence_nr; }
detail::SavingNodeScope::~SavingNodeScope() { saving_node = previous_; }

SavedTensor::SavedTensor(const Tensor& value) {
  if (!value.defined()) return;
  defined_ = true;
  storage_ = WeakStorage(value.storage());
  version_ = value.version();
  sizes_ = value.sizes();
  dtype_ = value.dtype();
  tier_at_save_ = std::string(memory::where(value.storage()));
  Tensor detached = value.detach();
  if (!hook_stack.empty()) {
    hooks_ = hook_stack.back();
    const bool previous = saving_leaf;
    saving_leaf = value.is_leaf() && value.requires_grad();
    try {
      packed_ = hooks_->pack(detached);
    } catch (...) {
      saving_leaf = previous;
      throw;
    }
    saving_leaf = previous;
  } else {
    value_ = std::move(detached);
  }
}

Tensor SavedTensor::unpack(const char* node) const {
  if (!defined_) return Tensor();
  STRATA_CHECK(!released_, "autograd: ", node,
               " tried to use a saved value that was already freed: the graph was run backward once already (pass "
               "retain_graph=true "
               "to backward the first time to keep it)");
  const std::optional<uint64_t> now = storage_.version();
  // PyTorch's message (its tests and users match on it).
  STRATA_CHECK(!now || *now == version_,
               "one of the variables needed for gradient computation has been modified by "
               "an inplace operation: [Tensor",
               IntArrayRef(sizes_), " ", dtype_, "], which was saved by ", node, ", is at version ", now.value_or(0),
               "; expected version ", version_,
               " instead. Hint: clone it before modifying it, or modify it after backward.");
  if (!hooks_) return value_;
  Tensor t = hooks_->unpack(packed_);
  STRATA_CHECK(t.defined() && t.sizes() == sizes_ && t.dtype() == dtype_,
               "autograd: the unpack hook for a value saved by ", node, " returned ",
               t.defined() ? t.describe() : std::string("an undefined tensor"), ", expected shape ",
               IntArrayRef(sizes_), " ", dtype_);
  return t;
}

void SavedTensor::release() {
  released_ = true;
  value_ = Tensor();
  packed_.reset();
  hooks_.reset();
}

SavedInfo SavedTensor::info() const {
  SavedInfo s;
  s.sizes = sizes_;
  s.dtype = dtype_;
  int64_t n = 1;
  for (int64_t d : sizes_) n *= d;
  s.bytes = defined_ ? static_cast<std::size_t>(n) * itemsize(dtype_) : 0;
  s.packed = hooks_ != nullptr;
  s.released = released_;
  if (released_)
    s.tier = "released";
  else if (hooks_)
    s.tier = "packed";
  else if (value_.defined())
    s.tier = std::string(memory::where(value_.storage()));
  else
    s.tier = "undefined";  // the op saved "nothing" (e.g. an omitted optional weight)
  return s;
}

}  // namespace strata::autograd
