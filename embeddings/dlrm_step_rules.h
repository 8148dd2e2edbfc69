#pragma once
/// @file
/// The reference's per-step rules (dlrm_s_pytorch.py) that the one-process TieredDLRM
/// (embeddings/dlrm.h) and the distributed DistributedDLRM (embeddings/dist/dist_dlrm.h) both follow,
/// implemented once for both: the learning-rate schedule (LRPolicyScheduler), the output clamp of
/// --loss-threshold and the loss of --loss-function / --loss-weights.
///
/// Note [DLRM loss]
/// The top MLP's click probabilities z [B, 1] are clamped into [T, 1 − T] when 0 < T < 1
/// (--loss-threshold T, the reference's forward clamp; the scores a test pass sees are the clamped
/// values too), then compared with the targets y [B]: mse is mean (z − y)², bce mean −(y log z + (1 −
/// y) log(1 − z)), wbce mean w[(int) y] · bce with w = --loss-weights (the reference's loss_ws indexed
/// by the target's class). A wbce target whose class has no weight is refused naming the sample.

#include <cstdint>
#include <span>

#include "core/tensor.h"
#include "embeddings/dlrm_config.h"

namespace strata::emb {

/// The reference's LRPolicyScheduler around a base rate (--learning-rate): a linear warm-up over
/// the first `warmup_steps` steps, then from `decay_start_step` a quadratic decay over `decay_steps`
/// steps (never below 1e-7), and after it the last rate the schedule computed (frozen; also between
/// warm-up and decay when there is a decay). No decay steps: the base rate after the warm-up.
struct LRSchedule {
  int64_t warmup_steps = 0;      ///< --lr-num-warmup-steps
  int64_t decay_start_step = 0;  ///< --lr-decay-start-step
  int64_t decay_steps = 0;       ///< --lr-num-decay-steps

  /// The learning rate of the optimizer step whose scheduler step count is `step` (1 for a model's
  /// first step: a model that took s steps trains the next at rate(base, s + 1)).
  double rate(double base, int64_t step) const;
};

/// --lr-num-warmup-steps, --lr-decay-start-step and --lr-num-decay-steps of `config`.
LRSchedule lr_schedule(const DLRMConfig& config);

/// `z` clamped into [loss_threshold, 1 − loss_threshold] when 0 < loss_threshold < 1, else `z`
/// itself (Note [DLRM loss]). Recorded by autograd like any op.
Tensor clamp_probabilities(const Tensor& z, double loss_threshold);

/// Throws strata::Error naming the sample and its target when `loss` is wbce and a target's class
/// ((int) target) has no entry in `loss_weights`; nothing otherwise.
void check_loss_targets(std::span<const float> targets, LossFunction loss, std::span<const double> loss_weights);

/// The mean loss (Note [DLRM loss]) of the probabilities `z` [B, 1] (clamped already) against
/// `targets` (B floats): a 0-dim tensor, recorded by autograd. Throws strata::Error when targets has
/// not B values, or as check_loss_targets.
Tensor dlrm_loss(const Tensor& z, std::span<const float> targets, LossFunction loss,
                 std::span<const double> loss_weights);

}  // namespace strata::emb
