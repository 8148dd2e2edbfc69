#include "core/line_plot.h"

#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <utility>

#include "core/error.h"
#include "core/file.h"
#include "core/text.h"

namespace strata {

namespace {

// ---- the 5x7 font --------------------------------------------------------------------------------

struct Glyph {
  char c;
  uint8_t rows[7];  // bit 4 is the leftmost column
};

// clang-format off
constexpr Glyph kFont[] = {
    {'%', {0x18, 0x19, 0x02, 0x04, 0x08, 0x13, 0x03}},
    {'\'', {0x04, 0x04, 0x08, 0x00, 0x00, 0x00, 0x00}},
    {'(', {0x02, 0x04, 0x08, 0x08, 0x08, 0x04, 0x02}},
    {')', {0x08, 0x04, 0x02, 0x02, 0x02, 0x04, 0x08}},
    {'+', {0x00, 0x04, 0x04, 0x1f, 0x04, 0x04, 0x00}},
    {',', {0x00, 0x00, 0x00, 0x00, 0x0c, 0x04, 0x08}},
    {'-', {0x00, 0x00, 0x00, 0x1f, 0x00, 0x00, 0x00}},
    {'.', {0x00, 0x00, 0x00, 0x00, 0x00, 0x0c, 0x0c}},
    {'/', {0x00, 0x01, 0x02, 0x04, 0x08, 0x10, 0x00}},
    {'0', {0x0e, 0x11, 0x13, 0x15, 0x19, 0x11, 0x0e}},
    {'1', {0x04, 0x0c, 0x04, 0x04, 0x04, 0x04, 0x0e}},
    {'2', {0x0e, 0x11, 0x01, 0x02, 0x04, 0x08, 0x1f}},
    {'3', {0x1f, 0x02, 0x04, 0x02, 0x01, 0x11, 0x0e}},
    {'4', {0x02, 0x06, 0x0a, 0x12, 0x1f, 0x02, 0x02}},
    {'5', {0x1f, 0x10, 0x1e, 0x01, 0x01, 0x11, 0x0e}},
    {'6', {0x06, 0x08, 0x10, 0x1e, 0x11, 0x11, 0x0e}},
    {'7', {0x1f, 0x01, 0x02, 0x04, 0x08, 0x08, 0x08}},
    {'8', {0x0e, 0x11, 0x11, 0x0e, 0x11, 0x11, 0x0e}},
    {'9', {0x0e, 0x11, 0x11, 0x0f, 0x01, 0x02, 0x0c}},
    {':', {0x00, 0x0c, 0x0c, 0x00, 0x0c, 0x0c, 0x00}},
    {'=', {0x00, 0x00, 0x1f, 0x00, 0x1f, 0x00, 0x00}},
    {'?', {0x0e, 0x11, 0x01, 0x02, 0x04, 0x00, 0x04}},
    {'A', {0x0e, 0x11, 0x11, 0x1f, 0x11, 0x11, 0x11}},
    {'B', {0x1e, 0x11, 0x11, 0x1e, 0x11, 0x11, 0x1e}},
    {'C', {0x0e, 0x11, 0x10, 0x10, 0x10, 0x11, 0x0e}},
    {'D', {0x1c, 0x12, 0x11, 0x11, 0x11, 0x12, 0x1c}},
    {'E', {0x1f, 0x10, 0x10, 0x1e, 0x10, 0x10, 0x1f}},
    {'F', {0x1f, 0x10, 0x10, 0x1e, 0x10, 0x10, 0x10}},
    {'G', {0x0e, 0x11, 0x10, 0x17, 0x11, 0x11, 0x0f}},
    {'H', {0x11, 0x11, 0x11, 0x1f, 0x11, 0x11, 0x11}},
    {'I', {0x0e, 0x04, 0x04, 0x04, 0x04, 0x04, 0x0e}},
    {'J', {0x07, 0x02, 0x02, 0x02, 0x02, 0x12, 0x0c}},
    {'K', {0x11, 0x12, 0x14, 0x18, 0x14, 0x12, 0x11}},
    {'L', {0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x1f}},
    {'M', {0x11, 0x1b, 0x15, 0x15, 0x11, 0x11, 0x11}},
    {'N', {0x11, 0x11, 0x19, 0x15, 0x13, 0x11, 0x11}},
    {'O', {0x0e, 0x11, 0x11, 0x11, 0x11, 0x11, 0x0e}},
    {'P', {0x1e, 0x11, 0x11, 0x1e, 0x10, 0x10, 0x10}},
    {'Q', {0x0e, 0x11, 0x11, 0x11, 0x15, 0x12, 0x0d}},
    {'R', {0x1e, 0x11, 0x11, 0x1e, 0x14, 0x12, 0x11}},
    {'S', {0x0f, 0x10, 0x10, 0x0e, 0x01, 0x01, 0x1e}},
    {'T', {0x1f, 0x04, 0x04, 0x04, 0x04, 0x04, 0x04}},
    {'U', {0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x0e}},
    {'V', {0x11, 0x11, 0x11, 0x11, 0x11, 0x0a, 0x04}},
    {'W', {0x11, 0x11, 0x11, 0x15, 0x15, 0x15, 0x0a}},
    {'X', {0x11, 0x11, 0x0a, 0x04, 0x0a, 0x11, 0x11}},
    {'Y', {0x11, 0x11, 0x0a, 0x04, 0x04, 0x04, 0x04}},
    {'Z', {0x1f, 0x01, 0x02, 0x04, 0x08, 0x10, 0x1f}},
    {'[', {0x0e, 0x08, 0x08, 0x08, 0x08, 0x08, 0x0e}},
    {']', {0x0e, 0x02, 0x02, 0x02, 0x02, 0x02, 0x0e}},
    {'_', {0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x1f}},
};
// clang-format on

const uint8_t* glyph_rows(char c) {
  if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  for (const Glyph& g : kFont) {
    if (g.c == c) return g.rows;
  }
  for (const Glyph& g : kFont) {
    if (g.c == '?') return g.rows;
  }
  return nullptr;
}

constexpr int kTextScale = 2;
constexpr int kAdvance = 6 * kTextScale;  // 5 columns and one of spacing
constexpr int kTextHeight = 7 * kTextScale;

int text_width(std::string_view s) { return static_cast<int>(s.size()) * kAdvance - kTextScale; }

// ---- the canvas ----------------------------------------------------------------------------------

struct Rgb {
  uint8_t r, g, b;
};
constexpr Rgb kWhite{255, 255, 255}, kBlack{0, 0, 0}, kGrid{225, 225, 225}, kFrame{90, 90, 90};
constexpr Rgb kPalette[] = {{31, 119, 180},  {255, 127, 14}, {44, 160, 44},   {214, 39, 40},
                            {148, 103, 189}, {140, 86, 75},  {227, 119, 194}, {127, 127, 127}};

struct Rect {
  int x0, y0, x1, y1;  // inclusive
};

class Canvas {
 public:
  Canvas(int w, int h) : image_{w, h, std::vector<uint8_t>(static_cast<std::size_t>(w) * h * 3, 255)} {
    clip_ = {0, 0, w - 1, h - 1};
  }
  void set_clip(Rect r) { clip_ = r; }
  void clear_clip() { clip_ = {0, 0, image_.width - 1, image_.height - 1}; }
  void put(int x, int y, Rgb c) {
    if (x < clip_.x0 || x > clip_.x1 || y < clip_.y0 || y > clip_.y1) return;
    uint8_t* p = &image_.pixels[(static_cast<std::size_t>(y) * image_.width + x) * 3];
    p[0] = c.r;
    p[1] = c.g;
    p[2] = c.b;
  }
  void fill(Rect r, Rgb c) {
    for (int y = r.y0; y <= r.y1; ++y)
      for (int x = r.x0; x <= r.x1; ++x) put(x, y, c);
  }
  void frame(Rect r, Rgb c) {
    fill({r.x0, r.y0, r.x1, r.y0}, c);
    fill({r.x0, r.y1, r.x1, r.y1}, c);
    fill({r.x0, r.y0, r.x0, r.y1}, c);
    fill({r.x1, r.y0, r.x1, r.y1}, c);
  }
  /// A `width`-pixel line (Bresenham, a width x width square per step).
  void line(int x0, int y0, int x1, int y1, Rgb c, int width) {
    const int dx = std::abs(x1 - x0), dy = -std::abs(y1 - y0);
    const int sx = x0 < x1 ? 1 : -1, sy = y0 < y1 ? 1 : -1;
    int err = dx + dy;
    for (;;) {
      fill({x0, y0, x0 + width - 1, y0 + width - 1}, c);
      if (x0 == x1 && y0 == y1) break;
      const int e2 = 2 * err;
      if (e2 >= dy) err += dy, x0 += sx;
      if (e2 <= dx) err += dx, y0 += sy;
    }
  }
  void text(int x, int y, std::string_view s, Rgb c) {
    for (char ch : s) {
      const uint8_t* rows = ch == ' ' ? nullptr : glyph_rows(ch);
      for (int r = 0; rows != nullptr && r < 7; ++r)
        for (int col = 0; col < 5; ++col)
          if (rows[r] & (0x10 >> col))
            fill({x + col * kTextScale, y + r * kTextScale, x + (col + 1) * kTextScale - 1,
                  y + (r + 1) * kTextScale - 1},
                 c);
      x += kAdvance;
    }
  }
  /// Pixels in `r` drawn in a series colour (not background, grid, frame or text).
  int series_pixels(Rect r) const {
    int n = 0;
    for (int y = std::max(r.y0, 0); y <= std::min(r.y1, image_.height - 1); ++y)
      for (int x = std::max(r.x0, 0); x <= std::min(r.x1, image_.width - 1); ++x) {
        const uint8_t* p = &image_.pixels[(static_cast<std::size_t>(y) * image_.width + x) * 3];
        const auto is = [p](Rgb c) { return p[0] == c.r && p[1] == c.g && p[2] == c.b; };
        n += !is(kWhite) && !is(kGrid) && !is(kFrame) && !is(kBlack);
      }
    return n;
  }
  RgbImage take() { return std::move(image_); }

