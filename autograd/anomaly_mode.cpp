#include "autograd/anomaly_mode.h"

#include <atomic>
#include <sstream>
#include <string>

#include "autograd/node.h"
#include "core/finite.h"

namespace strata::autograd {

namespace {

std::atomic<bool> enabled{false};
std::atomic<bool> check_nan{true};

// The note make_node leaves for the set_history that follows it on this thread (Note [Anomaly
// detection]): which inputs not computed by a recorded op held NaN or inf.
thread_local const Node* noted_node = nullptr;
thread_local std::string noted_inputs;

const char* ordinal_suffix(std::size_t i) {
  if (i % 100 >= 11 && i % 100 <= 13) return "th";
  switch (i % 10) {
    case 1: return "st";
    case 2: return "nd";
    case 3: return "rd";
    default: return "th";
  }
}

std::string kinds(const NonFinite& nf) { return nf.nan > 0 && nf.inf > 0 ? "nan and inf" : nf.nan > 0 ? "nan" : "inf"; }

std::string meta_string(const TensorMeta& m) {
  std::ostringstream os;
  os << "Tensor" << IntArrayRef(m.sizes) << " " << m.dtype;
  return os.str();
}

}  // namespace

bool AnomalyMode::is_enabled() { return enabled.load(std::memory_order_relaxed); }
bool AnomalyMode::should_check_nan() {
  return enabled.load(std::memory_order_relaxed) && check_nan.load(std::memory_order_relaxed);
}
void AnomalyMode::set_enabled(bool on, bool nan) {
  check_nan.store(nan, std::memory_order_relaxed);
  enabled.store(on, std::memory_order_relaxed);
}

DetectAnomalyGuard::DetectAnomalyGuard(bool on, bool nan)
    : previous_(AnomalyMode::is_enabled()), previous_check_nan_(check_nan.load(std::memory_order_relaxed)) {
  AnomalyMode::set_enabled(on, nan);
}
DetectAnomalyGuard::~DetectAnomalyGuard() { AnomalyMode::set_enabled(previous_, previous_check_nan_); }

namespace detail {

void note_forward_inputs(const Node& node, const std::vector<const Tensor*>& inputs) {
  noted_node = &node;
  noted_inputs.clear();
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const Tensor* t = inputs[i];
    if (t == nullptr || !t->defined() || t->grad_fn()) continue;  // recorded outputs were checked
    if (all_finite(*t)) continue;
    const NonFinite nf = find_non_finite(*t);
    std::ostringstream os;
    os << (noted_inputs.empty() ? "" : "; ") << "input " << i << " (" << t->describe()
       << (t->requires_grad() ? ", a leaf that requires grad: a parameter" : ", not computed by a recorded op: data")
       << ") already held " << nf.describe();
    noted_inputs += os.str();
  }
}

void check_forward_output(const Node& node, const Tensor& output, uint32_t nr) {
  if (all_finite(output)) return;
  const NonFinite nf = find_non_finite(output);
  std::ostringstream os;
  os << "anomaly detected: the forward of '" << node.name() << "' produced " << kinds(nf) << " values in its " << nr
     << ordinal_suffix(nr) << " output (" << output.describe() << ": " << nf.describe() << "); ";
  if (noted_node == &node && !noted_inputs.empty())
    os << noted_inputs;
  else
    os << "its inputs were finite, so this op produced them";
  os << " (strata.autograd.set_detect_anomaly is on)";
  throw Error(os.str());
}

void check_backward_output(const Node& node, std::size_t i, const Tensor& grad) {
  if (all_finite(grad)) return;
  const NonFinite nf = find_non_finite(grad);
  std::ostringstream os;
  os << "anomaly detected: Function '" << node.name() << "' returned " << kinds(nf) << " values in its " << i
     << ordinal_suffix(i) << " output (the gradient w.r.t. its input " << i << ", " << grad.describe() << ": "
     << nf.describe() << ")";
  const Edge& e = node.next_edges()[i];
  if (const auto* acc = dynamic_cast<const AccumulateGrad*>(e.node.get()))
    os << "; that input is a leaf that requires grad (a parameter, " << acc->leaf().describe()
       << "), whose .grad would have become non-finite";
  os << " (strata.autograd.set_detect_anomaly is on)";
  throw Error(os.str());
}

void check_leaf_gradient(const Node& accumulate, const Tensor& grad) {
  if (!grad.defined() || all_finite(grad)) return;
  const NonFinite nf = find_non_finite(grad);
  std::ostringstream os;
  os << "anomaly detected: the gradient of a leaf that requires grad (a parameter, "
     << meta_string(accumulate.input_meta()[0]) << "), summed from finite parts, holds " << kinds(nf) << " values ("
     << nf.describe() << "): the sum overflowed (strata.autograd.set_detect_anomaly is on)";
  throw Error(os.str());
}

void check_root_gradient(const char* op, std::size_t i, const Tensor& grad) {
  if (all_finite(grad)) return;
  const NonFinite nf = find_non_finite(grad);
  std::ostringstream os;
  os << "anomaly detected: " << op << ": the gradient given for tensor " << i << " (" << grad.describe() << ") holds "
     << kinds(nf) << " values (" << nf.describe() << ") (strata.autograd.set_detect_anomaly is on)";
  throw Error(os.str());
}

}  // namespace detail

}  // namespace strata::autograd
