#include "models/checkpoint.h"

#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <functional>

#include "core/error.h"
#include "core/factories.h"
#include "models/container.h"
#include "models/linear.h"
#include "models/normalization.h"
#include "tests/cpp/error_text.h"

namespace strata {
namespace {

namespace fs = std::filesystem;

using testing_util::error_of;

class CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("strata_ckpt_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    fs::permissions(dir_, fs::perms::owner_all, fs::perm_options::add);
    fs::remove_all(dir_);
  }
  std::string file(const std::string& name) const { return (dir_ / name).string(); }
  static std::string read(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }
  static void write(const std::string& path, const std::string& bytes) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  std::size_t files_in_dir() const {
    return static_cast<std::size_t>(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()));
  }
  /// A small checkpoint's bytes.
  std::string sample_bytes() {
    const std::string p = file("sample.ckpt");
    save_checkpoint(p, {{"w", arange(0, 6, 1, {DType::f32}).view({2, 3})}, {"b", ones({3})}},
                    {{"state.0.step", scalar_tensor(3, DType::f64)}}, {{"epoch", "2"}});
    return read(p);
  }
  fs::path dir_;
};

void expect_same(const Tensor& a, const Tensor& b, const std::string& key) {
  ASSERT_EQ(a.dtype(), b.dtype()) << key;
  ASSERT_EQ(a.sizes(), b.sizes()) << key;
  Tensor x = a.contiguous().reshape({-1}), y = b.contiguous().reshape({-1});
  for (int64_t i = 0; i < x.numel(); ++i) EXPECT_EQ(x.at({i}), y.at({i})) << key << " element " << i;
}

TEST_F(CheckpointTest, RoundTripsEveryDtypeShapeAndMetadata) {
  StateDict model;
  model.emplace_back("f32", randn({3, 4}));
  model.emplace_back("f64", randn({5}, {DType::f64, nullptr}));
  model.emplace_back("bf16", randn({2, 3}).to(DType::bf16));
  model.emplace_back("i32", randint(-100, 100, {7}, {DType::i32, nullptr}));
  model.emplace_back("i64", randint(-(int64_t{1} << 40), int64_t{1} << 40, {2, 2}));
  model.emplace_back("u8", randint(0, 256, {9}, {DType::u8, nullptr}));
  model.emplace_back("bool", tensor<bool>({true, false, true}));
  model.emplace_back("scalar", scalar_tensor(2.5));
  model.emplace_back("empty", zeros({0, 3}));
  model.emplace_back("strided", randn({4, 6}).t());  // non-contiguous source
  StateDict optimizer;
  state_put_scalar(optimizer, "param_groups.0.lr", 0.01);
  optimizer.emplace_back("state.0.exp_avg", randn({3, 4}));
  const CheckpointMetadata meta = {{"epoch", "7"}, {"note", std::string("binary\0ok", 9)}, {"", ""}};

  const std::string p = file("model.ckpt");
  save_checkpoint(p, model, optimizer, meta);
  Checkpoint ck = load_checkpoint(p);
  ASSERT_EQ(ck.model.size(), model.size());
  for (std::size_t i = 0; i < model.size(); ++i) {
    EXPECT_EQ(ck.model[i].first, model[i].first);
    expect_same(ck.model[i].second, model[i].second, model[i].first);
  }
  ASSERT_EQ(ck.optimizer.size(), 2u);
  EXPECT_EQ(state_scalar(ck.optimizer, "param_groups.0.lr", "test"), 0.01);
  expect_same(ck.optimizer[1].second, optimizer[1].second, "exp_avg");
  EXPECT_EQ(ck.metadata, meta);
  EXPECT_EQ(files_in_dir(), 1u);  // no temporary left behind
}

