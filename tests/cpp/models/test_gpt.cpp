// The transformer modules and the zoo's GPT from C++: structure and names, the tied head, a short
// training run that learns, the per-op remat steps equal to forward, Embedding's padding row and
// max_norm, and bad inputs. (Auto and the tape streamer on GPT blocks: test_auto_remat.cpp and
// test_tape_stream.cpp; values against PyTorch: tests/python/test_transformer.py.)

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "autograd/grad_mode.h"
#include "core/factories.h"
#include "models/attention.h"
#include "models/embedding_bag.h"
#include "models/optim/adam.h"
#include "models/zoo/gpt.h"
#include "ops/binary.h"
#include "ops/reduction.h"
#include "tests/cpp/error_text.h"

namespace strata_test {
namespace {

using namespace strata;
using ::testing::HasSubstr;

nn::zoo::GPTConfig tiny_config() {
  return {.vocab_size = 11, .block_size = 16, .n_layer = 2, .n_head = 2, .n_embd = 8};
}

/// [B, T] i64 tokens: the sequence 0, 1, ..., vocab - 1 repeating, each row shifted by its index.
Tensor cyclic_tokens(int64_t B, int64_t T, int64_t vocab, int64_t shift = 0) {
  Tensor t = empty({B, T}, {DType::i64, nullptr});
  int64_t* p = t.data<int64_t>();
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < T; ++i) p[b * T + i] = (b + i + shift) % vocab;
  return t;
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  const Tensor d = sub(a, b);
  return amax(maximum(d, mul(d, -1.0)).reshape({-1}), {0}).item<double>();
}

TEST(Gpt, NamesShapesAndTiedHead) {
  manual_seed(0);
  nn::zoo::GPT gpt(tiny_config());
  const StateDict sd = gpt.state_dict();
  std::vector<std::string> keys;
  for (const auto& [k, v] : sd) keys.push_back(k);
  EXPECT_EQ(keys.front(), "transformer.wte.weight");
  EXPECT_THAT(keys, ::testing::Contains("transformer.h.1.self_attn.in_proj_weight"));
  EXPECT_THAT(keys, ::testing::Contains("transformer.h.0.linear2.bias"));
  EXPECT_THAT(keys, ::testing::Contains("transformer.ln_f.weight"));
  EXPECT_EQ(keys.back(), "lm_head.weight");
  // One tensor under two names: parameters() lists it once.
  const Tensor wte = gpt.child("transformer")->child("wte")->parameter("weight");
  EXPECT_TRUE(gpt.child("lm_head")->parameter("weight").shares_storage(wte));
  EXPECT_EQ(gpt.parameters().size(), keys.size() - 1);
  // 2 + 12 per block + 2 (ln_f) tensors; 4 · n_embd² · 3 per block's weights.
  EXPECT_EQ(gpt.parameters().size(), 2u + 12u * 2u + 2u);
  const Tensor logits = gpt.forward(cyclic_tokens(3, 16, 11));
  EXPECT_EQ(logits.sizes(), (Dims{3, 16, 11}));
}

TEST(Gpt, TrainingFromCppLearnsTheSequence) {
  manual_seed(1);
  nn::zoo::GPT gpt(tiny_config());
  optim::AdamOptions o;
  o.lr = 1e-2;
  optim::Adam opt(gpt.parameters(), o);
  const Tensor x = cyclic_tokens(4, 16, 11), y = cyclic_tokens(4, 16, 11, 1);
  double first = 0, last = 0;
  for (int step = 0; step < 60; ++step) {
    opt.zero_grad();
    Tensor loss = gpt.loss(x, y);
    loss.backward();
    opt.step();
    (step == 0 ? first : last) = loss.item<double>();
  }
  EXPECT_NEAR(first, std::log(11.0), 0.3) << "an untrained model is near uniform";
  EXPECT_LT(last, 0.1 * first) << "the next token of a cyclic sequence is learnt";
  // The tied weight got the gradients of both uses.
  EXPECT_TRUE(gpt.child("lm_head")->parameter("weight").grad().defined());
}

TEST(Gpt, IgnoredTargetsAndBadInputs) {
  manual_seed(2);
  nn::zoo::GPT gpt(tiny_config());
  const Tensor x = cyclic_tokens(2, 8, 11);
  Tensor ignored = full({2, 8}, -1.0, {DType::i64, nullptr});
  ignored.select(1, 0).fill_(3);
  EXPECT_TRUE(std::isfinite(gpt.loss(x, ignored).item<double>()));
  EXPECT_ERROR_HAS(gpt.forward(cyclic_tokens(1, 17, 11)), "length 17, the block size is only 16");
  EXPECT_ERROR_HAS(gpt.forward(zeros({4}, {DType::i64, nullptr})), "expected token indices [B, T]");
  EXPECT_ERROR_HAS(gpt.forward(full({1, 2}, 11.0, {DType::i64, nullptr})), "index 11 at position 0");
  EXPECT_ERROR_HAS(gpt.loss(x, cyclic_tokens(2, 7, 11)), "targets must have the shape of idx");
  nn::zoo::GPTConfig bad = tiny_config();
  bad.n_head = 3;
  EXPECT_ERROR_HAS(nn::zoo::GPT g(bad), "n_embd (8) must be a multiple of n_head (3)");
  bad = tiny_config();
  bad.n_layer = 0;
  EXPECT_ERROR_HAS(nn::zoo::GPT g(bad), "must be positive");
}

/// Runs the steps of `layer`'s append_remat_steps on x in order.
Tensor run_steps(const nn::TransformerEncoderLayer& layer, const Tensor& x) {
  std::vector<remat::GraphStep> steps;
  const int64_t out = layer.append_remat_steps(-1, steps);
  EXPECT_EQ(out, static_cast<int64_t>(steps.size()) - 1);
  std::vector<Tensor> values;
  for (const auto& s : steps) {
    autograd::TensorList in;
    for (int64_t i : s.inputs) in.push_back(i < 0 ? x : values[static_cast<std::size_t>(i)]);
    values.push_back(s.fn(in));
  }
  return values.back();
}

TEST(TransformerEncoderLayer, RematStepsComputeForward) {
  for (bool norm_first : {false, true}) {
    for (const char* act : {"relu", "gelu"}) {
      SCOPED_TRACE(std::string(norm_first ? "norm_first " : "post-norm ") + act);
      manual_seed(3);
      nn::TransformerEncoderLayerOptions o;
      o.dim_feedforward = 16;
      o.activation = act;
      o.batch_first = true;
      o.norm_first = norm_first;
      nn::TransformerEncoderLayer layer(8, 2, o);
      layer.eval();
      layer.set_causal(norm_first);
      const Tensor x = randn({2, 5, 8});
      const Tensor a = layer.forward(x), b = run_steps(layer, x);
      EXPECT_LT(max_abs_diff(a, b), 1e-6);
    }
  }
}

// Note [Feed-forward in row chunks]: the MLP over k slices of the token rows is the same function
// (the per-op steps run it alike), for row counts that k does not divide and for k above the rows.
TEST(TransformerEncoderLayer, FeedForwardInRowChunks) {
  auto make = [](int64_t chunks, double dropout = 0.0) {
    manual_seed(5);  // the same parameters for every chunk count
    nn::TransformerEncoderLayerOptions o;
    o.dropout = dropout;
    o.dim_feedforward = 16;
    o.activation = "gelu";
    o.batch_first = true;
    o.norm_first = true;
    o.ffn_chunks = chunks;
    auto layer = std::make_shared<nn::TransformerEncoderLayer>(8, 2, o);
    layer->set_causal(true);
    return layer;
  };
  const Tensor x = randn({2, 5, 8});
  auto whole = make(1);
  const Tensor xw = x.clone().requires_grad_(true);
  const Tensor yw = whole->forward(xw);
  sum(yw).backward();
  for (int64_t chunks : {3, 16}) {
    SCOPED_TRACE("ffn_chunks " + std::to_string(chunks));
    auto layer = make(chunks);
    const Tensor xc = x.clone().requires_grad_(true);
    const Tensor yc = layer->forward(xc);
    EXPECT_EQ(yc.sizes(), yw.sizes());
    EXPECT_LT(max_abs_diff(yc, yw), 1e-6);
    sum(yc).backward();
    EXPECT_LT(max_abs_diff(xc.grad(), xw.grad()), 1e-5);
    EXPECT_LT(max_abs_diff(layer->child("linear1")->parameter("weight").grad(),
                           whole->child("linear1")->parameter("weight").grad()),
              1e-5);
    autograd::NoGradGuard no_grad;
    EXPECT_LT(max_abs_diff(run_steps(*layer, x), layer->forward(x)), 1e-6);
    // With dropout, the steps draw the slices' masks in forward's order: the same bits.
    auto dropping = make(chunks, 0.25);
    manual_seed(11);
    const Tensor by_steps = run_steps(*dropping, x);
    manual_seed(11);
    EXPECT_EQ(max_abs_diff(by_steps, dropping->forward(x)), 0.0);
  }
  nn::TransformerEncoderLayerOptions bad;
  bad.ffn_chunks = 0;
  EXPECT_ERROR_HAS(nn::TransformerEncoderLayer layer(8, 2, bad), "ffn_chunks must be at least 1, got 0");
}

TEST(MultiheadAttention, BadInputs) {
  EXPECT_ERROR_HAS(nn::MultiheadAttention m(10, 3), "embed_dim must be divisible by num_heads");
  EXPECT_ERROR_HAS(nn::MultiheadAttention m(8, 2, 1.5), "dropout probability has to be between 0 and 1");
  nn::MultiheadAttention m(8, 2, 0.0, true, std::nullopt, std::nullopt, true);
  const Tensor x = randn({2, 5, 8});
  EXPECT_ERROR_HAS(m.forward(randn({2, 5, 6})), "expected query, key and value widths 8, 8 and 8");
  EXPECT_ERROR_HAS(m.forward(x, x, x, Tensor(), false, zeros({4, 5})), "the shape of the 2D attn_mask is [4, 5]");
  EXPECT_ERROR_HAS(m.forward(x, x, x, Tensor(), false, zeros({3, 5, 5})),
                   "attn_mask must be 2-D (5, 5) or 3-D (4, 5, 5)");
  EXPECT_ERROR_HAS(m.forward(x, x, x, zeros({2, 4}, {DType::boolean, nullptr})),
                   "expected key_padding_mask of shape (2, 5)");
  EXPECT_ERROR_HAS(m.forward(x, x, x, zeros({2, 5}, {DType::i64, nullptr})), "key_padding_mask must be bool");
  EXPECT_ERROR_HAS(m.forward(x, randn({3, 5, 8}), randn({3, 5, 8})), "must have the query's batch size");
  nn::TransformerEncoderLayerOptions o;
  o.activation = "tanh";
  EXPECT_ERROR_HAS(nn::TransformerEncoderLayer t(8, 2, o), "activation should be relu/gelu, not 'tanh'");
}

TEST(Embedding, PaddingRowMaxNormAndBadInputs) {
  manual_seed(4);
  nn::Embedding e(6, 3, -1);
  EXPECT_EQ(e.padding_idx(), 5);
  EXPECT_EQ(max_abs_diff(e.weight().select(0, 5).detach(), zeros({3})), 0.0);
  const Tensor idx = full({4}, 5.0, {DType::i64, nullptr});
  sum(e.forward(idx)).backward();
  EXPECT_EQ(max_abs_diff(e.weight().grad(), zeros({6, 3})), 0.0) << "no gradient reaches the padding row";
  EXPECT_EQ(e.to_string(), "Embedding(6, 3, padding_idx=5)");

  nn::Embedding capped(4, 3, std::nullopt, 0.5);
  const uint64_t before = capped.weight().version();
  const Tensor rows = capped.forward(zeros({2}, {DType::i64, nullptr}));
  EXPECT_GT(capped.weight().version(), before) << "max_norm renormalizes the weight in place";
  EXPECT_LE(std::sqrt(sum(mul(rows.select(0, 0), rows.select(0, 0))).item<double>()), 0.5 + 1e-6);

  EXPECT_ERROR_HAS(nn::Embedding bad(6, 3, 6), "padding_idx 6 must be within num_embeddings (6)");
  EXPECT_ERROR_HAS(nn::Embedding bad(6, 3, std::nullopt, -1.0), "max_norm must be positive");
  EXPECT_ERROR_HAS(e.forward(full({1}, 1.0)), "indices must be i64 or i32");
}

}  // namespace
}  // namespace strata_test
