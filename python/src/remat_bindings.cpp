// strata._C._remat_checkpoint: the C++ activation checkpoint (autograd/remat/checkpoint.h, Note
// [Checkpointed segments]) behind strata.utils.checkpoint (python/strata/utils/checkpoint.py).

#include <pybind11/stl.h>

#include <memory>
#include <utility>

#include "autograd/remat/checkpoint.h"
#include "bindings.h"

namespace strata::python {

namespace {

// The Python function of a segment. The checkpoint's node keeps it for the re-run and may drop it
// during backward without the GIL (as in Note [Python saved-tensor hooks]).
struct PyFunction {
  py::object fn;
  explicit PyFunction(py::object f) : fn(std::move(f)) {}
  PyFunction(const PyFunction&) = delete;
  PyFunction& operator=(const PyFunction&) = delete;
  ~PyFunction() {
    if (!Py_IsInitialized()) {
      fn.release();
      return;
    }
    py::gil_scoped_acquire gil;
    fn = py::object();
  }
};

// Calls fn(*inputs); it must return a list or tuple of Tensors.
autograd::TensorList call(const PyFunction& f, const autograd::TensorList& inputs) {
  py::gil_scoped_acquire gil;
  py::tuple args(inputs.size());
  for (std::size_t i = 0; i < inputs.size(); ++i) args[i] = py::cast(inputs[i]);
  py::object out = f.fn(*args);
  if (!py::isinstance<py::list>(out) && !py::isinstance<py::tuple>(out))
    throw BindingTypeError(msg("_remat_checkpoint: the segment function must return a list or tuple of Tensors, got ",
                               Py_TYPE(out.ptr())->tp_name));
  autograd::TensorList result;
  std::size_t i = 0;
  for (py::handle item : py::reinterpret_borrow<py::sequence>(out)) {
    if (!py::isinstance<Tensor>(item))
      throw BindingTypeError(msg("_remat_checkpoint: output ", i, " of the segment function is ",
                                 Py_TYPE(item.ptr())->tp_name, ", expected a Tensor"));
    result.push_back(item.cast<Tensor>());
    ++i;
  }
  return result;
}

}  // namespace

void init_remat(py::module_& m) {
  m.def(
      "_remat_checkpoint",
      [](py::object fn, const py::sequence& inputs, bool preserve_rng_state) {
        if (!PyCallable_Check(fn.ptr()))
          throw BindingTypeError(msg("_remat_checkpoint: function must be callable, got ", Py_TYPE(fn.ptr())->tp_name));
        autograd::TensorList in;
        std::size_t i = 0;
        for (py::handle item : inputs) {
          if (!py::isinstance<Tensor>(item))
            throw BindingTypeError(
                msg("_remat_checkpoint: input ", i, " is ", Py_TYPE(item.ptr())->tp_name, ", expected a Tensor"));
          in.push_back(item.cast<Tensor>());
          ++i;
        }
        auto f = std::make_shared<PyFunction>(std::move(fn));
        remat::SegmentFn segment = [f](const autograd::TensorList& xs) { return call(*f, xs); };
        autograd::TensorList out;
        {
          py::gil_scoped_release release;
          out = remat::checkpoint(std::move(segment), in, preserve_rng_state);
        }
        return out;
      },
      py::arg("function"), py::arg("inputs"), py::arg("preserve_rng_state") = true,
      "Runs function(*inputs) -> [Tensor] keeping none of the values saved inside it for backward; they "
      "are recomputed by re-running it during backward (autograd/remat/checkpoint.h).");
}

}  // namespace strata::python
