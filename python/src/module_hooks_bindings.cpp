// Module.register_forward_pre_hook / register_forward_hook / register_full_backward_hook and the
// hooks' side of Module.__call__. The hooks are nn::Module's (Note [Module hooks] in
// models/module_hooks.cpp); this file adapts Python callables to them with PyTorch's signatures:
// pre-hook(module, args) -> None | input | (input,); hook(module, args, output) -> None | output;
// backward hook(module, grad_input, grad_output) -> None | tuple of gradients (None entries kept).

#include "bindings.h"
#include "models/module.h"

namespace strata::python {

namespace {

using nn::Module;

py::object module_object_of(Module& m) { return py::cast(&m, py::return_value_policy::reference); }

py::tuple grads_tuple(const std::vector<Tensor>& grads) {
  py::tuple out(grads.size());
  for (std::size_t i = 0; i < grads.size(); ++i) out[i] = grads[i].defined() ? py::cast(grads[i]) : py::none();
  return out;
}

// A forward (pre-)hook's result: None keeps, a Tensor (or a 1-tuple holding one) replaces.
Tensor tensor_result(py::handle r, const char* what) {
  if (r.is_none()) return Tensor();
  if (py::isinstance<Tensor>(r)) return r.cast<Tensor>();
  if (py::isinstance<py::tuple>(r) && py::len(r) == 1 && py::isinstance<Tensor>(r[py::int_(0)]))
    return r[py::int_(0)].cast<Tensor>();
  throw BindingTypeError(
      msg(what, " must return None or a Tensor (a module called with one tensor), got ", Py_TYPE(r.ptr())->tp_name));
}

std::vector<Tensor> grads_result(py::handle r, std::size_t n) {
  if (r.is_none()) return {};
  if (!py::isinstance<py::tuple>(r) && !py::isinstance<py::list>(r))
    throw BindingTypeError(
        msg("backward hook must return None or a tuple of gradients, got ", Py_TYPE(r.ptr())->tp_name));
  std::vector<Tensor> out;
  for (py::handle g : r) {
    if (g.is_none())
      out.push_back(Tensor());
    else if (py::isinstance<Tensor>(g))
      out.push_back(g.cast<Tensor>());
    else
      throw BindingTypeError(msg("backward hook returned a ", Py_TYPE(g.ptr())->tp_name, " among its gradients"));
  }
  if (out.size() != n) throw BindingValueError(msg("backward hook returned ", out.size(), " gradients, expected ", n));
  return out;
}

std::shared_ptr<PyRef> checked_hook(py::object hook, const char* op, bool unsupported, const char* option) {
  if (!PyCallable_Check(hook.ptr()))
    throw BindingTypeError(msg(op, "(): hook must be callable, got ", Py_TYPE(hook.ptr())->tp_name));
  if (unsupported) {
    PyErr_SetString(PyExc_NotImplementedError, msg(op, "(): ", option, " is not supported by Strata").c_str());
    throw py::error_already_set();
  }
  return std::make_shared<PyRef>(std::move(hook));
}

RemovableHandle handle_for(py::object self, uint64_t id) {
  auto owner = std::make_shared<PyRef>(std::move(self));
  return RemovableHandle{id, [owner, id] { owner->obj.cast<Module&>().remove_hook(id); }};
}

}  // namespace

py::object call_module_with_hooks(Module& m, const py::args& args, const py::kwargs& kwargs) {
  if (args.size() != 1 || !kwargs.empty() || !py::isinstance<Tensor>(args[0])) {
    PyErr_SetString(PyExc_NotImplementedError,
                    msg(m.type_name(), ": a module with hooks can only be called with one tensor in Strata (got ",
                        args.size(), " positional and ", kwargs.size(), " keyword arguments)")
                        .c_str());
    throw py::error_already_set();
  }
  const Tensor input = args[0].cast<Tensor>();
  Tensor out;
  {
    py::gil_scoped_release release;
    out = m(input);
  }
  return py::cast(std::move(out));
}

void def_module_hooks(py::handle module_class) {
  auto cls = py::reinterpret_borrow<py::class_<Module>>(module_class);
  cls.def(
         "register_forward_pre_hook",
         [](py::object self, py::object hook, bool prepend, bool with_kwargs) {
           auto ref = checked_hook(std::move(hook), "register_forward_pre_hook", with_kwargs, "with_kwargs=True");
           const uint64_t id = self.cast<Module&>().register_forward_pre_hook(
               [ref](Module& mod, const Tensor& input) {
                 py::gil_scoped_acquire gil;
                 return tensor_result(ref->obj(module_object_of(mod), py::make_tuple(input)), "forward pre-hook");
               },
               prepend);
           return handle_for(std::move(self), id);
         },
         py::arg("hook"), py::kw_only(), py::arg("prepend") = false, py::arg("with_kwargs") = false,
         "Registers hook(module, args) -> None or a new input, run before each call of the module.")
      .def(
          "register_forward_hook",
          [](py::object self, py::object hook, bool prepend, bool with_kwargs, bool always_call) {
            auto ref = checked_hook(std::move(hook), "register_forward_hook", with_kwargs || always_call,
                                    "with_kwargs=True / always_call=True");
            const uint64_t id = self.cast<Module&>().register_forward_hook(
                [ref](Module& mod, const Tensor& input, const Tensor& output) {
                  py::gil_scoped_acquire gil;
                  return tensor_result(ref->obj(module_object_of(mod), py::make_tuple(input), output), "forward hook");
                },
                prepend);
            return handle_for(std::move(self), id);
          },
          py::arg("hook"), py::kw_only(), py::arg("prepend") = false, py::arg("with_kwargs") = false,
          py::arg("always_call") = false,
          "Registers hook(module, args, output) -> None or a new output, run after each call of the module.")
      .def(
          "register_full_backward_hook",
          [](py::object self, py::object hook, bool prepend) {
            auto ref = checked_hook(std::move(hook), "register_full_backward_hook", false, "");
            const uint64_t id = self.cast<Module&>().register_full_backward_hook(
                [ref](Module& mod, const std::vector<Tensor>& grad_input, const std::vector<Tensor>& grad_output) {
                  py::gil_scoped_acquire gil;
                  py::object r = ref->obj(module_object_of(mod), grads_tuple(grad_input), grads_tuple(grad_output));
                  return grads_result(r, grad_input.size());
                },
                prepend);
            return handle_for(std::move(self), id);
          },
          py::arg("hook"), py::kw_only(), py::arg("prepend") = false,
          "Registers hook(module, grad_input, grad_output) -> None or new grad_input, run when the gradient "
          "w.r.t. the module's input has been computed.");
}

}  // namespace strata::python
