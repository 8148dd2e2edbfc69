#include "ops/sim/backend_sim.h"

#include <algorithm>
#include <optional>
#include <sstream>
#include <thread>
#include <utility>

#include "autograd/accumulate.h"
#include "core/error.h"
#include "core/factories.h"
#include "ops/softmax_loss.h"
#include "sim/replay.h"
#include "sim/systems.h"
#include "sim/tapeflow.h"

namespace strata::sim {

namespace {

// Note [Sim backend lowering]: the ops SimStep lowers.
class SimBackend final : public Backend {
 public:
  std::string_view name() const override { return "sim"; }
  bool supports(OpKind op) const override {
    switch (op) {
      case OpKind::linear:
      case OpKind::matmul:
      case OpKind::add:
      case OpKind::relu:
      case OpKind::tanh:
      case OpKind::conv2d:
      case OpKind::max_pool2d:
      case OpKind::avg_pool2d:
      case OpKind::reshape:
      case OpKind::cross_entropy: return true;
      default: return false;
    }
  }
  std::string implementation(OpKind op) const override {
    return supports(op) ? "element loops traced by sim::Active on the TapeFlow machine model (ops/sim/backend_sim.h)"
                        : "not supported";
  }
};

std::string shape_str(const std::vector<int64_t>& s) {
  std::ostringstream o;
  o << "[";
  for (size_t i = 0; i < s.size(); ++i) o << (i ? ", " : "") << s[i];
  o << "]";
  return o.str();
}

std::vector<double> to_f64(const Tensor& t, const std::string& what) {
  STRATA_CHECK(t.defined(), what, ": undefined tensor");
  STRATA_CHECK(t.dtype() == DType::f32 || t.dtype() == DType::f64, what,
               ": expected a floating tensor (f32 or f64), got ", t.dtype());
  const Tensor c = t.contiguous().to(DType::f64);
  const double* p = c.data<double>();
  return std::vector<double>(p, p + c.numel());
}

}  // namespace

Backend& sim_backend() {
  static SimBackend backend;
  static const bool registered = [] {
    register_backend(backend);
    return true;
  }();
  (void)registered;
  return backend;
}

int64_t SimTensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

struct SimStep::Impl {
  explicit Impl(std::string n) : name(std::move(n)), tracer(std::make_unique<Tracer>(name)) {}
  std::string name;
  std::unique_ptr<Tracer> tracer;  // released by run(), so the next SimStep may record
  struct Param {
    std::string name;
    std::vector<int64_t> shape;
    DType dtype;
  };
  std::vector<Param> params;
  std::vector<std::string> names;
  uint64_t ops = 0;
  bool has_loss = false, ran = false;

