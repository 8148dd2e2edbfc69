// The training loop a PyTorch user writes, against Strata's C++ API: a small CNN built from
// nn modules (Conv2d, BatchNorm2d, ReLU, MaxPool2d, Flatten, Linear in a Sequential), cross-entropy,
// backward, an optim::SGD step with momentum, the loss printed, and a checkpoint saved and loaded back.
// The data: 1x8x8 Gaussian images labelled by which half (left or right) is brighter.
//
//   train_loop [--steps N] [--lr LR] [--checkpoint PATH]
//
// Exits with status 1 if the mean loss of the last 10 steps is not below half the initial one, or if the model loaded
// from the checkpoint does not reproduce the trained model's output and optimizer state.

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "core/factories.h"
#include "models/activation.h"
#include "models/checkpoint.h"
#include "models/container.h"
#include "models/conv.h"
#include "models/linear.h"
#include "models/normalization.h"
#include "models/optim/sgd.h"
#include "models/pooling.h"
#include "ops/operators.h"
#include "ops/reduction.h"
#include "ops/shape_ops.h"
#include "ops/softmax_loss.h"

using namespace strata;

namespace {

std::shared_ptr<nn::Sequential> make_model() {
  using namespace strata::nn;
  return std::make_shared<Sequential>(std::initializer_list<std::shared_ptr<Module>>{
      std::make_shared<Conv2d>(1, 8, 3, 1, 1), std::make_shared<BatchNorm2d>(8), std::make_shared<ReLU>(),
      std::make_shared<MaxPool2d>(2), std::make_shared<Flatten>(), std::make_shared<Linear>(8 * 4 * 4, 2)});
}

/// Labels: 1 when the left half of the image is brighter than the right half.
Tensor half_labels(const Tensor& x) {
  const int64_t n = x.size(0);
  Tensor left = sum(x.narrow(3, 0, 4).reshape({n, -1}), {1});
  Tensor right = sum(x.narrow(3, 4, 4).reshape({n, -1}), {1});
  Tensor labels = empty({n}, {DType::i64, nullptr});
  for (int64_t i = 0; i < n; ++i) labels.select(0, i).fill_(left.at({i}) > right.at({i}) ? 1.0 : 0.0);
  return labels;
}

}  // namespace

int main(int argc, char** argv) {
  int steps = 100;
  double lr = 0.05;
  std::string ckpt_path = "train_loop.ckpt";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--steps")
      steps = std::atoi(argv[i + 1]);
    else if (a == "--lr")
      lr = std::atof(argv[i + 1]);
    else if (a == "--checkpoint")
      ckpt_path = argv[i + 1];
    else {
      std::fprintf(stderr, "usage: train_loop [--steps N] [--lr LR] [--checkpoint PATH]\n");
      return 2;
    }
  }
  if (steps < 1 || lr <= 0) {
    std::fprintf(stderr, "train_loop: --steps must be >= 1 and --lr > 0\n");
    return 2;
  }

  try {
    manual_seed(0);
    auto model = make_model();
    std::printf("%s\n", model->to_string().c_str());
    optim::SGD optimizer(model->parameters(), {.lr = lr, .momentum = 0.9});

    const int64_t batch = 64;
    double first = 0, last = 0, recent = 0;  // recent: mean loss of the last (up to) 10 steps
    for (int step = 0; step < steps; ++step) {
      Tensor x = randn({batch, 1, 8, 8});
      Tensor y = half_labels(x);
      optimizer.zero_grad();
      Tensor loss = cross_entropy(model->forward(x), y);
      loss.backward();
      optimizer.step();
      last = loss.item<double>();
      if (step == 0) first = last;
      if (step >= steps - 10) recent += last / std::min(steps, 10);
      if (step % 10 == 0 || step == steps - 1) std::printf("step %4d  loss %.4f\n", step, last);
    }

    // Save, load into a fresh model, and check both agree in eval mode.
    save_checkpoint(ckpt_path, model->state_dict(), optimizer.state_dict(), {{"steps", std::to_string(steps)}});
    auto restored = make_model();
    Checkpoint ck = load_checkpoint(ckpt_path);
    restored->load_state_dict(ck.model);
    optim::SGD restored_optimizer(restored->parameters(), {.lr = lr, .momentum = 0.9});
    restored_optimizer.load_state_dict(ck.optimizer);
    const StateDict saved_opt = optimizer.state_dict(), loaded_opt = restored_optimizer.state_dict();
    bool same_opt = saved_opt.size() == loaded_opt.size();
    for (std::size_t i = 0; same_opt && i < saved_opt.size(); ++i) {
      Tensor a = saved_opt[i].second.to(DType::f64).reshape({-1}),
             b = loaded_opt[i].second.to(DType::f64).reshape({-1});
      same_opt = saved_opt[i].first == loaded_opt[i].first && a.numel() == b.numel();
      for (int64_t j = 0; same_opt && j < a.numel(); ++j) same_opt = a.at({j}) == b.at({j});
    }
    model->eval();
    restored->eval();
    Tensor probe = randn({4, 1, 8, 8});
    Tensor d = model->forward(probe) - restored->forward(probe);
    const double diff = max(d * d).item<double>();
    std::printf("checkpoint %s (%zu model and %zu optimizer tensors) reloaded; max squared output difference %.3g\n",
                ckpt_path.c_str(), ck.model.size(), ck.optimizer.size(), diff);
    if (diff != 0.0 || !same_opt) {
      std::printf("the reloaded %s differs from the saved one\n", diff != 0.0 ? "model" : "optimizer state");
      return 1;
    }
    if (!(recent < 0.5 * first)) {
      std::printf("loss did not halve: %.4f -> %.4f (mean of the last steps)\n", first, recent);
      return 1;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "train_loop: %s\n", e.what());
    return 1;
  }
  return 0;
}
