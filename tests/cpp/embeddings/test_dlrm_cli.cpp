// strata-dlrm end to end: runs the built binary (STRATA_DLRM_BIN, set by bench/CMakeLists.txt) on
// tiny settings and checks the reference's progress line, the summary, --json, --save-model /
// --load-model, and the exit status and message of bad input.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "core/file.h"

using ::testing::HasSubstr;
using ::testing::Not;

namespace {

struct Result {
  int status = -1;
  std::string out;  // stdout and stderr
};

#ifdef STRATA_DLRM_BIN
Result run(const std::string& args) {
  const std::string cmd = std::string(STRATA_DLRM_BIN) + " " + args + " 2>&1";
  Result r;
  std::FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return r;
  std::array<char, 4096> buf{};
  std::size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  const int st = ::pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}
#endif

std::vector<std::string> progress_lines(const std::string& out) {
  std::vector<std::string> lines;
  std::istringstream is(out);
  for (std::string l; std::getline(is, l);)
    if (l.rfind("Finished ", 0) == 0) lines.push_back(l);
  return lines;
}

std::filesystem::path temp_dir() {
  auto dir = std::filesystem::temp_directory_path() / ("strata_dlrm_cli_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return dir;
}

// Small settings shared by the runs below: 3 tables, batches of 8.
const std::string kSmall = "--mini-batch-size 8 --num-batches 5 --arch-embedding-size 50-40-30 --threads 2";

}  // namespace

#ifndef STRATA_DLRM_BIN
TEST(DLRMCli, Binary) { GTEST_SKIP() << "strata-dlrm is not built (STRATA_BUILD_BENCH=OFF)"; }
#else

TEST(DLRMCli, ProgressLineIsTheReferences) {
  const Result r = run(kSmall + " --print-freq 2");
  ASSERT_EQ(r.status, 0) << r.out;
  const auto lines = progress_lines(r.out);
  ASSERT_EQ(lines.size(), 3u) << r.out;  // iterations 2, 4 and the last one, 5
  const std::regex line(R"(Finished training it (\d+)/5 of epoch 0, -1\.00 ms/it, loss \d+\.\d{6})");
  const char* its[] = {"2", "4", "5"};
  for (std::size_t i = 0; i < lines.size(); ++i) {
    std::smatch m;
    ASSERT_TRUE(std::regex_match(lines[i], m, line)) << lines[i];
    EXPECT_EQ(m[1], its[i]);
  }
}

TEST(DLRMCli, PrintTimeWallTimeAndEpochs) {
  const Result r = run(kSmall + " --num-batches 2 --nepochs 2 --print-time --print-wall-time");
  ASSERT_EQ(r.status, 0) << r.out;
  const auto lines = progress_lines(r.out);
  ASSERT_EQ(lines.size(), 4u) << r.out;
  const std::regex line(R"(Finished training it [12]/2 of epoch [01], \d+\.\d\d ms/it, loss \d+\.\d{6} \(\d\d:\d\d\))");
  for (const auto& l : lines) EXPECT_TRUE(std::regex_match(l, line)) << l;
  EXPECT_THAT(lines[3], HasSubstr("it 2/2 of epoch 1"));
}

// Note [One tiered memory per process]: the main job's tables, caches and tensors share one fast
// tier of the budget plus the dense working set, and no tensor is pushed to the slow tier.
TEST(DLRMCli, OneFastTierHoldsTablesCachesAndTensors) {
  const Result r =
      run("--preset default --num-batches 20 --test-freq 0 --scale-rows 0.25 --fast-budget 8M --threads 2");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("(embedding rows: 8.0 MiB budget)"));
  EXPECT_THAT(r.out, HasSubstr("policy auto, base rows in the slow tier, cache of"));
  EXPECT_THAT(r.out, HasSubstr("tensors evicted to the slow tier 0 B"));
}

