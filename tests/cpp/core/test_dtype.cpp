// DType metadata, names, dispatch, element conversion, BFloat16 and Half rounding.

#include "core/dtype.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <sstream>
#include <string>
#include <type_traits>

#include "test_util.h"

namespace {

using namespace strata;
using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr DType kAll[] = {DType::f32, DType::f64, DType::bf16,    DType::i32,
                          DType::i64, DType::u8,  DType::boolean, DType::f16};

float f_from_bits(uint32_t u) { return std::bit_cast<float>(u); }

TEST(DType, Itemsize) {
  EXPECT_EQ(itemsize(DType::f32), 4u);
  EXPECT_EQ(itemsize(DType::f64), 8u);
  EXPECT_EQ(itemsize(DType::bf16), 2u);
  EXPECT_EQ(itemsize(DType::i32), 4u);
  EXPECT_EQ(itemsize(DType::i64), 8u);
  EXPECT_EQ(itemsize(DType::u8), 1u);
  EXPECT_EQ(itemsize(DType::boolean), 1u);
  static_assert(itemsize(DType::f64) == 8);
  EXPECT_EQ(itemsize(DType::f16), 2u);
  static_assert(kNumDTypes == 8);
}

TEST(DType, ItemsizeMatchesStoredType) {
  for (DType t : kAll) {
    const std::size_t n = dispatch_dtype(t, [](auto tag) { return sizeof(tag); });
    EXPECT_EQ(n, itemsize(t)) << dtype_name(t);
  }
  static_assert(sizeof(BFloat16) == 2);
}

TEST(DType, Names) {
  EXPECT_EQ(dtype_name(DType::f32), "f32");
  EXPECT_EQ(dtype_name(DType::f64), "f64");
  EXPECT_EQ(dtype_name(DType::bf16), "bf16");
  EXPECT_EQ(dtype_name(DType::i32), "i32");
  EXPECT_EQ(dtype_name(DType::i64), "i64");
  EXPECT_EQ(dtype_name(DType::u8), "u8");
  EXPECT_EQ(dtype_name(DType::boolean), "bool");
  for (DType t : kAll) {
    std::ostringstream os;
    os << t;
    EXPECT_EQ(os.str(), dtype_name(t));
    EXPECT_EQ(dtype_from_name(dtype_name(t)), t) << dtype_name(t);
  }
}

TEST(DType, FromNameAcceptsPyTorchAndNumPySpellings) {
  EXPECT_EQ(dtype_from_name("float32"), DType::f32);
  EXPECT_EQ(dtype_from_name("float"), DType::f32);
  EXPECT_EQ(dtype_from_name("double"), DType::f64);
  EXPECT_EQ(dtype_from_name("bfloat16"), DType::bf16);
  EXPECT_EQ(dtype_from_name("int32"), DType::i32);
  EXPECT_EQ(dtype_from_name("int"), DType::i32);
  EXPECT_EQ(dtype_from_name("int64"), DType::i64);
  EXPECT_EQ(dtype_from_name("long"), DType::i64);
  EXPECT_EQ(dtype_from_name("uint8"), DType::u8);
  EXPECT_EQ(dtype_from_name("bool"), DType::boolean);
}

TEST(DType, FromNameRejectsUnknown) {
  EXPECT_THAT(ERROR_MESSAGE(dtype_from_name("int16")), HasSubstr("int16"));
  EXPECT_THAT(ERROR_MESSAGE(dtype_from_name("")), HasSubstr("dtype"));
  EXPECT_THAT(ERROR_MESSAGE(dtype_from_name("F32")), HasSubstr("F32"));
  // The message should tell the user what is accepted.
  EXPECT_THAT(ERROR_MESSAGE(dtype_from_name("complex64")),
              AllOf(HasSubstr("complex64"), HasSubstr("f32"), HasSubstr("bf16")));
}

TEST(DType, Categories) {
  EXPECT_TRUE(is_floating(DType::f32));
  EXPECT_TRUE(is_floating(DType::f64));
  EXPECT_TRUE(is_floating(DType::bf16));
  for (DType t : {DType::i32, DType::i64, DType::u8, DType::boolean}) EXPECT_FALSE(is_floating(t));
  for (DType t : {DType::i32, DType::i64, DType::u8}) {
    EXPECT_TRUE(is_integral(t));
    EXPECT_TRUE(is_integral(t, true));
  }
  EXPECT_FALSE(is_integral(DType::boolean));
  EXPECT_TRUE(is_integral(DType::boolean, true));
  for (DType t : {DType::f32, DType::f64, DType::bf16}) EXPECT_FALSE(is_integral(t, true));
}

TEST(DType, TraitsAndDTypeOfAgree) {
  static_assert(std::is_same_v<DTypeTraits<DType::f32>::type, float>);
  static_assert(std::is_same_v<DTypeTraits<DType::f64>::type, double>);
  static_assert(std::is_same_v<DTypeTraits<DType::bf16>::type, BFloat16>);
  static_assert(std::is_same_v<DTypeTraits<DType::i32>::type, int32_t>);
  static_assert(std::is_same_v<DTypeTraits<DType::i64>::type, int64_t>);
  static_assert(std::is_same_v<DTypeTraits<DType::u8>::type, uint8_t>);
  static_assert(std::is_same_v<DTypeTraits<DType::boolean>::type, bool>);
  static_assert(dtype_of<DTypeTraits<DType::bf16>::type>() == DType::bf16);
  for (DType t : kAll) {
    const DType back = dispatch_dtype(t, [](auto tag) { return dtype_of<decltype(tag)>(); });
    EXPECT_EQ(back, t);
  }
}

TEST(DType, DispatchOnCorruptValueIsAnError) {
  // A DType outside the enum means memory corruption or a bad cast; it must be reported, not UB.
  const auto bad = static_cast<DType>(200);
  EXPECT_THAT(ERROR_MESSAGE(dispatch_dtype(bad, [](auto) { return 0; })), HasSubstr("dtype"));
}

// ---- Half --------------------------------------------------------------------------------------

// Every half value survives float and back (NaNs stay NaN), and float -> half rounds like the
// compiler's own _Float16 conversion (round to nearest even, subnormals, overflow to inf).
TEST(Half, EveryValueRoundTripsThroughFloat) {
  for (uint32_t b = 0; b < 0x10000u; ++b) {
    const float f = Half::to_float(static_cast<uint16_t>(b));
    const _Float16 ref = std::bit_cast<_Float16>(static_cast<uint16_t>(b));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(static_cast<float>(ref)));
      EXPECT_TRUE(std::isnan(Half::to_float(Half::round_from_float(f)))) << b;
      continue;
    }
    ASSERT_EQ(std::bit_cast<uint32_t>(f), std::bit_cast<uint32_t>(static_cast<float>(ref))) << "bits " << b;
    ASSERT_EQ(Half::round_from_float(f), b) << "bits " << b;
  }
}

