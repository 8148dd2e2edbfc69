// The DRAM model (sim/detail/dram.h): latency, queueing and saturation at the configured bandwidth.
#include <gtest/gtest.h>

#include <cmath>

#include "sim/detail/dram.h"
#include "tests/cpp/error_text.h"

using namespace strata::sim;
using namespace strata::sim::detail;  // the component models are internal

TEST(SimDram, Table3BandwidthAtTheTwoGigahertzClockIs9Point6BytesPerCycle) {
  DramConfig c;
  EXPECT_DOUBLE_EQ(c.bytes_per_cycle(), 9.6);
}

TEST(SimDram, AnIsolatedReadTakesItsTransferPlusLatency) {
  Dram d(DramConfig{});
  EXPECT_EQ(d.read(0, 64), 7u + 100u);  // ceil(64 / 9.6) + 100
  EXPECT_EQ(d.read(1000, 96), 1000u + 10u + 100u);
  EXPECT_EQ(d.write(5000, 64), 5000u + 7u);  // posted: no latency
  EXPECT_EQ(d.bytes_read(), 160u);
  EXPECT_EQ(d.bytes_written(), 64u);
  EXPECT_EQ(d.reads(), 2u);
  EXPECT_EQ(d.writes(), 1u);
}

TEST(SimDram, StreamingRequestsSaturateAtTheConfiguredBandwidth) {
  // One 64-byte line requested every cycle (6.7x faster than the channel drains): the last
  // completion is at bytes / bytes_per_cycle + latency, to within one cycle.
  for (double gbps : {19.2, 4.8, 38.4}) {
    DramConfig c;
    c.bandwidth_gbps = gbps;
    Dram d(c);
    const uint64_t n = 20000;
    uint64_t last = 0;
    for (uint64_t i = 0; i < n; ++i) last = d.read(i, 64);
    const double expect = 64.0 * n / c.bytes_per_cycle() + c.latency;
    EXPECT_NEAR(static_cast<double>(last), expect, 1.0) << gbps;
    EXPECT_NEAR(d.busy_cycles(), 64.0 * n / c.bytes_per_cycle(), 1e-6 * n);
  }
}

TEST(SimDram, RequestsSlowerThanTheChannelDoNotQueue) {
  Dram d(DramConfig{});
  for (uint64_t i = 0; i < 100; ++i) EXPECT_EQ(d.read(i * 50, 64), i * 50 + 107);
}

TEST(SimDram, ReadsAndWritesShareTheChannel) {
  Dram d(DramConfig{});
  const uint64_t w = d.write(0, 960);  // 100 cycles of transfer
  EXPECT_EQ(w, 100u);
  EXPECT_EQ(d.read(0, 96), 110u + 100u);  // queued behind the write
}

TEST(SimDram, BadConfigurationIsRejected) {
  DramConfig c;
  c.bandwidth_gbps = 0;
  EXPECT_ERROR_HAS(Dram{c}, "bandwidth_gbps must be a positive number, got 0");
  c = DramConfig{};
  c.clock_ghz = -1;
  EXPECT_ERROR_HAS(Dram{c}, "clock_ghz must be a positive number, got -1");
  c = DramConfig{};
  c.bandwidth_gbps = std::nan("");
  EXPECT_ERROR_HAS(Dram{c}, "bandwidth_gbps must be a positive number");
}