  std::string op_name(const char* op) { return std::string(op) + std::to_string(ops++); }
  std::string where(const char* op) const { return "sim::SimStep(" + name + ")::" + op; }
  void check_open(const char* op) {
    STRATA_CHECK(!ran, where(op), ": the step has already run; record a new SimStep");
    STRATA_CHECK(&Tracer::current() == tracer.get(), where(op),
                 ": another sim::Tracer is recording on this thread; finish it first");
    STRATA_CHECK(!has_loss, where(op), ": the step's loss is already set (cross_entropy must be the last op)");
  }
  void check_name(const std::string& n, const char* op) {
    STRATA_CHECK(!n.empty(), where(op), ": empty array name");
    for (const std::string& k : names) STRATA_CHECK(k != n, where(op), ": an input named '", n, "' already exists");
    names.push_back(n);
  }
  SimTensor temp(const std::string& n, std::vector<int64_t> shape) {
    int64_t numel = 1;
    for (int64_t d : shape) numel *= d;
    return SimTensor{tracer->temp(n, static_cast<size_t>(numel)), std::move(shape)};
  }
};

SimStep::SimStep(std::string name) : impl_(std::make_unique<Impl>(std::move(name))) {}
SimStep::~SimStep() = default;

SimTensor SimStep::param(const std::string& name, const Tensor& value) {
  impl_->check_open("param");
  impl_->check_name(name, "param");
  std::vector<double> v = to_f64(value, impl_->where("param") + " '" + name + "'");
  std::vector<int64_t> shape = std::vector<int64_t>(value.sizes().begin(), value.sizes().end());
  impl_->params.push_back({name, shape, value.dtype()});
  return SimTensor{impl_->tracer->input(name, std::move(v)), std::move(shape)};
}

SimTensor SimStep::data(const std::string& name, const Tensor& value) {
  impl_->check_open("data");
  impl_->check_name(name, "data");
  std::vector<double> v = to_f64(value, impl_->where("data") + " '" + name + "'");
  return SimTensor{impl_->tracer->constant(name, std::move(v)),
                   std::vector<int64_t>(value.sizes().begin(), value.sizes().end())};
}

SimTensor SimStep::linear(const SimTensor& x, const SimTensor& w, const SimTensor* bias, Activation act) {
  Impl& s = *impl_;
  s.check_open("linear");
  const std::string at = s.where("linear");
  STRATA_CHECK(x.shape.size() == 2, at, ": input must be 2-D [N, in], got ", shape_str(x.shape));
  STRATA_CHECK(w.shape.size() == 2, at, ": weight must be 2-D [out, in], got ", shape_str(w.shape));
  STRATA_CHECK(x.shape[1] == w.shape[1], at, ": input ", shape_str(x.shape), " and weight ", shape_str(w.shape),
               " disagree on in_features (expected weight [out, ", x.shape[1], "])");
  const int64_t n = x.shape[0], in = x.shape[1], out = w.shape[0];
  if (bias != nullptr)
    STRATA_CHECK(bias->shape.size() == 1 && bias->shape[0] == out, at, ": bias must be [", out, "], got ",
                 shape_str(bias->shape));
  STRATA_CHECK(act == Activation::None || act == Activation::ReLU || act == Activation::Tanh, at,
               ": activation must be None, ReLU or Tanh on the sim backend");
  const std::string op = s.op_name("linear");
  SimTensor y = s.temp(op, {n, out});
  for_range(op + ".out", static_cast<size_t>(n * out), [&](size_t e) {
    const size_t r = e / static_cast<size_t>(out), o = e % static_cast<size_t>(out);
    Active acc = bias != nullptr ? bias->array.load(o) : Active(0.0);
    for_range(op + ".k", static_cast<size_t>(in), [&](size_t k) {
      acc += x.array.load(r * static_cast<size_t>(in) + k) * w.array.load(o * static_cast<size_t>(in) + k);
    });
    if (act == Activation::ReLU) acc = max(acc, Active(0.0));
    if (act == Activation::Tanh) acc = sim::tanh(acc);
    y.array.store(e, acc);
  });
  return y;
}

SimTensor SimStep::matmul(const SimTensor& a, const SimTensor& b) {
  Impl& s = *impl_;
  s.check_open("matmul");
  const std::string at = s.where("matmul");
  STRATA_CHECK(a.shape.size() == 2 && b.shape.size() == 2, at, ": expected two matrices, got ", shape_str(a.shape),
               " and ", shape_str(b.shape));
  STRATA_CHECK(a.shape[1] == b.shape[0], at, ": inner dimensions differ: ", shape_str(a.shape), " x ",
               shape_str(b.shape));
  const size_t n = static_cast<size_t>(a.shape[0]), k = static_cast<size_t>(a.shape[1]),
               m = static_cast<size_t>(b.shape[1]);
  const std::string op = s.op_name("matmul");
  SimTensor y = s.temp(op, {a.shape[0], b.shape[1]});
  for_range(op + ".out", n * m, [&](size_t e) {
    const size_t i = e / m, j = e % m;
    Active acc = 0.0;
    for_range(op + ".k", k, [&](size_t p) { acc += a.array.load(i * k + p) * b.array.load(p * m + j); });
    y.array.store(e, acc);
  });
  return y;
}

SimTensor SimStep::add(const SimTensor& a, const SimTensor& b) {
  Impl& s = *impl_;
  s.check_open("add");
  STRATA_CHECK(a.shape == b.shape, s.where("add"), ": shapes must be equal on the sim backend, got ",
               shape_str(a.shape), " and ", shape_str(b.shape));
  const std::string op = s.op_name("add");
  SimTensor y = s.temp(op, a.shape);
  for_range(op + ".out", static_cast<size_t>(a.numel()),
            [&](size_t e) { y.array.store(e, a.array.load(e) + b.array.load(e)); });
  return y;
}

SimTensor SimStep::relu(const SimTensor& x) {
  Impl& s = *impl_;
  s.check_open("relu");
  const std::string op = s.op_name("relu");
  SimTensor y = s.temp(op, x.shape);
  for_range(op + ".out", static_cast<size_t>(x.numel()),
            [&](size_t e) { y.array.store(e, max(x.array.load(e), Active(0.0))); });
  return y;
}

SimTensor SimStep::tanh(const SimTensor& x) {
  Impl& s = *impl_;
  s.check_open("tanh");
  const std::string op = s.op_name("tanh");
  SimTensor y = s.temp(op, x.shape);
  for_range(op + ".out", static_cast<size_t>(x.numel()),
            [&](size_t e) { y.array.store(e, sim::tanh(x.array.load(e))); });
  return y;
}

SimTensor SimStep::conv2d(const SimTensor& x, const SimTensor& w, const SimTensor* bias, int64_t stride,
                          int64_t padding) {
  Impl& s = *impl_;
  s.check_open("conv2d");
  const std::string at = s.where("conv2d");
  STRATA_CHECK(x.shape.size() == 4, at, ": input must be 4-D [N, C, H, W], got ", shape_str(x.shape));
  STRATA_CHECK(w.shape.size() == 4, at, ": weight must be 4-D [O, C, KH, KW], got ", shape_str(w.shape));
  STRATA_CHECK(x.shape[1] == w.shape[1], at, ": input ", shape_str(x.shape), " has ", x.shape[1],
               " channels but weight ", shape_str(w.shape), " expects ", w.shape[1], " (groups 1 only)");
  STRATA_CHECK(stride >= 1 && padding >= 0, at, ": stride must be positive and padding non-negative, got stride ",
               stride, ", padding ", padding);
  const int64_t N = x.shape[0], C = x.shape[1], H = x.shape[2], W = x.shape[3];
  const int64_t O = w.shape[0], KH = w.shape[2], KW = w.shape[3];
  const int64_t OH = (H + 2 * padding - KH) / stride + 1, OW = (W + 2 * padding - KW) / stride + 1;
  STRATA_CHECK(H + 2 * padding >= KH && W + 2 * padding >= KW && OH > 0 && OW > 0, at, ": kernel ", KH, "x", KW,
               " does not fit input ", H, "x", W, " with padding ", padding);
  if (bias != nullptr)
    STRATA_CHECK(bias->shape.size() == 1 && bias->shape[0] == O, at, ": bias must be [", O, "], got ",
                 shape_str(bias->shape));
  const std::string op = s.op_name("conv2d");
  SimTensor y = s.temp(op, {N, O, OH, OW});
  for_range(op + ".out", static_cast<size_t>(N * O * OH * OW), [&](size_t e) {
    const int64_t ow = static_cast<int64_t>(e) % OW, oh = (static_cast<int64_t>(e) / OW) % OH,
                  o = (static_cast<int64_t>(e) / (OW * OH)) % O, n = static_cast<int64_t>(e) / (OW * OH * O);
    Active acc = bias != nullptr ? bias->array.load(static_cast<size_t>(o)) : Active(0.0);
    Loop l(op + ".k");
    for (int64_t c = 0; c < C; ++c)
      for (int64_t kh = 0; kh < KH; ++kh)
        for (int64_t kw = 0; kw < KW; ++kw) {
          const int64_t ih = oh * stride - padding + kh, iw = ow * stride - padding + kw;
          if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;  // zero padding
          l.next();
          acc += x.array.load(static_cast<size_t>(((n * C + c) * H + ih) * W + iw)) *
                 w.array.load(static_cast<size_t>(((o * C + c) * KH + kh) * KW + kw));
        }
    y.array.store(e, acc);
  });
  return y;
}

SimTensor SimStep::max_pool2d(const SimTensor& x, int64_t kernel, int64_t stride) {
  Impl& s = *impl_;
  s.check_open("max_pool2d");
  const std::string at = s.where("max_pool2d");
  if (stride == 0) stride = kernel;
  STRATA_CHECK(x.shape.size() == 4, at, ": input must be 4-D [N, C, H, W], got ", shape_str(x.shape));
  STRATA_CHECK(kernel >= 1 && stride >= 1, at, ": kernel and stride must be positive, got kernel ", kernel, ", stride ",
               stride);
  const int64_t N = x.shape[0], C = x.shape[1], H = x.shape[2], W = x.shape[3];
  STRATA_CHECK(H >= kernel && W >= kernel, at, ": kernel ", kernel, " larger than input ", H, "x", W);
  const int64_t OH = (H - kernel) / stride + 1, OW = (W - kernel) / stride + 1;
  const std::string op = s.op_name("max_pool2d");
  SimTensor y = s.temp(op, {N, C, OH, OW});
  for_range(op + ".out", static_cast<size_t>(N * C * OH * OW), [&](size_t e) {
    const int64_t ow = static_cast<int64_t>(e) % OW, oh = (static_cast<int64_t>(e) / OW) % OH,
                  nc = static_cast<int64_t>(e) / (OW * OH);
    const size_t base = static_cast<size_t>(nc * H * W);
    Active m = x.array.load(base + static_cast<size_t>(oh * stride * W + ow * stride));
    Loop l(op + ".win");
    for (int64_t kh = 0; kh < kernel; ++kh)
      for (int64_t kw = 0; kw < kernel; ++kw) {
        if (kh == 0 && kw == 0) continue;
        l.next();
        // max(a, b) keeps a unless a < b: the first maximum of the window, as the CPU op.
        m = max(m, x.array.load(base + static_cast<size_t>((oh * stride + kh) * W + ow * stride + kw)));
      }
    y.array.store(e, m);
  });
  return y;
}

SimTensor SimStep::avg_pool2d(const SimTensor& x, int64_t kernel, int64_t stride) {
  Impl& s = *impl_;
  s.check_open("avg_pool2d");
  const std::string at = s.where("avg_pool2d");
  if (stride == 0) stride = kernel;
  STRATA_CHECK(x.shape.size() == 4, at, ": input must be 4-D [N, C, H, W], got ", shape_str(x.shape));
  STRATA_CHECK(kernel >= 1 && stride >= 1, at, ": kernel and stride must be positive, got kernel ", kernel, ", stride ",
               stride);
  const int64_t N = x.shape[0], C = x.shape[1], H = x.shape[2], W = x.shape[3];
  STRATA_CHECK(H >= kernel && W >= kernel, at, ": kernel ", kernel, " larger than input ", H, "x", W);
  const int64_t OH = (H - kernel) / stride + 1, OW = (W - kernel) / stride + 1;
  const double inv = 1.0 / static_cast<double>(kernel * kernel);
  const std::string op = s.op_name("avg_pool2d");
  SimTensor y = s.temp(op, {N, C, OH, OW});
  for_range(op + ".out", static_cast<size_t>(N * C * OH * OW), [&](size_t e) {
    const int64_t ow = static_cast<int64_t>(e) % OW, oh = (static_cast<int64_t>(e) / OW) % OH,
                  nc = static_cast<int64_t>(e) / (OW * OH);
    const size_t base = static_cast<size_t>(nc * H * W);
    Active acc = 0.0;
    for_range(op + ".win", static_cast<size_t>(kernel * kernel), [&](size_t k) {
      const int64_t kh = static_cast<int64_t>(k) / kernel, kw = static_cast<int64_t>(k) % kernel;
      acc += x.array.load(base + static_cast<size_t>((oh * stride + kh) * W + ow * stride + kw));
    });
    y.array.store(e, acc * inv);
  });
  return y;
}

SimTensor SimStep::flatten(const SimTensor& x, int64_t start_dim) {
  Impl& s = *impl_;
  s.check_open("flatten");
  const int64_t d = static_cast<int64_t>(x.shape.size());
  STRATA_CHECK(start_dim >= 0 && start_dim < std::max<int64_t>(d, 1), s.where("flatten"), ": start_dim ", start_dim,
               " out of range for shape ", shape_str(x.shape));
  std::vector<int64_t> shape(x.shape.begin(), x.shape.begin() + start_dim);
  int64_t rest = 1;
  for (int64_t i = start_dim; i < d; ++i) rest *= x.shape[static_cast<size_t>(i)];
  shape.push_back(rest);
  ++s.ops;
  return SimTensor{x.array, std::move(shape)};
}

SimTensor SimStep::reshape(const SimTensor& x, std::vector<int64_t> shape) {
  Impl& s = *impl_;
  s.check_open("reshape");
  int64_t numel = 1;
  for (int64_t d : shape) {
    STRATA_CHECK(d >= 0, s.where("reshape"), ": invalid shape ", shape_str(shape));
    numel *= d;
  }
  STRATA_CHECK(numel == x.numel(), s.where("reshape"), ": shape ", shape_str(shape), " does not hold the ", x.numel(),
               " elements of ", shape_str(x.shape));
  ++s.ops;
  return SimTensor{x.array, std::move(shape)};
}

void SimStep::cross_entropy(const SimTensor& logits, const Tensor& target) {
  Impl& s = *impl_;
  s.check_open("cross_entropy");
  const std::string at = s.where("cross_entropy");
  STRATA_CHECK(logits.shape.size() == 2, at, ": logits must be 2-D [N, C], got ", shape_str(logits.shape));
  STRATA_CHECK(target.defined() && (target.dtype() == DType::i64 || target.dtype() == DType::i32), at,
               ": target must be class indices (i64 or i32)");
  const int64_t N = logits.shape[0], C = logits.shape[1];
  STRATA_CHECK(target.dim() == 1 && target.size(0) == N, at, ": target must be [", N, "] for logits ",
               shape_str(logits.shape), ", got ", target.describe());
  const Tensor t = target.contiguous().to(DType::i64);
  const int64_t* tp = t.data<int64_t>();
  for (int64_t i = 0; i < N; ++i)
    STRATA_CHECK(tp[i] >= 0 && tp[i] < C, at, ": target[", i, "] = ", tp[i], " is not a class index in [0, ", C, ")");
  const std::string op = s.op_name("cross_entropy");
  Array loss = s.tracer->output("loss", 1);
  Active total = 0.0;
  const size_t c = static_cast<size_t>(C);
  for_range(op + ".row", static_cast<size_t>(N), [&](size_t r) {
    Active m = logits.array.load(r * c);
    for_range(op + ".max", c, [&](size_t k) { m = max(m, logits.array.load(r * c + k)); });
    Active se = 0.0;
    for_range(op + ".sum", c, [&](size_t k) { se += exp(logits.array.load(r * c + k) - m); });
    total += log(se) + m - logits.array.load(r * c + static_cast<size_t>(tp[r]));
  });
  loss.store(0, total * (1.0 / static_cast<double>(N)));
  s.has_loss = true;
}

SimStepReport SimStep::run(const SimStepOptions& options) {
  Impl& s = *impl_;
  STRATA_CHECK(!s.ran, s.where("run"), ": the step has already run; record a new SimStep");
  STRATA_CHECK(s.has_loss, s.where("run"), ": no loss; end the step with cross_entropy(logits, target)");
  const System enzyme = system_by_name(options.enzyme_system);
  const System tflow = system_by_name(options.tapeflow_system);
  STRATA_CHECK(enzyme.mode == TraceMode::Enzyme, s.where("run"), ": enzyme_system '", options.enzyme_system,
               "' is not an Enzyme_<size> system");
  STRATA_CHECK(tflow.mode == TraceMode::TapeFlow, s.where("run"), ": tapeflow_system '", options.tapeflow_system,
               "' is not a Tflow_<size> system");
  s.ran = true;
  const Program prog = s.tracer->finish();
  s.tracer.reset();
  SimStepReport r;
  r.ops = s.ops;
  r.instrs = prog.trace.instrs.size();
  r.tape_bytes = prog.trace.tape_bytes;
  const ReplayResult rep = replay(prog);
  STRATA_ASSERT(rep.invalid_reads == 0, s.where("run"), ": replay read ", rep.invalid_reads, " unwritten words");
  r.loss = rep.value(prog, "loss")[0];
  for (const Impl::Param& p : s.params) {
    const std::vector<double>& g = rep.grad(prog, p.name);
    r.grads.push_back(tensor(g, p.shape).to(p.dtype));
  }
  r.enzyme = simulate(prog.trace, enzyme.machine);
  r.tapeflow = simulate(tapeflow(prog, tflow.machine.scratchpad.size_bytes).trace, tflow.machine);
  return r;
}

// ---- SimSession (Note [Sim session]) ------------------------------------------------------------

namespace {

std::vector<int64_t> dims_of(const Tensor& t) { return std::vector<int64_t>(t.sizes().begin(), t.sizes().end()); }

/// The identity the session maps tensors by: the same elements of the same storage in the same
/// layout, and the same autograd record (both none, or one shared by the two handles). A raw view
/// or detach() of a tensor that has an autograd record is therefore a different tensor — as on the
/// CPU backend, where such a view is cut from the graph.
bool same_tensor(const Tensor& a, const Tensor& b) {
  return a.storage().is_same(b.storage()) && a.offset() == b.offset() && a.dtype() == b.dtype() &&
         a.sizes() == b.sizes() && a.strides() == b.strides() && a.autograd_meta_if_any() == b.autograd_meta_if_any();
}

/// The (h, w) pair of a 1- or 2-value attribute; `fallback` when empty.
std::pair<int64_t, int64_t> hw(IntArrayRef v, std::pair<int64_t, int64_t> fallback) {
  if (v.size() == 0) return fallback;
  return {v[0], v.size() > 1 ? v[1] : v[0]};
}

constexpr std::pair<int64_t, int64_t> kOnes{1, 1}, kZeros{0, 0};

std::string pair_str(std::pair<int64_t, int64_t> p) {
  return "[" + std::to_string(p.first) + ", " + std::to_string(p.second) + "]";
}

}  // namespace

struct SimSession::Impl final : ops::detail::OpRecorder {
  enum class Role { Param, Data, Output };
  struct Entry {
    Tensor tensor;  // kept alive while recording: its storage identity must not be reused meanwhile
    SimTensor sim;
    uint64_t version;
    Role role;
  };

