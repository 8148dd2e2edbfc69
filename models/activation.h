#pragma once
/// @file
/// Activation modules: ReLU, LeakyReLU, Sigmoid, Tanh, GELU, SiLU (element-wise) and Softmax,
/// LogSoftmax (along a dim).

#include <optional>

#include "models/module.h"

namespace strata::nn {

class ReLU : public Module {
 public:
  ReLU() : Module("ReLU") {}
  Tensor forward(const Tensor& input) override;
};

class LeakyReLU : public Module {
 public:
  explicit LeakyReLU(double negative_slope = 0.01) : Module("LeakyReLU"), negative_slope_(negative_slope) {}
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;

 private:
  double negative_slope_;
};

class Sigmoid : public Module {
 public:
  Sigmoid() : Module("Sigmoid") {}
  Tensor forward(const Tensor& input) override;
};

class Tanh : public Module {
 public:
  Tanh() : Module("Tanh") {}
  Tensor forward(const Tensor& input) override;
};

/// GELU with `approximate` "none" (erf form) or "tanh".
class GELU : public Module {
 public:
  explicit GELU(const std::string& approximate = "none");
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;

 private:
  std::string approximate_;
};

/// x · sigmoid(x) (torch.nn.SiLU).
class SiLU : public Module {
 public:
  SiLU() : Module("SiLU") {}
  Tensor forward(const Tensor& input) override;
};

/// softmax along `dim` (torch.nn.Softmax). Without a dim, PyTorch's legacy implicit choice:
/// dim 0 for 0-, 1- and 3-D inputs, 1 otherwise.
class Softmax : public Module {
 public:
  explicit Softmax(std::optional<int64_t> dim = std::nullopt) : Module("Softmax"), dim_(dim) {}
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;
  std::optional<int64_t> dim() const { return dim_; }

 private:
  std::optional<int64_t> dim_;
};

/// log_softmax along `dim` (torch.nn.LogSoftmax; the implicit dim as Softmax's).
class LogSoftmax : public Module {
 public:
  explicit LogSoftmax(std::optional<int64_t> dim = std::nullopt) : Module("LogSoftmax"), dim_(dim) {}
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;
  std::optional<int64_t> dim() const { return dim_; }

 private:
  std::optional<int64_t> dim_;
};

}  // namespace strata::nn
