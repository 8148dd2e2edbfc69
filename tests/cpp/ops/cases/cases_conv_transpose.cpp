// Harness cases for conv1d and conv_transpose2d (ops/conv.h; issue 26 part 7).

#include <string>

#include "ops/conv.h"
#include "tests/cpp/ops/harness/op_harness.h"

namespace strata::testing {
namespace {

struct Conv1dAttrs {
  int64_t stride = 1, padding = 0, dilation = 1, groups = 1;
  bool same = false;  // padding="same"
};

/// Naive f64 conv1d (x 3-D or 2-D; 'same' pads dilation·(K − 1) split as PyTorch, odd on the right).
Tensor conv1d_reference(const Tensor& x, const Tensor& w, const Tensor& b, const Conv1dAttrs& a) {
  const bool batched = x.dim() == 3;
  const int64_t N = batched ? x.size(0) : 1, C = x.size(-2), L = x.size(-1);
  const int64_t O = w.size(0), Cg = w.size(1), K = w.size(2), Og = O / a.groups;
  const int64_t left = a.same ? a.dilation * (K - 1) / 2 : a.padding;
  const int64_t OL = a.same ? L : (L + 2 * a.padding - a.dilation * (K - 1) - 1) / a.stride + 1;
  const auto xv = values_of(x), wv = values_of(w);
  const auto bv = b.defined() ? values_of(b) : std::vector<double>(O, 0.0);
  std::vector<double> y(N * O * OL);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < O; ++o)
      for (int64_t ol = 0; ol < OL; ++ol) {
        double acc = bv[o];
        for (int64_t c = 0; c < Cg; ++c)
          for (int64_t k = 0; k < K; ++k) {
            const int64_t il = ol * a.stride - left + k * a.dilation;
            if (il >= 0 && il < L) acc += xv[(n * C + o / Og * Cg + c) * L + il] * wv[(o * Cg + c) * K + k];
          }
        y[(n * O + o) * OL + ol] = acc;
      }
  return from_values(y, batched ? Dims{N, O, OL} : Dims{O, OL});
}

OpCase conv1d_case(std::string name, Dims xs, Dims ws, Conv1dAttrs a, bool bias) {
  const int64_t O = ws[0];
  return OpCase{
      .name = "conv1d/" + std::move(name),
      .op = OpKind::conv1d,
      .inputs =
          [xs, ws, O, bias](Generator& g) {
            TensorList in{uniform64(xs, g), uniform64(ws, g)};
            if (bias) in.push_back(uniform64({O}, g));
            return in;
          },
      .run =
          [a](const TensorList& in) {
            const Tensor b = in.size() > 2 ? in[2] : Tensor();
            if (a.same) return TensorList{conv1d(in[0], in[1], b, {1}, "same", {a.dilation}, a.groups)};
            return TensorList{conv1d(in[0], in[1], b, {a.stride}, {a.padding}, {a.dilation}, a.groups)};
          },
      .reference =
          [a](const TensorList& in) {
            return TensorList{conv1d_reference(in[0], in[1], in.size() > 2 ? in[2] : Tensor(), a)};
          },
      .grad_inputs = bias ? std::vector<int>{0, 1, 2} : std::vector<int>{0, 1},
  };
}

const bool conv1d_registered = [] {
  op_cases().push_back(conv1d_case("basic", {2, 3, 9}, {4, 3, 3}, {}, true));
  op_cases().push_back(
      conv1d_case("stride_pad_dilation", {2, 2, 11}, {3, 2, 3}, {.stride = 2, .padding = 2, .dilation = 2}, true));
  op_cases().push_back(conv1d_case("groups_no_bias", {2, 4, 7}, {6, 2, 2}, {.groups = 2}, false));
  op_cases().push_back(conv1d_case("unbatched", {3, 8}, {2, 3, 3}, {.padding = 1}, true));
  op_cases().push_back(conv1d_case("same_even_kernel", {2, 3, 6}, {2, 3, 4}, {.same = true}, true));
  op_cases().push_back(conv1d_case("same_dilated", {1, 2, 7}, {2, 2, 3}, {.dilation = 2, .same = true}, false));
  return true;
}();

STRATA_REGISTER_CASE(BadInputCase{
    .name = "conv1d/input_rank",
    .op = OpKind::conv1d,
    .call = [] { conv1d(zeros({2, 3, 4, 5}), zeros({4, 3, 2})); },
    .expect = {"conv1d", "2-D (unbatched) or 3-D (batched) input"},
});
STRATA_REGISTER_CASE(BadInputCase{
    .name = "conv1d/same_strided",
    .op = OpKind::conv1d,
    .call = [] { conv1d(zeros({2, 3, 5}), zeros({4, 3, 2}), {}, {2}, "same"); },
    .expect = {"conv1d", "padding='same' is not supported for strided convolutions"},
});
STRATA_REGISTER_CASE(BadInputCase{
    .name = "conv1d/bad_padding_string",
    .op = OpKind::conv1d,
    .call = [] { conv1d(zeros({2, 3, 5}), zeros({4, 3, 2}), {}, {1}, "full"); },
    .expect = {"conv1d", "invalid padding string 'full'"},
});

// ---- conv_transpose2d ---------------------------------------------------------------------------

struct ConvTAttrs {
  int64_t stride[2] = {1, 1}, padding[2] = {0, 0}, output_padding[2] = {0, 0}, dilation[2] = {1, 1};
  int64_t groups = 1;
};

/// Naive f64 conv_transpose2d: every input element scatters x · w into the output.
Tensor conv_t_reference(const Tensor& x, const Tensor& w, const Tensor& b, const ConvTAttrs& a) {
  const bool batched = x.dim() == 4;
  const int64_t N = batched ? x.size(0) : 1, Ci = x.size(-3), H = x.size(-2), W = x.size(-1);
  const int64_t Cog = w.size(1), KH = w.size(2), KW = w.size(3), Co = Cog * a.groups, Cig = Ci / a.groups;
  const int64_t OH = (H - 1) * a.stride[0] - 2 * a.padding[0] + a.dilation[0] * (KH - 1) + a.output_padding[0] + 1;
  const int64_t OW = (W - 1) * a.stride[1] - 2 * a.padding[1] + a.dilation[1] * (KW - 1) + a.output_padding[1] + 1;
  const auto xv = values_of(x), wv = values_of(w);
  std::vector<double> y(N * Co * OH * OW, 0.0);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t ci = 0; ci < Ci; ++ci)
      for (int64_t ih = 0; ih < H; ++ih)
        for (int64_t iw = 0; iw < W; ++iw)
          for (int64_t co = 0; co < Cog; ++co)
            for (int64_t kh = 0; kh < KH; ++kh)
              for (int64_t kw = 0; kw < KW; ++kw) {
                const int64_t oh = ih * a.stride[0] - a.padding[0] + kh * a.dilation[0];
                const int64_t ow = iw * a.stride[1] - a.padding[1] + kw * a.dilation[1];
                if (oh < 0 || oh >= OH || ow < 0 || ow >= OW) continue;
                const int64_t oc = ci / Cig * Cog + co;
                y[((n * Co + oc) * OH + oh) * OW + ow] +=
                    xv[((n * Ci + ci) * H + ih) * W + iw] * wv[((ci * Cog + co) * KH + kh) * KW + kw];
              }
  if (b.defined()) {
    const auto bv = values_of(b);
    for (int64_t i = 0; i < static_cast<int64_t>(y.size()); ++i) y[i] += bv[i / (OH * OW) % Co];
  }
  return from_values(y, batched ? Dims{N, Co, OH, OW} : Dims{Co, OH, OW});
}

