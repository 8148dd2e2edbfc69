// strata._C.sim: the simulated TapeFlow accelerator backend (ops/sim/backend_sim.h) — record a
// training step as element loops (SimStep), run it for the CPU backend's loss and gradients plus
// the simulator's report, and select the `sim` backend for a block of code (`with sim.backend():`).

#include <pybind11/stl.h>

#include <memory>
#include <string>

#include "bindings.h"
#include "ops/backend.h"
#include "ops/sim/backend_sim.h"

namespace strata::python {
namespace {

Activation activation_from_py(const py::object& a) {
  if (a.is_none()) return Activation::None;
  const std::string s = py::str(a);
  if (s == "relu") return Activation::ReLU;
  if (s == "tanh") return Activation::Tanh;
  if (s == "none") return Activation::None;
  throw BindingValueError(msg("sim.SimStep.linear(): activation must be None, 'relu' or 'tanh', got ", quote_field(s)));
}

py::dict phase_dict(const sim::PhaseReport& p) {
  py::dict d;
  d["cycles"] = p.cycles;
  d["instrs"] = p.instrs;
  d["fu_ops"] = p.fu_ops;
  d["layers"] = p.layers;
  d["dram_read_bytes"] = p.dram_read_bytes;
  d["dram_write_bytes"] = p.dram_write_bytes;
  d["cache_hit_rate"] = p.cache.hit_rate();
  d["spad_loads"] = p.spad_loads;
  d["spad_stores"] = p.spad_stores;
  d["streams"] = p.streams;
  d["stream_bytes"] = p.stream_bytes;
  return d;
}

py::dict machine_dict(const sim::MachineReport& r) {
  py::dict d;
  d["system"] = r.system;
  d["cycles"] = r.cycles();
  d["fwd"] = phase_dict(r.fwd);
  d["rev"] = phase_dict(r.rev);
  d["dram_bytes"] = r.dram_bytes();
  d["cache_hit_rate"] = r.cache.hit_rate();
  d["tape_cache_accesses"] = r.cache.cls[1].accesses();
  d["energy_pj"] = r.energy.total_pj();
  d["cache_energy_pj"] = r.energy.cache_pj;
  d["spad_energy_pj"] = r.energy.spad_pj;
  d["sram_bytes"] = r.sram_bytes;
  d["spad_bytes_used"] = r.spad_bytes_used;
  return d;
}

py::dict step_report_dict(const sim::SimStepReport& r) {
  py::dict d;
  d["loss"] = r.loss;
  d["ops"] = r.ops;
  d["instrs"] = r.instrs;
  d["tape_bytes"] = r.tape_bytes;
  d["enzyme"] = machine_dict(r.enzyme);
  d["tapeflow"] = machine_dict(r.tapeflow);
  return d;
}

// `with strata.sim.session() as s:` — a sim::SimSession for the block (Note [Sim session]): the
// model's ops are recorded while the block runs, s.backward(loss) runs the step and fills the
// parameters' .grad. The session ends (restoring the backend) when the block exits.
class SessionScope {
 public:
  SessionScope(std::string enzyme_system, std::string tapeflow_system, std::string name) : name_(std::move(name)) {
    options_.enzyme_system = std::move(enzyme_system);
    options_.tapeflow_system = std::move(tapeflow_system);
  }
  void enter() {
    if (session_) throw BindingValueError("sim.session(): this session was already entered; make a new one per step");
    session_ = std::make_unique<sim::SimSession>(options_, name_);
  }
  void exit() {
    if (session_) session_->end();
  }
  py::dict backward(const Tensor& loss) {
    if (!session_)
      throw BindingValueError("sim.session(): backward() needs the session's `with` block to have started");
    return step_report_dict(session_->backward(loss));
  }
  bool active() const { return session_ && session_->active(); }
  std::vector<Tensor> parameters() const { return session_ ? session_->parameters() : std::vector<Tensor>{}; }

 private:
  sim::SimStepOptions options_;
  std::string name_;
  std::unique_ptr<sim::SimSession> session_;
};

// `with strata._C.sim.backend():` selects the sim backend on this thread for the block.
class BackendScope {
 public:
  void enter() {
    if (guard_) throw BindingValueError("sim.backend(): this scope is already active");
    guard_ = std::make_unique<BackendGuard>(sim::sim_backend());
  }
  void exit() { guard_.reset(); }

