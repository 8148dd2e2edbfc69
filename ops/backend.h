#pragma once
/// @file
/// The backend interface: which implementation runs the ops, with a capability query.
///
/// The CPU backend (oneDNN primitives where oneDNN has them, our TBB kernels elsewhere) supports
/// every op and is the reference. A second backend (ops/sim, the simulated accelerator) registers
/// itself by name; while it is selected, an op it does not support fails with an error naming the
/// op and the backend instead of silently running elsewhere.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/tensor.h"
#include "ops/op_list.h"

namespace strata {

enum class Activation;  // ops/linalg.h
enum class Reduction;   // ops/softmax_loss.h

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string_view name() const = 0;
  /// True when this backend can run `op` (forward and backward).
  virtual bool supports(OpKind op) const = 0;
  /// What implements `op` here, for reports ("oneDNN convolution", "Strata kernel (TBB)").
  virtual std::string implementation(OpKind op) const = 0;
};

/// The CPU backend (always registered, the default).
Backend& cpu_backend();
/// Makes a backend selectable by name; the backend must outlive the process's use of it.
void register_backend(Backend& backend);
/// Null if no backend has that name.
Backend* find_backend(std::string_view name);
std::vector<std::string> backend_names();

/// The backend ops run on, per thread (CPU unless a BackendGuard says otherwise).
Backend& current_backend();

/// Selects a backend for this thread until destroyed.
class BackendGuard {
 public:
  explicit BackendGuard(Backend& backend);
  /// By registered name; throws strata::Error listing the known backends.
  explicit BackendGuard(std::string_view name);
  ~BackendGuard();
  BackendGuard(const BackendGuard&) = delete;
  BackendGuard& operator=(const BackendGuard&) = delete;

 private:
  Backend* previous_;
};

namespace ops::detail {
/// Called at the entry of every op: throws unless the current backend supports `op`.
void check_backend(OpKind op);

/// Note [Op recording hook]
/// A backend that does not compute with the op functions' kernels but *records* what they compute
/// (ops/sim's SimSession lowers each op to element loops of its own program) installs an
/// OpRecorder on its thread. Each op function the recorder knows calls it after computing its
/// output (and recording its autograd node), with the op's inputs, attributes and output; the
/// CPU result stays the op's result, so code above ops runs unchanged. Without a recorder the
/// cost is one thread-local load and a null check per op. A recorder that cannot lower a call
/// (an attribute it does not support) throws strata::Error naming the op and the backend; ops
/// outside the backend's set never reach it (check_backend throws first).
/// Dependency direction: ops/ knows only this interface; ops/sim implements it.
class OpRecorder {
 public:
  virtual ~OpRecorder() = default;
  virtual void linear(const Tensor& x, const Tensor& weight, const Tensor& bias, Activation act, const Tensor& out) = 0;
  virtual void matmul(const Tensor& a, const Tensor& b, const Tensor& out) = 0;
  /// a + alpha * b (broadcasting on the CPU).
  virtual void add(const Tensor& a, const Tensor& b, double alpha, const Tensor& out) = 0;
  /// a + s.
  virtual void add_scalar(const Tensor& a, double s, const Tensor& out) = 0;
  virtual void relu(const Tensor& x, const Tensor& out) = 0;
  virtual void tanh(const Tensor& x, const Tensor& out) = 0;
  virtual void conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias, IntArrayRef stride,
                      IntArrayRef padding, IntArrayRef dilation, int64_t groups, const Tensor& out) = 0;
  virtual void max_pool2d(const Tensor& x, IntArrayRef kernel_size, IntArrayRef stride, IntArrayRef padding,
                          IntArrayRef dilation, bool ceil_mode, const Tensor& out) = 0;
  virtual void avg_pool2d(const Tensor& x, IntArrayRef kernel_size, IntArrayRef stride, IntArrayRef padding,
                          bool ceil_mode, bool count_include_pad, const Tensor& out) = 0;
  /// reshape and flatten (flatten calls reshape): same elements in row-major order, new shape.
  virtual void reshape(const Tensor& x, const Tensor& out) = 0;
  virtual void cross_entropy(const Tensor& logits, const Tensor& target, const Tensor& weight, Reduction reduction,
                             int64_t ignore_index, double label_smoothing, const Tensor& out) = 0;
};

/// The recorder installed on this thread, or null (the common case).
OpRecorder* op_recorder();
/// Installs `recorder` (null: none) on this thread; returns the previous one.
OpRecorder* set_op_recorder(OpRecorder* recorder);
}  // namespace ops::detail

}  // namespace strata
