#pragma once
/// @file
/// The nine TapeFlow Table II benchmarks (TapeFlow §V) written against the scalar active type
/// (sim/active.h), from their public descriptions, at Table II's sizes (or reduced sizes for
/// tests). Each writes a scalar loss to the output array "loss" (gradient seed 1); its
/// differentiable inputs are the arrays of kind Input.
///
/// Note [Sim benchmarks]
/// Table II gives the sizes; the kernels follow the public sources it cites. Where the paper is
/// silent (time steps, hidden sizes, constants) the choices are listed here.
/// - gravity (DiffTaichi-style particles; Array 512): 512 particles in 2D pulled by 8 point masses
///   (inverse-square, softened), 4 semi-implicit Euler steps, state kept per step (x[t][i], as
///   DiffTaichi does); loss = mean squared distance to a target. Inputs: initial positions and
///   velocities, source masses.
/// - nn (Enzyme; Img 28x28): an MLP 784 -> 16 (tanh) -> 10 with log-softmax cross-entropy on one
///   image; inputs: both layers' weights and biases.
/// - logsum (Enzyme; Input 10K): log(sum(exp(x_i - max x))) + max x over 10 000 inputs.
/// - matdescent (Enzyme; M, N 400): the descent objective 1/2 ||A x - b||^2 of a 400x400 system;
///   inputs: A and x.
/// - mttkrp (TACO; 8x8x8): A(i,r) += B(i,j,k) C(j,r) D(k,r) with rank 8, accumulated in memory
///   (TACO's dense loop nest i, j, k, r); loss = 1/2 sum A^2; inputs: C and D (B is data).
/// - somier (RiVEC; 8x8x8): a 3D grid of masses joined by springs to their 6 neighbours
///   (boundary fixed), 2 steps of force / velocity / position loops updating arrays in place;
///   loss = 1/2 sum x^2 + 1/2 sum v^2; inputs: initial positions and velocities.
/// - lenet (LeNet-5): 32x32 image, conv 6@5x5 + tanh, 2x2 average pooling, conv 16@5x5 + tanh,
///   pooling, dense 400 -> 120 -> 84 -> 10 (tanh), log-softmax cross-entropy; inputs: all
///   weights and biases (the image is data).
/// - pathfinder (RiVEC; R 128, C 256): dst[c] = wall[r][c] + min(src[c-1], src[c], src[c+1])
///   row by row with two alternating row buffers; loss = sum of the last row; input: wall. The
///   column loop's iteration covers `unroll` columns (the paper's unroll factor, Fig. 17).
/// - mass_spring (DiffTaichi; Obj 128, hidden 32): 128 masses in a chain with springs to the
///   next two masses (253 springs), an open-loop controller (4 sine waves and each mass's offset
///   from the centre and velocity -> 32 tanh -> one actuation per spring), spring forces, damped
///   semi-implicit Euler, 2 steps with state kept per step; loss = -(x of the head, the last
///   mass), as DiffTaichi's;
///   inputs: the controller's weights and biases.
/// Inputs are pseudo-random (a fixed LCG seeded by `seed` and the array name).

#include <cstdint>
#include <string>
#include <vector>

#include "sim/active.h"

namespace strata::sim {

struct BenchmarkParams {
  bool reduced = false;  ///< small sizes (for tests) instead of Table II's
  uint32_t unroll = 1;   ///< pathfinder: columns per loop iteration (>= 1)
  uint64_t seed = 1;
  /// Finite-difference hook: add `perturb_delta` to element `perturb_index` of input array
  /// `perturb_array` (empty: none).
  std::string perturb_array;
  size_t perturb_index = 0;
  double perturb_delta = 0.0;
};

/// The Table II benchmark names, in the paper's order.
const std::vector<std::string>& benchmark_names();

/// Traces benchmark `name` (Enzyme-style program). Throws strata::Error for an unknown name, a
/// zero unroll factor, or a perturbation of an unknown array / out-of-range element.
Program build_benchmark(const std::string& name, const BenchmarkParams& params = {});

}  // namespace strata::sim
