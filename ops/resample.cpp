#include "ops/resample.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "autograd/engine.h"
#include "ops/detail/op_util.h"

namespace strata {

namespace {

using namespace ops::detail;

/// Elements a parallel task handles at least (small tensors run on one thread).
constexpr int64_t kGrainElems = 32768;

/// One step of Note [Resampling along one dim]: output position o of `dim` reads input positions
/// i0[o] (weight w0[o]; i0 < 0: the fill value) and i1[o] (weight w1[o]; i1 < 0: none).
struct Step {
  int64_t dim = 0;
  int64_t n_in = 0;
  std::vector<int64_t> i0, i1;
  std::vector<double> w0, w1;
  double fill = 0.0;
  int64_t n_out() const { return static_cast<int64_t>(i0.size()); }
  void push(int64_t a, double wa, int64_t b = -1, double wb = 0.0) {
    i0.push_back(a), w0.push_back(wa), i1.push_back(b), w1.push_back(wb);
  }
};

/// x viewed as [outer, size(dim), inner].
struct Split {
  int64_t outer = 1, inner = 1;
};
Split split_at(IntArrayRef sizes, int64_t dim) {
  Split s;
  for (int64_t d = 0; d < dim; ++d) s.outer *= sizes[d];
  for (int64_t d = dim + 1; d < static_cast<int64_t>(sizes.size()); ++d) s.inner *= sizes[d];
  return s;
}

int64_t outer_grain(int64_t per_outer) { return std::max<int64_t>(1, kGrainElems / std::max<int64_t>(1, per_outer)); }

template <typename T>
void step_forward(const T* x, T* y, const Step& st, Split sp) {
  const int64_t n_out = st.n_out(), inner = sp.inner;
  parallel_for(sp.outer, outer_grain(n_out * inner), [&](int64_t a0, int64_t a1) {
    for (int64_t a = a0; a < a1; ++a)
      for (int64_t o = 0; o < n_out; ++o) {
        T* yr = y + (a * n_out + o) * inner;
        if (st.i0[o] < 0) {
          std::fill(yr, yr + inner, static_cast<T>(st.fill));
          continue;
        }
        const T* x0 = x + (a * st.n_in + st.i0[o]) * inner;
        const T w0 = static_cast<T>(st.w0[o]);
        if (st.i1[o] < 0) {
          for (int64_t b = 0; b < inner; ++b) yr[b] = w0 * x0[b];
          continue;
        }
        const T* x1 = x + (a * st.n_in + st.i1[o]) * inner;
        const T w1 = static_cast<T>(st.w1[o]);
        for (int64_t b = 0; b < inner; ++b) yr[b] = w0 * x0[b] + w1 * x1[b];
      }
  });
}

/// The adjoint of step_forward: gx[a, i, b] = Σ_o w·gy[a, o, b] over the taps reading i.
template <typename T>
void step_backward(const T* gy, T* gx, const Step& st, Split sp) {
  const int64_t n_out = st.n_out(), inner = sp.inner;
  parallel_for(sp.outer, outer_grain(n_out * inner), [&](int64_t a0, int64_t a1) {
    for (int64_t a = a0; a < a1; ++a) {
      std::fill(gx + a * st.n_in * inner, gx + (a + 1) * st.n_in * inner, T(0));
      for (int64_t o = 0; o < n_out; ++o) {
        const T* g = gy + (a * n_out + o) * inner;
        for (const auto& [i, w] : {std::pair{st.i0[o], st.w0[o]}, std::pair{st.i1[o], st.w1[o]}}) {
          if (i < 0) continue;
          T* xr = gx + (a * st.n_in + i) * inner;
          const T wt = static_cast<T>(w);
          for (int64_t b = 0; b < inner; ++b) xr[b] += wt * g[b];
        }
      }
    }
  });
}

/// One step on a contiguous tensor: forward (`adjoint` false, `x` has n_in along st.dim) or its
/// adjoint (`x` is a gradient with n_out along st.dim). Raw: never recorded.
Tensor apply_step(const Tensor& x, const Step& st, bool adjoint) {
  const Tensor xc = x.contiguous();
  Dims sizes = xc.sizes();
  sizes[st.dim] = adjoint ? st.n_in : st.n_out();
  Tensor y = empty_output(sizes, xc.dtype());
  PinSet pins;
  pins.add(xc, AccessMode::Read).add(y, AccessMode::Write);
  pins.acquire();
  const Split sp = split_at(xc.sizes(), st.dim);
  dispatch_float(xc.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if (adjoint)
      step_backward<T>(xc.data<T>(), y.data<T>(), st, sp);
    else
      step_forward<T>(xc.data<T>(), y.data<T>(), st, sp);
  });
  return y;
}

/// Runs the steps in order, recording one node (`name`) whose backward runs their adjoints in
/// reverse.
Tensor run_steps(const Tensor& x, std::vector<Step> steps, const char* name) {
  STRATA_ASSERT(!steps.empty(), name, ": no resampling step");
  Tensor y = x;
  for (const Step& st : steps) y = apply_step(y, st, false);
  if (autograd::needs_grad({&x})) {
    auto node = autograd::make_node(name, {&x}, [steps = std::move(steps)](autograd::Node&, const TensorList& grads) {
      Tensor g = grads[0];
      for (auto it = steps.rbegin(); it != steps.rend(); ++it) g = apply_step(g, *it, true);
      return TensorList{g};
    });
    autograd::set_history({&y}, node);
  }
  return y;
}

// ---- pad -----------------------------------------------------------------------------------------

enum class PadMode { Constant, Reflect, Replicate, Circular };

PadMode pad_mode(std::string_view mode) {
  if (mode == "constant") return PadMode::Constant;
  if (mode == "reflect") return PadMode::Reflect;
  if (mode == "replicate") return PadMode::Replicate;
  STRATA_CHECK(mode == "circular", "pad: unrecognised padding mode '", mode,
               "' (expected 'constant', 'reflect', 'replicate' or 'circular')");
  return PadMode::Circular;
}

/// The input position output position o of a dim of size n padded by l on the left reads
/// (-1: the fill value).
int64_t pad_source(PadMode m, int64_t o, int64_t l, int64_t n) {
  const int64_t i = o - l;
  switch (m) {
    case PadMode::Constant: return i >= 0 && i < n ? i : -1;
    case PadMode::Reflect: {
      const int64_t j = i < 0 ? -i : i;
      return j >= n ? 2 * (n - 1) - j : j;
    }
    case PadMode::Replicate: return std::clamp<int64_t>(i, 0, n - 1);
    case PadMode::Circular: return ((i % n) + n) % n;
  }
  return -1;
}

void check_pad(const Tensor& x, IntArrayRef pad, PadMode m, std::string_view mode, double value) {
  constexpr const char* op = "pad";
  const auto len = static_cast<int64_t>(pad.size());
  STRATA_CHECK(len % 2 == 0, op, ": padding length must be divisible by 2, got ", pad);
  STRATA_CHECK(len <= 2 * x.dim(), op,
               ": padding length should be less than or equal to two times the input "
               "dimension but got padding length ",
               len, " and input ", x.describe());
  STRATA_CHECK(len > 0 || x.dim() > 0, op, ": a 0-d input needs no padding (got an empty pad)");
  if (m == PadMode::Constant) return;
  STRATA_CHECK(value == 0.0, op, ": padding mode '", mode, "' doesn't take in value argument (got value=", value, ")");
  const int64_t pairs = len / 2;
  STRATA_CHECK(pairs >= 1 && pairs <= 3 && (x.dim() == pairs + 1 || x.dim() == pairs + 2), op, ": padding size ", len,
               " is not supported for ", x.dim(), "-D input ", x.describe(), " in mode '", mode,
               "' (2-D or 3-D input: padding size 2; 3-D or 4-D: 4; 4-D or 5-D: 6)");
  for (int64_t k = 0; k < pairs; ++k) {
    const int64_t d = x.dim() - 1 - k, n = x.size(d), l = pad[2 * k], r = pad[2 * k + 1];
    STRATA_CHECK(n > 0, op, ": dim ", d, " of input ", x.describe(), " is empty; mode '", mode,
                 "' needs non-empty padded dims");
    if (m == PadMode::Reflect)
      STRATA_CHECK(l < n && r < n, op,
                   ": padding size should be less than the corresponding input dimension, but "
                   "got padding (",
                   l, ", ", r, ") at dimension ", d, " of input ", x.describe());
    if (m == PadMode::Circular)
      STRATA_CHECK(l <= n && r <= n, op, ": padding (", l, ", ", r, ") at dimension ", d, " of input ", x.describe(),
                   " causes wrapping around more than once");
  }
}

}  // namespace