  Impl(SimStepOptions o, std::string n) : options(std::move(o)), name(std::move(n)) {}

  SimStepOptions options;
  std::string name;
  std::unique_ptr<SimStep> step;
  std::optional<BackendGuard> guard;
  ops::detail::OpRecorder* previous = nullptr;
  std::thread::id thread;
  bool active = false, ran = false;
  std::string failed;  // the first recording error (the trace lacks that op)
  std::vector<Entry> entries;
  std::vector<Tensor> params;
  Tensor loss;
  uint64_t data_count = 0, op_count = 0;

  /// Drops the tensors the session holds (and with them the CPU autograd graph the ops recorded)
  /// once nothing more can be recorded or run.
  void release() {
    entries.clear();
    entries.shrink_to_fit();
    loss = Tensor();
  }

  std::string where(const char* what) const { return "sim::SimSession(" + name + ")::" + what; }

  static const char* role_name(Role r) {
    return r == Role::Param ? "parameter" : r == Role::Data ? "data input" : "op output";
  }

  void check_recording(std::string_view op) const {
    STRATA_CHECK(!ran, op, ": the 'sim' session '", name,
                 "' already ran backward(); ops after it are not recorded (start a new session)");
    STRATA_CHECK(!loss.defined(), op, ": the 'sim' session '", name,
                 "' already recorded its loss (cross_entropy must be the last op of the step)");
  }

