// Strata's oneDNN primitive cache and cached weight reorders (ops/detail/cpu/primitive_cache.h), driven
// through conv2d on the primitive path.

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "ops/conv.h"
#include "ops/detail/cpu/dnnl_engine.h"
#include "ops/detail/cpu/primitive_cache.h"
#include "tests/cpp/ops/harness/op_harness.h"

namespace strata::testing {
namespace {

using ops::cpu::cached_primitive;
using ops::cpu::DnnlPrimitives;
using ops::cpu::primitive_cache_stats;
using ops::cpu::PrimitiveKey;

using ModeGuard = ops::cpu::DnnlPrimitivesGuard;

/// One forward + backward on shapes no other test uses.
void step(const Tensor& x, const Tensor& w, const Tensor& b) {
  Tensor xx = x.detach().set_requires_grad(true);
  Tensor ww = w.detach().set_requires_grad(true);
  Tensor bb = b.detach().set_requires_grad(true);
  Tensor y = conv2d(xx, ww, bb, {1}, {1});
  y.backward(ones(y.sizes(), {DType::f32, nullptr}));
}

TEST(PrimitiveCache, NoPrimitiveIsBuiltTwice) {
  ModeGuard guard(DnnlPrimitives::Always);
  Generator gen(1);
  const Tensor x = randn32({3, 5, 7, 7}, gen), w = randn32({6, 5, 3, 3}, gen), b = randn32({6}, gen);
  const auto s0 = primitive_cache_stats();
  step(x, w, b);
  const auto s1 = primitive_cache_stats();
  // Forward, backward data and backward weights (+ any weight reorders).
  EXPECT_GE(s1.builds - s0.builds, 3u);
  for (int i = 0; i < 3; ++i) step(x, w, b);
  const auto s2 = primitive_cache_stats();
  EXPECT_EQ(s2.builds, s1.builds);
  EXPECT_GE(s2.hits - s1.hits, 9u);
  // A different attribute is a different key.
  conv2d(x, w, b, {2}, {1});
  const auto s3 = primitive_cache_stats();
  EXPECT_GE(s3.builds, s2.builds + 1);
  conv2d(x, w, b, {2}, {1});
  EXPECT_EQ(primitive_cache_stats().builds, s3.builds);
}

TEST(PrimitiveCache, ConcurrentFirstUseBuildsOnce) {
#if defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "TSan: primitives run from several threads make TSan report races inside the "
                  "uninstrumented libtbb of oneDNN's SYCL runtime (Note [When Strata uses oneDNN "
                  "primitives] in ops/detail/cpu/dnnl_engine.h); Release and ASan run this test";
#endif
  ModeGuard guard(DnnlPrimitives::Always);
  Generator gen(2);
  const Tensor x = randn32({2, 3, 9, 9}, gen), w = randn32({5, 3, 3, 3}, gen);
  const auto s0 = primitive_cache_stats();
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 3; ++i) conv2d(x, w, Tensor(), {1}, {0});
    });
  for (auto& t : threads) t.join();
  const auto s1 = primitive_cache_stats();
  const uint64_t builds = s1.builds - s0.builds;
  conv2d(x, w, Tensor(), {1}, {0});
  EXPECT_EQ(primitive_cache_stats().builds - s0.builds, builds);
  EXPECT_LE(builds, 2u);  // the forward primitive and at most one weight reorder
}

// The cache's own locking, without oneDNN (so it also runs under TSan): 4 threads ask for 64 keys
// in different orders; every key is built exactly once and every thread gets the same entry.
TEST(PrimitiveCacheStress, ConcurrentLookupsBuildEachKeyOnce) {
  constexpr int kKeys = 64, kThreads = 4;
  std::vector<std::atomic<int>> built(kKeys);
  std::vector<std::vector<const int*>> seen(kThreads, std::vector<const int*>(kKeys));
  const auto s0 = primitive_cache_stats();
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      for (int r = 0; r < 3; ++r)
        for (int i = 0; i < kKeys; ++i) {
          const int k = (i * (2 * t + 1) + r) % kKeys;
          PrimitiveKey key;
          key.add(987654).add(k);  // a kind tag no op uses
          auto e = cached_primitive<int>(key, [&] {
            built[k].fetch_add(1);
            return k * 10;
          });
          ASSERT_EQ(*e, k * 10);
          if (r == 0)
            seen[t][k] = e.get();
          else
            ASSERT_EQ(seen[t][k], e.get());
        }
    });
  for (auto& th : threads) th.join();
  for (int k = 0; k < kKeys; ++k) {
    EXPECT_EQ(built[k].load(), 1) << "key " << k;
    for (int t = 1; t < kThreads; ++t) EXPECT_EQ(seen[t][k], seen[0][k]);
  }
  EXPECT_EQ(primitive_cache_stats().builds - s0.builds, static_cast<uint64_t>(kKeys));
}

