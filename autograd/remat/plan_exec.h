#pragma once
/// @file
/// Executing Auto plans (planner.h) on chains of steps: the planning graph of a chain, built by
/// profiling each step once, and the execution of keep / stream / recompute decisions.
///
/// Note [Auto chain execution]
/// A chain of m steps x_{i+1} = step_i(x_i) is planned at *step granularity*: op i of the
/// PlanGraph is step i. Its saved values are found by running it once under recording
/// saved-tensor hooks and classified by storage: the step's input x_i, its output y_i = x_{i+1},
/// storages that existed before the step (parameters, buffers: saved by two runs alike), and the
/// rest, its *internals*. The values of the graph are (one per distinct storage, so a value saved
/// twice, or saved by one step as its output and by the next as its input, is counted once):
///  - one *boundary* value per storage of x_1..x_{m-1} ("x i"). Steps returning a view of their
///    input (Flatten) continue their input's value; x_0's storage (and its views) is the caller's
///    and never a value. Producer: the step that created the storage; last forward use: the last
///    step reading it; backward uses: every step saving it (as input or output), possibly none
///    (then it only serves recomputes); deps: the producer's input value; recompute workspace:
///    the producer's no-grad re-run peak beyond its output.
///  - one *internal* value per step with internals ("int i", the sum of their distinct storages):
///    producer, last forward use and backward use i, deps {x i}; recompute workspace: the step's
///    forward peak beyond them (a checkpoint re-run records them again and makes a new output).
/// Per step, from isolated profiling runs (x_i detached and made a leaf; modules' buffers and the
/// default generator put back): forward workspace = forward peak - output - internals;
/// backward workspace = the seed gradient + the growth during autograd::grad w.r.t. x_i (input
/// gradient, weight-gradient temporaries) + the chain's output, which the caller holds through the
/// backward, + 64 bytes for the caller's scalar loss and its gradient. The growth is measured twice,
/// with a seed nothing else holds and with one held elsewhere, since a step whose backward works in
/// place (Note [In-place backward] in autograd/engine.h) allocates no input gradient in the first
/// case; the run decides which applies per step, in backward order: a step's incoming gradient is
/// reusable when two or more readers' gradients are summed into it, or when its single reader's
/// backward returned a reusable one (itself measured under that reader's case); the last step's is
/// the caller's and counted as held. A gradient pending across a step that is the very buffer the
/// step receives (add hands one tensor to both operands) is counted once there. Times from
/// OpProfiler (forward; forward + backward), cached by "name + input
/// shape". The graph has timed_moves: an eviction overlaps as many following points as its copy
/// time needs, and a prefetch is issued as many points ahead (Note [Auto planning model]).
/// Execution (per step, saved-tensor hooks route each saved value by its storage; a marker node
/// on every step's output runs when the backward of that step begins):
///  - Keep: plain. Stream: the storage is evicted (TieredMemory::evict_async) after the value's
///    last forward use, the eviction is waited for at the start of point evict_until + 1, and
///    the prefetch is issued at the start of point stream_from (before a forward step, or by the
///    marker of a backward step) and waited for at unpack; a value whose residency has no gap
///    is not moved. Recompute: an internal value runs its step inside remat::checkpoint; a
///    boundary value packs only its view geometry and, at every unpack, re-runs its producer under
///    no-grad (in_recompute() true, the default generator as at the first run) on its source
///    value (kept, streamed, or itself recomputed, recursively: the recompute closure) and
///    rebuilds the saved view over the new storage; nothing is memoized (as the model assumes).
///    Slow (boundary values only: slow_ok when the profiling run's memory::AllocationLog shows no
///    other allocation of the output's size, forward_reads counted over the steps reading them): the
///    producer runs inside memory::SlowPlacement for the value's size (Note [Slow placement]), so
///    its output is allocated in the slow tier; its readers, forward and backward, pin it there
///    and use it in place (charged as direct slow-tier accesses); it is never moved.
/// The model is conservative by construction where the run may do less: recompute closures are
/// summed though re-runs are sequential, a value is held for its whole backward point, and the
/// seed gradient is held through the whole backward step. Parameter gradients must be allocated
/// before the step (the model treats them as baseline, like the parameters).
///
/// Note [Auto graph execution]
/// The same planning and execution over a *graph* of steps (GraphStep): step i computes
/// fn(inputs) from the graph's input and earlier steps' outputs, so a residual block can be given
/// as its ops (conv, batch norm, relu, ..., add + relu reading the block's input again) and planned
/// at op granularity (models/remat.h: append_remat_steps). A chain is the graph whose step i reads
/// step i-1, and it is run through the same code. What changes with several inputs:
///  - Profiling makes every input a fresh leaf; a saved storage is classified as input k when it
///    is input k's storage; the backward growth is measured w.r.t. all (floating) inputs.
///  - A step's boundary value (its output's storage; or, for a view of input k, input k's value)
///    has every step reading it as forward uses (last forward use: the last reader) and every step
///    saving it as backward uses; a value's deps are the values of the producer's inputs; a
///    recompute re-runs the producer on all of them (each rebuilt as the view it was read as).
///  - Program points stay forward steps in order, then backward steps in reverse: the engine runs
///    the most recently recorded ready node first (Note [Engine order]), and a step's consumers
///    are all recorded after it, so backward runs the steps in exact reverse order.
///  - A gradient is pending across points: the gradient of step j's output exists from the
///    backward of its last reader r until the backward of j, so every backward point of a step k
///    with j < k < r holds it (for a chain, r = j + 1 and nothing is pending). This does not
///    depend on the plan and is added to those steps' backward workspace. (The graph input's
///    gradient, when it requires one, likewise between its first and last readers.)
///  - A parameter read by several steps (the same linear applied to row slices: Note
///    [Feed-forward in row chunks] in models/attention.cpp) has one AccumulateGrad node, which
///    runs only when every reader's gradient has arrived: the gradient is pending from the
///    backward of its last reader to that of its first, which holds it too while adding its own.
/// Steps' outputs are released after their last reader, so forward liveness is what the model
/// says: a value is resident from its producer to its last forward use.
/// Code: the profiler (detail/step_profile.h: profile_steps, one StepProfile per step), the graph
/// builder (detail/chain_graph.h: build_chain_graph, a pure function of the profiles, with the
/// backward accounting above as backward_accounting), and the executor (plan_exec.cpp: the plan
/// cache, detail/move_schedule.h's schedule_moves, and a forward run routing saved values and
/// recording recompute recipes step by step).

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "autograd/remat/checkpoint.h"
#include "autograd/remat/planner.h"
#include "autograd/remat/profile.h"

