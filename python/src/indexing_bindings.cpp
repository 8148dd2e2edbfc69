// Indexing (issue 26 part 2): Tensor.__getitem__ / __setitem__ parse the Python key into
// TensorIndex entries and call ops/indexing.h; the indexed ops of ops/indexing.h and ops/scatter.h
// under PyTorch's names (functions and Tensor methods, with the in-place forms).

#include <pybind11/stl.h>

#include <string>
#include <vector>

#include "bindings.h"
#include "ops/indexing.h"
#include "ops/scatter.h"

namespace strata::python {

namespace {

// ---- the key -------------------------------------------------------------------------------------

std::optional<int64_t> slice_bound(py::handle v, const char* what) {
  if (v.is_none()) return std::nullopt;
  if (PyBool_Check(v.ptr()) || !PyIndex_Check(v.ptr()))
    throw BindingTypeError(
        msg("slice indices must be integers or None, got ", Py_TYPE(v.ptr())->tp_name, " for the slice ", what));
  return int_from_py(v, "__getitem__", what);
}

TensorIndex slice_entry(py::handle item) {
  indexing::Slice s{slice_bound(item.attr("start"), "start"), slice_bound(item.attr("stop"), "stop"), 1};
  if (const auto step = slice_bound(item.attr("step"), "step")) {
    if (*step == 0) throw BindingValueError("slice step cannot be zero");
    if (*step < 0) throw BindingValueError(msg("step must be greater than zero, got ", *step));
    s.step = *step;
  }
  return s;
}

// A list, tuple or array inside the key: an index tensor (bools make a mask, an empty list an empty
// i64 index).
TensorIndex sequence_entry(py::handle item) {
  Tensor t = tensor_from_data(item, std::nullopt, "__getitem__");
  if (t.numel() == 0 && is_floating(t.dtype())) t = t.to(DType::i64);
  return t;
}

TensorIndex key_entry(py::handle item) {
  if (item.is_none()) return indexing::None;
  if (item.ptr() == Py_Ellipsis) return indexing::Ellipsis;
  if (PyBool_Check(item.ptr())) return item.ptr() == Py_True;
  if (py::isinstance<Tensor>(item)) return item.cast<Tensor>();
  if (PySlice_Check(item.ptr())) return slice_entry(item);
  if (PyIndex_Check(item.ptr())) return int_from_py(item, "__getitem__", "index");
  if (PyList_Check(item.ptr()) || PyTuple_Check(item.ptr()) || py::isinstance<py::array>(item))
    return sequence_entry(item);
  throw BindingIndexError(
      msg("only integers, slices (`:`), ellipsis (`...`), None and long or byte tensors are valid "
          "indices (got ",
          Py_TYPE(item.ptr())->tp_name, ")"));
}

// The Python key as TensorIndex entries: a tuple is one entry per element, anything else one entry.
std::vector<TensorIndex> parse_key(py::handle key) {
  std::vector<TensorIndex> out;
  if (PyTuple_Check(key.ptr())) {
    for (py::handle item : py::reinterpret_borrow<py::tuple>(key)) out.push_back(key_entry(item));
  } else {
    out.push_back(key_entry(key));
  }
  return out;
}

Tensor getitem(const Tensor& self, py::handle key) {
  const std::vector<TensorIndex> ix = parse_key(key);
  py::gil_scoped_release release;
  return index(self, ix);
}

// Note [In-place ops] in ops/inplace.h: set_index records the write (CopySlices for a basic index).
void setitem(Tensor self, py::handle key, py::handle value) {
  const std::vector<TensorIndex> ix = parse_key(key);
  if (is_number(value)) {
    const Scalar s = scalar_arg(value, "__setitem__", "value");
    py::gil_scoped_release release;
    set_index(self, ix, s);
    return;
  }
  const Tensor v =
      py::isinstance<Tensor>(value) ? value.cast<Tensor>() : tensor_from_data(value, std::nullopt, "__setitem__");
  py::gil_scoped_release release;
  set_index(self, ix, v);
}

// ---- argument helpers -------------------------------------------------------------------------------

// index_put's `indices`: a tuple or list of tensors (None entries are full slices, as PyTorch).
std::vector<TensorIndex> indices_arg(py::handle h, const char* op) {
  if (!PyTuple_Check(h.ptr()) && !PyList_Check(h.ptr()))
    throw BindingTypeError(
        msg(op, "(): argument 'indices' must be a tuple of Tensors, not ", Py_TYPE(h.ptr())->tp_name));
  std::vector<TensorIndex> out;
  for (py::handle item : py::reinterpret_borrow<py::sequence>(h)) {
    if (item.is_none())
      out.emplace_back(indexing::Slice{});
    else
      out.emplace_back(tensor_arg(item, op, "indices"));
  }
  return out;
}

Tensor masked_fill_any(const Tensor& x, const Tensor& mask, py::handle value) {
  const TensorOrScalar arg = tensor_or_scalar(value, "masked_fill", "value");
  py::gil_scoped_release release;
  return std::visit([&](const auto& v) { return masked_fill(x, mask, v); }, arg);
}

Tensor scatter_any(const Tensor& x, int64_t dim, const Tensor& index, py::handle src) {
  const TensorOrScalar arg = tensor_or_scalar(src, "scatter", "value");
  py::gil_scoped_release release;
  return std::visit([&](const auto& v) { return scatter(x, dim, index, v); }, arg);
}

py::object nonzero_py(const Tensor& x, bool as_tuple) {
  if (!as_tuple) return py::cast(nonzero(x));
  py::tuple out = py::cast(nonzero_tuple(x));
  return std::move(out);
}

Tensor& masked_fill_inplace(Tensor& x, const Tensor& mask, py::handle value) {
  const TensorOrScalar arg = tensor_or_scalar(value, "masked_fill_", "value");
  py::gil_scoped_release release;
  return std::visit([&](const auto& v) -> Tensor& { return masked_fill_(x, mask, v); }, arg);
}

Tensor& scatter_inplace(Tensor& x, int64_t dim, const Tensor& index, py::handle src) {
  const TensorOrScalar arg = tensor_or_scalar(src, "scatter_", "value");
  py::gil_scoped_release release;
  return std::visit([&](const auto& v) -> Tensor& { return scatter_(x, dim, index, v); }, arg);
}

void def_functions(py::module_& m) {
  m.def(
      "masked_fill",
      [](const Tensor& x, const Tensor& mask, py::handle value) { return masked_fill_any(x, mask, value); },
      py::arg("input"), py::arg("mask"), py::arg("value"));
  m.def(
      "masked_select", [](const Tensor& x, const Tensor& mask) { return masked_select(x, mask); }, py::arg("input"),
      py::arg("mask"), py::call_guard<py::gil_scoped_release>());
  m.def("nonzero", &nonzero_py, py::arg("input"), py::kw_only(), py::arg("as_tuple") = false);
  m.def(
      "scatter",
      [](const Tensor& x, int64_t dim, const Tensor& index, py::handle src) { return scatter_any(x, dim, index, src); },
      py::arg("input"), py::arg("dim"), py::arg("index"), py::arg("src"));
  m.def(
      "scatter_add",
      [](const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
        return scatter_add(x, dim, index, src);
      },
      py::arg("input"), py::arg("dim"), py::arg("index"), py::arg("src"), py::call_guard<py::gil_scoped_release>());
  m.def(
      "scatter_reduce",
      [](const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src, const std::string& reduce,
         bool include_self) { return scatter_reduce(x, dim, index, src, reduce, include_self); },
      py::arg("input"), py::arg("dim"), py::arg("index"), py::arg("src"), py::arg("reduce"), py::kw_only(),
      py::arg("include_self") = true, py::call_guard<py::gil_scoped_release>());
  m.def(
      "index_add",
      [](const Tensor& x, int64_t dim, const Tensor& index, const Tensor& source, py::handle alpha) {
        return index_add(x, dim, index, source, scalar_arg(alpha, "index_add", "alpha"));
      },
      py::arg("input"), py::arg("dim"), py::arg("index"), py::arg("source"), py::kw_only(), py::arg("alpha") = 1);
  m.def(
      "index_put",
      [](const Tensor& x, py::handle indices, const Tensor& values, bool accumulate) {
        return index_put(x, indices_arg(indices, "index_put"), values, accumulate);
      },
      py::arg("input"), py::arg("indices"), py::arg("values"), py::arg("accumulate") = false);
  m.def(
      "take_along_dim",
      [](const Tensor& x, const Tensor& indices, std::optional<int64_t> dim) {
        return take_along_dim(x, indices, dim);
      },
      py::arg("input"), py::arg("indices"), py::arg("dim") = py::none(), py::call_guard<py::gil_scoped_release>());
  m.def(
      "one_hot", [](const Tensor& x, int64_t num_classes) { return one_hot(x, num_classes); }, py::arg("tensor"),
      py::arg("num_classes") = -1, py::call_guard<py::gil_scoped_release>());
}

void def_methods(py::class_<Tensor>& cls) {
  cls.def("__getitem__", &getitem)
      .def("__setitem__", &setitem)
      .def("masked_fill", &masked_fill_any, py::arg("mask"), py::arg("value"))
      .def("masked_fill_", &masked_fill_inplace, py::arg("mask"), py::arg("value"))
      .def(
          "masked_select", [](const Tensor& x, const Tensor& mask) { return masked_select(x, mask); }, py::arg("mask"))
      .def("nonzero", &nonzero_py, py::kw_only(), py::arg("as_tuple") = false)
      .def("scatter", &scatter_any, py::arg("dim"), py::arg("index"), py::arg("src"))
      .def("scatter_", &scatter_inplace, py::arg("dim"), py::arg("index"), py::arg("src"))
      .def(
          "scatter_add",
          [](const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
            return scatter_add(x, dim, index, src);
          },
          py::arg("dim"), py::arg("index"), py::arg("src"))
      .def(
          "scatter_add_",
          [](Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) -> Tensor& {
            return scatter_add_(x, dim, index, src);
          },
          py::arg("dim"), py::arg("index"), py::arg("src"))
      .def(
          "scatter_reduce",
          [](const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src, const std::string& reduce,
             bool include_self) { return scatter_reduce(x, dim, index, src, reduce, include_self); },
          py::arg("dim"), py::arg("index"), py::arg("src"), py::arg("reduce"), py::kw_only(),
          py::arg("include_self") = true)
      .def(
          "index_add",
          [](const Tensor& x, int64_t dim, const Tensor& index, const Tensor& source, py::handle alpha) {
            return index_add(x, dim, index, source, scalar_arg(alpha, "index_add", "alpha"));
          },
          py::arg("dim"), py::arg("index"), py::arg("source"), py::kw_only(), py::arg("alpha") = 1)
      .def(
          "index_add_",
          [](Tensor& x, int64_t dim, const Tensor& index, const Tensor& source, py::handle alpha) -> Tensor& {
            return index_add_(x, dim, index, source, scalar_arg(alpha, "index_add_", "alpha"));
          },
          py::arg("dim"), py::arg("index"), py::arg("source"), py::kw_only(), py::arg("alpha") = 1)
      .def(
          "index_put",
          [](const Tensor& x, py::handle indices, const Tensor& values, bool accumulate) {
            return index_put(x, indices_arg(indices, "index_put"), values, accumulate);
          },
          py::arg("indices"), py::arg("values"), py::arg("accumulate") = false)
      .def(
          "index_put_",
          [](Tensor& x, py::handle indices, const Tensor& values, bool accumulate) -> Tensor& {
            return index_put_(x, indices_arg(indices, "index_put_"), values, accumulate);
          },
          py::arg("indices"), py::arg("values"), py::arg("accumulate") = false)
      .def(
          "take_along_dim",
          [](const Tensor& x, const Tensor& indices, std::optional<int64_t> dim) {
            return take_along_dim(x, indices, dim);
          },
          py::arg("indices"), py::arg("dim") = py::none());
}

}  // namespace

void init_indexing(py::module_& m) {
  def_functions(m);
  auto cls = py::reinterpret_borrow<py::class_<Tensor>>(py::type::of<Tensor>());
  def_methods(cls);
}

}  // namespace strata::python
