#pragma once
/// @file
/// Internal: what AutoChain (plan_exec.h) learns about each step of a graph of steps by profiling
/// it in isolation (Note [Auto chain execution]), and the profiler that measures it. The graph
/// builder (chain_graph.h) turns the profiles into the planning graph. Not part of the public API.

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "autograd/remat/plan_exec.h"

namespace strata::memory {
class MemoryStats;
}

namespace strata::remat::detail {

/// What one isolated profiling of a step found (Note [Auto chain execution]). Per input position
/// k of the step's inputs unless said otherwise.
struct StepProfile {
  std::string signature;             ///< "name [shape dtype, ...]": what OpProfiler caches the times by
  int64_t view_of = -1;              ///< the input (position) whose storage the output shares, or -1
  std::vector<char> saves_input;     ///< the step saves input k's storage for backward
  bool saves_output = false;         ///< the step saves its output's storage
  std::vector<char> internal_saves;  ///< per value saved (in saving order): 1 for an internal
  std::size_t internal_bytes = 0;    ///< the internals' distinct storages
  std::size_t out_storage_bytes = 0, out_nbytes = 0;
  /// Allocations of the forward of the output's storage size (memory::AllocationLog): the output
  /// can be placed in the slow tier (memory::SlowPlacement, by size) only when it is the one.
  int64_t out_size_allocations = 0;
  std::size_t forward_peak = 0;  ///< fast-tier growth during the recorded forward
  std::size_t nograd_peak = 0;   ///< fast-tier growth during a no-grad re-run (what a recompute runs)
  /// Backward growth when the incoming gradient is reusable ([0]) or held elsewhere ([1]) (Note
  /// [In-place backward]), and per input whether the gradient the step returns for it is reusable.
  std::size_t backward_growth[2] = {0, 0};
  std::vector<char> grad_reusable[2];
  /// Per input: another input position whose returned gradient is the same buffer (add hands one
  /// tensor to both operands), or -1; again when reusable ([0]) or held ([1]).
  std::vector<int64_t> grad_alias[2];
  std::vector<char> grad_input;  ///< the step's backward returns a gradient for input k (measured)
  /// The leaves outside the step's inputs that its backward sends a gradient to (parameters), by
  /// storage (any stable key), with their gradients' bytes.
  std::vector<std::pair<const void*, std::size_t>> parameters;
  bool has_backward = false;                   ///< some input gets a gradient
  double forward_time = 0, backward_time = 0;  ///< seconds (backward: forward + backward - forward)
};

/// An input's signature: sizes, dtype, and " rg" when it requires grad.
std::string shape_signature(const Tensor& x);

/// The name a step goes by in signatures and explain(): its own, or "step i".
std::string step_name(const std::vector<GraphStep>& steps, int64_t i);

/// Profiles every step of a valid graph of steps on `input` (Note [Auto chain execution]): a
/// recorded forward and a second one (saved storages classified, forward peak), backward growth
/// measured with a reusable and with a held incoming gradient, a no-grad re-run, and the times
/// (through `profiler`, cached by signature). The default generator is put back after each step
/// and at the end. `stats` are the tiered memory's (the default allocator's), whose fast-tier peaks
/// measure the steps. Throws strata::Error for a step returning an undefined tensor.
std::vector<StepProfile> profile_steps(const std::vector<GraphStep>& steps, const Tensor& input, OpProfiler& profiler,
                                       memory::MemoryStats& stats);

}  // namespace strata::remat::detail
