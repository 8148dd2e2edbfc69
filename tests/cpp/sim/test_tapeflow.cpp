// The TapeFlow passes (sim/tapeflow.h): Alg. 1 region/AoS order on a hand-checked example,
// Alg. 2 layering and pass-3 tiles within the scratchpad, Alg. 3 offsets, and functional
// equivalence (gradients by replay with a poisoned scratchpad) with the Enzyme-style program.
#include <gtest/gtest.h>

#include <cmath>

#include "sim/active.h"
#include "sim/replay.h"
#include "sim/tapeflow.h"
#include "tests/cpp/error_text.h"

using namespace strata::sim;

namespace {

// Per iteration i: p = exp(x_i), q = tanh(x_i), acc += p * c_i + q (c constant); out = log(acc).
// Taped: p (Exp's derivative; FWD ordinal 0), q (Tanh's; ordinal 1), acc (log's, outside loops).
Program two_values_per_iteration(size_t n) {
  Tracer tr("hand");
  std::vector<double> xv(n), cv(n);
  for (size_t i = 0; i < n; ++i) {
    xv[i] = 0.3 * double(i) - 0.4;
    cv[i] = 1.0 + 0.5 * double(i);
  }
  Array x = tr.input("x", xv);
  Array c = tr.constant("c", cv);
  Array out = tr.output("out", 1);
  Active acc = 1.0;
  for_range("i", n, [&](size_t i) {
    Active xi = x.load(i);
    Active p = exp(xi);
    Active q = tanh(xi);
    acc += p * c.load(i) + q;
  });
  out.store(0, log(acc));
  return tr.finish();
}

const Instr& store_of(const Program& p, size_t e) { return p.trace.instrs[p.tape[e].store]; }

size_t count(const Trace& t, Op op, Phase ph) {
  size_t n = 0;
  for (const Instr& in : t.instrs) n += in.op == op && in.phase == ph;
  return n;
}

}  // namespace

TEST(SimTapeflow, Alg1RegionsAreArraysOfStructsOrderedByRevUse) {
  const Program enz = two_values_per_iteration(3);
  ASSERT_EQ(enz.tape.size(), 7u);  // (p, q) x 3 + acc
  // Enzyme: struct-of-arrays, one array per site.
  ASSERT_EQ(enz.sites.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(store_of(enz, 2 * i).addr, enz.sites[0].base + 8 * i);      // p_i
    EXPECT_EQ(store_of(enz, 2 * i + 1).addr, enz.sites[1].base + 8 * i);  // q_i
  }
  const Program aos = aos_layout(enz);
  // REV differentiates tanh (later in FWD) before exp, so q's slot precedes p's; RSize = 16.
  const uint64_t base = enz.tape_base;
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(store_of(aos, 2 * i).addr, base + 16 * i + 8) << "p_" << i;
    EXPECT_EQ(store_of(aos, 2 * i + 1).addr, base + 16 * i) << "q_" << i;
    EXPECT_EQ(aos.trace.instrs[aos.tape[2 * i].load].addr, store_of(aos, 2 * i).addr);
  }
  // Code outside loops: its own struct after the loop's array (48 bytes, 64-byte aligned).
  EXPECT_EQ(store_of(aos, 6).addr, base + 64);
  EXPECT_EQ(aos.trace.tape_bytes, enz.trace.tape_bytes);
  // Layout alone changes addresses only: same gradients.
  ReplayResult a = replay(enz), b = replay(aos);
  EXPECT_EQ(b.invalid_reads, 0u);
  for (size_t i = 0; i < 3; ++i) EXPECT_DOUBLE_EQ(a.grad(enz, "x")[i], b.grad(aos, "x")[i]);
}

