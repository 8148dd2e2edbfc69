// DistributedDLRM's --check-finite (DistributedDLRMConfig::check_finite).
#include <cmath>
#include <span>
#include <string>

#include "core/error.h"
#include "core/finite.h"
#include "embeddings/dist/dist_dlrm.h"
#include "embeddings/dist/rank_agreement.h"

namespace strata::emb {

// Note [Distributed finite check]
// With --check-finite, DistributedDLRM::train_step checks in three places, each before anything is
// updated:
// 1. Before the forward, this rank's samples of the global batch: the first non-finite dense
//    feature and target. The outcome is agreed (Note [Agreed failures]: one allgatherv of one i64
//    when all is well), so a NaN in one rank's slice stops every rank with the same error naming
//    that rank, the sample and the feature. It must come before the forward: a NaN sample makes
//    its probability NaN, which the loss refuses on every rank (bce, wbce) in the middle of
//    DataParallel's step, leaving it unusable, or turns into NaN gradients everywhere (mse).
// 2. After the forward, the click probabilities of the global batch (gathered: the same on every
//    rank, so every rank reaches the same verdict without an exchange). With finite inputs they go
//    NaN when the parameters or activations overflow (a learning rate of 1e30); checked before
//    the loss, which would refuse them (bce) without saying why. train_step then ends the step
//    without a backward (abandon_step: the pooled rows released, DataParallel::discard_step), so
//    a caller that restores the parameters trains on.
// 3. After backward, before the tables' fused sparse step and the dense optimizer: the gradient of
//    this rank's pooled embeddings (what the rows' holders would step with), agreed the same way;
//    then what every rank holds bitwise the same — the loss and the MLPs' reduced gradients (the
//    first non-finite one in parameter order) — where every rank reaches the same verdict without
//    an exchange. This waits for the MLPs' last gradient buckets before the tables step, so with
//    the flag the sparse update no longer overlaps them (Note [Distributed DLRM step] 6). Before
//    the error is thrown, the embedding gradients' exchange (already started by backward) is
//    waited for without stepping any row, and the MLP gradients are cleared.
// A parameter that an update makes non-finite is not looked for after the update (the one-process
// check's way): the next step's forward reads every MLP parameter and the rows its bags name, so
// it shows in that step's output (2). Not caught: the last step's update, and a row no later batch
// names (it is saved as it is).
// The one-process check (Note [DLRM finite check]) runs after the update only. Here a bad batch
// (1), output (2) or gradient (3) is found before anything is updated: the parameters are the
// state before the batch, which is what DLRMTrainer saves with --save-model before it reports the
// batch; after any of the three a later step continues as if the batch had not been given. Cost: two
// exchanges of one i64 per step, and one pass over the rank's slice, the batch's probabilities, its
// embedding gradient and the MLP gradients.

namespace {

// The first non-finite value of `values` [count, width] row-major, as "<what> hold nan (sample S,
// feature F)"; samples are counted from `first_sample`. "" when all are finite.
std::string first_non_finite(std::span<const float> values, int64_t width, int64_t first_sample,
                             std::string_view what) {
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (std::isfinite(values[i])) continue;
    const auto at = static_cast<int64_t>(i);
    std::string s = std::string(what) + " hold " + (std::isnan(values[i]) ? "nan" : std::to_string(values[i])) +
                    " (sample " + std::to_string(first_sample + at / width);
    if (width > 1) s += ", feature " + std::to_string(at % width);
    return s + ")";
  }
  return "";
}

}  // namespace

std::string DistributedDLRM::finite_step_name() const { return "in step " + std::to_string(steps_ + 1) + ", "; }

void DistributedDLRM::check_finite_inputs(std::span<const float> dense, std::span<const float> targets,
                                          dist::RowRange rows) {
  const int64_t width = config_.bottom_mlp.front();
  const auto at = [](int64_t i) { return static_cast<std::size_t>(i); };
  std::string mine = first_non_finite(dense.subspan(at(rows.begin * width), at(rows.size() * width)), width, rows.begin,
                                      "the dense features");
  const std::string t =
      first_non_finite(targets.subspan(at(rows.begin), at(rows.size())), 1, rows.begin, "the targets");
  if (!t.empty()) mine += (mine.empty() ? "" : "; ") + t;
  agree_on_every_rank(comm_, "--check-finite", [&] {
    if (!mine.empty())
      STRATA_FAIL(finite_step_name(), "before its forward: rank ", comm_.rank(), "'s samples [", rows.begin, ", ",
                  rows.end, "): ", mine);
  });
}

void DistributedDLRM::check_finite_gradients(float loss, dist::RowRange rows,
                                             const ShardedEmbeddingBags::PendingBackward& embedding) {
  const auto number = [](float v) { return std::isnan(v) ? std::string("nan") : std::to_string(v); };
  try {
    ddp_->wait_gradients();  // the MLPs' reduced gradients, before the tables step
    agree_on_every_rank(comm_, "--check-finite", [&] {
      if (embedding.grad.defined() && !all_finite(embedding.grad))
        STRATA_FAIL(finite_step_name(), "before its update: rank ", comm_.rank(), "'s samples [", rows.begin, ", ",
                    rows.end,
                    "): the gradient of their pooled embeddings: ", find_non_finite(embedding.grad).describe(),
                    "; the loss is ", number(loss));
    });
    // What every rank holds bitwise the same: every rank reaches the same verdict, no exchange.
    std::string shared = std::isfinite(loss) ? "" : "the loss is " + number(loss);
    for (const auto& [name, p] : dense_module().named_parameters()) {
      if (!p.grad().defined() || all_finite(p.grad())) continue;
      shared += (shared.empty() ? "" : "; ") +
                ("the reduced gradient of " + name + ": " + find_non_finite(p.grad()).describe());
      break;
    }
    if (!shared.empty()) STRATA_FAIL("--check-finite: ", finite_step_name(), "before its update: ", shared);
  } catch (const Error&) {
    if (embedding.work.defined()) embedding.work.wait();  // the gradients' exchange ends; no row steps
    opt_->zero_grad();                                    // nothing was updated; a later step starts clean
    throw;
  }
}

void DistributedDLRM::check_finite_output(const Tensor& probabilities) const {
  if (all_finite(probabilities)) return;
  STRATA_FAIL("--check-finite: ", finite_step_name(),
              "before its update: the model's output (the click probabilities "
              "of the global batch, the same on every rank) is not finite: ",
              find_non_finite(probabilities).describe(),
              "; every rank's samples are finite, so the parameters or the activations overflowed (a learning rate "
              "too large?)");
}

}  // namespace strata::emb
