#include "ops/normalization.h"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <vector>

#include "autograd/engine.h"
#include "ops/binary.h"
#include "ops/detail/cpu/norm_loss_math.h"
#include "ops/detail/op_util.h"
#include "ops/shape_ops.h"
#include "ops/statistics.h"
#include "ops/unary.h"

namespace strata {

namespace {

using namespace ops::detail;

/// Elements a parallel task handles at least (small tensors run on one thread).
constexpr int64_t kGrainElems = 32768;
/// Width of the column blocks when statistics reduce over rows of a row-major matrix.
constexpr int64_t kColBlock = 64;

// ================================================================================================
// batch_norm
// ================================================================================================

/// A contiguous batch-norm operand viewed as [N, C, S] (S = product of the spatial dims).
struct Layout {
  int64_t N = 0, C = 0, S = 1;
  int64_t per_channel() const { return N * S; }
};

int64_t channels_per_task(const Layout& l) {
  return std::max<int64_t>(1, kGrainElems / std::max<int64_t>(1, l.N * l.S));
}
int64_t col_blocks(int64_t C) { return (C + kColBlock - 1) / kColBlock; }
int64_t col_blocks_per_task(int64_t rows) {
  return std::max<int64_t>(1, kGrainElems / std::max<int64_t>(1, rows * kColBlock));
}

/// For every channel c: s1[c] = Σ f1(row, i), s2[c] = Σ f2(row, i, c) over (n, s), where the second
/// sum may use s1 (two passes: `second(c)` is called after s1[c] is known). Rows are the S-long
/// contiguous runs of one channel; with S == 1 the sums run over the rows of an [N, C] matrix,
/// vectorized across channels.
///
/// `a` and `b` are the two operands the sums read (b may equal a).
template <typename T, typename F1, typename F2>
void channel_two_sums(const T* a, const T* b, const Layout& l, double* s1, double* s2, F1 f1, F2 f2) {
  if (l.S > 1) {
    parallel_for(l.C, channels_per_task(l), [&](int64_t c0, int64_t c1) {
      for (int64_t c = c0; c < c1; ++c) {
        double acc = 0;
        for (int64_t n = 0; n < l.N; ++n) {
          const T* ra = a + (n * l.C + c) * l.S;
          const T* rb = b + (n * l.C + c) * l.S;
          acc += lane_sum<T>(l.S, [&](int64_t i) { return f1(ra[i], rb[i]); });
        }
        s1[c] = acc;
        const T k = static_cast<T>(acc);
        acc = 0;
        for (int64_t n = 0; n < l.N; ++n) {
          const T* ra = a + (n * l.C + c) * l.S;
          const T* rb = b + (n * l.C + c) * l.S;
          acc += lane_sum<T>(l.S, [&](int64_t i) { return f2(ra[i], rb[i], k, c); });
        }
        s2[c] = acc;
      }
    });
  } else {
    parallel_for(col_blocks(l.C), col_blocks_per_task(l.N), [&](int64_t b0, int64_t b1) {
      double acc[kColBlock];
      T k[kColBlock];
      for (int64_t blk = b0; blk < b1; ++blk) {
        const int64_t c0 = blk * kColBlock, w = std::min(kColBlock, l.C - c0);
        std::fill(acc, acc + w, 0.0);
        for (int64_t n = 0; n < l.N; ++n) {
          const T* ra = a + n * l.C + c0;
          const T* rb = b + n * l.C + c0;
          for (int64_t j = 0; j < w; ++j) acc[j] += static_cast<double>(f1(ra[j], rb[j]));
        }
        for (int64_t j = 0; j < w; ++j) {
          s1[c0 + j] = acc[j];
          k[j] = static_cast<T>(acc[j]);
          acc[j] = 0;
        }
        for (int64_t n = 0; n < l.N; ++n) {
          const T* ra = a + n * l.C + c0;
          const T* rb = b + n * l.C + c0;
          for (int64_t j = 0; j < w; ++j) acc[j] += static_cast<double>(f2(ra[j], rb[j], k[j], c0 + j));
        }
        for (int64_t j = 0; j < w; ++j) s2[c0 + j] = acc[j];
      }
    });
  }
}

/// out = p * A[c] + q * B[c] + K[c] per channel (q may be null: the middle term is dropped).
template <typename T>
void channel_affine(T* out, const T* p, const T* A, const T* q, const T* B, const T* K, const Layout& l) {
  if (l.S > 1) {
    parallel_for(l.N * l.C, std::max<int64_t>(1, kGrainElems / l.S), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const int64_t c = r % l.C;
        T* o = out + r * l.S;
        const T* pr = p + r * l.S;
        const T a = A[c], k = K[c];
        if (q != nullptr) {
          const T* qr = q + r * l.S;
          const T bb = B[c];
          for (int64_t i = 0; i < l.S; ++i) o[i] = pr[i] * a + qr[i] * bb + k;
        } else {
          for (int64_t i = 0; i < l.S; ++i) o[i] = pr[i] * a + k;
        }
      }
    });
  } else {
    parallel_for(l.N, std::max<int64_t>(1, kGrainElems / std::max<int64_t>(1, l.C)), [&](int64_t n0, int64_t n1) {
      for (int64_t n = n0; n < n1; ++n) {
        T* o = out + n * l.C;
        const T* pr = p + n * l.C;
        if (q != nullptr) {
          const T* qr = q + n * l.C;
          for (int64_t c = 0; c < l.C; ++c) o[c] = pr[c] * A[c] + qr[c] * B[c] + K[c];
        } else {
          for (int64_t c = 0; c < l.C; ++c) o[c] = pr[c] * A[c] + K[c];
        }
      }
    });
  }
}

