#include "ops/indexing.h"

#include <algorithm>
#include <memory>
#include <string>

#include "autograd/grad_mode.h"
#include "autograd/view.h"
#include "ops/binary.h"
#include "ops/detail/op_util.h"
#include "ops/inplace.h"
#include "ops/shape_ops.h"

namespace strata {

namespace {

using namespace ops::detail;

[[noreturn]] void throw_index_error(const char* op, const std::string& msg) {
  throw IndexError(std::string(op) + ": " + msg);
}

std::string sizes_str(IntArrayRef sizes) {
  std::string s = "[";
  for (std::size_t i = 0; i < sizes.size(); ++i) s += (i ? ", " : "") + std::to_string(sizes[i]);
  return s + "]";
}

bool is_mask_dtype(DType d) { return d == DType::boolean || d == DType::u8; }

/// A 0-dim integer tensor indexes as the integer it holds (PyTorch: a select, not a copy).
bool is_integer_scalar_tensor(const TensorIndex& ix) {
  return ix.kind() == TensorIndex::Kind::tensor && ix.tensor().dim() == 0 && !is_mask_dtype(ix.tensor().dtype());
}

bool has_advanced(TensorIndices indices) {
  return std::any_of(indices.begin(), indices.end(),
                     [](const TensorIndex& ix) { return ix.is_advanced() && !is_integer_scalar_tensor(ix); });
}

/// True when `from` broadcasts to `to` (NumPy's rules; `from` may have more leading 1s).
bool broadcasts_to(IntArrayRef from, IntArrayRef to) {
  const auto nf = static_cast<int64_t>(from.size()), nt = static_cast<int64_t>(to.size());
  for (int64_t i = 0; i < std::max(nf, nt); ++i) {
    const int64_t f = i < nf ? from[static_cast<std::size_t>(nf - 1 - i)] : 1;
    const int64_t t = i < nt ? to[static_cast<std::size_t>(nt - 1 - i)] : 1;
    if (f != 1 && f != t) return false;
  }
  return true;
}

/// True when a and b broadcast together.
bool broadcast_compatible(IntArrayRef a, IntArrayRef b) {
  for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    const int64_t x = a[a.size() - 1 - i], y = b[b.size() - 1 - i];
    if (x != y && x != 1 && y != 1) return false;
  }
  return true;
}

// ---- phase 1: the basic entries ---------------------------------------------------------------------

/// x after the basic entries, and the advanced index tensors (i64, not yet broadcast) with the dim of
/// `view` each indexes (increasing).
struct Resolved {
  Tensor view;
  std::vector<int64_t> dims;
  std::vector<Tensor> tensors;
};

/// The number of x's dims the entries consume; checks the index tensors' dtypes and the count.
int64_t consumed_dims(const char* op, const Tensor& x, TensorIndices indices) {
  int64_t consumed = 0, ellipses = 0;
  for (const TensorIndex& ix : indices) {
    switch (ix.kind()) {
      case TensorIndex::Kind::integer:
      case TensorIndex::Kind::slice: ++consumed; break;
      case TensorIndex::Kind::ellipsis: ++ellipses; break;
      case TensorIndex::Kind::none:
      case TensorIndex::Kind::boolean: break;
      case TensorIndex::Kind::tensor: {
        const Tensor& t = ix.tensor();
        STRATA_CHECK(t.defined(), op, ": an index tensor is undefined");
        if (t.dtype() != DType::i64 && t.dtype() != DType::i32 && !is_mask_dtype(t.dtype()))
          throw_index_error(op, "tensors used as indices must be long, int, byte or bool tensors, got " + t.describe());
        consumed += is_mask_dtype(t.dtype()) ? t.dim() : 1;
        break;
      }
    }
  }
  if (ellipses > 1) throw_index_error(op, "an index can only have a single ellipsis ('...')");
  if (consumed > x.dim())
    throw_index_error(op, "too many indices for tensor of dimension " + std::to_string(x.dim()) + " (got " +
                              std::to_string(consumed) + " indices for " + x.describe() + ")");
  return consumed;
}

/// A new dim of size 1 at `d`; the index tensor [0] (keep it) or [] (drop it) for a bool scalar.
void apply_bool(Resolved& r, int64_t d, bool keep) {
  r.view = r.view.unsqueeze(d);
  r.dims.push_back(d);
  r.tensors.push_back(keep ? zeros({1}, {DType::i64, nullptr}) : empty({0}, {DType::i64, nullptr}));
}

/// A mask over dims [d, d + mask.dim()) of the view: the index tensors of its nonzero positions.
void apply_mask(const char* op, Resolved& r, int64_t d, const Tensor& mask) {
  if (mask.dim() == 0) return apply_bool(r, d, mask.to(DType::boolean).item<bool>());
  for (int64_t k = 0; k < mask.dim(); ++k)
    if (mask.size(k) != r.view.size(d + k))
      throw_index_error(op, "The shape of the mask " + sizes_str(mask.sizes()) + " at index " + std::to_string(k) +
                                " does not match the shape of the indexed tensor " + sizes_str(r.view.sizes()) +
                                " at index " + std::to_string(d + k));
  const Tensor nz = nonzero(mask);
  for (int64_t k = 0; k < mask.dim(); ++k) {
    r.dims.push_back(d + k);
    r.tensors.push_back(nz.select(1, k).contiguous());
  }
}

/// x[i] along dim d of the view (recorded as a slice and a reshape when `record`).
Tensor select_entry(const char* op, const Tensor& v, int64_t d, int64_t orig, int64_t i, bool record) {
  const int64_t n = v.size(d);
  if (i < -n || i >= n)
    throw_index_error(op, "index " + std::to_string(i) + " is out of bounds for dimension " + std::to_string(orig) +
                              " with size " + std::to_string(n));
  if (!record) return v.select(d, i);
  const int64_t w = i < 0 ? i + n : i;
  return reshape(slice(v, d, w, w + 1, 1), v.select(d, i).sizes());
}

/// Applies the basic entries (recorded with ops/shape_ops.h when `record`) and collects the
/// advanced ones.
Resolved apply_basic(const char* op, const Tensor& x, TensorIndices indices, bool record) {
  const int64_t rank = x.dim();
  const int64_t consumed = consumed_dims(op, x, indices);
  Resolved r{x, {}, {}};
  int64_t d = 0, orig = 0;  // the dim of r.view the next entry applies to, and the same dim of x
  for (const TensorIndex& ix : indices) {
    switch (ix.kind()) {
      case TensorIndex::Kind::none:
        r.view = record ? reshape(r.view, r.view.unsqueeze(d).sizes()) : r.view.unsqueeze(d);
        ++d;
        break;
      case TensorIndex::Kind::ellipsis:
        d += rank - consumed;
        orig += rank - consumed;
        break;
      case TensorIndex::Kind::boolean: apply_bool(r, d++, ix.boolean()); break;
      case TensorIndex::Kind::slice: {
        const indexing::Slice& s = ix.slice();
        STRATA_CHECK(s.step > 0, op, ": slice step must be greater than zero, got ", s.step);
        r.view = record ? slice(r.view, d, s.start, s.stop, s.step) : r.view.slice(d, s.start, s.stop, s.step);
        ++d, ++orig;
        break;
      }
      case TensorIndex::Kind::integer: r.view = select_entry(op, r.view, d, orig++, ix.integer(), record); break;
      case TensorIndex::Kind::tensor: {
        const Tensor& t = ix.tensor();
        if (is_integer_scalar_tensor(ix)) {
          r.view = select_entry(op, r.view, d, orig++, t.to(DType::i64).item<int64_t>(), record);
        } else if (is_mask_dtype(t.dtype())) {
          apply_mask(op, r, d, t);
          d += t.dim(), orig += t.dim();
        } else {
          r.dims.push_back(d++);
          r.tensors.push_back(t.to(DType::i64));
          ++orig;
        }
        break;
      }
    }
  }
  return r;
}

// ---- phase 2: the advanced entries as element offsets -----------------------------------------------

/// Where every element of x[indices] lives in the view: element (b, r) of the [B..., R...] layout is
/// at view offset offsets[b] + rest[r] (B: the broadcast index shape, R: the dims no index tensor
/// covers). The result's shape puts B at `insert_at` among R (Note [Advanced indexing]).
struct Plan {
  Tensor view;
  std::vector<int64_t> offsets, rest;
  Dims bshape, rsizes, result_shape;
  int64_t insert_at = 0;
};

Dims broadcast_index_shape(const char* op, const std::vector<Tensor>& tensors) {
  Dims shape;
  for (const Tensor& t : tensors) {
    if (!broadcast_compatible(t.sizes(), shape)) {
      std::string shapes;
      for (const Tensor& u : tensors) shapes += (shapes.empty() ? "" : ", ") + sizes_str(u.sizes());
      throw_index_error(op, "shape mismatch: indexing tensors could not be broadcast together with shapes " + shapes);
    }
    shape = broadcast_shapes(shape, t.sizes(), "index");
  }
  return shape;
}

/// offsets[b] += index_k[b] * stride for one index tensor (broadcast to B), range-checked.
void add_index_offsets(const char* op, std::vector<int64_t>& offsets, const Tensor& index, IntArrayRef bshape,
                       int64_t size, int64_t stride, int64_t dim) {
  const Tensor c = index.expand(bshape).contiguous();
  PinSet pins;
  pins.add(c, AccessMode::Read).acquire();
  const int64_t* ip = static_cast<const int64_t*>(c.data_ptr());
  for (std::size_t b = 0; b < offsets.size(); ++b) {
    const int64_t v = ip[b];
    if (v < -size || v >= size)
      throw_index_error(op, "index " + std::to_string(v) + " is out of bounds for dimension " + std::to_string(dim) +
                                " with size " + std::to_string(size));
    offsets[b] += (v < 0 ? v + size : v) * stride;
  }
}

Plan make_plan(const char* op, Resolved r) {
  Plan p;
  p.view = std::move(r.view);
  p.bshape = broadcast_index_shape(op, r.tensors);
  int64_t nb = 1;
  for (int64_t s : p.bshape) nb *= s;
  p.offsets.assign(static_cast<std::size_t>(nb), 0);
  for (std::size_t k = 0; k < r.tensors.size(); ++k) {
    const int64_t d = r.dims[k];
    add_index_offsets(op, p.offsets, r.tensors[k], p.bshape, p.view.size(d), p.view.stride(d), d);
  }
  Dims rstrides;
  for (int64_t d = 0; d < p.view.dim(); ++d) {
    if (std::find(r.dims.begin(), r.dims.end(), d) != r.dims.end()) continue;
    p.rsizes.push_back(p.view.size(d));
    rstrides.push_back(p.view.stride(d));
  }
  p.rest = strided_offsets(p.rsizes, rstrides);
  const bool adjacent = r.dims.empty() || r.dims.back() - r.dims.front() + 1 == static_cast<int64_t>(r.dims.size());
  p.insert_at = adjacent && !r.dims.empty() ? r.dims.front() : 0;
  for (int64_t i = 0; i < static_cast<int64_t>(p.rsizes.size()); ++i) {
    if (i == p.insert_at)
      for (int64_t b : p.bshape) p.result_shape.push_back(b);
    p.result_shape.push_back(p.rsizes[static_cast<std::size_t>(i)]);
  }
  if (p.insert_at == static_cast<int64_t>(p.rsizes.size()))
    for (int64_t b : p.bshape) p.result_shape.push_back(b);
  return p;
}

/// The permutation from the [B..., R...] layout to the result's layout, or its inverse.
Dims layout_perm(const Plan& p, bool to_result) {
  const auto nb = static_cast<int64_t>(p.bshape.size());
  const auto rank = static_cast<int64_t>(p.result_shape.size());
  Dims perm(static_cast<std::size_t>(rank));
  for (int64_t i = 0; i < rank; ++i) {
    const int64_t src = i < p.insert_at ? nb + i : i < p.insert_at + nb ? i - p.insert_at : i;
    if (to_result)
      perm[static_cast<std::size_t>(i)] = src;
    else
      perm[static_cast<std::size_t>(src)] = i;
  }
  return perm;
}

// ---- phase 3: the kernels ---------------------------------------------------------------------------

/// x[indices] for a plan: out[b, r] = view[offsets[b] + rest[r]], then laid out as the result.
Tensor gather_plan(const Plan& p) {
  Dims br = p.bshape;
  for (int64_t r : p.rsizes) br.push_back(r);
  Tensor out = empty_output(br, p.view.dtype());
  if (out.numel() > 0) {
    PinSet pins;
    pins.add(p.view, AccessMode::Read).add(out, AccessMode::Write);
    pins.acquire();
    const auto nr = static_cast<int64_t>(p.rest.size());
    dispatch_itemsize(p.view.itemsize(), [&](auto utag) {
      using U = decltype(utag);
      const U* src = static_cast<const U*>(p.view.data_ptr());
      U* dst = static_cast<U*>(out.data_ptr());
      parallel_for(static_cast<int64_t>(p.offsets.size()), std::max<int64_t>(1, 16384 / std::max<int64_t>(nr, 1)),
                   [&](int64_t begin, int64_t end) {
                     for (int64_t b = begin; b < end; ++b) {
                       const U* s = src + p.offsets[static_cast<std::size_t>(b)];
                       U* d = dst + b * nr;
                       for (int64_t r = 0; r < nr; ++r) d[r] = s[p.rest[static_cast<std::size_t>(r)]];
                     }
                   });
    });
  }
  if (p.insert_at == 0) return out;
  return out.permute(layout_perm(p, true)).contiguous();
}

/// view[offsets[b] + rest[r]] = (or +=) values[b, r]; `values` is contiguous in the [B, R] layout.
/// Accumulation runs in index order (duplicates sum deterministically); bool accumulates as `or`.
void scatter_plan(const Plan& p, const Tensor& values, bool accumulate) {
  const auto nr = static_cast<int64_t>(p.rest.size());
  const auto nb = static_cast<int64_t>(p.offsets.size());
  if (nr * nb == 0) return;
  PinSet pins;
  pins.add(values, AccessMode::Read).add(p.view, AccessMode::Write);
  pins.acquire();
  if (!accumulate) {
    dispatch_itemsize(p.view.itemsize(), [&](auto utag) {
      using U = decltype(utag);
      const U* src = static_cast<const U*>(values.data_ptr());
      U* dst = static_cast<U*>(p.view.data_ptr());
      for (int64_t b = 0; b < nb; ++b)
        for (int64_t r = 0; r < nr; ++r)
          dst[p.offsets[static_cast<std::size_t>(b)] + p.rest[static_cast<std::size_t>(r)]] = src[b * nr + r];
    });
    return;
  }
  const bool is_bool = p.view.dtype() == DType::boolean;
  const DType kernel = is_bool ? DType::u8 : p.view.dtype();
  STRATA_CHECK(kernel != DType::f16 && kernel != DType::bf16, "index_put_: accumulate=True does not support ",
               p.view.describe(), " (use f32, f64, an integer or a bool tensor)");
  dispatch_kernel_dtype(kernel, [&](auto tag) {
    using T = decltype(tag);
    const T* src = static_cast<const T*>(values.data_ptr());
    T* dst = static_cast<T*>(p.view.data_ptr());
    for (int64_t b = 0; b < nb; ++b)
      for (int64_t r = 0; r < nr; ++r) {
        T& t = dst[p.offsets[static_cast<std::size_t>(b)] + p.rest[static_cast<std::size_t>(r)]];
        if constexpr (std::is_same_v<T, uint8_t>)
          t = is_bool ? static_cast<T>(t | src[b * nr + r]) : static_cast<T>(t + src[b * nr + r]);
        else
          t = static_cast<T>(t + src[b * nr + r]);
      }
  });
}

/// values (x's dtype) broadcast to the plan's result shape, in the [B, R] layout and contiguous; a
/// copy when it shares x's storage, so that reads never see earlier writes.
Tensor values_in_layout(const char* op, const Plan& p, const Tensor& values) {
  Dims vs = values.sizes();
  while (vs.size() > p.result_shape.size() && vs[0] == 1) vs.erase(0);
  if (!broadcasts_to(vs, p.result_shape) || vs.size() > p.result_shape.size())
    STRATA_FAIL(op, ": shape mismatch: value tensor of shape ", sizes_str(values.sizes()),
                " cannot be broadcast to indexing result of shape ", sizes_str(p.result_shape));
  Tensor v = values.reshape(vs).expand(p.result_shape).permute(layout_perm(p, false));
  if (v.shares_storage(p.view)) return v.clone();
  return v.contiguous();
}

/// The writes of index_put_ into x, with no grad check.
void put_into(const char* op, const Tensor& x, TensorIndices indices, const Tensor& values, bool accumulate) {
  check_defined(op, values, "values");
  STRATA_CHECK(values.dtype() == x.dtype(), op, ": Index put requires the source and destination dtypes match, ",
               "got ", x.describe(), " for the destination and ", values.describe(), " for the source");
  const Plan p = make_plan(op, apply_basic(op, x, indices, false));
  scatter_plan(p, values_in_layout(op, p, values), accumulate);
  x.bump_version();
}

// ---- saving an index for backward --------------------------------------------------------------------

/// An index whose tensors are saved on a node (Note [Saved values] in autograd/node.h): the entries
/// with the tensors left out, and for each tensor its position and its slot on the node (the slots
/// are 0, 1, ... in order: save() them, with save_tensors, before anything else).
struct SavedIndex {
  std::vector<TensorIndex> pattern;
  std::vector<std::pair<std::size_t, std::size_t>> slots;
  std::vector<Tensor> tensors;  // dropped once saved

