// The pieces of the distributed strata-dlrm (embeddings/dist/dlrm_dist_run.h) at whatever rank count
// the suite runs: the refused flags, the canonical flags, the data fingerprint, the cross-rank check
// (a rank given another value is named on every rank), the plan's budget error, the comm: line, and
// DistributedTrainable's scores against DistributedDLRM's (and its test loss: the run's loss of the
// clamped scores), every step's learning rate equal to the one-process TieredDLRM's for the same
// schedule flags, the step's phase times and their lines. strata-dlrm itself runs under mpirun in
// tests/cpp/emb_dist/dlrm_cli/run_dlrm_cli.sh.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <unistd.h>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>

#include "core/pin_set.h"
#include "dist/communicator.h"
#include "embeddings/dist/dlrm_dist_run.h"
#include "embeddings/dist/rank_agreement.h"
#include "embeddings/dlrm.h"
#include "embeddings/dlrm_config.h"
#include "memory/heap.h"
#include "tests/cpp/error_text.h"

namespace strata::emb {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using testing_util::error_of;

dist::Communicator& comm() { return dist::Communicator::world(); }

// A small valid distributed config plus `extra` flags.
DLRMConfig dist_config(std::vector<std::string> extra = {}) {
  std::vector<std::string> args = {"--arch-embedding-size",
                                   "60-40-9",
                                   "--arch-sparse-feature-size",
                                   "4",
                                   "--arch-mlp-bot",
                                   "3-6-4",
                                   "--arch-mlp-top",
                                   "5-1",
                                   "--loss-function",
                                   "bce",
                                   "--mini-batch-size",
                                   "12",
                                   "--num-batches",
                                   "2",
                                   "--dist-backend=mpi"};
  args.insert(args.end(), extra.begin(), extra.end());
  return parse_dlrm_args(args);
}

TEST(DlrmDistRun, AcceptsTheSupportedFlags) {
  EXPECT_NO_THROW(check_distributed_flags(dist_config({"--optimizer", "rwsadagrad", "--test-freq", "1"}), 4));
  EXPECT_NO_THROW(check_distributed_flags(dist_config({"--enable-profiling"}), 4));
  // Uneven last batches of at least one sample per rank.
  EXPECT_NO_THROW(check_distributed_flags(dist_config({"--num-batches", "0", "--data-size", "28"}), 4));
  // The reference's losses, the output clamp and learning-rate schedules (DistributedDLRMConfig).
  EXPECT_NO_THROW(check_distributed_flags(dist_config({"--loss-function", "mse", "--loss-threshold", "0.01"}), 4));
  EXPECT_NO_THROW(check_distributed_flags(dist_config({"--loss-function", "wbce", "--loss-weights", "0.5-2"}), 4));
  EXPECT_NO_THROW(check_distributed_flags(
      dist_config({"--lr-num-warmup-steps", "3", "--lr-decay-start-step", "5", "--lr-num-decay-steps", "5"}), 4));
}

TEST(DlrmDistRun, CheckpointsAreDirectories) {
  namespace fs = std::filesystem;
  // This rank's own scratch (the checks are local; ranks must not race on one path).
  const fs::path dir = fs::path(::testing::TempDir()) / ("strata_dist_ckpt_paths_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "old");
  std::ofstream(dir / "afile") << "x";
  auto config = [&](const char* flag, const fs::path& p) { return dist_config({flag, p.string()}); };
  // Savable: a new directory in an existing one, or an existing directory.
  EXPECT_NO_THROW(check_distributed_checkpoint_paths(config("--save-model", dir / "new")));
  EXPECT_NO_THROW(check_distributed_checkpoint_paths(config("--save-model", dir / "old")));
  EXPECT_NO_THROW(check_distributed_flags(config("--save-model", dir / "new"), 4));
  EXPECT_THAT(error_of([&] { check_distributed_checkpoint_paths(config("--save-model", dir / "afile")); }),
              HasSubstr("is a file; a distributed checkpoint is a directory"));
  EXPECT_THAT(error_of([&] { check_distributed_checkpoint_paths(config("--save-model", dir / "no" / "such")); }),
              HasSubstr("--save-model: cannot write"));
  // Loadable: a directory with a manifest.
  EXPECT_THAT(error_of([&] { check_distributed_checkpoint_paths(config("--load-model", dir / "old")); }),
              HasSubstr("--load-model: cannot open '" + (dir / "old" / "manifest").string() + "'"));
  std::ofstream(dir / "old" / "manifest") << "x";
  EXPECT_NO_THROW(check_distributed_checkpoint_paths(config("--load-model", dir / "old")));
  fs::remove_all(dir);
}

TEST(DlrmDistRun, RefusesWhatItDoesNotSupportNamingTheFlag) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--md-flag", "--md-threshold", "10"}, "--md-flag: not supported"},
      {{"--qr-flag", "--qr-threshold", "10"}, "--qr-flag: not supported"},
      {{"--weighted-pooling", "fixed"}, "--weighted-pooling: not supported"},
      {{"--arch-interaction-itself", "--arch-mlp-top", "6-1"}, "--arch-interaction-itself: not supported"},
      {{"--emb-dtype", "bf16"}, "--emb-dtype: not supported"},
      {{"--emb-policy", "static"},
       "--emb-policy static: places the shards in the slow tier, and a distributed run has one only with "
       "--slow-dir DIR"},
      {{"--cache-fraction", "0.5"}, "--cache-fraction 0.5: caches the slow tier's rows, and a distributed run"},
      {{"--dist-chunks", "2"}, "--dist-chunks: 2 chunks for 4 ranks"},
      {{"--mini-batch-size", "3"}, "--mini-batch-size: 3 samples for 4 ranks"},
      {{"--test-mini-batch-size", "2"}, "--test-mini-batch-size: 2 samples for 4 ranks"},
      {{"--num-batches", "0", "--data-size", "26"}, "--data-size: 26 samples in batches of 12 leave a last batch of 2"},
      {{"--num-batches", "0", "--data-size", "24", "--test-mini-batch-size", "7"},
       "--data-size: 24 samples in batches of 7 leave a last batch of 3, fewer than the 4 ranks"},
  };
  for (const auto& [flags, expected] : cases)
    EXPECT_THAT(error_of([&] { check_distributed_flags(dist_config(flags), 4); }), HasSubstr(expected)) << flags[0];
}

