#include "ops/pooling.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <type_traits>

#include "ops/detail/cpu/row_sum.h"
#include "ops/detail/op_util.h"

namespace strata {

namespace {

using namespace ops::detail;

/// One pooling problem: `planes` = N·C independent H×W images.
struct PoolGeom {
  int64_t planes, H, W, OH, OW, kh, kw, sh, sw, ph, pw, dh, dw;
};

std::array<int64_t, 2> pair_arg(const char* op, IntArrayRef v, const char* what) {
  STRATA_CHECK(v.size() == 1 || v.size() == 2, op, ": ", what, " must have 1 or 2 elements, got ", v);
  return v.size() == 1 ? std::array<int64_t, 2>{v[0], v[0]} : std::array<int64_t, 2>{v[0], v[1]};
}

void check_input(const char* op, const Tensor& x) {
  check_float(op, x, "input");
  STRATA_CHECK(x.dim() == 3 || x.dim() == 4, op, ": input must be 3-D (C, H, W) or 4-D (N, C, H, W), got ",
               x.describe());
  STRATA_CHECK(x.size(-1) > 0 && x.size(-2) > 0, op, ": input ", x.describe(), " has an empty spatial dim");
}

/// PyTorch's pooling_output_shape.
int64_t pooled_size(int64_t in, int64_t k, int64_t pad, int64_t s, int64_t d, bool ceil_mode) {
  const int64_t num = in + 2 * pad - d * (k - 1) - 1 + (ceil_mode ? s - 1 : 0);
  int64_t out = (num >= 0 ? num / s : -((-num + s - 1) / s)) + 1;
  if (ceil_mode && (out - 1) * s >= in + pad) --out;
  return out;
}

PoolGeom make_pool_geom(const char* op, const Tensor& x, IntArrayRef kernel_size, IntArrayRef stride,
                        IntArrayRef padding, IntArrayRef dilation, bool ceil_mode) {
  const auto k = pair_arg(op, kernel_size, "kernel_size");
  const auto s = stride.size() == 0 ? k : pair_arg(op, stride, "stride");
  const auto p = pair_arg(op, padding, "padding");
  const auto d = pair_arg(op, dilation, "dilation");
  STRATA_CHECK(k[0] > 0 && k[1] > 0, op, ": kernel_size must be positive, got ", kernel_size);
  STRATA_CHECK(s[0] > 0 && s[1] > 0, op, ": stride must be positive, got ", stride);
  STRATA_CHECK(d[0] > 0 && d[1] > 0, op, ": dilation must be positive, got ", dilation);
  STRATA_CHECK(p[0] >= 0 && p[1] >= 0 && p[0] <= k[0] / 2 && p[1] <= k[1] / 2, op,
               ": padding must be non-negative and at most half the kernel size, got padding ", padding,
               " for kernel_size ", kernel_size);
  PoolGeom g{};
  g.planes = x.dim() == 4 ? x.size(0) * x.size(1) : x.size(0);
  g.H = x.size(-2), g.W = x.size(-1);
  g.kh = k[0], g.kw = k[1], g.sh = s[0], g.sw = s[1], g.ph = p[0], g.pw = p[1], g.dh = d[0], g.dw = d[1];
  g.OH = pooled_size(g.H, g.kh, g.ph, g.sh, g.dh, ceil_mode);
  g.OW = pooled_size(g.W, g.kw, g.pw, g.sw, g.dw, ceil_mode);
  STRATA_CHECK(g.OH > 0 && g.OW > 0, op, ": output size would be ", g.OH, "x", g.OW, " (not positive) for input ",
               x.describe(), " with kernel_size ", kernel_size);
  return g;
}

Dims pooled_sizes(const Tensor& x, int64_t oh, int64_t ow) {
  Dims s = x.sizes();
  s[s.size() - 2] = oh;
  s[s.size() - 1] = ow;
  return s;
}

/// Planes per parallel task so that small inputs stay on one thread.
int64_t plane_grain(int64_t work_per_plane) {
  return std::max<int64_t>(1, 32768 / std::max<int64_t>(1, work_per_plane));
}

// ---- max pooling ---------------------------------------------------------------------------------

// Note [Max pooling and NaN]
// PyTorch's CPU max_pool2d takes an element when `v > best || isnan(v)`: a window holding a NaN
// gives NaN, and of several NaNs the *last* in window order is the argmax that backward routes the
// gradient to (checked against torch 2.13 with several NaNs per window). Every kernel here uses that
// rule, ties included (the first maximum wins), so values and gradients match PyTorch's.

/// One output row of max pooling whose windows lie inside the plane: `x` points at the window
/// row's first element, `a_base` is its index in the plane. The running maximum is updated by
/// selects, not branches (on random data a branch on `v > best` mispredicts about half the time),
/// and all sizes are plain values so nothing is reloaded after the index stores. NaN rule as in the
/// general loop (Note [Max pooling and NaN]).
template <typename T, int64_t KH, int64_t KW>
void max_pool_row_inside(const T* __restrict x, int64_t W, int64_t sw, int64_t OW, int64_t a_base, int64_t kh_in,
                         int64_t kw_in, T* __restrict yo, int64_t* __restrict io) {
  const int64_t kh = KH > 0 ? KH : kh_in, kw = KW > 0 ? KW : kw_in;
  for (int64_t ow = 0; ow < OW; ++ow) {
    const int64_t a0 = ow * sw;
    T best = x[a0];
    int64_t arg = a0;
    for (int64_t i = 0; i < kh; ++i) {
      for (int64_t j = 0; j < kw; ++j) {
        if (i == 0 && j == 0) continue;
        const int64_t a = a0 + i * W + j;
        const T v = x[a];
        const bool take = (v > best) | (v != v);
        best = take ? v : best;
        arg = take ? a : arg;
      }
    }
    yo[ow] = best;
    io[ow] = a_base + arg;
  }
}

/// max_pool_row_inside for f32 2×2 windows at stride 2 (the common CNN case), eight outputs at a
/// time with GCC vector extensions (plain C++ arithmetic, no intrinsics; GCC does not vectorize the
/// scalar loop's compare-and-select on its own). Same selects, same NaN rule, same indices.
void max_pool_row_2x2s2(const float* __restrict x, int64_t W, int64_t OW, int64_t a_base, float* __restrict yo,
                        int64_t* __restrict io) {
  typedef float V __attribute__((vector_size(32)));
  typedef int32_t VI __attribute__((vector_size(32)));
  typedef int64_t VL __attribute__((vector_size(64)));
  const float* __restrict r1 = x + W;
  int64_t ow = 0;
  for (; ow + 8 <= OW; ow += 8) {
    V a0, a1, b0, b1;
    __builtin_memcpy(&a0, x + 2 * ow, sizeof(V));
    __builtin_memcpy(&a1, x + 2 * ow + 8, sizeof(V));
    __builtin_memcpy(&b0, r1 + 2 * ow, sizeof(V));
    __builtin_memcpy(&b1, r1 + 2 * ow + 8, sizeof(V));
    // Window order: (0,0) (0,1) (1,0) (1,1) = even/odd lanes of row 0, then of row 1.
    const V v00 = __builtin_shufflevector(a0, a1, 0, 2, 4, 6, 8, 10, 12, 14);
    const V v01 = __builtin_shufflevector(a0, a1, 1, 3, 5, 7, 9, 11, 13, 15);
    const V v10 = __builtin_shufflevector(b0, b1, 0, 2, 4, 6, 8, 10, 12, 14);
    const V v11 = __builtin_shufflevector(b0, b1, 1, 3, 5, 7, 9, 11, 13, 15);
    V best = v00;
    VI code = VI{};
    auto step = [&](const V v, int32_t c) {
      const VI take = (v > best) | (v != v);
      best = take ? v : best;
      code = take ? VI{} + c : code;
    };
    step(v01, 1);
    step(v10, 2);
    step(v11, 3);
    __builtin_memcpy(yo + ow, &best, sizeof(V));
    const VL c = __builtin_convertvector(code, VL);
    const VL lane = VL{0, 1, 2, 3, 4, 5, 6, 7};
    const VL out = (a_base + 2 * ow) + 2 * lane + (c >> 1) * W + (c & 1);
    __builtin_memcpy(io + ow, &out, sizeof(VL));
  }
  if (ow < OW) max_pool_row_inside<float, 2, 2>(x + 2 * ow, W, 2, OW - ow, a_base + 2 * ow, 2, 2, yo + ow, io + ow);
}

/// Max pooling when every window lies inside the plane (no padding, no dilation, no ceil-mode
/// overhang): no bounds checks; same results as the general loop.
template <typename T, int64_t KH, int64_t KW>
void max_pool_forward_inside(const T* x, T* y, int64_t* idx, const PoolGeom& g) {
  const int64_t W = g.W, HW = g.H * g.W, OH = g.OH, OW = g.OW, OHW = OH * OW;
  const int64_t sh = g.sh, sw = g.sw, kh = g.kh, kw = g.kw;
  parallel_for(
      g.planes * OH, std::max<int64_t>(1, 32768 / std::max<int64_t>(1, OW * kh * kw)), [=](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
          const int64_t p = r / OH, oh = r % OH;
          const int64_t a_base = oh * sh * W;
          if constexpr (std::is_same_v<T, float> && KH == 2 && KW == 2) {
            if (sw == 2) {
              max_pool_row_2x2s2(x + p * HW + a_base, W, OW, a_base, y + p * OHW + oh * OW, idx + p * OHW + oh * OW);
              continue;
            }
          }
          max_pool_row_inside<T, KH, KW>(x + p * HW + a_base, W, sw, OW, a_base, kh, kw, y + p * OHW + oh * OW,
                                         idx + p * OHW + oh * OW);
        }
      });
}

template <typename T>
void max_pool_forward(const T* x, T* y, int64_t* idx, const PoolGeom& g) {
  const int64_t HW = g.H * g.W, OHW = g.OH * g.OW;
  if (g.ph == 0 && g.pw == 0 && g.dh == 1 && g.dw == 1 && (g.OH - 1) * g.sh + g.kh <= g.H &&
      (g.OW - 1) * g.sw + g.kw <= g.W) {
    if (g.kh == 2 && g.kw == 2)
      max_pool_forward_inside<T, 2, 2>(x, y, idx, g);
    else if (g.kh == 3 && g.kw == 3)
      max_pool_forward_inside<T, 3, 3>(x, y, idx, g);
    else
      max_pool_forward_inside<T, 0, 0>(x, y, idx, g);
    return;
  }
  parallel_for(g.planes, plane_grain(OHW * g.kh * g.kw), [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      const T* xp = x + p * HW;
      T* yp = y + p * OHW;
      int64_t* ip = idx + p * OHW;
      for (int64_t oh = 0; oh < g.OH; ++oh) {
        const int64_t h0 = oh * g.sh - g.ph;
        for (int64_t ow = 0; ow < g.OW; ++ow) {
          const int64_t w0 = ow * g.sw - g.pw;
          T best = -std::numeric_limits<T>::infinity();
          int64_t arg = -1;
          for (int64_t i = 0; i < g.kh; ++i) {
            const int64_t h = h0 + i * g.dh;
            if (h < 0 || h >= g.H) continue;
            const T* row = xp + h * g.W;
            for (int64_t j = 0; j < g.kw; ++j) {
              const int64_t w = w0 + j * g.dw;
              if (w < 0 || w >= g.W) continue;
              const T v = row[w];
              if (v > best || v != v || arg < 0) {
                best = v;
                arg = h * g.W + w;
              }
            }
          }
          yp[oh * g.OW + ow] = best;
          ip[oh * g.OW + ow] = arg;
        }
      }
    }
  });
}

