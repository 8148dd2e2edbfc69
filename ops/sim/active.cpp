#include "ops/sim/active.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <map>
#include <unordered_map>
#include <utility>

#include "core/error.h"

namespace strata::sim {
namespace detail {

namespace {
thread_local Tracer* g_current = nullptr;

uint64_t align64(uint64_t a) { return (a + 63) & ~uint64_t{63}; }

const char* kind_name(ArrayKind k) {
  switch (k) {
    case ArrayKind::Input: return "input";
    case ArrayKind::Constant: return "constant";
    case ArrayKind::Output: return "output";
    case ArrayKind::Temp: return "temp";
  }
  return "?";
}
}  // namespace

/// A recorded FWD instruction (before tape stores are placed).
struct Rec {
  Instr in;
  uint32_t array = kNone;  // Load/Store: the array
  uint64_t elem = 0;       // Load/Store: the element
};

struct ArrayState {
  ArrayInfo info;
  std::vector<double> values;
};

struct LoopState {
  std::string name;
  uint32_t parent = kNone;
  uint64_t count = 0;  // iterations started so far (over all executions)
};

struct OpenLoop {
  uint32_t id = kNone;
  bool started = false;
  uint64_t iter = 0;
};

struct TracerState {
  std::string name;
  std::vector<Rec> fwd;
  std::vector<uint32_t> def;       // value id -> fwd index
  std::vector<uint8_t> active;     // value id -> active?
  std::vector<ArrayState> arrays;
  std::vector<LoopState> loops;
  std::map<std::pair<uint32_t, std::string>, uint32_t> loop_ids;
  std::vector<OpenLoop> open;
  std::unordered_map<uint64_t, uint32_t> consts;  // bit pattern -> value id
  uint64_t next_addr = 4096;
  bool finished = false;

  void check_open(const char* what) const {
    STRATA_CHECK(!finished, "sim::Tracer '", name, "': ", what,
                 " after finish(); trace a new program with a new Tracer");
  }

  std::pair<uint32_t, uint64_t> where() const {
    for (auto it = open.rbegin(); it != open.rend(); ++it)
      if (it->started) return {it->id, it->iter};
    return {kNone, 0};
  }

  uint32_t record(Instr in, bool is_active, uint32_t array = kNone, uint64_t elem = 0) {
    auto [loop, iter] = where();
    in.loop = loop;
    in.iter = static_cast<uint32_t>(iter);
    in.phase = Phase::Forward;
    uint32_t id = kNone;
    if (in.op != Op::Store) {
      id = static_cast<uint32_t>(def.size());
      in.dst = id;
      def.push_back(static_cast<uint32_t>(fwd.size()));
      active.push_back(is_active ? 1 : 0);
    }
    fwd.push_back(Rec{in, array, elem});
    return id;
  }

  uint32_t materialize(const Active& a) {
    if (!a.is_constant()) {
      STRATA_CHECK(a.id() < def.size(), "sim::Active: value id ", a.id(),
                   " does not belong to tracer '", name, "' (it has ", def.size(),
                   " values); Actives cannot cross tracers");
      return a.id();
    }
    const uint64_t bits = std::bit_cast<uint64_t>(a.value());
    auto it = consts.find(bits);
    if (it != consts.end()) return it->second;
    Instr in;
    in.op = Op::Const;
    in.imm = a.value();
    const uint32_t id = record(in, false);
    consts.emplace(bits, id);
    return id;
  }

  Active op(Op o, double value, std::initializer_list<Active> srcs) {
    check_open("recording an operation");
    Instr in;
    in.op = o;
    bool act = false;
    int k = 0;
    for (const Active& s : srcs) {
      in.src[k] = materialize(s);
      act = act || active[in.src[k]];
      ++k;
    }
    if (o == Op::Cmp) act = false;
    if (o == Op::Select) act = active[in.src[1]] || active[in.src[2]];
    return Active(value, record(in, act));
  }

  ArrayState& arr(uint32_t index) { return arrays.at(index); }

