#pragma once
/// @file
/// The `sim` backend (DESIGN.md §3 "ops/sim"; issue 9): Strata's tensor ops lowered to element
/// loops through the scalar tracer (ops/sim/active.h), so a training step's forward and backward
/// run on the simulated TapeFlow accelerator (ops/sim/machine.h) and come back with the same
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
/// - `run()` replays the program functionally (ops/sim/replay.h) for the loss and gradients and
///   simulates it twice: the Enzyme-style trace on an Enzyme system and the TapeFlow trace
///   (passes 1-4 for the TapeFlow system's scratchpad) on a TapeFlow system.
/// - Semantics follow the CPU ops: linear (weight [out, in], optional bias, activation None, ReLU
///   or Tanh), matmul of two matrices, add of equal shapes, relu, conv2d (NCHW, groups 1,
///   dilation 1, zero padding), max_pool2d / avg_pool2d (no padding, floor mode; max takes the
///   first maximum of the window, avg divides by the window size), flatten, cross_entropy (class
///   indices, mean over the batch).
/// - The `sim` Backend (sim_backend()) answers `supports()` for exactly these ops, so code run
///   under `BackendGuard("sim")` fails on the first op the simulator cannot lower. The op
///   functions of ops/ have no per-backend dispatch (ops/backend.h is a capability query), so
///   under the guard they still compute on the CPU kernels; SimStep is the lowering.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "ops/backend.h"
#include "ops/linalg.h"
#include "ops/sim/active.h"
#include "ops/sim/machine.h"

namespace strata::sim {

/// The `sim` backend; registered (register_backend) on the first call.
Backend& sim_backend();

/// A tensor of the traced step: an array of the trace and its shape (row-major).
struct SimTensor {
  Array array;
  std::vector<int64_t> shape;
  int64_t numel() const;
};

/// Which simulated systems run() uses (names of ops/sim/systems.h).
struct SimStepOptions {
  std::string enzyme_system = "Enzyme_32k";
  std::string tapeflow_system = "Tflow_32k";
};

/// The result of one simulated training step.
struct SimStepReport {
  double loss = 0;
  std::vector<Tensor> grads;     ///< per param(), in call order, shape and dtype of the param
  MachineReport enzyme;          ///< Enzyme-style trace on SimStepOptions::enzyme_system
  MachineReport tapeflow;        ///< TapeFlow trace on SimStepOptions::tapeflow_system
  uint64_t ops = 0;              ///< op calls lowered
  uint64_t instrs = 0;           ///< instructions of the Enzyme-style trace (FWD + REV)
  uint64_t tape_bytes = 0;       ///< bytes the FWD tapes
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
  SimTensor conv2d(const SimTensor& x, const SimTensor& weight, const SimTensor* bias = nullptr,
                   int64_t stride = 1, int64_t padding = 0);
  SimTensor conv2d(const SimTensor& x, const SimTensor& weight, const SimTensor& bias, int64_t stride = 1,
                   int64_t padding = 0) {
    return conv2d(x, weight, &bias, stride, padding);
  }
  SimTensor max_pool2d(const SimTensor& x, int64_t kernel, int64_t stride = 0);
  SimTensor avg_pool2d(const SimTensor& x, int64_t kernel, int64_t stride = 0);
  /// Dims [start_dim, end] merged into one (no instructions: the same array).
  SimTensor flatten(const SimTensor& x, int64_t start_dim = 1);
  /// Sets the step's loss: mean cross-entropy of logits [N, C] against class indices [N]
  /// (i64 or i32). Exactly one loss per step.
  void cross_entropy(const SimTensor& logits, const Tensor& target);

  /// Finishes the trace, replays it (loss, gradients) and simulates it on both systems. Once.
  SimStepReport run(const SimStepOptions& options = {});

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace strata::sim
