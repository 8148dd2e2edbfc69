#include "autograd/remat/plan_exec.h"

#include <any>
#include <set>
#include <sstream>
#include <utility>

#include "autograd/engine.h"
#include "autograd/grad_mode.h"
#include "autograd/saved_tensor.h"
#include "core/allocator.h"
#include "core/error.h"
#include "core/factories.h"
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

// ---- execution state (Note [Auto chain execution]) ---------------------------------------------

// A value moved to the slow tier after the forward and brought back before its backward use.
struct Streamed {
  Tensor value;
  memory::TieredMemory* tiered = nullptr;
  memory::MoveHandle evict, prefetch;
  bool prefetch_issued = false;
  void start_prefetch() {
    if (prefetch_issued) return;
    prefetch_issued = true;
    prefetch = tiered->prefetch_async(value.storage());
  }
  Tensor get() {
    start_prefetch();
    prefetch.wait();
    return value;
  }
};

// Step i's input x_i under its decision.
struct Boundary {
  Decision decision = Decision::Keep;
  Tensor value;                         // Keep
  std::shared_ptr<Streamed> streamed;   // Stream
  std::shared_ptr<Boundary> previous;   // Recompute: x_{i-1}'s boundary (null: the chain input)
  Tensor chain_input;                   // Recompute of x_1
  StepFn step;                          // Recompute: step i-1
  detail::RngState rng;                 // Recompute: the generator before step i-1's first run

  Tensor get() {
    switch (decision) {
      case Decision::Keep: return value;
      case Decision::Stream: return streamed->get();
      case Decision::Recompute: {
        Tensor prev = previous ? previous->get() : chain_input;
        const detail::RngState outer = detail::RngState::current();
        rng.restore();
        Tensor out;
        {
          detail::RecomputeScope scope;
          autograd::NoGradGuard no_grad;
          out = step(prev);
        }
        outer.restore();
        return out;
      }
    }
    return Tensor();
  }
};

// What the per-step hooks pack.
struct Packed {
  std::shared_ptr<Boundary> boundary;   // a value sharing x_i's storage
  Tensor kept;                          // an internal kept value
  std::shared_ptr<Streamed> streamed;   // an internal streamed value
  std::shared_ptr<std::vector<std::shared_ptr<Streamed>>> ahead;  // step i-1's streamed values
};

}  // namespace

AutoChain::AutoChain(std::size_t budget_bytes, PlannerOptions options) : budget_(budget_bytes), planner_(options) {
  STRATA_CHECK(budget_bytes > 0, "AutoChain: the fast-tier budget is 0 bytes; expected a positive budget");
}

