// TieredDLRM: forward and training steps against the plain-tensor DLRM of the model zoo with the
// same weights (SGD, rwsadagrad, adagrad; dot and cat; duplicates within and across bags), tiers,
// save/load round trip, and bad input that names the table and row and changes nothing.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <unistd.h>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/factories.h"
#include "core/pin_set.h"
#include "embeddings/criteo.h"
#include "embeddings/dlrm.h"
#include "models/optim/adagrad.h"
#include "models/optim/rowwise_adagrad.h"
#include "models/optim/sgd.h"
#include "models/zoo/dlrm.h"
#include "ops/softmax_loss.h"
#include "tests/cpp/error_text.h"

using namespace strata;
using namespace strata::emb;
using ::testing::HasSubstr;

namespace {

std::vector<float> values(const Tensor& t) {
  Tensor c = t.contiguous();
  std::vector<float> out(static_cast<std::size_t>(c.numel()));
  PinSet pins;
  pins.add(c, AccessMode::Read).acquire();
  std::memcpy(out.data(), c.data_ptr(), out.size() * sizeof(float));
  return out;
}

Tensor param(nn::Module& m, const std::string& name) {
  for (const auto& [k, v] : m.named_parameters())
    if (k == name) return v;
  return {};
}

/// One batch in both forms: spans for TieredDLRM, tensors (PyTorch-style offsets) for the zoo.
struct TestBatch {
  int64_t b = 0;
  std::vector<float> dense, targets;
  std::vector<std::vector<int64_t>> idx, off;  // off has b + 1 entries
  std::vector<std::vector<float>> w;

