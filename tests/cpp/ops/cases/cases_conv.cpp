// Harness cases for ops/conv.h. The tiny cases run the own (im2col + GEMM) kernels under the
// default size heuristic; tests/cpp/ops/test_conv.cpp reruns every case below on the oneDNN
// primitive path too.

#include "ops/conv.h"

#include <array>

#include "tests/cpp/ops/harness/op_harness.h"

namespace strata::testing {
namespace {

struct ConvAttrs {
  std::vector<int64_t> stride{1, 1}, padding{0, 0}, dilation{1, 1};
  int64_t groups = 1;
};

/// Naive f64 conv2d over plain loops (x 4-D or 3-D, bias optional).
Tensor conv_reference(const Tensor& x, const Tensor& w, const Tensor& b, const ConvAttrs& a) {
  const bool batched = x.dim() == 4;
  const int64_t N = batched ? x.size(0) : 1, C = x.size(-3), H = x.size(-2), W = x.size(-1);
  const int64_t O = w.size(0), Cg = w.size(1), KH = w.size(2), KW = w.size(3), Og = O / a.groups;
  const int64_t OH = (H + 2 * a.padding[0] - a.dilation[0] * (KH - 1) - 1) / a.stride[0] + 1;
  const int64_t OW = (W + 2 * a.padding[1] - a.dilation[1] * (KW - 1) - 1) / a.stride[1] + 1;
  const auto xv = values_of(x), wv = values_of(w);
  const auto bv = b.defined() ? values_of(b) : std::vector<double>(O, 0.0);
  std::vector<double> y(N * O * OH * OW);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < O; ++o)
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          double acc = bv[o];
          const int64_t g = o / Og;
          for (int64_t c = 0; c < Cg; ++c)
            for (int64_t kh = 0; kh < KH; ++kh)
              for (int64_t kw = 0; kw < KW; ++kw) {
                const int64_t ih = oh * a.stride[0] - a.padding[0] + kh * a.dilation[0];
                const int64_t iw = ow * a.stride[1] - a.padding[1] + kw * a.dilation[1];
                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                acc += xv[((n * C + g * Cg + c) * H + ih) * W + iw] * wv[((o * Cg + c) * KH + kh) * KW + kw];
              }
          y[((n * O + o) * OH + oh) * OW + ow] = acc;
        }
  return from_values(y, batched ? Dims{N, O, OH, OW} : Dims{O, OH, OW});
}

/// A conv2d case: inputs x, w and (if `bias`) b. With `split`, the op is conv2d as its two
/// rematerialization steps (Note [Conv backward in two steps]): conv2d_data_step, then
/// conv2d_weight_step on its output.
OpCase conv_case(std::string name, Dims xs, Dims ws, ConvAttrs a, bool bias,
                 std::function<TensorList(Generator&)> bench = nullptr, bool split = false) {
  const int64_t O = ws[0];
  OpCase c{
      .name = std::move(name),
      .op = OpKind::conv2d,
      .inputs =
          [xs, ws, O, bias](Generator& g) {
            TensorList in{uniform64(xs, g), uniform64(ws, g)};
            if (bias) in.push_back(uniform64({O}, g));
            return in;
          },
      .run =
          [a, split](const TensorList& in) {
            const Tensor b = in.size() > 2 ? in[2] : Tensor();
            if (split) {
              const Tensor y = conv2d_data_step(in[0], in[1], b, a.stride, a.padding, a.dilation, a.groups);
              return TensorList{conv2d_weight_step(y, in[0], in[1], b, a.stride, a.padding, a.dilation, a.groups)};
            }
            return TensorList{conv2d(in[0], in[1], b, a.stride, a.padding, a.dilation, a.groups)};
          },
      .reference =
          [a](const TensorList& in) {
            return TensorList{conv_reference(in[0], in[1], in.size() > 2 ? in[2] : Tensor(), a)};
          },
      .grad_inputs = bias ? std::vector<int>{0, 1, 2} : std::vector<int>{0, 1},
      .bench_inputs = std::move(bench),
  };
  return c;
}

STRATA_REGISTER_CASE(conv_case("conv2d/basic", {2, 4, 5, 5}, {3, 4, 3, 3}, {.padding = {1, 1}}, true, [](Generator& g) {
  return TensorList{randn32({64, 64, 32, 32}, g), randn32({64, 64, 3, 3}, g), randn32({64}, g)};
}));
STRATA_REGISTER_CASE(conv_case("conv2d/first_layer", {2, 3, 6, 6}, {4, 3, 3, 3}, {.padding = {1, 1}}, true,
                               [](Generator& g) {
                                 return TensorList{randn32({128, 3, 32, 32}, g), randn32({64, 3, 3, 3}, g),
                                                   randn32({64}, g)};
                               }));
