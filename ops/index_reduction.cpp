#include "ops/index_reduction.h"

#include <algorithm>
#include <numeric>
#include <type_traits>
#include <vector>

#include "ops/detail/op_util.h"

namespace strata {

namespace {

using namespace ops::detail;

// Note [Index reductions]
// Every op here works on rows: the input with the reduced dim moved last, contiguous, as [n, r]
// (rows_along in ops/detail/op_util.h; every element as one row for argmax/argmin without a dim). Each
// row is handled on its own, rows in parallel; the k selected values and indices of each row form
// [n, k] outputs that from_rows puts back in place (k = 1 for max, min, argmax and argmin). bf16
// and f16 rows are compared in f32 and bool rows as u8 (the selected values convert back
// exactly). The order is PyTorch's: NaN above every number; ties keep the lower index.

/// a above b in the order where NaN is the largest value.
template <typename C>
bool above(C a, C b) {
  if constexpr (std::is_floating_point_v<C>) {
    if (a != a) return b == b;
    if (b != b) return false;
  }
  return a > b;
}

/// a below b in the order where NaN is the smallest value (argmin's and min's: NaN wins there too).
template <typename C>
bool below(C a, C b) {
  if constexpr (std::is_floating_point_v<C>) {
    if (a != a) return b == b;
    if (b != b) return false;
  }
  return a < b;
}

/// The rows of an index reduction over `dim` (every element as one row when dim < 0).
struct Rows {
  Tensor data;  // [n, r], contiguous, in a dtype the kernels take (f32, f64, i32, i64, u8)
  int64_t n = 0, r = 0;
  Dims moved_sizes;  // x's sizes with dim moved last (the rows' layout before flattening)
};

Rows make_rows(const Tensor& x, int64_t dim) {
  Tensor c = is_reduced_float(x.dtype()) ? x.to(DType::f32) : x;
  if (c.dtype() == DType::boolean) c = reinterpret_dtype(c, DType::u8);
  Rows rows;
  if (dim < 0) {
    rows.n = 1;
    rows.r = x.numel();
    rows.data = c.contiguous().reshape({1, rows.r});
    return rows;
  }
  for (int64_t d = 0; d < x.dim(); ++d)
    if (d != dim) rows.moved_sizes.push_back(x.size(d));
  rows.n = 1;
  for (int64_t s : rows.moved_sizes) rows.n *= s;
  rows.r = x.dim() == 0 ? 1 : x.size(dim);
  rows.moved_sizes.push_back(rows.r);
  rows.data = rows_along(c, dim).reshape({rows.n, rows.r});
  return rows;
}

/// [n, k] results back in x's layout: dim holds the k entries (a 0-dim result for dim < 0).
Tensor place(const Tensor& out, const Rows& rows, int64_t dim, int64_t rank) {
  if (dim < 0) return out.reshape({});
  Dims sizes = rows.moved_sizes;
  sizes.back() = out.size(1);
  return from_rows(out.reshape(sizes), dim, rank);
}

/// Runs body(row, r, values, indices, i) for every row i (rows in parallel, `grain` elements per
/// task), with the rows pinned for reading and the [n, k] outputs for writing.
template <typename Body>
void for_each_row_of(const Rows& rows, const Tensor& values, const Tensor& indices, int64_t grain, Body body) {
  PinSet pins;
  pins.add(rows.data, AccessMode::Read).add(values, AccessMode::Write).add(indices, AccessMode::Write).acquire();
  dispatch_kernel_dtype(rows.data.dtype(), [&](auto t) {
    using T = decltype(t);
    const T* x = static_cast<const T*>(rows.data.data_ptr());
    T* v = static_cast<T*>(values.data_ptr());
    int64_t* ix = static_cast<int64_t*>(indices.data_ptr());
    const int64_t r = rows.r;
    parallel_for(rows.n, std::max<int64_t>(1, grain / std::max<int64_t>(r, 1)), [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) body(x + i * r, r, v, ix, i);
    });
  });
}

/// For each row, the first index of its extremum: values [n, 1] (row dtype) and indices [n, 1].
void select_rows(const Rows& rows, bool is_max, const Tensor& values, const Tensor& indices) {
  for_each_row_of(rows, values, indices, 32768, [is_max](const auto* row, int64_t r, auto* v, int64_t* ix, int64_t i) {
    int64_t best = 0;
    for (int64_t j = 1; j < r; ++j)
      if (is_max ? above(row[j], row[best]) : below(row[j], row[best])) best = j;
    v[i] = row[best];
    ix[i] = best;
  });
}

/// For each row, the indices of its first k elements, largest or smallest first (ties by index,
/// which is also what a stable sort gives): values and indices [n, k]. k == r sorts.
void order_rows(const Rows& rows, int64_t k, bool largest_first, const Tensor& values, const Tensor& indices) {
  for_each_row_of(rows, values, indices, 4096,
                  [k, largest_first](const auto* row, int64_t r, auto* v, int64_t* ix, int64_t i) {
                    thread_local std::vector<int64_t> order;  // one buffer per thread, not per row
                    order.resize(static_cast<std::size_t>(r));
                    std::iota(order.begin(), order.end(), int64_t{0});
                    auto first = [row, largest_first](int64_t p, int64_t q) {
                      const bool pq = largest_first ? above(row[p], row[q]) : above(row[q], row[p]);
                      const bool qp = largest_first ? above(row[q], row[p]) : above(row[p], row[q]);
                      return pq || (!qp && p < q);
                    };
                    if (k == r)
                      std::sort(order.begin(), order.end(), first);
                    else
                      std::partial_sort(order.begin(), order.begin() + k, order.end(), first);
                    for (int64_t j = 0; j < k; ++j) {
                      ix[i * k + j] = order[static_cast<std::size_t>(j)];
                      v[i * k + j] = row[order[static_cast<std::size_t>(j)]];
                    }
                  });
}

/// The values' dtype back from the row dtype (exact: they are selected elements).
Tensor values_as(const Tensor& v, DType dtype) {
  if (dtype == DType::boolean) return reinterpret_dtype(v, DType::boolean);
  return v.to(dtype);
}

/// Gradient of selected values: g (the values' shape, k entries along dim, or with dim dropped
/// when `squeezed`) scattered to the selected indices, zeros elsewhere.
Tensor scatter_grad(const Tensor& g, const Tensor& indices, const Dims& x_sizes, int64_t dim, bool squeezed) {
  const int64_t rank = static_cast<int64_t>(x_sizes.size());
  const Tensor gk = squeezed ? g.unsqueeze(dim) : g, ik = squeezed ? indices.unsqueeze(dim) : indices;
  const int64_t k = rank == 0 ? 1 : gk.size(dim), r = rank == 0 ? 1 : x_sizes[static_cast<std::size_t>(dim)];
  const Tensor grows = rows_along(gk, dim), irows = rows_along(ik, dim);
  Dims moved = grows.sizes();
  moved.back() = r;
  Tensor gx = zeros(moved, {g.dtype(), nullptr});
  {
    PinSet pins;
    pins.add(grows, AccessMode::Read).add(irows, AccessMode::Read).add(gx, AccessMode::Write).acquire();
    const int64_t n = grows.numel() / std::max<int64_t>(k, 1);
    const int64_t* ix = static_cast<const int64_t*>(irows.data_ptr());
    dispatch_dtype(g.dtype(), [&](auto t) {
      using T = decltype(t);
      const T* gp = static_cast<const T*>(grows.data_ptr());
      T* out = static_cast<T*>(gx.data_ptr());
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < k; ++j) out[i * r + ix[i * k + j]] = gp[i * k + j];
    });
  }
  return rank == 0 ? gx.reshape({}) : from_rows(gx, dim, rank);
}

