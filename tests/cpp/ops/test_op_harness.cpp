// The generic tests every op harness case runs (see harness/op_harness.h).

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <memory>
#include <set>
#include <sstream>

#include "autograd/engine.h"
#include "autograd/grad_mode.h"
#include "core/type_promotion.h"
#include "tests/cpp/ops/harness/op_harness.h"

namespace strata::testing {
namespace {

std::string case_test_name(const std::string& name) {
  std::string s;
  for (char c : name) s += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return s;
}

/// Copies of `inputs` ready for the op: floating ones converted to `dtype` (and made
/// non-contiguous if asked), gradient inputs marked requires_grad.
TensorList prepare(const TensorList& inputs, DType dtype, bool noncontig, const std::vector<int>& grad_inputs) {
  TensorList out;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    Tensor t = inputs[i];
    if (t.defined()) {
      if (is_floating(t.dtype()))
        t = t.to(dtype, /*copy=*/true);
      else
        t = t.clone();
      if (noncontig) t = noncontiguous(t);
      bool wants = false;
      for (int g : grad_inputs) wants = wants || g == static_cast<int>(i);
      if (wants) t.set_requires_grad(true);
    }
    out.push_back(t);
  }
  return out;
}

/// Indices of the floating inputs.
std::vector<int> floating_inputs(const TensorList& inputs) {
  std::vector<int> out;
  for (std::size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i].defined() && is_floating(inputs[i].dtype())) out.push_back(static_cast<int>(i));
  return out;
}

/// Σ_k Σ out_k · w_k in f64.
double weighted_sum(const TensorList& outs, const TensorList& weights) {
  double total = 0;
  for (std::size_t k = 0; k < outs.size(); ++k) {
    if (!weights[k].defined()) continue;
    const auto o = values_of(outs[k]);
    const auto w = values_of(weights[k]);
    for (std::size_t j = 0; j < o.size(); ++j) total += o[j] * w[j];
  }
  return total;
}

void expect_close(const Tensor& actual, const Tensor& expected, double rtol, double atol, const std::string& what) {
  ASSERT_TRUE(actual.defined()) << what << ": undefined";
  ASSERT_EQ(actual.sizes(), expected.sizes())
      << what << ": shape " << actual.describe() << " vs expected " << expected.describe();
  const auto a = values_of(actual);
  const auto e = values_of(expected);
  int reported = 0;
  for (std::size_t j = 0; j < a.size(); ++j) {
    const bool ok = (std::isnan(a[j]) && std::isnan(e[j])) || (a[j] == e[j]) ||
                    std::abs(a[j] - e[j]) <= atol + rtol * std::abs(e[j]);
    if (!ok && reported++ < 5) ADD_FAILURE() << what << ": element " << j << " is " << a[j] << ", expected " << e[j];
  }
}

class OpHarness : public ::testing::TestWithParam<std::size_t> {
 protected:
  const OpCase& c() const { return op_cases()[GetParam()]; }
  TensorList make_inputs() const {
    Generator gen(1234 + GetParam());
    return c().inputs(gen);
  }
  TensorList make_weights(const TensorList& outs) const {
    Generator gen(999);
    TensorList w;
    for (const Tensor& o : outs) w.push_back(is_floating(o.dtype()) ? uniform64(o.sizes(), gen, -1.0, 1.0) : Tensor());
    return w;
  }
  /// Random cotangents for the case's outputs (from a no-grad forward on contiguous f64 inputs).
  TensorList weights_for(const TensorList& inputs) const {
    TensorList outs;
    {
      autograd::NoGradGuard ng;
      outs = c().run(contiguous_f64(inputs));
    }
    return make_weights(outs);
  }
  TensorList contiguous_f64(const TensorList& in) const {
    TensorList out;
    for (const Tensor& t : in)
      out.push_back(!t.defined() ? t : is_floating(t.dtype()) ? t.to(DType::f64, true) : t.clone());
    return out;
  }
  /// Runs forward and backward(weights) on prepared inputs; returns the gradients of grad_inputs.
  TensorList analytic_grads(const TensorList& inputs, DType dtype, bool noncontig, const TensorList& weights) const {
    TensorList in = prepare(inputs, dtype, noncontig, c().grad_inputs);
    TensorList outs = c().run(in);
    TensorList roots, grads;
    for (std::size_t k = 0; k < outs.size(); ++k) {
      if (!weights[k].defined() || !outs[k].requires_grad()) continue;
      roots.push_back(outs[k]);
      grads.push_back(weights[k].to(outs[k].dtype(), true));
    }
    TensorList result;
    if (roots.empty()) return result;
    autograd::backward(roots, grads);
    for (int g : c().grad_inputs) result.push_back(in[g].grad());
    return result;
  }
};

