#include "autograd/remat/revolve.h"

#include <algorithm>
#include <limits>
#include <sstream>

#include "core/error.h"

namespace strata::remat {

namespace {

constexpr int64_t kHuge = std::numeric_limits<int64_t>::max() / 4;

// C(n, k), saturating at kHuge.
int64_t binomial(int64_t n, int64_t k) {
  if (k < 0 || n < 0 || k > n) return 0;
  k = std::min(k, n - k);
  int64_t r = 1;
  for (int64_t i = 1; i <= k; ++i) {
    // r * (n - k + i) / i stays exact: r is C(n-k+i-1, i-1).
    const int64_t num = n - k + i;
    if (r > kHuge / num) return kHuge;
    r = r * num / i;
  }
  return r;
}

void check_args(const char* what, int64_t steps, int64_t snapshots) {
  STRATA_CHECK(steps >= 1, what, ": the chain must have at least 1 step, got ", steps);
  STRATA_CHECK(snapshots >= 1, what, ": at least 1 snapshot is needed (the one holding the chain's input), got ",
               snapshots);
}

// t(l, s) for l >= 1, s >= 0 (s = 0 is only possible for l = 1).
int64_t reps(int64_t l, int64_t s) {
  if (l <= 1) return 0;
  if (s <= 0) return kHuge;
  if (s == 1) return l - 1;
  int64_t t = 0;
  while (binomial(s + t, s) < l) ++t;
  return t;
}

// F(l, s): minimal advances to reverse l steps starting from a stored state with s slots.
int64_t advances(int64_t l, int64_t s) {
  if (l <= 1) return 0;
  if (s <= 0) return kHuge;
  const int64_t t = reps(l, s);
  return t * l - binomial(s + t, t - 1);
}

struct Builder {
  RevolveSchedule& out;
  bool first_turn = true;

  void turn(int64_t step) {
    out.ops.push_back({first_turn ? RevolveAction::Firsturn : RevolveAction::Youturn, step, 0, 0});
    first_turn = false;
  }

  // Reverses steps [a, a + l); x_a is current and stored in `slot`; slots above it are free and
  // `s` slots (including `slot`) may be used.
  void reverse(int64_t a, int64_t l, int64_t s, int64_t slot) {
    out.max_slots_used = std::max(out.max_slots_used, slot + 1);
    if (l == 1) {
      turn(a);
      return;
    }
    // The split minimizing advances, then repetitions (ties: the longest head).
    int64_t best_m = -1, best_cost = kHuge, best_rep = kHuge;
    for (int64_t m = 1; m < l; ++m) {
      const int64_t tail = advances(l - m, s - 1);
      if (tail >= kHuge) continue;
      const int64_t cost = m + tail + advances(m, s);
      const int64_t rep = std::max(1 + reps(m, s), reps(l - m, s - 1));
      if (cost < best_cost || (cost == best_cost && rep <= best_rep)) {
        best_m = m, best_cost = cost, best_rep = rep;
      }
    }
    STRATA_ASSERT(best_m > 0, "revolve: no split for ", l, " steps with ", s, " slots");
    const int64_t m = best_m;
    out.ops.push_back({RevolveAction::Advance, a, a + m, 0});
    out.advances += m;
    if (l - m > 1) {
      out.ops.push_back({RevolveAction::Takeshot, a + m, 0, slot + 1});
      reverse(a + m, l - m, s - 1, slot + 1);
    } else {
      turn(a + m);
    }
    out.ops.push_back({RevolveAction::Restore, a, 0, slot});
    reverse(a, m, s, slot);
  }
};

}  // namespace

int64_t revolve_repetitions(int64_t steps, int64_t snapshots) {
  check_args("revolve_repetitions", steps, snapshots);
  return reps(steps, snapshots);
}

int64_t revolve_optimal_advances(int64_t steps, int64_t snapshots) {
  check_args("revolve_optimal_advances", steps, snapshots);
  return advances(steps, snapshots);
}

RevolveSchedule revolve_schedule(int64_t steps, int64_t snapshots) {
  check_args("revolve_schedule", steps, snapshots);
  RevolveSchedule sched;
  sched.steps = steps;
  sched.snapshots = std::min(snapshots, steps);  // more slots than states are never used
  sched.ops.push_back({RevolveAction::Takeshot, 0, 0, 0});
  Builder{sched}.reverse(0, steps, sched.snapshots, 0);
  sched.snapshots = snapshots;
  return sched;
}

std::string RevolveSchedule::to_string() const {
  std::ostringstream os;
  for (const RevolveOp& op : ops) {
    switch (op.action) {
      case RevolveAction::Advance: os << "advance " << op.position << " -> " << op.target; break;
      case RevolveAction::Takeshot: os << "takeshot " << op.position << " in slot " << op.slot; break;
      case RevolveAction::Restore: os << "restore " << op.position << " from slot " << op.slot; break;
      case RevolveAction::Firsturn: os << "firsturn " << op.position; break;
      case RevolveAction::Youturn: os << "youturn " << op.position; break;
    }
    os << "\n";
  }
  return os.str();
}

}  // namespace strata::remat
