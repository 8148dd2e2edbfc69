#include "sim/bench_registry.h"

#include <algorithm>

#include "core/error.h"
#include "sim/benchmarks.h"
#include "sim/tapeflow.h"

namespace strata::sim::registry {

namespace {

constexpr uint64_t kX = 0x100000, kV = 0x200000, kY = 0x300000, kDy = 0x400000, kDx = 0x500000, kDv = 0x600000;
constexpr uint64_t kTape = 0x1000000;

class Gen {
 public:
  Gen(std::string name, uint64_t n, uint64_t stride, TraceMode mode, const TraceOptions& o)
      : n_(n), stride_(stride), mode_(mode) {
    t_.name = std::move(name);
    t_.loop_names = {"fwd", "rev"};
    if (mode == TraceMode::TapeFlow) {
      const uint64_t half = o.spad_bytes / 2;
      STRATA_CHECK(half >= 16, "trace_benchmark(", t_.name, "): a ", o.spad_bytes,
                   "-byte scratchpad cannot hold two 16-byte layers; expected at least 32 bytes");
      k_ = std::min<uint64_t>(half / 16, n);
      if (o.unroll > 0) k_ = std::min<uint64_t>(k_, o.unroll);
    } else {
      k_ = n;
    }
  }

  Trace build() {
    const uint64_t layers = (n_ + k_ - 1) / k_;
    // FWD
    std::vector<uint32_t> e(n_), b(n_);
    for (uint64_t l = 0; l < layers; ++l) {
      const uint64_t lo = l * k_, hi = std::min(n_, lo + k_);
      if (tflow()) emit(Op::SAlloc, Phase::Forward, {}, base(l));
      for (uint64_t i = lo; i < hi; ++i) {
        const uint32_t a = load(Op::Load, Phase::Forward, x_addr(i), 0, i);
        b[i] = load(Op::Load, Phase::Forward, kV + 8 * i, 0, i);
        e[i] = value(Op::Exp, Phase::Forward, {a}, 0, i);
        const uint32_t p = value(Op::Mul, Phase::Forward, {e[i], b[i]}, 0, i);
        store(Op::Store, Phase::Forward, p, kY + 8 * i, 0, i);
        store(tape_op(true), Phase::Forward, e[i], tape_addr(i, 0), 0, i);
        store(tape_op(true), Phase::Forward, b[i], tape_addr(i, 1), 0, i);
      }
      if (tflow()) {
        emit(Op::Barrier, Phase::Forward, {}, 0);
        stream(Op::StreamOut, Phase::Forward, base(l), kTape + 16 * lo, static_cast<uint32_t>(16 * (hi - lo)));
      }
    }
    // REV
    for (uint64_t l = layers; l-- > 0;) {
      const uint64_t lo = l * k_, hi = std::min(n_, lo + k_);
      if (tflow()) {
        stream(Op::StreamIn, Phase::Reverse, base(l), kTape + 16 * lo, static_cast<uint32_t>(16 * (hi - lo)));
        emit(Op::SAlloc, Phase::Reverse, {}, base(l));
      }
      for (uint64_t i = hi; i-- > lo;) {
        const uint32_t g = load(Op::Load, Phase::Reverse, kDy + 8 * i, 1, i);
        const uint32_t te = load(tape_op(false), Phase::Reverse, tape_addr(i, 0), 1, i);
        const uint32_t tb = load(tape_op(false), Phase::Reverse, tape_addr(i, 1), 1, i);
        const uint32_t db = value(Op::Mul, Phase::Reverse, {g, te}, 1, i);
        const uint32_t de = value(Op::Mul, Phase::Reverse, {g, tb}, 1, i);
        const uint32_t da = value(Op::Mul, Phase::Reverse, {de, te}, 1, i);
        store(Op::Store, Phase::Reverse, db, kDv + 8 * i, 1, i);
        store(Op::Store, Phase::Reverse, da, kDx + (x_addr(i) - kX), 1, i);
      }
      if (tflow()) emit(Op::Barrier, Phase::Reverse, {}, 0);
    }
    t_.tape_bytes = 16 * n_;
    t_.spad_bytes = tflow() ? std::min<uint64_t>(2, layers) * k_ * 16 : 0;
    return std::move(t_);
  }