 private:
  std::unique_ptr<BackendGuard> guard_;
};

}  // namespace

void init_sim(py::module_& parent) {
  py::module_ m = parent.def_submodule(
      "sim", "The simulated TapeFlow accelerator backend: training steps lowered to element loops (ops/sim).");

  py::class_<sim::SimTensor>(m, "SimTensor", "A tensor of a recorded SimStep (an array of the trace).")
      .def_property_readonly("shape", [](const sim::SimTensor& t) { return py::tuple(py::cast(t.shape)); })
      .def("numel", &sim::SimTensor::numel)
      .def("__repr__", [](const sim::SimTensor& t) {
        return "SimTensor(shape=" + std::string(py::str(py::tuple(py::cast(t.shape)))) + ")";
      });

  py::class_<sim::SimStepReport>(m, "SimStepReport", "Loss, gradients and simulator reports of one SimStep.")
      .def_readonly("loss", &sim::SimStepReport::loss)
      .def_readonly("grads", &sim::SimStepReport::grads)
      .def_readonly("ops", &sim::SimStepReport::ops)
      .def_readonly("instrs", &sim::SimStepReport::instrs)
      .def_readonly("tape_bytes", &sim::SimStepReport::tape_bytes)
      .def_property_readonly("enzyme", [](const sim::SimStepReport& r) { return machine_dict(r.enzyme); })
      .def_property_readonly("tapeflow", [](const sim::SimStepReport& r) { return machine_dict(r.tapeflow); });

  // Kernels of SimStep run with the GIL held: they record into the thread's tracer.
  py::class_<sim::SimStep>(m, "SimStep",
                           "Records one training step's ops as element loops; run() returns a SimStepReport.")
      .def(py::init<std::string>(), py::arg("name") = "step")
      .def("param", &sim::SimStep::param, py::arg("name"), py::arg("value"),
           "A differentiable input; its gradient is in run().grads (in call order).")
      .def("data", &sim::SimStep::data, py::arg("name"), py::arg("value"), "An input without gradient.")
      .def(
          "linear",
          [](sim::SimStep& s, const sim::SimTensor& x, const sim::SimTensor& w, const sim::SimTensor* b,
             const py::object& activation) { return s.linear(x, w, b, activation_from_py(activation)); },
          py::arg("x"), py::arg("weight"), py::arg("bias") = nullptr, py::arg("activation") = py::none())
      .def("matmul", &sim::SimStep::matmul, py::arg("a"), py::arg("b"))
      .def("add", &sim::SimStep::add, py::arg("a"), py::arg("b"))
      .def("relu", &sim::SimStep::relu, py::arg("x"))
      .def(
          "conv2d",
          [](sim::SimStep& s, const sim::SimTensor& x, const sim::SimTensor& w, const sim::SimTensor* b, int64_t stride,
             int64_t padding) { return s.conv2d(x, w, b, stride, padding); },
          py::arg("x"), py::arg("weight"), py::arg("bias") = nullptr, py::arg("stride") = 1, py::arg("padding") = 0)
      .def("max_pool2d", &sim::SimStep::max_pool2d, py::arg("x"), py::arg("kernel_size"), py::arg("stride") = 0)
      .def("avg_pool2d", &sim::SimStep::avg_pool2d, py::arg("x"), py::arg("kernel_size"), py::arg("stride") = 0)
      .def("flatten", &sim::SimStep::flatten, py::arg("x"), py::arg("start_dim") = 1)
      .def("cross_entropy", &sim::SimStep::cross_entropy, py::arg("logits"), py::arg("target"))
      .def(
          "run",
          [](sim::SimStep& s, const std::string& enzyme_system, const std::string& tapeflow_system) {
            sim::SimStepOptions o;
            o.enzyme_system = enzyme_system;
            o.tapeflow_system = tapeflow_system;
            return s.run(o);
          },
          py::arg("enzyme_system") = "Enzyme_32k", py::arg("tapeflow_system") = "Tflow_32k");

  py::class_<BackendScope>(m, "BackendScope")
      .def(
          "__enter__",
          [](BackendScope& s) {
            s.enter();
            return &s;
          },
          py::return_value_policy::reference)
      .def("__exit__", [](BackendScope& s, const py::args&) {
        s.exit();
        return false;
      });
  m.def("backend", [] { return BackendScope(); }, "Context manager selecting the `sim` backend on this thread.");

  // The GIL stays held: the session records into this thread's tracer.
  py::class_<SessionScope>(m, "Session",
                           "Records the ops a model runs in a `with` block on the simulated accelerator "
                           "(sim::SimSession); backward(loss) returns the report and fills the parameters' .grad.")
      .def(
          "__enter__",
          [](SessionScope& s) {
            s.enter();
            return &s;
          },
          py::return_value_policy::reference)
      .def("__exit__",
           [](SessionScope& s, const py::args&) {
             s.exit();
             return false;
           })
      .def("backward", &SessionScope::backward, py::arg("loss"),
           "Runs the recorded step for `loss` (the output of the recorded cross_entropy): accumulates the "
           "simulated gradients into each parameter's .grad and returns the report (loss, ops, instrs, "
           "tape_bytes, enzyme, tapeflow).")
      .def_property_readonly("active", &SessionScope::active)
      .def_property_readonly("parameters", &SessionScope::parameters,
                             "The parameters the session found (requires-grad leaves), in first-use order.");
  m.def(
      "session",
      [](const std::string& enzyme_system, const std::string& tapeflow_system, const std::string& name) {
        return SessionScope(enzyme_system, tapeflow_system, name);
      },
      py::arg("enzyme_system") = "Enzyme_32k", py::arg("tapeflow_system") = "Tflow_32k", py::arg("name") = "session",
      "Context manager running a model's ops on the simulated accelerator: `with strata.sim.session() as s: "
      "loss = F.cross_entropy(model(x), y); report = s.backward(loss)`.");
  m.def(
      "supports",
      [](const std::string& op) {
        for (const OpInfo& info : kOps)
          if (info.name == op) return sim::sim_backend().supports(info.kind);
        throw BindingValueError(msg("sim.supports(): unknown op '", op, "'"));
      },
      py::arg("op"), "Whether the sim backend can lower op `op` (an ops/op_list.h name).");
}

}  // namespace strata::python
