// Harness cases for ops/indexing.h and ops/scatter.h. References index row-major f64 copies with
// plain loops. Index values are fixed (duplicates where the op sums them; unique per line where
// scatter overwrites, since PyTorch's gradient of an overwritten src element is not a derivative).

#include <algorithm>
#include <functional>
#include <vector>

#include "ops/comparison.h"
#include "ops/indexing.h"
#include "ops/scatter.h"
#include "ops/unary.h"
#include "tests/cpp/ops/harness/op_harness.h"

namespace strata::testing {
namespace {

using Index = std::vector<int64_t>;
using indexing::Slice;

Tensor mask_of(const std::vector<int>& bits, IntArrayRef sizes) {
  std::vector<double> v(bits.begin(), bits.end());
  return from_values(v, sizes).to(DType::boolean);
}

/// An f64 [rows, cols] tensor whose element (i, j) is f(i, j).
Tensor build2(int64_t rows, int64_t cols, const std::function<double(int64_t, int64_t)>& f) {
  std::vector<double> v;
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) v.push_back(f(i, j));
  return from_values(v, {rows, cols});
}

// ---- index ---------------------------------------------------------------------------------------

STRATA_REGISTER_CASE(with_bench_inputs(
    OpCase{
        .name = "index/adjacent_broadcast",
        .op = OpKind::index,
        .inputs =
            [](Generator& g) {
              return TensorList{uniform64({4, 5, 3}, g), from_indices({3, -1, 3}, {3}), from_indices({2, 0}, {2, 1})};
            },
        .run =
            [](const TensorList& in) {
              const TensorIndex ix[] = {Slice{}, in[1], in[2]};
              return TensorList{index(in[0], ix)};
            },
        .reference =
            [](const TensorList& in) {
              const auto x = values_of(in[0]);
              const Index t1 = indices_of(in[1]), t2 = indices_of(in[2]);
              std::vector<double> out;
              for (int64_t a = 0; a < 4; ++a)
                for (int64_t i = 0; i < 2; ++i)
                  for (int64_t j = 0; j < 3; ++j) {
                    const int64_t r = t1[j] < 0 ? t1[j] + 5 : t1[j];
                    out.push_back(x[static_cast<std::size_t>(a * 15 + r * 3 + t2[i])]);
                  }
              return TensorList{from_values(out, {4, 2, 3})};
            },
        .grad_inputs = {0},
    },
    [](Generator& g) {
      return TensorList{randn32({64, 512, 64}, g), randint64(0, 512, {256}, g), randint64(0, 64, {16, 1}, g)};
    }));

STRATA_REGISTER_CASE(OpCase{
    .name = "index/separated_by_slice_with_mask",
    .op = OpKind::index,
    .inputs =
        [](Generator& g) {
          return TensorList{uniform64({3, 4, 5}, g), from_indices({2, 0}, {2}), mask_of({0, 1, 0, 0, 1}, {5})};
        },
    .run =
        [](const TensorList& in) {
          const TensorIndex ix[] = {in[1], Slice{1, std::nullopt, 2}, in[2]};
          return TensorList{index(in[0], ix)};
        },
    .reference =
        [](const TensorList& in) {
          const auto x = values_of(in[0]);
          const Index t0 = indices_of(in[1]), nz = {1, 4};
          return TensorList{build2(2, 2, [&](int64_t b, int64_t s) {
            return x[static_cast<std::size_t>(t0[b] * 20 + (1 + 2 * s) * 5 + nz[b])];
          })};
        },
    .grad_inputs = {0},
});

STRATA_REGISTER_CASE(OpCase{
    .name = "index/none_ellipsis_i32_duplicates",
    .op = OpKind::index,
    .inputs =
        [](Generator& g) {
          return TensorList{uniform64({3, 4}, g), from_indices({1, 0, 3, 3}, {2, 2}).to(DType::i32)};
        },
    .run =
        [](const TensorList& in) {
          const TensorIndex ix[] = {indexing::None, indexing::Ellipsis, in[1]};
          return TensorList{index(in[0], ix)};
        },
    .reference =
        [](const TensorList& in) {
          const auto x = values_of(in[0]);
          const Index t = indices_of(in[1]);
          std::vector<double> out;
          for (int64_t a = 0; a < 3; ++a)
            for (int64_t k = 0; k < 4; ++k) out.push_back(x[static_cast<std::size_t>(a * 4 + t[k])]);
          return TensorList{from_values(out, {1, 3, 2, 2})};
        },
    .grad_inputs = {0},
});

// ---- index_put -----------------------------------------------------------------------------------

STRATA_REGISTER_CASE(with_bench_inputs(
    OpCase{
        .name = "index_put/accumulate_duplicates",
        .op = OpKind::index_put,
        .inputs =
            [](Generator& g) {
              return TensorList{uniform64({5, 3}, g), from_indices({1, 3, 1, 0}, {4}), uniform64({4, 3}, g)};
            },
        .run =
            [](const TensorList& in) {
              const TensorIndex ix[] = {in[1]};
              return TensorList{index_put(in[0], ix, in[2], true)};
            },
        .reference =
            [](const TensorList& in) {
              auto out = values_of(in[0]);
              const auto v = values_of(in[2]);
              const Index t = indices_of(in[1]);
              for (std::size_t k = 0; k < t.size(); ++k)
                for (int64_t c = 0; c < 3; ++c)
                  out[static_cast<std::size_t>(t[k] * 3 + c)] += v[k * 3 + static_cast<std::size_t>(c)];
              return TensorList{from_values(out, {5, 3})};
            },
        .grad_inputs = {0, 2},
    },
    [](Generator& g) {
      return TensorList{randn32({4096, 256}, g), randint64(0, 4096, {2048}, g), randn32({2048, 256}, g)};
    }));

STRATA_REGISTER_CASE(OpCase{
    .name = "index_put/broadcast_values",
    .op = OpKind::index_put,
    .inputs =
        [](Generator& g) { return TensorList{uniform64({4, 5}, g), from_indices({0, -2}, {2}), uniform64({4, 1}, g)}; },
    .run =
        [](const TensorList& in) {
          const TensorIndex ix[] = {Slice{}, in[1]};
          return TensorList{index_put(in[0], ix, in[2])};
        },
    .reference =
        [](const TensorList& in) {
          auto out = values_of(in[0]);
          const auto v = values_of(in[2]);
          for (int64_t a = 0; a < 4; ++a)
            for (int64_t c : {0, 3}) out[static_cast<std::size_t>(a * 5 + c)] = v[static_cast<std::size_t>(a)];
          return TensorList{from_values(out, {4, 5})};
        },
    .grad_inputs = {0, 2},
});

// ---- masked_fill / masked_select / nonzero ---------------------------------------------------------

STRATA_REGISTER_CASE(with_bench_inputs(
    OpCase{
        .name = "masked_fill/broadcast_mask",
        .op = OpKind::masked_fill,
        .inputs = [](Generator& g) { return TensorList{uniform64({3, 4}, g), mask_of({1, 0, 0, 1}, {4})}; },
        .run = [](const TensorList& in) { return TensorList{masked_fill(in[0], in[1], 0.5)}; },
        .reference =
            [](const TensorList& in) {
              const auto x = values_of(in[0]);
              return TensorList{build2(3, 4, [&](int64_t i, int64_t j) {
                return j == 0 || j == 3 ? 0.5 : x[static_cast<std::size_t>(i * 4 + j)];
              })};
            },
        .grad_inputs = {0},
    },
    [](Generator& g) { return TensorList{randn32({256, 4096}, g), gt(randn32({4096}, g), 0)}; }));

STRATA_REGISTER_CASE(with_bench_inputs(
    OpCase{
        .name = "masked_select/broadcast_input",
        .op = OpKind::masked_select,
        .inputs = [](Generator& g) { return TensorList{uniform64({4}, g), mask_of({1, 0, 1, 1, 0, 0, 0, 1}, {2, 4})}; },
        .run = [](const TensorList& in) { return TensorList{masked_select(in[0], in[1])}; },
        .reference =
            [](const TensorList& in) {
              const auto x = values_of(in[0]);
              return TensorList{from_values({x[0], x[2], x[3], x[3]}, {4})};
            },
        .grad_inputs = {0},
    },
    [](Generator& g) { return TensorList{randn32({4096}, g), gt(randn32({256, 4096}, g), 0)}; }));

STRATA_REGISTER_CASE(with_bench_inputs(
    OpCase{
        .name = "nonzero/with_zeros",
        .op = OpKind::nonzero,
        .inputs = [](Generator&) { return TensorList{from_values({0.0, 1.5, -0.0, 0.0, -2.0, 3.0}, {2, 3})}; },
        .run = [](const TensorList& in) { return TensorList{nonzero(in[0])}; },
        .reference = [](const TensorList&) { return TensorList{from_values({0, 1, 1, 1, 1, 2}, {3, 2})}; },
    },
    [](Generator& g) { return TensorList{relu(randn32({256, 4096}, g))}; }));

STRATA_REGISTER_CASE(OpCase{
    .name = "one_hot/inferred_classes",
    .op = OpKind::one_hot,
    .inputs = [](Generator&) { return TensorList{from_indices({2, 0, 3, 2}, {2, 2})}; },
    .run = [](const TensorList& in) { return TensorList{one_hot(in[0])}; },
    .reference =
        [](const TensorList&) {
          return TensorList{from_values({0, 0, 1, 0, 1, 0, 0, 0, 0, 0, 0, 1, 0, 0, 1, 0}, {2, 2, 4})};
        },
});

// ---- index_add / take_along_dim --------------------------------------------------------------------

STRATA_REGISTER_CASE(with_bench_inputs(
    OpCase{
        .name = "index_add/dim1_alpha_duplicates",
        .op = OpKind::index_add,
        .inputs =
            [](Generator& g) {
              return TensorList{uniform64({3, 4}, g), from_indices({3, 0, 3}, {3}), uniform64({3, 3}, g)};
            },
        .run = [](const TensorList& in) { return TensorList{index_add(in[0], 1, in[1], in[2], 2.0)}; },
        .reference =
            [](const TensorList& in) {
              auto out = values_of(in[0]);
              const auto s = values_of(in[2]);
              const Index t = indices_of(in[1]);
              for (int64_t a = 0; a < 3; ++a)
                for (int64_t j = 0; j < 3; ++j)
                  out[static_cast<std::size_t>(a * 4 + t[j])] += 2.0 * s[static_cast<std::size_t>(a * 3 + j)];
              return TensorList{from_values(out, {3, 4})};
            },
        .grad_inputs = {0, 2},
    },
    [](Generator& g) {
      return TensorList{randn32({256, 4096}, g), randint64(0, 4096, {1024}, g), randn32({256, 1024}, g)};
    }));

STRATA_REGISTER_CASE(with_bench_inputs(
    OpCase{
        .name = "take_along_dim/broadcast",
        .op = OpKind::take_along_dim,
        .inputs = [](Generator& g) { return TensorList{uniform64({3, 4}, g), from_indices({3, 1}, {1, 2})}; },
        .run = [](const TensorList& in) { return TensorList{take_along_dim(in[0], in[1], 1)}; },
        .reference =
            [](const TensorList& in) {
              const auto x = values_of(in[0]);
              const Index t = indices_of(in[1]);
              return TensorList{
                  build2(3, 2, [&](int64_t i, int64_t j) { return x[static_cast<std::size_t>(i * 4 + t[j])]; })};
            },
        .grad_inputs = {0},
    },
    [](Generator& g) { return TensorList{randn32({256, 4096}, g), randint64(0, 4096, {256, 1024}, g)}; }));

STRATA_REGISTER_CASE(OpCase{
    .name = "take_along_dim/flattened",
    .op = OpKind::take_along_dim,
    .inputs = [](Generator& g) { return TensorList{uniform64({2, 3}, g), from_indices({5, 0, 5, 2}, {4})}; },
    .run = [](const TensorList& in) { return TensorList{take_along_dim(in[0], in[1])}; },
    .reference =
        [](const TensorList& in) {
          const auto x = values_of(in[0]);
          return TensorList{from_values({x[5], x[0], x[5], x[2]}, {4})};
        },
    .grad_inputs = {0},
});

// ---- scatter family --------------------------------------------------------------------------------

/// scatter_reduce's reference on 2-D row-major tensors along `dim` ("none" overwrites).
Tensor ref_scatter(const TensorList& in, int64_t dim, const std::string& reduce, bool include_self) {
  auto out = values_of(in[0]);
  const auto src = values_of(in[2]);
  const Index t = indices_of(in[1]);
  const int64_t cols = in[0].size(1), icols = in[1].size(1), scols = in[2].size(1);
  std::vector<std::vector<double>> parts(out.size());
  for (int64_t i = 0; i < in[1].size(0); ++i)
    for (int64_t j = 0; j < icols; ++j) {
      const int64_t v = t[static_cast<std::size_t>(i * icols + j)];
      const int64_t pos = dim == 0 ? v * cols + j : i * cols + v;
      parts[static_cast<std::size_t>(pos)].push_back(src[static_cast<std::size_t>(i * scols + j)]);
    }
  for (std::size_t p = 0; p < out.size(); ++p) {
    if (parts[p].empty()) continue;
    if (reduce == "none") {
      out[p] = parts[p].back();
      continue;
    }
    if (include_self) parts[p].push_back(out[p]);
    double r = reduce == "prod" ? 1.0 : reduce == "amax" ? -1e300 : reduce == "amin" ? 1e300 : 0.0;
    for (double e : parts[p])
      r = reduce == "prod" ? r * e : reduce == "amax" ? std::max(r, e) : reduce == "amin" ? std::min(r, e) : r + e;
    out[p] = reduce == "mean" ? r / static_cast<double>(parts[p].size()) : r;
  }
  return from_values(out, in[0].sizes());
}

/// x [3, 4], an index [4, 4] with duplicates along dim 0, src [4, 5].
TensorList scatter_inputs(Generator& g) {
  return TensorList{uniform64({3, 4}, g), from_indices({0, 0, 2, 1, 0, 2, 2, 1, 1, 0, 2, 0, 0, 2, 1, 1}, {4, 4}),
                    uniform64({4, 5}, g)};
}

STRATA_REGISTER_CASE(OpCase{
    .name = "scatter/src_dim0",
    .op = OpKind::scatter,
    .inputs =
        [](Generator& g) {
          return TensorList{uniform64({3, 4}, g), from_indices({0, 1, 2, 0, 2, 0, 1, 1}, {2, 4}), uniform64({2, 5}, g)};
        },
    .run = [](const TensorList& in) { return TensorList{scatter(in[0], 0, in[1], in[2])}; },
    .reference = [](const TensorList& in) { return TensorList{ref_scatter(in, 0, "none", true)}; },
    .grad_inputs = {0, 2},
});

STRATA_REGISTER_CASE(with_bench_inputs(
    OpCase{
        .name = "scatter/value_dim1",
        .op = OpKind::scatter,
        .inputs =
            [](Generator& g) { return TensorList{uniform64({3, 4}, g), from_indices({3, 0, 1, 1, 2, 2}, {3, 2})}; },
        .run = [](const TensorList& in) { return TensorList{scatter(in[0], 1, in[1], 1.5)}; },
        .reference =
            [](const TensorList& in) {
              return TensorList{ref_scatter({in[0], in[1], full({3, 2}, 1.5, {DType::f64, nullptr})}, 1, "none", true)};
            },
        .grad_inputs = {0},
    },
    [](Generator& g) { return TensorList{randn32({256, 4096}, g), randint64(0, 4096, {256, 1024}, g)}; }));

STRATA_REGISTER_CASE(with_bench_inputs(
    OpCase{
        .name = "scatter_add/dim0_duplicates",
        .op = OpKind::scatter_add,
        .inputs = scatter_inputs,
        .run = [](const TensorList& in) { return TensorList{scatter_add(in[0], 0, in[1], in[2])}; },
        .reference = [](const TensorList& in) { return TensorList{ref_scatter(in, 0, "sum", true)}; },
        .grad_inputs = {0, 2},
    },
    [](Generator& g) {
      return TensorList{randn32({256, 4096}, g), randint64(0, 256, {512, 4096}, g), randn32({512, 4096}, g)};
    }));

OpCase reduce_case(const std::string& reduce, bool include_self) {
  return OpCase{
      .name = "scatter_reduce/" + reduce + (include_self ? "" : "_exclude_self"),
      .op = OpKind::scatter_reduce,
      .inputs = scatter_inputs,
      .run =
          [=](const TensorList& in) {
            return TensorList{scatter_reduce(in[0], 0, in[1], in[2], reduce, include_self)};
          },
      .reference = [=](const TensorList& in) { return TensorList{ref_scatter(in, 0, reduce, include_self)}; },
      .grad_inputs = {0, 2},
  };
}

STRATA_REGISTER_CASE(reduce_case("sum", false));
STRATA_REGISTER_CASE(reduce_case("prod", true));
STRATA_REGISTER_CASE(reduce_case("mean", true));
STRATA_REGISTER_CASE(reduce_case("mean", false));
STRATA_REGISTER_CASE(reduce_case("amax", true));
STRATA_REGISTER_CASE(reduce_case("amin", false));

// ---- bad inputs ------------------------------------------------------------------------------------

Tensor f32(IntArrayRef sizes) { return zeros(sizes, {DType::f32, nullptr}); }
Tensor i64(const Index& v) { return from_indices(v, {static_cast<int64_t>(v.size())}); }

STRATA_REGISTER_CASE(BadInputCase{
    .name = "index/out_of_range",
    .op = OpKind::index,
    .call =
        [] {
          const TensorIndex ix[] = {i64({1, 5})};
          index(f32({3}), ix);
        },
    .expect = {"index 5 is out of bounds for dimension 0 with size 3"},
});
STRATA_REGISTER_CASE(BadInputCase{
    .name = "index/float_index_tensor",
    .op = OpKind::index,
    .call =
        [] {
          const TensorIndex ix[] = {f32({2})};
          index(f32({3}), ix);
        },
    .expect = {"tensors used as indices must be long, int, byte or bool tensors", "f32"},
});
STRATA_REGISTER_CASE(BadInputCase{
    .name = "index/mask_shape",
    .op = OpKind::index,
    .call =
        [] {
          const TensorIndex ix[] = {mask_of({1, 0}, {2})};
          index(f32({3, 2}), ix);
        },
    .expect = {"The shape of the mask [2] at index 0 does not match the shape of the indexed tensor [3, 2]"},
});
STRATA_REGISTER_CASE(BadInputCase{
    .name = "index/no_broadcast",
    .op = OpKind::index,
    .call =
        [] {
          const TensorIndex ix[] = {i64({0, 1}), i64({0, 1, 2})};
          index(f32({3, 3}), ix);
        },
    .expect = {"shape mismatch: indexing tensors could not be broadcast together with shapes [2], [3]"},
});
STRATA_REGISTER_CASE(BadInputCase{
    .name = "index/too_many_indices",
    .op = OpKind::index,
    .call =
        [] {
          const TensorIndex ix[] = {0, 1};
          index(f32({3}), ix);
        },
    .expect = {"too many indices for tensor of dimension 1"},
});
STRATA_REGISTER_CASE(BadInputCase{
    .name = "index_put/dtype_mismatch",
    .op = OpKind::index_put,
    .call =
        [] {
          const TensorIndex ix[] = {i64({0})};
          index_put(f32({3}), ix, from_values({1.0}, {1}));
        },
    .expect = {"index_put", "dtypes match", "f64"},
});
STRATA_REGISTER_CASE(BadInputCase{
    .name = "index_put/values_shape",
    .op = OpKind::index_put,
    .call =
        [] {
          const TensorIndex ix[] = {i64({0, 1})};
          index_put(f32({3}), ix, f32({3}));
        },
    .expect = {"shape mismatch: value tensor of shape [3] cannot be broadcast to indexing result of shape [2]"},
});
STRATA_REGISTER_CASE(BadInputCase{
    .name = "masked_fill/float_mask",
    .op = OpKind::masked_fill,
    .call = [] { masked_fill(f32({3}), f32({3}), 1.0); },
    .expect = {"masked_fill: mask must be a bool tensor", "f32"},
});
STRATA_REGISTER_CASE(BadInputCase{
    .name = "masked_fill/value_not_0dim",
    .op = OpKind::masked_fill,
    .call = [] { masked_fill(f32({3}), mask_of({1, 0, 1}, {3}), f32({2})); },
    .expect = {"masked_fill: only supports a 0-dimensional value tensor"},
});
STRATA_REGISTER_CASE(BadInputCase{
    .name = "masked_select/no_broadcast",
    .op = OpKind::masked_select,
    .call = [] { masked_select(f32({3}), mask_of({1, 0}, {2})); },
    .expect = {"masked_select", "[3]", "[2]"},
});
STRATA_REGISTER_CASE(BadInputCase{
    .name = "nonzero/undefined",
    .op = OpKind::nonzero,
    .call = [] { nonzero(Tensor()); },
    .expect = {"nonzero: self is undefined"},
});
STRATA_REGISTER_CASE(BadInputCase{
    .name = "one_hot/class_too_large",
    .op = OpKind::one_hot,
    .call = [] { one_hot(i64({0, 4}), 3); },
    .expect = {"one_hot: class values must be smaller than num_classes (3)"},
});
STRATA_REGISTER_CASE(BadInputCase{
    .name = "one_hot/negative_class",
    .op = OpKind::one_hot,
    .call = [] { one_hot(i64({0, -1})); },
    .expect = {"one_hot: class values must be non-negative"},
});
STRATA_REGISTER_CASE(BadInputCase{
    .name = "one_hot/float_input",
    .op = OpKind::one_hot,
    .call = [] { one_hot(f32({2})); },
    .expect = {"one_hot: is only applicable to index tensors of dtype i64", "f32"},
});
STRATA_REGISTER_CASE(BadInputCase{
    .name = "index_add/source_shape",
    .op = OpKind::index_add,
    .call = [] { index_add(f32({3, 4}), 0, i64({0, 1}), f32({3, 4})); },
    .expect = {"index_add: source", "index's length 2"},
});
STRATA_REGISTER_CASE(BadInputCase{
    .name = "index_add/index_out_of_range",
    .op = OpKind::index_add,
    .call = [] { index_add(f32({3, 4}), 1, i64({0, 4}), f32({3, 2})); },
    .expect = {"index 4 is out of bounds for dimension 1 with size 4"},
});
STRATA_REGISTER_CASE(BadInputCase{
    .name = "take_along_dim/rank_mismatch",
    .op = OpKind::take_along_dim,
    .call = [] { take_along_dim(f32({3, 4}), i64({0}), 1); },
    .expect = {"take_along_dim", "same number of dimensions"},
});
STRATA_REGISTER_CASE(BadInputCase{
    .name = "scatter/index_out_of_range",
    .op = OpKind::scatter,
    .call = [] { scatter(f32({3, 2}), 0, from_indices({0, 5}, {1, 2}), f32({1, 2})); },
    .expect = {"scatter: index 5 is out of bounds for dimension 0 with size 3"},
});
STRATA_REGISTER_CASE(BadInputCase{
    .name = "scatter/index_rank",
    .op = OpKind::scatter,
    .call = [] { scatter(f32({3, 2}), 0, i64({0}), f32({1, 2})); },
    .expect = {"scatter: index", "same number of dimensions as self"},
});
STRATA_REGISTER_CASE(BadInputCase{
    .name = "scatter_add/src_dtype",
    .op = OpKind::scatter_add,
    .call = [] { scatter_add(f32({3, 2}), 0, from_indices({0, 1}, {1, 2}), from_values({1.0, 2.0}, {1, 2})); },
    .expect = {"scatter_add: src", "f64", "must have the dtype of self"},
});
STRATA_REGISTER_CASE(BadInputCase{
    .name = "scatter_reduce/unknown_reduce",
    .op = OpKind::scatter_reduce,
    .call = [] { scatter_reduce(f32({3, 2}), 0, from_indices({0, 1}, {1, 2}), f32({1, 2}), "median"); },
    .expect = {"scatter_reduce: reduce argument must be one of", "'median'"},
});
STRATA_REGISTER_CASE(BadInputCase{
    .name = "scatter_reduce/index_larger_than_src",
    .op = OpKind::scatter_reduce,
    .call = [] { scatter_reduce(f32({3, 2}), 0, from_indices({0, 1, 1, 0}, {2, 2}), f32({1, 2}), "sum"); },
    .expect = {"scatter_reduce: index", "no larger than src"},
});

}  // namespace
}  // namespace strata::testing
