// DistributedDLRM checkpoints (embeddings/dist/dist_checkpoint.h, Note [Resharding checkpoints]) at
// whatever rank count the suite runs: train N steps, save, load into a fresh model (other initial
// weights) under the same or another plan, train N more: the losses, MLP parameters and held rows
// are bitwise those of the one-process reference's 2N uninterrupted steps, for sgd, rwsadagrad
// and adagrad. A save that fails midway leaves the previous checkpoint loadable. Bad checkpoints
// are named on every rank. Rows saved from shards behind a DRAM cache load into DRAM shards and back
// (DistCheckpointTier). DistCheckpointReshard.Save/Load run in separate mpiruns (ctest:
// emb_dist_reshard_save_np4, then emb_dist_reshard_load_np1/np2) to load at another rank count.
#include <gtest/gtest.h>

#include <unistd.h>
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "core/text.h"
#include "embeddings/dist/dist_checkpoint.h"
#include "tests/cpp/bitwise.h"
#include "tests/cpp/emb_dist/dlrm_reference.h"
#include "tests/cpp/emb_dist/reshard_dir.h"
#include "tests/cpp/error_text.h"

namespace strata::emb {
namespace {

using namespace dlrm_test;  // the suite's model, batches and reference (dlrm_reference.h)
using dlrm_test::Batch;     // not emb::Batch
namespace fs = std::filesystem;

constexpr int kHalf = 2;  // steps before and after the checkpoint

/// Every rank waits for every other.
void barrier() { comm().allgatherv(full({1}, 0.0, {DType::i64})); }

// Where the test checkpoints (a few KB) go: a tmpfs (/dev/shm) when the machine has one, whose
// fsync returns at once — on a disk busy with a parallel build, the saves' fsyncs made one run of
// this suite take minutes. Durability is not what these tests check (tests/cpp/fault does).
std::string scratch_root() {
  std::error_code ec;
  return fs::is_directory("/dev/shm", ec) ? std::string("/dev/shm") : ::testing::TempDir();
}

/// A directory every rank names the same (rank 0's pid), removed by rank 0 at the end.
class SharedDir {
 public:
  explicit SharedDir(const std::string& name) {
    const Tensor pid = comm().allgatherv(full({1}, static_cast<double>(::getpid()), {DType::i64}));
    path_ = (fs::path(scratch_root()) / ("strata_dist_ckpt_" + std::to_string(pid.data<int64_t>()[0]) + "_" + name))
                .string();
    if (comm().rank() == 0) fs::remove_all(path_);
    barrier();
  }
  ~SharedDir() {
    barrier();
    if (comm().rank() == 0) fs::remove_all(path_);
  }
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return (fs::path(path_) / name).string(); }

