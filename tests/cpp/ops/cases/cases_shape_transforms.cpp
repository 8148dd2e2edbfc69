// Harness cases for ops/shape_transforms.h.

#include "ops/shape_transforms.h"

#include <functional>
#include <string>
#include <vector>

#include "tests/cpp/ops/harness/op_harness.h"

namespace strata::testing {
namespace {

/// Row-major strides of `sizes`.
std::vector<int64_t> strides_of(IntArrayRef sizes) {
  std::vector<int64_t> s(sizes.size(), 1);
  for (std::size_t d = sizes.size(); d-- > 1;) s[d - 1] = s[d] * sizes[d];
  return s;
}

/// A tensor of `out_sizes` whose element at index idx is x's element at source(idx) (both
/// row-major index vectors); source returns a negative first entry for zero.
Tensor map_indices(const Tensor& x, Dims out_sizes,
                   const std::function<std::vector<int64_t>(const std::vector<int64_t>&)>& source) {
  const auto v = values_of(x);
  const auto xs = strides_of(x.sizes());
  int64_t n = 1;
  for (int64_t s : out_sizes) n *= s;
  std::vector<double> out(static_cast<std::size_t>(n));
  std::vector<int64_t> idx(out_sizes.size());
  for (int64_t i = 0; i < n; ++i) {
    int64_t rem = i;
    for (std::size_t d = out_sizes.size(); d-- > 0;) idx[d] = rem % out_sizes[d], rem /= out_sizes[d];
    const auto src = source(idx);
    if (!src.empty() && src[0] < 0) continue;
    int64_t off = 0;
    for (std::size_t d = 0; d < src.size(); ++d) off += src[d] * xs[d];
    out[static_cast<std::size_t>(i)] = v[static_cast<std::size_t>(off)];
  }
  return from_values(out, out_sizes);
}

OpCase shape_case(std::string name, OpKind op, std::vector<Dims> sizes,
                  std::function<TensorList(const TensorList&)> run,
                  std::function<TensorList(const TensorList&)> reference) {
  OpCase c;
  c.name = std::move(name);
  c.op = op;
  c.inputs = [sizes](Generator& g) {
    TensorList in;
    for (const Dims& s : sizes) in.push_back(uniform64(s, g));
    return in;
  };
  c.run = std::move(run);
  c.reference = std::move(reference);
  for (std::size_t k = 0; k < sizes.size(); ++k) c.grad_inputs.push_back(static_cast<int>(k));
  return c;
}

STRATA_REGISTER_CASE(shape_case(
    "stack/dim1", OpKind::stack, {{3, 4}, {3, 4}, {3, 4}},
    [](const TensorList& in) { return TensorList{stack(in, 1)}; },
    [](const TensorList& in) {
      const auto a = values_of(in[0]), b = values_of(in[1]), c = values_of(in[2]);
      std::vector<double> out;
      for (int i = 0; i < 3; ++i)
        for (const auto* v : {&a, &b, &c}) out.insert(out.end(), v->begin() + i * 4, v->begin() + i * 4 + 4);
      return TensorList{from_values(out, {3, 3, 4})};
    }));
STRATA_REGISTER_CASE(shape_case(
    "stack/last_dim", OpKind::stack, {{2, 3}, {2, 3}}, [](const TensorList& in) { return TensorList{stack(in, -1)}; },
    [](const TensorList& in) {
      const auto a = values_of(in[0]), b = values_of(in[1]);
      std::vector<double> out;
      for (std::size_t i = 0; i < a.size(); ++i) out.insert(out.end(), {a[i], b[i]});
      return TensorList{from_values(out, {2, 3, 2})};
    }));
STRATA_REGISTER_CASE(shape_case(
    "chunk/uneven", OpKind::chunk, {{7, 3}}, [](const TensorList& in) { return chunk(in[0], 3, 0); },
    [](const TensorList& in) {
      const auto v = values_of(in[0]);
      return TensorList{from_values({v.begin(), v.begin() + 9}, {3, 3}),
                        from_values({v.begin() + 9, v.begin() + 18}, {3, 3}),
                        from_values({v.begin() + 18, v.end()}, {1, 3})};
    }));
STRATA_REGISTER_CASE(shape_case(
    "chunk/last_dim", OpKind::chunk, {{2, 4}}, [](const TensorList& in) { return chunk(in[0], 2, -1); },
    [](const TensorList& in) {
      return TensorList{map_indices(in[0], {2, 2}, [](const auto& i) { return std::vector<int64_t>{i[0], i[1]}; }),
                        map_indices(in[0], {2, 2}, [](const auto& i) { return std::vector<int64_t>{i[0], i[1] + 2}; })};
    }));
STRATA_REGISTER_CASE(shape_case(
    "flip/dims_0_2", OpKind::flip, {{3, 4, 2}}, [](const TensorList& in) { return TensorList{flip(in[0], {0, -1})}; },
    [](const TensorList& in) {
      return TensorList{
          map_indices(in[0], {3, 4, 2}, [](const auto& i) { return std::vector<int64_t>{2 - i[0], i[1], 1 - i[2]}; })};
    }));
STRATA_REGISTER_CASE(shape_case(
    "roll/two_dims", OpKind::roll, {{4, 5}},
    [](const TensorList& in) { return TensorList{roll(in[0], {1, -2}, {0, 1})}; },
    [](const TensorList& in) {
      return TensorList{map_indices(
          in[0], {4, 5}, [](const auto& i) { return std::vector<int64_t>{(i[0] + 3) % 4, (i[1] + 2) % 5}; })};
    }));
STRATA_REGISTER_CASE(shape_case(
    "roll/flattened", OpKind::roll, {{3, 4}}, [](const TensorList& in) { return TensorList{roll(in[0], {5})}; },
    [](const TensorList& in) {
      const auto v = values_of(in[0]);
      std::vector<double> out(v.size());
      for (std::size_t i = 0; i < v.size(); ++i) out[(i + 5) % v.size()] = v[i];
      return TensorList{from_values(out, {3, 4})};
    }));
STRATA_REGISTER_CASE(shape_case(
    "repeat/new_dim", OpKind::repeat, {{2, 3}},
    [](const TensorList& in) { return TensorList{repeat(in[0], {2, 1, 2})}; },
    [](const TensorList& in) {
      return TensorList{
          map_indices(in[0], {2, 2, 6}, [](const auto& i) { return std::vector<int64_t>{i[1], i[2] % 3}; })};
    }));
STRATA_REGISTER_CASE(shape_case(
    "repeat_interleave/int_dim1", OpKind::repeat_interleave, {{2, 3}},
    [](const TensorList& in) { return TensorList{repeat_interleave(in[0], 2, 1)}; },
    [](const TensorList& in) {
      return TensorList{map_indices(in[0], {2, 6}, [](const auto& i) { return std::vector<int64_t>{i[0], i[1] / 2}; })};
    }));
STRATA_REGISTER_CASE(shape_case(
    "repeat_interleave/tensor_dim0", OpKind::repeat_interleave, {{3, 2}},
    [](const TensorList& in) { return TensorList{repeat_interleave(in[0], from_indices({1, 0, 2}, {3}), 0)}; },
    [](const TensorList& in) {
      return TensorList{
          map_indices(in[0], {3, 2}, [](const auto& i) { return std::vector<int64_t>{i[0] == 0 ? 0 : 2, i[1]}; })};
    }));
STRATA_REGISTER_CASE(shape_case(
    "repeat_interleave/flattened", OpKind::repeat_interleave, {{2, 2}},
    [](const TensorList& in) { return TensorList{repeat_interleave(in[0], 3)}; },
    [](const TensorList& in) {
      const auto v = values_of(in[0]);
      std::vector<double> out;
      for (double e : v) out.insert(out.end(), {e, e, e});
      return TensorList{from_values(out, {12})};
    }));

/// tril / triu of a [2, 3, 4] batch.
OpCase triangle_case(std::string name, bool lower, int64_t k) {
  return shape_case(
      std::move(name), lower ? OpKind::tril : OpKind::triu, {{2, 3, 4}},
      [lower, k](const TensorList& in) { return TensorList{lower ? tril(in[0], k) : triu(in[0], k)}; },
      [lower, k](const TensorList& in) {
        return TensorList{map_indices(in[0], {2, 3, 4}, [lower, k](const auto& i) {
          const bool keep = lower ? i[2] - i[1] <= k : i[2] - i[1] >= k;
          return keep ? std::vector<int64_t>{i[0], i[1], i[2]} : std::vector<int64_t>{-1};
        })};
      });
}
STRATA_REGISTER_CASE(triangle_case("tril/main", true, 0));
STRATA_REGISTER_CASE(triangle_case("tril/below", true, -1));
STRATA_REGISTER_CASE(triangle_case("triu/main", false, 0));
STRATA_REGISTER_CASE(triangle_case("triu/above", false, 1));

// ---- bad inputs ---------------------------------------------------------------------------------
STRATA_REGISTER_CASE(BadInputCase{"stack/empty", OpKind::stack, [] { stack({}); }, {"stack", "non-empty"}});
STRATA_REGISTER_CASE(BadInputCase{"stack/shape_mismatch",
                                  OpKind::stack,
                                  [] { stack({ones({2}), ones({3})}); },
                                  {"equal size", "Tensor[2] f32", "Tensor[3] f32", "entry 1"}});
STRATA_REGISTER_CASE(BadInputCase{
    "stack/dim_out_of_range", OpKind::stack, [] { stack({ones({2})}, 2); }, {"stack", "dim 2 is out of range"}});
STRATA_REGISTER_CASE(BadInputCase{
    "chunk/zero_chunks", OpKind::chunk, [] { chunk(ones({4}), 0); }, {"chunk", "greater than 0"}});
STRATA_REGISTER_CASE(BadInputCase{
    "flip/repeated_dim", OpKind::flip, [] { flip(ones({2, 2}), {0, -2}); }, {"flip", "multiple times"}});
STRATA_REGISTER_CASE(BadInputCase{"flip/dim_out_of_range",
                                  OpKind::flip,
                                  [] { flip(ones({2, 2}), {2}); },
                                  {"flip", "dim 2 is out of range", "Tensor[2, 2] f32"}});
STRATA_REGISTER_CASE(BadInputCase{
    "roll/length_mismatch", OpKind::roll, [] { roll(ones({2, 2}), {1, 1}, {0}); }, {"roll", "same length"}});
STRATA_REGISTER_CASE(BadInputCase{
    "roll/several_shifts_no_dims", OpKind::roll, [] { roll(ones({2, 2}), {1, 1}); }, {"roll", "one shift"}});
STRATA_REGISTER_CASE(BadInputCase{"repeat/too_few_repeats",
                                  OpKind::repeat,
                                  [] { repeat(ones({2, 2}), {2}); },
                                  {"repeat", "can not be smaller", "Tensor[2, 2] f32"}});
STRATA_REGISTER_CASE(BadInputCase{
    "repeat/negative", OpKind::repeat, [] { repeat(ones({2}), {-1}); }, {"repeat", "non-negative"}});
STRATA_REGISTER_CASE(BadInputCase{"repeat_interleave/negative",
                                  OpKind::repeat_interleave,
                                  [] { repeat_interleave(ones({2}), from_indices({1, -1}, {2}), 0); },
                                  {"repeat_interleave", "negative"}});
STRATA_REGISTER_CASE(BadInputCase{"repeat_interleave/size_mismatch",
                                  OpKind::repeat_interleave,
                                  [] { repeat_interleave(ones({3}), from_indices({1, 2}, {2}), 0); },
                                  {"repeat_interleave", "same size", "Tensor[2] i64"}});
STRATA_REGISTER_CASE(BadInputCase{"repeat_interleave/float_repeats",
                                  OpKind::repeat_interleave,
                                  [] { repeat_interleave(ones({2}), ones({2}), 0); },
                                  {"integer tensor", "Tensor[2] f32"}});
STRATA_REGISTER_CASE(BadInputCase{
    "tril/1d", OpKind::tril, [] { tril(ones({3})); }, {"tril", "at least 2 dims", "Tensor[3] f32"}});
STRATA_REGISTER_CASE(BadInputCase{
    "triu/undefined", OpKind::triu, [] { triu(Tensor()); }, {"triu", "input is undefined"}});

}  // namespace
}  // namespace strata::testing
