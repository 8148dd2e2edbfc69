#include "ops/softmax_loss.h"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <vector>

#include "ops/detail/cpu/norm_loss_math.h"
#include "ops/detail/cpu/vec_math.h"
#include "ops/detail/op_util.h"

namespace strata {

namespace {

using namespace ops::detail;

/// Elements a parallel task handles at least (small tensors run on one thread). Loss sums are
/// split into chunks of this size too, whatever the thread count, so they are deterministic.
constexpr int64_t kGrainElems = 32768;

int64_t rows_per_task(int64_t row_elems) { return std::max<int64_t>(1, kGrainElems / std::max<int64_t>(1, row_elems)); }

/// Sticky-NaN maximum (see lane_max).
template <typename T>
inline T max_nan(T a, T v) {
  return (v > a || v != v) ? v : a;
}

// ================================================================================================
// softmax / log_softmax
// ================================================================================================

/// A contiguous tensor viewed as [outer, C, inner] around the softmax dim.
struct Slices {
  int64_t outer = 1, C = 1, inner = 1;
};

int64_t wrap_dim(const char* op, const Tensor& x, int64_t dim) {
  const int64_t rank = std::max<int64_t>(x.dim(), 1);
  STRATA_CHECK(dim >= -rank && dim < rank, op, ": dim ", dim, " is out of range for input ", x.describe(),
               " (expected in [", -rank, ", ", rank - 1, "])");
  return dim < 0 ? dim + rank : dim;
}

Slices slices_of(const Tensor& x, int64_t dim) {
  Slices s;
  if (x.dim() == 0) return s;
  for (int64_t d = 0; d < dim; ++d) s.outer *= x.size(d);
  s.C = x.size(dim);
  for (int64_t d = dim + 1; d < x.dim(); ++d) s.inner *= x.size(d);
  return s;
}

/// max of a contiguous row (n >= 1); f32 through the array kernels (ops/detail/cpu/vec_math.h).
template <typename T>
T row_max(const T* x, int64_t n) {
  if constexpr (std::is_same_v<T, float>)
    return ops::cpu::vec::kernels().max(x, n);
  else
    return lane_max(x, n);
}

/// Σ_i e^(x[i] - shift) over a contiguous row, storing the terms to y unless y is null.
template <typename T>
T row_exp_sum(const T* x, T shift, T* y, int64_t n) {
  if constexpr (std::is_same_v<T, float>) {
    return ops::cpu::vec::kernels().exp_shift_sum(x, shift, y, n);
  } else {
    if (y == nullptr) return lane_sum<T>(n, [&](int64_t i) { return fast_exp(x[i] - shift); });
    for (int64_t i = 0; i < n; ++i) y[i] = fast_exp(x[i] - shift);
    return lane_sum<T>(n, [&](int64_t i) { return y[i]; });
  }
}

template <typename T, bool Log>
void softmax_kernel(const T* x, T* y, const Slices& s) {
  const int64_t C = s.C, inner = s.inner;
  if (inner == 1) {
    parallel_for(s.outer, rows_per_task(C), [&](int64_t o0, int64_t o1) {
      for (int64_t o = o0; o < o1; ++o) {
        const T* xr = x + o * C;
        T* yr = y + o * C;
        const T m = row_max(xr, C);
        if constexpr (Log) {
          const T lse = m + std::log(row_exp_sum(xr, m, static_cast<T*>(nullptr), C));
          for (int64_t i = 0; i < C; ++i) yr[i] = xr[i] - lse;
        } else {
          const T inv = T(1) / row_exp_sum(xr, m, yr, C);
          for (int64_t i = 0; i < C; ++i) yr[i] *= inv;
        }
      }
    });
    return;
  }
  // The softmax dim is strided: work on [C, inner] blocks, vectorized across `inner`.
  parallel_for(s.outer, rows_per_task(C * inner), [&](int64_t o0, int64_t o1) {
    std::vector<T> mx(inner), sm(inner);
    for (int64_t o = o0; o < o1; ++o) {
      const T* xb = x + o * C * inner;
      T* yb = y + o * C * inner;
      std::copy(xb, xb + inner, mx.begin());
      for (int64_t c = 1; c < C; ++c)
        for (int64_t i = 0; i < inner; ++i) mx[i] = max_nan(mx[i], xb[c * inner + i]);
      std::fill(sm.begin(), sm.end(), T(0));
      if constexpr (Log) {
        for (int64_t c = 0; c < C; ++c)
          for (int64_t i = 0; i < inner; ++i) sm[i] += fast_exp(xb[c * inner + i] - mx[i]);
        for (int64_t i = 0; i < inner; ++i) sm[i] = mx[i] + std::log(sm[i]);
        for (int64_t c = 0; c < C; ++c)
          for (int64_t i = 0; i < inner; ++i) yb[c * inner + i] = xb[c * inner + i] - sm[i];
      } else {
        for (int64_t c = 0; c < C; ++c)
          for (int64_t i = 0; i < inner; ++i) {
            const T e = fast_exp(xb[c * inner + i] - mx[i]);
            yb[c * inner + i] = e;
            sm[i] += e;
          }
        for (int64_t i = 0; i < inner; ++i) sm[i] = T(1) / sm[i];
        for (int64_t c = 0; c < C; ++c)
          for (int64_t i = 0; i < inner; ++i) yb[c * inner + i] *= sm[i];
      }
    }
  });
}

/// softmax: gx = y * (g - Σ g·y); log_softmax: gx = g - exp(y) * Σ g.
template <typename T, bool Log>
void softmax_backward_kernel(const T* g, const T* y, T* gx, const Slices& s) {
  const int64_t C = s.C, inner = s.inner;
  if (inner == 1) {
    parallel_for(s.outer, rows_per_task(C), [&](int64_t o0, int64_t o1) {
      for (int64_t o = o0; o < o1; ++o) {
        const T* gr = g + o * C;
        const T* yr = y + o * C;
        T* out = gx + o * C;
        if constexpr (Log) {
          const T sum = lane_sum<T>(C, [&](int64_t i) { return gr[i]; });
          if constexpr (std::is_same_v<T, float>) {
            ops::cpu::vec::kernels().exp(yr, out, C);
            for (int64_t i = 0; i < C; ++i) out[i] = gr[i] - out[i] * sum;
          } else {
            for (int64_t i = 0; i < C; ++i) out[i] = gr[i] - fast_exp(yr[i]) * sum;
          }
        } else {
          const T dot = lane_sum<T>(C, [&](int64_t i) { return gr[i] * yr[i]; });
          for (int64_t i = 0; i < C; ++i) out[i] = yr[i] * (gr[i] - dot);
        }
      }
    });
    return;
  }
  parallel_for(s.outer, rows_per_task(C * inner), [&](int64_t o0, int64_t o1) {
    std::vector<T> acc(inner);
    for (int64_t o = o0; o < o1; ++o) {
      const int64_t base = o * C * inner;
      std::fill(acc.begin(), acc.end(), T(0));
      for (int64_t c = 0; c < C; ++c)
        for (int64_t i = 0; i < inner; ++i) {
          const int64_t k = base + c * inner + i;
          acc[i] += Log ? g[k] : g[k] * y[k];
        }
      for (int64_t c = 0; c < C; ++c)
        for (int64_t i = 0; i < inner; ++i) {
          const int64_t k = base + c * inner + i;
          if constexpr (Log)
            gx[k] = g[k] - fast_exp(y[k]) * acc[i];
          else
            gx[k] = y[k] * (g[k] - acc[i]);
        }
    }
  });
}

template <bool Log>
Tensor softmax_backward(const Tensor& grad, const Tensor& y, Slices s) {
  const Tensor g = grad.contiguous();
  Tensor gx = empty_output(y.sizes(), y.dtype());
  PinSet pins;
  pins.add(g, AccessMode::Read).add(y, AccessMode::Read).add(gx, AccessMode::Write);
  pins.acquire();
  dispatch_float(y.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if (gx.numel() > 0) softmax_backward_kernel<T, Log>(g.data<T>(), y.data<T>(), gx.data<T>(), s);
  });
  return gx;
}

template <bool Log>
Tensor softmax_impl(const char* op, OpKind kind, const Tensor& x, int64_t dim) {
  check_backend(kind);
  check_float(op, x, "input");
  const int64_t d = wrap_dim(op, x, dim);
  const Slices s = slices_of(x, d);
  const Tensor xc = x.contiguous();
  Tensor y = empty_output(x.sizes(), x.dtype());
  {
    PinSet pins;
    pins.add(xc, AccessMode::Read).add(y, AccessMode::Write);
    pins.acquire();
    dispatch_float(x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      if (y.numel() > 0) softmax_kernel<T, Log>(xc.data<T>(), y.data<T>(), s);
    });
  }
  if (autograd::needs_grad({&x})) {
    auto node = autograd::make_node(Log ? "LogSoftmaxBackward" : "SoftmaxBackward", {&x},
                                    [s](autograd::Node& n, const TensorList& g) -> TensorList {
                                      return {softmax_backward<Log>(g[0], n.saved(0), s)};
                                    });
    node->save(y);
    autograd::set_history({&y}, node);
  }
  return y;
}

