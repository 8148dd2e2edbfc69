#include "models/container.h"

#include "ops/shape_ops.h"

namespace strata::nn {

namespace {
std::size_t wrap_index(const Module& m, std::size_t size, int64_t i) {
  const auto n = static_cast<int64_t>(size);
  STRATA_CHECK(i >= -n && i < n, m.type_name(), ": index ", i, " is out of range for a container of ", n, " modules");
  return static_cast<std::size_t>(i < 0 ? i + n : i);
}
}  // namespace

Sequential::Sequential(std::initializer_list<std::shared_ptr<Module>> modules) : Sequential() {
  for (const auto& m : modules) push_back(m);
}

Sequential& Sequential::push_back(std::shared_ptr<Module> module) {
  STRATA_CHECK(module != nullptr, "Sequential: cannot append a null module (at index ", size(), ")");
  register_module(std::to_string(size()), std::move(module));
  return *this;
}

std::shared_ptr<Module> Sequential::operator[](int64_t i) const { return child_slots()[wrap_index(*this, size(), i)].module; }

Tensor Sequential::forward(const Tensor& input) {
  Tensor x = input;
  for (const auto& slot : child_slots()) x = (*slot.module)(x);  // through its hooks (Note [Module hooks])
  return x;
}

ModuleList::ModuleList(std::initializer_list<std::shared_ptr<Module>> modules) : ModuleList() {
  for (const auto& m : modules) push_back(m);
}

ModuleList& ModuleList::push_back(std::shared_ptr<Module> module) {
  STRATA_CHECK(module != nullptr, "ModuleList: cannot append a null module (at index ", size(), ")");
  register_module(std::to_string(size()), std::move(module));
  return *this;
}

std::shared_ptr<Module> ModuleList::operator[](int64_t i) const { return child_slots()[wrap_index(*this, size(), i)].module; }

Tensor Flatten::forward(const Tensor& input) {
  STRATA_CHECK(input.defined(), "Flatten: the input is undefined");
  return flatten(input, start_dim_, end_dim_);
}

std::string Flatten::extra_repr() const {
  return "start_dim=" + std::to_string(start_dim_) + ", end_dim=" + std::to_string(end_dim_);
}

}  // namespace strata::nn
