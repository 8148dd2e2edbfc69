#pragma once
/// @file
/// The `sim` backend (DESIGN.md §3 "sim"; issue 9): Strata's tensor ops lowered to element
/// loops through the scalar tracer (sim/active.h), so a training step's forward and backward
/// run on the simulated TapeFlow accelerator (sim/machine.h) and come back with the same
/// numbers as the CPU backend plus the simulator's report.
///
/// Usage:
/// @code
///   sim::SimStep step("mlp");
///   sim::SimTensor x = step.data("x", input);             // [N, in], no gradient
///   sim::SimTensor w1 = step.param("w1", fc1_weight);     // gradient returned
///   ...
///   sim::SimTensor h = step.linear(x, w1, b1, Activation::ReLU);
///   step.cross_entropy(step.linear(h, w2, b2), target);   // the loss (mean over the batch)
///   sim::SimStepReport r = step.run();                    // r.grads[i] for the i-th param
/// @endcode
///
/// Note [Sim backend lowering]
/// - Each op call records its forward as element loops over sim::Active values: every output
///   element is computed from loads of its inputs' elements and stored into the op's output
///   array (a Temp array of the trace; `data` tensors are Constant arrays, `param`s Input arrays).
///   Loops are named `<op><k>.<loop>` (k counts the step's ops), one static loop per output
///   element and one for each reduction, so the TapeFlow passes see one region per op loop.
/// - The backward is not written per op: the tracer differentiates the recorded dataflow
///   (Tracer::finish), with Enzyme's tape, exactly as for the Table II benchmarks. Values are f64
///   (the simulated datapath's type); gradients are returned in each param's dtype.
/// - `run()` replays the program functionally (sim/replay.h) for the loss and gradients and
///   simulates it twice: the Enzyme-style trace on an Enzyme system and the TapeFlow trace
///   (passes 1-4 for the TapeFlow system's scratchpad) on a TapeFlow system.
/// - Semantics follow the CPU ops: linear (weight [out, in], optional bias, activation None, ReLU
///   or Tanh), matmul of two matrices, add of equal shapes, relu, conv2d (NCHW, groups 1,
///   dilation 1, zero padding), max_pool2d / avg_pool2d (no padding, floor mode; max takes the
///   first maximum of the window, avg divides by the window size), flatten, cross_entropy (class
///   indices, mean over the batch).
/// - The `sim` Backend (sim_backend()) answers `supports()` for exactly these ops (and tanh and
///   reshape), so code run under `BackendGuard("sim")` fails on the first op the simulator cannot
///   lower. A bare guard is only that check: the op functions still compute on the CPU kernels and
///   nothing is recorded. SimStep is the explicit lowering; SimSession (below) records a model's op
///   calls into a SimStep through the ops' recording hook (Note [Op recording hook] in
///   ops/backend.h).
///
/// Note [Sim session]
/// A SimSession runs unmodified model code on the `sim` backend (C++ or Python, nn modules or op
/// functions):
/// @code
///   sim::SimSession session;                                  // selects `sim` on this thread
///   Tensor loss = cross_entropy(model.forward(x), target);    // CPU values, and recorded
///   sim::SimStepReport r = session.backward(loss);            // params' .grad += simulated grads
///   optimizer.step();
/// @endcode
/// - While alive (until end()) on its thread it is the BackendGuard("sim") and the op recorder:
///   each supported op computes its output on the CPU kernels as usual (so the forward values,
///   shapes and autograd records are the CPU backend's) and the same computation is lowered into
///   the session's SimStep.
/// - Tensors are matched to SimTensors by identity (the same Storage, offset, sizes, strides and
///   dtype, and the same autograd record): op outputs are remembered as the op's SimTensor; an
///   unseen input that requires grad and is a leaf becomes a `param` (its Tensor is kept for the
///   gradient), any other unseen input becomes `data` (a constant of the trace: the images, an
///   activation computed before the session, or a raw view / detach() of a recorded tensor — cut
///   from the graph exactly as CPU autograd cuts it, since core's view methods are not recorded).
///   Views made by the reshape/flatten ops are recorded (same array, new shape). A seen tensor
///   modified in place (its version changed) is refused. The session keeps every tensor it saw
///   alive while it records, so storage identities cannot be reused meanwhile; backward() and
///   end() drop them (and with them the CPU autograd graph the ops recorded).
/// - backward(loss) needs the output of the recorded cross_entropy; it runs the SimStep (replay +
///   both simulations) and accumulates each param's simulated gradient (f64 datapath, converted
///   to the param's dtype) into its `.grad` exactly as autograd's AccumulateGrad would (set when
///   undefined, added in place otherwise). The CPU autograd graph recorded by the ops is not run:
///   do not call loss.backward() as well, or the gradients are counted twice.
/// - Refused, with errors naming the op or the session: ops outside the sim set (check_backend),
///   attributes the lowering lacks (e.g. dilation, groups, pooling padding, class weights), ops
///   after the loss, backward twice or on another tensor, backward after an op failed to record,
///   a session nested in another (or in an open SimStep) on the same thread.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "ops/backend.h"
#include "ops/linalg.h"
#include "sim/active.h"
#include "sim/machine.h"

