#include "embeddings/dist/rank_agreement.h"

#include <algorithm>
#include <cstring>
#include <exception>

#include "core/error.h"
#include "core/factories.h"
#include "core/pin_set.h"

namespace strata::emb {

std::vector<std::string> allgather_bytes(dist::Communicator& comm, std::string_view bytes) {
  const Tensor sizes = comm.allgatherv(full({1, 1}, static_cast<double>(bytes.size()), {DType::i64}));
  std::vector<int64_t> n(static_cast<std::size_t>(comm.size()));
  {
    PinSet pins;
    pins.add(sizes, AccessMode::Read).acquire();
    std::memcpy(n.data(), sizes.data_ptr(), n.size() * sizeof(int64_t));
  }
  std::vector<std::string> out(n.size());
  if (std::all_of(n.begin(), n.end(), [](int64_t x) { return x == 0; })) return out;
  const auto rows = [](int64_t size) { return (size + 7) / 8; };
  Tensor mine = zeros({rows(static_cast<int64_t>(bytes.size())), 1}, {DType::i64});
  {
    PinSet pins;
    pins.add(mine, AccessMode::Write).acquire();
    if (!bytes.empty()) std::memcpy(mine.data_ptr(), bytes.data(), bytes.size());
  }
  const Tensor all = comm.allgatherv(mine);
  PinSet pins;
  pins.add(all, AccessMode::Read).acquire();
  const char* at = static_cast<const char*>(all.data_ptr());
  for (std::size_t r = 0; r < n.size(); ++r) {
    out[r].assign(at, static_cast<std::size_t>(n[r]));
    at += rows(n[r]) * 8;
  }
  return out;
}

void agree_on_every_rank(dist::Communicator& comm, std::string_view what, const std::function<void()>& step) {
  std::string mine;
  try {
    step();
  } catch (const std::exception& e) {
    mine = e.what();
    if (mine.empty()) mine = "an error without a message";
  }
  const std::vector<std::string> all = allgather_bytes(comm, mine);
  int first = -1;
  std::string others;
  for (int r = 0; r < comm.size(); ++r) {
    if (all[static_cast<std::size_t>(r)].empty()) continue;
    if (first < 0)
      first = r;
    else
      others += (others.empty() ? " (also on rank " : ", rank ") + std::to_string(r);
  }
  if (first < 0) return;
  // The failing rank's message already names where it was raised; no second location.
  throw Error(detail::format_message(what, " failed on rank ", first, ": ", all[static_cast<std::size_t>(first)],
                                     others, others.empty() ? "" : ")"));
}

}  // namespace strata::emb
