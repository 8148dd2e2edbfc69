#include "autograd/remat/plan_exec.h"

#include <algorithm>
#include <any>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <cstdlib>
#include <thread>
#include <utility>

#include "autograd/engine.h"
#include "autograd/grad_mode.h"
#include "autograd/node.h"
#include "autograd/saved_tensor.h"
#include "core/allocator.h"
#include "core/error.h"
#include "core/factories.h"
#include "core/threading.h"
#include "memory/tiered_memory.h"

namespace strata::remat {

namespace {

memory::TieredMemory& tiered_or_throw(const char* who) {
  Allocator& allocator = default_allocator();
  auto* tiered = dynamic_cast<memory::TieredMemory*>(&allocator);
  if (tiered == nullptr && allocator.name() == "tiered") tiered = &memory::tiered_memory();
  STRATA_CHECK(tiered != nullptr, who, ": the default allocator is \"", std::string(allocator.name()),
               "\", expected the tiered memory (\"tiered\"; unset STRATA_MEMORY=dram)");
  return *tiered;
}

std::string shape_signature(const Tensor& x) {
  std::ostringstream os;
  os << x.sizes() << ' ' << x.dtype() << (x.requires_grad() ? " rg" : "");
  return os.str();
}

Tensor fresh_input(const Tensor& x) {
  Tensor in = x.detach();
  if (is_floating(in.dtype())) in.set_requires_grad(true);
  return in;
}

bool differentiable(const Tensor& in, const Tensor& out) {
  return in.requires_grad() && autograd::gradient_edge(out).valid() && is_floating(out.dtype());
}

std::size_t above(std::size_t peak, std::size_t base) { return peak > base ? peak - base : 0; }

enum class SaveKind { Input, Output, Existing, Internal };

// What one isolated profiling of a step found (Note [Auto chain execution]).
struct StepProfile {
  int64_t view_of = -1;  // the input (position) whose storage the output shares, or -1
  std::vector<char> saves_input;  // per input position
  bool saves_output = false;
  std::vector<char> internal_saves;
  std::size_t internal_bytes = 0;
  std::size_t out_storage_bytes = 0, out_nbytes = 0;
  // Allocations of the forward of the output's storage size (memory::AllocationLog): the output
  // can be placed in the slow tier (memory::SlowPlacement, by size) only when it is the one.
  int64_t out_size_allocations = 0;
  std::size_t forward_peak = 0, nograd_peak = 0;
  // Backward growth, and per input whether the gradient the step returns for it is reusable
  // (Note [In-place backward]), when the incoming gradient is reusable ([0]) or held elsewhere ([1]).
  std::size_t backward_growth[2] = {0, 0};
  std::vector<char> grad_reusable[2];
  // Per input: another input position whose returned gradient is the same buffer (add hands one
  // tensor to both operands), or -1.
  std::vector<int64_t> grad_alias[2];
  std::vector<char> grad_input;  // per input: the step's backward returns a gradient for it (measured)
  // The leaves outside the step's inputs that its backward sends a gradient to (parameters), by
  // storage, with their gradients' bytes.
  std::vector<std::pair<const Allocation*, std::size_t>> parameters;
  bool has_backward = false;
  double forward_time = 0, backward_time = 0;
};

// The leaves that `out`'s graph reaches other than `inputs` (the step's parameters), by storage,
// with their bytes.
std::vector<std::pair<const Allocation*, std::size_t>> parameter_leaves(const Tensor& out, const TensorList& inputs) {
  std::set<const Allocation*> skip;
  for (const Tensor& t : inputs)
    if (t.defined()) skip.insert(t.storage().allocation());
  std::vector<std::pair<const Allocation*, std::size_t>> found;
  std::set<const autograd::Node*> seen;
  std::vector<const autograd::Node*> stack;
  if (out.grad_fn()) stack.push_back(out.grad_fn().get());
  while (!stack.empty()) {
    const autograd::Node* n = stack.back();
    stack.pop_back();
    if (!seen.insert(n).second) continue;
    if (const auto* acc = dynamic_cast<const autograd::AccumulateGrad*>(n)) {
      const Allocation* a = acc->leaf().storage().allocation();
      if (skip.insert(a).second) found.emplace_back(a, acc->leaf().nbytes());
      continue;
    }
    for (const autograd::Edge& e : n->next_edges())
      if (e.valid()) stack.push_back(e.node.get());
  }
  return found;
}

// Note [Auto graph execution]: a parameter read by several steps has its gradient pending in its
// AccumulateGrad node from the backward of its last reader to that of its first (inclusive).
void add_pending_parameter_gradients(const std::vector<StepProfile>& prof, std::vector<std::size_t>& pending) {
  std::map<const Allocation*, std::pair<int64_t, int64_t>> readers;  // first, last
  std::map<const Allocation*, std::size_t> bytes;
  for (int64_t i = 0; i < static_cast<int64_t>(prof.size()); ++i) {
    if (!prof[i].has_backward) continue;
    for (const auto& [a, n] : prof[i].parameters) {
      auto [it, fresh] = readers.try_emplace(a, i, i);
      if (!fresh) it->second.second = i;
      bytes[a] = n;
    }
  }
  for (const auto& [a, range] : readers)
    for (int64_t k = range.first; k < range.second; ++k) pending[k] += bytes[a];
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
    STRATA_CHECK(read[i] != 0, "AutoChain: no step reads the output of step ", i, " (only the last step's output may be unread)");
}

std::string step_name(const std::vector<GraphStep>& steps, int64_t i) {
  return steps[i].name.empty() ? "step " + std::to_string(i) : steps[i].name;
}

}  // namespace

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
  const auto m = static_cast<int64_t>(steps.size());
  memory::TieredMemory& tiered = tiered_or_throw("AutoChain");
  memory::MemoryStats& stats = tiered.manager().stats();
  auto current = [&] { return stats.snapshot().fast.current_bytes; };
  auto peak = [&] { return stats.snapshot().fast.peak_bytes; };

