// strata._C.nn: nn::Module and the layers, bound so that Python code subclasses Module exactly as
// torch.nn.Module (Note [Python modules]).

#include <pybind11/stl.h>

#include <cctype>
#include <memory>
#include <string>
#include <utility>
#include <vector>

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
#include "autograd/remat/plan_exec.h"

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

/// Sets the C++ type name of a Python subclass instance to its class name (no-op otherwise).
void set_python_type_name(py::handle module);

namespace {

using nn::Module;
using ModulePtr = std::shared_ptr<Module>;

const char* tp_name(py::handle h) { return Py_TYPE(h.ptr())->tp_name; }

/// strata.nn.Parameter: a Tensor handle of its own Python type.
struct Parameter : Tensor {
  Parameter() = default;
  explicit Parameter(Tensor t) : Tensor(std::move(t)) {}
};


template <class Base>
class PyModuleT : public Base, public py::trampoline_self_life_support {
 public:
  using Base::Base;

  Tensor forward(const Tensor& input) override {
    {
      py::gil_scoped_acquire gil;
      py::function f = py::get_override(static_cast<const Base*>(this), "forward");
      if (f) {
        py::object out = f(input);
        if (!py::isinstance<Tensor>(out))
          throw BindingTypeError(msg(this->type_name(), ".forward returned ", tp_name(out),
                                     " where a C++ caller (a container) needs a Tensor"));
        return out.cast<Tensor>();
      }
    }
    return Base::forward(input);
  }

  std::string extra_repr() const override {
    py::gil_scoped_acquire gil;
    py::function f = py::get_override(static_cast<const Base*>(this), "extra_repr");
    if (f) {
      py::object out = f();
      if (!py::isinstance<py::str>(out))
        throw BindingTypeError(msg(this->type_name(), ".extra_repr returned ", tp_name(out), ", expected str"));
      return out.cast<std::string>();
    }
    return Base::extra_repr();
  }
};

// Constructs the C++ class for itself and the trampoline for Python subclasses.
#define STRATA_MODULE_INIT(T, PARAMS, ARGS) \
  py::init([] PARAMS { return new T ARGS; }, [] PARAMS { return new PyModuleT<T> ARGS; })
// The same, running CHECK (statements refusing unsupported arguments) first.
#define STRATA_MODULE_INIT_CHECKED(T, PARAMS, CHECK, ARGS)  \
  py::init([] PARAMS { CHECK; return new T ARGS; }, [] PARAMS { \
    CHECK;                                                      \
    return new PyModuleT<T> ARGS;                               \
  })

// ---- helpers ------------------------------------------------------------------------------------

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
  const py::detail::value_and_holder v_h =
      inst->get_value_and_holder(nullptr, /*throw_if_missing=*/false);
  if (!v_h || !v_h.holder_constructed()) return nullptr;
  return &self.cast<Module&>();
}

/// The module behind `self`, which a bound method is called on; AttributeError before
/// Module.__init__ (the C++ object does not exist yet).
Module& init_module(py::handle self) {
  Module* m = module_or_null(self);
  if (m == nullptr)
    throw py::attribute_error(msg("'", Py_TYPE(self.ptr())->tp_name,
                                  "' object is not initialized: call super().__init__() before using it"));
  return *m;
}

