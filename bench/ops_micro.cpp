// Op micro-benchmarks: runs every op harness case that declares bench_inputs (f32, training sizes)
// and reports forward and forward+backward times. The benchmark-harness issue runs the same work
// on PyTorch side by side; this binary is Strata's half.
//
//   strata-bench-ops [--filter SUBSTR|=NAME] [--reps N] [--threads T] [--json FILE] [--list] [--quick]
//
// Each figure is the median of N timed repetitions after 2 warm-up runs, with min and max.
// --quick (a smoke run for tests): 2 repetitions unless --reps is given.
// JSON: {"binary", "threads", "dtype", "library", "reps", "cases": [{"case", "op", "threads",
// "inputs", "fwd_us", "fwd_bwd_us"}]}, each time an object {"median", "min", "max", "samples"} in µs
// (fwd_bwd_us is null for ops without gradient inputs).

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
};

Stats summarize(const std::vector<double>& t) {
  const bench::Summary s = bench::summarize(t);
  return {s.median, s.min, s.max, t};
}

template <typename Fn>
Stats time_it(int reps, Fn&& fn) {
  fn();
  fn();
  std::vector<double> times;
  for (int i = 0; i < reps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    times.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
  }
  return summarize(times);
}

/// {"median": .., "min": .., "max": .., "samples": [..]} in microseconds.
std::string stats_json(const Stats& s) {
  bench::Json j;
  j.begin_object().kv("median", s.median).kv("min", s.min).kv("max", s.max).key("samples").begin_array();
  for (double x : s.samples) j.value(x);
  j.end_array().end_object();
  std::string text = j.str();
  if (!text.empty() && text.back() == '\n') text.pop_back();
  return text;
}

[[noreturn]] void usage(const char* msg) {
  std::fprintf(stderr, "strata-bench-ops: %s\nusage: strata-bench-ops [--filter SUBSTR] [--reps N] [--threads T] [--json FILE] [--list] [--quick]\n", msg);
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  std::string filter, json;
  int reps = 20, threads = 0;
  bool list = false, quick = false, reps_set = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage(("missing value for " + a).c_str());
      return argv[++i];
    };
    if (a == "--filter") filter = value();
    else if (a == "--json") json = value();
    else if (a == "--list") list = true;
    else if (a == "--quick") quick = true;
    else if (a == "--threads") {
      try {
        threads = parse_num_threads(value(), a);  // Note [One thread count bound]
      } catch (const Error& e) {
        usage(e.what());
      }
    } else if (a == "--reps") {
      const std::string v = value();
      char* end = nullptr;
      const long n = std::strtol(v.c_str(), &end, 10);
      if (end == v.c_str() || *end != '\0' || n < 1) usage(("expected a positive integer for " + a + ", got " + v).c_str());
      reps = static_cast<int>(n);
      reps_set = true;
    } else usage(("unknown flag " + a).c_str());
  }
  if (threads > 0) set_num_threads(threads);
  if (quick && !reps_set) reps = 2;

  std::vector<const OpCase*> cases;
  for (const OpCase& c : op_cases())
    if (c.bench_inputs && (filter.starts_with('=') ? c.name == filter.substr(1) : c.name.find(filter) != std::string::npos))
      cases.push_back(&c);
  if (list) {
    for (const OpCase* c : cases) std::printf("%s\n", c->name.c_str());
    return 0;
  }
  if (cases.empty()) usage(("no benchmark case matches '" + filter + "'").c_str());

  const std::string library = ops::dnnl_summary();
  std::printf("Strata op micro-benchmarks — %s, %d threads, %d reps (median [min–max] µs)\n",
              library.c_str(), get_num_threads(), reps);
  std::printf("%-44s %26s %26s\n", "case", "forward", "forward+backward");
  std::string out;
  for (std::size_t ci = 0; ci < cases.size(); ++ci) {
    const OpCase& c = *cases[ci];
    try {
      Generator gen(42);
      TensorList inputs = c.bench_inputs(gen);
      Stats fwd = time_it(reps, [&] {
        autograd::NoGradGuard ng;
        c.run(inputs);
      });
      // Forward + backward with gradient inputs requiring grad and a ones gradient per output.
      TensorList in = inputs;
      bool any_grad = false;
      for (int g : c.grad_inputs) {
        in[g] = inputs[g].detach().set_requires_grad(true);
        any_grad = true;
      }
      Stats both{};
      if (any_grad) {
        TensorList probe = c.run(in);
        TensorList grads;
        TensorList roots_proto;
        for (const Tensor& o : probe) grads.push_back(o.requires_grad() ? ones(o.sizes(), {o.dtype(), nullptr}) : Tensor());
        both = time_it(reps, [&] {
          TensorList outs = c.run(in);
          TensorList roots, gs;
          for (std::size_t k = 0; k < outs.size(); ++k)
            if (grads[k].defined()) roots.push_back(outs[k]), gs.push_back(grads[k]);
          autograd::backward(roots, gs);
          for (int g : c.grad_inputs) in[g].set_grad(Tensor());
        });
      }
      char f1[64], f2[64];
      std::snprintf(f1, sizeof f1, "%.1f [%.1f–%.1f]", fwd.median, fwd.min, fwd.max);
      if (any_grad) std::snprintf(f2, sizeof f2, "%.1f [%.1f–%.1f]", both.median, both.min, both.max);
      else std::snprintf(f2, sizeof f2, "-");
      std::printf("%-44s %26s %26s\n", c.name.c_str(), f1, f2);
      std::fflush(stdout);
      std::string shapes = "[";
      for (std::size_t k = 0; k < inputs.size(); ++k) {
        std::ostringstream os;
        if (inputs[k].defined()) os << "{\"shape\": " << inputs[k].sizes() << ", \"dtype\": \"" << inputs[k].dtype() << "\"}";
        else os << "null";
        shapes += os.str() + (k + 1 < inputs.size() ? ", " : "");
      }
      shapes += "]";
      std::ostringstream row;
      row.setf(std::ios::fixed);
      row.precision(3);
      row << "  {\"case\": \"" << c.name << "\", \"op\": \"" << op_name(c.op) << "\", \"threads\": " << get_num_threads()
          << ", \"inputs\": " << shapes << ", \"fwd_us\": " << stats_json(fwd) << ", \"fwd_bwd_us\": ";
      if (any_grad)
        row << stats_json(both) << "}";
      else
        row << "null}";
      out += row.str();
      out += ci + 1 < cases.size() ? ",\n" : "\n";
    } catch (const Error& e) {
      std::fprintf(stderr, "%s: %s\n", c.name.c_str(), e.what());
      return 1;
    }
  }
  if (!json.empty()) {
    // {"binary", "threads", "dtype", "library", "reps", "cases": [one object per case]}
    bench::Json head;
    head.begin_object()
        .kv("binary", "strata-bench-ops")
        .kv("threads", get_num_threads())
        .kv("dtype", "f32")
        .kv("library", library)
        .kv("reps", reps)
        .key("cases");
    const std::string text = head.str() + "[\n" + out + "]}\n";
    if (!bench::write_file_atomically(json, text, "strata-bench-ops")) return 1;
  }
  return 0;
}
