#pragma once
/// @file
/// Containers: nn::Sequential and nn::ModuleList (children named "0", "1", ...).

#include <initializer_list>
#include <memory>

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