// ================================================================================================
// element-wise losses: mse_loss, binary_cross_entropy, binary_cross_entropy_with_logits
// ================================================================================================

/// out = the per-element losses f(i) (None) or their sum / mean as a 0-D tensor.
template <typename T, typename F>
void reduce_loss(int64_t n, Reduction red, T* out, F&& f) {
  if (red == Reduction::None) {
    parallel_for(n, kGrainElems, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) out[i] = f(i);
    });
    return;
  }
  const int64_t chunks = (n + kGrainElems - 1) / kGrainElems;
  std::vector<double> part(static_cast<std::size_t>(chunks));
  parallel_for(chunks, 1, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      const int64_t b = c * kGrainElems, e = std::min(n, b + kGrainElems);
      part[c] = static_cast<double>(lane_sum<T>(e - b, [&](int64_t i) { return f(b + i); }));
    }
  });
  double total = 0;
  for (double p : part) total += p;
  if (red == Reduction::Mean) total /= static_cast<double>(n);  // n == 0 gives NaN, as in PyTorch
  out[0] = static_cast<T>(total);
}

/// out[i] = g_i * f(i), g_i from the None gradient `gfull` or the scalar `gs`.
template <typename T, typename F>
void scale_grad(int64_t n, T* out, const T* gfull, T gs, F&& f) {
  parallel_for(n, kGrainElems, [&](int64_t b, int64_t e) {
    if (gfull != nullptr) {
      for (int64_t i = b; i < e; ++i) out[i] = gfull[i] * f(i);
    } else {
      for (int64_t i = b; i < e; ++i) out[i] = gs * f(i);
    }
  });
}

