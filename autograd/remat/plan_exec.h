#pragma once
/// @file
/// Executing Auto plans (planner.h) on chains of steps: the planning graph of a chain, built by
/// profiling each step once, and the execution of keep / stream / recompute decisions.
///
/// Note [Auto chain execution]
/// A chain of m steps x_{i+1} = step_i(x_i) is planned at *step granularity*: op i of the
/// PlanGraph is step i, and each step contributes at most two saved values:
///  - "in i" (i >= 1): the step's input x_i (the previous step's output), producer i-1, last
///    forward use i, backward use i, deps {in i-1} (recomputing x_i re-runs step i-1 from x_{i-1};
///    x_0, the chain's input, belongs to the caller and is always available). Every value step i
///    saves that shares x_i's storage, and the input a checkpoint of step i saves, is this value.
///  - "int i": every other value step i saves (distinct storages counted once), producer, last
///    forward use and backward use i, deps {in i}.
/// Finer (per saved tensor) decisions are not executable on a chain of closures without knowing
/// how each op's saved values derive from each other, and a step's internal values are consumed
/// by the same backward step anyway, so their decisions could only differ by streaming some and
/// recomputing others, which a single re-run of the step would undo.
/// Per step, from one isolated profiling run (x_i detached; buffers and the default generator
/// put back afterwards): the saved values (through saved-tensor hooks), the forward time and the
/// forward+backward time (OpProfiler, cached by "step name + input shape"; backward through
/// autograd::grad w.r.t. x_i only, so parameter gradients are not part of it), and workspace =
/// the fast-tier peak of that run minus the internal saved bytes (output, gradients, temporaries).
/// Execution (one SavedTensorHooksGuard per step routes each saved value by its storage):
///  - int i Keep: plain. Stream: evicted (TieredMemory::evict_async of its storage) when the
///    step's forward is done, prefetched when the backward of step i+1 first unpacks a value
///    (one step ahead), and waited for at its own unpack. Recompute: step i runs inside
///    remat::checkpoint (its input is then saved through these hooks as "in i").
///  - in i Keep / Stream: as above (eviction skipped when x_i's storage is also the step's output,
///    e.g. a view). Recompute: the packed form keeps only a recipe: at unpack, x_{i-1} is fetched
///    from "in i-1" (recursively) and step i-1 re-runs under no-grad with in_recompute() true and
///    the default generator as at its first run; nothing is memoized (as the model assumes).
/// Parameter gradients allocated during backward are not in the model: callers keep them
/// allocated (or account for them in the budget).

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "autograd/remat/checkpoint.h"
#include "autograd/remat/planner.h"
#include "autograd/remat/profile.h"

namespace strata::remat {

/// The planning graph of a chain plus what execution needs to know per step.
struct ChainGraph {
  PlanGraph graph;
  std::vector<int64_t> input_value;     ///< per step: index of "in i" in graph.values, or -1
  std::vector<int64_t> internal_value;  ///< per step: index of "int i", or -1 (saves nothing else)
};

/// Plans and runs a chain under a fast-tier budget (Note [Auto chain execution]). Keeps a cache of
/// graphs and plans by input signature (shape, dtype): a new shape re-profiles and re-plans.
class AutoChain {
 public:
  /// Throws strata::Error when budget_bytes is 0.
  explicit AutoChain(std::size_t budget_bytes, PlannerOptions options = {});

  /// Runs steps[n-1](...steps[0](input)) under the plan for this input's signature. `names` (one per
  /// step, optional) enter the profiling signatures. Throws strata::Error for an empty chain or step,
  /// a names/steps size mismatch, a default allocator other than the tiered memory, or a budget
  /// below the minimum (the message names it).
  Tensor run(const std::vector<StepFn>& steps, const Tensor& input, const std::vector<std::string>& names = {});

  /// Profiles the chain on `input` and builds its planning graph (no plan, no cache).
  ChainGraph build_graph(const std::vector<StepFn>& steps, const Tensor& input,
                         const std::vector<std::string>& names = {});

  std::size_t budget_bytes() const { return budget_; }
  /// The graph and plan of the last run (null before the first).
  const ChainGraph* last_graph() const { return last_ ? &last_->chain : nullptr; }
  const Plan* last_plan() const { return last_ ? &last_->plan : nullptr; }
  /// How many distinct signatures were profiled and planned.
  int64_t plans_made() const { return plans_made_; }
  /// The fast-tier peak above the baseline measured since the start of the last run() (the last
  /// forward and whatever followed it, e.g. its backward). run() resets the tiered memory's peak
  /// statistics (MemoryStats::reset) when it starts.
  std::size_t measured_peak_bytes() const;
  /// planner.h's explain() of the last plan, followed by the measured peak (measured_peak_bytes).
  std::string explain() const;

 private:
  struct Entry {
    ChainGraph chain;
    Plan plan;
  };
  std::size_t budget_;
  Planner planner_;
  OpProfiler profiler_{1};
  std::map<std::string, std::shared_ptr<Entry>> cache_;
  std::shared_ptr<Entry> last_;
  int64_t plans_made_ = 0;
  std::size_t baseline_bytes_ = 0;
};

}  // namespace strata::remat
