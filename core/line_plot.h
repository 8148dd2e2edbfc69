#pragma once
/// @file
/// Line plots written as PNG without Python: a small rasterizer (axes with "nice" ticks, grid,
/// one or more series per panel, a legend, a built-in 5x7 bitmap font) and a PNG encoder on zlib.
/// strata-dlrm's --plot and strata.dlrm.plot_training draw training curves with it.
///
/// Note [Line plot rendering]
/// - The image is RGB, `width` pixels wide, a title band on top and the panels stacked below it,
///   each `panel_height` pixels tall. A panel's axes span the finite points of all its series
///   (padded by 5% in y; a single value gets a unit range around it); ticks are 1, 2 or 5 times a
///   power of ten, about five per axis, labelled with up to four significant digits.
/// - Series are polylines, 2 px wide, in a fixed palette (blue, orange, green, red, purple, ...);
///   a non-finite y breaks the line; points must be in x order for the line to read well
///   (nothing is sorted). A lone finite point is drawn as a small square. The legend goes into
///   the corner of the plot area where it hides the fewest series pixels (top right on a tie).
/// - Text uses a 5x7 bitmap font drawn at 2x: digits, A-Z (lower case is shown in upper case),
///   space and . , - + : / % ( ) = _ [ ] ' ?; any other character is drawn as '?'.
/// - The PNG is 8-bit RGB, one IDAT chunk compressed by zlib (deflate level 6, filter type 0 on
///   every row), chunk CRCs from zlib's crc32; written atomically (core/file.h).

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace strata {

/// One line: y against x (equal lengths).
struct PlotSeries {
  std::string name;
  std::vector<double> x, y;
};

/// One set of axes.
struct PlotPanel {
  std::string title;
  std::string x_label;
  std::vector<PlotSeries> series;
};

/// An 8-bit RGB image, rows top to bottom.
struct RgbImage {
  int width = 0, height = 0;
  std::vector<uint8_t> pixels;  ///< width * height * 3
};

/// Size of a rendered plot.
struct PlotLayout {
  int width = 800;
  int panel_height = 320;
};

/// Renders `panels` under `title` (Note [Line plot rendering]). Throws strata::Error naming the
/// panel and series for x and y of different lengths, no panels, or a layout smaller than
/// 200 x 120 pixels per panel.
RgbImage render_line_plot(std::string_view title, std::span<const PlotPanel> panels, PlotLayout layout = {});

/// The PNG file of an image (8-bit RGB).
std::string encode_png(const RgbImage& image);

/// render_line_plot + encode_png, written to `path` atomically. Throws strata::Error naming
/// the path when it cannot be written (and the panel or series for bad data).
void write_line_plot_png(const std::string& path, std::string_view title, std::span<const PlotPanel> panels,
                         PlotLayout layout = {});

/// The curves of a training run.
struct TrainingCurves {
  std::vector<double> iterations, loss;                ///< training loss per reported iteration
  std::vector<double> test_iterations, accuracy, auc;  ///< test figures (empty: no test panel)
};

/// The standard training plot: a panel "train loss" and, when there are test figures, a panel
/// "test accuracy and AUC" (either series may be empty; a non-empty one needs one value per test
/// iteration, which render_line_plot checks), x labelled "iteration".
std::vector<PlotPanel> training_plot_panels(const TrainingCurves& curves);

}  // namespace strata