Tensor pad(const Tensor& x, IntArrayRef pad, std::string_view mode, double value) {
  check_backend(OpKind::pad);
  check_float("pad", x, "input");
  const PadMode m = pad_mode(mode);
  check_pad(x, pad, m, mode, value);
  std::vector<Step> steps;
  for (std::size_t k = 0; k < pad.size() / 2; ++k) {
    Step st;
    st.dim = x.dim() - 1 - static_cast<int64_t>(k);
    st.n_in = x.size(st.dim);
    st.fill = value;
    const int64_t l = pad[2 * k], r = pad[2 * k + 1], n_out = st.n_in + l + r;
    STRATA_CHECK(n_out >= 0, "pad: the input size ", st.n_in, " at dim ", st.dim, " plus padding (", l, ", ", r,
                 ") gives a negative output size");
    for (int64_t o = 0; o < n_out; ++o) st.push(pad_source(m, o, l, st.n_in), 1.0);
    steps.push_back(std::move(st));
  }
  if (steps.empty()) {  // an empty pad: a copy, as PyTorch's
    Step st;
    st.n_in = x.size(0);
    for (int64_t o = 0; o < st.n_in; ++o) st.push(o, 1.0);
    steps.push_back(std::move(st));
  }
  return run_steps(x, std::move(steps), "PadBackward");
}

