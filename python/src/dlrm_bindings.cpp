// strata._C.dlrm: TieredDLRM (embeddings/dlrm.h) for python/strata/dlrm.py, which builds it from
// keyword arguments named like the reference script's flags.
//
// Batches come as NumPy arrays (or anything np.asarray accepts): dense [B, n_dense] floating,
// per table 1-D integer indices and offsets (B bag starts, PyTorch's EmbeddingBag convention, or
// B + 1 CSR offsets), optional per-table per-sample weights, targets [B] or [B, 1]. Arrays are
// read in place when they are C-contiguous with the right dtype (float32 / int64), converted
// otherwise; the GIL is released while the model runs.

#include <pybind11/stl.h>

#include <memory>
#include <string>
#include <vector>

#include "bindings.h"
#include "core/line_plot.h"
#include "embeddings/click_source.h"
#include "embeddings/dlrm.h"
#include "embeddings/dlrm_config.h"
#include "embeddings/dlrm_trainer.h"
#include "embeddings/index_source.h"
#include "models/metrics.h"

namespace strata::python {

namespace {

using emb::Bags;
using emb::TieredDLRM;

/// `h` as a C-contiguous array of T after checking its dtype kind ('f' floating, 'i'/'u' integer).
template <typename T>
py::array_t<T, py::array::c_style> array_of(py::handle h, const char* op, const std::string& what, bool integer) {
  py::array a = py::module_::import("numpy").attr("asarray")(h);
  const char kind = a.dtype().kind();
  if (integer ? (kind != 'i' && kind != 'u') : (kind != 'f' && kind != 'i' && kind != 'u'))
    throw BindingTypeError(msg(op, ": ", what, " must be ", integer ? "an integer" : "a floating-point",
                               " array, got dtype ", std::string(py::str(a.dtype()))));
  return py::array_t < T, py::array::c_style | py::array::forcecast > ::ensure(a);
}

std::vector<py::handle> table_list(py::handle h, const char* op, const char* what, int64_t tables) {
  if (!PySequence_Check(h.ptr()) || py::isinstance<py::str>(h) || py::isinstance<py::array>(h))
    throw BindingTypeError(
        msg(op, ": ", what, " must be a list with one array per table, got ", Py_TYPE(h.ptr())->tp_name));
  std::vector<py::handle> out;
  for (py::handle item : py::reinterpret_borrow<py::sequence>(h)) out.push_back(item);
  if (static_cast<int64_t>(out.size()) != tables)
    throw BindingValueError(msg(op, ": expected ", what, " for ", tables, " tables, got ", out.size()));
  return out;
}

/// A batch converted from Python objects; the arrays stay alive while the model reads them.
struct PyBatch {
  int64_t batch = 0;
  py::array_t<float, py::array::c_style> dense, targets;
  std::vector<py::array_t<int64_t, py::array::c_style>> indices;
  std::vector<std::vector<int64_t>> offsets;
  std::vector<py::array_t<float, py::array::c_style>> weights;
  std::vector<Bags> bags;
};

PyBatch make_batch(TieredDLRM& m, const char* op, py::handle dense, py::handle indices, py::handle offsets,
                   py::handle weights, py::handle targets) {
  PyBatch b;
  b.dense = array_of<float>(dense, op, "dense", false);
  if (b.dense.ndim() != 2 || b.dense.shape(1) != m.dense_features())
    throw BindingValueError(msg(op, ": dense must be [B, ", m.dense_features(), "], got shape ",
                                std::string(py::str(py::tuple(py::cast(
                                    std::vector<py::ssize_t>(b.dense.shape(), b.dense.shape() + b.dense.ndim())))))));
  b.batch = b.dense.shape(0);
  const int64_t nt = m.num_tables();
  const auto idx = table_list(indices, op, "indices", nt);
  const auto off = table_list(offsets, op, "offsets", nt);
  std::vector<py::handle> w;
  if (!weights.is_none()) w = table_list(weights, op, "per_sample_weights", nt);
  for (int64_t k = 0; k < nt; ++k) {
    const std::string tk = "table " + std::to_string(k);
    auto i = array_of<int64_t>(idx[k], op, "indices of " + tk, true);
    auto o = array_of<int64_t>(off[k], op, "offsets of " + tk, true);
    if (i.ndim() != 1 || o.ndim() != 1)
      throw BindingValueError(msg(op, ": indices and offsets of ", tk, " must be 1-D"));
    const int64_t n = o.shape(0);
    if (n != b.batch && n != b.batch + 1)
      throw BindingValueError(msg(op, ": offsets of ", tk, " must hold ", b.batch, " bag starts (or ", b.batch + 1,
                                  " CSR offsets) for a batch of ", b.batch, ", got ", n));
    std::vector<int64_t> csr(o.data(), o.data() + n);
    if (n == b.batch) csr.push_back(i.shape(0));
    b.indices.push_back(std::move(i));
    b.offsets.push_back(std::move(csr));
    if (!w.empty()) {
      auto wk = array_of<float>(w[k], op, "per_sample_weights of " + tk, false);
      if (wk.ndim() != 1 || wk.shape(0) != b.indices.back().shape(0))
        throw BindingValueError(msg(op, ": per_sample_weights of ", tk, " must be 1-D with one weight per index (",
                                    b.indices.back().shape(0), "), got ", wk.size()));
      b.weights.push_back(std::move(wk));
    }
  }
  for (int64_t k = 0; k < nt; ++k) {
    Bags bags{std::span<const int64_t>(b.indices[k].data(), static_cast<std::size_t>(b.indices[k].shape(0))),
              std::span<const int64_t>(b.offsets[k])};
    if (!b.weights.empty())
      bags.weights = std::span<const float>(b.weights[k].data(), static_cast<std::size_t>(b.weights[k].shape(0)));
    b.bags.push_back(bags);
  }
  if (!targets.is_none()) {
    b.targets = array_of<float>(targets, op, "targets", false);
    if (b.targets.size() != b.batch || (b.targets.ndim() == 2 && b.targets.shape(1) != 1) || b.targets.ndim() > 2)
      throw BindingValueError(
          msg(op, ": targets must be [B] or [B, 1] with B = ", b.batch, ", got ", b.targets.size(), " values"));
  }
  return b;
}

py::array_t<float> table_copy(emb::Table& t) {
  py::array_t<float> out({t.nvectors(), t.featuresize()});
  {
    py::gil_scoped_release release;
    t.copy_to(out.mutable_data());
  }
  return out;
}

void set_table_values(emb::Table& t, py::handle values, const std::string& what) {
  auto a = array_of<float>(values, "DLRM.set_table", "values", false);
  if (a.ndim() != 2 || a.shape(0) != t.nvectors() || a.shape(1) != t.featuresize())
    throw BindingValueError(msg("DLRM.set_table: ", what, " needs [", t.nvectors(), ", ", t.featuresize(),
                                "] values, got ", a.size(), " values of rank ", a.ndim()));
  py::gil_scoped_release release;
  t.copy_from(a.data());
}

std::span<const float> span_of(const py::array_t<float, py::array::c_style>& a) {
  return {a.data(), static_cast<std::size_t>(a.size())};
}

// The flags, presets, data sets and batches of a run.
void bind_dlrm_data(py::module_& dm) {
  dm.def("usage", &emb::dlrm_usage, "strata-dlrm's flags with their defaults.");
  dm.def("flag_names", &emb::dlrm_flag_names, "Every flag strata-dlrm knows.");
  dm.def("flag_is_store_true", &emb::dlrm_flag_is_store_true, py::arg("flag"), "Whether the flag takes no value.");
  dm.def("preset_names", &emb::dlrm_preset_names);
  dm.def(
      "parse_args", [](const std::vector<std::string>& args) { return emb::describe(emb::parse_dlrm_args(args)); },
      py::arg("args"), "Validates strata-dlrm flags; returns the run's description.");

  dm.def(
      "dataset_counts",
      [](const std::vector<std::string>& args) {
        const emb::DLRMConfig c = emb::parse_dlrm_args(args);
        py::gil_scoped_release release;
        return emb::dataset_counts(c);
      },
      py::arg("args"), "A Criteo data set's ids per table (preprocessing the raw file first when needed).");

  py::class_<emb::IndexSource>(dm, "Batches", "The batches of a run (embeddings/index_source.h) as NumPy arrays.")
      .def(py::init([](const std::vector<std::string>& args, const std::string& split) {
             const emb::DLRMConfig c = emb::parse_dlrm_args(args);
             const emb::CriteoSplit s = emb::parse_criteo_split(split, "Batches(split=...)");
             py::gil_scoped_release release;
             return emb::make_index_source(c, s);
           }),
           py::arg("args"), py::arg("split") = "train")
      .def("__len__", &emb::IndexSource::num_batches)
      .def_property_readonly(
          "rows",
          [](const emb::IndexSource& self) { return std::vector<int64_t>(self.rows().begin(), self.rows().end()); })
      .def("reset", &emb::IndexSource::reset)
      .def("describe", &emb::IndexSource::describe)
      .def(
          "next",
          [](emb::IndexSource& self) -> py::object {
            emb::Batch b;
            bool ok;
            {
              py::gil_scoped_release release;
              ok = self.next(b);
            }
            if (!ok) return py::none();
            py::array_t<float> dense({b.batch, b.num_dense});
            std::copy(b.dense.begin(), b.dense.end(), dense.mutable_data());
            py::array_t<float> targets({b.batch, int64_t{1}});
            std::copy(b.targets.begin(), b.targets.end(), targets.mutable_data());
            py::list indices, offsets, weights;
            for (const auto& t : b.tables) {
              indices.append(py::array_t<int64_t>(static_cast<py::ssize_t>(t.indices.size()), t.indices.data()));
              offsets.append(py::array_t<int64_t>(static_cast<py::ssize_t>(t.offsets.size()), t.offsets.data()));
            }
            return py::make_tuple(dense, indices, offsets, targets);
          },
          "The next batch (dense, indices, offsets, targets), or None at the end of the epoch.");

  dm.def(
      "write_training_plot",
      [](const std::string& path, const std::string& title, std::vector<double> iterations, std::vector<double> loss,
         std::vector<double> test_iterations, std::vector<double> accuracy, std::vector<double> auc) {
        const TrainingCurves curves{std::move(iterations), std::move(loss), std::move(test_iterations),
                                    std::move(accuracy), std::move(auc)};
        py::gil_scoped_release release;
        write_line_plot_png(path, title, training_plot_panels(curves));
      },
      py::arg("path"), py::arg("title"), py::arg("iterations"), py::arg("loss"), py::arg("test_iterations"),
      py::arg("accuracy"), py::arg("auc"), "Writes training curves as a PNG line plot (core/line_plot.h).");
}

// Building the model, its training and test steps.
void def_dlrm_steps(py::class_<TieredDLRM>& cls) {
  cls.def(py::init([](const std::vector<std::string>& args) {
            const emb::DLRMConfig flags = emb::parse_dlrm_args(args);
            py::gil_scoped_release release;
            return std::make_unique<TieredDLRM>(emb::with_dataset_rows(flags));
          }),
          py::arg("args"), "Builds the model from strata-dlrm flags (['--arch-sparse-feature-size', '16', ...]).")
      .def(
          "train_step",
          [](TieredDLRM& self, py::handle dense, py::handle indices, py::handle offsets, py::handle targets,
             py::handle weights) {
            PyBatch b = make_batch(self, "DLRM.train_step", dense, indices, offsets, weights, targets);
            if (targets.is_none()) throw BindingValueError("DLRM.train_step: targets are required");
            py::gil_scoped_release release;
            return self.train_step(span_of(b.dense), b.bags, span_of(b.targets));
          },
          py::arg("dense"), py::arg("indices"), py::arg("offsets"), py::arg("targets"),
          py::arg("per_sample_weights") = py::none())
      .def(
          "evaluate",
          [](TieredDLRM& self, py::handle dense, py::handle indices, py::handle offsets, py::handle targets,
             py::handle weights) {
            PyBatch b = make_batch(self, "DLRM.evaluate", dense, indices, offsets, weights, targets);
            if (targets.is_none()) throw BindingValueError("DLRM.evaluate: targets are required");
            py::gil_scoped_release release;
            return self.evaluate(span_of(b.dense), b.bags, span_of(b.targets));
          },
          py::arg("dense"), py::arg("indices"), py::arg("offsets"), py::arg("targets"),
          py::arg("per_sample_weights") = py::none())
      .def(
          "score",
          [](TieredDLRM& self, py::handle dense, py::handle indices, py::handle offsets, py::handle targets,
             py::handle weights) {
            PyBatch b = make_batch(self, "DLRM.evaluate", dense, indices, offsets, weights, targets);
            if (targets.is_none()) throw BindingValueError("DLRM.evaluate: targets are required");
            std::vector<float> scores;
            float loss;
            {
              py::gil_scoped_release release;
              loss = self.score(span_of(b.dense), b.bags, span_of(b.targets), scores);
            }
            return py::make_tuple(py::array_t<float>(static_cast<py::ssize_t>(scores.size()), scores.data()),
                                  py::array_t<float>(static_cast<py::ssize_t>(b.targets.size()), b.targets.data()),
                                  loss);
          },
          py::arg("dense"), py::arg("indices"), py::arg("offsets"), py::arg("targets"),
          py::arg("per_sample_weights") = py::none(), "(scores, targets, loss) of a test batch.")
      .def(
          "evaluate_source",
          [](TieredDLRM& self, emb::IndexSource& source) {
            metrics::BinaryMetrics r;
            {
              py::gil_scoped_release release;
              r = emb::evaluate_source(self, source);
            }
            return metrics_dict(r);
          },
          py::arg("source"), "One test pass over a Batches source.")
      .def(
          "forward",
          [](TieredDLRM& self, py::handle dense, py::handle indices, py::handle offsets, py::handle weights) {
            PyBatch b = make_batch(self, "DLRM.forward", dense, indices, offsets, weights, py::none());
            Tensor out;
            {
              py::gil_scoped_release release;
              out = self.forward(span_of(b.dense), b.bags);
            }
            return out;
          },
          py::arg("dense"), py::arg("indices"), py::arg("offsets"), py::arg("per_sample_weights") = py::none());
}

// Tables, state dicts, checkpoints and statistics.
void def_dlrm_state(py::class_<TieredDLRM>& cls) {
  cls.def_property_readonly("num_tables", &TieredDLRM::num_tables)
      .def_property_readonly("dense_features", &TieredDLRM::dense_features)
      .def_property_readonly("feature_size", &TieredDLRM::feature_size)
      .def_property_readonly("table_rows",
                             [](TieredDLRM& self) {
                               std::vector<int64_t> rows;
                               for (int64_t k = 0; k < self.num_tables(); ++k)
                                 rows.push_back(self.table_layout(k).rows);
                               return rows;
                             })
      .def_property_readonly("stored_table_keys",
                             [](TieredDLRM& self) {
                               std::vector<std::string> keys;
                               for (int64_t p = 0; p < self.num_stored_tables(); ++p)
                                 keys.push_back(self.stored_table_key(p));
                               return keys;
                             })
      .def(
          "get_table", [](TieredDLRM& self, int64_t k, int64_t part) { return table_copy(self.table(k, part)); },
          py::arg("k"), py::arg("part") = 0,
          "A copy of table k's rows (part 1: a quotient-remainder table's remainder) as float32 [rows, d_k].")
      .def(
          "set_table",
          [](TieredDLRM& self, int64_t k, py::handle values, int64_t part) {
            set_table_values(self.table(k, part), values, "table " + std::to_string(k));
          },
          py::arg("k"), py::arg("values"), py::arg("part") = 0,
          "Overwrites table k's rows (part 1: the remainder table) from float [rows, d_k] values.")
      .def(
          "get_stored", [](TieredDLRM& self, int64_t p) { return table_copy(self.stored_table(p)); }, py::arg("p"),
          "A copy of stored table p (of stored_table_keys) as float32 [rows, d_p].")
      .def(
          "set_stored",
          [](TieredDLRM& self, int64_t p, py::handle values) {
            set_table_values(self.stored_table(p), values, self.stored_table_key(p));
          },
          py::arg("p"), py::arg("values"), "Overwrites stored table p from float [rows, d_p] values.")
      .def("_state_dict", &TieredDLRM::state_dict, "The dense parameters [(reference name, Tensor)].")
      .def("_load_state_dict", &TieredDLRM::load_state_dict, py::arg("state"))
      .def(
          "save",
          [](TieredDLRM& self, const std::string& path, const CheckpointMetadata& extra) {
            py::gil_scoped_release release;
            self.save(path, extra);
          },
          py::arg("path"), py::arg("extra") = CheckpointMetadata{},
          "Saves model and optimizer state (and the `extra` metadata [(key, value)]) to `path` atomically.")
      .def(
          "load",
          [](TieredDLRM& self, const std::string& path) {
            py::gil_scoped_release release;
            return self.load(path);
          },
          py::arg("path"), "Loads a file written by save(); returns its metadata [(key, value)].")
      .def_property_readonly("steps", &TieredDLRM::steps)
      .def_property_readonly("next_learning_rate", &TieredDLRM::next_learning_rate)
      .def_property_readonly("times",
                             [](TieredDLRM& self) {
                               const auto& t = self.times();
                               py::dict d;
                               d["bottom_mlp"] = t.bottom_mlp;
                               d["lookup"] = t.lookup;
                               d["interaction"] = t.interaction;
                               d["top_mlp"] = t.top_mlp;
                               d["backward"] = t.backward;
                               d["update"] = t.update;
                               d["hooks"] = t.hooks;
                               d["steps"] = t.steps;
                               return d;
                             })
      .def_property_readonly("counters",
                             [](TieredDLRM& self) {
                               const auto c = self.counters();
                               py::dict d;
                               d["rows_looked_up"] = c.rows_looked_up;
                               d["rows_updated"] = c.rows_updated;
                               d["slow_bytes_read"] = c.slow_bytes_read;
                               d["slow_bytes_written"] = c.slow_bytes_written;
                               d["fast_bytes_read"] = c.fast_bytes_read;
                               d["fast_bytes_written"] = c.fast_bytes_written;
                               if (c.cache_hit_rate >= 0)
                                 d["cache_hit_rate"] = c.cache_hit_rate;
                               else
                                 d["cache_hit_rate"] = py::none();
                               return d;
                             })
      .def("reset_stats", &TieredDLRM::reset_stats)
      .def("describe", [](TieredDLRM& self) {
        return emb::describe(self.config()) + "\n" + self.describe_memory() + "\n" + self.describe_tables();
      });
}

}  // namespace

void init_dlrm(py::module_& m) {
  py::module_ dm = m.def_submodule("dlrm", "TieredDLRM: the reference DLRM on tiered embedding tables.");
  bind_dlrm_data(dm);
  py::class_<TieredDLRM> cls(dm, "DLRM", "The reference DLRM with tiered embedding tables (embeddings/dlrm.h).");
  def_dlrm_steps(cls);
  def_dlrm_state(cls);
}

}  // namespace strata::python
