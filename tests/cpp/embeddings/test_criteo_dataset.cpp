// embeddings/criteo_dataset.h: the reference's Criteo preprocessing (dictionary order, days,
// sub-sampling, files), the processed file read back (also in the reference's own dtypes), the
// split and its numpy shuffles (expected orders generated with numpy 2.4's legacy RandomState),
// batches, and bad input naming the file and line or member. tests/python/test_criteo.py compares
// everything with a numpy re-implementation of the reference.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/error.h"
#include "core/npz.h"
#include "embeddings/criteo.h"
#include "embeddings/criteo_dataset.h"
#include "tests/cpp/error_text.h"

using namespace strata;
using namespace strata::emb;
using ::testing::HasSubstr;

namespace {

std::filesystem::path temp_dir() {
  static int n = 0;
  auto d = std::filesystem::temp_directory_path() /
           ("strata_criteo_ds_" + std::to_string(::getpid()) + "_" + std::to_string(n++));
  std::filesystem::create_directories(d);
  return d;
}

using testing_util::error_of;

/// A raw sample: label, 13 dense (as text, "" for missing), 26 categories (hex text).
struct Line {
  int label = 0;
  std::vector<std::string> dense = std::vector<std::string>(13, "1");
  std::vector<std::string> cat = std::vector<std::string>(26, "a");
  std::string text() const {
    std::string s = std::to_string(label);
    for (const auto& d : dense) s += "\t" + d;
    for (const auto& c : cat) s += "\t" + c;
    return s + "\n";
  }
};

/// `n` random lines: small vocabularies so values repeat, some empty fields, negative dense.
std::vector<Line> random_lines(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<Line> out(static_cast<std::size_t>(n));
  for (auto& l : out) {
    l.label = static_cast<int>(rng() % 4 == 0);
    for (auto& d : l.dense) {
      const int r = static_cast<int>(rng() % 10);
      d = r == 0 ? "" : std::to_string(static_cast<int>(rng() % 50) - 5);
    }
    for (std::size_t k = 0; k < l.cat.size(); ++k) {
      const uint32_t vocab = 3 + static_cast<uint32_t>(k) * 7;
      std::ostringstream os;
      os << std::hex << (0x9e3779b9u * (rng() % vocab + 1) + static_cast<uint32_t>(k));
      l.cat[k] = rng() % 13 == 0 ? "" : os.str();
    }
  }
  return out;
}

std::string write_lines(const std::filesystem::path& path, const std::vector<Line>& lines) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  for (const auto& l : lines) f << l.text();
  return path.string();
}

/// The reference's preprocessing of kept lines, sequentially (dicts in first-appearance order).
struct Expected {
  std::vector<int32_t> x_cat, x_int, y;
  std::vector<int64_t> counts = std::vector<int64_t>(26, 0);
};
Expected expected_of(const std::vector<Line>& lines, int64_t max_ind_range) {
  Expected e;
  std::vector<std::unordered_map<uint64_t, int32_t>> dicts(26);
  for (const auto& l : lines) {
    e.y.push_back(l.label);
    for (const auto& d : l.dense) e.x_int.push_back(d.empty() ? 0 : std::max(0, std::stoi(d)));
    for (std::size_t k = 0; k < 26; ++k) {
      uint64_t h = l.cat[k].empty() ? 0 : std::stoull(l.cat[k], nullptr, 16);
      if (max_ind_range > 0) h %= static_cast<uint64_t>(max_ind_range);
      const auto [it, fresh] = dicts[k].emplace(h, static_cast<int32_t>(dicts[k].size()));
      e.x_cat.push_back(it->second);
    }
  }
  for (std::size_t k = 0; k < 26; ++k) e.counts[k] = static_cast<int64_t>(dicts[k].size());
  return e;
}

CriteoPreprocessResult preprocess(const std::string& raw, std::size_t chunk_bytes = 1 << 20, int64_t mir = -1,
                                  double rate = 0.0, uint32_t seed = 123) {
  CriteoPreprocessConfig c;
  c.raw_data_file = raw;
  c.processed_data_file = (std::filesystem::path(raw).parent_path() / "processed.npz").string();
  c.chunk_bytes = chunk_bytes;
  c.max_ind_range = mir;
  c.sub_sample_rate = rate;
  RandomStream rng(seed);
  return preprocess_criteo(c, rng);
}

