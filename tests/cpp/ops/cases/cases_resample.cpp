// Harness cases for pad and interpolate (ops/resample.h; issue 26 part 7).

#include <algorithm>
#include <cmath>
#include <string>

#include "ops/resample.h"
#include "tests/cpp/ops/harness/op_harness.h"

namespace strata::testing {
namespace {

/// The input coordinate output coordinate o of a dim of size n (left pad l) reads; -1: the value.
int64_t pad_ref_source(const std::string& mode, int64_t o, int64_t l, int64_t n) {
  int64_t i = o - l;
  if (mode == "constant") return i >= 0 && i < n ? i : -1;
  if (mode == "replicate") return std::min(std::max<int64_t>(i, 0), n - 1);
  if (mode == "circular") {
    while (i < 0) i += n;
    return i % n;
  }
  if (i < 0) i = -i;  // reflect
  if (i >= n) i = 2 * (n - 1) - i;
  return i;
}

/// Naive f64 pad: each output element by its coordinates.
Tensor pad_reference(const Tensor& x, const Dims& pads, const std::string& mode, double value) {
  const int64_t R = x.dim();
  Dims lo(R, 0), out = x.sizes();
  for (std::size_t k = 0; k < pads.size() / 2; ++k) {
    const int64_t d = R - 1 - static_cast<int64_t>(k);
    lo[d] = pads[2 * k];
    out[d] += pads[2 * k] + pads[2 * k + 1];
  }
  int64_t total = 1;
  for (int64_t s : out) total *= s;
  const auto xv = values_of(x);
  std::vector<double> y(total);
  for (int64_t flat = 0; flat < total; ++flat) {
    int64_t rem = flat, src = 0, stride = 1;
    bool fill = false;
    for (int64_t d = R - 1; d >= 0; --d) {
      const int64_t o = rem % out[d];
      rem /= out[d];
      const int64_t i = pad_ref_source(mode, o, lo[d], x.size(d));
      fill = fill || i < 0;
      src += i * stride;
      stride *= x.size(d);
    }
    y[flat] = fill ? value : xv[src];
  }
  return from_values(y, out);
}

OpCase pad_case(std::string name, Dims shape, Dims pads, std::string mode, double value = 0.0) {
  return OpCase{
      .name = "pad/" + std::move(name),
      .op = OpKind::pad,
      .inputs = [shape](Generator& g) { return TensorList{uniform64(shape, g)}; },
      .run = [pads, mode, value](const TensorList& in) { return TensorList{pad(in[0], pads, mode, value)}; },
      .reference = [pads, mode,
                    value](const TensorList& in) { return TensorList{pad_reference(in[0], pads, mode, value)}; },
      .grad_inputs = {0},
  };
}

const bool pad_registered = [] {
  op_cases().push_back(pad_case("constant_last_dim", {2, 3, 4}, {1, 2}, "constant", 0.5));
  op_cases().push_back(pad_case("constant_three_dims_crop", {2, 3, 4}, {1, -1, 0, 2, 1, 1}, "constant"));
  op_cases().push_back(pad_case("reflect_1d", {2, 3, 5}, {2, 3}, "reflect"));
  op_cases().push_back(pad_case("reflect_2d", {1, 2, 4, 3}, {2, 1, 3, 0}, "reflect"));
  op_cases().push_back(pad_case("replicate_2d", {2, 3, 3}, {2, 1, 1, 3}, "replicate"));
  op_cases().push_back(pad_case("replicate_3d", {1, 1, 2, 3, 2}, {1, 1, 0, 2, 1, 0}, "replicate"));
  op_cases().push_back(pad_case("circular_1d", {2, 4}, {3, 4}, "circular"));
  op_cases().push_back(pad_case("circular_2d", {1, 2, 3, 3}, {1, 2, 3, 0}, "circular"));
  return true;
}();

STRATA_REGISTER_CASE(BadInputCase{
    .name = "pad/odd_length",
    .op = OpKind::pad,
    .call = [] { pad(zeros({2, 3, 5}), {1, 2, 3}); },
    .expect = {"pad", "padding length must be divisible by 2"},
});
STRATA_REGISTER_CASE(BadInputCase{
    .name = "pad/too_long",
    .op = OpKind::pad,
    .call = [] { pad(zeros({2, 3}), {1, 1, 1, 1, 1, 1}); },
    .expect = {"pad", "two times the input dimension", "padding length 6"},
});
STRATA_REGISTER_CASE(BadInputCase{
    .name = "pad/bad_mode",
    .op = OpKind::pad,
    .call = [] { pad(zeros({2, 3}), {1, 1}, "mirror"); },
    .expect = {"pad", "unrecognised padding mode 'mirror'"},
});
STRATA_REGISTER_CASE(BadInputCase{
    .name = "pad/reflect_too_large",
    .op = OpKind::pad,
    .call = [] { pad(zeros({2, 3, 5}), {5, 1}, "reflect"); },
    .expect = {"pad", "should be less than the corresponding input dimension", "(5, 1)"},
});
STRATA_REGISTER_CASE(BadInputCase{
    .name = "pad/reflect_rank",
    .op = OpKind::pad,
    .call = [] { pad(zeros({5}), {1, 1}, "reflect"); },
    .expect = {"pad", "padding size 2 is not supported for 1-D input"},
});
STRATA_REGISTER_CASE(BadInputCase{
    .name = "pad/circular_wraps_twice",
    .op = OpKind::pad,
    .call = [] { pad(zeros({2, 3, 5}), {6, 1}, "circular"); },
    .expect = {"pad", "wrapping around more than once"},
});

// ---- interpolate --------------------------------------------------------------------------------

struct InterpSpec {
  std::string mode = "nearest";
  Dims size;
  std::vector<double> scale;
  std::optional<bool> align_corners;
};

/// Source coordinate of output o along one dim, in f64 (PyTorch's formulas).
double interp_source(const InterpSpec& s, int64_t o, int64_t in, int64_t out, double factor) {
  const double sc = factor > 0 ? 1.0 / factor : double(in) / double(out);
  if (s.mode == "nearest") return std::min<double>(std::floor(o * sc), in - 1);
  if (s.mode == "nearest-exact") return std::min<double>(std::floor((o + 0.5) * sc), in - 1);
  if (s.align_corners.value_or(false)) return out > 1 ? o * double(in - 1) / double(out - 1) : 0.0;
  return std::max(sc * (o + 0.5) - 0.5, 0.0);
}

/// Naive f64 interpolate of a 3-D or 4-D x: each output element from its (up to 4) taps.
Tensor interp_reference(const Tensor& x, const InterpSpec& s) {
  const bool two_d = x.dim() == 4;
  const int64_t N = x.size(0), C = x.size(1), H = two_d ? x.size(2) : 1, W = x.size(-1);
  auto out_size = [&](int64_t d, int64_t in) {
    if (!s.size.empty()) return s.size[s.size.size() == 1 ? 0 : d];
    return static_cast<int64_t>(std::floor(in * s.scale[s.scale.size() == 1 ? 0 : d]));
  };
  auto factor = [&](int64_t d) { return s.scale.empty() ? 0.0 : s.scale[s.scale.size() == 1 ? 0 : d]; };
  const int64_t OH = two_d ? out_size(0, H) : 1, OW = out_size(two_d ? 1 : 0, W);
  const bool linear = s.mode == "linear" || s.mode == "bilinear";
  auto taps = [&](int64_t o, int64_t in, int64_t out, double f, int64_t& i0, int64_t& i1, double& l1) {
    const double src = interp_source(s, o, in, out, f);
    i0 = static_cast<int64_t>(src);
    i1 = std::min(i0 + 1, in - 1);
    l1 = linear ? src - i0 : 0.0;
  };
  const auto xv = values_of(x);
  std::vector<double> y(N * C * OH * OW);
  for (int64_t nc = 0; nc < N * C; ++nc)
    for (int64_t oh = 0; oh < OH; ++oh)
      for (int64_t ow = 0; ow < OW; ++ow) {
        int64_t h0 = 0, h1 = 0, w0, w1;
        double lh = 0, lw;
        if (two_d) taps(oh, H, OH, factor(0), h0, h1, lh);
        taps(ow, W, OW, factor(two_d ? 1 : 0), w0, w1, lw);
        auto at = [&](int64_t h, int64_t w) { return xv[(nc * H + h) * W + w]; };
        y[(nc * OH + oh) * OW + ow] =
            (1 - lh) * ((1 - lw) * at(h0, w0) + lw * at(h0, w1)) + lh * ((1 - lw) * at(h1, w0) + lw * at(h1, w1));
      }
  return from_values(y, two_d ? Dims{N, C, OH, OW} : Dims{N, C, OW});
}

OpCase interp_case(std::string name, Dims shape, InterpSpec s) {
  return OpCase{
      .name = "interpolate/" + std::move(name),
      .op = OpKind::interpolate,
      .inputs = [shape](Generator& g) { return TensorList{uniform64(shape, g)}; },
      .run =
          [s](const TensorList& in) {
            return TensorList{interpolate(in[0], s.size, s.scale, s.mode, s.align_corners)};
          },
      .reference = [s](const TensorList& in) { return TensorList{interp_reference(in[0], s)}; },
      .grad_inputs = {0},
  };
}

const bool interp_registered = [] {
  op_cases().push_back(interp_case("nearest_scale2_1d", {2, 3, 4}, {.scale = {2.0}}));
  op_cases().push_back(interp_case("nearest_size_2d", {1, 2, 3, 5}, {.size = {5, 8}}));
  op_cases().push_back(interp_case("nearest_downsample", {1, 2, 6, 4}, {.size = {3, 2}}));
  op_cases().push_back(interp_case("nearest_exact", {2, 2, 5}, {.mode = "nearest-exact", .size = {8}}));
  op_cases().push_back(interp_case("linear_scale", {2, 3, 4}, {.mode = "linear", .scale = {2.5}}));
  op_cases().push_back(
      interp_case("linear_align_corners", {2, 2, 5}, {.mode = "linear", .size = {9}, .align_corners = true}));
  op_cases().push_back(interp_case("bilinear_size", {1, 2, 3, 4}, {.mode = "bilinear", .size = {5, 7}}));
  op_cases().push_back(interp_case("bilinear_align_corners", {2, 1, 3, 3},
                                   {.mode = "bilinear", .scale = {2.0, 1.5}, .align_corners = true}));
  return true;
}();

STRATA_REGISTER_CASE(BadInputCase{
    .name = "interpolate/bilinear_needs_4d",
    .op = OpKind::interpolate,
    .call = [] { interpolate(zeros({2, 3, 5}), {}, {2.0}, "bilinear"); },
    .expect = {"interpolate", "bilinear mode needs 4-D input"},
});
STRATA_REGISTER_CASE(BadInputCase{
    .name = "interpolate/size_and_scale",
    .op = OpKind::interpolate,
    .call = [] { interpolate(zeros({2, 3, 5}), {4}, {2.0}); },
    .expect = {"interpolate", "only one of size or scale_factor should be defined"},
});
STRATA_REGISTER_CASE(BadInputCase{
    .name = "interpolate/bad_mode",
    .op = OpKind::interpolate,
    .call = [] { interpolate(zeros({2, 3, 5}), {4}, {}, "bicubic"); },
    .expect = {"interpolate", "unsupported mode 'bicubic'"},
});
STRATA_REGISTER_CASE(BadInputCase{
    .name = "interpolate/zero_output",
    .op = OpKind::interpolate,
    .call = [] { interpolate(zeros({2, 3, 5}), {}, {0.1}); },
    .expect = {"interpolate", "should be greater than 0"},
});
STRATA_REGISTER_CASE(BadInputCase{
    .name = "interpolate/align_corners_nearest",
    .op = OpKind::interpolate,
    .call = [] { interpolate(zeros({2, 3, 5}), {}, {2.0}, "nearest", true); },
    .expect = {"interpolate", "align_corners can only be set"},
});

}  // namespace
}  // namespace strata::testing
