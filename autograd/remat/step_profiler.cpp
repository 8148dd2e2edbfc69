// The profiling of AutoChain's steps (detail/step_profile.h, Note [Auto chain execution]).

#include <algorithm>
#include <any>
#include <set>
#include <sstream>

#include "autograd/engine.h"
#include "autograd/grad_mode.h"
#include "autograd/node.h"
#include "autograd/remat/detail/step_profile.h"
#include "autograd/saved_tensor.h"
#include "core/allocator.h"
#include "core/error.h"
#include "core/factories.h"
#include "memory/tiered_memory.h"

namespace strata::remat::detail {

namespace {

std::size_t above(std::size_t peak, std::size_t base) { return peak > base ? peak - base : 0; }

Tensor fresh_input(const Tensor& x) {
  Tensor in = x.detach();
  if (is_floating(in.dtype())) in.set_requires_grad(true);
  return in;
}

bool differentiable(const Tensor& in, const Tensor& out) {
  return in.requires_grad() && autograd::gradient_edge(out).valid() && is_floating(out.dtype());
}

// The inputs of `ins` the backward of `y` differentiates w.r.t.
TensorList grad_inputs(const TensorList& ins, const Tensor& y) {
  TensorList wrt;
  for (const Tensor& t : ins)
    if (differentiable(t, y)) wrt.push_back(t);
  return wrt;
}

// The leaves that `out`'s graph reaches other than `inputs` (the step's parameters), by storage,
// with their bytes.
std::vector<std::pair<const void*, std::size_t>> parameter_leaves(const Tensor& out, const TensorList& inputs) {
  std::set<const void*> skip;
  for (const Tensor& t : inputs)
    if (t.defined()) skip.insert(t.storage().allocation());
  std::vector<std::pair<const void*, std::size_t>> found;
  std::set<const autograd::Node*> seen;
  std::vector<const autograd::Node*> stack;
  if (out.grad_fn()) stack.push_back(out.grad_fn().get());
  while (!stack.empty()) {
    const autograd::Node* n = stack.back();
    stack.pop_back();
    if (!seen.insert(n).second) continue;
    if (const auto* acc = dynamic_cast<const autograd::AccumulateGrad*>(n)) {
      const void* a = acc->leaf().storage().allocation();
      if (skip.insert(a).second) found.emplace_back(a, acc->leaf().nbytes());
      continue;
    }
    for (const autograd::Edge& e : n->next_edges())
      if (e.valid()) stack.push_back(e.node.get());
  }
  return found;
}

enum class SaveKind { Input, Output, Existing, Internal };

// One step's profiling (the phases run in this order; `in` and `out`, run A's, live until the
// step's profile is complete, as the measurements assume).
class StepRun {
 public:
  StepRun(const GraphStep& step, TensorList x, int64_t index, OpProfiler& profiler, memory::MemoryStats& stats,
          StepProfile& profile)
      : step_(step),
        x_(std::move(x)),
        index_(index),
        profiler_(profiler),
        P_(profile),
        stats_(stats),
        rng_(RngState::current()) {}

  // Run A, recorded (the saved storages in order, the forward peak), then run B while A's
  // storages are alive (no address reuse): a storage both runs saved existed before the step (a
  // parameter or buffer), not an activation.
  void record_forward();
  void classify_saves();
  void measure_backward();
  void measure_nograd_rerun();
  void time_step();
  Tensor output() const { return out_; }

 private:
  std::size_t current() const { return stats_.snapshot().fast.current_bytes; }
  std::size_t peak() const { return stats_.snapshot().fast.peak_bytes; }
  TensorList fresh() const {
    TensorList in;
    for (const Tensor& t : x_) in.push_back(fresh_input(t));
    return in;
  }
  void measure_growth(int held, const Tensor& y, const TensorList& ins);