  std::vector<Bags> bags() const {
    std::vector<Bags> out;
    for (std::size_t k = 0; k < idx.size(); ++k)
      out.push_back({idx[k], off[k], w.empty() ? std::span<const float>() : w[k]});
    return out;
  }
  Tensor dense_tensor(int64_t n) const {
    Tensor t = empty({b, n});
    std::memcpy(t.data_ptr(), dense.data(), dense.size() * sizeof(float));
    return t;
  }
  Tensor target_tensor() const {
    Tensor t = empty({b, 1});
    std::memcpy(t.data_ptr(), targets.data(), targets.size() * sizeof(float));
    return t;
  }
  std::vector<Tensor> index_tensors() const {
    std::vector<Tensor> out;
    for (const auto& v : idx) out.push_back(tensor<int64_t>(v));
    return out;
  }
  std::vector<Tensor> offset_tensors() const {
    std::vector<Tensor> out;
    for (const auto& v : off) out.push_back(tensor<int64_t>(std::vector<int64_t>(v.begin(), v.end() - 1)));
    return out;
  }
  std::vector<Tensor> weight_tensors() const {
    std::vector<Tensor> out;
    for (const auto& v : w) out.push_back(tensor<float>(v));
    return out;
  }
};

/// A batch with duplicate rows inside bags and across the batch, and an empty bag.
TestBatch make_batch(const std::vector<int64_t>& rows, int64_t b, int64_t dense_n, uint32_t seed,
                     bool weighted = false) {
  TestBatch batch;
  batch.b = b;
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> u(0.f, 1.f);
  for (int64_t i = 0; i < b * dense_n; ++i) batch.dense.push_back(u(gen));
  for (int64_t i = 0; i < b; ++i) batch.targets.push_back(std::round(u(gen)));
  for (int64_t r : rows) {
    std::vector<int64_t> idx, off{0};
    std::vector<float> w;
    for (int64_t s = 0; s < b; ++s) {
      const int64_t len = s == 1 ? 0 : 1 + static_cast<int64_t>(gen() % 4);
      for (int64_t j = 0; j < len; ++j) {
        idx.push_back(j == 1 ? idx.back()
                             : static_cast<int64_t>(gen() % static_cast<uint32_t>(std::min<int64_t>(r, 3))));
        w.push_back(0.5f + u(gen));
      }
      off.push_back(static_cast<int64_t>(idx.size()));
    }
    batch.idx.push_back(idx);
    batch.off.push_back(off);
    if (weighted) batch.w.push_back(w);
  }
  return batch;
}

DLRMConfig config(std::vector<std::string> extra) {
  std::vector<std::string> args = {"--arch-sparse-feature-size",
                                   "4",
                                   "--arch-embedding-size",
                                   "10-7-5",
                                   "--arch-mlp-bot",
                                   "5-8-4",
                                   "--arch-mlp-top",
                                   "6-1",
                                   "--fast-budget",
                                   "1M",
                                   "--slow-tier-model",
                                   "off"};
  args.insert(args.end(), extra.begin(), extra.end());
  return parse_dlrm_args(args);
}

nn::zoo::DLRMOptions zoo_options(const DLRMConfig& c) {
  nn::zoo::DLRMOptions o;
  o.sparse_feature_size = c.arch_sparse_feature_size;
  o.embedding_sizes = c.table_rows();
  o.bottom_mlp = c.arch_mlp_bot;
  o.top_mlp = c.arch_mlp_top;
  o.interaction = to_string(c.arch_interaction_op);
  o.interaction_itself = c.arch_interaction_itself;
  return o;
}

/// Copies the zoo model's weights into the tiered one.
void copy_weights(nn::zoo::DLRM& zoo, TieredDLRM& m) {
  StateDict dense;
  for (const auto& [k, v] : zoo.state_dict())
    if (k.rfind("emb_l.", 0) != 0) dense.emplace_back(k, v);
  m.load_state_dict(dense);
  for (int64_t k = 0; k < m.num_tables(); ++k) {
    const auto w = values(param(zoo, "emb_l." + std::to_string(k) + ".weight"));
    m.table(k).copy_from(w.data());
  }
}

void expect_close(const std::vector<float>& a, const std::vector<float>& b, float tol, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (std::size_t i = 0; i < a.size(); ++i)
    ASSERT_NEAR(a[i], b[i], tol * (1.0f + std::fabs(b[i]))) << what << " element " << i;
}

std::vector<float> table_values(TieredDLRM& m, int64_t k) {
  std::vector<float> v(static_cast<std::size_t>(m.table(k).nvectors() * m.table(k).featuresize()));
  m.table(k).copy_to(v.data());
  return v;
}

/// Trains the zoo model and the tiered model side by side for `steps` steps on the same batches
/// and compares outputs, losses, and every parameter after each step.
void compare_training(const std::vector<std::string>& flags, int steps, bool weighted = false) {
  const DLRMConfig c = config(flags);
  TieredDLRM m(c);
  Generator gen(5);
  nn::zoo::DLRM zoo(zoo_options(c), &gen);
  copy_weights(zoo, m);

  std::vector<Tensor> emb_params, dense_params;
  for (const auto& [k, v] : zoo.named_parameters())
    (k.rfind("emb_l.", 0) == 0 ? emb_params : dense_params).push_back(v);
  std::unique_ptr<optim::Optimizer> opt_dense, opt_emb;
  if (c.optimizer == OptimizerKind::SGD) {
    std::vector<Tensor> all = zoo.parameters();
    opt_dense = std::make_unique<optim::SGD>(all, optim::SGDOptions{.lr = c.learning_rate});
  } else if (c.optimizer == OptimizerKind::Adagrad) {
    opt_dense = std::make_unique<optim::Adagrad>(zoo.parameters(), optim::AdagradOptions{.lr = c.learning_rate});
  } else {
    opt_dense = std::make_unique<optim::Adagrad>(dense_params, optim::AdagradOptions{.lr = c.learning_rate});
    opt_emb = std::make_unique<optim::RowWiseAdagrad>(emb_params, optim::RowWiseAdagradOptions{.lr = c.learning_rate});
  }
  for (int s = 0; s < steps; ++s) {
    const TestBatch batch = make_batch(c.table_rows(), 6, c.arch_mlp_bot[0], 100 + s, weighted);
    const auto bags = batch.bags();
    // Forward.
    const Tensor out = m.forward(batch.dense, bags);
    zoo.zero_grad();
    Tensor zout = zoo.forward(batch.dense_tensor(c.arch_mlp_bot[0]), batch.index_tensors(), batch.offset_tensors(),
                              weighted ? batch.weight_tensors() : std::vector<Tensor>{});
    expect_close(values(out), values(zout), 1e-6f, "forward at step " + std::to_string(s));
    // A step.
    Tensor zloss = c.loss_function == LossFunction::MSE ? mse_loss(zout, batch.target_tensor())
                                                        : binary_cross_entropy(zout, batch.target_tensor());
    zloss.backward();
    opt_dense->step();
    if (opt_emb) opt_emb->step();
    const float loss = m.train_step(batch.dense, bags, batch.targets);
    EXPECT_NEAR(loss, zloss.item<float>(), 1e-6f * (1 + std::fabs(loss))) << "step " << s;
    // Updates are ~1e-3 of the weights: compare to a few float32 ulps of the weights.
    for (const auto& [k, v] : m.state_dict()) expect_close(values(v), values(param(zoo, k)), 4e-7f, k);
    for (int64_t k = 0; k < m.num_tables(); ++k)
      expect_close(table_values(m, k), values(param(zoo, "emb_l." + std::to_string(k) + ".weight")), 4e-7f,
                   "emb_l." + std::to_string(k));
  }
  EXPECT_EQ(m.steps(), steps);
}

std::filesystem::path temp_dir() {
  auto dir = std::filesystem::temp_directory_path() / ("strata_dlrm_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return dir;
}

}  // namespace

TEST(TieredDLRM, MatchesTheZooDLRMWithSGD) { compare_training({"--learning-rate", "0.1"}, 4); }

TEST(TieredDLRM, MatchesTheZooDLRMWithCatInteractionAndBCE) {
  compare_training(
      {"--arch-interaction-op", "cat", "--arch-mlp-top", "16-1", "--loss-function", "bce", "--learning-rate", "0.2"},
      3);
}

TEST(TieredDLRM, MatchesTheZooDLRMWithSelfInteractionAndWeights) {
  compare_training({"--arch-interaction-itself", "--learning-rate", "0.1"}, 3, /*weighted=*/true);
}

TEST(TieredDLRM, MatchesTheZooDLRMWithRowWiseAdagrad) {
  compare_training({"--optimizer", "rwsadagrad", "--learning-rate", "0.05"}, 4);
}

TEST(TieredDLRM, MatchesTheZooDLRMWithAdagrad) {
  compare_training({"--optimizer", "adagrad", "--learning-rate", "0.05"}, 4);
}

TEST(TieredDLRM, MatchesTheZooDLRMWithTablesInTheSlowTier) {
  compare_training({"--emb-policy", "simple", "--learning-rate", "0.1"}, 2);
}

TEST(TieredDLRM, FixedWeightedPoolingIsPlainSum) {
  const DLRMConfig plain = config({});
  const DLRMConfig fixed = config({"--weighted-pooling", "fixed"});
  TieredDLRM a(plain), b(fixed);
  const TestBatch batch = make_batch(plain.table_rows(), 5, 5, 3);
  EXPECT_EQ(values(a.forward(batch.dense, batch.bags())), values(b.forward(batch.dense, batch.bags())));
}

TEST(TieredDLRM, TablesAreInitializedLikeTheReference) {
  const DLRMConfig c = config({"--arch-embedding-size", "100-4"});
  TieredDLRM m(c);
  for (int64_t k = 0; k < 2; ++k) {
    const auto v = table_values(m, k);
    const float bound = std::sqrt(1.0f / static_cast<float>(m.table(k).nvectors()));
    float lo = 1, hi = -1;
    for (float x : v) lo = std::min(lo, x), hi = std::max(hi, x);
    EXPECT_GE(lo, -bound);
    EXPECT_LE(hi, bound);
    EXPECT_LT(lo, -0.5f * bound);  // spread over the interval, not constant
    EXPECT_GT(hi, 0.5f * bound);
  }
  // Same seed, same weights; another seed, other weights.
  TieredDLRM same(c), other(config({"--arch-embedding-size", "100-4", "--numpy-rand-seed", "9"}));
  EXPECT_EQ(table_values(m, 0), table_values(same, 0));
  EXPECT_NE(table_values(m, 0), table_values(other, 0));
}

TEST(TieredDLRM, PlacesTablesPerPolicyAndBudget) {
  // 3 tables of 4096 rows × 16 f32 = 256 KiB each (768 KiB).
  const std::vector<std::string> big = {
      "--arch-sparse-feature-size", "16", "--arch-mlp-bot", "5-16", "--arch-embedding-size", "4096-4096-4096"};
  auto with = [&](std::vector<std::string> extra) {
    auto a = big;
    a.insert(a.end(), extra.begin(), extra.end());
    return config(a);
  };
  // auto, everything fits: plain tables in DRAM, no slow tier.
  TieredDLRM fits(with({"--fast-budget", "1M"}));
  EXPECT_FALSE(fits.uses_slow_tier());
  for (int64_t k = 0; k < 3; ++k) EXPECT_EQ(fits.managed_table(k), nullptr);
  EXPECT_THAT(fits.describe_tables(), HasSubstr("table 2: 4096 rows x 16 f32 (256.00 KiB), in DRAM"));
  // auto, tables 3x the budget: every table is an Auto CachedTable whose cache fills what is left,
  // in the process's tiered memory (Note [One tiered memory per process]).
  memory::Heap& fast_heap = memory::tiered_memory().fast_heap();
  const std::size_t fast_before = fast_heap.used();
  TieredDLRM over(with({"--fast-budget", "256K"}));
  ASSERT_TRUE(over.uses_slow_tier());
  EXPECT_EQ(&over.memory(), &memory::tiered_memory());
  EXPECT_GT(over.cache_fraction(), 0.05);
  EXPECT_LT(over.cache_fraction(), 0.33);
  for (int64_t k = 0; k < 3; ++k) {
    ASSERT_NE(over.managed_table(k), nullptr);
    EXPECT_EQ(over.managed_table(k)->policy(), EmbeddingPolicy::Auto);
    ASSERT_NE(over.managed_table(k)->cached_table(), nullptr);
    EXPECT_LE(over.managed_table(k)->cache_rows(), static_cast<int64_t>(over.cache_fraction() * 4096) + 1);
  }
  const TestBatch batch = make_batch(over.config().table_rows(), 64, 5, 3);
  for (int step = 0; step < 20; ++step) over.train_step(batch.dense, batch.bags(), batch.targets);
  // The tables keep to their budget; what else the step left in the fast tier is the dense
  // parameters and their gradients (SGD keeps no state), 64-byte aligned.
  std::size_t dense = 0;
  for (const auto& [name, t] : over.state_dict()) dense += 2 * ((t.nbytes() + 63) / 64 * 64);
  EXPECT_LE(fast_heap.used() - fast_before, (std::size_t{256} << 10) + dense);
  EXPECT_THAT(over.describe_tables(), HasSubstr("policy auto, base rows in the slow tier, cache of"));
  // Explicit policies are honored even when the tables fit.
  for (const char* p : {"static", "dynamic"}) {
    TieredDLRM m(with({"--fast-budget", "4M", "--emb-policy", p, "--cache-fraction", "0.25"}));
    EXPECT_EQ(policy_name(m.managed_table(1)->policy()), std::string(p));
    EXPECT_EQ(m.cache_fraction(), 0.25);
    EXPECT_NE(m.managed_table(1)->cached_table(), nullptr);
  }
  TieredDLRM simple(with({"--emb-policy", "simple"}));
  for (int64_t k = 0; k < 3; ++k)
    EXPECT_TRUE(simple.table(k).in_slow(simple.table(k).rowpointer(0, AccessContext::Read)));
  EXPECT_THAT(simple.describe_tables(), HasSubstr("policy simple, in the slow tier"));
  EXPECT_THAT(simple.describe_memory(),
              AllOf(HasSubstr("embedding rows: 1.0 MiB budget"), HasSubstr("slow tier: pm:")));
  // What does not fit is named.
  EXPECT_THAT(testing_util::error_of([&] { TieredDLRM m(with({"--fast-budget", "256K", "--cache-fraction", "0.9"})); }),
              HasSubstr("--cache-fraction 0.9: the caches would need"));
  EXPECT_THAT(testing_util::error_of([&] { TieredDLRM m(with({"--fast-budget", "16K"})); }),
              HasSubstr("--fast-budget: 16.00 KiB cannot hold the cached tables' pointer tables"));
  // A distributed config is DistributedDLRM's (Note [Distributed strata-dlrm]), never silently one process.
  EXPECT_THAT(testing_util::error_of([&] { TieredDLRM m(with({"--dist-backend=mpi"})); }),
              HasSubstr("--dist-backend: TieredDLRM trains in one process"));
}

TEST(TieredDLRM, EveryPolicyTrainsToTheSameValues) {
  // Skewed batches with repeats; the tables are 3x the fast budget except for the all-DRAM run.
  const std::vector<std::string> base = {"--arch-sparse-feature-size",
                                         "16",
                                         "--arch-mlp-bot",
                                         "5-16",
                                         "--arch-embedding-size",
                                         "4096-4096-4096",
                                         "--mini-batch-size",
                                         "64",
                                         "--num-batches",
                                         "6",
                                         "--data-generation",
                                         "zipf",
                                         "--zipf-alpha",
                                         "1.1",
                                         "--num-indices-per-lookup",
                                         "8",
                                         "--optimizer",
                                         "rwsadagrad",
                                         "--learning-rate",
                                         "0.05",
                                         "--slow-tier-model",
                                         "off"};
  auto run = [&](std::vector<std::string> extra, std::vector<float>& losses, std::vector<std::vector<float>>& tables,
                 double& hit_rate) {
    auto a = base;
    a.insert(a.end(), extra.begin(), extra.end());
    const DLRMConfig c = parse_dlrm_args(a);
    TieredDLRM m(c);
    auto src = make_index_source(c);
    Batch b;
    std::vector<Bags> bags(3);
    while (src->next(b)) {
      for (int k = 0; k < 3; ++k) bags[k] = b.bags(k);
      losses.push_back(m.train_step(b.dense, bags, b.targets));
    }
    for (int64_t k = 0; k < 3; ++k) tables.push_back(table_values(m, k));
    hit_rate = m.counters().cache_hit_rate;
  };
  std::vector<float> ref_losses;
  std::vector<std::vector<float>> ref_tables;
  double ref_hits = 0;
  run({"--fast-budget", "2M"}, ref_losses, ref_tables, ref_hits);
  EXPECT_EQ(ref_hits, -1.0);  // no cached table
  for (const char* p : {"auto", "static", "dynamic", "simple"}) {
    std::vector<float> losses;
    std::vector<std::vector<float>> tables;
    double hits = 0;
    run({"--fast-budget", "256K", "--emb-policy", p}, losses, tables, hits);
    EXPECT_EQ(losses, ref_losses) << p;
    EXPECT_EQ(tables, ref_tables) << p;
    if (std::string(p) == "simple") {
      EXPECT_EQ(hits, -1.0);
    } else {
      EXPECT_GT(hits, 0.0) << p;  // skewed lookups hit the cache
      EXPECT_LE(hits, 1.0) << p;
    }
  }
}

TEST(TieredDLRM, CountsTrafficPerTierAndTimesPhases) {
  TieredDLRM m(config({"--emb-policy", "simple", "--slow-tier-model", "100,50,0"}));
  const TestBatch batch = make_batch(m.config().table_rows(), 6, 5, 1);
  m.train_step(batch.dense, batch.bags(), batch.targets);
  const DLRMTierCounters c = m.counters();
  std::uint64_t n = 0;
  for (const auto& v : batch.idx) n += v.size();
  EXPECT_EQ(c.rows_looked_up, n);
  EXPECT_GT(c.rows_updated, 0u);
  EXPECT_LE(c.rows_updated, n);
  EXPECT_EQ(c.slow_bytes_read, (c.rows_looked_up + c.rows_updated) * 16);  // every row is in the slow tier
  EXPECT_EQ(c.slow_bytes_written, c.rows_updated * 16);
  EXPECT_EQ(c.fast_bytes_read, 0u);
  EXPECT_EQ(c.throttle.bytes_read, c.slow_bytes_read);
  EXPECT_EQ(m.times().steps, 1);
  EXPECT_GT(m.times().total(), 0.0);
  m.reset_stats();
  EXPECT_EQ(m.counters().rows_looked_up, 0u);
  EXPECT_EQ(m.times().steps, 0);
}

TEST(TieredDLRM, LearningRateScheduleFollowsTheReference) {
  TieredDLRM m(config({"--learning-rate", "1.0", "--lr-num-warmup-steps", "4", "--lr-decay-start-step", "6",
                       "--lr-num-decay-steps", "2"}));
  // Steps 1..3 warm up (s/4), 4..5 keep the last warmup rate, 6..7 decay ((2-(s-6))/2)^2, then frozen.
  const std::vector<double> want = {0.25, 0.5, 0.75, 0.75, 0.75, 1.0, 0.25, 0.25, 0.25};
  const TestBatch batch = make_batch(m.config().table_rows(), 2, 5, 9);
  for (double lr : want) {
    EXPECT_DOUBLE_EQ(m.next_learning_rate(), lr) << "step " << m.steps() + 1;
    m.train_step(batch.dense, batch.bags(), batch.targets);
  }
  TieredDLRM plain(config({"--learning-rate", "0.3"}));
  EXPECT_DOUBLE_EQ(plain.next_learning_rate(), 0.3);
}

TEST(TieredDLRM, SaveLoadRoundTrip) {
  const auto dir = temp_dir();
  const std::string path = (dir / "model.ckpt").string();
  for (const char* opt : {"sgd", "rwsadagrad", "adagrad"}) {
    const DLRMConfig c = config({"--optimizer", opt, "--learning-rate", "0.05"});
    TieredDLRM a(c);
    for (int s = 0; s < 3; ++s) {
      const TestBatch batch = make_batch(c.table_rows(), 4, 5, 20 + s);
      a.train_step(batch.dense, batch.bags(), batch.targets);
    }
    a.save(path, {{"epoch", "0"}});
    TieredDLRM b(config({"--optimizer", opt, "--learning-rate", "0.05", "--numpy-rand-seed", "77"}));
    const CheckpointMetadata meta = b.load(path);
    EXPECT_EQ(b.steps(), 3) << opt;
    bool has_epoch = false;
    for (const auto& [k, v] : meta) has_epoch |= k == "epoch" && v == "0";
    EXPECT_TRUE(has_epoch);
    for (int64_t k = 0; k < a.num_tables(); ++k) EXPECT_EQ(table_values(a, k), table_values(b, k)) << opt;
    // Continuing from the checkpoint is exactly continuing the original (optimizer state included).
    for (int s = 0; s < 2; ++s) {
      const TestBatch batch = make_batch(c.table_rows(), 4, 5, 40 + s);
      EXPECT_EQ(a.train_step(batch.dense, batch.bags(), batch.targets),
                b.train_step(batch.dense, batch.bags(), batch.targets))
          << opt << " step " << s;
    }
    for (int64_t k = 0; k < a.num_tables(); ++k) EXPECT_EQ(table_values(a, k), table_values(b, k)) << opt;
  }
  std::filesystem::remove_all(dir);
}

TEST(TieredDLRM, LoadRefusesOtherArchitecturesAndFiles) {
  const auto dir = temp_dir();
  const std::string path = (dir / "model.ckpt").string();
  TieredDLRM a(config({}));
  a.save(path);
  TieredDLRM other(config({"--arch-embedding-size", "10-7-6"}));
  const auto before = table_values(other, 2);
  EXPECT_THAT(testing_util::error_of([&] { other.load(path); }),
              HasSubstr("the checkpoint's arch_embedding_size is '10-7-5' but this model's is '10-7-6'"));
  EXPECT_EQ(table_values(other, 2), before);
  TieredDLRM ada(config({"--optimizer", "adagrad"}));
  EXPECT_THAT(testing_util::error_of([&] { ada.load(path); }),
              HasSubstr("the checkpoint's optimizer is 'sgd' but this model's is 'adagrad'"));
  EXPECT_THAT(testing_util::error_of([&] { a.load((dir / "missing.ckpt").string()); }), HasSubstr("missing.ckpt"));
  std::FILE* f = std::fopen((dir / "junk.ckpt").c_str(), "wb");
  std::fputs("not a checkpoint at all", f);
  std::fclose(f);
  EXPECT_THAT(testing_util::error_of([&] { a.load((dir / "junk.ckpt").string()); }), HasSubstr("junk.ckpt"));
  std::filesystem::remove_all(dir);
}

TEST(TieredDLRM, BadIndicesNameTheTableAndRowAndChangeNothing) {
  TieredDLRM m(config({}));
  TestBatch batch = make_batch(m.config().table_rows(), 3, 5, 4);
  const auto t2 = table_values(m, 2);
  const auto w = values(m.state_dict()[0].second);
  batch.idx[2][1] = 5;  // table 2 has 5 rows
  EXPECT_THAT(testing_util::error_of([&] { m.train_step(batch.dense, batch.bags(), batch.targets); }),
              AllOf(HasSubstr("table 2"), HasSubstr("row 5 is out of range [0, 5)")));
  batch.idx[2][1] = -1;
  EXPECT_THAT(testing_util::error_of([&] { m.train_step(batch.dense, batch.bags(), batch.targets); }),
              AllOf(HasSubstr("table 2"), HasSubstr("row -1")));
  EXPECT_EQ(table_values(m, 2), t2);
  EXPECT_EQ(values(m.state_dict()[0].second), w);
  EXPECT_EQ(m.steps(), 0);
}

// Issue 24: a NaN in the dense input or a per-sample weight reaches the loss, as in PyTorch (relu
// keeps NaN: Note [ReLU and NaN]); before, relu turned it into 0, the loss stayed finite and the
// parameters silently went NaN.
TEST(TieredDLRM, NaNInTheBatchMakesTheLossNaN) {
  for (bool in_weights : {false, true}) {
    SCOPED_TRACE(in_weights ? "per-sample weight" : "dense feature");
    TieredDLRM m(config({"--learning-rate", "0.1"}));
    TestBatch batch = make_batch(m.config().table_rows(), 3, 5, 4, /*weighted=*/true);
    if (in_weights)
      batch.w[1][0] = std::numeric_limits<float>::quiet_NaN();
    else
      batch.dense[2] = std::numeric_limits<float>::quiet_NaN();
    EXPECT_TRUE(std::isnan(m.train_step(batch.dense, batch.bags(), batch.targets)));
    // The loss of the same batch, evaluated again, is NaN too.
    EXPECT_TRUE(std::isnan(m.evaluate(batch.dense, batch.bags(), batch.targets)));
  }
}

// Note [DLRM finite check]: --check-finite names the first parameter that went NaN, the step and
// where the NaN came from; without it the step returns NaN and goes on.
TEST(TieredDLRM, CheckFiniteNamesTheFirstNonFiniteParameterAndStep) {
  TieredDLRM m(config({"--check-finite", "--learning-rate", "0.1"}));
  EXPECT_TRUE(m.config().check_finite);
  const TestBatch good = make_batch(m.config().table_rows(), 3, 5, 4, /*weighted=*/true);
  EXPECT_TRUE(std::isfinite(m.train_step(good.dense, good.bags(), good.targets)));  // a finite step passes
  TestBatch bad = good;
  bad.dense[2] = std::numeric_limits<float>::quiet_NaN();  // sample 0, feature 2 (sample 1's bags are empty)
  const std::string msg = testing_util::error_of([&] { m.train_step(bad.dense, bad.bags(), bad.targets); });
  EXPECT_THAT(msg, HasSubstr("--check-finite: after step 2, parameter bot_l.0.weight (Tensor[8, 5] f32) went "
                             "non-finite"));
  EXPECT_THAT(msg, HasSubstr("the loss was nan"));
  EXPECT_THAT(msg, HasSubstr("also non-finite: bot_l.0.bias"));
  EXPECT_THAT(msg, HasSubstr("emb_l.0.weight"));
  EXPECT_THAT(msg, HasSubstr("the batch's dense features hold nan (sample 0, feature 2)"));
  // A NaN per-sample weight makes rows of its table NaN (the MLPs too, through the loss).
  TieredDLRM w(config({"--check-finite", "--learning-rate", "0.1"}));
  TestBatch wb = good;
  wb.w[2][0] = std::numeric_limits<float>::infinity();
  EXPECT_THAT(testing_util::error_of([&] { w.train_step(wb.dense, wb.bags(), wb.targets); }),
              AllOf(HasSubstr("--check-finite: after step 1, parameter "), HasSubstr("emb_l.2.weight"),
                    HasSubstr("table 2's per-sample weights hold inf (lookup 0)")));
  // Without the flag the same step returns NaN and does not throw.
  TieredDLRM plain(config({"--learning-rate", "0.1"}));
  EXPECT_TRUE(std::isnan(plain.train_step(bad.dense, bad.bags(), bad.targets)));
}

TEST(TieredDLRM, BadShapesAreNamed) {
  TieredDLRM m(config({}));
  const TestBatch batch = make_batch(m.config().table_rows(), 3, 5, 4);
  auto bags = batch.bags();
  EXPECT_THAT(
      testing_util::error_of([&] { m.train_step(std::span<const float>(batch.dense).first(14), bags, batch.targets); }),
      HasSubstr("expected dense features [3, 5] (15 floats), got 14 floats"));
  EXPECT_THAT(
      testing_util::error_of([&] { m.train_step(batch.dense, std::span<const Bags>(bags).first(2), batch.targets); }),
      HasSubstr("expected bags for 3 tables, got 2"));
  EXPECT_THAT(
      testing_util::error_of([&] { m.train_step(batch.dense, bags, std::span<const float>(batch.targets).first(2)); }),
      HasSubstr("expected 3 targets, got 2"));
  auto short_bags = bags;
  short_bags[1].offsets = short_bags[1].offsets.first(3);
  EXPECT_THAT(testing_util::error_of([&] { m.forward(batch.dense, short_bags); }),
              HasSubstr("table 1: expected 3 bags (one per sample; 4 offsets), got 3 offsets"));
  EXPECT_THAT(testing_util::error_of([&] { m.table(3); }), HasSubstr("table 3 does not exist"));
}

TEST(TieredDLRM, RefusesWhatTheProcessMemoryCannotHold) {
  // 4 tables of 2^28 rows x 16 f32 = 64 GiB: more than the process's fast tier (at most the
  // machine's memory) even under a budget that would hold them.
  const std::vector<std::string> huge = {"--arch-sparse-feature-size",
                                         "16",
                                         "--arch-mlp-bot",
                                         "5-16",
                                         "--arch-embedding-size",
                                         "268435456-268435456-268435456-268435456"};
  auto with = [&](std::vector<std::string> extra) {
    auto a = huge;
    a.insert(a.end(), extra.begin(), extra.end());
    return config(a);
  };
  EXPECT_THAT(
      testing_util::error_of([&] { TieredDLRM m(with({"--fast-budget", "1T"})); }),
      AllOf(HasSubstr("--fast-budget: the tables need 64.00 GiB of fast memory but the process's fast tier has"),
            HasSubstr("STRATA_FAST_BYTES")));
  // 2^40-row tables in the slow tier: more than its limit or its filesystem's free space.
  EXPECT_THAT(testing_util::error_of([&] {
                TieredDLRM m(config({"--arch-sparse-feature-size", "16", "--arch-mlp-bot", "5-16",
                                     "--arch-embedding-size", "1099511627776", "--emb-policy", "simple"}));
              }),
              AllOf(HasSubstr("--slow-dir: the embedding tables need"), HasSubstr("has"),
                    HasSubstr("scale the tables down (--scale-rows)")));
  // One process, one slow tier: another directory than the existing tier's is refused.
  const std::filesystem::path other = std::filesystem::path(::testing::TempDir()) / "strata-other-slow-dir";
  std::filesystem::create_directories(other);
  EXPECT_THAT(
      testing_util::error_of([&] { TieredDLRM m(config({"--emb-policy", "simple", "--slow-dir", other.string()})); }),
      AllOf(HasSubstr("--slow-dir '" + other.string() + "': this process's slow tier is already in"),
            HasSubstr("one process has one slow tier")));
  std::filesystem::remove(other);
  // The existing tier's own directory, named another way, is accepted.
  TieredDLRM same(config({"--emb-policy", "simple", "--slow-dir", memory::tiered_memory().config().slow_dir + "/."}));
  EXPECT_TRUE(same.uses_slow_tier());
}

TEST(TieredDLRM, SetsTheProcessSlowTierModel) {
  TieredDLRM m(config({"--emb-policy", "simple", "--slow-tier-model", "100,50,0"}));
  EXPECT_EQ(memory::tiered_memory().throttle().model().read_gbps, 100.0);
  EXPECT_EQ(memory::tiered_memory().throttle().model().write_gbps, 50.0);
  EXPECT_THAT(m.describe_memory(), HasSubstr("100"));
  // auto leaves the process's model as it is.
  TieredDLRM a(config({"--emb-policy", "simple", "--slow-tier-model", "auto"}));
  EXPECT_EQ(memory::tiered_memory().throttle().model().read_gbps, 100.0);
  TieredDLRM off(config({"--emb-policy", "simple", "--slow-tier-model", "off"}));
  EXPECT_FALSE(memory::tiered_memory().throttle().enabled());
  EXPECT_THAT(off.describe_memory(), HasSubstr("model off"));
}

namespace {

/// A raw Criteo TSV of `n` lines (label, 13 dense, 26 hex hashes; some fields empty).
std::string write_tsv(const std::filesystem::path& dir, int n) {
  const std::string path = (dir / "day.tsv").string();
  std::FILE* f = std::fopen(path.c_str(), "w");
  for (int i = 0; i < n; ++i) {
    std::fprintf(f, "%d", i % 2);
    for (int j = 0; j < 13; ++j) std::fprintf(f, "\t%s", j == 3 ? "" : std::to_string(i * 7 + j).c_str());
    for (int j = 0; j < 26; ++j) std::fprintf(f, "\t%08x", 0x9e3779b9u * static_cast<unsigned>(i * 26 + j + 1));
    std::fprintf(f, "\n");
  }
  std::fclose(f);
  return path;
}

}  // namespace

TEST(DLRMData, EveryGenerationFeedsTheModel) {
  const auto dir = temp_dir();
  // Trace files for the synthetic generator, one per table.
  for (int k = 0; k < 3; ++k) {
    std::FILE* f = std::fopen((dir / ("dist_emb_" + std::to_string(k) + ".log")).c_str(), "w");
    std::fputs("0, 1, 2, 3, 4\n0, 1, 2\n0.3, 0.7, 1.0\n", f);
    std::fclose(f);
  }
  const std::string tsv = write_tsv(dir, 10);
  const std::vector<std::vector<std::string>> runs = {
      {"--data-generation", "random"},
      {"--data-generation", "random", "--rand-data-dist", "gaussian", "--rand-data-mu", "2", "--rand-data-max", "4"},
      {"--data-generation", "zipf", "--zipf-alpha", "1.2", "--reuse", "0.3", "--num-indices-per-lookup", "4"},
      {"--data-generation", "synthetic", "--data-trace-file", (dir / "dist_emb_j.log").string()},
  };
  for (const auto& flags : runs) {
    auto args = flags;
    args.insert(args.end(), {"--mini-batch-size", "4", "--num-batches", "3"});
    const DLRMConfig c = config(args);
    auto source = make_index_source(c);
    EXPECT_EQ(source->num_batches(), 3) << flags[1];
    EXPECT_EQ(source->num_tables(), 3);
    TieredDLRM m(c);
    Batch b;
    std::vector<Bags> bags(3);
    int steps = 0;
    while (source->next(b)) {
      for (int k = 0; k < 3; ++k) bags[k] = b.bags(k);
      EXPECT_TRUE(std::isfinite(m.train_step(b.dense, bags, b.targets))) << flags[1];
      ++steps;
    }
    EXPECT_EQ(steps, 3) << flags[1];
  }
  EXPECT_THAT(testing_util::error_of([&] { make_index_source(config({"--data-generation", "zipf"})); }),
              HasSubstr("--data-generation zipf (--num-indices-per-lookup 10"));
  // The random generator is the index source's, draw for draw.
  {
    const DLRMConfig c = config({"--mini-batch-size", "4", "--num-batches", "2"});
    RandomConfig r;
    r.rows = c.table_rows();
    r.num_dense = 5;
    r.batch_size = 4;
    r.num_batches = 2;
    RandomSource direct(r);
    auto ours = make_index_source(c);
    Batch x, y;
    while (direct.next(x)) {
      ASSERT_TRUE(ours->next(y));
      EXPECT_EQ(x.dense, y.dense);
      for (int k = 0; k < 3; ++k) EXPECT_EQ(x.tables[k].indices, y.tables[k].indices);
    }
  }
  // Criteo raw text, preprocessed as the reference does: 26 tables whose rows are the data's
  // counts (scaled down here), 13 dense features; the train split is days 0..5.
  {
    const DLRMConfig flags = parse_dlrm_args(
        {"--preset", "kaggle", "--scale-rows", "0.5", "--data-generation", "dataset", "--raw-data-file", tsv,
         "--mini-batch-size", "4", "--fast-budget", "8M", "--num-batches", "0", "--test-mini-batch-size", "16"});
    const DLRMConfig c = with_dataset_rows(flags);
    EXPECT_EQ(c.arch_embedding_size, dataset_counts(flags));
    EXPECT_EQ(c.table_rows()[0],
              std::max<int64_t>(1, std::llround(0.5 * static_cast<double>(c.arch_embedding_size[0]))));
    auto source = make_index_source(c);
    EXPECT_EQ(source->num_batches(), 3);  // days of 2, 2, 2, 1, 1, 1, 1: 9 train samples in batches of 4
    auto test = make_index_source(c, CriteoSplit::Test);
    EXPECT_EQ(test->num_batches(), 1);
    EXPECT_EQ(test->batch_size(), 16);
    TieredDLRM m(c);
    Batch b;
    std::vector<Bags> bags(26);
    int64_t samples = 0;
    while (source->next(b)) {
      for (int k = 0; k < 26; ++k) bags[k] = b.bags(k);
      m.train_step(b.dense, bags, b.targets);
      samples += b.batch;
    }
    EXPECT_EQ(samples, 9);
  }
  std::filesystem::remove_all(dir);
}

TEST(DLRMData, BadDatasetIdsNameTheFileOrTheTableAndRow) {
  const auto dir = temp_dir();
  // 26 tables of 10 rows (no wrapping): an id of 50 is out of range.
  std::vector<int32_t> rec(40, 1);
  rec[14 + 5] = 50;
  const std::string bin = (dir / "data.bin").string();
  CriteoBinarySource::write(bin, rec);
  std::string rows;
  for (int k = 0; k < 26; ++k) rows += (k ? "-" : "") + std::string("10");
  const DLRMConfig c = parse_dlrm_args({"--arch-embedding-size", rows, "--arch-mlp-bot", "13-2", "--data-generation",
                                        "dataset", "--processed-data-file", bin, "--mini-batch-size", "1"});
  auto source = make_index_source(c);
  Batch b;
  const std::string msg = testing_util::error_of([&] { source->next(b); });
  EXPECT_THAT(msg, HasSubstr(bin));
  EXPECT_THAT(msg, HasSubstr("50"));
  std::filesystem::remove_all(dir);
}
