// The embedding stage as an autograd node (Note [Embedding stage]) and the reference's table tricks in
// TieredDLRM (Note [DLRM table kinds]): the node's backward is the fused update inside
// loss.backward(); every parameter's gradient (quotient and remainder rows for mult/add/concat,
// mixed-dimension rows and projections, learned pooling weights) against central finite
// differences of the loss on a tiny model; validation of logical indices before anything changes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "autograd/grad_mode.h"
#include "core/factories.h"
#include "core/pin_set.h"
#include "embeddings/dlrm.h"
#include "embeddings/dlrm_config.h"
#include "embeddings/embedding_stage.h"
#include "embeddings/reference.h"
#include "memory/heap.h"
#include "ops/binary.h"
#include "ops/reduction.h"
#include "tests/cpp/bitwise.h"
#include "tests/cpp/error_text.h"

using namespace strata;
using namespace strata::emb;
using ::testing::HasSubstr;
namespace ref = strata::emb::reference;

namespace {

using strata::testing_util::bitwise_equal;
using strata::testing_util::message_of;

std::vector<float> table_values(Table& t) {
  std::vector<float> v(static_cast<std::size_t>(t.nvectors() * t.featuresize()));
  t.copy_to(v.data());
  return v;
}

struct Fixture {
  memory::DramHeap heap{1 << 20};
  SimpleTable a{8, 4, ElemType::F32, {&heap, nullptr}};
  SimpleTable b{5, 3, ElemType::F32, {&heap, nullptr}};
  ref::BagSet bags_a, bags_b;
  Fixture() {
    a.set_name("table 0");
    b.set_name("table 1");
    ref::fill_random(a, 1);
    ref::fill_random(b, 2);
    bags_a.add({1, 1, 7});
    bags_a.add({});
    bags_a.add({3, 1});
    bags_b.add({4});
    bags_b.add({0, 4, 4});
    bags_b.add({2});
  }
  std::vector<StageFeature> features() const {
    StageFeature f0{StageFeature::Kind::Plain, "table 0", 8, 0, 0, false};
    StageFeature f1{StageFeature::Kind::Plain, "table 1", 5, 0, 1, false};
    return {f0, f1};
  }
  std::vector<Bags> bags() const { return {bags_a.view(), bags_b.view()}; }
};

}  // namespace

TEST(EmbeddingStage, BackwardIsTheFusedUpdateInsideLossBackward) {
  Fixture fx;
  ref::DenseTable ra = ref::snapshot(fx.a), rb = ref::snapshot(fx.b);
  const SparseOptimizer opt{SparseOptimizer::Kind::RowWiseAdagrad, 0.5f, 1e-10f, 0.0f};
  EmbeddingStage stage(fx.features(), {&fx.a, &fx.b}, {nullptr, nullptr}, opt);
  stage.set_learning_rate(0.25f);
  const auto bags = fx.bags();
  const std::vector<Tensor> out = stage.forward(bags);
  ASSERT_EQ(out.size(), 2u);
  ASSERT_EQ(out[0].sizes(), (Dims{3, 4}));
  ASSERT_EQ(out[1].sizes(), (Dims{3, 3}));
  // The outputs are the pooled bags.
  std::vector<float> want(12);
  ref::lookup(ra, bags[0], Pooling::Sum, want.data(), 4);
  std::vector<float> got(static_cast<std::size_t>(out[0].numel()));
  std::memcpy(got.data(), out[0].contiguous().data_ptr(), got.size() * sizeof(float));
  EXPECT_TRUE(bitwise_equal(got, want));
  // loss = Σ c0 ⊙ E0 + Σ c1 ⊙ E1: the gradients reaching the node are c0 and c1.
  std::mt19937 rng(5);
  const auto c0 = ref::random_floats(rng, 12), c1 = ref::random_floats(rng, 9);
  Tensor loss = add(sum(mul(out[0], tensor(c0, Dims{3, 4}))), sum(mul(out[1], tensor(c1, Dims{3, 3}))));
  const auto before = table_values(fx.a);
  EXPECT_TRUE(bitwise_equal(table_values(fx.a), ra.w));  // nothing updated before backward
  loss.backward();
  SparseOptimizer at_step = opt;
  at_step.lr = 0.25f;
  ref::update(ra, bags[0], Pooling::Sum, c0.data(), 4, at_step);
  ref::update(rb, bags[1], Pooling::Sum, c1.data(), 3, at_step);
  EXPECT_TRUE(bitwise_equal(table_values(fx.a), ra.w));
  EXPECT_TRUE(bitwise_equal(table_values(fx.b), rb.w));
  EXPECT_NE(table_values(fx.a), before);
  EXPECT_EQ(stage.looked_up()[0], 5u);
  EXPECT_EQ(stage.updated()[0], 3u);  // rows 1, 3, 7
  EXPECT_EQ(stage.updated()[1], 3u);  // rows 0, 2, 4
}

