// The planning graph of a graph of steps from its profiles (detail/chain_graph.h).

#include "autograd/remat/detail/chain_graph.h"

#include <algorithm>
#include <map>
#include <string>

namespace strata::remat::detail {

namespace {

std::size_t above(std::size_t peak, std::size_t base) { return peak > base ? peak - base : 0; }

// The values in order of their producers: "int i" and the boundary value of step i's output (a
// view continues its input's value), with the routing tables; boundary[v] marks boundary values.
void add_values(const std::vector<GraphStep>& steps, const std::vector<StepProfile>& prof, ChainGraph& cg,
                std::vector<char>& boundary) {
  const auto m = static_cast<int64_t>(steps.size());
  PlanGraph& g = cg.graph;
  auto value_of = [&](int64_t j) { return j < 0 ? int64_t{-1} : cg.output_value[j]; };
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
    if (i + 1 == m) continue;
    if (P.view_of >= 0) {
      cg.output_value[i] = cg.input_values[i][P.view_of];
      continue;
    }
    PlanValue v;
    v.name = "x " + std::to_string(i + 1);
    v.bytes = P.out_storage_bytes;
    v.producer = i;
    v.last_forward_use = i + 1;
    v.deps = deps;
    v.recompute_workspace_bytes = above(P.nograd_peak, P.out_storage_bytes);
    // The executor can place the output in the slow tier (memory::SlowPlacement, which goes by
    // size) when the step allocates nothing else of its size.
    v.slow_ok = P.out_size_allocations == 1;
    v.forward_reads = 0;  // counted by add_uses
    cg.output_value[i] = static_cast<int64_t>(g.values.size());
    g.values.push_back(v);
    boundary.push_back(1);
  }
}

// Boundary values: last forward use, forward reads and backward uses (steps saving them as input
// or output); the steps' internal saves for routing.
void add_uses(const std::vector<GraphStep>& steps, const std::vector<StepProfile>& prof,
              const std::vector<char>& boundary, ChainGraph& cg) {
  PlanGraph& g = cg.graph;
  std::vector<std::vector<int64_t>> uses(g.values.size());
  for (int64_t i = 0; i < static_cast<int64_t>(steps.size()); ++i) {
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
}

// Whether each step's incoming gradient is reusable (see BackwardAccounting), in backward order:
// one contribution decides by what its reader's backward returned (itself given a reusable
// gradient or not), two or more are summed into one the engine owns. The last step's comes from
// the caller: assumed held (the larger growth).
void resolve_incoming(const std::vector<GraphStep>& steps, const std::vector<StepProfile>& prof,
                      BackwardAccounting& acc) {
  const auto m = static_cast<int64_t>(steps.size());
  acc.incoming_reusable.assign(static_cast<std::size_t>(m), 0);
  acc.contributions.assign(static_cast<std::size_t>(m), 0);
  for (int64_t i = m - 2; i >= 0; --i) {
    int contributions = 0;
    bool reusable = false;
    for (int64_t r = i + 1; r < m; ++r) {
      const StepProfile& R = prof[r];
      if (!R.has_backward) continue;
      const std::vector<char>& ret = R.grad_reusable[acc.incoming_reusable[r] ? 0 : 1];
      for (std::size_t k = 0; k < steps[r].inputs.size(); ++k)
        if (steps[r].inputs[k] == i && R.grad_input[k]) {
          ++contributions;
          reusable = ret[k] != 0;
        }
    }
    acc.incoming_reusable[i] = contributions >= 2 || (contributions == 1 && reusable);
    acc.contributions[i] = contributions;
  }
}

// The last reader of each step's output whose backward returns a gradient for it (-1: none; a
// conv's weight step reads the conv's input but returns none: Note [Conv backward in two steps]).
std::vector<int64_t> last_grad_readers(const std::vector<GraphStep>& steps, const std::vector<StepProfile>& prof) {
  std::vector<int64_t> last(steps.size(), -1);
  for (int64_t r = 0; r < static_cast<int64_t>(steps.size()); ++r)
    for (std::size_t k = 0; k < steps[r].inputs.size(); ++k) {
      const int64_t j = steps[r].inputs[k];
      if (j >= 0 && prof[r].has_backward && prof[r].grad_input[k]) last[j] = std::max(last[j], r);
    }
  return last;
}

// A step output read by a later step than the next one has its gradient pending from its last
// (differentiating) reader's backward to its own: the backward points strictly between hold it.
// Likewise the graph input's gradient between its first and last differentiating readers.
void add_pending_activation_gradients(const std::vector<GraphStep>& steps, const std::vector<StepProfile>& prof,
                                      const std::vector<int64_t>& last_grad_reader, std::size_t input_grad_bytes,
                                      std::vector<std::size_t>& pending) {
  const auto m = static_cast<int64_t>(steps.size());
  for (int64_t j = 0; j + 1 < m; ++j)
    if (prof[j].has_backward)
      for (int64_t k = j + 1; k < last_grad_reader[j]; ++k) pending[k] += prof[j].out_nbytes;
  if (input_grad_bytes == 0) return;
  int64_t first = m, last = -1;
  for (int64_t r = 0; r < m; ++r)
    for (std::size_t k = 0; k < steps[r].inputs.size(); ++k)
      if (steps[r].inputs[k] < 0 && prof[r].has_backward && prof[r].grad_input[k]) {
        first = std::min(first, r);
        last = std::max(last, r);
      }
  for (int64_t k = first + 1; k < last; ++k) pending[k] += input_grad_bytes;
}

// Note [Auto graph execution]: a parameter read by several steps has its gradient pending in its
// AccumulateGrad node from the backward of its last reader to that of its first (inclusive).
void add_pending_parameter_gradients(const std::vector<StepProfile>& prof, std::vector<std::size_t>& pending) {
  std::map<const void*, std::pair<int64_t, int64_t>> readers;  // first, last
  std::map<const void*, std::size_t> bytes;
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

// A pending gradient that is the very buffer the step it is pending across receives (the last
// reader r handed one tensor to both the pending input j and the input a, and a's gradient has no
// other contribution; no reader of j between a and r added to it) is counted once there.
void correct_add_aliases(const std::vector<GraphStep>& steps, const std::vector<StepProfile>& prof,
                         const std::vector<int64_t>& last_grad_reader, BackwardAccounting& acc) {
  for (int64_t j = 0; j + 1 < static_cast<int64_t>(steps.size()); ++j) {
    const int64_t r = last_grad_reader[j];
    if (!prof[j].has_backward || r < 0) continue;
    const std::vector<int64_t>& alias = prof[r].grad_alias[acc.incoming_reusable[r] ? 0 : 1];
    for (std::size_t kb = 0; kb < steps[r].inputs.size(); ++kb) {
      if (steps[r].inputs[kb] != j || alias[kb] < 0) continue;
      const int64_t a = steps[r].inputs[static_cast<std::size_t>(alias[kb])];
      if (a <= j || a >= r || acc.contributions[a] != 1) continue;
      bool added_between = false;
      for (int64_t q = a + 1; q < r; ++q)
        for (std::size_t k = 0; k < steps[q].inputs.size(); ++k)
          added_between = added_between || (steps[q].inputs[k] == j && prof[q].grad_input[k]);
      if (!added_between && acc.pending[a] >= prof[j].out_nbytes) acc.pending[a] -= prof[j].out_nbytes;
      break;
    }
  }
}

// The ops: names, signatures, times, forward workspace (the forward peak beyond the output value
// and the internals) and backward workspace (see build_chain_graph).
void add_ops(const std::vector<GraphStep>& steps, const std::vector<StepProfile>& prof, const BackwardAccounting& acc,
             PlanGraph& g) {
  const auto m = static_cast<int64_t>(steps.size());
  // The graph's output is the caller's: live at the last forward point and, held by the caller,
  // through the whole backward.
  const std::size_t held_output = prof[m - 1].view_of >= 0 ? 0 : prof[m - 1].out_storage_bytes;
  for (int64_t i = 0; i < m; ++i) {
    const StepProfile& P = prof[i];
    PlanOp op;
    op.name = step_name(steps, i);
    op.signature = P.signature;
    op.forward_time = P.forward_time;
    op.backward_time = P.backward_time;
    const std::size_t output_value_bytes = (i + 1 < m && P.view_of < 0) ? P.out_storage_bytes : 0;
    op.workspace_bytes = above(P.forward_peak, output_value_bytes + P.internal_bytes);
    const std::size_t growth = P.backward_growth[acc.incoming_reusable[i] ? 0 : 1];
    op.backward_workspace_bytes =
        (P.has_backward ? P.out_nbytes + growth : 0) + held_output + kCallerLossBytes + acc.pending[i];
    g.ops.push_back(op);
  }
}

}  // namespace

BackwardAccounting backward_accounting(const std::vector<GraphStep>& steps, const std::vector<StepProfile>& prof,
                                       std::size_t input_grad_bytes) {
  BackwardAccounting acc;
  acc.pending.assign(steps.size(), 0);
  const std::vector<int64_t> last_grad_reader = last_grad_readers(steps, prof);
  add_pending_activation_gradients(steps, prof, last_grad_reader, input_grad_bytes, acc.pending);
  add_pending_parameter_gradients(prof, acc.pending);
  resolve_incoming(steps, prof, acc);
  correct_add_aliases(steps, prof, last_grad_reader, acc);
  return acc;
}

ChainGraph build_chain_graph(const std::vector<GraphStep>& steps, const std::vector<StepProfile>& prof,
                             const ChainGraphContext& context) {
  const std::size_t m = steps.size();
  ChainGraph cg;
  PlanGraph& g = cg.graph;
  g.bandwidth = context.bandwidth;
  g.timed_moves = true;  // copies overlap the points their times need (Note [Auto planning model])
  g.move_compute_share = context.move_compute_share;
  cg.input_values.assign(m, {});
  cg.output_value.assign(m, -1);
  cg.internal_value.assign(m, -1);
  std::vector<char> boundary;  // per value
  add_values(steps, prof, cg, boundary);
  add_uses(steps, prof, boundary, cg);
  add_ops(steps, prof, backward_accounting(steps, prof, context.input_grad_bytes), g);
  g.validate();
  return cg;
}

}  // namespace strata::remat::detail