  explicit SavedIndex(TensorIndices indices) {
    for (const TensorIndex& ix : indices) {
      if (ix.kind() == TensorIndex::Kind::tensor) {
        slots.emplace_back(pattern.size(), tensors.size());
        tensors.push_back(ix.tensor());
        pattern.emplace_back(indexing::None);
      } else {
        pattern.push_back(ix);
      }
    }
  }

  void save_tensors(autograd::Node& node) {
    for (std::size_t k = 0; k < tensors.size(); ++k) {
      const std::size_t slot = node.save(tensors[k]);
      STRATA_ASSERT(slot == k, "SavedIndex: the index tensors must be saved first");
    }
    tensors.clear();
  }

  std::vector<TensorIndex> restore(const autograd::Node& n) const {
    std::vector<TensorIndex> out = pattern;
    for (auto [pos, slot] : slots) out[pos] = TensorIndex(n.saved(slot));
    return out;
  }
};

/// `x` broadcast to `sizes`, recorded (backward: sum over the broadcast dims) when x needs grad.
Tensor expand_recorded(const Tensor& x, IntArrayRef sizes) {
  Tensor out = x.expand(sizes);
  if (out.sizes() == x.sizes()) return x;
  if (!autograd::needs_grad({&x})) return out;
  const Dims in_sizes = x.sizes();
  auto node = autograd::make_node(
      "ExpandBackward", {&x},
      [in_sizes](autograd::Node&, const TensorList& g) -> TensorList { return {sum_to_shape(g[0], in_sizes)}; });
  autograd::set_history({&out}, node);
  return out;
}

/// x[indices] for a basic index: a view, recorded when x needs grad, and tracked while grad mode
/// is on even when it does not (with the raw views' strides), so that a write of a value that
/// requires grad into it reaches x's history (Note [View tracking] in autograd/view.h).
Tensor basic_index_view(const char* op, const Tensor& x, TensorIndices indices) {
  const bool grad = autograd::needs_grad({&x});
  Tensor view = apply_basic(op, x, indices, grad).view;
  if (!grad) autograd::mark_view(view, x);
  return view;
}

}  // namespace

