// TieredDLRM checkpoints (Note [DLRM checkpoints]): N steps, save, load into a fresh model, N more
// steps equals 2N uninterrupted steps bit for bit (plain, cached over the slow tier, every
// optimizer); loads are all or nothing; DLRMTrainState round-trips; tables stream in bounded chunks.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/factories.h"
#include "embeddings/cached_table.h"
#include "embeddings/dlrm.h"
#include "tests/cpp/bitwise.h"
#include "tests/cpp/error_text.h"
#include "tests/cpp/sanitizers.h"

using namespace strata;
using namespace strata::emb;
using ::testing::AllOf;
using ::testing::HasSubstr;
using testing_util::bitwise_equal;
using testing_util::error_of;

namespace {

// Skewed batches with repeats over 3 tables of 4096 rows × 16 f32 (768 KiB): 3x a 256K budget.
DLRMConfig config(const std::vector<std::string>& extra) {
  std::vector<std::string> args = {"--arch-sparse-feature-size",
                                   "16",
                                   "--arch-mlp-bot",
                                   "5-16",
                                   "--arch-embedding-size",
                                   "4096-4096-4096",
                                   "--arch-mlp-top",
                                   "8-1",
                                   "--mini-batch-size",
                                   "64",
                                   "--num-batches",
                                   "8",
                                   "--data-generation",
                                   "zipf",
                                   "--zipf-alpha",
                                   "1.1",
                                   "--num-indices-per-lookup",
                                   "8",
                                   "--learning-rate",
                                   "0.05",
                                   "--slow-tier-model",
                                   "off",
                                   "--fast-budget",
                                   "2M"};
  args.insert(args.end(), extra.begin(), extra.end());
  return parse_dlrm_args(args);
}

class DLRMResume : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("strata_dlrm_resume_" + std::to_string(::getpid()) + "_" +
                                                     ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string file(const std::string& name) const { return (dir_ / name).string(); }
  std::filesystem::path dir_;
};

/// Every parameter's bits: the dense ones in state_dict order, then every row of every table.
struct Snapshot {
  std::vector<std::vector<float>> dense, tables;
  int64_t steps = 0;
  bool operator==(const Snapshot& o) const {
    auto same = [](const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b) {
      if (a.size() != b.size()) return false;
      for (std::size_t i = 0; i < a.size(); ++i)
        if (!bitwise_equal(a[i], b[i])) return false;
      return true;
    };
    return steps == o.steps && same(dense, o.dense) && same(tables, o.tables);
  }
};

Snapshot snapshot(TieredDLRM& m) {
  Snapshot s;
  for (const auto& [k, t] : m.state_dict()) {
    const auto bytes = testing_util::bytes_of(t);
    std::vector<float> v(bytes.size() / sizeof(float));
    std::memcpy(v.data(), bytes.data(), bytes.size());
    s.dense.push_back(std::move(v));
  }
  for (int64_t k = 0; k < m.num_tables(); ++k) {
    Table& t = m.table(k);
    std::vector<float> v(static_cast<std::size_t>(t.nvectors() * t.featuresize()));
    for (int64_t r = 0; r < t.nvectors(); ++r) t.read_row(r, v.data() + r * t.featuresize());
    s.tables.push_back(std::move(v));
  }
  s.steps = m.steps();
  return s;
}

/// Trains `m` on batches [from, to) of the source of `c` (a fresh source advanced to `from`).
std::vector<float> train(TieredDLRM& m, const DLRMConfig& c, int64_t from, int64_t to) {
  auto src = make_index_source(c);
  Batch b;
  std::vector<Bags> bags(static_cast<std::size_t>(m.num_tables()));
  std::vector<float> losses;
  for (int64_t j = 0; j < to; ++j) {
    EXPECT_TRUE(src->next(b));
    if (j < from) continue;
    for (int64_t k = 0; k < m.num_tables(); ++k) bags[static_cast<std::size_t>(k)] = b.bags(k);
    losses.push_back(m.train_step(b.dense, bags, b.targets));
  }
  return losses;
}

/// Rows currently cached and dirty in table k (0 for a plain table).
int64_t dirty_cached_rows(TieredDLRM& m, int64_t k) {
  const ManagedTable* mt = m.managed_table(k);
  const CachedTable* ct = mt ? mt->cached_table() : nullptr;
  if (ct == nullptr) return 0;
  int64_t n = 0;
  for (int64_t r = 0; r < ct->nvectors(); ++r) n += ct->is_cached(r) && ct->is_dirty(r);
  return n;
}

/// N steps, save, a fresh model (another seed: other initial values and policy seeds) loads and
/// trains N more; expects the 2N-step run's losses and parameters bit for bit.
void expect_exact_resume(const std::string& path, const std::vector<std::string>& flags, bool expect_dirty_cache) {
  constexpr int64_t kN = 4;
  const DLRMConfig c = config(flags);
  TieredDLRM whole(c);
  const std::vector<float> want_losses = train(whole, c, 0, 2 * kN);
  const Snapshot want = snapshot(whole);

  TieredDLRM first(c);
  std::vector<float> losses = train(first, c, 0, kN);
  if (expect_dirty_cache) {
    int64_t dirty = 0;
    for (int64_t k = 0; k < first.num_tables(); ++k) dirty += dirty_cached_rows(first, k);
    EXPECT_GT(dirty, 0) << "the test should save updated rows that are still in the cache";
  }
  first.save(path, DLRMTrainState{.epoch = 0, .iter = kN}.to_metadata());

  auto other_flags = flags;
  other_flags.insert(other_flags.end(), {"--numpy-rand-seed", "99"});
  TieredDLRM resumed(config(other_flags));
  EXPECT_FALSE(snapshot(resumed) == snapshot(first));  // the load has something to do
  const auto state = DLRMTrainState::from_metadata(resumed.load(path), path);
  ASSERT_TRUE(state.has_value());
  EXPECT_EQ(state->iter, kN);
  EXPECT_TRUE(snapshot(resumed) == snapshot(first));
  const std::vector<float> rest = train(resumed, c, state->iter, 2 * kN);
  losses.insert(losses.end(), rest.begin(), rest.end());
  EXPECT_TRUE(bitwise_equal(losses, want_losses));
  EXPECT_TRUE(snapshot(resumed) == want);
}

TEST_F(DLRMResume, PlainTablesWithSGDResumeExactly) {
  expect_exact_resume(file("sgd.ckpt"), {"--optimizer", "sgd"}, false);
}

TEST_F(DLRMResume, CachedTablesWithRowWiseAdagradResumeExactly) {
  for (const char* policy : {"auto", "dynamic"}) {
    SCOPED_TRACE(policy);
    expect_exact_resume(file("rws.ckpt"),
                        {"--optimizer", "rwsadagrad", "--fast-budget", "256K", "--emb-policy", policy}, true);
  }
}

TEST_F(DLRMResume, ElementwiseAdagradResumesExactly) {
  expect_exact_resume(file("adagrad.ckpt"), {"--optimizer", "adagrad", "--lr-num-warmup-steps", "6"}, false);
}

TEST_F(DLRMResume, TrainStateRoundTripsExactly) {
  DLRMTrainState s{.epoch = 2,
                   .iter = 17,
                   .nbatches = 40,
                   .total_loss = 0.1 + 0.2,
                   .total_iter = 5,
                   .total_samp = 320,
                   .best_acc_test = 1.0 / 3.0,
                   .best_auc_test = 0.7853981633974483};
  const DLRMConfig c = config({});
  TieredDLRM m(c);
  const std::string path = file("state.ckpt");
  CheckpointMetadata extra = s.to_metadata();
  extra.emplace_back("note", "kept as it is");
  m.save(path, extra);
  const CheckpointMetadata meta = m.load(path);
  const auto got = DLRMTrainState::from_metadata(meta, path);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->epoch, 2);
  EXPECT_EQ(got->iter, 17);
  EXPECT_EQ(got->nbatches, 40);
  EXPECT_EQ(got->total_loss, 0.1 + 0.2);  // exactly, not 0.3
  EXPECT_EQ(got->total_iter, 5);
  EXPECT_EQ(got->total_samp, 320);
  EXPECT_EQ(got->best_acc_test, 1.0 / 3.0);
  EXPECT_EQ(got->best_auc_test, 0.7853981633974483);
  EXPECT_THAT(meta, ::testing::Contains(std::make_pair(std::string("note"), std::string("kept as it is"))));
  // A checkpoint without a train state, and broken ones.
  m.save(path);
  EXPECT_FALSE(DLRMTrainState::from_metadata(m.load(path), path).has_value());
  CheckpointMetadata bad = s.to_metadata();
  bad[1].second = "seventeen";
  EXPECT_THAT(
      error_of([&] { DLRMTrainState::from_metadata(bad, path); }),
      AllOf(HasSubstr(path), HasSubstr("the train state's iter is 'seventeen', expected a non-negative integer")));
  bad = s.to_metadata();
  bad[3].second = "0.3x";
  EXPECT_THAT(error_of([&] { DLRMTrainState::from_metadata(bad, path); }),
              HasSubstr("the train state's total_loss is '0.3x', expected a number"));
  bad = s.to_metadata();
  bad.erase(bad.begin() + 4);
  EXPECT_THAT(error_of([&] { DLRMTrainState::from_metadata(bad, path); }),
              HasSubstr("the train state lacks the key 'total_iter'"));
  // The checkpoint's own keys cannot be overwritten by the caller's.
  EXPECT_THAT(error_of([&] { m.save(path, {{"steps", "0"}}); }),
              HasSubstr("the extra metadata key 'steps' is reserved"));
}