std::string shape_str(IntArrayRef s) {
  std::ostringstream os;
  os << s;
  return os.str();
}

void check_same_shape(const char* op, const Tensor& input, const Tensor& target) {
  STRATA_CHECK(input.sizes() == target.sizes(), op, ": input ", input.describe(), " and target ", target.describe(),
               " must have the same shape");
}

/// Checks that `w` (if defined) broadcasts to `input`'s shape.
void check_broadcast_weight(const char* op, const Tensor& input, const Tensor& w, const char* what) {
  if (!w.defined()) return;
  check_float(op, w, what);
  check_same_dtype(op, input, w);
  bool ok = w.dim() <= input.dim();
  for (int64_t i = 1; ok && i <= w.dim(); ++i) {
    const int64_t ws = w.size(w.dim() - i), is = input.size(input.dim() - i);
    ok = ws == is || ws == 1;
  }
  STRATA_CHECK(ok, op, ": ", what, " ", w.describe(), " does not broadcast to input ", input.describe());
}

/// `w` expanded to `sizes` and made contiguous (undefined stays undefined).
Tensor expanded(const Tensor& w, IntArrayRef sizes) {
  if (!w.defined()) return w;
  if (w.sizes() == sizes) return w.contiguous();
  return w.expand(sizes).contiguous();
}

void check_no_grad_for(const char* op, const Tensor& t, const char* what) {
  STRATA_CHECK(!(t.defined() && t.requires_grad() && autograd::GradMode::is_enabled()), op, ": the gradient w.r.t. ",
               what, " is not supported (", what, " ", t.describe(), " requires grad)");
}

/// Per-element loss kinds.
enum class Elementwise { Mse, L1, Bce, BceLogits };

/// The per-element loss and its derivatives. HasW / HasPw are template flags (not a null test per
/// element) so that the loops stay branch-free and vectorize.
template <Elementwise K, typename T, bool HasW = false, bool HasPw = false>
struct LossFns {
  const T* x;
  const T* t;
  const T* w;   // used iff HasW
  const T* pw;  // used iff HasPw (BceLogits only)

  T weight(int64_t i) const {
    if constexpr (HasW)
      return w[i];
    else
      return T(1);
  }
  T pos(int64_t i) const {
    if constexpr (HasPw)
      return pw[i];
    else
      return T(1);
  }
  T value(int64_t i) const {
    const T xi = x[i], ti = t[i];
    if constexpr (K == Elementwise::Mse) {
      const T d = xi - ti;
      return d * d;
    } else if constexpr (K == Elementwise::L1) {
      return std::abs(xi - ti);
    } else if constexpr (K == Elementwise::Bce) {
      const T lx = std::max(fast_log(xi), T(-100));
      const T l1x = std::max(fast_log(T(1) - xi), T(-100));
      return -weight(i) * (ti * lx + (T(1) - ti) * l1x);
    } else {
      const T p = pos(i);
      const T lw = T(1) + (p - T(1)) * ti;
      const T sp = softplus_neg_abs(xi) + std::max(-xi, T(0));  // softplus(-x)
      return weight(i) * ((T(1) - ti) * xi + lw * sp);
    }
  }
  T d_input(int64_t i) const {
    const T xi = x[i], ti = t[i];
    if constexpr (K == Elementwise::Mse) {
      return T(2) * (xi - ti);
    } else if constexpr (K == Elementwise::L1) {
      return T((xi > ti) - (xi < ti));
    } else if constexpr (K == Elementwise::Bce) {
      return weight(i) * (xi - ti) / std::max((T(1) - xi) * xi, T(1e-12));
    } else {
      const T p = pos(i);
      const T lw = T(1) + (p - T(1)) * ti;
      const T sig_neg = T(1) / (T(1) + fast_exp(xi));  // sigmoid(-x)
      return weight(i) * ((T(1) - ti) - lw * sig_neg);
    }
  }
  T d_target(int64_t i) const {
    const T xi = x[i];
    if constexpr (K == Elementwise::Mse) {
      return T(-2) * (xi - t[i]);
    } else if constexpr (K == Elementwise::L1) {
      return T((t[i] > xi) - (t[i] < xi));
    } else if constexpr (K == Elementwise::Bce) {
      const T lx = std::max(fast_log(xi), T(-100));
      const T l1x = std::max(fast_log(T(1) - xi), T(-100));
      return weight(i) * (l1x - lx);
    } else if constexpr (HasPw) {
      // PyTorch's log_sigmoid(-x) - p log_sigmoid(x) = p softplus(-x) - softplus(x): equal to
      // -x + (p - 1) softplus(-x), but finite where that gives inf - inf or 0 · inf (x = ±inf).
      const T sp_neg = softplus_neg_abs(xi) + std::max(-xi, T(0));
      const T sp_pos = softplus_neg_abs(xi) + std::max(xi, T(0));
      return weight(i) * (pos(i) * sp_neg - sp_pos);
    } else {
      return weight(i) * -xi;  // PyTorch's -x (a (p - 1) softplus(-x) term would give 0 · inf at -inf)
    }
  }
};

