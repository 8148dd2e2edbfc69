#pragma once
/// @file
/// User data in error messages; byte counts in messages and reports.
///
/// Note [Quoting user data in messages]
/// A message that echoes what the user gave (a field of a data file, a flag's value, a file name,
/// an environment variable) quotes it with `quote_field`, never raw:
/// - it is cut to a prefix, with the field's full length, so a 60 MB field does not flood stderr;
/// - NUL, control bytes and bytes that are not UTF-8 are escaped (`\x00`, `\n`, `\xff`), so the
///   message survives `what()`, C strings and Python (PyErr_SetString decodes UTF-8 and stops at a
///   NUL) whole, and the terminal shows what the bytes were; a backslash is doubled so an escape
///   is never ambiguous;
/// - the cut never splits a UTF-8 character.

#include <cstddef>
#include <string>
#include <string_view>

namespace strata {

/// Bytes of a field shown by default; longer fields are cut (see Note [Quoting user data in messages]).
inline constexpr std::size_t kQuotedFieldBytes = 64;
/// Bytes of a file path shown: paths are longer than fields and their end matters.
inline constexpr std::size_t kQuotedPathBytes = 512;

/// `text` in single quotes with NUL, control and non-UTF-8 bytes escaped, e.g. `'ab\x00c'`; a text
/// longer than `max_bytes` shows its first `max_bytes` bytes (fewer at a character boundary),
/// an ellipsis and its length: `'abc…' (60000000 bytes)`.
std::string quote_field(std::string_view text, std::size_t max_bytes = kQuotedFieldBytes);

/// `quote_field(path, kQuotedPathBytes)`.
inline std::string quote_path(std::string_view path) { return quote_field(path, kQuotedPathBytes); }

/// `bytes` in the binary unit that suits it, for messages and reports: "512 B", "1.50 KiB",
/// "64.0 MiB", "1.00 GiB".
std::string format_bytes(double bytes);

/// `bytes` in MiB with `decimals` decimals, "12.3 MiB", for reports that compare sizes in one unit.
std::string format_mib(std::size_t bytes, int decimals = 1);

}  // namespace strata