template <typename T>
void max_pool_backward(const T* gy, const int64_t* idx, T* gx, int64_t planes, int64_t HW, int64_t OHW) {
  parallel_for(planes, plane_grain(HW + OHW), [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      T* gp = gx + p * HW;
      std::fill(gp, gp + HW, T(0));
      const T* g = gy + p * OHW;
      const int64_t* ip = idx + p * OHW;
      for (int64_t o = 0; o < OHW; ++o)
        if (ip[o] >= 0) gp[ip[o]] += g[o];
    }
  });
}

// ---- average pooling (fixed and adaptive) --------------------------------------------------------

/// Window of output `o` along one dim: rows [start, end) clamped to the input, and the divisor part.
struct Window {
  int64_t start, end, count;
};

Window avg_window(int64_t o, int64_t in, int64_t k, int64_t s, int64_t pad, bool count_include_pad) {
  int64_t start = o * s - pad;
  int64_t end = std::min(start + k, in + pad);
  const int64_t padded = end - start;
  start = std::max<int64_t>(start, 0);
  end = std::min(end, in);
  return {start, end, count_include_pad ? padded : end - start};
}

Window adaptive_window(int64_t o, int64_t in, int64_t out) {
  const int64_t start = (o * in) / out;
  const int64_t end = ((o + 1) * in + out - 1) / out;
  return {start, end, end - start};
}

