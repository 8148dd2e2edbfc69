// The scalar active type and tracer (sim/active.h): REV gradients against hand-derived
// derivatives (by replay), the Enzyme-style tape layout, and bad input.
#include <gtest/gtest.h>

#include <cmath>

#include "sim/active.h"
#include "sim/replay.h"
#include "tests/cpp/error_text.h"

using namespace strata::sim;

namespace {
size_t count(const Trace& t, Op op, Phase ph) {
  size_t n = 0;
  for (const Instr& in : t.instrs) n += in.op == op && in.phase == ph;
  return n;
}
}  // namespace

TEST(SimActive, DotProductWithConstantWeightsNeedsNoTape) {
  Program p;
  {
    Tracer tr("dot");
    Array x = tr.input("x", {1.5, -2.0, 3.0});
    Array w = tr.constant("w", {4.0, 5.0, -6.0});
    Array loss = tr.output("loss", 1);
    Active s = 0.0;
    for_range("i", 3, [&](size_t i) { s += x.load(i) * w.load(i); });
    loss.store(0, s);
    EXPECT_DOUBLE_EQ(s.value(), 1.5 * 4 - 2.0 * 5 - 3.0 * 6);
    p = tr.finish();
  }
  EXPECT_EQ(p.trace.tape_bytes, 0u);
  EXPECT_EQ(count(p.trace, Op::TapeStore, Phase::Forward), 0u);
  // REV re-loads w (never overwritten) instead of taping it.
  EXPECT_EQ(count(p.trace, Op::Load, Phase::Reverse), 3u /*w*/ + 3u /*dx*/ + 1u /*dloss*/);
  ReplayResult r = replay(p);
  EXPECT_EQ(r.invalid_reads, 0u);
  EXPECT_DOUBLE_EQ(r.value(p, "loss")[0], 1.5 * 4 - 2.0 * 5 - 3.0 * 6);
  const auto& g = r.grad(p, "x");
  EXPECT_DOUBLE_EQ(g[0], 4.0);
  EXPECT_DOUBLE_EQ(g[1], 5.0);
  EXPECT_DOUBLE_EQ(g[2], -6.0);
  EXPECT_DOUBLE_EQ(r.grad(p, "loss")[0], 0.0);  // the store moved the seed into the REV
}

TEST(SimActive, ElementaryFunctionsMatchHandDerivedPartials) {
  const double a = 0.7, b = -1.3, c = 2.1;
  Program p;
  {
    Tracer tr("elementary");
    Array x = tr.input("x", {a, b, c});
    Array out = tr.output("out", 1, 2.0);  // seed 2
    Active x0 = x.load(0), x1 = x.load(1), x2 = x.load(2);
    Active f = exp(x0) * sin(x1) / x2 + sqrt(x0) - tanh(x1) * log(x2) + cos(x0 * x1) - (-x2);
    out.store(0, f);
    p = tr.finish();
  }
  const double th = std::tanh(b);
  const double d0 = std::exp(a) * std::sin(b) / c + 0.5 / std::sqrt(a) - b * std::sin(a * b);
  const double d1 = std::exp(a) * std::cos(b) / c - (1 - th * th) * std::log(c) - a * std::sin(a * b);
  const double d2 = -std::exp(a) * std::sin(b) / (c * c) - th / c + 1.0;
  ReplayResult r = replay(p);
  EXPECT_EQ(r.invalid_reads, 0u);
  const auto& g = r.grad(p, "x");
  EXPECT_NEAR(g[0], 2 * d0, 1e-12);
  EXPECT_NEAR(g[1], 2 * d1, 1e-12);
  EXPECT_NEAR(g[2], 2 * d2, 1e-12);
}