TEST(Half, RoundsLikeTheCompilersFloat16) {
  uint32_t state = 12345;
  auto next = [&] { return state = state * 1664525u + 1013904223u; };
  for (int i = 0; i < 2000000; ++i) {
    const float f = std::bit_cast<float>(next());
    if (std::isnan(f)) continue;
    const auto want = std::bit_cast<uint16_t>(static_cast<_Float16>(f));
    ASSERT_EQ(Half(f).bits, want) << "float " << f << " bits " << std::bit_cast<uint32_t>(f);
  }
  // Ties and edges: 1 + 2^-11 ties down to 1, 1 + 3 * 2^-11 ties up to even; 65504 is the largest
  // half, 65519.99 rounds to it and 65520 to inf; 2^-25 ties to 0, just above rounds to 2^-24.
  EXPECT_EQ(Half(1.00048828125f).bits, 0x3c00);
  EXPECT_EQ(Half(1.00146484375f).bits, 0x3c02);
  EXPECT_EQ(Half(65504.0f).bits, 0x7bff);
  EXPECT_EQ(Half(65519.99f).bits, 0x7bff);
  EXPECT_EQ(Half(65520.0f).bits, 0x7c00);
  EXPECT_EQ(Half(-1e10f).bits, 0xfc00);
  EXPECT_EQ(Half(std::ldexp(1.0f, -25)).bits, 0x0000);
  EXPECT_EQ(Half(std::nextafter(std::ldexp(1.0f, -25), 1.0f)).bits, 0x0001);
  EXPECT_EQ(Half(-0.0f).bits, 0x8000);
  EXPECT_TRUE(std::isnan(static_cast<float>(Half(std::numeric_limits<float>::quiet_NaN()))));
}

