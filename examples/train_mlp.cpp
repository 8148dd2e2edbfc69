// Trains a small MLP classifier from C++ on synthetic data and prints the loss falling — the
// README's main job until DLRM lands. The data: 64-dimensional Gaussian inputs labelled by a fixed
// random linear "teacher" (argmax of 10 scores), so a 64-256-256-10 ReLU network can learn it.
//
//   train_mlp [--steps N] [--batch B] [--hidden H] [--lr LR] [--threads T] [--seed S]
//
// Exits with status 1 if the final loss is not below half the initial one.

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "autograd/engine.h"
#include "autograd/tape.h"
#include "core/factories.h"
#include "core/pin_set.h"
#include "core/threading.h"
#include "memory/tiered_memory.h"
#include "ops/dnnl_info.h"
#include "ops/linalg.h"
#include "ops/softmax_loss.h"

using namespace strata;

namespace {

struct Options {
  int steps = 300;
  int64_t batch = 128;
  int64_t hidden = 256;
  double lr = 0.5;
  int threads = 0;
  uint64_t seed = 7;
};

[[noreturn]] void usage(const char* msg) {
  std::fprintf(
      stderr,
      "train_mlp: %s\nusage: train_mlp [--steps N] [--batch B] [--hidden H] [--lr LR] [--threads T] [--seed S]\n", msg);
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (i + 1 >= argc) usage(("missing value for " + a).c_str());
    char* end = nullptr;
    const char* v = argv[++i];
    const double x = std::strtod(v, &end);
    if (end == v || *end != '\0') usage(("not a number: " + a + " " + v).c_str());
    if (a == "--steps" && x >= 1)
      o.steps = static_cast<int>(x);
    else if (a == "--batch" && x >= 1)
      o.batch = static_cast<int64_t>(x);
    else if (a == "--hidden" && x >= 1)
      o.hidden = static_cast<int64_t>(x);
    else if (a == "--lr" && x > 0)
      o.lr = x;
    else if (a == "--threads" && x >= 1)
      o.threads = static_cast<int>(x);
    else if (a == "--seed" && x >= 0)
      o.seed = static_cast<uint64_t>(x);
    else
      usage(("unknown flag or out-of-range value: " + a + " " + v).c_str());
  }
  return o;
}

/// A Linear layer's parameters, initialized like PyTorch's (uniform ±1/sqrt(fan_in)).
struct Layer {
  Tensor weight, bias;
  Layer(int64_t in, int64_t out, Generator& gen) {
    const double bound = 1.0 / std::sqrt(static_cast<double>(in));
    weight = uniform({out, in}, -bound, bound, {}, &gen).set_requires_grad();
    bias = uniform({out}, -bound, bound, {}, &gen).set_requires_grad();
  }
};

/// Plain SGD: p -= lr * p.grad, then clear the gradient (PyTorch's zero_grad(set_to_none=True)).
void sgd_step(std::vector<Tensor*> params, double lr) {
  for (Tensor* p : params) {
    Tensor g = p->grad();
    if (!g.defined()) continue;
    {
      PinSet pins;
      pins.add(*p, AccessMode::Write).add(g, AccessMode::Read);
      pins.acquire();
      float* w = p->data<float>();
      const float* d = g.data<float>();
      const float step = static_cast<float>(lr);
      for (int64_t i = 0; i < p->numel(); ++i) w[i] -= step * d[i];
    }
    p->bump_version();
    p->set_grad(Tensor());
  }
}

/// Labels of the synthetic task: argmax over classes of x · teacher.
Tensor teacher_labels(const Tensor& x, const Tensor& teacher) {
  const int64_t n = x.size(0), d = x.size(1), c = teacher.size(1);
  Tensor labels = empty({n}, {DType::i64, nullptr});
  const float* xp = x.data<float>();
  const float* tp = teacher.data<float>();
  int64_t* lp = labels.data<int64_t>();
  for (int64_t i = 0; i < n; ++i) {
    int64_t best = 0;
    double best_score = -1e300;
    for (int64_t k = 0; k < c; ++k) {
      double s = 0;
      for (int64_t j = 0; j < d; ++j) s += static_cast<double>(xp[i * d + j]) * tp[j * c + k];
      if (s > best_score) best_score = s, best = k;
    }
    lp[i] = best;
  }
  return labels;
}

