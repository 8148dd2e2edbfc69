#pragma once
// One training step of a model for the tests that promise rematerialized or planned steps equal
// to the plain one bit for bit (tests/cpp/models/test_remat.cpp, tests/cpp/autograd/test_auto_remat.cpp):
// the step's results, their bitwise comparison, and a module's children as a chain.

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/rng.h"
#include "core/tensor.h"
#include "models/module.h"
#include "ops/softmax_loss.h"
#include "tests/cpp/bitwise.h"

namespace strata::testing_util {

using ModuleList = std::vector<std::shared_ptr<nn::Module>>;

/// The direct children of `m`, in registration order.
inline ModuleList children_of(const std::shared_ptr<nn::Module>& m) {
  ModuleList out;
  for (auto& [name, child] : m->named_children()) out.push_back(child);
  return out;
}

/// What one training step produced.
struct StepResult {
  std::vector<std::pair<std::string, Tensor>> grads;    ///< per parameter (copies)
  std::vector<std::pair<std::string, Tensor>> buffers;  ///< after the step (copies)
  Tensor input_grad;
  Tensor logits;  ///< detached
};

/// One step of `model` from the state `initial` through `forward`, cross-entropy against `target`,
/// with the RNG seeded alike (dropout draws the same masks).
inline StepResult train_step(nn::Module& model, const StateDict& initial, const Tensor& x, const Tensor& target,
                             const std::function<Tensor(const Tensor&)>& forward) {
  model.load_state_dict(initial);
  model.zero_grad();
  Tensor input = x.detach().set_requires_grad();
  manual_seed(2024);
  StepResult r;
  Tensor logits = forward(input);
  cross_entropy(logits, target).backward();
  // Detached: holding the output would keep the graph's AccumulateGrad nodes alive, and a later
  // backward reusing them (with their old sequence numbers) would run them last, holding every
  // weight gradient until the end (Note [Engine order]) — a different peak.
  r.logits = logits.detach();
  // Copies: a later step accumulating into the same .grad tensors must not change the reference.
  for (auto& [name, p] : model.named_parameters())
    r.grads.emplace_back(name, p.grad().defined() ? p.grad().clone() : Tensor());
  for (auto& [name, b] : model.named_buffers()) r.buffers.emplace_back(name, b.clone());
  r.input_grad = input.grad();
  return r;
}

/// Every result of `got` bitwise equal to `ref`'s; every parameter of `ref` has a gradient.
inline void expect_same(const StepResult& got, const StepResult& ref) {
  EXPECT_TRUE(same_bits(got.logits, ref.logits)) << "logits";
  EXPECT_TRUE(same_bits(got.input_grad, ref.input_grad)) << "input gradient";
  ASSERT_EQ(got.grads.size(), ref.grads.size());
  for (std::size_t i = 0; i < ref.grads.size(); ++i) {
    EXPECT_TRUE(ref.grads[i].second.defined()) << ref.grads[i].first;
    EXPECT_TRUE(same_bits(got.grads[i].second, ref.grads[i].second)) << ref.grads[i].first;
  }
  ASSERT_EQ(got.buffers.size(), ref.buffers.size());
  for (std::size_t i = 0; i < ref.buffers.size(); ++i)
    EXPECT_TRUE(same_bits(got.buffers[i].second, ref.buffers[i].second)) << ref.buffers[i].first;
}

}  // namespace strata::testing_util