TEST(DlrmDistRun, RefusesCriteoDataWithoutAProcessedFile) {
  const std::string raw = ::testing::TempDir() + "dlrm_dist_raw_" + std::to_string(::getpid()) + ".txt";
  std::ofstream(raw) << "0\t1\n";
  DLRMConfig c = dist_config();
  c.data_generation = DataGeneration::Dataset;
  c.raw_data_file = raw;
  EXPECT_THAT(error_of([&] { check_distributed_flags(c, 1); }),
              HasSubstr("--processed-data-file: --dist-backend reads an existing processed file"));
  std::filesystem::remove(raw);
}

TEST(DlrmDistRun, ModelConfigAndPlanFollowTheFlags) {
  const DLRMConfig c = dist_config({"--arch-interaction-op", "cat", "--arch-mlp-top", "16-1", "--learning-rate", "0.25",
                                    "--numpy-rand-seed", "9", "--dist-chunks", "6", "--check-finite"});
  const DistributedDLRMConfig m = distributed_model_config(c);
  EXPECT_TRUE(m.check_finite);
  EXPECT_FALSE(distributed_model_config(dist_config()).check_finite);
  EXPECT_NO_THROW(check_distributed_flags(c, 2));
  EXPECT_EQ(m.bottom_mlp, (std::vector<int64_t>{3, 6, 4}));
  EXPECT_EQ(m.top_mlp, (std::vector<int64_t>{16, 1}));
  EXPECT_EQ(m.interaction, "cat");
  EXPECT_EQ(m.learning_rate, 0.25);
  EXPECT_EQ(m.seed, 9u);
  EXPECT_EQ(m.chunks, 6);
  EXPECT_EQ(m.loss_function, LossFunction::BCE);
  const DistributedDLRMConfig r = distributed_model_config(
      dist_config({"--loss-function", "wbce", "--loss-weights", "0.5-2", "--loss-threshold", "0.125",
                   "--lr-num-warmup-steps", "3", "--lr-decay-start-step", "5", "--lr-num-decay-steps", "4"}));
  EXPECT_EQ(r.loss_function, LossFunction::WBCE);
  EXPECT_EQ(r.loss_weights, (std::vector<double>{0.5, 2.0}));
  EXPECT_EQ(r.loss_threshold, 0.125);
  EXPECT_EQ(r.lr_schedule.warmup_steps, 3);
  EXPECT_EQ(r.lr_schedule.decay_start_step, 5);
  EXPECT_EQ(r.lr_schedule.decay_steps, 4);
  const ShardPlan plan = plan_dlrm_shards(c, 2);
  ASSERT_EQ(plan.tables.size(), 3u);
  EXPECT_EQ(plan.tables[1].name, "emb_l.1");
  EXPECT_EQ(plan.tables[1].rows, 40);
  EXPECT_EQ(plan.ranks, 2);
  // 60 x 4 x 4 = 960 bytes cannot fit one rank's 512 bytes whole, and 1000 bytes not on two ranks.
  EXPECT_THAT(error_of([&] { plan_dlrm_shards(dist_config({"--fast-budget", "256"}), 2); }),
              HasSubstr("--fast-budget 256 B per rank (2 ranks; no slow tier: --slow-dir gives each rank one)"));
  // With a slow tier the same tables are planned (beyond the fast budget).
  EXPECT_EQ(plan_dlrm_shards(dist_config({"--fast-budget", "256"}), 2, 1 << 20).ranks, 2);
  EXPECT_THAT(error_of([&] { plan_dlrm_shards(dist_config({"--fast-budget", "256"}), 2, 300); }),
              HasSubstr("--fast-budget 256 B per rank (2 ranks; slow tier 300 B per rank)"));
}

