#pragma once
/// @file
/// Containers: nn::Sequential and nn::ModuleList (children named "0", "1", ...), nn::ModuleDict
/// (children named by their keys) and nn::ParameterList (parameters named "0", "1", ...).

#include <initializer_list>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "models/module.h"

namespace strata::nn {

/// Runs its children in order, each on the previous one's output (torch.nn.Sequential).
class Sequential : public Module {
 public:
  Sequential() : Module("Sequential") {}
  Sequential(std::initializer_list<std::shared_ptr<Module>> modules);
  /// Appends `module` under the name str(size()).
  Sequential& push_back(std::shared_ptr<Module> module);
  std::size_t size() const { return child_slots().size(); }
  /// Child i; negative i counts from the end.
  std::shared_ptr<Module> operator[](int64_t i) const;
  Tensor forward(const Tensor& input) override;
};

/// Holds modules in a list (torch.nn.ModuleList); it has no forward.
class ModuleList : public Module {
 public:
  ModuleList() : Module("ModuleList") {}
  ModuleList(std::initializer_list<std::shared_ptr<Module>> modules);
  ModuleList& push_back(std::shared_ptr<Module> module);
  std::size_t size() const { return child_slots().size(); }
  std::shared_ptr<Module> operator[](int64_t i) const;
};

/// Holds modules by string key in insertion order (torch.nn.ModuleDict); it has no forward. The
/// keys are the children's names, so state_dict keys are "<key>.<param>" as in PyTorch; a key
/// must be non-empty and hold no '.'.
class ModuleDict : public Module {
 public:
  ModuleDict() : Module("ModuleDict") {}
  ModuleDict(std::initializer_list<std::pair<std::string, std::shared_ptr<Module>>> modules);
  /// Adds `module` under `key`, or replaces the module there (which keeps its position).
  ModuleDict& insert(const std::string& key, std::shared_ptr<Module> module);
  /// The module under `key`; throws naming the key when there is none.
  std::shared_ptr<Module> operator[](const std::string& key) const;
  bool contains(const std::string& key) const { return has_child(key); }
  /// Removes and returns the module under `key`; throws naming the key when there is none.
  std::shared_ptr<Module> pop(const std::string& key);
  std::vector<std::string> keys() const;
  std::size_t size() const { return child_slots().size(); }
  void clear();
};

/// Holds parameters in a list (torch.nn.ParameterList), registered as "0", "1", ...; it has no
/// forward. A tensor appended becomes a leaf that requires grad, as PyTorch's Parameter.
class ParameterList : public Module {
 public:
  ParameterList() : Module("ParameterList") {}
  ParameterList(std::initializer_list<Tensor> parameters);
  ParameterList& append(Tensor parameter, bool requires_grad = true);
  /// Parameter i; negative i counts from the end.
  Tensor& operator[](int64_t i);
  /// Replaces parameter i (negative i counts from the end).
  void set(int64_t i, Tensor parameter, bool requires_grad = true);
  std::size_t size() const { return size_; }
  std::string extra_repr() const override;

 private:
  std::size_t size_ = 0;
};

/// Flattens dims [start_dim, end_dim] into one (torch.nn.Flatten; differentiable).
class Flatten : public Module {
 public:
  explicit Flatten(int64_t start_dim = 1, int64_t end_dim = -1)
      : Module("Flatten"), start_dim_(start_dim), end_dim_(end_dim) {}
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;

 private:
  int64_t start_dim_, end_dim_;
};

}  // namespace strata::nn