 private:
  std::string path_;
};

std::unique_ptr<DistributedDLRM> make_model(memory::Heap& heap, OptimizerKind optimizer, Kind kind,
                                            uint64_t seed = 77) {
  DistributedDLRMConfig c = config(optimizer);
  c.seed = seed;  // another seed: every loaded value must come from the checkpoint
  return std::make_unique<DistributedDLRM>(c, plan(kind, comm().size()), TableMemory{&heap, nullptr}, comm());
}

/// Trains steps [first, end) of the suite's batches of 37.
std::vector<float> train(DistributedDLRM& model, int first, int end) {
  std::vector<float> losses;
  for (int s = first; s < end; ++s) {
    const Batch b(37, s);
    losses.push_back(model.train_step(b.dense, b.bags, b.targets));
  }
  return losses;
}

/// `model` was loaded after kHalf steps: kHalf more give the reference's losses, MLPs and rows.
/// Returns the losses.
std::vector<float> expect_continues_like_reference(DistributedDLRM& model, OptimizerKind optimizer) {
  memory::DramHeap heap(std::size_t{4} << 20);
  Reference ref(heap, optimizer);
  std::vector<float> want;
  for (int s = 0; s < 2 * kHalf; ++s) want.push_back(ref.step(Batch(37, s)));
  EXPECT_EQ(model.steps(), kHalf);
  const std::vector<float> got = train(model, kHalf, 2 * kHalf);
  EXPECT_TRUE(testing_util::bitwise_equal(got, std::vector<float>(want.begin() + kHalf, want.end())));
  const std::vector<Tensor> mine = model.dense_module().parameters(), theirs = ref.mlp().parameters();
  EXPECT_EQ(mine.size(), theirs.size());
  for (std::size_t p = 0; p < std::min(mine.size(), theirs.size()); ++p)
    EXPECT_TRUE(testing_util::same_bits(mine[p], theirs[p])) << "MLP parameter " << p;
  std::vector<float> a(4), w(4);
  for (int t = 0; t < static_cast<int>(tables().size()); ++t) {
    for (int64_t r = model.tables().row_begin(t); r < model.tables().row_end(t); ++r) {
      model.tables().read_row(t, r, a.data());
      ref.embeddings().read_row(t, r, w.data());
      EXPECT_TRUE(testing_util::bitwise_equal(a, w)) << "table " << t << " row " << r;
    }
  }
  return got;
}

struct Case {
  OptimizerKind optimizer;
  Kind saved, loaded;  // the plans of the model that saves and of the one that loads
};

const char* kind_name(Kind k) {
  return k == Kind::table_wise ? "table_wise" : k == Kind::row_wise ? "row_wise" : "mixed";
}

std::vector<Case> cases() {
  std::vector<Case> out;
  for (OptimizerKind o : {OptimizerKind::SGD, OptimizerKind::RowWiseAdagrad, OptimizerKind::Adagrad}) {
    out.push_back({o, Kind::mixed, Kind::mixed});
    out.push_back({o, Kind::table_wise, Kind::row_wise});
    out.push_back({o, Kind::row_wise, Kind::mixed});
  }
  return out;
}

class DistCheckpoint : public ::testing::TestWithParam<Case> {};

TEST_P(DistCheckpoint, LoadedModelContinuesBitwise) {
  const Case c = GetParam();
  const SharedDir dir("resume");
  memory::DramHeap heap(std::size_t{4} << 20), fresh_heap(std::size_t{4} << 20);
  const auto model = make_model(heap, c.optimizer, c.saved);
  const std::vector<float> before = train(*model, 0, kHalf);
  model->save(dir.path(), {{"epoch", "3"}}, 40);  // chunks of 2 rows (the last of 1 where odd)
  const auto fresh = make_model(fresh_heap, c.optimizer, c.loaded, 1234);
  const CheckpointMetadata meta = fresh->load(dir.path(), 24);  // chunks of 1 row
  const auto epoch = std::find_if(meta.begin(), meta.end(), [](const auto& kv) { return kv.first == "epoch"; });
  ASSERT_NE(epoch, meta.end());
  EXPECT_EQ(epoch->second, "3");
  const std::vector<float> after = expect_continues_like_reference(*fresh, c.optimizer);
  // Saving did not disturb the model that saved.
  EXPECT_TRUE(testing_util::bitwise_equal(train(*model, kHalf, 2 * kHalf), after));
}

INSTANTIATE_TEST_SUITE_P(OptimizersAndPlans, DistCheckpoint, ::testing::ValuesIn(cases()), [](const auto& info) {
  return std::string(to_string(info.param.optimizer)) + "_" + kind_name(info.param.saved) + "_to_" +
         kind_name(info.param.loaded);
});

TEST(DistCheckpointFiles, LayoutAndManifest) {
  const int n = comm().size();
  const SharedDir dir("layout");
  memory::DramHeap heap(std::size_t{4} << 20);
  const auto model = make_model(heap, OptimizerKind::RowWiseAdagrad, Kind::mixed);
  train(*model, 0, 1);
  model->save(dir.path());
  const DistCheckpointManifest m = read_dist_manifest(dir.path());
  EXPECT_EQ(m.generation, 1);
  EXPECT_EQ(m.ranks, n);
  EXPECT_EQ(m.steps, 1);
  ASSERT_EQ(m.files.size(), static_cast<std::size_t>(n + 1));  // one per rank, and the replicated tables
  EXPECT_EQ(m.files[0], "g1-rank0-of" + std::to_string(n) + ".ckpt");
  EXPECT_EQ(m.files[n], "g1-replicated.ckpt");
  const ShardPlan p = plan(Kind::mixed, n);
  for (const DistCheckpointRange& r : m.ranges) {
    const auto t = static_cast<int>(r.table);
    if (p.shards[t].kind == ShardKind::data_parallel) {
      EXPECT_EQ(r.file, n);
      EXPECT_EQ(r.row_end - r.row_begin, p.tables[t].rows);
      continue;
    }
    if (p.shards[t].kind == ShardKind::table_wise) {
      EXPECT_EQ(r.file, p.shards[t].owner);
    }
    EXPECT_EQ(r.row_begin, p.row_begin(static_cast<int>(r.file), t));
    EXPECT_EQ(r.row_end, p.row_end(static_cast<int>(r.file), t));
  }
  // Each rank's file holds exactly its rows and their accumulators.
  const CheckpointReader mine(dir.file(m.files[comm().rank()]));
  for (int t = 0; t < static_cast<int>(p.tables.size()); ++t) {
    const CheckpointEntry* e = mine.find(CheckpointSection::Model, "emb_l." + std::to_string(t) + ".weight");
    const bool stored_here =
        p.shards[t].kind != ShardKind::data_parallel && model->tables().row_end(t) > model->tables().row_begin(t);
    ASSERT_EQ(e != nullptr, stored_here) << "table " << t;
    if (stored_here) {
      EXPECT_EQ(e->sizes, (Dims{model->tables().row_end(t) - model->tables().row_begin(t), 4}));
    }
  }
  EXPECT_NE(mine.find(CheckpointSection::Optimizer, "sparse.0.sum"), nullptr);
}

TEST(DistCheckpointFiles, FailedSaveLeavesThePreviousCheckpoint) {
  const int me = comm().rank(), n = comm().size();
  const SharedDir dir("crash");
  memory::DramHeap heap(std::size_t{4} << 20), fresh_heap(std::size_t{4} << 20);
  const auto model = make_model(heap, OptimizerKind::Adagrad, Kind::mixed);
  train(*model, 0, kHalf);
  model->save(dir.path());
  const float next = train(*model, kHalf, kHalf + 1)[0];
  // Generation 2's file of the last rank cannot be written (a directory is in the way; the next
  // generation counts regular files only).
  const std::string blocked = "g2-rank" + std::to_string(n - 1) + "-of" + std::to_string(n) + ".ckpt";
  if (me == 0) fs::create_directory(dir.file(blocked));
  const std::string message = testing_util::error_of([&] { model->save(dir.path()); });
  EXPECT_NE(message.find("failed on rank " + std::to_string(n - 1) + ": "), std::string::npos) << message;
  EXPECT_NE(message.find(blocked), std::string::npos) << message;
  const auto fresh = make_model(fresh_heap, OptimizerKind::Adagrad, Kind::mixed, 99);
  fresh->load(dir.path());
  EXPECT_EQ(fresh->steps(), kHalf);
  const float again = train(*fresh, kHalf, kHalf + 1)[0];
  EXPECT_EQ(std::memcmp(&next, &again, 4), 0) << next << " vs " << again;
  // The next save (generation 3) removes generation 2's leftovers and a dead save's temporary.
  if (me == 0) {
    fs::remove(dir.file(blocked));
    std::ofstream(dir.file(".g2-rank0-of" + std::to_string(n) + ".ckpt.tmp.999999.0")) << "x";
  }
  barrier();
  model->save(dir.path());
  EXPECT_EQ(read_dist_manifest(dir.path()).generation, 3);
  if (me == 0) {
    for (const auto& entry : fs::directory_iterator(dir.path())) {
      const std::string name = entry.path().filename().string();
      EXPECT_TRUE(name == "manifest" || name.starts_with("g3-")) << name;
    }
  }
}

TEST(DistCheckpointFiles, TheLoadingModelsLearningRateApplies) {
  const SharedDir dir("lr");
  memory::DramHeap heap(std::size_t{4} << 20), frozen_heap(std::size_t{4} << 20);
  const auto model = make_model(heap, OptimizerKind::Adagrad, Kind::mixed);
  train(*model, 0, 1);
  model->save(dir.path());
  DistributedDLRMConfig c = config(OptimizerKind::Adagrad);
  c.learning_rate = 0;  // loaded with lr 0, a step changes nothing (not the MLPs either)
  DistributedDLRM frozen(c, plan(Kind::row_wise, comm().size()), {&frozen_heap, nullptr}, comm());
  frozen.load(dir.path());
  StateDict before = frozen.dense_module().state_dict();
  for (auto& [key, t] : before) t = t.clone();  // the state dict aliases the parameters
  train(frozen, 1, 2);
  const StateDict after = frozen.dense_module().state_dict();
  ASSERT_EQ(before.size(), after.size());
  for (std::size_t p = 0; p < before.size(); ++p)
    EXPECT_TRUE(testing_util::same_bits(before[p].second, after[p].second)) << before[p].first;
}

// ---- bad checkpoints: the error names the file and the field on every rank -------------------------

class DistCheckpointBadInput : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = make_model(heap_, OptimizerKind::SGD, Kind::mixed);
    train(*model_, 0, 1);
    model_->save(dir_.path());
    fresh_ = make_model(fresh_heap_, OptimizerKind::SGD, Kind::mixed);
  }
  /// Rank 0 changes the checkpoint; the others wait.
  template <typename Fn>
  void on_rank0(Fn&& fn) {
    if (comm().rank() == 0) fn();
    barrier();
  }
  /// The fresh model still holds its own initial rows (nothing was loaded).
  void expect_unchanged() {
    std::vector<float> row(4);
    const int t = 0;
    const int64_t r = fresh_->tables().row_begin(t);
    if (r == fresh_->tables().row_end(t)) return;
    fresh_->tables().read_row(t, r, row.data());
    EXPECT_EQ(row[0], initial_value(config().seed, t, tables()[t].rows, r, 0));
    EXPECT_EQ(fresh_->steps(), 0);
  }

  SharedDir dir_{"bad"};
  memory::DramHeap heap_{std::size_t{4} << 20}, fresh_heap_{std::size_t{4} << 20};
  std::unique_ptr<DistributedDLRM> model_, fresh_;
};

