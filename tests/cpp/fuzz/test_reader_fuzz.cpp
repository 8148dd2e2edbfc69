// Every reader of user files under the seeded mutation fuzzer (fuzz_harness.h): mutants are
// accepted or refused with a strata::Error naming the file; never a crash, a hang or another
// exception.

#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include "core/factories.h"
#include "core/npz.h"
#include "embeddings/criteo.h"
#include "embeddings/criteo_dataset.h"
#include "embeddings/dlrm.h"
#include "embeddings/dlrm_config.h"
#include "embeddings/index_source.h"
#include "models/checkpoint.h"
#include "tests/cpp/fuzz/fuzz_harness.h"

namespace strata::fuzz {
namespace {

using namespace strata::emb;

std::string read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string criteo_line(int i, bool sparse_missing) {
  std::ostringstream os;
  os << (i % 3 == 0 ? 1 : 0);
  for (int j = 0; j < 13; ++j) os << '\t' << ((i + j) % 5 == 0 ? std::string() : std::to_string((i * 7 + j) % 40 - 3));
  for (int j = 0; j < 26; ++j) {
    os << '\t';
    if (!(sparse_missing && j % 7 == 0)) os << std::hex << (0x9e3779b9u * static_cast<unsigned>(i + 1) + j) << std::dec;
  }
  os << '\n';
  return os.str();
}

std::vector<std::string> tsv_seeds() {
  std::vector<std::string> seeds(3);
  for (int i = 0; i < 12; ++i) seeds[0] += criteo_line(i, false);
  for (int i = 0; i < 5; ++i) seeds[1] += criteo_line(i + 100, true);
  seeds[2] = criteo_line(7, true);
  seeds[2].pop_back();  // no final newline
  return seeds;
}

void drain(IndexSource& source) {
  Batch b;
  for (int epoch = 0; epoch < 2; ++epoch) {
    while (source.next(b)) {}
    source.reset();
  }
}

TEST(ReaderFuzz, CriteoTsv) {
  const int accepted = fuzz_reader(tsv_seeds(),
                                   [](const std::string& path) {
                                     CriteoConfig c;
                                     c.path = path;
                                     c.rows.assign(kCriteoSparse, 1000);
                                     c.batch_size = 4;
                                     CriteoTsvSource source(c);
                                     drain(source);
                                   },
                                   {.cases = 2000, .seed = 11, .file_name = "train.txt"});
  EXPECT_GT(accepted, 30);  // some mutants stay valid text, so the readers' later stages are reached
}

TEST(ReaderFuzz, CriteoBinary) {
  ScratchDir dir;
  std::vector<std::string> seeds;
  for (int n : {3, 8}) {
    std::vector<int32_t> records;
    for (int i = 0; i < n; ++i) {
      records.push_back(i % 2);
      for (int j = 0; j < 13; ++j) records.push_back((i + j) % 9);
      for (int j = 0; j < 26; ++j) records.push_back((i * 31 + j * 7) % 1000);
    }
    const std::string path = (dir.path / ("seed" + std::to_string(n) + ".bin")).string();
    CriteoBinarySource::write(path, records);
    seeds.push_back(read_bytes(path));
  }
  const int accepted = fuzz_reader(seeds,
                                   [](const std::string& path) {
                                     CriteoConfig c;
                                     c.path = path;
                                     c.rows.assign(kCriteoSparse, 1000);
                                     c.batch_size = 3;
                                     c.wrap = false;
                                     CriteoBinarySource source(c);
                                     drain(source);
                                   },
                                   {.cases = 2000, .seed = 12, .file_name = "train_data.bin"});
  EXPECT_GT(accepted, 50);
}

TEST(ReaderFuzz, SyntheticTraceFiles) {
  const std::vector<std::string> seeds = {"1, 2, 3, 4, 5, 6\n0, 1, 3, 4, 5\n0.55, 0.64, 0.82, 0.91, 1.0\n",
                                          "7, 9\n0, 1\n0.5, 1.0\n", "3\n0\n1.0"};
  const int accepted = fuzz_reader(seeds,
                                   [](const std::string& path) {
                                     SyntheticConfig c;
                                     c.rows = {100};
                                     c.batch_size = 4;
                                     c.num_batches = 2;
                                     c.num_indices_per_lookup = 5;
                                     c.trace_file =
                                         path.substr(0, path.size() - std::string("0.log").size()) + "{j}.log";
                                     SyntheticTraceSource source(c);
                                     drain(source);
                                   },
                                   {.cases = 2000, .seed = 13, .file_name = "dist_emb_0.log"});
  EXPECT_GT(accepted, 50);
}

// Every member of an .npz read through to its end (in chunks: a header may claim any size).
void read_npz(const std::string& path) {
  npy::NpzReader z(path);
  std::vector<char> buf(1 << 16);
  for (const std::string& name : z.names()) {
    auto m = z.open(name);
    for (uint64_t left = m->header().data_bytes(); left > 0;) {
      const std::size_t n = static_cast<std::size_t>(std::min<uint64_t>(left, buf.size()));
      m->read(buf.data(), n);
      left -= n;
    }
    m->finish();
  }
}

// The reference's files for a small raw file, preprocessed by Strata (stored and deflated).
struct ProcessedSeeds {
  ScratchDir dir;
  std::string day_count;
  std::vector<std::string> processed;
  ProcessedSeeds() {
    const std::string raw = (dir.path / "train.txt").string();
    {
      std::ofstream f(raw);
      for (int i = 0; i < 40; ++i) f << criteo_line(i, i % 4 == 0);
    }
    for (bool compress : {false, true}) {
      CriteoPreprocessConfig c;
      c.raw_data_file = raw;
      c.processed_data_file = (dir.path / (compress ? "z.npz" : "s.npz")).string();
      c.compress = compress;
      RandomStream rng(123);
      preprocess_criteo(c, rng);
      processed.push_back(read_bytes(c.processed_data_file));
    }
    day_count = (dir.path / "train_day_count.npz").string();
  }
};

TEST(ReaderFuzz, NpzFiles) {
  ProcessedSeeds seeds;
  const int accepted = fuzz_reader(seeds.processed, read_npz, {.cases = 2000, .seed = 16, .file_name = "data.npz"});
  EXPECT_GT(accepted, 5);
}

TEST(ReaderFuzz, ProcessedCriteoFiles) {
  ProcessedSeeds seeds;
  for (bool memory_map : {false, true}) {
    fuzz_reader(seeds.processed,
                [&](const std::string& path) {
                  const auto data = CriteoData::load(path, seeds.day_count, 7, memory_map);
                  std::vector<int64_t> order(static_cast<std::size_t>(data->rows()));
                  std::iota(order.begin(), order.end(), 0);
                  CriteoSourceConfig c;
                  for (int64_t n : data->counts()) c.rows.push_back(std::max<int64_t>(n, 1));
                  c.batch_size = 7;
                  if (order.empty()) return;
                  CriteoDatasetSource source(data, order, c, "fuzz");
                  drain(source);
                },
                {.cases = 1000, .seed = memory_map ? 17u : 18u, .file_name = "kaggleAdDisplayChallenge_processed.npz"});
  }
}

TEST(ReaderFuzz, RawCriteoPreprocessing) {
  ScratchDir out;
  const int accepted = fuzz_reader(tsv_seeds(),
                                   [&](const std::string& path) {
                                     CriteoPreprocessConfig c;
                                     c.raw_data_file = path;
                                     c.processed_data_file = (out.path / "p.npz").string();
                                     c.chunk_bytes = 97;  // several chunks even for small files
                                     RandomStream rng(123);
                                     preprocess_criteo(c, rng);
                                   },
                                   {.cases = 1500, .seed = 19, .file_name = "train.txt"});
  EXPECT_GT(accepted, 30);
}

TEST(ReaderFuzz, Checkpoints) {
  ScratchDir dir;
  std::vector<std::string> seeds;
  {
    StateDict model = {{"w", ones({3, 4})}, {"b", zeros({4})}};
    StateDict opt = {{"state.0.sum", full({3, 4}, 0.5)}};
    const std::string path = (dir.path / "seed.ckpt").string();
    save_checkpoint(path, model, opt, {{"epoch", "3"}, {"note", "x"}});
    seeds.push_back(read_bytes(path));
    save_checkpoint(path, {{"only", zeros({2})}});
    seeds.push_back(read_bytes(path));
  }
  fuzz_reader(seeds, [](const std::string& path) { load_checkpoint(path); },
              {.cases = 2000, .seed = 14, .file_name = "model.ckpt"});
}

TEST(ReaderFuzz, DlrmCheckpoints) {
  ScratchDir dir;
  DLRMConfig c;
  c.arch_embedding_size = {20, 10};
  c.optimizer = OptimizerKind::RowWiseAdagrad;
  c.fast_budget = std::size_t{16} << 20;
  TieredDLRM model(c);
  const std::string path = (dir.path / "seed.ckpt").string();
  model.save(path, {{"epoch", "0"}, {"iter", "5"}});
  const std::vector<std::string> seeds = {read_bytes(path)};
  fuzz_reader(seeds, [&model](const std::string& p) { model.load(p); },
              {.cases = 1000, .seed = 15, .file_name = "dlrm.ckpt"});
}

}  // namespace
}  // namespace strata::fuzz

// The harness itself: a reader that throws something other than strata::Error, or an error that
// does not name the file, fails the test.

namespace strata::fuzz {
namespace {

TEST(FuzzHarness, ReportsReadersThatFailBadly) {
  const std::vector<std::string> seeds = {"abc", "defgh"};
  EXPECT_NONFATAL_FAILURE(
      fuzz_reader(seeds, [](const std::string&) { throw std::out_of_range("index"); }, {.cases = 1}),
      "not a strata::Error: index");
  EXPECT_NONFATAL_FAILURE(fuzz_reader(seeds, [](const std::string&) { throw Error("bad input"); }, {.cases = 1}),
                          "the error does not name the file: bad input");
  EXPECT_EQ(fuzz_reader(seeds, [](const std::string& p) { throw Error("bad " + p); }, {.cases = 3}), 0);
  EXPECT_EQ(fuzz_reader(seeds, [](const std::string&) {}, {.cases = 3}), 3);
}

}  // namespace
}  // namespace strata::fuzz