/// Calls fn(LossFns<K, T, HasW, HasPw>{...}) with the flags matching which pointers are set.
template <Elementwise K, typename T, typename Fn>
void with_loss_fns(const T* x, const T* t, const T* w, const T* pw, Fn&& fn) {
  if (w != nullptr && pw != nullptr)
    fn(LossFns<K, T, true, true>{x, t, w, pw});
  else if (w != nullptr)
    fn(LossFns<K, T, true, false>{x, t, w, pw});
  else if (pw != nullptr)
    fn(LossFns<K, T, false, true>{x, t, w, pw});
  else
    fn(LossFns<K, T, false, false>{x, t, w, pw});
}

template <Elementwise K>
TensorList elementwise_loss_backward(const Tensor& grad, const Tensor& x, const Tensor& t, const Tensor& w_orig,
                                     const Tensor& pw_orig, Reduction red, bool need_x, bool need_t) {
  const Tensor g = red == Reduction::None ? grad.contiguous() : grad;
  const Tensor w = expanded(w_orig, x.sizes());
  const Tensor pw = expanded(pw_orig, x.sizes());
  Tensor gx = need_x ? empty_output(x.sizes(), x.dtype()) : Tensor();
  Tensor gt = need_t ? empty_output(x.sizes(), x.dtype()) : Tensor();
  const int64_t n = x.numel();
  dispatch_float(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T gs = T(0);
    if (red != Reduction::None) {
      gs = grad.item<T>();
      if (red == Reduction::Mean) gs /= static_cast<T>(n);
    }
    PinSet pins;
    pins.add(x, AccessMode::Read).add(t, AccessMode::Read);
    if (red == Reduction::None) pins.add(g, AccessMode::Read);
    if (w.defined()) pins.add(w, AccessMode::Read);
    if (pw.defined()) pins.add(pw, AccessMode::Read);
    if (gx.defined()) pins.add(gx, AccessMode::Write);
    if (gt.defined()) pins.add(gt, AccessMode::Write);
    pins.acquire();
    const T* gp = red == Reduction::None ? g.data<T>() : nullptr;
    with_loss_fns<K, T>(x.data<T>(), t.data<T>(), w.defined() ? w.data<T>() : nullptr,
                        pw.defined() ? pw.data<T>() : nullptr, [&](const auto& fn) {
                          if (need_x) scale_grad<T>(n, gx.data<T>(), gp, gs, [&](int64_t i) { return fn.d_input(i); });
                          if (need_t) scale_grad<T>(n, gt.data<T>(), gp, gs, [&](int64_t i) { return fn.d_target(i); });
                        });
  });
  return {gx, gt};
}