TEST_P(OpHarness, ForwardMatchesReference) {
  const TensorList inputs = make_inputs();
  const TensorList expected = c().reference(contiguous_f64(inputs));
  for (DType dtype : {DType::f64, DType::f32}) {
    TensorList outs = c().run(prepare(inputs, dtype, false, {}));
    ASSERT_EQ(outs.size(), expected.size()) << c().name;
    for (std::size_t k = 0; k < outs.size(); ++k) {
      std::ostringstream what;
      what << c().name << " " << dtype << " output " << k;
      if (is_floating(outs[k].dtype())) {
        EXPECT_EQ(outs[k].dtype(), dtype) << what.str();
      }
      if (dtype == DType::f64)
        expect_close(outs[k], expected[k], c().f64_rtol, c().f64_atol, what.str());
      else
        expect_close(outs[k], expected[k], c().f32_rtol, c().f32_atol, what.str());
    }
  }
}

// Suites that apply only to some cases are instantiated only for those (no skipped tests).
class OpHarnessStrided : public OpHarness {};
class OpHarnessGrad : public OpHarness {};
class OpHarnessMixed : public OpHarness {};

TEST_P(OpHarnessStrided, NonContiguousInputs) {
  const TensorList inputs = make_inputs();
  const TensorList expected = c().reference(contiguous_f64(inputs));
  TensorList outs = c().run(prepare(inputs, DType::f64, true, {}));
  ASSERT_EQ(outs.size(), expected.size());
  for (std::size_t k = 0; k < outs.size(); ++k)
    expect_close(outs[k], expected[k], c().f64_rtol, c().f64_atol,
                 c().name + " non-contiguous output " + std::to_string(k));
  if (c().grad_inputs.empty()) return;
  const TensorList weights = make_weights(outs);
  const TensorList g_contig = analytic_grads(inputs, DType::f64, false, weights);
  const TensorList g_strided = analytic_grads(inputs, DType::f64, true, weights);
  ASSERT_EQ(g_contig.size(), g_strided.size());
  for (std::size_t i = 0; i < g_contig.size(); ++i)
    expect_close(g_strided[i], g_contig[i], 1e-10, 1e-12,
                 c().name + " non-contiguous gradient of input " + std::to_string(c().grad_inputs[i]));
}

TEST_P(OpHarnessGrad, FiniteDifferenceGradients) {
  const TensorList inputs = contiguous_f64(make_inputs());
  const TensorList weights = weights_for(inputs);
  const TensorList analytic = analytic_grads(inputs, DType::f64, false, weights);
  ASSERT_EQ(analytic.size(), c().grad_inputs.size()) << c().name << ": no output requires grad";
  for (std::size_t gi = 0; gi < c().grad_inputs.size(); ++gi) {
    const int idx = c().grad_inputs[gi];
    ASSERT_TRUE(analytic[gi].defined()) << c().name << ": input " << idx << " got no gradient";
    ASSERT_EQ(analytic[gi].sizes(), inputs[idx].sizes());
    const auto a = values_of(analytic[gi]);
    const int64_t n = inputs[idx].numel();
    ASSERT_LE(n, 4096) << c().name << ": keep gradient inputs small";
    int reported = 0;
    for (int64_t j = 0; j < n; ++j) {
      double l[2];
      for (int s = 0; s < 2; ++s) {
        TensorList in = inputs;
        in[idx] = inputs[idx].clone();
        in[idx].data<double>()[j] += (s == 0 ? 1 : -1) * c().fd_eps;
        autograd::NoGradGuard ng;
        l[s] = weighted_sum(c().run(in), weights);
      }
      const double numeric = (l[0] - l[1]) / (2 * c().fd_eps);
      const double tol = c().fd_atol + c().fd_rtol * std::max(std::abs(numeric), std::abs(a[j]));
      if (std::abs(numeric - a[j]) > tol && reported++ < 5)
        ADD_FAILURE() << c().name << ": d/d input" << idx << "[" << j << "] analytic " << a[j] << ", numeric "
                      << numeric;
    }
  }
}

