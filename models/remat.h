#pragma once
/// @file
/// Rematerialization for nn modules: checkpoint_sequential over an nn::Sequential and
/// RematSequential, a Sequential that runs its children under a chain policy
/// (autograd/remat/chain.h).
///
/// Note [Module side effects under recomputation]
/// Re-running a module during backward must not apply its side effects a second time: batch
/// norm in training mode updates running_mean, running_var and num_batches_tracked on every
/// forward (PyTorch's checkpoint has the same problem and leaves it). Every module run through
/// this file therefore snapshots its buffers before a re-run (remat::in_recompute()) and puts back
/// any buffer the re-run changed, so the running statistics equal those of one plain forward.
/// Buffers the re-run left alone are not touched (their versions stay, so a value an eval-mode
/// batch norm saved is still valid).

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "autograd/remat/chain.h"
#include "autograd/remat/plan_exec.h"
#include "models/container.h"

namespace strata::nn {

/// A chain step running `module` (Note [Module side effects under recomputation]).
remat::StepFn remat_step(std::shared_ptr<Module> module);

/// A module that gives Auto its forward as a graph of op-level steps (Note [Auto graph
/// execution]); ResNet's BasicBlock and Bottleneck do.
class RematGraphModule {
 public:
  virtual ~RematGraphModule() = default;
  /// Appends the steps of this module's forward on step `input`'s output (-1: the graph's input)
  /// to `steps`; the last step appended computes the module's output. Returns its index.
  virtual int64_t append_remat_steps(int64_t input, std::vector<remat::GraphStep>& steps) const = 0;
};

/// Appends the steps computing `module`'s forward on step `input`'s output (-1: the graph's input)
/// and returns the index of the (last) step computing its output: a RematGraphModule's own steps,
/// a plain Sequential's children's steps in order, any other module one step running it (as
/// remat_step). Throws strata::Error for a null module.
int64_t append_remat_steps(const std::shared_ptr<Module>& module, int64_t input, std::vector<remat::GraphStep>& steps);

/// Appends the step fn(inputs) named `name` and returns its index (for RematGraphModule
/// implementations: joins, concatenations, functional ops).
int64_t append_remat_step(std::function<Tensor(const autograd::TensorList&)> fn, std::vector<int64_t> inputs,
                          std::string name, std::vector<remat::GraphStep>& steps);
/// Appends relu(step `input`'s output) as a step named "relu" and returns its index.
int64_t append_relu_step(int64_t input, std::vector<remat::GraphStep>& steps);

/// torch.utils.checkpoint.checkpoint_sequential over the children of `sequential`: `segments`
/// segments of size() / segments children, each but the last checkpointed (the last takes the
/// remainder and runs normally). Throws strata::Error for segments < 1, more segments than
/// children, or an empty Sequential.
Tensor checkpoint_sequential(Sequential& sequential, int64_t segments, const Tensor& input,
                             bool preserve_rng_state = true);

/// A Sequential whose forward runs its children under a chain policy (StoreAll by default). Under
/// Auto at op granularity (the default) the children are planned and run as the graph of their
/// append_remat_steps; at step granularity, one step per child.
/// Parameters, buffers, state_dict keys and repr are a Sequential's (named "RematSequential").
class RematSequential : public Sequential {
 public:
  explicit RematSequential(remat::ChainPolicy policy = {});
  RematSequential(std::initializer_list<std::shared_ptr<Module>> modules, remat::ChainPolicy policy = {});
  /// Throws strata::Error for EveryK with k < 1 or Revolve with snapshots < 1.
  void set_policy(const remat::ChainPolicy& policy);
  const remat::ChainPolicy& policy() const { return policy_; }
  /// Runs the children under the policy; throws strata::Error when there are none.
  Tensor forward(const Tensor& input) override;

 private:
  remat::ChainPolicy policy_;
};

}  // namespace strata::nn