TEST_F(CheckpointTest, ModelStateRoundTripsThroughLoadStateDict) {
  auto make = [] {
    return std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
        std::make_shared<nn::Linear>(4, 3), std::make_shared<nn::BatchNorm1d>(3)});
  };
  auto a = make();
  a->forward(randn({8, 4}));  // moves the running statistics
  const std::string p = file("seq.ckpt");
  save_checkpoint(p, a->state_dict());
  auto b = make();
  b->load_state_dict(load_checkpoint(p).model);
  const StateDict sa = a->state_dict(), sb = b->state_dict();
  for (std::size_t i = 0; i < sa.size(); ++i) expect_same(sb[i].second, sa[i].second, sa[i].first);
  EXPECT_EQ(b->child("1")->buffer("num_batches_tracked").item<int64_t>(), 1);
}

TEST_F(CheckpointTest, OverwriteReplacesThePreviousFile) {
  const std::string p = file("x.ckpt");
  save_checkpoint(p, {{"a", ones({2})}});
  save_checkpoint(p, {{"b", zeros({3})}});
  Checkpoint ck = load_checkpoint(p);
  ASSERT_EQ(ck.model.size(), 1u);
  EXPECT_EQ(ck.model[0].first, "b");
  EXPECT_EQ(files_in_dir(), 1u);
}

TEST_F(CheckpointTest, MissingFileIsNamed) {
  const std::string p = file("nope.ckpt");
  EXPECT_ERROR_HAS(load_checkpoint(p), "load_checkpoint: cannot open '" + p + "' (no such file)");
}

TEST_F(CheckpointTest, DirectoryIsNamedAsADirectory) {
  const std::string d = file("a_dir.ckpt");
  std::filesystem::create_directory(d);
  EXPECT_ERROR_HAS(load_checkpoint(d), "load_checkpoint: cannot open '" + d + "' (is a directory)");
  EXPECT_ERROR_HAS(save_checkpoint(d, {{"a", ones({1})}}), "save_checkpoint('" + d + "'): is a directory");
}

TEST_F(CheckpointTest, NulInThePathIsEscapedAndRefused) {
  const std::string p = file("a") + std::string(1, '\0') + "b.ckpt";
  save_checkpoint(file("a"), {{"a", ones({1})}});  // the part before the NUL exists and must not be read
  const std::string msg = ::strata::testing_util::error_of([&] { load_checkpoint(p); });
  EXPECT_NE(msg.find("a\\x00b.ckpt' (the path contains a NUL byte)"), std::string::npos) << msg;
  EXPECT_ERROR_HAS(save_checkpoint(p, {{"a", ones({1})}}), "the path contains a NUL byte");
}

TEST_F(CheckpointTest, ForeignFileIsRefused) {
  const std::string p = file("foreign.ckpt");
  write(p, "PK\x03\x04 this is a zip file, not a checkpoint at all");
  EXPECT_ERROR_HAS(load_checkpoint(p), "load_checkpoint('" + p + "'): not a Strata checkpoint");
  std::string bytes = sample_bytes();
  bytes[0] = 'X';
  write(p, bytes);
  EXPECT_ERROR_HAS(load_checkpoint(p), "not a Strata checkpoint (the file does not start with the magic \"STRATACK\")");
}

TEST_F(CheckpointTest, NewerVersionIsRefused) {
  std::string bytes = sample_bytes();
  bytes[8] = static_cast<char>(kCheckpointVersion + 1);  // the u32 version after the magic
  const std::string p = file("newer.ckpt");
  write(p, bytes);
  EXPECT_ERROR_HAS(load_checkpoint(p), "load_checkpoint('" + p +
                                           "'): unsupported format version 2 (this build of "
                                           "Strata reads version 1; the file was written by a newer Strata)");
}

TEST_F(CheckpointTest, TruncationAtAnyOffsetIsDetected) {
  const std::string bytes = sample_bytes();
  const std::string p = file("cut.ckpt");
  for (std::size_t cut : {std::size_t{0}, std::size_t{3}, std::size_t{8}, std::size_t{20}, std::size_t{31},
                          std::size_t{32}, std::size_t{40}, bytes.size() / 2, bytes.size() - 1}) {
    write(p, bytes.substr(0, cut));
    EXPECT_ERROR_HAS(load_checkpoint(p), "load_checkpoint('" + p + "'): the file is truncated");
  }
  write(p, bytes);
  EXPECT_NO_THROW(load_checkpoint(p));
}

