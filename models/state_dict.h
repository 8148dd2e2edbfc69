#pragma once
/// @file
/// StateDict: named tensors in a fixed order — a module's parameters and buffers
/// (`Module::state_dict`), an optimizer's state (`Optimizer::state_dict`), a checkpoint's contents.
/// Keys follow PyTorch's names for the same structure (`0.weight`, `bn1.running_mean`), so a PyTorch
/// state_dict converted to numpy arrays loads directly. Optimizer hyperparameters and counters are
/// stored as 0-d f64 tensors, so one container (and one file format) carries everything.

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace strata {

using StateDict = std::vector<std::pair<std::string, Tensor>>;

/// The tensor stored under `key`, or nullptr.
const Tensor* state_find(const StateDict& dict, std::string_view key);

/// The tensor stored under `key`; throws strata::Error naming `what` (e.g. "SGD state_dict") and
/// the missing key otherwise.
const Tensor& state_at(const StateDict& dict, std::string_view key, std::string_view what);

/// The value of a 0-d (or one-element) tensor stored under `key` as a double; throws like
/// state_at, and if the entry holds more than one element.
double state_scalar(const StateDict& dict, std::string_view key, std::string_view what);

/// Appends `value` as a 0-d f64 tensor under `key`.
void state_put_scalar(StateDict& dict, std::string key, double value);

}  // namespace strata