// ---- all or nothing ------------------------------------------------------------------------------

/// Rewrites the checkpoint at `path` with `edit` applied to its contents.
void rewrite(const std::string& path, const std::function<void(Checkpoint&)>& edit) {
  Checkpoint ck = load_checkpoint(path);
  edit(ck);
  save_checkpoint(path, ck.model, ck.optimizer, ck.metadata);
}

void set_entry(StateDict& d, const std::string& key, const Tensor& t) {
  for (auto& [k, v] : d)
    if (k == key) v = t;
}

void erase_entry(StateDict& d, const std::string& key) {
  std::erase_if(d, [&](const auto& e) { return e.first == key; });
}

TEST_F(DLRMResume, ABadSectionLeavesTheModelBitwiseUnchanged) {
  const std::vector<std::string> flags = {"--optimizer", "rwsadagrad", "--fast-budget", "256K"};
  const DLRMConfig c = config(flags);
  TieredDLRM saved(c);
  train(saved, c, 0, 3);
  const std::string good = file("good.ckpt"), bad = file("bad.ckpt");
  saved.save(good);

  struct Case {
    const char* what;
    std::function<void(Checkpoint&)> edit;
    std::string error;
  };
  const std::vector<Case> cases = {
      {"misshapen dense optimizer state",
       [](Checkpoint& ck) { set_entry(ck.optimizer, "dense.state.0.sum", zeros({3})); },
       "the dense optimizer's state ('dense.*'): Adagrad load_state_dict: key 'state.0.sum' has shape [3]"},
      {"missing dense optimizer state", [](Checkpoint& ck) { erase_entry(ck.optimizer, "dense.state.2.sum"); },
       "missing key 'state.2.sum'"},
      {"bad dense optimizer option",
       [](Checkpoint& ck) { set_entry(ck.optimizer, "dense.param_groups.0.lr", full({}, -1.0)); },
       "Invalid learning rate"},
      {"misshapen sparse state", [](Checkpoint& ck) { set_entry(ck.optimizer, "sparse.1.sum", zeros({4095})); },
       "sparse.1.sum is f32 [4095], expected f32 [4096]"},
      {"missing table", [](Checkpoint& ck) { erase_entry(ck.model, "emb_l.2.weight"); },
       "the checkpoint lacks the entry 'emb_l.2.weight'"},
      {"table of another dtype",
       [](Checkpoint& ck) { set_entry(ck.model, "emb_l.0.weight", zeros({4096, 16}, {DType::f64})); },
       "emb_l.0.weight is f64 [4096, 16], expected f32 [4096, 16]"},
      {"misshapen dense parameter", [](Checkpoint& ck) { set_entry(ck.model, "top_l.0.weight", zeros({8, 3})); },
       "size mismatch for top_l.0.weight"},
      {"unexpected optimizer entry", [](Checkpoint& ck) { ck.optimizer.emplace_back("sparse.9.sum", zeros({1})); },
       "unexpected optimizer entry 'sparse.9.sum'"},
      {"malformed step count",
       [](Checkpoint& ck) {
         for (auto& [k, v] : ck.metadata)
           if (k == "steps") v = "3 steps";
       },
       "the checkpoint's steps is '3 steps', expected a non-negative integer"},
  };
  for (const Case& cs : cases) {
    SCOPED_TRACE(cs.what);
    std::filesystem::copy_file(good, bad, std::filesystem::copy_options::overwrite_existing);
    rewrite(bad, cs.edit);
    TieredDLRM m(config({"--optimizer", "rwsadagrad", "--fast-budget", "256K", "--numpy-rand-seed", "5"}));
    train(m, c, 0, 1);
    const Snapshot before = snapshot(m);
    EXPECT_THAT(error_of([&] { m.load(bad); }), AllOf(HasSubstr(bad), HasSubstr(cs.error)));
    EXPECT_TRUE(snapshot(m) == before);
    // The model still trains, and the good checkpoint still loads into it.
    m.load(good);
    EXPECT_TRUE(snapshot(m) == snapshot(saved));
  }
}