/// Records the values' node: the gradient goes to the selected elements.
void record_selection(const Tensor& x, Tensor& values, const Tensor& indices, int64_t dim, bool squeezed,
                      const char* name) {
  if (!autograd::needs_grad({&x})) return;
  const Dims sizes = x.sizes();
  auto node =
      autograd::make_node(name, {&x}, [sizes, dim, squeezed](autograd::Node& n, const TensorList& g) -> TensorList {
        return {scatter_grad(g[0], n.saved(0), sizes, dim, squeezed)};
      });
  node->save(indices);
  autograd::set_history({&values}, node);
}

/// The dim of an index reduction (0-dim inputs accept 0 and -1); errors name `op`.
int64_t reduction_dim(const char* op, const Tensor& x, int64_t dim) { return wrap_dim(dim, x.dim(), op, true); }

void check_nonempty_rows(const char* op, const Tensor& x, const Rows& rows, bool has_dim) {
  STRATA_CHECK(rows.r > 0 || rows.n == 0, op, ": cannot reduce over a dimension of size 0 of ", x.describe(),
               has_dim ? "" : " (specify the reduction dim with the 'dim' argument)");
}

/// max(dim) / min(dim), and argmax / argmin (which keep only the indices).
ValuesIndices extreme_dim(const char* op, OpKind kind, const Tensor& x, std::optional<int64_t> dim, bool keepdim,
                          bool is_max, bool with_grad) {
  check_backend(kind);
  check_defined(op, x, "input");
  const int64_t d = dim ? reduction_dim(op, x, *dim) : -1;
  const Rows rows = make_rows(x, x.dim() == 0 ? -1 : d);
  check_nonempty_rows(op, x, rows, dim.has_value());
  Tensor v = empty_output({rows.n, 1}, rows.data.dtype()), ix = empty_output({rows.n, 1}, DType::i64);
  select_rows(rows, is_max, v, ix);
  ValuesIndices out{values_as(place(v, rows, x.dim() == 0 ? -1 : d, x.dim()), x.dtype()),
                    place(ix, rows, x.dim() == 0 ? -1 : d, x.dim())};
  if (x.dim() == 0 || (dim && keepdim)) {
    out.values = out.values.reshape(x.dim() == 0 ? Dims{} : out.values.sizes());
  } else if (dim) {
    out.values = out.values.squeeze(d);
    out.indices = out.indices.squeeze(d);
  } else if (keepdim) {  // argmax(x, keepdim=True) without a dim: every dim kept as 1
    out.indices = out.indices.reshape(Dims(static_cast<std::size_t>(x.dim()), 1));
  }
  if (with_grad)
    record_selection(x, out.values, out.indices, x.dim() == 0 ? 0 : d, dim && !keepdim && x.dim() > 0,
                     is_max ? "MaxBackward" : "MinBackward");
  return out;
}

}  // namespace