  // The last step reading each step's output (-1: none).
  std::vector<int64_t> last_reader(static_cast<std::size_t>(m), -1);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j : steps[i].inputs)
      if (j >= 0) last_reader[j] = std::max(last_reader[j], i);

  std::vector<StepProfile> prof(static_cast<std::size_t>(m));
  std::vector<std::string> sigs(static_cast<std::size_t>(m));
  const detail::RngState outer_rng = detail::RngState::current();
  // Run A's outputs (detached): their storages identify the boundary values; each is dropped after
  // its last reader has been profiled.
  std::vector<Tensor> outs(static_cast<std::size_t>(m));
  const Tensor graph_input = input.detach();
  for (int64_t i = 0; i < m; ++i) {
    StepProfile& P = prof[i];
    const GraphStep& step = steps[i];
    const std::size_t k_in = step.inputs.size();
    TensorList x;
    for (int64_t j : step.inputs) x.push_back(j < 0 ? graph_input : outs[j]);
    auto fresh = [&] {
      TensorList in;
      for (const Tensor& t : x) in.push_back(fresh_input(t));
      return in;
    };
    sigs[i] = step_name(steps, i) + " [";
    for (std::size_t k = 0; k < k_in; ++k) sigs[i] += (k ? ", " : "") + shape_signature(fresh_input(x[k]));
    sigs[i] += "]";
    const detail::RngState rng = detail::RngState::current();
    // Run A, recorded: the saved storages in order, the forward peak.
    std::vector<Storage> saved_a;
    std::set<const Allocation*> seen_b;
    bool recording_b = false;
    auto record = autograd::make_saved_tensor_hooks(
        [&](const Tensor& v) -> std::any {
          if (recording_b) {
            if (v.defined()) seen_b.insert(v.storage().allocation());
          } else {
            saved_a.push_back(v.defined() ? v.storage() : Storage());
          }
          return v;
        },
        [](std::any& p) -> Tensor { return std::any_cast<Tensor>(p); });
    TensorList in = fresh();
    Tensor out;
    stats.reset_peaks();
    std::size_t before = current();
    std::vector<std::size_t> allocated;
    {
      detail::RecomputeScope scope;  // modules put their buffers back (models/remat.h)
      autograd::EnableGradGuard grad_on;
      autograd::SavedTensorHooksGuard guard(record);
      memory::AllocationLog log;
      out = step.fn(in);
      allocated = log.sizes();
    }
    P.forward_peak = above(peak(), before);
    STRATA_CHECK(out.defined(), "AutoChain: step ", i, " returned an undefined tensor");
    P.parameters = parameter_leaves(out, in);
    P.out_size_allocations = std::count(allocated.begin(), allocated.end(), out.storage().nbytes());
    // Run B while A's storages are alive (no address reuse): a storage both runs saved existed
    // before the step (a parameter or buffer), not an activation.
    rng.restore();
    recording_b = true;
    {
      detail::RecomputeScope scope;
      autograd::EnableGradGuard grad_on;
      autograd::SavedTensorHooksGuard guard(record);
      Tensor again = step.fn(fresh());
    }
    std::vector<const Allocation*> in_allocs;
    for (const Tensor& t : x) in_allocs.push_back(t.storage().allocation());
    const Allocation* out_alloc = out.storage().allocation();
    for (std::size_t k = 0; k < k_in; ++k)
      if (P.view_of < 0 && out_alloc == in_allocs[k]) P.view_of = static_cast<int64_t>(k);
    P.out_storage_bytes = out.storage().nbytes();
    P.out_nbytes = out.nbytes();
    P.saves_input.assign(k_in, 0);
    std::set<const Allocation*> internal_seen;
    for (const Storage& s : saved_a) {
      const Allocation* a = s.allocation();
      const auto pos = std::find(in_allocs.begin(), in_allocs.end(), a);
      SaveKind kind = a == nullptr                ? SaveKind::Existing
                      : pos != in_allocs.end()    ? SaveKind::Input
                      : a == out_alloc            ? SaveKind::Output
                      : seen_b.count(a) != 0      ? SaveKind::Existing
                                                  : SaveKind::Internal;
      if (kind == SaveKind::Input) P.saves_input[pos - in_allocs.begin()] = 1;
      P.saves_output = P.saves_output || kind == SaveKind::Output;
      P.internal_saves.push_back(kind == SaveKind::Internal ? 1 : 0);
      if (kind == SaveKind::Internal && internal_seen.insert(a).second) P.internal_bytes += s.nbytes();
    }
    saved_a.clear();
    seen_b.clear();
    // Backward w.r.t. the inputs: the growth above everything the forward left (inputs, output,
    // saved values, seed).
    auto grad_inputs = [&](const TensorList& ins, const Tensor& y) {
      TensorList wrt;
      for (const Tensor& t : ins)
        if (differentiable(t, y)) wrt.push_back(t);
      return wrt;
    };
    const TensorList wrt = grad_inputs(in, out);
    P.has_backward = !wrt.empty();
    P.grad_input.assign(k_in, 0);  // set by the measurement below
    if (P.has_backward) {
      // Twice: the step's own backward may work in place on its incoming gradient when nothing
      // else holds that (Note [In-place backward]); which case applies is resolved per step below.
      // The second measurement runs on a fresh forward (retaining A's graph would keep saved
      // values alive that a backward frees as it goes).
      auto measure = [&](int held, const Tensor& y, const TensorList& ins) {
        const TensorList w = grad_inputs(ins, y);
        TensorList seeds;
        seeds.push_back(ones_like(y));
        const Tensor holder = held ? seeds[0] : Tensor();
        stats.reset_peaks();
        const std::size_t at = current();
        const TensorList g = autograd::grad_consuming({y}, w, std::move(seeds), false, true);
        P.backward_growth[held] = above(peak(), at);
        P.grad_reusable[held].assign(k_in, 0);
        P.grad_alias[held].assign(k_in, -1);
        std::vector<const Allocation*> buf(k_in, nullptr);
        for (std::size_t k = 0, n = 0; k < k_in; ++k) {
          if (!differentiable(ins[k], y)) continue;
          const Tensor& gk = g[n++];
          P.grad_reusable[held][k] = autograd::reusable_gradient(gk);
          // Undefined when the input is not reachable from the output (a conv's weight step and
          // the conv's input: it reads it, returns no gradient for it).
          P.grad_input[k] = gk.defined();
          if (!gk.defined()) continue;
          buf[k] = gk.storage().allocation();
          for (std::size_t a = 0; a < k; ++a)
            if (buf[a] == buf[k]) P.grad_alias[held][k] = static_cast<int64_t>(a), P.grad_alias[held][a] = static_cast<int64_t>(k);
        }
      };
      measure(0, out, in);
      rng.restore();
      TensorList xi = fresh();
      Tensor y;
      {
        detail::RecomputeScope scope;
        autograd::EnableGradGuard grad_on;
        y = step.fn(xi);
      }
      measure(1, y, xi);
    }
    // Run C, no-grad (what a recompute of the output runs).
    rng.restore();
    stats.reset_peaks();
    before = current();
    {
      detail::RecomputeScope scope;
      autograd::NoGradGuard no_grad;
      TensorList detached;
      for (const Tensor& t : x) detached.push_back(t.detach());
      Tensor y = step.fn(detached);
      P.nograd_peak = above(peak(), before);
    }
    rng.restore();
    // Times (cached by signature): forward, and forward + backward w.r.t. the inputs.
    P.forward_time = profiler_.time(sigs[i] + " fwd", [&] {
      detail::RecomputeScope scope;
      autograd::EnableGradGuard grad_on;
      Tensor y = step.fn(fresh());
      rng.restore();
    });
    const double both = profiler_.time(sigs[i] + " fwd+bwd", [&] {
      detail::RecomputeScope scope;
      autograd::EnableGradGuard grad_on;
      TensorList xi = fresh();
      Tensor y = step.fn(xi);
      const TensorList w = grad_inputs(xi, y);
      if (!w.empty()) autograd::grad({y}, w, {ones_like(y)}, false, true);
      rng.restore();
    });
    P.backward_time = std::max(0.0, both - P.forward_time);
    rng.restore();
    // Run A's output identifies this step's boundary value; inputs nobody reads later are dropped.
    outs[i] = out.detach();
    for (int64_t j : step.inputs)
      if (j >= 0 && last_reader[j] <= i) outs[j] = Tensor();
  }
  outer_rng.restore();
  outs.clear();

  // ---- the planning graph ----
  ChainGraph cg;
  PlanGraph& g = cg.graph;
  g.bandwidth = copy_bandwidth();
  g.timed_moves = true;  // copies overlap the points their times need (Note [Auto planning model])
  {
    // The mover's copies take a core from the compute threads when those fill the machine, and
    // the step loses all of the copy's CPU time (Note [Auto planning model]: measured).
    const int threads = get_num_threads();
    const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    g.move_compute_share = threads >= cores ? 1.0 : 0.0;
  }
  cg.input_values.assign(static_cast<std::size_t>(m), {});
  cg.output_value.assign(static_cast<std::size_t>(m), -1);
  cg.internal_value.assign(static_cast<std::size_t>(m), -1);
  auto value_of = [&](int64_t j) { return j < 0 ? int64_t{-1} : cg.output_value[j]; };
  // Values in order of their producers: "int i" and the boundary value of step i's output.
  std::vector<char> boundary;  // per value
  for (int64_t i = 0; i < m; ++i) {
    const StepProfile& P = prof[i];
    std::vector<int64_t> deps;
    for (int64_t j : steps[i].inputs) {
      cg.input_values[i].push_back(value_of(j));
      const int64_t v = value_of(j);
      if (v >= 0 && std::find(deps.begin(), deps.end(), v) == deps.end()) deps.push_back(v);
    }
    if (!P.internal_saves.empty() && P.internal_bytes > 0) {
      PlanValue v;
      v.name = "int " + std::to_string(i);
      v.bytes = P.internal_bytes;
      v.producer = v.last_forward_use = v.backward_use = i;
      v.deps = deps;
      v.recompute_workspace_bytes = above(P.forward_peak, P.internal_bytes);
      cg.internal_value[i] = static_cast<int64_t>(g.values.size());
      g.values.push_back(v);
      boundary.push_back(0);
    }
    if (i + 1 < m) {
      if (P.view_of >= 0) {
        cg.output_value[i] = cg.input_values[i][P.view_of];  // a view continues its input's value
      } else {
        PlanValue v;
        v.name = "x " + std::to_string(i + 1);
        v.bytes = P.out_storage_bytes;
        v.producer = i;
        v.last_forward_use = i + 1;
        v.deps = deps;
        v.recompute_workspace_bytes = above(P.nograd_peak, P.out_storage_bytes);
        // The executor can place the output in the slow tier (memory::SlowPlacement, which goes
        // by size) when the step allocates nothing else of its size.
        v.slow_ok = P.out_size_allocations == 1;
        v.forward_reads = 0;  // counted below
        cg.output_value[i] = static_cast<int64_t>(g.values.size());
        g.values.push_back(v);
        boundary.push_back(1);
      }
    }
  }
  // Boundary values: last forward use and backward uses (steps saving them as input or output).
  std::vector<std::vector<int64_t>> uses(g.values.size());
  for (int64_t i = 0; i < m; ++i) {
    const StepProfile& P = prof[i];
    for (std::size_t k = 0; k < cg.input_values[i].size(); ++k) {
      const int64_t vin = cg.input_values[i][k];
      if (vin < 0) continue;
      g.values[vin].last_forward_use = std::max(g.values[vin].last_forward_use, i);
      ++g.values[vin].forward_reads;
      if (P.saves_input[k]) uses[vin].push_back(i);
    }
    if (P.saves_output && cg.output_value[i] >= 0) uses[cg.output_value[i]].push_back(i);
    cg.internal_saves.push_back(P.internal_saves);
  }
  for (std::size_t v = 0; v < g.values.size(); ++v) {
    if (!boundary[v]) continue;
    std::sort(uses[v].begin(), uses[v].end());
    uses[v].erase(std::unique(uses[v].begin(), uses[v].end()), uses[v].end());
    g.values[v].backward_use = uses[v].empty() ? -1 : uses[v].front();
    g.values[v].extra_backward_uses.assign(uses[v].begin() + (uses[v].empty() ? 0 : 1), uses[v].end());
  }
  // Ops. The graph's output is the caller's: live at the last forward point and, held by the
  // caller, through the whole backward. A step output read by a later step than the next one has
  // its gradient pending from that reader's backward to its own (Note [Auto graph execution]):
  // the backward points strictly between hold it, whatever the plan.
  const std::size_t held_output = prof[m - 1].view_of >= 0 ? 0 : prof[m - 1].out_storage_bytes;
  // What the caller holds through the backward besides the output (a scalar loss and its gradient,
  // whatever their dtype) counts against the budget too (Note [Auto chain execution]).
  constexpr std::size_t kCallerLossBytes = 64;
  // Only readers whose backward returns a gradient for a value start its gradient (a conv's weight
  // step reads the conv's input but returns none for it: Note [Conv backward in two steps]).
  std::vector<int64_t> last_grad_reader(static_cast<std::size_t>(m), -1);
  int64_t input_first_grad = m, input_last_grad = -1;
  for (int64_t r = 0; r < m; ++r)
    for (std::size_t k = 0; k < steps[r].inputs.size(); ++k) {
      if (!prof[r].has_backward || !prof[r].grad_input[k]) continue;
      const int64_t j = steps[r].inputs[k];
      if (j >= 0) {
        last_grad_reader[j] = std::max(last_grad_reader[j], r);
      } else {
        input_first_grad = std::min(input_first_grad, r);
        input_last_grad = std::max(input_last_grad, r);
      }
    }
  std::vector<std::size_t> pending(static_cast<std::size_t>(m), 0);
  for (int64_t j = 0; j + 1 < m; ++j)
    if (prof[j].has_backward)
      for (int64_t k = j + 1; k < last_grad_reader[j]; ++k) pending[k] += prof[j].out_nbytes;
  if (input.requires_grad() && is_floating(input.dtype()))
    for (int64_t k = input_first_grad + 1; k < input_last_grad; ++k) pending[k] += input.nbytes();
  add_pending_parameter_gradients(prof, pending);
  // Whether each step's incoming gradient is reusable in the whole backward (Note [In-place
  // backward]), so its backward works in place: one contribution decides by what its reader's
  // backward returned (itself given a reusable gradient or not), two or more are summed into one
  // the engine owns. The last step's comes from the caller: assumed held (the larger growth).
  std::vector<char> incoming_reusable(static_cast<std::size_t>(m), 0);
  std::vector<int> contributions_to(static_cast<std::size_t>(m), 0);
  for (int64_t i = m - 2; i >= 0; --i) {
    int contributions = 0;
    bool reusable = false;
    for (int64_t r = i + 1; r < m; ++r) {
      const StepProfile& R = prof[r];
      if (!R.has_backward) continue;
      const std::vector<char>& ret = R.grad_reusable[incoming_reusable[r] ? 0 : 1];
      for (std::size_t k = 0; k < steps[r].inputs.size(); ++k)
        if (steps[r].inputs[k] == i && R.grad_input[k]) {
          ++contributions;
          reusable = ret[k] != 0;
        }
    }
    incoming_reusable[i] = contributions >= 2 || (contributions == 1 && reusable);
    contributions_to[i] = contributions;
  }
  // A pending gradient that is the very buffer the step it is pending across receives (the last
  // reader r handed one tensor to both the pending input j and the input a, and a's gradient has
  // no other contribution; no reader of j between a and r added to it) is counted once there.
  for (int64_t j = 0; j + 1 < m; ++j) {
    const int64_t r = last_grad_reader[j];
    if (!prof[j].has_backward || r < 0) continue;
    const std::vector<int64_t>& alias = prof[r].grad_alias[incoming_reusable[r] ? 0 : 1];
    for (std::size_t kb = 0; kb < steps[r].inputs.size(); ++kb) {
      if (steps[r].inputs[kb] != j || alias[kb] < 0) continue;
      const int64_t a = steps[r].inputs[static_cast<std::size_t>(alias[kb])];
      if (a <= j || a >= r || contributions_to[a] != 1) continue;
      bool added_between = false;
      for (int64_t q = a + 1; q < r; ++q)
        for (std::size_t k = 0; k < steps[q].inputs.size(); ++k)
          added_between = added_between || (steps[q].inputs[k] == j && prof[q].grad_input[k]);
      if (!added_between && pending[a] >= prof[j].out_nbytes) pending[a] -= prof[j].out_nbytes;
      break;
    }
  }
  for (int64_t i = 0; i < m; ++i) {
    const StepProfile& P = prof[i];
    PlanOp op;
    op.name = step_name(steps, i);
    op.signature = sigs[i];
    op.forward_time = P.forward_time;
    op.backward_time = P.backward_time;
    const std::size_t output_value_bytes = (i + 1 < m && P.view_of < 0) ? P.out_storage_bytes : 0;
    op.workspace_bytes = above(P.forward_peak, output_value_bytes + P.internal_bytes);
    const std::size_t growth = P.backward_growth[incoming_reusable[i] ? 0 : 1];
    op.backward_workspace_bytes = (P.has_backward ? P.out_nbytes + growth : 0) + held_output + kCallerLossBytes + pending[i];
    g.ops.push_back(op);
  }
  g.validate();
  return cg;
}