TEST(DLRMCli, SummaryNamesEveryFigure) {
  const Result r = run(kSmall + " --emb-policy simple --slow-tier-model 50,20,0");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("samples/s (2 threads)"));
  EXPECT_THAT(r.out, HasSubstr("phases (ms/it): bottom MLP "));
  for (const char* p : {"lookup", "interaction", "top MLP", "backward", "update"}) EXPECT_THAT(r.out, HasSubstr(p));
  EXPECT_THAT(r.out, HasSubstr("cache hit rate:"));
  EXPECT_THAT(r.out, HasSubstr("bytes moved: fast tier read"));
  EXPECT_THAT(r.out, HasSubstr("slow tier read"));
  EXPECT_THAT(r.out, HasSubstr("slow tier: modeled slow tier: read 50"));
  // A cached policy reports its hit rate.
  const Result cached = run(kSmall + " --emb-policy dynamic --fast-budget 64K --cache-fraction 0.5");
  ASSERT_EQ(cached.status, 0) << cached.out;
  EXPECT_TRUE(std::regex_search(cached.out, std::regex(R"(cache hit rate: \d+\.\d% of lookups served from DRAM)")))
      << cached.out;
  EXPECT_THAT(cached.out, HasSubstr("policy dynamic, base rows in the slow tier, cache of"));
  // In DRAM only: no slow tier.
  const Result dram = run(kSmall);
  ASSERT_EQ(dram.status, 0) << dram.out;
  EXPECT_THAT(dram.out, HasSubstr("slow tier: none"));
}

TEST(DLRMCli, TableTricksTrainAndDescribeTheirTables) {
  // Note [DLRM table kinds]: the reference's flags are accepted and the summary says which tables
  // are quotient-remainder or mixed-dimension ones.
  const Result qr = run(kSmall + " --qr-flag --qr-threshold 35 --qr-operation add --qr-collisions 8 --print-freq 5");
  ASSERT_EQ(qr.status, 0) << qr.out;
  EXPECT_THAT(qr.out, HasSubstr("quotient-remainder tables above 35 rows (add, 8 collisions)"));
  EXPECT_THAT(qr.out, HasSubstr("table 0 quotient: 7 rows x 2"));
  EXPECT_THAT(qr.out,
              HasSubstr("table 1 remainder: 8 rows x 2 f32 (64 B), QR remainder of 40 rows (8 collisions, add)"));
  EXPECT_THAT(qr.out, HasSubstr("table 2: 30 rows x 2"));
  EXPECT_EQ(progress_lines(qr.out).size(), 1u) << qr.out;
  const Result md = run(kSmall +
                        " --md-flag --md-threshold 35 --md-temperature 1 --arch-sparse-feature-size 8 "
                        "--arch-mlp-bot 4-8 --print-freq 5");
  ASSERT_EQ(md.status, 0) << md.out;
  EXPECT_THAT(md.out, HasSubstr("mixed dimensions 5-6-8 (tables above 35 rows)"));
  EXPECT_THAT(md.out, HasSubstr("table 0: 50 rows x 5 f32 (1000 B), MD d=5 projected to 8"));
  const Result learned = run(kSmall + " --weighted-pooling learned --optimizer adagrad --print-freq 5");
  ASSERT_EQ(learned.status, 0) << learned.out;
  EXPECT_THAT(learned.out, HasSubstr("learned pooling weights"));
  const Result bad = run(kSmall + " --qr-flag --qr-operation xor");
  EXPECT_EQ(bad.status, 2) << bad.out;
  EXPECT_THAT(bad.out, HasSubstr("--qr-operation: expected one of mult, add, concat"));
}

TEST(DLRMCli, ReferenceDefaultsRunOneSampleOneBatch) {
  const Result r = run("--print-freq=1");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("3 tables, 9 rows of d=2"));
  const auto lines = progress_lines(r.out);
  ASSERT_EQ(lines.size(), 1u) << r.out;
  EXPECT_THAT(lines[0], HasSubstr("Finished training it 1/1 of epoch 0"));
}