TEST(Half, ConvertElement) {
  EXPECT_EQ(convert_element<int32_t>(Half(-2.75f)), -2);
  EXPECT_EQ(convert_element<uint8_t>(Half(300.0f)), 255);                    // saturates (Strata's rule)
  EXPECT_EQ(convert_element<Half>(int64_t{2049}).bits, Half(2048.0f).bits);  // ties to even
  EXPECT_EQ(static_cast<float>(convert_element<Half>(BFloat16(3.0f))), 3.0f);
  EXPECT_TRUE(convert_element<bool>(Half(0.5f)));
  EXPECT_FALSE(convert_element<bool>(Half(-0.0f)));
  EXPECT_EQ(dtype_from_name("float16"), DType::f16);
  EXPECT_EQ(dtype_from_name("half"), DType::f16);
  EXPECT_TRUE(is_floating(DType::f16));
  EXPECT_TRUE(is_reduced_float(DType::f16));
}

// ---- BFloat16 ----------------------------------------------------------------------------------

TEST(BFloat16, ExactValuesRoundTrip) {
  for (float f : {0.0f, 1.0f, -1.0f, 2.0f, 0.5f, 3.0f, -256.0f, 65536.0f, 65280.0f, 0.15625f}) {
    const BFloat16 b(f);
    EXPECT_EQ(static_cast<float>(b), f) << f;
  }
  EXPECT_EQ(BFloat16(1.0f).bits, 0x3f80);
  EXPECT_EQ(BFloat16(-2.0f).bits, 0xc000);
  EXPECT_EQ(static_cast<float>(BFloat16::from_bits(0x3f80)), 1.0f);
  EXPECT_EQ(static_cast<float>(BFloat16::from_bits(0x4049)), 3.140625f);
}

TEST(BFloat16, RoundToNearestEven) {
  // Halfway cases go to the even mantissa.
  EXPECT_EQ(BFloat16::round_from_float(f_from_bits(0x3f808000u)), 0x3f80);  // 1 + 2^-8: tie, down
  EXPECT_EQ(BFloat16::round_from_float(f_from_bits(0x3f818000u)), 0x3f82);  // tie, up to even
  EXPECT_EQ(BFloat16::round_from_float(f_from_bits(0xbf808000u)), 0xbf80);  // negative tie
  EXPECT_EQ(BFloat16::round_from_float(f_from_bits(0xbf818000u)), 0xbf82);
  // Just below / above the tie.
  EXPECT_EQ(BFloat16::round_from_float(f_from_bits(0x3f807fffu)), 0x3f80);
  EXPECT_EQ(BFloat16::round_from_float(f_from_bits(0x3f808001u)), 0x3f81);
  EXPECT_EQ(BFloat16::round_from_float(f_from_bits(0x3f81ffffu)), 0x3f82);
  // Carry into the exponent.
  EXPECT_EQ(BFloat16::round_from_float(f_from_bits(0x3fffffffu)), 0x4000);
  // 1.00390625f is the tie between 1.0 and 1.0078125.
  EXPECT_EQ(static_cast<float>(BFloat16(1.00390625f)), 1.0f);
  EXPECT_EQ(static_cast<float>(BFloat16(1.01171875f)), 1.015625f);
  // 3.14159 -> 3.140625
  EXPECT_EQ(static_cast<float>(BFloat16(3.14159265f)), 3.140625f);
}

