#pragma once
/// @file
/// Model zoo: the multi-layer perceptron.

#include <string>
#include <vector>

#include "core/rng.h"
#include "models/container.h"

namespace strata::nn::zoo {

/// Linear layers of the given widths with an activation between them: widths {784, 256, 10} builds
/// Sequential(Linear(784, 256), ReLU(), Linear(256, 10)) — state_dict keys "0.weight", "2.weight",
/// as torch.nn.Sequential gives for the same layers. `activation` is "relu", "tanh", "sigmoid" or
/// "gelu"; `last_activation` ("" for none, or one of those) follows the last Linear.
class MLP : public Sequential {
 public:
  explicit MLP(const std::vector<int64_t>& widths, const std::string& activation = "relu",
               const std::string& last_activation = "", Generator* gen = nullptr);
  const std::vector<int64_t>& widths() const { return widths_; }

 private:
  std::vector<int64_t> widths_;
};

/// The activation module named `name` ("relu", "tanh", "sigmoid", "gelu"); throws naming `who`.
std::shared_ptr<Module> make_activation(const std::string& name, const char* who);

}  // namespace strata::nn::zoo
