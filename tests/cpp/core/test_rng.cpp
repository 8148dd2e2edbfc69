// Philox4x32-10 known answers, the Generator's counter bookkeeping, reproducibility, and thread-count
// independence of the random factories.

#include "core/rng.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include "core/factories.h"
#include "core/threading.h"
#include "test_util.h"

namespace {

using namespace strata;
using strata_test::values;
using W4 = std::array<uint32_t, 4>;

// ---- Philox known-answer tests (Random123 kat_vectors, philox4x32 with 10 rounds) -----------------

TEST(Philox, KnownAnswerZero) {
  EXPECT_EQ(philox4x32_10({0u, 0u}, {0u, 0u, 0u, 0u}), (W4{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}));
}

TEST(Philox, KnownAnswerAllOnes) {
  EXPECT_EQ(philox4x32_10({0xffffffffu, 0xffffffffu}, {0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}),
            (W4{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}));
}

TEST(Philox, KnownAnswerPi) {
  EXPECT_EQ(philox4x32_10({0xa4093822u, 0x299f31d0u}, {0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}),
            (W4{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}));
}

TEST(Philox, EveryInputWordMatters) {
  const W4 base = philox4x32_10({1u, 2u}, {3u, 4u, 5u, 6u});
  EXPECT_EQ(philox4x32_10({1u, 2u}, {3u, 4u, 5u, 6u}), base);  // a pure function
  EXPECT_NE(philox4x32_10({0u, 2u}, {3u, 4u, 5u, 6u}), base);
  EXPECT_NE(philox4x32_10({1u, 0u}, {3u, 4u, 5u, 6u}), base);
  EXPECT_NE(philox4x32_10({1u, 2u}, {0u, 4u, 5u, 6u}), base);
  EXPECT_NE(philox4x32_10({1u, 2u}, {3u, 0u, 5u, 6u}), base);
  EXPECT_NE(philox4x32_10({1u, 2u}, {3u, 4u, 0u, 6u}), base);
  EXPECT_NE(philox4x32_10({1u, 2u}, {3u, 4u, 5u, 0u}), base);
}

// ---- unit conversions --------------------------------------------------------------------------

TEST(UnitConversions, RangeAndResolution) {
  EXPECT_EQ(uint32_to_unit_float(0u), 0.0f);
  EXPECT_LT(uint32_to_unit_float(0xffffffffu), 1.0f);
  EXPECT_EQ(uint32_to_unit_float(0xffffffffu), 1.0f - 0x1.0p-24f);
  EXPECT_EQ(uint32_to_unit_float(0x80000000u), 0.5f);
  EXPECT_EQ(uint64_to_unit_double(0u), 0.0);
  EXPECT_LT(uint64_to_unit_double(~uint64_t{0}), 1.0);
  EXPECT_EQ(uint64_to_unit_double(~uint64_t{0}), 1.0 - 0x1.0p-53);
  EXPECT_EQ(uint64_to_unit_double(uint64_t{1} << 63), 0.5);
}

// ---- Generator ---------------------------------------------------------------------------------

TEST(Generator, SeedAndOffsetBookkeeping) {
  Generator g(1234);
  EXPECT_EQ(g.seed(), 1234u);
  EXPECT_EQ(g.offset(), 0u);
  const PhiloxRange r = g.reserve(3);
  EXPECT_EQ(r.first, 0u);
  EXPECT_EQ(r.count, 3u);
  EXPECT_EQ(g.offset(), 3u);
  EXPECT_EQ(g.reserve(1).first, 3u);
  EXPECT_EQ(g.reserve(0).first, 4u);
  EXPECT_EQ(g.offset(), 4u);
  g.set_offset(100);
  EXPECT_EQ(g.offset(), 100u);
  const PhiloxRange r2 = g.reserve(2);
  EXPECT_EQ(r2.first, 100u);
  EXPECT_EQ(r2.count, 2u);
  EXPECT_EQ(g.offset(), 102u);
  g.manual_seed(77);
  EXPECT_EQ(g.seed(), 77u);
  EXPECT_EQ(g.offset(), 0u) << "manual_seed restarts the stream (like torch.Generator.manual_seed)";
  Generator d;
  EXPECT_EQ(d.seed(), Generator::kDefaultSeed);
}

TEST(Generator, BlocksArePureFunctionsOfSeedAndIndex) {
  Generator a(42), b(42), c(43);
  EXPECT_EQ(a.block(0), b.block(0));
  EXPECT_EQ(a.block(123456789), b.block(123456789));
  EXPECT_NE(a.block(0), a.block(1));
  EXPECT_NE(a.block(0), c.block(0));
  // Indices differing only in the high 32 bits give different blocks (the counter is 64-bit wide).
  EXPECT_NE(a.block(5), a.block(5 + (uint64_t{1} << 32)));
  // Seeds differing only in the high 32 bits give different streams.
  Generator hi1(uint64_t{1} << 32), hi2(uint64_t{2} << 32);
  EXPECT_NE(hi1.block(0), hi2.block(0));
  // block() does not consume.
  EXPECT_EQ(a.offset(), 0u);
  // Reseeding with the same seed reproduces the blocks.
  a.manual_seed(43);
  EXPECT_EQ(a.block(7), c.block(7));
}

TEST(Generator, RangeBlocksMatchGeneratorBlocks) {
  Generator g(555);
  g.set_offset(uint64_t{1} << 32);  // the counter's high word is used
  const PhiloxRange r = g.reserve(10);
  for (uint64_t j = 0; j < 10; ++j) EXPECT_EQ(r.block(j), g.block(r.first + j)) << j;
  // The range keeps the key it was reserved under even if the generator is reseeded afterwards.
  const auto before = r.block(3);
  g.manual_seed(556);
  EXPECT_EQ(r.block(3), before);
  EXPECT_NE(g.block(r.first + 3), before);
  // Counter layout documented in PhiloxRange::block: (lo32(index), hi32(index), 0, 0).
  EXPECT_EQ(r.block(0), philox4x32_10(r.key, {0u, 1u, 0u, 0u}));
}

TEST(Generator, BlocksLookRandom) {
  // Cheap sanity: over 4096 blocks each of the 32 bit positions is set about half the time.
  Generator g(9);
  std::array<int, 32> ones{};
  const int n = 4096;
  for (int i = 0; i < n; ++i) {
    for (uint32_t w : g.block(static_cast<uint64_t>(i))) {
      for (int bit = 0; bit < 32; ++bit) ones[static_cast<std::size_t>(bit)] += (w >> bit) & 1u;
    }
  }
  for (int c : ones) EXPECT_NEAR(c, 2 * n, 300);  // 4n samples per bit, sd = sqrt(n) = 64
}

TEST(Generator, ConcurrentReservationsAreDisjoint) {
  Generator g(1);
  constexpr int kThreads = 4;
  constexpr int kPerThread = 2000;
  std::vector<std::vector<std::pair<uint64_t, uint64_t>>> got(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        const uint64_t n = 1 + static_cast<uint64_t>((i + t) % 3);
        const PhiloxRange r = g.reserve(n);
        got[static_cast<std::size_t>(t)].emplace_back(r.first, r.count);
      }
    });
  }
  for (auto& th : threads) th.join();
  std::vector<std::pair<uint64_t, uint64_t>> all;
  for (const auto& v : got) all.insert(all.end(), v.begin(), v.end());
  std::sort(all.begin(), all.end());
  uint64_t next = 0;
  for (const auto& [first, n] : all) {
    ASSERT_EQ(first, next) << "reserved ranges overlap or leave a gap";
    next = first + n;
  }
  EXPECT_EQ(g.offset(), next);
}

