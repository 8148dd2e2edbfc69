// strata._C._remat_checkpoint: the C++ activation checkpoint (autograd/remat/checkpoint.h, Note
// [Checkpointed segments]) behind strata.utils.checkpoint (python/strata/utils/checkpoint.py).

#include <pybind11/stl.h>

#include <memory>
#include <optional>
#include <utility>

#include "autograd/remat/checkpoint.h"
#include "autograd/tape/stream.h"
#include "bindings.h"

namespace strata::python {

namespace {

// The Python function of a segment. The checkpoint's node keeps it for the re-run and may drop it
// during backward without the GIL (as in Note [Python saved-tensor hooks]).
struct PyFunction {
  py::object fn;
  explicit PyFunction(py::object f) : fn(std::move(f)) {}
  PyFunction(const PyFunction&) = delete;
  PyFunction& operator=(const PyFunction&) = delete;
  ~PyFunction() {
    if (!Py_IsInitialized()) {
      fn.release();
      return;
    }
    py::gil_scoped_acquire gil;
    fn = py::object();
  }
};

// Calls fn(*inputs); it must return a list or tuple of Tensors.
autograd::TensorList call(const PyFunction& f, const autograd::TensorList& inputs) {
  py::gil_scoped_acquire gil;
  py::tuple args(inputs.size());
  for (std::size_t i = 0; i < inputs.size(); ++i) args[i] = py::cast(inputs[i]);
  py::object out = f.fn(*args);
  if (!py::isinstance<py::list>(out) && !py::isinstance<py::tuple>(out))
    throw BindingTypeError(msg("_remat_checkpoint: the segment function must return a list or tuple of Tensors, got ",
                               Py_TYPE(out.ptr())->tp_name));
  autograd::TensorList result;
  std::size_t i = 0;
  for (py::handle item : py::reinterpret_borrow<py::sequence>(out)) {
    if (!py::isinstance<Tensor>(item))
      throw BindingTypeError(msg("_remat_checkpoint: output ", i, " of the segment function is ",
                                 Py_TYPE(item.ptr())->tp_name, ", expected a Tensor"));
    result.push_back(item.cast<Tensor>());
    ++i;
  }
  return result;
}

// The context manager behind strata.autograd.graph.stream_tape (autograd/tape/stream.h, Note [Tape
// streaming]): one streamed forward per context; report() after backward.
class PyTapeStream {
 public:
  PyTapeStream(py::handle budget, py::handle distance, py::handle min_bytes, py::handle stream_parameters) {
    constexpr const char* kOp = "stream_tape";
    const int64_t b = int_from_py(budget, kOp, "tape_budget_bytes");
    if (b <= 0) throw BindingValueError(msg(kOp, ": tape_budget_bytes must be > 0 (the fast-tier bytes of one layer), got ", b));
    const int64_t d = int_from_py(distance, kOp, "prefetch_distance");
    if (d < 0 || d > 1 << 20)
      throw BindingValueError(msg(kOp, ": prefetch_distance must be >= 0 (layers prefetched ahead in backward), got ", d));
    const int64_t mb = int_from_py(min_bytes, kOp, "min_stream_bytes");
    if (mb < 0) throw BindingValueError(msg(kOp, ": min_stream_bytes must be >= 0, got ", mb));
    if (!py::isinstance<py::bool_>(stream_parameters))
      throw BindingTypeError(msg(kOp, ": stream_parameters must be a bool, got ", Py_TYPE(stream_parameters.ptr())->tp_name));
    options_.tape_budget_bytes = static_cast<std::size_t>(b);
    options_.prefetch_distance = static_cast<int>(d);
    options_.min_stream_bytes = static_cast<std::size_t>(mb);
    options_.stream_parameters = stream_parameters.cast<bool>();
  }
  void enter() {
    if (scope_) throw Error("stream_tape: this context is already entered");
    if (streamer_) throw Error("stream_tape: a context streams one forward; make a new one for the next step");
    scope_.emplace(options_);
    streamer_ = scope_->streamer();
  }
  void exit() { scope_.reset(); }
  const tape::TapeStreamer& streamer(const char* what) const {
    if (!streamer_) throw Error(msg("stream_tape.", what, "(): the context was never entered"));
    return *streamer_;
  }
  tape::StreamReport report() const {
    const tape::TapeStreamer& s = streamer("report");
    py::gil_scoped_release release;  // waits for the moves queued so far
    return s.report();
  }
  const tape::StreamOptions& options() const { return options_; }

