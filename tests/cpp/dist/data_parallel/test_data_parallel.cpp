// DataParallel: the parameters after a few SGD steps, and the losses, are bitwise those of the
// one-process reference (the same fixed chunks, each chunk's gradient by its own backward, summed
// by tree_sum) at whatever rank count the suite runs under (ctest runs it at 1, 2 and 4 ranks),
// hence bitwise the same at every rank count. The reference uses no DataParallel code.
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <vector>

#include "autograd/engine.h"
#include "autograd/grad_mode.h"
#include "autograd/node.h"
#include "autograd/remat/checkpoint.h"
#include "autograd/tape/stream.h"
#include "core/factories.h"
#include "core/rng.h"
#include "dist/data_parallel/data_parallel.h"
#include "dist/reduction.h"
#include "memory/tiered_memory.h"
#include "models/activation.h"
#include "models/container.h"
#include "models/conv.h"
#include "models/linear.h"
#include "models/normalization.h"
#include "models/optim/sgd.h"
#include "models/pooling.h"
#include "models/remat.h"
#include "ops/operators.h"
#include "ops/reduction.h"
#include "ops/shape_ops.h"
#include "ops/softmax_loss.h"
#include "tests/cpp/bitwise.h"
#include "tests/cpp/dist/dist_test_util.h"
#include "tests/cpp/error_text.h"

namespace strata::dist {
namespace {

using testing::comm;
using testing_util::same_bits;
using ModelFn = std::function<std::shared_ptr<nn::Module>()>;

std::shared_ptr<nn::Module> mlp() {
  Generator gen(11);
  return std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Linear>(6, 16, true, &gen), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Linear>(16, 16, true, &gen), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Linear>(16, 3, true, &gen)});
}

// Input [B, 6]: the MLP's; the conv net's is [B, 2, 5, 5].
std::shared_ptr<nn::Module> conv_net() {
  manual_seed(5);
  return std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Conv2d>(2, 4, 3, 1, 1), std::make_shared<nn::BatchNorm2d>(4), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Conv2d>(4, 4, 3, 1, 1), std::make_shared<nn::BatchNorm2d>(4), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::AdaptiveAvgPool2d>(1), std::make_shared<nn::Flatten>(), std::make_shared<nn::Linear>(4, 3)});
}

// `inner` run through checkpoint_sequential in two segments (its forward recomputes in backward).
class Checkpointed : public nn::Module {
 public:
  explicit Checkpointed(std::shared_ptr<nn::Sequential> inner) : Module("Checkpointed"), inner_(inner) {
    register_module("inner", inner_);
  }
  Tensor forward(const Tensor& x) override { return nn::checkpoint_sequential(*inner_, 2, x); }

 private:
  std::shared_ptr<nn::Sequential> inner_;
};

struct Batch {
  Tensor x, y;
};

Batch batch_of(int64_t b, bool images, uint64_t seed) {
  Generator gen(seed);
  Tensor x = images ? randn({b, 2, 5, 5}, {}, &gen) : randn({b, 6}, {}, &gen);
  return {x, randint(0, 3, {b}, {DType::i64, nullptr}, &gen)};
}

struct TrainRun {
  std::vector<Tensor> params;
  std::vector<double> losses;
};

TrainRun finish(nn::Module& model, std::vector<double> losses) {
  TrainRun r{{}, std::move(losses)};
  for (const Tensor& p : model.parameters()) r.params.push_back(p.detach().clone());
  return r;
}

