// strata-bench-gpt: the zoo's GPT (models/zoo/gpt.h) and its fused attention, timed. The PyTorch
// peer (bench/peers/torch_gpt.py) runs the same computations; keep the two in step.
//
//   strata-bench-gpt [--what sdpa|step|remat|all] [--layers 6] [--width 384] [--heads 6]
//                    [--context 256] [--batch 8] [--vocab 65] [--lr 0.01] [--fractions 0.25,0.125]
//                    [--ffn-chunks K] [--steps N] [--warmup W] [--seed S] [--threads T] [--json FILE] [--quick]
//
// sdpa:  q, k, v, dout ~ N(0, 1) [batch, heads, context, width / heads]; one sample =
//        scaled_dot_product_attention(q, k, v, is_causal) and its backward for dout (q, k, v
//        require grad), microseconds.
// step:  one training step as a user writes it: gradients set to none, loss = the mean
//        cross-entropy of GPT(x) against y (x, y uniform tokens [batch, context]), backward, SGD
//        (torch.optim.SGD's update, lr --lr), reading the loss. GPT: nanoGPT's "baby" model by
//        default (6 layers, width 384, 6 heads, context 256, vocab 65 characters), dropout 0.
// remat: the same step with the model from its embedded input to the logits (the blocks, a
//        flatten, the final norm and the head: a RematSequential) under StoreAll and under Auto
//        at each fraction f of StoreAll's measured step peak (gradients allocated before the step,
//        so the peak is activations; Note [Auto chain execution]). Auto's budget is f · peak less
//        the bytes the step holds outside the chain (its input and the input's gradient), so the
//        whole step's measured peak is what must fit f · peak. Per fraction: the measured peak,
//        the plan's prediction, whether the gradients equal StoreAll's bit for bit, and the
//        overhead, the median over the timed steps of each Auto step's time over the StoreAll step
//        run just before it. --ffn-chunks K (default 1) runs each block's MLP on K slices of the
//        tokens (Note [Feed-forward in row chunks] in models/attention.cpp), in every item; in
//        remat, K > 1 keeps the model as PyTorch has it (K = 1, the same weights) as the reference:
//        the fractions are of its StoreAll peak and the overhead is over its StoreAll step, while
//        "bitwise" compares Auto's gradients with StoreAll's of the chunked model (the same
//        function, but the GEMMs sum over a slice's rows instead of all).

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "autograd/remat/peak.h"
#include "autograd/remat/plan_exec.h"
#include "bench/bench_common.h"
#include "core/allocator.h"
#include "core/factories.h"
#include "core/pin_set.h"
#include "core/rng.h"
#include "core/threading.h"
#include "models/container.h"
#include "models/optim/sgd.h"
#include "models/remat.h"
#include "models/zoo/gpt.h"
#include "ops/attention.h"
#include "ops/binary.h"
#include "ops/dnnl_info.h"
#include "ops/embedding.h"
#include "ops/softmax_loss.h"

using namespace strata;