TEST(SimActive, MaxMinSelectRouteTheAdjointToTheChosenOperand) {
  Program p;
  {
    Tracer tr("maxmin");
    Array x = tr.input("x", {1.0, 3.0, -2.0});
    Array out = tr.output("out", 1);
    Active x0 = x.load(0), x1 = x.load(1), x2 = x.load(2);
    // max -> x1, min -> x2, less(x1, x2) = 0 -> select picks x2 * 3; relu(x0 - 2) = 0.
    Active f = max(x0, x1) + 10.0 * min(x0, x2) + select(less(x1, x2), x1 * 2.0, x2 * 3.0) + 100.0 * max(0.0, x0 - 2.0);
    out.store(0, f);
    EXPECT_DOUBLE_EQ(f.value(), 3.0 - 20.0 - 6.0);
    p = tr.finish();
  }
  ReplayResult r = replay(p);
  const auto& g = r.grad(p, "x");
  EXPECT_DOUBLE_EQ(g[0], 0.0);
  EXPECT_DOUBLE_EQ(g[1], 1.0);
  EXPECT_DOUBLE_EQ(g[2], 13.0);
}

TEST(SimActive, OverwrittenValuesGoThroughTheTape) {
  const double x0 = 1.7;
  Program p;
  {
    Tracer tr("overwrite");
    Array x = tr.input("x", {x0});
    Array t = tr.temp("t", 1);
    Array loss = tr.output("loss", 1);
    Active a = x.load(0);
    t.store(0, a * a);
    Active y = t.load(0);
    t.store(0, 0.0);  // overwrites what y was loaded from: REV cannot re-load it
    loss.store(0, y * y);
    p = tr.finish();
  }
  ASSERT_EQ(p.tape.size(), 1u);
  EXPECT_EQ(p.trace.tape_bytes, 8u);
  const Instr& st = p.trace.instrs[p.tape[0].store];
  const Instr& ld = p.trace.instrs[p.tape[0].load];
  EXPECT_EQ(st.op, Op::TapeStore);
  EXPECT_EQ(ld.op, Op::TapeLoad);
  EXPECT_EQ(ld.phase, Phase::Reverse);
  EXPECT_EQ(st.addr, ld.addr);
  EXPECT_GE(st.addr, p.tape_base);
  ReplayResult r = replay(p);
  EXPECT_EQ(r.invalid_reads, 0u);
  EXPECT_NEAR(r.grad(p, "x")[0], 4 * x0 * x0 * x0, 1e-12);
  EXPECT_DOUBLE_EQ(r.value(p, "t")[0], 0.0);
}

TEST(SimActive, EnzymeTapeIsOneArrayPerSiteIndexedByIteration) {
  const size_t n = 5;
  Program p;
  {
    Tracer tr("logsum");
    std::vector<double> xv(n);
    for (size_t i = 0; i < n; ++i) xv[i] = 0.1 * double(i) - 0.2;
    Array x = tr.input("x", xv);
    Array out = tr.output("out", 1);
    Active s = 0.0;
    for_range("i", n, [&](size_t i) {
      Active e = exp(x.load(i));
      s += e * e;  // two uses of e: Exp's derivative and Mul's
    });
    out.store(0, log(s));
    p = tr.finish();
  }
  // Per iteration: e (needed by Exp's and Mul's derivatives) is taped once; log's operand once.
  ASSERT_EQ(p.tape.size(), n + 1);
  ASSERT_EQ(p.sites.size(), 2u);
  const TapeSite& loop_site = p.sites[0];
  EXPECT_EQ(p.trace.loop_names.at(loop_site.loop), "i");
  EXPECT_EQ(loop_site.entries, n);
  EXPECT_EQ(p.sites[1].loop, kNone);
  EXPECT_EQ(loop_site.base % 64, 0u);
  for (size_t k = 0; k < n; ++k) {
    const Instr& st = p.trace.instrs[p.tape[k].store];
    EXPECT_EQ(st.iter, k);
    EXPECT_EQ(st.addr, loop_site.base + 8 * k);
    EXPECT_EQ(p.trace.instrs[p.tape[k].load].addr, st.addr);
  }
  ReplayResult r = replay(p);
  double s = 0;
  for (size_t i = 0; i < n; ++i) s += std::exp(2 * (0.1 * double(i) - 0.2));
  for (size_t i = 0; i < n; ++i) EXPECT_NEAR(r.grad(p, "x")[i], 2 * std::exp(2 * (0.1 * double(i) - 0.2)) / s, 1e-12);
  // Origins: every REV instruction points at the FWD instruction it differentiates.
  for (size_t i = 0; i < p.trace.instrs.size(); ++i) {
    const uint32_t o = p.origin[i];
    EXPECT_EQ(p.trace.instrs[o].phase, Phase::Forward);
    if (p.trace.instrs[i].phase == Phase::Reverse) {
      EXPECT_EQ(p.trace.instrs[i].loop, p.trace.instrs[o].loop);
      EXPECT_EQ(p.trace.instrs[i].iter, p.trace.instrs[o].iter);
    }
  }
}