STRATA_REGISTER_CASE(conv_case("conv2d/no_padding", {2, 3, 5, 5}, {4, 3, 3, 3}, {}, true));
STRATA_REGISTER_CASE(conv_case("conv2d/no_bias", {2, 4, 5, 5}, {3, 4, 3, 3}, {.padding = {1, 1}}, false));
STRATA_REGISTER_CASE(conv_case("conv2d/stride2", {2, 3, 7, 7}, {4, 3, 3, 3}, {.stride = {2, 2}, .padding = {1, 1}},
                               true));
STRATA_REGISTER_CASE(conv_case("conv2d/stride_rect", {2, 3, 6, 7}, {4, 3, 2, 3}, {.stride = {1, 2}, .padding = {0, 1}},
                               true));
STRATA_REGISTER_CASE(conv_case("conv2d/padding_asym", {1, 3, 5, 6}, {4, 3, 3, 3}, {.padding = {2, 1}}, true));
STRATA_REGISTER_CASE(conv_case("conv2d/dilation2", {2, 2, 7, 7}, {3, 2, 3, 3}, {.padding = {1, 1}, .dilation = {2, 2}},
                               true));
STRATA_REGISTER_CASE(conv_case("conv2d/groups2", {2, 4, 5, 5}, {6, 2, 3, 3}, {.padding = {1, 1}, .groups = 2}, true));
STRATA_REGISTER_CASE(conv_case("conv2d/depthwise", {2, 4, 5, 5}, {4, 1, 3, 3}, {.padding = {1, 1}, .groups = 4}, true));
STRATA_REGISTER_CASE(conv_case("conv2d/pointwise", {2, 4, 5, 5}, {6, 4, 1, 1}, {}, true));
STRATA_REGISTER_CASE(conv_case("conv2d/pointwise_stride2", {2, 4, 5, 5}, {3, 4, 1, 1}, {.stride = {2, 2}}, false));
STRATA_REGISTER_CASE(conv_case("conv2d/unbatched", {3, 5, 5}, {4, 3, 3, 3}, {.padding = {1, 1}}, true));
STRATA_REGISTER_CASE(conv_case("conv2d/split_steps", {2, 4, 5, 5}, {3, 4, 3, 3}, {.padding = {1, 1}}, true, nullptr,
                               true));
STRATA_REGISTER_CASE(conv_case("conv2d/split_steps_groups_stride", {2, 4, 7, 7}, {6, 2, 3, 3},
                               {.stride = {2, 2}, .padding = {1, 1}, .groups = 2}, false, nullptr, true));
STRATA_REGISTER_CASE(conv_case("conv2d/split_steps_unbatched", {3, 5, 5}, {4, 3, 3, 3}, {.padding = {1, 1}}, true,
                               nullptr, true));

// One-element attribute lists mean "both dims".
STRATA_REGISTER_CASE(OpCase{
    .name = "conv2d/scalar_lists",
    .op = OpKind::conv2d,
    .inputs = [](Generator& g) { return TensorList{uniform64({2, 2, 7, 7}, g), uniform64({3, 2, 3, 3}, g)}; },
    .run = [](const TensorList& in) { return TensorList{conv2d(in[0], in[1], Tensor(), {2}, {1}, {2})}; },
    .reference =
        [](const TensorList& in) {
          return TensorList{
              conv_reference(in[0], in[1], Tensor(), {.stride = {2, 2}, .padding = {1, 1}, .dilation = {2, 2}})};
        },
    .grad_inputs = {0, 1},
});

Tensor f32(IntArrayRef sizes) { return zeros(sizes, {DType::f32, nullptr}); }