namespace {

using Clock = std::chrono::steady_clock;

constexpr const char* kProg = "strata-bench-gpt";
constexpr const char* kUsage =
    "strata-bench-gpt [--what sdpa|step|remat|all] [--layers L] [--width E] [--heads H] [--context T] [--batch B] "
    "[--vocab V] [--lr LR] [--fractions F,F] [--ffn-chunks K] [--steps N] [--warmup W] [--seed S] [--threads T] "
    "[--json FILE] "
    "[--quick]";

/// Warm-up before timing: at least this long (--quick: a tenth), whatever --warmup says
/// (torch_gpt.py does the same), so that neither side is timed on its first calls.
constexpr double kMinWarmSeconds = 2.0;
double min_warm_seconds = kMinWarmSeconds;

struct Options {
  std::string what = "all";
  int64_t layers = 6, width = 384, heads = 6, context = 256, batch = 8, vocab = 65, ffn_chunks = 1;
  double lr = 0.01;
  std::vector<double> fractions = {0.25, 0.125};
  int steps = 10, warmup = 3;
  long long seed = 0;
  int threads = 0;
  std::string json;
  bool quick = false;
};

std::vector<double> parse_fractions(const bench::Cli& cli, const char* v) {
  std::vector<double> out;
  std::stringstream ss(v);
  std::string item;
  while (std::getline(ss, item, ',')) out.push_back(cli.real("--fractions", item.c_str(), 1e-3, 1.0));
  if (out.empty()) cli.fail(std::string("--fractions: expected numbers in (0, 1], got '") + v + "'");
  return out;
}

Options parse(int argc, char** argv) {
  const bench::Cli cli(kProg, kUsage);
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--quick")
      o.quick = true;
    else if (a == "--what") {
      o.what = cli.value(argc, argv, i);
      if (o.what != "sdpa" && o.what != "step" && o.what != "remat" && o.what != "all")
        cli.fail("--what: expected sdpa, step, remat or all, got '" + o.what + "'");
    } else if (a == "--layers")
      o.layers = cli.integer(a, cli.value(argc, argv, i), 1, 1000);
    else if (a == "--width")
      o.width = cli.integer(a, cli.value(argc, argv, i), 1, 1 << 16);
    else if (a == "--heads")
      o.heads = cli.integer(a, cli.value(argc, argv, i), 1, 1024);
    else if (a == "--context")
      o.context = cli.integer(a, cli.value(argc, argv, i), 1, 1 << 16);
    else if (a == "--batch")
      o.batch = cli.integer(a, cli.value(argc, argv, i), 1, 1 << 16);
    else if (a == "--vocab")
      o.vocab = cli.integer(a, cli.value(argc, argv, i), 1, 1 << 20);
    else if (a == "--ffn-chunks")
      o.ffn_chunks = cli.integer(a, cli.value(argc, argv, i), 1, 1 << 16);
    else if (a == "--lr")
      o.lr = cli.real(a, cli.value(argc, argv, i), 0.0, 1e3);
    else if (a == "--fractions")
      o.fractions = parse_fractions(cli, cli.value(argc, argv, i));
    else if (a == "--steps")
      o.steps = static_cast<int>(cli.integer(a, cli.value(argc, argv, i), 1, 100000));
    else if (a == "--warmup")
      o.warmup = static_cast<int>(cli.integer(a, cli.value(argc, argv, i), 0, 100000));
    else if (a == "--seed")
      o.seed = cli.integer(a, cli.value(argc, argv, i), 0, 1LL << 62);
    else if (a == "--threads")
      o.threads = cli.threads(a, cli.value(argc, argv, i));
    else if (a == "--json")
      o.json = cli.value(argc, argv, i);
    else
      cli.unknown(a);
  }
  if (o.width % o.heads != 0)
    cli.fail("--width (" + std::to_string(o.width) + ") must be a multiple of --heads (" + std::to_string(o.heads) +
             ")");
  if (o.quick) {
    o.layers = 2, o.width = 64, o.heads = 2, o.context = 32, o.batch = 2;
    o.steps = 2, o.warmup = 1;
    min_warm_seconds = kMinWarmSeconds / 10;
  }
  return o;
}

double since_us(Clock::time_point t0) { return std::chrono::duration<double, std::micro>(Clock::now() - t0).count(); }

/// `n` timed calls of f after at least `warmup` untimed ones lasting min_warm_seconds, microseconds each.
std::vector<double> time_calls(int warmup, int n, const std::function<void()>& f) {
  const auto w0 = Clock::now();
  for (int i = 0; i < warmup || since_us(w0) < min_warm_seconds * 1e6; ++i) f();
  std::vector<double> us;
  for (int i = 0; i < n; ++i) {
    const auto t0 = Clock::now();
    f();
    us.push_back(since_us(t0));
  }
  return us;
}

// ---- sdpa ---------------------------------------------------------------------------------------

std::vector<double> bench_sdpa(const Options& o, Generator& gen) {
  const int64_t d = o.width / o.heads;
  const Dims shape{o.batch, o.heads, o.context, d};
  const Tensor q = randn(shape, {}, &gen), k = randn(shape, {}, &gen), v = randn(shape, {}, &gen);
  const Tensor g = randn(shape, {}, &gen);
  return time_calls(o.warmup, o.steps, [&] {
    Tensor a = q.detach().set_requires_grad(), b = k.detach().set_requires_grad(), c = v.detach().set_requires_grad();
    Tensor out = scaled_dot_product_attention(a, b, c, Tensor(), 0.0, true);
    out.backward(g);
  });
}

