// Module-level factories with torch-like signatures: zeros(*size, dtype=None), arange(...), tensor(...).
// Every factory takes PyTorch's keywords dtype=, device= (the CPU only: check_cpu_device) and
// requires_grad=; the random ones also generator=.

#include <string>
#include <vector>

#include "bindings.h"
#include "core/factories.h"

namespace strata::python {

namespace {

using SizedFactory = Tensor (*)(IntArrayRef, DType, Generator*);

/// `t` with requires_grad set when asked (floating dtypes only, PyTorch's rule).
Tensor with_grad(Tensor t, py::handle requires_grad, const char* op) {
  if (requires_grad.is_none() || !PyObject_IsTrue(requires_grad.ptr())) return t;
  STRATA_CHECK(is_floating(t.dtype()), op, "(): only tensors of floating point dtype can require gradients, got ",
               dtype_name(t.dtype()));
  t.set_requires_grad(true);
  return t;
}

/// The generator= argument: None (the default generator) or a strata.Generator.
Generator* generator_arg(py::handle generator, const char* op) {
  if (generator.is_none()) return nullptr;
  if (!py::isinstance<Generator>(generator))
    throw BindingTypeError(
        msg(op, "(): argument 'generator' must be strata.Generator, not ", Py_TYPE(generator.ptr())->tp_name));
  return generator.cast<Generator*>();
}

Tensor make_sized(const char* name, SizedFactory make, DType default_dtype, const py::args& size, py::handle dtype,
                  py::handle device, py::handle requires_grad, py::handle generator) {
  if (size.empty())
    throw BindingTypeError(msg(name,
                               "() missing the required argument 'size' (pass ints or a "
                               "tuple; () makes a 0-dim tensor)"));
  const Dims sizes = int_list_from_args(size, name, "size");
  const DType d = optional_dtype(dtype, name).value_or(default_dtype);
  check_cpu_device(device, name);
  Generator* gen = generator_arg(generator, name);
  Tensor t;
  {
    py::gil_scoped_release release;
    t = make(sizes, d, gen);
  }
  return with_grad(std::move(t), requires_grad, name);
}

// Defines `name(*size, dtype=None, device=None, requires_grad=False)` (and generator=None when
// `random`); size is ints or one sequence of ints.
void def_sized(py::module_& m, const char* name, SizedFactory make, DType default_dtype, const char* doc,
               bool random = false) {
  const auto none = py::none();
  if (random)
    m.def(
        name,
        [name, make, default_dtype](const py::args& size, py::handle generator, py::handle dtype, py::handle device,
                                    py::handle requires_grad) {
          return make_sized(name, make, default_dtype, size, dtype, device, requires_grad, generator);
        },
        py::arg("generator") = none, py::arg("dtype") = none, py::arg("device") = none,
        py::arg("requires_grad") = false, doc);
  else
    m.def(
        name,
        [name, make, default_dtype](const py::args& size, py::handle dtype, py::handle device,
                                    py::handle requires_grad) {
          return make_sized(name, make, default_dtype, size, dtype, device, requires_grad, py::none());
        },
        py::arg("dtype") = none, py::arg("device") = none, py::arg("requires_grad") = false, doc);
}

// Defines `name(input, *, dtype=None, device=None, requires_grad=False)`: a new tensor with
// input's shape.
void def_like(py::module_& m, const char* name, SizedFactory make, const char* doc) {
  m.def(
      name,
      [name, make](const Tensor& input, py::handle dtype, py::handle device, py::handle requires_grad) {
        const DType d = optional_dtype(dtype, name).value_or(input.dtype());
        check_cpu_device(device, name);
        Tensor t;
        {
          py::gil_scoped_release release;
          t = make(input.sizes(), d, nullptr);
        }
        return with_grad(std::move(t), requires_grad, name);
      },
      py::arg("input"), py::kw_only(), py::arg("dtype") = py::none(), py::arg("device") = py::none(),
      py::arg("requires_grad") = false, doc);
}

bool is_python_bool(py::handle v) {
  return PyBool_Check(v.ptr()) || py::isinstance(v, py::module_::import("numpy").attr("bool_"));
}
bool is_integer(py::handle v) { return !is_python_bool(v) && PyIndex_Check(v.ptr()) && !py::isinstance<Tensor>(v); }

double to_double(py::handle v, const char* op, const char* what) {
  if (is_python_bool(v)) throw BindingTypeError(msg(op, "(): ", what, " must be a number, got bool"));
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
                                       const std::vector<const char*>& positional_names, const py::args& args,
                                       const py::kwargs& kwargs) {
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
  static const std::vector<const char*> names = {"start", "end", "step", "dtype", "device", "requires_grad"};
  if (args.size() > 3)
    throw BindingTypeError(msg("arange() takes at most 3 positional arguments (", args.size(), " given)"));
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
  const DType dtype =
      (a[3] && !a[3].is_none()) ? dtype_from_py(a[3], "arange") : (all_integers ? DType::i64 : DType::f32);
  if (a[4]) check_cpu_device(a[4], "arange");
  Tensor t;
  {
    py::gil_scoped_release release;
    t = arange(start, end, step, {dtype, nullptr});
  }
  return a[5] ? with_grad(std::move(t), a[5], "arange") : t;
}

/// randint's values in `dtype`; a floating dtype draws them in i64 and converts (PyTorch allows it).
Tensor random_integers(int64_t low, int64_t high, IntArrayRef sizes, DType dtype, Generator* gen) {
  if (is_floating(dtype)) return randint(low, high, sizes, {DType::i64, nullptr}, gen).to(dtype);
  return randint(low, high, sizes, {dtype, nullptr}, gen);
}

Tensor randint_py(const py::args& args, const py::kwargs& kwargs) {
  static const std::vector<const char*> names = {"low",    "high",          "size",     "dtype",
                                                 "device", "requires_grad", "generator"};
  if (args.size() > 3)
    throw BindingTypeError(msg("randint() takes at most 3 positional arguments (", args.size(), " given)"));
  std::vector<const char*> positional;
  const bool size_kw = kwargs.contains("size");
  if (args.size() == 1) positional = {"high"};
  if (args.size() == 2)
    positional = size_kw ? std::vector<const char*>{"low", "high"} : std::vector<const char*>{"high", "size"};
  if (args.size() == 3) positional = {"low", "high", "size"};
  const auto a = bind_arguments("randint", names, positional, args, kwargs);
  if (!a[1]) throw BindingTypeError("randint() missing the required argument 'high'");
  if (!a[2]) throw BindingTypeError("randint() missing the required argument 'size' (a tuple of ints)");
  const int64_t low = a[0] ? int_from_py(a[0], "randint", "low") : 0;
  const int64_t high = int_from_py(a[1], "randint", "high");
  const Dims sizes = int_list_from_sequence(a[2], "randint", "size");
  const DType dtype = (a[3] && !a[3].is_none()) ? dtype_from_py(a[3], "randint") : DType::i64;
  if (a[4]) check_cpu_device(a[4], "randint");
  Generator* gen = a[6] ? generator_arg(a[6], "randint") : nullptr;
  Tensor t;
  {
    py::gil_scoped_release release;
    t = random_integers(low, high, sizes, dtype, gen);
  }
  return a[5] ? with_grad(std::move(t), a[5], "randint") : t;  // integers: requires_grad=True raises
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
        if (arr.shape(d) > 1 && (arr.strides(d) < 0 || arr.strides(d) % arr.itemsize() != 0)) strides_ok = false;
      if (strides_ok) {
        const Tensor t = tensor_from_numpy(arr);
        py::gil_scoped_release release;
        return dtype ? t.to(*dtype) : t;
      }
    }
  }
  return tensor_from_data(data, dtype, "as_tensor");
}

