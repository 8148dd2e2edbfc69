// Tensor methods and operators of the ops (t.matmul(o), t.add_(o), t + o, ...), over the helpers
// ops_bindings.cpp shares through ops_support.h; registered by init_ops.

#include <functional>
#include <optional>

#include "bindings.h"
#include "ops/binary.h"
#include "ops/inplace.h"
#include "ops/linalg.h"
#include "ops/reduction.h"
#include "ops/shape_ops.h"
#include "ops/softmax_loss.h"
#include "ops/unary.h"
#include "ops_support.h"

namespace strata::python {

// ---- Tensor methods and operators -----------------------------------------------------------------

namespace {
py::class_<Tensor> tensor_class() { return py::reinterpret_borrow<py::class_<Tensor>>(py::type::of<Tensor>()); }
}  // namespace

// relu, sigmoid, ... as methods, and their in-place forms (relu_, ...).
void def_unary_methods() {
  auto cls = tensor_class();
#define STRATA_METHOD_UNARY(NAME)      \
  cls.def(#NAME, [](const Tensor& t) { \
    py::gil_scoped_release r;          \
    return NAME(t);                    \
  });
  STRATA_METHOD_UNARY(relu)
  STRATA_METHOD_UNARY(sigmoid)
  STRATA_METHOD_UNARY(tanh)
  STRATA_METHOD_UNARY(exp)
  STRATA_METHOD_UNARY(log)
  STRATA_METHOD_UNARY(sqrt)
#undef STRATA_METHOD_UNARY
#define STRATA_METHOD_UNARY_INPLACE(NAME, SAVES)                                               \
  cls.def(#NAME "_", [](py::object self) {                                                     \
    return inplace_op(self, #NAME "_", SAVES, false, [](const Tensor& a) { return NAME(a); }); \
  });
  STRATA_METHOD_UNARY_INPLACE(relu, false)
  STRATA_METHOD_UNARY_INPLACE(sigmoid, false)
  STRATA_METHOD_UNARY_INPLACE(tanh, false)
  STRATA_METHOD_UNARY_INPLACE(exp, false)
  STRATA_METHOD_UNARY_INPLACE(log, true)
  STRATA_METHOD_UNARY_INPLACE(sqrt, false)
#undef STRATA_METHOD_UNARY_INPLACE
}

// The ops of def_functions as Tensor methods: products, activations, pow and clamp (t.matmul(o), ...).
void def_op_methods() {
  using py::arg;
  const auto none = py::none();
  auto cls = tensor_class();
  cls.def(
         "matmul",
         [](const Tensor& t, py::handle other) {
           Tensor o = tensor_arg(other, "matmul", "other");
           py::gil_scoped_release r;
           return matmul(t, o);
         },
         arg("other"))
      .def(
          "bmm",
          [](const Tensor& t, py::handle mat2) {
            Tensor o = tensor_arg(mat2, "bmm", "mat2");
            py::gil_scoped_release r;
            return bmm(t, o);
          },
          arg("mat2"))
      .def(
          "leaky_relu",
          [](const Tensor& t, py::handle s) {
            const double v = number_arg(s, "leaky_relu", "negative_slope");
            py::gil_scoped_release r;
            return leaky_relu(t, v);
          },
          arg("negative_slope") = 0.01)
      .def(
          "pow", [](py::handle self, py::handle exponent) { return binary(Bin::Pow, self, exponent); }, arg("exponent"))
      .def(
          "pow_",
          [](py::object self, py::handle exponent) { return inplace_binary(self, Bin::Pow, "pow_", exponent, 1); },
          arg("exponent"))
      .def(
          "clamp", [](const Tensor& t, py::handle min, py::handle max) { return clamp_impl(t, min, max); },
          arg("min") = none, arg("max") = none)
      .def(
          "clip", [](const Tensor& t, py::handle min, py::handle max) { return clamp_impl(t, min, max); },
          arg("min") = none, arg("max") = none)
      .def(
          "clamp_",
          [](py::object self, py::handle min, py::handle max) {
            const auto lo = opt_number(min, "clamp_", "min");
            const auto hi = opt_number(max, "clamp_", "max");
            if (!lo && !hi) throw BindingValueError("clamp_(): at least one of 'min' or 'max' must not be None");
            return inplace_op(self, "clamp_", true, false, [lo, hi](const Tensor& a) { return clamp(a, lo, hi); });
          },
          arg("min") = none, arg("max") = none);
}

