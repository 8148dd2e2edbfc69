// strata-bench-train: the time of one training step of two small models built from Strata ops.
// The PyTorch peer (bench/workloads) runs the same computation; keep the two in step.
//
//   strata-bench-train [--model mlp|cnn] [--arch 1024-1024-1024-10] [--widths 16,32,64] [--blocks N]
//                      [--batch B] [--lr LR] [--steps N] [--warmup W] [--seed S] [--threads T]
//                      [--json FILE] [--quick]
//
// mlp: Linear(a0,a1)+ReLU, ..., Linear(a[n-2], a[n-1]) (no activation on the last) for
//      --arch a0-a1-...; input x ~ N(0,1) [B, a0], labels uniform in [0, a[n-1]). Default B 256.
// cnn: a CIFAR ResNet (ResNet-8 with the defaults): x ~ N(0,1) [B,3,32,32], labels in [0,10);
//      stem conv3x3(3->w0, pad 1, no bias)-BN-ReLU; per width w_k, --blocks BasicBlocks (the first
//      of stage k>0 has stride 2); BasicBlock(in,out,stride) = conv3x3(in,out,stride)-BN-ReLU-
//      conv3x3(out,out,1)-BN plus the shortcut (identity, or conv1x1(in,out,stride)-BN when the
//      shape changes), add, ReLU; then adaptive_avg_pool2d to 1x1, flatten, Linear(w_last, 10).
//      BN in training mode (eps 1e-5, momentum 0.1, weight 1, bias 0, running stats updated).
//      Default B 64.
// Initialization like PyTorch's defaults: Linear and Conv2d weights (and Linear biases)
// U(-1/sqrt(fan_in), 1/sqrt(fan_in)) (kaiming_uniform with a = sqrt(5)).
//
// One step, as a user writes it: grads set to none, forward, cross_entropy (mean), backward, plain
// SGD p -= lr * grad in place on the parameter data, reading the loss value. --warmup steps, then
// --steps timed steps; samples are per-step microseconds. flops_per_step is 3x the forward FLOPs of
// the linear and conv layers (2 per multiply-add).

#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "bench/bench_common.h"
#include "core/allocator.h"
#include "core/factories.h"
#include "core/pin_set.h"
#include "core/rng.h"
#include "core/threading.h"
#include "ops/binary.h"
#include "ops/conv.h"
#include "ops/dnnl_info.h"
#include "ops/linalg.h"
#include "ops/normalization.h"
#include "ops/pooling.h"
#include "ops/shape_ops.h"
#include "ops/softmax_loss.h"
#include "ops/unary.h"

using namespace strata;

