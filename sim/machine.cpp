#include "sim/machine.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <queue>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/error.h"
#include "sim/detail/cache.h"
#include "sim/detail/dram.h"
#include "sim/detail/scratchpad.h"

namespace strata::sim {

using detail::Cache;
using detail::CacheOutcome;
using detail::Dram;
using detail::Scratchpad;
using detail::StreamEngine;

// Note [Sim op latencies] is in machine.h (Note [Sim machine model]).
uint32_t op_latency(Op op) {
  switch (op) {
    case Op::Const:
    case Op::Input: return 0;
    case Op::Add:
    case Op::Sub:
    case Op::Mul: return 4;
    case Op::Neg:
    case Op::Max:
    case Op::Min:
    case Op::Cmp:
    case Op::Select: return 1;
    case Op::Div:
    case Op::Sqrt: return 16;
    case Op::Exp:
    case Op::Log:
    case Op::Sin:
    case Op::Cos:
    case Op::Tanh: return 20;
    case Op::SAlloc: return 1;
    default: return 1;
  }
}

bool op_pipelined(Op op) { return op_latency(op) <= 4; }

const char* op_name(Op op) {
  static constexpr const char* kNames[] = {
      "Const", "Input",    "Add",       "Sub",      "Mul",       "Div",       "Neg",      "Exp",    "Log",
      "Sqrt",  "Sin",      "Cos",       "Tanh",     "Max",       "Min",       "Select",   "Cmp",    "Load",
      "Store", "TapeLoad", "TapeStore", "SpadLoad", "SpadStore", "StreamOut", "StreamIn", "SAlloc", "Barrier"};
  const auto k = static_cast<size_t>(op);
  return k < sizeof(kNames) / sizeof(kNames[0]) ? kNames[k] : "?";
}

namespace {

bool is_arith(Op op) { return op >= Op::Add && op <= Op::Cmp; }
bool is_cache_op(Op op) { return op == Op::Load || op == Op::Store || op == Op::TapeLoad || op == Op::TapeStore; }
bool is_spad_op(Op op) { return op == Op::SpadLoad || op == Op::SpadStore; }
bool is_stream(Op op) { return op == Op::StreamIn || op == Op::StreamOut; }
bool is_store(Op op) { return op == Op::Store || op == Op::TapeStore || op == Op::SpadStore; }

std::string describe(const Trace& t, size_t i) {
  return "sim::simulate(" + t.name + "): instr " + std::to_string(i) + " (" + op_name(t.instrs[i].op) + ")";
}

// Static dependence graph: data edges (src -> producer) and memory edges (Note [Sim machine
// model]), as a CSR of dependents plus per-instruction dependence counts. Edges into an earlier
// phase are left out: the phase boundary orders them.
struct Graph {
  std::vector<uint32_t> dep_begin, deps;    // i's dependencies
  std::vector<uint32_t> user_begin, users;  // who depends on i
};

struct WordState {
  uint32_t writer = kNone;
  std::vector<uint32_t> readers;
};

class GraphBuilder {
 public:
  GraphBuilder(const Trace& t) : t_(t), n_(t.instrs.size()) {}

  void edge(uint32_t from, uint32_t to) {
    if (from == kNone || from == to) return;
    if (t_.instrs[from].phase != t_.instrs[to].phase) return;
    edges_.emplace_back(to, from);
  }

  void read(std::unordered_map<uint64_t, WordState>& m, uint64_t word, uint32_t i, bool must_exist) {
    auto& w = m[word];
    if (must_exist)
      STRATA_CHECK(w.writer != kNone, describe(t_, i), " reads scratchpad slot at offset ", word * 8,
                   ", which no earlier SpadStore or StreamIn wrote");
    edge(w.writer, i);
    w.readers.push_back(i);
  }
  void write(std::unordered_map<uint64_t, WordState>& m, uint64_t word, uint32_t i) {
    auto& w = m[word];
    for (uint32_t r : w.readers) edge(r, i);
    w.readers.clear();
    edge(w.writer, i);
    w.writer = i;
  }

