#pragma once
/// @file
/// Rematerialization policies for chains of steps: StoreAll, RecomputeAll, EveryK, SqrtN (through
/// checkpoint segments) and Revolve (binomial checkpointing run by a node of its own).
///
/// Note [Revolve execution]
/// The forward runs the schedule (revolve.h) under no-grad up to its first turn, keeping only the
/// snapshots the schedule takes (saved in a RevolveBackward node, so introspection and hooks see
/// them), and evaluates the last step with recording on x_{n-1}, which is made an output of that
/// node. When backward reaches the node with the gradient of x_{n-1}, it runs the rest of the
/// schedule: restores and advances (no-grad), and for each turn of step i re-evaluates the step
/// with recording on a fresh leaf x_i and back-propagates the incoming gradient through it with
/// autograd::backward, which accumulates the step's parameter gradients into their `.grad` and
/// yields x_i's gradient for the next turn. The gradient of x_0 is the node's output. Steps may
/// capture leaves (parameters) but no tensor computed outside the chain that requires grad (an
/// error: its graph would be run by the inner backward). Each evaluation of step i starts from the
/// default generator's state at its first evaluation (when preserve_rng_state), and the
/// generator is restored after backward. Re-evaluations run with in_recompute() true. Because
/// parameter gradients are accumulated by the inner backward, autograd::grad() over a Revolve
/// chain returns the input's gradient but also fills the parameters' `.grad`.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "autograd/remat/checkpoint.h"
#include "autograd/remat/planner.h"

namespace strata::remat {

enum class RematPolicy { StoreAll, RecomputeAll, EveryK, SqrtN, Revolve, Auto };

class AutoChain;

/// Where Auto puts its program points (Note [Auto graph execution]): one per step of the chain, or
/// one per op where a step exposes its ops (nn::RematSequential decomposes ResNet blocks and
/// Sequentials through nn::append_remat_steps; run_chain's closures are always steps).
enum class AutoGranularity { Step, Op };

/// A policy and its parameters.
struct ChainPolicy {
  RematPolicy kind = RematPolicy::StoreAll;
  int64_t k = 0;          ///< EveryK: steps per checkpointed segment (>= 1)
  int64_t snapshots = 0;  ///< Revolve: stored states, including the chain's input (>= 1)
  bool preserve_rng_state = true;
  /// Auto: the planner and executor (autograd/remat/plan_exec.h) holding the fast-tier budget and
  /// the plans cached by input signature; shared by copies of the policy.
  std::shared_ptr<AutoChain> auto_chain;
  AutoGranularity granularity = AutoGranularity::Op;  ///< Auto only

  /// Plain forward: every saved value is kept.
  static ChainPolicy store_all();
  /// One checkpoint per step: every saved value is recomputed.
  static ChainPolicy recompute_all();
  /// Checkpointed segments of k consecutive steps (the last may be shorter).
  static ChainPolicy every_k(int64_t k);
  /// EveryK with k = ceil(sqrt(n)).
  static ChainPolicy sqrt_n();
  /// Binomial checkpointing with `snapshots` stored states (Note [Revolve execution]).
  static ChainPolicy revolve(int64_t snapshots);
  /// Keep / stream / recompute / place in the slow tier per saved value, planned under
  /// `budget_bytes` of fast-tier activation peak (Note [Auto chain execution]) at step or op
  /// granularity; `options.slow_placement` false plans without slow-tier placement. Throws
  /// strata::Error when budget_bytes is 0.
  static ChainPolicy auto_budget(std::size_t budget_bytes, AutoGranularity granularity = AutoGranularity::Op,
                                 PlannerOptions options = {});

  /// "StoreAll", "EveryK(4)", "Revolve(3)", "Auto(1048576 bytes)", ...
  std::string to_string() const;
};

/// Runs steps[n-1](...steps[0](input)) under `policy`. Gradients (parameters' `.grad` and the
/// input's) are bitwise those of the plain forward when the steps are deterministic. Throws
/// strata::Error for an empty chain, an empty step, k < 1 (EveryK), snapshots < 1 (Revolve) or an
/// Auto policy without its executor (make it with ChainPolicy::auto_budget).
Tensor run_chain(const ChainPolicy& policy, const std::vector<StepFn>& steps, const Tensor& input,
                 const std::vector<std::string>& step_names = {});

}  // namespace strata::remat