/// Rows and columns windows precomputed once per call.
struct AvgPlan {
  std::vector<Window> rows, cols;

  /// One output per plane whose window is the whole H×W plane (global pooling, e.g. adaptive
  /// pooling to 1×1): then each output is a contiguous row reduction.
  bool whole_plane(int64_t H, int64_t W) const {
    return rows.size() == 1 && cols.size() == 1 && rows[0].start == 0 && rows[0].end == H && cols[0].start == 0 &&
           cols[0].end == W;
  }
};

template <typename T>
void avg_pool_forward(const T* x, T* y, int64_t planes, int64_t H, int64_t W, const AvgPlan& plan) {
  const int64_t OH = static_cast<int64_t>(plan.rows.size()), OW = static_cast<int64_t>(plan.cols.size());
  const int64_t HW = H * W, OHW = OH * OW;
  if (plan.whole_plane(H, W)) {
    const int64_t div = plan.rows[0].count * plan.cols[0].count;
    parallel_for(planes, plane_grain(HW + 1), [&](int64_t p0, int64_t p1) {
      for (int64_t p = p0; p < p1; ++p) y[p] = div > 0 ? ops::cpu::row_sum(x + p * HW, HW) / T(div) : T(0);
    });
    return;
  }
  parallel_for(planes, plane_grain(HW + OHW), [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      const T* xp = x + p * HW;
      T* yp = y + p * OHW;
      for (int64_t oh = 0; oh < OH; ++oh) {
        const Window r = plan.rows[oh];
        for (int64_t ow = 0; ow < OW; ++ow) {
          const Window c = plan.cols[ow];
          T acc = 0;
          for (int64_t h = r.start; h < r.end; ++h) {
            const T* row = xp + h * W;
            for (int64_t w = c.start; w < c.end; ++w) acc += row[w];
          }
          const int64_t div = r.count * c.count;
          yp[oh * OW + ow] = div > 0 ? acc / T(div) : T(0);
        }
      }
    }
  });
}

