#pragma once
/// @file
/// Learning-rate schedulers — torch.optim.lr_scheduler's LambdaLR, StepLR, MultiStepLR,
/// ExponentialLR, CosineAnnealingLR, LinearLR, OneCycleLR, SequentialLR and ReduceLROnPlateau,
/// with PyTorch's formulas, operation order and step() semantics.
///
///     optim::SGD opt(model.parameters(), {.lr = 0.1});
///     auto sched = std::make_shared<optim::StepLR>(opt, /*step_size=*/30, /*gamma=*/0.1);
///     for (epoch ...) { train(opt); sched->step(); }
///
/// Note [Schedulers write the param groups]
/// As in PyTorch, a scheduler owns no learning rate: each step() computes the next lr of every
/// param group and writes it into the group's "lr" option, where the optimizer reads it. Most
/// schedulers compute it *from the group's current lr* (PyTorch's chainable get_lr(), e.g.
/// StepLR multiplies by gamma at a multiple of step_size), so two schedulers on one optimizer
/// compose and the results agree with PyTorch's to the last bit. Constructing a scheduler with
/// last_epoch = -1 records each group's lr as its "initial_lr" extra unless the group has one
/// already (a second scheduler — SequentialLR's later phases — starts from the first one's
/// initial lr, as PyTorch's setdefault does); base_lrs() are the initial lrs. Constructing one
/// takes its first step (last_epoch 0), which may change the lr (LinearLR's start_factor).

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "models/optim/optimizer.h"
#include "models/state_dict.h"

namespace strata::optim {

/// Base of the schedulers stepped once per epoch (or batch) without a metric. The optimizer
/// must outlive the scheduler.
class LRScheduler {
 public:
  virtual ~LRScheduler() = default;
  LRScheduler(const LRScheduler&) = delete;
  LRScheduler& operator=(const LRScheduler&) = delete;

  /// "StepLR", ... (error messages).
  const std::string& name() const { return name_; }
  Optimizer& optimizer() const { return *optimizer_; }

  /// Advances last_epoch by one and writes the next lr into every param group.
  virtual void step();
  /// PyTorch's deprecated step(epoch): last_epoch = epoch and the closed-form lr where the
  /// scheduler has one (StepLR, MultiStepLR, ExponentialLR, CosineAnnealingLR, LinearLR),
  /// the chainable one otherwise.
  void step_to(int64_t epoch);

  /// The lr of each group after the last step (PyTorch's get_last_lr()).
  const std::vector<double>& last_lr() const { return last_lr_; }
  /// The initial lr of each group.
  const std::vector<double>& base_lrs() const { return base_lrs_; }
  int64_t last_epoch() const { return last_epoch_; }
  /// Calls of step() (including the constructor's), PyTorch's `_step_count`.
  int64_t step_count() const { return step_count_; }

  /// The scheduler's state under PyTorch's state_dict() names, each a 0-d (or, for the lists,
  /// 1-D) f64 tensor: "last_epoch", "_step_count", "base_lrs", "_last_lr" and the scheduler's
  /// hyperparameters ("gamma", "step_size", ...).
  virtual StateDict state_dict() const;
  /// Loads a state_dict(): every key must be one state_dict() writes (a missing key keeps its
  /// value, as PyTorch's __dict__.update does); lists must have one value per param group.
  /// Validates everything before changing anything; errors name the key.
  virtual void load_state_dict(const StateDict& state);

  // ---- used by SequentialLR ------------------------------------------------------------------
  /// PyTorch's _initial_step(): step count 0, then one step in "initial" mode.
  virtual void initial_step();
  /// last_epoch -= 1 (SequentialLR's recursive_undo).
  virtual void undo_step();
  /// PyTorch's _update_lr(epoch) with an epoch: step_to without counting a step.
  void restart_at(int64_t epoch);

 protected:
  /// Records the initial lrs (Note [Schedulers write the param groups]); throws, as PyTorch does,
  /// when last_epoch >= 0 and a group lacks "initial_lr". Derived constructors call
  /// initial_step() last.
  LRScheduler(std::string name, Optimizer& optimizer, int64_t last_epoch);

  /// The next lr of each group (PyTorch's get_lr(), called with last_epoch already advanced).
  virtual std::vector<double> compute_lr() = 0;
  /// The closed-form lr at last_epoch (PyTorch's _get_closed_form_lr), or empty if there is none.
  virtual std::vector<double> closed_form_lr() const { return {}; }
  /// The hyperparameters saved in state_dict(), by PyTorch's attribute names.
  virtual Options hyperparameters() const { return {}; }
  /// Sets hyperparameters from a validated state (keys among hyperparameters()).
  virtual void set_hyperparameters(const Options& values) {}
  /// Lists saved in state_dict() besides base_lrs and _last_lr (MultiStepLR's milestones).
  virtual std::map<std::string, std::vector<double>> hyperparameter_lists() const { return {}; }
  virtual void set_hyperparameter_lists(const std::map<std::string, std::vector<double>>& values) {}

