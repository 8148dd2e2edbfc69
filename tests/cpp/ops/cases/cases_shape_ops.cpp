// Harness cases for ops/shape_ops.h.

#include "ops/shape_ops.h"

#include <vector>

#include "tests/cpp/ops/harness/op_harness.h"

namespace strata::testing {
namespace {

using Index = std::vector<int64_t>;

/// Row-major strides of `sizes`.
Index row_major(const Index& sizes) {
  Index s(sizes.size(), 1);
  for (std::size_t i = sizes.size(); i-- > 1;) s[i - 1] = s[i] * sizes[i];
  return s;
}

/// An f64 tensor of `sizes` whose element at multi-index `idx` is f(idx) (plain loops).
template <typename F>
Tensor build(const Index& sizes, F f) {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  std::vector<double> v(static_cast<std::size_t>(n));
  Index idx(sizes.size(), 0);
  for (int64_t flat = 0; flat < n; ++flat) {
    int64_t rem = flat;
    for (std::size_t d = sizes.size(); d-- > 0;) {
      idx[d] = rem % sizes[d];
      rem /= sizes[d];
    }
    v[static_cast<std::size_t>(flat)] = f(idx);
  }
  return from_values(v, sizes);
}

/// Element `idx` of a row-major value list with `sizes`.
double at(const std::vector<double>& v, const Index& sizes, const Index& idx) {
  const Index st = row_major(sizes);
  int64_t off = 0;
  for (std::size_t d = 0; d < idx.size(); ++d) off += idx[d] * st[d];
  return v[static_cast<std::size_t>(off)];
}

Index sizes_of(const Tensor& t) { return Index(t.sizes().begin(), t.sizes().end()); }

Tensor idx32(const Index& values, IntArrayRef sizes) { return from_indices(values, sizes).to(DType::i32); }

// ---- reshape / flatten ----------------------------------------------------------------------------

Tensor same_values(const Tensor& x, IntArrayRef sizes) { return from_values(values_of(x), sizes); }

STRATA_REGISTER_CASE(OpCase{
    .name = "reshape/infer",
    .op = OpKind::reshape,
    .inputs = [](Generator& g) { return TensorList{uniform64({3, 4}, g)}; },
    .run = [](const TensorList& in) { return TensorList{reshape(in[0], {2, -1, 2})}; },
    .reference = [](const TensorList& in) { return TensorList{same_values(in[0], {2, 3, 2})}; },
    .grad_inputs = {0},
    .bench_inputs = [](Generator& g) { return TensorList{randn32({256, 4096}, g)}; },
});

STRATA_REGISTER_CASE(OpCase{
    .name = "reshape/flatten_negative_dims",
    .op = OpKind::reshape,
    .inputs = [](Generator& g) { return TensorList{uniform64({2, 3, 4}, g)}; },
    .run = [](const TensorList& in) { return TensorList{flatten(in[0], -2, -1)}; },
    .reference = [](const TensorList& in) { return TensorList{same_values(in[0], {2, 12})}; },
    .grad_inputs = {0},
});

STRATA_REGISTER_CASE(OpCase{
    .name = "reshape/flatten_all",
    .op = OpKind::reshape,
    .inputs = [](Generator& g) { return TensorList{uniform64({2, 3, 4}, g)}; },
    .run = [](const TensorList& in) { return TensorList{flatten(in[0])}; },
    .reference = [](const TensorList& in) { return TensorList{same_values(in[0], {24})}; },
    .grad_inputs = {0},
});

// ---- transpose / permute ----------------------------------------------------------------------------

STRATA_REGISTER_CASE(OpCase{
    .name = "transpose/negative_dims",
    .op = OpKind::transpose,
    .inputs = [](Generator& g) { return TensorList{uniform64({2, 3, 4}, g)}; },
    .run = [](const TensorList& in) { return TensorList{transpose(in[0], -1, 0)}; },
    .reference =
        [](const TensorList& in) {
          const auto v = values_of(in[0]);
          return TensorList{build({4, 3, 2}, [&](const Index& i) { return at(v, {2, 3, 4}, {i[2], i[1], i[0]}); })};
        },
    .grad_inputs = {0},
    .bench_inputs = [](Generator& g) { return TensorList{randn32({64, 256, 256}, g)}; },
});

STRATA_REGISTER_CASE(OpCase{
    .name = "permute/negative_dims",
    .op = OpKind::permute,
    .inputs = [](Generator& g) { return TensorList{uniform64({2, 3, 4}, g)}; },
    .run = [](const TensorList& in) { return TensorList{permute(in[0], {2, 0, -2})}; },
    .reference =
        [](const TensorList& in) {
          const auto v = values_of(in[0]);
          // out[a][b][c] = x[b][c][a]
          return TensorList{build({4, 2, 3}, [&](const Index& i) { return at(v, {2, 3, 4}, {i[1], i[2], i[0]}); })};
        },
    .grad_inputs = {0},
    .bench_inputs = [](Generator& g) { return TensorList{randn32({32, 64, 256}, g)}; },
});

// ---- cat / split --------------------------------------------------------------------------------------

/// Reference cat of row-major tensors along `dim`.
Tensor ref_cat(const TensorList& in, int64_t dim) {
  Index out_sizes = sizes_of(in[0]);
  out_sizes[dim] = 0;
  for (const Tensor& t : in) out_sizes[dim] += t.sizes()[dim];
  std::vector<std::vector<double>> vals;
  for (const Tensor& t : in) vals.push_back(values_of(t));
  return build(out_sizes, [&](const Index& i) {
    Index j = i;
    for (std::size_t k = 0; k < in.size(); ++k) {
      const int64_t n = in[k].sizes()[dim];
      if (j[dim] < n) return at(vals[k], sizes_of(in[k]), j);
      j[dim] -= n;
    }
    return 0.0;
  });
}

std::vector<Tensor> as_vector(const TensorList& in) { return std::vector<Tensor>(in.begin(), in.end()); }

STRATA_REGISTER_CASE(OpCase{
    .name = "cat/three_dim1",
    .op = OpKind::cat,
    .inputs =
        [](Generator& g) {
          return TensorList{uniform64({2, 2, 3}, g), uniform64({2, 3, 3}, g), uniform64({2, 1, 3}, g)};
        },
    .run = [](const TensorList& in) { return TensorList{cat(as_vector(in), 1)}; },
    .reference = [](const TensorList& in) { return TensorList{ref_cat(in, 1)}; },
    .grad_inputs = {0, 1, 2},
});

STRATA_REGISTER_CASE(OpCase{
    .name = "cat/four_dim1",
    .op = OpKind::cat,
    .inputs =
        [](Generator& g) {
          return TensorList{uniform64({3, 2}, g), uniform64({3, 4}, g), uniform64({3, 1}, g), uniform64({3, 3}, g)};
        },
    .run = [](const TensorList& in) { return TensorList{cat(as_vector(in), 1)}; },
    .reference = [](const TensorList& in) { return TensorList{ref_cat(in, 1)}; },
    .grad_inputs = {0, 1, 2, 3},
    .bench_inputs =
        [](Generator& g) {
          return TensorList{randn32({256, 512}, g), randn32({256, 512}, g), randn32({256, 512}, g),
                            randn32({256, 512}, g)};
        },
});

STRATA_REGISTER_CASE(OpCase{
    .name = "cat/negative_dim0",
    .op = OpKind::cat,
    .inputs = [](Generator& g) { return TensorList{uniform64({2, 3}, g), uniform64({1, 3}, g)}; },
    .run = [](const TensorList& in) { return TensorList{cat(as_vector(in), -2)}; },
    .reference = [](const TensorList& in) { return TensorList{ref_cat(in, 0)}; },
    .grad_inputs = {0, 1},
});

/// Reference split of a row-major tensor along `dim` into pieces of `sizes`.
TensorList ref_split(const Tensor& x, const Index& sizes, int64_t dim) {
  const auto v = values_of(x);
  const Index xs = sizes_of(x);
  TensorList out;
  int64_t off = 0;
  for (int64_t s : sizes) {
    Index ps = xs;
    ps[dim] = s;
    out.push_back(build(ps, [&](const Index& i) {
      Index j = i;
      j[dim] += off;
      return at(v, xs, j);
    }));
    off += s;
  }
  return out;
}

STRATA_REGISTER_CASE(OpCase{
    .name = "split/uneven",
    .op = OpKind::split,
    .inputs = [](Generator& g) { return TensorList{uniform64({7, 3}, g)}; },
    .run = [](const TensorList& in) { return split(in[0], 3); },
    .reference = [](const TensorList& in) { return ref_split(in[0], {3, 3, 1}, 0); },
    .grad_inputs = {0},
    .bench_inputs = [](Generator& g) { return TensorList{randn32({1024, 1024}, g)}; },
});

STRATA_REGISTER_CASE(OpCase{
    .name = "split/sizes_negative_dim",
    .op = OpKind::split,
    .inputs = [](Generator& g) { return TensorList{uniform64({2, 6}, g)}; },
    .run = [](const TensorList& in) { return split(in[0], IntArrayRef{1, 3, 0, 2}, -1); },
    .reference = [](const TensorList& in) { return ref_split(in[0], {1, 3, 0, 2}, 1); },
    .grad_inputs = {0},
});

// ---- slice --------------------------------------------------------------------------------------------

STRATA_REGISTER_CASE(OpCase{
    .name = "slice/step_negative_start",
    .op = OpKind::slice,
    .inputs = [](Generator& g) { return TensorList{uniform64({8, 3}, g)}; },
    .run = [](const TensorList& in) { return TensorList{slice(in[0], 0, -6, 7, 2)}; },  // rows 2, 4, 6
    .reference =
        [](const TensorList& in) {
          const auto v = values_of(in[0]);
          return TensorList{build({3, 3}, [&](const Index& i) { return at(v, {8, 3}, {2 + 2 * i[0], i[1]}); })};
        },
    .grad_inputs = {0},
    .bench_inputs = [](Generator& g) { return TensorList{randn32({2048, 1024}, g)}; },
});

STRATA_REGISTER_CASE(OpCase{
    .name = "slice/dim1_open_end",
    .op = OpKind::slice,
    .inputs = [](Generator& g) { return TensorList{uniform64({3, 10}, g)}; },
    .run = [](const TensorList& in) { return TensorList{slice(in[0], -1, 1, std::nullopt, 3)}; },  // cols 1, 4, 7
    .reference =
        [](const TensorList& in) {
          const auto v = values_of(in[0]);
          return TensorList{build({3, 3}, [&](const Index& i) { return at(v, {3, 10}, {i[0], 1 + 3 * i[1]}); })};
        },
    .grad_inputs = {0},
});

// ---- index_select / gather ---------------------------------------------------------------------------

Tensor ref_index_select(const Tensor& x, int64_t dim, const Tensor& index) {
  const auto v = values_of(x);
  const auto idx = indices_of(index);
  Index os = sizes_of(x);
  os[dim] = static_cast<int64_t>(idx.size());
  return build(os, [&](const Index& i) {
    Index j = i;
    j[dim] = idx[i[dim]];
    return at(v, sizes_of(x), j);
  });
}

STRATA_REGISTER_CASE(OpCase{
    .name = "index_select/duplicates",
    .op = OpKind::index_select,
    .inputs = [](Generator& g) { return TensorList{uniform64({5, 3}, g), from_indices({4, 1, 4, 0, 1, 4}, {6})}; },
    .run = [](const TensorList& in) { return TensorList{index_select(in[0], 0, in[1])}; },
    .reference = [](const TensorList& in) { return TensorList{ref_index_select(in[0], 0, in[1])}; },
    .grad_inputs = {0},
    .bench_inputs = [](Generator& g) { return TensorList{randn32({100000, 64}, g), randint64(0, 100000, {4096}, g)}; },
});

STRATA_REGISTER_CASE(OpCase{
    .name = "index_select/dim1_i32",
    .op = OpKind::index_select,
    .inputs = [](Generator& g) { return TensorList{uniform64({2, 6, 3}, g), idx32({5, 0, 5, 2}, {4})}; },
    .run = [](const TensorList& in) { return TensorList{index_select(in[0], -2, in[1])}; },
    .reference = [](const TensorList& in) { return TensorList{ref_index_select(in[0], 1, in[1])}; },
    .grad_inputs = {0},
});

STRATA_REGISTER_CASE(OpCase{
    .name = "index_select/last_dim",
    .op = OpKind::index_select,
    .inputs = [](Generator& g) { return TensorList{uniform64({3, 4}, g), from_indices({3, 3, 1}, {3})}; },
    .run = [](const TensorList& in) { return TensorList{index_select(in[0], 1, in[1])}; },
    .reference = [](const TensorList& in) { return TensorList{ref_index_select(in[0], 1, in[1])}; },
    .grad_inputs = {0},
});

Tensor ref_gather(const Tensor& x, int64_t dim, const Tensor& index) {
  const auto v = values_of(x);
  const auto idx = indices_of(index);
  const Index is = sizes_of(index);
  return build(is, [&](const Index& i) {
    Index j = i;
    j[dim] = static_cast<int64_t>(at(std::vector<double>(idx.begin(), idx.end()), is, i));
    return at(v, sizes_of(x), j);
  });
}

STRATA_REGISTER_CASE(OpCase{
    .name = "gather/dim0",
    .op = OpKind::gather,
    .inputs =
        [](Generator& g) {
          return TensorList{uniform64({4, 3}, g), from_indices({3, 0, 1, 3, 3, 2, 0, 0, 1, 2, 1, 3, 1, 3, 3}, {5, 3})};
        },
    .run = [](const TensorList& in) { return TensorList{gather(in[0], 0, in[1])}; },
    .reference = [](const TensorList& in) { return TensorList{ref_gather(in[0], 0, in[1])}; },
    .grad_inputs = {0},
    .bench_inputs =
        [](Generator& g) { return TensorList{randn32({4096, 256}, g), randint64(0, 4096, {4096, 256}, g)}; },
});

STRATA_REGISTER_CASE(OpCase{
    .name = "gather/dim1_i32_smaller_index",
    .op = OpKind::gather,
    .inputs = [](Generator& g) { return TensorList{uniform64({3, 5}, g), idx32({4, 4, 0, 2, 1, 1, 3, 4}, {2, 4})}; },
    .run = [](const TensorList& in) { return TensorList{gather(in[0], 1, in[1])}; },
    .reference = [](const TensorList& in) { return TensorList{ref_gather(in[0], 1, in[1])}; },
    .grad_inputs = {0},
});

STRATA_REGISTER_CASE(OpCase{
    .name = "gather/middle_dim_negative",
    .op = OpKind::gather,
    .inputs = [](Generator& g) { return TensorList{uniform64({2, 3, 4}, g), randint64(0, 3, {2, 5, 3}, g)}; },
    .run = [](const TensorList& in) { return TensorList{gather(in[0], -2, in[1])}; },
    .reference = [](const TensorList& in) { return TensorList{ref_gather(in[0], 1, in[1])}; },
    .grad_inputs = {0},
});

// ---- bad inputs ----------------------------------------------------------------------------------------

Tensor f32(IntArrayRef sizes) { return zeros(sizes, {DType::f32, nullptr}); }

STRATA_REGISTER_CASE(BadInputCase{
    .name = "reshape/incompatible_numel",
    .op = OpKind::reshape,
    .call = [] { reshape(f32({2, 3}), {4, 5}); },
    .expect = {"Tensor[2, 3] f32", "[4, 5]"},
});

STRATA_REGISTER_CASE(BadInputCase{
    .name = "reshape/two_inferred_dims",
    .op = OpKind::reshape,
    .call = [] { reshape(f32({2, 3}), {-1, -1}); },
    .expect = {"only one dimension can be -1"},
});

STRATA_REGISTER_CASE(BadInputCase{
    .name = "transpose/dim_out_of_range",
    .op = OpKind::transpose,
    .call = [] { transpose(f32({2, 3}), 0, 2); },
    .expect = {"dimension 2 out of range"},
});

STRATA_REGISTER_CASE(BadInputCase{
    .name = "permute/repeated_dim",
    .op = OpKind::permute,
    .call = [] { permute(f32({2, 3, 4}), {0, 1, -2}); },
    .expect = {"appears more than once", "Tensor[2, 3, 4] f32"},
});

STRATA_REGISTER_CASE(BadInputCase{
    .name = "permute/wrong_length",
    .op = OpKind::permute,
    .call = [] { permute(f32({2, 3, 4}), {0, 1}); },
    .expect = {"Tensor[2, 3, 4] f32", "rank 3"},
});

STRATA_REGISTER_CASE(BadInputCase{
    .name = "cat/mismatched_sizes",
    .op = OpKind::cat,
    .call = [] { cat({f32({2, 3}), f32({2, 4})}, 0); },
    .expect = {"Tensor[2, 3] f32", "Tensor[2, 4] f32", "dimension 0"},
});

STRATA_REGISTER_CASE(BadInputCase{
    .name = "cat/mismatched_rank",
    .op = OpKind::cat,
    .call = [] { cat({f32({2, 3}), f32({2, 3, 1})}, 1); },
    .expect = {"Tensor[2, 3] f32", "Tensor[2, 3, 1] f32", "rank"},
});

STRATA_REGISTER_CASE(BadInputCase{
    .name = "cat/empty_list",
    .op = OpKind::cat,
    .call = [] { cat({}, 0); },
    .expect = {"non-empty"},
});

STRATA_REGISTER_CASE(BadInputCase{
    .name = "cat/dim_out_of_range",
    .op = OpKind::cat,
    .call = [] { cat({f32({2, 3}), f32({2, 3})}, 2); },
    .expect = {"dimension 2 out of range"},
});

STRATA_REGISTER_CASE(BadInputCase{
    .name = "split/size_zero",
    .op = OpKind::split,
    .call = [] { split(f32({4, 3}), 0); },
    .expect = {"split_size must be positive", "Tensor[4, 3] f32"},
});

STRATA_REGISTER_CASE(BadInputCase{
    .name = "split/size_negative",
    .op = OpKind::split,
    .call = [] { split(f32({4, 3}), -2, 1); },
    .expect = {"split_size must be positive, got -2"},
});

STRATA_REGISTER_CASE(BadInputCase{
    .name = "split/sizes_do_not_sum",
    .op = OpKind::split,
    .call = [] { split(f32({4, 3}), IntArrayRef{1, 2}, 0); },
    .expect = {"sum to 3", "Tensor[4, 3] f32", "size 4"},
});

STRATA_REGISTER_CASE(BadInputCase{
    .name = "slice/zero_step",
    .op = OpKind::slice,
    .call = [] { slice(f32({4, 3}), 0, 0, 4, 0); },
    .expect = {"step must be positive", "Tensor[4, 3] f32"},
});

STRATA_REGISTER_CASE(BadInputCase{
    .name = "slice/dim_out_of_range",
    .op = OpKind::slice,
    .call = [] { slice(f32({4, 3}), -3, 0, 1); },
    .expect = {"dimension -3 out of range"},
});

STRATA_REGISTER_CASE(BadInputCase{
    .name = "index_select/index_out_of_range",
    .op = OpKind::index_select,
    .call = [] { index_select(f32({5, 3}), 0, from_indices({0, 7, 1}, {3})); },
    .expect = {"index 7", "position 1", "size 5", "Tensor[5, 3] f32"},
});

STRATA_REGISTER_CASE(BadInputCase{
    .name = "index_select/negative_index",
    .op = OpKind::index_select,
    .call = [] { index_select(f32({5, 3}), 1, from_indices({-1}, {1})); },
    .expect = {"index -1", "size 3"},
});

STRATA_REGISTER_CASE(BadInputCase{
    .name = "index_select/float_index",
    .op = OpKind::index_select,
    .call = [] { index_select(f32({5, 3}), 0, f32({2})); },
    .expect = {"index must be i64 or i32", "Tensor[2] f32"},
});

STRATA_REGISTER_CASE(BadInputCase{
    .name = "index_select/index_rank",
    .op = OpKind::index_select,
    .call = [] { index_select(f32({5, 3}), 0, from_indices({0, 1, 2, 3}, {2, 2})); },
    .expect = {"1-D", "Tensor[2, 2] i64"},
});

STRATA_REGISTER_CASE(BadInputCase{
    .name = "gather/index_rank_mismatch",
    .op = OpKind::gather,
    .call = [] { gather(f32({4, 3}), 0, from_indices({0, 1}, {2})); },
    .expect = {"same rank", "Tensor[2] i64", "Tensor[4, 3] f32"},
});

STRATA_REGISTER_CASE(BadInputCase{
    .name = "gather/index_out_of_range",
    .op = OpKind::gather,
    .call = [] { gather(f32({4, 3}), 1, from_indices({0, 1, 2, 3}, {2, 2})); },
    .expect = {"index 3", "position 3", "size 3"},
});

STRATA_REGISTER_CASE(BadInputCase{
    .name = "gather/index_too_large",
    .op = OpKind::gather,
    .call = [] { gather(f32({4, 3}), 0, from_indices({0, 1, 2, 3, 0, 0, 0, 0}, {2, 4})); },
    .expect = {"larger than the input", "Tensor[2, 4] i64", "dim 1"},
});

STRATA_REGISTER_CASE(BadInputCase{
    .name = "gather/float_index",
    .op = OpKind::gather,
    .call = [] { gather(f32({4, 3}), 0, zeros({4, 3}, {DType::f64, nullptr})); },
    .expect = {"index must be i64 or i32", "Tensor[4, 3] f64"},
});

}  // namespace
}  // namespace strata::testing