// The arithmetic methods, out of place and in place: t.add(o, alpha=), t.add_(o), ...
void def_arithmetic_methods() {
  using py::arg;
  const auto none = py::none();
  tensor_class()
      .def(
          "add",
          [](py::handle self, py::handle other, py::handle alpha) {
            return binary(Bin::Add, self, other, scalar_arg(alpha, "add", "alpha"));
          },
          arg("other"), py::kw_only(), arg("alpha") = 1)
      .def(
          "sub",
          [](py::handle self, py::handle other, py::handle alpha) {
            return binary(Bin::Sub, self, other, scalar_arg(alpha, "sub", "alpha"));
          },
          arg("other"), py::kw_only(), arg("alpha") = 1)
      .def(
          "mul", [](py::handle self, py::handle other) { return binary(Bin::Mul, self, other); }, arg("other"))
      .def(
          "div",
          [](py::handle self, py::handle other, py::handle rounding_mode) {
            return binary(div_kind(rounding_mode), self, other);
          },
          arg("other"), py::kw_only(), arg("rounding_mode") = none)
      .def(
          "add_",
          [](py::object self, py::handle other, py::handle alpha) {
            return inplace_binary(self, Bin::Add, "add_", other, scalar_arg(alpha, "add_", "alpha"));
          },
          arg("other"), py::kw_only(), arg("alpha") = 1)
      .def(
          "sub_",
          [](py::object self, py::handle other, py::handle alpha) {
            return inplace_binary(self, Bin::Sub, "sub_", other, scalar_arg(alpha, "sub_", "alpha"));
          },
          arg("other"), py::kw_only(), arg("alpha") = 1)
      .def(
          "mul_", [](py::object self, py::handle other) { return inplace_binary(self, Bin::Mul, "mul_", other, 1); },
          arg("other"))
      .def(
          "div_", [](py::object self, py::handle other) { return inplace_binary(self, Bin::Div, "div_", other, 1); },
          arg("other"));
}

