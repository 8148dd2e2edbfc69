// Training utilities: strata.Generator (core/rng.h), the parameter initializations of
// strata.nn.init (models/init.h), gradient clipping of strata.nn.utils (models/clip_grad.h),
// Tensor.data and Module.to(dtype) / .float() / .double() (models/module_dtype.h).
// python/strata/nn/init.py and nn/utils.py add PyTorch's argument handling; DataLoader and its
// samplers (python/strata/utils/data.py) draw from a Generator.

#include <pybind11/stl.h>

#include <cstring>
#include <memory>
#include <random>

#include "bindings.h"
#include "core/factories.h"
#include "core/rng.h"
#include "models/clip_grad.h"
#include "models/init.h"
#include "models/module_dtype.h"

namespace strata::python {
namespace {

// A generator's state as PyTorch hands it out: a uint8 tensor (here 16 bytes: seed, offset).
Tensor generator_state(const Generator& g) {
  const uint64_t words[2] = {g.seed(), g.offset()};
  Tensor t = empty({16}, {DType::u8});
  std::memcpy(t.data_ptr(), words, sizeof(words));
  return t;
}

void set_generator_state(Generator& g, const Tensor& state) {
  if (!state.defined() || state.dtype() != DType::u8 || state.dim() != 1 || state.numel() != 16)
    throw BindingValueError(msg("Generator.set_state: expected the uint8 tensor of 16 bytes get_state() returns, got ",
                                state.defined() ? state.describe() : std::string("an undefined tensor")));
  uint64_t words[2];
  std::memcpy(words, state.contiguous().data_ptr(), sizeof(words));
  g.manual_seed(words[0]);
  g.set_offset(words[1]);
}

void bind_generator(py::module_& m) {
  py::class_<Generator, std::shared_ptr<Generator>>(
      m, "Generator",
      "A random-number generator (torch.Generator): Philox counter-based, seeded with manual_seed(); "
      "pass it as `generator=` to nn.init, DataLoader, random_split and the samplers.")
      .def(py::init([](py::handle device) {
             check_cpu_device(device, "Generator");
             return std::make_shared<Generator>();
           }),
           py::arg("device") = "cpu")
      .def(
          "manual_seed",
          [](py::object self, py::handle seed) {
            self.cast<Generator&>().manual_seed(static_cast<uint64_t>(int_from_py(seed, "manual_seed", "seed")));
            return self;
          },
          py::arg("seed"), "Seeds the generator (and restarts its stream); returns it.")
      .def("initial_seed", &Generator::seed, "The seed the generator was last seeded with.")
      .def(
          "seed",
          [](Generator& g) {
            const uint64_t s = (static_cast<uint64_t>(std::random_device{}()) << 32) | std::random_device{}();
            g.manual_seed(s);
            return s;
          },
          "Seeds the generator from a non-deterministic source; returns the seed.")
      .def("get_state", &generator_state)
      .def("set_state",
           [](py::object self, const Tensor& state) {
             set_generator_state(self.cast<Generator&>(), state);
             return self;
           })
      .def_property_readonly("device", [](const Generator&) { return "cpu"; })
      .def(
          "_uniform",
          [](Generator& g, int64_t n) {
            py::gil_scoped_release release;
            return uniform({n}, 0.0, 1.0, {DType::f64}, &g);
          },
          py::arg("n"), "n f64 values uniform on [0, 1) (the samplers' permutations).");
  m.attr("default_generator") = py::cast(&default_generator(), py::return_value_policy::reference);
}

void bind_init(py::module_& nn) {
  py::module_ i = nn.def_submodule("init", "The C++ half of strata.nn.init (models/init.h).");
  using namespace nn::init;
  i.def("calculate_gain", &calculate_gain, py::arg("nonlinearity"), py::arg("param") = py::none());
  i.def("fan_in_and_fan_out", &fan_in_and_fan_out, py::arg("tensor"));
  // Each fills the tensor in place (the caller returns its own object).
  i.def("uniform_", [](Tensor t, double a, double b, Generator* g) { uniform_(t, a, b, g); });
  i.def("normal_", [](Tensor t, double mean, double std, Generator* g) { normal_(t, mean, std, g); });
  i.def("constant_", [](Tensor t, double v) { constant_(t, v); });
  i.def("eye_", [](Tensor t) { eye_(t); });
  i.def("xavier_uniform_", [](Tensor t, double gain, Generator* g) { xavier_uniform_(t, gain, g); });
  i.def("xavier_normal_", [](Tensor t, double gain, Generator* g) { xavier_normal_(t, gain, g); });
  i.def("kaiming_uniform_", [](Tensor t, double a, const std::string& mode, const std::string& nl, Generator* g) {
    kaiming_uniform_(t, a, mode, nl, g);
  });
  i.def("kaiming_normal_", [](Tensor t, double a, const std::string& mode, const std::string& nl, Generator* g) {
    kaiming_normal_(t, a, mode, nl, g);
  });
  i.def("trunc_normal_", [](Tensor t, double mean, double std, double a, double b, Generator* g) {
    trunc_normal_(t, mean, std, a, b, g);
  });
  i.def("orthogonal_", [](Tensor t, double gain, Generator* g) { orthogonal_(t, gain, g); });
}

void bind_clip_grad(py::module_& nn) {
  nn.def(
      "_clip_grad_norm_",
      [](const std::vector<Tensor>& params, double max_norm, double norm_type, bool error_if_nonfinite) {
        py::gil_scoped_release release;
        return nn::clip_grad_norm_(params, max_norm, norm_type, error_if_nonfinite);
      },
      py::arg("parameters"), py::arg("max_norm"), py::arg("norm_type"), py::arg("error_if_nonfinite"));
  nn.def(
      "_clip_grad_value_",
      [](const std::vector<Tensor>& params, double clip_value) {
        py::gil_scoped_release release;
        nn::clip_grad_value_(params, clip_value);
      },
      py::arg("parameters"), py::arg("clip_value"));
}

void bind_tensor_data(py::module_& m) {
  py::object cls = m.attr("Tensor");
  py::object getter = py::cpp_function([](const Tensor& t) { return t.detach(); });
  py::object setter = py::cpp_function([](Tensor& t, py::handle data) {
    if (!py::isinstance<Tensor>(data))
      throw BindingTypeError(msg("Tensor.data must be set to a strata.Tensor, got ", Py_TYPE(data.ptr())->tp_name));
    t.set_data(data.cast<const Tensor&>());
  });
  cls.attr("data") =
      py::module_::import("builtins")
          .attr("property")(
              getter, setter, py::none(),
              "The tensor's values without its autograd history (a detached view); assigning a tensor makes "
              "this one view that tensor's data, keeping its requires_grad and grad (PyTorch's .data).");
}

// Module.to(dtype | device | tensor, ...) as torch's: floating parameters and buffers change dtype
// in place; only the CPU exists.
py::object module_to(py::object self, const py::args& args, const py::kwargs& kwargs) {
  std::optional<DType> dtype;
  auto take = [&](py::handle a) {
    if (py::isinstance<Tensor>(a)) {
      dtype = a.cast<const Tensor&>().dtype();
    } else if (py::isinstance<py::str>(a)) {
      const std::string d = py::str(a);
      if (d != "cpu")
        throw BindingValueError(msg("Module.to: device ", quote_field(d), " is not available; Strata runs on the CPU"));
    } else if (!a.is_none()) {
      dtype = dtype_from_py(a, "Module.to");
    }
  };
  for (py::handle a : args) take(a);
  for (auto [k, v] : kwargs) {
    const std::string key = py::str(k);
    if (key != "dtype" && key != "device" && key != "non_blocking" && key != "copy" && key != "memory_format")
      throw BindingTypeError(msg("to() got an unexpected keyword argument ", quote_field(key)));
    if (key == "dtype" || key == "device") take(v);
  }
  if (dtype) {
    nn::Module& m = self.cast<nn::Module&>();
    if (!is_floating(*dtype))
      throw BindingTypeError(
          msg("nn.Module.to only accepts floating point or complex dtypes, but got desired "
              "dtype=",
              dtype_py_name(*dtype)));
    py::gil_scoped_release release;
    nn::convert_floating(m, *dtype);
  }
  return self;
}

void bind_module_dtype(py::module_& nn) {
  py::object cls = nn.attr("Module");
  auto method = [&](const char* name, py::cpp_function fn) { cls.attr(name) = fn; };
  method("to", py::cpp_function(&module_to, py::name("to"), py::is_method(cls),
                                "Converts floating parameters and buffers to a dtype in place; returns self."));
  auto as = [&](const char* name, DType dtype) {
    method(name, py::cpp_function(
                     [dtype](py::object self) {
                       nn::convert_floating(self.cast<nn::Module&>(), dtype);
                       return self;
                     },
                     py::name(name), py::is_method(cls)));
  };
  as("float", DType::f32);
  as("double", DType::f64);
  as("bfloat16", DType::bf16);
  as("half", DType::f16);
  method("cpu", py::cpp_function([](py::object self) { return self; }, py::name("cpu"), py::is_method(cls)));
}

}  // namespace

void init_training(py::module_& m) {
  bind_generator(m);
  bind_tensor_data(m);
  py::module_ nn = m.attr("nn");
  bind_init(nn);
  bind_clip_grad(nn);
  bind_module_dtype(nn);
}

}  // namespace strata::python