TEST(EmbeddingStage, UnusedOutputsLeaveTheirTablesUnchanged) {
  Fixture fx;
  EmbeddingStage stage(fx.features(), {&fx.a, &fx.b}, {nullptr, nullptr}, {SparseOptimizer::Kind::Adagrad, 0.5f});
  const auto bags = fx.bags();
  const auto b_before = table_values(fx.b);
  const std::vector<Tensor> out = stage.forward(bags);
  sum(out[0]).backward();  // table 1's output gets the engine's zero gradient
  EXPECT_TRUE(bitwise_equal(table_values(fx.b), b_before));
  for (float s : stage.state(1).accumulators()) EXPECT_EQ(s, 0.0f);
}

TEST(EmbeddingStage, NoGraphWithoutGradModeAndNoStaleBackward) {
  Fixture fx;
  EmbeddingStage stage(fx.features(), {&fx.a, &fx.b}, {nullptr, nullptr}, {SparseOptimizer::Kind::SGD, 0.5f});
  const auto bags = fx.bags();
  {
    autograd::NoGradGuard no_grad;
    const std::vector<Tensor> out = stage.forward(bags);
    EXPECT_FALSE(out[0].requires_grad());
  }
  const std::vector<Tensor> first = stage.forward(bags);
  Tensor loss = sum(first[0]);
  stage.forward(bags);  // another forward: the first graph's bags are gone
  EXPECT_THAT(message_of([&] { loss.backward(); }), HasSubstr("EmbeddingStageBackward: the embedding stage ran another "
                                                              "forward since this graph was recorded"));
}

TEST(EmbeddingStage, EveryTableIsValidatedBeforeAnyRowIsRead) {
  Fixture fx;
  EmbeddingStage stage(fx.features(), {&fx.a, &fx.b}, {nullptr, nullptr}, {SparseOptimizer::Kind::SGD, 0.5f});
  fx.bags_b.indices[2] = 5;  // out of range in the second table
  EXPECT_THAT(message_of([&] { stage.forward(fx.bags()); }),
              HasSubstr("embedding table 1: bag 1, position 1 (index 2): row 5 is out of range [0, 5)"));
  EXPECT_EQ(stage.looked_up()[0], 0u);  // the first table was not read either
}

// ---- TieredDLRM with the reference's tricks -------------------------------------------------------------