// Reductions, softmax, split and indexing as methods: t.sum(dim), t.softmax(dim), t.gather(dim, i), ...
void def_reduction_and_index_methods() {
  using py::arg;
  const auto none = py::none();
  tensor_class()
      .def(
          "maximum",
          [](const Tensor& t, py::handle other) {
            return bin_tt(Bin::Maximum, t, tensor_arg(other, "maximum", "other"), 1);
          },
          arg("other"))
      .def(
          "where",
          [](const Tensor& t, py::handle condition, py::handle other) {
            return py::module_::import("strata._C").attr("where")(condition, py::cast(t), other);
          },
          arg("condition"), arg("other"))
      .def("neg",
           [](const Tensor& t) {
             py::gil_scoped_release r;
             return neg(t);
           })
      .def(
          "sum",
          [](const Tensor& t, py::handle dim, bool keepdim, py::handle dtype) {
            return sum_impl(t, dim, keepdim, dtype, false);
          },
          arg("dim") = none, arg("keepdim") = false, py::kw_only(), arg("dtype") = none)
      .def(
          "mean",
          [](const Tensor& t, py::handle dim, bool keepdim, py::handle dtype) {
            return sum_impl(t, dim, keepdim, dtype, true);
          },
          arg("dim") = none, arg("keepdim") = false, py::kw_only(), arg("dtype") = none)
      .def(
          "amax", [](const Tensor& t, py::handle dim, bool keepdim) { return amax_impl(t, dim, keepdim); },
          arg("dim") = py::tuple(), arg("keepdim") = false)
      .def(
          "max", [](const Tensor& t, py::handle dim, py::handle keepdim) { return max_impl(t, dim, keepdim); },
          arg("dim") = none, arg("keepdim") = none)
      .def(
          "softmax",
          [](const Tensor& t, py::handle dim, py::handle dtype) {
            check_no_dtype(dtype, "softmax");
            const int64_t d = wrap_dim_py(dim_arg(dim, "softmax"), t.dim(), "softmax", true);
            py::gil_scoped_release r;
            return softmax(t, d);
          },
          arg("dim"), arg("dtype") = none)
      .def(
          "log_softmax",
          [](const Tensor& t, py::handle dim, py::handle dtype) {
            check_no_dtype(dtype, "log_softmax");
            const int64_t d = wrap_dim_py(dim_arg(dim, "log_softmax"), t.dim(), "log_softmax", true);
            py::gil_scoped_release r;
            return log_softmax(t, d);
          },
          arg("dim"), arg("dtype") = none)
      .def(
          "split", [](const Tensor& t, py::handle split_size, int64_t dim) { return split_impl(t, split_size, dim); },
          arg("split_size"), arg("dim") = 0)
      .def(
          "index_select",
          [](const Tensor& t, py::handle dim, py::handle index) {
            const int64_t d = wrap_dim_py(dim_arg(dim, "index_select"), t.dim(), "index_select", true);
            Tensor idx = index_arg(index, "index_select");
            py::gil_scoped_release r;
            return index_select(t, d, idx);
          },
          arg("dim"), arg("index"))
      .def(
          "gather",
          [](const Tensor& t, py::handle dim, py::handle index) {
            const int64_t d = wrap_dim_py(dim_arg(dim, "gather"), t.dim(), "gather", true);
            Tensor idx = index_arg(index, "gather");
            py::gil_scoped_release r;
            return gather(t, d, idx);
          },
          arg("dim"), arg("index"));
}

// copy_, fill_, zero_.
void def_fill_methods() {
  using py::arg;
  auto cls = tensor_class();
  cls.def(
         "copy_",
         [](py::object self, py::handle src) {
           const Tensor s =
               py::isinstance<Tensor>(src) ? src.cast<Tensor>() : tensor_from_data(src, std::nullopt, "copy_");
           {
             py::gil_scoped_release release;
             copy_(self.cast<Tensor&>(), s);
           }
           return self;
         },
         arg("src"), "Copies src into self (broadcasting and converting); returns self.")
      .def(
          "fill_",
          [](py::object self, py::handle value) {
            const Scalar v = py::isinstance<Tensor>(value) ? Scalar(value.cast<const Tensor&>().item<double>())
                                                           : scalar_arg(value, "fill_", "value");
            {
              py::gil_scoped_release release;
              fill_(self.cast<Tensor&>(), v);
            }
            return self;
          },
          arg("value"))
      .def("zero_", [](py::object self) {
        {
          py::gil_scoped_release release;
          zero_(self.cast<Tensor&>());
        }
        return self;
      });
}