Layout layout_of(const Tensor& x) {
  Layout l;
  l.N = x.size(0);
  l.C = x.size(1);
  for (int64_t d = 2; d < x.dim(); ++d) l.S *= x.size(d);
  return l;
}

/// Element c of a 1-D tensor of any stride (pinned by the caller).
template <typename T>
T* elem(const Tensor& t, int64_t c) {
  return static_cast<T*>(t.data_ptr()) + c * t.stride(0);
}

/// Gradients of batch_norm: {grad_x, grad_weight, grad_bias} (undefined where not needed).
/// `x` is the contiguous input saved by forward; `mean` / `invstd` are what forward normalized with.
/// grad_x is written over `grad` when autograd::reusable_gradient(grad) (Note [In-place backward]):
/// the channel sums read all of grad first, and the last pass reads each element before writing it.
TensorList batch_norm_backward(const Tensor& grad, const Tensor& x, const Tensor& weight, const Tensor& mean,
                               const Tensor& invstd, bool training, bool need_gx, bool need_gw, bool need_gb) {
  const bool in_place = need_gx && autograd::reusable_gradient(grad) && grad.dtype() == x.dtype() &&
                        IntArrayRef(grad.sizes()) == IntArrayRef(x.sizes());
  const Tensor g = grad.contiguous();
  const Layout l = layout_of(x);
  const DType dt = x.dtype();
  Tensor gx = in_place ? g : need_gx ? empty_output(x.sizes(), dt) : Tensor();
  Tensor gw = need_gw ? empty_output({l.C}, dt) : Tensor();
  Tensor gb = need_gb ? empty_output({l.C}, dt) : Tensor();
  PinSet pins;
  pins.add(g, AccessMode::Read).add(x, AccessMode::Read).add(mean, AccessMode::Read).add(invstd, AccessMode::Read);
  if (weight.defined()) pins.add(weight, AccessMode::Read);
  for (const Tensor* t : {&gx, &gw, &gb})
    if (t->defined()) pins.add(*t, AccessMode::Write);
  pins.acquire();
  dispatch_float(dt, [&](auto tag) {
    using T = decltype(tag);
    const T* gp = g.data<T>();
    const T* xp = x.data<T>();
    const T* mp = mean.data<T>();
    const T* ip = invstd.data<T>();
    const bool need_sums = training ? need_gx || need_gw || need_gb : need_gw || need_gb;
    std::vector<double> sum_dy(l.C), dot(l.C);
    if (need_sums) {
      channel_two_sums<T>(
          gp, xp, l, sum_dy.data(), dot.data(), [](T dy, T) { return dy; },
          [mp](T dy, T xv, T, int64_t c) { return dy * (xv - mp[c]); });
    }
    if (need_gw)
      for (int64_t c = 0; c < l.C; ++c) *elem<T>(gw, c) = static_cast<T>(dot[c] * ip[c]);
    if (need_gb)
      for (int64_t c = 0; c < l.C; ++c) *elem<T>(gb, c) = static_cast<T>(sum_dy[c]);
    if (!need_gx) return;
    std::vector<T> A(l.C), B(l.C), K(l.C);
    const double M = static_cast<double>(l.per_channel());
    for (int64_t c = 0; c < l.C; ++c) {
      const double w = weight.defined() ? static_cast<double>(*elem<T>(weight, c)) : 1.0;
      const double is = ip[c];
      const double k = w * is;
      A[c] = static_cast<T>(k);
      if (training) {
        // gx = k * (dy - mean(dy) - (x - mean) * invstd² * mean(dy * (x - mean)))
        const double coef = k * is * is * dot[c] / M;
        B[c] = static_cast<T>(-coef);
        K[c] = static_cast<T>(coef * mp[c] - k * sum_dy[c] / M);
      } else {
        K[c] = T(0);
      }
    }
    channel_affine<T>(gx.data<T>(), gp, A.data(), training ? xp : nullptr, B.data(), K.data(), l);
  });
  return {gx, gw, gb};
}