// One process: chunk c's parameter gradient by autograd::grad from its rows of dL/d(output).
std::vector<Tensor> reference_gradients(nn::Module& model, const Batch& batch, int64_t chunks, double& loss_value) {
  const std::vector<RowRange> split = split_rows(batch.x.size(0), chunks);
  std::vector<Tensor> outs;
  for (const RowRange& r : split) outs.push_back(model(batch.x.narrow(0, r.begin, r.size())));
  Tensor out = cat(outs, 0);
  Tensor loss = cross_entropy(out, batch.y);
  loss_value = loss.item<double>();
  const Tensor g = autograd::grad({loss}, {out})[0];
  const std::vector<Tensor> params = model.parameters();
  std::vector<std::vector<Tensor>> per_param(params.size());
  for (std::size_t c = 0; c < split.size(); ++c) {
    const Tensor gc = g.narrow(0, split[c].begin, split[c].size()).contiguous();
    const autograd::TensorList grads = autograd::grad({outs[c]}, params, {gc});
    for (std::size_t p = 0; p < params.size(); ++p) per_param[p].push_back(grads[p]);
  }
  std::vector<Tensor> sums;
  for (auto& list : per_param) sums.push_back(tree_sum(list));
  return sums;
}

TrainRun reference(const ModelFn& make, int64_t b, bool images, int64_t chunks, int steps) {
  auto model = make();
  optim::SGD opt(model->parameters(), {.lr = 0.1, .momentum = 0.9});
  std::vector<double> losses;
  for (int s = 0; s < steps; ++s) {
    double loss = 0;
    const std::vector<Tensor> grads = reference_gradients(*model, batch_of(b, images, 100 + s), chunks, loss);
    std::vector<Tensor> params = model->parameters();
    for (std::size_t p = 0; p < params.size(); ++p) params[p].set_grad(grads[p]);
    opt.step();
    opt.zero_grad();
    losses.push_back(loss);
  }
  return finish(*model, losses);
}

// A tiered memory of the test's own for tape tiles (slow-tier model off: no modelled delays).
memory::TieredMemory& tile_memory() {
  static std::unique_ptr<memory::TieredMemory> memory = [] {
    memory::TieredConfig c;
    c.fast_bytes = std::size_t{64} << 20;
    c.slow_bytes = std::size_t{64} << 20;
    c.slow_dir = "/tmp";
    c.backend = memory::PmBackend::Mmap;
    c.model = SlowTierModelSpec::off();
    return std::make_unique<memory::TieredMemory>(c);
  }();
  return *memory;
}

struct DpSettings {
  int64_t chunks = 4;
  int64_t bucket_bytes = 1 << 20;
  bool stream = false;
  bool agreed_batch = false;  // forward_agreed(x, B): no row exchange
  bool staged = false;        // forward_staged(x, B, one stage per layer)
  std::vector<int64_t> bucket_sizes = {};
  bool wait_in_backward = true;  // false: wait_gradients() before the optimizer step
};

// A Sequential's layers as stages: each child with parameters and the parameterless children after it.
std::vector<DataParallel::Stage> layer_stages(nn::Module& model) {
  auto& seq = dynamic_cast<nn::Sequential&>(model);
  std::vector<std::vector<std::shared_ptr<nn::Module>>> layers;
  for (std::size_t i = 0; i < seq.size(); ++i) {
    std::shared_ptr<nn::Module> child = seq[static_cast<int64_t>(i)];
    if (layers.empty() || !child->parameters().empty()) layers.emplace_back();
    layers.back().push_back(child);
  }
  std::vector<DataParallel::Stage> stages;
  for (const auto& layer : layers) {
    stages.push_back([layer](const Tensor& x) {
      Tensor y = x;
      for (const auto& m : layer) y = (*m)(y);
      return y;
    });
  }
  return stages;
}