std::vector<int32_t> member(const std::string& path, const char* name) {
  return npy::read_array<int32_t>(npy::NpzReader(path), name).data;
}

}  // namespace

TEST(CriteoPaths, AreTheReferences) {
  const CriteoPaths k = CriteoPaths::of("kaggle", "/data/in/train.v2.txt");
  EXPECT_EQ(k.d_path, "/data/in/");
  EXPECT_EQ(k.d_file, "train");
  EXPECT_EQ(k.day_count, "/data/in/train_day_count.npz");
  EXPECT_EQ(k.fea_count, "/data/in/train_fea_count.npz");
  EXPECT_EQ(k.default_processed, "/data/in/kaggleAdDisplayChallenge_processed.npz");
  EXPECT_EQ(k.days, 7);
  const CriteoPaths t = CriteoPaths::of("terabyte", "./tb/day");
  EXPECT_EQ(t.d_file, "day");
  EXPECT_EQ(t.raw_files.size(), 24u);
  EXPECT_EQ(t.raw_files[23], "./tb/day_23");
  EXPECT_EQ(t.default_processed, "./tb/terabyte_processed.npz");
  EXPECT_THAT(error_of([] { CriteoPaths::of("kaggle", "train.txt"); }),
              HasSubstr("--raw-data-file: 'train.txt' has no directory part; give it as ./train.txt"));
  EXPECT_THAT(error_of([] { CriteoPaths::of("avazu", "/x/train.txt"); }), HasSubstr("--data-set: expected kaggle"));
}

TEST(CriteoPreprocess, DictionariesInFirstAppearanceOrderAcrossChunks) {
  const auto dir = temp_dir();
  const auto lines = random_lines(1000, 1);
  const std::string raw = write_lines(dir / "train.txt", lines);
  for (std::size_t chunk : {std::size_t{1} << 20, std::size_t{700}, std::size_t{1}}) {
    for (int64_t mir : {int64_t{-1}, int64_t{7}}) {
      const auto r = preprocess(raw, chunk, mir);
      const Expected e = expected_of(lines, mir);
      EXPECT_EQ(member(r.processed_file, "X_cat"), e.x_cat) << "chunk " << chunk << " mir " << mir;
      EXPECT_EQ(member(r.processed_file, "X_int"), e.x_int);
      EXPECT_EQ(member(r.processed_file, "y"), e.y);
      EXPECT_EQ(r.counts, e.counts);
      EXPECT_EQ(npy::read_integers(npy::NpzReader(r.processed_file), "counts"), e.counts);
      EXPECT_EQ(npy::read_integers(npy::NpzReader((dir / "train_fea_count.npz").string()), "counts"), e.counts);
    }
  }
  std::filesystem::remove_all(dir);
}

TEST(CriteoPreprocess, KaggleDaysAndTerabyteFiles) {
  const auto dir = temp_dir();
  // 10 lines, the last without a newline: divmod(10, 7) gives days of 2, 2, 2, 1, 1, 1, 1.
  auto lines = random_lines(10, 2);
  std::string raw = write_lines(dir / "train.txt", lines);
  std::filesystem::resize_file(raw, std::filesystem::file_size(raw) - 1);
  auto r = preprocess(raw);
  EXPECT_EQ(r.total_per_file, (std::vector<int64_t>{2, 2, 2, 1, 1, 1, 1}));
  EXPECT_EQ(npy::read_integers(npy::NpzReader((dir / "train_day_count.npz").string()), "total_per_file"),
            r.total_per_file);
  // Terabyte: one day per file day_0 .. day_23, some empty.
  const auto all = random_lines(30, 3);
  std::size_t at = 0;
  for (int d = 0; d < 24; ++d) {
    const std::size_t n = d % 3 == 0 ? 0 : (d < 12 ? 2 : 1);
    write_lines(dir / ("day_" + std::to_string(d)), std::vector<Line>(all.begin() + at, all.begin() + at + n));
    at += n;
  }
  CriteoPreprocessConfig c;
  c.data_set = "terabyte";
  c.raw_data_file = (dir / "day").string();
  RandomStream rng(1);
  r = preprocess_criteo(c, rng);
  EXPECT_EQ(r.processed_file, (dir / "terabyte_processed.npz").string());
  EXPECT_EQ(r.total_per_file.size(), 24u);
  EXPECT_EQ(r.total_per_file[0], 0);
  EXPECT_EQ(r.total_per_file[1], 2);
  EXPECT_EQ(r.total_per_file[13], 1);
  EXPECT_EQ(member(r.processed_file, "X_cat"), expected_of({all.begin(), all.begin() + at}, -1).x_cat);
  std::filesystem::remove_all(dir);
}

