#pragma once
/// @file
/// Internal: the planning graph of a graph of steps built from the steps' profiles
/// (step_profile.h) — a pure function of them, so the accounting of Notes [Auto chain execution]
/// and [Auto graph execution] can be tested with hand-built profiles. Not part of the public API.

#include <cstddef>
#include <cstdint>
#include <vector>

#include "autograd/remat/detail/step_profile.h"
#include "autograd/remat/plan_exec.h"

namespace strata::remat::detail {

/// What the graph needs besides the profiles: the graph input's gradient and the machine.
struct ChainGraphContext {
  /// Bytes of the graph input's gradient, or 0 when the input needs none (not floating, or no
  /// requires_grad): pending between the backward of its last and its first differentiating reader.
  std::size_t input_grad_bytes = 0;
  CopyBandwidth bandwidth;          ///< PlanGraph::bandwidth
  double move_compute_share = 0.0;  ///< PlanGraph::move_compute_share
};

/// What the caller holds through the backward besides the chain's output (a scalar loss and its
/// gradient, whatever their dtype): counted in every step's backward workspace.
inline constexpr std::size_t kCallerLossBytes = 64;

/// The backward-order accounting of Note [Auto graph execution] per step.
struct BackwardAccounting {
  /// Whether the step's incoming gradient is reusable in the whole backward (Note [In-place
  /// backward]): two or more readers' gradients summed into it, or its single reader's backward
  /// returned a reusable one (itself measured under that reader's case). The last step's: false.
  std::vector<char> incoming_reusable;
  std::vector<int> contributions;  ///< readers whose backward returns a gradient for the step's output
  /// Bytes of gradients pending across the step's backward point: step outputs read by a later
  /// step than the next one, the graph input's, parameters read by several steps (from the last
  /// reader to the first, inclusive), less a pending gradient that is the very buffer the step
  /// receives (add hands one tensor to both operands).
  std::vector<std::size_t> pending;
};

/// The accounting for valid `steps` with profiles `prof` (one per step).
BackwardAccounting backward_accounting(const std::vector<GraphStep>& steps, const std::vector<StepProfile>& prof,
                                       std::size_t input_grad_bytes);

/// The planning graph and routing tables (Note [Auto chain execution]; Note [Auto graph
/// execution]) of valid `steps` with profiles `prof` (one per step; only the steps' inputs and
/// names are read). Per step, backward workspace = (out_nbytes + the backward growth for its
/// incoming gradient's case, when it has a backward) + the chain's output (held by the caller) +
/// kCallerLossBytes + pending. The graph is validated (PlanGraph::validate).
ChainGraph build_chain_graph(const std::vector<GraphStep>& steps, const std::vector<StepProfile>& prof,
                             const ChainGraphContext& context);

}  // namespace strata::remat::detail
