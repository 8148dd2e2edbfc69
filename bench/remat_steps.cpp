// strata-bench-remat: training-step time of ResNet- and VGG-style chains under a fast-memory budget,
// with rematerialization policies and with tape streaming, against the plain step (StoreAll).
//
//   strata-bench-remat [--model resnet|vgg] [--batch B] [--fractions 0.5,0.25,0.125] [--steps N]
//                      [--warmup W] [--seed S] [--threads T] [--json FILE] [--quick]
// (--quick: a small model, 2 steps, fraction 0.5 unless --fractions is given)
//
// Models (as chains of their top-level blocks, nn::RematSequential):
//   resnet: CIFAR ResNet-20 (widths 16/32/64, 3 BasicBlocks per stage), input [B,3,32,32], B 64;
//   vgg:    VGG-style with batch norm, 64,64,M,128,128,M,256,256,M,512,M at 32x32, B 32.
// One step: zero_grad, forward, cross_entropy, backward, SGD(lr 0.01). StoreAll's measured
// fast-tier step peak (remat::measure_fast_peak: bytes above what was live before the step) is the
// reference; each budget is a fraction of it. Per budget and family, the configurations tried:
//   checkpoint: EveryK(k) for every k, SqrtN, Revolve(s) for s = 1..n; the fastest whose measured
//               peak fits the budget is reported (the "best segmentation" at that budget);
//   auto:       the Auto planner (keep / stream / recompute per saved value) at the budget, at op
//               granularity (ResNet blocks planned and run as their ops: Note [Auto graph
//               execution]); auto_step: the same at step granularity (one program point per block);
//   stream:     tape streaming (prefetch distance 1) with tiles of budget/2^j, j = 2..6; the
//               fastest that fits, with the transfer time hidden behind compute (overlap) reported
//               with the slow-tier model off and on (STRATA_SLOW_MODEL is read at start-up: run the
//               binary twice, or see bench/workloads/remat.py).
// Samples are per-step microseconds of the timed steps after --warmup; the peak is measured on a
// separate step. Each configuration's steps alternate with StoreAll steps, and its overhead is the
// median over the pairs of (step / the StoreAll step just before it) ("overhead"; the StoreAll
// samples are "store_all_us", the ratio of the two medians "overhead_of_medians"). After StoreAll
// the forward without autograd is measured: the whole-tensor floor ("forward_floor_bytes"), below
// which no plan that keeps tensors whole can run.

#include <chrono>
#include <cstdio>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "autograd/grad_mode.h"
#include "autograd/remat/chain.h"
#include "autograd/remat/peak.h"
#include "autograd/remat/plan_exec.h"
#include "autograd/tape/stream.h"
#include "bench/bench_common.h"
#include "core/factories.h"
#include "core/rng.h"
#include "core/threading.h"
#include "memory/tiered_memory.h"
#include "models/optim/sgd.h"
#include "models/remat.h"
#include "models/zoo/resnet.h"
#include "models/zoo/vgg.h"
#include "ops/dnnl_info.h"
#include "ops/softmax_loss.h"

using namespace strata;
using Clock = std::chrono::steady_clock;

namespace {

constexpr const char* kUsage =
    "strata-bench-remat [--model resnet|vgg] [--batch B] [--fractions F1,F2,...] [--steps N] [--warmup W] "
    "[--seed S] [--threads T] [--json FILE] [--quick]";

struct Options {
  std::string model = "resnet";
  int64_t batch = 0;  // 0: the model's default
  std::vector<double> fractions = {0.5, 0.25, 0.125};
  int steps = 5, warmup = 1;
  uint64_t seed = 1;
  int threads = 0;
  std::string json;
  bool quick = false;
  bool fractions_given = false;
};

Options parse(int argc, char** argv) {
  bench::Cli cli("strata-bench-remat", kUsage);
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--model") {
      o.model = cli.value(argc, argv, i);
      if (o.model != "resnet" && o.model != "vgg") cli.fail("--model: expected resnet or vgg, got '" + o.model + "'");
    } else if (a == "--batch") {
      o.batch = cli.integer(a, cli.value(argc, argv, i), 1, 1 << 16);
    } else if (a == "--fractions") {
      o.fractions.clear();
      o.fractions_given = true;
      std::string text = cli.value(argc, argv, i);
      std::size_t start = 0;
      while (start <= text.size()) {
        const std::size_t end = text.find(',', start);
        const std::string item = text.substr(start, end == std::string::npos ? std::string::npos : end - start);
        o.fractions.push_back(cli.real(a, item.c_str(), 1e-3, 1.0));
        if (end == std::string::npos) break;
        start = end + 1;
      }
    } else if (a == "--steps") {
      o.steps = static_cast<int>(cli.integer(a, cli.value(argc, argv, i), 1, 100000));
    } else if (a == "--warmup") {
      o.warmup = static_cast<int>(cli.integer(a, cli.value(argc, argv, i), 0, 100000));
    } else if (a == "--seed") {
      o.seed =
          static_cast<uint64_t>(cli.integer(a, cli.value(argc, argv, i), 0, std::numeric_limits<long long>::max()));
    } else if (a == "--threads") {
      o.threads = cli.threads(a, cli.value(argc, argv, i));
    } else if (a == "--json") {
      o.json = cli.value(argc, argv, i);
    } else if (a == "--quick") {
      o.quick = true;
    } else {
      cli.unknown(a);
    }
  }
  if (o.quick) {
    o.steps = 2;
    o.warmup = 0;
    if (!o.fractions_given) o.fractions = {0.5};
  }
  return o;
}

