// The functional replay (sim/replay.h) on hand-built traces: arithmetic, DRAM and scratchpad
// memory, streams, poisoning and invalid reads.
#include <gtest/gtest.h>

#include <cmath>

#include "sim/replay.h"
#include "tests/cpp/error_text.h"

using namespace strata::sim;

namespace {

Instr make(Op op, uint32_t dst, uint32_t s0 = kNone, uint32_t s1 = kNone, uint32_t s2 = kNone) {
  Instr in;
  in.op = op;
  in.dst = dst;
  in.src[0] = s0;
  in.src[1] = s1;
  in.src[2] = s2;
  return in;
}
Instr konst(uint32_t dst, double v) {
  Instr in = make(Op::Const, dst);
  in.imm = v;
  return in;
}
Instr mem(Op op, Space sp, uint64_t addr, uint32_t dst, uint32_t src = kNone) {
  Instr in = make(op, dst, src);
  in.space = sp;
  in.addr = addr;
  return in;
}

// One input array "x" (2 elements at 4096, gradient at 4160) and one output "y" (at 4224).
Program program_with(std::vector<Instr> instrs, uint32_t num_values) {
  Program p;
  p.trace.name = "hand";
  p.trace.instrs = std::move(instrs);
  p.trace.num_values = num_values;
  ArrayInfo x;
  x.name = "x";
  x.kind = ArrayKind::Input;
  x.base = 4096;
  x.grad_base = 4160;
  x.initial = {2.0, -3.0};
  x.seed = {0.0, 0.0};
  ArrayInfo y;
  y.name = "y";
  y.kind = ArrayKind::Output;
  y.base = 4224;
  y.grad_base = 4288;
  y.initial = {0.0};
  y.seed = {1.0};
  p.arrays = {x, y};
  return p;
}

}  // namespace

TEST(SimReplay, ArithmeticAndMemoryFollowTheTraceSemantics) {
  std::vector<Instr> t = {
      mem(Op::Load, Space::Dram, 4096, 0),  // v0 = x[0] = 2
      mem(Op::Load, Space::Dram, 4104, 1),  // v1 = x[1] = -3
      make(Op::Max, 2, 0, 1),               // 2
      make(Op::Min, 3, 0, 1),               // -3
      make(Op::Cmp, 4, 1, 0),               // -3 < 2 -> 1
      make(Op::Select, 5, 4, 2, 3),         // 2
      make(Op::Div, 6, 5, 1),               // -2/3
      make(Op::Tanh, 7, 6),
      konst(8, 0.5),
      make(Op::Mul, 9, 7, 8),
      mem(Op::Store, Space::Dram, 4224, kNone, 9),  // y[0]
      mem(Op::Load, Space::Dram, 4288, 10),         // seed of y = 1
  };
  Program p = program_with(t, 11);
  ReplayResult r = replay(p);
  EXPECT_EQ(r.invalid_reads, 0u);
  EXPECT_DOUBLE_EQ(r.value(p, "y")[0], 0.5 * std::tanh(-2.0 / 3.0));
  EXPECT_DOUBLE_EQ(r.grad(p, "y")[0], 1.0);
  EXPECT_DOUBLE_EQ(r.value(p, "x")[1], -3.0);
}

TEST(SimReplay, StreamsMoveTilesBetweenScratchpadAndDram) {
  std::vector<Instr> t = {
      konst(0, 1.5),
      konst(1, 2.5),
      mem(Op::SpadStore, Space::Spad, 0, kNone, 0),
      mem(Op::SpadStore, Space::Spad, 8, kNone, 1),
  };
  Instr out;
  out.op = Op::StreamOut;
  out.space = Space::Spad;
  out.addr = 0;
  out.addr2 = 1 << 20;
  out.bytes = 16;
  t.push_back(out);
  Instr in = out;
  in.op = Op::StreamIn;
  in.phase = Phase::Reverse;
  Instr early = mem(Op::SpadLoad, Space::Spad, 8, 2);
  early.phase = Phase::Reverse;
  t.push_back(early);  // after the StreamOut poisoned the slot
  t.push_back(in);
  Instr late = mem(Op::SpadLoad, Space::Spad, 8, 3);
  late.phase = Phase::Reverse;
  t.push_back(late);
  Instr tape = mem(Op::TapeLoad, Space::Dram, (1 << 20) + 0, 4);
  t.push_back(tape);
  Program p = program_with(t, 5);

  ReplayResult plain = replay(p);  // no poisoning: the slot still holds its value
  EXPECT_EQ(plain.invalid_reads, 0u);
  ReplayResult poisoned = replay(p, {.poison_spad = true});
  EXPECT_EQ(poisoned.invalid_reads, 1u);  // the early load
  EXPECT_EQ(poisoned.spad_slots_used, 2u);
  // Read the values back through a store to y.
  p.trace.instrs.push_back(mem(Op::Store, Space::Dram, 4224, kNone, 3));
  EXPECT_DOUBLE_EQ(replay(p, {.poison_spad = true}).value(p, "y")[0], 2.5);
  p.trace.instrs.back().src[0] = 4;
  EXPECT_DOUBLE_EQ(replay(p, {.poison_spad = true}).value(p, "y")[0], 1.5);
  p.trace.instrs.back().src[0] = 2;
  EXPECT_TRUE(std::isnan(replay(p, {.poison_spad = true}).value(p, "y")[0]));
}

TEST(SimReplay, ReverseBarrierPoisonsTheLayersRegion) {
  std::vector<Instr> t = {konst(0, 4.0), mem(Op::SpadStore, Space::Spad, 16, kNone, 0)};
  Instr sa;
  sa.op = Op::SAlloc;
  sa.phase = Phase::Reverse;
  sa.addr = 16;
  sa.bytes = 8;
  Instr bar;
  bar.op = Op::Barrier;
  bar.phase = Phase::Reverse;
  Instr ld = mem(Op::SpadLoad, Space::Spad, 16, 1);
  ld.phase = Phase::Reverse;
  Instr again = ld;
  again.dst = 2;
  t.insert(t.end(), {sa, ld, bar, again});
  Program p = program_with(t, 3);
  EXPECT_EQ(replay(p, {.poison_spad = true}).invalid_reads, 1u);  // `again`, after the Barrier
  EXPECT_EQ(replay(p).invalid_reads, 0u);
}

TEST(SimReplay, UnwrittenDramIsAnInvalidReadAndBadTracesAreRejected) {
  Program p = program_with({mem(Op::TapeLoad, Space::Dram, 1 << 20, 0)}, 1);
  EXPECT_EQ(replay(p).invalid_reads, 1u);
  Program bad_src = program_with({make(Op::Neg, 0, 7)}, 1);
  EXPECT_ERROR_HAS(replay(bad_src), "sim::replay 'hand': source value 7 out of range (num_values 1)");
  Program bad_dst = program_with({konst(5, 1.0)}, 1);
  EXPECT_ERROR_HAS(replay(bad_dst), "sim::replay 'hand': value id 5 out of range (num_values 1)");
  Program bad_off = program_with({konst(0, 1.0), mem(Op::SpadStore, Space::Spad, 4, kNone, 0)}, 1);
  EXPECT_ERROR_HAS(replay(bad_off), "scratchpad offset 4 is not a multiple of 8");
  EXPECT_ERROR_HAS(replay(p).value(p, "z"), "no array named 'z' (arrays: x, y)");
}
