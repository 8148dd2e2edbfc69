#include "autograd/remat/chain.h"

#include <cmath>
#include <map>
#include <unordered_set>

#include "autograd/engine.h"
#include "autograd/remat/plan_exec.h"
#include "autograd/remat/revolve.h"
#include "core/error.h"
#include "core/factories.h"

namespace strata::remat {

ChainPolicy ChainPolicy::store_all() { return {}; }
ChainPolicy ChainPolicy::recompute_all() { return {RematPolicy::RecomputeAll, 0, 0, true, nullptr}; }
ChainPolicy ChainPolicy::every_k(int64_t k) { return {RematPolicy::EveryK, k, 0, true, nullptr}; }
ChainPolicy ChainPolicy::sqrt_n() { return {RematPolicy::SqrtN, 0, 0, true, nullptr}; }
ChainPolicy ChainPolicy::revolve(int64_t snapshots) { return {RematPolicy::Revolve, 0, snapshots, true, nullptr}; }
ChainPolicy ChainPolicy::auto_budget(std::size_t budget_bytes, AutoGranularity granularity, PlannerOptions options) {
  ChainPolicy p;
  p.kind = RematPolicy::Auto;
  p.auto_chain = std::make_shared<AutoChain>(budget_bytes, options);
  p.granularity = granularity;
  return p;
}

std::string ChainPolicy::to_string() const {
  switch (kind) {
    case RematPolicy::StoreAll: return "StoreAll";
    case RematPolicy::RecomputeAll: return "RecomputeAll";
    case RematPolicy::EveryK: return "EveryK(" + std::to_string(k) + ")";
    case RematPolicy::SqrtN: return "SqrtN";
    case RematPolicy::Revolve: return "Revolve(" + std::to_string(snapshots) + ")";
    case RematPolicy::Auto:
      return "Auto(" + (auto_chain ? std::to_string(auto_chain->budget_bytes()) : std::string("?")) + " bytes" +
             (granularity == AutoGranularity::Step ? ", per step)" : ")");
  }
  return "?";
}

namespace {

Tensor run_plain(const std::vector<StepFn>& steps, int64_t from, int64_t to, Tensor x) {
  for (int64_t i = from; i < to; ++i) x = steps[i](x);
  return x;
}

Tensor run_segments(const std::vector<StepFn>& steps, int64_t k, const Tensor& input, bool preserve_rng) {
  const auto n = static_cast<int64_t>(steps.size());
  Tensor x = input;
  for (int64_t a = 0; a < n; a += k) {
    const int64_t b = std::min(n, a + k);
    // Each segment keeps its own closures: it may be re-run after the caller's vector is gone.
    std::vector<StepFn> part(steps.begin() + a, steps.begin() + b);
    SegmentFn fn = [part = std::move(part)](const TensorList& in) -> TensorList {
      Tensor y = in[0];
      for (const StepFn& f : part) y = f(y);
      return {y};
    };
    x = checkpoint(std::move(fn), {x}, preserve_rng)[0];
  }
  return x;
}

uint64_t next_sequence_nr() {
  return autograd::make_node("Probe", TensorList{}, [](autograd::Node&, const TensorList&) -> TensorList { return {}; })
      ->sequence_nr();
}

// A step re-evaluated during the reverse sweep must depend on nothing recorded before it but
// leaves (Note [Revolve execution]).
void check_step_graph(const Tensor& y, uint64_t first_seq, int64_t step) {
  autograd::Edge root = autograd::gradient_edge(y);
  if (!root.valid()) return;
  std::vector<autograd::Node*> stack{root.node.get()};
  std::unordered_set<autograd::Node*> seen{root.node.get()};
  while (!stack.empty()) {
    autograd::Node* n = stack.back();
    stack.pop_back();
    if (dynamic_cast<autograd::AccumulateGrad*>(n) != nullptr) continue;
    STRATA_CHECK(n->sequence_nr() >= first_seq, "run_chain (Revolve): step ", step,
                 " uses a tensor computed outside the chain that requires grad (its graph ends in ", n->name(),
                 "); a step may capture only leaves such as parameters");
    for (const autograd::Edge& e : n->next_edges())
      if (e.valid() && seen.insert(e.node.get()).second) stack.push_back(e.node.get());
  }
}

class RevolveNode final : public autograd::Node {
 public:
  RevolveNode(std::vector<StepFn> steps, RevolveSchedule schedule, std::size_t resume_at, bool preserve_rng)
      : steps_(std::move(steps)), schedule_(std::move(schedule)), resume_at_(resume_at), preserve_rng_(preserve_rng) {}
  std::string name() const override { return "RevolveBackward"; }

  std::vector<detail::RngState> rng_states;
  std::map<int64_t, std::size_t> slot_saved;  // slot -> index of its snapshot among the saved values

  TensorList apply(TensorList&& grad_outputs) override {
    Tensor g = std::move(grad_outputs.at(0));
    std::vector<Tensor> slots(static_cast<std::size_t>(schedule_.max_slots_used));
    for (const auto& [slot, index] : slot_saved) slots[slot] = saved(index);

    const detail::RngState outer = detail::RngState::current();
    struct Restore {
      const detail::RngState& s;
      ~Restore() { s.restore(); }
    } restore{outer};
    detail::RecomputeScope recomputing;

    Tensor cur;
    for (std::size_t i = resume_at_; i < schedule_.ops.size(); ++i) {
      const RevolveOp& op = schedule_.ops[i];
      switch (op.action) {
        case RevolveAction::Restore:
          // Slots form a stack (Note [Revolve cost model]): those above a restored one are dead.
          for (std::size_t k = static_cast<std::size_t>(op.slot) + 1; k < slots.size(); ++k) slots[k] = Tensor();
          cur = slots[op.slot];
          break;
        case RevolveAction::Takeshot: slots[op.slot] = cur; break;
        case RevolveAction::Advance: {
          autograd::NoGradGuard no_grad;
          for (int64_t j = op.position; j < op.target; ++j) {
            if (preserve_rng_) rng_states[j].restore();
            cur = steps_[j](cur);
          }
          break;
        }
        case RevolveAction::Firsturn: STRATA_ASSERT(false, "revolve: a second first turn"); break;
        case RevolveAction::Youturn: g = turn(op.position, cur, g); break;
      }
    }
    return {needs_input_grad(0) ? g : Tensor()};
  }