namespace {

DLRMConfig tiny(std::vector<std::string> extra) {
  std::vector<std::string> args = {"--arch-sparse-feature-size",
                                   "3",
                                   "--arch-embedding-size",
                                   "11-6-9",
                                   "--arch-mlp-bot",
                                   "4-5-3",
                                   "--arch-mlp-top",
                                   "4-1",
                                   "--fast-budget",
                                   "1M",
                                   "--slow-tier-model",
                                   "off",
                                   "--learning-rate",
                                   "1",
                                   "--numpy-rand-seed",
                                   "3"};
  args.insert(args.end(), extra.begin(), extra.end());
  return parse_dlrm_args(args);
}

struct TinyBatch {
  std::vector<float> dense, targets;
  std::vector<std::vector<int64_t>> idx, off;
  std::vector<Bags> bags() const {
    std::vector<Bags> out;
    for (std::size_t k = 0; k < idx.size(); ++k) out.push_back({idx[k], off[k]});
    return out;
  }
};

/// Three samples per table with duplicates inside and across bags.
TinyBatch tiny_batch(const std::vector<int64_t>& rows, int64_t dense_n) {
  TinyBatch b;
  std::mt19937 gen(11);
  std::uniform_real_distribution<float> u(0.f, 1.f);
  for (int64_t i = 0; i < 3 * dense_n; ++i) b.dense.push_back(u(gen));
  b.targets = {1.0f, 0.0f, 1.0f};
  for (int64_t r : rows) {
    std::vector<int64_t> idx = {r - 1, 0, r - 1, r / 2, 1, r - 1};
    b.idx.push_back(idx);
    b.off.push_back({0, 2, 4, 6});
  }
  return b;
}

/// One scalar parameter of the model, read and written in place.
struct ParamElement {
  std::string name;
  std::function<float()> get;
  std::function<void(float)> set;
};

ParamElement table_element(TieredDLRM& m, int64_t p, int64_t row, int64_t j) {
  Table* t = &m.stored_table(p);
  const int64_t d = t->featuresize();
  auto get = [t, row, j, d] {
    std::vector<float> v(static_cast<std::size_t>(t->nvectors() * d));
    t->copy_to(v.data());
    return v[static_cast<std::size_t>(row * d + j)];
  };
  auto set = [t, row, j, d](float x) {
    std::vector<float> v(static_cast<std::size_t>(t->nvectors() * d));
    t->copy_to(v.data());
    v[static_cast<std::size_t>(row * d + j)] = x;
    t->copy_from(v.data());
  };
  return {m.stored_table_key(p) + "[" + std::to_string(row) + "][" + std::to_string(j) + "]", get, set};
}

ParamElement tensor_element(Tensor t, const std::string& name, int64_t i) {
  auto get = [t, i] {
    PinSet pins;
    pins.add(t, AccessMode::Read).acquire();
    return static_cast<const float*>(t.data_ptr())[i];
  };
  auto set = [t, i](float x) {
    PinSet pins;
    pins.add(t, AccessMode::Write).acquire();
    static_cast<float*>(t.data_ptr())[i] = x;
  };
  return {name + "[" + std::to_string(i) + "]", get, set};
}

/// Every scalar `params` lists: the gradient that one SGD step at learning rate 1 applied
/// (before - after) against the central difference of the loss.
void check_gradients(TieredDLRM& m, const TinyBatch& batch, const std::vector<ParamElement>& params) {
  const auto bags = batch.bags();
  constexpr float h = 4e-3f;
  std::vector<double> fd;
  std::vector<float> before;
  for (const ParamElement& s : params) {
    const float x = s.get();
    s.set(x + h);
    const double up = m.evaluate(batch.dense, bags, batch.targets);
    s.set(x - h);
    const double down = m.evaluate(batch.dense, bags, batch.targets);
    s.set(x);
    fd.push_back((up - down) / (2.0 * h));
    before.push_back(x);
  }
  m.train_step(batch.dense, bags, batch.targets);
  int nonzero = 0;
  for (std::size_t i = 0; i < params.size(); ++i) {
    const double g = static_cast<double>(before[i]) - static_cast<double>(params[i].get());
    EXPECT_NEAR(g, fd[i], 2e-4 + 3e-2 * std::fabs(fd[i])) << params[i].name;
    nonzero += std::fabs(fd[i]) > 1e-4 ? 1 : 0;
  }
  EXPECT_GT(nonzero, static_cast<int>(params.size()) / 3) << "the check needs gradients that are not all zero";
}

/// The rows the tiny batch touches in every stored table, all elements.
std::vector<ParamElement> touched_rows(TieredDLRM& m, const TinyBatch& batch) {
  std::vector<ParamElement> out;
  for (int64_t k = 0; k < m.num_tables(); ++k) {
    const StageFeature& f = m.table_layout(k);
    for (int64_t part = 0; part < f.parts(); ++part) {
      std::vector<int64_t> rows;
      for (int64_t i : batch.idx[static_cast<std::size_t>(k)]) {
        int64_t r = i;
        if (f.kind == StageFeature::Kind::QuotientRemainder) r = part == 0 ? i / f.collisions : i % f.collisions;
        if (std::find(rows.begin(), rows.end(), r) == rows.end()) rows.push_back(r);
      }
      const int64_t p = f.first + part;
      for (int64_t r : rows)
        for (int64_t j = 0; j < m.stored_table(p).featuresize(); ++j) out.push_back(table_element(m, p, r, j));
    }
  }
  return out;
}

}  // namespace

TEST(DLRMTricks, QuotientRemainderGradientsMatchFiniteDifferences) {
  for (const char* op : {"mult", "add", "concat"}) {
    SCOPED_TRACE(op);
    const bool concat = std::string(op) == "concat";
    TieredDLRM m(tiny({"--qr-flag", "--qr-operation", op, "--qr-collisions", "4", "--qr-threshold", concat ? "5" : "8",
                       "--arch-mlp-bot", concat ? "4-5-6" : "4-5-3"}));
    ASSERT_EQ(m.num_stored_tables(), concat ? 6 : 5);  // 11 and 9 rows (and 6 with concat) are split
    EXPECT_THAT(m.describe_tables(), HasSubstr("table 0 quotient: 3 rows x 3"));
    EXPECT_THAT(m.describe_tables(), HasSubstr("QR remainder of 11 rows (4 collisions, " + std::string(op) + ")"));
    const TinyBatch batch = tiny_batch({11, 6, 9}, 4);
    check_gradients(m, batch, touched_rows(m, batch));
  }
}

