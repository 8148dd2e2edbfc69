// strata._C.nn: nn::Module and Parameter, bound so that Python code subclasses Module exactly as
// torch.nn.Module (Note [Python modules]); init_nn also registers the containers and layers that
// nn_layer_bindings.cpp binds.

#include <pybind11/stl.h>

#include <cctype>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "autograd/remat/plan_exec.h"
#include "bindings.h"
#include "core/factories.h"
#include "models/activation.h"
#include "models/attention.h"
#include "models/container.h"
#include "models/conv.h"
#include "models/dropout.h"
#include "models/embedding_bag.h"
#include "models/linear.h"
#include "models/module.h"
#include "models/normalization.h"
#include "models/pooling.h"
#include "models/remat.h"
#include "nn_support.h"

// Note [Python modules]
// _C.nn.Module is bound with py::smart_holder and the PyModuleT trampoline, with a __dict__:
//  - A Python subclass calls super().__init__(), which constructs the trampoline. Its C++ virtual
//    forward(Tensor) and extra_repr() dispatch to Python overrides, so a Python module inside a
//    C++ container (Sequential, a zoo model) runs its Python forward.
//  - A module handed to C++ as std::shared_ptr (register_module, Sequential.append) keeps its
//    Python object alive through that shared_ptr (smart_holder's trampoline life support), so the
//    C++ parent always returns the very same Python object (its class and __dict__ intact).
//  - __setattr__/__getattr__/__delattr__ follow torch.nn.Module: Parameters, Modules and
//    (existing) buffers live in the C++ registries, everything else in __dict__.
//  - The C++ type name (used by repr and error messages) of a Python subclass is its class name;
//    it is set when the module is registered from Python, printed or loaded (a C++ constructor
//    cannot see the Python class).
//  - Parameter is a Python subclass of Tensor (C++: a Tensor handle); parameters are returned as
//    new Parameter objects sharing the registered tensor (same storage, grad and version).