// ---- interpolate ---------------------------------------------------------------------------------

namespace {

enum class InterpMode { Nearest, NearestExact, Linear };

struct InterpArgs {
  InterpMode mode = InterpMode::Nearest;
  bool align_corners = false;
  int64_t spatial = 0;
  Dims out;                   // output spatial sizes
  std::vector<double> scale;  // per spatial dim: the user's factor, or 0 (use in / out)
};

InterpArgs interp_args(const Tensor& x, IntArrayRef size, const std::vector<double>& factor, std::string_view mode,
                       std::optional<bool> align_corners, bool recompute) {
  constexpr const char* op = "interpolate";
  InterpArgs a;
  a.spatial = x.dim() - 2;
  const bool linear = mode == "linear" || mode == "bilinear";
  STRATA_CHECK(mode == "nearest" || mode == "nearest-exact" || linear, op, ": unsupported mode '", mode,
               "' (Strata has 'nearest', 'nearest-exact', 'linear' and 'bilinear')");
  a.mode = linear ? InterpMode::Linear : mode == "nearest" ? InterpMode::Nearest : InterpMode::NearestExact;
  STRATA_CHECK(x.dim() >= 3 && x.dim() <= 5, op, ": only 3-D, 4-D and 5-D inputs are supported, got ", x.describe());
  STRATA_CHECK(mode != "linear" || x.dim() == 3, op, ": got ", x.dim(), "-D input, but linear mode needs 3-D input");
  STRATA_CHECK(mode != "bilinear" || x.dim() == 4, op, ": got ", x.dim(),
               "-D input, but bilinear mode needs 4-D input");
  STRATA_CHECK(linear || !align_corners.has_value(), op,
               ": align_corners can only be set with the interpolating modes 'linear' and 'bilinear'");
  a.align_corners = align_corners.value_or(false);
  STRATA_CHECK(size.empty() != factor.empty(), op,
               size.empty() ? ": either size or scale_factor should be defined"
                            : ": only one of size or scale_factor should be defined");
  const auto given = static_cast<int64_t>(size.empty() ? factor.size() : size.size());
  STRATA_CHECK(given == 1 || given == a.spatial, op, ": input ", x.describe(), " has ", a.spatial, " spatial dims but ",
               given, size.empty() ? " scale factors" : " output sizes", " were given");
  for (int64_t d = 0; d < a.spatial; ++d) {
    const int64_t in = x.size(2 + d), k = given == 1 ? 0 : d;
    int64_t out = 0;
    if (size.empty()) {
      STRATA_CHECK(std::isfinite(factor[k]) && factor[k] > 0, op, ": scale_factor must be positive, got ", factor[k]);
      out = static_cast<int64_t>(std::floor(static_cast<double>(in) * factor[k]));
    } else {
      out = size[k];
    }
    STRATA_CHECK(in > 0 && out > 0, op, ": input and output sizes should be greater than 0, but got input ",
                 x.describe(), " and output size ", out, " at spatial dim ", d);
    a.out.push_back(out);
    a.scale.push_back(size.empty() && !recompute ? factor[k] : 0.0);
  }
  return a;
}

/// The taps of one spatial dim, computed in T as PyTorch's CPU kernels compute them for a T input.
template <typename T>
Step interp_step(const InterpArgs& a, int64_t d, int64_t in) {
  Step st;
  st.dim = 2 + d;
  st.n_in = in;
  const int64_t out = a.out[d];
  const T s = a.scale[d] > 0 ? static_cast<T>(1.0 / a.scale[d]) : static_cast<T>(in) / static_cast<T>(out);
  for (int64_t o = 0; o < out; ++o) {
    if (a.mode == InterpMode::Nearest) {
      st.push(std::min<int64_t>(static_cast<int64_t>(std::floor(static_cast<T>(o) * s)), in - 1), 1.0);
    } else if (a.mode == InterpMode::NearestExact) {
      st.push(std::min<int64_t>(static_cast<int64_t>(std::floor((static_cast<T>(o) + T(0.5)) * s)), in - 1), 1.0);
    } else {
      const T ac = out > 1 ? static_cast<T>(in - 1) / static_cast<T>(out - 1) : T(0);
      const T src =
          a.align_corners ? ac * static_cast<T>(o) : std::max(s * (static_cast<T>(o) + T(0.5)) - T(0.5), T(0));
      const auto i0 = static_cast<int64_t>(src);
      const T l1 = src - static_cast<T>(i0);
      st.push(i0, static_cast<double>(T(1) - l1), i0 < in - 1 ? i0 + 1 : i0, static_cast<double>(l1));
    }
  }
  return st;
}

}  // namespace

Tensor interpolate(const Tensor& x, IntArrayRef size, const std::vector<double>& scale_factor, std::string_view mode,
                   std::optional<bool> align_corners, bool recompute_scale_factor) {
  check_backend(OpKind::interpolate);
  check_float("interpolate", x, "input");
  const InterpArgs a = interp_args(x, size, scale_factor, mode, align_corners, recompute_scale_factor);
  std::vector<Step> steps;
  for (int64_t d = a.spatial - 1; d >= 0; --d)
    steps.push_back(
        dispatch_float(x.dtype(), [&](auto tag) { return interp_step<decltype(tag)>(a, d, x.size(2 + d)); }));
  return run_steps(x, std::move(steps),
                   a.mode == InterpMode::Linear ? "UpsampleLinearBackward" : "UpsampleNearestBackward");
}

}  // namespace strata