// ---- index / index_put --------------------------------------------------------------------------------

Tensor index(const Tensor& x, TensorIndices indices) {
  check_backend(OpKind::index);
  check_defined("index", x, "self");
  const bool grad = autograd::needs_grad({&x});
  if (!has_advanced(indices)) return basic_index_view("index", x, indices);
  Tensor out = gather_plan(make_plan("index", apply_basic("index", x, indices, false)));
  if (grad) {
    const Dims in_sizes = x.sizes();
    auto saved = std::make_shared<SavedIndex>(indices);
    auto node = autograd::make_node("IndexBackward", {&x},
                                    [saved, in_sizes](autograd::Node& n, const TensorList& g) -> TensorList {
                                      const std::vector<TensorIndex> ix = saved->restore(n);
                                      return {index_put(zeros(in_sizes, {g[0].dtype(), nullptr}), ix, g[0],
                                                        /*accumulate=*/true)};
                                    });
    saved->save_tensors(*node);
    autograd::set_history({&out}, node);
  }
  return out;
}

namespace {

/// index_put (errors name `op`), recorded.
Tensor index_put_recorded(const char* op, const Tensor& x, TensorIndices indices, const Tensor& values,
                          bool accumulate) {
  check_defined(op, x, "self");
  Tensor out = x.clone();
  put_into(op, out, indices, values, accumulate);
  if (autograd::needs_grad({&x, &values})) {
    const Dims value_sizes = values.sizes();
    auto saved = std::make_shared<SavedIndex>(indices);
    auto node =
        autograd::make_node("IndexPutBackward", {&x, &values},
                            [saved, value_sizes, accumulate](autograd::Node& n, const TensorList& g) -> TensorList {
                              const std::vector<TensorIndex> ix = saved->restore(n);
                              Tensor gx, gv;
                              if (n.needs_input_grad(0))
                                gx = accumulate ? g[0] : index_put(g[0], ix, zeros({}, {g[0].dtype(), nullptr}), false);
                              if (n.needs_input_grad(1)) {
                                Tensor picked = index(g[0], ix);
                                Dims stripped = value_sizes;
                                while (stripped.size() > static_cast<std::size_t>(picked.dim()) && stripped[0] == 1)
                                  stripped.erase(0);
                                gv = reshape(sum_to_shape(picked, stripped), value_sizes);
                              }
                              return {gx, gv};
                            });
    saved->save_tensors(*node);
    autograd::set_history({&out}, node);
  }
  return out;
}

}  // namespace