namespace {

using Clock = std::chrono::steady_clock;

constexpr const char* kProg = "strata-bench-train";
constexpr const char* kUsage =
    "strata-bench-train [--model mlp|cnn] [--arch 1024-1024-1024-10] [--widths 16,32,64] [--blocks N] "
    "[--batch B] [--lr LR] [--steps N] [--warmup W] [--seed S] [--threads T] [--json FILE] [--quick]";

struct Options {
  std::string model = "mlp";
  std::vector<int64_t> arch = {1024, 1024, 1024, 10};
  std::vector<int64_t> widths = {16, 32, 64};
  int64_t blocks = 1;
  int64_t batch = 0;  // 0: the model's default
  double lr = 0.01;
  int steps = 20, warmup = 3;
  uint64_t seed = 0;
  int threads = 0;
  std::string json;
  bool quick = false;
};

std::vector<int64_t> parse_list(const bench::Cli& cli, const std::string& flag, const std::string& v, char sep,
                                std::size_t min_len) {
  std::vector<int64_t> out;
  std::stringstream ss(v);
  std::string item;
  while (std::getline(ss, item, sep)) out.push_back(cli.integer(flag, item.c_str(), 1, 1 << 20));
  if (out.size() < min_len || (!v.empty() && v.back() == sep))
    cli.fail(flag + ": expected at least " + std::to_string(min_len) + " positive integers separated by '" +
             std::string(1, sep) + "', got '" + v + "'");
  return out;
}

Options parse(int argc, char** argv) {
  const bench::Cli cli(kProg, kUsage);
  Options o;
  bool steps_set = false, warmup_set = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--quick") {
      o.quick = true;
    } else if (a == "--model") {
      o.model = cli.value(argc, argv, i);
      if (o.model != "mlp" && o.model != "cnn") cli.fail("--model: expected mlp or cnn, got '" + o.model + "'");
    } else if (a == "--arch") {
      o.arch = parse_list(cli, a, cli.value(argc, argv, i), '-', 2);
    } else if (a == "--widths") {
      o.widths = parse_list(cli, a, cli.value(argc, argv, i), ',', 1);
    } else if (a == "--blocks") {
      o.blocks = cli.integer(a, cli.value(argc, argv, i), 1, 64);
    } else if (a == "--batch") {
      o.batch = cli.integer(a, cli.value(argc, argv, i), 2, 1 << 20);
    } else if (a == "--lr") {
      o.lr = cli.real(a, cli.value(argc, argv, i), 0, 1e6);
    } else if (a == "--steps") {
      o.steps = static_cast<int>(cli.integer(a, cli.value(argc, argv, i), 1, 1000000)), steps_set = true;
    } else if (a == "--warmup") {
      o.warmup = static_cast<int>(cli.integer(a, cli.value(argc, argv, i), 0, 1000000)), warmup_set = true;
    } else if (a == "--seed") {
      o.seed = static_cast<uint64_t>(cli.integer(a, cli.value(argc, argv, i), 0, (1LL << 62)));
    } else if (a == "--threads") {
      o.threads = cli.threads(a, cli.value(argc, argv, i));
    } else if (a == "--json") {
      o.json = cli.value(argc, argv, i);
    } else {
      cli.unknown(a);
    }
  }
  if (o.batch == 0) o.batch = o.model == "mlp" ? 256 : 64;
  if (o.quick) {
    if (!steps_set) o.steps = 2;
    if (!warmup_set) o.warmup = 1;
  }
  return o;
}

/// PyTorch's default init of Linear and Conv2d: U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
Tensor init_uniform(IntArrayRef sizes, int64_t fan_in, Generator& gen) {
  const double bound = 1.0 / std::sqrt(static_cast<double>(fan_in));
  return uniform(sizes, -bound, bound, {}, &gen).set_requires_grad();
}

struct Model {
  std::vector<Tensor> params;  // leaves that get gradients
  std::function<Tensor(const Tensor&)> forward;
  double forward_flops = 0;  // linear and conv layers, 2 per multiply-add
  int64_t classes = 0;
  std::vector<int64_t> input_shape;
};

Model make_mlp(const Options& o, Generator& gen) {
  struct Linear {
    Tensor weight, bias;
  };
  auto layers = std::make_shared<std::vector<Linear>>();
  Model m;
  for (std::size_t k = 0; k + 1 < o.arch.size(); ++k) {
    const int64_t in = o.arch[k], out = o.arch[k + 1];
    Linear l{init_uniform({out, in}, in, gen), init_uniform({out}, in, gen)};
    m.params.push_back(l.weight);
    m.params.push_back(l.bias);
    layers->push_back(l);
    m.forward_flops += 2.0 * static_cast<double>(o.batch) * static_cast<double>(in) * static_cast<double>(out);
  }
  m.forward = [layers](const Tensor& x) {
    Tensor h = x;
    for (std::size_t k = 0; k < layers->size(); ++k) {
      const bool last = k + 1 == layers->size();
      h = linear(h, (*layers)[k].weight, (*layers)[k].bias, last ? Activation::None : Activation::ReLU);
    }
    return h;
  };
  m.classes = o.arch.back();
  m.input_shape = {o.batch, o.arch.front()};
  return m;
}

/// conv (no bias) followed by BatchNorm2d in training mode.
struct ConvBN {
  Tensor weight, bn_weight, bn_bias, running_mean, running_var;
  int64_t stride = 1, padding = 0;
  Tensor operator()(const Tensor& x) const {
    Tensor y = conv2d(x, weight, Tensor(), {stride, stride}, {padding, padding});
    return batch_norm(y, running_mean, running_var, bn_weight, bn_bias, /*training=*/true, 0.1, 1e-5);
  }
};

struct CnnBuilder {
  const Options& o;
  Generator& gen;
  Model& m;
  int64_t h = 32, w = 32;  // spatial size of the current activation

