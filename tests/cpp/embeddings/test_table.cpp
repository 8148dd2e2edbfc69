// The Table API (Table 5.2) and SimpleTable in either tier.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <vector>

#include "core/error.h"
#include "embeddings/table.h"
#include "memory/heap.h"
#include "tests/cpp/error_text.h"

using namespace strata;
using namespace strata::emb;
using ::testing::HasSubstr;

namespace {

using strata::testing_util::message_of;

std::vector<float> iota_rows(int64_t rows, int64_t d) {
  std::vector<float> v(static_cast<std::size_t>(rows * d));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = 0.25f * static_cast<float>(i) - 3.0f;
  return v;
}

}  // namespace

TEST(SimpleTable, RoundTripsRowsInTheFastTier) {
  memory::DramHeap heap(1 << 20);
  SimpleTable t(100, 16, ElemType::F32, {&heap, nullptr});
  EXPECT_EQ(t.nvectors(), 100);
  EXPECT_EQ(t.featuresize(), 16);
  EXPECT_EQ(t.row_bytes(), 64u);
  EXPECT_EQ(t.kind(), "simple");
  EXPECT_FALSE(t.slow());
  const auto src = iota_rows(100, 16);
  t.copy_from(src.data());
  std::vector<float> back(src.size());
  t.copy_to(back.data());
  EXPECT_EQ(back, src);
  // rowpointer addresses row r at base + r * row_bytes, whatever the context.
  EXPECT_EQ(t.rowpointer(7, AccessContext::Forward), t.data() + 7 * 64);
  EXPECT_EQ(t.rowpointer(7, AccessContext::Update), t.row(7));
  EXPECT_EQ(reinterpret_cast<const float*>(t.row(3))[5], src[3 * 16 + 5]);
  EXPECT_EQ(t.counters().slow_bytes_read, 0u);
}

TEST(SimpleTable, SlowTierRowsAreChargedAndCounted) {
  const auto dir = std::filesystem::temp_directory_path();
  memory::PmHeap heap({.capacity = 1 << 20, .dir = dir.string(), .backend = memory::PmBackend::Mmap});
  memory::SlowTierThrottle throttle(memory::SlowTierModel::custom(100.0, 50.0, 0.0));
  SimpleTable t(10, 8, ElemType::F32, {&heap, &throttle});
  EXPECT_TRUE(t.slow());
  EXPECT_TRUE(t.in_slow(t.row(0)));
  std::vector<float> row(8, 1.5f), out(8);
  t.write_row(4, row.data());
  t.read_row(4, out.data());
  EXPECT_EQ(out, row);
  EXPECT_EQ(t.counters().slow_bytes_written, 32u);
  EXPECT_EQ(t.counters().slow_bytes_read, 32u);
  EXPECT_EQ(throttle.counters().bytes_read, 32u);
  t.reset_counters();
  EXPECT_EQ(t.counters().slow_bytes_read, 0u);
}

TEST(SimpleTable, Bf16RowsRoundToNearestEven) {
  memory::DramHeap heap(1 << 16);
  SimpleTable t(2, 4, ElemType::BF16, {&heap, nullptr});
  EXPECT_EQ(t.row_bytes(), 8u);
  const std::vector<float> src = {1.0f, 1.00390625f /* 1 + 2^-8: ties to even -> 1 */, -2.5f, 3.0e-3f};
  t.write_row(1, src.data());
  std::vector<float> out(4);
  t.read_row(1, out.data());
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_EQ(out[1], 1.0f);
  EXPECT_EQ(out[2], -2.5f);
  EXPECT_EQ(out[3], static_cast<float>(BFloat16(3.0e-3f)));
  EXPECT_NE(out[3], 3.0e-3f);
}

TEST(SimpleTable, BadInputGetsClearErrors) {
  memory::DramHeap heap(4096);
  EXPECT_THAT(message_of([&] { SimpleTable t(0, 4, ElemType::F32, {&heap, nullptr}); }),
              HasSubstr("nvectors must be positive, got 0"));
  EXPECT_THAT(message_of([&] { SimpleTable t(4, -1, ElemType::F32, {&heap, nullptr}); }),
              HasSubstr("featuresize must be positive, got -1"));
  EXPECT_THAT(message_of([&] { SimpleTable t(4, 4, ElemType::F32, {nullptr, nullptr}); }), HasSubstr("no heap"));
  EXPECT_THAT(message_of([&] { SimpleTable t(1000, 64, ElemType::F32, {&heap, nullptr}); }),
              HasSubstr("has no room for 1000 rows of 256 bytes"));
  SimpleTable t(4, 4, ElemType::F32, {&heap, nullptr});
  t.set_name("table 3");
  std::vector<float> row(4);
  EXPECT_THAT(message_of([&] { t.read_row(4, row.data()); }),
              HasSubstr("embedding table 3: row 4 is out of range [0, 4)"));
  EXPECT_THAT(message_of([&] { t.write_row(-1, row.data()); }), HasSubstr("row -1 is out of range"));
  EXPECT_THAT(message_of([] { parse_elem_type("f16"); }), HasSubstr("'f16' is not supported; expected f32 or bf16"));
  EXPECT_EQ(parse_elem_type("bfloat16"), ElemType::BF16);
}