TEST(PrimitiveCache, WeightsReorderedOncePerVersion) {
  ModeGuard guard(DnnlPrimitives::Always);
  Generator gen(3);
  // 64 channels: oneDNN wants these weights blocked, never plain oihw.
  const Tensor x = randn32({2, 64, 10, 10}, gen);
  Tensor w = randn32({64, 64, 3, 3}, gen);
  const auto s0 = primitive_cache_stats();
  const Tensor y0 = conv2d(x, w, Tensor(), {1}, {1});
  const auto s1 = primitive_cache_stats();
  ASSERT_EQ(s1.weight_reorders - s0.weight_reorders, 1u) << "expected a blocked weight layout";
  // Same version: no reorder.
  const Tensor y1 = conv2d(x, w, Tensor(), {1}, {1});
  const auto s2 = primitive_cache_stats();
  EXPECT_EQ(s2.weight_reorders, s1.weight_reorders);
  EXPECT_EQ(s2.weight_reuses - s1.weight_reuses, 1u);
  EXPECT_EQ(values_of(y1), values_of(y0));
  // copy_ bumps the version: exactly one reorder, and the result uses the new values.
  const Tensor w2 = randn32({64, 64, 3, 3}, gen);
  w.copy_(w2);
  const Tensor y2 = conv2d(x, w, Tensor(), {1}, {1});
  const auto s3 = primitive_cache_stats();
  EXPECT_EQ(s3.weight_reorders - s2.weight_reorders, 1u);
  Tensor y2_own;
  {
    ModeGuard never(DnnlPrimitives::Never);
    y2_own = conv2d(x, w2, Tensor(), {1}, {1});
  }
  const auto a = values_of(y2), e = values_of(y2_own);
  for (std::size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], e[i], 1e-3 + 1e-4 * std::abs(e[i])) << i;
  conv2d(x, w, Tensor(), {1}, {1});
  EXPECT_EQ(primitive_cache_stats().weight_reorders, s3.weight_reorders);
  // An explicit bump (what optimizers do) also triggers one reorder.
  w.bump_version();
  conv2d(x, w, Tensor(), {1}, {1});
  EXPECT_EQ(primitive_cache_stats().weight_reorders - s3.weight_reorders, 1u);
}

TEST(PrimitiveCache, EntriesOfFreedWeightsAreDropped) {
  ModeGuard guard(DnnlPrimitives::Always);
  Generator gen(4);
  const Tensor x = randn32({1, 32, 6, 6}, gen);
  {
    Tensor w = randn32({32, 32, 3, 3}, gen);
    conv2d(x, w, Tensor(), {1}, {1});
  }
  // A new weight (possibly at the same address) must be reordered, not served stale.
  const Tensor w2 = randn32({32, 32, 3, 3}, gen);
  const auto s0 = primitive_cache_stats();
  const Tensor y = conv2d(x, w2, Tensor(), {1}, {1});
  EXPECT_EQ(primitive_cache_stats().weight_reorders - s0.weight_reorders, 1u);
  Tensor y_own;
  {
    ModeGuard never(DnnlPrimitives::Never);
    y_own = conv2d(x, w2, Tensor(), {1}, {1});
  }
  const auto a = values_of(y), e = values_of(y_own);
  for (std::size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], e[i], 1e-3 + 1e-4 * std::abs(e[i])) << i;
}

}  // namespace
}  // namespace strata::testing
