// Op micro-benchmarks: runs every op harness case that declares bench_inputs (f32, training sizes)
// and reports forward and forward+backward times, warm (Note [Warm op timing]). bench/compare.py
// ops runs the same work on PyTorch side by side (bench/workloads/ops.py); this binary is Strata's
// half.
//
//   strata-bench-ops [--filter SUBSTR|=NAME] [--warmup-s S] [--min-time-s T] [--reps N] [--max-reps M]
//                    [--threads T] [--json FILE] [--list] [--quick]
//
// Each figure: warm-up calls for at least S seconds (default 0.5), then timed calls until at least N
// (default 10) calls and T seconds (default 0.2) are done, at most M calls (default 200); the median
// with min and max. --quick (a smoke run for tests): 2 warm-up and 2 timed calls unless given.
// JSON: {"binary", "threads", "dtype", "library", "reps", "max_reps", "warmup_s", "min_time_s",
// "cases": [{"case", "op", "threads", "inputs", "fwd_us", "fwd_bwd_us"}]}, each time an object
// {"median", "min", "max", "samples", "first", "warmup_calls"} in µs: "first" is the first call of
// that figure in this process (for fwd_us, the process's first call of the op: the cold start),
// "warmup_calls" how many calls the warm-up made (fwd_bwd_us is null for ops without gradient
// inputs).

// Note [Warm op timing]
// An op's first calls in a process pay for things a training loop pays once: page faults on fresh
// allocations, oneDNN primitive creation, lazy initialisation of the thread pool, cold caches and
// branch predictors. Timing a few calls after two warm-up calls measured mostly that (issue 26: a
// peer's `a + b` on [256, 4096] took 7,984 µs that way and 154 µs after 200 warm-up calls). Both
// sides of compare.py ops therefore use the same time-based policy with the same parameters
// (bench/workloads/ops.py passes them here and to its PyTorch timer, workloads/torch_side.py
// time_warm_us): warm up for >= 0.5 s (at least 2 calls), then time calls until >= 10 calls and
// >= 0.2 s, at most 200. Half a second is thousands of calls of a small op and at least 2 of the
// largest (a 116 ms conv2d forward+backward); compare.py logs a round whose second half of timed
// calls is more than 10 % faster than its first half (warm-up that was not enough). The first
// call is reported separately as the cold-start figure, never pooled with the warm samples.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "autograd/engine.h"
#include "autograd/grad_mode.h"
#include "bench/bench_common.h"
#include "core/threading.h"
#include "ops/dnnl_info.h"
#include "tests/cpp/ops/harness/op_harness.h"

using namespace strata;
using namespace strata::testing;