  /// The SimTensor of an op input (Note [Sim session]: a seen tensor, else a param or data).
  SimTensor input(std::string_view op, const Tensor& t) {
    for (const Entry& e : entries) {
      if (!same_tensor(e.tensor, t)) continue;
      STRATA_CHECK(t.version() == e.version, op, ": input ", t.describe(), " (a ", role_name(e.role),
                   " of the 'sim' session) was modified in place after the session first used it");
      return e.sim;
    }
    const bool param = t.requires_grad() && t.is_leaf();
    SimTensor st;
    if (param) {
      st = step->param("param" + std::to_string(params.size()), t);
      params.push_back(t);
    } else {
      st = step->data("data" + std::to_string(data_count++), t);
    }
    entries.push_back({t, st, t.version(), param ? Role::Param : Role::Data});
    return st;
  }

  void output(std::string_view op, const Tensor& out, SimTensor st) {
    STRATA_ASSERT(st.shape == dims_of(out), op, ": the sim lowering's shape differs from the CPU output ",
                  out.describe());
    std::erase_if(entries, [&](const Entry& e) { return same_tensor(e.tensor, out); });
    entries.push_back({out, std::move(st), out.version(), Role::Output});
    ++op_count;
  }

  /// Runs one hook: checks the session still records, and marks the session failed when the
  /// lowering throws (the trace then lacks the op, so backward() must refuse).
  template <typename Fn>
  void record(std::string_view op, Fn&& fn) {
    check_recording(op);
    try {
      fn();
    } catch (const Error& e) {
      if (failed.empty()) failed = e.what();
      throw;
    }
  }