// ================================================================================================
// layer_norm
// ================================================================================================

std::string shape_str(IntArrayRef s) {
  std::ostringstream os;
  os << s;
  return os.str();
}

TensorList layer_norm_backward(const Tensor& grad, const Tensor& x, const Tensor& weight, const Tensor& mean,
                               const Tensor& rstd, int64_t M, int64_t D, IntArrayRef ns, bool need_gx, bool need_gw,
                               bool need_gb) {
  const Tensor g = grad.contiguous();
  const DType dt = x.dtype();
  Tensor gx = need_gx ? empty_output(x.sizes(), dt) : Tensor();
  Tensor gw = need_gw ? empty_output(ns, dt) : Tensor();
  Tensor gb = need_gb ? empty_output(ns, dt) : Tensor();
  PinSet pins;
  pins.add(g, AccessMode::Read).add(x, AccessMode::Read).add(mean, AccessMode::Read).add(rstd, AccessMode::Read);
  if (weight.defined()) pins.add(weight, AccessMode::Read);
  for (const Tensor* t : {&gx, &gw, &gb})
    if (t->defined()) pins.add(*t, AccessMode::Write);
  pins.acquire();
  dispatch_float(dt, [&](auto tag) {
    using T = decltype(tag);
    const T* gp = g.data<T>();
    const T* xp = x.data<T>();
    const T* mp = mean.data<T>();
    const T* rp = rstd.data<T>();
    const T* wp = weight.defined() ? weight.data<T>() : nullptr;
    if (need_gx) {
      T* gxp = gx.data<T>();
      parallel_for(M, std::max<int64_t>(1, kGrainElems / std::max<int64_t>(1, D)), [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
          const T* xr = xp + r * D;
          const T* gr = gp + r * D;
          T* o = gxp + r * D;
          const T m = mp[r], rs = rp[r];
          T s1, s2;
          if (wp != nullptr) {
            s1 = lane_sum<T>(D, [&](int64_t i) { return gr[i] * wp[i]; });
            s2 = lane_sum<T>(D, [&](int64_t i) { return gr[i] * wp[i] * ((xr[i] - m) * rs); });
          } else {
            s1 = lane_sum<T>(D, [&](int64_t i) { return gr[i]; });
            s2 = lane_sum<T>(D, [&](int64_t i) { return gr[i] * ((xr[i] - m) * rs); });
          }
          s1 /= static_cast<T>(D);
          s2 /= static_cast<T>(D);
          if (wp != nullptr) {
            for (int64_t i = 0; i < D; ++i) o[i] = rs * (gr[i] * wp[i] - s1 - (xr[i] - m) * rs * s2);
          } else {
            for (int64_t i = 0; i < D; ++i) o[i] = rs * (gr[i] - s1 - (xr[i] - m) * rs * s2);
          }
        }
      });
    }
    if (need_gw || need_gb) {
      T* gwp = need_gw ? gw.data<T>() : nullptr;
      T* gbp = need_gb ? gb.data<T>() : nullptr;
      parallel_for(col_blocks(D), col_blocks_per_task(M), [&](int64_t b0, int64_t b1) {
        double aw[kColBlock], ab[kColBlock];
        for (int64_t blk = b0; blk < b1; ++blk) {
          const int64_t c0 = blk * kColBlock, w = std::min(kColBlock, D - c0);
          std::fill(aw, aw + w, 0.0);
          std::fill(ab, ab + w, 0.0);
          for (int64_t r = 0; r < M; ++r) {
            const T* xr = xp + r * D + c0;
            const T* gr = gp + r * D + c0;
            const T m = mp[r], rs = rp[r];
            for (int64_t j = 0; j < w; ++j) {
              aw[j] += static_cast<double>(gr[j] * ((xr[j] - m) * rs));
              ab[j] += static_cast<double>(gr[j]);
            }
          }
          for (int64_t j = 0; j < w; ++j) {
            if (gwp != nullptr) gwp[c0 + j] = static_cast<T>(aw[j]);
            if (gbp != nullptr) gbp[c0 + j] = static_cast<T>(ab[j]);
          }
        }
      });
    }
  });
  return {gx, gw, gb};
}

}  // namespace

Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight,
                  const Tensor& bias, bool training, double momentum, double eps) {
  check_backend(OpKind::batch_norm);
  constexpr const char* op = "batch_norm";
  check_float(op, x, "input");
  STRATA_CHECK(x.dim() >= 2, op, ": input must have at least 2 dims [N, C, ...], got ", x.describe());
  const Layout l = layout_of(x);
  auto check_param = [&](const Tensor& t, const char* what) {
    if (!t.defined()) return;
    check_float(op, t, what);
    check_same_dtype(op, x, t);
    STRATA_CHECK(t.dim() == 1 && t.size(0) == l.C, op, ": ", what, " must have shape [", l.C,
                 "] (the channels of input ", x.describe(), "), got ", t.describe());
  };
  check_param(running_mean, "running_mean");
  check_param(running_var, "running_var");
  check_param(weight, "weight");
  check_param(bias, "bias");
  STRATA_CHECK(running_mean.defined() == running_var.defined(), op,
               ": running_mean and running_var must both be given or both be undefined");
  STRATA_CHECK(training || running_mean.defined(), op,
               ": running_mean and running_var are required in evaluation mode (training = false)");
  STRATA_CHECK(eps >= 0 && std::isfinite(eps), op, ": eps must be a non-negative number, got ", eps);
  STRATA_CHECK(momentum >= 0 && momentum <= 1, op, ": momentum must be in [0, 1], got ", momentum);
  STRATA_CHECK(!training || l.per_channel() > 1, op,
               ": expected more than 1 value per channel when training, got input ", x.describe());
  const bool update = training && running_mean.defined();
  if (update) {
    STRATA_CHECK(
        !running_mean.shares_storage(running_var) && !running_mean.shares_storage(x) && !running_var.shares_storage(x),
        op, ": running_mean, running_var and input must not share memory");
  }

  const Tensor xc = x.contiguous();
  Tensor y = empty_output(x.sizes(), x.dtype());
  Tensor mean_t = empty_output({l.C}, x.dtype());
  Tensor invstd_t = empty_output({l.C}, x.dtype());
  {
    PinSet pins;
    pins.add(xc, AccessMode::Read)
        .add(y, AccessMode::Write)
        .add(mean_t, AccessMode::Write)
        .add(invstd_t, AccessMode::Write);
    if (weight.defined()) pins.add(weight, AccessMode::Read);
    if (bias.defined()) pins.add(bias, AccessMode::Read);
    if (running_mean.defined()) {
      const AccessMode m = update ? AccessMode::Write : AccessMode::Read;
      pins.add(running_mean, m).add(running_var, m);
    }
    pins.acquire();
    dispatch_float(x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const T* xp = xc.data<T>();
      const double M = static_cast<double>(l.per_channel());
      std::vector<double> mean(l.C), var(l.C);
      if (training) {
        channel_two_sums<T>(
            xp, xp, l, mean.data(), var.data(), [](T v, T) { return v; },
            [inv = T(1.0 / M)](T v, T, T sum, int64_t) {
              const T d = v - sum * inv;
              return d * d;
            });
        for (int64_t c = 0; c < l.C; ++c) {
          mean[c] /= M;
          var[c] /= M;
        }
      } else {
        for (int64_t c = 0; c < l.C; ++c) {
          mean[c] = static_cast<double>(*elem<T>(running_mean, c));
          var[c] = static_cast<double>(*elem<T>(running_var, c));
        }
      }
      std::vector<T> A(l.C), K(l.C);
      T* mp = mean_t.data<T>();
      T* ip = invstd_t.data<T>();
      for (int64_t c = 0; c < l.C; ++c) {
        const double is = 1.0 / std::sqrt(var[c] + eps);
        const double w = weight.defined() ? static_cast<double>(*elem<T>(weight, c)) : 1.0;
        const double b = bias.defined() ? static_cast<double>(*elem<T>(bias, c)) : 0.0;
        mp[c] = static_cast<T>(mean[c]);
        ip[c] = static_cast<T>(is);
        A[c] = static_cast<T>(w * is);
        K[c] = static_cast<T>(b - mean[c] * w * is);
      }
      channel_affine<T>(y.data<T>(), xp, A.data(), nullptr, nullptr, K.data(), l);
      if (update) {
        const double unbias = M / (M - 1.0);
        for (int64_t c = 0; c < l.C; ++c) {
          T* rm = elem<T>(running_mean, c);
          T* rv = elem<T>(running_var, c);
          *rm = static_cast<T>((1.0 - momentum) * static_cast<double>(*rm) + momentum * mean[c]);
          *rv = static_cast<T>((1.0 - momentum) * static_cast<double>(*rv) + momentum * var[c] * unbias);
        }
      }
    });
  }
  if (update) {
    running_mean.bump_version();
    running_var.bump_version();
  }
  if (autograd::needs_grad({&x, &weight, &bias})) {
    auto node = autograd::make_node(
        "BatchNormBackward", {&x, &weight, &bias}, [training](autograd::Node& n, const TensorList& g) -> TensorList {
          return batch_norm_backward(g[0], n.saved(0), n.saved(1), n.saved(2), n.saved(3), training,
                                     n.needs_input_grad(0), n.needs_input_grad(1), n.needs_input_grad(2));
        });
    node->save(xc);
    node->save(weight);
    node->save(mean_t);
    node->save(invstd_t);
    autograd::set_history({&y}, node);
  }
  return y;
}

