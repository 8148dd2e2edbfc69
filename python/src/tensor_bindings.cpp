// strata.Tensor: metadata, views, copies, indexing and conversions, under PyTorch's names.

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "autograd/grad_mode.h"
#include "autograd/node.h"
#include "autograd/view.h"
#include "bindings.h"
#include "core/factories.h"
#include "ops/shape_ops.h"

namespace strata::python {

namespace {

py::tuple dims_tuple(const Dims& dims) {
  py::tuple out(dims.size());
  for (std::size_t i = 0; i < dims.size(); ++i) out[i] = py::int_(dims[i]);
  return out;
}

// ---- scalars ------------------------------------------------------------------------------------

py::object item_of(const Tensor& t) {
  if (t.dtype() == DType::boolean) return py::bool_(t.item<bool>());
  if (is_floating(t.dtype())) return py::float_(t.item<double>());
  return py::int_(t.item<int64_t>());
}

void check_single_value(const Tensor& t, const char* what) {
  if (t.numel() == 0) throw Error(msg(what, " of a Tensor with no values is ambiguous (", t.describe(), ")"));
  if (t.numel() > 1) throw Error(msg(what, " of a Tensor with more than one value is ambiguous (", t.describe(), ")"));
}

double number_from_py(py::handle value, const char* op) {
  if (py::isinstance<Tensor>(value)) return value.cast<const Tensor&>().item<double>();
  if (PyBool_Check(value.ptr())) return value.ptr() == Py_True ? 1.0 : 0.0;
  if (PyLong_Check(value.ptr()) || PyFloat_Check(value.ptr()) || PyIndex_Check(value.ptr()) ||
      PyNumber_Check(value.ptr())) {
    const double v = PyFloat_AsDouble(value.ptr());
    if (v == -1.0 && PyErr_Occurred()) throw py::error_already_set();
    return v;
  }
  throw BindingTypeError(msg(op, "(): expected a number, got ", Py_TYPE(value.ptr())->tp_name));
}

// ---- misc ---------------------------------------------------------------------------------------

// squeeze() / squeeze(dim) / squeeze((dims...)) as a raw view.
Tensor squeeze_raw(const Tensor& t, py::object dim) {
  if (dim.is_none()) return t.squeeze();
  if (!PyBool_Check(dim.ptr()) && PyIndex_Check(dim.ptr())) {
    const int64_t d = int_from_py(dim, "squeeze", "dim");
    wrap_dim_py(d, t.dim(), "squeeze", true);
    return t.squeeze(d);
  }
  // A tuple of dims (PyTorch >= 2.0): squeeze each, innermost first so indices hold.
  Dims dims = int_list_from_sequence(dim, "squeeze", "dim");
  std::vector<int64_t> wrapped;
  for (int64_t d : dims) wrapped.push_back(wrap_dim_py(d, t.dim(), "squeeze", true));
  std::sort(wrapped.begin(), wrapped.end());
  wrapped.erase(std::unique(wrapped.begin(), wrapped.end()), wrapped.end());
  Tensor r = t;
  for (auto it = wrapped.rbegin(); it != wrapped.rend(); ++it) r = r.squeeze(*it);
  return r;
}

// A raw view of `t` (which needs no gradient) made a tracked view while grad mode is on, with
// the raw view's strides: a later write of a value that requires grad into it reaches t's history
// (Note [View tracking] in autograd/view.h).
Tensor tracked(Tensor view, const Tensor& t) {
  autograd::mark_view(view, t);
  return view;
}

Dims reversed_dims(int64_t rank) {
  Dims dims;
  for (int64_t d = rank - 1; d >= 0; --d) dims.push_back(d);
  return dims;
}

Tensor to_dtype(const Tensor& t, py::handle target, bool copy) {
  DType d;
  if (py::isinstance<Tensor>(target)) {
    d = target.cast<const Tensor&>().dtype();
  } else if (py::isinstance<py::str>(target) && target.cast<std::string>() == "cpu") {
    d = t.dtype();  // the only device; accepted so that PyTorch code's .to("cpu") works
  } else {
    d = dtype_from_py(target, "to");
  }
  py::gil_scoped_release release;
  return to_diff(t, d, copy);
}

py::bytes tensor_bytes(const Tensor& t) {
  const Tensor c = t.contiguous();
  return py::bytes(static_cast<const char*>(c.data_ptr()), c.nbytes());
}

}  // namespace

// ---- copy.deepcopy and pickle ---------------------------------------------------------------------
// Note [Copying and pickling tensors]
// Both keep the values, dtype, shape and requires_grad (deepcopy also a copy of .grad), as
// PyTorch's do. deepcopy refuses a non-leaf, with PyTorch's reason (a copy cannot take its graph
// along); pickle makes it a leaf that requires grad, as PyTorch 2.13 does. deepcopy goes through
// the memo, so a tensor met twice in one deepcopy
// (a parameter shared by two modules) is copied once. strata.nn.Parameter keeps its type
// (nn_bindings.cpp). A pickle state is (dtype name, shape, bytes[, requires_grad]); the 3-entry
// form of older pickles still loads.

Tensor copy_leaf(const Tensor& t, const char* op) {
  if (!t.is_leaf())
    throw Error(msg(op,
                    ": only Tensors created explicitly by the user (graph leaves) support the deepcopy protocol "
                    "at the moment (",
                    t.describe(), " was produced by ", t.grad_fn()->name(), ")"));
  Tensor out = t.clone();
  if (t.requires_grad()) out.set_requires_grad(true);
  if (t.grad().defined()) out.set_grad(t.grad().clone());
  return out;
}

namespace {

py::object deepcopy_tensor(py::handle self, py::dict memo) {
  py::int_ key(reinterpret_cast<std::uintptr_t>(self.ptr()));
  if (memo.contains(key)) return memo[key];
  py::object out = py::cast(copy_leaf(self.cast<const Tensor&>(), "deepcopy"));
  memo[key] = out;
  return out;
}

py::tuple tensor_state(const Tensor& t) {
  return py::make_tuple(std::string(dtype_py_name(t.dtype())), dims_tuple(t.sizes()), tensor_bytes(t),
                        t.requires_grad());
}

Tensor tensor_from_state(const py::tuple& state) {
  if (state.size() != 3 && state.size() != 4) throw BindingValueError("Tensor.__setstate__: invalid state");
  const DType dtype = dtype_from_name(state[0].cast<std::string>());
  const Dims sizes = int_list_from_sequence(state[1], "__setstate__", "shape");
  const std::string bytes = state[2].cast<std::string>();
  Tensor t = empty(sizes, {dtype, nullptr});
  if (bytes.size() != t.nbytes())
    throw BindingValueError(
        msg("Tensor.__setstate__: ", bytes.size(), " bytes for ", t.describe(), ", which needs ", t.nbytes()));
  if (!bytes.empty()) std::memcpy(t.data_ptr(), bytes.data(), bytes.size());
  if (state.size() == 4 && state[3].cast<bool>()) t.set_requires_grad(true);
  return t;
}

// shape, size(), stride(), dtype, ... and the storage queries.
void def_metadata(py::class_<Tensor>& cls) {
  cls.def_property_readonly(
         "shape", [](const Tensor& t) { return dims_tuple(t.sizes()); }, "The sizes, as a tuple.")
      .def(
          "size",
          [](const Tensor& t, py::object dim) -> py::object {
            if (dim.is_none()) return dims_tuple(t.sizes());
            const int64_t d = wrap_dim_py(int_from_py(dim, "size", "dim"), t.dim(), "size");
            return py::int_(t.sizes()[static_cast<std::size_t>(d)]);
          },
          py::arg("dim") = py::none(), "The sizes as a tuple, or the size of one dim.")
      .def(
          "stride",
          [](const Tensor& t, py::object dim) -> py::object {
            if (dim.is_none()) return dims_tuple(t.strides());
            const int64_t d = wrap_dim_py(int_from_py(dim, "stride", "dim"), t.dim(), "stride");
            return py::int_(t.strides()[static_cast<std::size_t>(d)]);
          },
          py::arg("dim") = py::none(), "The strides (in elements) as a tuple, or one dim's stride.")
      .def_property_readonly("dtype", [](const Tensor& t) { return dtype_object(t.dtype()); })
      .def_property_readonly("ndim", [](const Tensor& t) { return t.dim(); })
      .def("dim", [](const Tensor& t) { return t.dim(); })
      .def("ndimension", [](const Tensor& t) { return t.dim(); })
      .def("numel", [](const Tensor& t) { return t.numel(); })
      .def("nelement", [](const Tensor& t) { return t.numel(); })
      .def("element_size", [](const Tensor& t) { return t.itemsize(); })
      .def_property_readonly("itemsize", [](const Tensor& t) { return t.itemsize(); })
      .def_property_readonly("nbytes", [](const Tensor& t) { return t.nbytes(); })
      .def("is_contiguous", [](const Tensor& t) { return t.is_contiguous(); })
      .def("is_floating_point", [](const Tensor& t) { return is_floating(t.dtype()); })
      .def(
          "storage_offset", [](const Tensor& t) { return t.offset(); },
          "Offset of element [0, ..., 0] in the storage, in elements.")
      .def(
          "data_ptr", [](const Tensor& t) { return reinterpret_cast<std::uintptr_t>(t.data_ptr()); },
          "Address of element [0, ..., 0].")
      .def_property_readonly(
          "_version", [](const Tensor& t) { return t.version(); },
          "In-place version counter shared by all views of the storage.")
      .def(
          "_shares_storage", [](const Tensor& t, const Tensor& other) { return t.shares_storage(other); },
          py::arg("other"), "True when both tensors view the same storage.");
}

// The view methods (view, narrow, transpose, expand, squeeze, ...).
void def_views(py::class_<Tensor>& cls) {
  // Note: every view below is recorded (through ops/shape_ops.h or an ExpandBackward node) when
  // the tensor requires grad and grad mode is on; otherwise it is the raw core view.
  cls.def("view", [](const Tensor& t,
                     const py::args& shape) { return view_diff(t, int_list_from_args(shape, "view", "shape")); })
      .def(
          "view_as", [](const Tensor& t, const Tensor& other) { return view_diff(t, other.sizes()); }, py::arg("other"))
      .def("reshape",
           [](const Tensor& t, const py::args& shape) {
             const Dims s = int_list_from_args(shape, "reshape", "shape");
             py::gil_scoped_release release;
             return records_grad(t) ? reshape(t, s) : tracked(t.reshape(s), t);
           })
      .def(
          "reshape_as",
          [](const Tensor& t, const Tensor& other) {
            py::gil_scoped_release release;
            return records_grad(t) ? reshape(t, other.sizes()) : tracked(t.reshape(other.sizes()), t);
          },
          py::arg("other"))
      .def(
          "narrow",
          [](const Tensor& t, int64_t dim, int64_t start, int64_t length) {
            const int64_t d = wrap_dim_py(dim, t.dim(), "narrow");
            const int64_t n = t.sizes()[static_cast<std::size_t>(d)];
            if (start < -n || start > n)
              throw BindingIndexError(msg("narrow(): start out of range (expected to be in range of [", -n, ", ", n,
                                          "], but got ", start, ")"));
            if (!records_grad(t)) return tracked(t.narrow(dim, start, length), t);
            const int64_t s0 = start < 0 ? start + n : start;
            t.narrow(dim, start, length);  // validates the length
            return slice(t, d, s0, s0 + length, 1);
          },
          py::arg("dim"), py::arg("start"), py::arg("length"))
      .def(
          "select",
          [](const Tensor& t, int64_t dim, int64_t index) {
            const int64_t d = wrap_dim_py(dim, t.dim(), "select");
            const int64_t n = t.sizes()[static_cast<std::size_t>(d)];
            if (index < -n || index >= n)
              throw BindingIndexError(
                  msg("select(): index ", index, " out of range for tensor of size ", t.sizes(), " at dimension ", d));
            if (!records_grad(t)) return tracked(t.select(dim, index), t);
            const int64_t w = index < 0 ? index + n : index;
            return reshape(slice(t, d, w, w + 1, 1), t.select(dim, index).sizes());
          },
          py::arg("dim"), py::arg("index"))
      .def(
          "transpose",
          [](const Tensor& t, int64_t dim0, int64_t dim1) {
            wrap_dim_py(dim0, t.dim(), "transpose", true);
            wrap_dim_py(dim1, t.dim(), "transpose", true);
            if (records_grad(t) && t.dim() > 0) return transpose(t, dim0, dim1);
            return tracked(t.transpose(dim0, dim1), t);
          },
          py::arg("dim0"), py::arg("dim1"))
      .def(
          "swapaxes",
          [](const Tensor& t, int64_t dim0, int64_t dim1) {
            wrap_dim_py(dim0, t.dim(), "swapaxes", true);
            wrap_dim_py(dim1, t.dim(), "swapaxes", true);
            if (records_grad(t) && t.dim() > 0) return transpose(t, dim0, dim1);
            return tracked(t.transpose(dim0, dim1), t);
          },
          py::arg("axis0"), py::arg("axis1"))
      .def("permute",
           [](const Tensor& t, const py::args& dims) {
             const Dims d = int_list_from_args(dims, "permute", "dims");
             if (static_cast<int64_t>(d.size()) == t.dim())
               for (int64_t x : d) wrap_dim_py(x, t.dim(), "permute");
             if (records_grad(t)) return permute(t, d);
             return tracked(t.permute(d), t);
           })
      .def("t",
           [](const Tensor& t) {
             Tensor raw = t.t();  // validates the rank
             if (!records_grad(t)) return tracked(raw, t);
             return t.dim() == 2 ? transpose(t, 0, 1) : reshape(t, t.sizes());
           })
      .def_property_readonly(
          "T",
          [](const Tensor& t) {
            if (records_grad(t)) return t.dim() == 0 ? reshape(t, t.sizes()) : permute(t, reversed_dims(t.dim()));
            return tracked(t.permute(reversed_dims(t.dim())), t);
          },
          "The tensor with its dims reversed.")
      .def("expand",
           [](const Tensor& t, const py::args& sizes) {
             // -1 keeps a size: resolve through the raw view, then record.
             return expand_diff(t, t.expand(int_list_from_args(sizes, "expand", "sizes")).sizes());
           })
      .def(
          "expand_as", [](const Tensor& t, const Tensor& other) { return expand_diff(t, t.expand_as(other).sizes()); },
          py::arg("other"))
      .def(
          "broadcast_to",
          [](const Tensor& t, py::handle shape) {
            return expand_diff(t, t.broadcast_to(int_list_from_sequence(shape, "broadcast_to", "shape")).sizes());
          },
          py::arg("shape"))
      .def(
          "squeeze",
          [](const Tensor& t, py::object dim) {
            Tensor raw = squeeze_raw(t, dim);
            return records_grad(t) ? reshape(t, raw.sizes()) : tracked(raw, t);
          },
          py::arg("dim") = py::none())
      .def(
          "unsqueeze",
          [](const Tensor& t, int64_t dim) {
            wrap_dim_py(dim, t.dim() + 1, "unsqueeze");
            Tensor raw = t.unsqueeze(dim);
            return records_grad(t) ? reshape(t, raw.sizes()) : tracked(raw, t);
          },
          py::arg("dim"))
      .def(
          "flatten",
          [](const Tensor& t, int64_t start_dim, int64_t end_dim) {
            wrap_dim_py(start_dim, t.dim(), "flatten", true);
            wrap_dim_py(end_dim, t.dim(), "flatten", true);
            py::gil_scoped_release release;
            return records_grad(t) ? flatten(t, start_dim, end_dim) : tracked(t.flatten(start_dim, end_dim), t);
          },
          py::arg("start_dim") = 0, py::arg("end_dim") = -1)
      .def(
          "as_strided",
          [](const Tensor& t, py::handle size, py::handle stride, py::object storage_offset) {
            std::optional<int64_t> off;
            if (!storage_offset.is_none()) off = int_from_py(storage_offset, "as_strided", "storage_offset");
            return t.as_strided(int_list_from_sequence(size, "as_strided", "size"),
                                int_list_from_sequence(stride, "as_strided", "stride"), off);
          },
          py::arg("size"), py::arg("stride"), py::arg("storage_offset") = py::none());
}

// contiguous, clone, to(dtype) and the dtype shorthands.
void def_conversions(py::class_<Tensor>& cls) {
  cls.def("contiguous",
          [](const Tensor& t) {
            py::gil_scoped_release r;
            return clone_diff(t, true);
          })
      .def("clone",
           [](const Tensor& t) {
             py::gil_scoped_release r;
             return clone_diff(t, false);
           })
      .def(
          "to", [](const Tensor& t, py::handle dtype, bool copy) { return to_dtype(t, dtype, copy); }, py::arg("dtype"),
          py::arg("copy") = false,
          "Converts to a dtype (or to another tensor's dtype); returns self when it already matches "
          "unless copy=True.")
      .def("float",
           [](const Tensor& t) {
             py::gil_scoped_release r;
             return to_diff(t, DType::f32, false);
           })
      .def("double",
           [](const Tensor& t) {
             py::gil_scoped_release r;
             return to_diff(t, DType::f64, false);
           })
      .def("bfloat16",
           [](const Tensor& t) {
             py::gil_scoped_release r;
             return to_diff(t, DType::bf16, false);
           })
      .def("int",
           [](const Tensor& t) {
             py::gil_scoped_release r;
             return to_diff(t, DType::i32, false);
           })
      .def("long",
           [](const Tensor& t) {
             py::gil_scoped_release r;
             return to_diff(t, DType::i64, false);
           })
      .def("byte",
           [](const Tensor& t) {
             py::gil_scoped_release r;
             return to_diff(t, DType::u8, false);
           })
      .def("bool", [](const Tensor& t) {
        py::gil_scoped_release r;
        return to_diff(t, DType::boolean, false);
      });
}

// __array__(dtype=None, copy=None): NumPy's protocol, honouring copy=False by refusing a conversion that copies.
py::object array_protocol(py::object self, py::object dtype, py::object copy) {
  const Tensor& t = self.cast<const Tensor&>();
  const bool never_copy = !copy.is_none() && !copy.cast<bool>();
  const bool force_copy = !copy.is_none() && copy.cast<bool>();
  py::object arr;
  bool copied = false;
  if (t.dtype() == DType::bf16) {
    // NumPy has no bfloat16: hand out float32 values (exact), which takes a copy.
    if (never_copy)
      throw BindingValueError(
          "__array__(): a bfloat16 tensor can only be converted to NumPy with a copy "
          "(NumPy has no bfloat16 dtype)");
    arr = tensor_to_numpy(py::cast(t.to(DType::f32)), "__array__");
    copied = true;
  } else {
    arr = tensor_to_numpy(self, "__array__");
  }
  if (!dtype.is_none()) {
    py::object converted = arr.attr("astype")(dtype, py::arg("copy") = false);
    if (!converted.is(arr)) {
      if (never_copy)
        throw BindingValueError("__array__(): converting to the requested dtype needs a copy, but copy=False");
      copied = true;
    }
    arr = converted;
  }
  if (force_copy && !copied) arr = arr.attr("copy")();
  return arr;
}

// repr, len, iteration, item, bool/float/int, tolist, NumPy and pickle.
void def_protocols(py::class_<Tensor>& cls) {
  cls.def("__repr__", [](const Tensor& t) { return t.to_string(); })
      .def("__str__", [](const Tensor& t) { return t.to_string(); })
      .def("__len__",
           [](const Tensor& t) {
             if (t.dim() == 0) throw BindingTypeError("len() of a 0-d tensor");
             return t.sizes()[0];
           })
      .def("__iter__",
           [](const Tensor& t) {
             if (t.dim() == 0) throw BindingTypeError("iteration over a 0-d tensor");
             py::list rows;
             for (int64_t i = 0; i < t.sizes()[0]; ++i) rows.append(py::cast(t.select(0, i)));
             return py::iter(rows);
           })
      .def(
          "item", [](const Tensor& t) { return item_of(t); }, "The value of a one-element tensor as a Python number.")
      .def("__bool__",
           [](const Tensor& t) {
             check_single_value(t, "Boolean value");
             return t.item<bool>();
           })
      .def("__float__",
           [](const Tensor& t) {
             check_single_value(t, "float()");
             return t.item<double>();
           })
      .def("__int__",
           [](const Tensor& t) {
             check_single_value(t, "int()");
             return t.item<int64_t>();
           })
      .def(
          "tolist",
          [](py::object self) -> py::object {
            const Tensor& t = self.cast<const Tensor&>();
            if (t.dtype() == DType::bf16) {
              py::object f32 = py::cast(t.to(DType::f32));
              return tensor_to_numpy(f32, "tolist").attr("tolist")();
            }
            return tensor_to_numpy(self, "tolist").attr("tolist")();
          },
          "The elements as (nested) Python lists; a 0-dim tensor gives a number.")
      .def(
          "numpy", [](py::object self) { return tensor_to_numpy(self, "numpy"); },
          "A NumPy array that views this tensor's memory (no copy); writes show through both ways. "
          "bfloat16 tensors must be converted first (.to(strata.float32)).")
      .def("__array__", &array_protocol, py::arg("dtype") = py::none(), py::arg("copy") = py::none())
      .def("__deepcopy__", &deepcopy_tensor, py::arg("memo"),
           "copy.deepcopy: a copy of the values with requires_grad and .grad (leaves only, as PyTorch).")
      .def(py::pickle(&tensor_state, &tensor_from_state));
}

}  // namespace

void init_tensor(py::module_& m) {
  py::class_<Tensor> cls(m, "Tensor", "A strided view of typed elements; views share storage (like torch.Tensor).");
  def_metadata(cls);
  def_views(cls);
  def_conversions(cls);
  def_protocols(cls);
}

}  // namespace strata::python