TEST_P(OpHarnessGrad, Float32GradientsMatchFloat64) {
  const TensorList inputs = make_inputs();
  const TensorList weights = weights_for(inputs);
  const TensorList g64 = analytic_grads(inputs, DType::f64, false, weights);
  const TensorList g32 = analytic_grads(inputs, DType::f32, false, weights);
  ASSERT_EQ(g64.size(), g32.size());
  for (std::size_t i = 0; i < g64.size(); ++i) {
    EXPECT_EQ(g32[i].dtype(), DType::f32);
    expect_close(g32[i], g64[i], c().f32_rtol * 10, c().f32_atol * 10,
                 c().name + " f32 gradient of input " + std::to_string(c().grad_inputs[i]));
  }
}

class OpHarnessGradReference : public OpHarness {};

// Note [Non-finite cases] (harness/op_harness.h): gradients at NaN and ±inf by PyTorch's rules.
TEST_P(OpHarnessGradReference, GradientsMatchReference) {
  const TensorList inputs = make_inputs();
  const TensorList weights = weights_for(inputs);
  const TensorList expected = c().grad_reference(contiguous_f64(inputs), weights);
  ASSERT_EQ(expected.size(), c().grad_inputs.size()) << c().name;
  for (DType dtype : {DType::f64, DType::f32}) {
    const TensorList got = analytic_grads(inputs, dtype, false, weights);
    ASSERT_EQ(got.size(), expected.size()) << c().name << " " << dtype;
    for (std::size_t i = 0; i < got.size(); ++i) {
      std::ostringstream what;
      what << c().name << " " << dtype << " gradient of input " << c().grad_inputs[i];
      if (dtype == DType::f64)
        expect_close(got[i], expected[i], c().f64_rtol, c().f64_atol, what.str());
      else
        expect_close(got[i], expected[i], c().f32_rtol * 10, c().f32_atol * 10, what.str());
    }
  }
}

TEST_P(OpHarness, NoGraphWithoutGrad) {
  const TensorList inputs = make_inputs();
  TensorList in = prepare(inputs, DType::f64, false, c().grad_inputs);
  {
    autograd::NoGradGuard ng;
    for (const Tensor& o : c().run(in)) EXPECT_FALSE(o.requires_grad()) << c().name << ": recorded under no_grad";
  }
  for (const Tensor& o : c().run(prepare(inputs, DType::f64, false, {})))
    EXPECT_FALSE(o.requires_grad()) << c().name << ": output requires grad though no input does";
}

TEST_P(OpHarnessMixed, MixedDtypesAreRefused) {
  const TensorList inputs = make_inputs();
  const std::vector<int> floats = floating_inputs(inputs);
  ASSERT_GE(floats.size(), 2u);
  TensorList in = prepare(inputs, DType::f64, false, {});
  in[floats[0]] = in[floats[0]].to(DType::f32, true);
  try {
    c().run(in);
    ADD_FAILURE() << c().name << ": mixing f32 and f64 inputs was accepted";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(std::string(op_name(c().op))), std::string::npos) << msg;
    EXPECT_NE(msg.find(in[floats[0]].describe()), std::string::npos)
        << "message should name " << in[floats[0]].describe() << ": " << msg;
    EXPECT_NE(msg.find(" f64"), std::string::npos) << "message should name the f64 tensor: " << msg;
  }
}

class OpHarnessPromotes : public OpHarness {};