  Graph build(const std::vector<uint32_t>& producer) {
    std::unordered_map<uint64_t, WordState> dram, spad;
    for (uint32_t i = 0; i < n_; ++i) {
      const Instr& in = t_.instrs[i];
      for (uint32_t s : in.src)
        if (s != kNone) edge(producer[s], i);
      const uint64_t words = (in.bytes + 7) / 8;
      switch (in.op) {
        case Op::Load:
        case Op::TapeLoad:
          for (uint64_t w = 0; w < words; ++w) read(dram, in.addr / 8 + w, i, false);
          break;
        case Op::Store:
        case Op::TapeStore:
          for (uint64_t w = 0; w < words; ++w) write(dram, in.addr / 8 + w, i);
          break;
        case Op::SpadLoad:
          for (uint64_t w = 0; w < words; ++w) read(spad, in.addr / 8 + w, i, true);
          break;
        case Op::SpadStore:
          for (uint64_t w = 0; w < words; ++w) write(spad, in.addr / 8 + w, i);
          break;
        case Op::StreamOut:
          for (uint64_t w = 0; w < words; ++w) read(spad, in.addr / 8 + w, i, true);
          for (uint64_t w = 0; w < words; ++w) write(dram, in.addr2 / 8 + w, i);
          break;
        case Op::StreamIn:
          for (uint64_t w = 0; w < words; ++w) read(dram, in.addr2 / 8 + w, i, false);
          for (uint64_t w = 0; w < words; ++w) write(spad, in.addr / 8 + w, i);
          break;
        default: break;
      }
    }
    Graph g;
    std::sort(edges_.begin(), edges_.end());
    edges_.erase(std::unique(edges_.begin(), edges_.end()), edges_.end());
    g.dep_begin.assign(n_ + 1, 0);
    g.user_begin.assign(n_ + 1, 0);
    for (auto [to, from] : edges_) {
      ++g.dep_begin[to + 1];
      ++g.user_begin[from + 1];
    }
    for (size_t i = 0; i < n_; ++i) {
      g.dep_begin[i + 1] += g.dep_begin[i];
      g.user_begin[i + 1] += g.user_begin[i];
    }
    g.deps.resize(edges_.size());
    g.users.resize(edges_.size());
    std::vector<uint32_t> fill(g.user_begin.begin(), g.user_begin.end() - 1);
    size_t k = 0;
    for (auto [to, from] : edges_) {
      g.deps[k++] = from;  // edges_ sorted by `to`, so deps come out grouped per instruction
      g.users[fill[from]++] = to;
    }
    return g;
  }

