// The simulator's trace format (sim/trace.h): the defaults the tracer and the machine rely on.
#include <gtest/gtest.h>

#include "sim/trace.h"

using namespace strata::sim;

TEST(SimTrace, InstructionDefaultsAreAnUnusedDoubleSlot) {
  Instr i;
  EXPECT_EQ(i.dst, kNone);
  EXPECT_EQ(i.src[0], kNone);
  EXPECT_EQ(i.src[2], kNone);
  EXPECT_EQ(i.bytes, 8u);
  EXPECT_EQ(i.space, Space::None);
  EXPECT_EQ(i.phase, Phase::Forward);
  Trace t;
  EXPECT_TRUE(t.instrs.empty());
  EXPECT_EQ(t.num_values, 0u);
}
