#pragma once
/// @file
/// Internal: when AutoChain's executor (plan_exec.cpp) moves each streamed value (Note [Auto chain
/// execution]), derived from the planning graph and a plan. Not part of the public API.

#include <cstdint>
#include <vector>

#include "autograd/remat/planner.h"

namespace strata::remat::detail {

/// The moves of a plan: a streamed value is evicted after the forward of its last forward use,
/// the eviction is waited for at the start of point evict_until + 1 (the gap), and the prefetch is
/// issued at the start of point stream_from, all on the span the plan gives it (span_under). A
/// streamed value resident throughout (no gap before stream_from within its span) is not moved.
struct MoveSchedule {
  std::vector<char> moves;                          ///< per value: streamed and evicted
  std::vector<std::vector<int64_t>> evict_after;    ///< per step: values evicted after its forward
  std::vector<std::vector<int64_t>> wait_evict_at;  ///< per point: evictions to wait for first
  std::vector<std::vector<int64_t>> prefetch_at;    ///< per point: prefetches to issue first
};

/// The schedule of `decisions` (one per value) on `graph` (one op per step).
MoveSchedule schedule_moves(const PlanGraph& graph, const std::vector<Decision>& decisions);

}  // namespace strata::remat::detail