namespace {

struct Stats {
  double median = 0, min = 0, max = 0;  // microseconds
  std::vector<double> samples;          // the raw timed repetitions, in order
  double first = 0;                     // the first (cold) call, µs
  int warmup_calls = 0;
};

/// How long to warm up and how many calls to time (Note [Warm op timing]).
struct Policy {
  double warmup_s = 0.5, min_time_s = 0.2;
  int min_warmup_calls = 2, reps = 10, max_reps = 200;
};

template <typename Fn>
double call_us(Fn& fn) {
  const auto t0 = std::chrono::steady_clock::now();
  fn();
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
}

/// Warm-up for >= p.warmup_s (and >= p.min_warmup_calls calls, the first of them reported as
/// `first`), then timed calls until >= p.reps calls and >= p.min_time_s, at most p.max_reps.
template <typename Fn>
Stats time_warm(const Policy& p, Fn&& fn) {
  Stats st;
  double spent_us = st.first = call_us(fn);
  for (st.warmup_calls = 1; st.warmup_calls < p.min_warmup_calls || spent_us < p.warmup_s * 1e6; ++st.warmup_calls)
    spent_us += call_us(fn);
  double timed_us = 0;
  while (static_cast<int>(st.samples.size()) < p.max_reps &&
         (static_cast<int>(st.samples.size()) < p.reps || timed_us < p.min_time_s * 1e6)) {
    st.samples.push_back(call_us(fn));
    timed_us += st.samples.back();
  }
  const bench::Summary s = bench::summarize(st.samples);
  st.median = s.median, st.min = s.min, st.max = s.max;
  return st;
}

/// {"median", "min", "max", "samples": [..], "first", "warmup_calls"} in microseconds.
std::string stats_json(const Stats& s) {
  bench::Json j;
  j.begin_object().kv("median", s.median).kv("min", s.min).kv("max", s.max).key("samples").begin_array();
  for (double x : s.samples) j.value(x);
  j.end_array().kv("first", s.first).kv("warmup_calls", s.warmup_calls).end_object();
  std::string text = j.str();
  if (!text.empty() && text.back() == '\n') text.pop_back();
  return text;
}

constexpr const char* kUsage =
    "strata-bench-ops [--filter SUBSTR|=NAME] [--warmup-s S] [--min-time-s T] [--reps N] [--max-reps M] "
    "[--threads T] [--json FILE] [--list] [--quick]";

struct Options {
  std::string filter, json;
  Policy policy;
  int threads = 0;
  bool list = false;
};

Options parse(int argc, char** argv) {
  const bench::Cli cli("strata-bench-ops", kUsage);
  Options o;
  bool quick = false, warmup_set = false, time_set = false, reps_set = false, max_set = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--filter")
      o.filter = cli.value(argc, argv, i);
    else if (a == "--json")
      o.json = cli.value(argc, argv, i);
    else if (a == "--list")
      o.list = true;
    else if (a == "--quick")
      quick = true;
    else if (a == "--threads")
      o.threads = cli.threads(a, cli.value(argc, argv, i));  // Note [One thread count bound]
    else if (a == "--warmup-s")
      o.policy.warmup_s = cli.real(a, cli.value(argc, argv, i), 0, 60), warmup_set = true;
    else if (a == "--min-time-s")
      o.policy.min_time_s = cli.real(a, cli.value(argc, argv, i), 0, 60), time_set = true;
    else if (a == "--reps")
      o.policy.reps = static_cast<int>(cli.integer(a, cli.value(argc, argv, i), 1, 1000000)), reps_set = true;
    else if (a == "--max-reps")
      o.policy.max_reps = static_cast<int>(cli.integer(a, cli.value(argc, argv, i), 1, 1000000)), max_set = true;
    else
      cli.unknown(a);
  }
  if (quick) {
    if (!warmup_set) o.policy.warmup_s = 0;
    if (!time_set) o.policy.min_time_s = 0;
    if (!reps_set) o.policy.reps = 2;
    if (!max_set) o.policy.max_reps = std::max(2, o.policy.reps);
  }
  if (o.policy.max_reps < o.policy.reps)
    cli.fail("--max-reps (" + std::to_string(o.policy.max_reps) + ") must be at least --reps (" +
             std::to_string(o.policy.reps) + ")");
  return o;
}

/// Forward without autograd, then forward + backward with the gradient inputs requiring grad and a
/// ones gradient per output (`both` stays empty for ops without gradient inputs).
void time_case(const OpCase& c, const TensorList& inputs, const Policy& policy, Stats& fwd, Stats& both,
               bool& any_grad) {
  fwd = time_warm(policy, [&] {
    autograd::NoGradGuard ng;
    c.run(inputs);
  });
  TensorList in = inputs;
  any_grad = false;
  for (int g : c.grad_inputs) {
    in[g] = inputs[g].detach().set_requires_grad(true);
    any_grad = true;
  }
  if (!any_grad) return;
  TensorList grads;
  for (const Tensor& o : c.run(in))
    grads.push_back(o.requires_grad() ? ones(o.sizes(), {o.dtype(), nullptr}) : Tensor());
  both = time_warm(policy, [&] {
    TensorList outs = c.run(in);
    TensorList roots, gs;
    for (std::size_t k = 0; k < outs.size(); ++k)
      if (grads[k].defined()) roots.push_back(outs[k]), gs.push_back(grads[k]);
    autograd::backward(roots, gs);
    for (int g : c.grad_inputs) in[g].set_grad(Tensor());
  });
}

