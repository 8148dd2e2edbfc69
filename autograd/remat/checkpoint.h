#pragma once
/// @file
/// Activation checkpointing: `checkpoint(fn, inputs)` and `checkpoint_sequential`, with the
/// semantics of PyTorch's non-reentrant `torch.utils.checkpoint.checkpoint(use_reentrant=False)`.
///
/// Note [Checkpointed segments]
/// `checkpoint` runs `fn` once, normally (its outputs are part of the caller's graph, recorded by
/// the ops inside `fn`), but under saved-tensor hooks (Note [Saved values]) whose pack keeps
/// nothing of a value saved inside the segment: only a handle (its index in the segment) and the
/// value's shape and dtype. The segment's inputs are saved through the *enclosing* hooks (by a
/// node that never runs), so an enclosing checkpoint recomputes them: that is what makes nesting
/// work. During backward, the first unpack of any handle of the segment re-runs `fn` on the saved
/// inputs with grad mode on, under hooks that capture every value the re-run saves, in order
/// (the default generator's seed and offset are set to what they were at the first run when
/// `preserve_rng_state`, so dropout draws the same mask, and restored afterwards). The captured
/// values then serve every unpack of the segment; each is dropped when the SavedTensor holding
/// its handle is released, i.e. as soon as the node that saved it has run (unless the graph is
/// retained). A re-run that saves a different number of values, or a value of another shape or
/// dtype, is an error (the function is not deterministic). The re-run's own graph is discarded.
/// While a re-run is in progress `in_recompute()` is true, so modules with side effects (batch
/// norm's running statistics) can avoid applying them twice (models/remat.h does).

#include <cstdint>
#include <functional>
#include <vector>

#include "autograd/node.h"

namespace strata::remat {

using autograd::TensorList;

/// A function of several tensors to several tensors.
using SegmentFn = std::function<TensorList(const TensorList&)>;
/// One step of a chain.
using StepFn = std::function<Tensor(const Tensor&)>;

/// Runs `fn(inputs)` keeping none of the values saved inside it for backward; they are recomputed
/// by re-running `fn` during backward (Note [Checkpointed segments]). Returns fn's outputs. With
/// grad mode off, simply returns fn(inputs). `fn` must be deterministic given its inputs and (when
/// `preserve_rng_state`) the default generator's state; it may capture parameters (leaves) and call
/// checkpoint itself. Throws strata::Error if `fn` is empty, and during backward if the re-run
/// saves values that differ in number, shape or dtype from the first run.
TensorList checkpoint(SegmentFn fn, const TensorList& inputs, bool preserve_rng_state = true);

/// True while this thread re-runs a checkpointed function (or, for Revolve, re-evaluates a step)
/// during backward.
bool in_recompute();

/// torch.utils.checkpoint.checkpoint_sequential over closures: splits `functions` into `segments`
/// consecutive segments of len / segments steps (the last one takes the remainder) and checkpoints
/// every segment but the last, which runs normally. Throws strata::Error when segments < 1, when
/// segments exceeds the number of functions, or when there are no functions.
Tensor checkpoint_sequential(const std::vector<StepFn>& functions, int64_t segments, const Tensor& input,
                             bool preserve_rng_state = true);

namespace detail {
/// Marks the current thread as recomputing for its lifetime (see in_recompute()).
class RecomputeScope {
 public:
  RecomputeScope();
  ~RecomputeScope();
  RecomputeScope(const RecomputeScope&) = delete;
  RecomputeScope& operator=(const RecomputeScope&) = delete;
};

/// The default generator's state, captured and restored around re-runs.
struct RngState {
  uint64_t seed = 0, offset = 0;
  static RngState current();
  void restore() const;
};
}  // namespace detail

}  // namespace strata::remat
