// The network model of hybrid-parallel DLRM (embeddings/dist/step_model.h): closed-form collective
// times, the schedules' bytes against shard_volume.h's exact formulas, the step's timeline, the
// measured step's timeline (Note [Measured step model]), monotonicity and bad inputs. Pure
// computation: every rank runs the same checks.
#include <gtest/gtest.h>

#include "embeddings/dist/shard_volume.h"
#include "embeddings/dist/step_model.h"
#include "tests/cpp/error_text.h"

namespace strata::emb {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;

// Round figures, so that the closed forms below are exact in doubles.
Fabric toy() { return {"toy", 2e-6, 1e-6, 1e9}; }

ShardPlanOptions roomy(int ranks) {
  return {.ranks = ranks, .fast_budget_bytes = 64 * kMiB, .slow_budget_bytes = 1024 * kMiB};
}

std::vector<TableSpec> mixed_tables() {
  return {{"a", 5000, 16, 4}, {"b", 3000, 16, 4}, {"c", 200, 8, 4}, {"d", 40, 32, 4}, {"e", 900, 16, 4}};
}

TEST(StepModel, TwoRankExchangeOfNBytesIsAlphaPlusNOverBeta) {
  const Fabric f = toy();
  for (int64_t n : {1, 1000, 1 << 20}) {
    Round round(2);
    round.set(0, 1, n);
    round.set(1, 0, n);
    EXPECT_DOUBLE_EQ(round_seconds(round, f), f.alpha() + static_cast<double>(n) / f.bytes_per_second);
    // An alltoallv adds its header round: 2α + (header + n)/β.
    const Schedule s = alltoallv_schedule("a2a", round);
    ASSERT_EQ(s.rounds.size(), 2u);
    EXPECT_EQ(header_bytes(2), 160);
    EXPECT_DOUBLE_EQ(schedule_seconds(s, f), 2 * f.alpha() + static_cast<double>(160 + n) / f.bytes_per_second);
  }
}

TEST(StepModel, ARoundSerializesARanksMessagesAndPaysTheLatencyOnce) {
  const Fabric f = toy();
  Round round(4);
  for (int i = 0; i < 4; ++i) {
    for (int j = 0; j < 4; ++j) {
      if (i != j) round.set(i, j, 500);
    }
  }
  EXPECT_DOUBLE_EQ(round_seconds(round, f), 2e-6 + 3 * (1e-6 + 500 / 1e9));
  // The busiest side decides: rank 0 receiving 3 × 4000 bytes more.
  for (int i = 1; i < 4; ++i) round.set(i, 0, 4500);
  EXPECT_DOUBLE_EQ(round_seconds(round, f), 2e-6 + 3 * (1e-6 + 4500 / 1e9));
  EXPECT_EQ(round.received(0), 3 * 4500);
  EXPECT_EQ(round.sent(0), 3 * 500);
  EXPECT_DOUBLE_EQ(round_seconds(Round(4), f), 0.0);  // no messages, no time
}

TEST(StepModel, TheHostRateAddsTheAllreducesLocalWork) {
  // 2 ranks, 1000 f32, one contribution each: rank r receives 1 node of its 500-element chunk
  // (zero-filled), reads 2 nodes and writes its chunk: (500 + 2·500 + 500)·4 bytes.
  const Schedule s = allreduce_schedule("ar", 1000, 4, {1, 1});
  EXPECT_EQ(s.local_bytes, 2000 * 4);
  Fabric f = toy();
  const double rounds = schedule_seconds(s, f);
  f.host_bytes_per_second = 4e9;
  EXPECT_DOUBLE_EQ(schedule_seconds(s, f), rounds + 8000 / 4e9);
  EXPECT_EQ(forward_schedule(plan_shards(mixed_tables(), roomy(2)), 64).local_bytes, 0);
}

TEST(StepModel, AllreduceIsHeaderReduceScatterAndAllgather) {
  const Fabric f = toy();
  // 2 ranks, 1000 f32: header, 500 elements each way, 500 elements each way.
  const Schedule s = allreduce_schedule("ar", 1000, 4, {1, 1});
  ASSERT_EQ(s.rounds.size(), 3u);
  EXPECT_DOUBLE_EQ(schedule_seconds(s, f), 3 * f.alpha() + (160 + 2000 + 2000) / 1e9);
  // Rank 1 holds 3 contributions of 4 (tree leaves 1..3: nodes [1,2) and [2,4)): two messages.
  const Schedule k = allreduce_schedule("ar", 1000, 4, {1, 3});
  EXPECT_EQ(k.rounds[1].messages_at(1, 0), 2);
  EXPECT_EQ(k.rounds[1].at(1, 0), 2 * 500 * 4);
}

// The schedules carry exactly shard_volume.h's bytes, rank by rank.
void expect_volume(const Schedule& s, std::size_t payload_round, const CollectiveVolume& v) {
  const Round& r = s.rounds[payload_round];
  for (int rank = 0; rank < r.ranks; ++rank) {
    EXPECT_EQ(r.sent(rank), v.sent[rank]) << s.name << " rank " << rank;
    EXPECT_EQ(r.received(rank), v.received[rank]) << s.name << " rank " << rank;
  }
}

TEST(StepModel, SchedulesMoveTheVolumeFormulasBytes) {
  for (int ranks : {2, 3, 4, 8}) {
    ShardPlanOptions o = roomy(ranks);
    o.dp_boundary_bytes = 6401;  // "c" (6400 B) and "d" (5120 B) are data-parallel
    const ShardPlan plan = plan_shards(mixed_tables(), o);
    for (int64_t batch : {int64_t{ranks}, int64_t{37}, int64_t{512}}) {
      if (batch < ranks) continue;
      expect_volume(forward_schedule(plan, batch), 1, forward_volume(plan, batch));
      expect_volume(backward_schedule(plan, batch), 1, backward_volume(plan, batch));
    }
    std::vector<int64_t> k(static_cast<std::size_t>(ranks), 1);
    k[0] = 3;
    const Schedule ar = allreduce_schedule("ar", 1001, 4, k);
    const CollectiveVolume v = allreduce_volume(1001, 4, k);
    for (int r = 0; r < ranks; ++r) {
      EXPECT_EQ(ar.rounds[1].sent(r) + ar.rounds[2].sent(r), v.sent[r]) << ranks << " ranks, rank " << r;
      EXPECT_EQ(ar.rounds[1].received(r) + ar.rounds[2].received(r), v.received[r]) << ranks << " ranks, rank " << r;
    }
  }
}

TEST(StepModel, RowWiseTablesSendPartialSumsToEveryRank) {
  // One table of 64 blocks on 4 ranks: row-wise, each rank sends one tree node per sample of the
  // other ranks (16 blocks each make one node), so pairs carry B_j · d · 4 bytes.
  const ShardPlan plan = plan_shards({{"only", 6400, 8, 4}}, roomy(4));
  ASSERT_EQ(plan.shards[0].kind, ShardKind::row_wise);
  const Schedule fwd = forward_schedule(plan, 40);
  for (int i = 0; i < 4; ++i) {
    for (int j = 0; j < 4; ++j) EXPECT_EQ(fwd.rounds[1].at(i, j), i == j ? 0 : 10 * 8 * 4);
  }
}

PhaseSeconds unit_phases() { return {1e-6, 2e-6, 10e-6, 4e-6, 1e-6}; }

TEST(StepModel, OneNodeStepIsTheComputeAlone) {
  const ShardPlan plan = plan_shards(mixed_tables(), roomy(1));
  const StepProjection p = project_step(plan, 100, unit_phases(), {1000, 1000}, toy());
  EXPECT_DOUBLE_EQ(p.comm_seconds, 0.0);
  EXPECT_DOUBLE_EQ(p.compute_seconds, 100 * 18e-6);
  EXPECT_DOUBLE_EQ(p.step_seconds, p.compute_seconds);
  EXPECT_DOUBLE_EQ(p.exposed_seconds, 0.0);
}

TEST(StepModel, TimelineHidesCommunicationBehindTheBottomMLP) {
  // 2 ranks, one table each (table-wise): the busiest rank looks up half the work for all samples.
  const ShardPlan plan = plan_shards({{"a", 1000, 16, 4}, {"b", 1000, 16, 4}}, roomy(2));
  ASSERT_EQ(plan.shards[0].kind, ShardKind::table_wise);
  const Fabric slow{"slow", 0, 0, 1e6};  // 1 MB/s: communication dominates
  const PhaseSeconds ph = unit_phases();
  const StepProjection p = project_step(plan, 100, ph, {1000, 2000}, slow);
  const double lookups = 1e-6 * 100 * 0.5, update = 1e-6 * 100 * 0.5;
  const double bot_f = 2e-6 * 50, top = 10e-6 * 50, bot_b = 4e-6 * 50;
  EXPECT_DOUBLE_EQ(p.compute_seconds, lookups + bot_f + top + bot_b + update);
  // Forward: 50 samples × 16 floats each way after a 160-byte header.
  EXPECT_DOUBLE_EQ(p.forward_a2a_seconds, (160 + 50 * 16 * 4) / 1e6);
  EXPECT_DOUBLE_EQ(p.backward_a2a_seconds, (160 + 50 * 16 * 4) / 1e6);
  EXPECT_DOUBLE_EQ(p.allreduce_top_seconds, (160 + 1000 * 4 + 1000 * 4) / 1e6);
  EXPECT_DOUBLE_EQ(p.allreduce_bottom_seconds, (160 + 500 * 4 + 500 * 4) / 1e6);
  const double t2 = lookups + std::max(bot_f, p.forward_a2a_seconds) + top;
  const double worker_end = t2 + p.backward_a2a_seconds + p.allreduce_top_seconds + p.allreduce_bottom_seconds;
  EXPECT_DOUBLE_EQ(p.step_seconds, worker_end);  // the worker is the critical path here
  EXPECT_NEAR(p.exposed_seconds, p.comm_seconds - bot_f - bot_b - update, 1e-15);
  // A fast fabric hides everything but what has nothing to overlap with.
  const StepProjection q = project_step(plan, 100, ph, {1000, 2000}, {"fast", 0, 0, 1e15});
  EXPECT_NEAR(q.step_seconds, q.compute_seconds, 1e-12);
}

TEST(StepModel, StepTimeGrowsWithBytesAndShrinksWithBandwidth) {
  const ShardPlan plan = plan_shards(mixed_tables(), roomy(4));
  double last = 0;
  for (int64_t batch : {64, 256, 1024, 4096}) {  // more samples: more bytes and more compute
    const double t = project_step(plan, batch, unit_phases(), {10000, 20000}, fabric_named("25gbe")).step_seconds;
    EXPECT_GT(t, last) << batch;
    last = t;
  }
  // A faster fabric never slows the step, and speeds it up where communication is exposed (no compute).
  for (const PhaseSeconds& ph : {unit_phases(), PhaseSeconds{}}) {
    const double slow = project_step(plan, 1024, ph, {10000, 20000}, fabric_named("25gbe")).step_seconds;
    const double fast = project_step(plan, 1024, ph, {10000, 20000}, fabric_named("ib100")).step_seconds;
    EXPECT_LE(fast, slow);
    if (ph.top == 0) {
      EXPECT_LT(fast, slow);
    }
  }
  double prev = 0;
  for (int64_t n : {0, 1, 1000, 100000}) {
    const double t = schedule_seconds(allreduce_schedule("ar", n, 4, {1, 1, 1, 1}), fabric_named("ib100"));
    EXPECT_GT(t, prev) << n;
    prev = t;
  }
}

TEST(StepModel, MlpParamsCountWeightsAndBiases) {
  EXPECT_EQ(mlp_params({13, 512, 256}), 13 * 512 + 512 + 512 * 256 + 256);
  EXPECT_EQ(mlp_params({7}), 0);
  EXPECT_ERROR_HAS(mlp_params({4, 0, 2}), "layer width 0 at layer 0");
}

TEST(StepModel, DlrmShapeOfThePresets) {
  DLRMConfig c;
  apply_dlrm_preset(c, "random-bench");
  DlrmShape s = dlrm_shape(c);
  ASSERT_EQ(s.tables.size(), 8u);
  EXPECT_EQ(s.tables[7].name, "C8");
  EXPECT_EQ(s.tables[0].bytes(), int64_t{1000000} * 64 * 4);
  EXPECT_EQ(s.dense.bottom, mlp_params({512, 512, 64}));
  EXPECT_EQ(s.dense.top, mlp_params({100, 1024, 1024, 1024, 1}));  // 9·8/2 + 64 = 100, as strata-dlrm prints
  EXPECT_EQ(s.batch, 2048);
  apply_dlrm_preset(c, "kaggle");
  EXPECT_EQ(dlrm_shape(c).dense.top, mlp_params({367, 512, 256, 1}));
  c.arch_interaction_op = InteractionOp::Cat;
  EXPECT_EQ(dlrm_shape(c).dense.top, mlp_params({27 * 16, 512, 256, 1}));
  c.arch_interaction_op = InteractionOp::Dot;
  c.arch_interaction_itself = true;
  EXPECT_EQ(dlrm_shape(c).dense.top, mlp_params({367 + 27, 512, 256, 1}));
}

TEST(StepModel, FabricsAreNamedAndChecked) {
  EXPECT_EQ(fabric_named("ib100").name, "ib100");
  EXPECT_GT(fabric_named("25gbe").alpha(), fabric_named("ib100").alpha());
  EXPECT_EQ(fabric_names().size(), 2u);
  EXPECT_ERROR_HAS(fabric_named("10gbe"), "unknown fabric '10gbe' (expected 25gbe or ib100)");
  EXPECT_ERROR_HAS(check_fabric({"bad", 1e-6, 0, 0}), "fabric 'bad': bytes_per_second = 0");
  EXPECT_ERROR_HAS(check_fabric({"bad", -1, 0, 1e9}), "fabric 'bad': latency_seconds = -1");
  EXPECT_ERROR_HAS(check_fabric({"bad", 0, -2, 1e9}), "per_message_seconds = -2");
  EXPECT_ERROR_HAS(check_fabric({"bad", 0, 0, 1e9, -1}), "host_bytes_per_second = -1");
}

TEST(StepModel, BadInputsAreNamed) {
  EXPECT_ERROR_HAS(Round(0), "Round: ranks = 0");
  EXPECT_ERROR_HAS(header_round(0), "Round: ranks = 0");
  Round r(2);
  EXPECT_ERROR_HAS(r.set(0, 1, -5), "-5 bytes in 1 messages from rank 0 to rank 1");
  EXPECT_ERROR_HAS(r.set(0, 2, 5), "pair (0, 2) is outside 2 ranks");
  EXPECT_ERROR_HAS(r.set(1, 1, 5), "rank 1 sends to itself");
  EXPECT_ERROR_HAS(allreduce_schedule("ar", -1, 4, {1, 1}), "-1 elements of 4 bytes");
  EXPECT_ERROR_HAS(allreduce_schedule("ar", 10, 4, {}), "no ranks");
  EXPECT_ERROR_HAS(allreduce_schedule("ar", 10, 4, {0, 0}), "no contributions");
  EXPECT_ERROR_HAS(allreduce_schedule("ar", 10, 4, {1, -1}), "rank 1 has -1 contributions");
  const ShardPlan plan = plan_shards(mixed_tables(), roomy(4));
  EXPECT_ERROR_HAS(project_step(plan, 3, unit_phases(), {1, 1}, toy()), "a global batch of 3 samples");
  PhaseSeconds neg = unit_phases();
  neg.top = -1;
  EXPECT_ERROR_HAS(project_step(plan, 64, neg, {1, 1}, toy()), "phase top = -1");
  EXPECT_ERROR_HAS(project_step(plan, 64, unit_phases(), {-3, 1}, toy()), "dense parameter counts -3 (bottom)");
  EXPECT_ERROR_HAS(project_step(plan, 64, unit_phases(), {1, 1}, {"nan", 0, 0, 0}), "fabric 'nan'");
  EXPECT_ERROR_HAS(plan_shards(mixed_tables(), roomy(0)), "ranks = 0");  // 0 nodes
}

// ---- Note [Measured step model] -------------------------------------------------------------------

TEST(MeasuredStepModel, ChunkContributionsAddTheirTreeNodesToTheLocalWork) {
  // 2 ranks, 4 contributions each, 1000 f32: each rank sums its 4 into 1 node over all 1000 elements
  // (4000 read, 1000 written), then the chunk as with one contribution (2000 elements).
  EXPECT_EQ(allreduce_schedule("ar", 1000, 4, {4, 4}).local_bytes, (2000 + 5000) * 4);
  // One rank, 8 contributions: the root node (9000) then the chunk: no receive, 1 node read, written.
  EXPECT_EQ(allreduce_schedule("ar", 1000, 4, {8}).local_bytes, (9000 + 2000) * 4);
}

TEST(MeasuredStepModel, BucketsAreTheLayersTopFirstAndTheWorkerGetsItsShare) {
  EXPECT_EQ(layer_buckets({3, 4, 2}, {5, 6, 1}), (std::vector<int64_t>{6 * 1 + 1, 5 * 6 + 6, 4 * 2 + 2, 3 * 4 + 4}));
  HostShare host{.cores = 2, .threads_per_rank = 1};
  EXPECT_DOUBLE_EQ(host.worker_share(1), 1.0);
  EXPECT_DOUBLE_EQ(host.worker_share(2), 0.5);
  EXPECT_DOUBLE_EQ(host.worker_share(4), 0.25);
  host.threads_per_rank = 2;
  EXPECT_DOUBLE_EQ(host.worker_share(1), 2.0 / 3.0);
}

MeasuredStepInput two_rank_input() {
  MeasuredStepInput in;
  in.plan = plan_shards({{"a", 1000, 4, 4}, {"b", 1000, 4, 4}}, roomy(2));
  in.batch = 8;
  in.chunks = 4;
  in.bottom_mlp = {2, 4};
  in.top_mlp = {7, 1};  // one layer each: buckets {8, 12}
  RankPhases p;
  p.other = 1, p.lookup_remote = 2, p.lookup = 3, p.bottom_mlp = 4, p.interaction = 5, p.top_mlp = 6;
  p.backward = 10, p.sparse_update = 7, p.dense_optimizer = 8;
  in.ranks = {p, p};
  in.ranks[1].bottom_mlp = 14;  // rank 1 is 10 s slower before the gather
  return in;
}

TEST(MeasuredStepModel, FreeCommunicationLeavesTheSlowestRankAndItsWaits) {
  const MeasuredStepInput in = two_rank_input();
  const StepTimeline m = project_measured_step(in, {"free", 0, 0, 1e300}, {.cores = 64});
  EXPECT_DOUBLE_EQ(m.compute_seconds, 56);  // rank 1's phases
  // 1 + 2 + 14 + 3 + 5 + 6 = 31 at the gather, then backward 10, update 7 + 8: rank 1 is the step.
  EXPECT_DOUBLE_EQ(m.step_seconds, 31 + 10 + 15);
  EXPECT_DOUBLE_EQ(m.exposed_seconds, 0.0);  // rank 0 waited for rank 1, which never waited
  EXPECT_LT(m.allreduce_seconds, 1e-200);    // headers at 1e300 B/s
}

TEST(MeasuredStepModel, AllreducesRunInBucketOrderAfterBothRanksAreReady) {
  const MeasuredStepInput in = two_rank_input();
  // Local work only: 1 byte/s on one core, the worker at share 1 (cores 4 for 2 ranks x 1 thread).
  const HostShare host{.cores = 4, .threads_per_rank = 1, .calibrated_share = 1, .host_bytes_per_second = 1};
  const StepTimeline m = project_measured_step(in, {"free", 0, 0, 1e300}, host);
  const double top = static_cast<double>(allreduce_schedule("b", 8, 4, {2, 2}).local_bytes);
  const double bottom = static_cast<double>(allreduce_schedule("b", 12, 4, {2, 2}).local_bytes);
  EXPECT_DOUBLE_EQ(m.allreduce_seconds, top + bottom);
  EXPECT_DOUBLE_EQ(m.allreduce_local_seconds, top + bottom);
  // Bucket 0 (the top layer, 8 of 20 parameters) is ready 4 s into backward at 31, the embedding
  // gradients' exchange right after it on the worker; bucket 1 at backward's end (41). The sparse
  // update (7) waits for the exchange, the dense optimizer (8) for the last bucket.
  const double exchanged = 31 + 4 + top + m.backward_a2a_seconds;
  const double worker = std::max(exchanged, 31.0 + 10) + bottom;
  EXPECT_DOUBLE_EQ(m.step_seconds, std::max(std::max(41.0, exchanged) + 7, worker) + 8);
  // 2 ranks x (1 compute thread + 1 worker) on 2 cores: the worker at half a core, twice the time.
  const StepTimeline h = project_measured_step(in, {"free", 0, 0, 1e300}, {.cores = 2, .host_bytes_per_second = 1});
  EXPECT_DOUBLE_EQ(h.allreduce_seconds, 2 * (top + bottom));
  // A measured worker speed replaces the share: a quarter of a core, four times the time.
  const StepTimeline q =
      project_measured_step(in, {"free", 0, 0, 1e300}, {.cores = 2, .host_bytes_per_second = 1, .worker_speed = 0.25});
  EXPECT_DOUBLE_EQ(q.allreduce_seconds, 4 * (top + bottom));
}

TEST(MeasuredStepModel, RoundsScaleFromTheCalibrationShareToTheWorkers) {
  const MeasuredStepInput in = two_rank_input();
  const Fabric f = toy();
  const StepTimeline fitted_alone = project_measured_step(in, f, {.cores = 2, .calibrated_share = 1});
  // Calibrated at share 1, run at 0.5: every collective twice its α–β time.
  EXPECT_DOUBLE_EQ(fitted_alone.forward_a2a_seconds, 2 * schedule_seconds(forward_schedule(in.plan, 8), f));
  EXPECT_DOUBLE_EQ(fitted_alone.backward_a2a_seconds, 2 * schedule_seconds(backward_schedule(in.plan, 8), f));
  const StepTimeline fitted_shared = project_measured_step(in, f, {.cores = 2, .calibrated_share = 0.5});
  EXPECT_DOUBLE_EQ(fitted_shared.forward_a2a_seconds, schedule_seconds(forward_schedule(in.plan, 8), f));
  EXPECT_GT(fitted_alone.step_seconds, fitted_shared.step_seconds);
}

TEST(MeasuredStepModel, BadInputsAreNamed) {
  MeasuredStepInput in = two_rank_input();
  const Fabric f = toy();
  in.ranks.pop_back();
  EXPECT_ERROR_HAS(project_measured_step(in, f, {}), "phases of 1 ranks for a plan of 2");
  in = two_rank_input();
  in.ranks[1].backward = -1;
  EXPECT_ERROR_HAS(project_measured_step(in, f, {}), "rank 1 has a phase of -1 s");
  in = two_rank_input();
  in.chunks = 1;
  EXPECT_ERROR_HAS(project_measured_step(in, f, {}), "batch 8 and chunks 1 must be at least the 2 ranks");
  in = two_rank_input();
  EXPECT_ERROR_HAS(project_measured_step(in, f, {.cores = 0}), "cores 0 and threads per rank 1 must be >= 1");
  EXPECT_ERROR_HAS(project_measured_step(in, f, {.calibrated_share = 2}), "calibrated_share 2 (expected (0, 1])");
  EXPECT_ERROR_HAS(project_measured_step(in, f, {.host_bytes_per_second = -1}), "host_bytes_per_second -1");
  EXPECT_ERROR_HAS(project_measured_step(in, f, {.worker_speed = -0.5}), "worker_speed -0.5 (expected >= 0");
  in.top_mlp = {7};
  EXPECT_ERROR_HAS(project_measured_step(in, f, {}), "an MLP needs at least 2 widths, got 1");
}

}  // namespace
}  // namespace strata::emb