TEST(DLRMCli, EnableProfilingPrintsPhasesPerProgressLine) {
  const Result r = run(kSmall + " --print-freq 2 --enable-profiling");
  ASSERT_EQ(r.status, 0) << r.out;
  const std::regex phases(R"(\n  phases \(ms/it\): bottom MLP \d+\.\d{3}, lookup \d+\.\d{3}, interaction \d+\.\d{3}, )"
                          R"(top MLP \d+\.\d{3}, backward \d+\.\d{3}, update \d+\.\d{3}( \(policy hooks [^)]*\))?\n)");
  EXPECT_EQ(std::distance(std::sregex_iterator(r.out.begin(), r.out.end(), phases), std::sregex_iterator()), 4)
      << r.out;  // after each of the 3 progress lines, and in the summary
}

std::vector<std::string> test_lines(const std::string& out) {
  std::vector<std::string> lines;
  std::istringstream is(out);
  for (std::string l; std::getline(is, l);)
    if (l.rfind("Testing ", 0) == 0) lines.push_back(l);
  return lines;
}

// --inference-only is one test pass, as the reference's "Testing for inference only".
TEST(DLRMCli, InferenceOnly) {
  const Result r = run(kSmall + " --inference-only --print-freq 5");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_TRUE(progress_lines(r.out).empty()) << r.out;
  const auto lines = test_lines(r.out);
  ASSERT_EQ(lines.size(), 1u) << r.out;
  EXPECT_THAT(lines[0], ::testing::MatchesRegex(R"(Testing for inference only: loss [0-9]+\.[0-9]{6}, )"
                                                R"(accuracy [0-9]+\.[0-9]{3} %, best [0-9]+\.[0-9]{3} %)"));
}

// --test-freq: the reference's test line after every N iterations and at the end of the epoch,
// with AUC under --mlperf-logging; the summary and the JSON carry the last pass.
TEST(DLRMCli, TestFreqPrintsTheReferencesTestLines) {
  const auto dir = temp_dir();
  const std::string json = (dir / "t.json").string();
  const std::string binary = " --round-targets True --loss-function bce";
  const Result r = run(kSmall + binary + " --test-freq 2 --print-freq 5 --json " + json);
  ASSERT_EQ(r.status, 0) << r.out;
  const auto lines = test_lines(r.out);
  ASSERT_EQ(lines.size(), 3u) << r.out;  // after 2, 4 and 5 (the end of the epoch)
  EXPECT_THAT(lines[0], ::testing::MatchesRegex(R"(Testing at - 2/5 of epoch 0, loss [0-9]+\.[0-9]{6}, )"
                                                R"(accuracy [0-9]+\.[0-9]{3} %, best [0-9]+\.[0-9]{3} %)"));
  EXPECT_THAT(lines[2], HasSubstr("Testing at - 5/5 of epoch 0"));
  // A test forces the progress line before it, as in the reference.
  EXPECT_EQ(progress_lines(r.out).size(), 3u) << r.out;
  EXPECT_THAT(r.out, HasSubstr("  test (last pass, 40 samples"));
  std::ifstream f(json);
  std::stringstream ss;
  ss << f.rdbuf();
  EXPECT_THAT(ss.str(), HasSubstr("\"test\": {\"samples\": 40"));
  const Result ml = run(kSmall + binary + " --test-freq 5 --mlperf-logging");
  ASSERT_EQ(ml.status, 0) << ml.out;
  ASSERT_EQ(test_lines(ml.out).size(), 1u) << ml.out;
  EXPECT_THAT(
      test_lines(ml.out)[0],
      ::testing::MatchesRegex(
          R"(Testing at - 5/5 of epoch 0, loss [0-9]+\.[0-9]{6}, auc ([0-9]\.[0-9]{4}|nan), best auc [0-9]\.[0-9]{4}, )"
          R"(accuracy [0-9]+\.[0-9]{3} %, best accuracy [0-9]+\.[0-9]{3} %)"));
  std::filesystem::remove_all(dir);
}