/// randint_like(input, high) / randint_like(input, low, high), with input's shape and dtype.
Tensor randint_like_py(const Tensor& input, py::handle low_or_high, py::handle high, py::handle dtype,
                       py::handle device, py::handle requires_grad, py::handle generator) {
  const int64_t low = high.is_none() ? 0 : int_from_py(low_or_high, "randint_like", "low");
  const int64_t hi = int_from_py(high.is_none() ? low_or_high : high, "randint_like", "high");
  const DType d = optional_dtype(dtype, "randint_like").value_or(input.dtype());
  check_cpu_device(device, "randint_like");
  Generator* gen = generator_arg(generator, "randint_like");
  Tensor t;
  {
    py::gil_scoped_release release;
    t = random_integers(low, hi, input.sizes(), d, gen);
  }
  return with_grad(std::move(t), requires_grad, "randint_like");
}

/// eye, linspace, randperm and randint_like (issue 26 part 4).
void def_new_factories(py::module_& m) {
  using py::arg;
  const auto none = py::none();
  m.def(
      "eye",
      [](py::handle n, py::handle m_cols, py::handle dtype, py::handle device, py::handle requires_grad) {
        const int64_t rows = int_from_py(n, "eye", "n");
        std::optional<int64_t> cols;
        if (!m_cols.is_none()) cols = int_from_py(m_cols, "eye", "m");
        const DType d = optional_dtype(dtype, "eye").value_or(DType::f32);
        check_cpu_device(device, "eye");
        Tensor t;
        {
          py::gil_scoped_release release;
          t = eye(rows, cols, {d, nullptr});
        }
        return with_grad(std::move(t), requires_grad, "eye");
      },
      arg("n"), arg("m") = none, py::kw_only(), arg("dtype") = none, arg("device") = none, arg("requires_grad") = false,
      "eye(n, m=None): the identity matrix (ones on the diagonal).");
  m.def(
      "linspace",
      [](py::handle start, py::handle end, py::handle steps, py::handle dtype, py::handle device,
         py::handle requires_grad) {
        const double a = to_double(start, "linspace", "start"), b = to_double(end, "linspace", "end");
        const int64_t n = int_from_py(steps, "linspace", "steps");
        const DType d = optional_dtype(dtype, "linspace").value_or(DType::f32);
        check_cpu_device(device, "linspace");
        Tensor t;
        {
          py::gil_scoped_release release;
          t = linspace(a, b, n, {d, nullptr});
        }
        return with_grad(std::move(t), requires_grad, "linspace");
      },
      arg("start"), arg("end"), arg("steps"), py::kw_only(), arg("dtype") = none, arg("device") = none,
      arg("requires_grad") = false, "linspace(start, end, steps): steps values from start to end, both included.");
  m.def(
      "randperm",
      [](py::handle n, py::handle generator, py::handle dtype, py::handle device, py::handle requires_grad) {
        const int64_t count = int_from_py(n, "randperm", "n");
        const DType d = optional_dtype(dtype, "randperm").value_or(DType::i64);
        check_cpu_device(device, "randperm");
        Generator* gen = generator_arg(generator, "randperm");
        Tensor t;
        {
          py::gil_scoped_release release;
          t = randperm(count, {d, nullptr}, gen);
        }
        return with_grad(std::move(t), requires_grad, "randperm");
      },
      arg("n"), py::kw_only(), arg("generator") = none, arg("dtype") = none, arg("device") = none,
      arg("requires_grad") = false, "randperm(n): a random permutation of 0 .. n-1 (default dtype int64).");
  m.def("randint_like", &randint_like_py, arg("input"), arg("low"), arg("high") = none, py::kw_only(),
        arg("dtype") = none, arg("device") = none, arg("requires_grad") = false, arg("generator") = none,
        "randint_like(input, high) or (input, low, high): integers on [low, high) with input's shape and dtype.");
}

}  // namespace

