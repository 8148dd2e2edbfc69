#include "models/remat.h"

#include <cstring>
#include <typeinfo>
#include <utility>
#include <vector>

#include "autograd/grad_mode.h"
#include "core/error.h"
#include "core/pin_set.h"
#include "ops/unary.h"

namespace strata::nn {

namespace {

bool same_bytes(const Tensor& a, const Tensor& b) {
  Tensor ca = a.contiguous(), cb = b.contiguous();
  if (ca.nbytes() != cb.nbytes()) return false;
  PinSet pins;
  pins.add(ca, AccessMode::Read).add(cb, AccessMode::Read).acquire();
  return ca.nbytes() == 0 || std::memcmp(ca.data_ptr(), cb.data_ptr(), ca.nbytes()) == 0;
}

// Note [Module side effects under recomputation]
Tensor rerun_keeping_buffers(Module& module, const Tensor& input) {
  std::vector<Tensor> buffers = module.buffers();
  std::vector<Tensor> before;
  before.reserve(buffers.size());
  {
    autograd::NoGradGuard no_grad;
    for (const Tensor& b : buffers) before.push_back(b.clone());
  }
  Tensor out = module.forward(input);
  autograd::NoGradGuard no_grad;
  for (std::size_t i = 0; i < buffers.size(); ++i)
    if (!same_bytes(buffers[i], before[i])) buffers[i].copy_(before[i]);
  return out;
}

}  // namespace

remat::StepFn remat_step(std::shared_ptr<Module> module) {
  STRATA_CHECK(module != nullptr, "remat_step: the module is null");
  return [module = std::move(module)](const Tensor& x) -> Tensor {
    if (remat::in_recompute()) return rerun_keeping_buffers(*module, x);
    return module->forward(x);
  };
}

int64_t append_remat_steps(const std::shared_ptr<Module>& module, int64_t input, std::vector<remat::GraphStep>& steps) {
  STRATA_CHECK(module != nullptr, "append_remat_steps: the module is null");
  if (const auto* g = dynamic_cast<const RematGraphModule*>(module.get())) {
    const int64_t out = g->append_remat_steps(input, steps);
    STRATA_CHECK(out == static_cast<int64_t>(steps.size()) - 1, "append_remat_steps: ", module->type_name(),
                 " did not end with the step computing its output");
    return out;
  }
  if (typeid(*module) == typeid(Sequential)) {
    const auto& seq = static_cast<const Sequential&>(*module);
    if (seq.size() > 0) {
      int64_t x = input;
      for (std::size_t i = 0; i < seq.size(); ++i) x = append_remat_steps(seq[static_cast<int64_t>(i)], x, steps);
      return x;
    }
  }
  remat::GraphStep step;
  step.fn = [f = remat_step(module)](const autograd::TensorList& in) -> Tensor { return f(in[0]); };
  step.inputs = {input};
  step.name = module->to_string();
  steps.push_back(std::move(step));
  return static_cast<int64_t>(steps.size()) - 1;
}

int64_t append_remat_step(std::function<Tensor(const autograd::TensorList&)> fn, std::vector<int64_t> inputs,
                          std::string name, std::vector<remat::GraphStep>& steps) {
  steps.push_back({std::move(fn), std::move(inputs), std::move(name)});
  return static_cast<int64_t>(steps.size()) - 1;
}

int64_t append_relu_step(int64_t input, std::vector<remat::GraphStep>& steps) {
  return append_remat_step([](const autograd::TensorList& in) { return relu(in[0]); }, {input}, "relu", steps);
}

Tensor checkpoint_sequential(Sequential& sequential, int64_t segments, const Tensor& input, bool preserve_rng_state) {
  const auto n = static_cast<int64_t>(sequential.size());
  STRATA_CHECK(n >= 1, "checkpoint_sequential: the Sequential has no modules");
  STRATA_CHECK(segments >= 1 && segments <= n, "checkpoint_sequential: ", segments,
               " segments requested for a Sequential of ", n,
               " modules; segments must be between 1 and the number of modules");
  std::vector<remat::StepFn> steps;
  steps.reserve(static_cast<std::size_t>(n));
  for (int64_t i = 0; i < n; ++i) steps.push_back(remat_step(sequential[i]));
  return remat::checkpoint_sequential(steps, segments, input, preserve_rng_state);
}

RematSequential::RematSequential(remat::ChainPolicy policy) {
  set_type_name("RematSequential");
  set_policy(policy);
}

RematSequential::RematSequential(std::initializer_list<std::shared_ptr<Module>> modules, remat::ChainPolicy policy)
    : RematSequential(policy) {
  for (const auto& m : modules) push_back(m);
}

void RematSequential::set_policy(const remat::ChainPolicy& policy) {
  STRATA_CHECK(policy.kind != remat::RematPolicy::EveryK || policy.k >= 1,
               "RematSequential: EveryK needs k >= 1 steps per segment, got ", policy.k);
  STRATA_CHECK(policy.kind != remat::RematPolicy::Revolve || policy.snapshots >= 1,
               "RematSequential: Revolve needs at least 1 snapshot (the input), got ", policy.snapshots);
  STRATA_CHECK(policy.kind != remat::RematPolicy::Auto || policy.auto_chain != nullptr,
               "RematSequential: an Auto policy needs its executor; make it with ChainPolicy::auto_budget(bytes)");
  policy_ = policy;
}

Tensor RematSequential::forward(const Tensor& input) {
  STRATA_CHECK(size() >= 1, "RematSequential: no modules to run");
  if (policy_.kind == remat::RematPolicy::Auto && policy_.auto_chain &&
      policy_.granularity == remat::AutoGranularity::Op) {
    std::vector<remat::GraphStep> graph;
    for (const auto& slot : child_slots())
      append_remat_steps(slot.module, static_cast<int64_t>(graph.size()) - 1, graph);
    return policy_.auto_chain->run_graph(graph, input);
  }
  std::vector<remat::StepFn> steps;
  std::vector<std::string> names;  // Auto's profiling signatures: the module's repr (type and configuration)
  steps.reserve(size());
  for (const auto& slot : child_slots()) {
    steps.push_back(remat_step(slot.module));
    names.push_back(slot.module->to_string());
  }
  return remat::run_chain(policy_, steps, input, names);
}

}  // namespace strata::nn