 private:
  const Trace& t_;
  uint32_t n_;
  std::vector<std::pair<uint32_t, uint32_t>> edges_;  // (to, from)
};

void validate(const Trace& t, const MachineConfig& c, std::vector<uint32_t>& producer) {
  STRATA_CHECK(t.instrs.size() < kNone, "sim::simulate(", t.name, "): too many instructions (", t.instrs.size(), ")");
  producer.assign(t.num_values, kNone);
  bool in_rev = false;
  for (size_t i = 0; i < t.instrs.size(); ++i) {
    const Instr& in = t.instrs[i];
    STRATA_CHECK(static_cast<size_t>(in.op) <= static_cast<size_t>(Op::Barrier), describe(t, i), ": unknown op code ",
                 static_cast<int>(in.op));
    if (in.phase == Phase::Reverse) in_rev = true;
    STRATA_CHECK(!(in_rev && in.phase == Phase::Forward), describe(t, i),
                 ": a FWD instruction after REV ones; the trace must list all FWD instructions first");
    for (uint32_t s : in.src) {
      if (s == kNone) continue;
      STRATA_CHECK(s < t.num_values && producer[s] != kNone, describe(t, i), " reads value ", s,
                   ", which no earlier instruction produces (num_values ", t.num_values, ")");
    }
    if (in.dst != kNone) {
      STRATA_CHECK(in.dst < t.num_values, describe(t, i), " produces value ", in.dst, " >= num_values ", t.num_values);
      STRATA_CHECK(producer[in.dst] == kNone, describe(t, i), " produces value ", in.dst,
                   ", already produced by instr ", producer[in.dst], " (values are SSA)");
      producer[in.dst] = static_cast<uint32_t>(i);
    }
    if (is_store(in.op)) STRATA_CHECK(in.src[0] != kNone, describe(t, i), " stores no value (src[0] is unset)");
    if (in.op == Op::Load || in.op == Op::TapeLoad || in.op == Op::SpadLoad)
      STRATA_CHECK(in.dst != kNone, describe(t, i), " loads into no value (dst is unset)");
    if (is_cache_op(in.op)) {
      STRATA_CHECK(in.space == Space::Dram, describe(t, i), ": expected address space Dram (through the cache)");
      STRATA_CHECK(in.bytes > 0, describe(t, i), ": zero-byte access");
    }
    if (is_spad_op(in.op) || is_stream(in.op)) {
      STRATA_CHECK(c.has_scratchpad, describe(t, i), " uses the scratchpad, but system ", c.name,
                   " has none (an Enzyme-style system runs Enzyme-style traces)");
      if (is_spad_op(in.op)) STRATA_CHECK(in.space == Space::Spad, describe(t, i), ": expected address space Spad");
    }
  }
  if (c.has_scratchpad)
    STRATA_CHECK(t.spad_bytes <= c.scratchpad.size_bytes, "sim::simulate(", t.name, "): the trace's plan uses ",
                 t.spad_bytes, " scratchpad bytes, more than the ", c.scratchpad.size_bytes, " bytes of system ",
                 c.name);
}

class Sim {
 public:
  Sim(const Trace& t, const MachineConfig& c, const Graph& g)
      : t_(t), c_(c), g_(g), cache_(c.cache), dram_(c.dram), n_(t.instrs.size()) {
    if (c.has_scratchpad) spad_ = std::make_unique<Scratchpad>(c.scratchpad);
    pending_.assign(n_, 0);
    done_.assign(n_, 0);
    fetched_.assign(n_, 0);
    issued_.assign(n_, 0);
    dep_time_.assign(n_, 0);
    fu_free_.assign(c.fus, 0);
    line_bytes_ = c.cache.line_bytes;
    for (size_t i = 0; i < n_; ++i) {
      const Instr& in = t.instrs[i];
      if (is_spad_op(in.op) || is_stream(in.op)) spad_->check_range(in.addr, in.bytes, describe(t, i));
    }
  }

  MachineReport run() {
    MachineReport r;
    r.trace = t_.name;
    r.system = c_.name;
    size_t split = 0;
    while (split < n_ && t_.instrs[split].phase == Phase::Forward) ++split;
    uint64_t t0 = 0;
    t0 = phase(0, split, t0, r.fwd);
    phase(split, n_, t0, r.rev);
    r.cache = cache_.stats();
    r.energy.cache_demand = demand_;
    r.energy.cache_fills = fills_;
    r.energy.cache_writebacks = r.cache.writebacks();
    if (spad_) {
      r.energy.spad_datapath = spad_->datapath_reads + spad_->datapath_writes;
      r.energy.spad_stream_words = spad_->stream_words_in + spad_->stream_words_out;
    }
    price(r.energy, c_.energy);
    r.sram_bytes = c_.sram_bytes();
    r.spad_bytes_used = t_.spad_bytes;
    return r;
  }

 private:
  using Event = std::pair<uint64_t, uint32_t>;  // (cycle, instr)

  void complete_at(uint32_t i, uint64_t cycle) { events_.emplace(cycle, i); }

