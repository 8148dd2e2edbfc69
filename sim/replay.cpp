#include "sim/replay.h"

#include <cmath>
#include <limits>

#include "core/error.h"

namespace strata::sim {

namespace {
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

size_t array_index(const Program& p, const std::string& name) {
  const ArrayInfo& a = p.array(name);  // throws with the known names
  return static_cast<size_t>(&a - p.arrays.data());
}
}  // namespace

const std::vector<double>& ReplayResult::grad(const Program& p, const std::string& name) const {
  const size_t i = array_index(p, name);
  STRATA_CHECK(p.arrays[i].kind != ArrayKind::Constant, "sim::replay: array '", name,
               "' is a constant array and has no gradient");
  return grads.at(i);
}

const std::vector<double>& ReplayResult::value(const Program& p, const std::string& name) const {
  return values.at(array_index(p, name));
}

ReplayResult replay(const Program& program, const ReplayOptions& options) {
  const Trace& t = program.trace;
  ReplayResult res;
  std::unordered_map<uint64_t, double> dram;
  for (const ArrayInfo& a : program.arrays) {
    for (size_t i = 0; i < a.initial.size(); ++i) {
      dram[a.base + 8 * i] = a.initial[i];
      if (a.kind != ArrayKind::Constant) dram[a.grad_base + 8 * i] = a.seed[i];
    }
  }
  std::vector<double> v(t.num_values, kNaN);
  std::vector<double> spad;
  std::vector<uint8_t> written;
  auto slot = [&](uint64_t off) -> size_t {
    STRATA_CHECK(off % 8 == 0, "sim::replay '", t.name, "': scratchpad offset ", off, " is not a multiple of 8");
    const size_t s = off / 8;
    if (s >= spad.size()) {
      spad.resize(s + 1, kNaN);
      written.resize(s + 1, 0);
    }
    res.spad_slots_used = std::max<uint64_t>(res.spad_slots_used, s + 1);
    return s;
  };
  auto poison = [&](uint64_t off, uint64_t bytes) {
    for (uint64_t b = 0; b < bytes; b += 8) {
      const size_t s = slot(off + b);
      spad[s] = kNaN;
      written[s] = 0;
    }
  };
  auto read = [&](uint64_t addr) {
    auto it = dram.find(addr);
    if (it == dram.end()) {
      ++res.invalid_reads;
      return kNaN;
    }
    return it->second;
  };
  auto src = [&](const Instr& in, int k) {
    STRATA_CHECK(in.src[k] < v.size(), "sim::replay '", t.name, "': source value ", in.src[k],
                 " out of range (num_values ", t.num_values, ")");
    return v[in.src[k]];
  };
  uint64_t rev_base = 0, rev_bytes = 0;
  for (const Instr& in : t.instrs) {
    double r = kNaN;
    switch (in.op) {
      case Op::Const:
      case Op::Input: r = in.imm; break;
      case Op::Add: r = src(in, 0) + src(in, 1); break;
      case Op::Sub: r = src(in, 0) - src(in, 1); break;
      case Op::Mul: r = src(in, 0) * src(in, 1); break;
      case Op::Div: r = src(in, 0) / src(in, 1); break;
      case Op::Neg: r = -src(in, 0); break;
      case Op::Exp: r = std::exp(src(in, 0)); break;
      case Op::Log: r = std::log(src(in, 0)); break;
      case Op::Sqrt: r = std::sqrt(src(in, 0)); break;
      case Op::Sin: r = std::sin(src(in, 0)); break;
      case Op::Cos: r = std::cos(src(in, 0)); break;
      case Op::Tanh: r = std::tanh(src(in, 0)); break;
      case Op::Max: r = src(in, 0) < src(in, 1) ? src(in, 1) : src(in, 0); break;
      case Op::Min: r = src(in, 1) < src(in, 0) ? src(in, 1) : src(in, 0); break;
      case Op::Cmp: r = src(in, 0) < src(in, 1) ? 1.0 : 0.0; break;
      case Op::Select: r = src(in, 0) != 0.0 ? src(in, 1) : src(in, 2); break;
      case Op::Load:
      case Op::TapeLoad: r = read(in.addr); break;
      case Op::Store:
      case Op::TapeStore: dram[in.addr] = src(in, 0); break;
      case Op::SpadStore: {
        const size_t s = slot(in.addr);
        spad[s] = src(in, 0);
        written[s] = 1;
        break;
      }
      case Op::SpadLoad: {
        const size_t s = slot(in.addr);
        if (!written[s]) ++res.invalid_reads;
        r = spad[s];
        break;
      }
      case Op::StreamOut:
        for (uint64_t b = 0; b < in.bytes; b += 8) {
          const size_t s = slot(in.addr + b);
          if (written[s]) dram[in.addr2 + b] = spad[s];
        }
        if (options.poison_spad) poison(in.addr, in.bytes);
        break;
      case Op::StreamIn:
        for (uint64_t b = 0; b < in.bytes; b += 8) {
          const size_t s = slot(in.addr + b);
          auto it = dram.find(in.addr2 + b);
          spad[s] = it == dram.end() ? kNaN : it->second;
          written[s] = it != dram.end();
        }
        break;
      case Op::SAlloc:
        if (in.phase == Phase::Reverse) {
          rev_base = in.addr;
          rev_bytes = in.bytes;
        }
        break;
      case Op::Barrier:
        if (options.poison_spad && in.phase == Phase::Reverse) poison(rev_base, rev_bytes);
        rev_bytes = 0;
        break;
    }
    if (in.dst != kNone) {
      STRATA_CHECK(in.dst < v.size(), "sim::replay '", t.name, "': value id ", in.dst, " out of range (num_values ",
                   t.num_values, ")");
      v[in.dst] = r;
    }
  }
  for (const ArrayInfo& a : program.arrays) {
    std::vector<double> val(a.initial.size()), g;
    for (size_t i = 0; i < val.size(); ++i) val[i] = read(a.base + 8 * i);
    if (a.kind != ArrayKind::Constant) {
      g.resize(val.size());
      for (size_t i = 0; i < g.size(); ++i) g[i] = read(a.grad_base + 8 * i);
    }
    res.values.push_back(std::move(val));
    res.grads.push_back(std::move(g));
  }
  return res;
}

}  // namespace strata::sim
