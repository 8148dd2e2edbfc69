// Tape streaming (autograd/tape): regions and layers against the budget, packed == unpacked bytes,
// tiles spilled after forward and freed after backward, gradients bitwise equal to the unstreamed
// step on zoo models with the slow-tier model on and off, in-place errors, retain_graph, nesting
// with checkpoint, and the fast-tier peak of a deep MLP with and without streaming.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <any>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>

#include "autograd/remat/checkpoint.h"
#include "autograd/remat/peak.h"
#include "autograd/tape/stream.h"
#include "core/factories.h"
#include "core/pin_set.h"
#include "core/rng.h"
#include "models/zoo/densenet.h"
#include "models/zoo/gpt.h"
#include "models/zoo/mlp.h"
#include "models/zoo/resnet.h"
#include "models/zoo/vgg.h"
#include "ops/binary.h"
#include "ops/linalg.h"
#include "ops/reduction.h"
#include "ops/softmax_loss.h"
#include "ops/unary.h"
#include "tests/cpp/bitwise.h"
#include "tests/cpp/core/test_util.h"

namespace strata_test {
namespace {

using namespace strata;
using ::testing::HasSubstr;

std::string message_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "<no error>";
}

using testing_util::bytes_of;
using testing_util::same_bits;

// Tiered memories of our own for the tiles, with the slow-tier model off and on.
memory::TieredMemory& tile_memory(bool model) {
  auto make = [](bool on) {
    memory::TieredConfig c;
    c.fast_bytes = std::size_t{64} << 20;
    c.slow_bytes = std::size_t{256} << 20;
    c.slow_dir = "/tmp";
    c.backend = memory::PmBackend::Mmap;
    if (on) {
      c.model = SlowTierModelSpec::custom(4, 2, 500, "test");
    } else {
      c.model = SlowTierModelSpec::off();
    }
    return std::make_unique<memory::TieredMemory>(c);
  };
  static std::unique_ptr<memory::TieredMemory> off = make(false);
  static std::unique_ptr<memory::TieredMemory> on = make(true);
  return model ? *on : *off;
}

tape::StreamOptions small_options(bool model, std::size_t budget) {
  tape::StreamOptions o;
  o.tape_budget_bytes = budget;
  o.min_stream_bytes = 0;
  o.memory = &tile_memory(model);
  return o;
}

// ---- the streamer on its own: regions, layers, bytes, tiers, freeing --------------------------

TEST(TapeStream, RegionsFitLayersAndUnpackedBytesEqualPackedOnes) {
  for (bool model : {false, true}) {
    SCOPED_TRACE(model ? "slow-tier model on" : "slow-tier model off");
    manual_seed(7);
    const std::size_t budget = 8192;
    auto s = std::make_shared<tape::TapeStreamer>(small_options(model, budget));
    // node i saves i % 3 + 1 values of varying sizes; node 5 saves one value larger than the budget.
    std::vector<std::any> packs;
    std::vector<Tensor> originals;
    std::vector<std::size_t> region_bytes;
    // Values are copied as they are saved; a region whose next value overflows the open tile moves
    // to a new one. Count those moves as the streamer must make them.
    std::size_t expect_moves = 0, cap = 0, used = 0;
    for (int i = 0; i < 12; ++i) {
      autograd::detail::SavingNodeScope node(100000 + static_cast<uint64_t>(i));
      std::size_t bytes = 0;
      for (int j = 0; j < i % 3 + 1; ++j) {
        Tensor v = i == 5 ? randn({3000}) : randn({100 + 37 * i + j, 3});
        const std::size_t b = (v.nbytes() + 63) / 64 * 64;
        if (j == 0) {
          if (cap == 0 || used + b > cap) cap = std::max(budget, b), used = 0;
          if (b > budget) cap = b;
        } else if (used + b > cap) {
          ++expect_moves;
          used = bytes;
          cap = std::max(budget, used + b);
        }
        used += b;
        packs.push_back(s->pack(v));
        originals.push_back(v.clone());
        bytes += (v.nbytes() + 63) / 64 * 64;
      }
      region_bytes.push_back(bytes);
    }
    s->finish();
    tape::StreamReport r = s->report();
    EXPECT_EQ(r.regions, 12u);
    EXPECT_EQ(r.region_moves, expect_moves);
    EXPECT_GT(expect_moves, 0u) << "the sizes should make some region outgrow its tile";
    EXPECT_EQ(r.values_streamed, originals.size());
    EXPECT_EQ(r.values_kept, 0u);
    // Layering as Algorithm 2 does it, recomputed here: close when the next region would overflow.
    std::size_t expect_layers = 0, fill = 0;
    bool open = false;
    for (std::size_t b : region_bytes) {
      if (b > budget) {
        ++expect_layers;
        open = false;
        fill = 0;
        continue;
      }
      if (!open || fill + b > budget) {
        ++expect_layers;
        open = true;
        fill = 0;
      }
      fill += b;
    }
    EXPECT_EQ(r.layers, expect_layers);
    ASSERT_EQ(r.layer_info.size(), r.layers);
    for (const auto& l : r.layer_info) {
      if (l.regions > 1) {
        EXPECT_LE(l.used_bytes, budget);
      }
      EXPECT_GE(l.tile_bytes, l.used_bytes);
    }
    EXPECT_EQ(r.spills, r.layers - 1);  // every layer but the open one at the end of forward
    tile_memory(model).mover().wait_all();
    for (std::size_t i = 0; i + 1 < r.layers; ++i) EXPECT_EQ(s->layer_tier(i), "slow") << "layer " << i;
    EXPECT_EQ(s->layer_tier(r.layers - 1), "fast");
    // Backward order: last value first.
    for (std::size_t k = packs.size(); k-- > 0;) {
      Tensor u = s->unpack(packs[k]);
      EXPECT_TRUE(same_bits(u, originals[k])) << "value " << k;
    }
    r = s->report();
    EXPECT_EQ(r.prefetches + r.demand_fetches, r.layers - 1);
    EXPECT_EQ(r.demand_fetches, 0u);  // distance 1 prefetched every spilled layer before its use
    EXPECT_EQ(r.tiles_freed, 0u);
    packs.clear();
    r = s->report();
    EXPECT_EQ(r.tiles_freed, r.layers);
    for (std::size_t i = 0; i < r.layers; ++i) EXPECT_EQ(s->layer_tier(i), "freed");
    std::printf("%s", r.explain().c_str());
  }
}

TEST(TapeStream, SmallNonContiguousAndDisabledValuesAreKept) {
  tape::StreamOptions o = small_options(false, 1 << 20);
  o.min_stream_bytes = 1024;
  tape::TapeStreamer s(o);
  Tensor small = randn({8});
  Tensor strided = randn({64, 64}).transpose(0, 1);
  std::any a = s.pack(small), b = s.pack(strided);
  s.finish();
  EXPECT_EQ(s.report().values_kept, 2u);
  EXPECT_EQ(s.report().layers, 0u);
  EXPECT_TRUE(s.unpack(a).shares_storage(small));
  EXPECT_TRUE(s.unpack(b).shares_storage(strided));
  tape::StreamOptions off = o;
  off.enabled = false;
  tape::TapeStreamer d(off);
  Tensor big = randn({4096});
  std::any c = d.pack(big);
  EXPECT_TRUE(d.unpack(c).shares_storage(big));
  EXPECT_EQ(d.report().values_kept, 1u);
}

TEST(TapeStream, ParametersAreKeptUnlessAsked) {
  tape::StreamOptions o = small_options(false, 1 << 20);
  tape::TapeStreamer s(o);
  Tensor weight = randn({64, 64}).set_requires_grad();  // a leaf that requires grad: a parameter
  Tensor activation = randn({64, 64});
  std::any a = s.pack(weight), b = s.pack(activation);
  s.finish();
  EXPECT_EQ(s.report().values_kept, 1u);
  EXPECT_EQ(s.report().parameters_kept, 1u);
  EXPECT_EQ(s.report().values_streamed, 1u);
  EXPECT_TRUE(s.unpack(a).shares_storage(weight));
  EXPECT_FALSE(s.unpack(b).shares_storage(activation));
  tape::StreamOptions all = o;
  all.stream_parameters = true;
  tape::TapeStreamer t(all);
  std::any c = t.pack(weight);
  t.finish();
  EXPECT_EQ(t.report().values_streamed, 1u);
  EXPECT_EQ(t.report().parameters_kept, 0u);
  Tensor back = t.unpack(c);
  EXPECT_FALSE(back.shares_storage(weight));
  EXPECT_TRUE(same_bits(back, weight.detach()));
}

TEST(TapeStream, BadOptionsAndForeignValuesAreErrors) {
  tape::StreamOptions o = small_options(false, 0);
  EXPECT_THAT(message_of([&] { tape::TapeStreamer s(o); }), HasSubstr("tape_budget_bytes must be > 0"));
  o.tape_budget_bytes = 4096;
  o.prefetch_distance = -1;
  EXPECT_THAT(message_of([&] { tape::StreamingScope s(o); }), HasSubstr("prefetch_distance must be >= 0"));
  o.prefetch_distance = 1;
  tape::TapeStreamer s(o);
  std::any foreign = 42;
  EXPECT_THAT(message_of([&] { s.unpack(foreign); }), HasSubstr("was not packed by this streamer"));
  EXPECT_THAT(message_of([&] { s.layer_tier(3); }), HasSubstr("layer 3 does not exist"));
}

// ---- on graphs ---------------------------------------------------------------------------------

TEST(TapeStream, InPlaceModificationAfterSavingIsStillAnError) {
  Tensor x = randn({32, 32}).set_requires_grad();
  Tensor y;
  {
    tape::StreamingScope scope(small_options(false, 4096));
    y = exp(x);  // saves its output
  }
  y.detach().fill_(1.0);
  EXPECT_THAT(message_of([&] { sum(y).backward(); }), HasSubstr("modified by an inplace operation"));
}

TEST(TapeStream, RetainGraphRunsBackwardTwiceWithTheSameGradients) {
  manual_seed(3);
  Tensor x = randn({64, 48}).set_requires_grad();
  Tensor w = randn({48, 48}).set_requires_grad();
  std::shared_ptr<tape::TapeStreamer> st;
  Tensor loss;
  {
    tape::StreamingScope scope(small_options(true, 16384));
    st = scope.streamer();
    Tensor h = relu(mul(x, 1.5));
    for (int i = 0; i < 4; ++i) h = relu(matmul(h, w));
    loss = sum(mul(h, h));
  }
  loss.backward(Tensor(), /*retain_graph=*/true);
  Tensor gx = x.grad().clone(), gw = w.grad().clone();
  x.set_grad(Tensor());
  w.set_grad(Tensor());
  loss.backward();
  EXPECT_TRUE(same_bits(x.grad(), gx));
  EXPECT_TRUE(same_bits(w.grad(), gw));
  EXPECT_THAT(message_of([&] { loss.backward(); }), HasSubstr("already freed"));
  tape::StreamReport r = st->report();
  EXPECT_GT(r.layers, 1u);
  EXPECT_EQ(r.tiles_freed, r.layers);
}

TEST(TapeStream, NestsWithCheckpoint) {
  manual_seed(4);
  Tensor x0 = randn({64, 32});
  Tensor w = randn({32, 32});
  auto run = [&](bool stream, Tensor& gx, Tensor& gw) {
    Tensor x = x0.detach().set_requires_grad();
    Tensor ww = w.detach().set_requires_grad();
    auto fwd = [&] {
      Tensor h = relu(matmul(x, ww));
      h = remat::checkpoint(
          [&](const autograd::TensorList& in) {
            return autograd::TensorList{relu(matmul(relu(matmul(in[0], ww)), ww))};
          },
          {h})[0];
      return sum(mul(relu(matmul(h, ww)), h));
    };
    Tensor loss;
    std::shared_ptr<tape::TapeStreamer> st;
    if (stream) {
      tape::StreamingScope scope(small_options(false, 8192));
      st = scope.streamer();
      loss = fwd();
    } else {
      loss = fwd();
    }
    loss.backward();
    gx = x.grad();
    gw = ww.grad();
    if (st) {
      tape::StreamReport r = st->report();
      EXPECT_GT(r.values_streamed, 0u);
      EXPECT_EQ(r.tiles_freed, r.layers);
    }
  };
  Tensor rx, rw, sx, sw;
  run(false, rx, rw);
  run(true, sx, sw);
  EXPECT_TRUE(same_bits(sx, rx));
  EXPECT_TRUE(same_bits(sw, rw));
}

// ---- zoo models: gradients bitwise equal to the unstreamed step --------------------------------

struct StepResult {
  std::vector<std::pair<std::string, Tensor>> grads;
  Tensor input_grad, logits;
  tape::StreamReport report;
};

StepResult train_step(nn::Module& model, const StateDict& initial, const Tensor& x, const Tensor& target,
                      const tape::StreamOptions* stream) {
  model.load_state_dict(initial);
  model.zero_grad();
  Tensor input = x.detach().set_requires_grad();
  manual_seed(2024);
  StepResult r;
  Tensor loss;
  std::shared_ptr<tape::TapeStreamer> st;
  if (stream) {
    tape::StreamingScope scope(*stream);
    st = scope.streamer();
    r.logits = model.forward(input);
    loss = cross_entropy(r.logits, target);
  } else {
    r.logits = model.forward(input);
    loss = cross_entropy(r.logits, target);
  }
  loss.backward();
  for (auto& [name, p] : model.named_parameters()) r.grads.emplace_back(name, p.grad());
  r.input_grad = input.grad();
  if (st) r.report = st->report();
  return r;
}

void check_model(const char* what, nn::Module& model, const Tensor& x, const Tensor& target, std::size_t budget) {
  StateDict frozen;
  for (const auto& [k, v] : model.state_dict()) frozen.emplace_back(k, v.clone());
  const StepResult ref = train_step(model, frozen, x, target, nullptr);
  for (bool slow_model : {false, true}) {
    SCOPED_TRACE(slow_model ? "slow-tier model on" : "slow-tier model off");
    tape::StreamOptions o = small_options(slow_model, budget);
    const StepResult got = train_step(model, frozen, x, target, &o);
    EXPECT_TRUE(same_bits(got.logits, ref.logits)) << "logits";
    EXPECT_TRUE(same_bits(got.input_grad, ref.input_grad)) << "input gradient";
    ASSERT_EQ(got.grads.size(), ref.grads.size());
    for (std::size_t i = 0; i < ref.grads.size(); ++i) {
      EXPECT_TRUE(ref.grads[i].second.defined()) << ref.grads[i].first;
      EXPECT_TRUE(same_bits(got.grads[i].second, ref.grads[i].second)) << ref.grads[i].first;
    }
    const tape::StreamReport& r = got.report;
    EXPECT_GT(r.layers, 2u);
    EXPECT_EQ(r.spills, r.layers - 1);
    EXPECT_EQ(r.tiles_freed, r.layers);
    EXPECT_GT(r.parameters_kept, 0u) << "the layers' weights are saved by their ops and must not be streamed";
    for (const auto& l : r.layer_info) {
      if (l.regions > 1) {
        EXPECT_LE(l.used_bytes, budget);
      }
    }
    std::printf("[%s, slow-tier model %s]\n%s", what, slow_model ? "on" : "off", r.explain().c_str());
  }
}

TEST(TapeStreamModels, ZooMlp) {
  manual_seed(1);
  nn::zoo::MLP mlp({24, 48, 48, 32, 10});
  check_model("MLP", mlp, randn({16, 24}), tensor<int64_t>({1, 3, 5, 7, 9, 0, 2, 4, 6, 8, 1, 3, 5, 7, 9, 0}), 4096);
}

TEST(TapeStreamModels, SmallGpt) {
  manual_seed(5);
  const nn::zoo::GPTConfig c{.vocab_size = 20, .block_size = 16, .n_layer = 3, .n_head = 2, .n_embd = 16};
  nn::zoo::GPT gpt(c);
  // From the embedded input [B, T, E] to logits [B·T, vocab].
  nn::Sequential model{gpt.child("transformer")->child("h"), gpt.child("transformer")->child("ln_f"),
                       gpt.child("lm_head"), std::make_shared<nn::Flatten>(0, 1)};
  check_model("GPT", model, randn({2, 16, 16}), randint(0, 20, {32}), 8192);
}

TEST(TapeStreamModels, SmallVgg) {
  manual_seed(2);
  nn::zoo::VGGOptions o;
  o.config = {8, 0, 12, 12, 0};
  o.batch_norm = true;
  o.num_classes = 5;
  o.pool_size = 1;
  o.hidden = 16;
  o.dropout = 0.5;
  nn::zoo::VGG vgg(o);
  check_model("VGG", vgg, randn({4, 3, 8, 8}), tensor<int64_t>({0, 1, 2, 4}), 8192);
}

TEST(TapeStreamModels, SmallCifarResNet) {
  manual_seed(3);
  nn::zoo::ResNetOptions o = nn::zoo::cifar_resnet_options(8, 4);
  o.widths = {4, 8, 8};
  nn::zoo::ResNet net(o);
  check_model("ResNet", net, randn({2, 3, 8, 8}), tensor<int64_t>({3, 1}), 4096);
}

TEST(TapeStreamModels, SmallDenseNet) {
  manual_seed(4);
  nn::zoo::DenseNetOptions o;
  o.growth_rate = 4;
  o.block_config = {2, 2};
  o.num_init_features = 8;
  o.bn_size = 2;
  o.drop_rate = 0.2;
  o.num_classes = 3;
  o.stem = "cifar";
  nn::zoo::DenseNet net(o);
  check_model("DenseNet", net, randn({2, 3, 8, 8}), tensor<int64_t>({2, 0}), 4096);
}

// ---- the fast-tier peak of a deep MLP whose activations dominate -------------------------------

// zero_grad, forward + cross-entropy (streamed under `o` when given, its streamer in `*st`), backward.
void train_step(nn::Module& m, const Tensor& x, const Tensor& target, const tape::StreamOptions* o,
                std::shared_ptr<tape::TapeStreamer>* st) {
  m.zero_grad();
  Tensor loss;
  if (o) {
    tape::StreamingScope scope(*o);
    *st = scope.streamer();
    loss = cross_entropy(m.forward(x), target);
  } else {
    loss = cross_entropy(m.forward(x), target);
  }
  loss.backward();
}

TEST(TapeStreamModels, DeepMlpFastPeakIsLowerWithStreaming) {
  manual_seed(5);
  std::vector<int64_t> widths(25, 128);
  widths.back() = 10;
  nn::zoo::MLP mlp(widths);
  Tensor x = randn({1024, 128});
  std::vector<int64_t> labels(1024);
  for (int i = 0; i < 1024; ++i) labels[static_cast<std::size_t>(i)] = i % 10;
  Tensor target = tensor<int64_t>(labels);
  auto step = [&](const tape::StreamOptions* o, std::shared_ptr<tape::TapeStreamer>* st) {
    train_step(mlp, x, target, o, st);
  };
  step(nullptr, nullptr);  // warm up (primitive caches, gradients allocated)
  const remat::PeakMeasurement plain = remat::measure_fast_peak([&] { step(nullptr, nullptr); });
  tape::StreamOptions o;
  o.tape_budget_bytes = std::size_t{1} << 20;  // two activations of 512 KiB
  std::shared_ptr<tape::TapeStreamer> st;
  const remat::PeakMeasurement streamed = remat::measure_fast_peak([&] { step(&o, &st); });
  const tape::StreamReport r = st->report();
  std::printf(
      "deep MLP (24 x 128, batch 1024): fast-tier step peak %.2f MiB unstreamed, %.2f MiB streamed "
      "(budget %.2f MiB)\n%s",
      plain.step_peak_bytes() / 1048576.0, streamed.step_peak_bytes() / 1048576.0, o.tape_budget_bytes / 1048576.0,
      r.explain().c_str());
  EXPECT_LT(streamed.step_peak_bytes(), plain.step_peak_bytes());
  EXPECT_GT(r.spills, 4u);
  EXPECT_EQ(r.tiles_freed, r.layers);
}

// What a residual network's streamed step holds at its peak: the tape is in the slow tier but for a
// tile or two, so the peak is a few activations of the widest stage. Backward of a block's first
// conv holds its output's gradient, the saved input (tile), the input's gradient, the residual
// gradient waiting at the join and the prefetched next tile: 5 activations. Forward holds less.
// Holding a saved value until the next node saves (instead of copying it at once), summing
// gradients out of place at the join, or temporaries that outlive their use each add one.
TEST(TapeStreamModels, ResNetStreamedPeakIsAFewActivations) {
  manual_seed(6);
  nn::zoo::ResNet net(nn::zoo::cifar_resnet_options(8, 10));
  const int64_t batch = 16;
  Tensor x = randn({batch, 3, 32, 32});
  std::vector<int64_t> labels(static_cast<std::size_t>(batch));
  for (int64_t i = 0; i < batch; ++i) labels[static_cast<std::size_t>(i)] = i % 10;
  Tensor target = tensor<int64_t>(labels);
  const std::size_t activation = static_cast<std::size_t>(batch) * 16 * 32 * 32 * sizeof(float);  // stage 1
  auto step = [&](const tape::StreamOptions* o, std::shared_ptr<tape::TapeStreamer>* st) {
    train_step(net, x, target, o, st);
  };
  auto gradients = [&] {
    std::vector<Tensor> g;
    for (const auto& p : net.parameters()) g.push_back(p.grad().clone());
    return g;
  };
  step(nullptr, nullptr);
  const remat::PeakMeasurement plain = remat::measure_fast_peak([&] { step(nullptr, nullptr); });
  const std::vector<Tensor> plain_grads = gradients();
  tape::StreamOptions o;
  o.tape_budget_bytes = activation / 4;  // every activation is a layer of its own
  std::shared_ptr<tape::TapeStreamer> st;
  step(&o, &st);
  const remat::PeakMeasurement streamed = remat::measure_fast_peak([&] { step(&o, &st); });
  // Activations of the default tiered memory are adopted as their own tiles (no copy); the
  // gradients are still bit for bit those of the plain step.
  const tape::StreamReport r = st->report();
  std::printf("%s", r.explain().c_str());
  EXPECT_GT(r.values_adopted, 0u);
  EXPECT_GT(r.spills, r.values_adopted / 2) << "adopted tiles must be spilled once the forward lets go of them";
  const std::vector<Tensor> streamed_grads = gradients();
  ASSERT_EQ(streamed_grads.size(), plain_grads.size());
  for (std::size_t i = 0; i < plain_grads.size(); ++i)
    EXPECT_TRUE(same_bits(streamed_grads[i], plain_grads[i])) << "parameter " << i;
  const double in_activations = static_cast<double>(streamed.step_peak_bytes()) / static_cast<double>(activation);
  std::printf("ResNet-8, batch %lld: step peak %.2f MiB unstreamed, %.2f MiB streamed = %.2f activations of %.2f MiB\n",
              static_cast<long long>(batch), plain.step_peak_bytes() / 1048576.0,
              streamed.step_peak_bytes() / 1048576.0, in_activations, activation / 1048576.0);
  EXPECT_LE(in_activations, 5.5);
  EXPECT_LT(streamed.step_peak_bytes(), plain.step_peak_bytes());
  EXPECT_EQ(r.tiles_freed, r.layers);
}

}  // namespace
}  // namespace strata_test
