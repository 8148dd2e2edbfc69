#pragma once
// Internal to the nn bindings: what nn_bindings.cpp (Module's protocol, Note [Python modules])
// and nn_layer_bindings.cpp (the containers and layers) share. Not part of any public API.

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "bindings.h"
#include "models/conv.h"
#include "models/module.h"

namespace strata::python {

/// Sets the C++ type name of a Python subclass instance to its class name (no-op otherwise).
void set_python_type_name(py::handle module);

namespace nn_support {

using nn::Module;
using ModulePtr = std::shared_ptr<Module>;

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
          throw BindingTypeError(msg(this->type_name(), ".forward returned ", type_name(out),
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
        throw BindingTypeError(msg(this->type_name(), ".extra_repr returned ", type_name(out), ", expected str"));
      return out.cast<std::string>();
    }
    return Base::extra_repr();
  }
};

// Constructs the C++ class for itself and the trampoline for Python subclasses.
#define STRATA_MODULE_INIT(T, PARAMS, ARGS) \
  py::init([] PARAMS { return new T ARGS; }, [] PARAMS { return new PyModuleT<T> ARGS; })
// The same, running CHECK (statements refusing unsupported arguments) first.
#define STRATA_MODULE_INIT_CHECKED(T, PARAMS, CHECK, ARGS) \
  py::init(                                                \
      [] PARAMS {                                          \
        CHECK;                                             \
        return new T ARGS;                                 \
      },                                                   \
      [] PARAMS {                                          \
        CHECK;                                             \
        return new PyModuleT<T> ARGS;                      \
      })

// ---- helpers (nn_bindings.cpp) ----------------------------------------------------------------

/// The module behind `self`, which a bound method is called on; AttributeError before
/// Module.__init__ (the C++ object does not exist yet).
Module& init_module(py::handle self);

template <class C>
C& init_as(py::handle self) {
  init_module(self);
  return self.cast<C&>();
}

/// `m`'s children in registration order (duplicates included).
std::vector<std::pair<std::string, ModulePtr>> slots_of(const Module& m);
py::object parameter_object(const Tensor& t);  ///< a Parameter sharing `t`, or None
py::object module_object(const ModulePtr& m);
bool is_module(py::handle v);
bool is_parameter(py::handle v);
/// `v` as a child module of `owner` (attribute `what`): TypeError unless an initialized Module.
ModulePtr module_arg(py::handle v, const std::string& owner, const std::string& what);
std::vector<int64_t> size_arg(py::handle h, const char* op, const char* name);
/// An int or a pair of ints.
nn::Size2 size2_arg(py::handle h, const char* op, const char* name);
std::optional<nn::Size2> opt_size2(py::handle h, const char* op, const char* name);
/// NotImplementedError "<op>: <what> is not supported" when `unsupported`.
void refuse(bool unsupported, const char* op, const char* what);

// ---- the containers and layers (nn_layer_bindings.cpp) ----------------------------------------

void bind_containers(py::module_& nnm);
void bind_layers(py::module_& nnm);
void bind_transformer_layers(py::module_& nnm);
void bind_conv_norm_extra(py::module_& nnm);

}  // namespace nn_support
}  // namespace strata::python
