#pragma once
/// @file
/// Parameter initializations — torch.nn.init's functions, names, defaults and errors. Each fills
/// its tensor in place (not recorded by autograd, the version bumped) and returns it; random ones
/// draw from `gen` (the default generator when null), so strata::manual_seed makes them
/// repeatable. The values are not PyTorch's (another generator) but follow the same distributions.

#include <optional>
#include <string>
#include <utility>

#include "core/rng.h"
#include "core/tensor.h"

namespace strata::nn::init {

/// The recommended gain for a nonlinearity (PyTorch's table): linear, conv*d, conv_transpose*d and
/// sigmoid 1, tanh 5/3, relu sqrt(2), leaky_relu sqrt(2 / (1 + slope^2)) (slope `param`, default
/// 0.01), selu 3/4. Throws "Unsupported nonlinearity <name>" otherwise.
double calculate_gain(const std::string& nonlinearity, std::optional<double> param = std::nullopt);

/// (fan_in, fan_out) of a weight [out, in, k...]: (in · k..., out · k...). Rank >= 2.
std::pair<int64_t, int64_t> fan_in_and_fan_out(const Tensor& t);

Tensor& uniform_(Tensor& t, double a = 0.0, double b = 1.0, Generator* gen = nullptr);
Tensor& normal_(Tensor& t, double mean = 0.0, double std = 1.0, Generator* gen = nullptr);
Tensor& constant_(Tensor& t, double value);
Tensor& zeros_(Tensor& t);
Tensor& ones_(Tensor& t);
/// The identity matrix (rank 2 only; non-square: ones on the main diagonal).
Tensor& eye_(Tensor& t);
/// U(-a, a) with a = gain · sqrt(6 / (fan_in + fan_out)).
Tensor& xavier_uniform_(Tensor& t, double gain = 1.0, Generator* gen = nullptr);
/// N(0, std²) with std = gain · sqrt(2 / (fan_in + fan_out)).
Tensor& xavier_normal_(Tensor& t, double gain = 1.0, Generator* gen = nullptr);
/// U(-bound, bound), bound = calculate_gain(nonlinearity, a) · sqrt(3 / fan); fan = fan_in or
/// fan_out (`mode`). A tensor without elements is left as it is.
Tensor& kaiming_uniform_(Tensor& t, double a = 0.0, const std::string& mode = "fan_in",
                         const std::string& nonlinearity = "leaky_relu", Generator* gen = nullptr);
/// N(0, std²), std = calculate_gain(nonlinearity, a) / sqrt(fan).
Tensor& kaiming_normal_(Tensor& t, double a = 0.0, const std::string& mode = "fan_in",
                        const std::string& nonlinearity = "leaky_relu", Generator* gen = nullptr);
/// N(mean, std²) truncated to [a, b], by the inverse CDF of a uniform draw (PyTorch's method).
Tensor& trunc_normal_(Tensor& t, double mean = 0.0, double std = 1.0, double a = -2.0, double b = 2.0,
                      Generator* gen = nullptr);
/// A (semi-)orthogonal matrix times `gain` (rank >= 2; trailing dims flattened): the Q of a QR
/// factorization of a normal draw, with R's diagonal made positive (Note [Orthogonal init]).
Tensor& orthogonal_(Tensor& t, double gain = 1.0, Generator* gen = nullptr);

}  // namespace strata::nn::init
