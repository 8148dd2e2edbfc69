#include "models/container.h"

#include "ops/shape_ops.h"

namespace strata::nn {

namespace {
std::size_t wrap_index(const Module& m, std::size_t size, int64_t i) {
  const auto n = static_cast<int64_t>(size);
  STRATA_CHECK(i >= -n && i < n, m.type_name(), ": index ", i, " is out of range for a container of ", n,
               m.type_name() == "ParameterList" ? " parameters" : " modules");
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

std::shared_ptr<Module> Sequential::operator[](int64_t i) const {
  return child_slots()[wrap_index(*this, size(), i)].module;
}

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

std::shared_ptr<Module> ModuleList::operator[](int64_t i) const {
  return child_slots()[wrap_index(*this, size(), i)].module;
}

ModuleDict::ModuleDict(std::initializer_list<std::pair<std::string, std::shared_ptr<Module>>> modules) : ModuleDict() {
  for (const auto& [key, m] : modules) insert(key, m);
}

ModuleDict& ModuleDict::insert(const std::string& key, std::shared_ptr<Module> module) {
  STRATA_CHECK(module != nullptr, "ModuleDict: cannot insert a null module under key '", key, "'");
  register_module(key, std::move(module));
  return *this;
}

std::shared_ptr<Module> ModuleDict::operator[](const std::string& key) const {
  STRATA_CHECK(contains(key), "ModuleDict: no module under key '", key, "'");
  return child(key);
}

std::shared_ptr<Module> ModuleDict::pop(const std::string& key) {
  std::shared_ptr<Module> m = (*this)[key];
  unregister(key);
  return m;
}

std::vector<std::string> ModuleDict::keys() const {
  std::vector<std::string> out;
  for (const auto& slot : child_slots()) out.push_back(slot.name);
  return out;
}

void ModuleDict::clear() {
  for (const std::string& key : keys()) unregister(key);
}

ParameterList::ParameterList(std::initializer_list<Tensor> parameters) : ParameterList() {
  for (const Tensor& p : parameters) append(p);
}

ParameterList& ParameterList::append(Tensor parameter, bool requires_grad) {
  STRATA_CHECK(parameter.defined(), "ParameterList: cannot append an undefined tensor (at index ", size_, ")");
  register_parameter(std::to_string(size_), std::move(parameter), requires_grad);
  ++size_;
  return *this;
}

Tensor& ParameterList::operator[](int64_t i) { return parameter(std::to_string(wrap_index(*this, size_, i))); }

void ParameterList::set(int64_t i, Tensor parameter, bool requires_grad) {
  const std::size_t k = wrap_index(*this, size_, i);
  STRATA_CHECK(parameter.defined(), "ParameterList: cannot store an undefined tensor at index ", i);
  register_parameter(std::to_string(k), std::move(parameter), requires_grad);
}

std::string ParameterList::extra_repr() const {
  std::string s;
  for (std::size_t i = 0; i < size_; ++i) {
    const Tensor& p = parameter(std::to_string(i));
    std::string sizes;
    for (int64_t d = 0; d < p.dim(); ++d) sizes += (d ? "x" : "") + std::to_string(p.size(d));
    s += (i ? "\n" : "") + std::string("(") + std::to_string(i) + "): Parameter containing: [" +
         std::string(dtype_name(p.dtype())) + " of size " + sizes + "]";
  }
  return s;
}

Tensor Flatten::forward(const Tensor& input) {
  STRATA_CHECK(input.defined(), "Flatten: the input is undefined");
  return flatten(input, start_dim_, end_dim_);
}

std::string Flatten::extra_repr() const {
  return "start_dim=" + std::to_string(start_dim_) + ", end_dim=" + std::to_string(end_dim_);
}

}  // namespace strata::nn
