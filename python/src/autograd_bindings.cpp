// Autograd on strata.Tensor (requires_grad, grad, is_leaf, grad_fn, backward, detach, gradient
// hooks, retain_grad), the grad and inference mode switches behind strata.no_grad / enable_grad /
// set_grad_enabled / inference_mode, and the C++ half of strata.autograd.Function
// (python/strata/autograd).

#include <any>
#include <memory>
#include <optional>

#include "autograd/anomaly_mode.h"
#include "autograd/engine.h"
#include "autograd/grad_mode.h"
#include "autograd/node.h"
#include "autograd/saved_tensor.h"
#include "autograd/tape.h"
#include "bindings.h"
#include "core/factories.h"
#include "ops/custom_function.h"

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
    throw BindingTypeError(
        msg("assigned grad expected to be a Tensor or None but got grad of type ", Py_TYPE(value.ptr())->tp_name));
  const Tensor& g = value.cast<const Tensor&>();
  if (g.dtype() != t.dtype())
    throw BindingTypeError(msg("assigned grad has data of a different type: got ", dtype_py_name(g.dtype()),
                               ", expected ", dtype_py_name(t.dtype())));
  if (g.sizes() != t.sizes())
    throw BindingValueError(
        msg("assigned grad has data of a different size: got ", g.sizes(), ", expected ", t.sizes()));
  t.set_grad(g);
}

// ---- Python saved-tensor hooks ------------------------------------------------------------------
// Note [Python saved-tensor hooks]
// Ops run with the GIL released, and the values a pack hook returns (and the hooks themselves) may
// be dropped by backward, also without the GIL. So every trampoline acquires the GIL, and every
// Python object the C++ side keeps is held by a PyRef (bindings.h), whose destructor acquires the GIL
// (and leaks the reference instead if the interpreter is already gone).

class PySavedTensorHooks final : public autograd::SavedTensorHooks {
 public:
  PySavedTensorHooks(py::object pack, py::object unpack)
      : pack_(std::make_shared<PyRef>(std::move(pack))), unpack_(std::make_shared<PyRef>(std::move(unpack))) {}

  std::any pack(const Tensor& value) override {
    py::gil_scoped_acquire gil;
    py::object packed = pack_->obj(py::cast(value));
    return std::make_shared<PyRef>(std::move(packed));
  }

  Tensor unpack(std::any& packed) override {
    py::gil_scoped_acquire gil;
    auto ref = std::any_cast<std::shared_ptr<PyRef>>(packed);
    py::object out = unpack_->obj(ref->obj);
    if (!py::isinstance<Tensor>(out))
      throw BindingTypeError(
          msg("saved_tensors_hooks: unpack_hook must return a Tensor, got ", Py_TYPE(out.ptr())->tp_name));
    return out.cast<Tensor>();
  }

 private:
  std::shared_ptr<PyRef> pack_, unpack_;
};

// The context manager behind strata.autograd.graph.saved_tensors_hooks.
class PyHooksGuard {
 public:
  PyHooksGuard(py::object pack, py::object unpack) {
    if (!PyCallable_Check(pack.ptr()) || !PyCallable_Check(unpack.ptr()))
      throw BindingTypeError("saved_tensors_hooks: pack_hook and unpack_hook must be callables");
    hooks_ = std::make_shared<PySavedTensorHooks>(std::move(pack), std::move(unpack));
  }
  void enter() {
    if (guard_) throw Error("saved_tensors_hooks: this context is already entered");
    guard_.emplace(hooks_);
  }
  void exit() { guard_.reset(); }

 private:
  std::shared_ptr<PySavedTensorHooks> hooks_;
  std::optional<autograd::SavedTensorHooksGuard> guard_;
};

// ---- backward / grad ----------------------------------------------------------------------------------

autograd::TensorList tensors_of(py::handle obj, const char* op, const char* what, bool allow_none) {
  autograd::TensorList out;
  if (obj.is_none()) return out;
  if (py::isinstance<Tensor>(obj)) {
    out.push_back(obj.cast<Tensor>());
    return out;
  }
  if (!PySequence_Check(obj.ptr()) || py::isinstance<py::str>(obj))
    throw BindingTypeError(
        msg(op, "(): ", what, " must be a Tensor or a sequence of Tensors, got ", Py_TYPE(obj.ptr())->tp_name));
  std::size_t i = 0;
  for (py::handle item : py::reinterpret_borrow<py::sequence>(obj)) {
    if (item.is_none() && allow_none) {
      out.push_back(Tensor());
    } else if (py::isinstance<Tensor>(item)) {
      out.push_back(item.cast<Tensor>());
    } else {
      throw BindingTypeError(
          msg(op, "(): ", what, " must contain Tensors, but element ", i, " is ", Py_TYPE(item.ptr())->tp_name));
    }
    ++i;
  }
  return out;
}