Tensor layer_norm(const Tensor& x, IntArrayRef normalized_shape, const Tensor& weight, const Tensor& bias, double eps) {
  check_backend(OpKind::layer_norm);
  constexpr const char* op = "layer_norm";
  check_float(op, x, "input");
  const int64_t k = static_cast<int64_t>(normalized_shape.size());
  STRATA_CHECK(k >= 1, op, ": normalized_shape must not be empty");
  bool match = x.dim() >= k;
  for (int64_t i = 0; match && i < k; ++i) match = x.size(x.dim() - k + i) == normalized_shape[i];
  STRATA_CHECK(match, op, ": normalized_shape ", shape_str(normalized_shape),
               " does not match the trailing dims of input ", x.describe());
  for (const auto& [t, what] : {std::pair{&weight, "weight"}, std::pair{&bias, "bias"}}) {
    if (!t->defined()) continue;
    check_float(op, *t, what);
    check_same_dtype(op, x, *t);
    STRATA_CHECK(t->sizes() == normalized_shape, op, ": ", what, " must have shape normalized_shape ",
                 shape_str(normalized_shape), ", got ", t->describe());
  }
  STRATA_CHECK(eps >= 0 && std::isfinite(eps), op, ": eps must be a non-negative number, got ", eps);
  int64_t D = 1;
  for (int64_t s : normalized_shape) D *= s;
  const int64_t M = D == 0 ? 0 : x.numel() / D;

  const Tensor xc = x.contiguous();
  const Tensor wc = weight.defined() ? weight.contiguous() : Tensor();
  const Tensor bc = bias.defined() ? bias.contiguous() : Tensor();
  Tensor y = empty_output(x.sizes(), x.dtype());
  Tensor mean_t = empty_output({M}, x.dtype());
  Tensor rstd_t = empty_output({M}, x.dtype());
  {
    PinSet pins;
    pins.add(xc, AccessMode::Read)
        .add(y, AccessMode::Write)
        .add(mean_t, AccessMode::Write)
        .add(rstd_t, AccessMode::Write);
    if (wc.defined()) pins.add(wc, AccessMode::Read);
    if (bc.defined()) pins.add(bc, AccessMode::Read);
    pins.acquire();
    dispatch_float(x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const T* xp = xc.data<T>();
      T* yp = y.data<T>();
      T* mp = mean_t.data<T>();
      T* rp = rstd_t.data<T>();
      const T* wp = wc.defined() ? wc.data<T>() : nullptr;
      const T* bp = bc.defined() ? bc.data<T>() : nullptr;
      parallel_for(M, std::max<int64_t>(1, kGrainElems / std::max<int64_t>(1, D)), [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
          const T* xr = xp + r * D;
          T* o = yp + r * D;
          const T m = lane_sum<T>(D, [&](int64_t i) { return xr[i]; }) / static_cast<T>(D);
          const T v = lane_sum<T>(D,
                                  [&](int64_t i) {
                                    const T d = xr[i] - m;
                                    return d * d;
                                  }) /
                      static_cast<T>(D);
          const T rs = static_cast<T>(1.0 / std::sqrt(static_cast<double>(v) + eps));
          mp[r] = m;
          rp[r] = rs;
          if (wp != nullptr && bp != nullptr) {
            for (int64_t i = 0; i < D; ++i) o[i] = (xr[i] - m) * rs * wp[i] + bp[i];
          } else if (wp != nullptr) {
            for (int64_t i = 0; i < D; ++i) o[i] = (xr[i] - m) * rs * wp[i];
          } else if (bp != nullptr) {
            for (int64_t i = 0; i < D; ++i) o[i] = (xr[i] - m) * rs + bp[i];
          } else {
            for (int64_t i = 0; i < D; ++i) o[i] = (xr[i] - m) * rs;
          }
        }
      });
    });
  }
  if (autograd::needs_grad({&x, &weight, &bias})) {
    auto node = autograd::make_node("LayerNormBackward", {&x, &weight, &bias},
                                    [M, D, ns = Dims(normalized_shape.begin(), normalized_shape.end())](
                                        autograd::Node& n, const TensorList& g) -> TensorList {
                                      return layer_norm_backward(g[0], n.saved(0), n.saved(1), n.saved(2), n.saved(3),
                                                                 M, D, ns, n.needs_input_grad(0), n.needs_input_grad(1),
                                                                 n.needs_input_grad(2));
                                    });
    node->save(xc);
    node->save(wc);
    node->save(mean_t);
    node->save(rstd_t);
    autograd::set_history({&y}, node);
  }
  return y;
}