Tensor AutoChain::run(const std::vector<StepFn>& steps, const Tensor& input, const std::vector<std::string>& names) {
  STRATA_CHECK(!steps.empty(), "AutoChain: the chain has no steps");
  return run_graph(chain_steps(steps, names), input);
}

Tensor AutoChain::run_graph(const std::vector<GraphStep>& steps, const Tensor& input) {
  check_steps(steps);
  const auto m = static_cast<int64_t>(steps.size());
  if (!autograd::GradMode::is_enabled()) {
    std::vector<Tensor> outs(static_cast<std::size_t>(m));
    for (int64_t i = 0; i < m; ++i) {
      TensorList in;
      for (int64_t j : steps[i].inputs) in.push_back(j < 0 ? input : outs[j]);
      outs[i] = steps[i].fn(in);
    }
    return outs[m - 1];
  }
  memory::TieredMemory& tiered = tiered_or_throw("AutoChain");
  std::string key = shape_signature(input) + "|" + std::to_string(m);
  for (int64_t i = 0; i < m; ++i) {
    key += "|" + steps[i].name + "(";
    for (int64_t j : steps[i].inputs) key += std::to_string(j) + ",";
    key += ")";
  }
  auto it = cache_.find(key);
  if (it == cache_.end()) {
    auto entry = std::make_shared<Entry>();
    entry->chain = build_graph(steps, input);
    entry->plan = planner_.plan(entry->chain.graph, budget_);
    entry->chain.graph.sync_prefetch = entry->plan.sync_prefetch;  // the variant the plan is for
    entry->chain.graph.sync_evict = entry->plan.sync_evict;
    // The schedule of the moves (Note [Auto chain execution]).
    const PlanGraph& g = entry->chain.graph;
    const std::vector<ValueWindow> w = value_windows(g);
    const auto n = g.values.size();
    const int64_t P = g.num_points();
    entry->moves.assign(n, 0);
    entry->evict_after.assign(static_cast<std::size_t>(m), {});
    entry->wait_evict_at.assign(static_cast<std::size_t>(P), {});
    entry->prefetch_at.assign(static_cast<std::size_t>(P), {});
    for (std::size_t v = 0; v < n; ++v) {
      const WindowSpan& span = span_under(w[v], entry->plan.decisions);  // the hull or its own window
      if (entry->plan.decisions[v] != Decision::Stream || span.first < 0) continue;
      const int64_t gap = span.evict_until + 1;
      if (gap >= span.stream_from || gap > span.last) continue;  // resident throughout: nothing to move
      entry->moves[v] = 1;
      entry->evict_after[g.values[v].last_forward_use].push_back(static_cast<int64_t>(v));
      entry->wait_evict_at[gap].push_back(static_cast<int64_t>(v));
      entry->prefetch_at[span.stream_from].push_back(static_cast<int64_t>(v));
    }
    ++plans_made_;
    it = cache_.emplace(key, std::move(entry)).first;
  }
  last_ = it->second;
  const Entry& entry = *last_;
  const ChainGraph& cg = entry.chain;
  const std::vector<Decision>& d = entry.plan.decisions;
  const auto n = cg.graph.values.size();

  memory::MemoryStats& stats = tiered.manager().stats();
  stats.reset_peaks();
  baseline_bytes_ = stats.snapshot().fast.current_bytes;

  std::vector<int64_t> last_reader(static_cast<std::size_t>(m), -1);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j : steps[i].inputs)
      if (j >= 0) last_reader[j] = std::max(last_reader[j], i);

  auto rs = std::make_shared<RunState>();
  rs->streamed.assign(n, {});
  rs->wait_evict_at = entry.wait_evict_at;
  rs->prefetch_at = entry.prefetch_at;
  // Boundary values alive in the forward (released after their last forward use: from then on
  // only the packed values and the recompute recipes of later values hold them), and the steps'
  // outputs (released after their last reader).
  std::vector<std::shared_ptr<Boundary>> live(n);
  std::vector<Tensor> outs(static_cast<std::size_t>(m));
  for (int64_t i = 0; i < m; ++i) {
    rs->at_point(i);
    const GraphStep& step = steps[i];
    const detail::RngState rng = detail::RngState::current();
    TensorList x;
    std::vector<std::shared_ptr<Boundary>> in_boundaries;
    std::vector<const Allocation*> in_allocs;
    for (std::size_t k = 0; k < step.inputs.size(); ++k) {
      const int64_t j = step.inputs[k];
      x.push_back(j < 0 ? input : outs[j]);
      const int64_t vin = cg.input_values[i][k];
      in_boundaries.push_back(vin >= 0 ? live[vin] : nullptr);
      in_allocs.push_back(x.back().storage().allocation());
    }
    const int64_t internal = cg.internal_value[i];
    const Decision internal_decision = internal >= 0 ? d[internal] : Decision::Keep;
    std::vector<std::shared_ptr<Packed>> packs;
    auto hooks = autograd::make_saved_tensor_hooks(
        [&](const Tensor& v) -> std::any {
          auto p = std::make_shared<Packed>();
          packs.push_back(p);
          const auto pos = v.defined() ? std::find(in_allocs.begin(), in_allocs.end(), v.storage().allocation())
                                       : in_allocs.end();
          if (pos != in_allocs.end()) route(*p, v, in_boundaries[pos - in_allocs.begin()]);
          else p->value = v;  // routed once the step returned (its output, internal, or existing)
          return p;
        },
        [](std::any& packed) -> Tensor { return unpack(std::any_cast<std::shared_ptr<Packed>>(packed)); });
    // The output's value (a new one unless the step returns a view of an input's).
    const int64_t vout = cg.output_value[i];
    const bool new_value =
        vout >= 0 && std::find(cg.input_values[i].begin(), cg.input_values[i].end(), vout) == cg.input_values[i].end();
    Tensor y;
    {
      autograd::SavedTensorHooksGuard guard(hooks);
      // Placed in the slow tier: the step allocates its output there (Note [Slow placement]).
      std::optional<memory::SlowPlacement> placement;
      if (new_value && d[vout] == Decision::Slow) placement.emplace(cg.graph.values[vout].bytes);
      if (internal_decision == Decision::Recompute) {
        auto f = step.fn;
        y = checkpoint([f](const TensorList& in) -> TensorList { return {f(in)}; }, x)[0];
      } else {
        y = step.fn(x);
      }
    }
    STRATA_CHECK(y.defined(), "AutoChain: step ", i, " returned an undefined tensor");
    if (new_value) {
      auto b = std::make_shared<Boundary>();
      b->decision = d[vout];
      b->moves = entry.moves[vout] != 0;
      if (b->decision == Decision::Recompute) {
        for (std::size_t k = 0; k < x.size(); ++k) {
          Source s;
          s.boundary = in_boundaries[k];
          if (!s.boundary) s.fixed = x[k].detach();
          s.sizes = x[k].sizes();
          s.strides = x[k].strides();
          s.offset = x[k].offset();
          s.dtype = x[k].dtype();
          b->sources.push_back(std::move(s));
        }
        b->producer = step.fn;
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
          b->streamed->tiered = &tiered;
          rs->streamed[vout].push_back(b->streamed);
        }
      }
      live[vout] = b;
    }
    // Route the values saved before the step returned.
    if (internal_decision != Decision::Recompute) {
      const std::vector<char>& internal_saves = cg.internal_saves[i];
      // (A step whose inputs need no gradient and that has no parameters records nothing.)
      STRATA_CHECK(packs.empty() || packs.size() == internal_saves.size(), "AutoChain: step ", i, " saved ",
                   packs.size(), " values for backward, its profiling run saved ", internal_saves.size(),
                   " (the step is not deterministic)");
      const Allocation* out_alloc = y.storage().allocation();
      const bool stream_internals = internal >= 0 && entry.moves[internal] != 0;
      std::map<const Allocation*, std::shared_ptr<Streamed>> internal_streams;
      for (std::size_t k = 0; k < packs.size(); ++k) {
        Packed& p = *packs[k];
        if (p.routed || !p.value.defined()) continue;
        const Allocation* a = p.value.storage().allocation();
        if (a == out_alloc && vout >= 0) {
          route(p, p.value, live[vout]);
        } else if (internal_saves[k] != 0 && stream_internals) {
          std::shared_ptr<Streamed>& s = internal_streams[a];
          if (!s) {
            s = std::make_shared<Streamed>();
            s->storage = p.value.storage();
            s->tiered = &tiered;
            rs->streamed[internal].push_back(s);
          }
          p.streamed = s;
        }
      }
    }
    packs.clear();
    x.clear();
    // Evict what this step was the last forward use of; drop outputs no later step reads.
    for (int64_t v : entry.evict_after[i])
      for (auto& s : rs->streamed[v]) s->start_evict();
    for (std::size_t v = 0; v < n; ++v)
      if (live[v] && cg.graph.values[v].last_forward_use <= i) live[v].reset();
    for (int64_t j : step.inputs)
      if (j >= 0 && last_reader[j] <= i) outs[j] = Tensor();
    // The backward of step i is program point 2m-1-i.
    const int64_t point = 2 * m - 1 - i;
    outs[i] = with_marker(y, [rs, point] { rs->at_point(point); });
  }
  // The evictions due at the backward's first point are waited for now (before the caller's loss);
  // its prefetches are issued by the last step's marker.
  rs->wait_evictions(m);
  return outs[m - 1];
}

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
