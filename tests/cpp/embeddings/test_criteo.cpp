// Criteo readers: hand-written TSV lines and binary records decoded exactly, and the errors for
// missing files, wrong field counts, bad numbers and hex, truncated records and bad ids.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <vector>

#include "core/error.h"
#include "embeddings/criteo.h"
#include "tests/cpp/error_text.h"

using namespace strata;
using namespace strata::emb;
using ::testing::HasSubstr;

namespace {

using strata::testing_util::message_of;

struct TempDir {
  std::filesystem::path path;
  TempDir() {
    path = std::filesystem::temp_directory_path() /
           (std::string("strata_criteo_") + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  std::string write(const std::string& name, const std::string& bytes) const {
    const auto p = path / name;
    std::ofstream(p, std::ios::binary) << bytes;
    return p.string();
  }
};

std::vector<int64_t> rows_1000_but_first_7() {
  std::vector<int64_t> rows(26, 1000);
  rows[0] = 7;
  return rows;
}

/// The message of the first error reading `text` as bad.txt in `dir` with `c`'s settings.
std::string first_tsv_error(CriteoConfig& c, const TempDir& dir, const std::string& text) {
  c.path = dir.write("bad.txt", text);
  return message_of([&] {
    CriteoTsvSource s(c);
    Batch b;
    while (s.next(b)) {}
  });
}

std::string join(const std::vector<std::string>& fields) {
  std::string s;
  for (std::size_t i = 0; i < fields.size(); ++i) s += (i ? "\t" : "") + fields[i];
  return s;
}

// Line 1: a Kaggle-style sample with a missing I12 and a missing C22.
const std::vector<std::string> kLine1 = {
    "0",        "1",        "1",        "5",        "0",        "1382",     "4",        "15",
    "2",        "181",      "1",        "2",        "",         "2",        "68fd1e64", "80e26c9b",
    "fb936136", "7b4723c4", "25c83c98", "7e0ccccf", "de7995b8", "1f89b562", "a73ee510", "a8cd5504",
    "b2cb9c98", "37c9c164", "2824a5f6", "1adce6ef", "8ba8b39a", "891b62e7", "e5ba7672", "f54016b9",
    "21ddcdc9", "b1252a9d", "07b5194c", "",         "3a171ecb", "c5c50484", "e8b83407", "9727dd16"};

std::vector<std::string> line2() {  // negative and missing dense values, upper-case hex, missing C26
  std::vector<std::string> f = {"1", "-1", "", "3", "7"};
  for (int i = 0; i < 9; ++i) f.push_back("0");
  for (int i = 0; i < 25; ++i) f.push_back("FFFFFFFF");
  f.push_back("");
  return f;
}

std::string three_lines() {
  std::vector<std::string> empty(40, "");
  empty[0] = "0";
  return join(kLine1) + "\n" + join(line2()) + "\r\n" + join(empty);  // CRLF, no final newline
}

void expect_dense(const float* got, const std::vector<double>& raw) {
  for (std::size_t i = 0; i < raw.size(); ++i) {
    EXPECT_FLOAT_EQ(got[i], static_cast<float>(std::log(std::max(raw[i], 0.0) + 1.0))) << "dense " << i;
  }
}

}  // namespace

TEST(CriteoTsv, DecodesHandWrittenLines) {
  TempDir dir;
  CriteoConfig c;
  c.path = dir.write("train.txt", three_lines());
  c.rows = rows_1000_but_first_7();
  c.batch_size = 2;
  CriteoTsvSource src(c);
  EXPECT_EQ(src.num_samples(), 3);
  EXPECT_EQ(src.num_batches(), 2);
  EXPECT_EQ(src.num_dense(), 13);
  EXPECT_EQ(src.num_tables(), 26);
  Batch b;
  ASSERT_TRUE(src.next(b));
  ASSERT_EQ(b.batch, 2);
  EXPECT_EQ(b.targets, (std::vector<float>{0.0f, 1.0f}));
  expect_dense(b.dense.data(), {1, 1, 5, 0, 1382, 4, 15, 2, 181, 1, 2, 0, 2});
  EXPECT_FLOAT_EQ(b.dense[4], 7.232010364532471f);  // log(1383)
  expect_dense(b.dense.data() + 13, {-1, 0, 3, 7, 0, 0, 0, 0, 0, 0, 0, 0, 0});
  // Hashes mod rows: 0x68fd1e64 = 1761418852 -> mod 7 = 4; the rest mod 1000; missing -> 0.
  const std::vector<int64_t> expect1 = {4,   587, 894, 780, 704, 79,  136, 562, 944, 932, 344, 124, 422,
                                        655, 50,  383, 482, 41,  265, 973, 4,   0,   739, 300, 55,  118};
  for (int64_t k = 0; k < 26; ++k) {
    const Bags bags = b.bags(k);
    ASSERT_EQ(bags.indices.size(), 2u);
    EXPECT_EQ(bags.offsets[1], 1);
    EXPECT_EQ(bags.offsets[2], 2);
    EXPECT_EQ(bags.indices[0], expect1[static_cast<std::size_t>(k)]) << "C" << k + 1;
    // 0xFFFFFFFF = 4294967295 -> mod 7 = 3, mod 1000 = 295; C26 missing -> 0.
    EXPECT_EQ(bags.indices[1], k == 0 ? 3 : k == 25 ? 0 : 295) << "C" << k + 1;
  }
  ASSERT_TRUE(src.next(b));
  ASSERT_EQ(b.batch, 1);
  EXPECT_EQ(b.targets[0], 0.0f);
  for (float x : b.dense) EXPECT_EQ(x, 0.0f);
  for (int64_t k = 0; k < 26; ++k) EXPECT_EQ(b.bags(k).indices[0], 0);
  EXPECT_FALSE(src.next(b));
  src.reset();
  ASSERT_TRUE(src.next(b));
  EXPECT_EQ(b.bags(1).indices[0], 587);
}

TEST(CriteoTsv, MaxSamplesLimitsTheEpoch) {
  TempDir dir;
  CriteoConfig c;
  c.path = dir.write("train.txt", three_lines() + "\n");
  c.rows = rows_1000_but_first_7();
  c.batch_size = 4;
  c.max_samples = 2;
  CriteoTsvSource src(c);
  EXPECT_EQ(src.num_samples(), 2);
  Batch b;
  ASSERT_TRUE(src.next(b));
  EXPECT_EQ(b.batch, 2);
  EXPECT_FALSE(src.next(b));
}

TEST(CriteoTsv, BadInputNamesFileLineAndColumn) {
  TempDir dir;
  CriteoConfig c;
  c.rows = rows_1000_but_first_7();
  c.batch_size = 1;
  c.path = (dir.path / "missing.txt").string();
  EXPECT_THAT(message_of([&] { CriteoTsvSource s(c); }),
              HasSubstr("criteo tsv: cannot open '" + c.path + "' (no such file)"));

  auto first_error = [&](const std::string& text) { return first_tsv_error(c, dir, text); };
  std::vector<std::string> short_line(kLine1.begin(), kLine1.end() - 1);
  EXPECT_THAT(first_error(join(kLine1) + "\n" + join(short_line) + "\n"),
              HasSubstr("line 2: expected 40 tab-separated fields (label, I1..I13, C1..C26), found 39"));
  auto bad_hex = kLine1;
  bad_hex[16] = "zz12";
  EXPECT_THAT(first_error(join(bad_hex)), HasSubstr("line 1, column C3: 'zz12' is not a hexadecimal category"));
  auto bad_dense = kLine1;
  bad_dense[2] = "1.5";
  EXPECT_THAT(first_error(join(bad_dense)), HasSubstr("line 1, column I2: '1.5' is not an integer"));
  auto bad_label = kLine1;
  bad_label[0] = "yes";
  EXPECT_THAT(first_error(join(bad_label)), HasSubstr("line 1, column label: 'yes' is not an integer"));
  bad_label[0] = "5";  // the reference trains on it (loss -226.9)
  EXPECT_THAT(first_error(join(bad_label)), HasSubstr("line 1, column label: '5' is not a 0/1 label"));
  auto negative_hash = kLine1;
  negative_hash[14] = "-5";
  EXPECT_THAT(first_error(join(negative_hash)), HasSubstr("column C1: '-5' is not a hexadecimal category"));
  EXPECT_THAT(first_error(join(kLine1) + "\n\n"), HasSubstr("line 2: expected 40 tab-separated fields"));
  EXPECT_THAT(first_error(""), HasSubstr("bad.txt' holds no samples"));

  c.rows.pop_back();
  EXPECT_THAT(message_of([&] { CriteoTsvSource s(c); }),
              HasSubstr("criteo tsv: expected 26 table sizes (one per categorical feature C1..C26), got 25"));
  c.rows = std::vector<int64_t>(26, 10);
  c.rows[3] = 0;
  EXPECT_THAT(message_of([&] { CriteoTsvSource s(c); }), HasSubstr("table 3 (C4) has 0 rows"));
}

TEST(CriteoTsv, HugeBinaryFieldsAndDirectoriesAreReportedReadably) {
  TempDir dir;
  CriteoConfig c;
  c.rows = rows_1000_but_first_7();
  c.batch_size = 1;
  auto first_error = [&](const std::string& text) { return first_tsv_error(c, dir, text); };
  // A 2 MB field is shown as its first 64 bytes and its length, not echoed whole.
  auto huge = kLine1;
  huge[17] = std::string(2'000'000, 'q');
  const std::string big = first_error(join(huge));
  EXPECT_THAT(
      big, HasSubstr("line 1, column C4: '" + std::string(64, 'q') + "\u2026' (2000000 bytes) is not a hexadecimal"));
  EXPECT_LT(big.size(), 1000u) << big.substr(0, 1000);
  // A NUL byte is escaped and the message goes on after it.
  auto nul = kLine1;
  nul[3] = std::string("12") + '\0' + "34";
  EXPECT_THAT(first_error(join(nul)), HasSubstr("line 1, column I3: '12\\x0034' is not an integer"));
  auto ctrl = kLine1;
  ctrl[20] = "ab\x1b[31mcd\xff";
  EXPECT_THAT(first_error(join(ctrl)), HasSubstr("column C7: 'ab\\x1b[31mcd\\xff' is not a hexadecimal category"));
  // A directory is not "no such file" nor an empty file.
  c.path = dir.path.string();
  EXPECT_THAT(message_of([&] { CriteoTsvSource s(c); }),
              HasSubstr("criteo tsv: cannot open '" + c.path + "' (is a directory)"));
  CriteoConfig bin = c;
  EXPECT_THAT(message_of([&] { CriteoBinarySource s(bin); }),
              HasSubstr("criteo binary: cannot open '" + c.path + "' (is a directory)"));
}

namespace {

std::vector<int32_t> record(int32_t label, std::vector<int32_t> dense, std::vector<int32_t> sparse) {
  std::vector<int32_t> r = {label};
  dense.resize(13, 0);
  sparse.resize(26, 0);
  r.insert(r.end(), dense.begin(), dense.end());
  r.insert(r.end(), sparse.begin(), sparse.end());
  return r;
}

std::string raw_bytes(const std::vector<int32_t>& words) {  // little-endian int32 (the test host's order)
  return std::string(reinterpret_cast<const char*>(words.data()), words.size() * sizeof(int32_t));
}

}  // namespace

TEST(CriteoBinary, DecodesRecordsExactly) {
  TempDir dir;
  std::vector<int32_t> words;
  std::vector<int32_t> last_sparse(26, 0);
  last_sparse[0] = 6;
  last_sparse[25] = 2000;
  for (const auto& r : {record(1, {0, 3, -2, 7}, {5, 1005, 999}),
                        record(0, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13}, {}), record(1, {}, last_sparse)}) {
    words.insert(words.end(), r.begin(), r.end());
  }
  CriteoConfig c;
  c.path = dir.write("train_data.bin", raw_bytes(words));
  c.rows = rows_1000_but_first_7();
  c.batch_size = 2;
  CriteoBinarySource src(c);
  EXPECT_EQ(src.num_samples(), 3);
  EXPECT_EQ(src.num_batches(), 2);
  Batch b;
  ASSERT_TRUE(src.next(b));
  ASSERT_EQ(b.batch, 2);
  EXPECT_EQ(b.targets, (std::vector<float>{1.0f, 0.0f}));
  expect_dense(b.dense.data(), {0, 3, -2, 7, 0, 0, 0, 0, 0, 0, 0, 0, 0});
  expect_dense(b.dense.data() + 13, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13});
  EXPECT_EQ(b.bags(0).indices[0], 5);
  EXPECT_EQ(b.bags(1).indices[0], 5);  // 1005 wraps mod 1000 (--max-ind-range)
  EXPECT_EQ(b.bags(2).indices[0], 999);
  EXPECT_EQ(b.bags(2).indices[1], 0);
  EXPECT_EQ(b.bags(0).offsets[2], 2);
  ASSERT_TRUE(src.next(b));
  ASSERT_EQ(b.batch, 1);
  EXPECT_EQ(b.bags(0).indices[0], 6);
  EXPECT_EQ(b.bags(25).indices[0], 0);  // 2000 mod 1000
  EXPECT_FALSE(src.next(b));
  src.reset();
  ASSERT_TRUE(src.next(b));
  EXPECT_EQ(b.bags(1).indices[0], 5);

