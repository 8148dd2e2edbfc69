#pragma once
/// @file
/// JSON output without a dependency: a streaming writer (JsonWriter).

#include <cmath>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

namespace strata {

/// A streaming JSON writer: values, arrays and objects with commas placed automatically.
/// Non-finite numbers are written as null (JSON has no NaN). Calls chain; they return `Self`, so a
/// writer that adds kinds of values of its own derives from JsonWriterBase<itself> (bench/'s Json
/// adds timed samples); JsonWriter is the plain one.
template <class Self>
class JsonWriterBase {
 public:
  Self& begin_object() { return open('{'); }
  Self& end_object() { return close('}'); }
  Self& begin_array() { return open('['); }
  Self& end_array() { return close(']'); }

  Self& key(std::string_view k) {
    comma();
    string(k);
    out_ += ": ";
    after_key_ = true;
    return self();
  }
  Self& value(double x) {
    comma();
    if (!std::isfinite(x)) {
      out_ += "null";
    } else {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.9g", x);
      out_ += buf;
    }
    return self();
  }
  Self& value(long long x) {
    comma();
    out_ += std::to_string(x);
    return self();
  }
  Self& value(int x) { return value(static_cast<long long>(x)); }
  Self& value(long x) { return value(static_cast<long long>(x)); }
  Self& value(unsigned long x) { return value(static_cast<long long>(x)); }
  Self& value(bool b) {
    comma();
    out_ += b ? "true" : "false";
    return self();
  }
  Self& value(std::string_view s) {
    comma();
    string(s);
    return self();
  }
  Self& value(const char* s) { return value(std::string_view(s)); }
  Self& value(const std::string& s) { return value(std::string_view(s)); }
  Self& null() {
    comma();
    out_ += "null";
    return self();
  }
  /// Inserts already formatted JSON text as one value.
  Self& raw(std::string_view text) {
    comma();
    out_ += text;
    return self();
  }
  template <typename T>
  Self& kv(std::string_view k, const T& v) {
    key(k);
    return value(v);
  }

  const std::string& str() const { return out_; }

 private:
  Self& self() { return static_cast<Self&>(*this); }
  Self& open(char c) {
    comma();
    out_ += c;
    first_.push_back(true);
    return self();
  }
  Self& close(char c) {
    first_.pop_back();
    out_ += c;
    if (first_.empty()) out_ += '\n';
    return self();
  }
  void comma() {
    if (after_key_) {
      after_key_ = false;
      return;
    }
    if (!first_.empty()) {
      if (!first_.back()) out_ += ", ";
      first_.back() = false;
    }
  }
  void string(std::string_view s) {
    out_ += '"';
    for (char c : s) {
      switch (c) {
        case '"': out_ += "\\\""; break;
        case '\\': out_ += "\\\\"; break;
        case '\n': out_ += "\\n"; break;
        case '\t': out_ += "\\t"; break;
        default:
          if (static_cast<unsigned char>(c) < 0x20) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\u%04x", c);
            out_ += buf;
          } else {
            out_ += c;
          }
      }
    }
    out_ += '"';
  }

  std::string out_;
  std::vector<bool> first_;
  bool after_key_ = false;
};

class JsonWriter final : public JsonWriterBase<JsonWriter> {};

}  // namespace strata