Tensor index_put(const Tensor& x, TensorIndices indices, const Tensor& values, bool accumulate) {
  check_backend(OpKind::index_put);
  return index_put_recorded("index_put", x, indices, values, accumulate);
}

namespace {

/// index_put_ (errors name `op`) through Note [In-place ops]: index_put recorded, or put_into.
Tensor& index_put_in_place(const char* op, Tensor& x, TensorIndices indices, const Tensor& values, bool accumulate) {
  check_defined(op, values, "values");
  auto compute = [&](const Tensor& a) { return index_put_recorded(op, a, indices, values, accumulate); };
  auto direct = [&](Tensor& s) { put_into(op, s, indices, values, accumulate); };
  return apply_in_place(x, {op, compute, false, values.requires_grad(), direct});
}

}  // namespace

Tensor& index_put_(Tensor& x, TensorIndices indices, const Tensor& values, bool accumulate) {
  check_backend(OpKind::index_put);
  return index_put_in_place("index_put_", x, indices, values, accumulate);
}

void set_index(Tensor& x, TensorIndices indices, const Tensor& value) {
  check_defined("__setitem__", x, "self");
  check_defined("__setitem__", value, "value");
  if (has_advanced(indices)) {  // PyTorch's index_put_: the value keeps its dtype, which must be x's
    index_put_in_place("__setitem__", x, indices, value, false);
    return;
  }
  Tensor view = basic_index_view("__setitem__", x, indices);
  copy_(view, value);  // PyTorch's x[s].copy_(value): CopySlices on x when recorded
}

