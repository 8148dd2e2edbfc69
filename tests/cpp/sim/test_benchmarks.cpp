// The Table II benchmarks (sim/benchmarks.h) at reduced sizes: gradients of the Enzyme-style
// program and of its TapeFlow rewrites (by replay, scratchpad poisoned) against central finite
// differences; the TapeFlow plan within the scratchpad; equal tape bytes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "sim/benchmarks.h"
#include "sim/replay.h"
#include "sim/tapeflow.h"
#include "tests/cpp/error_text.h"

using namespace strata::sim;

namespace {

double loss_of(const std::string& name, const BenchmarkParams& bp) {
  return build_benchmark(name, bp).array("loss").final_values.at(0);
}

// Central differences on up to `per_array` spread elements of every differentiable input.
// h = 1e-6 (1 + |x|). Tolerance: |fd - g| <= 1e-5 |g| + 1e-9 + 4 eps |loss| / h (truncation is
// O(h^2); the last term bounds the rounding of the two losses).
void expect_gradients_match_finite_differences(const std::string& name, const Program& p,
                                               const std::vector<std::vector<double>>& grads,
                                               const BenchmarkParams& base, size_t per_array) {
  for (size_t a = 0; a < p.arrays.size(); ++a) {
    const ArrayInfo& info = p.arrays[a];
    if (info.kind != ArrayKind::Input) continue;
    const size_t n = info.initial.size();
    const size_t step = std::max<size_t>(1, n / per_array);
    for (size_t i = 0; i < n; i += step) {
      const double h = 1e-6 * (1.0 + std::abs(info.initial[i]));
      BenchmarkParams bp = base;
      bp.perturb_array = info.name;
      bp.perturb_index = i;
      bp.perturb_delta = h;
      const double up = loss_of(name, bp);
      bp.perturb_delta = -h;
      const double down = loss_of(name, bp);
      const double fd = (up - down) / (2 * h);
      const double g = grads[a][i];
      const double loss = std::max(std::abs(up), std::abs(down));
      EXPECT_NEAR(g, fd, 1e-5 * std::abs(g) + 1e-9 + 4 * 2.2e-16 * loss / h)
          << name << ": d loss / d " << info.name << "[" << i << "]";
    }
  }
}

class SimBenchmark : public ::testing::TestWithParam<std::string> {};

}  // namespace