 private:
  Tensor turn(int64_t step, const Tensor& state, const Tensor& grad_out) {
    Tensor x = state.detach();
    if (is_floating(x.dtype())) x.set_requires_grad(true);
    Tensor y;
    const uint64_t first_seq = next_sequence_nr();
    {
      autograd::EnableGradGuard grad_on;
      if (preserve_rng_) rng_states[step].restore();
      y = steps_[step](x);
    }
    STRATA_CHECK(y.defined() && y.sizes() == grad_out.sizes() && y.dtype() == grad_out.dtype(),
                 "run_chain (Revolve): step ", step, " returned ",
                 y.defined() ? y.describe() : std::string("an undefined tensor"),
                 " when re-evaluated, but its first evaluation returned shape ", grad_out.sizes(), " ",
                 grad_out.dtype(), "; steps must be deterministic");
    check_step_graph(y, first_seq, step);
    if (autograd::gradient_edge(y).valid()) autograd::backward({y}, {grad_out});
    Tensor gx = x.requires_grad() ? x.grad() : Tensor();
    if (!gx.defined()) gx = zeros(state.sizes(), {state.dtype(), nullptr});
    return gx;
  }

  std::vector<StepFn> steps_;
  RevolveSchedule schedule_;
  std::size_t resume_at_;
  bool preserve_rng_;
};

Tensor run_revolve(const std::vector<StepFn>& steps, int64_t snapshots, const Tensor& input, bool preserve_rng) {
  const auto n = static_cast<int64_t>(steps.size());
  RevolveSchedule schedule = revolve_schedule(n, snapshots);
  if (!autograd::GradMode::is_enabled() || n == 1) return run_plain(steps, 0, n, input);

  std::vector<detail::RngState> states(static_cast<std::size_t>(n));
  std::vector<Tensor> slots(static_cast<std::size_t>(schedule.max_slots_used));
  std::vector<bool> slot_taken(slots.size(), false);
  Tensor cur = input;
  std::size_t i = 0;
  for (; schedule.ops[i].action != RevolveAction::Firsturn; ++i) {
    const RevolveOp& op = schedule.ops[i];
    if (op.action == RevolveAction::Takeshot) {
      slots[op.slot] = cur;
      slot_taken[op.slot] = true;
    } else {
      STRATA_ASSERT(op.action == RevolveAction::Advance, "revolve: unexpected action before the first turn");
      autograd::NoGradGuard no_grad;
      for (int64_t j = op.position; j < op.target; ++j) {
        states[j] = detail::RngState::current();
        cur = steps[j](cur);
      }
    }
  }
  STRATA_ASSERT(schedule.ops[i].position == n - 1, "revolve: the first turn is not the last step");
  auto node = std::make_shared<RevolveNode>(steps, schedule, i + 1, preserve_rng);
  node->add_input(input);
  for (std::size_t s = 0; s < slots.size(); ++s)
    if (slot_taken[s]) node->slot_saved[static_cast<int64_t>(s)] = node->save(slots[s]);
  slots.clear();
  Tensor last = cur.detach();
  autograd::set_history({&last}, node);
  states[n - 1] = detail::RngState::current();
  node->rng_states = std::move(states);
  return steps[n - 1](last);
}

}  // namespace

Tensor run_chain(const ChainPolicy& policy, const std::vector<StepFn>& steps, const Tensor& input,
                 const std::vector<std::string>& step_names) {
  const auto n = static_cast<int64_t>(steps.size());
  STRATA_CHECK(n >= 1, "run_chain: the chain has no steps");
  for (int64_t i = 0; i < n; ++i) STRATA_CHECK(static_cast<bool>(steps[i]), "run_chain: step ", i, " is empty");
  switch (policy.kind) {
    case RematPolicy::StoreAll: return run_plain(steps, 0, n, input);
    case RematPolicy::RecomputeAll: return run_segments(steps, 1, input, policy.preserve_rng_state);
    case RematPolicy::EveryK:
      STRATA_CHECK(policy.k >= 1, "run_chain: EveryK needs k >= 1 steps per segment, got ", policy.k);
      return run_segments(steps, policy.k, input, policy.preserve_rng_state);
    case RematPolicy::SqrtN: {
      const auto k = static_cast<int64_t>(std::ceil(std::sqrt(static_cast<double>(n))));
      return run_segments(steps, k, input, policy.preserve_rng_state);
    }
    case RematPolicy::Revolve:
      STRATA_CHECK(policy.snapshots >= 1, "run_chain: Revolve needs at least 1 snapshot (the chain's input), got ",
                   policy.snapshots);
      return run_revolve(steps, policy.snapshots, input, policy.preserve_rng_state);
    case RematPolicy::Auto:
      STRATA_CHECK(policy.auto_chain != nullptr,
                   "run_chain: an Auto policy needs its executor; make it with ChainPolicy::auto_budget(bytes)");
      return policy.auto_chain->run(steps, input, step_names);
  }
  STRATA_FAIL("run_chain: unknown policy");
}

}  // namespace strata::remat