  /// The current lr of every group.
  std::vector<double> group_lrs() const;
  /// Writes `lrs` into the groups' "lr" options (validated by the optimizer) and last_lr.
  void apply_lrs(const std::vector<double>& lrs);
  /// The group's extra `key` (throws naming the group when it is missing).
  double group_extra(std::size_t group, const char* key) const;
  bool is_initial() const { return initial_; }
  std::size_t num_groups() const { return optimizer_->param_groups().size(); }
  /// Sets last_epoch and last_lr directly (SequentialLR, which steps its children instead).
  void set_progress(int64_t last_epoch, std::vector<double> last_lr);
  /// Replaces base_lrs (OneCycleLR, whose initial lrs follow from max_lr).
  void set_base_lrs(std::vector<double> base_lrs) { base_lrs_ = std::move(base_lrs); }

 private:
  void update_lr(bool has_epoch, int64_t epoch);

  std::string name_;
  Optimizer* optimizer_;
  std::vector<double> base_lrs_;
  std::vector<double> last_lr_;
  int64_t last_epoch_;
  int64_t step_count_ = 0;
  bool initial_ = false;
};

/// lr = initial_lr * lambda(last_epoch), one function per group (or one for all).
class LambdaLR final : public LRScheduler {
 public:
  using Lambda = std::function<double(int64_t)>;
  /// `lambdas` holds one function, used for every group, or one per group.
  LambdaLR(Optimizer& optimizer, std::vector<Lambda> lambdas, int64_t last_epoch = -1);

 protected:
  std::vector<double> compute_lr() override;

 private:
  std::vector<Lambda> lambdas_;
};

/// lr *= gamma every `step_size` epochs.
class StepLR final : public LRScheduler {
 public:
  StepLR(Optimizer& optimizer, int64_t step_size, double gamma = 0.1, int64_t last_epoch = -1);

 protected:
  std::vector<double> compute_lr() override;
  std::vector<double> closed_form_lr() const override;
  Options hyperparameters() const override;
  void set_hyperparameters(const Options& values) override;

 private:
  int64_t step_size_;
  double gamma_;
};

/// lr *= gamma^k at an epoch that appears k times in `milestones`.
class MultiStepLR final : public LRScheduler {
 public:
  MultiStepLR(Optimizer& optimizer, std::vector<int64_t> milestones, double gamma = 0.1, int64_t last_epoch = -1);

 protected:
  std::vector<double> compute_lr() override;
  std::vector<double> closed_form_lr() const override;
  Options hyperparameters() const override { return {{"gamma", gamma_}}; }
  void set_hyperparameters(const Options& values) override;
  std::map<std::string, std::vector<double>> hyperparameter_lists() const override;
  void set_hyperparameter_lists(const std::map<std::string, std::vector<double>>& values) override;

 private:
  std::vector<int64_t> milestones_;  // sorted, repeats kept
  double gamma_;
};

/// lr *= gamma every epoch.
class ExponentialLR final : public LRScheduler {
 public:
  ExponentialLR(Optimizer& optimizer, double gamma, int64_t last_epoch = -1);

 protected:
  std::vector<double> compute_lr() override;
  std::vector<double> closed_form_lr() const override;
  Options hyperparameters() const override { return {{"gamma", gamma_}}; }
  void set_hyperparameters(const Options& values) override { gamma_ = values.at("gamma"); }

 private:
  double gamma_;
};

/// Cosine annealing from the initial lr to eta_min over T_max epochs (and back up, periodically,
/// past T_max), in PyTorch's recursive form.
class CosineAnnealingLR final : public LRScheduler {
 public:
  CosineAnnealingLR(Optimizer& optimizer, int64_t T_max, double eta_min = 0.0, int64_t last_epoch = -1);

 protected:
  std::vector<double> compute_lr() override;
  std::vector<double> closed_form_lr() const override;
  Options hyperparameters() const override;
  void set_hyperparameters(const Options& values) override;

 private:
  int64_t T_max_;
  double eta_min_;
};

/// The lr factor goes linearly from start_factor to end_factor over total_iters epochs (warm-up).
class LinearLR final : public LRScheduler {
 public:
  /// Throws PyTorch's errors for start_factor outside (0, 1] and end_factor outside [0, 1].
  LinearLR(Optimizer& optimizer, double start_factor = 1.0 / 3, double end_factor = 1.0, int64_t total_iters = 5,
           int64_t last_epoch = -1);

 protected:
  std::vector<double> compute_lr() override;
  std::vector<double> closed_form_lr() const override;
  Options hyperparameters() const override;
  void set_hyperparameters(const Options& values) override;