Tensor argmax(const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  check_defined("argmax", x, "input");
  STRATA_CHECK(x.dtype() != DType::boolean, "argmax: does not support bool input ", x.describe(), " (PyTorch's rule)");
  return extreme_dim("argmax", OpKind::argmax, x, dim, keepdim, true, false).indices;
}

Tensor argmin(const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  check_defined("argmin", x, "input");
  STRATA_CHECK(x.dtype() != DType::boolean, "argmin: does not support bool input ", x.describe(), " (PyTorch's rule)");
  return extreme_dim("argmin", OpKind::argmin, x, dim, keepdim, false, false).indices;
}

ValuesIndices max(const Tensor& x, int64_t dim, bool keepdim) {
  return extreme_dim("max", OpKind::max, x, dim, keepdim, true, true);
}

ValuesIndices min(const Tensor& x, int64_t dim, bool keepdim) {
  return extreme_dim("min", OpKind::min, x, dim, keepdim, false, true);
}

ValuesIndices topk(const Tensor& x, int64_t k, int64_t dim, bool largest, bool /*sorted*/) {
  check_backend(OpKind::topk);
  check_defined("topk", x, "input");
  STRATA_CHECK(x.dtype() != DType::boolean, "topk: does not support bool input ", x.describe(), " (PyTorch's rule)");
  const int64_t d = reduction_dim("topk", x, dim);
  const Rows rows = make_rows(x, x.dim() == 0 ? -1 : d);
  STRATA_CHECK(k >= 0 && k <= rows.r, "topk: selected index k out of range: k = ", k, " for dim ", d, " of size ",
               rows.r, " of ", x.describe());
  Tensor v = empty_output({rows.n, k}, rows.data.dtype()), ix = empty_output({rows.n, k}, DType::i64);
  order_rows(rows, k, largest, v, ix);
  const int64_t pd = x.dim() == 0 ? -1 : d;
  ValuesIndices out{values_as(place(v, rows, pd, x.dim()), x.dtype()), place(ix, rows, pd, x.dim())};
  if (x.dim() == 0) out.values = out.values.reshape({}), out.indices = out.indices.reshape({});
  record_selection(x, out.values, out.indices, x.dim() == 0 ? 0 : d, false, "TopkBackward");
  return out;
}

ValuesIndices sort(const Tensor& x, int64_t dim, bool descending) {
  check_backend(OpKind::sort);
  check_defined("sort", x, "input");
  const int64_t d = reduction_dim("sort", x, dim);
  const Rows rows = make_rows(x, x.dim() == 0 ? -1 : d);
  Tensor v = empty_output({rows.n, rows.r}, rows.data.dtype()), ix = empty_output({rows.n, rows.r}, DType::i64);
  order_rows(rows, rows.r, descending, v, ix);
  const int64_t pd = x.dim() == 0 ? -1 : d;
  ValuesIndices out{values_as(place(v, rows, pd, x.dim()), x.dtype()), place(ix, rows, pd, x.dim())};
  if (x.dim() == 0) out.values = out.values.reshape({}), out.indices = out.indices.reshape({});
  record_selection(x, out.values, out.indices, x.dim() == 0 ? 0 : d, false, "SortBackward");
  return out;
}

}  // namespace strata