TEST(CriteoPreprocess, SubSamplingDropsLabelZeroLinesWithNumpysDraws) {
  const auto dir = temp_dir();
  // numpy: np.random.seed(5); np.nonzero(np.random.uniform(0, 1, 20) < 0.5) ->
  // [0, 2, 4, 8, 9, 10, 12, 13, 15, 16, 17]; lines there with label 0 are dropped.
  const std::vector<int> below = {0, 2, 4, 8, 9, 10, 12, 13, 15, 16, 17};
  auto lines = random_lines(20, 4);
  for (int i = 0; i < 20; ++i) lines[static_cast<std::size_t>(i)].label = i % 3 == 0;
  const std::string raw = write_lines(dir / "train.txt", lines);
  const auto r = preprocess(raw, 50, -1, 0.5, 5);
  std::vector<Line> kept;
  for (int i = 0; i < 20; ++i)
    if (lines[static_cast<std::size_t>(i)].label == 1 || std::find(below.begin(), below.end(), i) == below.end())
      kept.push_back(lines[static_cast<std::size_t>(i)]);
  EXPECT_EQ(r.rows, static_cast<int64_t>(kept.size()));
  EXPECT_EQ(r.uniform_draws, 20u);
  const Expected e = expected_of(kept, -1);
  EXPECT_EQ(member(r.processed_file, "X_cat"), e.x_cat);
  EXPECT_EQ(member(r.processed_file, "y"), e.y);
  int64_t sum = 0;
  for (int64_t n : r.total_per_file) sum += n;
  EXPECT_EQ(sum, r.rows);
  // Days: lines 0-2, 3-5, 6-8, 9-11, 12-14, 15-17, 18-19; kept per day as the reference counts.
  std::vector<int64_t> per_day(7, 0);
  const int64_t starts[] = {0, 3, 6, 9, 12, 15, 18, 20};
  for (int i = 0; i < 20; ++i)
    if (lines[static_cast<std::size_t>(i)].label == 1 || std::find(below.begin(), below.end(), i) == below.end())
      for (int d = 0; d < 7; ++d)
        if (i >= starts[d] && i < starts[d + 1]) ++per_day[static_cast<std::size_t>(d)];
  EXPECT_EQ(r.total_per_file, per_day);
  std::filesystem::remove_all(dir);
}

TEST(CriteoPreprocess, BadLinesNameFileLineAndColumn) {
  const auto dir = temp_dir();
  auto check = [&](const std::function<void(std::vector<Line>&, std::string&)>& spoil, const std::string& want) {
    auto lines = random_lines(30, 5);
    std::string tail;
    spoil(lines, tail);
    const std::string raw = write_lines(dir / "train.txt", lines);
    if (!tail.empty()) std::ofstream(raw, std::ios::app) << tail;
    const std::string e = error_of([&] { preprocess(raw, 64); });
    EXPECT_THAT(e, HasSubstr(raw));
    EXPECT_THAT(e, HasSubstr(want));
  };
  check([](auto& l, auto&) { l[6].label = 2; }, "line 7, column label: '2' is not a 0/1 label");
  check([](auto& l, auto&) { l[3].label = -1; }, "line 4, column label: '-1' is not a 0/1 label");
  check([](auto& l, auto&) { l[11].cat[2] = "12g4"; }, "line 12, column C3: '12g4' is not a hexadecimal category");
  check([](auto& l, auto&) { l[0].cat[25] = "11112222333344445"; }, "line 1, column C26");
  check([](auto& l, auto&) { l[20].dense[4] = "1.5"; }, "line 21, column I5: '1.5' is not an integer");
  check([](auto& l, auto&) { l[20].dense[0] = "-"; }, "line 21, column I1: '-' is not an integer");
  check([](auto& l, auto&) { l[2].dense[12] = "3000000000"; }, "line 3, column I13: '3000000000' does not fit int32");
  check([](auto& l, auto&) { l[9].cat.pop_back(); },
        "line 10: expected 40 tab-separated fields (label, I1..I13, "
        "C1..C26), found 39");
  check([](auto& l, auto&) { l[9].cat.push_back("ab"); }, "line 10: expected 40 tab-separated fields");
  check([](auto&, auto& tail) { tail = "\n"; }, "line 31: expected 40 tab-separated fields");
  check([](auto& l, auto&) { l[4].dense.clear(), l[4].cat.clear(); },
        "line 5: expected 40 tab-separated fields (label, I1..I13, C1..C26), found 1");
  // An empty raw file holds no samples.
  std::ofstream(dir / "empty.txt").close();
  EXPECT_THAT(error_of([&] { preprocess((dir / "empty.txt").string()); }), HasSubstr("holds no samples"));
  std::filesystem::remove_all(dir);
}