OpCase conv_t_case(std::string name, Dims xs, Dims ws, ConvTAttrs a, bool bias) {
  const int64_t Co = ws[1] * a.groups;
  return OpCase{
      .name = "conv_transpose2d/" + std::move(name),
      .op = OpKind::conv_transpose2d,
      .inputs =
          [xs, ws, Co, bias](Generator& g) {
            TensorList in{uniform64(xs, g), uniform64(ws, g)};
            if (bias) in.push_back(uniform64({Co}, g));
            return in;
          },
      .run =
          [a](const TensorList& in) {
            return TensorList{conv_transpose2d(in[0], in[1], in.size() > 2 ? in[2] : Tensor(),
                                               {a.stride[0], a.stride[1]}, {a.padding[0], a.padding[1]},
                                               {a.output_padding[0], a.output_padding[1]}, a.groups,
                                               {a.dilation[0], a.dilation[1]})};
          },
      .reference =
          [a](const TensorList& in) {
            return TensorList{conv_t_reference(in[0], in[1], in.size() > 2 ? in[2] : Tensor(), a)};
          },
      .grad_inputs = bias ? std::vector<int>{0, 1, 2} : std::vector<int>{0, 1},
  };
}

const bool conv_t_registered = [] {
  op_cases().push_back(conv_t_case("basic", {2, 3, 4, 4}, {3, 2, 3, 3}, {}, true));
  op_cases().push_back(conv_t_case("stride_pad_output_padding", {2, 2, 3, 4}, {2, 3, 3, 2},
                                   {.stride = {2, 2}, .padding = {1, 0}, .output_padding = {1, 1}}, true));
  op_cases().push_back(conv_t_case("groups_dilation", {1, 4, 3, 3}, {4, 1, 2, 3},
                                   {.stride = {1, 2}, .dilation = {2, 1}, .groups = 2}, false));
  // output_padding reaching the stride (allowed below the dilation): the own kernels only.
  op_cases().push_back(conv_t_case("output_padding_below_dilation", {1, 2, 3, 3}, {2, 2, 2, 2},
                                   {.output_padding = {1, 1}, .dilation = {2, 2}}, true));
  op_cases().push_back(conv_t_case("unbatched", {2, 3, 3}, {2, 2, 2, 2}, {.stride = {2, 2}}, true));
  return true;
}();

STRATA_REGISTER_CASE(BadInputCase{
    .name = "conv_transpose2d/output_padding_too_large",
    .op = OpKind::conv_transpose2d,
    .call = [] { conv_transpose2d(zeros({1, 3, 4, 4}), zeros({3, 2, 3, 3}), {}, {2, 2}, {0, 0}, {2, 2}); },
    .expect = {"conv_transpose2d", "output padding must be smaller than either stride or dilation"},
});
STRATA_REGISTER_CASE(BadInputCase{
    .name = "conv_transpose2d/channels",
    .op = OpKind::conv_transpose2d,
    .call = [] { conv_transpose2d(zeros({1, 4, 4, 4}), zeros({3, 2, 3, 3})); },
    .expect = {"conv_transpose2d", "expects 3 input channels", "[1, 4, 4, 4]"},
});
STRATA_REGISTER_CASE(BadInputCase{
    .name = "conv_transpose2d/input_rank",
    .op = OpKind::conv_transpose2d,
    .call = [] { conv_transpose2d(zeros({1, 3, 4, 4, 1}), zeros({3, 2, 3, 3})); },
    .expect = {"conv_transpose2d", "3-D (unbatched) or 4-D (batched) input"},
});

}  // namespace
}  // namespace strata::testing