// PyTorch: an omitted gradient is allowed only for one-element roots (implicitly 1).
autograd::TensorList root_grads(const autograd::TensorList& roots, autograd::TensorList grads, const char* op) {
  if (grads.empty()) return grads;
  if (grads.size() != roots.size())
    throw BindingValueError(msg(op, "(): got ", grads.size(), " gradients for ", roots.size(), " tensors"));
  bool any_defined = false;
  for (const Tensor& g : grads) any_defined = any_defined || g.defined();
  if (!any_defined) return {};
  for (std::size_t i = 0; i < grads.size(); ++i) {
    if (grads[i].defined()) continue;
    if (roots[i].numel() != 1)
      throw Error(msg(op, "(): grad can be implicitly created only for scalar outputs (tensor ", i, " is ",
                      roots[i].describe(), ")"));
    grads[i] = full(roots[i].sizes(), 1.0, {roots[i].dtype(), nullptr});
  }
  return grads;
}

bool retain_arg(py::handle retain_graph) { return !retain_graph.is_none() && py::cast<bool>(retain_graph); }

void check_create_graph(bool create_graph, const char* op) {
  if (create_graph) {
    PyErr_SetString(PyExc_NotImplementedError,
                    msg(op,
                        "(): create_graph=True (double backward / higher-order gradients) is not "
                        "supported by Strata: backward functions are not recorded")
                        .c_str());
    throw py::error_already_set();
  }
}

py::dict saved_info_dict(const autograd::SavedInfo& s) {
  py::dict d;
  py::tuple shape(s.sizes.size());
  for (std::size_t i = 0; i < s.sizes.size(); ++i) shape[i] = py::int_(s.sizes[i]);
  d["shape"] = shape;
  d["dtype"] = dtype_object(s.dtype);
  d["bytes"] = s.bytes;
  d["tier"] = s.tier;
  d["packed"] = s.packed;
  d["released"] = s.released;
  return d;
}

// ---- custom functions (strata.autograd.Function; Note [Custom functions] in ops/custom_function.h)

// The user's backward as the node calls it: `fn` (python/strata/autograd/function.py) takes the
// tuple of output gradients (None where undefined) and returns a tuple of gradients or None.
CustomBackward py_custom_backward(py::object fn) {
  auto ref = std::make_shared<PyRef>(std::move(fn));
  return [ref](const autograd::TensorList& grads) {
    py::gil_scoped_acquire gil;
    py::tuple args(grads.size());
    for (std::size_t i = 0; i < grads.size(); ++i) args[i] = grads[i].defined() ? py::cast(grads[i]) : py::none();
    py::object out = ref->obj(args);
    autograd::TensorList result;
    for (py::handle item : py::reinterpret_borrow<py::tuple>(out)) {
      if (item.is_none()) {
        result.push_back(Tensor());
      } else if (py::isinstance<Tensor>(item)) {
        result.push_back(item.cast<Tensor>());
      } else {
        throw Error(msg("expected Variable or None (got ", Py_TYPE(item.ptr())->tp_name, ")"));
      }
    }
    return result;
  };
}

// What ctx keeps of its node: a weak reference, since the node holds ctx (through the backward
// callable) and a strong one would make a cycle no garbage collector sees.
struct FunctionHandle {
  std::weak_ptr<CustomFunctionNode> node;

  py::tuple saved_tensors() const {
    std::shared_ptr<CustomFunctionNode> n = node.lock();
    if (!n) throw Error("saved_tensors: the graph of this Function call is gone");
    py::tuple out(n->saved_values().size());
    for (std::size_t i = 0; i < n->saved_values().size(); ++i) {
      Tensor t = n->saved(i);
      out[i] = t.defined() ? py::cast(std::move(t)) : py::none();
    }
    return out;
  }
};

