// quote_field: user data in messages is cut, escaped and quoted (Note [Quoting user data in messages]).

#include "core/text.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "test_util.h"

namespace {

using namespace strata;
using ::testing::EndsWith;
using ::testing::HasSubstr;
using ::testing::StartsWith;

TEST(QuoteField, ShortTextIsQuotedWhole) {
  EXPECT_EQ(quote_field("abc"), "'abc'");
  EXPECT_EQ(quote_field(""), "''");
  EXPECT_EQ(quote_field(std::string(64, 'x')), "'" + std::string(64, 'x') + "'");
}

TEST(QuoteField, LongTextShowsAPrefixAndItsLength) {
  const std::string big(3'000'000, 'z');
  const std::string q = quote_field(big);
  EXPECT_EQ(q, "'" + std::string(64, 'z') + "\u2026' (3000000 bytes)");
  EXPECT_EQ(quote_field("abcdef", 3), "'abc\u2026' (6 bytes)");
  EXPECT_EQ(quote_field("abcdef", 0), "'\u2026' (6 bytes)");
}

TEST(QuoteField, NulAndControlBytesAreEscapedAndTheTextContinues) {
  const std::string with_nul = std::string("ab") + '\0' + "cd";
  EXPECT_EQ(quote_field(with_nul), "'ab\\x00cd'");
  EXPECT_EQ(quote_field("a\nb\tc\rd\x01\x1f\x7f"), "'a\\nb\\tc\\rd\\x01\\x1f\\x7f'");
  EXPECT_EQ(quote_field("back\\slash"), "'back\\\\slash'");
  // The quoted text holds no NUL, so what() carries the whole message.
  const std::string msg = ERROR_MESSAGE([&] { STRATA_FAIL("op: ", quote_field(with_nul), " is bad"); }());
  EXPECT_EQ(msg, "op: 'ab\\x00cd' is bad");
}

TEST(QuoteField, Utf8PassesAndOtherBytesAreEscaped) {
  EXPECT_EQ(quote_field("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"), "'caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80'");
  EXPECT_EQ(quote_field("\xff\xfe"), "'\\xff\\xfe'");
  EXPECT_EQ(quote_field("\xc0\xaf"), "'\\xc0\\xaf'");           // overlong '/'
  EXPECT_EQ(quote_field("\xed\xa0\x80"), "'\\xed\\xa0\\x80'");  // a surrogate
  EXPECT_EQ(quote_field("a\xc3"), "'a\\xc3'");                  // cut short at the end
  // The cut never splits a character: a 2-byte character that would end past the limit is left out.
  EXPECT_EQ(quote_field("ab\xc3\xa9xyz", 3), "'ab\u2026' (7 bytes)");
}

TEST(QuoteField, BinaryFieldIsCutByInputBytes) {
  std::string bin(1 << 20, '\0');
  const std::string q = quote_field(bin);
  EXPECT_THAT(q, StartsWith("'\\x00\\x00"));
  EXPECT_THAT(q, EndsWith("\u2026' (1048576 bytes)"));
  EXPECT_EQ(q.find('\0'), std::string::npos);
  EXPECT_LT(q.size(), 64u * 4 + 32);
}

TEST(QuoteField, PathsShowMore) {
  const std::string p = "/" + std::string(300, 'd') + "/file";
  EXPECT_EQ(quote_path(p), "'" + p + "'");
  EXPECT_THAT(quote_path(std::string(1000, 'p')), HasSubstr("(1000 bytes)"));
}

TEST(FormatBytes, PicksTheUnitThatSuitsTheCount) {
  EXPECT_EQ(format_bytes(0), "0 B");
  EXPECT_EQ(format_bytes(512), "512 B");
  EXPECT_EQ(format_bytes(1536), "1.50 KiB");
  EXPECT_EQ(format_bytes(64.0 * (1 << 20)), "64.0 MiB");
  EXPECT_EQ(format_bytes(double(1ull << 30)), "1.00 GiB");
  EXPECT_EQ(format_bytes(5.5 * double(1ull << 40)), "5632.00 GiB");
}

TEST(FormatMib, OneUnitWithTheDecimalsAsked) {
  EXPECT_EQ(format_mib(0), "0.0 MiB");
  EXPECT_EQ(format_mib(std::size_t{64} << 20), "64.0 MiB");
  EXPECT_EQ(format_mib(std::size_t{3} << 19), "1.5 MiB");
  EXPECT_EQ(format_mib(std::size_t{1} << 10, 2), "0.00 MiB");
  EXPECT_EQ(format_mib(std::size_t{5} << 18, 2), "1.25 MiB");
}

}  // namespace