struct Net {
  std::shared_ptr<nn::Module> owner;  // holds the parameters
  std::shared_ptr<nn::RematSequential> chain;
  std::vector<int64_t> input_shape;
  int64_t classes = 10;
  std::string description;
};

Net make_resnet(const Options& o, Generator& gen) {
  nn::zoo::ResNetOptions ro = nn::zoo::cifar_resnet_options(o.quick ? 8 : 20, 10);
  auto net = std::make_shared<nn::zoo::ResNet>(ro, &gen);
  auto chain = std::make_shared<nn::RematSequential>();
  for (const char* name : {"conv1", "bn1", "relu"}) chain->push_back(net->child(name));
  for (const char* stage : {"layer1", "layer2", "layer3"})
    for (auto& block : net->child(stage)->children()) chain->push_back(block);
  chain->push_back(net->child("avgpool"));
  chain->push_back(std::make_shared<nn::Flatten>(1));
  chain->push_back(net->child("fc"));
  const int64_t b = o.batch > 0 ? o.batch : (o.quick ? 8 : 64);
  return {net, chain, {b, 3, 32, 32}, 10, std::string("CIFAR ResNet-") + (o.quick ? "8" : "20")};
}

Net make_vgg(const Options& o, Generator& gen) {
  nn::zoo::VGGOptions vo;
  vo.config =
      o.quick ? std::vector<int64_t>{16, 0, 32, 0} : std::vector<int64_t>{64, 64, 0, 128, 128, 0, 256, 256, 0, 512, 0};
  vo.batch_norm = true;
  vo.num_classes = 10;
  vo.pool_size = 1;
  vo.hidden = o.quick ? 32 : 512;
  vo.dropout = 0.0;
  auto vgg = std::make_shared<nn::zoo::VGG>(vo, &gen);
  auto chain = std::make_shared<nn::RematSequential>();
  for (auto& m : vgg->child("features")->children()) chain->push_back(m);
  chain->push_back(vgg->child("avgpool"));
  chain->push_back(std::make_shared<nn::Flatten>(1));
  for (auto& m : vgg->child("classifier")->children()) chain->push_back(m);
  const int64_t b = o.batch > 0 ? o.batch : (o.quick ? 4 : 32);
  return {vgg, chain, {b, 3, 32, 32}, 10, "VGG-style (BN) 32x32"};
}

/// One configuration: how the step runs.
struct Config {
  std::string family;  // "store_all", "checkpoint", "stream", "auto", "auto_step"
  remat::ChainPolicy policy;
  std::size_t tile_bytes = 0;  // stream: the tile; auto: the budget
  std::string name() const {
    if (family == "stream") return "stream(tile " + std::to_string(tile_bytes >> 10) + " KiB)";
    if (family == "auto") return "Auto(" + std::to_string(tile_bytes >> 10) + " KiB budget)";
    if (family == "auto_step") return "Auto per step(" + std::to_string(tile_bytes >> 10) + " KiB budget)";
    return policy.to_string();
  }
};

