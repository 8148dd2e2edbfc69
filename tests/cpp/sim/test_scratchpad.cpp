// The scratchpad (sim/detail/scratchpad.h): banks, bounds, full/empty bits, stream engine timing.
#include <gtest/gtest.h>

#include "sim/detail/scratchpad.h"
#include "tests/cpp/error_text.h"

using namespace strata::sim;
using namespace strata::sim::detail;  // the component models are internal

TEST(SimScratchpad, Table3GeometryAndWordInterleavedBanks) {
  Scratchpad s(ScratchpadConfig{});
  EXPECT_EQ(s.slots(), 64u);
  EXPECT_EQ(s.bank_of(0), 0u);
  EXPECT_EQ(s.bank_of(8), 1u);
  EXPECT_EQ(s.bank_of(56), 7u);
  EXPECT_EQ(s.bank_of(64), 0u);
}

TEST(SimScratchpad, OneDatapathAccessPerBankPerCycle) {
  Scratchpad s(ScratchpadConfig{});
  EXPECT_TRUE(s.bank_free(0, 10));
  s.take_bank(0, 10);
  EXPECT_FALSE(s.bank_free(0, 10));
  EXPECT_FALSE(s.bank_free(64, 10));  // same bank
  EXPECT_TRUE(s.bank_free(8, 10));    // another bank
  EXPECT_TRUE(s.bank_free(0, 11));    // next cycle
}

TEST(SimScratchpad, FullEmptyBits) {
  Scratchpad s(ScratchpadConfig{});
  EXPECT_FALSE(s.all_full(0, 16));
  s.set_full(0, 16, true);
  EXPECT_TRUE(s.all_full(0, 16));
  EXPECT_FALSE(s.all_full(0, 24));
  s.set_full(8, 8, false);
  EXPECT_FALSE(s.all_full(0, 16));
  EXPECT_TRUE(s.all_full(0, 8));
}

TEST(SimScratchpad, StreamEnginesMoveTilesThroughDram) {
  Scratchpad s(ScratchpadConfig{});
  Dram d(DramConfig{});
  StreamEngine rev;
  Instr in;
  in.op = Op::StreamIn;
  in.addr = 64;
  in.addr2 = 4096;
  in.bytes = 192;
  EXPECT_EQ(rev.start(in, 0, d, s), 20u + 100u + 1u);  // 192 / 9.6 = 20 transfer, latency, bank write
  EXPECT_EQ(s.stream_words_in, 24u);
  StreamEngine fwd;
  Instr out = in;
  out.op = Op::StreamOut;
  out.bytes = 96;
  EXPECT_EQ(fwd.start(out, 200, d, s), 201u + 10u);  // bank read, then a posted 10-cycle write
  EXPECT_EQ(s.stream_words_out, 12u);
  EXPECT_EQ(d.bytes_read(), 192u);
  EXPECT_EQ(d.bytes_written(), 96u);
  EXPECT_EQ(rev.streams, 1u);
  EXPECT_EQ(fwd.bytes, 96u);
}

TEST(SimScratchpad, BadGeometryAndOutOfRangeAccessesAreRejected) {
  auto make = [](uint64_t size, uint32_t banks) {
    ScratchpadConfig c;
    c.size_bytes = size;
    c.banks = banks;
    Scratchpad s(c);
  };
  EXPECT_ERROR_HAS(make(60, 8), "positive multiple of 8");
  EXPECT_ERROR_HAS(make(64, 16), "banks must be a power of two <= the 8 slots, got 16");
  EXPECT_ERROR_HAS(make(512, 6), "got 6");
  Scratchpad s(ScratchpadConfig{});
  EXPECT_ERROR_HAS(s.check_range(512, 8, "instr 3 (SpadLoad)"),
                   "instr 3 (SpadLoad): scratchpad bytes [512, 520) exceed the 512-byte scratchpad");
  EXPECT_ERROR_HAS(s.check_range(4, 8, "instr 4 (SpadStore)"), "not a whole number of 8-byte slots");
  EXPECT_NO_THROW(s.check_range(504, 8, "x"));
}