 private:
  double start_factor_, end_factor_;
  int64_t total_iters_;
};

/// OneCycleLR's settings (PyTorch's defaults). Per-group lists hold one value (for every group)
/// or one per group.
struct OneCycleOptions {
  std::vector<double> max_lr;
  /// The cycle's length; 0 = epochs * steps_per_epoch.
  int64_t total_steps = 0;
  int64_t epochs = 0;
  int64_t steps_per_epoch = 0;
  double pct_start = 0.3;
  /// "cos" or "linear".
  std::string anneal_strategy = "cos";
  bool cycle_momentum = true;
  std::vector<double> base_momentum = {0.85};
  std::vector<double> max_momentum = {0.95};
  double div_factor = 25.0;
  double final_div_factor = 1e4;
  bool three_phase = false;
};

/// The 1cycle policy: lr from max_lr / div_factor up to max_lr over pct_start of total_steps,
/// then down to initial_lr / final_div_factor (three_phase: back to initial_lr first); with
/// cycle_momentum, the momentum (SGD, RMSprop) or beta1 (Adam) moves inversely between
/// max_momentum and base_momentum. Stepping past total_steps throws PyTorch's error. The group
/// extras "initial_lr", "max_lr", "min_lr", "max_momentum" and "base_momentum" hold its settings.
class OneCycleLR final : public LRScheduler {
 public:
  OneCycleLR(Optimizer& optimizer, const OneCycleOptions& options, int64_t last_epoch = -1);
  int64_t total_steps() const { return total_steps_; }

 protected:
  std::vector<double> compute_lr() override;
  Options hyperparameters() const override;
  void set_hyperparameters(const Options& values) override;

 private:
  struct Phase {
    double end_step;
    const char *start_lr, *end_lr, *start_momentum, *end_momentum;
  };
  void check_options(const OneCycleOptions& o) const;
  void init_groups(const OneCycleOptions& o, int64_t last_epoch);
  double anneal(double start, double end, double pct) const;

  int64_t total_steps_ = 0;
  bool cos_ = true;
  bool cycle_momentum_ = true;
  const char* momentum_key_ = "momentum";  // or "beta1"
  std::vector<Phase> phases_;
};

/// Runs `schedulers` one after another, switching at each of `milestones` (warm-up then decay):
/// at a milestone the next scheduler restarts at epoch 0 (its closed form).
class SequentialLR final : public LRScheduler {
 public:
  /// Throws PyTorch's errors for no schedulers, a scheduler of another optimizer and a milestone
  /// count other than schedulers - 1.
  SequentialLR(Optimizer& optimizer, std::vector<std::shared_ptr<LRScheduler>> schedulers,
               std::vector<int64_t> milestones, int64_t last_epoch = -1);
  void step() override;
  /// Undoes a step of every child (not of itself), as PyTorch's recursive_undo.
  void undo_step() override;
  const std::vector<std::shared_ptr<LRScheduler>>& schedulers() const { return schedulers_; }
  const std::vector<int64_t>& milestones() const { return milestones_; }
  /// The base state plus every child's under "_schedulers.<i>.<key>".
  StateDict state_dict() const override;
  void load_state_dict(const StateDict& state) override;

 protected:
  std::vector<double> compute_lr() override;

 private:
  std::size_t index_at(int64_t epoch) const;

  std::vector<std::shared_ptr<LRScheduler>> schedulers_;
  std::vector<int64_t> milestones_;
};

/// ReduceLROnPlateau's settings (PyTorch's defaults).
struct PlateauOptions {
  /// "min" or "max": whether the metric should go down or up.
  std::string mode = "min";
  double factor = 0.1;
  int64_t patience = 10;
  double threshold = 1e-4;
  /// "rel" or "abs".
  std::string threshold_mode = "rel";
  int64_t cooldown = 0;
  /// One value for every group, or one per group.
  std::vector<double> min_lr = {0.0};
  double eps = 1e-8;
};

/// Multiplies every group's lr by `factor` (not below min_lr, and only by more than eps) once the
/// metric passed to step() has not improved for more than `patience` steps; then waits
/// `cooldown` steps. Not an LRScheduler: its step takes the metric.
class ReduceLROnPlateau {
 public:
  /// Throws PyTorch's errors (factor >= 1, unknown mode or threshold_mode, a min_lr list of the
  /// wrong length).
  ReduceLROnPlateau(Optimizer& optimizer, const PlateauOptions& options = {});
  Optimizer& optimizer() const { return *optimizer_; }
  void step(double metric);
  const std::vector<double>& last_lr() const { return last_lr_; }
  int64_t last_epoch() const { return last_epoch_; }
  double best() const { return best_; }
  int64_t num_bad_epochs() const { return num_bad_epochs_; }
  int64_t cooldown_counter() const { return cooldown_counter_; }
  const PlateauOptions& options() const { return options_; }
  /// PyTorch's state_dict() names: factor, min_lrs, patience, cooldown, cooldown_counter, mode
  /// (0 = min, 1 = max), threshold, threshold_mode (0 = rel, 1 = abs), best, num_bad_epochs,
  /// mode_worse, eps, last_epoch, _last_lr.
  StateDict state_dict() const;
  void load_state_dict(const StateDict& state);

 private:
  bool is_better(double a) const;
  void reduce_lr();
  /// The metric's worst value (inf for "min", -inf for "max").
  double mode_worse() const;

  Optimizer* optimizer_;
  PlateauOptions options_;
  std::vector<double> min_lrs_;
  std::vector<double> last_lr_;
  double best_;
  int64_t num_bad_epochs_ = 0;
  int64_t cooldown_counter_ = 0;
  int64_t last_epoch_ = 0;
};

}  // namespace strata::optim