  // write() produces the same bytes.
  const std::string written = (dir.path / "written.bin").string();
  CriteoBinarySource::write(written, words);
  std::ifstream in(written, std::ios::binary);
  const std::string back((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(back, raw_bytes(words));
  EXPECT_THAT(message_of([&] { CriteoBinarySource::write(written, {1, 2, 3}); }),
              HasSubstr("3 values are not a whole number of 40-value records"));
}

TEST(CriteoBinary, BadInputNamesFileRecordAndColumn) {
  TempDir dir;
  CriteoConfig c;
  c.rows = std::vector<int64_t>(26, 1000);
  c.batch_size = 8;
  c.path = (dir.path / "missing.bin").string();
  EXPECT_THAT(message_of([&] { CriteoBinarySource s(c); }),
              HasSubstr("criteo binary: cannot open '" + c.path + "' (no such file)"));

  auto words = record(1, {}, {});
  const auto second = record(0, {}, {});
  words.insert(words.end(), second.begin(), second.end());
  std::string bytes = raw_bytes(words) + std::string(88, '\0');
  c.path = dir.write("truncated.bin", bytes);
  EXPECT_THAT(message_of([&] { CriteoBinarySource s(c); }),
              HasSubstr("criteo binary '" + c.path + "': record 3 is truncated (88 of 160 bytes"));
  c.path = dir.write("empty.bin", "");
  EXPECT_THAT(message_of([&] { CriteoBinarySource s(c); }), HasSubstr("empty.bin' holds no samples"));

  auto read_all = [&](const std::vector<int32_t>& w) {
    c.path = dir.write("data.bin", raw_bytes(w));
    return message_of([&] {
      CriteoBinarySource s(c);
      Batch b;
      while (s.next(b)) {}
    });
  };
  auto bad = record(1, {}, {1005});
  c.wrap = false;
  EXPECT_THAT(read_all(bad), HasSubstr("record 1, column C1: id 1005 is out of range [0, 1000) of table 0"));
  c.wrap = true;
  EXPECT_EQ(read_all(bad), "(no error)");
  auto neg = record(1, {}, {});
  const auto r2 = record(0, {}, {0, 0, 0, 0, -3});
  neg.insert(neg.end(), r2.begin(), r2.end());
  EXPECT_THAT(read_all(neg), HasSubstr("record 2, column C5: id -3 is negative"));
  EXPECT_THAT(read_all(record(5, {}, {})), HasSubstr("record 1, column label: 5 is not a 0/1 label"));
  c.rows[7] = -1;
  EXPECT_THAT(message_of([&] { CriteoBinarySource s(c); }), HasSubstr("table 7 (C8) has -1 rows"));
}

TEST(CriteoBinary, MlperfRowCounts) {
  const auto rows = criteo_mlperf_rows();
  ASSERT_EQ(rows.size(), 26u);
  int64_t total = 0;
  for (int64_t r : rows) total += r;
  EXPECT_EQ(total, 204'184'588);  // REFERENCE.md §1: 204.18M rows
  EXPECT_EQ(rows[0], 40'000'000);
  EXPECT_EQ(rows[25], 36);
}
