// strata._C.metrics: the binary-classification metrics of models/metrics.h over NumPy arrays.

#include <vector>

#include "bindings.h"
#include "models/metrics.h"

namespace strata::python {
namespace {

// Any array-like of numbers as float32 (scores are probabilities; targets 0/1, checked in C++).
std::vector<float> as_floats(const py::handle& values, const char* what) {
  py::array_t<float, py::array::c_style | py::array::forcecast> a;
  try {
    a = py::array_t < float, py::array::c_style | py::array::forcecast > ::ensure(values);
  } catch (const py::error_already_set&) {
    a = {};
  }
  if (!a) throw BindingTypeError(msg(what, " must be an array of numbers"));
  if (a.ndim() > 2 || (a.ndim() == 2 && a.shape(1) != 1))
    throw BindingValueError(msg(what, " must be 1-D (or [n, 1]), got ", a.ndim(), " dimensions"));
  return {a.data(), a.data() + a.size()};
}

// Bad values (lengths, targets, NaN scores) are ValueErrors, as scikit-learn raises them.
template <typename F>
double value_checked(F&& f) {
  try {
    return f();
  } catch (const BindingTypeError&) {
    throw;
  } catch (const Error& e) {
    throw BindingValueError(e.what());
  }
}

}  // namespace

py::dict metrics_dict(const metrics::BinaryMetrics& r) {
  py::dict d;
  d["loss"] = r.loss;
  d["log_loss"] = r.log_loss;
  d["accuracy"] = r.accuracy;
  d["auc"] = r.auc;
  d["samples"] = r.samples;
  return d;
}

void init_metrics(py::module_& m) {
  py::module_ mm = m.def_submodule("metrics", "Binary-classification metrics (models/metrics.h).");
  py::class_<metrics::BinaryMetricsAccumulator>(mm, "Accumulator", "Collects a test pass batch by batch.")
      .def(py::init<>())
      .def(
          "add",
          [](metrics::BinaryMetricsAccumulator& self, py::handle scores, py::handle targets, double loss) {
            const std::vector<float> s = as_floats(scores, "scores"), t = as_floats(targets, "targets");
            value_checked([&] {
              self.add(s, t, loss);
              return 0.0;
            });
          },
          py::arg("scores"), py::arg("targets"), py::arg("loss"))
      .def(
          "compute", [](const metrics::BinaryMetricsAccumulator& self) { return metrics_dict(self.compute()); },
          "{'loss', 'log_loss', 'accuracy', 'auc', 'samples'}")
      .def_property_readonly("samples", &metrics::BinaryMetricsAccumulator::samples);
  mm.def(
      "roc_auc",
      [](py::handle y_true, py::handle y_score) {
        return value_checked(
            [&] { return metrics::roc_auc(as_floats(y_score, "y_score"), as_floats(y_true, "y_true")); });
      },
      py::arg("y_true"), py::arg("y_score"), "Exact ROC AUC (NaN with one class).");
  mm.def(
      "accuracy",
      [](py::handle y_true, py::handle y_score) {
        return value_checked(
            [&] { return metrics::accuracy(as_floats(y_score, "y_score"), as_floats(y_true, "y_true")); });
      },
      py::arg("y_true"), py::arg("y_score"), "Fraction of round-half-even(score) == target.");
  mm.def(
      "log_loss",
      [](py::handle y_true, py::handle y_score) {
        return value_checked(
            [&] { return metrics::log_loss(as_floats(y_score, "y_score"), as_floats(y_true, "y_true")); });
      },
      py::arg("y_true"), py::arg("y_score"), "Mean binary cross-entropy, probabilities clipped to [2^-52, 1-2^-52].");
}

}  // namespace strata::python