TEST(Generator, DefaultGeneratorAndManualSeed) {
  manual_seed(2718);
  EXPECT_EQ(default_generator().seed(), 2718u);
  EXPECT_EQ(default_generator().offset(), 0u);
  (void)rand({10});
  EXPECT_GT(default_generator().offset(), 0u);
  manual_seed(2718);
  EXPECT_EQ(default_generator().offset(), 0u);
  EXPECT_EQ(&default_generator(), &default_generator());
}

// ---- reproducibility ---------------------------------------------------------------------------

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.numel() == b.numel() && a.is_contiguous() && b.is_contiguous() &&
         std::memcmp(a.data_ptr(), b.data_ptr(), a.nbytes()) == 0;
}

TEST(Reproducibility, SameSeedSameValues) {
  manual_seed(5);
  Tensor a = rand({1000});
  Tensor an = randn({1000});
  Tensor ai = randint(0, 1000, {1000});
  manual_seed(5);
  Tensor b = rand({1000});
  Tensor bn = randn({1000});
  Tensor bi = randint(0, 1000, {1000});
  EXPECT_TRUE(same_bytes(a, b));
  EXPECT_TRUE(same_bytes(an, bn));
  EXPECT_TRUE(same_bytes(ai, bi));
  // Consecutive draws differ; other seeds differ.
  Tensor c = rand({1000});
  EXPECT_FALSE(same_bytes(a, c));
  manual_seed(6);
  EXPECT_FALSE(same_bytes(a, rand({1000})));
}