template <Elementwise K>
Tensor elementwise_loss(const char* op, OpKind kind, const char* node_name, const Tensor& input, const Tensor& target,
                        const Tensor& weight, const Tensor& pos_weight, Reduction red) {
  check_backend(kind);
  check_float(op, input, "input");
  check_float(op, target, "target");
  check_same_dtype(op, input, target);
  check_same_shape(op, input, target);
  check_broadcast_weight(op, input, weight, "weight");
  if (pos_weight.defined()) {
    check_broadcast_weight(op, input, pos_weight, "pos_weight");
    STRATA_CHECK(input.dim() >= 1, op, ": pos_weight needs an input with a class dim, got input ", input.describe());
  }
  check_no_grad_for(op, weight, "weight");
  check_no_grad_for(op, pos_weight, "pos_weight");

  const Tensor x = input.contiguous();
  const Tensor t = target.contiguous();
  const Tensor w = expanded(weight, input.sizes());
  const Tensor pw = expanded(pos_weight, input.sizes());
  const int64_t n = x.numel();
  Tensor out = red == Reduction::None ? empty_output(input.sizes(), input.dtype()) : empty_output({}, input.dtype());
  {
    PinSet pins;
    pins.add(x, AccessMode::Read).add(t, AccessMode::Read).add(out, AccessMode::Write);
    if (w.defined()) pins.add(w, AccessMode::Read);
    if (pw.defined()) pins.add(pw, AccessMode::Read);
    pins.acquire();
    dispatch_float(input.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const T* xp = x.data<T>();
      if constexpr (K == Elementwise::Bce) {
        int64_t bad = 0;
        for (int64_t i = 0; i < n; ++i) bad += !(xp[i] >= T(0) && xp[i] <= T(1));
        STRATA_CHECK(bad == 0, op, ": all elements of input should be between 0 and 1; ", bad, " of input ",
                     input.describe(), " are not");
      }
      with_loss_fns<K, T>(
          xp, t.data<T>(), w.defined() ? w.data<T>() : nullptr, pw.defined() ? pw.data<T>() : nullptr,
          [&](const auto& fn) { reduce_loss<T>(n, red, out.data<T>(), [&](int64_t i) { return fn.value(i); }); });
    });
  }
  if (autograd::needs_grad({&input, &target})) {
    auto node =
        autograd::make_node(node_name, {&input, &target}, [red](autograd::Node& nd, const TensorList& g) -> TensorList {
          return elementwise_loss_backward<K>(g[0], nd.saved(0), nd.saved(1), nd.saved(2), nd.saved(3), red,
                                              nd.needs_input_grad(0), nd.needs_input_grad(1));
        });
    node->save(x);
    node->save(t);
    node->save(weight);
    node->save(pos_weight);
    autograd::set_history({&out}, node);
  }
  return out;
}

// ================================================================================================
// nll_loss / cross_entropy
// ================================================================================================

/// Input [N, C, S...] and class-index target [N, S...] (or input [C] with a 0-D target).
struct ClassLayout {
  int64_t N = 1, C = 1, S = 1;
};

ClassLayout check_class_target(const char* op, const Tensor& input, const Tensor& target, const Tensor& weight) {
  STRATA_CHECK(input.dim() >= 1, op, ": input must be [C], [N, C] or [N, C, d1, ...], got ", input.describe());
  check_defined(op, target, "target");
  STRATA_CHECK(target.dtype() == DType::i64 || target.dtype() == DType::i32, op,
               ": target must hold class indices (i64 or i32), got ", target.describe());
  ClassLayout l;
  Dims expect;
  if (input.dim() == 1) {
    l.C = input.size(0);
  } else {
    l.N = input.size(0);
    l.C = input.size(1);
    expect.push_back(l.N);
    for (int64_t d = 2; d < input.dim(); ++d) {
      l.S *= input.size(d);
      expect.push_back(input.size(d));
    }
  }
  STRATA_CHECK(target.sizes() == IntArrayRef(expect), op, ": target ", target.describe(), " does not match input ",
               input.describe(), ": expected target shape ", shape_str(expect));
  if (weight.defined()) {
    check_float(op, weight, "weight");
    check_same_dtype(op, input, weight);
    STRATA_CHECK(weight.dim() == 1 && weight.size(0) == l.C, op, ": weight must have shape [", l.C,
                 "] (one per class of input ", input.describe(), "), got ", weight.describe());
  }
  return l;
}

/// The targets as i64 (contiguous), each checked to be in [0, C) or ignore_index.
std::vector<int64_t> read_targets(const char* op, const Tensor& target, int64_t C, int64_t ignore_index) {
  const Tensor tc = target.contiguous();
  std::vector<int64_t> v(static_cast<std::size_t>(tc.numel()));
  PinSet pins;
  pins.add(tc, AccessMode::Read);
  pins.acquire();
  if (tc.dtype() == DType::i64) {
    const int64_t* p = tc.data<int64_t>();
    std::copy(p, p + tc.numel(), v.begin());
  } else {
    const int32_t* p = tc.data<int32_t>();
    std::copy(p, p + tc.numel(), v.begin());
  }
  for (int64_t t : v) {
    STRATA_CHECK(t == ignore_index || (t >= 0 && t < C), op, ": target ", t,
                 " is out of bounds: expected a class index in [0, ", C, ") for C = ", C,
                 " classes (or ignore_index = ", ignore_index, ")");
  }
  return v;
}

/// The weights as doubles (1 when undefined).
std::vector<double> read_class_weights(const Tensor& weight, int64_t C) {
  std::vector<double> w(static_cast<std::size_t>(C), 1.0);
  if (!weight.defined()) return w;
  const Tensor wc = weight.to(DType::f64, /*copy=*/true);
  const double* p = wc.data<double>();
  std::copy(p, p + C, w.begin());
  return w;
}

/// Writes the None output or the reduced 0-D output from per-element losses.
template <typename T>
void write_class_loss(T* out, const std::vector<double>& loss, double total_weight, Reduction red) {
  if (red == Reduction::None) {
    for (std::size_t i = 0; i < loss.size(); ++i) out[i] = static_cast<T>(loss[i]);
    return;
  }
  double total = 0;
  for (double v : loss) total += v;
  out[0] = static_cast<T>(red == Reduction::Mean ? total / total_weight : total);
}

