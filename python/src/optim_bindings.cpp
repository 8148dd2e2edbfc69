// The C++ optimizers (models/optim) for strata.optim (python/strata/optim), which adds PyTorch's
// Python surface: param-group dicts, `betas`, nested state dicts, closures, __repr__.
//
// _C._Optimizer(kind, groups, defaults): kind is "SGD", "Adam", "AdamW", "Adagrad", "RMSprop" or
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
#include "models/optim/lr_scheduler.h"
#include "models/optim/optimizer.h"
#include "models/optim/rmsprop.h"
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
      throw BindingTypeError(
          msg(what, ": option '", key, "' must be a number or bool, got ", Py_TYPE(v.ptr())->tp_name));
    }
  }
  return out;
}

std::vector<Tensor> tensors_from_py(const py::list& params, const char* what) {
  std::vector<Tensor> out;
  for (py::handle p : params) {
    if (!py::isinstance<Tensor>(p))
      throw BindingTypeError(
          msg(what, ": optimizer can only optimize Tensors, but one of the params is ", Py_TYPE(p.ptr())->tp_name));
    out.push_back(p.cast<Tensor>());
  }
  return out;
}

std::unique_ptr<optim::Optimizer> make_optimizer(const std::string& kind, std::vector<ParamGroup> groups,
                                                 const Options& defaults) {
  // Each kind starts from its own defaults so that a partial `defaults` keeps the rest.
  auto fill = [&](Options base) {
    for (const auto& [k, v] : defaults) {
      if (base.count(k) == 0) throw BindingValueError(msg(kind, ": unknown option ", quote_field(k)));
      base[k] = v;
    }
    return base;
  };
  if (kind == "SGD") {
    const Options m = fill(optim::SGDOptions{}.to_map());
    optim::SGDOptions o{m.at("lr"),           m.at("momentum"),      m.at("dampening"),
                        m.at("weight_decay"), m.at("nesterov") != 0, m.at("maximize") != 0};
    return std::make_unique<optim::SGD>(std::move(groups), o);
  }
  if (kind == "Adam" || kind == "AdamW") {
    const Options m = fill((kind == "Adam" ? optim::AdamOptions{} : optim::AdamW::default_options()).to_map());
    optim::AdamOptions o{m.at("lr"),           m.at("beta1"),        m.at("beta2"),        m.at("eps"),
                         m.at("weight_decay"), m.at("amsgrad") != 0, m.at("maximize") != 0};
    if (kind == "Adam") return std::make_unique<optim::Adam>(std::move(groups), o);
    return std::make_unique<optim::AdamW>(std::move(groups), o);
  }
  if (kind == "Adagrad") {
    const Options m = fill(optim::AdagradOptions{}.to_map());
    optim::AdagradOptions o{m.at("lr"),  m.at("lr_decay"),     m.at("weight_decay"), m.at("initial_accumulator_value"),
                            m.at("eps"), m.at("maximize") != 0};
    return std::make_unique<optim::Adagrad>(std::move(groups), o);
  }
  if (kind == "RMSprop") {
    const Options m = fill(optim::RMSpropOptions{}.to_map());
    optim::RMSpropOptions o{m.at("lr"),       m.at("alpha"),         m.at("eps"),          m.at("weight_decay"),
                            m.at("momentum"), m.at("centered") != 0, m.at("maximize") != 0};
    return std::make_unique<optim::RMSprop>(std::move(groups), o);
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

// ---- learning-rate schedulers (strata.optim.lr_scheduler) -----------------------------------------

using SchedulerPtr = std::shared_ptr<optim::LRScheduler>;

double number_arg(const py::dict& args, const char* key) {
  py::handle v = args[key];
  if (PyBool_Check(v.ptr()) || !PyNumber_Check(v.ptr()))
    throw BindingTypeError(msg("lr_scheduler: '", key, "' must be a number, got ", Py_TYPE(v.ptr())->tp_name));
  return v.cast<double>();
}

int64_t integer_arg(const py::dict& args, const char* key) { return int_from_py(args[key], "lr_scheduler", key); }

std::vector<double> numbers_arg(const py::dict& args, const char* key) {
  py::handle v = args[key];
  if (!py::isinstance<py::list>(v) && !py::isinstance<py::tuple>(v)) return {number_arg(args, key)};
  std::vector<double> out;
  for (py::handle x : v) {
    py::dict one;
    one[key] = x;
    out.push_back(number_arg(one, key));
  }
  return out;
}

// A Python callable as LambdaLR's function (called with the GIL held: step() keeps it).
optim::LambdaLR::Lambda lambda_of(py::object fn) {
  if (!PyCallable_Check(fn.ptr()))
    throw BindingTypeError(msg("lr_lambda should be a function, but got ", Py_TYPE(fn.ptr())->tp_name));
  auto holder = std::make_shared<py::object>(std::move(fn));
  return [holder](int64_t epoch) {
    py::object out = (*holder)(epoch);
    if (PyBool_Check(out.ptr()) || !PyNumber_Check(out.ptr()))
      throw BindingTypeError(msg("lr_lambda returned ", Py_TYPE(out.ptr())->tp_name, ", expected a number"));
    return out.cast<double>();
  };
}

optim::OneCycleOptions one_cycle_options(const py::dict& a) {
  optim::OneCycleOptions o;
  o.max_lr = numbers_arg(a, "max_lr");
  o.total_steps = a["total_steps"].is_none() ? 0 : integer_arg(a, "total_steps");
  if (!a["total_steps"].is_none() && o.total_steps == 0)
    throw BindingValueError("Expected positive integer total_steps, but got 0");
  o.epochs = a["epochs"].is_none() ? 0 : integer_arg(a, "epochs");
  o.steps_per_epoch = a["steps_per_epoch"].is_none() ? 0 : integer_arg(a, "steps_per_epoch");
  o.pct_start = number_arg(a, "pct_start");
  o.anneal_strategy = py::str(a["anneal_strategy"]);
  o.cycle_momentum = a["cycle_momentum"].cast<bool>();
  o.base_momentum = numbers_arg(a, "base_momentum");
  o.max_momentum = numbers_arg(a, "max_momentum");
  o.div_factor = number_arg(a, "div_factor");
  o.final_div_factor = number_arg(a, "final_div_factor");
  o.three_phase = a["three_phase"].cast<bool>();
  return o;
}

// Builds scheduler `kind` from the keyword arguments of its PyTorch constructor.
SchedulerPtr make_scheduler(const std::string& kind, optim::Optimizer& opt, const py::dict& a, int64_t last_epoch) {
  if (kind == "LambdaLR") {
    std::vector<optim::LambdaLR::Lambda> fns;
    for (py::handle f : a["lr_lambdas"]) fns.push_back(lambda_of(py::reinterpret_borrow<py::object>(f)));
    return std::make_shared<optim::LambdaLR>(opt, std::move(fns), last_epoch);
  }
  if (kind == "StepLR")
    return std::make_shared<optim::StepLR>(opt, integer_arg(a, "step_size"), number_arg(a, "gamma"), last_epoch);
  if (kind == "MultiStepLR") {
    std::vector<int64_t> ms;
    for (py::handle x : a["milestones"]) ms.push_back(int_from_py(x, "MultiStepLR", "milestones"));
    return std::make_shared<optim::MultiStepLR>(opt, std::move(ms), number_arg(a, "gamma"), last_epoch);
  }
  if (kind == "ExponentialLR") return std::make_shared<optim::ExponentialLR>(opt, number_arg(a, "gamma"), last_epoch);
  if (kind == "CosineAnnealingLR")
    return std::make_shared<optim::CosineAnnealingLR>(opt, integer_arg(a, "T_max"), number_arg(a, "eta_min"),
                                                      last_epoch);
  if (kind == "LinearLR")
    return std::make_shared<optim::LinearLR>(opt, number_arg(a, "start_factor"), number_arg(a, "end_factor"),
                                             integer_arg(a, "total_iters"), last_epoch);
  if (kind == "OneCycleLR") return std::make_shared<optim::OneCycleLR>(opt, one_cycle_options(a), last_epoch);
  if (kind == "SequentialLR") {
    std::vector<SchedulerPtr> children;
    for (py::handle s : a["schedulers"]) children.push_back(s.cast<SchedulerPtr>());
    std::vector<int64_t> ms;
    for (py::handle x : a["milestones"]) ms.push_back(int_from_py(x, "SequentialLR", "milestones"));
    return std::make_shared<optim::SequentialLR>(opt, std::move(children), std::move(ms), last_epoch);
  }
  throw BindingValueError(msg("unknown scheduler kind ", quote_field(kind)));
}

optim::PlateauOptions plateau_options(const py::dict& a) {
  optim::PlateauOptions o;
  o.mode = py::str(a["mode"]);
  o.factor = number_arg(a, "factor");
  o.patience = integer_arg(a, "patience");
  o.threshold = number_arg(a, "threshold");
  o.threshold_mode = py::str(a["threshold_mode"]);
  o.cooldown = integer_arg(a, "cooldown");
  o.min_lr = numbers_arg(a, "min_lr");
  o.eps = number_arg(a, "eps");
  return o;
}

void bind_schedulers(py::module_& m) {
  py::class_<optim::LRScheduler, SchedulerPtr>(m, "_LRScheduler",
                                               "The C++ half of a strata.optim.lr_scheduler scheduler (internal).")
      .def(py::init([](const std::string& kind, optim::Optimizer& opt, const py::dict& args, int64_t last_epoch) {
             return as_value_error([&] { return make_scheduler(kind, opt, args, last_epoch); });
           }),
           py::arg("kind"), py::arg("optimizer"), py::arg("args"), py::arg("last_epoch"), py::keep_alive<1, 3>())
      .def_property_readonly("name", &optim::LRScheduler::name)
      .def("step",
           [](optim::LRScheduler& s) {
             as_value_error([&] {
               s.step();
               return 0;
             });
           })
      .def("step_to",
           [](optim::LRScheduler& s, int64_t e) {
             as_value_error([&] {
               s.step_to(e);
               return 0;
             });
           })
      .def_property_readonly("last_lr", &optim::LRScheduler::last_lr)
      .def_property_readonly("base_lrs", &optim::LRScheduler::base_lrs)
      .def_property_readonly("last_epoch", &optim::LRScheduler::last_epoch)
      .def_property_readonly("step_count", &optim::LRScheduler::step_count)
      .def("state_dict", &optim::LRScheduler::state_dict)
      .def("load_state_dict", [](optim::LRScheduler& s, const StateDict& sd) {
        as_value_error([&] {
          s.load_state_dict(sd);
          return 0;
        });
      });
  py::class_<optim::ReduceLROnPlateau, std::shared_ptr<optim::ReduceLROnPlateau>>(
      m, "_ReduceLROnPlateau", "The C++ half of strata.optim.lr_scheduler.ReduceLROnPlateau (internal).")
      .def(py::init([](optim::Optimizer& opt, const py::dict& args) {
             return as_value_error(
                 [&] { return std::make_shared<optim::ReduceLROnPlateau>(opt, plateau_options(args)); });
           }),
           py::arg("optimizer"), py::arg("args"), py::keep_alive<1, 2>())
      .def("step", &optim::ReduceLROnPlateau::step, py::arg("metrics"))
      .def_property_readonly("last_lr", &optim::ReduceLROnPlateau::last_lr)
      .def_property_readonly("last_epoch", &optim::ReduceLROnPlateau::last_epoch)
      .def_property_readonly("best", &optim::ReduceLROnPlateau::best)
      .def_property_readonly("num_bad_epochs", &optim::ReduceLROnPlateau::num_bad_epochs)
      .def_property_readonly("cooldown_counter", &optim::ReduceLROnPlateau::cooldown_counter)
      .def("state_dict", &optim::ReduceLROnPlateau::state_dict)
      .def("load_state_dict", [](optim::ReduceLROnPlateau& s, const StateDict& sd) {
        as_value_error([&] {
          s.load_state_dict(sd);
          return 0;
        });
      });
}

}  // namespace

void init_optim(py::module_& m) {
  bind_schedulers(m);
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
            if (options.count(key) == 0) throw BindingValueError(msg(o.name(), ": unknown option ", quote_field(key)));
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
      .def("group_extras",
           [](const optim::Optimizer& o, int64_t g) { return o.param_groups()[group_index(o, g)].extras; })
      .def(
          "set_extra",
          [](optim::Optimizer& o, int64_t g, const std::string& key, double value) {
            o.param_groups()[group_index(o, g)].extras[key] = value;
          },
          py::arg("group"), py::arg("key"), py::arg("value"),
          "Sets a scheduler's per-group value (initial_lr, max_lr, ...).")
      .def(
          "del_extra",
          [](optim::Optimizer& o, int64_t g, const std::string& key) {
            return o.param_groups()[group_index(o, g)].extras.erase(key) != 0;
          },
          py::arg("group"), py::arg("key"))
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
