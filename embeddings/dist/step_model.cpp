#include "embeddings/dist/step_model.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "embeddings/dist/shard_volume.h"

namespace strata::emb {

namespace {
constexpr int64_t kF32 = 4;
// Note [Collective headers]: kHeaderFixed (16) + 2N int64 per header message.
constexpr int64_t kHeaderFixedWords = 16;

int64_t samples_of(const std::vector<int64_t>& at, int r) { return at[r + 1] - at[r]; }
}  // namespace

// ---- fabrics --------------------------------------------------------------------------------------

// The fabrics' figures (reported or derived, not measured here; o is LogP's per-message overhead):
// - β from the line rates, which the standards fix: 25GBASE-R (IEEE 802.3by) carries 25 Gb/s =
//   3.125 GB/s, and TCP/IPv4 at a 1500-byte MTU delivers 1448 payload bytes per 1538 on the wire
//   (94 %): 2.94 GB/s. InfiniBand EDR: 4 lanes × 25.78125 Gb/s with 64b/66b coding = 100 Gb/s =
//   12.5 GB/s, of which osu_bw reports reach about 97 %: 12.1 GB/s.
// - latency and o are the usual orders of magnitude of published MPI ping-pong figures, not a
//   measured pair: EDR through one switch about 1 µs one-way (0.9 µs wire + 0.1 µs per message);
//   Open MPI's TCP transport over kernel sockets on 10/25 GbE about 10 µs (9 + 1 µs per message).
//   For scale, the one figure looked up here: a kernel-bypass Ethernet stack (Cisco usNIC, Open MPI
//   1.8.1, 40 GbE) measured 1.93 µs half round trip (blogs.cisco.com, "MPI over 40Gb Ethernet").
// The projections are most sensitive to β (bench/RESULTS.md "Network model").
Fabric fabric_named(std::string_view name) {
  if (name == "25gbe") return {"25gbe", 9.0e-6, 1.0e-6, 2.94e9};
  if (name == "ib100") return {"ib100", 0.9e-6, 0.1e-6, 12.1e9};
  STRATA_FAIL("fabric_named: unknown fabric '", name, "' (expected 25gbe or ib100)");
}

std::vector<std::string> fabric_names() { return {"25gbe", "ib100"}; }

void check_fabric(const Fabric& f) {
  auto ok = [](double x) { return std::isfinite(x) && x >= 0; };
  STRATA_CHECK(ok(f.latency_seconds), "fabric '", f.name, "': latency_seconds = ", f.latency_seconds,
               " (expected a finite number >= 0)");
  STRATA_CHECK(ok(f.per_message_seconds), "fabric '", f.name, "': per_message_seconds = ", f.per_message_seconds,
               " (expected a finite number >= 0)");
  STRATA_CHECK(ok(f.bytes_per_second) && f.bytes_per_second > 0, "fabric '", f.name,
               "': bytes_per_second = ", f.bytes_per_second, " (expected a finite number > 0)");
  STRATA_CHECK(ok(f.host_bytes_per_second), "fabric '", f.name, "': host_bytes_per_second = ", f.host_bytes_per_second,
               " (expected a finite number >= 0; 0 leaves local work out)");
}

// ---- rounds and schedules -------------------------------------------------------------------------

Round::Round(int ranks_) : ranks(ranks_) {
  STRATA_CHECK(ranks_ >= 1, "Round: ranks = ", ranks_, " (at least 1)");
  bytes.assign(static_cast<std::size_t>(ranks_) * static_cast<std::size_t>(ranks_), 0);
  messages = bytes;
}

std::size_t Round::index(int src, int dst) const {
  STRATA_CHECK(src >= 0 && src < ranks && dst >= 0 && dst < ranks, "Round: pair (", src, ", ", dst, ") is outside ",
               ranks, " ranks");
  return static_cast<std::size_t>(src) * static_cast<std::size_t>(ranks) + static_cast<std::size_t>(dst);
}

void Round::set(int src, int dst, int64_t n_bytes, int64_t count) {
  STRATA_CHECK(src != dst, "Round: rank ", src, " sends to itself (local rows are copied, not sent)");
  STRATA_CHECK(n_bytes >= 0 && count >= 0, "Round: ", n_bytes, " bytes in ", count, " messages from rank ", src,
               " to rank ", dst, " (expected >= 0)");
  bytes[index(src, dst)] = n_bytes;
  messages[index(src, dst)] = n_bytes > 0 ? std::max<int64_t>(count, 1) : 0;
}

int64_t Round::sent(int r) const {
  int64_t s = 0;
  for (int j = 0; j < ranks; ++j) s += at(r, j);
  return s;
}

int64_t Round::received(int r) const {
  int64_t s = 0;
  for (int i = 0; i < ranks; ++i) s += at(i, r);
  return s;
}

int64_t header_bytes(int ranks) { return (kHeaderFixedWords + 2 * static_cast<int64_t>(ranks)) * 8; }

Round header_round(int ranks) {
  Round round(ranks);
  for (int i = 0; i < ranks; ++i) {
    for (int j = 0; j < ranks; ++j) {
      if (i != j) round.set(i, j, header_bytes(ranks));
    }
  }
  return round;
}

Schedule alltoallv_schedule(std::string name, Round payload) {
  Schedule s{std::move(name), {}, 0};
  s.rounds.push_back(header_round(payload.ranks));
  s.rounds.push_back(std::move(payload));
  return s;
}

Schedule forward_schedule(const ShardPlan& plan, int64_t batch) {
  const std::vector<int64_t> at = sample_split(batch, plan.ranks);
  Round rows(plan.ranks);
  for (int r = 0; r < plan.ranks; ++r) {
    int64_t per_sample = 0;  // floats rank r sends per sample of another rank's slice
    for (std::size_t t = 0; t < plan.tables.size(); ++t) {
      per_sample += forward_nodes(plan, r, static_cast<int>(t)) * plan.tables[t].dim;
    }
    for (int j = 0; j < plan.ranks; ++j) {
      if (j != r) rows.set(r, j, samples_of(at, j) * per_sample * kF32);
    }
  }
  return alltoallv_schedule("forward alltoallv", std::move(rows));
}

Schedule backward_schedule(const ShardPlan& plan, int64_t batch) {
  const std::vector<int64_t> at = sample_split(batch, plan.ranks);
  Round rows(plan.ranks);
  for (int i = 0; i < plan.ranks; ++i) {  // a rank holding rows
    int64_t per_sample = 0;
    for (std::size_t t = 0; t < plan.tables.size(); ++t) {
      if (plan.holds(i, static_cast<int>(t))) per_sample += plan.tables[t].dim;
    }
    for (int j = 0; j < plan.ranks; ++j) {  // the sample owner sends to i
      if (j != i) rows.set(j, i, samples_of(at, j) * per_sample * kF32);
    }
  }
  return alltoallv_schedule("backward alltoallv", std::move(rows));
}

Schedule allreduce_schedule(std::string name, int64_t numel, int64_t elem_bytes,
                            const std::vector<int64_t>& contributions_per_rank) {
  const AllreduceLayout l = allreduce_layout("allreduce_schedule", numel, elem_bytes, contributions_per_rank);
  const int n = static_cast<int>(contributions_per_rank.size());
  int64_t all_nodes = 0;
  for (int64_t k : l.nodes) all_nodes += k;
  Round scatter(n), gather(n);
  int64_t local = 0;
  for (int r = 0; r < n; ++r) {
    for (int j = 0; j < n; ++j) {
      if (j == r) continue;
      scatter.set(r, j, l.nodes[r] * l.chunk[j] * elem_bytes, l.nodes[r]);  // one message per tree node
      gather.set(r, j, l.chunk[r] * elem_bytes);
    }
    // Receive buffers zero-filled, every node of the chunk read, the chunk written; and with more
    // contributions than tree nodes, the nodes summed from them (all read, the nodes written).
    const int64_t received = (all_nodes - l.nodes[r]) * l.chunk[r];
    const int64_t k = contributions_per_rank[r];
    const int64_t nodes_work = k > l.nodes[r] ? (k + l.nodes[r]) * numel : 0;
    local = std::max(local, (received + all_nodes * l.chunk[r] + l.chunk[r] + nodes_work) * elem_bytes);
  }
  return {std::move(name), {header_round(n), std::move(scatter), std::move(gather)}, local};
}

// ---- times ----------------------------------------------------------------------------------------

double round_seconds(const Round& round, const Fabric& fabric) {
  check_fabric(fabric);
  double slowest = 0;
  bool any = false;
  for (int r = 0; r < round.ranks; ++r) {
    double out = 0, in = 0;
    for (int j = 0; j < round.ranks; ++j) {
      out += static_cast<double>(round.messages_at(r, j)) * fabric.per_message_seconds +
             static_cast<double>(round.at(r, j)) / fabric.bytes_per_second;
      in += static_cast<double>(round.messages_at(j, r)) * fabric.per_message_seconds +
            static_cast<double>(round.at(j, r)) / fabric.bytes_per_second;
      any = any || round.messages_at(r, j) > 0;
    }
    slowest = std::max({slowest, out, in});
  }
  return any ? fabric.latency_seconds + slowest : 0.0;
}

double schedule_seconds(const Schedule& schedule, const Fabric& fabric) {
  double t = 0;
  for (const Round& round : schedule.rounds) t += round_seconds(round, fabric);
  if (fabric.host_bytes_per_second > 0) t += static_cast<double>(schedule.local_bytes) / fabric.host_bytes_per_second;
  return t;
}

// ---- the step -------------------------------------------------------------------------------------

int64_t mlp_params(const std::vector<int64_t>& widths) {
  int64_t p = 0;
  for (std::size_t i = 0; i + 1 < widths.size(); ++i) {
    STRATA_CHECK(widths[i] >= 1 && widths[i + 1] >= 1, "mlp_params: layer width ", std::min(widths[i], widths[i + 1]),
                 " at layer ", i, " (widths must be >= 1)");
    p += widths[i] * widths[i + 1] + widths[i + 1];
  }
  return p;
}

DlrmShape dlrm_shape(const DLRMConfig& c) {
  DlrmShape out;
  for (int64_t rows : c.arch_embedding_size) {
    std::string name = "C";
    name += std::to_string(out.tables.size() + 1);
    out.tables.push_back({std::move(name), rows, c.arch_sparse_feature_size, kF32});
  }
  const int64_t f = static_cast<int64_t>(c.arch_embedding_size.size()) + 1, d = c.arch_sparse_feature_size;
  const int64_t top_in =
      c.arch_interaction_op == InteractionOp::Cat ? f * d : f * (f - 1) / 2 + d + (c.arch_interaction_itself ? f : 0);
  std::vector<int64_t> top = c.arch_mlp_top;
  top.insert(top.begin(), top_in);
  out.dense = {mlp_params(c.arch_mlp_bot), mlp_params(top)};
  out.batch = c.mini_batch_size;
  return out;
}

namespace {

void check_phases(const PhaseSeconds& p, const DenseParams& dense) {
  const std::pair<const char*, double> all[] = {{"lookup", p.lookup},
                                                {"bottom_fwd", p.bottom_fwd},
                                                {"top", p.top},
                                                {"bottom_bwd", p.bottom_bwd},
                                                {"update", p.update}};
  for (const auto& [name, v] : all) {
    STRATA_CHECK(std::isfinite(v) && v >= 0, "project_step: phase ", name, " = ", v,
                 " s per sample (expected a finite number >= 0)");
  }
  STRATA_CHECK(dense.bottom >= 0 && dense.top >= 0, "project_step: dense parameter counts ", dense.bottom,
               " (bottom) and ", dense.top, " (top) must be >= 0");
}

// The busiest rank's share of the embedding work (lookups, updates), in samples × all tables: for
// each table, rows held / rows (by row blocks) × B, or B_r for a data-parallel table, weighted by
// the table's dim over the total dim.
double embedding_samples(const ShardPlan& plan, const std::vector<int64_t>& at) {
  int64_t total_dim = 0;
  for (const TableSpec& t : plan.tables) total_dim += t.dim;
  const auto batch = static_cast<double>(at.back());
  double busiest = 0;
  for (int r = 0; r < plan.ranks; ++r) {
    double work = 0;
    for (std::size_t t = 0; t < plan.tables.size(); ++t) {
      const auto ti = static_cast<int>(t);
      const double w = static_cast<double>(plan.tables[t].dim) / static_cast<double>(total_dim);
      if (plan.shards[t].kind == ShardKind::data_parallel) {
        work += w * static_cast<double>(samples_of(at, r));
      } else {
        const double held = static_cast<double>(plan.block_end(r, ti) - plan.block_begin(r, ti));
        work += w * batch * held / static_cast<double>(plan.row_blocks);
      }
    }
    busiest = std::max(busiest, work);
  }
  return busiest;
}

}  // namespace

StepProjection project_step(const ShardPlan& plan, int64_t global_batch, const PhaseSeconds& phases,
                            const DenseParams& dense, const Fabric& fabric) {
  check_phases(phases, dense);
  check_fabric(fabric);
  const std::vector<int64_t> at = sample_split(global_batch, plan.ranks);
  const auto local = static_cast<double>(at[1] - at[0]);  // the largest slice (the first ranks')
  const double emb = embedding_samples(plan, at);
  const double lookups = phases.lookup * emb, update = phases.update * emb;
  const double bottom_fwd = phases.bottom_fwd * local, top = phases.top * local, bottom_bwd = phases.bottom_bwd * local;

  StepProjection p;
  p.nodes = plan.ranks;
  p.global_batch = global_batch;
  const std::vector<int64_t> one(static_cast<std::size_t>(plan.ranks), 1);
  if (plan.ranks > 1) {
    p.forward_a2a_seconds = schedule_seconds(forward_schedule(plan, global_batch), fabric);
    p.backward_a2a_seconds = schedule_seconds(backward_schedule(plan, global_batch), fabric);
    p.allreduce_top_seconds = schedule_seconds(allreduce_schedule("top allreduce", dense.top, kF32, one), fabric);
    p.allreduce_bottom_seconds =
        schedule_seconds(allreduce_schedule("bottom allreduce", dense.bottom, kF32, one), fabric);
  }
  p.comm_seconds =
      p.forward_a2a_seconds + p.backward_a2a_seconds + p.allreduce_top_seconds + p.allreduce_bottom_seconds;
  p.compute_seconds = lookups + bottom_fwd + top + bottom_bwd + update;
  // Note [DLRM step model]'s timeline.
  const double t2 = lookups + std::max(bottom_fwd, p.forward_a2a_seconds) + top;
  const double a2a_end = t2 + p.backward_a2a_seconds;
  const double top_end = a2a_end + p.allreduce_top_seconds;
  const double bottom_end = std::max(top_end, t2 + bottom_bwd) + p.allreduce_bottom_seconds;
  const double update_end = std::max(t2 + bottom_bwd, a2a_end) + update;
  p.step_seconds = std::max(update_end, bottom_end);
  p.exposed_seconds = p.step_seconds - p.compute_seconds;
  return p;
}

// ---- the measured step (Note [Measured step model]) -------------------------------------------------

double RankPhases::total() const {
  return other + lookup_remote + lookup + bottom_mlp + interaction + top_mlp + backward + sparse_update +
         dense_optimizer;
}

double HostShare::worker_share(int ranks) const {
  return std::min(1.0, static_cast<double>(cores) / (static_cast<double>(ranks) * (threads_per_rank + 1)));
}

std::vector<int64_t> layer_buckets(const std::vector<int64_t>& bottom_mlp, const std::vector<int64_t>& top_mlp) {
  std::vector<int64_t> out;
  for (const std::vector<int64_t>* mlp : {&top_mlp, &bottom_mlp}) {
    STRATA_CHECK(mlp->size() >= 2, "layer_buckets: an MLP needs at least 2 widths, got ", mlp->size());
    for (std::size_t i = mlp->size() - 1; i >= 1; --i) out.push_back(mlp_params({(*mlp)[i - 1], (*mlp)[i]}));
  }
  return out;
}

namespace {

void check_measured(const MeasuredStepInput& in, const HostShare& host) {
  const int n = in.plan.ranks;
  STRATA_CHECK(static_cast<int>(in.ranks.size()) == n, "project_measured_step: phases of ", in.ranks.size(),
               " ranks for a plan of ", n);
  STRATA_CHECK(in.batch >= n && in.chunks >= n, "project_measured_step: batch ", in.batch, " and chunks ", in.chunks,
               " must be at least the ", n, " ranks");
  STRATA_CHECK(host.cores >= 1 && host.threads_per_rank >= 1, "project_measured_step: cores ", host.cores,
               " and threads per rank ", host.threads_per_rank, " must be >= 1");
  STRATA_CHECK(std::isfinite(host.calibrated_share) && host.calibrated_share > 0 && host.calibrated_share <= 1,
               "project_measured_step: calibrated_share ", host.calibrated_share, " (expected (0, 1])");
  STRATA_CHECK(std::isfinite(host.host_bytes_per_second) && host.host_bytes_per_second >= 0,
               "project_measured_step: host_bytes_per_second ", host.host_bytes_per_second, " (expected >= 0)");
  STRATA_CHECK(std::isfinite(host.worker_speed) && host.worker_speed >= 0, "project_measured_step: worker_speed ",
               host.worker_speed, " (expected >= 0; 0: the share of the cores)");
  for (int r = 0; r < n; ++r) {
    const RankPhases& p = in.ranks[r];
    for (double v : {p.other, p.lookup_remote, p.lookup, p.bottom_mlp, p.interaction, p.top_mlp, p.backward,
                     p.sparse_update, p.dense_optimizer}) {
      STRATA_CHECK(std::isfinite(v) && v >= 0, "project_measured_step: rank ", r, " has a phase of ", v,
                   " s (expected a finite number >= 0)");
    }
  }
}

// An allgatherv of `bytes_per_sample` × each rank's samples of `batch`: header, then the rows to every other rank.
Schedule allgatherv_schedule(std::string name, int ranks, int64_t batch, int64_t bytes_per_sample) {
  const std::vector<int64_t> at = sample_split(batch, ranks);
  Round rows(ranks);
  for (int r = 0; r < ranks; ++r) {
    for (int j = 0; j < ranks; ++j) {
      if (j != r) rows.set(r, j, samples_of(at, r) * bytes_per_sample);
    }
  }
  return alltoallv_schedule(std::move(name), std::move(rows));
}

// A collective's time on this host: the rounds scaled from the calibration's share to the worker's
// speed, the local work at one core's rate times that speed. `local` gets the local part.
double host_seconds(const Schedule& s, const Fabric& fabric, const HostShare& host, double share, double* local) {
  Fabric rounds_only = fabric;
  rounds_only.host_bytes_per_second = 0;
  const double work =
      host.host_bytes_per_second > 0 ? static_cast<double>(s.local_bytes) / (host.host_bytes_per_second * share) : 0.0;
  if (local != nullptr) *local += work;
  return schedule_seconds(s, rounds_only) * host.calibrated_share / share + work;
}

// The time every rank leaves a blocking collective of `seconds` entered at `t`.
void blocking(std::vector<double>& t, double seconds) {
  const double end = *std::max_element(t.begin(), t.end()) + seconds;
  std::fill(t.begin(), t.end(), end);
}

}  // namespace

StepTimeline project_measured_step(const MeasuredStepInput& in, const Fabric& fabric, const HostShare& host) {
  check_measured(in, host);
  check_fabric(fabric);
  const int n = in.plan.ranks;
  const double share = host.worker_speed > 0 ? host.worker_speed : host.worker_share(n);
  StepTimeline out;
  out.ranks = n;
  const auto time = [&](const Schedule& s, double* local = nullptr) {
    return n > 1 || host.host_bytes_per_second > 0 ? host_seconds(s, fabric, host, share, local) : 0.0;
  };
  out.check_seconds = time(allgatherv_schedule("check", n, n, 8));
  out.forward_a2a_seconds = time(forward_schedule(in.plan, in.batch));
  out.gather_seconds = time(allgatherv_schedule("gather", n, in.batch, 4));
  out.backward_a2a_seconds = time(backward_schedule(in.plan, in.batch));
  std::vector<int64_t> contributions(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) contributions[r] = in.chunks / n + (r < in.chunks % n ? 1 : 0);
  const std::vector<int64_t> buckets = layer_buckets(in.bottom_mlp, in.top_mlp);
  std::vector<double> bucket_seconds;
  for (int64_t numel : buckets) {
    bucket_seconds.push_back(
        time(allreduce_schedule("bucket", numel, kF32, contributions), &out.allreduce_local_seconds));
    out.allreduce_seconds += bucket_seconds.back();
  }
  // Steps 1-4.
  std::vector<double> t(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) t[r] = in.ranks[r].other;
  blocking(t, out.check_seconds);
  double launched = 0;
  for (int r = 0; r < n; ++r) launched = std::max(launched, t[r] + in.ranks[r].lookup_remote);
  const double exchanged = launched + out.forward_a2a_seconds;
  for (int r = 0; r < n; ++r) {
    const RankPhases& p = in.ranks[r];
    t[r] = std::max(t[r] + p.lookup_remote + p.bottom_mlp + p.lookup, exchanged) + p.interaction + p.top_mlp;
  }
  blocking(t, out.gather_seconds);
  // Step 5: bucket k ready after the layers' weights above it; the worker in bucket order, the
  // embedding gradients' alltoallv between the top MLP's buckets and the bottom MLP's.
  int64_t weights = 0;
  for (int64_t b : buckets) weights += b;
  const std::size_t top_buckets = in.top_mlp.size() - 1;
  double worker = t[0], done = 0, embeddings_done = 0;
  const auto ready_at = [&](double fraction) {
    double ready = 0;
    for (int r = 0; r < n; ++r) ready = std::max(ready, t[r] + in.ranks[r].backward * fraction);
    return ready;
  };
  for (std::size_t k = 0; k < buckets.size(); ++k) {
    if (k == top_buckets) embeddings_done = worker = std::max(worker, ready_at(done)) + out.backward_a2a_seconds;
    done += static_cast<double>(buckets[k]) / static_cast<double>(weights);
    worker = std::max(worker, ready_at(done)) + bucket_seconds[k];
  }
  // Step 6: the sparse update once backward and the exchange are done, the dense optimizer once
  // every bucket is.
  for (int r = 0; r < n; ++r) {
    t[r] = std::max(t[r] + in.ranks[r].backward, embeddings_done) + in.ranks[r].sparse_update;
    t[r] = std::max(t[r], worker) + in.ranks[r].dense_optimizer;
    out.compute_seconds = std::max(out.compute_seconds, in.ranks[r].total());
  }
  out.step_seconds = *std::max_element(t.begin(), t.end());
  out.exposed_seconds = out.step_seconds - out.compute_seconds;
  return out;
}

}  // namespace strata::emb
