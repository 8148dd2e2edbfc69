// Module-level factories with torch-like signatures: zeros(*size, dtype=None), arange(...), tensor(...).

#include <string>
#include <vector>

#include "bindings.h"
#include "core/factories.h"

namespace strata::python {

namespace {

using SizedFactory = Tensor (*)(IntArrayRef, DType);

// Defines `name(*size, dtype=None)`; size is ints or one sequence of ints.
void def_sized(py::module_& m, const char* name, SizedFactory make, DType default_dtype, const char* doc) {
  m.def(
      name,
      [name, make, default_dtype](const py::args& size, py::handle dtype) {
        if (size.empty())
          throw BindingTypeError(msg(name, "() missing the required argument 'size' (pass ints or a "
                                           "tuple; () makes a 0-dim tensor)"));
        const Dims sizes = int_list_from_args(size, name, "size");
        const DType d = optional_dtype(dtype, name).value_or(default_dtype);
        py::gil_scoped_release release;
        return make(sizes, d);
      },
      py::arg("dtype") = py::none(), doc);
}

// Defines `name(input, *, dtype=None)`: a new tensor with input's shape.
void def_like(py::module_& m, const char* name, SizedFactory make, const char* doc) {
  m.def(
      name,
      [name, make](const Tensor& input, py::handle dtype) {
        const DType d = optional_dtype(dtype, name).value_or(input.dtype());
        py::gil_scoped_release release;
        return make(input.sizes(), d);
      },
      py::arg("input"), py::kw_only(), py::arg("dtype") = py::none(), doc);
}

bool is_python_bool(py::handle v) {
  return PyBool_Check(v.ptr()) || py::isinstance(v, py::module_::import("numpy").attr("bool_"));
}
bool is_integer(py::handle v) {
  return !is_python_bool(v) && PyIndex_Check(v.ptr()) && !py::isinstance<Tensor>(v);
}

double to_double(py::handle v, const char* op, const char* what) {
  if (is_python_bool(v))
    throw BindingTypeError(msg(op, "(): ", what, " must be a number, got bool"));
  if (py::isinstance<Tensor>(v)) return v.cast<const Tensor&>().item<double>();
  if (!PyNumber_Check(v.ptr()))
    throw BindingTypeError(msg(op, "(): ", what, " must be a number, got ", Py_TYPE(v.ptr())->tp_name));
  const double d = PyFloat_AsDouble(v.ptr());
  if (d == -1.0 && PyErr_Occurred()) throw py::error_already_set();
  return d;
}

// Binds positional and keyword arguments to `names` the way Python would, for functions whose
// positional meaning depends on how many were given (arange, randint). Returns one handle per
// name (null when absent).
std::vector<py::object> bind_arguments(const char* op, const std::vector<const char*>& names,
                                       const std::vector<const char*>& positional_names,
                                       const py::args& args, const py::kwargs& kwargs) {
  std::vector<py::object> out(names.size());
  auto index_of = [&](const std::string& name) -> int {
    for (std::size_t i = 0; i < names.size(); ++i)
      if (name == names[i]) return static_cast<int>(i);
    return -1;
  };
  for (std::size_t i = 0; i < args.size(); ++i)
    out[static_cast<std::size_t>(index_of(positional_names[i]))] = py::reinterpret_borrow<py::object>(args[i]);
  for (auto item : kwargs) {
    const std::string key = item.first.cast<std::string>();
    const int at = index_of(key);
    if (at < 0) throw BindingTypeError(msg(op, "() got an unexpected keyword argument ", quote_field(key)));
    if (out[static_cast<std::size_t>(at)])
      throw BindingTypeError(msg(op, "() got multiple values for argument ", quote_field(key)));
    out[static_cast<std::size_t>(at)] = py::reinterpret_borrow<py::object>(item.second);
  }
  return out;
}

Tensor arange_py(const py::args& args, const py::kwargs& kwargs) {
  static const std::vector<const char*> names = {"start", "end", "step", "dtype"};
  if (args.size() > 3) throw BindingTypeError(msg("arange() takes at most 3 positional arguments (", args.size(), " given)"));
  std::vector<const char*> positional;
  if (args.size() == 1) positional = {"end"};
  if (args.size() == 2) positional = {"start", "end"};
  if (args.size() == 3) positional = {"start", "end", "step"};
  const auto a = bind_arguments("arange", names, positional, args, kwargs);
  if (!a[1]) throw BindingTypeError("arange() missing the required argument 'end'");
  // PyTorch's rule: the result is int64 when start, end and step are all ints, float32 otherwise
  // (decided by the Python types, so arange(0.0, 5) is float32 even though 0.0 is whole).
  bool all_integers = true;
  for (int i = 0; i < 3; ++i)
    if (a[i] && !is_integer(a[i])) all_integers = false;
  const double start = a[0] ? to_double(a[0], "arange", "start") : 0.0;
  const double end = to_double(a[1], "arange", "end");
  const double step = a[2] ? to_double(a[2], "arange", "step") : 1.0;
  const DType dtype = (a[3] && !a[3].is_none()) ? dtype_from_py(a[3], "arange")
                                                 : (all_integers ? DType::i64 : DType::f32);
  py::gil_scoped_release release;
  return arange(start, end, step, {dtype, nullptr});
}

Tensor randint_py(const py::args& args, const py::kwargs& kwargs) {
  static const std::vector<const char*> names = {"low", "high", "size", "dtype"};
  if (args.size() > 3) throw BindingTypeError(msg("randint() takes at most 3 positional arguments (", args.size(), " given)"));
  std::vector<const char*> positional;
  const bool size_kw = kwargs.contains("size");
  if (args.size() == 1) positional = {"high"};
  if (args.size() == 2) positional = size_kw ? std::vector<const char*>{"low", "high"}
                                             : std::vector<const char*>{"high", "size"};
  if (args.size() == 3) positional = {"low", "high", "size"};
  const auto a = bind_arguments("randint", names, positional, args, kwargs);
  if (!a[1]) throw BindingTypeError("randint() missing the required argument 'high'");
  if (!a[2]) throw BindingTypeError("randint() missing the required argument 'size' (a tuple of ints)");
  const int64_t low = a[0] ? int_from_py(a[0], "randint", "low") : 0;
  const int64_t high = int_from_py(a[1], "randint", "high");
  const Dims sizes = int_list_from_sequence(a[2], "randint", "size");
  const DType dtype = (a[3] && !a[3].is_none()) ? dtype_from_py(a[3], "randint") : DType::i64;
  py::gil_scoped_release release;
  return randint(low, high, sizes, {dtype, nullptr});
}

Tensor as_tensor_py(py::handle data, py::handle dtype_obj) {
  const std::optional<DType> dtype = optional_dtype(dtype_obj, "as_tensor");
  if (py::isinstance<Tensor>(data)) {
    const Tensor t = data.cast<Tensor>();
    py::gil_scoped_release release;
    return dtype ? t.to(*dtype) : t;
  }
  // Share the array's memory when Strata can view it as it is; copy otherwise.
  if (py::isinstance<py::array>(data)) {
    auto arr = py::reinterpret_borrow<py::array>(data);
    if (dtype_from_numpy(arr.dtype()) && arr.dtype().attr("isnative").cast<bool>() &&
        py::cast<bool>(arr.attr("flags").attr("aligned"))) {
      bool strides_ok = true;
      for (py::ssize_t d = 0; d < arr.ndim(); ++d)
        if (arr.shape(d) > 1 && (arr.strides(d) < 0 || arr.strides(d) % arr.itemsize() != 0))
          strides_ok = false;
      if (strides_ok) {
        const Tensor t = tensor_from_numpy(arr);
        py::gil_scoped_release release;
        return dtype ? t.to(*dtype) : t;
      }
    }
  }
  return tensor_from_data(data, dtype, "as_tensor");
}

}  // namespace

void init_factories(py::module_& m) {
  def_sized(m, "empty", [](IntArrayRef s, DType d) { return empty(s, {d, nullptr}); }, DType::f32,
            "empty(*size, dtype=None): an uninitialized tensor (default dtype float32).");
  def_sized(m, "zeros", [](IntArrayRef s, DType d) { return zeros(s, {d, nullptr}); }, DType::f32,
            "zeros(*size, dtype=None): a tensor of zeros (default dtype float32).");
  def_sized(m, "ones", [](IntArrayRef s, DType d) { return ones(s, {d, nullptr}); }, DType::f32,
            "ones(*size, dtype=None): a tensor of ones (default dtype float32).");
  def_sized(m, "rand", [](IntArrayRef s, DType d) { return rand(s, {d, nullptr}); }, DType::f32,
            "rand(*size, dtype=None): uniform on [0, 1) from the default generator.");
  def_sized(m, "randn", [](IntArrayRef s, DType d) { return randn(s, {d, nullptr}); }, DType::f32,
            "randn(*size, dtype=None): standard normal from the default generator.");
  m.def("randint", &randint_py,
        "randint(low=0, high, size, *, dtype=None): integers uniform on [low, high) (default int64).");
  m.def(
      "full",
      [](py::handle size, py::handle fill_value, py::handle dtype_obj) {
        const Dims sizes = int_list_from_sequence(size, "full", "size");
        std::optional<DType> dtype = optional_dtype(dtype_obj, "full");
        double value;
        if (is_python_bool(fill_value)) {
          value = PyObject_IsTrue(fill_value.ptr()) ? 1.0 : 0.0;
          if (!dtype) dtype = DType::boolean;
        } else {
          value = to_double(fill_value, "full", "fill_value");
          if (!dtype) dtype = is_integer(fill_value) ? DType::i64 : DType::f32;
        }
        py::gil_scoped_release release;
        return full(sizes, value, {*dtype, nullptr});
      },
      py::arg("size"), py::arg("fill_value"), py::kw_only(), py::arg("dtype") = py::none(),
      "full(size, fill_value, *, dtype=None): the dtype defaults to bool, int64 or float32 after "
      "the fill value, like PyTorch.");
  m.def("arange", &arange_py,
        "arange(end) or arange(start, end, step=1, *, dtype=None): like torch.arange (int64 when "
        "all arguments are ints, float32 otherwise).");

  def_like(m, "empty_like", [](IntArrayRef s, DType d) { return empty(s, {d, nullptr}); },
           "An uninitialized tensor with input's shape (and dtype unless given).");
  def_like(m, "zeros_like", [](IntArrayRef s, DType d) { return zeros(s, {d, nullptr}); },
           "Zeros with input's shape (and dtype unless given).");
  def_like(m, "ones_like", [](IntArrayRef s, DType d) { return ones(s, {d, nullptr}); },
           "Ones with input's shape (and dtype unless given).");
  m.def(
      "full_like",
      [](const Tensor& input, py::handle fill_value, py::handle dtype_obj) {
        const DType d = optional_dtype(dtype_obj, "full_like").value_or(input.dtype());
        const double value = is_python_bool(fill_value) ? (PyObject_IsTrue(fill_value.ptr()) ? 1.0 : 0.0)
                                                        : to_double(fill_value, "full_like", "fill_value");
        py::gil_scoped_release release;
        return full(input.sizes(), value, {d, nullptr});
      },
      py::arg("input"), py::arg("fill_value"), py::kw_only(), py::arg("dtype") = py::none());

  m.def(
      "tensor",
      [](py::handle data, py::handle dtype) {
        return tensor_from_data(data, optional_dtype(dtype, "tensor"), "tensor");
      },
      py::arg("data"), py::kw_only(), py::arg("dtype") = py::none(),
      "tensor(data, *, dtype=None): a new tensor holding a copy of data (nested lists, numbers, "
      "NumPy arrays or tensors). Python floats default to float32, ints to int64; arrays keep "
      "their dtype.");
  m.def("as_tensor", &as_tensor_py, py::arg("data"), py::arg("dtype") = py::none(),
        "as_tensor(data, dtype=None): like tensor(), but shares memory with a tensor or NumPy array "
        "when no conversion is needed.");
  m.def(
      "from_numpy", [](py::handle array) { return tensor_from_numpy(array); }, py::arg("array"),
      "from_numpy(array): a tensor sharing the array's memory (no copy); writes show through both "
      "ways, and the tensor keeps the array alive. Negative strides, strides that are not a "
      "multiple of the element size and unsupported dtypes raise.");
  m.def(
      "is_tensor", [](py::handle obj) { return py::isinstance<Tensor>(obj); }, py::arg("obj"));
}

}  // namespace strata::python
