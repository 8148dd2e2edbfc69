// strata._C._memory: the process-wide tiered memory from Python (configuration, the LRU policy's
// user-facing operations, statistics, the occupancy timeline). python/strata/memory.py is the
// public face (`strata.memory`); this file keeps to what needs C++.

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include "bindings.h"
#include "core/allocator.h"
#include "core/config.h"
#include "memory/copy_engine.h"
#include "memory/memory_stats.h"
#include "memory/tiered_memory.h"

namespace strata::python {
namespace {

using memory::MemoryStats;
using memory::Tier;
using memory::TieredConfig;
using memory::TieredMemory;

// ---- configuration ------------------------------------------------------------------------------

/// Runs `parse` (a core/config.h parser), reporting its strata::Error as a ValueError of configure().
template <typename Parse>
auto configure_value(Parse parse) -> decltype(parse()) {
  try {
    return parse();
  } catch (const Error& e) {
    throw BindingValueError(msg("strata.memory.configure(): ", e.what()));
  }
}

/// A byte count given as a non-negative int or a string like "512M" (parse_bytes).
std::size_t bytes_from_py(py::handle obj, const char* what) {
  if (py::isinstance<py::str>(obj)) {
    const std::string text = obj.cast<std::string>();
    return configure_value([&] { return parse_bytes(text, what); });
  }
  if (PyBool_Check(obj.ptr()) || !PyIndex_Check(obj.ptr()))
    throw BindingTypeError(msg("strata.memory.configure(): ", what, " must be an int or a string like '512M', not ",
                               Py_TYPE(obj.ptr())->tp_name));
  py::int_ value = py::reinterpret_steal<py::int_>(PyNumber_Index(obj.ptr()));
  if (!value) throw py::error_already_set();
  int overflow = 0;
  const long long v = PyLong_AsLongLongAndOverflow(value.ptr(), &overflow);
  if (v == -1 && PyErr_Occurred()) throw py::error_already_set();
  if (overflow < 0 || (overflow == 0 && v < 0))
    throw BindingValueError(msg("strata.memory.configure(): ", what, " must be a non-negative byte count, got ",
                                py::str(obj).cast<std::string>()));
  if (overflow > 0)
    throw BindingValueError(
        msg("strata.memory.configure(): ", what, " = ", py::str(obj).cast<std::string>(), " is too large"));
  return static_cast<std::size_t>(v);
}

/// `obj` as a double, or TypeError unless it is an int or a float (not a bool).
double number_from_py(py::handle obj, const char* what) {
  if (PyBool_Check(obj.ptr()) || !(PyFloat_Check(obj.ptr()) || PyLong_Check(obj.ptr())))
    throw BindingTypeError(
        msg("strata.memory.configure(): ", what, " must be a number, not ", Py_TYPE(obj.ptr())->tp_name));
  return obj.cast<double>();
}

double positive_number(py::handle obj, const char* what) {
  const double v = number_from_py(obj, what);
  if (!(v > 0 && std::isfinite(v)))
    throw BindingValueError(
        msg("strata.memory.configure(): ", what, " must be a positive number, got ", py::str(obj).cast<std::string>()));
  return v;
}

// model: a string in the spellings of STRATA_SLOW_MODEL (core/config.h parse_slow_tier_model) or
// {"read": R, "write": W, "latency": L}.
SlowTierModelSpec model_from_py(py::handle model) {
  if (py::isinstance<py::str>(model))
    return configure_value([&] { return parse_slow_tier_model(model.cast<std::string>(), "model"); });
  if (!py::isinstance<py::dict>(model))
    throw BindingTypeError(msg("strata.memory.configure(): model must be a string or a dict, not ",
                               Py_TYPE(model.ptr())->tp_name,
                               " (expected 'auto', 'off', 'default', "
                               "'read=GB/s,write=GB/s,latency=ns' or a dict "
                               "{'read': GB/s, 'write': GB/s, 'latency': ns})"));
  py::dict d = model.cast<py::dict>();
  for (auto item : d) {
    const std::string key = py::str(item.first).cast<std::string>();
    if (key != "read" && key != "write" && key != "latency")
      throw BindingValueError(
          msg("strata.memory.configure(): unknown model key '", key, "' (expected 'read', 'write' and 'latency')"));
  }
  for (const char* key : {"read", "write", "latency"})
    if (!d.contains(key))
      throw BindingValueError(
          msg("strata.memory.configure(): the model dict lacks '", key, "' (expected 'read', 'write' and 'latency')"));
  const double r = number_from_py(d["read"], "model['read']");
  const double w = number_from_py(d["write"], "model['write']");
  const double l = number_from_py(d["latency"], "model['latency']");
  return configure_value([&] { return SlowTierModelSpec::custom(r, w, l, "model"); });
}

py::dict config_dict(const TieredConfig& c, bool active) {
  py::dict d;
  d["active"] = active;
  d["allocator"] = std::string(default_allocator().name());
  d["policy"] = "lru";
  d["fast_bytes"] = c.fast_bytes;
  d["slow_bytes"] = c.slow_bytes;
  d["slow_dir"] = c.slow_dir;
  d["backend"] = std::string(pm_backend_name(c.backend));
  d["numa_node"] = c.numa_node >= 0 ? py::object(py::int_(c.numa_node)) : py::object(py::none());
  d["model"] = std::string(c.model.mode_name());
  if (c.model.mode == SlowTierModelSpec::Mode::Custom) {
    py::dict m;
    m["read"] = c.model.read_gbps;
    m["write"] = c.model.write_gbps;
    m["latency"] = c.model.latency_ns;
    d["model_params"] = m;
  } else {
    d["model_params"] = py::none();
  }
  d["dram_gbps"] = c.dram_gbps > 0 ? py::object(py::float_(c.dram_gbps)) : py::object(py::none());
  d["description"] = c.describe();
  return d;
}

void configure(py::object fast_bytes, py::object slow_bytes, py::object slow_dir, py::object backend,
               py::object numa_node, py::object model, py::object dram_gbps) {
  if (memory::tiered_memory_created())
    throw Error(
        msg("strata.memory.configure(): the tiered memory already exists (created by the first tensor or "
            "an earlier configure()/stats call) with ",
            memory::tiered_memory().config().describe(),
            "; call configure() before the first tensor is allocated, or set STRATA_FAST_BYTES and the "
            "other STRATA_* variables before starting Python"));
  // What configure() leaves unset comes from the environment.
  TieredConfig c = configure_value([] { return TieredConfig::from_env(); });
  if (!slow_dir.is_none()) {
    if (!py::isinstance<py::str>(slow_dir) && !py::hasattr(slow_dir, "__fspath__"))
      throw BindingTypeError(msg("strata.memory.configure(): slow_dir must be a path (str or os.PathLike), not ",
                                 Py_TYPE(slow_dir.ptr())->tp_name));
    c.slow_dir = py::str(py::module_::import("os").attr("fspath")(slow_dir)).cast<std::string>();
    std::error_code ec;
    if (!std::filesystem::is_directory(c.slow_dir, ec))
      throw BindingValueError(
          msg("strata.memory.configure(): slow_dir '", c.slow_dir, "' is not an existing directory"));
  }
  if (!fast_bytes.is_none()) {
    c.fast_bytes = bytes_from_py(fast_bytes, "fast_bytes");
    c.fast_initial = 0;  // an explicit budget is mapped at once, as STRATA_FAST_BYTES's is
  }
  if (!slow_bytes.is_none()) c.slow_bytes = bytes_from_py(slow_bytes, "slow_bytes");
  if (!backend.is_none()) {
    if (!py::isinstance<py::str>(backend))
      throw BindingTypeError(
          msg("strata.memory.configure(): backend must be a string (auto, memkind, mmap or numa), "
              "not ",
              Py_TYPE(backend.ptr())->tp_name));
    c.backend = configure_value([&] { return parse_pm_backend(backend.cast<std::string>(), "backend"); });
  }
  if (!numa_node.is_none()) {
    const int64_t n = int_from_py(numa_node, "strata.memory.configure", "numa_node");
    if (n < 0 || n >= 4096)
      throw BindingValueError(msg("strata.memory.configure(): numa_node must be a node number in [0, 4096), got ", n));
    c.numa_node = static_cast<int>(n);
  }
  if (!model.is_none()) c.model = model_from_py(model);
  if (!dram_gbps.is_none()) c.dram_gbps = positive_number(dram_gbps, "dram_gbps");
  try {
    c.validate();
  } catch (const Error& e) {
    throw BindingValueError(msg("strata.memory.configure(): ", e.what()));
  }
  // Heaps that cannot be created (no memkind, an absent NUMA node, a mapping the OS refuses) are
  // configuration errors too; "already created" (a race with another thread) stays a StrataError.
  try {
    py::gil_scoped_release nogil;
    memory::configure_tiered_memory(c);
  } catch (const Error& e) {
    if (memory::tiered_memory_created()) throw;
    throw BindingValueError(msg("strata.memory.configure(): ", e.what()));
  }
}

// ---- tensors ------------------------------------------------------------------------------------

/// The tiered object behind `obj` (a Tensor), or TypeError / ValueError naming `op`.
Tensor tiered_tensor(py::handle obj, const char* op) {
  Tensor t = tensor_arg(obj, op, "tensor");
  const std::string_view where = memory::where(t.storage());
  if (where != "fast" && where != "slow")
    throw BindingValueError(msg(op, "(): the tensor's storage is not in the tiered memory (it lives in plain DRAM: a ",
                                "NumPy buffer, or STRATA_MEMORY=dram)"));
  return t;
}

/// An asynchronous migration (prefetch or evict) queued on the mover thread.
struct PyMoveHandle {
  memory::MoveHandle handle;
  std::shared_ptr<std::atomic<bool>> ok;
  std::string what;

