// Harness cases for ops/pooling.h.

#include "ops/pooling.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <numeric>

#include "tests/cpp/ops/harness/op_harness.h"

namespace strata::testing {
namespace {

/// Distinct values in [-1, 1), at least 2/numel apart (max pooling FD stays away from ties).
Tensor distinct64(IntArrayRef sizes, Generator& g) {
  Tensor t = uniform64(sizes, g);  // only for the size; values replaced below
  const int64_t n = t.numel();
  std::vector<int64_t> perm(n);
  std::iota(perm.begin(), perm.end(), 0);
  Tensor keys = uniform64({n}, g);
  const auto k = values_of(keys);
  std::sort(perm.begin(), perm.end(), [&](int64_t a, int64_t b) { return k[a] < k[b]; });
  std::vector<double> v(n);
  for (int64_t i = 0; i < n; ++i) v[perm[i]] = -1.0 + 2.0 * double(i) / double(n);
  return from_values(v, sizes);
}

struct PoolAttrs {
  std::vector<int64_t> k{2, 2}, s{2, 2}, p{0, 0}, d{1, 1};
  bool ceil_mode = false, count_include_pad = true;
};

int64_t out_size(int64_t in, int64_t k, int64_t p, int64_t s, int64_t d, bool ceil_mode) {
  const int64_t num = in + 2 * p - d * (k - 1) - 1;
  int64_t o = (ceil_mode ? (num + s - 1) / s : num / s) + 1;
  if (ceil_mode && (o - 1) * s >= in + p) --o;
  return o;
}

/// kind: 0 max, 1 avg.
Tensor pool_reference(const Tensor& x, const PoolAttrs& a, int kind) {
  const int64_t H = x.size(-2), W = x.size(-1), planes = x.numel() / (H * W);
  const int64_t OH = out_size(H, a.k[0], a.p[0], a.s[0], a.d[0], a.ceil_mode);
  const int64_t OW = out_size(W, a.k[1], a.p[1], a.s[1], a.d[1], a.ceil_mode);
  const auto xv = values_of(x);
  std::vector<double> y(planes * OH * OW);
  for (int64_t pl = 0; pl < planes; ++pl)
    for (int64_t oh = 0; oh < OH; ++oh)
      for (int64_t ow = 0; ow < OW; ++ow) {
        double best = -std::numeric_limits<double>::infinity(), sum = 0;
        int64_t valid = 0, padded = 0;
        for (int64_t i = 0; i < a.k[0]; ++i)
          for (int64_t j = 0; j < a.k[1]; ++j) {
            const int64_t h = oh * a.s[0] - a.p[0] + i * a.d[0], w = ow * a.s[1] - a.p[1] + j * a.d[1];
            if (h < H + a.p[0] && w < W + a.p[1]) ++padded;  // inside the padded input
            if (h < 0 || h >= H || w < 0 || w >= W) continue;
            const double v = xv[(pl * H + h) * W + w];
            best = std::max(best, v);
            sum += v;
            ++valid;
          }
        y[(pl * OH + oh) * OW + ow] = kind == 0 ? best : sum / double(a.count_include_pad ? padded : valid);
      }
  Dims s = x.sizes();
  s[s.size() - 2] = OH;
  s[s.size() - 1] = OW;
  return from_values(y, s);
}

OpCase max_case(std::string name, Dims xs, PoolAttrs a, std::function<TensorList(Generator&)> bench = nullptr) {
  return OpCase{
      .name = std::move(name),
      .op = OpKind::max_pool2d,
      .inputs = [xs](Generator& g) { return TensorList{distinct64(xs, g)}; },
      .run = [a](const TensorList& in) { return TensorList{max_pool2d(in[0], a.k, a.s, a.p, a.d, a.ceil_mode)}; },
      .reference = [a](const TensorList& in) { return TensorList{pool_reference(in[0], a, 0)}; },
      .grad_inputs = {0},
      .bench_inputs = std::move(bench),
  };
}

OpCase avg_case(std::string name, Dims xs, PoolAttrs a, std::function<TensorList(Generator&)> bench = nullptr) {
  return OpCase{
      .name = std::move(name),
      .op = OpKind::avg_pool2d,
      .inputs = [xs](Generator& g) { return TensorList{uniform64(xs, g)}; },
      .run =
          [a](const TensorList& in) {
            return TensorList{avg_pool2d(in[0], a.k, a.s, a.p, a.ceil_mode, a.count_include_pad)};
          },
      .reference = [a](const TensorList& in) { return TensorList{pool_reference(in[0], a, 1)}; },
      .grad_inputs = {0},
      .bench_inputs = std::move(bench),
  };
}

// Note [Non-finite cases] and Note [Max pooling and NaN]: PyTorch's rule, `v > best || isnan(v)` in
// window order from -inf (the first in-bounds element when all are -inf): a window with a NaN gives
// NaN and routes its gradient to the last NaN. Values and the gradient's argmax, per output.
Tensor max_pool_torch(const Tensor& x, const PoolAttrs& a, std::vector<int64_t>* argmax) {
  const int64_t H = x.size(-2), W = x.size(-1), planes = x.numel() / (H * W);
  const int64_t OH = out_size(H, a.k[0], a.p[0], a.s[0], a.d[0], a.ceil_mode);
  const int64_t OW = out_size(W, a.k[1], a.p[1], a.s[1], a.d[1], a.ceil_mode);
  const auto xv = values_of(x);
  std::vector<double> y;
  for (int64_t pl = 0; pl < planes; ++pl)
    for (int64_t oh = 0; oh < OH; ++oh)
      for (int64_t ow = 0; ow < OW; ++ow) {
        double best = -kInf;
        int64_t arg = -1;
        for (int64_t i = 0; i < a.k[0]; ++i)
          for (int64_t j = 0; j < a.k[1]; ++j) {
            const int64_t h = oh * a.s[0] - a.p[0] + i * a.d[0], w = ow * a.s[1] - a.p[1] + j * a.d[1];
            if (h < 0 || h >= H || w < 0 || w >= W) continue;
            const double v = xv[(pl * H + h) * W + w];
            if (arg < 0 || v > best || std::isnan(v)) best = v, arg = (pl * H + h) * W + w;
          }
        y.push_back(best);
        if (argmax != nullptr) argmax->push_back(arg);
      }
  Dims s = x.sizes();
  s[s.size() - 2] = OH;
  s[s.size() - 1] = OW;
  return from_values(y, s);
}

OpCase max_nonfinite_case(std::string name, Dims xs, PoolAttrs a) {
  return OpCase{
      .name = std::move(name),
      .op = OpKind::max_pool2d,
      .inputs = [xs](Generator& g) { return TensorList{with_nonfinite(xs, g)}; },
      .run = [a](const TensorList& in) { return TensorList{max_pool2d(in[0], a.k, a.s, a.p, a.d, a.ceil_mode)}; },
      .reference = [a](const TensorList& in) { return TensorList{max_pool_torch(in[0], a, nullptr)}; },
      .grad_inputs = {0},
      .grad_reference =
          [a](const TensorList& in, const TensorList& w) {
            std::vector<int64_t> arg;
            max_pool_torch(in[0], a, &arg);
            const auto wv = values_of(w[0]);
            std::vector<double> g(static_cast<std::size_t>(in[0].numel()), 0.0);
            for (std::size_t o = 0; o < arg.size(); ++o) g[static_cast<std::size_t>(arg[o])] += wv[o];
            return TensorList{from_values(g, in[0].sizes())};
          },
  };
}

// Windows of 4 to 9 elements over NaN every 5th, +inf every 7th, -inf every 11th element: windows
// with several NaNs, with +inf, with only -inf and padding; the f32 2x2 stride-2 vector rows (W 20)
// and the generic loop (padding, dilation).
STRATA_REGISTER_CASE(max_nonfinite_case("max_pool2d/nonfinite_2x2", {2, 2, 4, 20}, {}));
STRATA_REGISTER_CASE(max_nonfinite_case("max_pool2d/nonfinite_3x3", {1, 3, 7, 9}, {.k = {3, 3}, .s = {1, 1}}));
STRATA_REGISTER_CASE(max_nonfinite_case("max_pool2d/nonfinite_padding_dilation", {1, 2, 8, 7},
                                        {.k = {3, 2}, .s = {2, 1}, .p = {1, 1}, .d = {2, 1}}));
STRATA_REGISTER_CASE(OpCase{
    .name = "max_pool2d/nonfinite_all_neg_inf",
    .op = OpKind::max_pool2d,
    .inputs = [](Generator&) { return TensorList{from_values(std::vector<double>(32, -kInf), {1, 2, 4, 4})}; },
    .run = [](const TensorList& in) { return TensorList{max_pool2d(in[0], {2, 2})}; },
    .reference = [](const TensorList& in) { return TensorList{max_pool_torch(in[0], PoolAttrs{}, nullptr)}; },
    .grad_inputs = {0},
    .grad_reference =
        [](const TensorList& in, const TensorList& w) {
          std::vector<int64_t> arg;
          max_pool_torch(in[0], PoolAttrs{}, &arg);
          const auto wv = values_of(w[0]);
          std::vector<double> g(32, 0.0);
          for (std::size_t o = 0; o < arg.size(); ++o) g[static_cast<std::size_t>(arg[o])] += wv[o];
          return TensorList{from_values(g, in[0].sizes())};
        },
});
// Average pooling only sums: NaN and +-inf propagate (inf + -inf = NaN); the gradient does not read x.
STRATA_REGISTER_CASE([] {
  OpCase c = avg_case("avg_pool2d/nonfinite", {1, 2, 6, 10}, {.k = {3, 3}, .s = {2, 2}, .p = {1, 1}});
  c.inputs = [](Generator& g) { return TensorList{with_nonfinite({1, 2, 6, 10}, g)}; };
  c.grad_reference = [](const TensorList& in, const TensorList& w) {
    const int64_t H = 6, W = 10, OH = out_size(H, 3, 1, 2, 1, false), OW = out_size(W, 3, 1, 2, 1, false);
    const auto wv = values_of(w[0]);
    std::vector<double> g(static_cast<std::size_t>(in[0].numel()), 0.0);
    for (int64_t pl = 0; pl < 2; ++pl)
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow)
          for (int64_t i = 0; i < 3; ++i)
            for (int64_t j = 0; j < 3; ++j) {
              const int64_t h = oh * 2 - 1 + i, x = ow * 2 - 1 + j;
              if (h < 0 || h >= H || x < 0 || x >= W) continue;
              g[(pl * H + h) * W + x] += wv[(pl * OH + oh) * OW + ow] / 9.0;  // count_include_pad
            }
    return TensorList{from_values(g, in[0].sizes())};
  };
  return c;
}());

STRATA_REGISTER_CASE(max_case("max_pool2d/basic", {2, 3, 6, 6}, {},
                              [](Generator& g) { return TensorList{randn32({64, 64, 32, 32}, g)}; }));
STRATA_REGISTER_CASE(max_case("max_pool2d/padding", {2, 2, 7, 7}, {.k = {3, 3}, .s = {2, 2}, .p = {1, 1}}));
STRATA_REGISTER_CASE(max_case("max_pool2d/ceil_mode", {1, 3, 7, 7}, {.k = {2, 2}, .s = {2, 2}, .ceil_mode = true}));
STRATA_REGISTER_CASE(max_case("max_pool2d/ceil_mode_padding", {1, 2, 8, 8},
                              {.k = {3, 3}, .s = {2, 2}, .p = {1, 1}, .ceil_mode = true}));
STRATA_REGISTER_CASE(max_case("max_pool2d/dilation", {1, 2, 8, 7}, {.k = {2, 3}, .s = {1, 2}, .d = {2, 1}}));
STRATA_REGISTER_CASE(max_case("max_pool2d/unbatched", {3, 6, 5}, {.k = {2, 2}, .s = {1, 1}}));

// Stride omitted: defaults to the kernel size.
STRATA_REGISTER_CASE(OpCase{
    .name = "max_pool2d/default_stride",
    .op = OpKind::max_pool2d,
    .inputs = [](Generator& g) { return TensorList{distinct64({2, 2, 6, 9}, g)}; },
    .run = [](const TensorList& in) { return TensorList{max_pool2d(in[0], {3})}; },
    .reference = [](const TensorList& in) { return TensorList{pool_reference(in[0], {.k = {3, 3}, .s = {3, 3}}, 0)}; },
    .grad_inputs = {0},
});

STRATA_REGISTER_CASE(avg_case("avg_pool2d/basic", {2, 3, 6, 6}, {},
                              [](Generator& g) { return TensorList{randn32({64, 64, 32, 32}, g)}; }));
STRATA_REGISTER_CASE(avg_case("avg_pool2d/padding", {2, 2, 7, 7}, {.k = {3, 3}, .s = {2, 2}, .p = {1, 1}}));
STRATA_REGISTER_CASE(avg_case("avg_pool2d/no_count_pad", {2, 2, 7, 7},
                              {.k = {3, 3}, .s = {2, 2}, .p = {1, 1}, .count_include_pad = false}));
STRATA_REGISTER_CASE(avg_case("avg_pool2d/ceil_mode", {1, 2, 8, 8},
                              {.k = {3, 3}, .s = {2, 2}, .p = {1, 1}, .ceil_mode = true}));
STRATA_REGISTER_CASE(avg_case("avg_pool2d/ceil_no_count_pad", {1, 3, 7, 6},
                              {.k = {2, 3}, .s = {2, 2}, .p = {1, 1}, .ceil_mode = true, .count_include_pad = false}));
// One window covering the whole plane (the global-pooling kernel path), with padding counted in
// the divisor or not; the 5x7 plane (35 values) also exercises the row sum's tail.
STRATA_REGISTER_CASE(avg_case("avg_pool2d/whole_plane_padded", {2, 3, 3, 3}, {.k = {4, 4}, .s = {2, 2}, .p = {1, 1}}));
STRATA_REGISTER_CASE(avg_case("avg_pool2d/whole_plane_no_count_pad", {2, 3, 3, 3},
                              {.k = {4, 4}, .s = {2, 2}, .p = {1, 1}, .count_include_pad = false}));
STRATA_REGISTER_CASE(avg_case("avg_pool2d/whole_plane_long_row", {2, 2, 5, 7}, {.k = {5, 7}, .s = {1, 1}}));
STRATA_REGISTER_CASE(avg_case("avg_pool2d/unbatched", {3, 5, 6}, {.k = {2, 2}, .s = {1, 2}}));

Tensor adaptive_reference(const Tensor& x, int64_t OH, int64_t OW) {
  const int64_t H = x.size(-2), W = x.size(-1), planes = x.numel() / (H * W);
  const auto xv = values_of(x);
  std::vector<double> y(planes * OH * OW);
  for (int64_t pl = 0; pl < planes; ++pl)
    for (int64_t i = 0; i < OH; ++i)
      for (int64_t j = 0; j < OW; ++j) {
        const int64_t h0 = int64_t(std::floor(double(i * H) / OH)), h1 = int64_t(std::ceil(double((i + 1) * H) / OH));
        const int64_t w0 = int64_t(std::floor(double(j * W) / OW)), w1 = int64_t(std::ceil(double((j + 1) * W) / OW));
        double s = 0;
        for (int64_t h = h0; h < h1; ++h)
          for (int64_t w = w0; w < w1; ++w) s += xv[(pl * H + h) * W + w];
        y[(pl * OH + i) * OW + j] = s / double((h1 - h0) * (w1 - w0));
      }
  Dims s = x.sizes();
  s[s.size() - 2] = OH;
  s[s.size() - 1] = OW;
  return from_values(y, s);
}

OpCase adaptive_case(std::string name, Dims xs, std::vector<int64_t> out,
                     std::function<TensorList(Generator&)> bench = nullptr) {
  const int64_t oh = out[0], ow = out.size() > 1 ? out[1] : out[0];
  return OpCase{
      .name = std::move(name),
      .op = OpKind::adaptive_avg_pool2d,
      .inputs = [xs](Generator& g) { return TensorList{uniform64(xs, g)}; },
      .run = [out](const TensorList& in) { return TensorList{adaptive_avg_pool2d(in[0], out)}; },
      .reference = [oh, ow](const TensorList& in) { return TensorList{adaptive_reference(in[0], oh, ow)}; },
      .grad_inputs = {0},
      .bench_inputs = std::move(bench),
  };
}

STRATA_REGISTER_CASE(adaptive_case("adaptive_avg_pool2d/global", {2, 5, 4, 4}, {1},
                                   [](Generator& g) { return TensorList{randn32({64, 512, 4, 4}, g)}; }));
STRATA_REGISTER_CASE(adaptive_case("adaptive_avg_pool2d/non_divisible", {2, 3, 7, 5}, {3, 2}));
STRATA_REGISTER_CASE(adaptive_case("adaptive_avg_pool2d/upsampling", {1, 2, 3, 2}, {5, 4}));
STRATA_REGISTER_CASE(adaptive_case("adaptive_avg_pool2d/unbatched", {3, 6, 6}, {4, 3}));

Tensor f32(IntArrayRef sizes) { return zeros(sizes, {DType::f32, nullptr}); }

STRATA_REGISTER_CASE(BadInputCase{
    .name = "max_pool2d/zero_kernel",
    .op = OpKind::max_pool2d,
    .call = [] { max_pool2d(f32({1, 2, 4, 4}), {0, 2}); },
    .expect = {"max_pool2d", "kernel_size must be positive"},
});
STRATA_REGISTER_CASE(BadInputCase{
    .name = "max_pool2d/negative_stride",
    .op = OpKind::max_pool2d,
    .call = [] { max_pool2d(f32({1, 2, 4, 4}), {2, 2}, {-1, 2}); },
    .expect = {"max_pool2d", "stride must be positive"},
});
STRATA_REGISTER_CASE(BadInputCase{
    .name = "max_pool2d/padding_too_large",
    .op = OpKind::max_pool2d,
    .call = [] { max_pool2d(f32({1, 2, 4, 4}), {2, 2}, {2, 2}, {2, 2}); },
    .expect = {"max_pool2d", "at most half the kernel size"},
});
STRATA_REGISTER_CASE(BadInputCase{
    .name = "max_pool2d/zero_dilation",
    .op = OpKind::max_pool2d,
    .call = [] { max_pool2d(f32({1, 2, 4, 4}), {2, 2}, {}, {0, 0}, {0, 1}); },
    .expect = {"max_pool2d", "dilation must be positive"},
});
STRATA_REGISTER_CASE(BadInputCase{
    .name = "max_pool2d/output_empty",
    .op = OpKind::max_pool2d,
    .call = [] { max_pool2d(f32({1, 2, 2, 2}), {3, 3}); },
    .expect = {"max_pool2d", "not positive", "Tensor[1, 2, 2, 2] f32"},
});
STRATA_REGISTER_CASE(BadInputCase{
    .name = "max_pool2d/rank",
    .op = OpKind::max_pool2d,
    .call = [] { max_pool2d(f32({4, 4}), {2, 2}); },
    .expect = {"max_pool2d", "3-D", "Tensor[4, 4] f32"},
});
STRATA_REGISTER_CASE(BadInputCase{
    .name = "max_pool2d/integer_input",
    .op = OpKind::max_pool2d,
    .call = [] { max_pool2d(zeros({1, 2, 4, 4}, {DType::i64, nullptr}), {2, 2}); },
    .expect = {"max_pool2d", "Tensor[1, 2, 4, 4] i64", "f32 or f64"},
});
STRATA_REGISTER_CASE(BadInputCase{
    .name = "avg_pool2d/zero_kernel",
    .op = OpKind::avg_pool2d,
    .call = [] { avg_pool2d(f32({1, 2, 4, 4}), {2, 0}); },
    .expect = {"avg_pool2d", "kernel_size must be positive"},
});
STRATA_REGISTER_CASE(BadInputCase{
    .name = "avg_pool2d/zero_stride",
    .op = OpKind::avg_pool2d,
    .call = [] { avg_pool2d(f32({1, 2, 4, 4}), {2, 2}, {0}); },
    .expect = {"avg_pool2d", "stride must be positive"},
});
STRATA_REGISTER_CASE(BadInputCase{
    .name = "avg_pool2d/padding_too_large",
    .op = OpKind::avg_pool2d,
    .call = [] { avg_pool2d(f32({1, 2, 4, 4}), {3, 3}, {1, 1}, {2, 2}); },
    .expect = {"avg_pool2d", "at most half the kernel size"},
});
STRATA_REGISTER_CASE(BadInputCase{
    .name = "avg_pool2d/output_empty",
    .op = OpKind::avg_pool2d,
    .call = [] { avg_pool2d(f32({2, 2, 2}), {3, 3}); },
    .expect = {"avg_pool2d", "not positive", "Tensor[2, 2, 2] f32"},
});
STRATA_REGISTER_CASE(BadInputCase{
    .name = "avg_pool2d/rank",
    .op = OpKind::avg_pool2d,
    .call = [] { avg_pool2d(f32({1, 1, 2, 4, 4}), {2, 2}); },
    .expect = {"avg_pool2d", "3-D", "Tensor[1, 1, 2, 4, 4] f32"},
});
STRATA_REGISTER_CASE(BadInputCase{
    .name = "avg_pool2d/integer_input",
    .op = OpKind::avg_pool2d,
    .call = [] { avg_pool2d(zeros({1, 2, 4, 4}, {DType::i32, nullptr}), {2, 2}); },
    .expect = {"avg_pool2d", "Tensor[1, 2, 4, 4] i32", "f32 or f64"},
});
STRATA_REGISTER_CASE(BadInputCase{
    .name = "adaptive_avg_pool2d/zero_output",
    .op = OpKind::adaptive_avg_pool2d,
    .call = [] { adaptive_avg_pool2d(f32({1, 2, 4, 4}), {0, 2}); },
    .expect = {"adaptive_avg_pool2d", "output_size must be positive"},
});
STRATA_REGISTER_CASE(BadInputCase{
    .name = "adaptive_avg_pool2d/three_sizes",
    .op = OpKind::adaptive_avg_pool2d,
    .call = [] { adaptive_avg_pool2d(f32({1, 2, 4, 4}), {1, 2, 3}); },
    .expect = {"adaptive_avg_pool2d", "1 or 2 elements"},
});
STRATA_REGISTER_CASE(BadInputCase{
    .name = "adaptive_avg_pool2d/rank",
    .op = OpKind::adaptive_avg_pool2d,
    .call = [] { adaptive_avg_pool2d(f32({8}), {1}); },
    .expect = {"adaptive_avg_pool2d", "3-D", "Tensor[8] f32"},
});
STRATA_REGISTER_CASE(BadInputCase{
    .name = "adaptive_avg_pool2d/integer_input",
    .op = OpKind::adaptive_avg_pool2d,
    .call = [] { adaptive_avg_pool2d(zeros({1, 2, 4, 4}, {DType::i64, nullptr}), {1}); },
    .expect = {"adaptive_avg_pool2d", "Tensor[1, 2, 4, 4] i64", "f32 or f64"},
});

}  // namespace
}  // namespace strata::testing