py::tuple record_function(const std::string& name, py::handle inputs, py::handle outputs, py::handle dirty,
                          py::handle non_differentiable, py::handle to_save, bool materialize_grads,
                          py::object backward) {
  CustomFunctionSpec spec;
  spec.name = name;
  spec.inputs = tensors_of(inputs, "Function.apply", "inputs", true);
  spec.dirty = tensors_of(dirty, "mark_dirty", "arguments", false);
  spec.non_differentiable = tensors_of(non_differentiable, "mark_non_differentiable", "arguments", false);
  spec.to_save = tensors_of(to_save, "save_for_backward", "arguments", true);
  spec.materialize_grads = materialize_grads;
  autograd::TensorList outs = tensors_of(outputs, "Function.apply", "outputs", false);
  std::shared_ptr<CustomFunctionNode> node =
      record_custom_function(spec, outs, py_custom_backward(std::move(backward)));
  py::list out_list;
  for (Tensor& t : outs) out_list.append(py::cast(std::move(t)));
  return py::make_tuple(out_list, node ? py::cast(FunctionHandle{node}) : py::none());
}

// ---- tensor hooks (Note [Tensor hooks] in autograd/hooks.h) --------------------------------------

Tensor::GradHook py_grad_hook(py::object fn) {
  auto ref = std::make_shared<PyRef>(std::move(fn));
  return [ref](const Tensor& grad) -> Tensor {
    py::gil_scoped_acquire gil;
    py::object out = ref->obj(py::cast(grad));
    if (out.is_none()) return Tensor();
    if (!py::isinstance<Tensor>(out))
      throw BindingTypeError(
          msg("register_hook: a hook must return a Tensor or None, got ", Py_TYPE(out.ptr())->tp_name));
    return out.cast<Tensor>();
  };
}

// ---- the bindings, by part ------------------------------------------------------------------------

void bind_removable_handle(py::module_& m) {
  py::class_<RemovableHandle>(
      m, "RemovableHandle",
      "Unregisters a hook (torch.utils.hooks.RemovableHandle): remove(), or leave a `with` block.")
      .def_readonly("id", &RemovableHandle::id)
      .def("remove", &RemovableHandle::remove, "Unregisters the hook (again: nothing happens).")
      .def("__enter__", [](py::object self) { return self; })
      .def("__exit__", [](RemovableHandle& h, py::args) { h.remove(); });
}

// Autograd on strata.Tensor: requires_grad, grad, is_leaf, grad_fn, backward, detach, hooks.
void def_tensor_autograd() {
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
      .def_property_readonly(
          "is_leaf", [](const Tensor& t) { return t.is_leaf(); },
          "True unless the tensor is the output of a recorded op.")
      .def_property_readonly(
          "grad_fn",
          [](const Tensor& t) -> py::object {
            if (!t.grad_fn()) return py::none();
            return py::cast(t.grad_fn());
          },
          "The node (strata.autograd.graph.Node) of the recorded op that produced this tensor, or None.")
      .def_property_readonly(
          "output_nr", [](const Tensor& t) { return t.output_nr(); }, "Which output of grad_fn this tensor is.")
      .def_property_readonly(
          "_version", [](const Tensor& t) { return t.version(); },
          "The in-place version counter shared by every view of the storage.")
      .def(
          "backward",
          [](const Tensor& t, py::object gradient, py::object retain_graph, bool create_graph) {
            check_create_graph(create_graph, "backward");
            Tensor g;
            if (!gradient.is_none()) {
              if (!py::isinstance<Tensor>(gradient))
                throw BindingTypeError(
                    msg("backward(): gradient must be a Tensor or None, got ", Py_TYPE(gradient.ptr())->tp_name));
              g = gradient.cast<Tensor>();
            }
            const bool retain = retain_arg(retain_graph);
            py::gil_scoped_release release;
            t.backward(g, retain);
          },
          py::arg("gradient") = py::none(), py::arg("retain_graph") = py::none(), py::arg("create_graph") = false,
          "Accumulates the gradient of this tensor into the .grad of every leaf it depends on.")
      .def("detach", &Tensor::detach, "A view of the same data, detached from the graph.")
      .def(
          "register_hook",
          [](const Tensor& t, py::object hook) {
            if (!PyCallable_Check(hook.ptr()))
              throw BindingTypeError(msg("register_hook(): hook must be callable, got ", Py_TYPE(hook.ptr())->tp_name));
            const uint64_t id = t.register_hook(py_grad_hook(std::move(hook)));
            return RemovableHandle{id, [t, id] { t.remove_hook(id); }};
          },
          py::arg("hook"),
          "Registers hook(grad) -> Tensor or None, run on the gradient w.r.t. this tensor each time one is "
          "computed; returns a handle whose remove() unregisters it.")
      .def(
          "_tensor_key", [](const Tensor& t) { return reinterpret_cast<std::uintptr_t>(&t.autograd_meta()); },
          "An integer identifying this tensor, the same for every handle to it (the address of its autograd "
          "record); what deepcopy of modules keys shared tensors by.")
      .def("retain_grad", &Tensor::retain_grad,
           "Makes a non-leaf keep its gradient in .grad after backward (a no-op on a leaf).")
      .def_property_readonly("retains_grad", &Tensor::retains_grad,
                             "True when retain_grad() was called on this non-leaf.");
}