ChainGraph AutoChain::build_graph(const std::vector<StepFn>& steps, const Tensor& input,
                                  const std::vector<std::string>& names) {
  const auto m = static_cast<int64_t>(steps.size());
  STRATA_CHECK(m >= 1, "AutoChain: the chain has no steps");
  STRATA_CHECK(names.empty() || names.size() == steps.size(), "AutoChain: ", names.size(), " step names for ", m,
               " steps");
  for (int64_t i = 0; i < m; ++i) STRATA_CHECK(static_cast<bool>(steps[i]), "AutoChain: step ", i, " is empty");
  memory::TieredMemory& tiered = tiered_or_throw("AutoChain");
  memory::MemoryStats& stats = tiered.manager().stats();

  ChainGraph cg;
  cg.graph.bandwidth = copy_bandwidth();
  cg.input_value.assign(static_cast<std::size_t>(m), -1);
  cg.internal_value.assign(static_cast<std::size_t>(m), -1);
  const detail::RngState outer_rng = detail::RngState::current();
  Tensor x = input.detach();
  for (int64_t i = 0; i < m; ++i) {
    const std::string sig =
        (names.empty() ? "step " + std::to_string(i) : names[i]) + " [" + shape_signature(fresh_input(x)) + "]";
    const detail::RngState rng = detail::RngState::current();
    // One recorded run: the saved values' storages, the output, and the fast-tier peak.
    std::vector<Storage> saved;
    std::set<const void*> seen;
    auto record = autograd::make_saved_tensor_hooks(
        [&](const Tensor& v) -> std::any {
          if (v.defined() && seen.insert(v.storage().allocation()).second) saved.push_back(v.storage());
          return v;
        },
        [](std::any& p) -> Tensor { return std::any_cast<Tensor>(p); });
    Tensor in = fresh_input(x);
    Tensor out;
    stats.reset_peaks();
    const std::size_t before = stats.snapshot().fast.current_bytes;
    {
      detail::RecomputeScope scope;  // modules put their buffers back (models/remat.h)
      autograd::EnableGradGuard grad_on;
      autograd::SavedTensorHooksGuard guard(record);
      out = steps[i](in);
    }
    STRATA_CHECK(out.defined(), "AutoChain: step ", i, " returned an undefined tensor");
    if (in.requires_grad() && autograd::gradient_edge(out).valid() && is_floating(out.dtype()))
      autograd::grad({out}, {in}, {ones_like(out)}, false, true);
    const std::size_t peak = stats.snapshot().fast.peak_bytes;
    // A second recorded run (the first one's storages still alive, so no address is reused): a
    // storage saved by both runs existed before the step (a parameter or buffer), not an activation.
    std::vector<Storage> first_run;
    first_run.swap(saved);
    std::set<const void*> first_seen;
    first_seen.swap(seen);
    rng.restore();
    {
      detail::RecomputeScope scope;
      autograd::EnableGradGuard grad_on;
      autograd::SavedTensorHooksGuard guard(record);
      Tensor again = steps[i](fresh_input(x));
    }
    std::size_t input_bytes = 0, internal_bytes = 0;
    for (const Storage& s : first_run) {
      if (s.allocation() == x.storage().allocation()) input_bytes = s.nbytes();
      else if (seen.count(s.allocation()) == 0) internal_bytes += s.nbytes();
    }
    saved.clear();
    first_run.clear();
    rng.restore();
    // Times (cached by signature): forward, and forward + backward w.r.t. the input.
    const double t_fwd = profiler_.time(sig + " fwd", [&] {
      detail::RecomputeScope scope;
      autograd::EnableGradGuard grad_on;
      Tensor y = steps[i](fresh_input(x));
      rng.restore();
    });
    const double t_both = profiler_.time(sig + " fwd+bwd", [&] {
      detail::RecomputeScope scope;
      autograd::EnableGradGuard grad_on;
      Tensor xi = fresh_input(x);
      Tensor y = steps[i](xi);
      if (xi.requires_grad() && autograd::gradient_edge(y).valid() && is_floating(y.dtype()))
        autograd::grad({y}, {xi}, {ones_like(y)}, false, true);
      rng.restore();
    });
    PlanOp op;
    op.name = names.empty() ? "step " + std::to_string(i) : names[i];
    op.signature = sig;
    op.forward_time = t_fwd;
    op.backward_time = std::max(0.0, t_both - t_fwd);
    const std::size_t run_peak = peak > before ? peak - before : 0;
    op.workspace_bytes = run_peak > internal_bytes ? run_peak - internal_bytes : 0;
    cg.graph.ops.push_back(op);
    if (i >= 1) {
      PlanValue v;
      v.name = "in " + std::to_string(i);
      v.bytes = x.storage().nbytes();
      v.producer = i - 1;
      v.last_forward_use = i;
      v.backward_use = i;
      if (i >= 2) v.deps.push_back(cg.input_value[i - 1]);
      cg.input_value[i] = static_cast<int64_t>(cg.graph.values.size());
      cg.graph.values.push_back(v);
    }
    if (internal_bytes > 0) {
      PlanValue v;
      v.name = "int " + std::to_string(i);
      v.bytes = internal_bytes;
      v.producer = v.last_forward_use = v.backward_use = i;
      if (i >= 1) v.deps.push_back(cg.input_value[i]);
      cg.internal_value[i] = static_cast<int64_t>(cg.graph.values.size());
      cg.graph.values.push_back(v);
    }
    (void)input_bytes;
    x = out.detach();
  }
  outer_rng.restore();
  cg.graph.validate();
  return cg;
}