TEST(DLRMTricks, MixedDimensionGradientsMatchFiniteDifferences) {
  // md_solver(11-6-9, alpha 1, d0 3): lambda = 3 · 6 = 18; 11 rows -> 18 / 11 = 1.6 -> 2; 9 rows -> 2.
  TieredDLRM m(tiny({"--md-flag", "--md-threshold", "7", "--md-temperature", "1", "--arch-sparse-feature-size", "3"}));
  EXPECT_EQ(m.stored_table(0).featuresize(), 2);
  EXPECT_EQ(m.stored_table(1).featuresize(), 3);  // 6 rows: at most --md-threshold, a plain table
  EXPECT_EQ(m.stored_table_key(0), "emb_l.0.embs.weight");
  EXPECT_EQ(m.stored_table_key(1), "emb_l.1.weight");
  EXPECT_THAT(m.describe_tables(), HasSubstr("MD d=2 projected to 3"));
  const TinyBatch batch = tiny_batch({11, 6, 9}, 4);
  std::vector<ParamElement> params = touched_rows(m, batch);
  for (const auto& [name, t] : m.state_dict())
    if (name.find(".proj.weight") != std::string::npos)
      for (int64_t i = 0; i < t.numel(); ++i) params.push_back(tensor_element(t, name, i));
  ASSERT_EQ(params.size() - touched_rows(m, batch).size(), 2u * 3 * 2);  // two [3, 2] projections
  check_gradients(m, batch, params);
}

TEST(DLRMTricks, LearnedPoolingWeightGradientsMatchFiniteDifferences) {
  TieredDLRM m(tiny({"--weighted-pooling", "learned"}));
  const TinyBatch batch = tiny_batch({11, 6, 9}, 4);
  std::vector<ParamElement> params = touched_rows(m, batch);
  for (int64_t k = 0; k < m.num_tables(); ++k) {
    LearnedPoolingWeights* w = m.learned_pooling_weights(k);
    ASSERT_NE(w, nullptr);
    for (std::size_t r = 0; r < w->v.size(); ++r) {
      EXPECT_EQ(w->v[r], 1.0f);
      w->v[r] = 0.5f + 0.1f * static_cast<float>(r);  // away from 1, so rows and weights differ
      params.push_back({"v_W_l." + std::to_string(k) + "[" + std::to_string(r) + "]", [w, r] { return w->v[r]; },
                        [w, r](float x) { w->v[r] = x; }});
    }
  }
  check_gradients(m, batch, params);
  // Rows that did not occur kept their weight (a zero gradient).
  EXPECT_EQ(m.learned_pooling_weights(0)->v[2], 0.5f + 0.2f);
  EXPECT_EQ(m.state_dict().back().first, "v_W_l.2");
}

TEST(DLRMTricks, QuotientRemainderIndicesAreValidatedAgainstTheLogicalRows) {
  // Row 11 of an 11-row table would map to quotient row 2 and remainder row 3, both in range.
  TieredDLRM m(tiny({"--qr-flag", "--qr-threshold", "8", "--emb-policy", "dynamic"}));
  TinyBatch batch = tiny_batch({11, 6, 9}, 4);
  batch.idx[0][3] = 11;
  const auto q = table_values(m.table(0, 0)), r = table_values(m.table(0, 1));
  const auto steps = m.steps();
  EXPECT_THAT(message_of([&] { m.train_step(batch.dense, batch.bags(), batch.targets); }),
              HasSubstr("embedding table 0: bag 1, position 1 (index 3): row 11 is out of range [0, 11)"));
  EXPECT_TRUE(bitwise_equal(table_values(m.table(0, 0)), q));
  EXPECT_TRUE(bitwise_equal(table_values(m.table(0, 1)), r));
  EXPECT_EQ(m.steps(), steps);
  EXPECT_EQ(m.counters().rows_looked_up, 0u);
  EXPECT_THAT(message_of([&] { m.table(0, 2); }), HasSubstr("TieredDLRM: table 0 has no part 2"));
}