void set_index(Tensor& x, TensorIndices indices, Scalar value) {
  check_defined("__setitem__", x, "self");
  if (has_advanced(indices)) {
    index_put_in_place("__setitem__", x, indices, scalar_tensor(value, x.dtype()), false);
    return;
  }
  Tensor view = basic_index_view("__setitem__", x, indices);
  fill_(view, value);
}

// ---- masked ops -------------------------------------------------------------------------------------

namespace {

void check_mask(const char* op, const Tensor& mask) {
  check_defined(op, mask, "mask");
  STRATA_CHECK(mask.dtype() == DType::boolean, op, ": mask must be a bool tensor, got ", mask.describe());
}

}  // namespace

Tensor masked_fill(const Tensor& x, const Tensor& mask, Scalar value) {
  check_backend(OpKind::masked_fill);
  check_defined("masked_fill", x, "self");
  check_mask("masked_fill", mask);
  broadcast_pair("masked_fill", x, mask);
  return where(mask, scalar_tensor(value, x.dtype()), x);
}

Tensor masked_fill(const Tensor& x, const Tensor& mask, const Tensor& value) {
  check_backend(OpKind::masked_fill);
  check_defined("masked_fill", x, "self");
  check_defined("masked_fill", value, "value");
  check_mask("masked_fill", mask);
  STRATA_CHECK(value.dim() == 0, "masked_fill: only supports a 0-dimensional value tensor, but got ", value.describe());
  broadcast_pair("masked_fill", x, mask);
  return where(mask, convert_operand(value, x.dtype()), x);
}