TEST_F(DLRMResume, TruncatedAndFlippedFilesAreRefusedNamingThePath) {
  const DLRMConfig c = config({"--optimizer", "adagrad"});
  TieredDLRM m(c);
  const std::string good = file("good.ckpt"), bad = file("bad.ckpt");
  m.save(good);
  std::ifstream in(good, std::ios::binary);
  const std::string bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  const Snapshot before = snapshot(m);
  auto write = [&](const std::string& b) {
    std::ofstream out(bad, std::ios::binary | std::ios::trunc);
    out.write(b.data(), static_cast<std::streamsize>(b.size()));
  };
  for (std::size_t cut : {std::size_t{0}, std::size_t{5}, std::size_t{31}, std::size_t{32}, std::size_t{300},
                          bytes.size() / 3, bytes.size() - 4}) {
    write(bytes.substr(0, cut));
    EXPECT_THAT(error_of([&] { m.load(bad); }),
                AllOf(HasSubstr("load_checkpoint('" + bad + "')"), HasSubstr("truncated")))
        << "cut at " << cut;
  }
  for (std::size_t at : {std::size_t{0}, std::size_t{9}, std::size_t{17}, std::size_t{25}, std::size_t{40},
                         bytes.size() / 2, bytes.size() - 1}) {
    std::string b = bytes;
    b[at] = static_cast<char>(b[at] ^ 0x04);
    write(b);
    EXPECT_THAT(error_of([&] { m.load(bad); }), HasSubstr("load_checkpoint('" + bad + "')")) << "flip at " << at;
  }
  EXPECT_TRUE(snapshot(m) == before);
}

