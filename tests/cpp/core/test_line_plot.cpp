// PNG line plots (core/line_plot.h): the PNG decodes (chunk CRCs, IHDR, inflated rows equal the
// image), the rendering puts the series where their values say, and bad input or an unwritable
// path raise errors naming it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <zlib.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <iterator>
#include <string>
#include <vector>

#include "core/file.h"
#include "core/line_plot.h"
#include "tests/cpp/error_text.h"

using namespace strata;
using ::testing::HasSubstr;
namespace fs = std::filesystem;

namespace {

using strata::testing_util::error_of;

uint32_t be32(const std::string& s, std::size_t at) {
  uint32_t v = 0;
  for (std::size_t i = 0; i < 4; ++i) v = (v << 8) | static_cast<uint8_t>(s[at + i]);
  return v;
}

struct Chunk {
  std::string type, data;
};

/// Splits a PNG into its chunks, checking the signature and every CRC.
std::vector<Chunk> chunks_of(const std::string& png) {
  EXPECT_EQ(png.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  std::vector<Chunk> out;
  std::size_t at = 8;
  while (at + 12 <= png.size()) {
    const uint32_t len = be32(png, at);
    Chunk c{png.substr(at + 4, 4), png.substr(at + 8, len)};
    const auto* bytes = reinterpret_cast<const Bytef*>(png.data() + at + 4);
    EXPECT_EQ(be32(png, at + 8 + len), static_cast<uint32_t>(crc32(0L, bytes, len + 4))) << "chunk " << c.type;
    out.push_back(std::move(c));
    at += 12 + len;
  }
  EXPECT_EQ(at, png.size());
  return out;
}

/// Decodes a PNG written by encode_png (one IDAT, filter 0 rows) back into an image.
RgbImage decode(const std::string& png) {
  const auto chunks = chunks_of(png);
  RgbImage im;
  if (chunks.size() != 3) {
    ADD_FAILURE() << chunks.size() << " chunks";
    return im;
  }
  EXPECT_EQ(chunks[0].type, "IHDR");
  EXPECT_EQ(chunks[1].type, "IDAT");
  EXPECT_EQ(chunks[2].type, "IEND");
  im.width = static_cast<int>(be32(chunks[0].data, 0));
  im.height = static_cast<int>(be32(chunks[0].data, 4));
  EXPECT_EQ(chunks[0].data.substr(8), std::string("\x08\x02\x00\x00\x00", 5));
  const std::size_t stride = static_cast<std::size_t>(im.width) * 3;
  std::string raw((stride + 1) * im.height, '\0');
  uLongf size = raw.size();
  EXPECT_EQ(uncompress(reinterpret_cast<Bytef*>(raw.data()), &size,
                       reinterpret_cast<const Bytef*>(chunks[1].data.data()), chunks[1].data.size()),
            Z_OK);
  EXPECT_EQ(size, raw.size());
  for (int y = 0; y < im.height; ++y) {
    EXPECT_EQ(raw[y * (stride + 1)], '\0') << "row " << y;
    im.pixels.insert(im.pixels.end(), raw.begin() + y * (stride + 1) + 1, raw.begin() + (y + 1) * (stride + 1));
  }
  return im;
}

bool is(const RgbImage& im, int x, int y, uint8_t r, uint8_t g, uint8_t b) {
  const uint8_t* p = &im.pixels[(static_cast<std::size_t>(y) * im.width + x) * 3];
  return p[0] == r && p[1] == g && p[2] == b;
}

/// Mean row of the pixels of the first series' colour (blue) in columns [x0, x1); -1 if none.
double mean_blue_row(const RgbImage& im, int x0, int x1, int y0, int y1) {
  double sum = 0, n = 0;
  for (int y = y0; y < y1; ++y)
    for (int x = x0; x < x1; ++x)
      if (is(im, x, y, 31, 119, 180)) sum += y, n += 1;
  return n > 0 ? sum / n : -1;
}

std::vector<PlotPanel> rising_loss() {
  PlotSeries s{"loss", {}, {}};
  for (int i = 0; i <= 100; ++i) s.x.push_back(i), s.y.push_back(0.5 + 0.002 * i);
  return {{"train loss", "iteration", {s}}};
}

struct TempDir {
  fs::path path = fs::temp_directory_path() /
                  ("strata_line_plot_" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
  TempDir() {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
};

}  // namespace

TEST(EncodePng, RoundTripsThroughZlibWithValidCrcs) {
  RgbImage im{3, 2, {}};
  for (int i = 0; i < 18; ++i) im.pixels.push_back(static_cast<uint8_t>(i * 13));
  const RgbImage back = decode(encode_png(im));
  EXPECT_EQ(back.width, 3);
  EXPECT_EQ(back.height, 2);
  EXPECT_EQ(back.pixels, im.pixels);
}

TEST(EncodePng, RefusesAnImageWhosePixelsDoNotMatchItsSize) {
  EXPECT_THAT(error_of([] { encode_png(RgbImage{4, 4, std::vector<uint8_t>(10)}); }),
              HasSubstr("a 4 x 4 RGB image needs 48 bytes, got 10"));
}

TEST(LinePlot, ImageHasTheLayoutSizeAndAWhiteBackground) {
  const auto panels = rising_loss();
  const RgbImage im = render_line_plot("strata", panels, {640, 300});
  EXPECT_EQ(im.width, 640);
  EXPECT_EQ(im.height, 40 + 300);
  EXPECT_TRUE(is(im, 0, 0, 255, 255, 255));
  EXPECT_TRUE(is(im, 639, 339, 255, 255, 255));
  bool title_ink = false;  // the title is drawn in black in the top band
  for (int x = 0; x < 640; ++x)
    for (int y = 0; y < 40; ++y) title_ink |= is(im, x, y, 0, 0, 0);
  EXPECT_TRUE(title_ink);
}

TEST(LinePlot, ARisingSeriesIsDrawnFromBottomLeftToTopRight) {
  const auto panels = rising_loss();
  const RgbImage im = render_line_plot("", panels, {800, 320});
  // The plot area is x in [110, 780]; the legend sits in its top-right corner, so compare the
  // series' pixels in the left and the middle of the area.
  const double left = mean_blue_row(im, 115, 200, 70, 300);
  const double middle = mean_blue_row(im, 400, 480, 70, 300);
  ASSERT_GT(left, 0);
  ASSERT_GT(middle, 0);
  EXPECT_GT(left, middle + 50);  // rows grow downwards
}

TEST(LinePlot, TwoPanelsStackAndEachSeriesGetsItsColour) {
  TrainingCurves c;
  c.iterations = {1, 2, 3};
  c.loss = {0.69, 0.6, 0.55};
  c.test_iterations = {3};
  c.accuracy = {0.7};
  c.auc = {0.75};
  const auto panels = training_plot_panels(c);
  ASSERT_EQ(panels.size(), 2u);
  EXPECT_EQ(panels[1].series[1].name, "AUC");
  const RgbImage im = render_line_plot("run", panels, {800, 300});
  EXPECT_EQ(im.height, 40 + 2 * 300);
  bool orange_in_second = false, orange_in_first = false;
  for (int y = 40; y < im.height; ++y)
    for (int x = 0; x < im.width; ++x)
      if (is(im, x, y, 255, 127, 14)) (y >= 340 ? orange_in_second : orange_in_first) = true;
  EXPECT_TRUE(orange_in_second);  // AUC, the second series (a lone point, and its legend swatch)
  EXPECT_FALSE(orange_in_first);
  EXPECT_EQ(training_plot_panels(TrainingCurves{{1}, {0.5}, {}, {}, {}}).size(), 1u);
}

TEST(LinePlot, NonFiniteValuesAndEmptySeriesDoNotBreakTheAxes) {
  std::vector<PlotPanel> panels = {{"odd", "x", {{"nan", {0, 1, 2}, {NAN, INFINITY, 1.0}}, {"empty", {}, {}}}}};
  const RgbImage im = render_line_plot("t", panels);
  EXPECT_EQ(im.width, 800);
  panels[0].series.clear();
  EXPECT_EQ(render_line_plot("t", panels).height, 40 + 320);
}

TEST(LinePlot, BadInputIsNamed) {
  std::vector<PlotPanel> panels = {{"loss", "it", {{"train", {1, 2, 3}, {1, 2}}}}};
  EXPECT_THAT(error_of([&] { render_line_plot("t", panels); }),
              HasSubstr("line plot: panel 0 ('loss'), series 'train': x has 3 values but y has 2"));
  EXPECT_THAT(error_of([] { render_line_plot("t", {}); }), HasSubstr("line plot: no panels"));
  EXPECT_THAT(error_of([] { render_line_plot("t", rising_loss(), {100, 50}); }), HasSubstr("at least 200 x 120"));
}

TEST(WriteLinePlotPng, WritesADecodablePng) {
  TempDir dir;
  const std::string path = (dir.path / "curves.png").string();
  write_line_plot_png(path, "strata-dlrm", rising_loss(), {400, 200});
  const RgbImage im = decode(read_file(path, "test"));
  EXPECT_EQ(im.width, 400);
  EXPECT_EQ(im.height, 240);
  EXPECT_EQ(std::distance(fs::directory_iterator(dir.path), fs::directory_iterator()), 1);  // no temporary left
}

TEST(WriteLinePlotPng, AnUnwritablePathRaisesNamingIt) {
  TempDir dir;
  const std::string missing = (dir.path / "no/such/dir/curves.png").string();
  EXPECT_THAT(
      error_of([&] { write_line_plot_png(missing, "t", rising_loss()); }),
      ::testing::AllOf(HasSubstr("line plot: cannot write '" + missing + "'"), HasSubstr("No such file or directory")));
  const std::string taken = (dir.path / "taken").string();
  fs::create_directories(dir.path / "taken/sub");
  EXPECT_THAT(error_of([&] { write_line_plot_png(taken, "t", rising_loss()); }),
              ::testing::AllOf(HasSubstr("cannot write '" + taken + "'"), HasSubstr("renaming")));
  EXPECT_EQ(std::distance(fs::directory_iterator(dir.path), fs::directory_iterator()), 1);  // taken/ only
  EXPECT_THAT(error_of([&] { write_line_plot_png("", "t", rising_loss()); }), HasSubstr("the output path is empty"));
}
