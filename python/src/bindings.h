#pragma once
// Shared pieces of the strata._C extension: the Python dtype objects, errors raised by the binding
// layer, argument parsing, and NumPy interop. Each init_* function binds one part of the module.

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "core/scalar.h"
#include "core/shape.h"
#include "core/tensor.h"
#include "core/text.h"
#include "ops/softmax_loss.h"

namespace strata::nn {
class Module;
}

namespace strata::python {

namespace py = pybind11;

// ---- errors -------------------------------------------------------------------------------------
// Note [Binding errors]
// Every error Strata raises in Python is a strata.StrataError (a RuntimeError). Errors detected by
// the binding layer where PyTorch/NumPy raise IndexError, TypeError or ValueError are raised as
// subclasses that derive from both StrataError and that builtin, so `except IndexError` and
// `except strata.StrataError` both catch them. The C++ types below carry the class to raise.
struct BindingIndexError : Error {
  using Error::Error;
};
struct BindingTypeError : Error {
  using Error::Error;
};
struct BindingValueError : Error {
  using Error::Error;
};

/// Formats its arguments into one message, like STRATA_CHECK.
template <typename... Args>
std::string msg(const Args&... args) {
  return detail::format_message(args...);
}

// ---- Python objects held by C++ and hook handles -------------------------------------------------
/// A Python object kept by C++ code that may drop it without the GIL (a hook, a backward
/// callable; Note [Python saved-tensor hooks] in autograd_bindings.cpp): its destructor acquires
/// the GIL, and leaks the reference instead if the interpreter is already gone.
struct PyRef {
  py::object obj;
  explicit PyRef(py::object o) : obj(std::move(o)) {}
  PyRef(const PyRef&) = delete;
  PyRef& operator=(const PyRef&) = delete;
  ~PyRef() {
    if (!Py_IsInitialized()) {
      obj.release();
      return;
    }
    py::gil_scoped_acquire gil;
    obj = py::object();
  }
};

/// What the register_*hook methods return (strata.utils.hooks.RemovableHandle, PyTorch's
/// torch.utils.hooks.RemovableHandle): remove() unregisters the hook, once.
struct RemovableHandle {
  uint64_t id = 0;
  std::function<void()> remover;
  void remove() {
    if (!remover) return;
    std::function<void()> r = std::move(remover);
    remover = nullptr;
    r();
  }
};

// ---- dtypes -------------------------------------------------------------------------------------
/// The C++ side of a `strata.dtype` object. There is exactly one Python object per DType.
struct PyDType {
  DType value;
};

/// The unique `strata.dtype` object for `t`.
py::object dtype_object(DType t);
/// Python name without the module: "float32", "bfloat16", "int64", "bool", ...
const char* dtype_py_name(DType t);
/// Accepts a strata.dtype, a name string ("float32", "f32", "long", ...), a NumPy dtype or type,
/// or Python's float/int/bool types (NumPy's meaning: float64, int64, bool).
DType dtype_from_py(py::handle obj, const char* op);
/// Optional dtype argument: None gives nullopt.
std::optional<DType> optional_dtype(py::handle obj, const char* op);

/// The Strata dtype of a NumPy dtype, or nullopt when Strata has no such dtype.
std::optional<DType> dtype_from_numpy(const py::dtype& dt);
/// The NumPy dtype for `t`; raises TypeError for bf16 (NumPy has none).
py::dtype numpy_dtype(DType t, const char* op);

// ---- arguments ----------------------------------------------------------------------------------
/// Sizes given as `*ints` or as one sequence of ints (torch's `view(2, 3)` / `view((2, 3))`).
Dims int_list_from_args(const py::args& args, const char* op, const char* what);
/// A sequence of ints (or a single int) as Dims.
Dims int_list_from_sequence(py::handle seq, const char* op, const char* what);
/// An integer argument (accepts anything with __index__, rejects bool and float).
int64_t int_from_py(py::handle obj, const char* op, const char* what);
/// Wraps a dim into [0, rank) or raises IndexError like PyTorch ("dimension out of range"). With
/// `scalar_ok`, a 0-dim tensor accepts dims 0 and -1.
int64_t wrap_dim_py(int64_t dim, int64_t rank, const char* op, bool scalar_ok = false);
/// Accepts device=None, "cpu", "cpu:0" or an object whose str() is one of those (torch.device);
/// anything else raises ValueError naming `op` (Strata runs on the CPU only).
void check_cpu_device(py::handle device, const char* op);

// ---- NumPy interop ------------------------------------------------------------------------------
/// Zero-copy tensor over a NumPy array's memory; the tensor keeps the array alive.
Tensor tensor_from_numpy(py::handle obj);
/// Zero-copy NumPy view of a tensor; the array keeps `self` (a strata.Tensor object) alive.
py::array tensor_to_numpy(py::handle self, const char* op);
/// A new tensor holding a copy of `data` (a Tensor, a NumPy array, nested sequences or a scalar).
Tensor tensor_from_data(py::handle data, std::optional<DType> dtype, const char* op);

// ---- module parts -------------------------------------------------------------------------------
void init_errors(py::module_& m);
void init_dtypes(py::module_& m);
void init_tensor(py::module_& m);
void init_factories(py::module_& m);
void init_autograd(py::module_& m);
/// copy.deepcopy of a leaf: its values, requires_grad and a copy of its .grad; throws for a
/// non-leaf, naming `op` (Note [Copying and pickling tensors] in tensor_bindings.cpp).
Tensor copy_leaf(const Tensor& t, const char* op);
void init_nn(py::module_& m);  // nn_bindings.cpp: strata._C.nn
/// Module's register_*hook methods, and Module.__call__ for a module with hooks
/// (module_hooks_bindings.cpp; Note [Module hooks] in models/module_hooks.cpp).
void def_module_hooks(py::handle module_class);
py::object call_module_with_hooks(nn::Module& m, const py::args& args, const py::kwargs& kwargs);
void init_checkpoint(py::module_& m);  // checkpoint_bindings.cpp
void init_zoo(py::module_& m);         // zoo_bindings.cpp: strata._C.models (after init_nn)
void init_ops(py::module_& m);
void init_indexing(py::module_& m);   // indexing_bindings.cpp: __getitem__/__setitem__, scatter, masked ops
void init_semantics(py::module_& m);  // semantics_bindings.cpp: comparisons, index reductions, promotion
void init_math(py::module_& m);       // math_bindings.cpp: issue 26 part 4's ops (element-wise math, ...)
void init_dlrm(py::module_& m);       // dlrm_bindings.cpp: strata._C.dlrm
void init_metrics(py::module_& m);    // metrics_bindings.cpp: strata._C.metrics
void init_nn_extra(py::module_& m);   // nn_extra_bindings.cpp: conv1d, conv_transpose2d, group_norm, pad, ...
}  // namespace strata::python
namespace strata::metrics {
struct BinaryMetrics;
}
namespace strata::python {
/// {'loss', 'log_loss', 'accuracy', 'auc', 'samples'} (metrics_bindings.cpp).
py::dict metrics_dict(const metrics::BinaryMetrics& r);

// ---- ops and differentiable views (ops_bindings.cpp) ----------------------------------------------
/// The Python type name of `h` (for messages).
inline const char* type_name(py::handle h) { return Py_TYPE(h.ptr())->tp_name; }
/// True for a Python number (bool, int, float or a NumPy scalar), false for tensors and arrays.
bool is_number(py::handle h);
/// A Python number as a Scalar of its kind (bool, int as int64, float); TypeError otherwise.
Scalar scalar_arg(py::handle h, const char* op, const char* name);
/// An argument that PyTorch accepts as a Tensor or a Python number (where's input/other, masked_fill's
/// value, scatter's src): parse it with the GIL held, then std::visit the op with the GIL released.
using TensorOrScalar = std::variant<Tensor, Scalar>;
/// `h` as a Tensor when it is one, else as scalar_arg(h, op, name) (TypeError for anything else).
TensorOrScalar tensor_or_scalar(py::handle h, const char* op, const char* name);
/// A Python number as a double; TypeError "op(): argument 'name' must be a number, not <type>".
double number_arg(py::handle h, const char* op, const char* name);
/// None as an undefined tensor, else tensor_arg(h, op, name).
Tensor opt_tensor(py::handle h, const char* op, const char* name);
/// An int argument named "dim".
int64_t dim_arg(py::handle h, const char* op);
/// An int (used for all `n` dims) or a sequence of `n` ints (kernel_size, stride, padding, dilation).
Dims int_tuple_arg(py::handle h, std::size_t n, const char* op, const char* name);
/// int_tuple_arg for two dims.
Dims pair_arg(py::handle h, const char* op, const char* name);
/// None, an int or a sequence of ints (a dim argument).
std::optional<Dims> dims_arg(py::handle h, const char* op);
/// 'none', 'mean' or 'sum' (PyTorch's errors otherwise).
Reduction reduction_arg(py::handle h, const char* op);
/// ValueError unless t.dim() is one of `ranks`.
void check_rank(const Tensor& t, std::initializer_list<int64_t> ranks, const char* op, const char* name);
/// NotImplementedError for a dtype= argument other than None.
void check_no_dtype(py::handle dtype, const char* op);
/// The torch.nn.functional ops (nn_functional_bindings.cpp), into strata._C.
void def_nn_functions(py::module_& m);
/// max(input, dim, keepdim) / min(...): the (values, indices) named tuple (semantics_bindings.cpp).
py::object extreme_dim_py(const Tensor& t, py::handle dim, py::handle keepdim, bool is_max);
/// `obj` as a Tensor, or TypeError "op(): argument 'name' must be Tensor, not <type>".
Tensor tensor_arg(py::handle obj, const char* op, const char* name);
/// True when ops on `t` record the graph (grad mode on and `t` requires grad).
bool records_grad(const Tensor& t);
/// `t` expanded to `sizes` (a view); recorded (ExpandBackward sums the gradient back) when `t`
/// requires grad and grad mode is on.
Tensor expand_diff(const Tensor& t, IntArrayRef sizes);
/// `t` viewed with `sizes` (same numel), recorded as a reshape when records_grad(t), else raw.
Tensor view_diff(const Tensor& t, IntArrayRef sizes);
/// A copy of `t` (contiguous when `contiguous_only` and t already is: t itself), recorded
/// (CloneBackward) when records_grad(t).
Tensor clone_diff(const Tensor& t, bool contiguous_only);
/// `t` converted to `dtype`, recorded (ToCopyBackward converts the gradient back) when
/// records_grad(t) and a conversion happened.
Tensor to_diff(const Tensor& t, DType dtype, bool copy);
/// A tuple or list of Tensors (TypeError otherwise, naming `op` and the argument `name`).
std::vector<Tensor> tensor_list(py::handle seq, const char* op, const char* name);
/// The tensors as a Python tuple.
py::tuple tensors_tuple(const std::vector<Tensor>& ts);
/// `self.op_(...)`: strata::apply_in_place (Note [In-place ops] in ops/inplace.h) with compute as
/// the op, run without the GIL; `saves_self` when the op's backward reads its input,
/// `other_requires_grad` when another operand requires grad. Returns self.
py::object inplace_op(py::object self, const char* op, bool saves_self, bool other_requires_grad,
                      const std::function<Tensor(const Tensor&)>& compute);
// Raises NotImplementedError with `what` (ops_bindings.cpp).
[[noreturn]] void raise_not_implemented(const std::string& what);
void init_optim(py::module_& m);
void init_memory(py::module_& m);    // strata._C._memory (memory_bindings.cpp)
void init_remat(py::module_& m);     // strata._C._remat_checkpoint (remat_bindings.cpp)
void init_sim(py::module_& m);       // sim_bindings.cpp: strata._C.sim
void init_dist(py::module_& m);      // dist_bindings.cpp: strata._C.dist (after init_nn)
void init_training(py::module_& m);  // training_bindings.cpp: Generator, nn.init, clip_grad (after init_nn)

}  // namespace strata::python