namespace strata::python {

namespace nn_support {

/// Gives access to the registration-order child slots (duplicates included).
struct SlotAccess : Module {
  using Module::child_slots;
};

std::vector<std::pair<std::string, ModulePtr>> slots_of(const Module& m) {
  std::vector<std::pair<std::string, ModulePtr>> out;
  for (const auto& s : (m.*(&SlotAccess::child_slots))()) out.emplace_back(s.name, s.module);
  return out;
}

bool is_python_subclass(py::handle self) {
  auto* tp = reinterpret_cast<PyTypeObject*>(Py_TYPE(self.ptr()));
  py::detail::type_info* ti = py::detail::get_type_info(tp);
  return ti != nullptr && ti->type != tp;
}

/// The module behind `self`; raises AttributeError (torch's wording) before Module.__init__.
Module* module_or_null(py::handle self) {
  if (!py::isinstance<Module>(self)) return nullptr;
  // Before Module.__init__ the instance has no C++ object yet (casting it would not be safe).
  auto* inst = reinterpret_cast<py::detail::instance*>(self.ptr());
  const py::detail::value_and_holder v_h = inst->get_value_and_holder(nullptr, /*throw_if_missing=*/false);
  if (!v_h || !v_h.holder_constructed()) return nullptr;
  return &self.cast<Module&>();
}

/// The module behind `self`, which a bound method is called on; AttributeError before
/// Module.__init__ (the C++ object does not exist yet).
Module& init_module(py::handle self) {
  Module* m = module_or_null(self);
  if (m == nullptr)
    throw py::attribute_error(
        msg("'", Py_TYPE(self.ptr())->tp_name, "' object is not initialized: call super().__init__() before using it"));
  return *m;
}

Module& module_of(py::handle self, const char* what) {
  Module* m = module_or_null(self);
  if (m == nullptr) throw py::attribute_error(msg("cannot ", what, " before Module.__init__() call"));
  return *m;
}

py::object parameter_object(const Tensor& t) {
  if (!t.defined()) return py::none();
  return py::cast(Parameter(t));
}

py::object tensor_object(const Tensor& t) {
  if (!t.defined()) return py::none();
  return py::cast(t);
}

py::object module_object(const ModulePtr& m) { return py::cast(m); }

void remove_from_dict(py::handle self, const std::string& name) {
  py::object d = py::reinterpret_steal<py::object>(PyObject_GenericGetDict(self.ptr(), nullptr));
  if (!d) {
    PyErr_Clear();
    return;
  }
  if (PyDict_Contains(d.ptr(), py::str(name).ptr()) == 1) PyDict_DelItemString(d.ptr(), name.c_str());
}

bool is_module(py::handle v) { return py::isinstance<Module>(v); }
bool is_parameter(py::handle v) { return py::isinstance<Parameter>(v); }

ModulePtr module_arg(py::handle v, const std::string& owner, const std::string& what) {
  if (!is_module(v))
    throw BindingTypeError(msg(owner, ".", what, ": ", type_name(v), " is not a strata.nn.Module subclass"));
  if (module_or_null(v) == nullptr)
    throw BindingTypeError(msg(owner, ".", what, ": the ", type_name(v),
                               " has not been initialized (its __init__ must call super().__init__() first)"));
  set_python_type_name(v);
  return v.cast<ModulePtr>();
}

std::vector<int64_t> size_arg(py::handle h, const char* op, const char* name) {
  const Dims d = int_list_from_sequence(h, op, name);
  return std::vector<int64_t>(d.begin(), d.end());
}

nn::Size2 size2_arg(py::handle h, const char* op, const char* name) {
  if (py::isinstance<py::str>(h))
    throw BindingValueError(msg(op, ": ", name, " must be an int or a pair of ints, got the string '",
                                h.cast<std::string>(), "' (string paddings are not supported)"));
  if (PySequence_Check(h.ptr())) {
    const Dims d = int_list_from_sequence(h, op, name);
    if (d.size() == 1) return nn::Size2(d[0], d[0]);
    if (d.size() != 2)
      throw BindingValueError(msg(op, ": ", name, " must be an int or a pair of ints, got ", d.size(), " values"));
    return nn::Size2(d[0], d[1]);
  }
  return nn::Size2(int_from_py(h, op, name));
}

std::optional<nn::Size2> opt_size2(py::handle h, const char* op, const char* name) {
  if (h.is_none()) return std::nullopt;
  return size2_arg(h, op, name);
}

void refuse(bool unsupported, const char* op, const char* what) {
  if (unsupported) {
    PyErr_SetString(PyExc_NotImplementedError, msg(op, ": ", what, " is not supported").c_str());
    throw py::error_already_set();
  }
}

/// A tensor from a state_dict value: a strata Tensor, a NumPy array or anything with __array__
/// (a torch tensor).
Tensor state_value(py::handle v, const std::string& key, const char* op) {
  if (py::isinstance<Tensor>(v)) return v.cast<Tensor>();
  if (py::isinstance<py::array>(v)) return tensor_from_numpy(v);
  if (py::hasattr(v, "__array__")) {
    // A torch tensor (possibly a Parameter that requires grad): detach before converting.
    py::object src = py::hasattr(v, "detach") ? v.attr("detach")() : py::reinterpret_borrow<py::object>(v);
    py::object arr = py::module_::import("numpy").attr("asarray")(src);
    return tensor_from_numpy(arr).clone();
  }
  throw BindingTypeError(msg(op, ": the value of ", quote_field(key), " is a ", type_name(v),
                             "; expected a strata.Tensor or a numpy.ndarray"));
}

py::object incompatible_keys_type() {
  static py::object* type = [] {
    auto* t =
        new py::object(py::module_::import("collections")
                           .attr("namedtuple")("IncompatibleKeys", py::make_tuple("missing_keys", "unexpected_keys")));
    return t;
  }();
  return *type;
}

py::object pairs_iter(const std::vector<std::pair<std::string, Tensor>>& named, bool as_parameter) {
  py::list out;
  for (const auto& [n, t] : named) out.append(py::make_tuple(n, as_parameter ? parameter_object(t) : tensor_object(t)));
  return py::iter(out);
}

py::object tensors_iter(const std::vector<Tensor>& ts, bool as_parameter) {
  py::list out;
  for (const auto& t : ts) out.append(as_parameter ? parameter_object(t) : tensor_object(t));
  return py::iter(out);
}

}  // namespace nn_support

using namespace nn_support;

namespace {

// ---- attribute protocol -------------------------------------------------------------------------

/// Refuses to replace or remove child `name` of a module whose forward is C++ code that may hold
/// its children directly (the zoo models keep pointers to the layers they built): the change would
/// show in state_dict() but not in forward(). Containers and modules whose forward is written in
/// Python read their children by name, so they accept the change.
void check_child_replaceable(py::handle self, Module& m, const std::string& name) {
  if (!m.has_child(name)) return;
  if (dynamic_cast<nn::Sequential*>(&m) != nullptr || dynamic_cast<nn::ModuleList*>(&m) != nullptr ||
      dynamic_cast<nn::ModuleDict*>(&m) != nullptr)
    return;
  if (typeid(m) == typeid(Module) || typeid(m) == typeid(PyModuleT<Module>)) return;
  py::object forward = py::getattr(py::type::of(self), "forward", py::none());
  if (py::hasattr(forward, "__code__")) return;  // a Python forward
  PyErr_SetString(PyExc_NotImplementedError,
                  msg(m.type_name(), ".", name, ": replacing or removing a child of ", m.type_name(),
                      " is not supported: its C++ forward keeps the modules it was built with (change the "
                      "layer inside a Sequential, build the model with the layer you need, or subclass it "
                      "and write forward in Python)")
                      .c_str());
  throw py::error_already_set();
}

void module_setattr(py::handle self, const std::string& name, py::handle value) {
  Module* m = module_or_null(self);
  const bool param = is_parameter(value);
  const bool mod = is_module(value);
  if (m == nullptr) {
    if (param) throw py::attribute_error("cannot assign parameters before Module.__init__() call");
    if (mod) throw py::attribute_error("cannot assign module before Module.__init__() call");
    if (PyObject_GenericSetAttr(self.ptr(), py::str(name).ptr(), value.ptr()) != 0) throw py::error_already_set();
    return;
  }
  set_python_type_name(self);
  if (param) {
    remove_from_dict(self, name);
    if (m->has_buffer(name) || m->has_child(name)) m->unregister(name);
    Tensor t = value.cast<Tensor>();
    m->register_parameter(name, t, t.requires_grad());
    return;
  }
  if (m->has_parameter(name)) {
    if (!value.is_none())
      throw BindingTypeError(msg("cannot assign '", type_name(value), "' as parameter '", name,
                                 "' (strata.nn.Parameter or None expected)"));
    m->register_parameter(name, Tensor());
    return;
  }
  if (mod) {
    check_child_replaceable(self, *m, name);
    remove_from_dict(self, name);
    if (m->has_buffer(name)) m->unregister(name);
    m->register_module(name, module_arg(value, m->type_name(), "__setattr__"));
    return;
  }
  if (m->has_child(name)) {
    if (!value.is_none())
      throw BindingTypeError(msg("cannot assign '", type_name(value), "' as child module '", name,
                                 "' (strata.nn.Module or None expected)"));
    check_child_replaceable(self, *m, name);
    m->unregister(name);
  } else if (m->has_buffer(name)) {
    if (!value.is_none() && !py::isinstance<Tensor>(value))
      throw BindingTypeError(
          msg("cannot assign '", type_name(value), "' as buffer '", name, "' (strata.Tensor or None expected)"));
    const bool persistent = m->is_persistent_buffer(name);
    m->register_buffer(name, value.is_none() ? Tensor() : value.cast<Tensor>(), persistent);
    return;
  }
  if (PyObject_GenericSetAttr(self.ptr(), py::str(name).ptr(), value.ptr()) != 0) throw py::error_already_set();
}

py::object module_getattr(py::handle self, const std::string& name) {
  Module* m = module_or_null(self);
  if (m == nullptr)
    throw py::attribute_error(msg("'", Py_TYPE(self.ptr())->tp_name, "' object has no attribute '", name,
                                  "' (it is not initialized: call super().__init__() before using it)"));
  if (m->has_parameter(name)) return parameter_object(m->parameter(name));
  if (m->has_buffer(name)) return tensor_object(m->buffer(name));
  if (m->has_child(name)) return module_object(m->child(name));
  throw py::attribute_error(msg("'", Py_TYPE(self.ptr())->tp_name, "' object has no attribute '", name, "'"));
}

void module_delattr(py::handle self, const std::string& name) {
  Module* m = module_or_null(self);
  if (m != nullptr) check_child_replaceable(self, *m, name);
  if (m != nullptr && m->unregister(name)) return;
  if (PyObject_GenericSetAttr(self.ptr(), py::str(name).ptr(), nullptr) != 0) throw py::error_already_set();
}

// ---- state --------------------------------------------------------------------------------------

StateDict state_dict_arg(py::handle state, const char* op) {
  if (!py::hasattr(state, "items") || py::isinstance<py::str>(state))
    throw BindingTypeError(msg(op, ": expected a dict of name -> tensor, got ", type_name(state)));
  StateDict out;
  py::object items = state.attr("items")();
  for (py::handle kv : items) {
    auto pair = py::reinterpret_borrow<py::tuple>(kv);
    py::handle k = pair[0];
    if (!py::isinstance<py::str>(k)) throw BindingTypeError(msg(op, ": keys must be strings, got ", type_name(k)));
    const std::string key = k.cast<std::string>();
    out.emplace_back(key, state_value(pair[1], key, op));
  }
  return out;
}

/// state_dict(keep_vars=True): the registered tensors themselves (parameters as Parameters), in
/// Module::state_dict's order (per module: parameters, persistent buffers, then every child slot).
void collect_vars(const Module& m, const std::string& prefix, py::object& out) {
  for (const auto& [n, t] : m.named_parameters("", /*recurse=*/false)) out[py::str(prefix + n)] = parameter_object(t);
  for (const auto& [n, t] : m.named_buffers("", /*recurse=*/false))
    if (m.is_persistent_buffer(n)) out[py::str(prefix + n)] = tensor_object(t);
  for (const auto& [n, c] : slots_of(m)) collect_vars(*c, prefix + n + ".", out);
}

py::object state_dict_object(const StateDict& sd, const std::string& prefix, py::object destination) {
  if (destination.is_none()) destination = py::module_::import("collections").attr("OrderedDict")();
  for (const auto& [k, t] : sd) destination[py::str(prefix + k)] = t;
  return destination;
}

using ModuleClass = py::class_<Module, PyModuleT<Module>, py::smart_holder>;

// Construction, forward and attributes: parameters, buffers and children registered by assignment.
void def_module_attributes(ModuleClass& cls) {
  cls.def(STRATA_MODULE_INIT(Module, (), ()))
      .def(
          "forward",
          [](py::handle self_m, const Tensor& input) {
            Module& m = init_module(self_m);
            py::gil_scoped_release release;
            return m.forward(input);
          },
          py::arg("input"))
      .def("__call__",
           [](py::object self, const py::args& args, const py::kwargs& kwargs) {
             if (Module* m = module_or_null(self); m != nullptr && m->has_hooks())
               return call_module_with_hooks(*m, args, kwargs);
             return self.attr("forward")(*args, **kwargs);
           })
      .def("__setattr__", &module_setattr)
      .def("__getattr__", &module_getattr)
      .def("__delattr__", &module_delattr)
      .def(
          "register_parameter",
          [](py::object self, const std::string& name, py::object param) {
            Module& m = module_of(self, "assign parameters");
            if (!param.is_none() && !is_parameter(param))
              throw BindingTypeError(msg("cannot assign '", type_name(param), "' object to parameter '", name,
                                         "' (strata.nn.Parameter or None required)"));
            if (py::hasattr(py::type::of(self), name.c_str()) ||
                (!m.has_parameter(name) && py::hasattr(self, "__dict__") && self.attr("__dict__").contains(name)))
              throw BindingValueError(msg(m.type_name(), ".register_parameter: attribute '", name, "' already exists"));
            Tensor t = param.is_none() ? Tensor() : param.cast<Tensor>();
            m.register_parameter(name, t, t.defined() && t.requires_grad());
          },
          py::arg("name"), py::arg("param"))
      .def(
          "register_buffer",
          [](py::object self, const std::string& name, py::object tensor, bool persistent) {
            Module& m = module_of(self, "assign buffers");
            if (!tensor.is_none() && !py::isinstance<Tensor>(tensor))
              throw BindingTypeError(msg("cannot assign '", type_name(tensor), "' object to buffer '", name,
                                         "' (strata.Tensor or None required)"));
            if (py::hasattr(py::type::of(self), name.c_str()) || self.attr("__dict__").contains(name))
              throw BindingValueError(
                  msg(m.type_name(), ".register_buffer: attribute ", quote_field(name), " already exists"));
            m.register_buffer(name, tensor.is_none() ? Tensor() : tensor.cast<Tensor>(), persistent);
          },
          py::arg("name"), py::arg("tensor"), py::arg("persistent") = true)
      .def(
          "add_module",
          [](py::object self, const std::string& name, py::object module) {
            Module& m = module_of(self, "assign module");
            check_child_replaceable(self, m, name);
            if (module.is_none()) {
              m.unregister(name);
              return;
            }
            if (py::hasattr(py::type::of(self), name.c_str()) || self.attr("__dict__").contains(name))
              throw BindingValueError(
                  msg(m.type_name(), ".add_module: attribute ", quote_field(name), " already exists"));
            m.register_module(name, module_arg(module, m.type_name(), "add_module"));
          },
          py::arg("name"), py::arg("module"))
      .def(
          "register_module",
          [](py::object self, const std::string& name, py::object module) { self.attr("add_module")(name, module); },
          py::arg("name"), py::arg("module"));
}

// The traversals, in PyTorch's order and names.
void def_module_traversals(ModuleClass& cls) {
  cls.def(
         "parameters",
         [](py::handle self_m, bool recurse) { return tensors_iter(init_module(self_m).parameters(recurse), true); },
         py::arg("recurse") = true)
      .def(
          "named_parameters",
          [](py::handle self_m, const std::string& prefix, bool recurse) {
            const Module& m = init_module(self_m);
            return pairs_iter(m.named_parameters(prefix, recurse), true);
          },
          py::arg("prefix") = "", py::arg("recurse") = true)
      .def(
          "buffers",
          [](py::handle self_m, bool recurse) { return tensors_iter(init_module(self_m).buffers(recurse), false); },
          py::arg("recurse") = true)
      .def(
          "named_buffers",
          [](py::handle self_m, const std::string& prefix, bool recurse) {
            const Module& m = init_module(self_m);
            return pairs_iter(m.named_buffers(prefix, recurse), false);
          },
          py::arg("prefix") = "", py::arg("recurse") = true)
      .def("children",
           [](py::handle self_m) {
             const Module& m = init_module(self_m);
             py::list out;
             for (const auto& c : m.children()) out.append(module_object(c));
             return py::iter(out);
           })
      .def("named_children",
           [](py::handle self_m) {
             const Module& m = init_module(self_m);
             py::list out;
             for (const auto& [n, c] : m.named_children()) out.append(py::make_tuple(n, module_object(c)));
             return py::iter(out);
           })
      .def("modules",
           [](py::object self) {
             py::list out;
             for (const auto& [n, c] : init_module(self).named_modules()) {
               (void)n;
               out.append(out.empty() ? self : module_object(c));
             }
             return py::iter(out);
           })
      .def(
          "named_modules",
          [](py::object self, const std::string& prefix) {
            py::list out;
            for (const auto& [n, c] : init_module(self).named_modules(prefix))
              out.append(py::make_tuple(n, out.empty() ? self : module_object(c)));
            return py::iter(out);
          },
          py::arg("prefix") = "");
}

// Mode, gradients, state dicts, apply and the repr.
void def_module_state(ModuleClass& cls) {
  cls.def(
         "train",
         [](py::object self, bool mode) {
           init_module(self).train(mode);
           return self;
         },
         py::arg("mode") = true)
      .def("eval",
           [](py::object self) {
             init_module(self).eval();
             return self;
           })
      .def_property(
          "training", [](py::handle self_m) { return init_module(self_m).is_training(); },
          [](py::handle self_m, bool mode) {
            Module& m = init_module(self_m);
            // Only this module changes, as assigning torch's `module.training` does.
            auto mods = m.named_modules();
            std::vector<bool> saved;
            for (std::size_t i = 1; i < mods.size(); ++i) saved.push_back(mods[i].second->is_training());
            m.train(mode);
            for (std::size_t i = 1; i < mods.size(); ++i) mods[i].second->train(saved[i - 1]);
          })
      .def(
          "zero_grad",
          [](py::handle self_m, bool set_to_none) {
            Module& m = init_module(self_m);
            if (set_to_none) {
              m.zero_grad();
              return;
            }
            for (const Tensor& p : m.parameters()) {
              Tensor g = p.grad();
              if (g.defined()) g.zero_();
            }
          },
          py::arg("set_to_none") = true)
      .def(
          "requires_grad_",
          [](py::object self, bool requires_grad) {
            for (Tensor p : init_module(self).parameters()) p.set_requires_grad(requires_grad);
            return self;
          },
          py::arg("requires_grad") = true)
      .def(
          "state_dict",
          [](py::object self, py::object destination, const std::string& prefix, bool keep_vars) {
            if (keep_vars) {
              if (destination.is_none()) destination = py::module_::import("collections").attr("OrderedDict")();
              collect_vars(init_module(self), prefix, destination);
              return destination;
            }
            return state_dict_object(init_module(self).state_dict(), prefix, destination);
          },
          py::arg("destination") = py::none(), py::arg("prefix") = "", py::arg("keep_vars") = false,
          "The parameters and persistent buffers by name (an OrderedDict of detached tensors; with "
          "keep_vars, the registered Parameters and buffers themselves).")
      .def(
          "load_state_dict",
          [](py::object self, py::handle state, bool strict, bool assign) {
            refuse(assign, "Module.load_state_dict", "assign=True");
            set_python_type_name(self);
            Module& m = init_module(self);
            const StateDict sd = state_dict_arg(state, "load_state_dict");
            nn::LoadResult r;
            {
              py::gil_scoped_release release;
              r = m.load_state_dict(sd, strict);
            }
            return incompatible_keys_type()(py::cast(r.missing_keys), py::cast(r.unexpected_keys));
          },
          py::arg("state_dict"), py::arg("strict") = true, py::arg("assign") = false,
          "Copies tensors (strata Tensors or NumPy arrays) into the parameters and buffers; returns "
          "(missing_keys, unexpected_keys).")
      .def(
          "_check_state_dict",
          [](py::object self, py::handle state, bool strict) {
            set_python_type_name(self);
            Module& m = init_module(self);
            const StateDict sd = state_dict_arg(state, "load_state_dict");
            py::gil_scoped_release release;
            m.check_state_dict(sd, strict);
          },
          py::arg("state_dict"), py::arg("strict") = true,
          "Raises what load_state_dict(state_dict, strict) would raise, copying nothing.")
      .def(
          "apply",
          [](py::object self, py::object fn) {
            for (const auto& c : init_module(self).children()) module_object(c).attr("apply")(fn);
            fn(self);
            return self;
          },
          py::arg("fn"))
      .def("extra_repr", [](py::handle self_m) { return init_module(self_m).extra_repr(); })
      .def("__repr__",
           [](py::object self) {
             set_python_type_name(self);
             return init_module(self).to_string();
           })
      .def_property_readonly("_type_name", [](py::handle self_m) { return init_module(self_m).type_name(); });
}

void bind_module(py::module_& nnm) {
  ModuleClass cls(nnm, "Module", py::dynamic_attr(),
                  "Base class of every layer and model (torch.nn.Module): subclass it, call super().__init__(), "
                  "assign Parameters and Modules as attributes and define forward().");
  def_module_attributes(cls);
  def_module_traversals(cls);
  def_module_state(cls);
  def_module_hooks(cls);
  // What python/strata/nn/_copy.py rebuilds a module from: kept in the C++ module, since the Python
  // object of a C++ layer may be dropped and made again while the module lives on in a parent.
  cls.def("_get_init_args",
          [](py::handle self) -> py::object {
            const std::shared_ptr<void>& d = init_module(self).binding_data();
            return d ? static_cast<const PyRef*>(d.get())->obj : py::none();
          })
      .def("_set_init_args", [](py::handle self, py::object args) {
        init_module(self).set_binding_data(std::make_shared<PyRef>(std::move(args)));
      });
}

}  // namespace

void set_python_type_name(py::handle module) {
  if (!is_python_subclass(module)) return;
  Module* m = module_or_null(module);
  if (m == nullptr) return;
  m->set_type_name(py::str(py::type::of(module).attr("__name__")).cast<std::string>());
}

void init_nn(py::module_& m) {
  py::module_ nnm = m.def_submodule("nn", "strata.nn's compiled half: Module, Parameter and the layers.");

  py::class_<Parameter, Tensor>(nnm, "Parameter",
                                "A Tensor that a Module registers as a parameter when assigned as an attribute "
                                "(torch.nn.Parameter); shares the storage of `data`.")
      .def(py::init([](py::object data, bool requires_grad) {
             Tensor t;
             if (data.is_none()) {
               t = strata::empty({0});
             } else if (py::isinstance<Tensor>(data)) {
               t = data.cast<const Tensor&>().detach();
             } else {
               throw BindingTypeError(msg("Parameter(): data must be a strata.Tensor, got ", type_name(data)));
             }
             t.set_requires_grad(requires_grad);
             return Parameter(t);
           }),
           py::arg("data") = py::none(), py::arg("requires_grad") = true)
      .def("__repr__",
           [](py::object self) {
             return "Parameter containing:\n" +
                    py::str(py::type::of<Tensor>().attr("__repr__")(self)).cast<std::string>();
           })
      // Note [Copying and pickling tensors] (tensor_bindings.cpp): a Parameter stays a Parameter.
      .def(
          "__deepcopy__",
          [](py::handle self, py::dict memo) -> py::object {
            py::int_ key(reinterpret_cast<std::uintptr_t>(self.ptr()));
            if (memo.contains(key)) return memo[key];
            py::object out = py::cast(Parameter(copy_leaf(self.cast<const Tensor&>(), "deepcopy")));
            memo[key] = out;
            return out;
          },
          py::arg("memo"))
      .def("__reduce__", [](py::handle self) {
        const Tensor& t = self.cast<const Tensor&>();
        return py::make_tuple(py::type::of(self), py::make_tuple(py::cast(t.detach()), t.requires_grad()));
      });

  bind_module(nnm);
  bind_containers(nnm);
  bind_layers(nnm);
  bind_transformer_layers(nnm);
  bind_conv_norm_extra(nnm);
  nnm.attr("IncompatibleKeys") = incompatible_keys_type();
}

}  // namespace strata::python