// Note [Type promotion]: the first floating input in f32, the rest in f64 — the result has their
// result type (f64, or f32 when the f64 input is a zero-dim tensor next to one with dims) and
// matches the reference on the rounded inputs, and the f32 input's gradient is f32.
TEST_P(OpHarnessPromotes, MixedDtypesPromote) {
  const TensorList inputs = make_inputs();
  const std::vector<int> floats = floating_inputs(inputs);
  ASSERT_GE(floats.size(), 2u);
  TensorList in = prepare(inputs, DType::f64, false, c().grad_inputs);
  bool grads = false;
  for (int g : c().grad_inputs) grads = grads || g == floats[0];
  in[floats[0]] = inputs[floats[0]].to(DType::f32, true);
  in[floats[0]].set_requires_grad(grads);
  TensorList ref_in = contiguous_f64(inputs);
  ref_in[floats[0]] = in[floats[0]].detach().to(DType::f64, true);
  const TensorList expected = c().reference(ref_in);
  ResultType promoted;
  for (int f : floats) promoted.add(in[f]);
  const DType want = promoted.get();
  TensorList outs = c().run(in);
  ASSERT_EQ(outs.size(), expected.size());
  for (std::size_t k = 0; k < outs.size(); ++k) {
    if (is_floating(outs[k].dtype())) EXPECT_EQ(outs[k].dtype(), want) << c().name << " output " << k;
    const double rtol = want == DType::f64 ? c().f64_rtol * 100 : c().f32_rtol,
                 atol = want == DType::f64 ? c().f64_atol * 100 : c().f32_atol;
    expect_close(outs[k], expected[k], rtol, atol, c().name + " mixed output " + std::to_string(k));
  }
  if (!grads || !outs[0].requires_grad()) return;
  autograd::backward({outs[0]}, {ones(outs[0].sizes(), {outs[0].dtype(), nullptr})});
  ASSERT_TRUE(in[floats[0]].grad().defined()) << c().name;
  EXPECT_EQ(in[floats[0]].grad().dtype(), DType::f32) << c().name;
  EXPECT_EQ(in[floats[0]].grad().sizes(), in[floats[0]].sizes()) << c().name;
}

// Wraps the default allocator and records, per allocation, how kernels announced and pinned it.
class RecordingAllocation final : public Allocation {
 public:
  explicit RecordingAllocation(std::unique_ptr<Allocation> inner) : inner_(std::move(inner)) {}
  void pin(AccessMode m, std::size_t bytes) override {
    (m == AccessMode::Write ? write_pins : read_pins).fetch_add(1);
    inner_->pin(m, bytes);
  }
  void unpin(AccessMode m) override { inner_->unpin(m); }
  void use(AccessMode m) override {
    (m == AccessMode::Write ? write_uses : read_uses).fetch_add(1);
    inner_->use(m);
  }
  void* data() override { return inner_->data(); }
  std::size_t nbytes() const override { return inner_->nbytes(); }
  std::atomic<int> read_uses{0}, write_uses{0}, read_pins{0}, write_pins{0};

 private:
  std::unique_ptr<Allocation> inner_;
};

class RecordingAllocator final : public Allocator {
 public:
  explicit RecordingAllocator(Allocator& inner) : inner_(inner) {}
  std::unique_ptr<Allocation> allocate(std::size_t n) override {
    return std::make_unique<RecordingAllocation>(inner_.allocate(n));
  }
  std::string_view name() const override { return "recording"; }

 private:
  Allocator& inner_;
};

// Note [Anatomy of an op]: every operand a kernel touches is reported to the memory policy
// (use → read_use / write_use) and pinned; outputs are written under a Write pin.
TEST_P(OpHarness, OperandsGoThroughTheMemoryPolicy) {
  static RecordingAllocator recording(default_allocator());
  Allocator* previous = set_default_allocator(&recording);
  struct Restore {
    Allocator* p;
    ~Restore() { set_default_allocator(p); }
  } restore{previous};
  const TensorList inputs = prepare(make_inputs(), DType::f64, false, {});
  TensorList outs;
  {
    autograd::NoGradGuard ng;
    outs = c().run(inputs);
  }
  auto rec = [](const Tensor& t) { return dynamic_cast<RecordingAllocation*>(t.storage().allocation()); };
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& in = inputs[i];
    if (!in.defined() || in.numel() == 0) continue;
    bool aliased = false;  // a view op returns (part of) its input without reading it
    for (const Tensor& o : outs) aliased = aliased || o.shares_storage(in);
    RecordingAllocation* a = rec(in);
    ASSERT_NE(a, nullptr);
    if (aliased && a->read_pins.load() == 0) continue;
    EXPECT_GT(a->read_uses.load() + a->write_uses.load(), 0)
        << c().name << ": input " << i << " never reported to the policy";
    EXPECT_GT(a->read_pins.load() + a->write_pins.load(), 0) << c().name << ": input " << i << " read without a pin";
  }
  for (std::size_t k = 0; k < outs.size(); ++k) {
    const Tensor& o = outs[k];
    bool aliased = false;
    for (const Tensor& in : inputs) aliased = aliased || (in.defined() && o.shares_storage(in));
    if (aliased || o.numel() == 0) continue;
    RecordingAllocation* a = rec(o);
    ASSERT_NE(a, nullptr) << c().name << ": output " << k << " not allocated by the default allocator";
    EXPECT_GT(a->write_uses.load(), 0) << c().name << ": output " << k << " written without write_use";
    EXPECT_GT(a->write_pins.load(), 0) << c().name << ": output " << k << " written without a Write pin";
  }
}

