#pragma once
/// @file
/// nn::Dropout.

#include "core/rng.h"
#include "models/module.h"

namespace strata::nn {

/// Zeroes each element with probability p and scales the rest by 1 / (1 - p) in training mode;
/// the identity in eval mode (torch.nn.Dropout). The mask comes from `gen` (default generator
/// when null).
class Dropout : public Module {
 public:
  explicit Dropout(double p = 0.5, Generator* gen = nullptr);
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;
  double p() const { return p_; }

 private:
  double p_;
  Generator* gen_;
};

}  // namespace strata::nn
