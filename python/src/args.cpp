// Argument parsing shared by the bindings: ints, int lists and dims, with PyTorch's conventions.

#include "bindings.h"

namespace strata::python {

int64_t int_from_py(py::handle obj, const char* op, const char* what) {
  if (PyBool_Check(obj.ptr()) || !PyIndex_Check(obj.ptr()))
    throw BindingTypeError(msg(op, "(): ", what, " must be an int, got ", Py_TYPE(obj.ptr())->tp_name));
  py::object index = py::reinterpret_steal<py::object>(PyNumber_Index(obj.ptr()));
  if (!index) throw py::error_already_set();
  const long long v = PyLong_AsLongLong(index.ptr());
  if (v == -1 && PyErr_Occurred()) throw py::error_already_set();  // OverflowError
  return static_cast<int64_t>(v);
}

Dims int_list_from_sequence(py::handle seq, const char* op, const char* what) {
  if (!PyBool_Check(seq.ptr()) && PyIndex_Check(seq.ptr())) return Dims{int_from_py(seq, op, what)};
  if (!PyTuple_Check(seq.ptr()) && !PyList_Check(seq.ptr()) &&
      !(PySequence_Check(seq.ptr()) && !PyUnicode_Check(seq.ptr()) && !PyBytes_Check(seq.ptr())))
    throw BindingTypeError(msg(op, "(): ", what, " must be a tuple of ints, got ", Py_TYPE(seq.ptr())->tp_name));
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
      throw BindingIndexError(
          msg(op, "(): dimension out of range (expected to be in range of [-1, 0], but got ", dim, ")"));
    return 0;
  }
  if (rank == 0)
    throw BindingIndexError(msg(op, "(): dimension specified as ", dim, " but the tensor has no dimensions"));
  if (dim < -rank || dim >= rank)
    throw BindingIndexError(msg(op, "(): dimension out of range (expected to be in range of [", -rank, ", ", rank - 1,
                                "], but got ", dim, ")"));
  return dim < 0 ? dim + rank : dim;
}

void check_cpu_device(py::handle device, const char* op) {
  if (device.is_none()) return;
  const std::string d = py::str(device);
  if (d != "cpu" && d != "cpu:0")
    throw BindingValueError(
        msg(op, ": device ", quote_field(d), " is not available; Strata runs on the CPU (device='cpu')"));
}

// ---- numbers, tensors and the common op arguments (the ops bindings) ---------------------------

bool is_number(py::handle h) {
  if (py::isinstance<Tensor>(h) || py::isinstance<py::array>(h)) return false;
  return PyBool_Check(h.ptr()) || PyLong_Check(h.ptr()) || PyFloat_Check(h.ptr()) ||
         (PyNumber_Check(h.ptr()) && !PySequence_Check(h.ptr()) && !PyComplex_Check(h.ptr()));
}

Scalar scalar_arg(py::handle h, const char* op, const char* name) {
  if (!is_number(h)) throw BindingTypeError(msg(op, "(): argument '", name, "' must be a number, not ", type_name(h)));
  if (PyBool_Check(h.ptr())) return Scalar(h.ptr() == Py_True);
  if (PyLong_Check(h.ptr()) || (PyIndex_Check(h.ptr()) && !PyFloat_Check(h.ptr()))) {
    int overflow = 0;
    const long long v =
        PyLong_AsLongLongAndOverflow(py::reinterpret_steal<py::object>(PyNumber_Index(h.ptr())).ptr(), &overflow);
    if (overflow != 0)
      throw BindingValueError(
          msg(op, "(): the integer '", name, "' does not fit in int64 (", py::str(h).cast<std::string>(), ")"));
    if (v == -1 && PyErr_Occurred()) throw py::error_already_set();
    return Scalar(static_cast<int64_t>(v));
  }
  const double v = PyFloat_AsDouble(h.ptr());
  if (v == -1.0 && PyErr_Occurred()) throw py::error_already_set();
  return Scalar(v);
}

TensorOrScalar tensor_or_scalar(py::handle h, const char* op, const char* name) {
  if (py::isinstance<Tensor>(h)) return h.cast<Tensor>();
  return scalar_arg(h, op, name);
}

double number_arg(py::handle h, const char* op, const char* name) {
  if (!is_number(h)) throw BindingTypeError(msg(op, "(): argument '", name, "' must be a number, not ", type_name(h)));
  const double v = PyFloat_AsDouble(h.ptr());
  if (v == -1.0 && PyErr_Occurred()) throw py::error_already_set();
  return v;
}

Tensor opt_tensor(py::handle h, const char* op, const char* name) {
  if (h.is_none()) return Tensor();
  return tensor_arg(h, op, name);
}

int64_t dim_arg(py::handle h, const char* op) { return int_from_py(h, op, "dim"); }

// An int (used for all `n` dims) or a sequence of `n` ints: kernel_size, stride, padding, dilation.
Dims int_tuple_arg(py::handle h, std::size_t n, const char* op, const char* name) {
  Dims v = int_list_from_sequence(h, op, name);
  if (v.size() == 1) v.resize(n, v[0]);
  if (v.size() != n) {
    const std::string wanted = n == 1   ? "a sequence of one int"
                               : n == 2 ? "a pair of ints"
                                        : std::to_string(n) + " ints";
    throw BindingValueError(msg(op, "(): ", name, " must be an int or ", wanted, ", got ", v.size(), " values"));
  }
  return v;
}

Dims pair_arg(py::handle h, const char* op, const char* name) { return int_tuple_arg(h, 2, op, name); }

// None, an int or a sequence of ints.
std::optional<Dims> dims_arg(py::handle h, const char* op) {
  if (h.is_none()) return std::nullopt;
  return int_list_from_sequence(h, op, "dim");
}

Reduction reduction_arg(py::handle h, const char* op) {
  if (!py::isinstance<py::str>(h))
    throw BindingTypeError(msg(op, "(): argument 'reduction' must be str, not ", type_name(h)));
  const std::string r = h.cast<std::string>();
  if (r == "mean") return Reduction::Mean;
  if (r == "sum") return Reduction::Sum;
  if (r == "none") return Reduction::None;
  throw BindingValueError(msg(r, " is not a valid value for reduction (", op, "(): expected 'none', 'mean' or 'sum')"));
}

void check_rank(const Tensor& t, std::initializer_list<int64_t> ranks, const char* op, const char* name) {
  for (int64_t r : ranks)
    if (t.dim() == r) return;
  std::string expected;
  for (int64_t r : ranks) expected += (expected.empty() ? "" : " or ") + std::to_string(r) + "-D";
  throw BindingValueError(msg(op, "(): expected ", expected, " ", name, ", got ", t.dim(), "-D ", t.describe()));
}

void check_no_dtype(py::handle dtype, const char* op) {
  if (!dtype.is_none())
    raise_not_implemented(msg(op, "(): the 'dtype' argument is not supported by Strata (convert with .to() first)"));
}

}  // namespace strata::python