// Node (what grad_fn returns) and backward / grad over several tensors.
void def_graph(py::module_& m) {
  py::class_<autograd::Node, std::shared_ptr<autograd::Node>>(
      m, "Node", "A recorded op of the autograd graph (what Tensor.grad_fn returns).")
      .def("name", &autograd::Node::name, "The node's name, e.g. 'MulBackward'.")
      .def_property_readonly(
          "next_functions",
          [](const autograd::Node& n) {
            py::tuple out(n.next_edges().size());
            for (std::size_t i = 0; i < n.next_edges().size(); ++i) {
              const autograd::Edge& e = n.next_edges()[i];
              out[i] = py::make_tuple(e.node ? py::cast(e.node) : py::none(), e.input_nr);
            }
            return out;
          },
          "One (node, input_nr) pair per forward input; (None, 0) for inputs that need no gradient.")
      .def_property_readonly(
          "variable",
          [](const autograd::Node& n) -> py::object {
            if (auto* acc = dynamic_cast<const autograd::AccumulateGrad*>(&n)) return py::cast(acc->leaf());
            throw py::attribute_error(
                msg("'", n.name(), "' object has no attribute 'variable' (only AccumulateGrad has)"));
          },
          "The leaf an AccumulateGrad node accumulates into.")
      .def_property_readonly("_sequence_nr", &autograd::Node::sequence_nr)
      .def("__repr__", [](const autograd::Node& n) { return "<" + n.name() + " object>"; })
      .def("__eq__",
           [](const autograd::Node& a, py::handle b) {
             return py::isinstance<autograd::Node>(b) && &a == &b.cast<const autograd::Node&>();
           })
      .def("__hash__", [](const autograd::Node& n) { return std::hash<const void*>()(&n); });

  m.def(
      "_backward",
      [](py::handle tensors, py::handle grad_tensors, py::handle retain_graph, bool create_graph) {
        check_create_graph(create_graph, "backward");
        const autograd::TensorList roots = tensors_of(tensors, "backward", "tensors", false);
        if (roots.empty()) throw BindingValueError("backward(): no tensors given");
        const autograd::TensorList grads =
            root_grads(roots, tensors_of(grad_tensors, "backward", "grad_tensors", true), "backward");
        const bool retain = retain_arg(retain_graph);
        py::gil_scoped_release release;
        autograd::backward(roots, grads, retain);
      },
      py::arg("tensors"), py::arg("grad_tensors") = py::none(), py::arg("retain_graph") = py::none(),
      py::arg("create_graph") = false);
  m.def(
      "_grad",
      [](py::handle outputs, py::handle inputs, py::handle grad_outputs, py::handle retain_graph, bool create_graph,
         bool allow_unused) {
        check_create_graph(create_graph, "grad");
        const autograd::TensorList outs = tensors_of(outputs, "grad", "outputs", false);
        const autograd::TensorList ins = tensors_of(inputs, "grad", "inputs", false);
        if (outs.empty()) throw BindingValueError("grad(): no outputs given");
        if (ins.empty()) throw BindingValueError("grad(): no inputs given");
        const autograd::TensorList gouts =
            root_grads(outs, tensors_of(grad_outputs, "grad", "grad_outputs", true), "grad");
        const bool retain = retain_arg(retain_graph);
        autograd::TensorList res;
        {
          py::gil_scoped_release release;
          res = autograd::grad(outs, ins, gouts, retain, allow_unused);
        }
        py::tuple out(res.size());
        for (std::size_t i = 0; i < res.size(); ++i) out[i] = res[i].defined() ? py::cast(res[i]) : py::none();
        return out;
      },
      py::arg("outputs"), py::arg("inputs"), py::arg("grad_outputs") = py::none(), py::arg("retain_graph") = py::none(),
      py::arg("create_graph") = false, py::arg("allow_unused") = false);
}