// Note [DLRM training run]: a run stopped by --mlperf-acc-threshold after its first test saved
// there (iteration 3); resuming from that file trains iterations 4.. with the same losses as an
// uninterrupted run, and a run saved at the end of epoch 0 resumes at epoch 1.
TEST(DLRMCli, ResumeContinuesWhereTheCheckpointWasSaved) {
  const auto dir = temp_dir();
  const std::string ckpt = (dir / "r.ckpt").string();
  const std::string base =
      "--mini-batch-size 8 --num-batches 6 --arch-embedding-size 50-40-30 --threads 2 "
      "--round-targets True --loss-function bce --learning-rate 0.3 --optimizer adagrad ";
  const Result whole = run(base + "--nepochs 2");
  ASSERT_EQ(whole.status, 0) << whole.out;
  const auto all = progress_lines(whole.out);
  ASSERT_EQ(all.size(), 12u) << whole.out;
  const Result first = run(base + "--test-freq 3 --mlperf-logging --mlperf-acc-threshold 0.001 --save-model " + ckpt);
  ASSERT_EQ(first.status, 0) << first.out;
  EXPECT_THAT(first.out, HasSubstr("Saving model to " + ckpt));
  EXPECT_THAT(first.out, HasSubstr("MLPerf testing accuracy threshold 0.001 reached, stop training"));
  ASSERT_EQ(progress_lines(first.out).size(), 3u) << first.out;
  const Result rest = run(base + "--nepochs 2 --load-model " + ckpt);
  ASSERT_EQ(rest.status, 0) << rest.out;
  EXPECT_THAT(rest.out, HasSubstr("resuming at epoch 0, batch 3/6"));
  EXPECT_EQ(progress_lines(rest.out), std::vector<std::string>(all.begin() + 3, all.end()));
  // Saved at the end of epoch 0 (no test: the save is at the end of the run).
  const Result epoch0 = run(base + "--save-model " + ckpt);
  ASSERT_EQ(epoch0.status, 0) << epoch0.out;
  const Result epoch1 = run(base + "--nepochs 2 --load-model " + ckpt);
  ASSERT_EQ(epoch1.status, 0) << epoch1.out;
  EXPECT_THAT(epoch1.out, HasSubstr("resuming at epoch 1, batch 0/6"));
  EXPECT_EQ(progress_lines(epoch1.out), std::vector<std::string>(all.begin() + 6, all.end()));
  std::filesystem::remove_all(dir);
}

TEST(DLRMCli, JsonHasTheFigures) {
  const auto dir = temp_dir();
  const std::string json = (dir / "run.json").string();
  const Result r = run(kSmall + " --json " + json);
  ASSERT_EQ(r.status, 0) << r.out;
  std::ifstream f(json);
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string j = ss.str();
  for (const char* key :
       {"\"binary\": \"strata-dlrm\"", "\"threads\": 2", "\"samples_per_s\"", "\"step_ms\"", "\"phases_ms_per_it\"",
        "\"lookup\"", "\"cache_hit_rate\"", "\"slow_tier\": \"none\"", "\"loss_last\"", "\"data_wait_s\""})
    EXPECT_THAT(j, HasSubstr(key));
  for (const auto& e : std::filesystem::directory_iterator(dir))  // no temporary left (Note [Atomic file writes])
    EXPECT_FALSE(e.path().filename().string().starts_with(strata::AtomicFile::temporary_prefix(json))) << e.path();
  std::filesystem::remove_all(dir);
}

