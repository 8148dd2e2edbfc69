// strata._C._remat_checkpoint: the C++ activation checkpoint (autograd/remat/checkpoint.h, Note
// [Checkpointed segments]) behind strata.utils.checkpoint (python/strata/utils/checkpoint.py), and
// strata._C.remat: the chain policies (autograd/remat/chain.h) behind strata.remat and
// strata.nn.RematSequential (bound in nn_bindings.cpp).

#include <pybind11/stl.h>

#include <memory>
#include <optional>
#include <utility>

#include "autograd/remat/chain.h"
#include "autograd/remat/checkpoint.h"
#include "autograd/remat/plan_exec.h"
#include "autograd/tape/stream.h"
#include "bindings.h"

namespace strata::python {

namespace {

// The Python function of a segment. The checkpoint's node keeps it for the re-run and may drop it
// during backward without the GIL: a PyRef (bindings.h).
using PyFunction = PyRef;

// Calls fn(*inputs); it must return a list or tuple of Tensors.
autograd::TensorList call(const PyFunction& f, const autograd::TensorList& inputs) {
  py::gil_scoped_acquire gil;
  py::tuple args(inputs.size());
  for (std::size_t i = 0; i < inputs.size(); ++i) args[i] = py::cast(inputs[i]);
  py::object out = f.obj(*args);
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
    if (b <= 0)
      throw BindingValueError(msg(kOp, ": tape_budget_bytes must be > 0 (the fast-tier bytes of one layer), got ", b));
    const int64_t d = int_from_py(distance, kOp, "prefetch_distance");
    if (d < 0 || d > 1 << 20)
      throw BindingValueError(
          msg(kOp, ": prefetch_distance must be >= 0 (layers prefetched ahead in backward), got ", d));
    const int64_t mb = int_from_py(min_bytes, kOp, "min_stream_bytes");
    if (mb < 0) throw BindingValueError(msg(kOp, ": min_stream_bytes must be >= 0, got ", mb));
    if (!py::isinstance<py::bool_>(stream_parameters))
      throw BindingTypeError(
          msg(kOp, ": stream_parameters must be a bool, got ", Py_TYPE(stream_parameters.ptr())->tp_name));
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

const char* kind_name(remat::RematPolicy k) {
  switch (k) {
    case remat::RematPolicy::StoreAll: return "store_all";
    case remat::RematPolicy::RecomputeAll: return "recompute_all";
    case remat::RematPolicy::EveryK: return "every_k";
    case remat::RematPolicy::SqrtN: return "sqrt_n";
    case remat::RematPolicy::Revolve: return "revolve";
    case remat::RematPolicy::Auto: return "auto";
  }
  return "?";
}

// A positive int argument (bools and non-integers are TypeErrors, < 1 a ValueError).
int64_t positive_arg(py::handle v, const char* fn, const char* what) {
  const int64_t n = int_from_py(v, fn, what);
  if (n < 1) throw BindingValueError(msg(fn, ": ", what, " must be >= 1, got ", n));
  return n;
}

void bind_policies(py::module_& m) {
  py::module_ rm = m.def_submodule("remat", "Chain policies for strata.nn.RematSequential (see strata.remat).");
  py::class_<remat::ChainPolicy>(rm, "Policy",
                                 "How a RematSequential treats the values its children save for backward "
                                 "(autograd/remat/chain.h); make one with strata.remat's functions.")
      .def_property_readonly("kind", [](const remat::ChainPolicy& p) { return kind_name(p.kind); })
      .def_property_readonly("k",
                             [](const remat::ChainPolicy& p) -> py::object {
                               return p.kind == remat::RematPolicy::EveryK ? py::object(py::int_(p.k))
                                                                           : py::object(py::none());
                             })
      .def_property_readonly("snapshots",
                             [](const remat::ChainPolicy& p) -> py::object {
                               return p.kind == remat::RematPolicy::Revolve ? py::object(py::int_(p.snapshots))
                                                                            : py::object(py::none());
                             })
      .def_property_readonly("budget_bytes",
                             [](const remat::ChainPolicy& p) -> py::object {
                               return p.auto_chain ? py::object(py::int_(p.auto_chain->budget_bytes()))
                                                   : py::object(py::none());
                             })
      .def_property_readonly("granularity",
                             [](const remat::ChainPolicy& p) -> py::object {
                               if (p.kind != remat::RematPolicy::Auto) return py::none();
                               return py::str(p.granularity == remat::AutoGranularity::Op ? "op" : "step");
                             })
      .def_property_readonly("preserve_rng_state", [](const remat::ChainPolicy& p) { return p.preserve_rng_state; })
      .def("__repr__", [](const remat::ChainPolicy& p) { return "strata.remat." + p.to_string(); });

  auto with_rng = [](remat::ChainPolicy p, bool preserve) {
    p.preserve_rng_state = preserve;
    return p;
  };
  rm.def("store_all", [] { return remat::ChainPolicy::store_all(); }, "Keep every saved value (the plain forward).");
  rm.def(
      "recompute_all", [with_rng](bool preserve) { return with_rng(remat::ChainPolicy::recompute_all(), preserve); },
      py::kw_only(), py::arg("preserve_rng_state") = true,
      "Checkpoint every child: every saved value is recomputed in backward.");
  rm.def(
      "every_k",
      [with_rng](py::handle k, bool preserve) {
        return with_rng(remat::ChainPolicy::every_k(positive_arg(k, "strata.remat.every_k", "k")), preserve);
      },
      py::arg("k"), py::kw_only(), py::arg("preserve_rng_state") = true,
      "Checkpointed segments of k consecutive children (the last may be shorter).");
  rm.def(
      "sqrt_n", [with_rng](bool preserve) { return with_rng(remat::ChainPolicy::sqrt_n(), preserve); }, py::kw_only(),
      py::arg("preserve_rng_state") = true, "every_k with k = ceil(sqrt(number of children)).");
  rm.def(
      "revolve",
      [with_rng](py::handle snapshots, bool preserve) {
        return with_rng(remat::ChainPolicy::revolve(positive_arg(snapshots, "strata.remat.revolve", "snapshots")),
                        preserve);
      },
      py::arg("snapshots"), py::kw_only(), py::arg("preserve_rng_state") = true,
      "Binomial checkpointing (Revolve) with `snapshots` stored states, the input included.");
  rm.def(
      "auto",
      [](py::handle budget, const std::string& granularity, py::handle slow_placement) {
        const int64_t b = positive_arg(budget, "strata.remat.auto", "budget_bytes");
        if (granularity != "op" && granularity != "step")
          throw BindingValueError(
              msg("strata.remat.auto: granularity must be 'op' or 'step', got ", quote_field(granularity)));
        if (!py::isinstance<py::bool_>(slow_placement))
          throw BindingTypeError(
              msg("strata.remat.auto: slow_placement must be a bool, got ", Py_TYPE(slow_placement.ptr())->tp_name));
        remat::PlannerOptions options;
        options.slow_placement = slow_placement.cast<bool>();
        const auto g = granularity == "op" ? remat::AutoGranularity::Op : remat::AutoGranularity::Step;
        return remat::ChainPolicy::auto_budget(static_cast<std::size_t>(b), g, options);
      },
      py::arg("budget_bytes"), py::kw_only(), py::arg("granularity") = "op", py::arg("slow_placement") = true,
      "Keep, stream to the slow tier, recompute, or place in the slow tier (its kernels then use it "
      "there; slow_placement=False plans without) each saved value, planned (ILP) to minimize the "
      "predicted step time under `budget_bytes` of fast-tier activation peak.");
}

void init_remat(py::module_& m) {
  bind_policies(m);
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
