#include "sim/systems.h"

#include "core/error.h"

namespace strata::sim {

namespace {

struct Kind {
  const char* prefix;
  TraceMode mode;
};
constexpr Kind kKinds[] = {{"Enzyme", TraceMode::Enzyme}, {"AoS", TraceMode::AoS}, {"Tflow", TraceMode::TapeFlow}};

std::string size_name(uint64_t bytes) { return std::to_string(bytes / 1024) + "k"; }

}  // namespace

const char* trace_mode_name(TraceMode mode) {
  switch (mode) {
    case TraceMode::Enzyme: return "enzyme";
    case TraceMode::AoS: return "aos";
    case TraceMode::TapeFlow: return "tapeflow";
  }
  return "?";
}

System make_system(TraceMode mode, uint64_t cache_bytes, uint64_t spad_bytes) {
  System s;
  s.mode = mode;
  for (const Kind& k : kKinds)
    if (k.mode == mode) s.name = std::string(k.prefix) + "_" + size_name(cache_bytes);
  MachineConfig& m = s.machine;
  m.name = s.name;
  m.cache.size_bytes = cache_bytes;
  m.cache.associativity = table3_cache_associativity(cache_bytes);
  m.cache.line_bytes = 64;
  m.cache.hit_latency = 2;
  m.cache.ports = 2;
  m.cache.mshrs = 8;
  m.energy.cache_access_pj = table3_cache_energy_pj(cache_bytes);
  m.energy.spad_access_pj = kTable3ScratchpadEnergyPj;
  m.has_scratchpad = mode == TraceMode::TapeFlow;
  if (m.has_scratchpad) {
    STRATA_CHECK(spad_bytes >= 8 && spad_bytes % 8 == 0, "sim::make_system(", s.name,
                 "): scratchpad size must be a positive multiple of 8 bytes, got ", spad_bytes);
    m.scratchpad.size_bytes = spad_bytes;
    m.scratchpad.banks = 8;
    while (m.scratchpad.banks > spad_bytes / 8) m.scratchpad.banks /= 2;
    m.scratchpad.latency = 1;
    if (spad_bytes != 512) {
      s.name += "_spad" + (spad_bytes % 1024 ? std::to_string(spad_bytes) + "B" : size_name(spad_bytes));
      m.name = s.name;
    }
  }
  return s;
}

std::vector<std::string> system_names() {
  std::vector<std::string> out;
  for (const Kind& k : kKinds)
    for (uint64_t size : kTable3CacheSizes) out.push_back(std::string(k.prefix) + "_" + size_name(size));
  return out;
}

std::vector<std::string> paper_system_names() {
  return {"Enzyme_32k", "Enzyme_1k", "Tflow_32k", "Tflow_2k", "Tflow_1k"};
}

System system_by_name(const std::string& name) {
  for (const Kind& k : kKinds)
    for (uint64_t size : kTable3CacheSizes)
      if (name == std::string(k.prefix) + "_" + size_name(size)) return make_system(k.mode, size);
  STRATA_FAIL("unknown system '", name,
              "'; expected Enzyme_<size>, AoS_<size> or Tflow_<size> with <size> one of Table III's caches "
              "1k, 2k, 4k, 8k, 16k, 32k, 64k, 128k (the paper's: Enzyme_32k, Enzyme_1k, Tflow_32k, Tflow_2k, "
              "Tflow_1k)");
}

}  // namespace strata::sim