  // Marks i done at `now` and releases its fetched users.
  void finish(uint32_t i, uint64_t now) {
    const Instr& in = t_.instrs[i];
    done_[i] = 1;
    ++done_count_;
    last_done_ = std::max(last_done_, now);
    if (in.op == Op::SpadStore || in.op == Op::StreamIn) spad_->set_full(in.addr, in.bytes, true);
    if (in.op == Op::Barrier) barrier_block_ = false;
    if (is_spad_op(in.op) || in.op == Op::SAlloc) --tape_in_flight_;
    const bool from_stream = is_stream(in.op);
    for (uint32_t k = g_.user_begin[i]; k < g_.user_begin[i + 1]; ++k) {
      const uint32_t u = g_.users[k];
      if (!fetched_[u]) continue;
      if (--pending_[u] == 0) {
        if (from_stream && t_.instrs[u].op == Op::SpadLoad && dep_time_[u] < now) {
          ++cur_->spad_empty_waits;
          cur_->spad_empty_wait_cycles += now - dep_time_[u];
        }
        if (!is_stream(t_.instrs[u].op)) ready_.push(u);
      } else if (!from_stream) {
        dep_time_[u] = std::max(dep_time_[u], now);
      }
    }
  }

  // Whether i no longer holds its window entry: completed, or a store that has issued (stores
  // leave the window into the store buffer; later accesses to their word still wait for them).
  bool retired(uint32_t i) const { return done_[i] || (issued_[i] && is_store(t_.instrs[i].op)); }

  uint32_t count_pending(uint32_t i) const {
    uint32_t p = 0;
    for (uint32_t k = g_.dep_begin[i]; k < g_.dep_begin[i + 1]; ++k) p += done_[g_.deps[k]] ? 0 : 1;
    return p;
  }

  // Tries to issue datapath instruction i at `now`; returns false when its resource is busy and
  // lowers `retry` to the cycle it may free.
  bool try_issue(uint32_t i, uint64_t now, uint64_t& retry) {
    const Instr& in = t_.instrs[i];
    if (is_arith(in.op)) {
      auto fu = std::min_element(fu_free_.begin(), fu_free_.end());
      if (*fu > now) {
        retry = std::min(retry, *fu);
        return false;
      }
      const uint32_t lat = op_latency(in.op);
      *fu = now + (op_pipelined(in.op) ? 1 : lat);
      ++cur_->fu_ops;
      complete_at(i, now + lat);
      return true;
    }
    if (is_cache_op(in.op)) return try_cache(i, in, now, retry);
    if (is_spad_op(in.op)) {
      if (!spad_->bank_free(in.addr, now)) {
        retry = std::min(retry, now + 1);
        return false;
      }
      spad_->take_bank(in.addr, now);
      if (in.op == Op::SpadLoad) {
        STRATA_ASSERT(spad_->all_full(in.addr, in.bytes), describe(t_, i), " issued on an empty slot");
        ++spad_->datapath_reads;
        ++cur_->spad_loads;
      } else {
        spad_->set_full(in.addr, in.bytes, false);
        ++spad_->datapath_writes;
        ++cur_->spad_stores;
      }
      complete_at(i, now + spad_->config().latency);
      return true;
    }
    // SAlloc and anything else that needs no resource
    complete_at(i, now + op_latency(in.op));
    return true;
  }

  bool try_cache(uint32_t i, const Instr& in, uint64_t now, uint64_t& retry) {
    if (ports_cycle_ != now) {
      ports_cycle_ = now;
      ports_used_ = 0;
    }
    if (ports_used_ >= c_.cache.ports) {
      retry = std::min(retry, now + 1);
      return false;
    }
    while (!mshr_.empty() && mshr_.top() <= now) mshr_.pop();
    const uint64_t first = in.addr / line_bytes_, last = (in.addr + in.bytes - 1) / line_bytes_;
    uint32_t misses = 0;
    for (uint64_t l = first; l <= last; ++l) misses += cache_.contains(l * line_bytes_) ? 0 : 1;
    if (misses > 0 && mshr_.size() + misses > c_.cache.mshrs) {
      retry = std::min(retry, mshr_.empty() ? now + 1 : mshr_.top());
      return false;
    }
    ++ports_used_;
    const bool write = in.op == Op::Store || in.op == Op::TapeStore;
    const AccessClass cls =
        (in.op == Op::TapeLoad || in.op == Op::TapeStore) ? AccessClass::Tape : AccessClass::Program;
    uint64_t done = now + c_.cache.hit_latency;
    for (uint64_t l = first; l <= last; ++l) {
      ++demand_;
      const CacheOutcome o = cache_.access(l * line_bytes_, write, cls);
      if (o.writeback) dram_.write(now, line_bytes_);
      if (o.hit) {
        done = std::max(done, o.ready_at);
      } else {
        ++fills_;
        const uint64_t fill = dram_.read(now, line_bytes_);
        cache_.set_ready(o.way, fill);
        mshr_.push(fill);
        done = std::max(done, fill);
      }
    }
    complete_at(i, done);
    return true;
  }