TEST(BFloat16, ZerosAndDenormals) {
  EXPECT_EQ(BFloat16(0.0f).bits, 0x0000);
  EXPECT_EQ(BFloat16(-0.0f).bits, 0x8000);
  EXPECT_EQ(BFloat16::round_from_float(f_from_bits(0x00000001u)), 0x0000);  // smallest denormal
  EXPECT_EQ(BFloat16::round_from_float(f_from_bits(0x00018000u)), 0x0002);  // denormal tie -> even
  EXPECT_EQ(BFloat16::round_from_float(f_from_bits(0x00010000u)), 0x0001);
}

TEST(BFloat16, InfinityAndOverflow) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(BFloat16(inf).bits, 0x7f80);
  EXPECT_EQ(BFloat16(-inf).bits, 0xff80);
  EXPECT_TRUE(std::isinf(static_cast<float>(BFloat16(inf))));
  EXPECT_GT(static_cast<float>(BFloat16(inf)), 0.0f);
  EXPECT_LT(static_cast<float>(BFloat16(-inf)), 0.0f);
  // FLT_MAX is above bf16's largest finite value's rounding midpoint: rounds to +inf (as in PyTorch).
  EXPECT_EQ(BFloat16(std::numeric_limits<float>::max()).bits, 0x7f80);
  EXPECT_EQ(BFloat16(-std::numeric_limits<float>::max()).bits, 0xff80);
  // Largest finite bf16 stays finite.
  EXPECT_EQ(BFloat16(f_from_bits(0x7f7f0000u)).bits, 0x7f7f);
  EXPECT_EQ(BFloat16(f_from_bits(0x7f7f7fffu)).bits, 0x7f7f);
}

TEST(BFloat16, NaNStaysNaN) {
  const float qnan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(std::isnan(static_cast<float>(BFloat16(qnan))));
  EXPECT_TRUE(std::isnan(static_cast<float>(BFloat16(-qnan))));
  // NaNs whose payload lives only in the low 16 bits: truncation or rounding would make them inf
  // (or carry them into the sign bit).
  for (uint32_t u : {0x7f800001u, 0xff800001u, 0x7f80ffffu, 0x7fffffffu, 0xffffffffu, 0x7f808000u}) {
    const uint16_t b = BFloat16::round_from_float(f_from_bits(u));
    EXPECT_TRUE(std::isnan(static_cast<float>(BFloat16::from_bits(b)))) << std::hex << "0x" << u << " -> 0x" << b;
    EXPECT_EQ(b & 0x8000, (u >> 16) & 0x8000) << std::hex << "sign of NaN 0x" << u << " lost";
  }
}

TEST(BFloat16, MatchesReferenceRoundingOnManyValues) {
  // Reference: round half to even computed with integer arithmetic on the dropped 16 bits.
  uint32_t state = 12345;
  for (int i = 0; i < 200000; ++i) {
    state = state * 1664525u + 1013904223u;
    const uint32_t u = state;
    const float f = f_from_bits(u);
    if (std::isnan(f)) continue;
    const uint32_t upper = u >> 16;
    const uint32_t lower = u & 0xffffu;
    uint32_t expect = upper;
    if (lower > 0x8000u || (lower == 0x8000u && (upper & 1u))) expect += 1;
    ASSERT_EQ(BFloat16::round_from_float(f), static_cast<uint16_t>(expect)) << std::hex << "0x" << u;
  }
}

// ---- convert_element ---------------------------------------------------------------------------

TEST(ConvertElement, ToBool) {
  EXPECT_TRUE(convert_element<bool>(0.5));
  EXPECT_TRUE(convert_element<bool>(-1.0f));
  EXPECT_FALSE(convert_element<bool>(0.0));
  EXPECT_FALSE(convert_element<bool>(-0.0));
  EXPECT_TRUE(convert_element<bool>(std::numeric_limits<double>::quiet_NaN()));  // C++/PyTorch
  EXPECT_TRUE(convert_element<bool>(int32_t{-7}));
  EXPECT_FALSE(convert_element<bool>(uint8_t{0}));
  EXPECT_TRUE(convert_element<bool>(BFloat16(0.25f)));
  EXPECT_FALSE(convert_element<bool>(BFloat16(0.0f)));
}