struct Measured {
  Config config;
  std::vector<double> step_us;
  std::vector<double> base_us;  // StoreAll steps interleaved with these (the overhead's reference)
  std::size_t peak = 0;
  tape::StreamReport stream;  // last timed step (stream only)
  // Auto only: the plan's program points (ops), its decisions over the values a backward step
  // reads, and the predicted step time over the predicted plain step (the cost model's overhead).
  std::size_t plan_ops = 0;
  int kept = 0, streamed = 0, recomputed = 0, slow = 0;  // slow: every value placed there
  double predicted_overhead = 0.0;
  std::string plan_source;  // "ILP", "greedy" (the ILP timed out), ...
  double solve_s = 0.0;
  double median() const { return bench::summarize(step_us).median; }
  /// Step time over StoreAll's (1 for StoreAll itself): the median of the per-pair ratios, each
  /// step over the StoreAll step run just before it (the two share the same second of a machine
  /// whose speed drifts by 2x and more between minutes; medians of each side taken apart still
  /// mix different minutes).
  double overhead() const {
    if (base_us.empty()) return 1.0;
    std::vector<double> ratios;
    for (std::size_t k = 0; k < step_us.size() && k < base_us.size(); ++k) ratios.push_back(step_us[k] / base_us[k]);
    return bench::summarize(ratios).median;
  }
  /// The ratio of the two sides' medians (reported beside overhead()).
  double overhead_of_medians() const { return base_us.empty() ? 1.0 : median() / bench::summarize(base_us).median; }
};

class Runner {
 public:
  Runner(Net net, const Options& o, Generator& gen)
      : net_(std::move(net)), o_(o), opt_(net_.owner->parameters(), optim::SGDOptions{.lr = 0.01}) {
    x_ = randn(net_.input_shape, {}, &gen);
    y_ = randint(0, net_.classes, {net_.input_shape[0]}, {DType::i64, nullptr}, &gen);
  }

  /// Measures `c`'s peak, then times its steps alternating with StoreAll steps (unless `c` is
  /// StoreAll), so both see the same machine: on a shared 2-core VM the speed drifts by tens of
  /// percent between minutes, and an overhead against a StoreAll timed earlier would measure that.
  Measured run(const Config& c) {
    Measured m{c, {}, {}, 0, {}, 0, 0, 0, 0, 0, 0.0, {}, 0.0};
    const remat::ChainPolicy policy = c.family == "stream" ? remat::ChainPolicy::store_all()
                                      : c.family == "auto" ? remat::ChainPolicy::auto_budget(c.tile_bytes)
                                      : c.family == "auto_step"
                                          ? remat::ChainPolicy::auto_budget(c.tile_bytes, remat::AutoGranularity::Step)
                                          : c.policy;
    const bool interleave = c.family != "store_all";
    const Config base{"store_all", remat::ChainPolicy::store_all(), 0};
    net_.chain->set_policy(policy);
    m.peak = remat::measure_fast_peak([&] { step(c, nullptr); }).step_peak_bytes();
    auto timed = [&](const Config& which, tape::StreamReport* report) {
      const auto t0 = Clock::now();
      step(which, report);
      return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
    };
    for (int s = 0; s < o_.warmup + o_.steps; ++s) {
      double base_us = 0;
      if (interleave) {
        net_.chain->set_policy(remat::ChainPolicy::store_all());
        base_us = timed(base, nullptr);
        net_.chain->set_policy(policy);
      }
      tape::StreamReport report;
      const double us = timed(c, &report);
      if (s >= o_.warmup) {
        m.step_us.push_back(us);
        if (interleave) m.base_us.push_back(base_us);
        m.stream = report;
      }
    }
    if (policy.kind == remat::RematPolicy::Auto && policy.auto_chain->last_plan() != nullptr) {
      const remat::Plan& plan = *policy.auto_chain->last_plan();
      const remat::PlanGraph& g = policy.auto_chain->last_graph()->graph;
      const auto windows = remat::value_windows(g);
      m.plan_ops = g.ops.size();
      for (std::size_t v = 0; v < windows.size(); ++v) {
        m.slow += plan.decisions[v] == remat::Decision::Slow;
        if (windows[v].needs.empty()) continue;
        m.kept += plan.decisions[v] == remat::Decision::Keep;
        m.streamed += plan.decisions[v] == remat::Decision::Stream;
        m.recomputed += plan.decisions[v] == remat::Decision::Recompute;
      }
      m.predicted_overhead = plan.predicted.step_time / plan.predicted.base_time;
      m.plan_source = remat::to_string(plan.source);
      m.solve_s = plan.solve_seconds;
    }
    return m;
  }

  std::size_t chain_length() const { return net_.chain->size(); }

  /// The fast-tier peak of the forward alone without autograd: every op's input and output
  /// at once, nothing saved. A plan that keeps tensors whole runs every forward op at least once
  /// with its input and output in the fast tier, so no budget below this can be met by one.
  std::size_t forward_floor() {
    net_.chain->set_policy(remat::ChainPolicy::store_all());
    return remat::measure_fast_peak([&] {
             autograd::NoGradGuard no_grad;
             (void)net_.chain->forward(x_);
           })
        .step_peak_bytes();
  }

