// strata._C._save_checkpoint / _load_checkpoint: the file layer of strata.save_checkpoint and
// strata.load_checkpoint (python/strata/checkpoint.py flattens models, optimizers and metadata).

#include <pybind11/stl.h>

#include <string>
#include <tuple>

#include "bindings.h"
#include "models/checkpoint.h"

namespace strata::python {

void init_checkpoint(py::module_& m) {
  m.def(
      "_save_checkpoint",
      [](const std::string& path, const StateDict& model, const StateDict& optimizer,
         const CheckpointMetadata& metadata) {
        py::gil_scoped_release release;
        save_checkpoint(path, model, optimizer, metadata);
      },
      py::arg("path"), py::arg("model"), py::arg("optimizer"), py::arg("metadata"),
      "Writes [(key, Tensor)] model and optimizer entries and [(key, str)] metadata to `path`, atomically.");
  m.def(
      "_load_checkpoint",
      [](const std::string& path) {
        Checkpoint c;
        {
          py::gil_scoped_release release;
          c = load_checkpoint(path);
        }
        return std::make_tuple(std::move(c.model), std::move(c.optimizer), std::move(c.metadata));
      },
      py::arg("path"),
      "Reads a checkpoint file: ([(key, Tensor)] model, [(key, Tensor)] optimizer, [(key, str)] metadata).");
  m.attr("_CHECKPOINT_VERSION") = kCheckpointVersion;
}

}  // namespace strata::python