TEST(CriteoSplit, SizesAndNumpyShuffles) {
  // Days of 2, 2, 2, 1, 1, 1, 3: train is days 0..5 (9), test the larger half of day 6.
  const std::vector<int64_t> o = {0, 2, 4, 6, 7, 8, 9, 12};
  RandomStream rng(123);
  EXPECT_EQ(criteo_split_indices(o, CriteoSplit::Train, "none", rng),
            (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8}));
  EXPECT_EQ(criteo_split_indices(o, CriteoSplit::Test, "total", rng), (std::vector<int64_t>{9, 10}));
  EXPECT_EQ(criteo_split_indices(o, CriteoSplit::Val, "total", rng), (std::vector<int64_t>{11}));
  // numpy: np.random.seed(123); np.random.permutation(10) -> 4 0 7 5 8 3 1 6 9 2.
  const std::vector<int64_t> ten = {0, 10};
  rng.seed(123);
  EXPECT_EQ(criteo_split_indices(std::vector<int64_t>{0, 10, 10}, CriteoSplit::Train, "total", rng),
            (std::vector<int64_t>{4, 0, 7, 5, 8, 3, 1, 6, 9, 2}));
  // np.random.seed(7); np.random.permutation(np.arange(3, 20)).
  std::vector<int64_t> v(17);
  std::iota(v.begin(), v.end(), 3);
  rng.seed(7);
  numpy_shuffle(v, rng);
  EXPECT_EQ(v, (std::vector<int64_t>{16, 14, 19, 11, 8, 5, 4, 3, 17, 13, 10, 15, 6, 9, 12, 7, 18}));
  // np.random.seed(11); per-day permutations of [0..3], [4..6], [7, 8] in order.
  rng.seed(11);
  EXPECT_EQ(criteo_split_indices(std::vector<int64_t>{0, 4, 7, 9, 10}, CriteoSplit::Train, "day", rng),
            (std::vector<int64_t>{2, 3, 0, 1, 4, 6, 5, 7, 8}));
  // np.random.seed(99); permutation(70000)[:8], then a second permutation(70000)[-1] == 40234.
  rng.seed(99);
  const auto big = criteo_split_indices(std::vector<int64_t>{0, 70000, 70000}, CriteoSplit::Train, "total", rng);
  EXPECT_EQ(std::vector<int64_t>(big.begin(), big.begin() + 8),
            (std::vector<int64_t>{5406, 53858, 30647, 36944, 24742, 55364, 65886, 34628}));
  EXPECT_EQ(criteo_split_indices(std::vector<int64_t>{0, 70000, 70000}, CriteoSplit::Train, "total", rng).back(),
            40234);
  // Split none under total: the inverse of the permutation (the reference scatters X[perm] = X).
  rng.seed(123);
  const auto none = criteo_split_indices(std::vector<int64_t>{0, 4, 10}, CriteoSplit::None, "total", rng);
  const std::vector<int64_t> perm = {4, 0, 7, 5, 8, 3, 1, 6, 9, 2};
  for (std::size_t k = 0; k < perm.size(); ++k)
    EXPECT_EQ(none[static_cast<std::size_t>(perm[k])], static_cast<int64_t>(k));
  EXPECT_THAT(error_of([&] { criteo_split_indices(o, CriteoSplit::Train, "shuffle", rng); }),
              HasSubstr("--data-randomize: expected total, day or none"));
  EXPECT_THAT(error_of([] { parse_criteo_split("dev"); }), HasSubstr("expected train, test, val or none"));
  (void)ten;
}