// Note [Shard storage]: --emb-policy and --cache-fraction with --slow-dir, and where each rank's shards go.
TEST(DlrmDistRun, ShardPlacementFollowsTheFlags) {
  const std::string d = ::testing::TempDir();  // --slow-dir must exist; nothing is written there
  EXPECT_NO_THROW(check_distributed_flags(dist_config({"--emb-policy", "dynamic", "--slow-dir", d}), 4));
  EXPECT_NO_THROW(check_distributed_flags(dist_config({"--cache-fraction", "0.5", "--slow-dir", d}), 4));
  EXPECT_THAT(error_of([&] { dist_config({"--cache-fraction", "1.5", "--slow-dir", d}); }),
              HasSubstr("--cache-fraction: expected a fraction in (0, 1], got 1.5"));
  const DLRMConfig c = dist_config({"--emb-policy", "static", "--cache-fraction", "0.25", "--slow-dir", d});
  const ShardPlacementOptions o = dlrm_shard_placement(c);
  EXPECT_EQ(o.policy, EmbeddingPolicy::Static);
  EXPECT_EQ(o.fast_budget, c.fast_budget);
  EXPECT_EQ(o.cache_fraction, 0.25);
  const ShardPlan plan = plan_dlrm_shards(c, 2);
  EXPECT_THAT(describe_shard_storage(plan, c), HasSubstr("cached (static, fraction 0.25): rows in the slow tier '" +
                                                         (std::filesystem::path(d) / "rank-1").string() + "', DRAM"));
  const DLRMConfig dram = dist_config();
  const std::string lines = describe_shard_storage(plan_dlrm_shards(dram, 2), dram);
  EXPECT_THAT(lines, HasSubstr("rank 0 shards: "));
  EXPECT_THAT(lines, HasSubstr("of rows, DRAM, DRAM "));
  EXPECT_THAT(lines, ::testing::Not(HasSubstr("slow tier")));
  // Without --slow-dir every shard is in DRAM, whatever its bytes' slack beside --fast-budget.
  EXPECT_EQ(dlrm_shard_placement(dram).fast_budget, std::numeric_limits<std::size_t>::max());
  // Auto over a rank's budget caches; a cache fraction that does not fit is named with the rank.
  const DLRMConfig tight =
      dist_config({"--arch-embedding-size", "3000-2000-900", "--fast-budget", "90000", "--slow-dir", d});
  EXPECT_THAT(describe_shard_storage(plan_dlrm_shards(tight, 1, 1 << 20), tight), HasSubstr("cached (auto, fraction"));
  const DLRMConfig big = dist_config(
      {"--arch-embedding-size", "3000-2000-900", "--fast-budget", "90000", "--cache-fraction", "1", "--slow-dir", d});
  EXPECT_THAT(error_of([&] { describe_shard_storage(plan_dlrm_shards(big, 1, 1 << 20), big); }),
              HasSubstr("rank 0's shards (3 tables): --cache-fraction 1: the caches would need"));
}