  // Simulates instructions [begin, end) (one phase) from cycle `start`; returns its end cycle.
  uint64_t phase(size_t begin, size_t end, uint64_t start, PhaseReport& rep) {
    cur_ = &rep;
    const CacheStats cache0 = cache_.stats();
    const uint64_t rd0 = dram_.bytes_read(), wr0 = dram_.bytes_written();
    std::vector<uint32_t> dp;
    StreamEngine fwd_s, rev_s;
    fwd_s.name = "FWD-S";
    for (size_t i = begin; i < end; ++i) {
      const Op op = t_.instrs[i].op;
      if (op == Op::StreamOut)
        fwd_s.queue.push_back(static_cast<uint32_t>(i));
      else if (op == Op::StreamIn)
        rev_s.queue.push_back(static_cast<uint32_t>(i));
      else
        dp.push_back(static_cast<uint32_t>(i));
      if (op == Op::Barrier) ++rep.layers;
    }
    rep.instrs = end - begin;
    done_count_ = 0;
    last_done_ = start;
    barrier_block_ = false;
    uint64_t now = start;
    for (StreamEngine* e : {&fwd_s, &rev_s})
      for (uint32_t i : e->queue) {
        fetched_[i] = 1;
        pending_[i] = count_pending(i);
      }
    size_t head = 0, fetch = 0;
    uint32_t barrier = kNone;
    const size_t total = end - begin;
    while (done_count_ < total) {
      while (!events_.empty() && events_.top().first <= now) {
        const auto [at, i] = events_.top();
        events_.pop();
        finish(i, at);
      }
      while (head < dp.size() && retired(dp[head])) ++head;
      // fetch into the window
      while (fetch < dp.size() && fetch < head + c_.window && !barrier_block_) {
        const uint32_t i = dp[fetch++];
        const Op op = t_.instrs[i].op;
        fetched_[i] = 1;
        pending_[i] = count_pending(i);
        dep_time_[i] = now;
        if (is_spad_op(op) || op == Op::SAlloc) ++tape_in_flight_;
        if (op == Op::Const || op == Op::Input) {
          STRATA_ASSERT(pending_[i] == 0);
          finish(i, now);
        } else if (op == Op::Barrier) {
          barrier_block_ = true;
          barrier = i;
        } else if (pending_[i] == 0) {
          ready_.push(i);
        }
        while (head < dp.size() && retired(dp[head])) ++head;
      }
      uint64_t retry = UINT64_MAX;
      // the barrier: once it is the oldest incomplete datapath instruction
      const bool drained = head < dp.size() && dp[head] == barrier;
      if (barrier != kNone && tape_in_flight_ == 0 && (!c_.barrier_drains || drained)) {
        complete_at(barrier, now + c_.barrier_cycles);
        barrier = kNone;
      }
      // stream engines, in program order, one start per cycle each
      for (StreamEngine* e : {&fwd_s, &rev_s}) {
        if (e->head < e->queue.size() && pending_[e->queue[e->head]] == 0 && e->last_start != now) {
          const uint32_t i = e->queue[e->head++];
          const Instr& in = t_.instrs[i];
          if (in.op == Op::StreamOut)
            STRATA_ASSERT(spad_->all_full(in.addr, in.bytes), describe(t_, i), " streamed out an empty slot");
          complete_at(i, e->start(in, now, dram_, *spad_));
          ++rep.streams;
          rep.stream_bytes += in.bytes;
          if (e->head < e->queue.size() && pending_[e->queue[e->head]] == 0) retry = std::min(retry, now + 1);
        }
      }
      // datapath issue, oldest first
      deferred_.clear();
      while (!ready_.empty()) {
        const uint32_t i = ready_.top();
        ready_.pop();
        if (try_issue(i, now, retry)) {
          issued_[i] = 1;
        } else {
          deferred_.push_back(i);
        }
      }
      for (uint32_t i : deferred_) ready_.push(i);
      if (done_count_ >= total) break;
      // Stores that issued this cycle may have freed window entries: fetch again this cycle.
      while (head < dp.size() && retired(dp[head])) ++head;
      if (fetch < dp.size() && fetch < head + c_.window && !barrier_block_) retry = now;
      uint64_t next = retry;
      if (!events_.empty()) next = std::min(next, events_.top().first);
      STRATA_ASSERT(next != UINT64_MAX, "sim::simulate(", t_.name, "): deadlock at cycle ", now, " with ",
                    total - done_count_, " instructions left");
      now = std::max(now, next);
    }
    // Posted writes still on the channel belong to this phase.
    const uint64_t finish_at = std::max<uint64_t>(last_done_, Dram::ceil_cycle(dram_.channel_free()));
    rep.cycles = finish_at - start;
    const CacheStats& c1 = cache_.stats();
    for (int k = 0; k < 2; ++k) {
      rep.cache.cls[k].hits = c1.cls[k].hits - cache0.cls[k].hits;
      rep.cache.cls[k].misses = c1.cls[k].misses - cache0.cls[k].misses;
      rep.cache.cls[k].writebacks = c1.cls[k].writebacks - cache0.cls[k].writebacks;
    }
    rep.dram_read_bytes = dram_.bytes_read() - rd0;
    rep.dram_write_bytes = dram_.bytes_written() - wr0;
    return finish_at;
  }