 private:
  void step(const Config& c, tape::StreamReport* report) {
    opt_.zero_grad();
    Tensor loss;
    if (c.family == "stream") {
      tape::StreamOptions so;
      so.tape_budget_bytes = c.tile_bytes;
      so.prefetch_distance = 1;
      std::shared_ptr<tape::TapeStreamer> st;
      {
        tape::StreamingScope scope(so);
        st = scope.streamer();
        loss = cross_entropy(net_.chain->forward(x_), y_);
      }
      loss.backward();
      if (report) *report = st->report();
    } else {
      loss = cross_entropy(net_.chain->forward(x_), y_);
      loss.backward();
    }
    opt_.step();
    (void)loss.item<double>();
  }

  Net net_;
  const Options& o_;
  optim::SGD opt_;
  Tensor x_, y_;
};

void print_row(const char* budget, const Measured& m) {
  std::printf("  %-10s %-28s %10.2f ms  %+6.1f %%  peak %8.2f MiB", budget, m.config.name().c_str(), m.median() / 1e3,
              100.0 * (m.overhead() - 1.0), static_cast<double>(m.peak) / (1 << 20));
  if (m.config.family == "stream")
    std::printf("  overlap %.2f (stall %.1f ms of %.1f ms transfer)", m.stream.overlap(), m.stream.stall_s * 1e3,
                m.stream.transfer_s() * 1e3);
  if (m.plan_ops > 0)
    std::printf("  %zu ops; keep %d, stream %d, recompute %d, slow %d; predicted %+.1f %% (%s, %.2f s)", m.plan_ops,
                m.kept, m.streamed, m.recomputed, m.slow, 100.0 * (m.predicted_overhead - 1.0), m.plan_source.c_str(),
                m.solve_s);
  std::printf("\n");
  std::fflush(stdout);
}

void json_measured(bench::Json& j, const Measured& m) {
  j.begin_object();
  j.kv("family", m.config.family).kv("config", m.config.name()).kv("peak_bytes", static_cast<long long>(m.peak));
  j.timed("step_us", "us", m.step_us);
  if (!m.base_us.empty()) j.timed("store_all_us", "us", m.base_us);
  j.kv("overhead", m.overhead()).kv("overhead_of_medians", m.overhead_of_medians());
  if (m.config.family == "stream") {
    j.kv("tile_bytes", static_cast<long long>(m.config.tile_bytes));
    j.kv("overlap", m.stream.overlap()).kv("stall_s", m.stream.stall_s).kv("transfer_s", m.stream.transfer_s());
    j.kv("bytes_to_slow", static_cast<long long>(m.stream.bytes_to_slow));
    j.kv("bytes_to_fast", static_cast<long long>(m.stream.bytes_to_fast));
    j.kv("forward_stall_s", m.stream.forward_stall_s)
        .kv("values_adopted", static_cast<long long>(m.stream.values_adopted));
  }
  if (m.plan_ops > 0) {
    j.kv("plan_ops", static_cast<long long>(m.plan_ops)).kv("kept", m.kept).kv("streamed", m.streamed);
    j.kv("recomputed", m.recomputed).kv("slow", m.slow).kv("predicted_overhead", m.predicted_overhead);
    j.kv("plan_source", m.plan_source).kv("solve_s", m.solve_s);
  }
  j.end_object();
}

}  // namespace

