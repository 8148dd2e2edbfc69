// strata.StrataError and its IndexError/TypeError/ValueError flavours; see Note [Binding errors].

#include <exception>

#include "bindings.h"
#include "ops/indexing.h"

namespace strata::python {

namespace {

// Owned for the life of the process (the module keeps its own references too); never freed, so
// no Python object is released after the interpreter has finalized.
PyObject* g_strata_error = nullptr;
PyObject* g_index_error = nullptr;
PyObject* g_type_error = nullptr;
PyObject* g_value_error = nullptr;

PyObject* new_exception(const char* name, PyObject* bases, const char* doc) {
  PyObject* type = PyErr_NewExceptionWithDoc(name, doc, bases, nullptr);
  if (type == nullptr) throw py::error_already_set();
  return type;
}

PyObject* new_exception_with(const char* name, PyObject* builtin, const char* doc) {
  py::tuple bases = py::make_tuple(py::handle(g_strata_error), py::handle(builtin));
  return new_exception(name, bases.ptr(), doc);
}

}  // namespace

void init_errors(py::module_& m) {
  g_strata_error =
      new_exception("strata.StrataError", PyExc_RuntimeError,
                    "Raised for bad input and broken invariants; the message names the op, shapes and dtypes.");
  g_index_error = new_exception_with("strata.StrataIndexError", PyExc_IndexError,
                                     "An index or dimension out of range (also an IndexError).");
  g_type_error = new_exception_with("strata.StrataTypeError", PyExc_TypeError,
                                    "An argument of the wrong type or dtype (also a TypeError).");
  g_value_error = new_exception_with("strata.StrataValueError", PyExc_ValueError,
                                     "An argument with an invalid value (also a ValueError).");
  m.attr("StrataError") = py::handle(g_strata_error);
  m.attr("StrataIndexError") = py::handle(g_index_error);
  m.attr("StrataTypeError") = py::handle(g_type_error);
  m.attr("StrataValueError") = py::handle(g_value_error);

  py::register_exception_translator([](std::exception_ptr p) {
    if (!p) return;
    try {
      std::rethrow_exception(p);
    } catch (const BindingIndexError& e) {
      PyErr_SetString(g_index_error, e.what());
    } catch (const BindingTypeError& e) {
      PyErr_SetString(g_type_error, e.what());
    } catch (const BindingValueError& e) {
      PyErr_SetString(g_value_error, e.what());
    } catch (const IndexError& e) {
      PyErr_SetString(g_index_error, e.what());
    } catch (const Error& e) {
      PyErr_SetString(g_strata_error, e.what());
    }
  });
}

}  // namespace strata::python
