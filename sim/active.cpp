#include "sim/active.h"

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
  std::vector<uint32_t> def;    // value id -> fwd index
  std::vector<uint8_t> active;  // value id -> active?
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
      STRATA_CHECK(a.id() < def.size(), "sim::Active: value id ", a.id(), " does not belong to tracer '", name,
                   "' (it has ", def.size(), " values); Actives cannot cross tracers");
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
    STRATA_CHECK(i < a.values.size(), "sim::Array '", a.info.name, "': load index ", i, " out of range (size ",
                 a.values.size(), ")");
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
    STRATA_CHECK(i < a.values.size(), "sim::Array '", a.info.name, "': store index ", i, " out of range (size ",
                 a.values.size(), ")");
    Instr in;
    in.op = Op::Store;
    in.space = Space::Dram;
    in.addr = a.info.base + 8 * i;
    in.src[0] = materialize(v);
    STRATA_CHECK(!(a.info.kind == ArrayKind::Constant && active[in.src[0]]), "sim::Array '", a.info.name,
                 "': store of an active (differentiable) value into a"
                 " constant array at index ",
                 i, "; use an input, output or temp array");
    a.values[i] = v.value();
    record(in, false, index, i);
  }

  Array make(Tracer* t, const std::string& nm, ArrayKind kind, std::vector<double> values, double seed) {
    check_open("creating an array");
    STRATA_CHECK(!nm.empty(), "sim::Tracer '", name, "': an array needs a non-empty name");
    for (const ArrayState& a : arrays)
      STRATA_CHECK(a.info.name != nm, "sim::Tracer '", name, "': array name '", nm, "' is already used");
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

// The reverse sweep (Note [Sim tracer semantics] in active.h): REV instructions from the FWD recording, in reverse,
// with each FWD value the sweep reads rematerialized (constants, inputs), re-loaded (a load no
// later store overwrote) or requested from the tape.
class ReverseSweep {
 public:
  struct RevI {
    Instr in;
    uint32_t origin;  // the FWD index it differentiates
  };
  struct Req {
    uint32_t value, consumer, rev_index;  // FWD value, FWD consumer, its TapeLoad in `rev`
  };

  explicit ReverseSweep(const TracerState& t)
      : t_(t), adj_(t.def.size(), kNone), rcopy_(t.def.size(), kNone), next_id_(static_cast<uint32_t>(t.def.size())) {
    for (uint32_t j = 0; j < t.fwd.size(); ++j)
      if (t.fwd[j].in.op == Op::Store) last_store_[t.fwd[j].in.addr] = j;
  }

  void run() {
    for (uint32_t jj = static_cast<uint32_t>(t_.fwd.size()); jj-- > 0;) {
      cur_ = jj;
      differentiate(t_.fwd[jj]);
    }
  }

  std::vector<RevI> rev;
  std::vector<Req> reqs;
  uint32_t num_values() const { return next_id_; }

 private:
  uint32_t emit(Op o, uint32_t s0 = kNone, uint32_t s1 = kNone, uint32_t s2 = kNone) {
    Instr in;
    in.op = o;
    in.phase = Phase::Reverse;
    in.src[0] = s0;
    in.src[1] = s1;
    in.src[2] = s2;
    in.loop = t_.fwd[cur_].in.loop;
    in.iter = t_.fwd[cur_].in.iter;
    if (o != Op::Store) in.dst = next_id_++;
    rev.push_back(RevI{in, cur_});
    return in.dst;
  }
  uint32_t emit_mem(Op o, uint64_t addr, uint32_t value = kNone) {
    const uint32_t id = emit(o, value);
    rev.back().in.space = Space::Dram;
    rev.back().in.addr = addr;
    return id;
  }
  uint32_t konst(double c) {
    const uint64_t bits = std::bit_cast<uint64_t>(c);
    auto it = rconsts_.find(bits);
    if (it != rconsts_.end()) return it->second;
    const uint32_t id = emit(Op::Const);
    rev.back().in.imm = c;
    rconsts_.emplace(bits, id);
    return id;
  }
  bool reloadable(const Rec& d) const {
    auto it = last_store_.find(d.in.addr);
    return it == last_store_.end() || it->second < t_.def[d.in.dst];
  }
  // The REV copy of FWD value v (rematerialized, re-loaded or from the tape).
  uint32_t use(uint32_t v) {
    if (rcopy_[v] != kNone) return rcopy_[v];
    const Rec& d = t_.fwd[t_.def[v]];
    uint32_t id;
    if (d.in.op == Op::Const) {
      id = konst(d.in.imm);
    } else if (d.in.op == Op::Input) {
      id = emit(Op::Input);
      rev.back().in.imm = d.in.imm;
    } else if (d.in.op == Op::Load && reloadable(d)) {
      id = emit_mem(Op::Load, d.in.addr);
    } else {
      id = emit(Op::TapeLoad);
      rev.back().in.space = Space::Dram;
      reqs.push_back(Req{v, cur_, static_cast<uint32_t>(rev.size() - 1)});
    }
    rcopy_[v] = id;
    return id;
  }
  // adj[v] += g (or -= g).
  void acc(uint32_t v, uint32_t g, bool negate = false) {
    if (!t_.active[v]) return;
    if (adj_[v] == kNone)
      adj_[v] = negate ? emit(Op::Neg, g) : g;
    else
      adj_[v] = emit(negate ? Op::Sub : Op::Add, adj_[v], g);
  }
  bool active(uint32_t v) const { return t_.active[v] != 0; }

  // A store's adjoint: the gradient array's element is read, cleared and added to the stored value's.
  void differentiate_store(const Rec& r) {
    const ArrayState& a = t_.arrays[r.array];
    if (a.info.kind == ArrayKind::Constant) return;
    const uint64_t sh = a.info.grad_base + 8 * r.elem;
    const uint32_t t = emit_mem(Op::Load, sh);
    emit_mem(Op::Store, sh, konst(0.0));
    acc(r.in.src[0], t);
  }

  void differentiate(const Rec& r) {
    const Instr& in = r.in;
    if (in.op == Op::Store) return differentiate_store(r);
    const uint32_t y = in.dst;
    if (y == kNone || !active(y) || adj_[y] == kNone) return;
    const uint32_t g = adj_[y];
    const uint32_t a = in.src[0], b = in.src[1];
    switch (in.op) {
      case Op::Load: {
        const uint64_t sh = t_.arrays[r.array].info.grad_base + 8 * r.elem;
        const uint32_t t = emit_mem(Op::Load, sh);
        emit_mem(Op::Store, sh, emit(Op::Add, t, g));
        break;
      }
      case Op::Add:
        acc(a, g);
        acc(b, g);
        break;
      case Op::Sub:
        acc(a, g);
        acc(b, g, true);
        break;
      case Op::Neg: acc(a, g, true); break;
      case Op::Mul:
        if (active(a)) acc(a, emit(Op::Mul, g, use(b)));
        if (active(b)) acc(b, emit(Op::Mul, g, use(a)));
        break;
      case Op::Div: {
        const uint32_t t = emit(Op::Div, g, use(b));
        acc(a, t);
        if (active(b)) acc(b, emit(Op::Mul, t, use(y)), true);
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
        const uint32_t c = in.op == Op::Max ? emit(Op::Cmp, use(a), use(b)) : emit(Op::Cmp, use(b), use(a));
        const uint32_t z = konst(0.0);
        if (active(a)) acc(a, emit(Op::Select, c, z, g));
        if (active(b)) acc(b, emit(Op::Select, c, g, z));
        break;
      }
      case Op::Select: {
        const uint32_t c = use(a);
        const uint32_t z = konst(0.0);
        if (active(b)) acc(b, emit(Op::Select, c, g, z));
        if (active(in.src[2])) acc(in.src[2], emit(Op::Select, c, z, g));
        break;
      }
      default: STRATA_ASSERT(false, "sim::Tracer: no derivative rule for active op ", static_cast<int>(in.op));
    }
  }

  const TracerState& t_;
  std::unordered_map<uint64_t, uint32_t> last_store_;  // address -> last FWD store
  std::vector<uint32_t> adj_, rcopy_;
  std::unordered_map<uint64_t, uint32_t> rconsts_;
  uint32_t next_id_;
  uint32_t cur_ = 0;
};

// The FWD instructions, each tape store placed right after the FWD instruction whose derivative
// requested the value (Req::consumer), stores grouped into sites (loop, k-th store of the
// iteration). Fills p.trace.instrs (the FWD part), p.sites and p.origin; returns, per tape request,
// (its store's index, its site).
std::vector<std::pair<uint32_t, uint32_t>> place_tape_stores(const TracerState& t, const ReverseSweep& sweep,
                                                             std::vector<uint32_t>& final_index, Program& p) {
  const uint32_t n = static_cast<uint32_t>(t.fwd.size());
  std::unordered_map<uint32_t, std::vector<uint32_t>> reqs_at;
  for (uint32_t r = 0; r < sweep.reqs.size(); ++r) reqs_at[sweep.reqs[r].consumer].push_back(r);
  std::vector<std::pair<uint32_t, uint32_t>> placed(sweep.reqs.size());
  std::map<std::pair<uint32_t, uint32_t>, uint32_t> site_ids;
  std::unordered_map<uint32_t, std::pair<uint32_t, uint32_t>> loop_counter;  // loop -> (iter, k)
  auto& out = p.trace.instrs;
  out.reserve(n + sweep.reqs.size() + sweep.rev.size());
  final_index.assign(n, 0);
  for (uint32_t j = 0; j < n; ++j) {
    final_index[j] = static_cast<uint32_t>(out.size());
    out.push_back(t.fwd[j].in);
    auto it = reqs_at.find(j);
    if (it == reqs_at.end()) continue;
    for (uint32_t r : it->second) {
      Instr st;
      st.op = Op::TapeStore;
      st.space = Space::Dram;
      st.src[0] = sweep.reqs[r].value;
      st.loop = t.fwd[j].in.loop;
      st.iter = st.loop == kNone ? 0 : t.fwd[j].in.iter;
      auto& lc = loop_counter[st.loop];
      if (lc.first != st.iter) lc = {st.iter, 0};
      const uint32_t k = lc.second++;
      auto [sit, fresh] = site_ids.emplace(std::make_pair(st.loop, k), static_cast<uint32_t>(p.sites.size()));
      if (fresh) {
        TapeSite s;
        s.loop = st.loop;
        s.ordinal = k;
        s.entries = st.loop == kNone ? 1 : t.loops[st.loop].count;
        p.sites.push_back(s);
      }
      placed[r] = {static_cast<uint32_t>(out.size()), sit->second};
      out.push_back(st);
    }
  }
  p.origin.resize(out.size());
  for (uint32_t i = 0; i < out.size(); ++i) p.origin[i] = i;
  return placed;
}

// The tape's sites laid out after the arrays; REV appended; each tape store and its load given
// their slot's address.
void link_tape(const TracerState& t, const ReverseSweep& sweep, const std::vector<uint32_t>& final_index,
               const std::vector<std::pair<uint32_t, uint32_t>>& placed, Program& p) {
  auto& out = p.trace.instrs;
  const uint32_t nfwd = static_cast<uint32_t>(out.size());
  p.tape_base = align64(t.next_addr);
  uint64_t at = p.tape_base;
  for (TapeSite& s : p.sites) {
    s.base = at;
    at += align64(8 * s.entries);
  }
  for (const ReverseSweep::RevI& r : sweep.rev) {
    out.push_back(r.in);
    p.origin.push_back(final_index[r.origin]);
  }
  for (uint32_t r = 0; r < sweep.reqs.size(); ++r) {
    const auto [store, site] = placed[r];
    Instr& st = out[store];
    st.addr = p.sites[site].base + 8 * uint64_t{st.iter};
    Instr& ld = out[nfwd + sweep.reqs[r].rev_index];
    ld.addr = st.addr;
    p.tape.push_back(TapeEntry{store, nfwd + sweep.reqs[r].rev_index, site});
  }
  std::sort(p.tape.begin(), p.tape.end(), [](const TapeEntry& x, const TapeEntry& y) { return x.store < y.store; });
}

Program TracerState::finish() {
  check_open("finish()");
  STRATA_CHECK(open.empty(), "sim::Tracer '", name, "': finish() with ", open.size(),
               " loop(s) still open (innermost '", open.empty() ? "" : loops[open.back().id].name,
               "'); close loops before finishing");
  finished = true;
  ReverseSweep sweep(*this);
  sweep.run();
  Program p;
  p.trace.name = name;
  for (const LoopState& l : loops) {
    p.trace.loop_names.push_back(l.name);
    p.loop_iterations.push_back(l.count);
  }
  std::vector<uint32_t> final_index;
  const auto placed = place_tape_stores(*this, sweep, final_index, p);
  link_tape(*this, sweep, final_index, placed, p);
  p.trace.num_values = sweep.num_values();
  p.trace.tape_bytes = 8 * uint64_t{sweep.reqs.size()};
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
Active operator-(const Active& a) {
  return unary(Op::Neg, a, [](double x) { return -x; });
}
Active& operator+=(Active& a, const Active& b) { return a = a + b; }
Active& operator-=(Active& a, const Active& b) { return a = a - b; }
Active& operator*=(Active& a, const Active& b) { return a = a * b; }
Active exp(const Active& a) {
  return unary(Op::Exp, a, [](double x) { return std::exp(x); });
}
Active log(const Active& a) {
  return unary(Op::Log, a, [](double x) { return std::log(x); });
}
Active sqrt(const Active& a) {
  return unary(Op::Sqrt, a, [](double x) { return std::sqrt(x); });
}
Active sin(const Active& a) {
  return unary(Op::Sin, a, [](double x) { return std::sin(x); });
}
Active cos(const Active& a) {
  return unary(Op::Cos, a, [](double x) { return std::cos(x); });
}
Active tanh(const Active& a) {
  return unary(Op::Tanh, a, [](double x) { return std::tanh(x); });
}
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
  STRATA_CHECK(i < a.values.size(), "sim::Array '", a.info.name, "': value index ", i, " out of range (size ",
               a.values.size(), ")");
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
  STRATA_FAIL("sim::Program '", trace.name, "': no array named '", name, "' (arrays: ", known, ")");
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
  auto [it, fresh] = s.loop_ids.emplace(std::make_pair(parent, name), static_cast<uint32_t>(s.loops.size()));
  if (fresh) s.loops.push_back(detail::LoopState{name, parent, 0});
  for (const auto& o : s.open)
    STRATA_CHECK(o.id != it->second, "sim::Loop '", name,
                 "': already open (a loop cannot nest in"
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
  STRATA_CHECK(s.open.size() == depth_ + 1 && s.open.back().id == id_, "sim::Loop '", s.loops[id_].name,
               "': next() while an inner loop is still open");
  s.open.back().started = true;
  s.open.back().iter = s.loops[id_].count++;
}

}  // namespace strata::sim
