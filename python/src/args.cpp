// Argument parsing shared by the bindings: ints, int lists and dims, with PyTorch's conventions.

#include "bindings.h"

namespace strata::python {

int64_t int_from_py(py::handle obj, const char* op, const char* what) {
  if (PyBool_Check(obj.ptr()) || !PyIndex_Check(obj.ptr()))
    throw BindingTypeError(
        msg(op, "(): ", what, " must be an int, got ", Py_TYPE(obj.ptr())->tp_name));
  py::object index = py::reinterpret_steal<py::object>(PyNumber_Index(obj.ptr()));
  if (!index) throw py::error_already_set();
  const long long v = PyLong_AsLongLong(index.ptr());
  if (v == -1 && PyErr_Occurred()) throw py::error_already_set();  // OverflowError
  return static_cast<int64_t>(v);
}

Dims int_list_from_sequence(py::handle seq, const char* op, const char* what) {
  if (!PyBool_Check(seq.ptr()) && PyIndex_Check(seq.ptr()))
    return Dims{int_from_py(seq, op, what)};
  if (!PyTuple_Check(seq.ptr()) && !PyList_Check(seq.ptr()) &&
      !(PySequence_Check(seq.ptr()) && !PyUnicode_Check(seq.ptr()) && !PyBytes_Check(seq.ptr())))
    throw BindingTypeError(msg(op, "(): ", what, " must be a tuple of ints, got ",
                               Py_TYPE(seq.ptr())->tp_name));
  Dims out;
  std::size_t pos = 0;
  for (py::handle item : py::reinterpret_borrow<py::sequence>(seq)) {
    if (PyBool_Check(item.ptr()) || !PyIndex_Check(item.ptr()))
      throw BindingTypeError(msg(op, "(): ", what, " must be a tuple of ints, but found an element of type ",
                                 Py_TYPE(item.ptr())->tp_name, " at position ", pos));
    out.push_back(int_from_py(item, op, what));
    ++pos;
  }
  return out;
}

Dims int_list_from_args(const py::args& args, const char* op, const char* what) {
  if (args.size() == 1 && (PyBool_Check(args[0].ptr()) || !PyIndex_Check(args[0].ptr())))
    return int_list_from_sequence(args[0], op, what);
  Dims out;
  for (std::size_t i = 0; i < args.size(); ++i) {
    py::handle item = args[i];
    if (PyBool_Check(item.ptr()) || !PyIndex_Check(item.ptr()))
      throw BindingTypeError(msg(op, "(): ", what, " must be ints or one tuple of ints, but found an element of type ",
                                 Py_TYPE(item.ptr())->tp_name, " at position ", i));
    out.push_back(int_from_py(item, op, what));
  }
  return out;
}

int64_t wrap_dim_py(int64_t dim, int64_t rank, const char* op, bool scalar_ok) {
  if (rank == 0 && scalar_ok) {
    if (dim != 0 && dim != -1)
      throw BindingIndexError(msg(op, "(): dimension out of range (expected to be in range of [-1, 0], but got ",
                                  dim, ")"));
    return 0;
  }
  if (rank == 0)
    throw BindingIndexError(
        msg(op, "(): dimension specified as ", dim, " but the tensor has no dimensions"));
  if (dim < -rank || dim >= rank)
    throw BindingIndexError(msg(op, "(): dimension out of range (expected to be in range of [",
                                -rank, ", ", rank - 1, "], but got ", dim, ")"));
  return dim < 0 ? dim + rank : dim;
}

void check_cpu_device(py::handle device, const char* op) {
  if (device.is_none()) return;
  const std::string d = py::str(device);
  if (d != "cpu" && d != "cpu:0")
    throw BindingValueError(msg(op, ": device ", quote_field(d), " is not available; Strata runs on the CPU (device='cpu')"));
}

}  // namespace strata::python
