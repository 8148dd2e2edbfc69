#pragma once
// Shared pieces of the benchmark binaries (bench/*.cpp): flag parsing that names the bad flag and
// exits 2, sample statistics, a small JSON writer and the atomic write of the JSON file.
//
// JSON conventions of every binary (bench/compare.py reads them): the top level is an object with
// "binary", "threads" (strata::get_num_threads() after --threads), "dtype" and "library", then the
// records. Every timed figure is an object {"unit", "samples", "median", "min", "max"} whose
// samples are the raw measurements in that unit.

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include <unistd.h>

#include "core/error.h"
#include "core/file.h"
#include "core/json.h"
#include "core/threading.h"

namespace strata::bench {

/// Command-line errors: prints "<prog>: <message>" and the usage line, exits with status 2.
class Cli {
 public:
  Cli(const char* prog, const char* usage) : prog_(prog), usage_(usage) {}

  /// Bad input: the message and the usage on stderr, exit status 2 (every Strata binary's convention).
  [[noreturn]] void fail(const std::string& message) const {
    std::fprintf(stderr, "%s: %s\nusage: %s\n", prog_, message.c_str(), usage_);
    std::exit(2);
  }

  /// --help / -h: the usage on stdout, exit status 0.
  [[noreturn]] void help() const {
    std::printf("usage: %s\n", usage_);
    std::exit(0);
  }

  /// A flag no branch of the parser took: help() for --help / -h, else fail("unknown flag ...").
  [[noreturn]] void unknown(const std::string& flag) const {
    if (flag == "--help" || flag == "-h") help();
    fail("unknown flag " + flag);
  }

  /// The value after flag argv[i] (advances i); fails when it is missing.
  const char* value(int argc, char** argv, int& i) const {
    if (i + 1 >= argc) fail(std::string("missing value for ") + argv[i]);
    return argv[++i];
  }

  long long integer(const std::string& flag, const char* v, long long lo, long long hi) const {
    char* end = nullptr;
    errno = 0;
    const long long x = std::strtoll(v, &end, 10);
    if (end == v || *end != '\0' || errno != 0 || x < lo || x > hi)
      fail(flag + ": expected an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got '" + v + "'");
    return x;
  }

  /// A thread count, checked and worded like every other (Note [One thread count bound]).
  int threads(const std::string& flag, const char* v) const {
    try {
      return strata::parse_num_threads(v, flag);
    } catch (const strata::Error& e) {
      fail(e.what());
    }
  }

  double real(const std::string& flag, const char* v, double lo, double hi) const {
    char* end = nullptr;
    errno = 0;
    const double x = std::strtod(v, &end);
    if (end == v || *end != '\0' || errno != 0 || !std::isfinite(x) || x < lo || x > hi)
      fail(flag + ": expected a number in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got '" + v + "'");
    return x;
  }

 private:
  const char* prog_;
  const char* usage_;
};

struct Summary {
  double median = 0, min = 0, max = 0;
};

inline Summary summarize(std::vector<double> v) {
  Summary s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  const std::size_t k = v.size();
  s.min = v.front();
  s.max = v.back();
  s.median = k % 2 ? v[k / 2] : 0.5 * (v[k / 2 - 1] + v[k / 2]);
  return s;
}

/// bench/'s JSON writer: strata::JsonWriter's values plus timed samples with their summary.
class Json : public JsonWriterBase<Json> {
 public:
  /// {"unit": unit, "samples": [...], "median": m, "min": lo, "max": hi} (plus what the caller adds
  /// before end_object(); this leaves the object open).
  Json& begin_timed(std::string_view k, std::string_view unit, const std::vector<double>& samples) {
    key(k).begin_object();
    kv("unit", unit);
    key("samples").begin_array();
    for (double x : samples) value(x);
    end_array();
    const Summary s = summarize(samples);
    kv("median", s.median).kv("min", s.min).kv("max", s.max);
    return *this;
  }
  Json& timed(std::string_view k, std::string_view unit, const std::vector<double>& samples) {
    return begin_timed(k, unit, samples).end_object();
  }
};

/// Writes `text` to `path` atomically (core/file.h, Note [Atomic file writes]). Returns false and
/// prints why (naming the file) on failure; the old file, if any, is left as it was.
inline bool write_file_atomically(const std::string& path, const std::string& text, const char* prog) {
  try {
    strata::write_file_atomically(path, text, "--json");
    return true;
  } catch (const strata::Error& e) {
    std::fprintf(stderr, "%s: %s\n", prog, e.what());
    return false;
  }
}

}  // namespace strata::bench