 private:
  RgbImage image_;
  Rect clip_{};
};

// ---- axes ----------------------------------------------------------------------------------------

struct Axis {
  double lo = 0, hi = 1;
  std::vector<double> ticks;
};

/// Ticks 1, 2 or 5 times a power of ten, about `target` of them in [lo, hi].
Axis nice_axis(double lo, double hi, int target) {
  if (!(hi > lo)) {
    lo -= 0.5;
    hi += 0.5;
  }
  Axis a{lo, hi, {}};
  const double raw = (hi - lo) / target;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  const double norm = raw / mag;
  const double step = (norm < 1.5 ? 1 : norm < 3 ? 2 : norm < 7 ? 5 : 10) * mag;
  for (double t = std::ceil(lo / step) * step; t <= hi + step * 1e-9; t += step) {
    a.ticks.push_back(std::abs(t) < step * 1e-9 ? 0.0 : t);
  }
  return a;
}

std::string tick_label(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

/// The x and y ranges of a panel's finite points (y padded by 5%).
std::pair<Axis, Axis> panel_axes(const PlotPanel& panel) {
  double xlo = INFINITY, xhi = -INFINITY, ylo = INFINITY, yhi = -INFINITY;
  for (const PlotSeries& s : panel.series) {
    for (std::size_t i = 0; i < s.x.size(); ++i) {
      if (!std::isfinite(s.x[i]) || !std::isfinite(s.y[i])) continue;
      xlo = std::min(xlo, s.x[i]), xhi = std::max(xhi, s.x[i]);
      ylo = std::min(ylo, s.y[i]), yhi = std::max(yhi, s.y[i]);
    }
  }
  if (!std::isfinite(xlo)) xlo = 0, xhi = 1, ylo = 0, yhi = 1;
  const double pad = 0.05 * (yhi - ylo);
  return {nice_axis(xlo, xhi, 6), nice_axis(ylo - pad, yhi + pad, 5)};
}

// ---- panels --------------------------------------------------------------------------------------

/// Maps data to pixels inside `area`; values far outside are clamped (the clip hides them).
struct Mapping {
  Rect area;
  Axis x, y;
  int px(double v) const {
    const double t = (v - x.lo) / (x.hi - x.lo);
    return static_cast<int>(std::lround(area.x0 + std::clamp(t, -10.0, 10.0) * (area.x1 - area.x0)));
  }
  int py(double v) const {
    const double t = (v - y.lo) / (y.hi - y.lo);
    return static_cast<int>(std::lround(area.y1 - std::clamp(t, -10.0, 10.0) * (area.y1 - area.y0)));
  }
};

void draw_axes(Canvas& cv, const Mapping& m, const PlotPanel& panel, int panel_bottom) {
  for (double t : m.x.ticks) {
    const int x = m.px(t);
    cv.fill({x, m.area.y0, x, m.area.y1}, kGrid);
    cv.fill({x, m.area.y1, x, m.area.y1 + 5}, kFrame);
    const std::string label = tick_label(t);
    cv.text(x - text_width(label) / 2, m.area.y1 + 9, label, kBlack);
  }
  for (double t : m.y.ticks) {
    const int y = m.py(t);
    cv.fill({m.area.x0, y, m.area.x1, y}, kGrid);
    cv.fill({m.area.x0 - 5, y, m.area.x0, y}, kFrame);
    const std::string label = tick_label(t);
    cv.text(m.area.x0 - 9 - text_width(label), y - kTextHeight / 2, label, kBlack);
  }
  cv.frame(m.area, kFrame);
  cv.text((m.area.x0 + m.area.x1 - text_width(panel.title)) / 2, m.area.y0 - kTextHeight - 8, panel.title, kBlack);
  cv.text((m.area.x0 + m.area.x1 - text_width(panel.x_label)) / 2, panel_bottom - kTextHeight - 6, panel.x_label,
          kBlack);
}

void draw_series(Canvas& cv, const Mapping& m, const PlotSeries& s, Rgb color) {
  cv.set_clip(m.area);
  bool have_prev = false;
  int px = 0, py = 0;
  for (std::size_t i = 0; i < s.x.size(); ++i) {
    if (!std::isfinite(s.x[i]) || !std::isfinite(s.y[i])) {
      have_prev = false;
      continue;
    }
    const int x = m.px(s.x[i]), y = m.py(s.y[i]);
    const bool lone = !have_prev && (i + 1 == s.x.size() || !std::isfinite(s.y[i + 1]) || !std::isfinite(s.x[i + 1]));
    if (have_prev) cv.line(px, py, x, y, color, 2);
    if (lone) cv.fill({x - 2, y - 2, x + 2, y + 2}, color);
    px = x, py = y, have_prev = true;
  }
  cv.clear_clip();
}

/// The legend, in the corner of the plot area where it hides the fewest series pixels (top right
/// first); drawn after the series.
void draw_legend(Canvas& cv, const Mapping& m, const PlotPanel& panel) {
  int widest = 0;
  for (const PlotSeries& s : panel.series) widest = std::max(widest, text_width(s.name));
  const int w = widest + 38, h = static_cast<int>(panel.series.size()) * (kTextHeight + 6) + 4;
  const int left = m.area.x0 + 6, right = m.area.x1 - 6 - w, top = m.area.y0 + 6, bottom = m.area.y1 - 6 - h;
  Rect box{right, top, right + w, top + h};
  int best = cv.series_pixels(box);
  for (const auto& [x, y] : {std::pair{right, bottom}, {left, top}, {left, bottom}}) {
    const Rect r{x, y, x + w, y + h};
    const int n = cv.series_pixels(r);
    if (n < best) best = n, box = r;
  }
  cv.fill(box, kWhite);
  cv.frame(box, kFrame);
  for (std::size_t i = 0; i < panel.series.size(); ++i) {
    const int y = box.y0 + 5 + static_cast<int>(i) * (kTextHeight + 6);
    const Rgb color = kPalette[i % std::size(kPalette)];
    cv.fill({box.x0 + 6, y + kTextHeight / 2 - 1, box.x0 + 26, y + kTextHeight / 2}, color);
    cv.text(box.x0 + 32, y, panel.series[i].name, kBlack);
  }
}

constexpr int kTitleBand = 40;

void check_panels(std::span<const PlotPanel> panels, PlotLayout layout) {
  STRATA_CHECK(!panels.empty(), "line plot: no panels to draw");
  STRATA_CHECK(layout.width >= 200 && layout.panel_height >= 120, "line plot: the layout must be at least 200 x 120 ",
               "pixels per panel, got ", layout.width, " x ", layout.panel_height);
  for (std::size_t p = 0; p < panels.size(); ++p) {
    for (const PlotSeries& s : panels[p].series) {
      STRATA_CHECK(s.x.size() == s.y.size(), "line plot: panel ", p, " (", quote_field(panels[p].title), "), series ",
                   quote_field(s.name), ": x has ", s.x.size(), " values but y has ", s.y.size());
    }
  }
}

// ---- PNG -----------------------------------------------------------------------------------------

void put_be32(std::string& out, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<char>((v >> shift) & 0xff));
}

void put_chunk(std::string& out, const char* type, std::string_view data) {
  put_be32(out, static_cast<uint32_t>(data.size()));
  const std::size_t start = out.size();
  out.append(type, 4);
  out.append(data);
  const auto* bytes = reinterpret_cast<const Bytef*>(out.data() + start);
  put_be32(out, static_cast<uint32_t>(crc32(crc32(0L, Z_NULL, 0), bytes, static_cast<uInt>(out.size() - start))));
}

}  // namespace

RgbImage render_line_plot(std::string_view title, std::span<const PlotPanel> panels, PlotLayout layout) {
  check_panels(panels, layout);
  const int height = kTitleBand + static_cast<int>(panels.size()) * layout.panel_height;
  Canvas cv(layout.width, height);
  cv.text((layout.width - text_width(title)) / 2, (kTitleBand - kTextHeight) / 2, title, kBlack);
  for (std::size_t p = 0; p < panels.size(); ++p) {
    const PlotPanel& panel = panels[p];
    const int top = kTitleBand + static_cast<int>(p) * layout.panel_height;
    const int bottom = top + layout.panel_height - 1;
    auto [x, y] = panel_axes(panel);
    const Mapping m{{110, top + 30, layout.width - 40, bottom - 56}, std::move(x), std::move(y)};
    draw_axes(cv, m, panel, bottom);
    for (std::size_t i = 0; i < panel.series.size(); ++i) {
      draw_series(cv, m, panel.series[i], kPalette[i % std::size(kPalette)]);
    }
    if (!panel.series.empty()) draw_legend(cv, m, panel);
  }
  return cv.take();
}

std::string encode_png(const RgbImage& image) {
  STRATA_CHECK(image.width > 0 && image.height > 0 &&
                   image.pixels.size() == static_cast<std::size_t>(image.width) * image.height * 3,
               "encode_png: a ", image.width, " x ", image.height, " RGB image needs ",
               static_cast<std::size_t>(std::max(image.width, 0)) * std::max(image.height, 0) * 3, " bytes, got ",
               image.pixels.size());
  const std::size_t stride = static_cast<std::size_t>(image.width) * 3;
  std::string raw;
  raw.reserve((stride + 1) * image.height);
  for (int y = 0; y < image.height; ++y) {
    raw.push_back('\0');  // filter type 0 (None)
    raw.append(reinterpret_cast<const char*>(image.pixels.data()) + y * stride, stride);
  }
  uLongf packed_size = compressBound(static_cast<uLong>(raw.size()));
  std::string packed(packed_size, '\0');
  const int rc = compress2(reinterpret_cast<Bytef*>(packed.data()), &packed_size,
                           reinterpret_cast<const Bytef*>(raw.data()), static_cast<uLong>(raw.size()), 6);
  STRATA_CHECK(rc == Z_OK, "encode_png: zlib's compress2 failed (", rc, ")");
  packed.resize(packed_size);

  std::string png("\x89PNG\r\n\x1a\n", 8);
  std::string header;
  put_be32(header, static_cast<uint32_t>(image.width));
  put_be32(header, static_cast<uint32_t>(image.height));
  header += std::string("\x08\x02\x00\x00\x00", 5);  // 8 bits, RGB, deflate, filter 0, no interlace
  put_chunk(png, "IHDR", header);
  put_chunk(png, "IDAT", packed);
  put_chunk(png, "IEND", {});
  return png;
}

void write_line_plot_png(const std::string& path, std::string_view title, std::span<const PlotPanel> panels,
                         PlotLayout layout) {
  write_file_atomically(path, encode_png(render_line_plot(title, panels, layout)), "line plot");
}

std::vector<PlotPanel> training_plot_panels(const TrainingCurves& c) {
  std::vector<PlotPanel> panels;
  panels.push_back({"train loss", "iteration", {{"loss", c.iterations, c.loss}}});
  if (c.test_iterations.empty() && c.accuracy.empty() && c.auc.empty()) return panels;
  PlotPanel test{"test accuracy and AUC", "iteration", {}};
  if (!c.accuracy.empty()) test.series.push_back({"accuracy", c.test_iterations, c.accuracy});
  if (!c.auc.empty()) test.series.push_back({"AUC", c.test_iterations, c.auc});
  panels.push_back(std::move(test));
  return panels;
}

}  // namespace strata