TEST_F(CheckpointTest, FlippedBytesFailTheChecksum) {
  const std::string bytes = sample_bytes();
  const std::string p = file("flip.ckpt");
  for (std::size_t at : {std::size_t{32}, std::size_t{45}, bytes.size() / 2, bytes.size() - 1}) {
    std::string b = bytes;
    b[at] = static_cast<char>(b[at] ^ 0x10);
    write(p, b);
    EXPECT_ERROR_HAS(load_checkpoint(p), "load_checkpoint('" + p + "'): checksum mismatch");
  }
  write(p, bytes + "extra");
  EXPECT_ERROR_HAS(load_checkpoint(p), "the file is corrupt (5 bytes after the end of the payload)");
}

TEST_F(CheckpointTest, FailedSaveLeavesThePreviousFileIntact) {
  const std::string p = file("keep.ckpt");
  save_checkpoint(p, {{"a", ones({4})}});
  const std::string before = read(p);

  // An error while serializing.
  EXPECT_ERROR_HAS(save_checkpoint(p, {{"a", ones({4})}, {"bad", Tensor()}}),
                   "save_checkpoint('" + p + "'): model entry 'bad' is an undefined tensor");
  EXPECT_EQ(read(p), before);

  // A write that fails half-way (file size limit): the temporary is removed, the target untouched.
  std::signal(SIGXFSZ, SIG_IGN);
  rlimit old{};
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &old), 0);
  rlimit small = old;
  small.rlim_cur = 4096;
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
  const std::string msg = error_of([&] { save_checkpoint(p, {{"big", zeros({100000})}}); });
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &old), 0);
  std::signal(SIGXFSZ, SIG_DFL);
  EXPECT_NE(msg.find("save_checkpoint: cannot write '" + p + "': writing the temporary file"), std::string::npos)
      << msg;
  EXPECT_NE(msg.find("the previous file, if any, is untouched"), std::string::npos) << msg;
  EXPECT_EQ(read(p), before);
  EXPECT_EQ(files_in_dir(), 1u);

  // An unwritable directory (permission bits do not bind root, so only checked otherwise).
  if (::geteuid() != 0) {
    fs::permissions(dir_, fs::perms::owner_write | fs::perms::group_write | fs::perms::others_write,
                    fs::perm_options::remove);
    EXPECT_ERROR_HAS(save_checkpoint(p, {{"b", ones({2})}}), "cannot create the temporary file");
    fs::permissions(dir_, fs::perms::owner_write, fs::perm_options::add);
    EXPECT_EQ(read(p), before);
  }
  // A missing directory.
  EXPECT_ERROR_HAS(save_checkpoint(file("no/such/dir.ckpt"), {{"a", ones({1})}}), "cannot create the temporary file");
}