// Python's arithmetic operators, reflected and augmented (+=, ...).
void def_operators() {
  auto cls = tensor_class();
  cls.def(
         "__add__", [](py::handle s, py::handle o) { return operator_impl(Bin::Add, s, o, false); }, py::is_operator())
      .def(
          "__radd__", [](py::handle s, py::handle o) { return operator_impl(Bin::Add, s, o, true); }, py::is_operator())
      .def(
          "__sub__", [](py::handle s, py::handle o) { return operator_impl(Bin::Sub, s, o, false); }, py::is_operator())
      .def(
          "__rsub__", [](py::handle s, py::handle o) { return operator_impl(Bin::Sub, s, o, true); }, py::is_operator())
      .def(
          "__mul__", [](py::handle s, py::handle o) { return operator_impl(Bin::Mul, s, o, false); }, py::is_operator())
      .def(
          "__rmul__", [](py::handle s, py::handle o) { return operator_impl(Bin::Mul, s, o, true); }, py::is_operator())
      .def(
          "__truediv__", [](py::handle s, py::handle o) { return operator_impl(Bin::Div, s, o, false); },
          py::is_operator())
      .def(
          "__rtruediv__", [](py::handle s, py::handle o) { return operator_impl(Bin::Div, s, o, true); },
          py::is_operator())
      .def(
          "__pow__", [](py::handle s, py::handle o) { return operator_impl(Bin::Pow, s, o, false); }, py::is_operator())
      .def(
          "__rpow__", [](py::handle s, py::handle o) { return operator_impl(Bin::Pow, s, o, true); }, py::is_operator())
      .def(
          "__matmul__",
          [](py::handle s, py::handle o) -> py::object {
            if (!py::isinstance<Tensor>(o)) return py::reinterpret_borrow<py::object>(Py_NotImplemented);
            Tensor a = s.cast<Tensor>(), b = o.cast<Tensor>();
            py::gil_scoped_release r;
            Tensor out = matmul(a, b);
            py::gil_scoped_acquire g;
            return py::cast(std::move(out));
          },
          py::is_operator())
      .def(
          "__floordiv__", [](py::handle s, py::handle o) { return operator_impl(Bin::FloorDiv, s, o, false); },
          py::is_operator())
      .def(
          "__rfloordiv__", [](py::handle s, py::handle o) { return operator_impl(Bin::FloorDiv, s, o, true); },
          py::is_operator())
      .def(
          "__mod__", [](py::handle s, py::handle o) { return operator_impl(Bin::Mod, s, o, false); }, py::is_operator())
      .def(
          "__rmod__", [](py::handle s, py::handle o) { return operator_impl(Bin::Mod, s, o, true); }, py::is_operator())
      .def(
          "floor_divide", [](py::handle s, py::handle o) { return binary(Bin::FloorDiv, s, o); }, py::arg("other"))
      .def(
          "remainder", [](py::handle s, py::handle o) { return binary(Bin::Mod, s, o); }, py::arg("other"))
      .def("__neg__",
           [](const Tensor& t) {
             py::gil_scoped_release r;
             return neg(t);
           })
      .def("__pos__", [](py::object self) { return self; })
      .def(
          "__iadd__",
          [](py::object self, py::handle o) -> py::object {
            if (!py::isinstance<Tensor>(o) && !is_number(o))
              return py::reinterpret_borrow<py::object>(Py_NotImplemented);
            return inplace_binary(self, Bin::Add, "__iadd__", o, 1);
          },
          py::is_operator())
      .def(
          "__isub__",
          [](py::object self, py::handle o) -> py::object {
            if (!py::isinstance<Tensor>(o) && !is_number(o))
              return py::reinterpret_borrow<py::object>(Py_NotImplemented);
            return inplace_binary(self, Bin::Sub, "__isub__", o, 1);
          },
          py::is_operator())
      .def(
          "__imul__",
          [](py::object self, py::handle o) -> py::object {
            if (!py::isinstance<Tensor>(o) && !is_number(o))
              return py::reinterpret_borrow<py::object>(Py_NotImplemented);
            return inplace_binary(self, Bin::Mul, "__imul__", o, 1);
          },
          py::is_operator())
      .def(
          "__itruediv__",
          [](py::object self, py::handle o) -> py::object {
            if (!py::isinstance<Tensor>(o) && !is_number(o))
              return py::reinterpret_borrow<py::object>(Py_NotImplemented);
            return inplace_binary(self, Bin::Div, "__itruediv__", o, 1);
          },
          py::is_operator());
}

}  // namespace strata::python
