#pragma once
// Hand-built planning graphs shared by the planner's tests (test_planner.cpp, test_ilp_model.cpp).

#include "autograd/remat/planner.h"

namespace strata_test {

// A -> B -> C; x0 (A's output) is saved by B's backward, x1 (B's output, computed from x0) by C's.
// Points: 0 A, 1 B, 2 C, 3 C', 4 B', 5 A'.
inline strata::remat::PlanGraph three_ops() {
  strata::remat::PlanGraph g;
  g.ops = {{"A", "A[4]", 1, 2, 0, {}}, {"B", "B[4]", 2, 4, 0, {}}, {"C", "C[4]", 3, 6, 0, {}}};
  g.values = {{"x0", 10, 0, 1, 1, {}, {}, 0}, {"x1", 20, 1, 2, 2, {0}, {}, 0}};
  g.bandwidth = {10.0, 10.0};
  return g;
}

}  // namespace strata_test