  Active load(uint32_t index, size_t i) {
    check_open("a load");
    ArrayState& a = arr(index);
    STRATA_CHECK(i < a.values.size(), "sim::Array '", a.info.name, "': load index ", i,
                 " out of range (size ", a.values.size(), ")");
    Instr in;
    in.op = Op::Load;
    in.space = Space::Dram;
    in.addr = a.info.base + 8 * i;
    const bool act = a.info.kind != ArrayKind::Constant;
    return Active(a.values[i], record(in, act, index, i));
  }

  void store(uint32_t index, size_t i, const Active& v) {
    check_open("a store");
    ArrayState& a = arr(index);
    STRATA_CHECK(i < a.values.size(), "sim::Array '", a.info.name, "': store index ", i,
                 " out of range (size ", a.values.size(), ")");
    Instr in;
    in.op = Op::Store;
    in.space = Space::Dram;
    in.addr = a.info.base + 8 * i;
    in.src[0] = materialize(v);
    STRATA_CHECK(!(a.info.kind == ArrayKind::Constant && active[in.src[0]]),
                 "sim::Array '", a.info.name, "': store of an active (differentiable) value into a"
                 " constant array at index ", i, "; use an input, output or temp array");
    a.values[i] = v.value();
    record(in, false, index, i);
  }

  Array make(Tracer* t, const std::string& nm, ArrayKind kind, std::vector<double> values,
             double seed) {
    check_open("creating an array");
    STRATA_CHECK(!nm.empty(), "sim::Tracer '", name, "': an array needs a non-empty name");
    for (const ArrayState& a : arrays)
      STRATA_CHECK(a.info.name != nm, "sim::Tracer '", name, "': array name '", nm,
                   "' is already used");
    STRATA_CHECK(!values.empty(), "sim::Tracer '", name, "': ", kind_name(kind), " array '", nm,
                 "' has no elements (expected at least one)");
    ArrayState s;
    s.info.name = nm;
    s.info.kind = kind;
    s.info.base = next_addr;
    const uint64_t bytes = align64(8 * values.size());
    next_addr += bytes;
    if (kind != ArrayKind::Constant) {
      s.info.grad_base = next_addr;
      next_addr += bytes;
    }
    s.info.initial = values;
    s.info.seed.assign(values.size(), kind == ArrayKind::Output ? seed : 0.0);
    s.values = std::move(values);
    arrays.push_back(std::move(s));
    return Array(t, static_cast<uint32_t>(arrays.size() - 1));
  }

