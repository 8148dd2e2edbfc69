#pragma once
/// @file
/// Errors. Every user-facing failure is a `strata::Error` whose message names the op, the shapes and
/// the dtypes involved; nothing is reported by abort, segfault or silent NaN.

#include <sstream>
#include <stdexcept>
#include <string>

namespace strata {

/// The one exception type Strata throws for bad input and broken invariants.
class Error : public std::runtime_error {
 public:
  /// @param what  the full message (already formatted; see STRATA_CHECK)
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

namespace detail {

template <typename... Args>
std::string format_message(const Args&... args) {
  if constexpr (sizeof...(Args) == 0) {
    return {};
  } else {
    std::ostringstream os;
    (os << ... << args);
    return os.str();
  }
}

[[noreturn]] void throw_check_failure(const char* cond, const char* file, int line, const std::string& msg);
[[noreturn]] void throw_assert_failure(const char* cond, const char* file, int line, const std::string& msg);

}  // namespace detail
}  // namespace strata

/// Checks a condition on user input. On failure throws strata::Error with the streamed message
/// (which should start with the op's name and mention the shapes/dtypes involved).
#define STRATA_CHECK(cond, ...)                                                                                        \
  do {                                                                                                                 \
    if (!(cond)) [[unlikely]] {                                                                                        \
      ::strata::detail::throw_check_failure(#cond, __FILE__, __LINE__, ::strata::detail::format_message(__VA_ARGS__)); \
    }                                                                                                                  \
  } while (0)

/// Reports a user error found without a condition to check (the last branch of a chain of
/// comparisons, a catch that adds context): throws strata::Error with the streamed message, like a
/// failed STRATA_CHECK. It does not return (the compiler knows), so nothing follows it.
#define STRATA_FAIL(...)                                                   \
  ::strata::detail::throw_check_failure("STRATA_FAIL", __FILE__, __LINE__, \
                                        ::strata::detail::format_message(__VA_ARGS__))

/// Checks an internal invariant; a failure is a bug in Strata, reported as strata::Error.
#define STRATA_ASSERT(cond, ...)                                                                               \
  do {                                                                                                         \
    if (!(cond)) [[unlikely]] {                                                                                \
      ::strata::detail::throw_assert_failure(#cond, __FILE__, __LINE__,                                        \
                                             ::strata::detail::format_message("" __VA_OPT__(, ) __VA_ARGS__)); \
    }                                                                                                          \
  } while (0)