TrainRun data_parallel(const ModelFn& make, int64_t b, bool images, int steps, DpSettings settings = {}) {
  auto model = make();
  DataParallel ddp(model, comm(),
                   {.chunks = settings.chunks,
                    .bucket_bytes = settings.bucket_bytes,
                    .bucket_sizes = settings.bucket_sizes,
                    .wait_in_backward = settings.wait_in_backward});
  const std::vector<DataParallel::Stage> stages =
      settings.staged ? layer_stages(*model) : std::vector<DataParallel::Stage>{};
  optim::SGD opt(model->parameters(), {.lr = 0.1, .momentum = 0.9});
  std::vector<double> losses;
  const RowRange rows = ddp.local_rows(b);
  for (int s = 0; s < steps; ++s) {
    const Batch batch = batch_of(b, images, 100 + s);
    Tensor out;
    if (settings.stream) {
      tape::StreamOptions o;
      o.tape_budget_bytes = 512;
      o.min_stream_bytes = 0;
      o.memory = &tile_memory();
      tape::StreamingScope scope(o);
      out = ddp(batch.x.narrow(0, rows.begin, rows.size()));
      scope.streamer()->finish();
      const tape::StreamReport report = scope.streamer()->report();
      EXPECT_GT(report.values_streamed, 0u);
      EXPECT_GT(report.spills, 0u);
    } else if (settings.staged) {
      out = ddp.forward_staged(batch.x.narrow(0, rows.begin, rows.size()), b, stages);
    } else if (settings.agreed_batch) {
      out = ddp.forward_agreed(batch.x.narrow(0, rows.begin, rows.size()), b);
    } else {
      out = ddp(batch.x.narrow(0, rows.begin, rows.size()));
    }
    Tensor loss = cross_entropy(out, batch.y);
    loss.backward();
    EXPECT_EQ(ddp.buckets_reduced(), static_cast<int64_t>(ddp.buckets().size()));
    if (!settings.wait_in_backward) {
      for (const Tensor& p : model->parameters()) EXPECT_FALSE(p.grad().defined()) << "written before the wait";
      ddp.wait_gradients();
    }
    opt.step();
    opt.zero_grad();
    losses.push_back(loss.item<double>());
  }
  return finish(*model, losses);
}

void expect_same(const TrainRun& a, const TrainRun& b) {
  ASSERT_EQ(a.params.size(), b.params.size());
  for (std::size_t i = 0; i < a.params.size(); ++i) {
    EXPECT_TRUE(same_bits(a.params[i], b.params[i])) << "parameter " << i;
  }
  ASSERT_EQ(a.losses.size(), b.losses.size());
  for (std::size_t i = 0; i < a.losses.size(); ++i) EXPECT_EQ(a.losses[i], b.losses[i]) << "loss of step " << i;
}

TEST(DataParallelSplit, ChunksAreContiguousTheFirstOnesLarger) {
  EXPECT_EQ(split_rows(7, 4), (std::vector<RowRange>{{0, 2}, {2, 4}, {4, 6}, {6, 7}}));
  EXPECT_EQ(split_rows(3, 8), (std::vector<RowRange>{{0, 1}, {1, 2}, {2, 3}}));
  EXPECT_EQ(split_rows(8, 2), (std::vector<RowRange>{{0, 4}, {4, 8}}));
  EXPECT_ERROR_HAS(split_rows(0, 4), "a batch of 0 rows cannot be split");
  EXPECT_ERROR_HAS(split_rows(4, 0), "chunks=0 must be at least 1");
}

TEST(DataParallelSplit, LocalRowsCoverTheBatchInRankOrder) {
  DataParallel ddp(mlp(), comm(), {.chunks = 4});
  for (int64_t b : {4, 7, 9, 16}) {
    const RowRange mine = ddp.local_rows(b);
    Tensor row = empty({1, 2}, {DType::i64});
    row.data<int64_t>()[0] = mine.begin;
    row.data<int64_t>()[1] = mine.end;
    const Tensor all = comm().allgatherv(row);
    for (int r = 0; r < comm().size(); ++r) {
      EXPECT_EQ(all.at({r, 0}), r == 0 ? 0 : all.at({r - 1, 1})) << "B=" << b;
      EXPECT_GT(all.at({r, 1}), all.at({r, 0})) << "B=" << b;
    }
    EXPECT_EQ(all.at({comm().size() - 1, 1}), b);
    const std::vector<int64_t> at = ddp.row_boundaries(b);
    ASSERT_EQ(at.size(), static_cast<std::size_t>(comm().size()) + 1);
    for (int r = 0; r < comm().size(); ++r) {
      EXPECT_EQ(at[r], all.at({r, 0})) << "B=" << b;
      EXPECT_EQ(at[r + 1], all.at({r, 1})) << "B=" << b;
    }
  }
}