  ConvBN conv_bn(int64_t in, int64_t out, int64_t k, int64_t stride) {
    ConvBN c;
    c.stride = stride;
    c.padding = k / 2;
    c.weight = init_uniform({out, in, k, k}, in * k * k, gen);
    c.bn_weight = ones({out}).set_requires_grad();
    c.bn_bias = zeros({out}).set_requires_grad();
    c.running_mean = zeros({out});
    c.running_var = ones({out});
    m.params.insert(m.params.end(), {c.weight, c.bn_weight, c.bn_bias});
    const int64_t oh = (h + 2 * c.padding - k) / stride + 1, ow = (w + 2 * c.padding - k) / stride + 1;
    m.forward_flops += 2.0 * static_cast<double>(o.batch * oh * ow * out) * static_cast<double>(in * k * k);
    return c;
  }
  void advance(int64_t stride) {  // the spatial size after a conv3x3 (pad 1) with this stride
    h = (h + 2 - 3) / stride + 1;
    w = (w + 2 - 3) / stride + 1;
  }
};

Model make_cnn(const Options& o, Generator& gen) {
  struct Block {
    ConvBN c1, c2;
    bool has_shortcut = false;
    ConvBN shortcut;
  };
  struct Net {
    ConvBN stem;
    std::vector<Block> blocks;
    Tensor fc_weight, fc_bias;
  };
  auto net = std::make_shared<Net>();
  Model m;
  CnnBuilder b{o, gen, m};
  net->stem = b.conv_bn(3, o.widths[0], 3, 1);
  b.advance(1);
  int64_t in = o.widths[0];
  for (std::size_t k = 0; k < o.widths.size(); ++k) {
    for (int64_t j = 0; j < o.blocks; ++j) {
      const int64_t out = o.widths[k], stride = (k > 0 && j == 0) ? 2 : 1;
      Block blk;
      blk.c1 = b.conv_bn(in, out, 3, stride);
      if (stride != 1 || in != out) {  // the shortcut sees the block's input size
        blk.has_shortcut = true;
        blk.shortcut = b.conv_bn(in, out, 1, stride);
      }
      b.advance(stride);
      blk.c2 = b.conv_bn(out, out, 3, 1);
      net->blocks.push_back(blk);
      in = out;
    }
  }
  const int64_t classes = 10;
  net->fc_weight = init_uniform({classes, in}, in, gen);
  net->fc_bias = init_uniform({classes}, in, gen);
  m.params.push_back(net->fc_weight);
  m.params.push_back(net->fc_bias);
  m.forward_flops += 2.0 * static_cast<double>(o.batch * in * classes);
  m.forward = [net](const Tensor& x) {
    Tensor h = relu(net->stem(x));
    for (const Block& blk : net->blocks) {
      Tensor y = relu(blk.c1(h));
      y = blk.c2(y);
      h = relu(add(y, blk.has_shortcut ? blk.shortcut(h) : h));
    }
    h = flatten(adaptive_avg_pool2d(h, {1}), 1);
    return linear(h, net->fc_weight, net->fc_bias);
  };
  m.classes = classes;
  m.input_shape = {o.batch, 3, 32, 32};
  return m;
}

/// PyTorch's optimizer.zero_grad(set_to_none=True).
void zero_grad(std::vector<Tensor>& params) {
  for (Tensor& p : params) p.set_grad(Tensor());
}

/// Plain SGD, p -= lr * p.grad, in place on the parameter data (not recorded by autograd).
void sgd_step(std::vector<Tensor>& params, double lr) {
  const float step = static_cast<float>(lr);
  for (Tensor& p : params) {
    Tensor g = p.grad();
    if (!g.defined()) continue;
    if (!g.is_contiguous()) g = g.contiguous();
    {
      PinSet pins;
      pins.add(p, AccessMode::Write).add(g, AccessMode::Read);
      pins.acquire();
      float* w = p.data<float>();
      const float* d = g.data<float>();
      parallel_for(p.numel(), 1 << 15, [&](int64_t lo, int64_t hi) {
        for (int64_t i = lo; i < hi; ++i) w[i] -= step * d[i];
      });
    }
    p.bump_version();
  }
}

std::string join(const std::vector<int64_t>& v, const char* sep) {
  std::string s;
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? sep : "") + std::to_string(v[i]);
  return s;
}

}  // namespace