TEST_F(DistCheckpointBadInput, MissingManifest) {
  on_rank0([&] { fs::remove(dist_manifest_path(dir_.path())); });
  EXPECT_ERROR_HAS(fresh_->load(dir_.path()), quote_path(dist_manifest_path(dir_.path())));
  EXPECT_ERROR_HAS(fresh_->load(dir_.path() + "/nowhere"), "/nowhere/manifest");
  expect_unchanged();
}

TEST_F(DistCheckpointBadInput, CorruptManifest) {
  on_rank0([&] {
    std::fstream f(dist_manifest_path(dir_.path()), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(40);
    f.put('\x7f');
  });
  EXPECT_ERROR_HAS(fresh_->load(dir_.path()), "manifest'): checksum mismatch");
  expect_unchanged();
}

TEST_F(DistCheckpointBadInput, TruncatedShardFile) {
  const int n = comm().size();
  const std::string name = "g1-rank" + std::to_string(n - 1) + "-of" + std::to_string(n) + ".ckpt";
  on_rank0([&] { fs::resize_file(dir_.file(name), fs::file_size(dir_.file(name)) / 2); });
  const std::string message = testing_util::error_of([&] { fresh_->load(dir_.path()); });
  EXPECT_NE(message.find(name + "'): the file is truncated"), std::string::npos) << message;
  if (comm().rank() != n - 1) {
    EXPECT_NE(message.find("failed"), std::string::npos) << message;
  }
  expect_unchanged();
  // The communicator is in step: a good load still works.
  on_rank0([&] { fs::remove(dir_.file(name)); });
  model_->save(dir_.path());
  fresh_->load(dir_.path());
  EXPECT_EQ(fresh_->steps(), 1);
}

TEST_F(DistCheckpointBadInput, FileOfAnotherSave) {
  const SharedDir other("bad_other");
  model_->save(other.path());
  model_->save(other.path());  // generation 2
  const std::string name = "g1-rank0-of" + std::to_string(comm().size()) + ".ckpt";
  on_rank0([&] {
    fs::copy_file(other.file("g2-rank0-of" + std::to_string(comm().size()) + ".ckpt"), dir_.file(name),
                  fs::copy_options::overwrite_existing);
  });
  EXPECT_ERROR_HAS(fresh_->load(dir_.path()), "the file is of generation '2' but the manifest is of 1");
}

TEST_F(DistCheckpointBadInput, AnotherModel) {
  const int n = comm().size();
  memory::DramHeap heap(std::size_t{4} << 20);
  std::vector<TableSpec> other_tables = tables();
  other_tables[2].rows = 120;
  const ShardPlan other_plan = plan_shards(other_tables, {.ranks = n, .fast_budget_bytes = 1 << 20, .row_blocks = 4});
  DistributedDLRM rows(config(), other_plan, {&heap, nullptr}, comm());
  EXPECT_ERROR_HAS(rows.load(dir_.path()), "the checkpoint's table.2.rows is '100' but this model's is '120'");
  const auto adagrad = make_model(heap, OptimizerKind::Adagrad, Kind::mixed);
  EXPECT_ERROR_HAS(adagrad->load(dir_.path()), "the checkpoint's optimizer is 'sgd' but this model's is 'adagrad'");
  DistributedDLRMConfig wide = config();
  wide.bottom_mlp = {kDense, 16, 4};
  DistributedDLRM mlp(wide, plan(Kind::mixed, n), {&heap, nullptr}, comm());
  EXPECT_ERROR_HAS(mlp.load(dir_.path()), "the checkpoint's bottom_mlp is '5-8-4' but this model's is '5-16-4'");
  std::vector<TableSpec> fewer = tables();
  fewer.pop_back();
  DistributedDLRM seven(config(), plan_shards(fewer, {.ranks = n, .fast_budget_bytes = 1 << 20, .row_blocks = 4}),
                        {&heap, nullptr}, comm());
  EXPECT_ERROR_HAS(seven.load(dir_.path()), "the checkpoint's tables is '8' but this model's is '7'");
}

TEST_F(DistCheckpointBadInput, BadSaveArguments) {
  EXPECT_ERROR_HAS(
      model_->save(dir_.path(), {{"steps", "9"}}),
      "save(" + quote_path(dir_.path()) + ") failed on rank 0: the extra metadata key 'steps' is reserved");
  EXPECT_ERROR_HAS(model_->save(dir_.path(), {{"file.0", "x"}}), "the extra metadata key 'file.0' is reserved");
  EXPECT_EQ(read_dist_manifest(dir_.path()).generation, 1);  // nothing was written
  const std::string file = dir_.file("a_file");
  on_rank0([&] { std::ofstream(file) << "x"; });
  const std::string message = testing_util::error_of([&] { model_->save(file); });
  EXPECT_NE(message.find("cannot create the checkpoint directory " + quote_path(file)), std::string::npos) << message;
  EXPECT_NE(message.find("failed on rank 0: "), std::string::npos) << message;
}

TEST(DistCheckpointManifestCheck, FieldsAndRanges) {
  const SharedDir dir("ranges");
  if (comm().rank() != 0) return;  // local: the manifest reader alone
  fs::create_directories(dir.path());
  const auto write = [&](std::vector<int64_t> ranges, const std::string& steps = "0") {
    Tensor t = empty({static_cast<int64_t>(ranges.size() / 4), 4}, {DType::i64});
    std::memcpy(t.data<int64_t>(), ranges.data(), ranges.size() * 8);
    CheckpointMetadata meta{{"format", "strata-dist-dlrm"},
                            {"format_version", "1"},
                            {"generation", "1"},
                            {"ranks", "2"},
                            {"tables", "1"},
                            {"table.0.rows", "10"},
                            {"table.0.dim", "4"},
                            {"files", "2"},
                            {"file.0", "a.ckpt"},
                            {"file.1", "b.ckpt"}};
    if (!steps.empty()) meta.emplace_back("steps", steps);
    save_checkpoint(dist_manifest_path(dir.path()), {{"manifest.ranges", t}}, {}, meta);
  };
  write({0, 0, 6, 0, 0, 6, 10, 1});
  EXPECT_EQ(read_dist_manifest(dir.path()).ranges.size(), 2u);
  write({0, 0, 10, 0}, "");
  EXPECT_ERROR_HAS(read_dist_manifest(dir.path()), "manifest': the key 'steps' is missing");
  write({0, 0, 10, 0}, "-1");
  EXPECT_ERROR_HAS(read_dist_manifest(dir.path()), "steps is '-1', expected an integer in [0, ");
  write({0, 0, 6, 0, 0, 7, 10, 1});
  EXPECT_ERROR_HAS(read_dist_manifest(dir.path()), "range 1 (table 0, rows [7, 10), file 1) does not continue");
  write({0, 0, 6, 0});
  EXPECT_ERROR_HAS(read_dist_manifest(dir.path()), "the ranges cover rows [0, 6) of table 0, which has 10");
  write({0, 0, 10, 2});
  EXPECT_ERROR_HAS(read_dist_manifest(dir.path()), "file 2) does not continue");
}

// ---- resharding across rank counts (separate mpiruns, ordered by ctest fixtures) -------------------

std::string reshard_path(OptimizerKind o) { return (fs::path(reshard_dir()) / to_string(o)).string(); }

constexpr OptimizerKind kOptimizers[] = {OptimizerKind::SGD, OptimizerKind::RowWiseAdagrad, OptimizerKind::Adagrad};

TEST(DistCheckpointReshard, Save) {
  if (reshard_dir().empty()) GTEST_SKIP() << "run by ctest's emb_dist_reshard_save_np4 (--reshard-dir)";
  for (OptimizerKind o : kOptimizers) {
    memory::DramHeap heap(std::size_t{4} << 20);
    const auto model = make_model(heap, o, Kind::mixed);
    train(*model, 0, kHalf);
    model->save(reshard_path(o));
  }
}

TEST(DistCheckpointReshard, Load) {
  if (reshard_dir().empty()) GTEST_SKIP() << "run by ctest's emb_dist_reshard_load_np1/np2 (--reshard-dir)";
  for (OptimizerKind o : kOptimizers) {
    SCOPED_TRACE(to_string(o));
    EXPECT_NE(read_dist_manifest(reshard_path(o)).ranks, comm().size()) << "saved at this rank count: no reshard";
    memory::DramHeap heap(std::size_t{4} << 20);
    const auto model = make_model(heap, o, Kind::mixed, 5);
    model->load(reshard_path(o));
    expect_continues_like_reference(*model, o);
  }
}

// Note [Shard storage]: a checkpoint holds rows, not where they live. Saved from shards in the slow
// tier behind a DRAM cache (dirty rows in it) and loaded into DRAM shards, or saved from DRAM and
// loaded into cached shards, training continues like the reference.
TEST(DistCheckpointTier, RowsMoveBetweenPlacements) {
  const OptimizerKind o = OptimizerKind::RowWiseAdagrad;
  const fs::path slow_dir = fs::path(scratch_root()) / ("strata_tier_ckpt_" + std::to_string(::getpid()));
  fs::create_directories(slow_dir);
  {
    memory::PmHeap slow(
        {.capacity = std::size_t{8} << 20, .dir = slow_dir.string(), .backend = memory::PmBackend::Mmap});
    memory::DramHeap fast(std::size_t{4} << 20), fast2(std::size_t{4} << 20), dram(std::size_t{4} << 20),
        dram2(std::size_t{4} << 20);
    const ShardPlan p = plan(Kind::mixed, comm().size());
    auto cached = [&](memory::Heap& heap, uint64_t seed) {
      DistributedDLRMConfig c = config(o);
      c.seed = seed;
      const ShardPlacementOptions dynamic{.policy = EmbeddingPolicy::Dynamic, .cache_fraction = 0.25};
      return std::make_unique<DistributedDLRM>(c, p, ShardStorage({&heap, nullptr}, {&slow, nullptr}, dynamic), comm());
    };
    const std::unique_ptr<DistributedDLRM> from_cache = cached(fast, 77);
    ASSERT_TRUE(from_cache->tables().placement().uses_slow());
    train(*from_cache, 0, kHalf);
    const SharedDir dir("tier");
    from_cache->save(dir.path());
    const std::unique_ptr<DistributedDLRM> into_dram = make_model(dram, o, Kind::mixed, 5);
    into_dram->load(dir.path());
    expect_continues_like_reference(*into_dram, o);
    const std::unique_ptr<DistributedDLRM> from_dram = make_model(dram2, o, Kind::mixed);
    train(*from_dram, 0, kHalf);
    const SharedDir dir2("tier2");
    from_dram->save(dir2.path());
    const std::unique_ptr<DistributedDLRM> into_cache = cached(fast2, 5);
    into_cache->load(dir2.path());
    expect_continues_like_reference(*into_cache, o);
  }
  fs::remove_all(slow_dir);
}

}  // namespace
}  // namespace strata::emb