TEST(DLRMCli, SaveAndLoadModel) {
  const auto dir = temp_dir();
  const std::string ckpt = (dir / "m.ckpt").string();
  const Result saved = run(kSmall + " --learning-rate 0.5 --save-model " + ckpt);
  ASSERT_EQ(saved.status, 0) << saved.out;
  EXPECT_THAT(saved.out, HasSubstr("Saving model to " + ckpt));
  ASSERT_TRUE(std::filesystem::exists(ckpt));
  // The loaded model gives the same (deterministic) inference loss twice, and not the fresh one's.
  const std::string infer = kSmall + " --inference-only --print-freq 5";
  const Result a = run(infer + " --load-model " + ckpt);
  const Result b = run(infer + " --load-model=" + ckpt);
  const Result fresh = run(infer);
  ASSERT_EQ(a.status, 0) << a.out;
  ASSERT_EQ(b.status, 0) << b.out;
  EXPECT_THAT(a.out, HasSubstr("Loaded model from " + ckpt + " (5 optimizer steps)"));
  ASSERT_EQ(test_lines(a.out).size(), 1u) << a.out;
  EXPECT_EQ(test_lines(a.out), test_lines(b.out));
  EXPECT_NE(test_lines(a.out), test_lines(fresh.out));
  // Another architecture refuses the checkpoint.
  const Result other = run("--mini-batch-size 8 --num-batches 1 --arch-embedding-size 50-40-31 --load-model " + ckpt);
  EXPECT_EQ(other.status, 1) << other.out;
  EXPECT_THAT(other.out, HasSubstr("arch_embedding_size is '50-40-30' but this model's is '50-40-31'"));
  std::filesystem::remove_all(dir);
}

TEST(DLRMCli, BadFlagsExitTwoNamingTheFlag) {
  const struct {
    const char* args;
    const char* message;
  } cases[] = {
      {"--no-such-flag", "unknown flag '--no-such-flag'"},
      {"--arch-embedding-size 4-x-2", "--arch-embedding-size: '4-x-2' is not a dash-separated list"},
      {"--arch-mlp-bot 4-3-5", "--arch-mlp-bot: the last width (5) must equal --arch-sparse-feature-size (2)"},
      {"--arch-mlp-top 4-2", "--arch-mlp-top: the last width (2) must be 1"},
      {"--mini-batch-size", "--mini-batch-size: missing value"},
      {"--learning-rate=abc", "--learning-rate: expected a number, got 'abc'"},
      {"--use-gpu", "--use-gpu is not supported by strata-dlrm"},
      {"--load-model /no/such.ckpt", "--load-model: cannot open '/no/such.ckpt'"},
      {"--data-generation synthetic --data-trace-file /no/such/dist_emb_j.log",
       "--data-trace-file: table 0: cannot open '/no/such/dist_emb_0.log'"},
      {"--preset giant", "--preset: unknown preset 'giant'"},
      {"--threads 5000", "--threads: expected a thread count in [1, 4096], got '5000'"},
      {"--threads=1000000000000", "--threads: expected a thread count in [1, 4096], got '1000000000000'"},
      {"--load-model /tmp", "--load-model: cannot open '/tmp' (is a directory)"},
      {"--save-model /tmp", "--save-model: '/tmp' is a directory"},
      {"--preset kaggle --data-generation dataset --raw-data-file /tmp",
       "--raw-data-file: cannot open '/tmp' (is a directory)"},
      {"--preset kaggle --data-generation dataset --processed-data-file /tmp",
       "--processed-data-file: cannot open '/tmp' (is a directory)"},
      {"--preset kaggle --data-generation dataset --raw-data-file /no/such.tsv",
       "--raw-data-file: cannot open '/no/such.tsv' (no such file)"},
      {"--data-generation synthetic --data-trace-file /tmp",
       "--data-trace-file: table 0: cannot open '/tmp' (is a directory"},
  };
  for (const auto& c : cases) {
    const Result r = run(c.args);
    EXPECT_EQ(r.status, 2) << c.args << "\n" << r.out;
    EXPECT_THAT(r.out, HasSubstr(c.message)) << c.args;
    EXPECT_THAT(r.out, Not(HasSubstr("Finished"))) << c.args;
  }
}