int main(int argc, char** argv) try {
  const Options o = parse(argc, argv);
  if (o.threads > 0) set_num_threads(o.threads);
  const int threads = get_num_threads();
  const std::string library = ops::dnnl_summary();

  Generator gen(o.seed);
  Model model = o.model == "mlp" ? make_mlp(o, gen) : make_cnn(o, gen);
  const Tensor x = randn(model.input_shape, {}, &gen);
  const Tensor y = randint(0, model.classes, {o.batch}, {DType::i64, nullptr}, &gen);
  int64_t num_params = 0;
  for (const Tensor& p : model.params) num_params += p.numel();
  const std::string spec = o.model == "mlp"
                               ? "mlp " + join(o.arch, "-")
                               : "cnn widths " + join(o.widths, ",") + " blocks " + std::to_string(o.blocks);
  std::printf("strata-bench-train — %s, batch %lld, lr %g; %lld parameters; %s, %d threads, allocator '%s'\n",
              spec.c_str(), static_cast<long long>(o.batch), o.lr, static_cast<long long>(num_params), library.c_str(),
              threads, std::string(default_allocator().name()).c_str());
  std::fflush(stdout);

  // One training step as a user writes it.
  auto step = [&]() -> double {
    zero_grad(model.params);
    Tensor logits = model.forward(x);
    Tensor loss = cross_entropy(logits, y);
    loss.backward();
    sgd_step(model.params, o.lr);
    return loss.item<double>();
  };

  double loss_first = 0, loss_last = 0;
  std::vector<double> step_us;
  for (int s = 0; s < o.warmup + o.steps; ++s) {
    const auto t0 = Clock::now();
    const double loss = step();
    const double us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
    if (s == 0) loss_first = loss;
    loss_last = loss;
    if (s >= o.warmup) step_us.push_back(us);
    if (s < o.warmup || (s - o.warmup) % 10 == 0 || s + 1 == o.warmup + o.steps) {
      std::printf("step %4d/%d%s  loss %.4f  %.0f µs\n", s + 1, o.warmup + o.steps, s < o.warmup ? " (warm-up)" : "",
                  loss, us);
      std::fflush(stdout);
    }
  }
  const bench::Summary st = bench::summarize(step_us);
  const double flops = 3.0 * model.forward_flops;
  std::printf(
      "step time median %.0f µs [%.0f, %.0f] over %d steps; %.3f GFLOP/step, %.1f GFLOP/s at the median; "
      "loss %.4f -> %.4f\n",
      st.median, st.min, st.max, o.steps, flops * 1e-9, flops / (st.median * 1e-6) * 1e-9, loss_first, loss_last);

  if (!o.json.empty()) {
    bench::Json j;
    j.begin_object();
    j.kv("binary", kProg).kv("threads", threads).kv("dtype", "f32").kv("library", library);
    j.kv("allocator", std::string(default_allocator().name()));
    j.kv("model", o.model);
    j.key("params").begin_object();
    j.kv("model", o.model);
    if (o.model == "mlp") {
      j.key("arch").begin_array();
      for (int64_t a : o.arch) j.value(static_cast<long long>(a));
      j.end_array();
    } else {
      j.key("widths").begin_array();
      for (int64_t a : o.widths) j.value(static_cast<long long>(a));
      j.end_array();
      j.kv("blocks", static_cast<long long>(o.blocks));
    }
    j.key("input_shape").begin_array();
    for (int64_t a : model.input_shape) j.value(static_cast<long long>(a));
    j.end_array();
    j.kv("classes", static_cast<long long>(model.classes));
    j.kv("batch", static_cast<long long>(o.batch)).kv("lr", o.lr).kv("steps", o.steps).kv("warmup", o.warmup);
    j.kv("seed", static_cast<long long>(o.seed)).kv("num_parameters", static_cast<long long>(num_params));
    j.end_object();
    j.timed("step_us", "us", step_us);
    j.kv("flops_per_step", flops);
    j.kv("gflops_at_median", flops / (st.median * 1e-6) * 1e-9);
    j.kv("loss_first", loss_first).kv("loss_last", loss_last);
    j.end_object();
    if (!bench::write_file_atomically(o.json, j.str(), kProg)) return 1;
  }
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "%s: %s\n", kProg, e.what());
  return 1;
}