TEST(DlrmDistRun, CanonicalArgsAreSortedWithTheLastOccurrenceWinning) {
  const RankFields f = canonical_dlrm_args({"--mini-batch-size=8", "--print-time", "--learning-rate", "0.5",
                                            "--mini-batch-size", "16", "--dist-backend=mpi"});
  const RankFields expected = {
      {"--dist-backend", "mpi"}, {"--learning-rate", "0.5"}, {"--mini-batch-size", "16"}, {"--print-time", "true"}};
  EXPECT_EQ(f, expected);
  EXPECT_EQ(canonical_dlrm_args({"--learning-rate", "0.5"}), canonical_dlrm_args({"--learning-rate=0.5"}));
}

TEST(DlrmDistRun, DataFingerprintSeesSizeAndBothEnds) {
  const std::string dir =
      ::testing::TempDir() + "dlrm_dist_fp_" + std::to_string(::getpid()) + "_" + std::to_string(comm().rank());
  std::filesystem::create_directories(dir);
  const std::string trace = dir + "/t_j.log";
  DLRMConfig c = dist_config();
  c.arch_embedding_size = {5, 5};
  c.data_generation = DataGeneration::Synthetic;
  c.data_trace_file = trace;
  const std::string big(std::size_t{3} << 20, 'x');  // more than the two sampled MiB
  std::ofstream(dir + "/t_0.log") << big;
  const RankFields before = dlrm_data_fingerprint(c);
  ASSERT_EQ(before.size(), 2u);
  EXPECT_EQ(before[0].first, "--data-trace-file " + dir + "/t_0.log");
  EXPECT_THAT(before[0].second, HasSubstr(std::to_string(big.size()) + " bytes, hash "));
  EXPECT_EQ(before[1].second, "missing");
  std::string changed = big;
  changed.back() = 'y';  // the last byte
  std::ofstream(dir + "/t_0.log") << changed;
  const RankFields after = dlrm_data_fingerprint(c);
  EXPECT_NE(before[0].second, after[0].second);
  EXPECT_TRUE(dlrm_data_fingerprint(dist_config()).empty());  // generated data: nothing to compare
  std::filesystem::remove_all(dir);
}

TEST(DlrmDistRun, SameFieldsOnEveryRankPass) {
  EXPECT_NO_THROW(check_same_on_every_rank(comm(), {{"--a", "1"}, {"--b", "two words"}}, "flag"));
  EXPECT_NO_THROW(check_same_on_every_rank(comm(), {}, "data file"));
}

TEST(DlrmDistRun, ADifferentValueIsNamedOnEveryRankWithBothRanks) {
  if (comm().size() < 2) GTEST_SKIP() << "needs 2 ranks";
  const int last = comm().size() - 1;
  const RankFields mine = {{"--a", "1"}, {"--lr", comm().rank() == last ? "0.2" : "0.1"}};
  EXPECT_THAT(
      error_of([&] { check_same_on_every_rank(comm(), mine, "flag"); }),
      HasSubstr("flag --lr differs across ranks: rank 0 has '0.1', rank " + std::to_string(last) + " has '0.2'"));
  // A field only one rank has.
  RankFields extra = {{"--a", "1"}};
  if (comm().rank() == 1) extra.emplace_back("--print-time", "true");
  EXPECT_THAT(error_of([&] { check_same_on_every_rank(comm(), extra, "flag"); }),
              HasSubstr("flag --print-time differs across ranks: rank 0 has (not given), rank 1 has 'true'"));
}

