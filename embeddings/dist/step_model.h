#pragma once
/// @file
/// A network model of hybrid-parallel DLRM (issue 28 item 8): the time of each collective as
/// strata::dist carries it out on an α–β fabric, and the projected step time and scaling efficiency
/// of the step's structure (Note [DLRM step model]) from per-sample compute times measured on one
/// process. bench/netmodel.cpp projects the standard configurations with it; bench/comm_calibrate.cpp
/// checks it against the Communicator on this machine and bench/netmodel/ against SimGrid's SMPI.
///
/// Note [Collective time model]
/// ----------------------------
/// strata::dist runs every collective as rounds of one exchange each (dist/communicator.cpp): every
/// rank posts all its receives and sends of the round at once and waits for all of them, and the
/// next round starts when this rank's last message of the round arrived. Empty payload messages
/// are dropped; the header of Note [Collective headers] always goes to every other rank.
/// - alltoallv, allgatherv, reduce_scatter: 2 rounds (header, rows);
/// - allreduce (deterministic): 3 rounds (header, reduce-scatter of the tree nodes, allgather).
/// A round on an α–β fabric, with α = latency + o (o: the per-message cost at the sender or
/// receiver — the MPI call and the NIC's injection — which serializes; the wire latency overlaps
/// between the messages of a round) and β the per-rank link bandwidth in each direction (the NIC
/// serializes a rank's bytes; a non-blocking switch adds no contention):
///     T_round = latency + max_r max(Σ_{messages sent by r} (o + bytes/β), Σ_{received by r} (o + bytes/β))
/// so a 2-rank exchange of one n-byte message each way takes α + n/β. A collective costs the sum of
/// its rounds (each ends with a wait, so the next starts after it; the slowest rank's time is the
/// round's, since the next round and the step wait for it), plus its local memory work at the
/// host's rate (Schedule::local_bytes). SimGrid's SMPI on star and full fat-tree platforms gives the
/// same times within 0.994–1.087x at 8–64 ranks (bench/RESULTS.md); a tapered network does not.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "embeddings/dist/shard_plan.h"
#include "embeddings/dlrm_config.h"

namespace strata::emb {

/// A network as the model sees it (Note [Collective time model]).
struct Fabric {
  std::string name;
  /// One-way wire and switch latency of a message, paid once per round (seconds, >= 0).
  double latency_seconds = 0;
  /// Per-message cost at a rank (MPI call and injection), serialized (seconds, >= 0).
  double per_message_seconds = 0;
  /// β: bytes per second of a rank's link in each direction (> 0).
  double bytes_per_second = 0;
  /// The host's rate for a collective's local work (Schedule::local_bytes per second): the same
  /// CPU whatever the network, so bench/comm_calibrate.cpp fits it on this machine; 0: not modeled.
  double host_bytes_per_second = 0;
  /// α of the α–β model: latency + per-message cost.
  double alpha() const { return latency_seconds + per_message_seconds; }
};

/// The named fabrics: "25gbe" (25 Gb Ethernet, MPI over TCP) and "ib100" (100 Gb InfiniBand EDR);
/// their figures and sources are in step_model.cpp. Throws strata::Error for another name, naming
/// it and the known ones.
Fabric fabric_named(std::string_view name);
std::vector<std::string> fabric_names();
/// Throws strata::Error naming the fabric and the field when a figure is negative, zero (β) or not
/// finite.
void check_fabric(const Fabric& fabric);

/// The messages of one round: bytes(src, dst) in messages(src, dst) messages (0 bytes: none); the
/// diagonal is always empty.
struct Round {
  int ranks = 1;
  std::vector<int64_t> bytes;     ///< ranks × ranks, row = sender
  std::vector<int64_t> messages;  ///< the same layout
  explicit Round(int ranks_);
  /// Sets the pair's bytes, in `count` messages (dist drops empty messages: 0 bytes, 0 messages).
  void set(int src, int dst, int64_t n_bytes, int64_t count = 1);
  int64_t at(int src, int dst) const { return bytes[index(src, dst)]; }
  int64_t messages_at(int src, int dst) const { return messages[index(src, dst)]; }
  /// Bytes rank r sends / receives in the round.
  int64_t sent(int r) const;
  int64_t received(int r) const;

