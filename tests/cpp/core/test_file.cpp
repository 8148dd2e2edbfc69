// Opening user-named files: "no such file", "is a directory", "permission denied" and NUL bytes are
// told apart (Note [Opening files named by the user]).

#include "core/file.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>

#include "core/error.h"
#include "test_util.h"

namespace {

using namespace strata;
using ::testing::AllOf;
using ::testing::HasSubstr;

class FileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("strata_file_test_" + std::to_string(::getpid()) + "_" +
                                                     ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::permissions(dir_ / "secret", std::filesystem::perms::owner_all, ec);
    std::filesystem::remove_all(dir_, ec);
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  std::filesystem::path dir_;
};

TEST_F(FileTest, ReadsARegularFile) {
  std::ofstream(path("a.txt")) << "hello";
  EXPECT_EQ(file_unreadable_reason(path("a.txt")), "");
  EXPECT_NO_THROW(check_readable_file(path("a.txt"), "reader"));
  EXPECT_EQ(read_file(path("a.txt"), "reader"), "hello");
  std::FILE* f = open_file_for_reading(path("a.txt"), "reader");
  char c = 0;
  EXPECT_EQ(std::fread(&c, 1, 1, f), 1u);
  EXPECT_EQ(c, 'h');
  std::fclose(f);
}

TEST_F(FileTest, MissingFileIsNoSuchFile) {
  const std::string p = path("missing.bin");
  EXPECT_EQ(ERROR_MESSAGE(open_file_for_reading(p, "reader")), "reader: cannot open '" + p + "' (no such file)");
  EXPECT_EQ(ERROR_MESSAGE(read_file(p, "--flag")), "--flag: cannot open '" + p + "' (no such file)");
  EXPECT_EQ(file_unreadable_reason(p), "no such file");
}

TEST_F(FileTest, DirectoryIsADirectory) {
  const std::string p = dir_.string();
  EXPECT_EQ(ERROR_MESSAGE(open_file_for_reading(p, "reader")), "reader: cannot open '" + p + "' (is a directory)");
  EXPECT_EQ(ERROR_MESSAGE(read_file(p, "reader")), "reader: cannot open '" + p + "' (is a directory)");
  EXPECT_EQ(ERROR_MESSAGE(check_readable_file(p, "reader")), "reader: cannot open '" + p + "' (is a directory)");
}

TEST_F(FileTest, UnreadableFileIsPermissionDenied) {
  if (::geteuid() == 0) GTEST_SKIP() << "root reads every file";
  const std::string p = path("secret");
  std::ofstream(p) << "x";
  ::chmod(p.c_str(), 0);
  EXPECT_EQ(ERROR_MESSAGE(open_file_for_reading(p, "reader")), "reader: cannot open '" + p + "' (permission denied)");
}

TEST_F(FileTest, ParentThatIsAFileIsNamed) {
  std::ofstream(path("plain")) << "x";
  EXPECT_THAT(ERROR_MESSAGE(read_file(path("plain") + "/child", "reader")),
              HasSubstr("a parent of it is not a directory"));
}

TEST_F(FileTest, NulInThePathIsRefusedNotTruncated) {
  std::ofstream(path("a")) << "the file before the NUL";
  const std::string p = path("a") + std::string(1, '\0') + "b";
  const std::string msg = ERROR_MESSAGE(read_file(p, "reader"));
  EXPECT_EQ(msg, "reader: cannot open '" + path("a") + "\\x00b' (the path contains a NUL byte)");
}

TEST_F(FileTest, WritablePathsPassTheProbeAndLeaveNothing) {
  check_writable_file_path(path("out.json"), "--json");
  std::ofstream(path("existing")) << "x";
  check_writable_file_path(path("existing"), "--json");
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir_), std::filesystem::directory_iterator()), 1);
}

TEST_F(FileTest, UnwritablePathsAreNamedWithTheReason) {
  EXPECT_EQ(ERROR_MESSAGE(check_writable_file_path(path("no/such/dir/model.ckpt"), "--save-model")),
            "--save-model: cannot write '" + path("no/such/dir/model.ckpt") + "' (its directory '" +
                path("no/such/dir") + "' does not exist)");
  std::ofstream(path("plain")) << "x";
  EXPECT_THAT(ERROR_MESSAGE(check_writable_file_path(path("plain") + "/model.ckpt", "--save-model")),
              HasSubstr("(a parent of it is not a directory)"));
  EXPECT_THAT(ERROR_MESSAGE(check_writable_file_path("/etc/passwd/x", "--json")),
              HasSubstr("--json: cannot write '/etc/passwd/x' (a parent of it is not a directory)"));
  EXPECT_THAT(ERROR_MESSAGE(check_writable_file_path(dir_.string(), "--json")), HasSubstr("(is a directory)"));
  EXPECT_THAT(ERROR_MESSAGE(check_writable_file_path("", "--json")), HasSubstr("(the path is empty)"));
  // /proc takes no new files, even from root.
  EXPECT_THAT(ERROR_MESSAGE(check_writable_file_path("/proc/strata-model.ckpt", "--save-model")),
              HasSubstr("--save-model: cannot write '/proc/strata-model.ckpt' ("));
}