double accuracy(const Tensor& logits, const Tensor& labels) {
  Tensor l = logits.contiguous();
  const int64_t n = l.size(0), c = l.size(1);
  const float* p = l.data<float>();
  const int64_t* y = labels.contiguous().data<int64_t>();
  int64_t right = 0;
  for (int64_t i = 0; i < n; ++i) {
    int64_t best = 0;
    for (int64_t k = 1; k < c; ++k)
      if (p[i * c + k] > p[i * c + best]) best = k;
    right += best == y[i];
  }
  return static_cast<double>(right) / static_cast<double>(n);
}

}  // namespace

int main(int argc, char** argv) {
  const Options opt = parse(argc, argv);
  if (opt.threads > 0) set_num_threads(opt.threads);
  try {
    std::cout << "Strata: training a " << 64 << "-" << opt.hidden << "-" << opt.hidden << "-10 MLP from C++ ("
              << ops::dnnl_summary() << ", " << get_num_threads() << " threads, allocator '"
              << default_allocator().name() << "')\n";
    Generator gen(opt.seed);
    const int64_t n = 16384, in = 64, classes = 10;
    Tensor x_all = randn({n, in}, {}, &gen);
    Tensor y_all = teacher_labels(x_all, randn({in, classes}, {}, &gen));

    Layer l1(in, opt.hidden, gen), l2(opt.hidden, opt.hidden, gen), l3(opt.hidden, classes, gen);
    std::vector<Tensor*> params = {&l1.weight, &l1.bias, &l2.weight, &l2.bias, &l3.weight, &l3.bias};
    auto forward = [&](const Tensor& x) {
      Tensor h = linear(x, l1.weight, l1.bias, Activation::ReLU);
      h = linear(h, l2.weight, l2.bias, Activation::ReLU);
      return linear(h, l3.weight, l3.bias);
    };

    double first_loss = 0, last_loss = 0, window = 0;
    int in_window = 0;
    const auto t0 = std::chrono::steady_clock::now();
    for (int step = 0; step < opt.steps; ++step) {
      const int64_t start = (step * opt.batch) % (n - opt.batch + 1);
      Tensor xb = x_all.narrow(0, start, opt.batch);
      Tensor yb = y_all.narrow(0, start, opt.batch);
      Tensor logits = forward(xb);
      Tensor loss = cross_entropy(logits, yb);
      if (step == 0) {
        std::cout << "\nWhat the first step keeps for backward (autograd::format_saved_residuals):\n"
                  << autograd::format_saved_residuals({loss}) << "\n";
      }
      loss.backward();
      sgd_step(params, opt.lr);
      const double l = loss.item<double>();
      if (step == 0) first_loss = l;
      window += l;
      ++in_window;
      if ((step + 1) % 25 == 0 || step + 1 == opt.steps) {
        const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        std::printf("step %4d/%d  loss %.4f  batch accuracy %5.1f%%  %.0f steps/s\n", step + 1, opt.steps,
                    window / in_window, 100.0 * accuracy(logits, yb), (step + 1) / secs);
        std::fflush(stdout);
        last_loss = window / in_window;
        window = 0;
        in_window = 0;
      }
    }
    Tensor eval_logits;
    {
      autograd::NoGradGuard no_grad;
      eval_logits = forward(x_all.narrow(0, 0, 4096));
    }
    std::printf("\nloss %.4f → %.4f; accuracy on 4096 training samples %.1f%%\n", first_loss, last_loss,
                100.0 * accuracy(eval_logits, y_all.narrow(0, 0, 4096)));
    if (default_allocator().name() == "tiered") {
      const auto s = memory::tiered_memory().manager().stats().snapshot();
      std::printf("memory: fast-tier peak %.1f MiB, slow-tier peak %.1f MiB (%s)\n", s.fast.peak_bytes / 1048576.0,
                  s.slow.peak_bytes / 1048576.0, memory::tiered_memory().slow_tier_mode().c_str());
    }
    if (!(last_loss < 0.5 * first_loss)) {
      std::fprintf(stderr, "train_mlp: the loss did not fall below half its initial value\n");
      return 1;
    }
  } catch (const Error& e) {
    std::fprintf(stderr, "train_mlp: %s\n", e.what());
    return 1;
  }
  return 0;
}