  // ---- ops::detail::OpRecorder --------------------------------------------------------------------

  void linear(const Tensor& x, const Tensor& w, const Tensor& b, Activation act, const Tensor& out) override {
    record("linear", [&] {
      const SimTensor sx = input("linear", x), sw = input("linear", w);
      std::optional<SimTensor> sb;
      if (b.defined()) sb = input("linear", b);
      output("linear", out, step->linear(sx, sw, sb ? &*sb : nullptr, act));
    });
  }

  void matmul(const Tensor& a, const Tensor& b, const Tensor& out) override {
    record("matmul", [&] {
      const SimTensor sa = input("matmul", a), sb = input("matmul", b);
      output("matmul", out, step->matmul(sa, sb));
    });
  }

  void add(const Tensor& a, const Tensor& b, double alpha, const Tensor& out) override {
    record("add", [&] {
      STRATA_CHECK(alpha == 1.0, "add: the 'sim' backend lowers a + b only (alpha 1), got alpha ", alpha);
      const SimTensor sa = input("add", a), sb = input("add", b);
      output("add", out, step->add(sa, sb));
    });
  }

  void add_scalar(const Tensor& a, double, const Tensor&) override {
    record("add", [&] {
      STRATA_FAIL("add: the 'sim' backend lowers tensor + tensor only, not tensor + scalar (input ", a.describe(), ")");
    });
  }