TEST(SimTapeflow, LayersTilesAndOffsetsFollowAlgorithms2And3) {
  const Program enz = two_values_per_iteration(3);
  TapeflowPlan plan;
  const Program tf = tapeflow(enz, 32, &plan);  // 4 slots: two whole iterations per layer
  ASSERT_EQ(plan.layers.size(), 3u);
  EXPECT_EQ(plan.layers[0].entries, (std::vector<uint32_t>{1, 0, 3, 2}));  // memory order
  EXPECT_EQ(plan.layers[1].entries, (std::vector<uint32_t>{5, 4}));
  EXPECT_EQ(plan.layers[2].entries, (std::vector<uint32_t>{6}));
  EXPECT_EQ(plan.layers[2].loop, kNone);
  EXPECT_EQ(plan.layers[0].base, 0u);
  EXPECT_EQ(plan.layers[1].base, 0u);   // a new tile: layer 0 filled the scratchpad
  EXPECT_EQ(plan.layers[2].base, 16u);  // shares tile 1 with layer 1
  ASSERT_EQ(plan.tiles.size(), 2u);
  EXPECT_EQ(plan.tiles[0].bytes, 32u);
  EXPECT_FALSE(plan.tiles[0].resident);
  EXPECT_EQ(plan.tiles[1].bytes, 24u);
  EXPECT_TRUE(plan.tiles[1].resident);
  EXPECT_EQ(plan.max_tile_bytes, 32u);
  EXPECT_EQ(tf.trace.spad_bytes, 32u);
  // Alg. 3: the same offset for a store and its load; offsets 0, 8, 16, 24 in layer 0.
  const uint64_t want[7] = {8, 0, 24, 16, 8, 0, 16};
  for (size_t e = 0; e < 7; ++e) {
    const Instr& st = tf.trace.instrs[tf.tape[e].store];
    const Instr& ld = tf.trace.instrs[tf.tape[e].load];
    EXPECT_EQ(st.op, Op::SpadStore);
    EXPECT_EQ(ld.op, Op::SpadLoad);
    EXPECT_EQ(st.space, Space::Spad);
    EXPECT_EQ(st.addr, want[e]) << "entry " << e;
    EXPECT_EQ(ld.addr, want[e]) << "entry " << e;
  }
  // One stream per spilled tile, each way; SAlloc/Barrier per layer per phase.
  EXPECT_EQ(count(tf.trace, Op::StreamOut, Phase::Forward), 1u);
  EXPECT_EQ(count(tf.trace, Op::StreamIn, Phase::Reverse), 1u);
  EXPECT_EQ(count(tf.trace, Op::SAlloc, Phase::Forward), 3u);
  EXPECT_EQ(count(tf.trace, Op::Barrier, Phase::Forward), 3u);
  EXPECT_EQ(count(tf.trace, Op::SAlloc, Phase::Reverse), 3u);
  EXPECT_EQ(count(tf.trace, Op::Barrier, Phase::Reverse), 3u);
  EXPECT_EQ(count(tf.trace, Op::TapeStore, Phase::Forward), 0u);
  for (const Instr& in : tf.trace.instrs) {
    if (in.op == Op::StreamOut || in.op == Op::StreamIn) {
      EXPECT_EQ(in.addr, 0u);
      EXPECT_EQ(in.addr2, enz.tape_base);
      EXPECT_EQ(in.bytes, 32u);
    }
  }
  // The StreamIn heads REV layer 0 (right before its SAlloc), after layer 1's Barrier.
  for (size_t k = 0; k < tf.trace.instrs.size(); ++k) {
    if (tf.trace.instrs[k].op != Op::StreamIn) continue;
    EXPECT_EQ(tf.trace.instrs[k - 1].op, Op::Barrier);
    EXPECT_EQ(tf.trace.instrs[k + 1].op, Op::SAlloc);
    EXPECT_EQ(tf.trace.instrs[k + 1].addr, 0u);
    EXPECT_EQ(tf.trace.instrs[k + 1].bytes, 32u);
  }
  ReplayResult a = replay(enz), b = replay(tf, {.poison_spad = true});
  EXPECT_EQ(b.invalid_reads, 0u);
  for (size_t i = 0; i < 3; ++i) EXPECT_DOUBLE_EQ(a.grad(enz, "x")[i], b.grad(tf, "x")[i]);
}