void init_factories(py::module_& m) {
  def_sized(
      m, "empty", [](IntArrayRef s, DType d, Generator*) { return empty(s, {d, nullptr}); }, DType::f32,
      "empty(*size, dtype=None): an uninitialized tensor (default dtype float32).");
  def_sized(
      m, "zeros", [](IntArrayRef s, DType d, Generator*) { return zeros(s, {d, nullptr}); }, DType::f32,
      "zeros(*size, dtype=None): a tensor of zeros (default dtype float32).");
  def_sized(
      m, "ones", [](IntArrayRef s, DType d, Generator*) { return ones(s, {d, nullptr}); }, DType::f32,
      "ones(*size, dtype=None): a tensor of ones (default dtype float32).");
  def_sized(
      m, "rand", [](IntArrayRef s, DType d, Generator* g) { return rand(s, {d, nullptr}, g); }, DType::f32,
      "rand(*size, generator=None, dtype=None): uniform on [0, 1).", /*random=*/true);
  def_sized(
      m, "randn", [](IntArrayRef s, DType d, Generator* g) { return randn(s, {d, nullptr}, g); }, DType::f32,
      "randn(*size, generator=None, dtype=None): standard normal.", /*random=*/true);
  m.def("randint", &randint_py,
        "randint(low=0, high, size, *, dtype=None): integers uniform on [low, high) (default int64).");
  m.def(
      "full",
      [](py::handle size, py::handle fill_value, py::handle dtype_obj, py::handle device, py::handle requires_grad) {
        const Dims sizes = int_list_from_sequence(size, "full", "size");
        std::optional<DType> dtype = optional_dtype(dtype_obj, "full");
        check_cpu_device(device, "full");
        double value;
        if (is_python_bool(fill_value)) {
          value = PyObject_IsTrue(fill_value.ptr()) ? 1.0 : 0.0;
          if (!dtype) dtype = DType::boolean;
        } else {
          value = to_double(fill_value, "full", "fill_value");
          if (!dtype) dtype = is_integer(fill_value) ? DType::i64 : DType::f32;
        }
        Tensor t;
        {
          py::gil_scoped_release release;
          t = full(sizes, value, {*dtype, nullptr});
        }
        return with_grad(std::move(t), requires_grad, "full");
      },
      py::arg("size"), py::arg("fill_value"), py::kw_only(), py::arg("dtype") = py::none(),
      py::arg("device") = py::none(), py::arg("requires_grad") = false,
      "full(size, fill_value, *, dtype=None): the dtype defaults to bool, int64 or float32 after "
      "the fill value, like PyTorch.");
  m.def("arange", &arange_py,
        "arange(end) or arange(start, end, step=1, *, dtype=None): like torch.arange (int64 when "
        "all arguments are ints, float32 otherwise).");

  def_like(
      m, "empty_like", [](IntArrayRef s, DType d, Generator*) { return empty(s, {d, nullptr}); },
      "An uninitialized tensor with input's shape (and dtype unless given).");
  def_like(
      m, "zeros_like", [](IntArrayRef s, DType d, Generator*) { return zeros(s, {d, nullptr}); },
      "Zeros with input's shape (and dtype unless given).");
  def_like(
      m, "ones_like", [](IntArrayRef s, DType d, Generator*) { return ones(s, {d, nullptr}); },
      "Ones with input's shape (and dtype unless given).");
  def_like(
      m, "rand_like", [](IntArrayRef s, DType d, Generator* g) { return rand(s, {d, nullptr}, g); },
      "Uniform on [0, 1) with input's shape (and dtype unless given; floating only).");
  def_like(
      m, "randn_like", [](IntArrayRef s, DType d, Generator* g) { return randn(s, {d, nullptr}, g); },
      "Standard normal with input's shape (and dtype unless given; floating only).");
  m.def(
      "full_like",
      [](const Tensor& input, py::handle fill_value, py::handle dtype_obj, py::handle device,
         py::handle requires_grad) {
        const DType d = optional_dtype(dtype_obj, "full_like").value_or(input.dtype());
        check_cpu_device(device, "full_like");
        const double value = is_python_bool(fill_value) ? (PyObject_IsTrue(fill_value.ptr()) ? 1.0 : 0.0)
                                                        : to_double(fill_value, "full_like", "fill_value");
        Tensor t;
        {
          py::gil_scoped_release release;
          t = full(input.sizes(), value, {d, nullptr});
        }
        return with_grad(std::move(t), requires_grad, "full_like");
      },
      py::arg("input"), py::arg("fill_value"), py::kw_only(), py::arg("dtype") = py::none(),
      py::arg("device") = py::none(), py::arg("requires_grad") = false);

  m.def(
      "tensor",
      [](py::handle data, py::handle dtype, py::handle device, py::handle requires_grad) {
        check_cpu_device(device, "tensor");
        return with_grad(tensor_from_data(data, optional_dtype(dtype, "tensor"), "tensor"), requires_grad, "tensor");
      },
      py::arg("data"), py::kw_only(), py::arg("dtype") = py::none(), py::arg("device") = py::none(),
      py::arg("requires_grad") = false,
      "tensor(data, *, dtype=None): a new tensor holding a copy of data (nested lists, numbers, "
      "NumPy arrays or tensors). Python floats default to float32, ints to int64; arrays keep "
      "their dtype.");
  m.def(
      "as_tensor",
      [](py::handle data, py::handle dtype, py::handle device) {
        check_cpu_device(device, "as_tensor");
        return as_tensor_py(data, dtype);
      },
      py::arg("data"), py::arg("dtype") = py::none(), py::arg("device") = py::none(),
      "as_tensor(data, dtype=None): like tensor(), but shares memory with a tensor or NumPy array "
      "when no conversion is needed.");
  m.def(
      "from_numpy", [](py::handle array) { return tensor_from_numpy(array); }, py::arg("array"),
      "from_numpy(array): a tensor sharing the array's memory (no copy); writes show through both "
      "ways, and the tensor keeps the array alive. Negative strides, strides that are not a "
      "multiple of the element size and unsupported dtypes raise.");
  def_new_factories(m);
  m.def("is_tensor", [](py::handle obj) { return py::isinstance<Tensor>(obj); }, py::arg("obj"));
}

}  // namespace strata::python
