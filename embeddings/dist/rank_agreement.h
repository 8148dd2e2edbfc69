#pragma once
/// @file
/// Outcomes agreed by every rank of a distributed run (issue 28 item 7): a check that fails on one
/// rank ends every rank at once with the same message naming that rank, instead of leaving the
/// others blocked in their next collective until STRATA_DIST_TIMEOUT.
///
/// Note [Agreed failures]
/// A rank that throws on its own (a path only it checks, a file it cannot read, a NaN in its slice
/// of the batch) and leaves the collective sequence makes the other ranks wait in their next
/// collective until the communicator's timeout (Note [Communicator faults]), 60 s by default, and
/// they then die naming a late rank, not the problem. agree_on_every_rank runs a local step on
/// every rank and then exchanges its outcome: one allgatherv of each rank's message length (0: ok),
/// and only when one is not 0 a second of the messages. Every rank then throws the same
/// strata::Error naming the lowest failing rank, its message and the other failing ranks, at the
/// same point of the collective sequence, so the run ends in the time of one exchange and every
/// rank's error says what went wrong where. DistributedDLRM::check_batch agrees a batch the same
/// way (its own exchange of B, which carries the batch size too); the start-up checks of
/// strata-dlrm and --check-finite use this helper.

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "dist/communicator.h"

namespace strata::emb {

/// Collective: every rank's `bytes` (any bytes, NULs included), in rank order. Two allgatherv
/// calls (the lengths, then the bytes packed eight to an i64 row), the second skipped when every
/// rank's bytes are empty.
std::vector<std::string> allgather_bytes(dist::Communicator& comm, std::string_view bytes);

/// Collective (Note [Agreed failures]): runs `step` on this rank, then agrees its outcome with every
/// rank. When `step` threw (a std::exception) on any rank, throws strata::Error on every rank:
/// "<what> failed on rank R: <R's message>", plus " (also on rank S, rank T)" when more ranks
/// failed, R the lowest. Every rank must call it at the same point (it is one collective).
void agree_on_every_rank(dist::Communicator& comm, std::string_view what, const std::function<void()>& step);

}  // namespace strata::emb