TEST(DataParallel, MlpMatchesTheOneProcessReferenceBitwise) {
  for (int64_t b : {7, 8, 13}) {
    SCOPED_TRACE("B=" + std::to_string(b));
    expect_same(data_parallel(mlp, b, false, 3), reference(mlp, b, false, 4, 3));
  }
}

TEST(DataParallel, ConvNetWithBatchNormMatchesTheReferenceBitwise) {
  expect_same(data_parallel(conv_net, 7, true, 3), reference(conv_net, 7, true, 4, 3));
  // Fewer rows than chunks: one chunk per row.
  expect_same(data_parallel(conv_net, 5, true, 2, {.chunks = 8}), reference(conv_net, 5, true, 8, 2));
}

TEST(DataParallel, ForwardWithAgreedBatchGivesTheSameBits) {
  expect_same(data_parallel(mlp, 13, false, 3, {.agreed_batch = true}), reference(mlp, 13, false, 4, 3));
}

TEST(DataParallel, StagedForwardGivesTheSameBits) {
  // One stage per layer (Note [Staged chunks]), one bucket per layer, two local chunks per rank.
  const int64_t chunks = 2 * comm().size();
  for (int64_t b : {2 * chunks + 1, 3 * chunks}) {
    SCOPED_TRACE("B=" + std::to_string(b));
    const TrainRun staged =
        data_parallel(mlp, b, false, 3, {.chunks = chunks, .staged = true, .bucket_sizes = {2, 2, 2}});
    expect_same(staged, data_parallel(mlp, b, false, 3, {.chunks = chunks}));
    expect_same(staged, reference(mlp, b, false, chunks, 3));
  }
}

// Buckets launched when each stage's backward finished, recorded per (stage, local chunk) by an
// identity node on each stage's input (its backward runs once the stage's backward finished; the
// first stage's input needs no gradient, so its probe does not run).
std::vector<std::vector<int64_t>> buckets_at_stage_ends(bool staged) {
  auto model = mlp();
  const int64_t chunks = 2 * comm().size(), b = 3 * chunks;
  DataParallel ddp(model, comm(), {.chunks = chunks, .bucket_sizes = {2, 2, 2}});
  const std::vector<DataParallel::Stage> layers = layer_stages(*model);
  std::vector<std::vector<int64_t>> seen(layers.size());
  std::vector<DataParallel::Stage> probed;
  for (std::size_t s = 0; s < layers.size(); ++s) {
    probed.push_back([&, s](const Tensor& x) {
      Tensor y = x.detach();
      if (autograd::needs_grad({&x})) {
        auto node = autograd::make_node("StageProbe", {&x}, [&, s](autograd::Node&, const autograd::TensorList& g) {
          seen[s].push_back(ddp.buckets_reduced());
          return autograd::TensorList{g[0]};
        });
        autograd::set_history({&y}, node);
      }
      return layers[s](y);
    });
  }
  // Unstaged: the probed layers composed into one stage, i.e. each chunk's whole forward in turn.
  const std::vector<DataParallel::Stage> whole{[&](const Tensor& x) {
    Tensor y = x;
    for (const auto& stage : probed) y = stage(y);
    return y;
  }};
  const Batch batch = batch_of(b, false, 3);
  const RowRange rows = ddp.local_rows(b);
  const Tensor x = batch.x.narrow(0, rows.begin, rows.size());
  cross_entropy(ddp.forward_staged(x, b, staged ? probed : whole), batch.y).backward();
  EXPECT_EQ(ddp.buckets_reduced(), 3);
  return seen;
}

