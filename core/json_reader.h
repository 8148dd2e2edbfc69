#pragma once
/// @file
/// A small strict JSON reader (the counterpart of core/json.h's writer): what Strata's tools write
/// read back, e.g. strata-netmodel reading strata-dlrm's and strata-bench-comm's --json files.

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

namespace strata {

/// A parsed JSON value; objects keep their members in file order.
struct JsonValue {
  enum Kind { Null, Bool, Number, String, Array, Object } kind = Null;
  bool boolean = false;
  double number = 0;
  std::string raw;  ///< a number's text, or a string's decoded value
  std::vector<JsonValue> items;
  std::vector<std::pair<std::string, JsonValue>> members;

  /// An object's member; throws strata::Error naming the key when there is none.
  const JsonValue& operator[](const std::string& key) const;
  bool has(const std::string& key) const;
  /// An array's item; throws strata::Error for an index past the end.
  const JsonValue& operator[](std::size_t i) const;
};

/// Parses `text` (RFC 8259: one value, whitespace around it); throws strata::Error naming what is
/// wrong and its byte offset.
JsonValue parse_json(const std::string& text);

}  // namespace strata
