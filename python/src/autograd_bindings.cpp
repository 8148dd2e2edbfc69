// Autograd on strata.Tensor (requires_grad, grad, is_leaf, grad_fn, backward, detach) and the grad
// mode switch behind strata.no_grad / enable_grad / set_grad_enabled (python/strata/autograd).

#include "autograd/engine.h"
#include "autograd/grad_mode.h"
#include "autograd/node.h"
#include "bindings.h"

namespace strata::python {
namespace {

py::object grad_of(const Tensor& t) {
  Tensor g = t.grad();
  if (!g.defined()) return py::none();
  return py::cast(std::move(g));
}

void set_grad_of(Tensor& t, py::handle value) {
  if (value.is_none()) {
    t.set_grad(Tensor());
    return;
  }
  if (!py::isinstance<Tensor>(value))
    throw BindingTypeError(msg("assigned grad expected to be a Tensor or None but got grad of type ",
                               Py_TYPE(value.ptr())->tp_name));
  const Tensor& g = value.cast<const Tensor&>();
  if (g.dtype() != t.dtype())
    throw BindingTypeError(msg("assigned grad has data of a different type: got ", dtype_py_name(g.dtype()),
                               ", expected ", dtype_py_name(t.dtype())));
  if (g.sizes() != t.sizes())
    throw BindingValueError(msg("assigned grad has data of a different size: got ", g.sizes(),
                                ", expected ", t.sizes()));
  t.set_grad(g);
}

}  // namespace

void init_autograd(py::module_& m) {
  auto cls = py::reinterpret_borrow<py::class_<Tensor>>(py::type::of<Tensor>());
  cls.def_property(
         "requires_grad", [](const Tensor& t) { return t.requires_grad(); },
         [](Tensor& t, bool r) { t.set_requires_grad(r); },
         "Whether gradients are computed for this tensor (settable on leaves only).")
      .def(
          "requires_grad_",
          [](py::object self, bool r) {
            self.cast<Tensor&>().set_requires_grad(r);
            return self;
          },
          py::arg("requires_grad") = true, "Sets requires_grad in place and returns self.")
      .def_property("grad", &grad_of, &set_grad_of,
                    "The gradient accumulated by backward() (None until one reached this leaf).")
      .def_property_readonly("is_leaf", [](const Tensor& t) { return t.is_leaf(); },
                             "True unless the tensor is the output of a recorded op.")
      .def_property_readonly(
          "grad_fn",
          [](const Tensor& t) -> py::object {
            if (!t.grad_fn()) return py::none();
            return py::str(t.grad_fn()->name());
          },
          "The name of the recorded op that produced this tensor, or None.")
      .def(
          "backward",
          [](const Tensor& t, py::object gradient, py::object retain_graph) {
            Tensor g;
            if (!gradient.is_none()) g = gradient.cast<Tensor>();
            const bool retain = !retain_graph.is_none() && retain_graph.cast<bool>();
            py::gil_scoped_release release;
            t.backward(g, retain);
          },
          py::arg("gradient") = py::none(), py::arg("retain_graph") = py::none(),
          "Accumulates the gradient of this tensor into the .grad of every leaf it depends on.")
      .def("detach", &Tensor::detach, "A view of the same data, detached from the graph.");

  m.def("is_grad_enabled", [] { return autograd::GradMode::is_enabled(); },
        "Whether ops record the graph on this thread.");
  m.def("_set_grad_enabled", [](bool on) { autograd::GradMode::set_enabled(on); }, py::arg("enabled"));
}

}  // namespace strata::python