namespace strata::remat {

/// One step of a graph of steps (Note [Auto graph execution]): its output is fn(inputs), where
/// inputs[k] is -1 for the graph's input or the index of an earlier step whose output it reads. A
/// chain is the graph whose step i reads step i-1.
struct GraphStep {
  std::function<Tensor(const TensorList&)> fn;
  std::vector<int64_t> inputs;
  std::string name;  ///< enters the profiling signature ("step i" when empty)
};

/// The steps of a chain as a graph (step i reads step i-1; names optional, one per step).
std::vector<GraphStep> chain_steps(const std::vector<StepFn>& steps, const std::vector<std::string>& names = {});

/// The planning graph of a graph of steps plus what execution needs to know per step.
struct ChainGraph {
  PlanGraph graph;
  /// Per step, per input: the value of that input's storage, or -1 (the graph's input).
  std::vector<std::vector<int64_t>> input_values;
  std::vector<int64_t> output_value;    ///< per step: the value of its output's storage, or -1 (the last step's)
  std::vector<int64_t> internal_value;  ///< per step: index of "int i", or -1 (no internals)
  /// Per step, per value it saves (in saving order): 1 when the saved storage is an internal.
  std::vector<std::vector<char>> internal_saves;
};

/// Plans and runs a chain under a fast-tier budget (Note [Auto chain execution]). Keeps a cache of
/// graphs and plans by input signature (shape, dtype): a new shape re-profiles and re-plans.
class AutoChain {
 public:
  /// Throws strata::Error when budget_bytes is 0.
  explicit AutoChain(std::size_t budget_bytes, PlannerOptions options = {});

  /// Runs steps[n-1](...steps[0](input)) under the plan for this input's signature. `names` (one per
  /// step, optional) enter the profiling signatures. Throws strata::Error for an empty chain or step,
  /// a names/steps size mismatch, a default allocator other than the tiered memory, a budget below
  /// the minimum (the message names it), or a step that saves values other than its profile did.
  Tensor run(const std::vector<StepFn>& steps, const Tensor& input, const std::vector<std::string>& names = {});

  /// Runs a graph of steps (Note [Auto graph execution]) on `input` under the plan for this input's
  /// signature and returns the last step's output. Throws strata::Error as run() does, and for a step
  /// without inputs, an input index that is not -1 or an earlier step, a step reading the same input
  /// twice, or a step other than the last whose output no step reads.
  Tensor run_graph(const std::vector<GraphStep>& steps, const Tensor& input);

  /// Profiles the chain on `input` and builds its planning graph (no plan, no cache).
  ChainGraph build_graph(const std::vector<StepFn>& steps, const Tensor& input,
                         const std::vector<std::string>& names = {});
  /// Profiles a graph of steps on `input` and builds its planning graph (no plan, no cache).
  ChainGraph build_graph(const std::vector<GraphStep>& steps, const Tensor& input);

  std::size_t budget_bytes() const { return budget_; }
  /// The graph and plan of the last run (null before the first).
  const ChainGraph* last_graph() const;
  const Plan* last_plan() const;
  /// How many distinct signatures were profiled and planned.
  int64_t plans_made() const { return plans_made_; }
  /// The fast-tier peak above the baseline measured since the start of the last run() (the last
  /// forward and whatever followed it, e.g. its backward). run() resets the tiered memory's peak
  /// statistics (MemoryStats::reset_peaks) when it starts.
  std::size_t measured_peak_bytes() const;
  /// planner.h's explain() of the last plan, followed by the measured peak (measured_peak_bytes).
  std::string explain() const;

 private:
  // A planned signature and the execution schedule derived from its plan (plan_exec.cpp).
  struct Entry;
  // The entry of this graph and input signature, profiled and planned on a cache miss.
  std::shared_ptr<Entry> plan_for(const std::vector<GraphStep>& steps, const Tensor& input);

  std::size_t budget_;
  Planner planner_;
  OpProfiler profiler_{1};
  std::map<std::string, std::shared_ptr<Entry>> cache_;
  std::shared_ptr<Entry> last_;
  int64_t plans_made_ = 0;
  std::size_t baseline_bytes_ = 0;
};

}  // namespace strata::remat
