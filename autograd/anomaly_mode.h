#pragma once
/// @file
/// Anomaly detection: an opt-in check that stops at the first op or backward step producing NaN or
/// ±inf (`torch.autograd.set_detect_anomaly` / `detect_anomaly`; Python:
/// `strata.autograd.set_detect_anomaly(True)`).
///
/// Note [Anomaly detection]
/// When on (a process-wide flag, as in PyTorch; off by default), the recording and the engine check
/// values and throw strata::Error at the first non-finite one:
///  - forward: every recorded op's outputs, when set_history attaches them. The message names the
///    node ("the forward of 'LinearBackward'"), the output, the count of NaN/inf and the first
///    index, and whether the op's inputs that no recorded op computed (data, parameters) already
///    held NaN or inf, or the op produced them from finite values. Ops run without recording
///    (no grad needed, grad mode off) are not checked. A -inf an op means to produce (a mask)
///    trips the check too: it is a debugging aid, not for training runs;
///  - backward: the gradients a node returns, after it ran, and the root gradients passed in —
///    "Function 'MulBackward' returned nan values in its 0th output", PyTorch's wording, followed
///    by the gradient's shape, counts, first index and, when that input is a leaf that requires
///    grad (a parameter), that its .grad would have become non-finite; a leaf's gradient summed
///    from finite parts that overflowed is reported at its AccumulateGrad.
/// With check_nan off (PyTorch's `check_nan=False`) the mode is on but checks nothing. Off, the
/// cost is one relaxed atomic load per recorded op and per node run.

#include "core/tensor.h"

namespace strata::autograd {

class Node;

class AnomalyMode {
 public:
  static bool is_enabled();
  /// Whether the checks run: enabled with check_nan.
  static bool should_check_nan();
  static void set_enabled(bool enabled, bool check_nan = true);
};

/// Turns anomaly detection on (or off) for a scope and restores the previous setting.
class DetectAnomalyGuard {
 public:
  explicit DetectAnomalyGuard(bool enabled = true, bool check_nan = true);
  ~DetectAnomalyGuard();
  DetectAnomalyGuard(const DetectAnomalyGuard&) = delete;
  DetectAnomalyGuard& operator=(const DetectAnomalyGuard&) = delete;

 private:
  bool previous_, previous_check_nan_;
};

namespace detail {

/// make_node's part: notes which of `node`'s inputs that no recorded op computed hold NaN or inf.
void note_forward_inputs(const Node& node, const std::vector<const Tensor*>& inputs);
/// set_history's part: throws if output `nr` of `node` holds NaN or inf.
void check_forward_output(const Node& node, const Tensor& output, uint32_t nr);
/// The engine's part: throws if `grad` — what `node` returned for its input `i` — holds NaN or inf.
void check_backward_output(const Node& node, std::size_t i, const Tensor& grad);
/// The engine's part for the gradient reaching a leaf's AccumulateGrad, summed from finite parts.
void check_leaf_gradient(const Node& accumulate, const Tensor& grad);
/// backward() / grad(): throws if the caller's gradient for root `i` holds NaN or inf.
void check_root_gradient(const char* op, std::size_t i, const Tensor& grad);

}  // namespace detail

}  // namespace strata::autograd