TEST(CriteoDataset, BatchesOfASplitAfterSubSamplingDraws) {
  const auto dir = temp_dir();
  const auto lines = random_lines(70, 6);
  write_lines(dir / "train.txt", lines);
  CriteoDatasetConfig c;
  c.raw_data_file = (dir / "train.txt").string();
  c.seed = 5;
  c.sub_sample_rate = 0.25;
  const CriteoDataset ds(c);
  // The train order: seed, the preprocessing's 70 draws, then the permutation.
  RandomStream rng(5);
  for (int i = 0; i < 70; ++i) rng.uniform();
  const auto want = criteo_split_indices(ds.data().day_offsets(), CriteoSplit::Train, "total", rng);
  EXPECT_EQ(ds.indices(CriteoSplit::Train), want);
  // A second data set in this process reuses the file and the same order.
  EXPECT_EQ(CriteoDataset(c).indices(CriteoSplit::Train), want);
  CriteoSourceConfig s;
  s.rows = ds.counts();
  s.batch_size = 8;
  auto src = ds.source(CriteoSplit::Train, s);
  EXPECT_EQ(src->num_batches(), (static_cast<int64_t>(want.size()) + 7) / 8);
  Batch b;
  ASSERT_TRUE(src->next(b));
  const CriteoData& d = ds.data();
  for (int64_t j = 0; j < 8; ++j) {
    const int64_t i = want[static_cast<std::size_t>(j)];
    EXPECT_EQ(b.targets[static_cast<std::size_t>(j)], static_cast<float>(d.label(i)));
    EXPECT_EQ(b.dense[static_cast<std::size_t>(j * 13 + 3)], std::log(static_cast<float>(d.dense(i, 3)) + 1.0f));
    for (int k = 0; k < 26; ++k) {
      EXPECT_EQ(b.tables[static_cast<std::size_t>(k)].indices[static_cast<std::size_t>(j)], d.category(i, k));
      EXPECT_EQ(b.tables[static_cast<std::size_t>(k)].offsets[static_cast<std::size_t>(j + 1)], j + 1);
    }
  }
  // Ids beyond the rows: an error naming the file, sample and table, or wrapped.
  s.rows.assign(26, 1);
  src = ds.source(CriteoSplit::Train, s);
  EXPECT_THAT(error_of([&] {
                while (src->next(b)) {}
              }),
              HasSubstr("is outside the table's 1 rows"));
  s.wrap = true;
  src = ds.source(CriteoSplit::Train, s);
  while (src->next(b))
    for (const auto& t : b.tables) EXPECT_EQ(t.indices[0], 0);
  std::filesystem::remove_all(dir);
}

