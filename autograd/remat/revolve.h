#pragma once
/// @file
/// Binomial checkpointing (Griewank & Walther, "Algorithm 799: revolve", ACM TOMS 2000): the
/// reversal schedule of a chain of n steps that stores at most s states and minimizes the number
/// of forward step evaluations.
///
/// Note [Revolve cost model]
/// A chain x_{i+1} = step_i(x_i), i = 0..n-1, is reversed step by step from the last one: reversing
/// step i ("turn") evaluates it once more with recording from x_i and back-propagates through it.
/// States are kept in s snapshot slots, one of which holds x_0 from the start. Besides the n
/// recorded evaluations the schedule *advances* (evaluates steps without recording) to reach the
/// states it needs; the minimal number of advances is
///     F(n, s) = t·n − C(s + t, t − 1),   t = the least integer with n <= C(s + t, s),
/// and t, the repetition number, is also the most times any step is advanced (Griewank 1992).
/// The schedule here is built recursively (advance m steps, snapshot, reverse the tail with one
/// slot fewer, restore, reverse the head) with the split m chosen by that formula; its slots form
/// a stack (slot k is taken only while slots 0..k-1 are).

#include <cstdint>
#include <string>
#include <vector>

namespace strata::remat {

enum class RevolveAction {
  Advance,   ///< evaluate steps [position, target) without recording; the current state is x_target
  Takeshot,  ///< store the current state (x_position) in slot `slot`
  Restore,   ///< the current state becomes slot `slot`'s (x_position)
  Firsturn,  ///< the first turn: record step `position` (= n-1) and start the reverse sweep
  Youturn,   ///< record step `position` from the current state and back-propagate through it
};

struct RevolveOp {
  RevolveAction action;
  int64_t position = 0;  ///< the state the action starts from (Advance), stores/loads, or the step turned
  int64_t target = 0;    ///< Advance only: the state it ends at
  int64_t slot = 0;      ///< Takeshot/Restore only
};

struct RevolveSchedule {
  int64_t steps = 0;
  int64_t snapshots = 0;       ///< slots available (including the one holding x_0)
  std::vector<RevolveOp> ops;  ///< starts with Takeshot of x_0 in slot 0
  int64_t advances = 0;        ///< steps evaluated without recording (= F(n, s))
  int64_t max_slots_used = 0;
  /// One line per op ("advance 0 -> 3", "takeshot 3 in slot 1", ...).
  std::string to_string() const;
};

/// The repetition number t(n, s): the least t with n <= C(s + t, s). Throws for n < 1 or s < 1.
int64_t revolve_repetitions(int64_t steps, int64_t snapshots);
/// The minimal number of advances F(n, s) (Note [Revolve cost model]). Throws for n < 1 or s < 1.
int64_t revolve_optimal_advances(int64_t steps, int64_t snapshots);
/// The optimal schedule for n steps and s snapshot slots (Note [Revolve cost model]). Throws
/// strata::Error for n < 1 or s < 1.
RevolveSchedule revolve_schedule(int64_t steps, int64_t snapshots);

}  // namespace strata::remat
