#include "core/text.h"

#include <cstdio>

namespace strata {

namespace {

/// Length of the well-formed UTF-8 character of two or more bytes starting at s[i], or 0 when the
/// bytes there are not one (the ranges of Unicode's Table 3-7: no overlong forms, no surrogates).
std::size_t utf8_length(std::string_view s, std::size_t i) {
  const auto at = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char lead = at(i);
  std::size_t n = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // the second byte's range
  if (lead >= 0xC2 && lead <= 0xDF) {
    n = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    n = 3;
    if (lead == 0xE0) lo = 0xA0;
    if (lead == 0xED) hi = 0x9F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    n = 4;
    if (lead == 0xF0) lo = 0x90;
    if (lead == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  if (s.size() - i < n) return 0;
  if (at(i + 1) < lo || at(i + 1) > hi) return 0;
  for (std::size_t k = 2; k < n; ++k)
    if (at(i + k) < 0x80 || at(i + k) > 0xBF) return 0;
  return n;
}

void append_hex(std::string& out, unsigned char c) {
  static constexpr char kDigits[] = "0123456789abcdef";
  out += "\\x";
  out += kDigits[c >> 4];
  out += kDigits[c & 0xF];
}

}  // namespace

std::string quote_field(std::string_view text, std::size_t max_bytes) {
  std::string out = "'";
  std::size_t i = 0;
  while (i < text.size()) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x80) {
      const std::size_t n = utf8_length(text, i);
      if (n == 0) {
        if (i + 1 > max_bytes) break;
        append_hex(out, c);
        ++i;
        continue;
      }
      if (i + n > max_bytes) break;  // never split a character
      out.append(text.substr(i, n));
      i += n;
      continue;
    }
    if (i + 1 > max_bytes) break;
    switch (c) {
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\\': out += "\\\\"; break;
      default:
        if (c < 0x20 || c == 0x7F) {
          append_hex(out, c);
        } else {
          out += static_cast<char>(c);
        }
    }
    ++i;
  }
  out += '\'';
  if (i < text.size()) {
    out.insert(out.size() - 1, "\u2026");
    out += " (" + std::to_string(text.size()) + " bytes)";
  }
  return out;
}

std::string format_bytes(double bytes) {
  char buf[48];
  if (bytes >= double(1ull << 30))
    std::snprintf(buf, sizeof buf, "%.2f GiB", bytes / double(1ull << 30));
  else if (bytes >= double(1ull << 20))
    std::snprintf(buf, sizeof buf, "%.1f MiB", bytes / double(1ull << 20));
  else if (bytes >= 1024.0)
    std::snprintf(buf, sizeof buf, "%.2f KiB", bytes / 1024.0);
  else
    std::snprintf(buf, sizeof buf, "%.0f B", bytes);
  return buf;
}

std::string format_mib(std::size_t bytes, int decimals) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.*f MiB", decimals, static_cast<double>(bytes) / double(1ull << 20));
  return buf;
}

}  // namespace strata