 private:
  tape::StreamOptions options_;
  std::optional<tape::StreamingScope> scope_;
  std::shared_ptr<tape::TapeStreamer> streamer_;
};

py::dict report_dict(const tape::StreamReport& r) {
  py::dict d;
  d["layers"] = r.layers;
  d["regions"] = r.regions;
  d["values_streamed"] = r.values_streamed;
  d["values_kept"] = r.values_kept;
  d["parameters_kept"] = r.parameters_kept;
  d["values_shared"] = r.values_shared;
  d["region_moves"] = r.region_moves;
  d["values_adopted"] = r.values_adopted;
  d["adopted_unspilled"] = r.adopted_unspilled;
  d["tape_bytes"] = r.tape_bytes;
  d["bytes_to_slow"] = r.bytes_to_slow;
  d["bytes_to_fast"] = r.bytes_to_fast;
  d["spills"] = r.spills;
  d["prefetches"] = r.prefetches;
  d["demand_fetches"] = r.demand_fetches;
  d["tiles_freed"] = r.tiles_freed;
  d["stall_s"] = r.stall_s;
  d["forward_stall_s"] = r.forward_stall_s;
  d["transfer_to_slow_s"] = r.transfer_to_slow_s;
  d["transfer_to_fast_s"] = r.transfer_to_fast_s;
  d["transfer_s"] = r.transfer_s();
  d["overlap"] = r.overlap();
  d["slow_tier"] = r.slow_tier;
  py::list layers;
  for (const auto& l : r.layer_info) {
    py::dict e;
    e["regions"] = l.regions;
    e["values"] = l.values;
    e["used_bytes"] = l.used_bytes;
    e["tile_bytes"] = l.tile_bytes;
    e["spilled"] = l.spilled;
    e["prefetched"] = l.prefetched;
    layers.append(e);
  }
  d["layer_info"] = layers;
  return d;
}

}  // namespace

void init_remat(py::module_& m) {
  py::class_<PyTapeStream>(m, "_TapeStream")
      .def(py::init<py::handle, py::handle, py::handle, py::handle>(), py::arg("tape_budget_bytes"),
           py::arg("prefetch_distance"), py::arg("min_stream_bytes"), py::arg("stream_parameters"))
      .def("_enter", &PyTapeStream::enter)
      .def("_exit", &PyTapeStream::exit)
      .def("report", [](const PyTapeStream& s) { return report_dict(s.report()); })
      .def("explain", [](const PyTapeStream& s) { return s.report().explain(); })
      .def_property_readonly("tape_budget_bytes", [](const PyTapeStream& s) { return s.options().tape_budget_bytes; })
      .def_property_readonly("prefetch_distance", [](const PyTapeStream& s) { return s.options().prefetch_distance; });

  m.def(
      "_remat_checkpoint",
      [](py::object fn, const py::sequence& inputs, bool preserve_rng_state) {
        if (!PyCallable_Check(fn.ptr()))
          throw BindingTypeError(msg("_remat_checkpoint: function must be callable, got ", Py_TYPE(fn.ptr())->tp_name));
        autograd::TensorList in;
        std::size_t i = 0;
        for (py::handle item : inputs) {
          if (!py::isinstance<Tensor>(item))
            throw BindingTypeError(
                msg("_remat_checkpoint: input ", i, " is ", Py_TYPE(item.ptr())->tp_name, ", expected a Tensor"));
          in.push_back(item.cast<Tensor>());
          ++i;
        }
        auto f = std::make_shared<PyFunction>(std::move(fn));
        remat::SegmentFn segment = [f](const autograd::TensorList& xs) { return call(*f, xs); };
        autograd::TensorList out;
        {
          py::gil_scoped_release release;
          out = remat::checkpoint(std::move(segment), in, preserve_rng_state);
        }
        return out;
      },
      py::arg("function"), py::arg("inputs"), py::arg("preserve_rng_state") = true,
      "Runs function(*inputs) -> [Tensor] keeping none of the values saved inside it for backward; they "
      "are recomputed by re-running it during backward (autograd/remat/checkpoint.h).");
}

}  // namespace strata::python