/// The target-shaped output of a class loss (None) or a 0-D one.
Tensor class_loss_output(const Tensor& target, Reduction red, DType dt) {
  return red == Reduction::None ? empty_output(target.sizes(), dt) : empty_output({}, dt);
}

Tensor nll_loss_backward(const Tensor& grad, const Tensor& target, const Tensor& weight, Dims input_sizes,
                         ClassLayout l, Reduction red, int64_t ignore_index, double total_weight) {
  const DType dt = grad.dtype();
  Tensor gx = zeros(input_sizes, {dt, nullptr});
  const std::vector<int64_t> tv = read_targets("nll_loss", target, l.C, ignore_index);
  const std::vector<double> w = read_class_weights(weight, l.C);
  const Tensor g = red == Reduction::None ? grad.to(DType::f64, true) : Tensor();
  const double gs = red == Reduction::None ? 0.0 : grad.item<double>() / (red == Reduction::Mean ? total_weight : 1.0);
  PinSet pins;
  pins.add(gx, AccessMode::Write);
  if (g.defined()) pins.add(g, AccessMode::Read);
  pins.acquire();
  const double* gp = g.defined() ? g.data<double>() : nullptr;
  dispatch_float(dt, [&](auto tag) {
    using T = decltype(tag);
    T* o = gx.data<T>();
    for (int64_t n = 0; n < l.N; ++n)
      for (int64_t s = 0; s < l.S; ++s) {
        const int64_t k = n * l.S + s, t = tv[k];
        if (t == ignore_index) continue;
        o[(n * l.C + t) * l.S + s] = static_cast<T>(-w[t] * (gp != nullptr ? gp[k] : gs));
      }
  });
  return gx;
}

/// Softmax statistics of one (n, s) column for cross_entropy: the log-sum-exp and Σ_c w_c z_c.
template <typename T>
TensorList cross_entropy_backward(const Tensor& grad, const Tensor& probs, const Tensor& target, const Tensor& weight,
                                  ClassLayout l, Reduction red, int64_t ignore_index, double eps, double total_weight) {
  const std::vector<int64_t> tv = read_targets("cross_entropy", target, l.C, ignore_index);
  const std::vector<double> wd = read_class_weights(weight, l.C);
  double sum_w = 0;
  for (double v : wd) sum_w += v;
  std::vector<T> w(wd.begin(), wd.end());
  // Per (n, s): scale g_ns, and A = Σ_c a_c with a_c = (1-ε) w_t [c == t] + ε/C w_c.
  const int64_t NS = l.N * l.S;
  std::vector<T> scale(static_cast<std::size_t>(NS));
  {
    const Tensor g = red == Reduction::None ? grad.to(DType::f64, true) : Tensor();
    const double gs =
        red == Reduction::None ? 0.0 : grad.item<double>() / (red == Reduction::Mean ? total_weight : 1.0);
    PinSet pins;
    if (g.defined()) pins.add(g, AccessMode::Read).acquire();
    const double* gp = g.defined() ? g.data<double>() : nullptr;
    for (int64_t k = 0; k < NS; ++k)
      scale[k] = tv[k] == ignore_index ? T(0) : static_cast<T>(gp != nullptr ? gp[k] : gs);
  }
  Tensor gx = empty_output(probs.sizes(), probs.dtype());
  PinSet pins;
  pins.add(probs, AccessMode::Read).add(gx, AccessMode::Write);
  pins.acquire();
  const T* P = probs.data<T>();
  T* G = gx.data<T>();
  const T eps_c = static_cast<T>(eps / static_cast<double>(l.C));
  const T one_m = static_cast<T>(1.0 - eps);
  const bool smooth = eps > 0;
  const bool weighted = weight.defined();
  parallel_for(l.N, rows_per_task(l.C * l.S), [&](int64_t n0, int64_t n1) {
    for (int64_t n = n0; n < n1; ++n) {
      for (int64_t s = 0; s < l.S; ++s) {
        const int64_t k = n * l.S + s;
        const T gsc = scale[k];
        const int64_t t = tv[k];
        const int64_t base = n * l.C * l.S + s;
        if (gsc == T(0)) {
          for (int64_t c = 0; c < l.C; ++c) G[base + c * l.S] = T(0);
          continue;
        }
        const T wt = w[t];
        const T A = one_m * wt + eps_c * static_cast<T>(sum_w);
        const T ga = gsc * A;
        if (l.S == 1) {
          const T* pr = P + base;
          T* gr = G + base;
          if (!smooth) {
            for (int64_t c = 0; c < l.C; ++c) gr[c] = pr[c] * ga;
          } else if (!weighted) {
            const T sub = gsc * eps_c;
            for (int64_t c = 0; c < l.C; ++c) gr[c] = pr[c] * ga - sub;
          } else {
            const T sub = gsc * eps_c;
            for (int64_t c = 0; c < l.C; ++c) gr[c] = pr[c] * ga - sub * w[c];
          }
        } else {
          for (int64_t c = 0; c < l.C; ++c) G[base + c * l.S] = P[base + c * l.S] * ga - gsc * eps_c * w[c];
        }
        G[base + t * l.S] -= gsc * one_m * wt;
      }
    }
  });
  return {gx};
}

}  // namespace

