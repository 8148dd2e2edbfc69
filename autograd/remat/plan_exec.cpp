#include "autograd/remat/plan_exec.h"

#include <algorithm>
#include <any>
#include <map>
#include <optional>
#include <sstream>
#include <thread>
#include <utility>

#include "autograd/engine.h"
#include "autograd/grad_mode.h"
#include "autograd/node.h"
#include "autograd/remat/detail/chain_graph.h"
#include "autograd/remat/detail/move_schedule.h"
#include "autograd/remat/detail/step_profile.h"
#include "autograd/saved_tensor.h"
#include "core/allocator.h"
#include "core/error.h"
#include "core/threading.h"
#include "memory/tiered_memory.h"

namespace strata::remat {

// A planned signature: its graph, its plan and the moves the plan makes.
struct AutoChain::Entry {
  ChainGraph chain;
  Plan plan;
  detail::MoveSchedule schedule;
};

namespace {

memory::TieredMemory& tiered_or_throw(const char* who) {
  Allocator& allocator = default_allocator();
  auto* tiered = dynamic_cast<memory::TieredMemory*>(&allocator);
  if (tiered == nullptr && allocator.name() == "tiered") tiered = &memory::tiered_memory();
  STRATA_CHECK(tiered != nullptr, who, ": the default allocator is \"", std::string(allocator.name()),
               "\", expected the tiered memory (\"tiered\"; unset STRATA_MEMORY=dram)");
  return *tiered;
}

// ---- execution state ----------------------------------------------------------------------------

// One storage moved to the slow tier after its last forward use and brought back before its
// backward use.
struct Streamed {
  Storage storage;
  memory::TieredMemory* tiered = nullptr;
  memory::MoveHandle evict, prefetch;
  bool evicted = false, prefetched = false;
  void start_evict() {
    if (evicted) return;
    evicted = true;
    evict = tiered->evict_async(storage);
  }
  void wait_evicted() {
    if (evicted) evict.wait();
  }
  void start_prefetch() {
    if (!evicted || prefetched) return;
    prefetched = true;
    prefetch = tiered->prefetch_async(storage);
  }
  void wait_resident() {
    start_prefetch();
    if (prefetched) prefetch.wait();
  }
};

struct Boundary;

// One input of a step, as a recompute re-reads it: the view `sizes/strides/offset/dtype` of a
// boundary's storage, or a fixed tensor (the graph's input).
struct Source {
  std::shared_ptr<Boundary> boundary;
  Tensor fixed;
  Dims sizes, strides;
  int64_t offset = 0;
  DType dtype = DType::f32;
  Tensor get() const;
};

// A boundary value (the storage of a step's output) during one run.
struct Boundary {
  Decision decision = Decision::Keep;
  bool moves = false;                  // Stream with a gap: evicted and prefetched
  Tensor value;                        // Keep / Stream: the producer's output
  std::shared_ptr<Streamed> streamed;  // Stream
  // Recompute: the producer re-runs on its inputs.
  std::vector<Source> sources;
  std::function<Tensor(const TensorList&)> producer;
  int64_t producer_index = 0;
  detail::RngState rng;  // the default generator before the producer's first run
  Dims sizes, strides;
  int64_t offset = 0;
  DType dtype = DType::f32;
  std::size_t storage_bytes = 0;