int main(int argc, char** argv) try {
  const Options o = parse(argc, argv);
  if (o.threads > 0) set_num_threads(o.threads);
  Generator gen(o.seed);
  Net net = o.model == "resnet" ? make_resnet(o, gen) : make_vgg(o, gen);
  const std::string description = net.description;
  const std::vector<int64_t> shape = net.input_shape;
  Runner runner(std::move(net), o, gen);
  const std::string slow_mode = memory::tiered_memory().slow_tier_mode();
  std::printf("strata-bench-remat — %s, batch %lld, chain of %zu steps; %s, %d threads; %s\n", description.c_str(),
              static_cast<long long>(shape[0]), runner.chain_length(), ops::dnnl_summary().c_str(), get_num_threads(),
              slow_mode.c_str());
  std::fflush(stdout);

  const Measured base = runner.run({"store_all", remat::ChainPolicy::store_all(), 0});
  print_row("100 %", base);
  const std::size_t floor = runner.forward_floor();
  std::printf("  whole-tensor floor: the forward without autograd peaks at %.2f MiB = %.1f %% of StoreAll's\n",
              static_cast<double>(floor) / (1 << 20),
              100.0 * static_cast<double>(floor) / static_cast<double>(base.peak));

  // Every checkpoint configuration once (its peak does not depend on the budget).
  const int64_t n = static_cast<int64_t>(runner.chain_length());
  std::vector<Measured> checkpoints;
  std::vector<remat::ChainPolicy> policies = {remat::ChainPolicy::sqrt_n()};
  for (int64_t k = 1; k < n; k = k < 4 ? k + 1 : k * 2) policies.push_back(remat::ChainPolicy::every_k(k));
  for (int64_t s = 1; s <= std::min<int64_t>(n - 1, 6); ++s) policies.push_back(remat::ChainPolicy::revolve(s));
  if (o.quick) policies.resize(2);
  for (const auto& p : policies) checkpoints.push_back(runner.run({"checkpoint", p, 0}));

  bench::Json j;
  j.begin_object();
  j.kv("binary", "strata-bench-remat").kv("threads", get_num_threads()).kv("dtype", "f32");
  j.kv("library", ops::dnnl_summary()).kv("model", o.model).kv("description", description);
  j.kv("batch", static_cast<long long>(shape[0])).kv("slow_tier", slow_mode);
  j.key("store_all");
  json_measured(j, base);
  j.kv("forward_floor_bytes", static_cast<long long>(floor));
  j.key("budgets").begin_array();
  for (double f : o.fractions) {
    const std::size_t budget = static_cast<std::size_t>(f * static_cast<double>(base.peak));
    char label[32];
    std::snprintf(label, sizeof label, "%.1f %%", 100 * f);
    const Measured* best_ckpt = nullptr;
    for (const auto& m : checkpoints)
      if (m.peak <= budget && (!best_ckpt || m.overhead() < best_ckpt->overhead())) best_ckpt = &m;
    std::vector<Measured> streams;
    const Measured* best_stream = nullptr;
    for (int jx = 2; jx <= 6; ++jx) {
      const std::size_t tile = std::max<std::size_t>(budget >> jx, 64 << 10);
      streams.push_back(runner.run({"stream", remat::ChainPolicy::store_all(), tile}));
      if (o.quick) break;
    }
    for (const auto& m : streams)
      if (m.peak <= budget && (!best_stream || m.overhead() < best_stream->overhead())) best_stream = &m;
    // Auto: the planner chooses keep / stream / recompute per saved value under this budget; an
    // infeasible budget is its error naming the minimum.
    std::optional<Measured> automatic, auto_step;
    std::string auto_error, auto_step_error;
    try {
      automatic = runner.run({"auto", remat::ChainPolicy::store_all(), budget});
    } catch (const std::exception& e) {
      auto_error = e.what();
    }
    try {
      auto_step = runner.run({"auto_step", remat::ChainPolicy::store_all(), budget});
    } catch (const std::exception& e) {
      auto_step_error = e.what();
    }
    std::printf(" budget %s of StoreAll's %.2f MiB = %.2f MiB\n", label, static_cast<double>(base.peak) / (1 << 20),
                static_cast<double>(budget) / (1 << 20));
    if (best_ckpt)
      print_row(label, *best_ckpt);
    else
      std::printf("  %-10s checkpoint: no configuration fits\n", label);
    if (best_stream)
      print_row(label, *best_stream);
    else
      std::printf("  %-10s stream: no tile size fits (smallest peak %.2f MiB)\n", label,
                  static_cast<double>(streams.back().peak) / (1 << 20));
    if (automatic)
      print_row(label, *automatic);
    else
      std::printf("  %-10s Auto: %s\n", label, auto_error.substr(0, 200).c_str());
    if (auto_step)
      print_row(label, *auto_step);
    else
      std::printf("  %-10s Auto per step: %s\n", label, auto_step_error.substr(0, 200).c_str());
    j.begin_object();
    j.kv("fraction", f).kv("budget_bytes", static_cast<long long>(budget));
    j.key("auto");
    if (automatic)
      json_measured(j, *automatic);
    else
      j.null();
    if (!automatic) j.kv("auto_error", auto_error);
    j.key("auto_step");
    if (auto_step)
      json_measured(j, *auto_step);
    else
      j.null();
    if (!auto_step) j.kv("auto_step_error", auto_step_error);
    j.key("checkpoint");
    if (best_ckpt)
      json_measured(j, *best_ckpt);
    else
      j.null();
    j.key("stream");
    if (best_stream)
      json_measured(j, *best_stream);
    else
      j.null();
    j.end_object();
  }
  j.end_array();
  j.key("checkpoint_configs").begin_array();
  for (const auto& m : checkpoints) json_measured(j, m);
  j.end_array();
  j.end_object();
  if (!o.json.empty() && !bench::write_file_atomically(o.json, j.str(), "strata-bench-remat")) return 1;
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "strata-bench-remat: %s\n", e.what());
  return 1;
}
