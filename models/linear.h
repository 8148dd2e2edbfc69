#pragma once
/// @file
/// nn::Linear and nn::Identity.

#include "core/rng.h"
#include "models/module.h"

namespace strata::nn {

/// y = x · weightᵀ + bias (torch.nn.Linear). weight [out, in] and bias [out] start uniform in
/// ±1/sqrt(in_features) (PyTorch's kaiming_uniform(a = sqrt(5)) and bias rule), drawn from `gen`
/// (the default generator when null). Input [..., in_features].
class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias = true, Generator* gen = nullptr);
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;
  int64_t in_features() const { return in_features_; }
  int64_t out_features() const { return out_features_; }
  Tensor& weight() { return parameter("weight"); }
  Tensor& bias() { return parameter("bias"); }

 private:
  int64_t in_features_, out_features_;
};

/// Returns its input (torch.nn.Identity).
class Identity : public Module {
 public:
  Identity() : Module("Identity") {}
  Tensor forward(const Tensor& input) override;
};

}  // namespace strata::nn