TEST(CriteoData, ReadsTheReferencesDtypesAndRefusesBadFiles) {
  const auto dir = temp_dir();
  const int64_t n = 9;
  std::vector<double> cat_f(n * 26);  // Fortran order [n, 26], as the reference's X_cat
  for (int64_t k = 0; k < 26; ++k)
    for (int64_t i = 0; i < n; ++i) cat_f[static_cast<std::size_t>(k * n + i)] = static_cast<double>(i * 100 + k);
  std::vector<int32_t> x_int(n * 13, 3), y(n, 1), counts(26, 1000);
  std::vector<int64_t> days = {2, 1, 1, 1, 1, 1, 2};
  const std::string p = (dir / "p.npz").string(), dc = (dir / "day_count.npz").string();
  auto write = [&](const std::vector<int64_t>& xint_shape, bool fortran_cat, bool with_y) {
    npy::NpzWriter w(p, true);
    w.add("X_cat", npy::Dtype::F8, {n, 26}, cat_f.data(), fortran_cat);
    w.add<int32_t>("X_int", xint_shape, x_int.data());
    if (with_y) w.add<int32_t>("y", {n}, y.data());
    w.add<int32_t>("counts", {26}, counts.data());
    w.close();
  };
  npy::NpzWriter dw(dc, true);
  dw.add<int64_t>("total_per_file", {7}, days.data());
  dw.close();
  // X_cat as the reference writes it: float64 in Fortran order ([i, k] at k * n + i).
  write({n, 13}, true, true);
  auto d = CriteoData::load(p, dc, 7, false);
  EXPECT_EQ(d->rows(), n);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t k = 0; k < 26; ++k) ASSERT_EQ(d->category(i, k), i * 100 + k);
  EXPECT_EQ(d->dense(4, 12), 3);
  EXPECT_EQ(d->label(8), 1);
  EXPECT_EQ(d->counts(), std::vector<int64_t>(26, 1000));
  EXPECT_EQ(d->day_offsets(), (std::vector<int64_t>{0, 2, 3, 4, 5, 6, 7, 9}));
  // The same values in C order.
  write({n, 13}, false, true);
  d = CriteoData::load(p, dc, 7, false);
  EXPECT_EQ(d->category(1, 2), static_cast<int32_t>(cat_f[1 * 26 + 2]));
  // A flipped byte in a stored int32 member (X_int's data starts at byte 2206): the CRC names it.
  {
    npy::NpzWriter w(p, false);
    w.add<double>("X_cat", {n, 26}, cat_f.data());
    w.add<int32_t>("X_int", {n, 13}, x_int.data());
    w.add<int32_t>("y", {n}, y.data());
    w.add<int32_t>("counts", {26}, counts.data());
    w.close();
    std::fstream f(p, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(2210);
    f.put('\x7f');
  }
  EXPECT_THAT(error_of([&] { CriteoData::load(p, dc, 7, false); }), HasSubstr("member 'X_int.npy': CRC-32 mismatch"));
  // Bad shapes, missing members and day counts that do not add up name the file and member.
  write({n, 12}, false, true);
  EXPECT_THAT(error_of([&] { CriteoData::load(p, dc, 7, false); }),
              HasSubstr("member 'X_int': shape (9, 12), expected (9, 13)"));
  write({n, 13}, false, false);
  EXPECT_THAT(error_of([&] { CriteoData::load(p, dc, 7, false); }), HasSubstr("member 'y' is missing"));
  write({n, 13}, false, true);
  EXPECT_THAT(error_of([&] { CriteoData::load(p, dc, 24, false); }),
              HasSubstr("7 days of 9 samples, but the data set has 24 days"));
  // A label other than 0 or 1 (the reference trains on label 5 with loss -226.9) is refused when
  // its batch is read, naming the file and the sample.
  y[6] = 5;
  write({n, 13}, false, true);
  d = CriteoData::load(p, dc, 7, false);
  std::vector<int64_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  CriteoSourceConfig sc;
  sc.rows.assign(26, 3000);
  sc.batch_size = 4;
  CriteoDatasetSource source(d, order, sc, "labels");
  Batch b;
  EXPECT_TRUE(source.next(b));
  EXPECT_THAT(error_of([&] { source.next(b); }), HasSubstr("member 'y': sample 6 has label 5; labels must be 0 or 1"));
  y[6] = 1;
  cat_f[5] = 2.5;
  write({n, 13}, false, true);
  EXPECT_THAT(error_of([&] { CriteoData::load(p, dc, 7, false); }), HasSubstr("(2.5) is not an int32 integer"));
  std::filesystem::remove_all(dir);
}

TEST(CriteoData, MemoryMapsStoredMembers) {
  const auto dir = temp_dir();
  const auto lines = random_lines(50, 7);
  write_lines(dir / "train.txt", lines);
  CriteoDatasetConfig c;
  c.raw_data_file = (dir / "train.txt").string();
  c.memory_map = true;
  const CriteoDataset mapped(c);
  EXPECT_TRUE(mapped.data().mapped());
  c.memory_map = false;
  const CriteoDataset read(c);
  EXPECT_FALSE(read.data().mapped());
  const Expected e = expected_of(lines, -1);
  for (int64_t i = 0; i < 50; ++i)
    for (int64_t k = 0; k < 26; ++k) {
      ASSERT_EQ(mapped.data().category(i, k), e.x_cat[static_cast<std::size_t>(i * 26 + k)]);
      ASSERT_EQ(read.data().category(i, k), e.x_cat[static_cast<std::size_t>(i * 26 + k)]);
    }
  std::filesystem::remove_all(dir);
}