// ---- step ---------------------------------------------------------------------------------------

nn::zoo::GPTConfig gpt_config(const Options& o) {
  nn::zoo::GPTConfig c;
  c.vocab_size = o.vocab, c.block_size = o.context, c.n_layer = o.layers, c.n_head = o.heads, c.n_embd = o.width;
  c.ffn_chunks = o.ffn_chunks;
  return c;
}

struct StepResult {
  std::vector<double> step_us;
  double loss_first = 0, loss_last = 0;
};

StepResult bench_step(const Options& o, nn::zoo::GPT& gpt, const Tensor& x, const Tensor& y) {
  optim::SGDOptions so;
  so.lr = o.lr;
  optim::SGD opt(gpt.parameters(), so);
  StepResult r;
  int s = 0;
  r.step_us = time_calls(o.warmup, o.steps, [&] {
    opt.zero_grad();
    Tensor loss = gpt.loss(x, y);
    loss.backward();
    opt.step();
    (s++ == 0 ? r.loss_first : r.loss_last) = loss.item<double>();
  });
  return r;
}

// ---- remat --------------------------------------------------------------------------------------

/// The step of the remat benchmark: embeddings outside the chain, the chain, the loss. Gradients
/// are zeroed in place (allocated before the step, not activations).
struct ChainStep {
  nn::zoo::GPT& gpt;
  nn::RematSequential chain;
  Tensor x, y_flat;

  ChainStep(nn::zoo::GPT& g, const Tensor& x_, const Tensor& y) : gpt(g), x(x_), y_flat(y.reshape({-1})) {
    for (const auto& block : g.blocks().children()) chain.push_back(block);
    chain.push_back(std::make_shared<nn::Flatten>(0, 1));
    chain.push_back(g.child("transformer")->child("ln_f"));
    chain.push_back(g.child("lm_head"));
  }
  Tensor embedded() {
    auto t = gpt.child("transformer");
    const Tensor pos = arange(0, static_cast<double>(x.size(1)), 1.0, {DType::i64, nullptr});
    Tensor e = t->child("wte")->forward(x);
    return add(e, t->child("wpe")->forward(pos));
  }
  void run() {
    for (auto& p : gpt.parameters())
      if (p.grad().defined()) p.grad().zero_();
    cross_entropy(chain.forward(embedded()), y_flat).backward();
  }
  std::vector<Tensor> grads() {
    std::vector<Tensor> out;
    for (auto& p : gpt.parameters()) out.push_back(p.grad().clone());
    return out;
  }
};

bool same_bytes(const Tensor& a, const Tensor& b) {
  if (a.sizes() != b.sizes() || a.dtype() != b.dtype()) return false;
  const Tensor ac = a.contiguous(), bc = b.contiguous();
  PinSet pins;
  pins.add(ac, AccessMode::Read).add(bc, AccessMode::Read).acquire();
  return std::memcmp(ac.data_ptr(), bc.data_ptr(), ac.nbytes()) == 0;
}

struct BudgetResult {
  double fraction = 0;
  std::size_t budget = 0, auto_budget = 0, predicted = 0, measured = 0;
  bool feasible = false, bitwise = false;
  std::string error, plan;
  std::vector<double> overhead;
};

// `base` is the StoreAll step the overhead is measured against (the same model, or the
// unchunked one: --ffn-chunks).
BudgetResult run_budget(ChainStep& cs, ChainStep& base, double f, std::size_t full, std::size_t outside,
                        const std::vector<Tensor>& ref, const Options& o) {
  BudgetResult b;
  b.fraction = f;
  b.budget = static_cast<std::size_t>(f * static_cast<double>(full));
  b.auto_budget = b.budget > outside ? b.budget - outside : 1;
  const remat::ChainPolicy store = remat::ChainPolicy::store_all();
  const remat::ChainPolicy autop = remat::ChainPolicy::auto_budget(b.auto_budget);
  cs.chain.set_policy(autop);
  try {
    cs.run();  // profiles and plans
  } catch (const Error& e) {
    b.error = e.what();
    return b;
  }
  b.feasible = true;
  b.measured = remat::measure_fast_peak([&] { cs.run(); }).step_peak_bytes();
  const std::vector<Tensor> got = cs.grads();
  b.bitwise = got.size() == ref.size();
  for (std::size_t i = 0; b.bitwise && i < got.size(); ++i) b.bitwise = same_bytes(got[i], ref[i]);
  b.predicted = autop.auto_chain->last_plan()->predicted.peak_bytes;
  for (remat::Decision d : autop.auto_chain->last_plan()->decisions)
    b.plan += d == remat::Decision::Slow ? 'p' : remat::to_string(d)[0];
  for (int i = 0; i < o.steps; ++i) {
    if (&base == &cs) cs.chain.set_policy(store);
    auto t0 = Clock::now();
    base.run();
    const double base_us = since_us(t0);
    cs.chain.set_policy(autop);
    t0 = Clock::now();
    cs.run();
    b.overhead.push_back(since_us(t0) / base_us);
  }
  return b;
}