 private:
  std::size_t index(int src, int dst) const;
};

/// One collective as strata::dist performs it: its rounds in order, and the busiest rank's local
/// memory work in bytes: for the allreduce, its receive buffers (zero-filled std::vectors) and its
/// tree sum over the rank's chunk (every node read, the chunk written). The rows an alltoallv
/// copies to its own rank (1/N of them) are left out.
struct Schedule {
  std::string name;
  std::vector<Round> rounds;
  int64_t local_bytes = 0;
};

/// Bytes of one header message of Note [Collective headers] at `ranks` ranks: (16 + 2N) · 8.
int64_t header_bytes(int ranks);
/// Every rank sends its header to every other rank.
Round header_round(int ranks);
/// A header round then `payload` (alltoallv, allgatherv, reduce_scatter).
Schedule alltoallv_schedule(std::string name, Round payload);
/// ShardedEmbeddingBags' forward alltoallv of pooled embeddings (shard_volume.h's formula, pair by
/// pair) for a global batch; its rows' bytes summed per rank equal forward_volume().
Schedule forward_schedule(const ShardPlan& plan, int64_t batch);
/// The backward alltoallv of pooled gradients; per rank equal to backward_volume().
Schedule backward_schedule(const ShardPlan& plan, int64_t batch);
/// Communicator::allreduce(contributions) of `numel` elements of `elem_bytes` bytes: header,
/// reduce-scatter of the tree nodes, allgather; per rank equal to allreduce_volume().
Schedule allreduce_schedule(std::string name, int64_t numel, int64_t elem_bytes,
                            const std::vector<int64_t>& contributions_per_rank);

/// T_round of Note [Collective time model]; 0 for a round without messages.
double round_seconds(const Round& round, const Fabric& fabric);
/// The sum of the rounds' times plus local_bytes / host_bytes_per_second (when that is set).
double schedule_seconds(const Schedule& schedule, const Fabric& fabric);

/// Note [DLRM step model]
/// ----------------------
/// The hybrid-parallel step (issue 28 item 2), per rank r with B_r of the global batch B:
///   1. lookups of the rows r holds, for all B samples (data-parallel tables: its B_r only);
///   2. the forward alltoallv, overlapped with the bottom MLP's forward on B_r samples;
///   3. interaction and top MLP, forward and backward, on B_r samples;
///   4. the backward alltoallv of pooled gradients, then the top MLP's gradient allreduce, both on
///      the communicator's one worker (in call order), overlapped with the bottom MLP's backward;
///   5. the sparse update of r's rows (after the backward alltoallv), and the bottom MLP's
///      gradient allreduce (after its backward; on the worker after step 4's collectives).
/// The step ends when both the compute and the worker are done:
///   t2 = lookups + max(bottom forward, forward alltoallv) + interaction/top;
///   worker: a2a_end = t2 + backward alltoallv, top_end = a2a_end + top allreduce,
///           bottom_end = max(top_end, t2 + bottom backward) + bottom allreduce;
///   compute: update_end = max(t2 + bottom backward, a2a_end) + update;
///   step = max(update_end, bottom_end).
/// Exposed communication = step − the compute alone (lookups + the MLPs + update). Compute times
/// are per sample (or per looked-up sample for lookups and updates), measured on one process
/// (strata-dlrm --enable-profiling), scaled by the samples each rank handles and, for lookups and
/// updates, by the share of the embedding work the plan gives the busiest rank (rows held ∝ work,
/// weighted by dim). Each phase takes the busiest rank's time. The one-node step is the same
/// compute without communication. (This is the step as planned for the projections at 8–64 nodes;
/// DistributedDLRM's step as it runs today, one bucket per layer and blocking gathers, is Note
/// [Measured step model]'s, validated against measured steps on this machine.)

/// Per-sample compute seconds of one process (all tables on it), from strata-dlrm's phases.
struct PhaseSeconds {
  double lookup = 0;      ///< embedding lookups, all tables
  double bottom_fwd = 0;  ///< bottom MLP forward
  double top = 0;         ///< interaction + top MLP forward and backward
  double bottom_bwd = 0;  ///< bottom MLP backward
  double update = 0;      ///< sparse update, all tables
};

/// The dense layers' parameter counts, reduced by the two allreduces.
struct DenseParams {
  int64_t bottom = 0;
  int64_t top = 0;
};
/// Weights and biases of an MLP of layer widths `widths` (input first): Σ (n·m + m).
int64_t mlp_params(const std::vector<int64_t>& widths);

/// A DLRM configuration as the model sees it: its tables (f32, named "C1".."Cn"), the dense layers'
/// parameters (the top MLP's input width is the interaction's: F(F−1)/2 + d with F = tables + 1,
/// plus F with --arch-interaction-itself; F·d for cat) and the batch.
struct DlrmShape {
  std::vector<TableSpec> tables;
  DenseParams dense;
  int64_t batch = 0;
};
DlrmShape dlrm_shape(const DLRMConfig& config);

/// One projected step on `nodes` ranks.
struct StepProjection {
  int nodes = 1;
  int64_t global_batch = 0;
  double compute_seconds = 0;      ///< the compute alone (busiest rank per phase)
  double forward_a2a_seconds = 0;  ///< the collectives' model times
  double backward_a2a_seconds = 0;
  double allreduce_top_seconds = 0;
  double allreduce_bottom_seconds = 0;
  double comm_seconds = 0;     ///< the four collectives' sum
  double exposed_seconds = 0;  ///< step − compute
  double step_seconds = 0;
};

/// The step of Note [DLRM step model] for `plan` (its ranks are the nodes) and a global batch.
/// Throws strata::Error for a batch smaller than the rank count, negative phase times or
/// parameter counts, or a bad fabric.
StepProjection project_step(const ShardPlan& plan, int64_t global_batch, const PhaseSeconds& phases,
                            const DenseParams& dense, const Fabric& fabric);

/// Note [Measured step model]
/// --------------------------
/// DistributedDLRM's step as it runs today (Note [Distributed DLRM step] in dist_dlrm.cpp), from
/// each rank's measured compute per phase (DistStepTimes per step, Note [Distributed step phases])
/// and the collectives' model times; strata-netmodel --validate runs it on each measured step's
/// phases (the ranks' jitter from step to step meets at the blocking collectives, as it did) and
/// compares the median and mean with the measured steps'.
/// Every rank r, in order (blocking collectives end for every rank together, T after the last
/// rank reached them):
///   1. other_r, then the batch check's allgatherv of one i64 (blocking);
///   2. lookup_remote_r (the nodes for the other ranks), then the forward alltoallv starts on the
///      communicator's worker: it ends T_fwd after the last rank started it;
///   3. bottom_mlp_r and lookup_r (this rank's pooling), the wait for that exchange, interaction_r,
///      top_mlp_r (the loss included);
///   4. the output gather: allgatherv of the rank's B_r probabilities (blocking);
///   5. backward_r. Bucket k (one per MLP layer, the top MLP's last layer first) is ready once the
///      layers from the top down to it ran backward, a share of backward_r by their parameters;
///      the worker runs bucket k's allreduce (the rank's C/N chunks as contributions) once every
///      rank's bucket k is ready and bucket k−1's is done. The alltoallv of pooled gradients runs
///      on the worker between the top MLP's buckets and the bottom MLP's, once every rank finished
///      the top MLP's backward (the interaction has no parameters: no share of its own);
///   6. sparse_update_r once backward_r and that alltoallv are done, then dense_optimizer_r once
///      every bucket is.
/// The step is the last rank's end; compute the busiest rank's phase sum; exposed the difference.
/// One host (this machine): the transport is memcpy by the ranks' CPUs and the allreduce adds its
/// tree sums on the worker, so a collective is CPU work done at the speed its worker gets, v (1: a
/// core of its own). The rounds' α–β times were fitted (strata-bench-comm) with the workers alone,
/// at share min(1, K/N) of K cores (HostShare::calibrated_share): they scale by calibrated_share / v.
/// The allreduce's local work (Schedule::local_bytes, its tree nodes over the C/N contributions
/// included) runs at host_bytes_per_second × v, the rate of one core. v is, when measured
/// (HostShare::worker_speed), the speed of the run's compute threads relative to the run that
/// calibrated the host rate — the same work, so the same time, wherever it runs: DistributedDLRM's
/// fixed chunks give every chunk the same GEMMs at any rank count, and strata-netmodel compares
/// the top MLP's forward per chunk. So the worker is taken to run as fast as the compute threads
/// of its run did, which takes in the other ranks, the workers and other jobs on the host. Else
/// v = min(1, K / (N(T + 1))) (HostShare::worker_share: every thread runnable, N ranks of T compute
/// threads and one worker each). The measured compute phases need neither: they ran under that
/// sharing. Not modeled: the alltoallv's imbalance with the chunk-aligned slices (sample_split's
/// are used; equal for B divisible by C).

/// One rank's measured compute per step (DistStepTimes over its steps), seconds.
struct RankPhases {
  double other = 0, lookup_remote = 0, lookup = 0, bottom_mlp = 0, interaction = 0, top_mlp = 0, backward = 0,
         sparse_update = 0, dense_optimizer = 0;
  double total() const;
};

/// The host the ranks share (Note [Measured step model]).
struct HostShare {
  int cores = 1;
  int threads_per_rank = 1;
  /// The workers' share of a core when the fabric's α and β were fitted (strata-bench-comm at N
  /// ranks: min(1, K/N)); 1 for a fabric not fitted on this host.
  double calibrated_share = 1;
  /// One core's rate of the allreduce's local work (bytes of Schedule::local_bytes per second);
  /// 0 leaves it out.
  double host_bytes_per_second = 0;
  /// The worker's measured speed relative to one core of that rate (> 0); 0: worker_share().
  double worker_speed = 0;
  /// min(1, K / (N (T + 1))).
  double worker_share(int ranks) const;
};

/// The measured run as the model sees it.
struct MeasuredStepInput {
  ShardPlan plan;
  int64_t batch = 0;
  int64_t chunks = 1;  ///< DistributedDLRM's C (--dist-chunks)
  /// The MLPs' layer widths, inputs first (the top MLP's input is the interaction's width).
  std::vector<int64_t> bottom_mlp, top_mlp;
  std::vector<RankPhases> ranks;  ///< one per plan rank
};

/// The modeled step and its collectives (each the model's time of one call, at the worker's share).
struct StepTimeline {
  int ranks = 1;
  double step_seconds = 0;
  double compute_seconds = 0;  ///< the busiest rank's phase sum
  double exposed_seconds = 0;  ///< step − compute
  double check_seconds = 0, forward_a2a_seconds = 0, gather_seconds = 0, backward_a2a_seconds = 0;
  double allreduce_seconds = 0;        ///< the buckets' allreduces, summed
  double allreduce_local_seconds = 0;  ///< of which their local work
};

/// The MLP layers' parameter counts as DistributedDLRM buckets them: one per layer, the top MLP's
/// last layer first, then the bottom MLP's from its last (Note [Distributed DLRM step] 5).
std::vector<int64_t> layer_buckets(const std::vector<int64_t>& bottom_mlp, const std::vector<int64_t>& top_mlp);

/// Note [Measured step model]'s step. Throws strata::Error for a rank count other than the plan's,
/// negative or non-finite phases, a batch below the rank count, chunks below it, MLPs of fewer
/// than 2 widths, or a bad fabric or host.
StepTimeline project_measured_step(const MeasuredStepInput& input, const Fabric& fabric, const HostShare& host);

}  // namespace strata::emb
