// core/npz.h: .npy headers, .npz round trips (stored, deflated, Zip64), and bad files, whose
// errors name the file, the member and the byte offset. tests/python/test_criteo.py checks the
// files against numpy itself.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <numeric>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/npz.h"
#include "tests/cpp/error_text.h"

using namespace strata;
using namespace strata::npy;
using ::testing::AnyOf;
using ::testing::HasSubstr;

namespace {

std::filesystem::path temp_dir() {
  auto d = std::filesystem::temp_directory_path() / ("strata_npz_" + std::to_string(::getpid()));
  std::filesystem::create_directories(d);
  return d;
}

using testing_util::error_of;

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), {}};
}

void spit(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << bytes;
}

/// An .npz with an int32 [rows, 3] "a", a float64 [rows] "b" and a small int64 "c".
std::string write_sample(const std::string& path, bool compress, int64_t rows, bool zip64 = false) {
  std::vector<int32_t> a(static_cast<std::size_t>(rows * 3));
  std::iota(a.begin(), a.end(), -5);
  std::vector<double> b(static_cast<std::size_t>(rows));
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = 0.5 * static_cast<double>(i);
  const std::vector<int64_t> c = {int64_t{1} << 40, -3, 7};
  NpzWriter w(path, compress);
  if (zip64) w.force_zip64();
  w.add<int32_t>("a", {rows, 3}, a.data());
  w.add<double>("b", {rows}, b.data());
  w.add<int64_t>("c", {3}, c.data());
  w.close();
  return path;
}

void expect_sample(const std::string& path, int64_t rows) {
  const NpzReader npz(path);
  EXPECT_EQ(npz.names(), (std::vector<std::string>{"a", "b", "c"}));
  const auto a = read_array<int32_t>(npz, "a");
  EXPECT_EQ(a.header.shape, (std::vector<int64_t>{rows, 3}));
  ASSERT_EQ(a.data.size(), static_cast<std::size_t>(rows * 3));
  for (std::size_t i = 0; i < a.data.size(); ++i) ASSERT_EQ(a.data[i], static_cast<int32_t>(i) - 5);
  const auto b = read_array<double>(npz, "b");
  for (std::size_t i = 0; i < b.data.size(); ++i) ASSERT_EQ(b.data[i], 0.5 * static_cast<double>(i));
  EXPECT_EQ(read_array<int64_t>(npz, "c").data, (std::vector<int64_t>{int64_t{1} << 40, -3, 7}));
  EXPECT_EQ(read_integers(npz, "c"), (std::vector<int64_t>{int64_t{1} << 40, -3, 7}));
}

}  // namespace