  Program finish();
};

Program TracerState::finish() {
  check_open("finish()");
  STRATA_CHECK(open.empty(), "sim::Tracer '", name, "': finish() with ", open.size(),
               " loop(s) still open (innermost '", open.empty() ? "" : loops[open.back().id].name,
               "'); close loops before finishing");
  finished = true;
  const uint32_t n = static_cast<uint32_t>(fwd.size());
  const uint32_t nv = static_cast<uint32_t>(def.size());

  std::unordered_map<uint64_t, uint32_t> last_store;
  for (uint32_t j = 0; j < n; ++j)
    if (fwd[j].in.op == Op::Store) last_store[fwd[j].in.addr] = j;

  struct RevI {
    Instr in;
    uint32_t origin;
  };
  struct Req {
    uint32_t value, consumer, rev_index;
  };
  std::vector<RevI> rev;
  std::vector<Req> reqs;
  std::vector<uint32_t> adj(nv, kNone), rcopy(nv, kNone);
  std::unordered_map<uint64_t, uint32_t> rconsts;
  uint32_t next_id = nv;
  uint32_t cur = 0;

  auto emit = [&](Op o, uint32_t s0 = kNone, uint32_t s1 = kNone, uint32_t s2 = kNone) {
    Instr in;
    in.op = o;
    in.phase = Phase::Reverse;
    in.src[0] = s0;
    in.src[1] = s1;
    in.src[2] = s2;
    in.loop = fwd[cur].in.loop;
    in.iter = fwd[cur].in.iter;
    if (o != Op::Store) in.dst = next_id++;
    rev.push_back(RevI{in, cur});
    return in.dst;
  };
  auto emit_mem = [&](Op o, uint64_t addr, uint32_t value = kNone) {
    const uint32_t id = emit(o, value);
    rev.back().in.space = Space::Dram;
    rev.back().in.addr = addr;
    return id;
  };
  auto konst = [&](double c) {
    const uint64_t bits = std::bit_cast<uint64_t>(c);
    auto it = rconsts.find(bits);
    if (it != rconsts.end()) return it->second;
    const uint32_t id = emit(Op::Const);
    rev.back().in.imm = c;
    rconsts.emplace(bits, id);
    return id;
  };
  // The REV copy of FWD value v (rematerialized, re-loaded or from the tape).
  auto use = [&](uint32_t v) {
    if (rcopy[v] != kNone) return rcopy[v];
    const Rec& d = fwd[def[v]];
    uint32_t id;
    if (d.in.op == Op::Const) {
      id = konst(d.in.imm);
    } else if (d.in.op == Op::Input) {
      id = emit(Op::Input);
      rev.back().in.imm = d.in.imm;
    } else if (d.in.op == Op::Load && [&] {
                 auto it = last_store.find(d.in.addr);
                 return it == last_store.end() || it->second < def[v];
               }()) {
      id = emit_mem(Op::Load, d.in.addr);
    } else {
      id = emit(Op::TapeLoad);
      rev.back().in.space = Space::Dram;
      reqs.push_back(Req{v, cur, static_cast<uint32_t>(rev.size() - 1)});
    }
    rcopy[v] = id;
    return id;
  };
  // adj[v] += g (or -= g).
  auto acc = [&](uint32_t v, uint32_t g, bool negate = false) {
    if (!active[v]) return;
    if (adj[v] == kNone)
      adj[v] = negate ? emit(Op::Neg, g) : g;
    else
      adj[v] = emit(negate ? Op::Sub : Op::Add, adj[v], g);
  };

  for (uint32_t jj = n; jj-- > 0;) {
    cur = jj;
    const Instr& in = fwd[jj].in;
    if (in.op == Op::Store) {
      const ArrayState& a = arrays[fwd[jj].array];
      if (a.info.kind == ArrayKind::Constant) continue;
      const uint64_t sh = a.info.grad_base + 8 * fwd[jj].elem;
      const uint32_t t = emit_mem(Op::Load, sh);
      emit_mem(Op::Store, sh, konst(0.0));
      acc(in.src[0], t);
      continue;
    }
    const uint32_t y = in.dst;
    if (y == kNone || !active[y] || adj[y] == kNone) continue;
    const uint32_t g = adj[y];
    const uint32_t a = in.src[0], b = in.src[1];
    switch (in.op) {
      case Op::Load: {
        const ArrayState& ar = arrays[fwd[jj].array];
        const uint64_t sh = ar.info.grad_base + 8 * fwd[jj].elem;
        const uint32_t t = emit_mem(Op::Load, sh);
        emit_mem(Op::Store, sh, emit(Op::Add, t, g));
        break;
      }
      case Op::Add: acc(a, g); acc(b, g); break;
      case Op::Sub: acc(a, g); acc(b, g, true); break;
      case Op::Neg: acc(a, g, true); break;
      case Op::Mul:
        if (active[a]) acc(a, emit(Op::Mul, g, use(b)));
        if (active[b]) acc(b, emit(Op::Mul, g, use(a)));
        break;
      case Op::Div: {
        const uint32_t t = emit(Op::Div, g, use(b));
        acc(a, t);
        if (active[b]) acc(b, emit(Op::Mul, t, use(y)), true);
        break;
      }
      case Op::Exp: acc(a, emit(Op::Mul, g, use(y))); break;
      case Op::Log: acc(a, emit(Op::Div, g, use(a))); break;
      case Op::Sqrt: acc(a, emit(Op::Mul, emit(Op::Div, g, use(y)), konst(0.5))); break;
      case Op::Sin: acc(a, emit(Op::Mul, g, emit(Op::Cos, use(a)))); break;
      case Op::Cos: acc(a, emit(Op::Mul, g, emit(Op::Sin, use(a))), true); break;
      case Op::Tanh: {
        const uint32_t yy = use(y);
        const uint32_t d = emit(Op::Sub, konst(1.0), emit(Op::Mul, yy, yy));
        acc(a, emit(Op::Mul, g, d));
        break;
      }
      case Op::Max:
      case Op::Min: {
        // c = (Max: a < b, Min: b < a): the result is b when c, else a (a on ties).
        const uint32_t c = in.op == Op::Max ? emit(Op::Cmp, use(a), use(b))
                                            : emit(Op::Cmp, use(b), use(a));
        const uint32_t z = konst(0.0);
        if (active[a]) acc(a, emit(Op::Select, c, z, g));
        if (active[b]) acc(b, emit(Op::Select, c, g, z));
        break;
      }
      case Op::Select: {
        const uint32_t c = use(a);
        const uint32_t z = konst(0.0);
        if (active[b]) acc(b, emit(Op::Select, c, g, z));
        if (active[in.src[2]]) acc(in.src[2], emit(Op::Select, c, z, g));
        break;
      }
      default:
        STRATA_ASSERT(false, "sim::Tracer: no derivative rule for active op ",
                      static_cast<int>(in.op));
    }
  }

  // FWD with tape stores after their consumer; sites (loop, k-th store of the iteration).
  std::unordered_map<uint32_t, std::vector<uint32_t>> reqs_at;
  for (uint32_t r = 0; r < reqs.size(); ++r) reqs_at[reqs[r].consumer].push_back(r);

  Program p;
  p.trace.name = name;
  for (const LoopState& l : loops) {
    p.trace.loop_names.push_back(l.name);
    p.loop_iterations.push_back(l.count);
  }
  std::vector<uint32_t> final_index(n);
  std::vector<uint32_t> req_store(reqs.size());
  std::vector<uint32_t> req_site(reqs.size());
  std::map<std::pair<uint32_t, uint32_t>, uint32_t> site_ids;
  std::unordered_map<uint32_t, std::pair<uint32_t, uint32_t>> loop_counter;  // loop -> (iter, k)
  auto& out = p.trace.instrs;
  out.reserve(n + reqs.size() + rev.size());
  for (uint32_t j = 0; j < n; ++j) {
    final_index[j] = static_cast<uint32_t>(out.size());
    out.push_back(fwd[j].in);
    auto it = reqs_at.find(j);
    if (it == reqs_at.end()) continue;
    for (uint32_t r : it->second) {
      Instr st;
      st.op = Op::TapeStore;
      st.space = Space::Dram;
      st.src[0] = reqs[r].value;
      st.loop = fwd[j].in.loop;
      st.iter = st.loop == kNone ? 0 : fwd[j].in.iter;
      auto& lc = loop_counter[st.loop];
      if (lc.first != st.iter) lc = {st.iter, 0};
      const uint32_t k = lc.second++;
      auto [sit, fresh] =
          site_ids.emplace(std::make_pair(st.loop, k), static_cast<uint32_t>(p.sites.size()));
      if (fresh) {
        TapeSite s;
        s.loop = st.loop;
        s.ordinal = k;
        s.entries = st.loop == kNone ? 1 : loops[st.loop].count;
        p.sites.push_back(s);
      }
      req_site[r] = sit->second;
      req_store[r] = static_cast<uint32_t>(out.size());
      out.push_back(st);
    }
  }
  const uint32_t nfwd = static_cast<uint32_t>(out.size());
  p.origin.resize(nfwd);
  for (uint32_t i = 0; i < nfwd; ++i) p.origin[i] = i;

  p.tape_base = align64(next_addr);
  uint64_t at = p.tape_base;
  for (TapeSite& s : p.sites) {
    s.base = at;
    at += align64(8 * s.entries);
  }
  for (const RevI& r : rev) {
    out.push_back(r.in);
    p.origin.push_back(final_index[r.origin]);
  }
  for (uint32_t r = 0; r < reqs.size(); ++r) {
    Instr& st = out[req_store[r]];
    st.addr = p.sites[req_site[r]].base + 8 * uint64_t{st.iter};
    Instr& ld = out[nfwd + reqs[r].rev_index];
    ld.addr = st.addr;
    p.tape.push_back(TapeEntry{req_store[r], nfwd + reqs[r].rev_index, req_site[r]});
  }
  std::sort(p.tape.begin(), p.tape.end(),
            [](const TapeEntry& x, const TapeEntry& y) { return x.store < y.store; });
  p.trace.num_values = next_id;
  p.trace.tape_bytes = 8 * uint64_t{reqs.size()};
  for (ArrayState& a : arrays) {
    a.info.final_values = a.values;
    p.arrays.push_back(a.info);
  }
  return p;
}

}  // namespace detail

// ---- Active ----

namespace {
detail::TracerState& st() { return Tracer::current().state(); }

template <typename F>
Active unary(Op o, const Active& a, F f) {
  const double v = f(a.value());
  if (a.is_constant()) return Active(v);
  return st().op(o, v, {a});
}
template <typename F>
Active binary(Op o, const Active& a, const Active& b, F f) {
  const double v = f(a.value(), b.value());
  if (a.is_constant() && b.is_constant()) return Active(v);
  return st().op(o, v, {a, b});
}
}  // namespace

Active operator+(const Active& a, const Active& b) {
  return binary(Op::Add, a, b, [](double x, double y) { return x + y; });
}
Active operator-(const Active& a, const Active& b) {
  return binary(Op::Sub, a, b, [](double x, double y) { return x - y; });
}
Active operator*(const Active& a, const Active& b) {
  return binary(Op::Mul, a, b, [](double x, double y) { return x * y; });
}
Active operator/(const Active& a, const Active& b) {
  return binary(Op::Div, a, b, [](double x, double y) { return x / y; });
}
Active operator-(const Active& a) { return unary(Op::Neg, a, [](double x) { return -x; }); }
Active& operator+=(Active& a, const Active& b) { return a = a + b; }
Active& operator-=(Active& a, const Active& b) { return a = a - b; }
Active& operator*=(Active& a, const Active& b) { return a = a * b; }
Active exp(const Active& a) { return unary(Op::Exp, a, [](double x) { return std::exp(x); }); }
Active log(const Active& a) { return unary(Op::Log, a, [](double x) { return std::log(x); }); }
Active sqrt(const Active& a) { return unary(Op::Sqrt, a, [](double x) { return std::sqrt(x); }); }
Active sin(const Active& a) { return unary(Op::Sin, a, [](double x) { return std::sin(x); }); }
Active cos(const Active& a) { return unary(Op::Cos, a, [](double x) { return std::cos(x); }); }
Active tanh(const Active& a) { return unary(Op::Tanh, a, [](double x) { return std::tanh(x); }); }
// Max/Min return the first operand on ties (the replay and REV's Cmp agree on this).
Active max(const Active& a, const Active& b) {
  return binary(Op::Max, a, b, [](double x, double y) { return x < y ? y : x; });
}
Active min(const Active& a, const Active& b) {
  return binary(Op::Min, a, b, [](double x, double y) { return y < x ? y : x; });
}
Active less(const Active& a, const Active& b) {
  return binary(Op::Cmp, a, b, [](double x, double y) { return x < y ? 1.0 : 0.0; });
}
Active select(const Active& c, const Active& a, const Active& b) {
  const double v = c.value() != 0.0 ? a.value() : b.value();
  if (c.is_constant() && a.is_constant() && b.is_constant()) return Active(v);
  return st().op(Op::Select, v, {c, a, b});
}

// ---- Array ----

namespace {
detail::ArrayState& array_state(Tracer* t, uint32_t index) {
  STRATA_CHECK(t != nullptr, "sim::Array: used before being created by a Tracer");
  return t->state().arr(index);
}
}  // namespace

Active Array::load(size_t i) const {
  array_state(tracer_, index_);
  return tracer_->state().load(index_, i);
}
void Array::store(size_t i, const Active& v) const {
  array_state(tracer_, index_);
  tracer_->state().store(index_, i, v);
}
size_t Array::size() const { return array_state(tracer_, index_).values.size(); }
const std::string& Array::name() const { return array_state(tracer_, index_).info.name; }
double Array::value(size_t i) const {
  const auto& a = array_state(tracer_, index_);
  STRATA_CHECK(i < a.values.size(), "sim::Array '", a.info.name, "': value index ", i,
               " out of range (size ", a.values.size(), ")");
  return a.values[i];
}
uint64_t Array::base() const { return array_state(tracer_, index_).info.base; }
uint64_t Array::grad_base() const { return array_state(tracer_, index_).info.grad_base; }

const ArrayInfo& Program::array(const std::string& name) const {
  std::string known;
  for (const ArrayInfo& a : arrays) {
    if (a.name == name) return a;
    known += (known.empty() ? "" : ", ") + a.name;
  }
  STRATA_FAIL("sim::Program '", trace.name, "': no array named '", name, "' (arrays: ",
              known, ")");
}

// ---- Tracer ----

Tracer::Tracer(std::string name) : state_(std::make_unique<detail::TracerState>()) {
  STRATA_CHECK(detail::g_current == nullptr, "sim::Tracer '", name,
               "': another tracer is already current on this thread; finish and destroy it first");
  state_->name = std::move(name);
  detail::g_current = this;
}

Tracer::~Tracer() {
  if (detail::g_current == this) detail::g_current = nullptr;
}

Tracer& Tracer::current() {
  STRATA_CHECK(detail::g_current != nullptr,
               "sim: no current Tracer on this thread (create a sim::Tracer before tracing)");
  return *detail::g_current;
}

Array Tracer::input(const std::string& name, std::vector<double> values) {
  return state_->make(this, name, ArrayKind::Input, std::move(values), 0.0);
}
Array Tracer::constant(const std::string& name, std::vector<double> values) {
  return state_->make(this, name, ArrayKind::Constant, std::move(values), 0.0);
}
Array Tracer::output(const std::string& name, size_t n, double seed) {
  STRATA_CHECK(n > 0, "sim::Tracer '", state_->name, "': output array '", name,
               "' has no elements (expected at least one)");
  return state_->make(this, name, ArrayKind::Output, std::vector<double>(n, 0.0), seed);
}
Array Tracer::temp(const std::string& name, size_t n) {
  STRATA_CHECK(n > 0, "sim::Tracer '", state_->name, "': temp array '", name,
               "' has no elements (expected at least one)");
  return state_->make(this, name, ArrayKind::Temp, std::vector<double>(n, 0.0), 0.0);
}
Active Tracer::param(double value) {
  state_->check_open("a param");
  Instr in;
  in.op = Op::Input;
  in.imm = value;
  return Active(value, state_->record(in, false));
}

Program Tracer::finish() { return state_->finish(); }

// ---- Loop ----

Loop::Loop(const std::string& name) : tracer_(&Tracer::current()) {
  auto& s = tracer_->state();
  s.check_open("opening a loop");
  STRATA_CHECK(!name.empty(), "sim::Loop: a loop needs a non-empty name");
  const uint32_t parent = s.where().first;
  auto [it, fresh] =
      s.loop_ids.emplace(std::make_pair(parent, name), static_cast<uint32_t>(s.loops.size()));
  if (fresh) s.loops.push_back(detail::LoopState{name, parent, 0});
  for (const auto& o : s.open)
    STRATA_CHECK(o.id != it->second, "sim::Loop '", name, "': already open (a loop cannot nest in"
                 " itself; give the inner loop another name)");
  id_ = it->second;
  depth_ = s.open.size();
  s.open.push_back(detail::OpenLoop{id_, false, 0});
}

Loop::~Loop() {
  auto& s = tracer_->state();
  if (s.open.size() > depth_) s.open.resize(depth_);
}

void Loop::next() {
  auto& s = tracer_->state();
  s.check_open("Loop::next()");
  STRATA_CHECK(s.open.size() == depth_ + 1 && s.open.back().id == id_, "sim::Loop '",
               s.loops[id_].name, "': next() while an inner loop is still open");
  s.open.back().started = true;
  s.open.back().iter = s.loops[id_].count++;
}

}  // namespace strata::sim