  Tensor get() {
    switch (decision) {
      case Decision::Keep:
      case Decision::Slow: return value;  // in the slow tier: its readers access it there
      case Decision::Stream:
        if (streamed) streamed->wait_resident();
        return value;
      case Decision::Recompute: {
        TensorList in;
        in.reserve(sources.size());
        for (const Source& s : sources) in.push_back(s.get());
        const detail::RngState outer = detail::RngState::current();
        rng.restore();
        Tensor out;
        {
          detail::RecomputeScope scope;
          autograd::NoGradGuard no_grad;
          out = producer(in);
        }
        outer.restore();
        STRATA_CHECK(out.defined() && out.sizes() == sizes && out.strides() == strides && out.offset() == offset &&
                         out.dtype() == dtype && out.storage().nbytes() == storage_bytes,
                     "AutoChain: re-running step ", producer_index, " to recompute its output gave ",
                     out.defined() ? out.describe() : std::string("an undefined tensor"), ", expected the ",
                     IntArrayRef(sizes), " ", dtype, " it returned first (the step is not deterministic)");
        return out;
      }
    }
    return Tensor();
  }
};

Tensor Source::get() const {
  if (!boundary) return fixed;
  Tensor base = boundary->get();
  return Tensor(base.storage(), sizes, strides, offset, dtype);
}

// What the per-step hooks pack.
struct Packed {
  Tensor value;                         // Keep, Stream (same tensor; its storage moves)
  std::shared_ptr<Streamed> streamed;   // Stream: wait for the prefetch
  std::shared_ptr<Boundary> recompute;  // Recompute: rebuild the view below over a re-run's storage
  Dims sizes, strides;
  int64_t offset = 0;
  DType dtype = DType::f32;
  bool routed = false;
};

void route(Packed& p, Tensor v, const std::shared_ptr<Boundary>& b) {  // v by value: it may be p.value
  p.routed = true;
  if (!b || b->decision == Decision::Keep || b->decision == Decision::Slow ||
      (b->decision == Decision::Stream && !b->moves)) {
    p.value = v;
    return;
  }
  if (b->decision == Decision::Stream) {
    p.value = v;
    p.streamed = b->streamed;
    return;
  }
  p.value = Tensor();
  p.recompute = b;
  p.sizes = v.sizes();
  p.strides = v.strides();
  p.offset = v.offset();
  p.dtype = v.dtype();
}

Tensor unpack(const std::shared_ptr<Packed>& p) {
  if (p->recompute) {
    Tensor base = p->recompute->get();
    return Tensor(base.storage(), p->sizes, p->strides, p->offset, p->dtype);
  }
  if (p->streamed) p->streamed->wait_resident();
  return p->value;
}

// The moves of one run, triggered at program points (forward steps; markers in backward).
struct RunState {
  std::vector<std::vector<std::shared_ptr<Streamed>>> streamed;  // per value
  std::vector<std::vector<int64_t>> wait_evict_at, prefetch_at;  // per point (copied from the Entry)

  void wait_evictions(int64_t t) {
    if (t < 0 || t >= static_cast<int64_t>(wait_evict_at.size())) return;
    for (int64_t v : wait_evict_at[t])
      for (auto& s : streamed[v]) s->wait_evicted();
  }
  void prefetch(int64_t t) {
    if (t < 0 || t >= static_cast<int64_t>(prefetch_at.size())) return;
    for (int64_t v : prefetch_at[t]) {
      for (auto& s : streamed[v]) s->start_prefetch();
      streamed[v].clear();  // the packed values (and recompute recipes) hold them from now on
    }
  }
  void at_point(int64_t t) {
    wait_evictions(t);
    prefetch(t);
  }
};

// An alias of `y` whose backward runs `at_backward` and passes the gradient through unchanged.
Tensor with_marker(const Tensor& y, std::function<void()> at_backward) {
  if (!autograd::needs_grad({&y})) return y;
  Tensor alias = y.detach();
  auto node = autograd::make_node("AutoChainPoint", {&y},
                                  [f = std::move(at_backward)](autograd::Node&, const TensorList& g) -> TensorList {
                                    f();
                                    return {g[0]};
                                  });
  autograd::set_history({&alias}, node);
  return alias;
}

}  // namespace

std::vector<GraphStep> chain_steps(const std::vector<StepFn>& steps, const std::vector<std::string>& names) {
  STRATA_CHECK(names.empty() || names.size() == steps.size(), "AutoChain: ", names.size(), " step names for ",
               steps.size(), " steps");
  std::vector<GraphStep> out;
  out.reserve(steps.size());
  for (std::size_t i = 0; i < steps.size(); ++i) {
    STRATA_CHECK(static_cast<bool>(steps[i]), "AutoChain: step ", i, " is empty");
    GraphStep g;
    g.fn = [f = steps[i]](const TensorList& in) -> Tensor { return f(in[0]); };
    g.inputs = {static_cast<int64_t>(i) - 1};
    g.name = names.empty() ? std::string() : names[i];
    out.push_back(std::move(g));
  }
  return out;
}

namespace {

void check_steps(const std::vector<GraphStep>& steps) {
  const auto m = static_cast<int64_t>(steps.size());
  STRATA_CHECK(m >= 1, "AutoChain: the chain has no steps");
  std::vector<char> read(static_cast<std::size_t>(m), 0);
  for (int64_t i = 0; i < m; ++i) {
    const GraphStep& s = steps[i];
    STRATA_CHECK(static_cast<bool>(s.fn), "AutoChain: step ", i, " is empty");
    STRATA_CHECK(!s.inputs.empty(), "AutoChain: step ", i, " has no inputs");
    for (std::size_t k = 0; k < s.inputs.size(); ++k) {
      const int64_t j = s.inputs[k];
      STRATA_CHECK(j >= -1 && j < i, "AutoChain: input ", k, " of step ", i, " is ", j,
                   "; expected -1 (the graph's input) or an earlier step");
      for (std::size_t l = 0; l < k; ++l)
        STRATA_CHECK(s.inputs[l] != j, "AutoChain: step ", i, " reads input ", j, " twice");
      if (j >= 0) read[j] = 1;
    }
  }
  for (int64_t i = 0; i + 1 < m; ++i)
    STRATA_CHECK(read[i] != 0, "AutoChain: no step reads the output of step ", i,
                 " (only the last step's output may be unread)");
}

Tensor run_without_grad(const std::vector<GraphStep>& steps, const Tensor& input) {
  std::vector<Tensor> outs(steps.size());
  for (std::size_t i = 0; i < steps.size(); ++i) {
    TensorList in;
    for (int64_t j : steps[i].inputs) in.push_back(j < 0 ? input : outs[j]);
    outs[i] = steps[i].fn(in);
  }
  return outs.back();
}

// The plan cache's key: the input's signature and the graph's structure and names.
std::string plan_key(const std::vector<GraphStep>& steps, const Tensor& input) {
  std::string key = detail::shape_signature(input) + "|" + std::to_string(steps.size());
  for (const GraphStep& step : steps) {
    key += "|" + step.name + "(";
    for (int64_t j : step.inputs) key += std::to_string(j) + ",";
    key += ")";
  }
  return key;
}

// One forward of a graph of steps under a plan (Note [Auto chain execution]: execution), step by
// step: the moves due at its point, its inputs, the step under hooks routing what it saves, its
// output's value (kept, streamed, placed in the slow tier, or a recompute recipe), the values it
// saved before returning, and what it was the last use of.
class ForwardRun {
 public:
  ForwardRun(const std::vector<GraphStep>& steps, const Tensor& input, const ChainGraph& cg,
             const std::vector<Decision>& decisions, const detail::MoveSchedule& schedule,
             memory::TieredMemory& tiered);
  Tensor run();