namespace {

template <typename V>
Tensor& masked_fill_inplace(Tensor& x, const Tensor& mask, const V& value, bool value_requires_grad) {
  check_defined("masked_fill_", x, "self");
  check_mask("masked_fill_", mask);
  STRATA_CHECK(broadcasts_to(mask.sizes(), x.sizes()), "masked_fill_: mask ", mask.describe(),
               " is not broadcastable to self ", x.describe());
  return apply_in_place(
      x,
      {"masked_fill_", [&](const Tensor& a) { return masked_fill(a, mask, value); }, false, value_requires_grad, {}});
}

}  // namespace

Tensor& masked_fill_(Tensor& x, const Tensor& mask, Scalar value) { return masked_fill_inplace(x, mask, value, false); }
Tensor& masked_fill_(Tensor& x, const Tensor& mask, const Tensor& value) {
  check_defined("masked_fill_", value, "value");
  return masked_fill_inplace(x, mask, value, value.requires_grad());
}

Tensor masked_select(const Tensor& x, const Tensor& mask) {
  check_backend(OpKind::masked_select);
  check_defined("masked_select", x, "self");
  check_mask("masked_select", mask);
  const Dims shape = broadcast_pair("masked_select", x, mask);
  const TensorIndex ix[] = {mask.expand(shape)};
  return index(expand_recorded(x, shape), ix);
}