Tensor softmax(const Tensor& x, int64_t dim) { return softmax_impl<false>("softmax", OpKind::softmax, x, dim); }

Tensor log_softmax(const Tensor& x, int64_t dim) {
  return softmax_impl<true>("log_softmax", OpKind::log_softmax, x, dim);
}

Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction) {
  return elementwise_loss<Elementwise::Mse>("mse_loss", OpKind::mse_loss, "MseLossBackward", input, target, Tensor(),
                                            Tensor(), reduction);
}

Tensor l1_loss(const Tensor& input, const Tensor& target, Reduction reduction) {
  return elementwise_loss<Elementwise::L1>("l1_loss", OpKind::l1_loss, "L1LossBackward", input, target, Tensor(),
                                           Tensor(), reduction);
}

Tensor binary_cross_entropy(const Tensor& input, const Tensor& target, const Tensor& weight, Reduction reduction) {
  return elementwise_loss<Elementwise::Bce>("binary_cross_entropy", OpKind::binary_cross_entropy,
                                            "BinaryCrossEntropyBackward", input, target, weight, Tensor(), reduction);
}

Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target, const Tensor& weight,
                                        const Tensor& pos_weight, Reduction reduction) {
  return elementwise_loss<Elementwise::BceLogits>(
      "binary_cross_entropy_with_logits", OpKind::binary_cross_entropy_with_logits,
      "BinaryCrossEntropyWithLogitsBackward", input, target, weight, pos_weight, reduction);
}

Tensor nll_loss(const Tensor& log_probs, const Tensor& target, const Tensor& weight, Reduction reduction,
                int64_t ignore_index) {
  check_backend(OpKind::nll_loss);
  constexpr const char* op = "nll_loss";
  check_float(op, log_probs, "input");
  const ClassLayout l = check_class_target(op, log_probs, target, weight);
  check_no_grad_for(op, weight, "weight");
  const std::vector<int64_t> tv = read_targets(op, target, l.C, ignore_index);
  const std::vector<double> w = read_class_weights(weight, l.C);
  const Tensor x = log_probs.contiguous();
  Tensor out = class_loss_output(target, reduction, log_probs.dtype());
  double total_weight = 0;
  {
    PinSet pins;
    pins.add(x, AccessMode::Read).add(out, AccessMode::Write);
    pins.acquire();
    dispatch_float(x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const T* xp = x.data<T>();
      std::vector<double> loss(static_cast<std::size_t>(l.N * l.S));
      for (int64_t n = 0; n < l.N; ++n)
        for (int64_t s = 0; s < l.S; ++s) {
          const int64_t k = n * l.S + s, t = tv[k];
          if (t == ignore_index) {
            loss[k] = 0;
            continue;
          }
          loss[k] = -w[t] * static_cast<double>(xp[(n * l.C + t) * l.S + s]);
          total_weight += w[t];
        }
      write_class_loss<T>(out.data<T>(), loss, total_weight, reduction);
    });
  }
  if (autograd::needs_grad({&log_probs})) {
    auto node = autograd::make_node(
        "NllLossBackward", {&log_probs},
        [l, reduction, ignore_index, total_weight, sizes = log_probs.sizes()](autograd::Node& n,
                                                                              const TensorList& g) -> TensorList {
          return {nll_loss_backward(g[0], n.saved(0), n.saved(1), sizes, l, reduction, ignore_index, total_weight)};
        });
    node->save(target);
    node->save(weight);
    autograd::set_history({&out}, node);
  }
  return out;
}

