#include "sim/tapeflow.h"

#include <algorithm>
#include <map>
#include <unordered_map>

#include "core/error.h"

namespace strata::sim {

namespace {

uint64_t align64(uint64_t a) { return (a + 63) & ~uint64_t{63}; }

uint64_t key_of(uint32_t loop, uint32_t iter) { return (uint64_t{loop} << 32) | iter; }

uint32_t first_reverse(const Trace& t) {
  uint32_t i = 0;
  while (i < t.instrs.size() && t.instrs[i].phase == Phase::Forward) ++i;
  return i;
}

void check_enzyme_shaped(const Program& p, const char* pass) {
  for (const TapeEntry& e : p.tape) {
    STRATA_CHECK(e.store < p.trace.instrs.size() && e.load < p.trace.instrs.size() &&
                     p.trace.instrs[e.store].op == Op::TapeStore && p.trace.instrs[e.load].op == Op::TapeLoad,
                 "sim::", pass, " '", p.trace.name,
                 "': expects an Enzyme-style program (TapeStore/TapeLoad tape entries, as "
                 "Tracer::finish() or aos_layout() produce)");
  }
  STRATA_CHECK(p.origin.size() == p.trace.instrs.size(), "sim::", pass, " '", p.trace.name, "': origin has ",
               p.origin.size(), " entries for ", p.trace.instrs.size(), " instructions");
}

}  // namespace

Program aos_layout(const Program& enzyme) {
  check_enzyme_shaped(enzyme, "aos_layout");
  Program p = enzyme;
  const auto& in = p.trace.instrs;
  const uint32_t nloops = static_cast<uint32_t>(p.loop_iterations.size());
  auto lidx = [&](uint32_t loop) { return loop == kNone ? nloops : loop; };

  // REV-use rank of each entry within its (loop, iteration): order of the TapeLoads.
  std::unordered_map<uint64_t, std::vector<uint32_t>> groups;  // (loop, iter) -> entries
  for (uint32_t e = 0; e < p.tape.size(); ++e) {
    const Instr& st = in[p.tape[e].store];
    groups[key_of(st.loop, st.iter)].push_back(e);
  }
  std::vector<uint32_t> rank(p.tape.size());
  for (auto& [k, es] : groups) {
    std::sort(es.begin(), es.end(), [&](uint32_t a, uint32_t b) { return p.tape[a].load < p.tape[b].load; });
    for (uint32_t r = 0; r < es.size(); ++r) rank[es[r]] = r;
  }
  // Per site: the rank in the site's first iteration.
  const uint32_t nsites = static_cast<uint32_t>(p.sites.size());
  std::vector<uint32_t> first_iter(nsites, kNone), site_rank(nsites, 0);
  for (uint32_t e = 0; e < p.tape.size(); ++e) {
    const uint32_t s = p.tape[e].site;
    const uint32_t it = in[p.tape[e].store].iter;
    if (first_iter[s] == kNone || it < first_iter[s]) {
      first_iter[s] = it;
      site_rank[s] = rank[e];
    }
  }
  // Slots per loop, ordered by REV use (ties: FWD ordinal).
  std::vector<std::vector<uint32_t>> loop_sites(nloops + 1);
  for (uint32_t s = 0; s < nsites; ++s) loop_sites[lidx(p.sites[s].loop)].push_back(s);
  std::vector<uint64_t> slot(nsites), rsize(nloops + 1, 0), region_base(nloops + 1, 0);
  uint64_t at = p.tape_base;
  for (uint32_t l = 0; l <= nloops; ++l) {
    auto& ss = loop_sites[l];
    if (ss.empty()) continue;
    std::sort(ss.begin(), ss.end(), [&](uint32_t a, uint32_t b) {
      if (site_rank[a] != site_rank[b]) return site_rank[a] < site_rank[b];
      return p.sites[a].ordinal < p.sites[b].ordinal;
    });
    for (uint32_t k = 0; k < ss.size(); ++k) slot[ss[k]] = 8 * uint64_t{k};
    rsize[l] = 8 * uint64_t{ss.size()};
    region_base[l] = at;
    const uint64_t iters = l == nloops ? 1 : p.loop_iterations[l];
    at += align64(rsize[l] * iters);
  }
  for (const TapeEntry& e : p.tape) {
    Instr& st = p.trace.instrs[e.store];
    const uint32_t l = lidx(st.loop);
    st.addr = region_base[l] + uint64_t{st.iter} * rsize[l] + slot[e.site];
    p.trace.instrs[e.load].addr = st.addr;
  }
  p.trace.name = enzyme.trace.name;
  return p;
}

TapeflowPlan plan_layers(const Program& aos, uint64_t spad_bytes) {
  check_enzyme_shaped(aos, "plan_layers");
  STRATA_CHECK(spad_bytes > 0 && spad_bytes % 8 == 0, "sim::tapeflow '", aos.trace.name, "': scratchpad size ",
               spad_bytes, " bytes is not a positive multiple of 8");
  const auto& in = aos.trace.instrs;
  const uint32_t nfwd = first_reverse(aos.trace);
  const uint64_t cap = spad_bytes / 8;

  std::unordered_map<uint64_t, uint64_t> iter_count;
  std::vector<uint32_t> entry_at(nfwd, kNone);
  for (uint32_t e = 0; e < aos.tape.size(); ++e) {
    const Instr& st = in[aos.tape[e].store];
    ++iter_count[key_of(st.loop, st.iter)];
    entry_at[aos.tape[e].store] = e;
  }

  TapeflowPlan plan;
  plan.spad_bytes = spad_bytes;
  plan.layers.push_back(TapeLayer{});
  uint64_t cur_key = ~uint64_t{0};
  uint32_t prev_store = kNone;
  auto cut = [&](uint32_t at) {
    plan.layers.back().end = at;
    TapeLayer l;
    l.begin = at;
    plan.layers.push_back(l);
  };
  uint32_t i = 0;
  while (i < nfwd) {
    // A unit: instruction x and the tape stores right after it.
    const uint32_t x = i++;
    std::vector<uint32_t> stores;
    while (i < nfwd && in[i].op == Op::TapeStore) stores.push_back(entry_at[i++]);
    if (stores.empty()) continue;
    STRATA_CHECK(stores.size() <= cap, "sim::tapeflow '", aos.trace.name, "': scratchpad of ", spad_bytes,
                 " bytes is smaller than the ", 8 * stores.size(), " tape bytes one instruction stores; use at least ",
                 8 * stores.size(), " bytes");
    const Instr& st = in[aos.tape[stores[0]].store];
    const uint64_t key = key_of(st.loop, st.iter);
    TapeLayer* L = &plan.layers.back();
    if (L->entries.empty()) {
      cur_key = key;
    } else if (key != cur_key) {
      if (st.loop != L->loop || L->entries.size() + iter_count[key] > cap) {
        uint32_t c = x;
        for (uint32_t k = prev_store + 1; k < x; ++k)
          if (in[k].loop == st.loop && in[k].iter == st.iter) {
            c = k;
            break;
          }
        cut(c);
      }
      cur_key = key;
    } else if (L->entries.size() + stores.size() > cap) {
      cut(x);
    }
    L = &plan.layers.back();
    if (L->entries.empty()) L->loop = st.loop;
    for (uint32_t e : stores) L->entries.push_back(e);
    prev_store = i - 1;
  }
  plan.layers.back().end = nfwd;

  // Pass 3 (tiles) and pass 4 (offsets in memory order).
  uint64_t used = 0, streamed = 0;
  plan.tiles.push_back(TapeTile{});
  for (uint32_t l = 0; l < plan.layers.size(); ++l) {
    TapeLayer& L = plan.layers[l];
    L.bytes = 8 * uint64_t{L.entries.size()};
    std::sort(L.entries.begin(), L.entries.end(),
              [&](uint32_t a, uint32_t b) { return in[aos.tape[a].store].addr < in[aos.tape[b].store].addr; });
    if (used + L.bytes > spad_bytes) {
      TapeTile& t = plan.tiles.back();
      t.bytes = used;
      t.dram = aos.tape_base + streamed;
      streamed += used;
      TapeTile n;
      n.first_layer = l;
      plan.tiles.push_back(n);
      used = 0;
    }
    L.base = used;
    used += L.bytes;
    L.tile = static_cast<uint32_t>(plan.tiles.size() - 1);
    plan.tiles.back().last_layer = l;
  }
  TapeTile& last = plan.tiles.back();
  last.bytes = used;
  last.dram = aos.tape_base + streamed;
  last.resident = true;
  for (const TapeTile& t : plan.tiles) plan.max_tile_bytes = std::max(plan.max_tile_bytes, t.bytes);
  STRATA_ASSERT(plan.max_tile_bytes <= spad_bytes, "tapeflow plan exceeds the scratchpad");
  return plan;
}

Program tapeflow(const Program& enzyme, uint64_t spad_bytes, TapeflowPlan* plan_out) {
  const Program aos = aos_layout(enzyme);
  TapeflowPlan plan = plan_layers(aos, spad_bytes);
  const auto& in = aos.trace.instrs;
  const uint32_t nfwd = first_reverse(aos.trace);
  const uint32_t n = static_cast<uint32_t>(in.size());

  std::vector<uint32_t> layer_of(nfwd);
  for (uint32_t l = 0; l < plan.layers.size(); ++l)
    for (uint32_t k = plan.layers[l].begin; k < plan.layers[l].end; ++k) layer_of[k] = l;
  std::vector<uint64_t> offset(aos.tape.size());
  std::vector<uint32_t> entry_of(n, kNone);
  for (const TapeLayer& L : plan.layers)
    for (uint32_t k = 0; k < L.entries.size(); ++k) offset[L.entries[k]] = L.base + 8 * uint64_t{k};
  for (uint32_t e = 0; e < aos.tape.size(); ++e) {
    entry_of[aos.tape[e].store] = e;
    entry_of[aos.tape[e].load] = e;
  }

  Program p;
  p.trace.name = aos.trace.name;
  p.trace.loop_names = aos.trace.loop_names;
  p.trace.num_values = aos.trace.num_values;
  p.trace.tape_bytes = aos.trace.tape_bytes;
  p.trace.spad_bytes = plan.max_tile_bytes;
  p.arrays = aos.arrays;
  p.sites = aos.sites;
  p.loop_iterations = aos.loop_iterations;
  p.tape_base = aos.tape_base;
  p.tape = aos.tape;
  auto& out = p.trace.instrs;
  out.reserve(n + 4 * plan.layers.size());
  std::vector<uint32_t> new_index(n, kNone);
  std::vector<uint32_t> salloc_at(plan.layers.size(), kNone);

  auto marker = [&](Op op, Phase ph, const TapeLayer& L, uint32_t origin) {
    Instr m;
    m.op = op;
    m.phase = ph;
    m.loop = L.loop;
    m.iter = L.begin < nfwd ? in[L.begin].iter : 0;
    m.bytes = 0;
    out.push_back(m);
    p.origin.push_back(origin == kNone ? static_cast<uint32_t>(out.size() - 1) : origin);
    return &out.back();
  };
  auto copy = [&](uint32_t k, uint32_t origin) {
    new_index[k] = static_cast<uint32_t>(out.size());
    Instr c = in[k];
    const uint32_t e = entry_of[k];
    if (e != kNone) {
      c.op = c.op == Op::TapeStore ? Op::SpadStore : Op::SpadLoad;
      c.space = Space::Spad;
      c.addr = offset[e];
      c.addr2 = 0;
    }
    out.push_back(c);
    p.origin.push_back(origin == kNone ? static_cast<uint32_t>(out.size() - 1) : origin);
  };

  // FWD.
  for (uint32_t l = 0; l < plan.layers.size(); ++l) {
    const TapeLayer& L = plan.layers[l];
    salloc_at[l] = static_cast<uint32_t>(out.size());
    Instr* s = marker(Op::SAlloc, Phase::Forward, L, kNone);
    s->addr = L.base;
    s->bytes = static_cast<uint32_t>(L.bytes);
    for (uint32_t k = L.begin; k < L.end; ++k) copy(k, kNone);
    marker(Op::Barrier, Phase::Forward, L, kNone);
    const TapeTile& t = plan.tiles[L.tile];
    if (t.last_layer == l && !t.resident) {
      Instr* so = marker(Op::StreamOut, Phase::Forward, L, kNone);
      so->space = Space::Spad;
      so->addr = 0;
      so->addr2 = t.dram;
      so->bytes = static_cast<uint32_t>(t.bytes);
    }
  }
  // REV: layers in reverse; a tile streams in at the head of its last layer.
  uint32_t cur = kNone;
  auto enter = [&](uint32_t l) {
    const uint32_t from = cur == kNone ? static_cast<uint32_t>(plan.layers.size()) : cur;
    STRATA_ASSERT(l < from, "tapeflow: REV origins are not in reverse FWD order");
    if (cur != kNone) marker(Op::Barrier, Phase::Reverse, plan.layers[cur], salloc_at[cur]);
    for (uint32_t m = from; m-- > l;) {
      const TapeTile& t = plan.tiles[plan.layers[m].tile];
      if (t.last_layer == m && !t.resident) {
        Instr* si = marker(Op::StreamIn, Phase::Reverse, plan.layers[m], salloc_at[m]);
        si->space = Space::Spad;
        si->addr = 0;
        si->addr2 = t.dram;
        si->bytes = static_cast<uint32_t>(t.bytes);
      }
    }
    Instr* s = marker(Op::SAlloc, Phase::Reverse, plan.layers[l], salloc_at[l]);
    s->addr = plan.layers[l].base;
    s->bytes = static_cast<uint32_t>(plan.layers[l].bytes);
    cur = l;
  };
  for (uint32_t k = nfwd; k < n; ++k) {
    const uint32_t o = aos.origin[k];
    STRATA_ASSERT(o < nfwd, "tapeflow: REV instruction without a FWD origin");
    const uint32_t l = layer_of[o];
    if (l != cur) enter(l);
    copy(k, new_index[o]);
  }
  if (cur != kNone) marker(Op::Barrier, Phase::Reverse, plan.layers[cur], salloc_at[cur]);

  for (TapeEntry& e : p.tape) {
    e.store = new_index[e.store];
    e.load = new_index[e.load];
  }
  if (plan_out) *plan_out = std::move(plan);
  return p;
}

}  // namespace strata::sim