  const Trace& t_;
  const MachineConfig& c_;
  const Graph& g_;
  Cache cache_;
  Dram dram_;
  std::unique_ptr<Scratchpad> spad_;
  size_t n_;
  uint64_t line_bytes_ = 64;
  std::vector<uint32_t> pending_;
  std::vector<uint8_t> done_, fetched_, issued_;
  std::vector<uint64_t> dep_time_;
  std::vector<uint64_t> fu_free_;
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> events_;
  std::priority_queue<uint32_t, std::vector<uint32_t>, std::greater<uint32_t>> ready_;
  std::priority_queue<uint64_t, std::vector<uint64_t>, std::greater<uint64_t>> mshr_;
  std::vector<uint32_t> deferred_;
  uint64_t ports_cycle_ = UINT64_MAX;
  uint32_t ports_used_ = 0;
  size_t done_count_ = 0;
  uint64_t last_done_ = 0;
  bool barrier_block_ = false;
  uint64_t tape_in_flight_ = 0;  // fetched scratchpad accesses and SAllocs not yet completed
  uint64_t demand_ = 0, fills_ = 0;
  PhaseReport* cur_ = nullptr;
};

}  // namespace

MachineReport simulate(const Trace& trace, const MachineConfig& config) {
  STRATA_CHECK(config.fus > 0, "sim::simulate: system ", config.name, " has no functional units (fus = 0)");
  STRATA_CHECK(config.window > 0, "sim::simulate: system ", config.name, " has window = 0");
  std::vector<uint32_t> producer;
  validate(trace, config, producer);
  // Build the cache/DRAM/scratchpad first so a bad configuration is reported before the graph work.
  Cache probe_cache(config.cache);
  Dram probe_dram(config.dram);
  if (config.has_scratchpad) Scratchpad probe_spad(config.scratchpad);
  GraphBuilder gb(trace);
  const Graph g = gb.build(producer);
  Sim sim(trace, config, g);
  return sim.run();
}

}  // namespace strata::sim
