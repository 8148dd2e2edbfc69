// The backward engine: graphs, accumulation, retain_graph, grad(), errors.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <thread>

#include "autograd/engine.h"
#include "autograd/grad_mode.h"
#include "tests/cpp/autograd/graph_util.h"
#include "tests/cpp/core/test_util.h"

namespace strata_test {
namespace {

using namespace strata;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(Engine, ChainAndLeafGradient) {
  Tensor x = f64({1, 2, 3}).set_requires_grad();
  Tensor w = f64({4, 5, 6});
  Tensor y = tmul(x, w);
  EXPECT_TRUE(y.requires_grad());
  EXPECT_FALSE(y.is_leaf());
  EXPECT_EQ(y.grad_fn()->name(), "TMulBackward");
  y.backward(f64({1, 1, 1}));
  EXPECT_THAT(vals(x.grad()), ElementsAre(4, 5, 6));
  EXPECT_FALSE(w.grad().defined());  // w does not require grad
}

TEST(Engine, DiamondGraphSumsBothPaths) {
  // c = (x*x) * (x+x)  = 2x^3  → dc/dx = 6x^2
  Tensor x = f64({1, -2, 0.5}).set_requires_grad();
  Tensor a = tmul(x, x);
  Tensor b = tadd(x, x);
  Tensor c = tmul(a, b);
  c.backward(f64({1, 1, 1}));
  EXPECT_THAT(vals(x.grad()), ElementsAre(6, 24, 1.5));
}

TEST(Engine, ReusedInputAndReusedIntermediate) {
  Tensor x = f64({3}).set_requires_grad();
  Tensor y = tmul(x, x);  // x used twice by one node
  Tensor z = tadd(y, y);  // y used twice
  z.backward();
  EXPECT_THAT(vals(x.grad()), ElementsAre(12));  // d(2x^2) = 4x
}

TEST(Engine, GradientsAccumulateAcrossBackwardCalls) {
  Tensor x = f64({2}).set_requires_grad();
  tmul(x, x).backward();
  tmul(x, x).backward();
  EXPECT_THAT(vals(x.grad()), ElementsAre(8));
  x.set_grad(Tensor());
  tmul(x, x).backward();
  EXPECT_THAT(vals(x.grad()), ElementsAre(4));
}

TEST(Engine, ImplicitGradientOnlyForOneElement) {
  Tensor x = f64({1, 2}).set_requires_grad();
  Tensor y = tmul(x, x);
  std::string msg = ERROR_MESSAGE(y.backward());
  EXPECT_THAT(msg, HasSubstr("implicitly created only for one-element outputs"));
  EXPECT_THAT(msg, HasSubstr("Tensor[2] f64"));
  msg = ERROR_MESSAGE(y.backward(f64({1, 2, 3})));
  EXPECT_THAT(msg, HasSubstr("does not match"));
}

TEST(Engine, BackwardOnTensorWithoutGraphIsAnError) {
  Tensor x = f64({1});
  EXPECT_THAT(ERROR_MESSAGE(x.backward()), HasSubstr("does not require grad and does not have a grad_fn"));
}

TEST(Engine, SecondBackwardNeedsRetainGraph) {
  Tensor x = f64({2}).set_requires_grad();
  Tensor y = tmul(x, x);
  y.backward(Tensor(), /*retain_graph=*/true);
  y.backward();
  EXPECT_THAT(vals(x.grad()), ElementsAre(8));
  EXPECT_THAT(ERROR_MESSAGE(y.backward()), HasSubstr("already freed"));
}

TEST(Engine, NoGradGuardRecordsNothing) {
  Tensor x = f64({1}).set_requires_grad();
  {
    autograd::NoGradGuard ng;
    EXPECT_FALSE(autograd::GradMode::is_enabled());
    Tensor y = tmul(x, x);
    EXPECT_FALSE(y.requires_grad());
    {
      autograd::EnableGradGuard eg;
      EXPECT_TRUE(tmul(x, x).requires_grad());
    }
  }
  EXPECT_TRUE(autograd::GradMode::is_enabled());
}

TEST(Engine, RequiresGradRules) {
  Tensor i = zeros({2}, {DType::i64, nullptr});
  EXPECT_THAT(ERROR_MESSAGE(i.set_requires_grad()), HasSubstr("only floating-point"));
  Tensor x = f64({1}).set_requires_grad();
  Tensor y = tmul(x, x);
  EXPECT_THAT(ERROR_MESSAGE(y.set_requires_grad(false)), HasSubstr("not a leaf"));
  Tensor d = y.detach();
  EXPECT_FALSE(d.requires_grad());
  EXPECT_TRUE(d.shares_storage(y));
}

TEST(Engine, GradReturnsGradientsWithoutTouchingDotGrad) {
  Tensor x = f64({1, 2}).set_requires_grad();
  Tensor w = f64({3, 4}).set_requires_grad();
  Tensor h = tmul(x, w);
  Tensor y = tmul(h, h);  // y = (xw)^2
  auto g = autograd::grad({y}, {x, h}, {f64({1, 1})}, /*retain_graph=*/true);
  ASSERT_EQ(g.size(), 2u);
  EXPECT_THAT(vals(g[0]), ElementsAre(2 * 3 * 3, 2 * 2 * 4 * 4));  // 2 x w^2
  EXPECT_THAT(vals(g[1]), ElementsAre(2 * 3, 2 * 8));              // 2h
  EXPECT_FALSE(x.grad().defined());
  EXPECT_FALSE(w.grad().defined());
  Tensor unused = f64({0}).set_requires_grad();
  EXPECT_THAT(ERROR_MESSAGE(autograd::grad({y}, {unused}, {f64({1, 1})}, true)), HasSubstr("allow_unused"));
  auto g2 = autograd::grad({y}, {unused}, {f64({1, 1})}, true, /*allow_unused=*/true);
  EXPECT_FALSE(g2[0].defined());
}

TEST(Engine, UnusedOutputOfMultiOutputNodeGetsZeros) {
  Tensor x = f64({1, 2}).set_requires_grad();
  auto [a, b] = ttwo(x);
  tmul(b, f64({1, 1})).backward(f64({1, 1}));  // only b used: grad = 2
  EXPECT_THAT(vals(x.grad()), ElementsAre(2, 2));
}

TEST(Engine, RunsChainInReverseRecordingOrder) {
  std::vector<std::string> order;
  Tensor x = f64({1}).set_requires_grad();
  Tensor cur = x;
  for (int i = 0; i < 4; ++i) {
    Tensor out = cur.clone();
    std::string name = "Step" + std::to_string(i);
    auto node = autograd::make_node(name, {&cur}, [&order, name](Node&, const TensorList& g) -> TensorList {
      order.push_back(name);
      return {g[0]};
    });
    autograd::set_history({&out}, node);
    cur = out;
  }
  cur.backward();
  EXPECT_THAT(order, ElementsAre("Step3", "Step2", "Step1", "Step0"));
}

TEST(Engine, AccumulateGradRunsAsSoonAsReadyEvenWithAnOldSequenceNumber) {
  // w's AccumulateGrad is created by a first graph that stays alive, so it is older than every node
  // of the second graph. Its gradient is complete after the top node ran: it must reach w.grad
  // before the rest of the chain runs (as in PyTorch), not after it.
  Tensor w = f64({1}).set_requires_grad();
  Tensor keep = w.clone();
  auto first = autograd::make_node("First", {&w}, [](Node&, const TensorList& g) -> TensorList { return {g[0]}; });
  autograd::set_history({&keep}, first);
  Tensor x = f64({1}).set_requires_grad();
  std::vector<std::string> order;
  Tensor cur = x;
  for (int i = 0; i < 2; ++i) {
    Tensor out = cur.clone();
    std::string name = "Step" + std::to_string(i);
    auto node = autograd::make_node(name, {&cur}, [&order, &w, name](Node&, const TensorList& g) -> TensorList {
      order.push_back(name + (w.grad().defined() ? " (w.grad set)" : " (w.grad unset)"));
      return {g[0]};
    });
    autograd::set_history({&out}, node);
    cur = out;
  }
  Tensor top = cur.clone();
  auto t =
      autograd::make_node("Top", {&cur, &w}, [](Node&, const TensorList& g) -> TensorList { return {g[0], g[0]}; });
  autograd::set_history({&top}, t);
  top.backward();
  EXPECT_THAT(order, ElementsAre("Step1 (w.grad set)", "Step0 (w.grad set)"));
  EXPECT_TRUE(keep.grad_fn() != nullptr);  // the first graph was alive throughout
}

// Note [In-place gradient accumulation]: two gradients meeting at a slot are added into one of them
// only when nothing else holds it; otherwise the sum is a new tensor and both stay as they were.
TEST(Engine, GradientsJoinInPlaceOnlyWhenNothingElseHoldsThem) {
  for (int held : {0, 1, 2, 3}) {  // bit 0: P's gradient is also held elsewhere; bit 1: Q's
    SCOPED_TRACE("held " + std::to_string(held));
    Tensor x = f64({1, 2, 3}).set_requires_grad();
    Tensor y = x.clone();
    const void* joined = nullptr;
    Tensor joined_values;
    auto join = autograd::make_node("Join", {&x}, [&](Node&, const TensorList& g) -> TensorList {
      joined = g[0].data_ptr();
      joined_values = g[0].clone();
      return {g[0]};
    });
    autograd::set_history({&y}, join);
    std::vector<Tensor> stash;
    const void* p_ptr = nullptr;
    const void* q_ptr = nullptr;
    Tensor a = y.clone(), b = y.clone();
    auto p = autograd::make_node("P", {&y}, [&](Node&, const TensorList&) -> TensorList {
      Tensor out = f64({10, 20, 30});
      p_ptr = out.data_ptr();
      if (held & 1) stash.push_back(out);
      return {out};
    });
    autograd::set_history({&a}, p);
    auto q = autograd::make_node("Q", {&y}, [&](Node&, const TensorList&) -> TensorList {
      Tensor out = f64({1, 1, 1});
      q_ptr = out.data_ptr();
      if (held & 2) stash.push_back(out);
      return {out};
    });
    autograd::set_history({&b}, q);
    Tensor top = a.clone();
    auto t =
        autograd::make_node("Top", {&a, &b}, [](Node&, const TensorList& g) -> TensorList { return {g[0], g[0]}; });
    autograd::set_history({&top}, t);
    top.backward(f64({1, 1, 1}));
    EXPECT_THAT(vals(joined_values), ElementsAre(11, 21, 31));
    EXPECT_THAT(vals(x.grad()), ElementsAre(11, 21, 31));
    if (held == 3) {
      EXPECT_NE(joined, p_ptr);
      EXPECT_NE(joined, q_ptr);
    } else {
      EXPECT_TRUE(joined == p_ptr || joined == q_ptr) << "a private gradient should take the sum in place";
      if (held & 1) EXPECT_EQ(joined, q_ptr);
      if (held & 2) EXPECT_EQ(joined, p_ptr);
    }
    // What someone else holds was not modified.
    for (const Tensor& s : stash) {
      const auto v = vals(s);
      EXPECT_TRUE(v == std::vector<double>({10, 20, 30}) || v == std::vector<double>({1, 1, 1}));
    }
  }
}

TEST(Engine, OneGradientForTwoInputsIsNotModifiedInPlace) {
  // Top hands the same tensor to both of its inputs, which meet again at x: the sum must be new.
  Tensor x = f64({1, 2}).set_requires_grad();
  Tensor top = x.clone();
  auto t = autograd::make_node("Top", {&x, &x}, [](Node&, const TensorList& g) -> TensorList { return {g[0], g[0]}; });
  autograd::set_history({&top}, t);
  Tensor g = f64({3, 4});
  top.backward(g);
  EXPECT_THAT(vals(x.grad()), ElementsAre(6, 8));
  EXPECT_THAT(vals(g), ElementsAre(3, 4));  // the caller's root gradient is untouched
}

TEST(Engine, WrongGradientShapeFromANodeIsReported) {
  Tensor x = f64({1, 2}).set_requires_grad();
  Tensor out = x.clone();
  auto node =
      autograd::make_node("BadBackward", {&x}, [](Node&, const TensorList&) -> TensorList { return {f64({1})}; });
  autograd::set_history({&out}, node);
  EXPECT_THAT(ERROR_MESSAGE(out.backward(f64({1, 1}))), HasSubstr("BadBackward returned a gradient Tensor[1] f64"));
}

TEST(Engine, SetHistoryNeverRewritesAnInputsHistory) {
  // An op returning its input handle: set_history must give the output its own handle.
  Tensor x = f64({5}).set_requires_grad();
  Tensor out = x;
  auto node =
      autograd::make_node("IdentityBackward", {&x}, [](Node&, const TensorList& g) -> TensorList { return {g[0]}; });
  autograd::set_history({&out}, node);
  EXPECT_TRUE(x.is_leaf());
  EXPECT_FALSE(out.is_leaf());
  out.backward();
  EXPECT_THAT(vals(x.grad()), ElementsAre(1));
}

// Several threads run independent backward passes into one shared leaf (as data-parallel workers
// sharing parameters would); accumulation into .grad must be race-free (runs under TSan in CI).
TEST(EngineStress, ConcurrentBackwardIntoSharedLeaf) {
  Tensor w = f64({1, 2, 3, 4}).set_requires_grad();
  constexpr int kThreads = 4, kIters = 100;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&w] {
      for (int i = 0; i < kIters; ++i) {
        Tensor x = f64({1, 1, 1, 1});
        Tensor y = tmul(tadd(tmul(x, w), x), x);  // d/dw = x*x = 1
        y.backward(f64({1, 1, 1, 1}));
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_THAT(vals(w.grad()), ElementsAre(kThreads * kIters, kThreads * kIters, kThreads * kIters, kThreads * kIters));
}

}  // namespace
}  // namespace strata_test