TEST(DataParallel, WaitingAfterBackwardGivesTheSameBits) {
  // wait_in_backward off: backward launches the reductions, wait_gradients() writes the .grads.
  const int64_t chunks = std::max<int64_t>(4, comm().size());
  for (int64_t b : {8L, 11L}) {
    expect_same(data_parallel(mlp, b, false, 3, {.chunks = chunks}),
                data_parallel(mlp, b, false, 3, {.chunks = chunks, .staged = true, .wait_in_backward = false}));
  }
}

TEST(DataParallel, StagedBucketsCompleteInReverseStageOrder) {
  // Bucket k holds stage 2 - k's parameters. Staged, stage s's backward starts (for every chunk)
  // once the buckets of the later stages were launched, and its own bucket is launched as soon as
  // it finished in the rank's first chunk, the last to run.
  const std::vector<std::vector<int64_t>> staged = buckets_at_stage_ends(true);
  for (int64_t s = 1; s < 3; ++s) {
    EXPECT_EQ(staged[s], (std::vector<int64_t>{2 - s, 3 - s}))
        << "stage " << s << ": the rank's last, then first chunk";
  }
  // Unstaged (the check can fail): the rank's last chunk runs its whole backward before any bucket.
  const std::vector<std::vector<int64_t>> whole = buckets_at_stage_ends(false);
  for (int64_t s = 1; s < 3; ++s) {
    ASSERT_EQ(whole[s].size(), 2u) << "stage " << s;
    EXPECT_EQ(whole[s][0], 0) << "stage " << s;
  }
}

TEST(DataParallel, TheChunkCountChangesTheBits) {
  // The comparisons above can fail: another decomposition of the same batch gives other bits.
  const TrainRun four = reference(conv_net, 8, true, 4, 1), two = reference(conv_net, 8, true, 2, 1);
  bool all_same = four.losses == two.losses;
  for (std::size_t i = 0; i < four.params.size(); ++i) all_same = all_same && same_bits(four.params[i], two.params[i]);
  EXPECT_FALSE(all_same);
}

TEST(DataParallel, BucketSizeDoesNotChangeTheBits) {
  // 16-byte buckets: every parameter is a bucket of its own (the largest bias has 16 bytes).
  const TrainRun small = data_parallel(conv_net, 9, true, 2, {.chunks = 4, .bucket_bytes = 16});
  expect_same(small, reference(conv_net, 9, true, 4, 2));
  DataParallel probe(conv_net(), comm(), {.chunks = 4, .bucket_bytes = 16});
  EXPECT_EQ(probe.buckets().size(), probe.module().parameters().size());
  EXPECT_EQ(probe.buckets().front(), std::vector<int64_t>{9});  // fc.bias first: backward's order
}

TEST(DataParallel, CheckpointedModelGivesTheSameBits) {
  const ModelFn checkpointed = [] {
    auto inner = std::dynamic_pointer_cast<nn::Sequential>(conv_net());
    return std::make_shared<Checkpointed>(inner);
  };
  expect_same(data_parallel(checkpointed, 7, true, 2), reference(conv_net, 7, true, 4, 2));
}

TEST(DataParallel, TapeStreamingGivesTheSameBits) {
  expect_same(data_parallel(conv_net, 7, true, 2, {.stream = true}), reference(conv_net, 7, true, 4, 2));
}

TEST(DataParallel, GradientsAccumulateAcrossBackwardsLikePlainBackward) {
  auto model = mlp();
  DataParallel ddp(model, comm(), {.chunks = 4});
  const Batch batch = batch_of(8, false, 3);
  const RowRange rows = ddp.local_rows(8);
  for (int i = 0; i < 2; ++i) cross_entropy(ddp(batch.x.narrow(0, rows.begin, rows.size())), batch.y).backward();
  auto ref = mlp();
  double loss = 0;
  const std::vector<Tensor> once = reference_gradients(*ref, batch, 4, loss);
  const std::vector<Tensor> params = model->parameters();
  for (std::size_t p = 0; p < params.size(); ++p) {
    EXPECT_TRUE(same_bits(params[p].grad(), tree_sum({once[p], once[p]}))) << "parameter " << p;
  }
}