// ================================================================================================
// group_norm, normalize (compositions)
// ================================================================================================

Tensor group_norm(const Tensor& x, int64_t num_groups, const Tensor& weight, const Tensor& bias, double eps) {
  check_backend(OpKind::group_norm);
  constexpr const char* op = "group_norm";
  check_float(op, x, "input");
  STRATA_CHECK(x.dim() >= 2, op, ": expected at least 2 dims (N, C, *) for input, got ", x.describe());
  const int64_t N = x.size(0), C = x.size(1);
  STRATA_CHECK(num_groups > 0 && C % num_groups == 0, op, ": expected the number of channels of input ", x.describe(),
               " to be divisible by num_groups=", num_groups);
  for (const auto& [t, what] : {std::pair{&weight, "weight"}, std::pair{&bias, "bias"}}) {
    if (!t->defined()) continue;
    check_float(op, *t, what);
    check_same_dtype(op, x, *t);
    STRATA_CHECK(t->dim() == 1 && t->size(0) == C, op, ": expected ", what,
                 " to be a vector of size equal to the number of channels (", C, ") of input ", x.describe(), ", got ",
                 t->describe());
  }
  const int64_t per_group = N == 0 ? 0 : x.numel() / (N * num_groups);
  Tensor y = reshape(layer_norm(reshape(x, {N, num_groups, per_group}), {per_group}, {}, {}, eps), x.sizes());
  if (!weight.defined() && !bias.defined()) return y;
  Dims channel(static_cast<std::size_t>(x.dim() - 1), 1);  // (C, 1, ..., 1): broadcasts over N and *
  channel[0] = C;
  if (weight.defined()) y = mul(y, reshape(weight, channel));
  if (bias.defined()) y = add(y, reshape(bias, channel));
  return y;
}

Tensor normalize(const Tensor& x, double p, int64_t dim, double eps) {
  check_backend(OpKind::normalize);
  check_float("normalize", x, "input");
  STRATA_CHECK(eps >= 0 && std::isfinite(eps), "normalize: eps must be a non-negative number, got ", eps);
  const int64_t rank = std::max<int64_t>(x.dim(), 1);
  STRATA_CHECK(dim >= -rank && dim < rank, "normalize: dim ", dim, " is out of range for input ", x.describe(),
               " (expected to be in range of [", -rank, ", ", rank - 1, "])");
  return div(x, clamp(norm(x, p, {dim}, /*keepdim=*/true), eps, std::nullopt));
}

}  // namespace strata