  void relu(const Tensor& x, const Tensor& out) override {
    record("relu", [&] { output("relu", out, step->relu(input("relu", x))); });
  }

  void tanh(const Tensor& x, const Tensor& out) override {
    record("tanh", [&] { output("tanh", out, step->tanh(input("tanh", x))); });
  }

  void conv2d(const Tensor& x, const Tensor& w, const Tensor& b, IntArrayRef stride, IntArrayRef padding,
              IntArrayRef dilation, int64_t groups, const Tensor& out) override {
    record("conv2d", [&] {
      const auto st = hw(stride, {1, 1}), pad = hw(padding, {0, 0}), dil = hw(dilation, {1, 1});
      STRATA_CHECK(st.first == st.second && pad.first == pad.second && dil == kOnes && groups == 1,
                   "conv2d: the 'sim' backend lowers equal strides and paddings in both dims, dilation 1 and groups 1; "
                   "got stride ",
                   pair_str(st), ", padding ", pair_str(pad), ", dilation ", pair_str(dil), ", groups ", groups);
      const SimTensor sx = input("conv2d", x), sw = input("conv2d", w);
      std::optional<SimTensor> sb;
      if (b.defined()) sb = input("conv2d", b);
      output("conv2d", out, step->conv2d(sx, sw, sb ? &*sb : nullptr, st.first, pad.first));
    });
  }

