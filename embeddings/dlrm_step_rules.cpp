#include "embeddings/dlrm_step_rules.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "core/factories.h"
#include "core/pin_set.h"
#include "ops/softmax_loss.h"
#include "ops/unary.h"

namespace strata::emb {

double LRSchedule::rate(double base, int64_t s) const {
  const int64_t w = warmup_steps, d0 = decay_start_step, n = decay_steps;
  const auto decay = [&](int64_t step) {
    const double scale = std::pow(static_cast<double>(n - (step - d0)) / static_cast<double>(n), 2.0);
    return std::max(1e-7, base * scale);
  };
  if (s < w) return base * (1.0 - static_cast<double>(w - s) / static_cast<double>(w));
  if (d0 <= s && s < d0 + n) return decay(s);
  if (n > 0) {
    // Frozen at the last rate the schedule computed (the reference keeps `last_lr`).
    if (s >= d0 + n && d0 + n - 1 >= 1) return decay(d0 + n - 1);
    if (w >= 2) return base * (1.0 - 1.0 / static_cast<double>(w));
  }
  return base;
}

LRSchedule lr_schedule(const DLRMConfig& c) {
  return {.warmup_steps = c.lr_num_warmup_steps,
          .decay_start_step = c.lr_decay_start_step,
          .decay_steps = c.lr_num_decay_steps};
}

Tensor clamp_probabilities(const Tensor& z, double loss_threshold) {
  if (loss_threshold > 0.0 && loss_threshold < 1.0) return clamp(z, loss_threshold, 1.0 - loss_threshold);
  return z;
}

void check_loss_targets(std::span<const float> targets, LossFunction loss, std::span<const double> loss_weights) {
  if (loss != LossFunction::WBCE) return;
  for (std::size_t b = 0; b < targets.size(); ++b) {
    const auto cls = static_cast<int64_t>(targets[b]);
    STRATA_CHECK(cls >= 0 && cls < static_cast<int64_t>(loss_weights.size()), "DLRM: wbce: target ", targets[b],
                 " of sample ", b, " has no --loss-weights entry (", loss_weights.size(), " weights)");
  }
}

Tensor dlrm_loss(const Tensor& z, std::span<const float> targets, LossFunction loss,
                 std::span<const double> loss_weights) {
  const int64_t batch = z.sizes()[0];
  STRATA_CHECK(static_cast<int64_t>(targets.size()) == batch, "DLRM: expected ", batch, " targets, got ",
               targets.size());
  check_loss_targets(targets, loss, loss_weights);
  Tensor t = empty({batch, 1});
  PinSet pins;
  pins.add(t, AccessMode::Write);
  Tensor w;
  if (loss == LossFunction::WBCE) {
    w = empty({batch, 1});
    pins.add(w, AccessMode::Write);
  }
  pins.acquire();
  std::memcpy(t.data_ptr(), targets.data(), targets.size_bytes());
  switch (loss) {
    case LossFunction::MSE: pins.release(); return mse_loss(z, t);
    case LossFunction::BCE: pins.release(); return binary_cross_entropy(z, t);
    case LossFunction::WBCE: {
      // The reference: loss_ws[T.long()] · BCE(z, T), averaged.
      float* wp = w.data<float>();
      for (int64_t b = 0; b < batch; ++b)
        wp[b] = static_cast<float>(loss_weights[static_cast<std::size_t>(static_cast<int64_t>(targets[b]))]);
      pins.release();
      return binary_cross_entropy(z, t, w);
    }
  }
  return {};
}

}  // namespace strata::emb
