#include "models/init.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "autograd/grad_mode.h"
#include "core/error.h"
#include "core/factories.h"

namespace strata::nn::init {

namespace {

void check_floating(const Tensor& t, const char* op) {
  STRATA_CHECK(t.defined(), op, ": the tensor is undefined");
  STRATA_CHECK(is_floating(t.dtype()), op, ": expected a floating-point tensor, got ", t.describe());
}

// Copies `values` (any dtype, same shape) into `t` in place, outside autograd.
Tensor& fill_from(Tensor& t, const Tensor& values) {
  autograd::NoGradGuard no_grad;
  t.copy_(values);
  return t;
}

int64_t correct_fan(const Tensor& t, const std::string& mode) {
  STRATA_CHECK(mode == "fan_in" || mode == "fan_out", "Mode ", mode,
               " not supported, please use one of fan_in, fan_out");
  const auto [fan_in, fan_out] = fan_in_and_fan_out(t);
  return mode == "fan_in" ? fan_in : fan_out;
}

// erf⁻¹ on (-1, 1): Giles' single-precision approximation ("Approximating the erfinv function",
// GPU Computing Gems, 2011), refined by two Newton steps on std::erf to double precision.
double erfinv(double y) {
  if (y <= -1) return -std::numeric_limits<double>::infinity();
  if (y >= 1) return std::numeric_limits<double>::infinity();
  double w = -std::log((1.0 - y) * (1.0 + y)), x;
  if (w < 5.0) {
    w -= 2.5;
    x = 2.81022636e-08;
    for (double c : {3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087, -0.00125372503, -0.00417768164,
                     0.246640727, 1.50140941})
      x = c + x * w;
  } else {
    w = std::sqrt(w) - 3.0;
    x = -0.000200214257;
    for (double c : {0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773, -0.0076224613, 0.00943887047,
                     1.00167406, 2.83297682})
      x = c + x * w;
  }
  x *= y;
  const double two_over_sqrt_pi = 1.1283791670955126;
  for (int i = 0; i < 2; ++i) x -= (std::erf(x) - y) / (two_over_sqrt_pi * std::exp(-x * x));
  return x;
}

double norm_cdf(double x) { return (1.0 + std::erf(x / std::sqrt(2.0))) / 2.0; }

}  // namespace

double calculate_gain(const std::string& nonlinearity, std::optional<double> param) {
  static const char* linear_fns[] = {"linear",           "conv1d",           "conv2d",          "conv3d",
                                     "conv_transpose1d", "conv_transpose2d", "conv_transpose3d"};
  for (const char* n : linear_fns)
    if (nonlinearity == n) return 1.0;
  if (nonlinearity == "sigmoid") return 1.0;
  if (nonlinearity == "tanh") return 5.0 / 3;
  if (nonlinearity == "relu") return std::sqrt(2.0);
  if (nonlinearity == "leaky_relu") {
    const double slope = param.value_or(0.01);
    return std::sqrt(2.0 / (1 + slope * slope));
  }
  if (nonlinearity == "selu") return 3.0 / 4;
  STRATA_FAIL("Unsupported nonlinearity ", nonlinearity);
}

std::pair<int64_t, int64_t> fan_in_and_fan_out(const Tensor& t) {
  STRATA_CHECK(t.defined() && t.dim() >= 2,
               "Fan in and fan out can not be computed for tensor with fewer than 2 dimensions");
  int64_t receptive = 1;
  for (int64_t d = 2; d < t.dim(); ++d) receptive *= t.size(d);
  return {t.size(1) * receptive, t.size(0) * receptive};
}

Tensor& uniform_(Tensor& t, double a, double b, Generator* gen) {
  check_floating(t, "uniform_");
  STRATA_CHECK(a <= b, "uniform_ expects to return a [from, to) range, but found from=", a, " > to=", b);
  return fill_from(t, uniform(t.sizes(), a, b, {t.dtype()}, gen));
}

Tensor& normal_(Tensor& t, double mean, double std, Generator* gen) {
  check_floating(t, "normal_");
  STRATA_CHECK(std >= 0.0, "normal expects std >= 0.0, but found std ", std);
  return fill_from(t, normal(t.sizes(), mean, std, {t.dtype()}, gen));
}

Tensor& constant_(Tensor& t, double value) {
  STRATA_CHECK(t.defined(), "constant_: the tensor is undefined");
  autograd::NoGradGuard no_grad;
  t.fill_(value);
  return t;
}

Tensor& zeros_(Tensor& t) { return constant_(t, 0.0); }
Tensor& ones_(Tensor& t) { return constant_(t, 1.0); }

Tensor& eye_(Tensor& t) {
  STRATA_CHECK(t.defined() && t.dim() == 2, "Only tensors with 2 dimensions are supported");
  Tensor values = zeros({t.size(0), t.size(1)}, {DType::f64});
  double* v = values.data<double>();
  for (int64_t i = 0; i < std::min(t.size(0), t.size(1)); ++i) v[i * t.size(1) + i] = 1.0;
  return fill_from(t, values);
}

Tensor& xavier_uniform_(Tensor& t, double gain, Generator* gen) {
  check_floating(t, "xavier_uniform_");
  const auto [fan_in, fan_out] = fan_in_and_fan_out(t);
  const double std = gain * std::sqrt(2.0 / static_cast<double>(fan_in + fan_out));
  const double a = std::sqrt(3.0) * std;
  return uniform_(t, -a, a, gen);
}

Tensor& xavier_normal_(Tensor& t, double gain, Generator* gen) {
  check_floating(t, "xavier_normal_");
  const auto [fan_in, fan_out] = fan_in_and_fan_out(t);
  return normal_(t, 0.0, gain * std::sqrt(2.0 / static_cast<double>(fan_in + fan_out)), gen);
}

Tensor& kaiming_uniform_(Tensor& t, double a, const std::string& mode, const std::string& nonlinearity,
                         Generator* gen) {
  check_floating(t, "kaiming_uniform_");
  if (t.numel() == 0) return t;  // PyTorch warns "Initializing zero-element tensors is a no-op"
  const double std = calculate_gain(nonlinearity, a) / std::sqrt(static_cast<double>(correct_fan(t, mode)));
  const double bound = std::sqrt(3.0) * std;
  return uniform_(t, -bound, bound, gen);
}

Tensor& kaiming_normal_(Tensor& t, double a, const std::string& mode, const std::string& nonlinearity, Generator* gen) {
  check_floating(t, "kaiming_normal_");
  if (t.numel() == 0) return t;
  const double std = calculate_gain(nonlinearity, a) / std::sqrt(static_cast<double>(correct_fan(t, mode)));
  return normal_(t, 0.0, std, gen);
}

Tensor& trunc_normal_(Tensor& t, double mean, double std, double a, double b, Generator* gen) {
  check_floating(t, "trunc_normal_");
  STRATA_CHECK(a < b, "trunc_normal_: the bounds must satisfy a < b, got a=", a, ", b=", b);
  STRATA_CHECK(std > 0, "trunc_normal_: std must be positive, got ", std);
  // Uniform on [2l - 1, 2u - 1], then the inverse CDF (erfinv), scaled, shifted and clamped.
  const double l = norm_cdf((a - mean) / std), u = norm_cdf((b - mean) / std);
  Tensor values = uniform(t.sizes(), 2 * l - 1, 2 * u - 1, {DType::f64}, gen);
  double* v = values.data<double>();
  for (int64_t i = 0; i < values.numel(); ++i) v[i] = std::clamp(erfinv(v[i]) * std * std::sqrt(2.0) + mean, a, b);
  return fill_from(t, values);
}

// Note [Orthogonal init]
// PyTorch's orthogonal_: a normal [rows, cols] draw (transposed when rows < cols) is factored
// Q·R, and Q's columns are multiplied by the signs of R's diagonal, which makes Q Haar-distributed.
// Householder QR in double here (the matrices are weight-sized; the init runs once).
namespace {

// The Q (m x n, m >= n, row-major) of A's thin QR, with R's diagonal made positive.
std::vector<double> orthonormal_columns(std::vector<double> A, int64_t m, int64_t n) {
  std::vector<std::vector<double>> reflectors;
  std::vector<double> rdiag(static_cast<std::size_t>(n));
  for (int64_t k = 0; k < n; ++k) {
    std::vector<double> v(static_cast<std::size_t>(m - k));
    double norm = 0;
    for (int64_t i = k; i < m; ++i) norm += A[i * n + k] * A[i * n + k];
    norm = std::sqrt(norm);
    const double alpha = A[k * n + k] > 0 ? -norm : norm;
    for (int64_t i = k; i < m; ++i) v[i - k] = A[i * n + k];
    v[0] -= alpha;
    double vnorm = 0;
    for (double x : v) vnorm += x * x;
    if (vnorm > 0)
      for (int64_t j = k; j < n; ++j) {
        double dot = 0;
        for (int64_t i = k; i < m; ++i) dot += v[i - k] * A[i * n + j];
        for (int64_t i = k; i < m; ++i) A[i * n + j] -= 2 * dot / vnorm * v[i - k];
      }
    rdiag[k] = A[k * n + k];
    reflectors.push_back(vnorm > 0 ? v : std::vector<double>{});
  }
  // Q = H_0 ... H_{n-1} applied to the first n columns of I, then scaled by sign(R_kk).
  std::vector<double> Q(static_cast<std::size_t>(m * n), 0.0);
  for (int64_t j = 0; j < n; ++j) Q[j * n + j] = 1.0;
  for (int64_t k = n - 1; k >= 0; --k) {
    const auto& v = reflectors[k];
    if (v.empty()) continue;
    double vnorm = 0;
    for (double x : v) vnorm += x * x;
    for (int64_t j = 0; j < n; ++j) {
      double dot = 0;
      for (int64_t i = k; i < m; ++i) dot += v[i - k] * Q[i * n + j];
      for (int64_t i = k; i < m; ++i) Q[i * n + j] -= 2 * dot / vnorm * v[i - k];
    }
  }
  for (int64_t j = 0; j < n; ++j)
    if (rdiag[j] < 0)
      for (int64_t i = 0; i < m; ++i) Q[i * n + j] = -Q[i * n + j];
  return Q;
}

}  // namespace

Tensor& orthogonal_(Tensor& t, double gain, Generator* gen) {
  check_floating(t, "orthogonal_");
  STRATA_CHECK(t.dim() >= 2, "Only tensors with 2 or more dimensions are supported");
  if (t.numel() == 0) return t;
  const int64_t rows = t.size(0), cols = t.numel() / rows;
  const int64_t m = std::max(rows, cols), n = std::min(rows, cols);
  const Tensor draw = normal({m, n}, 0.0, 1.0, {DType::f64}, gen);
  const std::vector<double> Q =
      orthonormal_columns(std::vector<double>(draw.data<double>(), draw.data<double>() + m * n), m, n);
  Tensor values = empty({rows, cols}, {DType::f64});
  double* out = values.data<double>();
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) out[r * cols + c] = gain * (rows >= cols ? Q[r * n + c] : Q[c * n + r]);
  return fill_from(t, values.reshape(t.sizes()));
}

}  // namespace strata::nn::init
