#include "models/optim/lr_scheduler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>
#include <set>

#include "core/error.h"
#include "core/factories.h"

// Note [Schedules to the last bit]
// Each scheduler evaluates PyTorch's Python expression for the next lr in double precision, with
// the same operands in the same order (e.g. CosineAnnealingLR's recursive form, not its closed
// form), so a strata schedule equals PyTorch's exactly, step after step, and a training run's lr
// sequence can be compared with ==. This file is compiled with -ffp-contract=off
// (models/CMakeLists.txt): Python rounds every operation, and a fused multiply-add would not.

namespace strata::optim {

using detail::py_float;

namespace {

Tensor f64_scalar(double v) { return scalar_tensor(v, DType::f64); }

Tensor f64_list(const std::vector<double>& values) {
  Tensor t = empty({static_cast<int64_t>(values.size())}, {DType::f64, nullptr});
  std::copy(values.begin(), values.end(), t.data<double>());
  return t;
}

// The 0-d value of state entry `key` (a number), checked.
double scalar_of(const std::string& where, const std::string& key, const Tensor& t) {
  STRATA_CHECK(t.defined() && t.numel() == 1 && t.dim() == 0, where, ": key '", key, "' must be a 0-d tensor, got ",
               t.defined() ? t.describe() : std::string("an undefined tensor"));
  return t.to(DType::f64).item<double>();
}

std::vector<double> list_of(const std::string& where, const std::string& key, const Tensor& t) {
  STRATA_CHECK(t.defined() && t.dim() == 1, where, ": key '", key, "' must be a 1-D tensor, got ",
               t.defined() ? t.describe() : std::string("an undefined tensor"));
  const Tensor c = t.to(DType::f64).contiguous();
  return std::vector<double>(c.data<double>(), c.data<double>() + c.numel());
}

bool whole(double v) { return std::isfinite(v) && v == std::floor(v); }

// One value per group from `values` (one value for all, or one per group).
std::vector<double> per_group(const std::string& who, const char* what, const std::vector<double>& values,
                              std::size_t groups) {
  if (values.size() == 1) return std::vector<double>(groups, values[0]);
  STRATA_CHECK(values.size() == groups, who, ": expected ", groups, " values for ", what, ", but got ", values.size());
  return values;
}

}  // namespace

// ---- LRScheduler --------------------------------------------------------------------------------

LRScheduler::LRScheduler(std::string name, Optimizer& optimizer, int64_t last_epoch)
    : name_(std::move(name)), optimizer_(&optimizer), last_epoch_(last_epoch) {
  auto& groups = optimizer.param_groups();
  for (std::size_t g = 0; g < groups.size(); ++g) {
    if (last_epoch == -1) {
      groups[g].extras.emplace("initial_lr", detail::option(groups[g].options, "lr"));
    } else {
      STRATA_CHECK(groups[g].extras.count("initial_lr") != 0, "param 'initial_lr' is not specified in param_groups[", g,
                   "] when resuming scheduler with last_epoch >= 0 (", name_, ")");
    }
    base_lrs_.push_back(groups[g].extras.at("initial_lr"));
  }
}

std::vector<double> LRScheduler::group_lrs() const {
  std::vector<double> out;
  for (const auto& g : optimizer_->param_groups()) out.push_back(detail::option(g.options, "lr"));
  return out;
}

void LRScheduler::apply_lrs(const std::vector<double>& lrs) {
  auto& groups = optimizer_->param_groups();
  STRATA_CHECK(lrs.size() == groups.size(), name_, ": the optimizer has ", groups.size(),
               " param groups, but the scheduler computed ", lrs.size(), " learning rates (a group was added?)");
  for (std::size_t g = 0; g < groups.size(); ++g) groups[g].options["lr"] = lrs[g];
  last_lr_ = lrs;
}

double LRScheduler::group_extra(std::size_t group, const char* key) const {
  const auto& extras = optimizer_->param_groups().at(group).extras;
  auto it = extras.find(key);
  STRATA_CHECK(it != extras.end(), name_, ": param_groups[", group, "] lacks '", key, "'");
  return it->second;
}

void LRScheduler::set_progress(int64_t last_epoch, std::vector<double> last_lr) {
  last_epoch_ = last_epoch;
  last_lr_ = std::move(last_lr);
}

void LRScheduler::update_lr(bool has_epoch, int64_t epoch) {
  std::vector<double> lrs;
  if (!has_epoch) {
    last_epoch_ += 1;
    lrs = compute_lr();
  } else {
    last_epoch_ = epoch;
    lrs = closed_form_lr();
    if (lrs.empty()) lrs = compute_lr();
  }
  apply_lrs(lrs);
}

void LRScheduler::step() {
  step_count_ += 1;
  update_lr(false, 0);
}

void LRScheduler::step_to(int64_t epoch) {
  step_count_ += 1;
  update_lr(true, epoch);
}

void LRScheduler::restart_at(int64_t epoch) { update_lr(true, epoch); }

void LRScheduler::initial_step() {
  step_count_ = 0;
  initial_ = true;
  try {
    step();
  } catch (...) {
    initial_ = false;
    throw;
  }
  initial_ = false;
}

void LRScheduler::undo_step() { last_epoch_ -= 1; }

StateDict LRScheduler::state_dict() const {
  StateDict out;
  for (const auto& [k, v] : hyperparameters()) out.emplace_back(k, f64_scalar(v));
  for (const auto& [k, v] : hyperparameter_lists()) out.emplace_back(k, f64_list(v));
  out.emplace_back("base_lrs", f64_list(base_lrs_));
  out.emplace_back("last_epoch", f64_scalar(static_cast<double>(last_epoch_)));
  out.emplace_back("_step_count", f64_scalar(static_cast<double>(step_count_)));
  out.emplace_back("_last_lr", f64_list(last_lr_));
  return out;
}

void LRScheduler::load_state_dict(const StateDict& state) {
  const std::string where = name_ + ".load_state_dict";
  Options hyper = hyperparameters();
  auto lists = hyperparameter_lists();
  std::vector<double> base = base_lrs_, last = last_lr_;
  double epoch = static_cast<double>(last_epoch_), count = static_cast<double>(step_count_);
  for (const auto& [key, t] : state) {
    if (key == "base_lrs" || key == "_last_lr") {
      std::vector<double> v = list_of(where, key, t);
      STRATA_CHECK(v.size() == num_groups(), where, ": key '", key, "' has ", v.size(),
                   " values, but the optimizer has ", num_groups(), " param groups");
      (key == "base_lrs" ? base : last) = std::move(v);
    } else if (key == "last_epoch" || key == "_step_count") {
      const double v = scalar_of(where, key, t);
      STRATA_CHECK(whole(v), where, ": key '", key, "' must be a whole number, got ", py_float(v));
      (key == "last_epoch" ? epoch : count) = v;
    } else if (hyper.count(key) != 0) {
      hyper[key] = scalar_of(where, key, t);
    } else if (lists.count(key) != 0) {
      lists[key] = list_of(where, key, t);
    } else {
      STRATA_FAIL(where, ": unexpected key '", key, "'");
    }
  }
  // Lists first: MultiStepLR's milestones may still be refused, its gamma cannot.
  set_hyperparameter_lists(lists);
  set_hyperparameters(hyper);
  base_lrs_ = std::move(base);
  last_lr_ = std::move(last);
  last_epoch_ = static_cast<int64_t>(epoch);
  step_count_ = static_cast<int64_t>(count);
}

// ---- LambdaLR -----------------------------------------------------------------------------------

LambdaLR::LambdaLR(Optimizer& optimizer, std::vector<Lambda> lambdas, int64_t last_epoch)
    : LRScheduler("LambdaLR", optimizer, last_epoch), lambdas_(std::move(lambdas)) {
  const std::size_t groups = num_groups();
  if (lambdas_.size() == 1 && groups != 1) lambdas_.assign(groups, lambdas_[0]);
  STRATA_CHECK(lambdas_.size() == groups, "Expected ", groups, " lr_lambdas, but got ", lambdas_.size());
  for (const auto& f : lambdas_) STRATA_CHECK(static_cast<bool>(f), "LambdaLR: an lr_lambda is empty");
  initial_step();
}

std::vector<double> LambdaLR::compute_lr() {
  std::vector<double> out;
  for (std::size_t g = 0; g < lambdas_.size(); ++g) out.push_back(base_lrs()[g] * lambdas_[g](last_epoch()));
  return out;
}

// ---- StepLR -------------------------------------------------------------------------------------

StepLR::StepLR(Optimizer& optimizer, int64_t step_size, double gamma, int64_t last_epoch)
    : LRScheduler("StepLR", optimizer, last_epoch), step_size_(step_size), gamma_(gamma) {
  STRATA_CHECK(step_size > 0, "StepLR: step_size must be a positive integer, got ", step_size);
  initial_step();
}

std::vector<double> StepLR::compute_lr() {
  std::vector<double> lrs = group_lrs();
  if (last_epoch() == 0 || last_epoch() % step_size_ != 0) return lrs;
  for (double& lr : lrs) lr *= gamma_;
  return lrs;
}

std::vector<double> StepLR::closed_form_lr() const {
  std::vector<double> out;
  // Python's floor division (last_epoch may be negative after SequentialLR's undo).
  const auto k = static_cast<double>(
      static_cast<int64_t>(std::floor(static_cast<double>(last_epoch()) / static_cast<double>(step_size_))));
  for (double base : base_lrs()) out.push_back(base * std::pow(gamma_, k));
  return out;
}

Options StepLR::hyperparameters() const { return {{"step_size", static_cast<double>(step_size_)}, {"gamma", gamma_}}; }

void StepLR::set_hyperparameters(const Options& v) {
  const double s = v.at("step_size");
  STRATA_CHECK(whole(s) && s > 0, "StepLR.load_state_dict: key 'step_size' must be a positive integer, got ",
               py_float(s));
  step_size_ = static_cast<int64_t>(s);
  gamma_ = v.at("gamma");
}

// ---- MultiStepLR --------------------------------------------------------------------------------

MultiStepLR::MultiStepLR(Optimizer& optimizer, std::vector<int64_t> milestones, double gamma, int64_t last_epoch)
    : LRScheduler("MultiStepLR", optimizer, last_epoch), milestones_(std::move(milestones)), gamma_(gamma) {
  std::sort(milestones_.begin(), milestones_.end());
  initial_step();
}

std::vector<double> MultiStepLR::compute_lr() {
  std::vector<double> lrs = group_lrs();
  const auto hits = std::count(milestones_.begin(), milestones_.end(), last_epoch());
  if (hits == 0) return lrs;
  for (double& lr : lrs) lr *= std::pow(gamma_, static_cast<double>(hits));
  return lrs;
}

std::vector<double> MultiStepLR::closed_form_lr() const {
  const auto passed = std::upper_bound(milestones_.begin(), milestones_.end(), last_epoch()) - milestones_.begin();
  std::vector<double> out;
  for (double base : base_lrs()) out.push_back(base * std::pow(gamma_, static_cast<double>(passed)));
  return out;
}

void MultiStepLR::set_hyperparameters(const Options& v) { gamma_ = v.at("gamma"); }

std::map<std::string, std::vector<double>> MultiStepLR::hyperparameter_lists() const {
  return {{"milestones", std::vector<double>(milestones_.begin(), milestones_.end())}};
}

void MultiStepLR::set_hyperparameter_lists(const std::map<std::string, std::vector<double>>& values) {
  std::vector<int64_t> m;
  for (double v : values.at("milestones")) {
    STRATA_CHECK(whole(v), "MultiStepLR.load_state_dict: key 'milestones' must hold integers, got ", py_float(v));
    m.push_back(static_cast<int64_t>(v));
  }
  std::sort(m.begin(), m.end());
  milestones_ = std::move(m);
}

// ---- ExponentialLR ------------------------------------------------------------------------------

ExponentialLR::ExponentialLR(Optimizer& optimizer, double gamma, int64_t last_epoch)
    : LRScheduler("ExponentialLR", optimizer, last_epoch), gamma_(gamma) {
  initial_step();
}

std::vector<double> ExponentialLR::compute_lr() {
  std::vector<double> lrs = group_lrs();
  if (is_initial()) return lrs;
  for (double& lr : lrs) lr *= gamma_;
  return lrs;
}

std::vector<double> ExponentialLR::closed_form_lr() const {
  std::vector<double> out;
  for (double base : base_lrs()) out.push_back(base * std::pow(gamma_, static_cast<double>(last_epoch())));
  return out;
}

// ---- CosineAnnealingLR --------------------------------------------------------------------------

CosineAnnealingLR::CosineAnnealingLR(Optimizer& optimizer, int64_t T_max, double eta_min, int64_t last_epoch)
    : LRScheduler("CosineAnnealingLR", optimizer, last_epoch), T_max_(T_max), eta_min_(eta_min) {
  STRATA_CHECK(T_max > 0, "CosineAnnealingLR: T_max must be a positive integer, got ", T_max);
  initial_step();
}

std::vector<double> CosineAnnealingLR::compute_lr() {
  constexpr double pi = std::numbers::pi;
  const auto e = static_cast<double>(last_epoch());
  const auto T = static_cast<double>(T_max_);
  std::vector<double> lrs = group_lrs();
  if (is_initial()) return lrs;
  for (std::size_t g = 0; g < lrs.size(); ++g) {
    const double base = base_lrs()[g];
    if (step_count() == 1 && last_epoch() > 0) {
      lrs[g] = eta_min_ + (base - eta_min_) * (1 + std::cos(e * pi / T)) / 2;
    } else if ((last_epoch() - 1 - T_max_) % (2 * T_max_) == 0) {
      lrs[g] = lrs[g] + (base - eta_min_) * (1 - std::cos(pi / T)) / 2;
    } else {
      lrs[g] = (1 + std::cos(pi * e / T)) / (1 + std::cos(pi * (e - 1) / T)) * (lrs[g] - eta_min_) + eta_min_;
    }
  }
  return lrs;
}

std::vector<double> CosineAnnealingLR::closed_form_lr() const {
  std::vector<double> out;
  const double c = std::cos(std::numbers::pi * static_cast<double>(last_epoch()) / static_cast<double>(T_max_));
  for (double base : base_lrs()) out.push_back(eta_min_ + (base - eta_min_) * (1 + c) / 2);
  return out;
}

Options CosineAnnealingLR::hyperparameters() const {
  return {{"T_max", static_cast<double>(T_max_)}, {"eta_min", eta_min_}};
}

void CosineAnnealingLR::set_hyperparameters(const Options& v) {
  const double t = v.at("T_max");
  STRATA_CHECK(whole(t) && t > 0, "CosineAnnealingLR.load_state_dict: key 'T_max' must be a positive integer, got ",
               py_float(t));
  T_max_ = static_cast<int64_t>(t);
  eta_min_ = v.at("eta_min");
}

// ---- LinearLR -----------------------------------------------------------------------------------

LinearLR::LinearLR(Optimizer& optimizer, double start_factor, double end_factor, int64_t total_iters,
                   int64_t last_epoch)
    : LRScheduler("LinearLR", optimizer, last_epoch),
      start_factor_(start_factor),
      end_factor_(end_factor),
      total_iters_(total_iters) {
  STRATA_CHECK(start_factor <= 1.0 && start_factor > 0,
               "Starting multiplicative factor expected to be greater than 0 and less or equal to 1.");
  STRATA_CHECK(end_factor <= 1.0 && end_factor >= 0, "Ending multiplicative factor expected to be between 0 and 1.");
  STRATA_CHECK(total_iters > 0, "LinearLR: total_iters must be a positive integer, got ", total_iters);
  initial_step();
}

std::vector<double> LinearLR::compute_lr() {
  std::vector<double> lrs = group_lrs();
  if (last_epoch() == 0) {
    for (double& lr : lrs) lr *= start_factor_;
    return lrs;
  }
  if (is_initial() || last_epoch() > total_iters_) return lrs;
  const double d = end_factor_ - start_factor_;
  const double f =
      1.0 + d / (static_cast<double>(total_iters_) * start_factor_ + static_cast<double>(last_epoch() - 1) * d);
  for (double& lr : lrs) lr *= f;
  return lrs;
}

std::vector<double> LinearLR::closed_form_lr() const {
  std::vector<double> out;
  const auto t = static_cast<double>(std::min(total_iters_, last_epoch()));
  for (double base : base_lrs())
    out.push_back(base * (start_factor_ + (end_factor_ - start_factor_) * t / static_cast<double>(total_iters_)));
  return out;
}

Options LinearLR::hyperparameters() const {
  return {
      {"start_factor", start_factor_}, {"end_factor", end_factor_}, {"total_iters", static_cast<double>(total_iters_)}};
}

void LinearLR::set_hyperparameters(const Options& v) {
  const double t = v.at("total_iters");
  STRATA_CHECK(whole(t) && t > 0, "LinearLR.load_state_dict: key 'total_iters' must be a positive integer, got ",
               py_float(t));
  start_factor_ = v.at("start_factor");
  end_factor_ = v.at("end_factor");
  total_iters_ = static_cast<int64_t>(t);
}

// ---- OneCycleLR ---------------------------------------------------------------------------------

OneCycleLR::OneCycleLR(Optimizer& optimizer, const OneCycleOptions& o, int64_t last_epoch)
    : LRScheduler("OneCycleLR", optimizer, last_epoch) {
  // PyTorch sets the groups' initial_lr before its base constructor reads it; here the base
  // recorded the current lrs, and the cycle's initial lrs replace them.
  check_options(o);
  init_groups(o, last_epoch);
  std::vector<double> base;
  for (std::size_t g = 0; g < num_groups(); ++g) base.push_back(group_extra(g, "initial_lr"));
  set_base_lrs(std::move(base));
  initial_step();
}

void OneCycleLR::check_options(const OneCycleOptions& o) const {
  if (o.total_steps != 0) {
    STRATA_CHECK(o.total_steps > 0, "Expected positive integer total_steps, but got ", o.total_steps);
  } else {
    STRATA_CHECK(o.epochs != 0 || o.steps_per_epoch != 0,
                 "You must define either total_steps OR (epochs AND steps_per_epoch)");
    STRATA_CHECK(o.epochs > 0, "Expected positive integer epochs, but got ", o.epochs);
    STRATA_CHECK(o.steps_per_epoch > 0, "Expected positive integer steps_per_epoch, but got ", o.steps_per_epoch);
  }
  STRATA_CHECK(o.pct_start >= 0 && o.pct_start <= 1, "Expected float between 0 and 1 pct_start, but got ",
               py_float(o.pct_start));
  STRATA_CHECK(o.anneal_strategy == "cos" || o.anneal_strategy == "linear",
               "anneal_strategy must be one of 'cos' or 'linear', instead got ", o.anneal_strategy);
  const Options& defaults = optimizer().defaults();
  STRATA_CHECK(!o.cycle_momentum || defaults.count("momentum") != 0 || defaults.count("beta1") != 0,
               "optimizer must support momentum or beta1 with `cycle_momentum` option enabled");
}

void OneCycleLR::init_groups(const OneCycleOptions& o, int64_t last_epoch) {
  total_steps_ = o.total_steps != 0 ? o.total_steps : o.epochs * o.steps_per_epoch;
  const auto total = static_cast<double>(total_steps_);
  if (o.three_phase) {
    phases_ = {{o.pct_start * total - 1, "initial_lr", "max_lr", "max_momentum", "base_momentum"},
               {2 * o.pct_start * total - 2, "max_lr", "initial_lr", "base_momentum", "max_momentum"},
               {total - 1, "initial_lr", "min_lr", "max_momentum", "max_momentum"}};
  } else {
    phases_ = {{o.pct_start * total - 1, "initial_lr", "max_lr", "max_momentum", "base_momentum"},
               {total - 1, "max_lr", "min_lr", "base_momentum", "max_momentum"}};
  }
  cos_ = o.anneal_strategy == "cos";
  cycle_momentum_ = o.cycle_momentum;
  momentum_key_ = optimizer().defaults().count("beta1") != 0 ? "beta1" : "momentum";
  const std::size_t n = num_groups();
  const std::vector<double> max_lrs = per_group("OneCycleLR", "max_lr", o.max_lr, n);
  const std::vector<double> max_m = per_group("OneCycleLR", "max_momentum", o.max_momentum, n);
  const std::vector<double> base_m = per_group("OneCycleLR", "base_momentum", o.base_momentum, n);
  if (last_epoch != -1) return;
  for (std::size_t g = 0; g < n; ++g) {
    ParamGroup& group = optimizer().param_groups()[g];
    group.extras["initial_lr"] = max_lrs[g] / o.div_factor;
    group.extras["max_lr"] = max_lrs[g];
    group.extras["min_lr"] = group.extras["initial_lr"] / o.final_div_factor;
    if (!cycle_momentum_) continue;
    Options updated = group.options;
    updated[momentum_key_] = max_m[g];
    optimizer().check_group_options(updated);
    group.options = std::move(updated);
    group.extras["max_momentum"] = max_m[g];
    group.extras["base_momentum"] = base_m[g];
  }
}

double OneCycleLR::anneal(double start, double end, double pct) const {
  if (cos_) return end + (start - end) / 2.0 * (std::cos(std::numbers::pi * pct) + 1);
  return (end - start) * pct + start;
}

std::vector<double> OneCycleLR::compute_lr() {
  const int64_t step = last_epoch();
  STRATA_CHECK(step <= total_steps_, "Tried to step ", step, " times. The specified number of total steps is ",
               total_steps_);
  std::vector<double> lrs;
  auto& groups = optimizer().param_groups();
  for (std::size_t g = 0; g < groups.size(); ++g) {
    double start_step = 0.0;
    for (std::size_t i = 0; i < phases_.size(); ++i) {
      const Phase& phase = phases_[i];
      if (static_cast<double>(step) <= phase.end_step || i + 1 == phases_.size()) {
        const double pct = (static_cast<double>(step) - start_step) / (phase.end_step - start_step);
        lrs.push_back(anneal(group_extra(g, phase.start_lr), group_extra(g, phase.end_lr), pct));
        if (cycle_momentum_)
          groups[g].options[momentum_key_] =
              anneal(group_extra(g, phase.start_momentum), group_extra(g, phase.end_momentum), pct);
        break;
      }
      start_step = phase.end_step;
    }
  }
  return lrs;
}

Options OneCycleLR::hyperparameters() const {
  return {{"total_steps", static_cast<double>(total_steps_)}, {"cycle_momentum", cycle_momentum_ ? 1.0 : 0.0}};
}

void OneCycleLR::set_hyperparameters(const Options& v) {
  const double t = v.at("total_steps");
  STRATA_CHECK(whole(t) && t > 0, "OneCycleLR.load_state_dict: key 'total_steps' must be a positive integer, got ",
               py_float(t));
  total_steps_ = static_cast<int64_t>(t);
  cycle_momentum_ = v.at("cycle_momentum") != 0;
}

// ---- SequentialLR -------------------------------------------------------------------------------

SequentialLR::SequentialLR(Optimizer& optimizer, std::vector<std::shared_ptr<LRScheduler>> schedulers,
                           std::vector<int64_t> milestones, int64_t last_epoch)
    : LRScheduler("SequentialLR", optimizer, last_epoch),
      schedulers_(std::move(schedulers)),
      milestones_(std::move(milestones)) {
  STRATA_CHECK(!schedulers_.empty(), "SequentialLR expects at least one scheduler, but got no scheduler.");
  for (std::size_t i = 0; i < schedulers_.size(); ++i) {
    STRATA_CHECK(schedulers_[i] != nullptr, "SequentialLR: scheduler ", i, " is null");
    STRATA_CHECK(&schedulers_[i]->optimizer() == &optimizer,
                 "SequentialLR expects all schedulers to belong to the same optimizer, but got scheduler ",
                 schedulers_[i]->name(), " at index ", i, " with another optimizer");
  }
  STRATA_CHECK(milestones_.size() + 1 == schedulers_.size(),
               "Sequential Schedulers expects number of schedulers provided to be one more than the number of "
               "milestone points, but got number of schedulers ",
               schedulers_.size(), " and the number of milestones to be equal to ", milestones_.size());
  // PyTorch's constructor: back to the initial lrs, undo the children's first steps, then the
  // first phase's scheduler takes its initial step again.
  std::vector<double> initial;
  for (std::size_t g = 0; g < num_groups(); ++g) initial.push_back(group_extra(g, "initial_lr"));
  apply_lrs(initial);
  undo_step();
  LRScheduler& first = *schedulers_[index_at(0)];
  first.initial_step();
  set_progress(last_epoch + 1, first.last_lr());
}

std::size_t SequentialLR::index_at(int64_t epoch) const {
  return static_cast<std::size_t>(std::upper_bound(milestones_.begin(), milestones_.end(), epoch) -
                                  milestones_.begin());
}

void SequentialLR::step() {
  const int64_t epoch = last_epoch() + 1;
  const std::size_t idx = index_at(epoch);
  LRScheduler& s = *schedulers_[idx];
  if (idx > 0 && milestones_[idx - 1] == epoch) {
    s.restart_at(0);
  } else {
    s.step();
  }
  set_progress(epoch, s.last_lr());
}

void SequentialLR::undo_step() {
  for (auto& s : schedulers_) s->undo_step();
}

std::vector<double> SequentialLR::compute_lr() { return group_lrs(); }

StateDict SequentialLR::state_dict() const {
  StateDict out;
  out.emplace_back("_milestones", f64_list(std::vector<double>(milestones_.begin(), milestones_.end())));
  out.emplace_back("last_epoch", f64_scalar(static_cast<double>(last_epoch())));
  out.emplace_back("_last_lr", f64_list(last_lr()));
  for (std::size_t i = 0; i < schedulers_.size(); ++i)
    for (auto& [k, v] : schedulers_[i]->state_dict()) out.emplace_back("_schedulers." + std::to_string(i) + "." + k, v);
  return out;
}

namespace {

// Splits SequentialLR state into its own entries and each child's ("_schedulers.<i>.<key>").
void split_sequential_state(const StateDict& state, std::size_t children, StateDict& own,
                            std::vector<StateDict>& child_states) {
  const std::string prefix = "_schedulers.";
  child_states.assign(children, {});
  for (const auto& [key, t] : state) {
    if (!key.starts_with(prefix)) {
      own.emplace_back(key, t);
      continue;
    }
    const std::string rest = key.substr(prefix.size());
    const auto dot = rest.find('.');
    std::size_t i = children;
    if (dot != std::string::npos && dot > 0 && rest.find_first_not_of("0123456789") == dot)
      i = std::stoul(rest.substr(0, dot));
    STRATA_CHECK(i < children, "SequentialLR.load_state_dict: unexpected key '", key, "' (", children, " schedulers)");
    child_states[i].emplace_back(rest.substr(dot + 1), t);
  }
}

}  // namespace

void SequentialLR::load_state_dict(const StateDict& state) {
  const std::string where = "SequentialLR.load_state_dict";
  StateDict own;
  std::vector<StateDict> children;
  split_sequential_state(state, schedulers_.size(), own, children);
  double epoch = static_cast<double>(last_epoch());
  std::vector<double> last = last_lr();
  std::vector<double> milestones(milestones_.begin(), milestones_.end());
  for (const auto& [key, t] : own) {
    if (key == "last_epoch") {
      epoch = scalar_of(where, key, t);
      STRATA_CHECK(whole(epoch), where, ": key 'last_epoch' must be a whole number, got ", py_float(epoch));
    } else if (key == "_last_lr") {
      last = list_of(where, key, t);
    } else if (key == "_milestones") {
      milestones = list_of(where, key, t);
      STRATA_CHECK(milestones.size() + 1 == schedulers_.size(), where, ": key '_milestones' has ", milestones.size(),
                   " values for ", schedulers_.size(), " schedulers");
    } else {
      STRATA_FAIL(where, ": unexpected key '", key, "'");
    }
  }
  for (std::size_t i = 0; i < schedulers_.size(); ++i) schedulers_[i]->load_state_dict(children[i]);
  milestones_.clear();
  for (double m : milestones) milestones_.push_back(static_cast<int64_t>(m));
  set_progress(static_cast<int64_t>(epoch), std::move(last));
}

// ---- ReduceLROnPlateau --------------------------------------------------------------------------

ReduceLROnPlateau::ReduceLROnPlateau(Optimizer& optimizer, const PlateauOptions& options)
    : optimizer_(&optimizer), options_(options) {
  STRATA_CHECK(options.factor < 1.0, "Factor should be < 1.0.");
  STRATA_CHECK(options.mode == "min" || options.mode == "max", "mode ", options.mode, " is unknown!");
  STRATA_CHECK(options.threshold_mode == "rel" || options.threshold_mode == "abs", "threshold mode ",
               options.threshold_mode, " is unknown!");
  const std::size_t n = optimizer.param_groups().size();
  STRATA_CHECK(options.min_lr.size() == 1 || options.min_lr.size() == n, "expected ", n, " min_lrs, got ",
               options.min_lr.size());
  min_lrs_ = per_group("ReduceLROnPlateau", "min_lr", options.min_lr, n);
  for (const auto& g : optimizer.param_groups()) last_lr_.push_back(detail::option(g.options, "lr"));
  best_ = mode_worse();
}

double ReduceLROnPlateau::mode_worse() const {
  return options_.mode == "min" ? std::numeric_limits<double>::infinity() : -std::numeric_limits<double>::infinity();
}

bool ReduceLROnPlateau::is_better(double a) const {
  const bool rel = options_.threshold_mode == "rel";
  if (options_.mode == "min") return rel ? a < best_ * (1.0 - options_.threshold) : a < best_ - options_.threshold;
  return rel ? a > best_ * (options_.threshold + 1.0) : a > best_ + options_.threshold;
}

void ReduceLROnPlateau::step(double metric) {
  last_epoch_ += 1;
  if (is_better(metric)) {
    best_ = metric;
    num_bad_epochs_ = 0;
  } else {
    num_bad_epochs_ += 1;
  }
  if (cooldown_counter_ > 0) {
    cooldown_counter_ -= 1;
    num_bad_epochs_ = 0;  // bad epochs in cooldown do not count
  }
  if (num_bad_epochs_ > options_.patience) {
    reduce_lr();
    cooldown_counter_ = options_.cooldown;
    num_bad_epochs_ = 0;
  }
  last_lr_.clear();
  for (const auto& g : optimizer_->param_groups()) last_lr_.push_back(detail::option(g.options, "lr"));
}

void ReduceLROnPlateau::reduce_lr() {
  auto& groups = optimizer_->param_groups();
  if (groups.size() != min_lrs_.size()) {
    STRATA_CHECK(options_.min_lr.size() == 1, "The number of param groups in the `optimizer` (", groups.size(),
                 ") differs from when `ReduceLROnPlateau` was initialized (", min_lrs_.size(),
                 "), usually due to a new param group being added to the optimizer. Please modify the `min_lrs` "
                 "field to match the length of the `optimizer` param groups.");
    min_lrs_.assign(groups.size(), options_.min_lr[0]);
  }
  for (std::size_t g = 0; g < groups.size(); ++g) {
    const double old_lr = detail::option(groups[g].options, "lr");
    const double new_lr = std::max(old_lr * options_.factor, min_lrs_[g]);
    if (old_lr - new_lr > options_.eps) groups[g].options["lr"] = new_lr;
  }
}

StateDict ReduceLROnPlateau::state_dict() const {
  const PlateauOptions& o = options_;
  return {{"factor", f64_scalar(o.factor)},
          {"min_lrs", f64_list(min_lrs_)},
          {"patience", f64_scalar(static_cast<double>(o.patience))},
          {"cooldown", f64_scalar(static_cast<double>(o.cooldown))},
          {"cooldown_counter", f64_scalar(static_cast<double>(cooldown_counter_))},
          {"mode", f64_scalar(o.mode == "min" ? 0.0 : 1.0)},
          {"threshold", f64_scalar(o.threshold)},
          {"threshold_mode", f64_scalar(o.threshold_mode == "rel" ? 0.0 : 1.0)},
          {"best", f64_scalar(best_)},
          {"num_bad_epochs", f64_scalar(static_cast<double>(num_bad_epochs_))},
          {"mode_worse", f64_scalar(mode_worse())},
          {"eps", f64_scalar(o.eps)},
          {"last_epoch", f64_scalar(static_cast<double>(last_epoch_))},
          {"_last_lr", f64_list(last_lr_)}};
}

void ReduceLROnPlateau::load_state_dict(const StateDict& state) {
  const std::string where = "ReduceLROnPlateau.load_state_dict";
  PlateauOptions o = options_;
  std::vector<double> min_lrs = min_lrs_, last = last_lr_;
  double best = best_, bad = static_cast<double>(num_bad_epochs_), cool = static_cast<double>(cooldown_counter_);
  double epoch = static_cast<double>(last_epoch_);
  auto whole_of = [&](const std::string& key, const Tensor& t) {
    const double v = scalar_of(where, key, t);
    STRATA_CHECK(whole(v), where, ": key '", key, "' must be a whole number, got ", py_float(v));
    return v;
  };
  for (const auto& [key, t] : state) {
    if (key == "factor")
      o.factor = scalar_of(where, key, t);
    else if (key == "threshold")
      o.threshold = scalar_of(where, key, t);
    else if (key == "eps")
      o.eps = scalar_of(where, key, t);
    else if (key == "best")
      best = scalar_of(where, key, t);
    else if (key == "mode_worse")
      scalar_of(where, key, t);  // follows from mode
    else if (key == "patience")
      o.patience = static_cast<int64_t>(whole_of(key, t));
    else if (key == "cooldown")
      o.cooldown = static_cast<int64_t>(whole_of(key, t));
    else if (key == "cooldown_counter")
      cool = whole_of(key, t);
    else if (key == "num_bad_epochs")
      bad = whole_of(key, t);
    else if (key == "last_epoch")
      epoch = whole_of(key, t);
    else if (key == "mode")
      o.mode = whole_of(key, t) == 0 ? "min" : "max";
    else if (key == "threshold_mode")
      o.threshold_mode = whole_of(key, t) == 0 ? "rel" : "abs";
    else if (key == "min_lrs")
      min_lrs = list_of(where, key, t);
    else if (key == "_last_lr")
      last = list_of(where, key, t);
    else
      STRATA_FAIL(where, ": unexpected key '", key, "'");
  }
  STRATA_CHECK(o.factor < 1.0, where, ": Factor should be < 1.0.");
  options_ = std::move(o);
  min_lrs_ = std::move(min_lrs);
  last_lr_ = std::move(last);
  best_ = best;
  num_bad_epochs_ = static_cast<int64_t>(bad);
  cooldown_counter_ = static_cast<int64_t>(cool);
  last_epoch_ = static_cast<int64_t>(epoch);
}

}  // namespace strata::optim