namespace strata::sim {

/// The `sim` backend; registered (register_backend) on the first call.
Backend& sim_backend();

/// A tensor of the traced step: an array of the trace and its shape (row-major).
struct SimTensor {
  Array array;
  std::vector<int64_t> shape;
  int64_t numel() const;
};

/// Which simulated systems run() uses (names of sim/systems.h).
struct SimStepOptions {
  std::string enzyme_system = "Enzyme_32k";
  std::string tapeflow_system = "Tflow_32k";
};

/// The result of one simulated training step.
struct SimStepReport {
  double loss = 0;
  std::vector<Tensor> grads;  ///< per param(), in call order, shape and dtype of the param
  MachineReport enzyme;       ///< Enzyme-style trace on SimStepOptions::enzyme_system
  MachineReport tapeflow;     ///< TapeFlow trace on SimStepOptions::tapeflow_system
  uint64_t ops = 0;           ///< op calls lowered
  uint64_t instrs = 0;        ///< instructions of the Enzyme-style trace (FWD + REV)
  uint64_t tape_bytes = 0;    ///< bytes the FWD tapes
};

/// Records one training step's ops as element loops; run() finishes and simulates it.
/// A SimStep owns the thread's current sim::Tracer from construction until run() (so one step
/// records at a time per thread); its SimTensors are invalid after run().
class SimStep {
 public:
  explicit SimStep(std::string name);
  ~SimStep();
  SimStep(const SimStep&) = delete;
  SimStep& operator=(const SimStep&) = delete;

  /// A differentiable input (a parameter): its gradient is returned by run().
  SimTensor param(const std::string& name, const Tensor& value);
  /// An input without gradient (images, features).
  SimTensor data(const std::string& name, const Tensor& value);

  SimTensor linear(const SimTensor& x, const SimTensor& weight, const SimTensor* bias = nullptr,
                   Activation act = Activation::None);
  SimTensor linear(const SimTensor& x, const SimTensor& weight, const SimTensor& bias,
                   Activation act = Activation::None) {
    return linear(x, weight, &bias, act);
  }
  SimTensor matmul(const SimTensor& a, const SimTensor& b);
  SimTensor add(const SimTensor& a, const SimTensor& b);
  SimTensor relu(const SimTensor& x);
  SimTensor tanh(const SimTensor& x);
  SimTensor conv2d(const SimTensor& x, const SimTensor& weight, const SimTensor* bias = nullptr, int64_t stride = 1,
                   int64_t padding = 0);
  SimTensor conv2d(const SimTensor& x, const SimTensor& weight, const SimTensor& bias, int64_t stride = 1,
                   int64_t padding = 0) {
    return conv2d(x, weight, &bias, stride, padding);
  }
  SimTensor max_pool2d(const SimTensor& x, int64_t kernel, int64_t stride = 0);
  SimTensor avg_pool2d(const SimTensor& x, int64_t kernel, int64_t stride = 0);
  /// Dims [start_dim, end] merged into one (no instructions: the same array).
  SimTensor flatten(const SimTensor& x, int64_t start_dim = 1);
  /// The same elements (row-major) with another shape of equal numel (no instructions).
  SimTensor reshape(const SimTensor& x, std::vector<int64_t> shape);
  /// Sets the step's loss: mean cross-entropy of logits [N, C] against class indices [N]
  /// (i64 or i32). Exactly one loss per step.
  void cross_entropy(const SimTensor& logits, const Tensor& target);

  /// Finishes the trace, replays it (loss, gradients) and simulates it on both systems. Once.
  SimStepReport run(const SimStepOptions& options = {});

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// Records the ops a model runs on this thread into a SimStep (Note [Sim session]).
class SimSession {
 public:
  /// Selects the `sim` backend and installs the recorder on this thread. Throws if a session or
  /// a SimStep is already recording on this thread.
  explicit SimSession(SimStepOptions options = {}, std::string name = "session");
  /// end()s the session if still active.
  ~SimSession();
  SimSession(const SimSession&) = delete;
  SimSession& operator=(const SimSession&) = delete;

  /// Runs the recorded step for `loss` (the output of the recorded cross_entropy): replays and
  /// simulates it, accumulates each parameter's gradient into its `.grad` and returns the report
  /// (its `grads` follow parameters()). Once per session, before end().
  SimStepReport backward(const Tensor& loss);
  /// Restores the previous backend and recorder on this thread (must be the session's thread).
  /// Without a backward() first the recorded step is dropped. Idempotent.
  void end();
  bool active() const;
  /// The parameters found so far (requires-grad leaves), in first-use order.
  const std::vector<Tensor>& parameters() const;
  /// Ops lowered so far.
  uint64_t ops() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace strata::sim