STRATA_REGISTER_CASE(BadInputCase{
    .name = "conv2d/channel_mismatch",
    .op = OpKind::conv2d,
    .call = [] { conv2d(f32({2, 4, 5, 5}), f32({6, 3, 3, 3})); },
    .expect = {"conv2d", "Tensor[2, 4, 5, 5] f32", "Tensor[6, 3, 3, 3] f32", "channels"},
});
STRATA_REGISTER_CASE(BadInputCase{
    .name = "conv2d/groups_not_dividing_input",
    .op = OpKind::conv2d,
    .call = [] { conv2d(f32({2, 4, 5, 5}), f32({6, 2, 3, 3}), Tensor(), {1, 1}, {0, 0}, {1, 1}, 3); },
    .expect = {"conv2d", "groups=3", "does not divide", "Tensor[2, 4, 5, 5] f32"},
});
STRATA_REGISTER_CASE(BadInputCase{
    .name = "conv2d/groups_not_dividing_output",
    .op = OpKind::conv2d,
    .call = [] { conv2d(f32({2, 4, 5, 5}), f32({5, 2, 3, 3}), Tensor(), {1, 1}, {0, 0}, {1, 1}, 2); },
    .expect = {"conv2d", "groups=2", "does not divide", "Tensor[5, 2, 3, 3] f32"},
});
STRATA_REGISTER_CASE(BadInputCase{
    .name = "conv2d/zero_groups",
    .op = OpKind::conv2d,
    .call = [] { conv2d(f32({2, 4, 5, 5}), f32({6, 4, 3, 3}), Tensor(), {1, 1}, {0, 0}, {1, 1}, 0); },
    .expect = {"conv2d", "groups must be positive"},
});
STRATA_REGISTER_CASE(BadInputCase{
    .name = "conv2d/zero_stride",
    .op = OpKind::conv2d,
    .call = [] { conv2d(f32({2, 4, 5, 5}), f32({6, 4, 3, 3}), Tensor(), {0, 1}); },
    .expect = {"conv2d", "stride must be positive"},
});
STRATA_REGISTER_CASE(BadInputCase{
    .name = "conv2d/negative_padding",
    .op = OpKind::conv2d,
    .call = [] { conv2d(f32({2, 4, 5, 5}), f32({6, 4, 3, 3}), Tensor(), {1, 1}, {-1}); },
    .expect = {"conv2d", "padding must be non-negative"},
});
STRATA_REGISTER_CASE(BadInputCase{
    .name = "conv2d/zero_dilation",
    .op = OpKind::conv2d,
    .call = [] { conv2d(f32({2, 4, 5, 5}), f32({6, 4, 3, 3}), Tensor(), {1, 1}, {0, 0}, {0, 1}); },
    .expect = {"conv2d", "dilation must be positive"},
});
STRATA_REGISTER_CASE(BadInputCase{
    .name = "conv2d/three_strides",
    .op = OpKind::conv2d,
    .call = [] { conv2d(f32({2, 4, 5, 5}), f32({6, 4, 3, 3}), Tensor(), {1, 1, 1}); },
    .expect = {"conv2d", "stride must have 1 or 2 elements"},
});
STRATA_REGISTER_CASE(BadInputCase{
    .name = "conv2d/output_too_small",
    .op = OpKind::conv2d,
    .call = [] { conv2d(f32({1, 1, 2, 2}), f32({1, 1, 3, 3})); },
    .expect = {"conv2d", "output size", "Tensor[1, 1, 2, 2] f32", "Tensor[1, 1, 3, 3] f32"},
});
STRATA_REGISTER_CASE(BadInputCase{
    .name = "conv2d/input_rank",
    .op = OpKind::conv2d,
    .call = [] { conv2d(f32({4, 5}), f32({6, 4, 3, 3})); },
    .expect = {"conv2d", "input must be 3-D", "Tensor[4, 5] f32"},
});
STRATA_REGISTER_CASE(BadInputCase{
    .name = "conv2d/weight_rank",
    .op = OpKind::conv2d,
    .call = [] { conv2d(f32({2, 4, 5, 5}), f32({6, 4, 3})); },
    .expect = {"conv2d", "weight must be 4-D", "Tensor[6, 4, 3] f32"},
});
STRATA_REGISTER_CASE(BadInputCase{
    .name = "conv2d/bias_shape",
    .op = OpKind::conv2d,
    .call = [] { conv2d(f32({2, 4, 5, 5}), f32({6, 4, 3, 3}), f32({5})); },
    .expect = {"conv2d", "bias", "Tensor[5] f32", "Tensor[6, 4, 3, 3] f32"},
});
STRATA_REGISTER_CASE(BadInputCase{
    .name = "conv2d/integer_input",
    .op = OpKind::conv2d,
    .call = [] { conv2d(zeros({2, 4, 5, 5}, {DType::i64, nullptr}), f32({6, 4, 3, 3})); },
    .expect = {"conv2d", "Tensor[2, 4, 5, 5] i64", "f32 or f64"},
});
STRATA_REGISTER_CASE(BadInputCase{
    .name = "conv2d/integer_weight",
    .op = OpKind::conv2d,
    .call = [] { conv2d(f32({2, 4, 5, 5}), zeros({6, 4, 3, 3}, {DType::i32, nullptr})); },
    .expect = {"conv2d", "Tensor[6, 4, 3, 3] i32", "f32 or f64"},
});

}  // namespace
}  // namespace strata::testing
