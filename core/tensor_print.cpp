// Tensor::to_string: PyTorch-like text with aligned columns and "..." summarization.

#include <cmath>
#include <cstdio>
#include <sstream>
#include <vector>

#include "core/tensor.h"

namespace strata {

namespace {

constexpr int64_t kSummarizeThreshold = 1000;  // elements; above this, print edges only
constexpr int64_t kEdgeItems = 3;

// One element: floats as double, integers and bools exactly as int64 (a double cannot hold every
// i64).
struct Value {
  double f = 0.0;
  int64_t i = 0;
};

Value value_of(const Tensor& scalar) {
  if (is_floating(scalar.dtype())) return {scalar.at({}), 0};
  return {0.0, scalar.item<int64_t>()};
}

struct Formatter {
  DType dtype;
  bool integral_floats = true;  // every finite float value is a whole number
  bool scientific = false;
  int width = 1;

  std::string format(Value value) const {
    char buf[64];
    if (dtype == DType::boolean) return value.i != 0 ? "True" : "False";
    const double v = value.f;
    if (!is_floating(dtype)) {
      std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(value.i));
    } else if (std::isnan(v)) {
      return "nan";
    } else if (std::isinf(v)) {
      return v > 0 ? "inf" : "-inf";
    } else if (scientific) {
      std::snprintf(buf, sizeof buf, "%.4e", v);
    } else if (integral_floats) {
      std::snprintf(buf, sizeof buf, "%.0f.", v);
    } else {
      std::snprintf(buf, sizeof buf, "%.4f", v);
    }
    return buf;
  }
};

// Indices printed along one dim: all of them, or the first and last kEdgeItems.
std::vector<int64_t> shown_indices(int64_t n, bool summarize) {
  std::vector<int64_t> idx;
  if (summarize && n > 2 * kEdgeItems) {
    for (int64_t i = 0; i < kEdgeItems; ++i) idx.push_back(i);
    idx.push_back(-1);  // the "..." marker
    for (int64_t i = n - kEdgeItems; i < n; ++i) idx.push_back(i);
  } else {
    for (int64_t i = 0; i < n; ++i) idx.push_back(i);
  }
  return idx;
}

void collect(const Tensor& t, bool summarize, std::vector<Value>& out) {
  if (t.dim() == 0) {
    out.push_back(value_of(t));
    return;
  }
  for (int64_t i : shown_indices(t.size(0), summarize))
    if (i >= 0) collect(t.select(0, i), summarize, out);
}

void render(const Tensor& t, const Formatter& f, bool summarize, int indent, std::ostringstream& os) {
  if (t.dim() == 0) {
    std::string s = f.format(value_of(t));
    os << std::string(static_cast<std::size_t>(std::max(0, f.width - static_cast<int>(s.size()))), ' ') << s;
    return;
  }
  os << '[';
  const auto idx = shown_indices(t.size(0), summarize);
  for (std::size_t k = 0; k < idx.size(); ++k) {
    if (k > 0) {
      os << ',';
      if (t.dim() == 1) {
        os << ' ';
      } else {
        os << std::string(static_cast<std::size_t>(t.dim() - 1), '\n')
           << std::string(static_cast<std::size_t>(indent + 1), ' ');
      }
    }
    if (idx[k] < 0) {
      os << "...";
    } else {
      render(t.select(0, idx[k]), f, summarize, indent + 1, os);
    }
  }
  os << ']';
}

}  // namespace

std::string Tensor::to_string() const {
  if (!defined()) return "tensor(undefined)";
  const bool summarize = numel() > kSummarizeThreshold;
  Formatter f{dtype()};
  std::vector<Value> values;
  if (numel() > 0) collect(*this, summarize, values);
  if (is_floating(dtype())) {
    double max_abs = 0.0;
    double min_abs = INFINITY;
    for (const Value& value : values) {
      const double v = value.f;
      if (!std::isfinite(v)) continue;
      if (v != std::floor(v)) f.integral_floats = false;
      if (v != 0.0) {
        max_abs = std::max(max_abs, std::fabs(v));
        min_abs = std::min(min_abs, std::fabs(v));
      }
    }
    f.scientific = max_abs >= 1e8 || (!f.integral_floats && min_abs < 1e-4) ||
                   (max_abs > 0 && min_abs < INFINITY && max_abs / min_abs > 1e3 && !f.integral_floats);
  }
  for (const Value& v : values) f.width = std::max(f.width, static_cast<int>(f.format(v).size()));

  std::ostringstream os;
  const std::string prefix = "tensor(";
  if (numel() == 0) {
    os << prefix << "[], size=" << sizes();
  } else {
    os << prefix;
    render(*this, f, summarize, static_cast<int>(prefix.size()), os);
  }
  os << ", dtype=" << dtype() << ')';
  return os.str();
}

}  // namespace strata
