#include "core/error.h"

#include <cstring>

namespace strata::detail {

namespace {
const char* basename_of(const char* path) {
  const char* slash = std::strrchr(path, '/');
  return slash ? slash + 1 : path;
}
}  // namespace

void throw_check_failure(const char* cond, const char* file, int line, const std::string& msg) {
  // The message leads; the location is secondary information for bug reports.
  throw Error(msg.empty() ? format_message("check failed: ", cond, " (", basename_of(file), ":", line, ")")
                          : format_message(msg, " (", basename_of(file), ":", line, ")"));
}

void throw_assert_failure(const char* cond, const char* file, int line, const std::string& msg) {
  throw Error(format_message("internal error: assertion `", cond, "` failed at ", basename_of(file), ":", line,
                             msg.empty() ? "" : ": ", msg, ". This is a bug in Strata; please report it."));
}

}  // namespace strata::detail