// --check-finite (Note [DLRM finite check]): a learning rate that makes training diverge stops at
// the first step whose parameters went NaN or inf, naming the batch, the step and the parameter,
// with exit status 1; without the flag the same run finishes and prints a nan loss.
TEST(DLRMCli, CheckFiniteStopsAtTheFirstNonFiniteParameter) {
  const std::string diverging = kSmall + " --learning-rate 1e30";
  const Result r = run(diverging + " --check-finite");
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_THAT(r.out, HasSubstr("strata-dlrm: error: batch 2 of epoch 0: --check-finite: after step 2, parameter "
                               "bot_l.2.weight (Tensor[2, 3] f32) went non-finite: 3 NaN and 0 inf of 6 elements"));
  EXPECT_THAT(r.out, HasSubstr("the loss was nan; also non-finite: bot_l.2.bias, top_l.0.weight"));
  EXPECT_THAT(r.out, Not(HasSubstr("Summary")));
  const Result plain = run(diverging);
  EXPECT_EQ(plain.status, 0) << plain.out;
  EXPECT_THAT(plain.out, HasSubstr("loss nan"));
  // --help lists the flag.
  EXPECT_THAT(run("--help").out, HasSubstr("--check-finite"));
}

// Output paths are checked before training, not after it (issue 25: a missing directory threw
// the run away).
TEST(DLRMCli, OutputPathsAreCheckedBeforeTraining) {
  for (const char* flag : {"--save-model", "--json", "--plot"}) {
    const Result r = run(kSmall + " " + flag + " /no/such/dir/out");
    EXPECT_EQ(r.status, 1) << r.out;
    EXPECT_THAT(r.out, HasSubstr(std::string(flag) + ": cannot write '/no/such/dir/out'")) << flag;
    EXPECT_THAT(r.out, Not(HasSubstr("Finished"))) << flag;
  }
}

TEST(DLRMCli, UnreadableFilesExitOneNamingThem) {
  const auto dir = temp_dir();
  const std::string junk = (dir / "junk.ckpt").string();
  std::ofstream(junk) << "not a checkpoint";
  const Result r = run(kSmall + " --load-model " + junk);
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_THAT(r.out, HasSubstr("strata-dlrm: error: "));
  EXPECT_THAT(r.out, HasSubstr(junk));
  EXPECT_THAT(r.out, Not(HasSubstr("Finished")));
  std::filesystem::remove_all(dir);
}

TEST(DLRMCli, CriteoFilesTrainAndBadRecordsExitOne) {
  const auto dir = temp_dir();
  const std::string tsv = (dir / "day.tsv").string();
  {
    std::ofstream f(tsv);
    for (int i = 0; i < 9; ++i) {
      f << i % 2;
      for (int j = 0; j < 13; ++j) f << "\t" << i + j;
      for (int j = 0; j < 26; ++j) f << "\t" << std::hex << (0x1234567u * (i + 1) + j) << std::dec;
      f << "\n";
    }
  }
  const std::string kaggle =
      "--preset kaggle --scale-rows 0.0001 --fast-budget 8M --mini-batch-size 4 --num-batches 0 "
      "--print-freq 1 --data-generation dataset ";
  const Result ok = run(kaggle + "--raw-data-file " + tsv);
  ASSERT_EQ(ok.status, 0) << ok.out;
  // Preprocessed as the reference does: days of 2, 2, 1, 1, 1, 1, 1; 8 train samples in batches of 4.
  EXPECT_EQ(progress_lines(ok.out).size(), 2u) << ok.out;
  EXPECT_THAT(ok.out, HasSubstr("Finished training it 2/2 of epoch 0"));
  EXPECT_THAT(ok.out, HasSubstr("data: criteo-train("));
  EXPECT_TRUE(std::filesystem::exists(dir / "kaggleAdDisplayChallenge_processed.npz"));
  EXPECT_TRUE(std::filesystem::exists(dir / "day_day_count.npz"));
  EXPECT_TRUE(std::filesystem::exists(dir / "day_fea_count.npz"));
  // A line with a field that is not hex: preprocessing names the file, line and column.
  std::filesystem::remove(dir / "kaggleAdDisplayChallenge_processed.npz");
  {
    std::ofstream f(tsv, std::ios::app);
    f << "1";
    for (int j = 0; j < 13; ++j) f << "\t1";
    for (int j = 0; j < 26; ++j) f << "\t" << (j == 4 ? "zz" : "ab");
    f << "\n";
  }
  const Result bad = run(kaggle + "--raw-data-file " + tsv);
  EXPECT_EQ(bad.status, 1) << bad.out;
  EXPECT_THAT(bad.out, HasSubstr("strata-dlrm: error: criteo '" + tsv +
                                 "' line 10, column C5: 'zz' is not a "
                                 "hexadecimal category"));
  std::filesystem::remove_all(dir);
}