// The C++ half of strata.autograd.Function (Note [Custom functions]).
void def_custom_functions(py::module_& m) {
  py::class_<CustomFunctionNode, autograd::Node, std::shared_ptr<CustomFunctionNode>>(
      m, "_CustomFunctionNode", "The node of one strata.autograd.Function call (its grad_fn).");
  py::class_<FunctionHandle>(m, "_FunctionHandle").def("saved_tensors", &FunctionHandle::saved_tensors);
  m.def("_record_function", &record_function, py::arg("name"), py::arg("inputs"), py::arg("outputs"), py::arg("dirty"),
        py::arg("non_differentiable"), py::arg("to_save"), py::arg("materialize_grads"), py::arg("backward"));
  m.def(
      "_needs_input_grad",
      [](py::handle inputs) {
        const std::vector<bool> v =
            custom_function_needs_input_grad(tensors_of(inputs, "Function.apply", "inputs", true));
        py::tuple out(v.size());
        for (std::size_t i = 0; i < v.size(); ++i) out[i] = py::bool_(v[i]);
        return out;
      },
      py::arg("inputs"));
}

}  // namespace

void init_autograd(py::module_& m) {
  bind_removable_handle(m);
  def_tensor_autograd();
  def_graph(m);
  def_custom_functions(m);

  py::class_<PyHooksGuard>(m, "_SavedTensorHooksGuard")
      .def(py::init<py::object, py::object>(), py::arg("pack_hook"), py::arg("unpack_hook"))
      .def("_enter", &PyHooksGuard::enter)
      .def("_exit", &PyHooksGuard::exit);

  m.def(
      "_recorded_nodes",
      [](py::handle tensors) {
        const autograd::TensorList roots = tensors_of(tensors, "recorded_nodes", "tensors", false);
        std::vector<autograd::NodeRecord> recs;
        {
          py::gil_scoped_release release;
          recs = autograd::recorded_nodes(roots);
        }
        py::list out;
        for (const auto& r : recs) {
          py::dict d;
          d["sequence_nr"] = r.sequence_nr;
          d["name"] = r.name;
          py::list outs;
          for (const auto& o : r.outputs) {
            py::tuple shape(o.sizes.size());
            for (std::size_t i = 0; i < o.sizes.size(); ++i) shape[i] = py::int_(o.sizes[i]);
            py::dict od;
            od["shape"] = shape;
            od["dtype"] = dtype_object(o.dtype);
            outs.append(od);
          }
          d["outputs"] = outs;
          py::list saved;
          for (const auto& s : r.saved) saved.append(saved_info_dict(s));
          d["saved"] = saved;
          out.append(d);
        }
        return out;
      },
      py::arg("tensors"));
  m.def(
      "_saved_bytes",
      [](py::handle tensors) {
        const autograd::TensorList roots = tensors_of(tensors, "saved_bytes", "tensors", false);
        py::gil_scoped_release release;
        return autograd::saved_bytes(roots);
      },
      py::arg("tensors"));
  m.def(
      "_format_saved_residuals",
      [](py::handle tensors) {
        const autograd::TensorList roots = tensors_of(tensors, "format_saved_residuals", "tensors", false);
        py::gil_scoped_release release;
        return autograd::format_saved_residuals(roots);
      },
      py::arg("tensors"));

  m.def(
      "is_inference_mode_enabled", [] { return autograd::InferenceMode::is_enabled(); },
      "Whether inference mode is on on this thread.");
  m.def("_set_inference_mode", [](bool on) { autograd::InferenceMode::set_enabled(on); }, py::arg("enabled"));
  m.def(
      "is_grad_enabled", [] { return autograd::GradMode::is_enabled(); },
      "Whether ops record the graph on this thread.");
  m.def("_set_grad_enabled", [](bool on) { autograd::GradMode::set_enabled(on); }, py::arg("enabled"));
  // Note [Anomaly detection] (autograd/anomaly_mode.h): the flag and the checks live in C++.
  m.def("_is_anomaly_enabled", [] { return autograd::AnomalyMode::is_enabled(); });
  m.def("_is_anomaly_check_nan_enabled", [] { return autograd::AnomalyMode::should_check_nan(); });
  m.def(
      "_set_anomaly_enabled", [](bool on, bool check_nan) { autograd::AnomalyMode::set_enabled(on, check_nan); },
      py::arg("enabled"), py::arg("check_nan") = true);
}

}  // namespace strata::python
