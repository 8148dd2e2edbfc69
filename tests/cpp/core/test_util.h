#pragma once
// Helpers shared by the core tests (not a test file itself: the suite globs *.cpp only).

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/shape.h"
#include "core/tensor.h"

namespace strata_test {

/// Removes the " (file.cpp:123)" location suffix STRATA_CHECK appends, so that substring checks on
/// numbers cannot be satisfied by a line number.
inline std::string strip_location(const std::string& msg) {
  if (msg.empty() || msg.back() != ')') return msg;
  const std::size_t open = msg.rfind(" (");
  if (open == std::string::npos) return msg;
  const std::string inner = msg.substr(open + 2, msg.size() - open - 3);
  const std::size_t colon = inner.rfind(':');
  if (colon == std::string::npos || colon + 1 >= inner.size()) return msg;
  for (std::size_t i = colon + 1; i < inner.size(); ++i) {
    if (inner[i] < '0' || inner[i] > '9') return msg;
  }
  if (inner.find(' ') != std::string::npos) return msg;
  return msg.substr(0, open);
}

/// Runs `fn`, which must throw strata::Error; returns the message (location stripped). Records a
/// test failure at the caller's line when nothing or something else is thrown.
template <typename Fn>
std::string error_message(Fn&& fn, const char* file, int line) {
  try {
    fn();
  } catch (const strata::Error& e) {
    if (std::getenv("STRATA_TEST_SHOW_ERRORS")) std::fprintf(stderr, "[error %s:%d] %s\n", file, line, e.what());
    return strip_location(e.what());
  } catch (const std::exception& e) {
    ADD_FAILURE_AT(file, line) << "expected strata::Error, got another exception: " << e.what();
    return "<wrong exception type>";
  } catch (...) {
    ADD_FAILURE_AT(file, line) << "expected strata::Error, got a non-std exception";
    return "<wrong exception type>";
  }
  ADD_FAILURE_AT(file, line) << "expected strata::Error, nothing was thrown";
  return "<no exception>";
}

}  // namespace strata_test

/// The message of the strata::Error that `stmt` throws (fails the test if it does not throw one).
#define ERROR_MESSAGE(stmt) ::strata_test::error_message([&] { (void)(stmt); }, __FILE__, __LINE__)

namespace strata_test {

inline std::vector<int64_t> vec(const strata::Dims& d) { return {d.begin(), d.end()}; }
using V = std::vector<int64_t>;

/// Row-major list of all elements, read through Tensor::at().
inline std::vector<double> values(const strata::Tensor& t) {
  std::vector<double> out;
  const int64_t n = t.numel();
  if (n == 0) return out;
  const auto rank = static_cast<std::size_t>(t.dim());
  std::vector<int64_t> idx(rank, 0);
  for (int64_t k = 0; k < n; ++k) {
    out.push_back(t.at(strata::IntArrayRef(idx.data(), idx.size())));
    for (std::size_t d = rank; d-- > 0;) {
      if (++idx[d] < t.size(static_cast<int64_t>(d))) break;
      idx[d] = 0;
    }
  }
  return out;
}

/// Element read directly from memory through data_ptr(), sizes and strides (independent of at()).
inline double raw_element(const strata::Tensor& t, const std::vector<int64_t>& idx) {
  int64_t off = 0;
  for (std::size_t d = 0; d < idx.size(); ++d) off += idx[d] * t.stride(static_cast<int64_t>(d));
  const char* base = static_cast<const char*>(t.data_ptr()) + off * static_cast<int64_t>(t.itemsize());
  return strata::dispatch_dtype(t.dtype(), [&](auto tag) -> double {
    using T = decltype(tag);
    T v;
    std::memcpy(&v, base, sizeof(T));
    if constexpr (std::is_same_v<T, strata::BFloat16>)
      return static_cast<double>(static_cast<float>(v));
    else
      return static_cast<double>(v);
  });
}

/// Row-major list of all elements, read through raw memory.
inline std::vector<double> raw_values(const strata::Tensor& t) {
  std::vector<double> out;
  const int64_t n = t.numel();
  if (n == 0) return out;
  const auto rank = static_cast<std::size_t>(t.dim());
  std::vector<int64_t> idx(rank, 0);
  for (int64_t k = 0; k < n; ++k) {
    out.push_back(raw_element(t, idx));
    for (std::size_t d = rank; d-- > 0;) {
      if (++idx[d] < t.size(static_cast<int64_t>(d))) break;
      idx[d] = 0;
    }
  }
  return out;
}

inline std::vector<double> iota(int64_t n, double start = 0, double step = 1) {
  std::vector<double> out;
  for (int64_t i = 0; i < n; ++i) out.push_back(start + step * static_cast<double>(i));
  return out;
}

/// Matches a message that mentions `word` (optionally followed by more letters, e.g. "dim" also
/// matches "dimension" and "dim_start") directly followed by the number `value`: "dimension 3",
/// "index -4", "step=0", "start (3)".
inline ::testing::Matcher<std::string> Mentions(const std::string& word, int64_t value) {
  return ::testing::ContainsRegex(word + "[a-z_]*[ =(:]*" + std::to_string(value) + "([^0-9]|$)");
}

/// Matches a message that names a short op (`t`, `at`) as an op rather than as an English word.
inline ::testing::Matcher<std::string> NamesOp(const std::string& op) {
  return ::testing::AnyOf(::testing::StartsWith(op + ":"), ::testing::StartsWith(op + " "),
                          ::testing::StartsWith(op + "("), ::testing::HasSubstr("::" + op),
                          ::testing::HasSubstr("." + op + "("), ::testing::HasSubstr(" " + op + "("));
}

}  // namespace strata_test

/// Checks sizes, strides and offset of a tensor in one line.
#define EXPECT_LAYOUT(t, sizes_, strides_, offset_)                          \
  do {                                                                       \
    EXPECT_EQ(::strata_test::vec((t).sizes()), ::strata_test::V sizes_);     \
    EXPECT_EQ(::strata_test::vec((t).strides()), ::strata_test::V strides_); \
    EXPECT_EQ((t).offset(), (offset_));                                      \
  } while (0)

/// Expects `stmt` to throw strata::Error whose message matches the regex `msg_regex`, evaluated in a
/// child process (GoogleTest's death-test machinery, "threadsafe" style: the child re-executes the
/// binary). Used for inputs that crash or trip a sanitizer when the check is missing, so that one
/// missing check cannot take the rest of the suite down with it. The child prints the message.
#define EXPECT_STRATA_ERROR_ISOLATED(stmt, msg_regex)                    \
  do {                                                                   \
    GTEST_FLAG_SET(death_test_style, "threadsafe");                      \
    EXPECT_EXIT(                                                         \
        {                                                                \
          try {                                                          \
            (void)(stmt);                                                \
          } catch (const ::strata::Error& e) {                           \
            std::fprintf(stderr, "strata::Error: %s\n", e.what());       \
            std::fflush(stderr);                                         \
            std::_Exit(0);                                               \
          } catch (...) {                                                \
            std::fprintf(stderr, "a non-strata exception was thrown\n"); \
            std::_Exit(3);                                               \
          }                                                              \
          std::fprintf(stderr, "no exception was thrown\n");             \
          std::_Exit(2);                                                 \
        },                                                               \
        ::testing::ExitedWithCode(0), msg_regex);                        \
  } while (0)