// Note [DLRM training run]: a record that cannot be trained late in a file stops the run naming
// the batch and the file, after saving the last good state with --save-model; resuming from it
// starts at the bad batch.
TEST(DLRMCli, ABadRecordLateInAFileSavesTheLastGoodStateFirst) {
  const auto dir = temp_dir();
  std::vector<int32_t> words;
  for (int i = 0; i < 40; ++i) {
    words.push_back(i == 29 ? 5 : i % 2);  // record 30's label is 5
    for (int j = 0; j < 13; ++j) words.push_back(i % 7);
    for (int k = 0; k < 26; ++k) words.push_back((i * 13 + k) % 1000);
  }
  const std::string bin = (dir / "late_bad.bin").string(), ckpt = (dir / "m.ckpt").string();
  std::ofstream(bin, std::ios::binary)
      .write(reinterpret_cast<const char*>(words.data()), static_cast<std::streamsize>(words.size() * 4));
  std::string rows = "1000";
  for (int k = 1; k < 26; ++k) rows += "-1000";
  const std::string args = "--data-generation dataset --processed-data-file " + bin + " --arch-embedding-size " + rows +
                           " --arch-mlp-bot 13-4-2 --mini-batch-size 4 --threads 2 --save-model " + ckpt;
  const Result r = run(args);
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_EQ(progress_lines(r.out).size(), 7u) << r.out;
  EXPECT_THAT(r.out, HasSubstr("Saving model to " + ckpt));
  EXPECT_THAT(r.out, HasSubstr("strata-dlrm: error: batch 8 of epoch 0: criteo binary '" + bin +
                               "': record 30, column label: 5 is not a 0/1 label"));
  const Result again = run(args + " --load-model " + ckpt);
  EXPECT_EQ(again.status, 1) << again.out;
  EXPECT_THAT(again.out, HasSubstr("(7 optimizer steps); resuming at epoch 0, batch 7/10"));
  EXPECT_TRUE(progress_lines(again.out).empty()) << again.out;
  // Such a file has no test split to test on.
  EXPECT_THAT(run(args + " --test-freq 2").out, HasSubstr("a 40 x int32 binary has no test split to test on"));
  std::filesystem::remove_all(dir);
}

TEST(DLRMCli, HelpListsTheFlags) {
  const Result r = run("--help");
  ASSERT_EQ(r.status, 0);
  for (const char* f : {"--arch-sparse-feature-size", "--preset", "--fast-budget", "--emb-policy", "--cache-fraction",
                        "--slow-tier-model", "--slow-dir", "--scale-rows", "--zipf-alpha", "--reuse", "--threads"})
    EXPECT_THAT(r.out, HasSubstr(f));
}

#endif
