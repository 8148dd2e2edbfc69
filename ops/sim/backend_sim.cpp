#include "ops/sim/backend_sim.h"

#include <algorithm>
#include <sstream>
#include <utility>

#include "core/error.h"
#include "core/factories.h"
#include "ops/sim/replay.h"
#include "ops/sim/systems.h"
#include "ops/sim/tapeflow.h"

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
  STRATA_CHECK(t.dtype() == DType::f32 || t.dtype() == DType::f64, what, ": expected a floating tensor (f32 or f64), got ",
               t.dtype());
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
  return SimTensor{impl_->tracer->constant(name, std::move(v)), std::vector<int64_t>(value.sizes().begin(), value.sizes().end())};
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
    if (act == Activation::Tanh) acc = tanh(acc);
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
  STRATA_CHECK(a.shape == b.shape, s.where("add"), ": shapes must be equal on the sim backend, got ", shape_str(a.shape),
               " and ", shape_str(b.shape));
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
  STRATA_CHECK(kernel >= 1 && stride >= 1, at, ": kernel and stride must be positive, got kernel ", kernel,
               ", stride ", stride);
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
  STRATA_CHECK(kernel >= 1 && stride >= 1, at, ": kernel and stride must be positive, got kernel ", kernel,
               ", stride ", stride);
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

}  // namespace strata::sim