TEST(ConvertElement, FloatToIntegerTruncatesTowardZero) {
  EXPECT_EQ(convert_element<int32_t>(2.7), 2);
  EXPECT_EQ(convert_element<int32_t>(-2.7), -2);
  EXPECT_EQ(convert_element<int64_t>(-0.9f), 0);
  EXPECT_EQ(convert_element<uint8_t>(200.9), 200);
  EXPECT_EQ(convert_element<int32_t>(BFloat16(2.5f)), 2);
  EXPECT_EQ(convert_element<int64_t>(1e15), int64_t{1000000000000000});
}

TEST(ConvertElement, FloatToIntegerSaturatesAndNaNIsZero) {
  EXPECT_EQ(convert_element<int32_t>(1e10), std::numeric_limits<int32_t>::max());
  EXPECT_EQ(convert_element<int32_t>(-1e10), std::numeric_limits<int32_t>::min());
  EXPECT_EQ(convert_element<int64_t>(1e30), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(convert_element<int64_t>(-1e30), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(convert_element<uint8_t>(300.0), 255);
  EXPECT_EQ(convert_element<uint8_t>(-1.0), 0);
  EXPECT_EQ(convert_element<uint8_t>(-0.5f), 0);
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_EQ(convert_element<int32_t>(inf), std::numeric_limits<int32_t>::max());
  EXPECT_EQ(convert_element<int32_t>(-inf), std::numeric_limits<int32_t>::min());
  EXPECT_EQ(convert_element<int32_t>(std::numeric_limits<double>::quiet_NaN()), 0);
  EXPECT_EQ(convert_element<int64_t>(std::numeric_limits<float>::quiet_NaN()), 0);
  EXPECT_EQ(convert_element<uint8_t>(BFloat16::from_bits(0x7fc0)), 0);
  EXPECT_EQ(convert_element<int32_t>(BFloat16(1e20f)), std::numeric_limits<int32_t>::max());
  // Exactly at the limit.
  EXPECT_EQ(convert_element<int32_t>(2147483647.0), 2147483647);
  EXPECT_EQ(convert_element<int32_t>(-2147483648.0), std::numeric_limits<int32_t>::min());
}

TEST(ConvertElement, IntegerToIntegerWrapsLikeStaticCast) {
  EXPECT_EQ(convert_element<uint8_t>(int32_t{-1}), 255);
  EXPECT_EQ(convert_element<uint8_t>(int64_t{300}), 44);
  EXPECT_EQ(convert_element<int32_t>(int64_t{(int64_t{1} << 32) + 5}), 5);
  EXPECT_EQ(convert_element<int64_t>(int32_t{-5}), -5);
  EXPECT_EQ(convert_element<int32_t>(uint8_t{255}), 255);
  EXPECT_EQ(convert_element<int64_t>(true), 1);
  EXPECT_EQ(convert_element<uint8_t>(false), 0);
}

TEST(ConvertElement, ToFloatingTypes) {
  EXPECT_EQ(convert_element<float>(int32_t{-3}), -3.0f);
  EXPECT_EQ(convert_element<double>(true), 1.0);
  EXPECT_EQ(convert_element<double>(BFloat16(1.5f)), 1.5);
  EXPECT_EQ(convert_element<float>(BFloat16::from_bits(0xc0a0)), -5.0f);
  EXPECT_EQ(convert_element<BFloat16>(int64_t{3}).bits, BFloat16(3.0f).bits);
  EXPECT_EQ(convert_element<BFloat16>(true).bits, 0x3f80);
  EXPECT_EQ(convert_element<BFloat16>(uint8_t{255}).bits, BFloat16(255.0f).bits);
  EXPECT_EQ(static_cast<float>(convert_element<BFloat16>(257.0)), 256.0f);  // rounds
  EXPECT_EQ(convert_element<BFloat16>(1.00390625).bits, 0x3f80);            // tie to even
  EXPECT_TRUE(std::isnan(static_cast<float>(convert_element<BFloat16>(std::nan("")))));
  EXPECT_EQ(convert_element<float>(0.1), 0.1f);
}

}  // namespace
