// SavedTensor versions, pack/unpack hooks, release after use, and tape introspection.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "autograd/engine.h"
#include "autograd/saved_tensor.h"
#include "autograd/tape.h"
#include "memory/tiered_memory.h"
#include "ops/unary.h"
#include "tests/cpp/autograd/graph_util.h"
#include "tests/cpp/core/test_util.h"

namespace strata_test {
namespace {

using namespace strata;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(SavedTensor, InPlaceModificationOfASavedValueIsCaught) {
  Tensor x = f64({1, 2}).set_requires_grad();
  Tensor w = f64({3, 4});
  Tensor y = tmul(x, w);
  w.fill_(7);  // w was saved at version 0
  const std::string msg = ERROR_MESSAGE(y.backward(f64({1, 1})));
  EXPECT_THAT(msg, HasSubstr("TMulBackward"));
  EXPECT_THAT(msg, HasSubstr("modified by an inplace operation"));
  EXPECT_THAT(msg, HasSubstr("is at version 1; expected version 0"));
  EXPECT_THAT(msg, HasSubstr("[2] f64"));
}

TEST(SavedTensor, InPlaceModificationThroughAViewIsCaught) {
  Tensor x = f64({1, 2, 3, 4}).set_requires_grad();
  Tensor w = f64({1, 1, 1, 1});
  Tensor y = tmul(x, w);
  w.narrow(0, 1, 2).fill_(0);  // views share the version counter
  EXPECT_THAT(ERROR_MESSAGE(y.backward(f64({1, 1, 1, 1}))), HasSubstr("modified by an inplace operation"));
}

TEST(SavedTensor, ModificationAfterBackwardIsFine) {
  Tensor x = f64({1, 2}).set_requires_grad();
  Tensor w = f64({3, 4});
  Tensor y = tmul(x, w);
  y.backward(f64({1, 1}));
  w.fill_(0);
  EXPECT_THAT(vals(x.grad()), ElementsAre(3, 4));
}

// Counts every pack and unpack, and moves each saved value into a fresh copy (as the tape streamer
// moves values to the slow tier): gradients must not change.
struct CountingHooks : autograd::SavedTensorHooks {
  int packs = 0, unpacks = 0;
  std::size_t packed_bytes = 0;
  std::any pack(const Tensor& v) override {
    ++packs;
    packed_bytes += v.nbytes();
    return v.clone();
  }
  Tensor unpack(std::any& p) override {
    ++unpacks;
    return std::any_cast<Tensor>(p);
  }
};

TEST(SavedTensorHooks, SeeEverySavedValueIncludingBuiltInOps) {
  auto hooks = std::make_shared<CountingHooks>();
  Tensor x = f64({1, -2, 3}).set_requires_grad();
  Tensor w = f64({2, 2, 2});
  Tensor y;
  {
    autograd::SavedTensorHooksGuard guard(hooks);
    Tensor a = tmul(x, w);  // saves 2
    Tensor r = relu(a);     // built-in op: saves a bit mask of its output (1 byte for 3 elements)
    y = tmul(r, r);         // saves 2
  }
  EXPECT_EQ(hooks->packs, 5);
  std::size_t listed = 0;
  for (const auto& rec : autograd::recorded_nodes({y}))
    for (const auto& s : rec.saved) {
      EXPECT_TRUE(s.packed);
      EXPECT_EQ(s.tier, "packed");
      ++listed;
    }
  EXPECT_EQ(listed, 5u);
  EXPECT_EQ(hooks->packed_bytes, 4 * 3 * sizeof(double) + 1);
  y.backward(f64({1, 1, 1}));
  EXPECT_EQ(hooks->unpacks, 5);
  // y = (2x)^2 where 2x > 0, else 0 → 8x or 0
  EXPECT_THAT(vals(x.grad()), ElementsAre(8, 0, 24));
}

TEST(SavedTensorHooks, InnermostWinsAndHooksOutliveTheirScope) {
  auto outer = std::make_shared<CountingHooks>();
  auto inner = std::make_shared<CountingHooks>();
  Tensor x = f64({2}).set_requires_grad();
  Tensor y;
  {
    autograd::SavedTensorHooksGuard g1(outer);
    {
      autograd::SavedTensorHooksGuard g2(inner);
      y = tmul(x, x);
    }
    y = tmul(y, x);
  }
  EXPECT_EQ(inner->packs, 2);
  EXPECT_EQ(outer->packs, 2);
  EXPECT_EQ(autograd::current_saved_tensor_hooks(), nullptr);
  y.backward();  // guards are gone; each value is unpacked by the hooks that packed it
  EXPECT_EQ(inner->unpacks, 2);
  EXPECT_EQ(outer->unpacks, 2);
  EXPECT_THAT(vals(x.grad()), ElementsAre(12));
}

TEST(SavedTensorHooks, UnpackReturningTheWrongShapeIsAnError) {
  auto hooks = autograd::make_saved_tensor_hooks([](const Tensor& t) { return std::any(t); },
                                                 [](std::any&) { return f64({1, 2, 3}); });
  Tensor x = f64({2}).set_requires_grad();
  Tensor y;
  {
    autograd::SavedTensorHooksGuard g(hooks);
    y = tmul(x, x);
  }
  EXPECT_THAT(ERROR_MESSAGE(y.backward()), HasSubstr("unpack hook"));
}

TEST(SavedTensorHooks, VersionIsCheckedEvenWhenAHookHoldsACopy) {
  auto hooks = std::make_shared<CountingHooks>();
  Tensor x = f64({1}).set_requires_grad();
  Tensor w = f64({3});
  Tensor y;
  {
    autograd::SavedTensorHooksGuard g(hooks);
    y = tmul(x, w);
  }
  w.fill_(1);
  EXPECT_THAT(ERROR_MESSAGE(y.backward()), HasSubstr("modified by an inplace operation"));
}

std::size_t bytes_in_use() {
  auto s = memory::tiered_memory().manager().stats().snapshot();
  return s.fast.current_bytes + s.slow.current_bytes;
}

TEST(SavedTensor, SavedValuesAreReleasedAsTheirNodesRunAndMemoryReturnsToBaseline) {
  Tensor x = f64(std::vector<double>(4096, 1.5)).set_requires_grad();
  Tensor w = f64(std::vector<double>(4096, 2.0));
  const std::size_t baseline = bytes_in_use();
  Tensor y;
  {
    Tensor h = x;
    for (int i = 0; i < 8; ++i) h = relu(tmul(h, w));
    y = h;
  }
  // Each step saves h and w (TMul) and relu's bit mask (4096 bits: Note [ReLU saves a bit mask]);
  // the relu outputs (the next step's h, and y) and the masks are what stays allocated (the
  // products die once relu has consumed them).
  EXPECT_EQ(autograd::saved_bytes({y}), 8 * (2 * 4096 * sizeof(double) + 4096 / 8));
  EXPECT_EQ(bytes_in_use(), baseline + 8 * (4096 * sizeof(double) + 4096 / 8));
  y.backward(f64(std::vector<double>(4096, 1.0)));
  // The graph is still reachable from y, but every saved value has been released.
  EXPECT_EQ(autograd::saved_bytes({y}), 0u);
  for (const auto& rec : autograd::recorded_nodes({y}))
    for (const auto& s : rec.saved) EXPECT_TRUE(s.released) << rec.name;
  y = Tensor();
  // What remains beyond the baseline is x.grad.
  EXPECT_EQ(bytes_in_use(), baseline + x.grad().nbytes());
}

TEST(Tape, IntrospectionListsNodesInRecordingOrderWithSavedValues) {
  Tensor x = f64({1, 2, 3}).set_requires_grad();
  Tensor w = f64({1, 1, 1});
  Tensor a = tmul(x, w);
  Tensor b = relu(a);
  Tensor c = tadd(b, x);
  const auto nodes = autograd::recorded_nodes({c});
  ASSERT_EQ(nodes.size(), 3u);
  EXPECT_EQ(nodes[0].name, "TMulBackward");
  EXPECT_EQ(nodes[1].name, "ReluBackward");
  EXPECT_EQ(nodes[2].name, "TAddBackward");
  EXPECT_LT(nodes[0].sequence_nr, nodes[1].sequence_nr);
  ASSERT_EQ(nodes[0].saved.size(), 2u);
  EXPECT_EQ(nodes[0].saved[0].bytes, 3 * sizeof(double));
  EXPECT_EQ(nodes[0].saved[0].dtype, DType::f64);
  EXPECT_EQ(std::vector<int64_t>(nodes[0].saved[0].sizes.begin(), nodes[0].saved[0].sizes.end()),
            std::vector<int64_t>{3});
  EXPECT_EQ(nodes[0].saved[0].tier, std::string(memory::where(x.storage())));
  EXPECT_EQ(nodes[2].saved.size(), 0u);
  const std::string table = autograd::format_saved_residuals({c});
  EXPECT_THAT(table, HasSubstr("ReluBackward"));
  EXPECT_THAT(table, HasSubstr("3 nodes, 3 saved values held, 49 bytes"));  // relu's mask: 1 byte
  c.backward(f64({1, 1, 1}));
  EXPECT_THAT(autograd::format_saved_residuals({c}), HasSubstr("released"));
}

TEST(Tape, WhereReportsTiers) {
  EXPECT_EQ(memory::where(Storage()), "none");
  Tensor t = zeros({4});
  const auto w = memory::where(t.storage());
  EXPECT_TRUE(w == "fast" || w == "slow" || w == "dram") << w;
}

}  // namespace
}  // namespace strata_test