  /// Kernel and stride of a pooling call the lowering supports (square, no padding or dilation,
  /// floor-mode output).
  std::pair<int64_t, int64_t> pool_geometry(const char* op, const Tensor& x, IntArrayRef kernel_size,
                                            IntArrayRef stride, IntArrayRef padding, std::pair<int64_t, int64_t> dil,
                                            bool ceil_mode, const Tensor& out) {
    const auto k = hw(kernel_size, {1, 1});
    const auto st = hw(stride, k), pad = hw(padding, {0, 0});
    STRATA_CHECK(k.first == k.second && st.first == st.second && pad == kZeros && dil == kOnes, op,
                 ": the 'sim' backend lowers square kernels and strides without padding or dilation; got kernel ",
                 pair_str(k), ", stride ", pair_str(st), ", padding ", pair_str(pad), ", dilation ", pair_str(dil));
    if (ceil_mode && x.dim() == 4 && out.dim() == 4) {
      const int64_t oh = (x.size(2) - k.first) / st.first + 1, ow = (x.size(3) - k.first) / st.first + 1;
      STRATA_CHECK(out.size(2) == oh && out.size(3) == ow, op,
                   ": the 'sim' backend lowers floor-mode pooling; ceil_mode adds partial windows here (output ",
                   out.describe(), ")");
    }
    return {k.first, st.first};
  }

  void max_pool2d(const Tensor& x, IntArrayRef kernel_size, IntArrayRef stride, IntArrayRef padding,
                  IntArrayRef dilation, bool ceil_mode, const Tensor& out) override {
    record("max_pool2d", [&] {
      const auto [k, st] =
          pool_geometry("max_pool2d", x, kernel_size, stride, padding, hw(dilation, {1, 1}), ceil_mode, out);
      output("max_pool2d", out, step->max_pool2d(input("max_pool2d", x), k, st));
    });
  }

  void avg_pool2d(const Tensor& x, IntArrayRef kernel_size, IntArrayRef stride, IntArrayRef padding, bool ceil_mode,
                  bool, const Tensor& out) override {
    record("avg_pool2d", [&] {
      const auto [k, st] = pool_geometry("avg_pool2d", x, kernel_size, stride, padding, {1, 1}, ceil_mode, out);
      output("avg_pool2d", out, step->avg_pool2d(input("avg_pool2d", x), k, st));
    });
  }

  void reshape(const Tensor& x, const Tensor& out) override {
    record("reshape", [&] { output("reshape", out, step->reshape(input("reshape", x), dims_of(out))); });
  }

