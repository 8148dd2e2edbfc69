#pragma once
/// @file
/// Optimizer: the base class of Strata's optimizers (SGD, Adam, AdamW, Adagrad, RowWiseAdagrad).
///
/// Like torch.optim, an optimizer holds parameter groups (parameters + hyperparameters under
/// PyTorch's names), per-parameter state (momentum buffers, moment estimates, accumulators), and
/// updates the parameters in place from their `.grad` in `step()`. Parameters are numbered across
/// all groups in order (PyTorch's numbering); that index names a parameter's state in
/// `state_dict()`:
///   "state.<i>.<name>"           a state tensor (momentum_buffer, exp_avg, exp_avg_sq,
///                                max_exp_avg_sq, sum) or "step" (0-d f32, as PyTorch stores it)
///   "param_groups.<g>.<option>"  a hyperparameter (0-d f64; booleans as 0/1)
///   "param_groups.<g>.params"    1-D i64 tensor: the indices of the group's parameters

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "models/state_dict.h"

namespace strata::optim {

/// Hyperparameters by PyTorch's names (lr, momentum, beta1, ...); booleans are 0 or 1.
using Options = std::map<std::string, double>;

/// A set of parameters sharing hyperparameters. Options missing from a group passed to an
/// optimizer are filled in from the optimizer's defaults.
struct ParamGroup {
  std::vector<Tensor> params;
  std::map<std::string, double> options;
  /// Values the learning-rate schedulers keep per group under PyTorch's names ("initial_lr",
  /// "max_lr", ...; Note [Schedulers write the param groups] in lr_scheduler.h). Not options: the
  /// optimizer neither checks nor saves them.
  std::map<std::string, double> extras = {};
};

/// The state an optimizer keeps for one parameter.
struct ParamState {
  /// False until the optimizer created the state (lazily on the first step with a gradient, or at
  /// construction for Adagrad).
  bool initialized = false;
  /// Steps applied to this parameter (for the optimizers that count them).
  int64_t step = 0;
  /// State tensors by PyTorch's names, with the parameter's dtype.
  std::map<std::string, Tensor> buffers;
};

/// Base class of the optimizers. Not copyable.
class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  /// "SGD", "Adam", ... (used in error messages).
  const std::string& name() const { return name_; }

  /// Updates every parameter whose gradient is defined; parameters without a gradient are skipped.
  /// Validates every group's options and every gradient (dtype and shape must match the
  /// parameter) before modifying anything, so a failed step leaves the parameters as they were.
  /// Not recorded by autograd; bumps each updated parameter's version.
  void step();

  /// Clears the gradients: sets them undefined (`set_to_none`) or fills them with zeros.
  void zero_grad(bool set_to_none = true);

  /// The parameter groups. Options may be changed between steps (learning-rate schedules); they
  /// are validated again at the next step. The parameter lists must not be changed (use
  /// add_param_group).
  std::vector<ParamGroup>& param_groups() { return groups_; }
  const std::vector<ParamGroup>& param_groups() const { return groups_; }

  /// Adds a group; missing options are taken from the defaults. Throws for unknown or invalid
  /// options, parameters that are not f32/f64 leaves, and parameters already in a group.
  void add_param_group(ParamGroup group);

  /// Throws unless `options` holds exactly this optimizer's options with valid values (PyTorch's
  /// messages, e.g. "Invalid learning rate: -1.0").
  void check_group_options(const Options& options) const;
  /// Whether the optimizer counts steps per parameter (exported as "state.<i>.step").
  virtual bool counts_steps() const { return true; }

  /// The default options (those passed to the constructor).
  const Options& defaults() const { return defaults_; }

  /// Total number of parameters across the groups.
  int64_t num_params() const;
  /// The state of parameter `index` (PyTorch's numbering across groups); throws if out of range.
  const ParamState& state(int64_t index) const;

  /// The optimizer's state and hyperparameters under the flat keys described in the file comment.
  StateDict state_dict() const;
  /// Loads a state produced by state_dict() (of an optimizer of the same kind over parameters of
  /// the same shapes). Validates the group count, the parameter count of each group, every option
  /// and every state tensor's name and shape before changing anything; errors name the key.
  void load_state_dict(const StateDict& dict);
  /// Throws exactly what load_state_dict(dict) would throw, changing nothing (so a caller loading
  /// several parts can validate them all before committing any).
  void check_state_dict(const StateDict& dict) const;

 protected:
  Optimizer(std::string name, Options defaults);

  /// Adds the constructor's groups (call from the derived constructor, where virtual calls reach
  /// the derived class). Throws if there are no parameters at all.
  void init_groups(std::vector<ParamGroup> groups);

  /// Throws strata::Error (PyTorch's message, e.g. "Invalid learning rate: -1.0") if an option
  /// value is invalid. Every option of the defaults is present.
  virtual void check_options(const Options& options) const = 0;
  /// The names of the state buffers for a group with `options` (all of them must be present in a
  /// loaded state, except that SGD's momentum_buffer may be missing).
  virtual std::vector<std::string> buffer_names(const Options& options) const = 0;
  /// Whether a loaded state may lack buffer `name`.
  virtual bool buffer_optional(const std::string& name) const { return false; }
  /// The shape of state buffer `name` for `param`.
  virtual Dims buffer_shape(const Tensor& param, const std::string& name) const { return param.sizes(); }
  /// Whether state is created when a group is added (Adagrad) rather than at the first step.
  virtual bool eager_state() const { return false; }
  /// Creates the state of `param` (called once, before its first update or when added if eager).
  virtual void init_state(const Tensor& param, const Options& options, ParamState& state) const = 0;
  /// Applies one update in place (grad checked: same dtype and shape as param). Increments
  /// state.step itself where the optimizer counts steps.
  virtual void update(const Tensor& param, const Tensor& grad, const Options& options, ParamState& state) = 0;

 private:
  struct LoadedState {
    std::vector<Options> options;
    std::vector<std::vector<ParamState>> states;
  };
  void fill_and_check_group(ParamGroup& group, std::size_t group_index) const;
  /// load_state_dict's validation: the options and states `dict` would install.
  LoadedState prepare_load(const StateDict& dict) const;

  std::string name_;
  Options defaults_;
  std::vector<ParamGroup> groups_;
  std::vector<std::vector<ParamState>> states_;  // parallel to groups_[g].params
};

namespace detail {
/// Formats a double as Python's repr() does ("-1.0", "0.001", "1e-10"), for PyTorch-like messages.
std::string py_float(double value);
/// The option `key` of a filled-in group (asserts that it is present).
double option(const Options& options, const char* key);
}  // namespace detail

}  // namespace strata::optim