/// One case's JSON object (see the header comment).
std::string case_json(const OpCase& c, const TensorList& inputs, const Stats& fwd, const Stats& both, bool any_grad) {
  std::string shapes = "[";
  for (std::size_t k = 0; k < inputs.size(); ++k) {
    std::ostringstream os;
    if (inputs[k].defined())
      os << "{\"shape\": " << inputs[k].sizes() << ", \"dtype\": \"" << inputs[k].dtype() << "\"}";
    else
      os << "null";
    shapes += os.str() + (k + 1 < inputs.size() ? ", " : "");
  }
  shapes += "]";
  std::ostringstream row;
  row << "  {\"case\": \"" << c.name << "\", \"op\": \"" << op_name(c.op) << "\", \"threads\": " << get_num_threads()
      << ", \"inputs\": " << shapes << ", \"fwd_us\": " << stats_json(fwd)
      << ", \"fwd_bwd_us\": " << (any_grad ? stats_json(both) : std::string("null")) << "}";
  return row.str();
}

}  // namespace

int main(int argc, char** argv) {
  const Options opt = parse(argc, argv);
  const bench::Cli cli("strata-bench-ops", kUsage);
  if (opt.threads > 0) set_num_threads(opt.threads);
  std::vector<const OpCase*> cases;
  for (const OpCase& c : op_cases())
    if (c.bench_inputs &&
        (opt.filter.starts_with('=') ? c.name == opt.filter.substr(1) : c.name.find(opt.filter) != std::string::npos))
      cases.push_back(&c);
  if (opt.list) {
    for (const OpCase* c : cases) std::printf("%s\n", c->name.c_str());
    return 0;
  }
  if (cases.empty()) cli.fail("no benchmark case matches '" + opt.filter + "'");

  const std::string library = ops::dnnl_summary();
  const Policy& p = opt.policy;
  std::printf(
      "Strata op micro-benchmarks — %s, %d threads, warm-up >= %g s, then >= %d calls and >= %g s "
      "(at most %d) (median [min–max] µs)\n",
      library.c_str(), get_num_threads(), p.warmup_s, p.reps, p.min_time_s, p.max_reps);
  std::printf("%-44s %26s %26s %12s\n", "case", "forward", "forward+backward", "first fwd");
  std::string out;
  for (std::size_t ci = 0; ci < cases.size(); ++ci) {
    const OpCase& c = *cases[ci];
    Stats fwd, both;
    bool any_grad = false;
    TensorList inputs;
    try {
      Generator gen(42);
      inputs = c.bench_inputs(gen);
      time_case(c, inputs, p, fwd, both, any_grad);
    } catch (const Error& e) {
      std::fprintf(stderr, "%s: %s\n", c.name.c_str(), e.what());
      return 1;
    }
    char f1[64], f2[64];
    std::snprintf(f1, sizeof f1, "%.1f [%.1f–%.1f]", fwd.median, fwd.min, fwd.max);
    if (any_grad)
      std::snprintf(f2, sizeof f2, "%.1f [%.1f–%.1f]", both.median, both.min, both.max);
    else
      std::snprintf(f2, sizeof f2, "-");
    std::printf("%-44s %26s %26s %12.1f\n", c.name.c_str(), f1, f2, fwd.first);
    std::fflush(stdout);
    out += case_json(c, inputs, fwd, both, any_grad) + (ci + 1 < cases.size() ? ",\n" : "\n");
  }
  if (opt.json.empty()) return 0;
  bench::Json head;
  head.begin_object()
      .kv("binary", "strata-bench-ops")
      .kv("threads", get_num_threads())
      .kv("dtype", "f32")
      .kv("library", library)
      .kv("reps", p.reps)
      .kv("max_reps", p.max_reps)
      .kv("warmup_s", p.warmup_s)
      .kv("min_time_s", p.min_time_s)
      .key("cases");
  // head is the object up to "cases": (still open); the rows are preformatted JSON.
  return bench::write_file_atomically(opt.json, head.str() + "[\n" + out + "]}\n", "strata-bench-ops") ? 0 : 1;
}
