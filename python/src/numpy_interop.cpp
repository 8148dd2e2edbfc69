// Tensors to and from NumPy: zero-copy views both ways where the layout allows, copies otherwise.

#include <cstdint>
#include <memory>
#include <vector>

#include "bindings.h"
#include "core/allocator.h"
#include "core/storage.h"

namespace strata::python {

namespace {

constexpr const char* kSupportedNumpy =
    "float16, float32, float64, int32, int64, uint8 and bool (bfloat16 has no NumPy dtype)";

std::string str_of(py::handle obj) { return py::str(obj).cast<std::string>(); }

// Releases the reference a Storage holds on a NumPy array. Runs when the last tensor viewing the
// array goes away, possibly on a thread without the GIL.
void release_array(PyObject* array) {
  if (!Py_IsInitialized()) return;  // interpreter already gone: nothing left to release
  py::gil_scoped_acquire gil;
  Py_DECREF(array);
}

}  // namespace

Tensor tensor_from_numpy(py::handle obj) {
  if (!py::isinstance<py::array>(obj))
    throw BindingTypeError(msg("from_numpy(): expected a numpy.ndarray, got ", type_name(obj)));
  auto arr = py::reinterpret_borrow<py::array>(obj);
  const py::dtype dt = arr.dtype();
  const std::optional<DType> dtype = dtype_from_numpy(dt);
  if (!dtype)
    throw BindingTypeError(
        msg("from_numpy(): NumPy dtype ", str_of(dt), " is not supported; supported dtypes are ", kSupportedNumpy));
  if (!dt.attr("isnative").cast<bool>())
    throw BindingValueError(msg("from_numpy(): the array's dtype ", str_of(py::repr(dt)),
                                " is not in native byte order; convert it first with "
                                "arr.astype(arr.dtype.newbyteorder('='))"));
  const auto item = static_cast<int64_t>(itemsize(*dtype));
  const auto rank = static_cast<std::size_t>(arr.ndim());
  Dims sizes(rank);
  for (std::size_t d = 0; d < rank; ++d) sizes[d] = static_cast<int64_t>(arr.shape(d));
  const Dims fallback = contiguous_strides(sizes);
  Dims strides(rank);
  int64_t numel = 1;
  int64_t extent = 0;  // in elements, from the first element to the last
  for (std::size_t d = 0; d < rank; ++d) {
    const int64_t n = sizes[d];
    const auto bytes = static_cast<int64_t>(arr.strides(d));
    numel *= n;
    if (n <= 1 && (bytes < 0 || bytes % item != 0)) {
      strides[d] = fallback[d];  // the stride of a dim of size 0 or 1 never addresses memory
      continue;
    }
    if (bytes < 0)
      throw BindingValueError(msg("from_numpy(): the array has a negative stride (", bytes, " bytes at dim ", d,
                                  "), which Strata tensors do not support; "
                                  "pass a copy instead (arr.copy())"));
    if (bytes % item != 0)
      throw BindingValueError(msg("from_numpy(): the array's stride of ", bytes, " bytes at dim ", d,
                                  " is not a multiple of its element size (", item,
                                  " bytes); pass a copy instead (np.ascontiguousarray(arr))"));
    strides[d] = bytes / item;
    extent += (n - 1) * strides[d];
  }
  void* data = const_cast<void*>(arr.data());
  if (numel > 0 && reinterpret_cast<std::uintptr_t>(data) % static_cast<std::uintptr_t>(item) != 0)
    throw BindingValueError(msg("from_numpy(): the array's data is not aligned to its element size (", item,
                                " bytes); pass a copy instead (arr.copy())"));
  if (!arr.writeable()) {
    // Like torch.from_numpy: the tensor is writable, so writing through it is undefined behavior.
    if (PyErr_WarnEx(PyExc_UserWarning,
                     "strata.from_numpy(): the given NumPy array is not writable, but the tensor "
                     "Strata returns is; writing through it is undefined behavior. Copy the array "
                     "first (arr.copy()) if you intend to write.",
                     1) != 0)
      throw py::error_already_set();
  }
  const std::size_t nbytes = numel == 0 ? 0 : static_cast<std::size_t>((extent + 1) * item);
  PyObject* keep = obj.ptr();
  Py_INCREF(keep);
  auto allocation = std::make_unique<ExternalAllocation>(data, nbytes, [keep](void*) { release_array(keep); });
  Storage storage = Storage::wrap(std::move(allocation));
  return Tensor(std::move(storage), sizes, strides, 0, *dtype);
}

py::array tensor_to_numpy(py::handle self, const char* op) {
  const Tensor& t = self.cast<const Tensor&>();
  const py::dtype dt = numpy_dtype(t.dtype(), op);
  const auto item = static_cast<py::ssize_t>(t.itemsize());
  std::vector<py::ssize_t> shape;
  std::vector<py::ssize_t> strides;
  for (int64_t d = 0; d < t.dim(); ++d) {
    shape.push_back(static_cast<py::ssize_t>(t.sizes()[d]));
    strides.push_back(static_cast<py::ssize_t>(t.strides()[d]) * item);
  }
  // `self` becomes the array's base: the array keeps the tensor (and so its storage) alive.
  return py::array(dt, std::move(shape), std::move(strides), t.data_ptr(), self);
}

Tensor tensor_from_data(py::handle data, std::optional<DType> dtype, const char* op) {
  if (py::isinstance<Tensor>(data)) {
    const Tensor src = data.cast<Tensor>();
    py::gil_scoped_release release;
    return dtype ? src.to(*dtype, /*copy=*/true) : src.clone();
  }
  py::module_ np = py::module_::import("numpy");
  // Python's own numbers and (nested) lists follow PyTorch's defaults: floats become float32.
  // Arrays and NumPy scalars keep their dtype.
  const bool python_data =
      !py::isinstance(data, np.attr("generic")) &&
      (PyList_Check(data.ptr()) || PyTuple_Check(data.ptr()) || PyFloat_Check(data.ptr()) || PyLong_Check(data.ptr()));
  py::array arr = np.attr("asarray")(data);
  py::dtype dt = arr.dtype();
  std::optional<DType> src = dtype_from_numpy(dt);
  if (!src) {
    const char kind = dt.kind();
    if (!dtype || (kind != 'f' && kind != 'i' && kind != 'u'))
      throw BindingTypeError(msg(op, "(): cannot make a tensor from data of NumPy dtype ", str_of(dt), "; Strata has ",
                                 kSupportedNumpy,
                                 kind == 'f' || kind == 'i' || kind == 'u' ? " (pass dtype= to convert)" : ""));
    // Widen through NumPy, then let Strata convert to the requested dtype.
    arr = arr.attr("astype")(kind == 'f' ? py::dtype::of<double>() : py::dtype::of<int64_t>());
    dt = arr.dtype();
    src = dtype_from_numpy(dt);
  }
  const DType target = dtype ? *dtype : (python_data && *src == DType::f64 ? DType::f32 : *src);
  const bool ok_layout = dt.attr("isnative").cast<bool>() && (arr.flags() & py::array::c_style) != 0 &&
                         py::cast<bool>(arr.attr("flags").attr("aligned"));
  if (!ok_layout)
    arr = np.attr("array")(arr, py::arg("dtype") = dt.attr("newbyteorder")("="), py::arg("order") = "C",
                           py::arg("copy") = true);
  const Tensor view = tensor_from_numpy(arr);
  Tensor out;
  {
    py::gil_scoped_release release;
    out = target == view.dtype() ? view.clone() : view.to(target, /*copy=*/true);
  }
  return out;
}

}  // namespace strata::python