TEST_P(SimBenchmark, GradientsOfEnzymeAndTapeflowTracesMatchFiniteDifferences) {
  const std::string name = GetParam();
  BenchmarkParams bp;
  bp.reduced = true;
  const Program enz = build_benchmark(name, bp);
  ASSERT_GT(enz.trace.tape_bytes, 0u) << name << " should need a tape";
  const ReplayResult r = replay(enz);
  EXPECT_EQ(r.invalid_reads, 0u);
  EXPECT_NEAR(r.value(enz, "loss")[0], enz.array("loss").final_values[0],
              1e-12 * (1 + std::abs(enz.array("loss").final_values[0])));
  expect_gradients_match_finite_differences(name, enz, r.grads, bp, 6);

  const Program aos = aos_layout(enz);
  const ReplayResult ra = replay(aos);
  EXPECT_EQ(ra.invalid_reads, 0u);
  EXPECT_EQ(aos.trace.tape_bytes, enz.trace.tape_bytes);
  for (uint64_t spad : {64u, 512u, 4096u}) {
    TapeflowPlan plan;
    const Program tf = tapeflow(enz, spad, &plan);
    EXPECT_EQ(tf.trace.tape_bytes, enz.trace.tape_bytes) << name << " spad " << spad;
    EXPECT_LE(tf.trace.spad_bytes, spad);
    EXPECT_LE(plan.max_tile_bytes, spad);
    if (enz.trace.tape_bytes > spad) {
      EXPECT_GT(plan.tiles.size(), 1u) << "the tape must stream";
    }
    uint64_t layer_bytes = 0;
    for (const TapeLayer& l : plan.layers) {
      EXPECT_LE(l.base + l.bytes, spad);
      layer_bytes += l.bytes;
    }
    EXPECT_EQ(layer_bytes, enz.trace.tape_bytes);
    const ReplayResult rt = replay(tf, {.poison_spad = true});
    EXPECT_EQ(rt.invalid_reads, 0u) << name << " spad " << spad;
    EXPECT_LE(rt.spad_slots_used * 8, spad);
    for (size_t a = 0; a < enz.arrays.size(); ++a) {
      if (enz.arrays[a].kind != ArrayKind::Input) continue;
      for (size_t i = 0; i < r.grads[a].size(); ++i) {
        // Same instructions in the same order: bit-identical gradients.
        ASSERT_EQ(rt.grads[a][i], r.grads[a][i]) << name << " " << enz.arrays[a].name << "[" << i << "] spad " << spad;
        ASSERT_EQ(ra.grads[a][i], r.grads[a][i]) << name << " (AoS) " << enz.arrays[a].name;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(TableII, SimBenchmark, ::testing::ValuesIn(benchmark_names()),
                         [](const auto& info) { return info.param; });

TEST(SimBenchmarks, PathfinderUnrollWidensRegionsAndKeepsGradients) {
  BenchmarkParams bp;
  bp.reduced = true;
  const Program u1 = build_benchmark("pathfinder", bp);
  bp.unroll = 4;
  const Program u4 = build_benchmark("pathfinder", bp);
  EXPECT_EQ(u1.trace.tape_bytes, u4.trace.tape_bytes);
  auto col_sites = [](const Program& p) {
    size_t n = 0;
    for (const TapeSite& s : p.sites) n += s.loop != kNone && p.trace.loop_names[s.loop] == "col";
    return n;
  };
  EXPECT_EQ(col_sites(u4), 4 * col_sites(u1));
  const ReplayResult a = replay(u1), b = replay(tapeflow(u4, 256), {.poison_spad = true});
  for (size_t i = 0; i < a.grads[0].size(); ++i) EXPECT_EQ(a.grads[0][i], b.grads[0][i]);
}

TEST(SimBenchmarks, FullSizesFollowTableII) {
  BenchmarkParams bp;
  EXPECT_EQ(build_benchmark("logsum", bp).array("x").initial.size(), 10000u);
  EXPECT_EQ(build_benchmark("nn", bp).array("img").initial.size(), 28u * 28u);
  EXPECT_EQ(build_benchmark("mttkrp", bp).array("B").initial.size(), 8u * 8u * 8u);
  EXPECT_EQ(build_benchmark("somier", bp).array("x").initial.size(), 3u * 8u * 8u * 8u);
  EXPECT_EQ(build_benchmark("pathfinder", bp).array("wall").initial.size(), 128u * 256u);
  const Program ms = build_benchmark("mass_spring", bp);
  EXPECT_EQ(ms.array("x0").initial.size(), 2u * 128u);
  EXPECT_EQ(ms.array("b1").initial.size(), 32u);
}

TEST(SimBenchmarks, BadParametersAreRejected) {
  EXPECT_ERROR_HAS(build_benchmark("resnet"), "unknown benchmark 'resnet' (known: gravity, nn,");
  BenchmarkParams bp;
  bp.reduced = true;
  bp.unroll = 0;
  EXPECT_ERROR_HAS(build_benchmark("pathfinder", bp), "unroll factor must be at least 1, got 0");
  bp.unroll = 1;
  bp.perturb_array = "nope";
  EXPECT_ERROR_HAS(build_benchmark("logsum", bp), "no input array named 'nope' to perturb");
  bp.perturb_array = "x";
  bp.perturb_index = 1000;
  EXPECT_ERROR_HAS(build_benchmark("logsum", bp),
                   "perturb_index 1000 out of range for input 'x'"
                   " (size 16)");
}