TEST(DLRMTricks, LearnedPoolingRefusesGivenWeightsAndLoadsItsState) {
  TieredDLRM m(tiny({"--weighted-pooling", "learned", "--optimizer", "adagrad"}));
  TinyBatch batch = tiny_batch({11, 6, 9}, 4);
  std::vector<Bags> bags = batch.bags();
  const std::vector<float> ones(6, 1.0f);
  bags[1].weights = ones;
  EXPECT_THAT(message_of([&] { m.train_step(batch.dense, bags, batch.targets); }),
              HasSubstr("embedding table 1: per-sample weights were given, but with --weighted-pooling learned"));
  m.train_step(batch.dense, batch.bags(), batch.targets);
  StateDict sd = m.state_dict();
  TieredDLRM other(tiny({"--weighted-pooling", "learned", "--optimizer", "adagrad"}));
  other.load_state_dict(sd);
  EXPECT_EQ(other.learned_pooling_weights(0)->v, m.learned_pooling_weights(0)->v);
  sd.emplace_back("v_W_l.7", empty({3}));
  EXPECT_THAT(message_of([&] { other.load_state_dict(sd); }), HasSubstr("unexpected key 'v_W_l.7'"));
  sd.pop_back();
  sd.pop_back();  // v_W_l.2
  EXPECT_THAT(message_of([&] { other.load_state_dict(sd); }), HasSubstr("missing key v_W_l.2"));
}

TEST(DLRMTricks, CheckpointsResumeBitwiseWithEveryKind) {
  // N steps, save, load into a fresh model, N steps == 2N steps: tables under their reference
  // names (weight_q/weight_r, embs.weight), projections, learned pooling weights and their Adagrad
  // state included.
  const auto dir = std::filesystem::temp_directory_path() / ("strata_dlrm_tricks_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::vector<std::vector<std::string>> kinds = {
      {"--qr-flag", "--qr-threshold", "8", "--optimizer", "adagrad", "--learning-rate", "0.05"},
      {"--md-flag", "--md-threshold", "7", "--md-temperature", "1", "--optimizer", "rwsadagrad"},
      {"--weighted-pooling", "learned", "--optimizer", "adagrad", "--learning-rate", "0.05", "--emb-policy", "dynamic",
       "--fast-budget", "64K", "--cache-fraction", "0.5"}};
  for (const auto& flags : kinds) {
    SCOPED_TRACE(flags[0]);
    TieredDLRM a(tiny(flags)), b(tiny(flags));
    const TinyBatch batch = tiny_batch({11, 6, 9}, 4);
    for (int s = 0; s < 2; ++s) a.train_step(batch.dense, batch.bags(), batch.targets);
    const std::string path = (dir / "tricks.ckpt").string();
    a.save(path);
    b.load(path);
    for (int s = 0; s < 2; ++s)
      EXPECT_EQ(a.train_step(batch.dense, batch.bags(), batch.targets),
                b.train_step(batch.dense, batch.bags(), batch.targets));
    for (int64_t p = 0; p < a.num_stored_tables(); ++p)
      EXPECT_TRUE(bitwise_equal(table_values(a.stored_table(p)), table_values(b.stored_table(p))))
          << a.stored_table_key(p);
    const StateDict sa = a.state_dict(), sb = b.state_dict();
    ASSERT_EQ(sa.size(), sb.size());
    for (std::size_t i = 0; i < sa.size(); ++i) {
      EXPECT_EQ(sa[i].first, sb[i].first);
      std::vector<float> va(static_cast<std::size_t>(sa[i].second.numel())), vb(va.size());
      PinSet pins;
      pins.add(sa[i].second, AccessMode::Read).add(sb[i].second, AccessMode::Read).acquire();
      std::memcpy(va.data(), sa[i].second.contiguous().data_ptr(), va.size() * sizeof(float));
      std::memcpy(vb.data(), sb[i].second.contiguous().data_ptr(), vb.size() * sizeof(float));
      EXPECT_TRUE(bitwise_equal(va, vb)) << sa[i].first;
    }
    // Another kind's checkpoint is refused, naming the difference.
    const auto opt = std::find(flags.begin(), flags.end(), "--optimizer");
    TieredDLRM plain(tiny({"--optimizer", *(opt + 1)}));
    EXPECT_THAT(message_of([&] { plain.load(path); }), HasSubstr("the checkpoint's"));
  }
  std::filesystem::remove_all(dir);
}