template <typename T>
void avg_pool_backward(const T* gy, T* gx, int64_t planes, int64_t H, int64_t W, const AvgPlan& plan) {
  const int64_t OH = static_cast<int64_t>(plan.rows.size()), OW = static_cast<int64_t>(plan.cols.size());
  const int64_t HW = H * W, OHW = OH * OW;
  if (plan.whole_plane(H, W)) {
    const int64_t div = plan.rows[0].count * plan.cols[0].count;
    parallel_for(planes, plane_grain(HW + 1), [&](int64_t p0, int64_t p1) {
      for (int64_t p = p0; p < p1; ++p) std::fill(gx + p * HW, gx + (p + 1) * HW, div > 0 ? gy[p] / T(div) : T(0));
    });
    return;
  }
  parallel_for(planes, plane_grain(HW + OHW), [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      T* gp = gx + p * HW;
      std::fill(gp, gp + HW, T(0));
      const T* g = gy + p * OHW;
      for (int64_t oh = 0; oh < OH; ++oh) {
        const Window r = plan.rows[oh];
        for (int64_t ow = 0; ow < OW; ++ow) {
          const Window c = plan.cols[ow];
          const int64_t div = r.count * c.count;
          if (div <= 0) continue;
          const T v = g[oh * OW + ow] / T(div);
          for (int64_t h = r.start; h < r.end; ++h) {
            T* row = gp + h * W;
            for (int64_t w = c.start; w < c.end; ++w) row[w] += v;
          }
        }
      }
    }
  });
}

Tensor run_avg_forward(const Tensor& x, const AvgPlan& plan, int64_t planes) {
  const Tensor xc = x.contiguous();
  Tensor y = empty_output(pooled_sizes(x, plan.rows.size(), plan.cols.size()), x.dtype());
  PinSet pins;
  pins.add(xc, AccessMode::Read).add(y, AccessMode::Write);
  pins.acquire();
  dispatch_float(x.dtype(), [&](auto t) {
    using T = decltype(t);
    avg_pool_forward<T>(xc.data<T>(), y.data<T>(), planes, x.size(-2), x.size(-1), plan);
  });
  return y;
}

Tensor run_avg_backward(const Tensor& gy, const Dims& x_sizes, const AvgPlan& plan) {
  const Tensor gyc = gy.contiguous();
  Tensor gx = empty_output(x_sizes, gy.dtype());
  const int64_t H = x_sizes[x_sizes.size() - 2], W = x_sizes[x_sizes.size() - 1];
  const int64_t planes = H * W == 0 ? 0 : gx.numel() / (H * W);
  PinSet pins;
  pins.add(gyc, AccessMode::Read).add(gx, AccessMode::Write);
  pins.acquire();
  dispatch_float(gy.dtype(), [&](auto t) {
    using T = decltype(t);
    avg_pool_backward<T>(gyc.data<T>(), gx.data<T>(), planes, H, W, plan);
  });
  return gx;
}