Tensor cross_entropy(const Tensor& logits, const Tensor& target, const Tensor& weight, Reduction reduction,
                     int64_t ignore_index, double label_smoothing) {
  check_backend(OpKind::cross_entropy);
  constexpr const char* op = "cross_entropy";
  check_float(op, logits, "input");
  const ClassLayout l = check_class_target(op, logits, target, weight);
  check_no_grad_for(op, weight, "weight");
  STRATA_CHECK(label_smoothing >= 0.0 && label_smoothing <= 1.0, op, ": label_smoothing must be in [0, 1], got ",
               label_smoothing);
  const std::vector<int64_t> tv = read_targets(op, target, l.C, ignore_index);
  const std::vector<double> wd = read_class_weights(weight, l.C);
  const bool grad = autograd::needs_grad({&logits});
  const Tensor x = logits.contiguous();
  Tensor out = class_loss_output(target, reduction, logits.dtype());
  Tensor probs = grad ? empty_output(logits.sizes(), logits.dtype()) : Tensor();
  const double eps = label_smoothing;
  const bool weighted = weight.defined();
  double sum_w = 0;
  for (double v : wd) sum_w += v;
  double total_weight = 0;
  {
    PinSet pins;
    pins.add(x, AccessMode::Read).add(out, AccessMode::Write);
    if (grad) pins.add(probs, AccessMode::Write);
    pins.acquire();
    dispatch_float(x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const T* xp = x.data<T>();
      T* pp = grad ? probs.data<T>() : nullptr;
      std::vector<T> w(wd.begin(), wd.end());
      const int64_t NS = l.N * l.S;
      std::vector<double> loss(static_cast<std::size_t>(NS));
      const double C = static_cast<double>(l.C);
      // loss = (1-ε) w_t (lse - z_t) + ε/C (lse Σ_c w_c - Σ_c w_c z_c)
      auto column_loss = [&](int64_t k, double lse, double z_t, double wz) {
        const int64_t t = tv[k];
        if (t == ignore_index) return 0.0;
        double v = (1.0 - eps) * wd[t] * (lse - z_t);
        if (eps > 0) v += eps / C * (lse * sum_w - wz);
        return v;
      };
      if (l.S == 1) {
        parallel_for(l.N, rows_per_task(l.C), [&](int64_t n0, int64_t n1) {
          for (int64_t n = n0; n < n1; ++n) {
            const T* xr = xp + n * l.C;
            const T m = row_max(xr, l.C);
            T* pr = pp != nullptr ? pp + n * l.C : nullptr;
            const T sum = row_exp_sum(xr, m, pr, l.C);
            if (pr != nullptr) {
              const T inv = T(1) / sum;
              for (int64_t c = 0; c < l.C; ++c) pr[c] *= inv;
            }
            const double lse = static_cast<double>(m) + std::log(static_cast<double>(sum));
            double wz = 0;
            if (eps > 0) {
              wz = weighted ? lane_sum<T>(l.C, [&](int64_t c) { return w[c] * xr[c]; })
                            : lane_sum<T>(l.C, [&](int64_t c) { return xr[c]; });
            }
            const int64_t t = tv[n];
            loss[n] = column_loss(n, lse, t == ignore_index ? 0.0 : static_cast<double>(xr[t]), wz);
          }
        });
      } else {
        parallel_for(l.N, rows_per_task(l.C * l.S), [&](int64_t n0, int64_t n1) {
          std::vector<T> mx(l.S), sm(l.S), wz(l.S);
          for (int64_t n = n0; n < n1; ++n) {
            const T* xb = xp + n * l.C * l.S;
            std::copy(xb, xb + l.S, mx.begin());
            for (int64_t c = 1; c < l.C; ++c)
              for (int64_t s = 0; s < l.S; ++s) mx[s] = max_nan(mx[s], xb[c * l.S + s]);
            std::fill(sm.begin(), sm.end(), T(0));
            std::fill(wz.begin(), wz.end(), T(0));
            for (int64_t c = 0; c < l.C; ++c)
              for (int64_t s = 0; s < l.S; ++s) {
                const T e = fast_exp(xb[c * l.S + s] - mx[s]);
                if (pp != nullptr) pp[n * l.C * l.S + c * l.S + s] = e;
                sm[s] += e;
                wz[s] += w[c] * xb[c * l.S + s];
              }
            if (pp != nullptr) {
              for (int64_t c = 0; c < l.C; ++c)
                for (int64_t s = 0; s < l.S; ++s) pp[n * l.C * l.S + c * l.S + s] /= sm[s];
            }
            for (int64_t s = 0; s < l.S; ++s) {
              const int64_t k = n * l.S + s, t = tv[k];
              const double lse = static_cast<double>(mx[s]) + std::log(static_cast<double>(sm[s]));
              loss[k] = column_loss(k, lse, t == ignore_index ? 0.0 : static_cast<double>(xb[t * l.S + s]), wz[s]);
            }
          }
        });
      }
      for (int64_t k = 0; k < NS; ++k)
        if (tv[k] != ignore_index) total_weight += wd[tv[k]];
      write_class_loss<T>(out.data<T>(), loss, total_weight, reduction);
    });
  }
  if (grad) {
    auto node = autograd::make_node(
        "CrossEntropyBackward", {&logits},
        [l, reduction, ignore_index, eps, total_weight](autograd::Node& n, const TensorList& g) -> TensorList {
          const Tensor probs = n.saved(0);
          return dispatch_float(probs.dtype(), [&](auto tag) {
            using T = decltype(tag);
            return cross_entropy_backward<T>(g[0], probs, n.saved(1), n.saved(2), l, reduction, ignore_index, eps,
                                             total_weight);
          });
        });
    node->save(probs);
    node->save(target);
    node->save(weight);
    autograd::set_history({&out}, node);
  }
  if (OpRecorder* rec = op_recorder())  // Note [Op recording hook]
    rec->cross_entropy(logits, target, weight, reduction, ignore_index, label_smoothing, out);
  return out;
}

}  // namespace strata