struct RematResult {
  std::size_t full = 0, outside = 0;
  std::size_t chunked_full = 0;  // StoreAll's peak of the model with the MLP in chunks (--ffn-chunks > 1)
  std::vector<double> store_all_us;
  std::vector<BudgetResult> budgets;
};

RematResult bench_remat(const Options& o, nn::zoo::GPT& gpt, const Tensor& x, const Tensor& y) {
  ChainStep cs(gpt, x, y);
  RematResult r;
  cs.run();  // allocates the gradients
  const std::size_t own_full = remat::measure_fast_peak([&] { cs.run(); }).step_peak_bytes();
  const std::vector<Tensor> ref = cs.grads();
  // The reference StoreAll step: the model itself, or with --ffn-chunks the unchunked model with
  // the same weights.
  std::unique_ptr<nn::zoo::GPT> whole;
  std::unique_ptr<ChainStep> whole_step;
  ChainStep* base = &cs;
  if (o.ffn_chunks > 1) {
    nn::zoo::GPTConfig c = gpt_config(o);
    c.ffn_chunks = 1;
    whole = std::make_unique<nn::zoo::GPT>(c);
    whole->load_state_dict(gpt.state_dict());
    whole_step = std::make_unique<ChainStep>(*whole, x, y);
    base = whole_step.get();
    base->run();
    r.chunked_full = own_full;
    std::printf(
        "remat reference: the model with the MLP whole (--ffn-chunks 1); StoreAll peak %zu B, with the MLP in "
        "%lld chunks %zu B\n",
        remat::measure_fast_peak([&] { base->run(); }).step_peak_bytes(), static_cast<long long>(o.ffn_chunks),
        own_full);
  }
  r.store_all_us = time_calls(o.warmup, o.steps, [&] { base->run(); });
  r.full = base == &cs ? own_full : remat::measure_fast_peak([&] { base->run(); }).step_peak_bytes();
  r.outside = 2 * static_cast<std::size_t>(x.numel()) * static_cast<std::size_t>(o.width) * sizeof(float);
  for (double f : o.fractions) {
    r.budgets.push_back(run_budget(cs, *base, f, r.full, r.outside, ref, o));
    const BudgetResult& b = r.budgets.back();
    if (!b.feasible) {
      std::printf("remat %5.1f %% = %zu B: infeasible: %s\n", 100 * f, b.budget, b.error.c_str());
      continue;
    }
    std::printf(
        "remat %5.1f %% = %zu B (Auto's budget %zu B): predicted %zu B, measured %zu B (%.1f %% of StoreAll); "
        "gradients %s; overhead median %.3fx; plan %s\n",
        100 * f, b.budget, b.auto_budget, b.predicted, b.measured, 100.0 * double(b.measured) / double(r.full),
        b.bitwise ? "bitwise equal" : "DIFFER", bench::summarize(b.overhead).median, b.plan.c_str());
    std::fflush(stdout);
  }
  return r;
}