TEST(Reproducibility, ExplicitGeneratorsAreIndependentOfTheDefault) {
  manual_seed(1);
  const uint64_t before = default_generator().offset();
  Generator g1(77), g2(77);
  Tensor a = randn({333}, {DType::f64, nullptr}, &g1);
  Tensor b = randn({333}, {DType::f64, nullptr}, &g2);
  EXPECT_TRUE(same_bytes(a, b));
  EXPECT_EQ(default_generator().offset(), before);
  EXPECT_GT(g1.offset(), 0u);
  EXPECT_EQ(g1.offset(), g2.offset());
  // Reseeding an explicit generator reproduces its stream.
  g1.manual_seed(77);
  EXPECT_TRUE(same_bytes(randn({333}, {DType::f64, nullptr}, &g1), a));
}

TEST(Reproducibility, RandF32FollowsTheDocumentedCounterLayout) {
  // rng.h: element i of a draw uses counter (offset + i / 4); rand f32 maps a word to [0, 1) with
  // uint32_to_unit_float.
  Generator g(31337);
  g.set_offset(10);
  Tensor r = rand({10}, {}, &g);
  EXPECT_EQ(g.offset(), 13u) << "10 elements use ceil(10 / 4) = 3 blocks";
  const float* p = r.data<float>();
  for (int i = 0; i < 10; ++i) {
    const uint32_t word = g.block(10 + static_cast<uint64_t>(i / 4))[static_cast<std::size_t>(i % 4)];
    EXPECT_EQ(p[i], uint32_to_unit_float(word)) << "element " << i;
  }
}

TEST(Reproducibility, SplitDrawsMatchOneDraw) {
  // With 4 elements per block, two draws of 8 equal one draw of 16.
  Generator g1(8), g2(8);
  Tensor a = rand({8}, {}, &g1);
  Tensor b = rand({8}, {}, &g1);
  Tensor c = rand({16}, {}, &g2);
  EXPECT_EQ(std::memcmp(a.data_ptr(), c.data_ptr(), 32), 0);
  EXPECT_EQ(std::memcmp(b.data_ptr(), static_cast<const char*>(c.data_ptr()) + 32, 32), 0);
  EXPECT_EQ(g1.offset(), g2.offset());
}

TEST(Reproducibility, ShapeDoesNotChangeTheStream) {
  Generator g1(3), g2(3);
  Tensor a = randn({6, 7}, {}, &g1);
  Tensor b = randn({42}, {}, &g2);
  EXPECT_EQ(std::memcmp(a.data_ptr(), b.data_ptr(), 42 * sizeof(float)), 0);
}

// ---- thread-count independence -----------------------------------------------------------------

class ThreadCountIndependence : public ::testing::Test {
 protected:
  void SetUp() override { saved_ = get_num_threads(); }
  void TearDown() override { set_num_threads(saved_); }

  template <typename Draw>
  void expect_independent(Draw draw, const char* what) {
    set_num_threads(1);
    Generator g1(20240601);
    g1.set_offset(5);
    Tensor one = draw(g1);
    set_num_threads(2);
    Generator g2(20240601);
    g2.set_offset(5);
    Tensor two = draw(g2);
    EXPECT_TRUE(same_bytes(one, two)) << what << " differs between 1 and 2 threads";
    EXPECT_EQ(g1.offset(), g2.offset()) << what;
  }

 private:
  int saved_ = 1;
};

TEST_F(ThreadCountIndependence, RandF32) {
  expect_independent([](Generator& g) { return rand({1 << 20}, {}, &g); }, "rand f32");
}
TEST_F(ThreadCountIndependence, RandnF32) {
  expect_independent([](Generator& g) { return randn({1 << 20}, {}, &g); }, "randn f32");
}
TEST_F(ThreadCountIndependence, RandF64AndBF16) {
  expect_independent([](Generator& g) { return rand({(1 << 16) + 3}, {DType::f64, nullptr}, &g); }, "rand f64");
  expect_independent([](Generator& g) { return rand({(1 << 16) + 1}, {DType::bf16, nullptr}, &g); }, "rand bf16");
}
TEST_F(ThreadCountIndependence, RandnF64NormalUniform) {
  expect_independent([](Generator& g) { return randn({(1 << 16) + 1}, {DType::f64, nullptr}, &g); }, "randn f64");
  expect_independent([](Generator& g) { return normal({(1 << 16) + 2}, 1, 3, {}, &g); }, "normal f32");
  expect_independent([](Generator& g) { return uniform({(1 << 16) + 3}, -1, 1, {DType::bf16, nullptr}, &g); },
                     "uniform bf16");
}
TEST_F(ThreadCountIndependence, Randint) {
  expect_independent([](Generator& g) { return randint(-50, 1000, {(1 << 16) + 1}, {DType::i32, nullptr}, &g); },
                     "randint i32");
  expect_independent([](Generator& g) { return randint(0, int64_t{1} << 50, {1 << 16}, {DType::i64, nullptr}, &g); },
                     "randint i64");
}

}  // namespace