// ---- AtomicFile (Note [Atomic file writes]) ----

TEST_F(FileTest, AtomicFileAppearsWholeOnlyAtCommit) {
  std::ofstream(path("out.bin")) << "old";
  {
    AtomicFile f(path("out.bin"), "test");
    EXPECT_EQ(f.temporary_path(), path(".out.bin.tmp." + std::to_string(::getpid())) +
                                      f.temporary_path().substr(f.temporary_path().rfind('.')));
    f.write("header??");
    const std::string big(3 << 20, 'x');  // past the buffer: written straight through
    f.write(big);
    f.write("tail");
    EXPECT_EQ(f.size(), 8u + big.size() + 4u);
    f.write_at("HEADER", 6, 0);
    EXPECT_EQ(read_file(path("out.bin"), "test"), "old");  // not yet
    f.commit();
    const std::string got = read_file(path("out.bin"), "test");
    EXPECT_EQ(got.size(), f.size());
    EXPECT_EQ(got.substr(0, 8), "HEADER??");
    EXPECT_EQ(got.substr(got.size() - 4), "tail");
    EXPECT_THAT(ERROR_MESSAGE(f.write("more")), HasSubstr("was already committed or failed"));
  }
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir_), std::filesystem::directory_iterator()), 1);
}

TEST_F(FileTest, AtomicFileAbandonedLeavesTheOldFileAndNoTemporary) {
  std::ofstream(path("out.bin")) << "old";
  {
    AtomicFile f(path("out.bin"), "test");
    f.write("new");
    // A second writer of the same path gets a temporary of its own.
    AtomicFile g(path("out.bin"), "test");
    EXPECT_NE(f.temporary_path(), g.temporary_path());
    EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir_), std::filesystem::directory_iterator()), 3);
  }
  EXPECT_EQ(read_file(path("out.bin"), "test"), "old");
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir_), std::filesystem::directory_iterator()), 1);
}

TEST_F(FileTest, AtomicFileErrorsNameThePathAndTheStep) {
  EXPECT_EQ(ERROR_MESSAGE(AtomicFile("", "--json")), "--json: the output path is empty");
  EXPECT_THAT(ERROR_MESSAGE(AtomicFile(std::string("a\0b", 3), "--json")), HasSubstr("(the path contains a NUL byte)"));
  const std::string missing = path("no/such/dir/out.json");
  EXPECT_THAT(ERROR_MESSAGE(AtomicFile(missing, "--json")),
              HasSubstr("--json: cannot write '" + missing + "': cannot create the temporary file '" +
                        path("no/such/dir/") + ".out.json.tmp."));
  // A non-empty directory in the way: the rename fails, the temporary is removed.
  std::filesystem::create_directories(path("taken/sub"));
  AtomicFile f(path("taken"), "--json");
  f.write("x");
  EXPECT_THAT(ERROR_MESSAGE(f.commit()),
              AllOf(HasSubstr("--json: cannot write '" + path("taken") + "': renaming the temporary file '"),
                    HasSubstr("(the previous file, if any, is untouched)")));
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir_), std::filesystem::directory_iterator()), 1);
  AtomicFile h(path("h"), "test");
  h.write("abc");
  EXPECT_THAT(ERROR_MESSAGE(h.write_at("xy", 2, 2)), HasSubstr("test: writing 2 bytes at offset 2 of the 3 written"));
}

TEST_F(FileTest, WriteFileAtomicallyReplacesTheFile) {
  std::ofstream(path("report.json")) << "old";
  write_file_atomically(path("report.json"), "{}", "--json");
  EXPECT_EQ(read_file(path("report.json"), "test"), "{}");
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir_), std::filesystem::directory_iterator()), 1);
}

TEST_F(FileTest, FreeDiskBytes) {
  const std::optional<std::size_t> free = free_disk_bytes(dir_.string());
  ASSERT_TRUE(free.has_value());
  EXPECT_GT(*free, 0u);
  EXPECT_FALSE(free_disk_bytes(path("no/such/dir")).has_value());
}

}  // namespace
