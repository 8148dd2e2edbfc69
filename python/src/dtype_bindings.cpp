// strata.dtype: one Python object per DType, with PyTorch's names (strata.float32, strata.long, ...).

#include <array>
#include <string>

#include "bindings.h"

namespace strata::python {

namespace {

// The unique Python object of each DType (indexed by the enum value). Owned for the life of the
// process, like the module attributes that also refer to them.
std::array<PyObject*, kNumDTypes> g_dtype_objects{};

constexpr std::array<DType, kNumDTypes> kAllDTypes = {DType::f32, DType::f64, DType::bf16,    DType::i32,
                                                      DType::i64, DType::u8,  DType::boolean, DType::f16};

std::string py_repr(py::handle obj) { return py::repr(obj).cast<std::string>(); }

}  // namespace

const char* dtype_py_name(DType t) {
  switch (t) {
    case DType::f32: return "float32";
    case DType::f64: return "float64";
    case DType::bf16: return "bfloat16";
    case DType::i32: return "int32";
    case DType::i64: return "int64";
    case DType::u8: return "uint8";
    case DType::boolean: return "bool";
    case DType::f16: return "float16";
  }
  return "unknown";
}

py::object dtype_object(DType t) {
  return py::reinterpret_borrow<py::object>(g_dtype_objects[static_cast<std::size_t>(t)]);
}

std::optional<DType> dtype_from_numpy(const py::dtype& dt) {
  const char kind = dt.kind();
  const auto size = dt.itemsize();
  if (kind == 'f' && size == 2) return DType::f16;
  if (kind == 'f' && size == 4) return DType::f32;
  if (kind == 'f' && size == 8) return DType::f64;
  if (kind == 'i' && size == 4) return DType::i32;
  if (kind == 'i' && size == 8) return DType::i64;
  if (kind == 'u' && size == 1) return DType::u8;
  if (kind == 'b' && size == 1) return DType::boolean;
  return std::nullopt;
}

py::dtype numpy_dtype(DType t, const char* op) {
  switch (t) {
    case DType::f32: return py::dtype::of<float>();
    case DType::f64: return py::dtype::of<double>();
    case DType::i32: return py::dtype::of<int32_t>();
    case DType::i64: return py::dtype::of<int64_t>();
    case DType::u8: return py::dtype::of<uint8_t>();
    case DType::boolean: return py::dtype::of<bool>();
    case DType::f16: return py::dtype("float16");
    case DType::bf16: break;
  }
  throw BindingTypeError(msg(op,
                             "(): NumPy has no bfloat16 dtype; convert the tensor with "
                             ".to(strata.float32) first"));
}

DType dtype_from_py(py::handle obj, const char* op) {
  if (py::isinstance<PyDType>(obj)) return obj.cast<const PyDType&>().value;
  if (py::isinstance<py::str>(obj)) return dtype_from_name(obj.cast<std::string>());
  // NumPy dtypes and scalar types (np.float32, np.dtype("int64")), and Python's float/int/bool.
  if (py::isinstance<py::dtype>(obj) || PyType_Check(obj.ptr())) {
    py::dtype dt;
    try {
      dt = py::dtype::from_args(py::reinterpret_borrow<py::object>(obj));
    } catch (py::error_already_set&) {
      throw BindingTypeError(msg(op, "(): dtype must be a strata.dtype such as strata.float32, got ", py_repr(obj)));
    }
    if (auto t = dtype_from_numpy(dt)) return *t;
    throw BindingTypeError(msg(op, "(): dtype ", py_repr(obj),
                               " is not supported (Strata has float32, float64, bfloat16, float16, "
                               "int32, int64, uint8 and bool)"));
  }
  throw BindingTypeError(msg(op, "(): dtype must be a strata.dtype such as strata.float32, got ", py_repr(obj)));
}

std::optional<DType> optional_dtype(py::handle obj, const char* op) {
  if (obj.is_none()) return std::nullopt;
  return dtype_from_py(obj, op);
}

void init_dtypes(py::module_& m) {
  py::class_<PyDType>(m, "dtype",
                      "An element type. The instances are strata.float32, strata.float64, "
                      "strata.bfloat16, strata.float16, strata.int32, strata.int64, strata.uint8 and strata.bool.")
      .def_property_readonly(
          "itemsize", [](const PyDType& d) { return itemsize(d.value); }, "Bytes per element.")
      .def_property_readonly("is_floating_point", [](const PyDType& d) { return is_floating(d.value); })
      .def_property_readonly("is_signed",
                             [](const PyDType& d) { return d.value != DType::u8 && d.value != DType::boolean; })
      .def("__repr__", [](const PyDType& d) { return std::string("strata.") + dtype_py_name(d.value); })
      .def("__str__", [](const PyDType& d) { return std::string("strata.") + dtype_py_name(d.value); })
      // Pickles as a reference to the module attribute of the same name (so identity survives).
      .def("__reduce__", [](const PyDType& d) { return std::string(dtype_py_name(d.value)); });

  for (DType t : kAllDTypes) {
    py::object obj = py::cast(PyDType{t});
    g_dtype_objects[static_cast<std::size_t>(t)] = obj.inc_ref().ptr();
    m.attr(dtype_py_name(t)) = obj;
    m.attr(std::string(dtype_name(t)).c_str()) = obj;  // the C++ short names: f32, bf16, i64, ...
  }
  // PyTorch's aliases.
  m.attr("float") = dtype_object(DType::f32);
  m.attr("double") = dtype_object(DType::f64);
  m.attr("int") = dtype_object(DType::i32);
  m.attr("long") = dtype_object(DType::i64);
  m.attr("half") = dtype_object(DType::f16);
}

}  // namespace strata::python