TEST(DataParallel, NoGradForwardReturnsTheGlobalOutputAndReducesNothing) {
  auto model = mlp();
  DataParallel ddp(model, comm(), {.chunks = 4});
  const Batch batch = batch_of(6, false, 9);
  const RowRange rows = ddp.local_rows(6);
  autograd::NoGradGuard no_grad;
  const Tensor out = ddp(batch.x.narrow(0, rows.begin, rows.size()));
  std::vector<Tensor> ref;
  auto plain = mlp();
  for (const RowRange& r : split_rows(6, 4)) ref.push_back((*plain)(batch.x.narrow(0, r.begin, r.size())));
  EXPECT_TRUE(same_bits(out, cat(ref, 0)));
  EXPECT_FALSE(out.requires_grad());
  EXPECT_TRUE(same_bits(ddp.gather(batch.y.narrow(0, rows.begin, rows.size())), batch.y));
}

TEST(DataParallel, RankZerosParametersAndBuffersReachEveryRank) {
  const auto make = [] {
    Generator gen(1 + comm().rank());  // every rank initializes differently
    auto m = std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
        std::make_shared<nn::Linear>(3, 4, true, &gen), std::make_shared<nn::BatchNorm1d>(4)});
    m->named_buffers()[0].second.fill_(comm().rank() + 0.5);  // running_mean
    return m;
  };
  for (bool broadcast : {true, false}) {
    auto model = make();
    DataParallel ddp(model, comm(), {.chunks = comm().size(), .broadcast_state = broadcast});
    std::vector<Tensor> state = model->parameters();
    for (const Tensor& b : model->buffers()) state.push_back(b.to(DType::f64));
    // Without the broadcast the ranks keep their own Linear weight, bias and running_mean (the rest agree).
    for (std::size_t i = 0; i < state.size(); ++i) {
      const bool differs = i <= 1 || i == 4;
      const Tensor all = comm().allgatherv(state[i].reshape({1, -1}));
      for (int r = 1; r < comm().size(); ++r) {
        EXPECT_EQ(same_bits(all.select(0, r), all.select(0, 0)), broadcast || !differs) << "rank " << r << ", " << i;
      }
    }
  }
}

// ---- bad inputs: the same error on every rank, naming the rank -------------------------------------

TEST(DataParallelBadInput, FewerChunksThanRanksOrNoModule) {
  if (comm().size() > 1) {
    EXPECT_ERROR_HAS(DataParallel(mlp(), comm(), {.chunks = 1}),
                     "chunks=1 is fewer than the " + std::to_string(comm().size()) + " ranks");
  }
  EXPECT_ERROR_HAS(DataParallel(nullptr, comm()), "the module is null");
  EXPECT_ERROR_HAS(DataParallel(mlp(), comm(), {.bucket_bytes = 0}), "bucket_bytes=0 must be at least 1");
}

TEST(DataParallelBadInput, MismatchedParameterShapesAreNamed) {
  if (comm().size() < 2) GTEST_SKIP() << "needs 2 ranks";
  const bool last = comm().rank() == comm().size() - 1;
  auto model = std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Linear>(4, 3), std::make_shared<nn::Linear>(3, last ? 5 : 2)});
  const std::string r = std::to_string(comm().size() - 1);
  EXPECT_ERROR_HAS(DataParallel(model, comm()),
                   "parameter '1.weight' (parameter 2) is f32 [2, 3] on rank 0 but f32 [5, 3] on rank " + r);
  auto fewer = last ? std::make_shared<nn::Linear>(4, 3, false) : std::make_shared<nn::Linear>(4, 3);
  EXPECT_ERROR_HAS(DataParallel(fewer, comm()), "rank 0's module has 2 parameters but rank " + r + "'s has 1");
}