std::string param_name(const ::testing::TestParamInfo<std::size_t>& info) {
  return case_test_name(op_cases()[info.param].name);
}

template <typename Pred>
std::vector<std::size_t> cases_where(Pred pred) {
  std::vector<std::size_t> out;
  for (std::size_t i = 0; i < op_cases().size(); ++i)
    if (pred(op_cases()[i], i)) out.push_back(i);
  return out;
}

INSTANTIATE_TEST_SUITE_P(Cases, OpHarness, ::testing::Range<std::size_t>(0, op_cases().size()), param_name);
INSTANTIATE_TEST_SUITE_P(Cases, OpHarnessStrided,
                         ::testing::ValuesIn(cases_where([](const OpCase& c, std::size_t) { return c.noncontiguous; })),
                         param_name);
INSTANTIATE_TEST_SUITE_P(Cases, OpHarnessGrad, ::testing::ValuesIn(cases_where([](const OpCase& c, std::size_t) {
                           return !c.grad_inputs.empty() && !c.grad_reference;
                         })),
                         param_name);
INSTANTIATE_TEST_SUITE_P(
    Cases, OpHarnessGradReference,
    ::testing::ValuesIn(cases_where([](const OpCase& c, std::size_t) { return bool(c.grad_reference); })), param_name);
INSTANTIATE_TEST_SUITE_P(Cases, OpHarnessMixed, ::testing::ValuesIn(cases_where([](const OpCase& c, std::size_t i) {
                           Generator gen(1234 + i);
                           int floats = 0;
                           for (const Tensor& t : c.inputs(gen)) floats += t.defined() && is_floating(t.dtype());
                           return floats >= 2 && !c.promotes;
                         })),
                         param_name);
INSTANTIATE_TEST_SUITE_P(Cases, OpHarnessPromotes,
                         ::testing::ValuesIn(cases_where([](const OpCase& c, std::size_t) { return c.promotes; })),
                         param_name);

class BadInput : public ::testing::TestWithParam<std::size_t> {};

TEST_P(BadInput, RaisesClearError) {
  const BadInputCase& b = bad_input_cases()[GetParam()];
  try {
    b.call();
    ADD_FAILURE() << b.name << ": no error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(std::string(op_name(b.op))), std::string::npos) << b.name << ": " << msg;
    for (const auto& s : b.expect)
      EXPECT_NE(msg.find(s), std::string::npos) << b.name << ": expected '" << s << "' in: " << msg;
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, BadInput, ::testing::Range<std::size_t>(0, bad_input_cases().size()),
                         [](const ::testing::TestParamInfo<std::size_t>& info) {
                           return case_test_name(bad_input_cases()[info.param].name);
                         });

TEST(OpHarnessCoverage, EveryOpHasCasesAndBadInputs) {
  std::set<OpKind> with_case, with_bad;
  std::set<std::string> names;
  for (const auto& c : op_cases()) {
    with_case.insert(c.op);
    EXPECT_TRUE(names.insert(c.name).second) << "duplicate case name " << c.name;
  }
  for (const auto& b : bad_input_cases()) with_bad.insert(b.op);
  for (const OpInfo& op : kOps) {
    EXPECT_TRUE(with_case.count(op.kind)) << "op " << op.name << " (" << op.family << ") has no harness case";
    EXPECT_TRUE(with_bad.count(op.kind)) << "op " << op.name << " (" << op.family << ") has no bad-input case";
  }
}

}  // namespace
}  // namespace strata::testing