 private:
  struct StepInputs {
    TensorList x;
    std::vector<std::shared_ptr<Boundary>> boundaries;  // per input: its live boundary, or null
    std::vector<const Allocation*> allocs;
  };
  StepInputs gather(int64_t i) const;
  Tensor call_step(int64_t i, const StepInputs& in, std::vector<std::shared_ptr<Packed>>& packs) const;
  void record_boundary(int64_t i, const StepInputs& in, const Tensor& y, const detail::RngState& rng);
  void route_saved(int64_t i, const Tensor& y, const std::vector<std::shared_ptr<Packed>>& packs);
  void release(int64_t i);
  // The step's output value when it is a new one (not a view of an input's), else -1.
  int64_t new_value(int64_t i) const;

  const std::vector<GraphStep>& steps_;
  const Tensor& input_;
  const ChainGraph& cg_;
  const std::vector<Decision>& d_;
  const detail::MoveSchedule& schedule_;
  memory::TieredMemory& tiered_;
  const int64_t m_;
  std::vector<int64_t> last_reader_;  // per step: the last step reading its output
  std::shared_ptr<RunState> rs_;
  // Boundary values alive in the forward (released after their last forward use: from then on
  // only the packed values and the recompute recipes of later values hold them), and the steps'
  // outputs (released after their last reader).
  std::vector<std::shared_ptr<Boundary>> live_;
  std::vector<Tensor> outs_;
};

ForwardRun::ForwardRun(const std::vector<GraphStep>& steps, const Tensor& input, const ChainGraph& cg,
                       const std::vector<Decision>& decisions, const detail::MoveSchedule& schedule,
                       memory::TieredMemory& tiered)
    : steps_(steps),
      input_(input),
      cg_(cg),
      d_(decisions),
      schedule_(schedule),
      tiered_(tiered),
      m_(static_cast<int64_t>(steps.size())),
      last_reader_(steps.size(), -1),
      rs_(std::make_shared<RunState>()),
      live_(cg.graph.values.size()),
      outs_(steps.size()) {
  for (int64_t i = 0; i < m_; ++i)
    for (int64_t j : steps[i].inputs)
      if (j >= 0) last_reader_[j] = std::max(last_reader_[j], i);
  rs_->streamed.assign(cg.graph.values.size(), {});
  rs_->wait_evict_at = schedule.wait_evict_at;
  rs_->prefetch_at = schedule.prefetch_at;
}

Tensor ForwardRun::run() {
  for (int64_t i = 0; i < m_; ++i) {
    rs_->at_point(i);
    const detail::RngState rng = detail::RngState::current();
    StepInputs in = gather(i);
    std::vector<std::shared_ptr<Packed>> packs;
    const Tensor y = call_step(i, in, packs);
    STRATA_CHECK(y.defined(), "AutoChain: step ", i, " returned an undefined tensor");
    if (new_value(i) >= 0) record_boundary(i, in, y, rng);
    route_saved(i, y, packs);
    packs.clear();
    in.x.clear();
    release(i);
    // The backward of step i is program point 2m-1-i.
    const int64_t point = 2 * m_ - 1 - i;
    outs_[i] = with_marker(y, [rs = rs_, point] { rs->at_point(point); });
  }
  // The evictions due at the backward's first point are waited for now (before the caller's loss);
  // its prefetches are issued by the last step's marker.
  rs_->wait_evictions(m_);
  return outs_[m_ - 1];
}

ForwardRun::StepInputs ForwardRun::gather(int64_t i) const {
  StepInputs in;
  for (std::size_t k = 0; k < steps_[i].inputs.size(); ++k) {
    const int64_t j = steps_[i].inputs[k];
    in.x.push_back(j < 0 ? input_ : outs_[j]);
    const int64_t vin = cg_.input_values[i][k];
    in.boundaries.push_back(vin >= 0 ? live_[vin] : nullptr);
    in.allocs.push_back(in.x.back().storage().allocation());
  }
  return in;
}

int64_t ForwardRun::new_value(int64_t i) const {
  const int64_t vout = cg_.output_value[i];
  const auto& ins = cg_.input_values[i];
  return vout >= 0 && std::find(ins.begin(), ins.end(), vout) == ins.end() ? vout : -1;
}

// The step under hooks that route its saved inputs at once (the rest once it returned: its
// output, internal, or existing), in the slow tier when its output is placed there (Note [Slow
// placement]), inside checkpoint when its internals are recomputed.
Tensor ForwardRun::call_step(int64_t i, const StepInputs& in, std::vector<std::shared_ptr<Packed>>& packs) const {
  auto hooks = autograd::make_saved_tensor_hooks(
      [&](const Tensor& v) -> std::any {
        auto p = std::make_shared<Packed>();
        packs.push_back(p);
        const auto pos =
            v.defined() ? std::find(in.allocs.begin(), in.allocs.end(), v.storage().allocation()) : in.allocs.end();
        if (pos != in.allocs.end())
          route(*p, v, in.boundaries[pos - in.allocs.begin()]);
        else
          p->value = v;
        return p;
      },
      [](std::any& packed) -> Tensor { return unpack(std::any_cast<std::shared_ptr<Packed>>(packed)); });
  autograd::SavedTensorHooksGuard guard(hooks);
  std::optional<memory::SlowPlacement> placement;
  const int64_t vout = new_value(i);
  if (vout >= 0 && d_[vout] == Decision::Slow) placement.emplace(cg_.graph.values[vout].bytes);
  const int64_t internal = cg_.internal_value[i];
  if (internal >= 0 && d_[internal] == Decision::Recompute) {
    auto f = steps_[i].fn;
    return checkpoint([f](const TensorList& x) -> TensorList { return {f(x)}; }, in.x)[0];
  }
  return steps_[i].fn(in.x);
}

// The boundary of a new output value: a recompute recipe (its sources, the producer, the generator
// before its run, the output's geometry), or the output itself, streamed when the plan moves it.
void ForwardRun::record_boundary(int64_t i, const StepInputs& in, const Tensor& y, const detail::RngState& rng) {
  const int64_t vout = new_value(i);
  auto b = std::make_shared<Boundary>();
  b->decision = d_[vout];
  b->moves = schedule_.moves[vout] != 0;
  if (b->decision == Decision::Recompute) {
    for (std::size_t k = 0; k < in.x.size(); ++k) {
      Source s;
      s.boundary = in.boundaries[k];
      if (!s.boundary) s.fixed = in.x[k].detach();
      s.sizes = in.x[k].sizes();
      s.strides = in.x[k].strides();
      s.offset = in.x[k].offset();
      s.dtype = in.x[k].dtype();
      b->sources.push_back(std::move(s));
    }
    b->producer = steps_[i].fn;
    b->producer_index = i;
    b->rng = rng;
    b->sizes = y.sizes();
    b->strides = y.strides();
    b->offset = y.offset();
    b->dtype = y.dtype();
    b->storage_bytes = y.storage().nbytes();
  } else {
    b->value = y.detach();
    if (b->moves) {
      b->streamed = std::make_shared<Streamed>();
      b->streamed->storage = y.storage();
      b->streamed->tiered = &tiered_;
      rs_->streamed[vout].push_back(b->streamed);
    }
  }
  live_[vout] = b;
}

// Routes the values saved before the step returned: its output by its boundary, its internals
// streamed (one move per storage) when the plan moves them. Nothing to do when its internals are
// recomputed (checkpoint saved only its inputs).
void ForwardRun::route_saved(int64_t i, const Tensor& y, const std::vector<std::shared_ptr<Packed>>& packs) {
  const int64_t internal = cg_.internal_value[i];
  if (internal >= 0 && d_[internal] == Decision::Recompute) return;
  const std::vector<char>& internal_saves = cg_.internal_saves[i];
  // (A step whose inputs need no gradient and that has no parameters records nothing.)
  STRATA_CHECK(packs.empty() || packs.size() == internal_saves.size(), "AutoChain: step ", i, " saved ", packs.size(),
               " values for backward, its profiling run saved ", internal_saves.size(),
               " (the step is not deterministic)");
  const int64_t vout = cg_.output_value[i];
  const Allocation* out_alloc = y.storage().allocation();
  const bool stream_internals = internal >= 0 && schedule_.moves[internal] != 0;
  std::map<const Allocation*, std::shared_ptr<Streamed>> internal_streams;
  for (std::size_t k = 0; k < packs.size(); ++k) {
    Packed& p = *packs[k];
    if (p.routed || !p.value.defined()) continue;
    const Allocation* a = p.value.storage().allocation();
    if (a == out_alloc && vout >= 0) {
      route(p, p.value, live_[vout]);
    } else if (internal_saves[k] != 0 && stream_internals) {
      std::shared_ptr<Streamed>& s = internal_streams[a];
      if (!s) {
        s = std::make_shared<Streamed>();
        s->storage = p.value.storage();
        s->tiered = &tiered_;
        rs_->streamed[internal].push_back(s);
      }
      p.streamed = s;
    }
  }
}

// Evicts what step i was the last forward use of; drops the boundaries and outputs no later step reads.
void ForwardRun::release(int64_t i) {
  for (int64_t v : schedule_.evict_after[i])
    for (auto& s : rs_->streamed[v]) s->start_evict();
  for (std::size_t v = 0; v < live_.size(); ++v)
    if (live_[v] && cg_.graph.values[v].last_forward_use <= i) live_[v].reset();
  for (int64_t j : steps_[i].inputs)
    if (j >= 0 && last_reader_[j] <= i) outs_[j] = Tensor();
}

}  // namespace

namespace detail {

MoveSchedule schedule_moves(const PlanGraph& graph, const std::vector<Decision>& decisions) {
  const std::vector<ValueWindow> w = value_windows(graph);
  const auto n = graph.values.size();
  MoveSchedule out;
  out.moves.assign(n, 0);
  out.evict_after.assign(graph.ops.size(), {});
  out.wait_evict_at.assign(static_cast<std::size_t>(graph.num_points()), {});
  out.prefetch_at.assign(static_cast<std::size_t>(graph.num_points()), {});
  for (std::size_t v = 0; v < n; ++v) {
    const WindowSpan& span = span_under(w[v], decisions);  // the hull or its own window
    if (decisions[v] != Decision::Stream || span.first < 0) continue;
    const int64_t gap = span.evict_until + 1;
    if (gap >= span.stream_from || gap > span.last) continue;  // resident throughout: nothing to move
    out.moves[v] = 1;
    out.evict_after[graph.values[v].last_forward_use].push_back(static_cast<int64_t>(v));
    out.wait_evict_at[gap].push_back(static_cast<int64_t>(v));
    out.prefetch_at[span.stream_from].push_back(static_cast<int64_t>(v));
  }
  return out;
}

}  // namespace detail

AutoChain::AutoChain(std::size_t budget_bytes, PlannerOptions options) : budget_(budget_bytes), planner_(options) {
  STRATA_CHECK(budget_bytes > 0, "AutoChain: the fast-tier budget is 0 bytes; expected a positive budget");
}

ChainGraph AutoChain::build_graph(const std::vector<StepFn>& steps, const Tensor& input,
                                  const std::vector<std::string>& names) {
  STRATA_CHECK(!steps.empty(), "AutoChain: the chain has no steps");
  return build_graph(chain_steps(steps, names), input);
}

ChainGraph AutoChain::build_graph(const std::vector<GraphStep>& steps, const Tensor& input) {
  check_steps(steps);
  memory::TieredMemory& tiered = tiered_or_throw("AutoChain");
  const std::vector<detail::StepProfile> prof =
      detail::profile_steps(steps, input, profiler_, tiered.manager().stats());
  detail::ChainGraphContext context;
  context.input_grad_bytes = input.requires_grad() && is_floating(input.dtype()) ? input.nbytes() : 0;
  context.bandwidth = copy_bandwidth();
  // The mover's copies take a core from the compute threads when those fill the machine, and the
  // step loses all of the copy's CPU time (Note [Auto planning model]: measured).
  const int threads = get_num_threads();
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  context.move_compute_share = threads >= cores ? 1.0 : 0.0;
  return detail::build_chain_graph(steps, prof, context);
}

Tensor AutoChain::run(const std::vector<StepFn>& steps, const Tensor& input, const std::vector<std::string>& names) {
  STRATA_CHECK(!steps.empty(), "AutoChain: the chain has no steps");
  return run_graph(chain_steps(steps, names), input);
}

std::shared_ptr<AutoChain::Entry> AutoChain::plan_for(const std::vector<GraphStep>& steps, const Tensor& input) {
  const std::string key = plan_key(steps, input);
  auto it = cache_.find(key);
  if (it != cache_.end()) return it->second;
  auto entry = std::make_shared<Entry>();
  entry->chain = build_graph(steps, input);
  entry->plan = planner_.plan(entry->chain.graph, budget_);
  entry->chain.graph.sync_prefetch = entry->plan.sync_prefetch;  // the variant the plan is for
  entry->chain.graph.sync_evict = entry->plan.sync_evict;
  entry->schedule = detail::schedule_moves(entry->chain.graph, entry->plan.decisions);
  ++plans_made_;
  return cache_.emplace(key, std::move(entry)).first->second;
}

Tensor AutoChain::run_graph(const std::vector<GraphStep>& steps, const Tensor& input) {
  check_steps(steps);
  if (!autograd::GradMode::is_enabled()) return run_without_grad(steps, input);
  memory::TieredMemory& tiered = tiered_or_throw("AutoChain");
  last_ = plan_for(steps, input);
  memory::MemoryStats& stats = tiered.manager().stats();
  stats.reset_peaks();
  baseline_bytes_ = stats.snapshot().fast.current_bytes;
  ForwardRun run(steps, input, last_->chain, last_->plan.decisions, last_->schedule, tiered);
  return run.run();
}

const ChainGraph* AutoChain::last_graph() const { return last_ ? &last_->chain : nullptr; }

const Plan* AutoChain::last_plan() const { return last_ ? &last_->plan : nullptr; }

std::size_t AutoChain::measured_peak_bytes() const {
  memory::TieredMemory& tiered = tiered_or_throw("AutoChain");
  const std::size_t peak = tiered.manager().stats().snapshot().fast.peak_bytes;
  return peak > baseline_bytes_ ? peak - baseline_bytes_ : 0;
}

std::string AutoChain::explain() const {
  STRATA_CHECK(last_ != nullptr, "AutoChain::explain: no plan yet (run the chain once first)");
  std::ostringstream os;
  os << remat::explain(last_->chain.graph, last_->plan);
  os << "measured fast-tier peak since the last forward: " << measured_peak_bytes() << " bytes (budget " << budget_
     << " bytes, predicted " << last_->plan.predicted.peak_bytes << " bytes)\n";
  return os.str();
}

}  // namespace strata::remat