// ---- nonzero / one_hot -----------------------------------------------------------------------------

Tensor nonzero(const Tensor& x) {
  check_backend(OpKind::nonzero);
  check_defined("nonzero", x, "self");
  Tensor c = x.dtype() == DType::f16 || x.dtype() == DType::bf16 ? x.to(DType::f32) : x.contiguous();
  if (c.dtype() == DType::boolean) c = reinterpret_dtype(c, DType::u8);
  const int64_t rank = x.dim(), n = c.numel();
  std::vector<int64_t> hits;
  {
    PinSet pins;
    pins.add(c, AccessMode::Read).acquire();
    dispatch_kernel_dtype(c.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const T* p = static_cast<const T*>(c.data_ptr());
      for (int64_t i = 0; i < n; ++i)
        if (p[i] != T(0)) hits.push_back(i);
    });
  }
  Tensor out = empty_output({static_cast<int64_t>(hits.size()), rank}, DType::i64);
  PinSet pins;
  pins.add(out, AccessMode::Write).acquire();
  int64_t* op = static_cast<int64_t*>(out.data_ptr());
  const Dims strides = contiguous_strides(x.sizes());
  for (std::size_t h = 0; h < hits.size(); ++h)
    for (int64_t d = 0; d < rank; ++d)
      op[static_cast<int64_t>(h) * rank + d] = hits[h] / strides[static_cast<std::size_t>(d)] % x.size(d);
  return out;
}

std::vector<Tensor> nonzero_tuple(const Tensor& x) {
  const Tensor nz = nonzero(x);
  std::vector<Tensor> out;
  if (x.dim() == 0) out.push_back(zeros({nz.size(0)}, {DType::i64, nullptr}));
  for (int64_t d = 0; d < x.dim(); ++d) out.push_back(nz.select(1, d).contiguous());
  return out;
}

Tensor one_hot(const Tensor& x, int64_t num_classes) {
  check_backend(OpKind::one_hot);
  check_defined("one_hot", x, "self");
  STRATA_CHECK(x.dtype() == DType::i64, "one_hot: is only applicable to index tensors of dtype i64, got ",
               x.describe());
  STRATA_CHECK(num_classes >= -1, "one_hot: num_classes must be -1 or non-negative, got ", num_classes);
  const Tensor c = x.contiguous();
  PinSet pins;
  pins.add(c, AccessMode::Read).acquire();
  const int64_t* ip = static_cast<const int64_t*>(c.data_ptr());
  const int64_t n = c.numel();
  STRATA_CHECK(num_classes != -1 || n > 0, "one_hot: can not infer the number of classes from an empty tensor");
  int64_t lo = 0, hi = -1;
  for (int64_t i = 0; i < n; ++i) lo = std::min(lo, ip[i]), hi = std::max(hi, ip[i]);
  STRATA_CHECK(lo >= 0, "one_hot: class values must be non-negative, got ", lo);
  const int64_t classes = num_classes == -1 ? hi + 1 : num_classes;
  STRATA_CHECK(hi < classes, "one_hot: class values must be smaller than num_classes (", classes, "), got ", hi);
  Dims sizes = x.sizes();
  sizes.push_back(classes);
  Tensor out = zeros(sizes, {DType::i64, nullptr});
  PinSet out_pins;
  out_pins.add(out, AccessMode::Write).acquire();
  int64_t* op = static_cast<int64_t*>(out.data_ptr());
  for (int64_t i = 0; i < n; ++i) op[i * classes + ip[i]] = 1;
  return out;
}