 private:
  bool tflow() const { return mode_ == TraceMode::TapeFlow; }
  uint64_t base(uint64_t layer) const { return (layer % 2) * k_ * 16; }
  uint64_t x_addr(uint64_t i) const {
    const uint64_t idx = (i * stride_) % n_ + (i * stride_) / n_;
    return kX + 8 * idx;
  }
  Op tape_op(bool store) const {
    if (tflow()) return store ? Op::SpadStore : Op::SpadLoad;
    return store ? Op::TapeStore : Op::TapeLoad;
  }
  // Where value `slot` (0: exp(x[i]), 1: v[i]) of iteration i lives.
  uint64_t tape_addr(uint64_t i, int slot) const {
    switch (mode_) {
      case TraceMode::Enzyme: return kTape + slot * 8 * n_ + 8 * i;
      case TraceMode::AoS: return kTape + 16 * i + 8 * slot;
      case TraceMode::TapeFlow: return base(i / k_) + 16 * (i % k_) + 8 * slot;
    }
    return 0;
  }

  Instr& emit(Op op, Phase ph, std::initializer_list<uint32_t> src, uint64_t addr, uint32_t loop = kNone,
              uint64_t iter = 0) {
    Instr in;
    in.op = op;
    in.phase = ph;
    int k = 0;
    for (uint32_t s : src) in.src[k++] = s;
    in.addr = addr;
    in.loop = loop;
    in.iter = static_cast<uint32_t>(iter);
    t_.instrs.push_back(in);
    return t_.instrs.back();
  }
  uint32_t value(Op op, Phase ph, std::initializer_list<uint32_t> src, uint32_t loop, uint64_t iter) {
    Instr& in = emit(op, ph, src, 0, loop, iter);
    in.dst = t_.num_values++;
    return in.dst;
  }
  uint32_t load(Op op, Phase ph, uint64_t addr, uint32_t loop, uint64_t iter) {
    Instr& in = emit(op, ph, {}, addr, loop, iter);
    in.space = op == Op::SpadLoad ? Space::Spad : Space::Dram;
    in.dst = t_.num_values++;
    return in.dst;
  }
  void store(Op op, Phase ph, uint32_t v, uint64_t addr, uint32_t loop, uint64_t iter) {
    Instr& in = emit(op, ph, {v}, addr, loop, iter);
    in.space = op == Op::SpadStore ? Space::Spad : Space::Dram;
  }
  void stream(Op op, Phase ph, uint64_t spad, uint64_t dram, uint32_t bytes) {
    Instr& in = emit(op, ph, {}, spad);
    in.space = Space::Spad;
    in.addr2 = dram;
    in.bytes = bytes;
  }

  Trace t_;
  uint64_t n_, stride_, k_ = 1;
  TraceMode mode_;
};

}  // namespace

std::vector<std::string> benchmark_names() { return sim::benchmark_names(); }

std::vector<std::string> synthetic_benchmark_names() { return {"stream", "strided"}; }

Trace trace_benchmark(const std::string& name, TraceMode mode, const TraceOptions& options) {
  const uint64_t n = options.quick ? 512 : 4096;
  if (name == "stream") return Gen(name, n, 1, mode, options).build();
  if (name == "strided") return Gen(name, n, 64, mode, options).build();
  for (const std::string& b : sim::benchmark_names()) {
    if (b != name) continue;
    BenchmarkParams p;
    p.reduced = options.quick;
    p.unroll = options.unroll > 0 ? options.unroll : 1;
    Program prog = build_benchmark(name, p);
    switch (mode) {
      case TraceMode::Enzyme: return std::move(prog.trace);
      case TraceMode::AoS: return aos_layout(prog).trace;
      case TraceMode::TapeFlow: return tapeflow(prog, options.spad_bytes).trace;
    }
  }
  std::string list;
  for (const std::string& b : sim::benchmark_names()) list += b + ", ";
  STRATA_FAIL("unknown benchmark '", name, "'; expected one of: ", list, "stream, strided");
}

}  // namespace strata::sim::registry