TEST(Npy, HeaderIsNumpysAndPadsTo64) {
  const std::string h = make_header(Dtype::I4, {3, 26});
  EXPECT_EQ(h.size() % 64, 0u);
  EXPECT_EQ(h.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
  EXPECT_THAT(h, HasSubstr("{'descr': '<i4', 'fortran_order': False, 'shape': (3, 26), }"));
  EXPECT_EQ(h.back(), '\n');
  EXPECT_THAT(make_header(Dtype::F8, {5}), HasSubstr("'shape': (5,), }"));
  EXPECT_THAT(make_header(Dtype::B1, {}), HasSubstr("'descr': '|b1'"));
  EXPECT_THAT(make_header(Dtype::B1, {}), HasSubstr("'shape': ()"));
}

TEST(Npz, RoundTripsStoredDeflatedAndZip64) {
  const auto dir = temp_dir();
  for (bool compress : {false, true})
    for (bool zip64 : {false, true}) {
      const std::string path = (dir / "rt.npz").string();
      // 1M rows deflated: the int32 member spans three 4 MiB deflate blocks.
      const int64_t rows = compress && !zip64 ? 1000000 : 1000;
      write_sample(path, compress, rows, zip64);
      expect_sample(path, rows);
      const NpzReader npz(path);
      auto m = npz.open("a");
      EXPECT_EQ(m->data_file_offset() >= 0, !compress);
    }
  std::filesystem::remove_all(dir);
}

TEST(Npz, ReadIntegersConvertsEveryDtype) {
  const auto dir = temp_dir();
  const std::string path = (dir / "ints.npz").string();
  const std::vector<float> f = {1, 2, 3};
  const std::vector<uint8_t> u = {0, 255};
  const std::vector<double> bad = {1.5};
  NpzWriter w(path, true);
  w.add<float>("f", {3}, f.data());
  w.add<uint8_t>("u", {2}, u.data());
  w.add<double>("bad", {1}, bad.data());
  w.close();
  const NpzReader npz(path);
  EXPECT_EQ(read_integers(npz, "f"), (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(read_integers(npz, "u"), (std::vector<int64_t>{0, 255}));
  EXPECT_THAT(error_of([&] { read_integers(npz, "bad"); }), HasSubstr("member 'bad.npy': element 0 is 1.5"));
  EXPECT_THAT(error_of([&] { read_array<int32_t>(npz, "f"); }), HasSubstr("dtype <f4, expected <i4"));
  std::filesystem::remove_all(dir);
}

TEST(Npz, NpyFilesRoundTrip) {
  const auto dir = temp_dir();
  const std::string path = (dir / "x.npy").string();
  const std::vector<int64_t> v = {4, 5, 6, 7};
  write_npy(path, Dtype::I8, {2, 2}, v.data());
  auto m = open_npy(path);
  EXPECT_EQ(m->header().shape, (std::vector<int64_t>{2, 2}));
  std::vector<int64_t> got(4);
  m->read(got.data(), 32);
  m->finish();
  EXPECT_EQ(got, v);
  std::filesystem::remove_all(dir);
}

TEST(Npz, BadHeadersNameTheMemberAndByte) {
  const auto dir = temp_dir();
  const std::string path = (dir / "h.npz").string();
  // Write a member, then patch bytes of its header in place.
  const std::vector<int32_t> v = {1, 2};
  auto patched = [&](const std::string& from, const std::string& to) {
    NpzWriter w(path, false);
    w.add<int32_t>("v", {2}, v.data());
    w.close();
    std::string file = slurp(path);
    const std::size_t at = file.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    file.replace(at, from.size(), to);
    spit(path, file);
    return error_of([&] { read_array<int32_t>(NpzReader(path), "v"); });
  };
  EXPECT_THAT(patched("'<i4'", "'>i4'"), HasSubstr("dtype '>i4' is not supported"));
  EXPECT_THAT(patched("'<i4'", "'<u4'"), HasSubstr("member 'v.npy': bad .npy header at byte"));
  EXPECT_THAT(patched("False", "Maybe"), HasSubstr("fortran_order must be True or False"));
  EXPECT_THAT(patched("(2,)", "(x,)"), HasSubstr("expected a non-negative integer in the shape"));
  EXPECT_THAT(patched("(2,)", "(3,)"), HasSubstr("but its header describes"));
  EXPECT_THAT(patched("\x93NUMPY", "\x93NUMPz"), HasSubstr("member 'v.npy': not .npy data (bad magic at byte 0"));
  EXPECT_THAT(patched("'descr'", "'dtype'"), HasSubstr("unexpected key 'dtype'"));
  // Fortran order parses, but read_array refuses it for 2-D arrays.
  {
    NpzWriter w(path, false);
    w.add<int32_t>("m", {1, 2}, v.data());
    w.close();
    std::string file = slurp(path);
    file.replace(file.find("False"), 5, "True ");
    spit(path, file);
    const NpzReader npz(path);
    EXPECT_TRUE(npz.open("m")->header().fortran_order);
    EXPECT_THAT(error_of([&] { read_array<int32_t>(npz, "m"); }), HasSubstr("Fortran-order arrays are not supported"));
  }
  std::filesystem::remove_all(dir);
}

TEST(Npz, TruncatedFlippedAndMissingNameFileMemberAndOffset) {
  const auto dir = temp_dir();
  const std::string path = (dir / "t.npz").string();
  const std::string whole = slurp(write_sample(path, true, 20000));
  // Cut before the end-of-directory record: not a zip any more.
  spit(path, whole.substr(0, whole.size() - 10));
  EXPECT_THAT(error_of([&] { NpzReader r(path); }), HasSubstr("not a zip archive (no end-of-central-directory record"));
  EXPECT_THAT(error_of([&] { NpzReader r(path); }), HasSubstr(path));
  // Cut inside the first member, keeping the directory (as a broken copy would): its data runs
  // past the end of the file.
  const std::string tail = whole.substr(whole.size() - 300);
  spit(path, whole.substr(0, 200) + tail);
  {
    const std::string e = error_of([&] { NpzReader(path).open("a")->finish(); });
    EXPECT_THAT(e, AnyOf(HasSubstr("does not fit before byte"), HasSubstr("truncated")));
  }
  // One flipped bit in the deflate data of "a": corrupt data or a CRC mismatch, naming the member.
  std::string flipped = whole;
  flipped[400] = static_cast<char>(flipped[400] ^ 0x10);
  spit(path, flipped);
  {
    const std::string e = error_of([&] { read_array<int32_t>(NpzReader(path), "a"); });
    EXPECT_THAT(e, HasSubstr("member 'a.npy'"));
    EXPECT_THAT(e, AnyOf(HasSubstr("CRC-32 mismatch"), HasSubstr("corrupt deflate data near file byte"),
                         HasSubstr("does not end"), HasSubstr("holds more than")));
  }
  // A flipped bit in stored data: the CRC catches it.
  write_sample(path, false, 100);
  std::string stored = slurp(path);
  stored[200] = static_cast<char>(stored[200] ^ 1);
  spit(path, stored);
  EXPECT_THAT(error_of([&] { read_array<int32_t>(NpzReader(path), "a"); }),
              HasSubstr("member 'a.npy': CRC-32 mismatch"));
  // A missing member lists what is there.
  write_sample(path, true, 10);
  EXPECT_THAT(error_of([&] { NpzReader(path).open("X_cat"); }),
              HasSubstr("member 'X_cat' is missing (it holds: a, b, c)"));
  // Not a file at all.
  EXPECT_THAT(error_of([&] { NpzReader r((dir / "nope.npz").string()); }), HasSubstr("no such file"));
  std::filesystem::remove_all(dir);
}