  const GraphStep& step_;
  TensorList x_;  // the step's inputs: the graph's input or run A's outputs of earlier steps
  int64_t index_;
  OpProfiler& profiler_;
  StepProfile& P_;
  memory::MemoryStats& stats_;
  RngState rng_;  // the default generator before the step: every run starts from it
  TensorList in_;
  Tensor out_;
  std::vector<Storage> saved_a_;
  std::set<const Allocation*> seen_b_;
};

void StepRun::record_forward() {
  bool recording_b = false;
  auto record = autograd::make_saved_tensor_hooks(
      [&](const Tensor& v) -> std::any {
        if (recording_b) {
          if (v.defined()) seen_b_.insert(v.storage().allocation());
        } else {
          saved_a_.push_back(v.defined() ? v.storage() : Storage());
        }
        return v;
      },
      [](std::any& p) -> Tensor { return std::any_cast<Tensor>(p); });
  in_ = fresh();
  stats_.reset_peaks();
  const std::size_t before = current();
  std::vector<std::size_t> allocated;
  {
    RecomputeScope scope;  // modules put their buffers back (models/remat.h)
    autograd::EnableGradGuard grad_on;
    autograd::SavedTensorHooksGuard guard(record);
    memory::AllocationLog log;
    out_ = step_.fn(in_);
    allocated = log.sizes();
  }
  P_.forward_peak = above(peak(), before);
  STRATA_CHECK(out_.defined(), "AutoChain: step ", index_, " returned an undefined tensor");
  P_.parameters = parameter_leaves(out_, in_);
  P_.out_size_allocations = std::count(allocated.begin(), allocated.end(), out_.storage().nbytes());
  rng_.restore();
  recording_b = true;
  {
    RecomputeScope scope;
    autograd::EnableGradGuard grad_on;
    autograd::SavedTensorHooksGuard guard(record);
    Tensor again = step_.fn(fresh());
  }
}

// Every saved storage of run A as the step's input k, its output, pre-existing, or internal.
void StepRun::classify_saves() {
  const std::size_t k_in = x_.size();
  std::vector<const Allocation*> in_allocs;
  for (const Tensor& t : x_) in_allocs.push_back(t.storage().allocation());
  const Allocation* out_alloc = out_.storage().allocation();
  for (std::size_t k = 0; k < k_in; ++k)
    if (P_.view_of < 0 && out_alloc == in_allocs[k]) P_.view_of = static_cast<int64_t>(k);
  P_.out_storage_bytes = out_.storage().nbytes();
  P_.out_nbytes = out_.nbytes();
  P_.saves_input.assign(k_in, 0);
  std::set<const Allocation*> internal_seen;
  for (const Storage& s : saved_a_) {
    const Allocation* a = s.allocation();
    const auto pos = std::find(in_allocs.begin(), in_allocs.end(), a);
    SaveKind kind = a == nullptr             ? SaveKind::Existing
                    : pos != in_allocs.end() ? SaveKind::Input
                    : a == out_alloc         ? SaveKind::Output
                    : seen_b_.count(a) != 0  ? SaveKind::Existing
                                             : SaveKind::Internal;
    if (kind == SaveKind::Input) P_.saves_input[pos - in_allocs.begin()] = 1;
    P_.saves_output = P_.saves_output || kind == SaveKind::Output;
    P_.internal_saves.push_back(kind == SaveKind::Internal ? 1 : 0);
    if (kind == SaveKind::Internal && internal_seen.insert(a).second) P_.internal_bytes += s.nbytes();
  }
  saved_a_.clear();
  seen_b_.clear();
}

// The growth during a backward of `y` w.r.t. `ins` above everything the forward left (inputs,
// output, saved values, seed), with a seed nothing else holds (held 0) or one held elsewhere
// (held 1), and what the step returns per input.
void StepRun::measure_growth(int held, const Tensor& y, const TensorList& ins) {
  const std::size_t k_in = x_.size();
  const TensorList w = grad_inputs(ins, y);
  TensorList seeds;
  seeds.push_back(ones_like(y));
  const Tensor holder = held ? seeds[0] : Tensor();
  stats_.reset_peaks();
  const std::size_t at = current();
  const TensorList g = autograd::grad_consuming({y}, w, std::move(seeds), false, true);
  P_.backward_growth[held] = above(peak(), at);
  P_.grad_reusable[held].assign(k_in, 0);
  P_.grad_alias[held].assign(k_in, -1);
  std::vector<const Allocation*> buf(k_in, nullptr);
  for (std::size_t k = 0, n = 0; k < k_in; ++k) {
    if (!differentiable(ins[k], y)) continue;
    const Tensor& gk = g[n++];
    P_.grad_reusable[held][k] = autograd::reusable_gradient(gk);
    // Undefined when the input is not reachable from the output (a conv's weight step and the
    // conv's input: it reads it, returns no gradient for it).
    P_.grad_input[k] = gk.defined();
    if (!gk.defined()) continue;
    buf[k] = gk.storage().allocation();
    for (std::size_t a = 0; a < k; ++a)
      if (buf[a] == buf[k])
        P_.grad_alias[held][k] = static_cast<int64_t>(a), P_.grad_alias[held][a] = static_cast<int64_t>(k);
  }
}

// Twice: the step's own backward may work in place on its incoming gradient when nothing else
// holds that (Note [In-place backward]); which case applies is resolved per step by the graph
// builder. The second measurement runs on a fresh forward (retaining A's graph would keep saved
// values alive that a backward frees as it goes).
void StepRun::measure_backward() {
  P_.has_backward = !grad_inputs(in_, out_).empty();
  P_.grad_input.assign(x_.size(), 0);  // set by the measurement
  if (!P_.has_backward) return;
  measure_growth(0, out_, in_);
  rng_.restore();
  TensorList xi = fresh();
  Tensor y;
  {
    RecomputeScope scope;
    autograd::EnableGradGuard grad_on;
    y = step_.fn(xi);
  }
  measure_growth(1, y, xi);
}

// Run C, no-grad: what a recompute of the output runs.
void StepRun::measure_nograd_rerun() {
  rng_.restore();
  stats_.reset_peaks();
  const std::size_t before = current();
  {
    RecomputeScope scope;
    autograd::NoGradGuard no_grad;
    TensorList detached;
    for (const Tensor& t : x_) detached.push_back(t.detach());
    Tensor y = step_.fn(detached);
    P_.nograd_peak = above(peak(), before);
  }
  rng_.restore();
}

// Times (cached by signature): forward, and forward + backward w.r.t. the inputs.
void StepRun::time_step() {
  P_.forward_time = profiler_.time(P_.signature + " fwd", [&] {
    RecomputeScope scope;
    autograd::EnableGradGuard grad_on;
    Tensor y = step_.fn(fresh());
    rng_.restore();
  });
  const double both = profiler_.time(P_.signature + " fwd+bwd", [&] {
    RecomputeScope scope;
    autograd::EnableGradGuard grad_on;
    TensorList xi = fresh();
    Tensor y = step_.fn(xi);
    const TensorList w = grad_inputs(xi, y);
    if (!w.empty()) autograd::grad({y}, w, {ones_like(y)}, false, true);
    rng_.restore();
  });
  P_.backward_time = std::max(0.0, both - P_.forward_time);
  rng_.restore();
}

std::string signature_of(const std::vector<GraphStep>& steps, int64_t i, const TensorList& x) {
  std::string sig = step_name(steps, i) + " [";
  for (std::size_t k = 0; k < x.size(); ++k) sig += (k ? ", " : "") + shape_signature(fresh_input(x[k]));
  return sig + "]";
}

}  // namespace

std::string shape_signature(const Tensor& x) {
  std::ostringstream os;
  os << x.sizes() << ' ' << x.dtype() << (x.requires_grad() ? " rg" : "");
  return os.str();
}

std::string step_name(const std::vector<GraphStep>& steps, int64_t i) {
  return steps[i].name.empty() ? "step " + std::to_string(i) : steps[i].name;
}

std::vector<StepProfile> profile_steps(const std::vector<GraphStep>& steps, const Tensor& input, OpProfiler& profiler,
                                       memory::MemoryStats& stats) {
  const auto m = static_cast<int64_t>(steps.size());
  // The last step reading each step's output (-1: none).
  std::vector<int64_t> last_reader(static_cast<std::size_t>(m), -1);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j : steps[i].inputs)
      if (j >= 0) last_reader[j] = std::max(last_reader[j], i);
  std::vector<StepProfile> prof(static_cast<std::size_t>(m));
  const RngState outer_rng = RngState::current();
  // Run A's outputs (detached): their storages identify the boundary values; each is dropped after
  // its last reader has been profiled.
  std::vector<Tensor> outs(static_cast<std::size_t>(m));
  const Tensor graph_input = input.detach();
  for (int64_t i = 0; i < m; ++i) {
    TensorList x;
    for (int64_t j : steps[i].inputs) x.push_back(j < 0 ? graph_input : outs[j]);
    prof[i].signature = signature_of(steps, i, x);
    Tensor out;
    {
      StepRun run(steps[i], std::move(x), i, profiler, stats, prof[i]);
      run.record_forward();
      run.classify_saves();
      run.measure_backward();
      run.measure_nograd_rerun();
      run.time_step();
      out = run.output();
    }
    // Run A's output identifies this step's boundary value; inputs nobody reads later are dropped.
    outs[i] = out.detach();
    for (int64_t j : steps[i].inputs)
      if (j >= 0 && last_reader[j] <= i) outs[j] = Tensor();
  }
  outer_rng.restore();
  return prof;
}

}  // namespace strata::remat::detail