Tensor avg_like(const char* name, const Tensor& x, AvgPlan plan, int64_t planes) {
  Tensor y = run_avg_forward(x, plan, planes);
  if (autograd::needs_grad({&x})) {
    auto node =
        autograd::make_node(name, {&x}, [plan, sizes = x.sizes()](autograd::Node&, const TensorList& g) -> TensorList {
          return {run_avg_backward(g[0], sizes, plan)};
        });
    autograd::set_history({&y}, node);
  }
  return y;
}

}  // namespace

Tensor max_pool2d(const Tensor& x, IntArrayRef kernel_size, IntArrayRef stride, IntArrayRef padding,
                  IntArrayRef dilation, bool ceil_mode) {
  constexpr const char* op = "max_pool2d";
  check_backend(OpKind::max_pool2d);
  check_input(op, x);
  const PoolGeom g = make_pool_geom(op, x, kernel_size, stride, padding, dilation, ceil_mode);
  const Tensor xc = x.contiguous();
  Tensor y = empty_output(pooled_sizes(x, g.OH, g.OW), x.dtype());
  Tensor idx = empty_output(y.sizes(), DType::i64);
  {
    PinSet pins;
    pins.add(xc, AccessMode::Read).add(y, AccessMode::Write).add(idx, AccessMode::Write);
    pins.acquire();
    dispatch_float(x.dtype(), [&](auto t) {
      using T = decltype(t);
      max_pool_forward<T>(xc.data<T>(), y.data<T>(), idx.data<int64_t>(), g);
    });
  }
  if (autograd::needs_grad({&x})) {
    auto node = autograd::make_node(
        "MaxPool2DBackward", {&x}, [sizes = x.sizes()](autograd::Node& n, const TensorList& grads) -> TensorList {
          const Tensor indices = n.saved(0);
          const Tensor gy = grads[0].contiguous();
          Tensor gx = empty_output(sizes, gy.dtype());
          const int64_t HW = sizes[sizes.size() - 2] * sizes[sizes.size() - 1];
          const int64_t OHW = indices.size(-2) * indices.size(-1);
          PinSet pins;
          pins.add(gy, AccessMode::Read).add(indices, AccessMode::Read).add(gx, AccessMode::Write);
          pins.acquire();
          dispatch_float(gy.dtype(), [&](auto t) {
            using T = decltype(t);
            max_pool_backward<T>(gy.data<T>(), indices.data<int64_t>(), gx.data<T>(), gx.numel() / HW, HW, OHW);
          });
          return {gx};
        });
    node->save(idx);
    autograd::set_history({&y}, node);
  }
  if (OpRecorder* rec = op_recorder())  // Note [Op recording hook]
    rec->max_pool2d(x, kernel_size, stride, padding, dilation, ceil_mode, y);
  return y;
}

Tensor avg_pool2d(const Tensor& x, IntArrayRef kernel_size, IntArrayRef stride, IntArrayRef padding, bool ceil_mode,
                  bool count_include_pad) {
  constexpr const char* op = "avg_pool2d";
  check_backend(OpKind::avg_pool2d);
  check_input(op, x);
  const PoolGeom g = make_pool_geom(op, x, kernel_size, stride, padding, {1, 1}, ceil_mode);
  AvgPlan plan;
  for (int64_t o = 0; o < g.OH; ++o) plan.rows.push_back(avg_window(o, g.H, g.kh, g.sh, g.ph, count_include_pad));
  for (int64_t o = 0; o < g.OW; ++o) plan.cols.push_back(avg_window(o, g.W, g.kw, g.sw, g.pw, count_include_pad));
  Tensor y = avg_like("AvgPool2DBackward", x, std::move(plan), g.planes);
  if (OpRecorder* rec = op_recorder())  // Note [Op recording hook]
    rec->avg_pool2d(x, kernel_size, stride, padding, ceil_mode, count_include_pad, y);
  return y;
}

Tensor adaptive_avg_pool2d(const Tensor& x, IntArrayRef output_size) {
  constexpr const char* op = "adaptive_avg_pool2d";
  check_backend(OpKind::adaptive_avg_pool2d);
  check_input(op, x);
  const auto o = pair_arg(op, output_size, "output_size");
  STRATA_CHECK(o[0] > 0 && o[1] > 0, op, ": output_size must be positive, got ", output_size);
  AvgPlan plan;
  const int64_t H = x.size(-2), W = x.size(-1);
  for (int64_t i = 0; i < o[0]; ++i) plan.rows.push_back(adaptive_window(i, H, o[0]));
  for (int64_t j = 0; j < o[1]; ++j) plan.cols.push_back(adaptive_window(j, W, o[1]));
  const int64_t planes = x.numel() / (H * W);
  return avg_like("AdaptiveAvgPool2DBackward", x, std::move(plan), planes);
}

}  // namespace strata