template <class C>
C& init_as(py::handle self) {
  init_module(self);
  return self.cast<C&>();
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
    throw BindingTypeError(msg(owner, ".", what, ": ", tp_name(v), " is not a strata.nn.Module subclass"));
  if (module_or_null(v) == nullptr)
    throw BindingTypeError(msg(owner, ".", what, ": the ", tp_name(v),
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
  throw BindingTypeError(msg(op, ": the value of ", quote_field(key), " is a ", tp_name(v),
                             "; expected a strata.Tensor or a numpy.ndarray"));
}

py::object incompatible_keys_type() {
  static py::object* type = [] {
    auto* t = new py::object(py::module_::import("collections")
                                 .attr("namedtuple")("IncompatibleKeys", py::make_tuple("missing_keys",
                                                                                        "unexpected_keys")));
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
      throw BindingTypeError(msg("cannot assign '", tp_name(value), "' as parameter '", name,
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
      throw BindingTypeError(msg("cannot assign '", tp_name(value), "' as child module '", name,
                                 "' (strata.nn.Module or None expected)"));
    check_child_replaceable(self, *m, name);
    m->unregister(name);
  } else if (m->has_buffer(name)) {
    if (!value.is_none() && !py::isinstance<Tensor>(value))
      throw BindingTypeError(msg("cannot assign '", tp_name(value), "' as buffer '", name,
                                 "' (strata.Tensor or None expected)"));
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
    throw BindingTypeError(msg(op, ": expected a dict of name -> tensor, got ", tp_name(state)));
  StateDict out;
  py::object items = state.attr("items")();
  for (py::handle kv : items) {
    auto pair = py::reinterpret_borrow<py::tuple>(kv);
    py::handle k = pair[0];
    if (!py::isinstance<py::str>(k))
      throw BindingTypeError(msg(op, ": keys must be strings, got ", tp_name(k)));
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
              throw BindingTypeError(msg("cannot assign '", tp_name(param), "' object to parameter '", name,
                                         "' (strata.nn.Parameter or None required)"));
            if (py::hasattr(py::type::of(self), name.c_str()) ||
                (!m.has_parameter(name) && py::hasattr(self, "__dict__") &&
                 self.attr("__dict__").contains(name)))
              throw BindingValueError(msg(m.type_name(), ".register_parameter: attribute '", name,
                                          "' already exists"));
            Tensor t = param.is_none() ? Tensor() : param.cast<Tensor>();
            m.register_parameter(name, t, t.defined() && t.requires_grad());
          },
          py::arg("name"), py::arg("param"))
      .def(
          "register_buffer",
          [](py::object self, const std::string& name, py::object tensor, bool persistent) {
            Module& m = module_of(self, "assign buffers");
            if (!tensor.is_none() && !py::isinstance<Tensor>(tensor))
              throw BindingTypeError(msg("cannot assign '", tp_name(tensor), "' object to buffer '", name,
                                         "' (strata.Tensor or None required)"));
            if (py::hasattr(py::type::of(self), name.c_str()) || self.attr("__dict__").contains(name))
              throw BindingValueError(msg(m.type_name(), ".register_buffer: attribute ", quote_field(name), " already exists"));
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
              throw BindingValueError(msg(m.type_name(), ".add_module: attribute ", quote_field(name), " already exists"));
            m.register_module(name, module_arg(module, m.type_name(), "add_module"));
          },
          py::arg("name"), py::arg("module"))
      .def(
          "register_module",
          [](py::object self, const std::string& name, py::object module) {
            self.attr("add_module")(name, module);
          },
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
  ModuleClass cls(
      nnm, "Module", py::dynamic_attr(),
      "Base class of every layer and model (torch.nn.Module): subclass it, call super().__init__(), "
      "assign Parameters and Modules as attributes and define forward().");
  def_module_attributes(cls);
  def_module_traversals(cls);
  def_module_state(cls);
  def_module_hooks(cls);
  // What python/strata/nn/_copy.py rebuilds a module from: kept in the C++ module, since the Python
  // object of a C++ layer may be dropped and made again while the module lives on in a parent.
  cls.def("_get_init_args", [](py::handle self) -> py::object {
       const std::shared_ptr<void>& d = init_module(self).binding_data();
       return d ? static_cast<const PyRef*>(d.get())->obj : py::none();
     })
      .def("_set_init_args", [](py::handle self, py::object args) {
        init_module(self).set_binding_data(std::make_shared<PyRef>(std::move(args)));
      });
}

// ---- containers ---------------------------------------------------------------------------------

template <class C>
py::object container_getitem(py::object self, py::handle index, const char* type) {
  C& c = init_as<C>(self);
  const auto n = static_cast<int64_t>(c.size());
  if (py::isinstance<py::slice>(index)) {
    auto slots = slots_of(c);
    std::size_t start = 0, stop = 0, step = 0, len = 0;
    if (!py::reinterpret_borrow<py::slice>(index).compute(slots.size(), &start, &stop, &step, &len))
      throw py::error_already_set();
    auto out = std::make_shared<C>();
    for (std::size_t i = 0; i < len; ++i) {
      const auto& [name, mod] = slots[start + i * step];
      out->register_module(name, mod);
    }
    return py::cast(out);
  }
  const int64_t i = int_from_py(index, type, "index");
  if (i < -n || i >= n) throw BindingIndexError(msg("index ", i, " is out of range for ", type, " of length ", n));
  return module_object(c[i]);
}

template <class C>
void container_append(C& c, py::handle module, const char* type) {
  c.push_back(module_arg(module, type, "append"));
}

template <class C>
void bind_list_methods(py::class_<C, PyModuleT<C>, Module, py::smart_holder>& cls, const char* type) {
  cls.def("__len__", [](py::handle self_c) { return init_as<C>(self_c).size(); })
      .def("__getitem__", [type](py::object self, py::handle index) { return container_getitem<C>(self, index, type); })
      .def("__iter__",
           [](py::handle self_c) {
             const C& c = init_as<C>(self_c);
             py::list out;
             for (std::size_t i = 0; i < c.size(); ++i) out.append(module_object(c[static_cast<int64_t>(i)]));
             return py::iter(out);
           })
      .def(
          "append",
          [type](py::object self, py::handle module) {
            container_append(init_as<C>(self), module, type);
            return self;
          },
          py::arg("module"))
      .def(
          "extend",
          [type](py::object self, py::iterable modules) {
            for (py::handle m : modules) container_append(init_as<C>(self), m, type);
            return self;
          },
          py::arg("modules"))
      .def("__setitem__", [type](py::handle self_c, py::handle index, py::handle module) {
        C& c = init_as<C>(self_c);
        const auto n = static_cast<int64_t>(c.size());
        int64_t i = int_from_py(index, type, "index");
        if (i < -n || i >= n) throw BindingIndexError(msg("index ", i, " is out of range for ", type, " of length ", n));
        if (i < 0) i += n;
        auto slots = slots_of(c);
        c.register_module(slots[static_cast<std::size_t>(i)].first, module_arg(module, type, "__setitem__"));
      });
}

/// Sequential(*modules) or Sequential(OrderedDict of name -> module); takes ownership of `s`.
template <class S>
S* fill_sequential(S* s, const py::args& args) {
  std::unique_ptr<S> owned(s);
  if (args.size() == 1 && py::hasattr(args[0], "items") && !is_module(args[0])) {
    for (py::handle kv : args[0].attr("items")()) {
      auto pair = py::reinterpret_borrow<py::tuple>(kv);
      if (!py::isinstance<py::str>(pair[0]))
        throw BindingTypeError(msg("Sequential.__init__: module names must be strings, got ", tp_name(pair[0])));
      s->register_module(pair[0].cast<std::string>(), module_arg(pair[1], "Sequential", "__init__"));
    }
  } else {
    for (py::handle a : args) s->push_back(module_arg(a, "Sequential", "__init__"));
  }
  return owned.release();
}

void bind_containers(py::module_& nnm) {
  py::class_<nn::Sequential, PyModuleT<nn::Sequential>, Module, py::smart_holder> seq(
      nnm, "Sequential", "Runs its children in order (torch.nn.Sequential): Sequential(*modules) or Sequential(OrderedDict).");
  seq.def(py::init(
      [](const py::args& args) { return fill_sequential(new nn::Sequential(), args); },
      [](const py::args& args) { return fill_sequential(new PyModuleT<nn::Sequential>(), args); }));
  bind_list_methods(seq, "Sequential");

  // RematSequential(*modules, policy=None): a Sequential run under a chain policy (models/remat.h).
  py::class_<nn::RematSequential, PyModuleT<nn::RematSequential>, nn::Sequential, py::smart_holder> rs(
      nnm, "RematSequential",
      "A Sequential whose forward runs its children under a rematerialization policy "
      "(strata.remat): RematSequential(*modules, policy=strata.remat.auto(budget_bytes)).");
  auto policy_arg = [](py::handle policy) -> remat::ChainPolicy {
    if (!py::isinstance<remat::ChainPolicy>(policy))
      throw BindingTypeError(msg("RematSequential: policy must be a strata.remat policy (strata.remat.auto(...), "
                                 "strata.remat.every_k(...), ...), got ", tp_name(policy)));
    return policy.cast<remat::ChainPolicy>();
  };
  rs.def(py::init(
             [policy_arg](const py::args& args, py::handle policy) {
               auto* s = fill_sequential(new nn::RematSequential(), args);
               if (!policy.is_none()) s->set_policy(policy_arg(policy));
               return s;
             },
             [policy_arg](const py::args& args, py::handle policy) {
               auto* s = fill_sequential(new PyModuleT<nn::RematSequential>(), args);
               if (!policy.is_none()) s->set_policy(policy_arg(policy));
               return s;
             }),
         py::kw_only(), py::arg("policy") = py::none());
  rs.def_property(
      "policy", [](const nn::RematSequential& s) { return s.policy(); },
      [policy_arg](nn::RematSequential& s, py::handle policy) { s.set_policy(policy_arg(policy)); });
  auto auto_of = [](const nn::RematSequential& s, const char* what) -> const remat::AutoChain& {
    if (!s.policy().auto_chain)
      throw Error(msg("RematSequential.", what, ": the policy is ", s.policy().to_string(),
                      "; only strata.remat.auto plans"));
    return *s.policy().auto_chain;
  };
  rs.def(
      "explain",
      [auto_of](const nn::RematSequential& s) {
        const remat::AutoChain& a = auto_of(s, "explain");
        if (a.last_plan() == nullptr) throw Error("RematSequential.explain: no plan yet; run a forward first");
        return a.explain();
      },
      "Auto only: per saved value its bytes, recompute cost and decision, the predicted peak and "
      "time, and the measured peak of the last step.");
  rs.def(
      "last_plan",
      [auto_of](const nn::RematSequential& s) -> py::object {
        const remat::AutoChain& a = auto_of(s, "last_plan");
        const remat::Plan* p = a.last_plan();
        if (p == nullptr) return py::none();
        int keep = 0, stream = 0, recompute = 0, slow = 0;
        for (remat::Decision d : p->decisions) {
          keep += d == remat::Decision::Keep;
          stream += d == remat::Decision::Stream;
          recompute += d == remat::Decision::Recompute;
          slow += d == remat::Decision::Slow;  // placed in the slow tier, used there
        }
        py::dict out;
        std::string source = remat::to_string(p->source);  // "ILP", "Greedy", ...: lower case in Python
        for (char& c : source) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        out["source"] = source;
        out["solve_seconds"] = p->solve_seconds;
        out["ilp_timed_out"] = p->ilp_timed_out;
        out["sync_prefetch"] = p->sync_prefetch;  // streamed values fetched at their need points
        out["sync_evict"] = p->sync_evict;        // evictions finish before the next op runs
        out["budget_bytes"] = p->budget_bytes;
        out["points"] = a.last_graph()->graph.num_points();
        out["values"] = p->decisions.size();
        out["keep"] = keep;
        out["stream"] = stream;
        out["recompute"] = recompute;
        out["slow"] = slow;
        out["predicted_peak_bytes"] = p->predicted.peak_bytes;
        out["predicted_step_seconds"] = p->predicted.step_time;
        out["predicted_base_seconds"] = p->predicted.base_time;
        out["measured_peak_bytes"] = a.measured_peak_bytes();
        out["plans_made"] = a.plans_made();
        return out;
      },
      "Auto only: a summary of the plan of the last forward (None before the first).");

  py::class_<nn::ModuleList, PyModuleT<nn::ModuleList>, Module, py::smart_holder> ml(
      nnm, "ModuleList", "Holds modules in a list (torch.nn.ModuleList); it has no forward.");
  auto make_list = [](auto* l, py::object modules) {
    if (!modules.is_none()) {
      if (!py::isinstance<py::iterable>(modules) || is_module(modules))
        throw BindingTypeError(msg("ModuleList: expected an iterable of modules, got ", tp_name(modules)));
      for (py::handle m : modules) l->push_back(module_arg(m, "ModuleList", "__init__"));
    }
    return l;
  };
  ml.def(py::init([make_list](py::object modules) { return make_list(new nn::ModuleList(), modules); },
                  [make_list](py::object modules) { return make_list(new PyModuleT<nn::ModuleList>(), modules); }),
         py::arg("modules") = py::none());
  bind_list_methods(ml, "ModuleList");

  py::class_<nn::Flatten, PyModuleT<nn::Flatten>, Module, py::smart_holder>(nnm, "Flatten")
      .def(STRATA_MODULE_INIT(nn::Flatten, (int64_t start_dim, int64_t end_dim), (start_dim, end_dim)),
           py::arg("start_dim") = 1, py::arg("end_dim") = -1);
}

// ---- layers -------------------------------------------------------------------------------------

template <class T>
using Layer = py::class_<T, PyModuleT<T>, Module, py::smart_holder>;

void bind_layers(py::module_& nnm) {
  Layer<nn::Linear>(nnm, "Linear", "y = x W^T + b (torch.nn.Linear).")
      .def(STRATA_MODULE_INIT(nn::Linear, (int64_t in_features, int64_t out_features, bool bias),
                              (in_features, out_features, bias)),
           py::arg("in_features"), py::arg("out_features"), py::arg("bias") = true)
      .def_property_readonly("in_features", &nn::Linear::in_features)
      .def_property_readonly("out_features", &nn::Linear::out_features);

  Layer<nn::Identity>(nnm, "Identity")
      .def(STRATA_MODULE_INIT(nn::Identity, (const py::args&, const py::kwargs&), ()));

  Layer<nn::Conv2d>(nnm, "Conv2d", "2-D convolution (torch.nn.Conv2d, padding_mode 'zeros').")
      .def(STRATA_MODULE_INIT(nn::Conv2d,
                              (int64_t in_channels, int64_t out_channels, py::handle kernel_size, py::handle stride,
                               py::handle padding, py::handle dilation, int64_t groups, bool bias,
                               const std::string& padding_mode),
                              (in_channels, out_channels, size2_arg(kernel_size, "Conv2d", "kernel_size"),
                               size2_arg(stride, "Conv2d", "stride"), size2_arg(padding, "Conv2d", "padding"),
                               size2_arg(dilation, "Conv2d", "dilation"), groups, bias, padding_mode)),
           py::arg("in_channels"), py::arg("out_channels"), py::arg("kernel_size"), py::arg("stride") = 1,
           py::arg("padding") = 0, py::arg("dilation") = 1, py::arg("groups") = 1, py::arg("bias") = true,
           py::arg("padding_mode") = "zeros")
      .def_property_readonly("in_channels", &nn::Conv2d::in_channels)
      .def_property_readonly("out_channels", &nn::Conv2d::out_channels);

  Layer<nn::BatchNorm1d>(nnm, "BatchNorm1d")
      .def(STRATA_MODULE_INIT(nn::BatchNorm1d,
                              (int64_t num_features, double eps, std::optional<double> momentum, bool affine,
                               bool track_running_stats, bool bias),
                              (num_features, eps, momentum, affine, track_running_stats, bias)),
           py::arg("num_features"), py::arg("eps") = 1e-5, py::arg("momentum") = 0.1, py::arg("affine") = true,
           py::arg("track_running_stats") = true, py::arg("bias") = true)
      .def_property_readonly("num_features", &nn::BatchNorm::num_features);
  Layer<nn::BatchNorm2d>(nnm, "BatchNorm2d")
      .def(STRATA_MODULE_INIT(nn::BatchNorm2d,
                              (int64_t num_features, double eps, std::optional<double> momentum, bool affine,
                               bool track_running_stats, bool bias),
                              (num_features, eps, momentum, affine, track_running_stats, bias)),
           py::arg("num_features"), py::arg("eps") = 1e-5, py::arg("momentum") = 0.1, py::arg("affine") = true,
           py::arg("track_running_stats") = true, py::arg("bias") = true)
      .def_property_readonly("num_features", &nn::BatchNorm::num_features);
  Layer<nn::LayerNorm>(nnm, "LayerNorm")
      .def(STRATA_MODULE_INIT(nn::LayerNorm, (py::handle normalized_shape, double eps, bool elementwise_affine, bool bias),
                              (size_arg(normalized_shape, "LayerNorm", "normalized_shape"), eps, elementwise_affine,
                               bias)),
           py::arg("normalized_shape"), py::arg("eps") = 1e-5, py::arg("elementwise_affine") = true,
           py::arg("bias") = true);

  Layer<nn::ReLU>(nnm, "ReLU")
      .def(STRATA_MODULE_INIT_CHECKED(nn::ReLU, (bool inplace), refuse(inplace, "ReLU", "inplace=True"), ()),
           py::arg("inplace") = false);
  Layer<nn::LeakyReLU>(nnm, "LeakyReLU")
      .def(STRATA_MODULE_INIT_CHECKED(nn::LeakyReLU, (double negative_slope, bool inplace),
                                      refuse(inplace, "LeakyReLU", "inplace=True"), (negative_slope)),
           py::arg("negative_slope") = 0.01, py::arg("inplace") = false);
  Layer<nn::Sigmoid>(nnm, "Sigmoid").def(STRATA_MODULE_INIT(nn::Sigmoid, (), ()));
  Layer<nn::Tanh>(nnm, "Tanh").def(STRATA_MODULE_INIT(nn::Tanh, (), ()));
  Layer<nn::GELU>(nnm, "GELU")
      .def(STRATA_MODULE_INIT(nn::GELU, (const std::string& approximate), (approximate)),
           py::arg("approximate") = "none");
  Layer<nn::Dropout>(nnm, "Dropout")
      .def(STRATA_MODULE_INIT_CHECKED(nn::Dropout, (double p, bool inplace), refuse(inplace, "Dropout", "inplace=True"),
                                      (p)),
           py::arg("p") = 0.5, py::arg("inplace") = false)
      .def_property_readonly("p", &nn::Dropout::p);

  Layer<nn::MaxPool2d>(nnm, "MaxPool2d")
      .def(STRATA_MODULE_INIT_CHECKED(nn::MaxPool2d,
                              (py::handle kernel_size, py::handle stride, py::handle padding, py::handle dilation,
                               bool return_indices, bool ceil_mode),
                              refuse(return_indices, "MaxPool2d", "return_indices=True"),
                              (size2_arg(kernel_size, "MaxPool2d", "kernel_size"),
                               opt_size2(stride, "MaxPool2d", "stride"), size2_arg(padding, "MaxPool2d", "padding"),
                               size2_arg(dilation, "MaxPool2d", "dilation"), ceil_mode)),
           py::arg("kernel_size"), py::arg("stride") = py::none(), py::arg("padding") = 0, py::arg("dilation") = 1,
           py::arg("return_indices") = false, py::arg("ceil_mode") = false);
  Layer<nn::AvgPool2d>(nnm, "AvgPool2d")
      .def(STRATA_MODULE_INIT_CHECKED(nn::AvgPool2d,
                              (py::handle kernel_size, py::handle stride, py::handle padding, bool ceil_mode,
                               bool count_include_pad, py::handle divisor_override),
                              refuse(!divisor_override.is_none(), "AvgPool2d", "divisor_override"),
                              (size2_arg(kernel_size, "AvgPool2d", "kernel_size"),
                               opt_size2(stride, "AvgPool2d", "stride"), size2_arg(padding, "AvgPool2d", "padding"),
                               ceil_mode, count_include_pad)),
           py::arg("kernel_size"), py::arg("stride") = py::none(), py::arg("padding") = 0,
           py::arg("ceil_mode") = false, py::arg("count_include_pad") = true,
           py::arg("divisor_override") = py::none());
  Layer<nn::AdaptiveAvgPool2d>(nnm, "AdaptiveAvgPool2d")
      .def(STRATA_MODULE_INIT(nn::AdaptiveAvgPool2d, (py::handle output_size),
                              (size2_arg(output_size, "AdaptiveAvgPool2d", "output_size"))),
           py::arg("output_size"));

  Layer<nn::EmbeddingBag>(nnm, "EmbeddingBag",
                          "Sums or averages bags of embedding rows (torch.nn.EmbeddingBag; modes 'sum' and 'mean').")
      .def(STRATA_MODULE_INIT_CHECKED(
               nn::EmbeddingBag,
               (int64_t num_embeddings, int64_t embedding_dim, py::handle max_norm, double norm_type,
                bool scale_grad_by_freq, const std::string& mode, bool sparse, py::handle _weight,
                bool include_last_offset, py::handle padding_idx),
               refuse(!max_norm.is_none(), "EmbeddingBag", "max_norm"); (void)norm_type;
               refuse(scale_grad_by_freq, "EmbeddingBag", "scale_grad_by_freq=True");
               refuse(sparse, "EmbeddingBag", "sparse=True"); refuse(!_weight.is_none(), "EmbeddingBag", "_weight");
               refuse(!padding_idx.is_none(), "EmbeddingBag", "padding_idx"),
               (num_embeddings, embedding_dim, mode, include_last_offset)),
           py::arg("num_embeddings"), py::arg("embedding_dim"), py::arg("max_norm") = py::none(),
           py::arg("norm_type") = 2.0, py::arg("scale_grad_by_freq") = false, py::arg("mode") = "mean",
           py::arg("sparse") = false, py::arg("_weight") = py::none(), py::arg("include_last_offset") = false,
           py::arg("padding_idx") = py::none())
      .def(
          "forward",
          [](nn::EmbeddingBag& m, const Tensor& input, std::optional<Tensor> offsets,
             std::optional<Tensor> per_sample_weights) {
            py::gil_scoped_release release;
            return m.forward(input, offsets.value_or(Tensor()), per_sample_weights.value_or(Tensor()));
          },
          py::arg("input"), py::arg("offsets") = py::none(), py::arg("per_sample_weights") = py::none());
}

// ---- issue 26 parts 7-8: Embedding, SiLU, Softmax, LogSoftmax, MultiheadAttention, TransformerEncoderLayer

std::optional<Tensor> none_or_tensor(py::handle h, const char* op, const char* name) {
  if (h.is_none()) return std::nullopt;
  return tensor_arg(h, op, name);
}

void bind_embedding(py::module_& nnm) {
  Layer<nn::Embedding>(nnm, "Embedding", "A lookup table of embedding rows (torch.nn.Embedding).")
      .def(STRATA_MODULE_INIT_CHECKED(
               nn::Embedding,
               (int64_t num_embeddings, int64_t embedding_dim, std::optional<int64_t> padding_idx,
                std::optional<double> max_norm, double norm_type, bool scale_grad_by_freq, bool sparse),
               refuse(scale_grad_by_freq, "Embedding", "scale_grad_by_freq=True");
               refuse(sparse, "Embedding", "sparse=True"),
               (num_embeddings, embedding_dim, padding_idx, max_norm, norm_type)),
           py::arg("num_embeddings"), py::arg("embedding_dim"), py::arg("padding_idx") = py::none(),
           py::arg("max_norm") = py::none(), py::arg("norm_type") = 2.0, py::arg("scale_grad_by_freq") = false,
           py::arg("sparse") = false)
      .def_static(
          "from_pretrained",
          [](const Tensor& embeddings, bool freeze, std::optional<int64_t> padding_idx, std::optional<double> max_norm,
             double norm_type) {
            STRATA_CHECK(embeddings.dim() == 2, "Embedding.from_pretrained: embeddings parameter is expected to be "
                         "2-dimensional, got ", embeddings.describe());
            auto m = std::make_shared<nn::Embedding>(embeddings.size(0), embeddings.size(1), padding_idx, max_norm,
                                                     norm_type);
            m->register_parameter("weight", embeddings.detach(), !freeze);
            return m;
          },
          py::arg("embeddings"), py::arg("freeze") = true, py::arg("padding_idx") = py::none(),
          py::arg("max_norm") = py::none(), py::arg("norm_type") = 2.0)
      .def_property_readonly("num_embeddings", &nn::Embedding::num_embeddings)
      .def_property_readonly("embedding_dim", &nn::Embedding::embedding_dim)
      .def_property_readonly("padding_idx", &nn::Embedding::padding_idx);
}

void bind_attention(py::module_& nnm) {
  Layer<nn::MultiheadAttention>(nnm, "MultiheadAttention", "Multi-head attention (torch.nn.MultiheadAttention).")
      .def(STRATA_MODULE_INIT_CHECKED(
               nn::MultiheadAttention,
               (int64_t embed_dim, int64_t num_heads, double dropout, bool bias, bool add_bias_kv, bool add_zero_attn,
                std::optional<int64_t> kdim, std::optional<int64_t> vdim, bool batch_first),
               refuse(add_bias_kv, "MultiheadAttention", "add_bias_kv=True");
               refuse(add_zero_attn, "MultiheadAttention", "add_zero_attn=True"),
               (embed_dim, num_heads, dropout, bias, kdim, vdim, batch_first)),
           py::arg("embed_dim"), py::arg("num_heads"), py::arg("dropout") = 0.0, py::arg("bias") = true,
           py::arg("add_bias_kv") = false, py::arg("add_zero_attn") = false, py::arg("kdim") = py::none(),
           py::arg("vdim") = py::none(), py::arg("batch_first") = false)
      .def(
          "forward",
          [](nn::MultiheadAttention& m, py::handle query, py::handle key, py::handle value, py::handle key_padding_mask,
             bool need_weights, py::handle attn_mask, bool average_attn_weights, bool is_causal) {
            const char* op = "MultiheadAttention.forward";
            const Tensor q = tensor_arg(query, op, "query"), k = tensor_arg(key, op, "key"),
                         v = tensor_arg(value, op, "value");
            const Tensor kpm = none_or_tensor(key_padding_mask, op, "key_padding_mask").value_or(Tensor());
            const Tensor am = none_or_tensor(attn_mask, op, "attn_mask").value_or(Tensor());
            nn::MultiheadAttention::Output out;
            {
              py::gil_scoped_release release;
              out = m.forward(q, k, v, kpm, need_weights, am, average_attn_weights, is_causal);
            }
            return py::make_tuple(out.output, out.weights.defined() ? py::cast(out.weights) : py::none());
          },
          py::arg("query"), py::arg("key"), py::arg("value"), py::arg("key_padding_mask") = py::none(),
          py::arg("need_weights") = true, py::arg("attn_mask") = py::none(), py::arg("average_attn_weights") = true,
          py::arg("is_causal") = false)
      .def_property_readonly("embed_dim", &nn::MultiheadAttention::embed_dim)
      .def_property_readonly("num_heads", &nn::MultiheadAttention::num_heads)
      .def_property_readonly("batch_first", &nn::MultiheadAttention::batch_first)
      .def_property_readonly("dropout", &nn::MultiheadAttention::dropout);

  Layer<nn::TransformerEncoderLayer>(nnm, "TransformerEncoderLayer",
                                     "Self-attention and feed-forward block (torch.nn.TransformerEncoderLayer).")
      .def(py::init([](int64_t d_model, int64_t nhead, int64_t dim_feedforward, double dropout,
                       const std::string& activation, double layer_norm_eps, bool batch_first, bool norm_first,
                       bool bias) {
             nn::TransformerEncoderLayerOptions o{dim_feedforward, dropout, activation, layer_norm_eps, batch_first,
                                                   norm_first, bias};
             return new PyModuleT<nn::TransformerEncoderLayer>(d_model, nhead, o);
           }),
           py::arg("d_model"), py::arg("nhead"), py::arg("dim_feedforward") = 2048, py::arg("dropout") = 0.1,
           py::arg("activation") = "relu", py::arg("layer_norm_eps") = 1e-5, py::arg("batch_first") = false,
           py::arg("norm_first") = false, py::arg("bias") = true)
      .def(
          "forward",
          [](nn::TransformerEncoderLayer& m, py::handle src, py::handle src_mask, py::handle src_key_padding_mask,
             bool is_causal) {
            const char* op = "TransformerEncoderLayer.forward";
            const Tensor x = tensor_arg(src, op, "src");
            const Tensor mask = none_or_tensor(src_mask, op, "src_mask").value_or(Tensor());
            const Tensor kpm = none_or_tensor(src_key_padding_mask, op, "src_key_padding_mask").value_or(Tensor());
            py::gil_scoped_release release;
            return m.forward(x, mask, kpm, is_causal);
          },
          py::arg("src"), py::arg("src_mask") = py::none(), py::arg("src_key_padding_mask") = py::none(),
          py::arg("is_causal") = false)
      .def_property_readonly("norm_first", [](const nn::TransformerEncoderLayer& m) { return m.options().norm_first; });
}

void bind_transformer_layers(py::module_& nnm) {
  Layer<nn::SiLU>(nnm, "SiLU")
      .def(STRATA_MODULE_INIT_CHECKED(nn::SiLU, (bool inplace), refuse(inplace, "SiLU", "inplace=True"), ()),
           py::arg("inplace") = false);
  Layer<nn::Softmax>(nnm, "Softmax")
      .def(STRATA_MODULE_INIT(nn::Softmax, (std::optional<int64_t> dim), (dim)), py::arg("dim") = py::none())
      .def_property_readonly("dim", &nn::Softmax::dim);
  Layer<nn::LogSoftmax>(nnm, "LogSoftmax")
      .def(STRATA_MODULE_INIT(nn::LogSoftmax, (std::optional<int64_t> dim), (dim)), py::arg("dim") = py::none())
      .def_property_readonly("dim", &nn::LogSoftmax::dim);
  bind_embedding(nnm);
  bind_attention(nnm);
}


/// An int or a 1-sequence of one int (Conv1d's kernel_size, stride, dilation, padding).
int64_t n_ints_1d(py::handle h) {
  const Dims d = int_list_from_sequence(h, "Conv1d", "argument");
  if (d.size() != 1) throw BindingValueError(msg("Conv1d: expected an int or a 1-tuple, got ", d.size(), " values"));
  return d[0];
}

// ---- issue 26 part 7: Conv1d, ConvTranspose2d, GroupNorm, ModuleDict, ParameterList -----------------

/// A ModuleDict key: a str without '.', not empty (KeyError otherwise, as PyTorch's add_module).
std::string dict_key(py::handle key) {
  if (!py::isinstance<py::str>(key))
    throw BindingTypeError(msg("ModuleDict: module name should be a string, got ", tp_name(key)));
  std::string k = key.cast<std::string>();
  if (k.empty() || k.find('.') != std::string::npos)
    throw py::key_error(msg("module name can't contain \".\" or be empty, got: '", k, "'"));
  return k;
}

/// ModuleDict.update / __init__: a mapping (its items()) or an iterable of (key, module) pairs.
void dict_update(nn::ModuleDict& d, py::handle modules) {
  if (modules.is_none()) return;
  if (is_module(modules) || !py::isinstance<py::iterable>(modules))
    throw BindingTypeError(msg("ModuleDict.update should be called with an iterable of key/value pairs, but got ",
                               tp_name(modules)));
  py::object items = py::hasattr(modules, "items") ? modules.attr("items")() : py::reinterpret_borrow<py::object>(modules);
  for (py::handle kv : items) {
    py::sequence pair = py::reinterpret_borrow<py::sequence>(kv);
    if (!py::isinstance<py::sequence>(kv) || py::len(pair) != 2)
      throw BindingTypeError("ModuleDict.update: every element must be a (key, module) pair");
    d.insert(dict_key(pair[0]), module_arg(pair[1], "ModuleDict", "update"));
  }
}

void bind_module_dict(py::module_& nnm) {
  using D = nn::ModuleDict;
  py::class_<D, PyModuleT<D>, Module, py::smart_holder> md(
      nnm, "ModuleDict", "Holds modules by string key in insertion order (torch.nn.ModuleDict); it has no forward.");
  md.def(py::init(
             [](py::handle modules) {
               auto* d = new D();
               dict_update(*d, modules);
               return d;
             },
             [](py::handle modules) {
               auto* d = new PyModuleT<D>();
               dict_update(*d, modules);
               return d;
             }),
         py::arg("modules") = py::none());
  auto get = [](py::handle self, py::handle key) {
    const D& d = init_as<D>(self);
    const std::string k = py::isinstance<py::str>(key) ? key.cast<std::string>() : std::string();
    if (!py::isinstance<py::str>(key) || !d.contains(k)) throw py::key_error(py::str(key).cast<std::string>());
    return module_object(d[k]);
  };
  md.def("__getitem__", get)
      .def("__setitem__", [](py::handle self, py::handle key, py::handle module) {
        init_as<D>(self).insert(dict_key(key), module_arg(module, "ModuleDict", "__setitem__"));
      })
      .def("__delitem__", [get](py::handle self, py::handle key) {
        get(self, key);
        init_as<D>(self).pop(key.cast<std::string>());
      })
      .def("__len__", [](py::handle self) { return init_as<D>(self).size(); })
      .def("__iter__", [](py::handle self) { return py::iter(py::cast(init_as<D>(self).keys())); })
      .def("__contains__", [](py::handle self, py::handle key) {
        return py::isinstance<py::str>(key) && init_as<D>(self).contains(key.cast<std::string>());
      })
      .def("keys", [](py::handle self) { return init_as<D>(self).keys(); })
      .def("values", [](py::handle self) {
        py::list out;
        const D& d = init_as<D>(self);
        for (const std::string& k : d.keys()) out.append(module_object(d[k]));
        return out;
      })
      .def("items", [](py::handle self) {
        py::list out;
        const D& d = init_as<D>(self);
        for (const std::string& k : d.keys()) out.append(py::make_tuple(k, module_object(d[k])));
        return out;
      })
      .def("pop", [get](py::handle self, py::handle key) {
        py::object m = get(self, key);
        init_as<D>(self).pop(key.cast<std::string>());
        return m;
      }, py::arg("key"))
      .def("clear", [](py::handle self) { init_as<D>(self).clear(); })
      .def("update", [](py::handle self, py::handle modules) { dict_update(init_as<D>(self), modules); },
           py::arg("modules"));
}

/// A ParameterList element: a Tensor (a Parameter keeps its requires_grad; a plain tensor becomes
/// one that requires grad, as PyTorch's ParameterList wraps it).
std::pair<Tensor, bool> list_parameter(py::handle v, const char* what) {
  if (!py::isinstance<Tensor>(v))
    throw BindingTypeError(msg("ParameterList.", what, ": expected a strata.nn.Parameter or Tensor, got ", tp_name(v)));
  Tensor t = v.cast<Tensor>();
  return {t, is_parameter(v) ? t.requires_grad() : true};
}

void bind_parameter_list(py::module_& nnm) {
  using L = nn::ParameterList;
  auto fill = [](L* l, py::handle values) {
    if (values.is_none()) return l;
    if (!py::isinstance<py::iterable>(values) || py::isinstance<Tensor>(values))
      throw BindingTypeError(msg("ParameterList: expected an iterable of parameters, got ", tp_name(values)));
    for (py::handle v : values) {
      auto [t, rg] = list_parameter(v, "__init__");
      l->append(t, rg);
    }
    return l;
  };
  py::class_<L, PyModuleT<L>, Module, py::smart_holder> pl(
      nnm, "ParameterList", "Holds parameters in a list (torch.nn.ParameterList); it has no forward.");
  pl.def(py::init([fill](py::handle values) { return fill(new L(), values); },
                  [fill](py::handle values) { return fill(new PyModuleT<L>(), values); }),
         py::arg("values") = py::none());
  auto index = [](const L& l, py::handle i) {
    const auto n = static_cast<int64_t>(l.size());
    const int64_t k = int_from_py(i, "ParameterList", "index");
    if (k < -n || k >= n) throw BindingIndexError(msg("index ", k, " is out of range for ParameterList of length ", n));
    return k;
  };
  pl.def("__len__", [](py::handle self) { return init_as<L>(self).size(); })
      .def("__getitem__", [index](py::handle self, py::handle i) {
        L& l = init_as<L>(self);
        return parameter_object(l[index(l, i)]);
      })
      .def("__setitem__", [index](py::handle self, py::handle i, py::handle v) {
        L& l = init_as<L>(self);
        auto [t, rg] = list_parameter(v, "__setitem__");
        l.set(index(l, i), t, rg);
      })
      .def("__iter__", [](py::handle self) {
        L& l = init_as<L>(self);
        py::list out;
        for (std::size_t i = 0; i < l.size(); ++i) out.append(parameter_object(l[static_cast<int64_t>(i)]));
        return py::iter(out);
      })
      .def("append", [](py::object self, py::handle v) {
        auto [t, rg] = list_parameter(v, "append");
        init_as<L>(self).append(t, rg);
        return self;
      }, py::arg("value"))
      .def("extend", [](py::object self, py::iterable values) {
        for (py::handle v : values) {
          auto [t, rg] = list_parameter(v, "extend");
          init_as<L>(self).append(t, rg);
        }
        return self;
      }, py::arg("values"));
}

/// PyTorch raises ValueError for these constructor arguments.
void check_conv_module_args(const char* type, int64_t in_channels, int64_t out_channels, int64_t groups) {
  if (groups <= 0) throw BindingValueError(msg(type, ": groups must be a positive integer, got ", groups));
  if (in_channels % groups != 0) throw BindingValueError(msg(type, ": in_channels must be divisible by groups"));
  if (out_channels % groups != 0) throw BindingValueError(msg(type, ": out_channels must be divisible by groups"));
}

nn::Padding1d padding1d_arg(py::handle h, int64_t stride) {
  if (!py::isinstance<py::str>(h)) return nn::Padding1d(n_ints_1d(h));
  const std::string mode = h.cast<std::string>();
  if (mode != "same" && mode != "valid")
    throw BindingValueError(msg("Invalid padding string '", mode, "', should be one of {'valid', 'same'}"));
  if (mode == "same" && stride != 1)
    throw BindingValueError("padding='same' is not supported for strided convolutions");
  return nn::Padding1d(mode);
}

void bind_conv_norm_extra(py::module_& nnm) {
  Layer<nn::Conv1d>(nnm, "Conv1d", "1-D convolution (torch.nn.Conv1d).")
      .def(STRATA_MODULE_INIT_CHECKED(
               nn::Conv1d,
               (int64_t in_channels, int64_t out_channels, py::handle kernel_size, py::handle stride,
                py::handle padding, py::handle dilation, int64_t groups, bool bias, const std::string& padding_mode),
               check_conv_module_args("Conv1d", in_channels, out_channels, groups);
               if (padding_mode != "zeros" && padding_mode != "reflect" && padding_mode != "replicate" &&
                   padding_mode != "circular") throw BindingValueError(
                   msg("padding_mode must be one of {'circular', 'reflect', 'zeros', 'replicate'}, but got "
                       "padding_mode='", padding_mode, "'")),
               (in_channels, out_channels, n_ints_1d(kernel_size), n_ints_1d(stride),
                padding1d_arg(padding, n_ints_1d(stride)), n_ints_1d(dilation), groups, bias, padding_mode)),
           py::arg("in_channels"), py::arg("out_channels"), py::arg("kernel_size"), py::arg("stride") = 1,
           py::arg("padding") = 0, py::arg("dilation") = 1, py::arg("groups") = 1, py::arg("bias") = true,
           py::arg("padding_mode") = "zeros")
      .def_property_readonly("in_channels", &nn::Conv1d::in_channels)
      .def_property_readonly("out_channels", &nn::Conv1d::out_channels);

  Layer<nn::ConvTranspose2d>(nnm, "ConvTranspose2d", "2-D transposed convolution (torch.nn.ConvTranspose2d).")
      .def(STRATA_MODULE_INIT_CHECKED(
               nn::ConvTranspose2d,
               (int64_t in_channels, int64_t out_channels, py::handle kernel_size, py::handle stride,
                py::handle padding, py::handle output_padding, int64_t groups, bool bias, py::handle dilation,
                const std::string& padding_mode),
               check_conv_module_args("ConvTranspose2d", in_channels, out_channels, groups);
               if (padding_mode != "zeros") throw BindingValueError(
                   msg("Only \"zeros\" padding mode is supported for ConvTranspose2d, got '", padding_mode, "'")),
               (in_channels, out_channels, size2_arg(kernel_size, "ConvTranspose2d", "kernel_size"),
                size2_arg(stride, "ConvTranspose2d", "stride"), size2_arg(padding, "ConvTranspose2d", "padding"),
                size2_arg(output_padding, "ConvTranspose2d", "output_padding"), groups, bias,
                size2_arg(dilation, "ConvTranspose2d", "dilation"), padding_mode)),
           py::arg("in_channels"), py::arg("out_channels"), py::arg("kernel_size"), py::arg("stride") = 1,
           py::arg("padding") = 0, py::arg("output_padding") = 0, py::arg("groups") = 1, py::arg("bias") = true,
           py::arg("dilation") = 1, py::arg("padding_mode") = "zeros")
      .def_property_readonly("in_channels", &nn::ConvTranspose2d::in_channels)
      .def_property_readonly("out_channels", &nn::ConvTranspose2d::out_channels);

  Layer<nn::GroupNorm>(nnm, "GroupNorm", "Group normalization (torch.nn.GroupNorm).")
      .def(STRATA_MODULE_INIT_CHECKED(
               nn::GroupNorm, (int64_t num_groups, int64_t num_channels, double eps, bool affine, bool bias),
               if (num_groups <= 0 || num_channels % num_groups != 0) throw BindingValueError(
                   msg("num_channels (", num_channels, ") must be divisible by num_groups (", num_groups, ")")),
               (num_groups, num_channels, eps, affine, bias)),
           py::arg("num_groups"), py::arg("num_channels"), py::arg("eps") = 1e-5, py::arg("affine") = true,
           py::kw_only(), py::arg("bias") = true)
      .def_property_readonly("num_groups", &nn::GroupNorm::num_groups)
      .def_property_readonly("num_channels", &nn::GroupNorm::num_channels);

  bind_module_dict(nnm);
  bind_parameter_list(nnm);
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
               throw BindingTypeError(msg("Parameter(): data must be a strata.Tensor, got ", tp_name(data)));
             }
             t.set_requires_grad(requires_grad);
             return Parameter(t);
           }),
           py::arg("data") = py::none(), py::arg("requires_grad") = true)
      .def("__repr__", [](py::object self) {
        return "Parameter containing:\n" + py::str(py::type::of<Tensor>().attr("__repr__")(self)).cast<std::string>();
      })
      // Note [Copying and pickling tensors] (tensor_bindings.cpp): a Parameter stays a Parameter.
      .def("__deepcopy__",
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
