// Printing: to_string (PyTorch-like), summarization of large tensors, describe(), operator<<.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>
#include <string>

#include "core/factories.h"
#include "core/tensor.h"
#include "test_util.h"

namespace {

using namespace strata;
using ::testing::AllOf;
using ::testing::ContainsRegex;
using ::testing::EndsWith;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

int64_t count(const std::string& s, char c) { return std::count(s.begin(), s.end(), c); }

TEST(Print, DocumentedExample) {
  // tensor.h documents exactly this form.
  Tensor t = tensor<float>({1, 2, 3, 4}, IntArrayRef({2, 2}));
  EXPECT_EQ(t.to_string(), "tensor([[1., 2.],\n        [3., 4.]], dtype=f32)");
}

TEST(Print, IntegerDTypes) {
  EXPECT_EQ(arange(3).to_string(), "tensor([0, 1, 2], dtype=i64)");
  EXPECT_EQ(arange(0, 6, 1, {DType::i32, nullptr}).view({2, 3}).to_string(),
            "tensor([[0, 1, 2],\n        [3, 4, 5]], dtype=i32)");
  const std::string u = tensor<uint8_t>({0, 255}).to_string();
  EXPECT_THAT(u, AllOf(StartsWith("tensor(["), HasSubstr("255"), EndsWith("dtype=u8)")));
  const std::string neg = tensor<int32_t>({-1, 10}).to_string();
  EXPECT_THAT(neg, AllOf(ContainsRegex("-1, +10"), EndsWith("dtype=i32)")));
}

TEST(Print, LargeIntegersAreExact) {
  // Values beyond 2^53 must not be printed through a double.
  const int64_t big = (int64_t{1} << 60) + 1;
  EXPECT_EQ(tensor<int64_t>({big, -big}).to_string(),
            "tensor([ 1152921504606846977, -1152921504606846977], dtype=i64)");
  EXPECT_THAT(tensor<int64_t>({std::numeric_limits<int64_t>::max()}).to_string(), HasSubstr("9223372036854775807"));
  EXPECT_THAT(tensor<int64_t>({std::numeric_limits<int64_t>::min()}).to_string(), HasSubstr("-9223372036854775808"));
}

TEST(Print, FloatingDTypes) {
  const std::string f = tensor<float>({1.5f, -2.25f}).to_string();
  EXPECT_THAT(f, AllOf(StartsWith("tensor(["), HasSubstr("1.5"), HasSubstr("-2.25"), EndsWith("], dtype=f32)")));
  const std::string d = tensor<double>({0.5, 0.125}).to_string();
  EXPECT_THAT(d, AllOf(HasSubstr("0.5"), HasSubstr("0.125"), EndsWith("dtype=f64)")));
  EXPECT_EQ(tensor<float>({1, 2}).to(DType::bf16).to_string(), "tensor([1., 2.], dtype=bf16)");
  const std::string special =
      tensor<float>({std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                     -std::numeric_limits<float>::infinity()})
          .to_string();
  EXPECT_THAT(special, AllOf(HasSubstr("nan"), HasSubstr("inf"), HasSubstr("-inf")));
  // Tiny and huge values must not print as 0 or lose their magnitude.
  const std::string tiny = tensor<double>({1e-8, 1.0}).to_string();
  EXPECT_THAT(tiny, ContainsRegex("1(\\.0*)?e-0?8"));
  const std::string huge = tensor<double>({1e12, 1.0}).to_string();
  EXPECT_THAT(huge, ContainsRegex("1(\\.0*)?e\\+?12"));
}

TEST(Print, Bool) {
  const std::string b = tensor<bool>({true, false}).to_string();
  EXPECT_THAT(b, AllOf(StartsWith("tensor(["), HasSubstr("True"), HasSubstr("False"), EndsWith("dtype=bool)")));
}

TEST(Print, ScalarsAndEmpty) {
  EXPECT_THAT(scalar_tensor(3, DType::i64).to_string(), AllOf(StartsWith("tensor(3"), EndsWith("dtype=i64)")));
  EXPECT_THAT(scalar_tensor(2.5).to_string(), AllOf(StartsWith("tensor(2.5"), EndsWith("dtype=f32)")));
  EXPECT_THAT(zeros({0}).to_string(), AllOf(StartsWith("tensor([]"), EndsWith(")")));
  const std::string e2 = zeros({0, 3}).to_string();
  EXPECT_THAT(e2, StartsWith("tensor([]"));
  EXPECT_THAT(e2, HasSubstr("0, 3")) << "an empty tensor's shape is not visible from its values";
}

TEST(Print, NonContiguousAndViews) {
  Tensor t = tensor<float>({1, 2, 3, 4}, IntArrayRef({2, 2})).t();
  EXPECT_EQ(t.to_string(), "tensor([[1., 3.],\n        [2., 4.]], dtype=f32)");
  Tensor s = arange(0, 10, 1, {DType::i64, nullptr}).slice(0, 1, 8, 3);
  EXPECT_EQ(s.to_string(), "tensor([1, 4, 7], dtype=i64)");
  Tensor e = arange(0, 2, 1, {DType::i64, nullptr}).expand({2, 2});
  EXPECT_EQ(e.to_string(), "tensor([[0, 1],\n        [0, 1]], dtype=i64)");
}

TEST(Print, ThreeDimsStructure) {
  const std::string s = arange(8).view({2, 2, 2}).to_string();
  EXPECT_THAT(s, StartsWith("tensor([[[0, 1],"));
  EXPECT_EQ(count(s, '['), 7);
  EXPECT_EQ(count(s, ']'), 7);
  for (int v = 0; v < 8; ++v) EXPECT_THAT(s, HasSubstr(std::to_string(v)));
  EXPECT_THAT(s, EndsWith("dtype=i64)"));
}

TEST(Print, SummarizesLargeTensors) {
  const std::string s = arange(2000).to_string();
  EXPECT_THAT(s, HasSubstr("..."));
  EXPECT_THAT(s, ContainsRegex("0, +1, +2,"));
  EXPECT_THAT(s, ContainsRegex("1997, +1998, +1999"));
  EXPECT_THAT(s, Not(HasSubstr("1000")));
  EXPECT_LT(s.size(), 200u);

  const std::string m = zeros({100, 100}).to_string();
  EXPECT_THAT(m, HasSubstr("..."));
  EXPECT_LT(m.size(), 1500u) << m;
  EXPECT_LT(count(m, '\n'), 12) << "rows must be summarized too";

  const std::string big3 = arange(0, 30000, 1, {DType::i32, nullptr}).view({30, 20, 50}).to_string();
  EXPECT_THAT(big3, HasSubstr("..."));
  EXPECT_THAT(big3, HasSubstr("29999"));
  EXPECT_LT(big3.size(), 4000u);
}

TEST(Print, SmallTensorsAreNotSummarized) {
  const std::string s = arange(100).to_string();
  EXPECT_THAT(s, Not(HasSubstr("...")));
  for (int v : {0, 50, 99}) EXPECT_THAT(s, HasSubstr(std::to_string(v)));
  const std::string m = arange(0, 100, 1, {DType::f32, nullptr}).view({10, 10}).to_string();
  EXPECT_THAT(m, Not(HasSubstr("...")));
  EXPECT_EQ(count(m, '\n'), 9);
}

TEST(Describe, Format) {
  EXPECT_EQ(zeros({2, 3}).describe(), "Tensor[2, 3] f32");
  EXPECT_EQ(zeros({4}, {DType::i64, nullptr}).describe(), "Tensor[4] i64");
  EXPECT_EQ(scalar_tensor(1.0, DType::bf16).describe(), "Tensor[] bf16");
  EXPECT_EQ(zeros({0, 5}, {DType::boolean, nullptr}).describe(), "Tensor[0, 5] bool");
  EXPECT_EQ(zeros({2, 3}, {DType::u8, nullptr}).t().describe(), "Tensor[3, 2] u8");
}

TEST(Print, StreamOperatorMatchesToString) {
  Tensor t = arange(0, 6, 1, {DType::f64, nullptr}).view({3, 2});
  std::ostringstream os;
  os << t;
  EXPECT_EQ(os.str(), t.to_string());
}

}  // namespace
