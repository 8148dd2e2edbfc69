// The C++ optimizers (models/optim) for strata.optim (python/strata/optim), which adds PyTorch's
// Python surface: param-group dicts, `betas`, nested state dicts, closures, __repr__.
//
// _C._Optimizer(kind, groups, defaults): kind is "SGD", "Adam", "AdamW", "Adagrad" or
// "RowWiseAdagrad"; groups a list of (list of Tensors, dict of options); defaults a dict of
// options, all under the C++ names (beta1/beta2, booleans as numbers). Hyperparameter and
// state-dict errors are raised as ValueError (strata.StrataValueError) with the C++ message.

#include <pybind11/stl.h>

#include <memory>
#include <regex>

#include "bindings.h"
#include "core/factories.h"
#include "models/optim/adagrad.h"
#include "models/optim/adam.h"
#include "models/optim/optimizer.h"
#include "models/optim/rowwise_adagrad.h"
#include "models/optim/sgd.h"

namespace strata::python {
namespace {

using optim::Options;
using optim::ParamGroup;

// The message without STRATA_CHECK's trailing " (file.cpp:123)" location.
std::string without_location(const std::string& what) {
  static const std::regex location(R"( \([A-Za-z0-9_]+\.(cpp|h):[0-9]+\)$)");
  return std::regex_replace(what, location, "");
}

// Runs fn, re-raising strata::Error as ValueError (bad hyperparameters, bad state dicts).
template <typename Fn>
decltype(auto) as_value_error(Fn&& fn) {
  try {
    return fn();
  } catch (const BindingTypeError&) {
    throw;
  } catch (const BindingValueError&) {
    throw;
  } catch (const Error& e) {
    throw BindingValueError(without_location(e.what()));
  }
}

Options options_from_py(const py::dict& d, const char* what) {
  Options out;
  for (auto [k, v] : d) {
    const std::string key = py::str(k);
    if (PyBool_Check(v.ptr())) {
      out[key] = v.cast<bool>() ? 1.0 : 0.0;
    } else if (PyFloat_Check(v.ptr()) || PyLong_Check(v.ptr())) {
      out[key] = v.cast<double>();
    } else {
      throw BindingTypeError(msg(what, ": option '", key, "' must be a number or bool, got ", Py_TYPE(v.ptr())->tp_name));
    }
  }
  return out;
}

std::vector<Tensor> tensors_from_py(const py::list& params, const char* what) {
  std::vector<Tensor> out;
  for (py::handle p : params) {
    if (!py::isinstance<Tensor>(p))
      throw BindingTypeError(msg(what, ": optimizer can only optimize Tensors, but one of the params is ",
                                 Py_TYPE(p.ptr())->tp_name));
    out.push_back(p.cast<Tensor>());
  }
  return out;
}

std::unique_ptr<optim::Optimizer> make_optimizer(const std::string& kind, std::vector<ParamGroup> groups,
                                                 const Options& defaults) {
  // Each kind starts from its own defaults so that a partial `defaults` keeps the rest.
  auto fill = [&](Options base) {
    for (const auto& [k, v] : defaults) {
      if (base.count(k) == 0)
        throw BindingValueError(msg(kind, ": unknown option ", quote_field(k)));
      base[k] = v;
    }
    return base;
  };
  if (kind == "SGD") {
    const Options m = fill(optim::SGDOptions{}.to_map());
    optim::SGDOptions o{m.at("lr"), m.at("momentum"), m.at("dampening"), m.at("weight_decay"),
                        m.at("nesterov") != 0, m.at("maximize") != 0};
    return std::make_unique<optim::SGD>(std::move(groups), o);
  }
  if (kind == "Adam" || kind == "AdamW") {
    const Options m = fill((kind == "Adam" ? optim::AdamOptions{} : optim::AdamW::default_options()).to_map());
    optim::AdamOptions o{m.at("lr"),           m.at("beta1"),          m.at("beta2"),          m.at("eps"),
                         m.at("weight_decay"), m.at("amsgrad") != 0,   m.at("maximize") != 0};
    if (kind == "Adam") return std::make_unique<optim::Adam>(std::move(groups), o);
    return std::make_unique<optim::AdamW>(std::move(groups), o);
  }
  if (kind == "Adagrad") {
    const Options m = fill(optim::AdagradOptions{}.to_map());
    optim::AdagradOptions o{m.at("lr"), m.at("lr_decay"), m.at("weight_decay"), m.at("initial_accumulator_value"),
                            m.at("eps"), m.at("maximize") != 0};
    return std::make_unique<optim::Adagrad>(std::move(groups), o);
  }
  if (kind == "RowWiseAdagrad") {
    const Options m = fill(optim::RowWiseAdagradOptions{}.to_map());
    optim::RowWiseAdagradOptions o{m.at("lr"), m.at("eps"), m.at("weight_decay")};
    return std::make_unique<optim::RowWiseAdagrad>(std::move(groups), o);
  }
  throw BindingValueError(msg("unknown optimizer kind ", quote_field(kind)));
}

// Two handles name the same parameter (same elements of the same storage).
bool same_param(const Tensor& a, const Tensor& b) {
  return a.shares_storage(b) && a.offset() == b.offset() && a.sizes() == b.sizes() && a.strides() == b.strides();
}

std::size_t group_index(const optim::Optimizer& opt, int64_t g) {
  const auto n = static_cast<int64_t>(opt.param_groups().size());
  if (g < 0 || g >= n)
    throw BindingIndexError(msg(opt.name(), ": param group index ", g, " out of range (", n, " groups)"));
  return static_cast<std::size_t>(g);
}

}  // namespace

void init_optim(py::module_& m) {
  py::class_<optim::Optimizer>(m, "_Optimizer", "The C++ half of a strata.optim optimizer (internal).")
      .def(py::init([](const std::string& kind, const py::list& groups, const py::dict& defaults) {
             const Options d = options_from_py(defaults, kind.c_str());
             std::vector<ParamGroup> gs;
             for (py::handle g : groups) {
               auto pair = g.cast<py::tuple>();
               gs.push_back({tensors_from_py(pair[0].cast<py::list>(), kind.c_str()),
                             options_from_py(pair[1].cast<py::dict>(), kind.c_str())});
             }
             return as_value_error([&] { return make_optimizer(kind, std::move(gs), d); });
           }),
           py::arg("kind"), py::arg("groups"), py::arg("defaults"))
      .def_property_readonly("name", &optim::Optimizer::name)
      .def_property_readonly("defaults", [](const optim::Optimizer& o) { return o.defaults(); })
      .def(
          "step",
          [](optim::Optimizer& o) {
            py::gil_scoped_release release;
            o.step();
          },
          "Updates every parameter that has a gradient.")
      .def("zero_grad", &optim::Optimizer::zero_grad, py::arg("set_to_none") = true)
      .def_property_readonly("num_groups", [](const optim::Optimizer& o) { return o.param_groups().size(); })
      .def("group_params",
           [](const optim::Optimizer& o, int64_t g) { return o.param_groups()[group_index(o, g)].params; })
      .def("group_options",
           [](const optim::Optimizer& o, int64_t g) { return o.param_groups()[group_index(o, g)].options; })
      .def(
          "set_option",
          [](optim::Optimizer& o, int64_t g, const std::string& key, py::handle value) {
            py::dict one;
            one[py::str(key)] = value;
            const Options parsed = options_from_py(one, o.name().c_str());
            auto& options = o.param_groups()[group_index(o, g)].options;
            if (options.count(key) == 0)
              throw BindingValueError(msg(o.name(), ": unknown option ", quote_field(key)));
            // Validated now, not only at the next step.
            Options updated = options;
            updated[key] = parsed.at(key);
            as_value_error([&] {
              o.check_group_options(updated);
              return 0;
            });
            options = std::move(updated);
          },
          py::arg("group"), py::arg("key"), py::arg("value"))
      .def(
          "add_param_group",
          [](optim::Optimizer& o, const py::list& params, const py::dict& options) {
            ParamGroup g{tensors_from_py(params, o.name().c_str()), options_from_py(options, o.name().c_str())};
            as_value_error([&] {
              o.add_param_group(std::move(g));
              return 0;
            });
          },
          py::arg("params"), py::arg("options"))
      .def_property_readonly("num_params", &optim::Optimizer::num_params)
      .def("find_param",
           [](const optim::Optimizer& o, const Tensor& t) -> int64_t {
             int64_t i = 0;
             for (const auto& g : o.param_groups())
               for (const auto& p : g.params) {
                 if (same_param(p, t)) return i;
                 ++i;
               }
             return -1;
           })
      .def("param_state",
           [](const optim::Optimizer& o, int64_t i) {
             if (i < 0 || i >= o.num_params())
               throw BindingIndexError(msg(o.name(), ": parameter index ", i, " out of range"));
             // The live state tensors (as PyTorch's optimizer.state) and the step as a 0-d f32 tensor.
             py::dict out;
             const optim::ParamState& st = o.state(i);
             if (!st.initialized) return out;
             if (o.counts_steps()) out["step"] = scalar_tensor(static_cast<double>(st.step), DType::f32);
             for (const auto& [name, t] : st.buffers) out[py::str(name)] = t;
             return out;
           })
      .def("state_dict", [](const optim::Optimizer& o) { return o.state_dict(); })
      .def(
          "load_state_dict",
          [](optim::Optimizer& o, const StateDict& sd) {
            as_value_error([&] {
              o.load_state_dict(sd);
              return 0;
            });
          },
          py::arg("state_dict"))
      .def(
          "check_state_dict",
          [](const optim::Optimizer& o, const StateDict& sd) {
            as_value_error([&] {
              o.check_state_dict(sd);
              return 0;
            });
          },
          py::arg("state_dict"));
}

}  // namespace strata::python
