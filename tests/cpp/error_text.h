#pragma once
// The message of the strata::Error a statement throws, for bad-input tests that assert on it.

#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "core/error.h"

namespace strata::testing_util {

/// The what() of the strata::Error `f` throws, or "(no error)".
inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

/// The same, under the name the embeddings tests use.
inline std::string message_of(const std::function<void()>& f) { return error_of(f); }

}  // namespace strata::testing_util

/// Expects `stmt` to throw a strata::Error whose message contains `text`.
#define EXPECT_ERROR_HAS(stmt, text)                                          \
  do {                                                                        \
    const std::string msg_ = ::strata::testing_util::error_of([&] { stmt; }); \
    EXPECT_NE(msg_.find(text), std::string::npos) << "message: " << msg_;     \
  } while (0)