// ---- output paths --------------------------------------------------------------------------------

TEST_F(DLRMResume, OutputPathsAreCheckedBeforeTraining) {
  const auto with = [](std::vector<std::string> flags) { return config(flags); };
  EXPECT_NO_THROW(check_output_paths(with({})));
  EXPECT_NO_THROW(check_output_paths(with({"--save-model", file("m.ckpt"), "--json", file("run.json")})));
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir_), std::filesystem::directory_iterator()), 0);
  EXPECT_THAT(error_of([&] { check_output_paths(with({"--save-model", file("missing/m.ckpt")})); }),
              HasSubstr("--save-model: cannot write '" + file("missing/m.ckpt") + "' (its directory '" +
                        file("missing") + "' does not exist)"));
  EXPECT_THAT(error_of([&] { check_output_paths(with({"--json", "/etc/passwd/run.json"})); }),
              HasSubstr("--json: cannot write '/etc/passwd/run.json' (a parent of it is not a directory)"));
  EXPECT_THAT(error_of([&] { check_output_paths(with({"--load-model", file("none.ckpt")})); }),
              HasSubstr("--load-model: cannot open '" + file("none.ckpt") + "' (no such file)"));
}

// ---- streaming ----------------------------------------------------------------------------------

/// The process's resident set size and its peak, in bytes (/proc/self/status VmRSS, VmHWM).
std::pair<std::size_t, std::size_t> rss_and_peak() {
  std::ifstream in("/proc/self/status");
  std::string line;
  std::size_t rss = 0, peak = 0;
  while (std::getline(in, line)) {
    if (line.starts_with("VmRSS:")) rss = std::stoull(line.substr(6)) * 1024;
    if (line.starts_with("VmHWM:")) peak = std::stoull(line.substr(6)) * 1024;
  }
  return {rss, peak};
}

