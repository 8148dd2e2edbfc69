#pragma once
/// @file
/// Dispatch of a `Table&` to its concrete `final` type, so that a kernel written as a generic
/// lambda gets the row pointers of SimpleTable (`row(r)`) or CachedTable (`access_and_cache`,
/// `access`) inlined instead of one virtual call per row:
///
///     visit_table(table, [&](auto& t) { ... t.rowpointer(r, AccessContext::Forward) ... });
///
/// Inside the lambda `t` is `SimpleTable&` or `CachedTable&`; calls to `rowpointer` on it are
/// devirtualized because both classes are final.

#include <string>

#include "core/error.h"
#include "embeddings/cached_table.h"
#include "embeddings/table.h"

namespace strata::emb {

namespace detail {
[[noreturn]] inline void unknown_table_kind(const Table& t) {
  ::strata::detail::throw_check_failure(
      "known table kind", __FILE__, __LINE__,
      ::strata::detail::format_message("visit_table: embedding ", t.name(), " is a '", std::string(t.kind()),
                                       "' table, which no kernel is specialized for; expected a simple or a "
                                       "cached table"));
}
}  // namespace detail

/// Calls `f(SimpleTable&)` or `f(CachedTable&)` and returns its result (both instantiations must
/// return the same type). Throws strata::Error naming the table and its kind for any other table.
template <class F>
decltype(auto) visit_table(Table& table, F&& f) {
  if (auto* s = dynamic_cast<SimpleTable*>(&table)) return std::forward<F>(f)(*s);
  if (auto* c = dynamic_cast<CachedTable*>(&table)) return std::forward<F>(f)(*c);
  detail::unknown_table_kind(table);
}

/// Const overload: `f(const SimpleTable&)` or `f(const CachedTable&)`.
template <class F>
decltype(auto) visit_table(const Table& table, F&& f) {
  if (auto* s = dynamic_cast<const SimpleTable*>(&table)) return std::forward<F>(f)(*s);
  if (auto* c = dynamic_cast<const CachedTable*>(&table)) return std::forward<F>(f)(*c);
  detail::unknown_table_kind(table);
}

}  // namespace strata::emb