TEST_F(CheckpointTest, WriterStreamsEntriesInPiecesAndReaderReadsThemBack) {
  const std::string p = file("stream.ckpt");
  Tensor w = arange(0, 1000, 1, {DType::f32});
  {
    CheckpointWriter wr(p, {{"epoch", "1"}}, 3);
    wr.add(CheckpointSection::Model, "b", ones({3}));
    wr.begin(CheckpointSection::Model, "w", DType::f32, {10, 100});
    for (int64_t r = 0; r < 10; ++r) wr.write(w.data<float>() + r * 100, 100 * sizeof(float));
    wr.add(CheckpointSection::Optimizer, "state.0.step", scalar_tensor(3, DType::f64));
    wr.finish();
  }
  const Checkpoint c = load_checkpoint(p);
  ASSERT_EQ(c.model.size(), 2u);
  expect_same(c.model[1].second, w.view({10, 100}), "w");
  EXPECT_EQ(c.optimizer.at(0).first, "state.0.step");
  EXPECT_EQ(c.metadata, (CheckpointMetadata{{"epoch", "1"}}));
  const CheckpointReader r(p);
  const CheckpointEntry* e = r.find(CheckpointSection::Model, "w");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->nbytes, 4000u);
  float piece[3];
  r.read(*e, 4 * 500, piece, sizeof piece);
  EXPECT_EQ(piece[0], 500.0f);
  EXPECT_EQ(piece[2], 502.0f);
  EXPECT_ERROR_HAS(r.read(*e, 3990, piece, sizeof piece), "bytes [3990, 4002) of entry 'w' asked, it has 4000");
  EXPECT_EQ(r.find(CheckpointSection::Optimizer, "w"), nullptr);
}

TEST_F(CheckpointTest, AnUnfinishedWriterLeavesThePreviousFileAndNoTemporary) {
  const std::string p = file("keep.ckpt");
  save_checkpoint(p, {{"a", ones({4})}});
  const std::string before = read(p);
  {
    CheckpointWriter wr(p, {}, 2);
    wr.add(CheckpointSection::Model, "a", zeros({4}));
    EXPECT_ERROR_HAS(wr.write("x", 1), "entry 'a' is given 1 bytes but has 0 left");
    EXPECT_ERROR_HAS(wr.finish(), "1 announced entries were not written");
    EXPECT_EQ(files_in_dir(), 2u);  // the temporary
  }
  EXPECT_EQ(read(p), before);
  EXPECT_EQ(files_in_dir(), 1u);
  CheckpointWriter wr(p, {}, 1);
  wr.begin(CheckpointSection::Model, "a", DType::f32, {4});
  wr.write(std::string(8, '\0').data(), 8);
  EXPECT_ERROR_HAS(wr.begin(CheckpointSection::Model, "b", DType::f32, {1}),
                   "entry 'a' is incomplete (8 bytes missing) when entry 'b' begins");
}

TEST_F(CheckpointTest, StaleTemporariesOfDeadProcessesAreRemovedByTheNextSave) {
  pid_t dead = 0;
  char true_cmd[] = "/bin/true";
  char* argv[] = {true_cmd, nullptr};
  ASSERT_EQ(::posix_spawn(&dead, "/bin/true", nullptr, nullptr, argv, environ), 0);
  ASSERT_EQ(::waitpid(dead, nullptr, 0), dead);  // reaped: no process has this pid now
  const std::string p = file("model.ckpt");
  const std::string stale = file(".model.ckpt.tmp." + std::to_string(dead) + ".0");
  const std::string live = file(".model.ckpt.tmp." + std::to_string(::getppid()) + ".3");
  const std::string mine = file(".model.ckpt.tmp." + std::to_string(::getpid()) + ".99");
  const std::string other = file(".other.ckpt.tmp." + std::to_string(dead) + ".0");
  const std::string odd = file(".model.ckpt.tmp.x" + std::to_string(dead) + ".0");
  for (const auto& f : {stale, live, mine, other, odd}) write(f, "partial");
  ::testing::internal::CaptureStderr();
  save_checkpoint(p, {{"a", ones({2})}});
  const std::string said = ::testing::internal::GetCapturedStderr();
  EXPECT_FALSE(fs::exists(stale));
  EXPECT_NE(said.find("save_checkpoint('" + p + "'): removed the stale temporary file '" + stale + "' (its process " +
                      std::to_string(dead) + " no longer runs)\n"),
            std::string::npos)
      << said;
  EXPECT_EQ(std::count(said.begin(), said.end(), '\n'), 1);
  for (const auto& f : {live, mine, other, odd}) EXPECT_TRUE(fs::exists(f)) << f;
  EXPECT_NO_THROW(load_checkpoint(p));
}

}  // namespace
}  // namespace strata
