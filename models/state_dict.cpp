#include "models/state_dict.h"

#include "core/error.h"
#include "core/factories.h"

namespace strata {

const Tensor* state_find(const StateDict& dict, std::string_view key) {
  for (const auto& [k, t] : dict) {
    if (k == key) return &t;
  }
  return nullptr;
}

const Tensor& state_at(const StateDict& dict, std::string_view key, std::string_view what) {
  const Tensor* t = state_find(dict, key);
  STRATA_CHECK(t != nullptr, what, ": missing key '", key, "'");
  return *t;
}

double state_scalar(const StateDict& dict, std::string_view key, std::string_view what) {
  const Tensor& t = state_at(dict, key, what);
  STRATA_CHECK(t.defined() && t.numel() == 1, what, ": key '", key, "' must hold one number, got a tensor of ",
               t.defined() ? t.numel() : 0, " elements");
  return t.item<double>();
}

void state_put_scalar(StateDict& dict, std::string key, double value) {
  dict.emplace_back(std::move(key), scalar_tensor(value, DType::f64));
}

}  // namespace strata