/// Resets the peak to the current resident set size (Linux >= 4.0); false when it cannot.
bool reset_peak_rss() {
  std::ofstream out("/proc/self/clear_refs");
  out << "5";
  out.flush();
  return static_cast<bool>(out);
}

/// How far the resident set grew above where it was while `fn` ran.
std::size_t peak_growth(const std::function<void()>& fn) {
  const std::size_t before = rss_and_peak().first;
  fn();
  return rss_and_peak().second - std::min(before, rss_and_peak().second);
}

TEST_F(DLRMResume, TablesLargerThanTheFastBudgetStreamThroughOneChunk) {
  if (!reset_peak_rss()) GTEST_SKIP() << "/proc/self/clear_refs cannot reset the peak RSS here";
  // 2 tables of 65536 rows x 64 f32: 32 MiB of rows behind a 2 MiB fast budget (cached tables).
  const DLRMConfig c = config({"--arch-embedding-size", "65536-65536", "--arch-sparse-feature-size", "64",
                               "--arch-mlp-bot", "5-64", "--optimizer", "rwsadagrad", "--fast-budget", "2M"});
  const std::size_t table_bytes = std::size_t{65536} * 64 * sizeof(float);
  constexpr std::size_t kChunk = 256 << 10;
  TieredDLRM a(c);
  ASSERT_NE(a.managed_table(0), nullptr);
  ASSERT_NE(a.managed_table(0)->cached_table(), nullptr);
  train(a, c, 0, 2);
  const std::string path = file("big.ckpt");
  a.save(path, {}, kChunk);  // once, so the file's pages and the writer's code are warm
  ASSERT_TRUE(reset_peak_rss());
  const std::size_t save_growth = peak_growth([&] { a.save(path, {}, kChunk); });
  // Under a sanitizer every page read gets shadow pages too: the bound holds only without one.
  const bool rss_meaningful = !testing_util::sanitized_build();
  if (rss_meaningful) EXPECT_LT(save_growth, table_bytes / 4) << "saving " << 2 * table_bytes << " bytes of rows";

  TieredDLRM b(config({"--arch-embedding-size", "65536-65536", "--arch-sparse-feature-size", "64", "--arch-mlp-bot",
                       "5-64", "--optimizer", "rwsadagrad", "--fast-budget", "2M", "--numpy-rand-seed", "8"}));
  ASSERT_TRUE(reset_peak_rss());
  const std::size_t load_growth = peak_growth([&] { b.load(path, kChunk); });
  std::printf("peak RSS growth: save %zu KiB, load %zu KiB\n", save_growth >> 10, load_growth >> 10);
  if (rss_meaningful) EXPECT_LT(load_growth, table_bytes / 4) << "loading " << 2 * table_bytes << " bytes of rows";
  EXPECT_TRUE(snapshot(a) == snapshot(b));
  // The file is an ordinary checkpoint: load_checkpoint reads it whole.
  const Checkpoint ck = load_checkpoint(path);
  EXPECT_EQ(ck.model.size(), 8u);  // bot_l: 1 layer, top_l: 2, and the 2 tables
}

}  // namespace