TEST(SimActive, NestedLoopIterationsAreNumberedAcrossTheWholeProgram) {
  Tracer tr("nested");
  Array x = tr.input("x", std::vector<double>(6, 1.0));
  Array y = tr.output("y", 6);
  for_range("i", 2,
            [&](size_t i) { for_range("j", 3, [&](size_t j) { y.store(3 * i + j, exp(x.load(3 * i + j))); }); });
  Program p = tr.finish();
  ASSERT_EQ(p.trace.loop_names.size(), 2u);
  EXPECT_EQ(p.loop_iterations[0], 2u);
  EXPECT_EQ(p.loop_iterations[1], 6u);
  std::vector<uint32_t> iters;
  for (const Instr& in : p.trace.instrs)
    if (in.op == Op::Exp) iters.push_back(in.iter);
  EXPECT_EQ(iters, (std::vector<uint32_t>{0, 1, 2, 3, 4, 5}));
  ReplayResult r = replay(p);
  for (size_t k = 0; k < 6; ++k) EXPECT_NEAR(r.grad(p, "x")[k], std::exp(1.0), 1e-12);
}

TEST(SimActive, ParamsAreInactiveScalarArguments) {
  Tracer tr("param");
  Array x = tr.input("x", {3.0});
  Array y = tr.output("y", 1);
  Active k = tr.param(2.5);
  y.store(0, k * x.load(0) * x.load(0));
  Program p = tr.finish();
  ReplayResult r = replay(p);
  EXPECT_DOUBLE_EQ(r.grad(p, "x")[0], 2 * 2.5 * 3.0);
  EXPECT_EQ(p.trace.tape_bytes, 8u);  // k * x (the partial product) is taped for the second Mul
}

TEST(SimActive, BadInputIsReportedWithNames) {
  {
    Tracer tr("bad");
    Array x = tr.input("x", {1.0, 2.0});
    Array c = tr.constant("c", {1.0});
    EXPECT_ERROR_HAS(x.load(2), "sim::Array 'x': load index 2 out of range (size 2)");
    EXPECT_ERROR_HAS(x.store(5, 1.0), "sim::Array 'x': store index 5 out of range (size 2)");
    EXPECT_ERROR_HAS(c.store(0, x.load(0)),
                     "store of an active (differentiable) value into a"
                     " constant array");
    EXPECT_ERROR_HAS(tr.input("x", {1.0}), "array name 'x' is already used");
    EXPECT_ERROR_HAS(tr.input("e", {}), "input array 'e' has no elements");
    EXPECT_ERROR_HAS(tr.output("o", 0), "output array 'o' has no elements");
    EXPECT_ERROR_HAS(Tracer("second"), "another tracer is already current");
    {
      Loop l("i");
      EXPECT_ERROR_HAS(Loop("i"), "sim::Loop 'i': already open");
      EXPECT_ERROR_HAS(tr.finish(), "finish() with 1 loop(s) still open (innermost 'i')");
    }
    {
      Loop outer("o");
      outer.next();
      Loop inner("in");
      EXPECT_ERROR_HAS(outer.next(), "sim::Loop 'o': next() while an inner loop is still open");
    }
    Program p = tr.finish();
    EXPECT_ERROR_HAS(x.load(0), "a load after finish()");
    EXPECT_ERROR_HAS(p.array("nope"), "no array named 'nope' (arrays: x, c)");
    EXPECT_ERROR_HAS(replay(p).grad(p, "c"), "array 'c' is a constant array and has no gradient");
  }
  EXPECT_ERROR_HAS(Loop("free"), "no current Tracer on this thread");
  EXPECT_ERROR_HAS(Array().load(0), "sim::Array: used before being created by a Tracer");
}