TEST(SimTapeflow, IterationsLargerThanTheScratchpadAreSplit) {
  const Program enz = two_values_per_iteration(3);
  TapeflowPlan plan;
  const Program tf = tapeflow(enz, 8, &plan);  // one value per layer
  ASSERT_EQ(plan.layers.size(), 7u);
  for (const TapeLayer& l : plan.layers) EXPECT_EQ(l.bytes, 8u);
  EXPECT_EQ(plan.tiles.size(), 7u);
  ReplayResult a = replay(enz), b = replay(tf, {.poison_spad = true});
  EXPECT_EQ(b.invalid_reads, 0u);
  for (size_t i = 0; i < 3; ++i) EXPECT_DOUBLE_EQ(a.grad(enz, "x")[i], b.grad(tf, "x")[i]);
}

TEST(SimTapeflow, PoisonedReplayCatchesASpadLoadOfTheWrongSlot) {
  const Program enz = two_values_per_iteration(4);
  Program tf = tapeflow(enz, 32);
  ASSERT_EQ(replay(tf, {.poison_spad = true}).invalid_reads, 0u);
  // Layers: [iterations 0-1] [2-3] (each a streamed 32-byte tile) and [acc] (the resident tile).
  // acc's load pointed past its 8-byte region reads a slot the last StreamOut poisoned.
  Program bad = tf;
  ASSERT_EQ(bad.tape.size(), 9u);
  ASSERT_EQ(bad.trace.instrs[bad.tape[8].load].addr, 0u);
  bad.trace.instrs[bad.tape[8].load].addr = 8;
  ReplayResult r = replay(bad, {.poison_spad = true});
  EXPECT_GT(r.invalid_reads, 0u);
  EXPECT_TRUE(std::isnan(r.grad(bad, "x")[0]));
  // A load pointed at another slot of its own (streamed-in) region reads a wrong value.
  Program swapped = tf;
  std::swap(swapped.trace.instrs[swapped.tape[0].load].addr, swapped.trace.instrs[swapped.tape[1].load].addr);
  ReplayResult good = replay(tf, {.poison_spad = true});
  ReplayResult w = replay(swapped, {.poison_spad = true});
  EXPECT_EQ(w.invalid_reads, 0u);
  EXPECT_NE(w.grad(swapped, "x")[0], good.grad(tf, "x")[0]);
}

TEST(SimTapeflow, BadScratchpadSizesAndProgramsAreRejected) {
  const Program enz = two_values_per_iteration(2);
  EXPECT_ERROR_HAS(tapeflow(enz, 0), "scratchpad size 0 bytes is not a positive multiple of 8");
  EXPECT_ERROR_HAS(tapeflow(enz, 12), "scratchpad size 12 bytes is not a positive multiple of 8");
  {
    Tracer tr("two_per_instr");
    Array x = tr.input("x", {2.0, 3.0});
    Array t = tr.temp("t", 2);
    Array out = tr.output("out", 1);
    t.store(0, x.load(0) * 2.0);
    t.store(1, x.load(1) * 2.0);
    Active a = t.load(0), b = t.load(1);
    t.store(0, 0.0);
    t.store(1, 0.0);
    out.store(0, a * b);  // both operands taped right after the Mul
    const Program p = tr.finish();
    EXPECT_ERROR_HAS(tapeflow(p, 8),
                     "scratchpad of 8 bytes is smaller than the 16 tape bytes one"
                     " instruction stores");
    const Program ok = tapeflow(p, 16);
    EXPECT_DOUBLE_EQ(replay(ok, {.poison_spad = true}).grad(ok, "x")[0], 2.0 * 6.0);
  }
  const Program tf = tapeflow(enz, 64);
  EXPECT_ERROR_HAS(tapeflow(tf, 64), "expects an Enzyme-style program");
  EXPECT_ERROR_HAS(aos_layout(tf), "expects an Enzyme-style program");
}
