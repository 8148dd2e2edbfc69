// The configuration layer (core/config.h): every STRATA_* variable strict, one error style.

#include "core/config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <deque>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "tests/cpp/error_text.h"
#include "tests/cpp/scoped_env.h"

namespace {

using namespace strata;
using ::testing::HasSubstr;
using ::testing::StartsWith;
using testing_util::error_of;
using testing_util::ScopedEnv;

TEST(Config, ParseBytes) {
  EXPECT_EQ(parse_bytes("1048576", "x"), 1048576u);
  EXPECT_EQ(parse_bytes("512M", "x"), 512ull << 20);
  EXPECT_EQ(parse_bytes("8G", "x"), 8ull << 30);
  EXPECT_EQ(parse_bytes("2GiB", "x"), 2ull << 30);
  EXPECT_EQ(parse_bytes("4kb", "x"), 4096u);
  EXPECT_EQ(parse_bytes(" 3M ", "x"), 3ull << 20);
  for (const char* bad : {"", "12X", "-5M", "M", "1.5G", "4 G"})
    EXPECT_THAT(
        error_of([&] { parse_bytes(bad, "--fast-budget"); }),
        StartsWith(std::string("--fast-budget: expected a byte count (e.g. 1048576, 512M, 8G), got '") + bad + "'"))
        << bad;
  EXPECT_THAT(error_of([] { parse_bytes("99999999999T", "v"); }), HasSubstr("v: '99999999999T' is too large"));
  EXPECT_THAT(error_of([] { parse_bytes("99999999999999999999", "v"); }), HasSubstr("is too large"));
}

TEST(Config, PmBackendNamesRoundTrip) {
  for (PmBackend b : {PmBackend::Auto, PmBackend::Memkind, PmBackend::Mmap, PmBackend::Numa})
    EXPECT_EQ(parse_pm_backend(pm_backend_name(b), "x"), b);
  for (const char* bad : {"", "MMAP", "tape", "mmap "})
    EXPECT_THAT(error_of([&] { parse_pm_backend(bad, "backend"); }),
                StartsWith(std::string("backend: expected auto, memkind, mmap or numa, got '") + bad + "'"))
        << bad;
}

TEST(Config, SlowTierModelSpellings) {
  using Mode = SlowTierModelSpec::Mode;
  EXPECT_EQ(parse_slow_tier_model("auto", "m").mode, Mode::Auto);
  EXPECT_EQ(parse_slow_tier_model("off", "m").mode, Mode::Off);
  EXPECT_EQ(parse_slow_tier_model("default", "m").mode, Mode::Default);
  EXPECT_EQ(parse_slow_tier_model("on", "m").mode, Mode::Default);
  for (const char* text : {"read=8,write=2.5,latency=300", "8,2.5,300"}) {
    const SlowTierModelSpec s = parse_slow_tier_model(text, "m");
    EXPECT_EQ(s.mode, Mode::Custom) << text;
    EXPECT_EQ(s.read_gbps, 8);
    EXPECT_EQ(s.write_gbps, 2.5);
    EXPECT_EQ(s.latency_ns, 300);
    EXPECT_EQ(s.to_string(), "8,2.5,300");  // what the parser reads back
    EXPECT_EQ(s.mode_name(), "custom");
  }
  EXPECT_EQ(parse_slow_tier_model("1,1,0", "m").latency_ns, 0);
}

TEST(Config, SlowTierModelRejectsEverythingElse) {
  // Spellings: the old environment parser (sscanf) took " 8" and "8GB" as 8 and stopped reading.
  for (const char* bad :
       {"", "fast", "1,2", "1,2,3,4", "read=8,write=2", "read=8,2,3", "8,write=2,latency=3", "write=2,read=8,latency=3",
        "read= 8,write=2,latency=3", "8GB,2,3", "0x10,2,3", "1,,3", "ON", "nan,1,1", "1e999,1,1"})
    EXPECT_THAT(error_of([&] { parse_slow_tier_model(bad, "STRATA_SLOW_MODEL"); }),
                StartsWith(std::string("STRATA_SLOW_MODEL: expected auto, off, default, read=R,write=W,latency=L or "
                                       "R,W,L (read and write GB/s, latency ns), got '") +
                           bad + "'"))
        << bad;
  // Numbers out of range: one message, the same as SlowTierModelSpec::custom's.
  for (const char* bad : {"0,1,1", "1,-2,1", "1,1,-1", "read=0,write=1,latency=1"})
    EXPECT_THAT(error_of([&] { parse_slow_tier_model(bad, "--slow-tier-model"); }),
                StartsWith("--slow-tier-model: read and write bandwidths must be positive and the latency "
                           "non-negative (finite numbers), got read="))
        << bad;
}

TEST(Config, UnsetVariablesGiveTheDefaults) {
  std::deque<ScopedEnv> unset;
  for (const char* v : {"STRATA_FAST_BYTES", "STRATA_SLOW_BYTES", "STRATA_SLOW_DIR", "STRATA_SLOW_BACKEND",
                        "STRATA_SLOW_NUMA_NODE", "STRATA_SLOW_MODEL", "STRATA_DRAM_GBPS", "STRATA_DRAM_GATHER_GBPS",
                        "STRATA_MEMORY", "STRATA_NUM_THREADS", "STRATA_DNNL_PRIMITIVES"})
    unset.emplace_back(v, std::nullopt);
  EXPECT_FALSE(environment::fast_bytes() || environment::slow_bytes() || environment::slow_dir() ||
               environment::slow_backend() || environment::slow_numa_node() || environment::slow_model() ||
               environment::dram_gbps() || environment::dram_gather_gbps() || environment::num_threads() ||
               environment::dnnl_primitives());
  EXPECT_EQ(environment::memory_kind(), MemoryKind::Tiered);
}

TEST(Config, GoodValues) {
  {
    ScopedEnv a("STRATA_FAST_BYTES", "64M"), b("STRATA_SLOW_BYTES", "1G"), c("STRATA_SLOW_DIR", "/var/tmp"),
        d("STRATA_SLOW_BACKEND", "numa"), e("STRATA_SLOW_NUMA_NODE", "1"), f("STRATA_SLOW_MODEL", "off"),
        g("STRATA_DRAM_GBPS", "12.5"), h("STRATA_DRAM_GATHER_GBPS", "3"), i("STRATA_MEMORY", "dram"),
        j("STRATA_NUM_THREADS", "2"), k("STRATA_DNNL_PRIMITIVES", "never");
    EXPECT_EQ(environment::fast_bytes(), 64ull << 20);
    EXPECT_EQ(environment::slow_bytes(), 1ull << 30);
    EXPECT_EQ(environment::slow_dir(), "/var/tmp");
    EXPECT_EQ(environment::slow_backend(), PmBackend::Numa);
    EXPECT_EQ(environment::slow_numa_node(), 1);
    EXPECT_EQ(environment::slow_model()->mode, SlowTierModelSpec::Mode::Off);
    EXPECT_EQ(environment::dram_gbps(), 12.5);
    EXPECT_EQ(environment::dram_gather_gbps(), 3.0);
    EXPECT_EQ(environment::memory_kind(), MemoryKind::Dram);
    EXPECT_EQ(environment::num_threads(), 2);
    EXPECT_EQ(environment::dnnl_primitives(), DnnlPrimitives::Never);
  }
  for (const auto& [text, mode] :
       std::vector<std::pair<const char*, DnnlPrimitives>>{{"auto", DnnlPrimitives::Auto},
                                                           {"1", DnnlPrimitives::Always},
                                                           {"on", DnnlPrimitives::Always},
                                                           {"always", DnnlPrimitives::Always},
                                                           {"0", DnnlPrimitives::Never},
                                                           {"off", DnnlPrimitives::Never}}) {
    ScopedEnv v("STRATA_DNNL_PRIMITIVES", text);
    EXPECT_EQ(environment::dnnl_primitives(), mode) << text;
  }
  ScopedEnv tiered("STRATA_MEMORY", "tiered");
  EXPECT_EQ(environment::memory_kind(), MemoryKind::Tiered);
}

// Every variable: a bad value (the empty string included) is an error that names the variable,
// quotes the value and says what is accepted; none is ignored.
struct BadValue {
  const char* variable;
  const char* value;
  const char* message;  // the start of the error
};

void read_variable(const std::string& name) {
  if (name == "STRATA_FAST_BYTES")
    environment::fast_bytes();
  else if (name == "STRATA_SLOW_BYTES")
    environment::slow_bytes();
  else if (name == "STRATA_SLOW_DIR")
    environment::slow_dir();
  else if (name == "STRATA_SLOW_BACKEND")
    environment::slow_backend();
  else if (name == "STRATA_SLOW_NUMA_NODE")
    environment::slow_numa_node();
  else if (name == "STRATA_SLOW_MODEL")
    environment::slow_model();
  else if (name == "STRATA_DRAM_GBPS")
    environment::dram_gbps();
  else if (name == "STRATA_DRAM_GATHER_GBPS")
    environment::dram_gather_gbps();
  else if (name == "STRATA_MEMORY")
    environment::memory_kind();
  else if (name == "STRATA_NUM_THREADS")
    environment::num_threads();
  else if (name == "STRATA_DNNL_PRIMITIVES")
    environment::dnnl_primitives();
  else
    FAIL() << "no reader for " << name;
}

TEST(Config, BadValuesNameTheVariableTheValueAndWhatIsAccepted) {
  const std::vector<BadValue> cases = {
      {"STRATA_FAST_BYTES", "lots", "expected a byte count (e.g. 1048576, 512M, 8G), got 'lots'"},
      {"STRATA_FAST_BYTES", "", "expected a byte count (e.g. 1048576, 512M, 8G), got ''"},
      {"STRATA_SLOW_BYTES", "-1G", "expected a byte count (e.g. 1048576, 512M, 8G), got '-1G'"},
      {"STRATA_SLOW_DIR", "", "expected a directory, got ''"},
      {"STRATA_SLOW_BACKEND", "floppy", "expected auto, memkind, mmap or numa, got 'floppy'"},
      {"STRATA_SLOW_NUMA_NODE", "x", "expected a NUMA node number in [0, 4096), got 'x'"},
      {"STRATA_SLOW_NUMA_NODE", "4096", "expected a NUMA node number in [0, 4096), got '4096'"},
      {"STRATA_SLOW_NUMA_NODE", "-1", "expected a NUMA node number in [0, 4096), got '-1'"},
      {"STRATA_SLOW_NUMA_NODE", " 1", "expected a NUMA node number in [0, 4096), got ' 1'"},
      {"STRATA_SLOW_MODEL", "fast please", "expected auto, off, default, read=R,write=W,latency=L or R,W,L"},
      {"STRATA_DRAM_GBPS", "-3", "expected a positive number (GB/s), got '-3'"},
      {"STRATA_DRAM_GBPS", "12.5GB", "expected a positive number (GB/s), got '12.5GB'"},
      {"STRATA_DRAM_GBPS", "0", "expected a positive number (GB/s), got '0'"},
      {"STRATA_DRAM_GBPS", "inf", "expected a positive number (GB/s), got 'inf'"},
      {"STRATA_DRAM_GBPS", "", "expected a positive number (GB/s), got ''"},
      {"STRATA_DRAM_GATHER_GBPS", "fast", "expected a positive number (GB/s), got 'fast'"},
      {"STRATA_MEMORY", "DRAM", "expected tiered or dram, got 'DRAM'"},
      {"STRATA_MEMORY", "", "expected tiered or dram, got ''"},
      {"STRATA_NUM_THREADS", "0", "expected a thread count in [1, 4096], got '0'"},
      {"STRATA_DNNL_PRIMITIVES", "yes", "expected auto, 1 (on, always) or 0 (off, never), got 'yes'"},
      {"STRATA_DNNL_PRIMITIVES", "", "expected auto, 1 (on, always) or 0 (off, never), got ''"},
  };
  for (const BadValue& c : cases) {
    ScopedEnv v(c.variable, c.value);
    EXPECT_THAT(error_of([&] { read_variable(c.variable); }), StartsWith(std::string(c.variable) + ": " + c.message))
        << c.variable << "='" << c.value << "'";
  }
}

TEST(Config, ValuesAreQuotedInMessages) {
  ScopedEnv v("STRATA_SLOW_BACKEND", std::string("mm\x01") + std::string(100, 'a'));
  const std::string message = error_of([] { environment::slow_backend(); });
  EXPECT_THAT(message, HasSubstr("got 'mm\\x01aaa"));
  EXPECT_THAT(message, HasSubstr("(103 bytes)"));
}

TEST(Config, FailThrowsTheMessageWithItsLocation) {
  EXPECT_THAT(error_of([] { STRATA_FAIL("op: bad input ", 3); }), StartsWith("op: bad input 3 (test_config.cpp:"));
}

}  // namespace