TEST(DataParallelBadInput, BatchSmallerThanRanksOrWrongShare) {
  DataParallel ddp(mlp(), comm(), {.chunks = 4});
  const int n = comm().size();
  const bool last = comm().rank() == n - 1;
  if (n > 1) {
    // One row in all: rank 0 has it, the others none.
    const Tensor x = randn({comm().rank() == 0 ? 1 : 0, 6});
    EXPECT_ERROR_HAS(ddp(x), "a global batch of 1 rows is smaller than the " + std::to_string(n) + " ranks");
    EXPECT_ERROR_HAS(ddp.local_rows(1), "smaller than the");
  }
  if (n == 2 || n == 4) {
    // Rank 0 passes 3 rows, the others 1: B = 4 (2 ranks) or 6 (4 ranks); rank 0's share is 2 rows.
    const int64_t b = 3 + (n - 1);
    EXPECT_ERROR_HAS(
        ddp(randn({comm().rank() == 0 ? 3 : 1, 6})),
        "rank 0 passed 3 rows but its share of the global batch of " + std::to_string(b) + " rows is rows [0, 2)");
  }
  // The last rank's bad input: it sees its own error, the others which rank it was.
  const std::string who = "rank " + std::to_string(n - 1) + " passed ";
  EXPECT_ERROR_HAS(ddp(last ? Tensor() : randn({1, 6})), who + "an undefined input");
  EXPECT_ERROR_HAS(ddp(last ? scalar_tensor(1.0) : randn({1, 6})), who + "a 0-dim input");
}

TEST(DataParallelBadInput, AgreedBatchChecksThisRanksInput) {
  // Every rank passes the same kind of bad input: each throws on its own, before any collective.
  DataParallel ddp(mlp(), comm(), {.chunks = 4});
  const int n = comm().size();
  const std::string me = "rank " + std::to_string(comm().rank()) + " passed ";
  const RowRange rows = ddp.local_rows(9);
  EXPECT_ERROR_HAS(ddp.forward_agreed(randn({rows.size() + 1, 6}), 9),
                   me + std::to_string(rows.size() + 1) + " rows but its share of the global batch of 9 rows");
  EXPECT_ERROR_HAS(ddp.forward_agreed(Tensor(), 9), me + "an undefined input");
  EXPECT_ERROR_HAS(ddp.forward_agreed(scalar_tensor(1.0), 9), me + "a 0-dim input");
  if (n > 1) {
    EXPECT_ERROR_HAS(ddp.forward_agreed(randn({1, 6}), 1), "smaller than the");
  }
  // Nothing was issued: a good forward still runs.
  autograd::NoGradGuard no_grad;
  EXPECT_EQ(ddp.forward_agreed(randn({rows.size(), 6}), 9).size(0), 9);
}

TEST(DataParallelBadInput, StagesAndBucketSizesAreChecked) {
  EXPECT_ERROR_HAS(DataParallel(mlp(), comm(), {.bucket_sizes = {2, 2}}),
                   "bucket_sizes sum to 4 parameters but the module has 6 parameters that require grad");
  EXPECT_ERROR_HAS(DataParallel(mlp(), comm(), {.bucket_sizes = {2, 0, 4}}), "bucket_sizes[1]=0 must be at least 1");
  DataParallel ddp(mlp(), comm(), {.chunks = 4});
  const RowRange rows = ddp.local_rows(8);
  const Tensor x = randn({rows.size(), 6});
  EXPECT_ERROR_HAS(ddp.forward_staged(x, 8, {}), "forward_staged needs at least one stage");
  const std::vector<DataParallel::Stage> undefined{[](const Tensor& v) { return v; },
                                                   [](const Tensor&) { return Tensor(); }};
  EXPECT_ERROR_HAS(ddp.forward_staged(x, 8, undefined), "stage 1 returned an undefined tensor");
  const std::vector<DataParallel::Stage> rowless{[](const Tensor& v) { return sum(v); }};
  EXPECT_ERROR_HAS(ddp.forward_staged(x, 8, rowless), "DataParallel needs one output row per input row");
  EXPECT_ERROR_HAS(ddp.forward_staged(randn({rows.size() + 1, 6}), 8, layer_stages(ddp.module())),
                   "rows but its share of the global batch of 8 rows");
  // The failed forwards left nothing to reduce: a good staged step runs.
  const Batch batch = batch_of(8, false, 1);
  cross_entropy(ddp.forward_staged(batch.x.narrow(0, rows.begin, rows.size()), 8, layer_stages(ddp.module())), batch.y)
      .backward();
  EXPECT_EQ(ddp.buckets_reduced(), static_cast<int64_t>(ddp.buckets().size()));
}