// ---- index_add / take_along_dim --------------------------------------------------------------------

namespace {

/// index_add's checks; returns the index [:, ..., :, index] for dim d.
std::vector<TensorIndex> index_add_indices(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& source) {
  check_defined("index_add", x, "self");
  check_defined("index_add", source, "source");
  check_index("index_add", index, "index");
  STRATA_CHECK(x.dim() > 0, "index_add: self must have at least one dim, got ", x.describe());
  STRATA_CHECK(index.dim() <= 1, "index_add: index must be 1-D or 0-D, got ", index.describe());
  const int64_t d = wrap_dim(dim, x.dim(), "index_add");
  STRATA_CHECK(source.dtype() == x.dtype(), "index_add: self ", x.describe(), " and source ", source.describe(),
               " must have the same dtype");
  bool shape_ok = source.dim() == x.dim() && source.size(d) == index.numel();
  for (int64_t k = 0; shape_ok && k < x.dim(); ++k) shape_ok = k == d || source.size(k) == x.size(k);
  STRATA_CHECK(shape_ok, "index_add: source ", source.describe(), " must have the shape of self ", x.describe(),
               " except in dim ", d, ", where its size must be the index's length ", index.numel());
  std::vector<TensorIndex> ix(static_cast<std::size_t>(d), indexing::Slice{});
  ix.emplace_back(index.reshape({index.numel()}));
  return ix;
}

}  // namespace

Tensor index_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& source, Scalar alpha) {
  check_backend(OpKind::index_add);
  const std::vector<TensorIndex> ix = index_add_indices(x, dim, index, source);
  const bool unit = alpha.to_double() == 1.0 && !alpha.is_bool();
  return index_put_recorded("index_add", x, ix, unit ? source : mul(source, alpha).to(x.dtype()), /*accumulate=*/true);
}

Tensor& index_add_(Tensor& x, int64_t dim, const Tensor& index, const Tensor& source, Scalar alpha) {
  check_backend(OpKind::index_add);
  check_defined("index_add_", x, "self");
  const std::vector<TensorIndex> ix = index_add_indices(x, dim, index, source);
  const bool unit = alpha.to_double() == 1.0 && !alpha.is_bool();
  return index_put_in_place("index_add_", x, ix, unit ? source : convert_operand(mul(source, alpha), x.dtype()),
                            /*accumulate=*/true);
}

Tensor take_along_dim(const Tensor& x, const Tensor& indices, std::optional<int64_t> dim) {
  check_backend(OpKind::take_along_dim);
  check_defined("take_along_dim", x, "self");
  check_index("take_along_dim", indices, "indices");
  if (!dim) return gather(reshape(x, {x.numel()}), 0, indices.reshape({indices.numel()}));
  STRATA_CHECK(x.dim() == indices.dim(), "take_along_dim: input ", x.describe(), " and indices ", indices.describe(),
               " should have the same number of dimensions");
  const int64_t d = wrap_dim(*dim, x.dim(), "take_along_dim");
  Dims xs = x.sizes(), is = indices.sizes();
  for (int64_t k = 0; k < x.dim(); ++k) {
    if (k == d) continue;
    const auto ks = static_cast<std::size_t>(k);
    STRATA_CHECK(xs[ks] == is[ks] || xs[ks] == 1 || is[ks] == 1, "take_along_dim: input ", x.describe(),
                 " and indices ", indices.describe(), " do not broadcast in dim ", k);
    xs[ks] = is[ks] = std::max(xs[ks], is[ks]);
  }
  return gather(expand_recorded(x, xs), d, indices.expand(is).contiguous());
}

}  // namespace strata