// Note [Agreed failures]: bytes with NULs and of every length survive the gather.
TEST(RankAgreement, AllgatherBytesGivesEveryRanksBytesInRankOrder) {
  const int me = comm().rank();
  std::string mine(static_cast<std::size_t>(3 * me), 'x');
  if (me > 0) mine[1] = '\0';
  const std::vector<std::string> all = allgather_bytes(comm(), mine);
  ASSERT_EQ(all.size(), static_cast<std::size_t>(comm().size()));
  for (int r = 0; r < comm().size(); ++r) {
    EXPECT_EQ(all[static_cast<std::size_t>(r)].size(), static_cast<std::size_t>(3 * r)) << r;
    if (r > 0) EXPECT_EQ(all[static_cast<std::size_t>(r)][1], '\0');
  }
  EXPECT_EQ(allgather_bytes(comm(), ""), std::vector<std::string>(static_cast<std::size_t>(comm().size())));
}

TEST(RankAgreement, AStepThatFailsOnOneRankFailsEveryRankNamingIt) {
  EXPECT_NO_THROW(agree_on_every_rank(comm(), "the check", [] {}));
  const int me = comm().rank(), last = comm().size() - 1;
  EXPECT_EQ(error_of([&] {
              agree_on_every_rank(comm(), "the check", [&] {
                if (me == last) throw Error("--json: cannot write 'x'");
              });
            }),
            "the check failed on rank " + std::to_string(last) + ": --json: cannot write 'x'");
  // Several ranks: the lowest is named, the others listed.
  const std::string all = error_of([&] {
    agree_on_every_rank(comm(), "the check", [&] { throw Error("rank " + std::to_string(me) + "'s problem"); });
  });
  std::string expected = "the check failed on rank 0: rank 0's problem";
  for (int r = 1; r < comm().size(); ++r) expected += (r == 1 ? " (also on rank " : ", rank ") + std::to_string(r);
  EXPECT_EQ(all, expected + (comm().size() > 1 ? ")" : ""));
  // The communicator is in step afterwards.
  EXPECT_NO_THROW(check_same_on_every_rank(comm(), {{"--a", "1"}}, "flag"));
}

TEST(DlrmDistRun, CommLineIsPerStepFromCounterDeltas) {
  dist::CommStats before, after, sum;
  after.ops[static_cast<int>(dist::Op::alltoallv)].bytes_sent = 3'000'000;
  after.ops[static_cast<int>(dist::Op::allreduce)].bytes_sent = 1'000'000;
  after.ops[static_cast<int>(dist::Op::alltoallv)].busy_seconds = 0.004;
  after.ops[static_cast<int>(dist::Op::alltoallv)].wait_seconds = 0.001;
  add_comm_delta(sum, before, after);
  add_comm_delta(sum, before, after);
  EXPECT_EQ(sum[dist::Op::alltoallv].bytes_sent, 6'000'000);
  EXPECT_EQ(comm_line(sum, 2, 0),
            "comm: rank 0 sent per step: alltoallv (forward + backward) 3 MB, allreduce 1 MB, allgatherv 0 MB, "
            "reduce_scatter 0 MB; in collectives 4.000 ms/it, exposed 1.000 ms/it (25.0 %)\n");
}

// A batch of dist_config's 3 tables: one index per bag, (s·mult + k) mod 9 for table k.
struct TinyBatch {
  std::vector<float> dense, targets;
  std::vector<std::vector<int64_t>> idx{3}, off{3};
  std::vector<Bags> bags;
  TinyBatch(int64_t batch, float x, float target, int64_t mult)
      : dense(static_cast<std::size_t>(batch * 3), x), targets(static_cast<std::size_t>(batch), target) {
    for (int k = 0; k < 3; ++k) {
      for (int64_t s = 0; s <= batch; ++s) off[k].push_back(s);
      for (int64_t s = 0; s < batch; ++s) idx[k].push_back((s * mult + k) % 9);
      bags.push_back(Bags{idx[k], off[k]});
    }
  }
};