TEST(DataParallelBadInput, ForwardWithoutBackwardIsNamedAtTheNextForward) {
  DataParallel ddp(mlp(), comm(), {.chunks = 4});
  const Batch batch = batch_of(8, false, 1);
  const RowRange rows = ddp.local_rows(8);
  const Tensor x = batch.x.narrow(0, rows.begin, rows.size());
  (void)ddp(x);
  EXPECT_ERROR_HAS(ddp(x), "parameter '0.weight' got no gradient in local chunk 0");
  // The error ends that step: the next forward and backward work.
  cross_entropy(ddp(x), batch.y).backward();
  EXPECT_EQ(ddp.buckets_reduced(), static_cast<int64_t>(ddp.buckets().size()));
}

TEST(DataParallelBadInput, AMissingWaitIsNamedAtTheNextForward) {
  DataParallel ddp(mlp(), comm(), {.chunks = 4, .wait_in_backward = false});
  const Batch batch = batch_of(8, false, 1);
  const RowRange rows = ddp.local_rows(8);
  const Tensor x = batch.x.narrow(0, rows.begin, rows.size());
  cross_entropy(ddp(x), batch.y).backward();
  EXPECT_ERROR_HAS(ddp(x), "the previous backward's reductions were never waited for");
  // A wait before the whole backward ran names the parameter still without a gradient.
  (void)ddp(x);
  EXPECT_ERROR_HAS(ddp.wait_gradients(), "parameter '0.weight' got no gradient in local chunk 0");
  EXPECT_ERROR_HAS(ddp(x), "parameter '0.weight' got no gradient in local chunk 0");
  // That ends the step: a whole step works again, and a second wait changes nothing.
  cross_entropy(ddp(x), batch.y).backward();
  ddp.wait_gradients();
  const Tensor grad = ddp.module().parameters()[0].grad().clone();
  ddp.wait_gradients();
  EXPECT_TRUE(same_bits(grad, ddp.module().parameters()[0].grad()));
}

TEST(DataParallelBadInput, ADiscardedStepLeavesNothingToReduce) {
  DataParallel ddp(mlp(), comm(), {.chunks = 4});
  const Batch batch = batch_of(8, false, 1);
  const RowRange rows = ddp.local_rows(8);
  const Tensor x = batch.x.narrow(0, rows.begin, rows.size());
  (void)ddp(x);
  ddp.discard_step();  // no backward: the next forward does not name the step
  const Tensor loss = cross_entropy(ddp(x), batch.y);
  loss.backward();
  EXPECT_EQ(ddp.buckets_reduced(), static_cast<int64_t>(ddp.buckets().size()));
  EXPECT_ERROR_HAS(ddp.discard_step(), "discard_step after backward launched");
}

TEST(DataParallelBadInput, OutputsMustHaveOneRowPerInputRow) {
  struct Summing : nn::Module {
    Summing() : Module("Summing") { register_parameter("w", ones({6})); }
    Tensor forward(const Tensor& x) override { return sum(mul(x, parameter("w"))); }
  };
  DataParallel ddp(std::make_shared<Summing>(), comm(), {.chunks = 4});
  const RowRange rows = ddp.local_rows(8);
  EXPECT_ERROR_HAS(ddp(randn({rows.size(), 6})), "DataParallel needs one output row per input row");
}

}  // namespace
}  // namespace strata::dist