Tensor AutoChain::run(const std::vector<StepFn>& steps, const Tensor& input, const std::vector<std::string>& names) {
  const auto m = static_cast<int64_t>(steps.size());
  STRATA_CHECK(m >= 1, "AutoChain: the chain has no steps");
  for (int64_t i = 0; i < m; ++i) STRATA_CHECK(static_cast<bool>(steps[i]), "AutoChain: step ", i, " is empty");
  if (!autograd::GradMode::is_enabled()) {
    Tensor x = input;
    for (const StepFn& f : steps) x = f(x);
    return x;
  }
  memory::TieredMemory& tiered = tiered_or_throw("AutoChain");
  std::string key = shape_signature(input) + "|" + std::to_string(m);
  for (const std::string& n : names) key += "|" + n;
  auto it = cache_.find(key);
  if (it == cache_.end()) {
    auto entry = std::make_shared<Entry>();
    entry->chain = build_graph(steps, input, names);
    entry->plan = planner_.plan(entry->chain.graph, budget_);
    ++plans_made_;
    it = cache_.emplace(key, std::move(entry)).first;
  }
  last_ = it->second;
  const ChainGraph& cg = last_->chain;
  const std::vector<Decision>& d = last_->plan.decisions;

  memory::MemoryStats& stats = tiered.manager().stats();
  stats.reset_peaks();
  baseline_bytes_ = stats.snapshot().fast.current_bytes;

  Tensor x = input;
  std::shared_ptr<Boundary> previous;  // x_{i-1}'s boundary
  detail::RngState previous_rng;       // the generator before step i-1 ran
  auto ahead = std::make_shared<std::vector<std::shared_ptr<Streamed>>>();  // step i-1's streamed values
  for (int64_t i = 0; i < m; ++i) {
    const detail::RngState rng = detail::RngState::current();
    std::shared_ptr<Boundary> boundary;
    if (i >= 1) {
      boundary = std::make_shared<Boundary>();
      boundary->decision = d[cg.input_value[i]];
      if (boundary->decision == Decision::Recompute) {
        boundary->previous = previous;
        if (!previous) boundary->chain_input = input.detach();
        boundary->step = steps[i - 1];
        boundary->rng = previous_rng;
      }
    }
    const int64_t internal = cg.internal_value[i];
    const Decision internal_decision = internal >= 0 ? d[internal] : Decision::Keep;
    auto streamed_here = std::make_shared<std::vector<std::shared_ptr<Streamed>>>();
    const Allocation* input_storage = x.storage().allocation();
    auto hooks = autograd::make_saved_tensor_hooks(
        [&, ahead_of_this = ahead](const Tensor& v) -> std::any {
          auto p = std::make_shared<Packed>();
          p->ahead = ahead_of_this;
          if (boundary && v.defined() && v.storage().allocation() == input_storage) {
            if (boundary->decision == Decision::Keep && !boundary->value.defined()) boundary->value = v;
            if (boundary->decision == Decision::Stream && !boundary->streamed) {
              boundary->streamed = std::make_shared<Streamed>();
              boundary->streamed->value = v;
              boundary->streamed->tiered = &tiered;
            }
            p->boundary = boundary;
            // Recompute of x_i: the packed form holds the recipe, not the value.
          } else if (internal_decision == Decision::Stream && v.defined()) {
            auto s = std::make_shared<Streamed>();
            s->value = v;
            s->tiered = &tiered;
            streamed_here->push_back(s);
            p->streamed = s;
          } else {
            p->kept = v;
          }
          return p;
        },
        [](std::any& packed) -> Tensor {
          auto p = std::any_cast<std::shared_ptr<Packed>>(packed);
          // Backward of this step began: bring the previous step's streamed values back.
          for (auto& s : *p->ahead) s->start_prefetch();
          if (p->boundary) {
            return p->boundary->get();
          }
          if (p->streamed) return p->streamed->get();
          return p->kept;
        });
    // Boundary "ahead" lists: step i's hooks prefetch what step i-1 streamed (boundary included).
    Tensor y;
    {
      autograd::SavedTensorHooksGuard guard(hooks);
      if (internal_decision == Decision::Recompute) {
        StepFn f = steps[i];
        y = checkpoint([f](const TensorList& in) -> TensorList { return {f(in[0])}; }, {x})[0];
      } else {
        y = steps[i](x);
      }
    }
    // Evict what this step streamed now that its forward is done (not the output's storage).
    const Allocation* out_storage = y.defined() ? y.storage().allocation() : nullptr;
    std::vector<std::shared_ptr<Streamed>> to_evict = *streamed_here;
    if (boundary && boundary->streamed) to_evict.push_back(boundary->streamed);
    auto next_ahead = std::make_shared<std::vector<std::shared_ptr<Streamed>>>();
    for (auto& s : to_evict) {
      if (s->value.storage().allocation() == out_storage) continue;
      s->evict = tiered.evict_async(s->value.storage());
      next_ahead->push_back(s);
    }
    ahead = next_ahead;
    previous_rng = rng;
    previous = boundary;
    x = y;
  }
  return x;
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