TEST(DlrmDistRun, TrainableScoresAreTheModelsAndTrainingStepsAreCounted) {
  const DLRMConfig c = dist_config({"--learning-rate", "0.1"});
  memory::DramHeap heap(std::size_t{1} << 20);
  DistributedDLRM model(distributed_model_config(c), plan_dlrm_shards(c, comm().size()), {&heap, nullptr}, comm());
  DistributedTrainable t(model, 3);
  const int64_t batch = 12;
  const TinyBatch b(batch, 0.5f, 1.0f, 7);
  const std::vector<float>& dense = b.dense;
  const std::vector<float>& targets = b.targets;
  const std::vector<Bags>& bags = b.bags;
  std::vector<float> scores;
  const float loss = t.score(dense, bags, targets, scores);
  const Tensor z = model.score(dense, bags);
  PinSet pins;
  pins.add(z, AccessMode::Read).acquire();
  ASSERT_EQ(scores.size(), static_cast<std::size_t>(batch));
  for (int64_t s = 0; s < batch; ++s) EXPECT_EQ(scores[s], z.data<float>()[s]) << s;
  EXPECT_GT(loss, 0.0f);  // -log p of targets 1
  EXPECT_EQ(t.steps(), 0);
  t.train_step(dense, bags, targets);
  EXPECT_EQ(t.steps(), 1);
  if (comm().size() > 1) {
    EXPECT_GT(t.step_comm()[dist::Op::alltoallv].bytes_sent, 0);
  }
  EXPECT_THAT(t.progress_detail(), HasSubstr("comm: rank " + std::to_string(comm().rank()) + " sent per step"));
}

TEST(DlrmDistRun, TrainableScoresWithTheRunsLossAndClamp) {
  // mse on probabilities clamped into [0.4, 0.6]: the test loss is the mean squared error of the
  // clamped scores (Note [DLRM loss]), not bce.
  const DLRMConfig c = dist_config({"--loss-function", "mse", "--loss-threshold", "0.4"});
  memory::DramHeap heap(std::size_t{1} << 20);
  DistributedDLRM model(distributed_model_config(c), plan_dlrm_shards(c, comm().size()), {&heap, nullptr}, comm());
  DistributedTrainable t(model, 3);
  TinyBatch sb(12, 0.5f, 1.0f, 7);
  for (int64_t s = 0; s < 12; s += 2) sb.targets[s] = 0.0f;
  std::vector<float> scores;
  const float loss = t.score(sb.dense, sb.bags, sb.targets, scores);
  double sum = 0;
  for (std::size_t s = 0; s < scores.size(); ++s) {
    EXPECT_TRUE(scores[s] >= 0.4f && scores[s] <= 0.6f) << scores[s];
    sum += (static_cast<double>(scores[s]) - sb.targets[s]) * (static_cast<double>(scores[s]) - sb.targets[s]);
  }
  EXPECT_NEAR(loss, sum / static_cast<double>(scores.size()), 1e-6);
}

TEST(DlrmDistRun, LearningRatePerStepIsTheOneProcessRuns) {
  // The reference's schedule from the flags (LRSchedule, the function TieredDLRM uses): warm-up over
  // 3 steps, frozen, decay from step 5 over 5 steps, frozen at the last decayed rate.
  const std::vector<std::string> flags = {"--learning-rate",       "0.3", "--lr-num-warmup-steps", "3",
                                          "--lr-decay-start-step", "5",   "--lr-num-decay-steps",  "5",
                                          "--slow-tier-model",     "off", "--fast-budget",         "1M"};
  const DLRMConfig c = dist_config(flags);
  DLRMConfig one = c;  // the same flags without --dist-backend
  one.dist_backend.clear();
  one.dist_chunks = DLRMConfig{}.dist_chunks;
  memory::DramHeap heap(std::size_t{1} << 20);
  DistributedDLRM model(distributed_model_config(c), plan_dlrm_shards(c, comm().size()), {&heap, nullptr}, comm());
  TieredDLRM tiered(one);
  const TinyBatch sb(12, 0.5f, 1.0f, 7);
  std::vector<double> rates;
  for (int s = 0; s < 12; ++s) {
    const double lr = tiered.next_learning_rate();
    EXPECT_EQ(model.next_learning_rate(), lr) << "step " << s + 1;
    model.train_step(sb.dense, sb.bags, sb.targets);
    tiered.train_step(sb.dense, sb.bags, sb.targets);
    EXPECT_EQ(model.learning_rate(), lr) << "the rate step " << s + 1 << " trained at";
    rates.push_back(lr);
  }
  EXPECT_DOUBLE_EQ(rates[0], 0.1);        // warm-up: 0.3 · (1 − 2/3)
  EXPECT_DOUBLE_EQ(rates[3], 0.2);        // between warm-up and decay: frozen at step 2's
  EXPECT_DOUBLE_EQ(rates[4], 0.3);        // step 5 starts the decay at the base rate
  EXPECT_DOUBLE_EQ(rates[8], 0.3 / 25);   // step 9: 0.3 · (1/5)²
  EXPECT_DOUBLE_EQ(rates[11], 0.3 / 25);  // after the decay: frozen
}

