#pragma once
/// @file
/// Internal: an agreement across the ranks after a local step that may fail on some of them (the
/// distributed checkpoints' phases, ShardedEmbeddingBags' placement of its shards).

#include <exception>
#include <string>

#include "core/error.h"
#include "core/factories.h"
#include "dist/communicator.h"

namespace strata::emb::detail {

/// Runs `fn` on this rank, then the ranks exchange their error texts (one allgatherv of i64:
/// length, then one byte per element): a rank whose `fn` threw throws `where: <its error>`, the
/// others `where: rank <r> failed: <r's error>` (the first failing rank), so every rank stops at
/// the same point and none waits in a collective the others never issue.
template <typename Fn>
void agree(dist::Communicator& comm, const std::string& where, Fn&& fn) {
  std::string text;
  try {
    fn();
  } catch (const std::exception& e) {
    text = *e.what() != '\0' ? e.what() : "an error without a message";
  }
  Tensor mine = empty({1 + static_cast<int64_t>(text.size())}, {DType::i64});
  int64_t* out = mine.data<int64_t>();
  out[0] = static_cast<int64_t>(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) out[1 + i] = static_cast<unsigned char>(text[i]);
  const Tensor all = comm.allgatherv(mine);
  STRATA_CHECK(text.empty(), where, ": ", text);
  const int64_t* in = all.data<int64_t>();
  for (int r = 0; r < comm.size(); in += 1 + in[0], ++r) {
    if (in[0] == 0) continue;
    std::string theirs(static_cast<std::size_t>(in[0]), '\0');
    for (int64_t i = 0; i < in[0]; ++i) theirs[static_cast<std::size_t>(i)] = static_cast<char>(in[1 + i]);
    STRATA_FAIL(where, ": rank ", r, " failed: ", theirs);
  }
}

}  // namespace strata::emb::detail