void write_remat(bench::Json& j, const RematResult& r) {
  j.key("remat").begin_object();
  j.kv("store_all_peak_bytes", static_cast<long long>(r.full));
  j.kv("outside_chain_bytes", static_cast<long long>(r.outside));
  if (r.chunked_full > 0) j.kv("chunked_store_all_peak_bytes", static_cast<long long>(r.chunked_full));
  j.timed("store_all_us", "us", r.store_all_us);
  j.key("budgets").begin_array();
  for (const BudgetResult& b : r.budgets) {
    j.begin_object();
    j.kv("fraction", b.fraction).kv("budget_bytes", static_cast<long long>(b.budget));
    j.kv("auto_budget_bytes", static_cast<long long>(b.auto_budget)).kv("feasible", b.feasible);
    if (b.feasible) {
      j.kv("predicted_bytes", static_cast<long long>(b.predicted))
          .kv("measured_bytes", static_cast<long long>(b.measured));
      j.kv("bitwise", b.bitwise).kv("plan", b.plan);
      j.begin_timed("overhead", "x StoreAll", b.overhead).end_object();
    } else {
      j.kv("error", b.error);
    }
    j.end_object();
  }
  j.end_array();
  j.end_object();
}

void write_json(const Options& o, int threads, const std::string& library, const std::vector<double>& sdpa_us,
                const StepResult* step, const RematResult* remat) {
  bench::Json j;
  j.begin_object();
  j.kv("binary", kProg).kv("threads", threads).kv("dtype", "f32").kv("library", library);
  j.kv("allocator", std::string(default_allocator().name()));
  j.key("params").begin_object();
  j.kv("layers", static_cast<long long>(o.layers)).kv("width", static_cast<long long>(o.width));
  j.kv("heads", static_cast<long long>(o.heads)).kv("context", static_cast<long long>(o.context));
  j.kv("batch", static_cast<long long>(o.batch)).kv("vocab", static_cast<long long>(o.vocab)).kv("lr", o.lr);
  j.kv("ffn_chunks", static_cast<long long>(o.ffn_chunks));
  j.kv("steps", o.steps).kv("warmup", o.warmup).kv("seed", o.seed);
  j.end_object();
  if (!sdpa_us.empty()) j.timed("sdpa_fwd_bwd_us", "us", sdpa_us);
  if (step != nullptr) {
    j.timed("step_us", "us", step->step_us);
    j.kv("loss_first", step->loss_first).kv("loss_last", step->loss_last);
  }
  if (remat != nullptr) write_remat(j, *remat);
  j.end_object();
  if (!bench::write_file_atomically(o.json, j.str(), kProg)) std::exit(1);
}

}  // namespace

int main(int argc, char** argv) try {
  const Options o = parse(argc, argv);
  if (o.threads > 0) set_num_threads(o.threads);
  const int threads = get_num_threads();
  const std::string library = ops::dnnl_summary();
  std::printf(
      "strata-bench-gpt — %lld layers, width %lld, %lld heads, context %lld, batch %lld, vocab %lld; %s, %d "
      "threads\n",
      static_cast<long long>(o.layers), static_cast<long long>(o.width), static_cast<long long>(o.heads),
      static_cast<long long>(o.context), static_cast<long long>(o.batch), static_cast<long long>(o.vocab),
      library.c_str(), threads);
  Generator gen(static_cast<uint64_t>(o.seed));
  const bool all = o.what == "all";
  std::vector<double> sdpa_us;
  if (all || o.what == "sdpa") {
    sdpa_us = bench_sdpa(o, gen);
    std::printf("sdpa fwd+bwd median %.0f µs\n", bench::summarize(sdpa_us).median);
  }
  nn::zoo::GPT gpt(gpt_config(o), &gen);
  const Tensor x = randint(0, o.vocab, {o.batch, o.context}, {DType::i64, nullptr}, &gen);
  const Tensor y = randint(0, o.vocab, {o.batch, o.context}, {DType::i64, nullptr}, &gen);
  StepResult step;
  if (all || o.what == "step") {
    step = bench_step(o, gpt, x, y);
    std::printf("step median %.0f µs; loss %.4f -> %.4f\n", bench::summarize(step.step_us).median, step.loss_first,
                step.loss_last);
  }
  RematResult remat;
  if (all || o.what == "remat") remat = bench_remat(o, gpt, x, y);
  std::fflush(stdout);
  if (!o.json.empty())
    write_json(o, threads, library, sdpa_us, all || o.what == "step" ? &step : nullptr,
               all || o.what == "remat" ? &remat : nullptr);
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "%s: %s\n", kProg, e.what());
  return 1;
}