TEST(DlrmDistRun, PhaseLinesArePerStep) {
  DLRMPhaseTimes p;
  p.bottom_mlp = 0.002, p.lookup = 0.004, p.interaction = 0.006, p.top_mlp = 0.008, p.backward = 0.01;
  p.update = 0.012, p.steps = 3;
  DLRMPhaseTimes q;
  q.steps = 1;
  EXPECT_EQ(phase_line(p, q),
            "  phases (ms/it): bottom MLP 1.000, lookup 2.000, interaction 3.000, top MLP 4.000, backward 5.000, "
            "update 6.000\n");
  DistStepTimes t;
  t.lookup_remote = 0.001, t.sparse_update = 0.002, t.dense_optimizer = 0.003, t.other = 0.004, t.waited = 0.005;
  t.steps = 1;
  EXPECT_EQ(dist_phase_line(t),
            "  distributed phases (ms/it): lookups for other ranks 1.000 (of lookup), sparse update 2.000, dense "
            "optimizer 3.000 (update), other 4.000, blocked in collectives 5.000\n");
  t.lookup = 0.5;
  const DLRMPhaseTimes a = t.as_phases();
  EXPECT_DOUBLE_EQ(a.lookup, 0.501);
  EXPECT_DOUBLE_EQ(a.update, 0.005);
  EXPECT_EQ(a.steps, 1);
  const DistStepTimes none = t.since(t);
  EXPECT_EQ(none.steps, 0);
  EXPECT_EQ(none.waited, 0.0);
  EXPECT_EQ(none.lookup, 0.0);
}

TEST(DlrmDistRun, StepPhasesAddUpToTheStepAndProfilingPrintsThem) {
  const DLRMConfig c = dist_config({"--learning-rate", "0.1"});
  memory::DramHeap heap(std::size_t{1} << 20);
  DistributedDLRM model(distributed_model_config(c), plan_dlrm_shards(c, comm().size()), {&heap, nullptr}, comm());
  DistributedTrainable t(model, 3, /*profile=*/true);
  t.reset_stats();
  const TinyBatch b(12, 0.25f, 0.0f, 5);
  double wall = 0;
  for (int step = 0; step < 2; ++step) {
    const auto t0 = std::chrono::steady_clock::now();
    t.train_step(b.dense, b.bags, b.targets);
    wall += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  const DistStepTimes s = t.step_times();
  EXPECT_EQ(s.steps, 2);
  ASSERT_EQ(t.step_log().size(), 2u);  // step by step, adding up to the sums
  EXPECT_EQ(t.step_log()[0].steps, 1);
  EXPECT_DOUBLE_EQ(t.step_log()[0].backward + t.step_log()[1].backward, s.backward);
  EXPECT_DOUBLE_EQ(t.step_log()[0].waited + t.step_log()[1].waited, s.waited);
  double sum = s.waited;
  for (double phase : {s.lookup_remote, s.lookup, s.bottom_mlp, s.interaction, s.top_mlp, s.backward, s.sparse_update,
                       s.dense_optimizer, s.other}) {
    EXPECT_GE(phase, 0.0);
    sum += phase;
  }
  EXPECT_GT(s.bottom_mlp, 0.0);
  EXPECT_GT(s.backward, 0.0);
  EXPECT_GT(s.lookup, 0.0);
  // The laps cover the step: all but the calls into train_step and out of it.
  EXPECT_LE(sum, wall);
  EXPECT_GE(sum, 0.8 * wall - 0.01);
  const std::string detail = t.progress_detail();
  EXPECT_THAT(detail, HasSubstr("  phases (ms/it): bottom MLP "));
  EXPECT_THAT(detail, HasSubstr("  distributed phases (ms/it): lookups for other ranks "));
  // A trainable without --enable-profiling prints the comm: line only.
  DistributedTrainable quiet(model, 3);
  EXPECT_THAT(quiet.progress_detail(), Not(HasSubstr("phases")));
}

}  // namespace
}  // namespace strata::emb