  void cross_entropy(const Tensor& logits, const Tensor& target, const Tensor& weight, Reduction reduction,
                     int64_t ignore_index, double label_smoothing, const Tensor& out) override {
    record("cross_entropy", [&] {
      STRATA_CHECK(!weight.defined() && reduction == Reduction::Mean && label_smoothing == 0.0,
                   "cross_entropy: the 'sim' "
                   "backend lowers the mean over class-index targets without class weights or label smoothing");
      const Tensor t = target.contiguous().to(DType::i64);
      for (int64_t i = 0; i < t.numel(); ++i)
        STRATA_CHECK(t.data<int64_t>()[i] != ignore_index,
                     "cross_entropy: the 'sim' backend does not lower "
                     "ignore_index; target[",
                     i, "] = ", ignore_index, " is the ignore_index");
      step->cross_entropy(input("cross_entropy", logits), target);
      loss = out;
      ++op_count;
    });
  }
};

SimSession::SimSession(SimStepOptions options, std::string name)
    : impl_(std::make_unique<Impl>(std::move(options), std::move(name))) {
  Impl& s = *impl_;
  STRATA_CHECK(ops::detail::op_recorder() == nullptr, s.where("SimSession"),
               ": another sim session (an op recorder) is active on this thread; sessions do not nest");
  // Validates the systems now rather than at backward() (the same checks as SimStep::run).
  STRATA_CHECK(system_by_name(s.options.enzyme_system).mode == TraceMode::Enzyme, s.where("SimSession"),
               ": enzyme_system '", s.options.enzyme_system, "' is not an Enzyme_<size> system");
  STRATA_CHECK(system_by_name(s.options.tapeflow_system).mode == TraceMode::TapeFlow, s.where("SimSession"),
               ": tapeflow_system '", s.options.tapeflow_system, "' is not a Tflow_<size> system");
  s.step = std::make_unique<SimStep>(s.name);  // throws if a SimStep is recording on this thread
  s.guard.emplace(sim_backend());
  s.previous = ops::detail::set_op_recorder(&s);
  s.thread = std::this_thread::get_id();
  s.active = true;
}

SimSession::~SimSession() {
  if (impl_->active && impl_->thread == std::this_thread::get_id()) end();
}

void SimSession::end() {
  Impl& s = *impl_;
  if (!s.active) return;
  STRATA_CHECK(s.thread == std::this_thread::get_id(), s.where("end"),
               ": a session must end on the thread that started it");
  STRATA_CHECK(ops::detail::op_recorder() == &s, s.where("end"),
               ": another op recorder was installed after this session and is still active");
  ops::detail::set_op_recorder(s.previous);
  s.guard.reset();
  s.active = false;
  if (!s.ran) s.step.reset();  // releases the thread's tracer: the next session may record
  s.release();
}

bool SimSession::active() const { return impl_->active; }

const std::vector<Tensor>& SimSession::parameters() const { return impl_->params; }

uint64_t SimSession::ops() const { return impl_->op_count; }

SimStepReport SimSession::backward(const Tensor& loss) {
  Impl& s = *impl_;
  const std::string at = s.where("backward");
  STRATA_CHECK(!s.ran, at, ": backward() already ran for this session; record the next step in a new session");
  STRATA_CHECK(s.step != nullptr, at, ": the session ended before backward(); call backward() inside the session");
  STRATA_CHECK(s.failed.empty(), at, ": an op failed to record in this session, so its trace is incomplete (", s.failed,
               ")");
  STRATA_CHECK(s.loss.defined(), at, ": no loss was recorded; end the forward with cross_entropy(logits, target)");
  STRATA_CHECK(loss.defined(), at, ": the loss is undefined");
  STRATA_CHECK(same_tensor(loss, s.loss), at, ": ", loss.describe(),
               " is not the loss this session recorded (the output of its cross_entropy, ", s.loss.describe(), ")");
  s.ran = true;
  s.release();
  SimStepReport r = s.step->run(s.options);
  for (size_t i = 0; i < s.params.size(); ++i) {
    Tensor p = s.params[i];  // a handle: set_grad reaches the same tensor
    const Tensor g = r.grads[i].contiguous();
    const Tensor current = p.grad();
    if (!current.defined()) {
      p.set_grad(g.clone());  // its own storage: report.grads[i] stays what the simulation returned
    } else {
      autograd::detail::accumulate_into(current, g);
    }
  }
  return r;
}

}  // namespace strata::sim