  bool wait() const {
    {
      py::gil_scoped_release nogil;
      handle.wait();
    }
    return ok->load();
  }
  bool done() const { return handle.done(); }
  double duration() const {
    py::gil_scoped_release nogil;
    return std::chrono::duration<double>(handle.duration()).count();
  }
  double queued() const {
    py::gil_scoped_release nogil;
    return std::chrono::duration<double>(handle.queued()).count();
  }
};

PyMoveHandle submit_move(py::handle obj, bool to_fast, bool force) {
  const char* op = to_fast ? "strata.memory.prefetch" : "strata.memory.evict";
  Tensor t = tiered_tensor(obj, op);
  TieredMemory& mem = memory::tiered_memory();
  memory::Object* o = mem.object_of(t.storage().allocation());
  if (o == nullptr)
    throw BindingValueError(msg(op, "(): the tensor's storage was not allocated by the process-wide tiered memory"));
  auto ok = std::make_shared<std::atomic<bool>>(false);
  // The job holds the storage, so the object outlives its pending migration.
  memory::MoveHandle h = mem.mover().submit([&mem, o, to_fast, force, ok, keep = t.storage()] {
    ok->store(to_fast ? mem.policy().prefetch(o, force) : mem.policy().evict(o));
  });
  return PyMoveHandle{std::move(h), std::move(ok), to_fast ? "prefetch" : "evict"};
}

// ---- statistics ---------------------------------------------------------------------------------

MemoryStats& stats() { return memory::tiered_memory().manager().stats(); }

Tier tier_from_py(py::handle obj, const char* op) {
  if (!py::isinstance<py::str>(obj))
    throw BindingTypeError(msg(op, "(): tier must be 'fast' or 'slow', not ", Py_TYPE(obj.ptr())->tp_name));
  const std::string s = obj.cast<std::string>();
  if (s == "fast") return Tier::Fast;
  if (s == "slow") return Tier::Slow;
  throw BindingValueError(msg(op, "(): unknown tier ", quote_field(s), " (expected 'fast' or 'slow')"));
}

py::dict counted(const memory::CountedBytes& c) {
  py::dict d;
  d["count"] = c.count;
  d["bytes"] = c.bytes;
  return d;
}

py::dict heap_dict(const memory::TierCounters& t, const memory::Heap& heap) {
  py::dict d;
  d["current_bytes"] = t.current_bytes;
  d["peak_bytes"] = t.peak_bytes;
  d["allocations"] = t.allocations;
  d["frees"] = t.frees;
  d["capacity_bytes"] = heap.capacity();
  d["mapped_bytes"] = heap.mapped();
  d["name"] = heap.name();
  return d;
}

py::dict stats_dict() {
  TieredMemory& mem = memory::tiered_memory();
  const memory::MemoryStatsSnapshot s = mem.manager().stats().snapshot();
  py::dict d;
  d["moved_to_slow"] = counted(s.moved_to_slow);
  d["moved_to_fast"] = counted(s.moved_to_fast);
  d["copies_elided"] = counted(s.copies_elided);
  d["writebacks_avoided"] = counted(s.writebacks_avoided);
  d["direct_slow_read_bytes"] = s.direct_slow_read_bytes;
  d["direct_slow_write_bytes"] = s.direct_slow_write_bytes;
  py::dict heaps;
  heaps["fast"] = heap_dict(s.fast, mem.manager().fast());
  heaps["slow"] = heap_dict(s.slow, mem.manager().slow());
  d["heaps"] = heaps;
  d["live_objects"] = mem.manager().live_objects();
  d["slow_tier_mode"] = mem.manager().stats().slow_tier_mode();
  return d;
}

std::string path_from_py(py::handle obj, const char* op) {
  if (!py::isinstance<py::str>(obj) && !py::hasattr(obj, "__fspath__"))
    throw BindingTypeError(msg(op, "(): path must be a str or os.PathLike, not ", Py_TYPE(obj.ptr())->tp_name));
  py::object p = py::module_::import("os").attr("fspath")(obj);
  if (!py::isinstance<py::str>(p))
    throw BindingTypeError(msg(op, "(): path must be a text path, not ", Py_TYPE(p.ptr())->tp_name));
  return p.cast<std::string>();
}

}  // namespace

void init_memory(py::module_& parent) {
  py::module_ m = parent.def_submodule("_memory", "The process-wide tiered memory (see strata.memory).");

  m.def("is_initialized", [] { return memory::tiered_memory_created(); });
  m.def("configure", &configure, py::arg("fast_bytes") = py::none(), py::arg("slow_bytes") = py::none(),
        py::arg("slow_dir") = py::none(), py::arg("backend") = py::none(), py::arg("numa_node") = py::none(),
        py::arg("model") = py::none(), py::arg("dram_gbps") = py::none());
  m.def("config", [] {
    if (memory::tiered_memory_created()) return config_dict(memory::tiered_memory().config(), true);
    try {
      return config_dict(TieredConfig::from_env(), false);
    } catch (const Error& e) {
      throw BindingValueError(msg("strata.memory.config(): ", e.what()));
    }
  });
  m.def("slow_tier_mode", [] {
    TieredMemory& mem = memory::tiered_memory();
    py::gil_scoped_release nogil;  // the default model measures the DRAM bandwidth on first use
    return mem.slow_tier_mode();
  });

  py::class_<PyMoveHandle>(m, "MoveHandle", "A migration queued on the mover thread (prefetch or evict).")
      .def("wait", &PyMoveHandle::wait,
           "Blocks until the migration finished; True when it moved the tensor (or it already was there), "
           "False when the tensor was busy or does not fit.")
      .def("done", &PyMoveHandle::done, "True once the migration finished (never blocks).")
      .def_property_readonly("duration", &PyMoveHandle::duration, "Seconds the job ran (waits for it).")
      .def_property_readonly("queued", &PyMoveHandle::queued, "Seconds the job was queued (waits for it).")
      .def("__repr__", [](const PyMoveHandle& h) {
        return msg("<strata.memory.MoveHandle ", h.what, h.handle.done() ? " done>" : " pending>");
      });

  m.def(
      "where",
      [](py::handle t) {
        Tensor tensor = tensor_arg(t, "strata.memory.where", "tensor");
        return std::string(memory::where(tensor.storage()));
      },
      py::arg("tensor"));
  m.def(
      "in_fast",
      [](py::handle t) {
        Tensor tensor = tiered_tensor(t, "strata.memory.in_fast");
        return memory::tiered_memory().in_fast(tensor.storage());
      },
      py::arg("tensor"));
  m.def(
      "prefetch", [](py::handle t, bool force) { return submit_move(t, true, force); }, py::arg("tensor"),
      py::arg("force") = true);
  m.def("evict", [](py::handle t) { return submit_move(t, false, false); }, py::arg("tensor"));
  m.def(
      "softevict",
      [](py::handle t) {
        Tensor tensor = tiered_tensor(t, "strata.memory.softevict");
        TieredMemory& mem = memory::tiered_memory();
        mem.policy().softevict(mem.object_of(tensor.storage().allocation()));
      },
      py::arg("tensor"));
  m.def("synchronize", [] {
    TieredMemory& mem = memory::tiered_memory();
    py::gil_scoped_release nogil;
    mem.mover().wait_all();
  });

  m.def("stats", &stats_dict);
  m.def("stats_json", [] { return stats().to_json(); });
  m.def("memory_summary", [] { return stats().describe(); });
  m.def("reset_peak_stats", [] { stats().reset_peaks(); });
  m.def("reset_accumulated_memory_stats", [] { stats().reset(); });
  m.def(
      "memory_allocated",
      [](py::handle tier) {
        return stats().snapshot().heap(tier_from_py(tier, "strata.memory.memory_allocated")).current_bytes;
      },
      py::arg("tier") = "fast");
  m.def(
      "max_memory_allocated",
      [](py::handle tier) {
        return stats().snapshot().heap(tier_from_py(tier, "strata.memory.max_memory_allocated")).peak_bytes;
      },
      py::arg("tier") = "fast");
  m.def(
      "capacity",
      [](py::handle tier) {
        TieredMemory& mem = memory::tiered_memory();
        return mem.manager().device(tier_from_py(tier, "strata.memory.capacity")).capacity();
      },
      py::arg("tier") = "fast");

  m.def(
      "start_timeline",
      [](bool clear) {
        TieredMemory& mem = memory::tiered_memory();
        memory::OccupancyTimeline& tl = mem.manager().stats().timeline();
        tl.enable(false);
        if (clear) tl.clear();
        tl.set_capacity(mem.manager().fast().capacity(), mem.manager().slow().capacity());
        tl.enable(true);
        mem.manager().stats().sample();  // the starting level
      },
      py::arg("clear") = true);
  m.def("stop_timeline", [] { stats().timeline().enable(false); });
  m.def("timeline_enabled", [] { return memory::tiered_memory_created() && stats().timeline().enabled(); });
  m.def(
      "mark",
      [](py::handle label) {
        if (!py::isinstance<py::str>(label))
          throw BindingTypeError(msg("strata.memory.mark(): label must be a str, not ", Py_TYPE(label.ptr())->tp_name));
        const std::string s = label.cast<std::string>();
        if (s.empty()) throw BindingValueError("strata.memory.mark(): label must not be empty");
        stats().sample(s);  // no-op unless a timeline is recording
      },
      py::arg("label"));
  m.def("timeline_json", [] { return stats().timeline().to_json(); });
  m.def(
      "save_timeline_json",
      [](py::handle path) {
        const std::string p = path_from_py(path, "strata.memory.save_timeline_json");
        stats().timeline().save_json(p);
      },
      py::arg("path"));
}

}  // namespace strata::python
