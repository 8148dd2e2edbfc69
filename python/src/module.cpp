// strata._C: the compiled half of the `strata` package (python/strata re-exports it).

#include <cstdint>

#include "bindings.h"
#include "core/rng.h"
#include "core/threading.h"

namespace strata::python {
namespace {

void init_runtime(py::module_& m) {
  m.def(
      "manual_seed",
      [](py::handle seed) {
        if (PyBool_Check(seed.ptr()) || !PyIndex_Check(seed.ptr()))
          throw BindingTypeError(msg("manual_seed(): seed must be an int, got ", Py_TYPE(seed.ptr())->tp_name));
        py::int_ value = py::reinterpret_steal<py::int_>(PyNumber_Index(seed.ptr()));
        if (!value) throw py::error_already_set();
        // Like torch.manual_seed: any Python int is accepted; negative seeds wrap modulo 2^64.
        const unsigned long long s = PyLong_AsUnsignedLongLongMask(value.ptr());
        if (PyErr_Occurred()) throw py::error_already_set();
        strata::manual_seed(static_cast<uint64_t>(s));
      },
      py::arg("seed"), "Seeds the default random generator and resets its position (like torch.manual_seed).");
  m.def("initial_seed", [] { return default_generator().seed(); }, "The seed of the default random generator.");
  m.def(
      "set_num_threads",
      [](py::handle n) {
        // Any Python int reaches the bound check (Note [One thread count bound]): one too large
        // for C is the same ValueError as 5000, not pybind's "incompatible function arguments".
        if (PyBool_Check(n.ptr()) || !PyIndex_Check(n.ptr()))
          throw BindingTypeError(msg("set_num_threads(): n must be an int, got ", Py_TYPE(n.ptr())->tp_name));
        py::int_ value = py::reinterpret_steal<py::int_>(PyNumber_Index(n.ptr()));
        if (!value) throw py::error_already_set();
        int overflow = 0;
        const long long v = PyLong_AsLongLongAndOverflow(value.ptr(), &overflow);
        if (v == -1 && PyErr_Occurred()) throw py::error_already_set();
        if (overflow != 0)  // str() of a huge int may itself fail (Python's digit limit)
          throw BindingValueError(
              bad_num_threads_message("set_num_threads()", msg(overflow < 0 ? "a negative" : "an", " int of ",
                                                               value.attr("bit_length")().cast<int64_t>(), " bits")));
        if (!valid_num_threads(v))
          throw BindingValueError(bad_num_threads_message("set_num_threads()", std::to_string(v)));
        strata::set_num_threads(static_cast<int>(v));
      },
      py::arg("n"), "Caps the threads used by Strata's kernels and oneDNN (1 <= n <= 4096).");
  m.def(
      "get_num_threads", [] { return strata::get_num_threads(); },
      "The current thread cap (hardware threads, or STRATA_NUM_THREADS, unless set).");
}

}  // namespace
}  // namespace strata::python

PYBIND11_MODULE(_C, m) {
  using namespace strata::python;
  m.doc() = "Strata's compiled core: Tensor, dtypes, factories, NumPy interop.";
  init_errors(m);
  init_dtypes(m);
  init_tensor(m);
  init_factories(m);
  init_autograd(m);
  init_ops(m);
  init_semantics(m);
  init_math(m);
  init_indexing(m);
  init_optim(m);
  init_memory(m);
  init_runtime(m);
  init_nn(m);
  init_nn_extra(m);
  init_training(m);
  init_checkpoint(m);
  init_zoo(m);
  init_remat(m);
  init_sim(m);
  init_dist(m);
  init_dlrm(m);
  init_metrics(m);
}
