#include "embeddings/dist/sharded_bags.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <utility>

#include "core/error.h"
#include "core/factories.h"
#include "core/rng.h"
#include "core/text.h"
#include "dist/reduction.h"
#include "embeddings/dist/rank_agreement.h"
#include "embeddings/dist/shard_volume.h"

namespace strata::emb {

float initial_value(uint64_t seed, int64_t table, int64_t rows, int64_t row, int64_t col) {
  const auto u = static_cast<uint64_t>(row);
  const std::array<uint32_t, 4> words = philox4x32_10({static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)},
                                                      {static_cast<uint32_t>(u), static_cast<uint32_t>(u >> 32),
                                                       static_cast<uint32_t>(table), static_cast<uint32_t>(col / 4)});
  const double unit = uint32_to_unit_float(words[static_cast<std::size_t>(col % 4)]);
  return static_cast<float>((2.0 * unit - 1.0) * std::sqrt(1.0 / static_cast<double>(rows)));
}

/// The rows of one table this rank holds, their tree nodes and the update's scratch.
struct ShardedEmbeddingBags::Shard {
  int64_t lo = 0, hi = 0;             // global rows held
  std::vector<dist::TreeNode> nodes;  // tree_cover of the blocks held
  PlacedTable placed;                 // hi - lo rows (empty when the blocks held have no rows)
  Table* table = nullptr;             // placed.table(), or null
  std::unique_ptr<SparseOptimizerState> state;
  UpdateWorkspace workspace;
  mutable std::size_t slow_read = 0;  // direct slow-tier reads of the pooling, not charged yet
};

TablePlacement place_rank_shards(const ShardPlan& plan, int rank, const ShardPlacementOptions& options) {
  std::vector<TableShape> shapes;
  for (int t = 0; t < static_cast<int>(plan.tables.size()); ++t) {
    const int64_t rows = plan.row_end(rank, t) - plan.row_begin(rank, t);
    if (rows > 0) shapes.push_back({rows, plan.tables[static_cast<std::size_t>(t)].dim});
  }
  try {
    return plan_table_placement(shapes, ElemType::F32, options.policy, options.fast_budget, options.cache_fraction);
  } catch (const Error& e) {
    STRATA_FAIL("rank ", rank, "'s shards (", shapes.size(), " tables): ", e.what());
  }
}

ShardedEmbeddingBags::ShardedEmbeddingBags(ShardPlan plan, int rank, const ShardStorage& storage, uint64_t seed,
                                           dist::Communicator* comm, SparseOptimizer::Kind optimizer)
    : plan_(std::move(plan)), rank_(rank), comm_(comm), optimizer_{optimizer, 0.0f, 1e-10f, 0.0f} {
  STRATA_CHECK(rank >= 0 && rank < plan_.ranks, "ShardedEmbeddingBags: rank ", rank, " is outside the plan's ",
               plan_.ranks, " ranks");
  STRATA_CHECK(plan_.ranks == 1 || comm != nullptr, "ShardedEmbeddingBags: a plan over ", plan_.ranks,
               " ranks needs a communicator");
  if (comm != nullptr) {
    STRATA_CHECK(comm->size() == plan_.ranks && comm->rank() == rank, "ShardedEmbeddingBags: the plan is for ",
                 plan_.ranks, " ranks (this is rank ", rank, ") but the communicator has ", comm->size(),
                 " ranks and this process is rank ", comm->rank());
  }
  for (int t = 0; t < static_cast<int>(plan_.tables.size()); ++t) {
    const TableSpec& spec = plan_.tables[static_cast<std::size_t>(t)];
    STRATA_CHECK(spec.elem_bytes == 4, "ShardedEmbeddingBags: table ", t, " ", quote_field(spec.name), " has ",
                 spec.elem_bytes, "-byte elements; the exchange supports f32 rows (4 bytes)");
    column_.push_back(width_);
    width_ += spec.dim;
  }
  if (comm != nullptr && plan_.ranks > 1)
    agree_on_every_rank(*comm, "ShardedEmbeddingBags: placing the shards", [&] { place_shards(storage, seed); });
  else
    place_shards(storage, seed);
}

// Note [Shard storage]: the rank's shards as plan_table_placement says, initialized from the seed.
void ShardedEmbeddingBags::place_shards(const ShardStorage& storage, uint64_t seed) {
  placement_ = place_rank_shards(plan_, rank_, storage.placement);
  if (placement_.uses_slow()) {
    STRATA_CHECK(storage.slow.heap != nullptr, "rank ", rank_, "'s shards need a slow tier (",
                 placement_.policy == EmbeddingPolicy::Auto
                     ? format_bytes(static_cast<double>(placement_.table_bytes)) +
                           " of rows exceed the fast budget of " +
                           format_bytes(static_cast<double>(storage.placement.fast_budget))
                     : std::string("--emb-policy ") + policy_name(placement_.policy) + " places them there",
                 ") but none was given (--slow-dir)");
    // The rows in one piece of the slow tier, as TieredDLRM reserves them.
    STRATA_CHECK(storage.slow.heap->reserve(placement_.table_bytes), "rank ", rank_, ": cannot reserve ",
                 format_bytes(static_cast<double>(placement_.table_bytes)), " for its shards in the slow tier ",
                 storage.slow.heap->name(), ": ", storage.slow.heap->no_room_message(placement_.table_bytes));
  }
  std::vector<float> row;
  for (int t = 0; t < static_cast<int>(plan_.tables.size()); ++t) {
    const TableSpec& spec = plan_.tables[static_cast<std::size_t>(t)];
    shards_.emplace_back();
    if (!plan_.holds(rank_, t)) continue;
    auto shard = std::make_unique<Shard>();
    shard->lo = row_begin(t);
    shard->hi = row_end(t);
    shard->nodes = dist::tree_cover(plan_.row_blocks, plan_.block_begin(rank_, t), plan_.block_end(rank_, t));
    if (shard->hi > shard->lo) {
      PolicyOptions po;
      po.seed = seed * 1000003u + static_cast<uint64_t>(t);
      shard->placed =
          place_table(placement_, shard->hi - shard->lo, spec.dim, ElemType::F32, storage.fast, storage.slow, po);
      shard->table = &shard->placed.table();
      shard->table->set_name(spec.name);
      shard->state = std::make_unique<SparseOptimizerState>(*shard->table, optimizer_);
      row.resize(static_cast<std::size_t>(spec.dim));
      for (int64_t r = shard->lo; r < shard->hi; ++r) {
        for (int64_t c = 0; c < spec.dim; ++c)
          row[static_cast<std::size_t>(c)] = initial_value(seed, t, spec.rows, r, c);
        shard->table->write_row(r - shard->lo, row.data());
      }
      shard->table->reset_counters();
      if (shard->placed.managed != nullptr) shard->placed.managed->reset_stats();
    }
    shards_.back() = std::move(shard);
  }
}

const ManagedTable* ShardedEmbeddingBags::managed_shard(int table) const {
  const Shard* s = shards_.at(static_cast<std::size_t>(table)).get();
  return s == nullptr ? nullptr : s->placed.managed.get();
}

ShardedEmbeddingBags::~ShardedEmbeddingBags() = default;

void ShardedEmbeddingBags::read_row(int table, int64_t row, float* dst) const {
  const Shard* s = shards_.at(static_cast<std::size_t>(table)).get();
  STRATA_CHECK(s != nullptr && row >= s->lo && row < s->hi, "ShardedEmbeddingBags::read_row: rank ", rank_,
               " does not hold row ", row, " of table ", table);
  s->table->read_row(row - s->lo, dst);
}

void ShardedEmbeddingBags::write_row(int table, int64_t row, const float* src) {
  const Shard* s = shards_.at(static_cast<std::size_t>(table)).get();
  STRATA_CHECK(s != nullptr && row >= s->lo && row < s->hi, "ShardedEmbeddingBags::write_row: rank ", rank_,
               " does not hold row ", row, " of table ", table);
  s->table->write_row(row - s->lo, src);
}

std::span<float> ShardedEmbeddingBags::accumulators(int table) {
  Shard* s = shards_.at(static_cast<std::size_t>(table)).get();
  return s == nullptr || s->state == nullptr ? std::span<float>() : s->state->accumulators();
}

std::span<const float> ShardedEmbeddingBags::accumulators(int table) const {
  const Shard* s = shards_.at(static_cast<std::size_t>(table)).get();
  return s == nullptr || s->state == nullptr ? std::span<const float>() : std::as_const(*s->state).accumulators();
}

void ShardedEmbeddingBags::set_optimizer_steps(int64_t steps) {
  for (const auto& s : shards_)
    if (s != nullptr && s->state != nullptr) s->state->set_steps(steps);
}

std::vector<int64_t> ShardedEmbeddingBags::check_bags(std::span<const Bags> bags,
                                                      std::span<const int64_t> boundaries) const {
  STRATA_CHECK(bags.size() == plan_.tables.size(), "ShardedEmbeddingBags: ", bags.size(), " tables of bags for ",
               plan_.tables.size(), " tables");
  for (std::size_t t = 0; t < bags.size(); ++t) {
    const TableSpec& spec = plan_.tables[t];
    STRATA_CHECK(bags[t].weights.empty(), "ShardedEmbeddingBags: table ", t, " ", quote_field(spec.name),
                 " has per-sample weights (not supported by the sharded exchange)");
    validate(spec.name, spec.rows, bags[t]);
    STRATA_CHECK(bags[t].batch() == bags[0].batch(), "ShardedEmbeddingBags: table ", t, " ", quote_field(spec.name),
                 " has ", bags[t].batch(), " bags but table 0 has ", bags[0].batch());
  }
  // Throws for a batch smaller than the rank count, or bad boundaries.
  return sample_slices(bags[0].batch(), plan_.ranks, boundaries);
}

// ---- policy hooks (Note [Shard storage]) -------------------------------------------------------------

namespace {

// Table t's bags restricted to rows [lo, hi), rebased to the shard's rows.
struct ShardBags {
  std::vector<int64_t> indices, offsets{0};
  ShardBags(const Bags& bags, int64_t lo, int64_t hi) {
    for (int64_t s = 0; s < bags.batch(); ++s) {
      for (int64_t p = bags.offsets[s]; p < bags.offsets[s + 1]; ++p) {
        if (bags.indices[p] >= lo && bags.indices[p] < hi) indices.push_back(bags.indices[p] - lo);
      }
      offsets.push_back(static_cast<int64_t>(indices.size()));
    }
  }
  Bags view() const { return {indices, offsets}; }
};

}  // namespace

// Before the pooling reads rows: each cached shard's policy sees the batch's indices of its rows
// (the previous lookup's update hooks first, when no backward ran them).
void ShardedEmbeddingBags::run_lookup_hooks(std::span<const Bags> bags) {
  if (update_hooks_due_) run_update_hooks();
  for (std::size_t t = 0; t < shards_.size(); ++t) {
    Shard* shard = shards_[t].get();
    if (shard == nullptr || shard->placed.managed == nullptr) continue;
    if (shard->placed.managed->policy() == EmbeddingPolicy::Simple) continue;  // its hook does nothing
    shard->placed.managed->before_lookup(ShardBags(bags[t], shard->lo, shard->hi).indices);
  }
  update_hooks_due_ = true;
}

void ShardedEmbeddingBags::run_update_hooks() {
  for (const auto& shard : shards_)
    if (shard != nullptr && shard->placed.managed != nullptr) shard->placed.managed->after_update();
  update_hooks_due_ = false;
}

// Note [Slow-tier charging of row accesses]: one charge per shard and pass over the bags.
void ShardedEmbeddingBags::charge_slow_reads() const {
  for (const auto& shard : shards_) {
    if (shard == nullptr || shard->slow_read == 0) continue;
    shard->table->charge_slow_read(shard->slow_read);
    shard->slow_read = 0;
  }
}

// ---- forward ----------------------------------------------------------------------------------------

// Note [Rank-count-independent pooling]: the values of this rank's tree nodes for bag (s, table),
// |nodes| × dim floats into `out`.
void ShardedEmbeddingBags::compute_nodes(int table, const Bags& bags, int64_t s, float* out) const {
  const Shard& shard = *shards_[static_cast<std::size_t>(table)];
  const TableSpec& spec = plan_.tables[static_cast<std::size_t>(table)];
  const auto d = static_cast<std::size_t>(spec.dim);
  // (block, position) of the bag's rows held here, by block then bag order.
  std::vector<std::pair<int64_t, int64_t>> hits;
  for (int64_t p = bags.offsets[s]; p < bags.offsets[s + 1]; ++p) {
    const int64_t row = bags.indices[p];
    if (row >= shard.lo && row < shard.hi) hits.emplace_back(block_of_row(spec.rows, plan_.row_blocks, row), p);
  }
  std::stable_sort(hits.begin(), hits.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<int64_t> blocks;  // distinct blocks touched, ascending
  std::vector<float> partial;   // their partial sums, from +0.0f in bag order
  for (const auto& [block, p] : hits) {
    if (blocks.empty() || blocks.back() != block) blocks.push_back(block), partial.resize(blocks.size() * d, 0.0f);
    float* acc = partial.data() + (blocks.size() - 1) * d;
    const std::byte* at = shard.table->rowpointer(bags.indices[p] - shard.lo, AccessContext::Forward);
    if (shard.table->in_slow(at)) shard.slow_read += shard.table->row_bytes();
    const float* row = reinterpret_cast<const float*>(at);
    for (std::size_t j = 0; j < d; ++j) acc[j] = acc[j] + row[j];
  }
  const std::vector<float> zeros(d, 0.0f);
  auto lookup = [&](dist::TreeNode n) -> const void* {
    const auto first = std::lower_bound(blocks.begin(), blocks.end(), n.lo);
    if (first == blocks.end() || *first >= n.hi) return zeros.data();  // untouched subtree: +0.0f
    if (n.hi - n.lo == 1) return partial.data() + static_cast<std::size_t>(first - blocks.begin()) * d;
    return nullptr;
  };
  for (std::size_t k = 0; k < shard.nodes.size(); ++k) {
    dist::detail::tree_eval(shard.nodes[k], lookup, DType::f32, spec.dim, out + k * d);
  }
}

// The forward alltoallv's input: for each other rank j, for each table this rank sends j (in table
// order), for each of j's samples, this rank's nodes. `send` gets the floats per rank.
Tensor ShardedEmbeddingBags::forward_payload(std::span<const Bags> bags, const std::vector<int64_t>& at,
                                             std::vector<int64_t>& send) const {
  send.assign(static_cast<std::size_t>(plan_.ranks), 0);
  for (int j = 0; j < plan_.ranks; ++j) {
    if (j == rank_) continue;
    for (int t = 0; t < static_cast<int>(plan_.tables.size()); ++t) {
      send[j] += (at[j + 1] - at[j]) * forward_nodes(plan_, rank_, t) * plan_.tables[t].dim;
    }
  }
  int64_t total = 0;
  for (int64_t n : send) total += n;
  Tensor payload = empty({total}, {DType::f32});
  float* out = payload.data<float>();
  for (int j = 0; j < plan_.ranks; ++j) {
    if (j == rank_) continue;
    for (int t = 0; t < static_cast<int>(plan_.tables.size()); ++t) {
      const int64_t per_sample = forward_nodes(plan_, rank_, t) * plan_.tables[t].dim;
      if (per_sample == 0) continue;
      for (int64_t s = at[j]; s < at[j + 1]; ++s, out += per_sample) compute_nodes(t, bags[t], s, out);
    }
  }
  return payload;
}

// The pooled rows of this rank's samples: with `received` null, the tables whole here (pooled locally,
// while the exchange runs); otherwise the others: received roots copied, and row-wise trees finished
// over every holder's nodes (rank order is block order).
void ShardedEmbeddingBags::finish_pooling(std::span<const Bags> bags, const std::vector<int64_t>& at,
                                          const Tensor* received, float* out) const {
  const int64_t mine = at[rank_ + 1] - at[rank_];
  // Where rank i's floats for table t start in `received` (i != rank_).
  std::vector<std::vector<int64_t>> base(static_cast<std::size_t>(plan_.ranks));
  int64_t offset = 0;
  for (int i = 0; i < plan_.ranks; ++i) {
    for (int t = 0; t < static_cast<int>(plan_.tables.size()); ++t) {
      base[i].push_back(offset);
      if (i != rank_) offset += mine * forward_nodes(plan_, i, t) * plan_.tables[t].dim;
    }
  }
  const float* in = received != nullptr ? received->data<float>() : nullptr;
  std::vector<float> local;
  for (int t = 0; t < static_cast<int>(plan_.tables.size()); ++t) {
    const int64_t d = plan_.tables[t].dim;
    const auto holders = [&] {
      std::vector<int> h;
      for (int i = 0; i < plan_.ranks; ++i)
        if (plan_.holds(i, t)) h.push_back(i);
      return h;
    }();
    const bool whole_here = plan_.shards[t].kind == ShardKind::data_parallel || holders == std::vector<int>{rank_};
    if (whole_here != (received == nullptr)) continue;
    std::vector<std::vector<dist::TreeNode>> nodes_of;  // each holder's nodes
    for (int i : holders) {
      nodes_of.push_back(dist::tree_cover(plan_.row_blocks, plan_.block_begin(i, t), plan_.block_end(i, t)));
    }
    for (int64_t k = 0; k < mine; ++k) {
      float* dst = out + k * width_ + column_[t];
      if (whole_here) {
        compute_nodes(t, bags[t], at[rank_] + k, dst);
        continue;
      }
      std::map<std::pair<int64_t, int64_t>, const float*> known;
      for (std::size_t h = 0; h < holders.size(); ++h) {
        const int i = holders[h];
        const std::vector<dist::TreeNode>& nodes = nodes_of[h];
        const float* values = in + base[i][t] + k * static_cast<int64_t>(nodes.size()) * d;
        if (i == rank_) {
          local.resize(nodes.size() * static_cast<std::size_t>(d));
          compute_nodes(t, bags[t], at[rank_] + k, local.data());
          values = local.data();
        }
        for (std::size_t n = 0; n < nodes.size(); ++n) known[{nodes[n].lo, nodes[n].hi}] = values + n * d;
      }
      dist::detail::tree_eval(
          {0, plan_.row_blocks},
          [&](dist::TreeNode n) -> const void* {
            const auto it = known.find({n.lo, n.hi});
            return it == known.end() ? nullptr : it->second;
          },
          DType::f32, d, dst);
    }
  }
}

Tensor ShardedEmbeddingBags::forward(std::span<const Bags> bags, std::span<const int64_t> boundaries) {
  return finish_forward(bags, start_forward(bags, boundaries));
}

ShardedEmbeddingBags::PendingForward ShardedEmbeddingBags::start_forward(std::span<const Bags> bags,
                                                                         std::span<const int64_t> boundaries) {
  PendingForward pending;
  pending.at = check_bags(bags, boundaries);
  run_lookup_hooks(bags);
  const std::vector<int64_t>& at = pending.at;
  std::vector<int64_t> send;
  pending.payload = forward_payload(bags, at, send);
  charge_slow_reads();
  if (plan_.ranks > 1) {
    std::vector<int64_t> recv(static_cast<std::size_t>(plan_.ranks), 0);
    for (int i = 0; i < plan_.ranks; ++i) {
      for (int t = 0; t < static_cast<int>(plan_.tables.size()) && i != rank_; ++t) {
        recv[i] += (at[rank_ + 1] - at[rank_]) * forward_nodes(plan_, i, t) * plan_.tables[t].dim;
      }
    }
    pending.work = comm_->ialltoallv(pending.payload, send, recv);
  }
  return pending;
}

Tensor ShardedEmbeddingBags::finish_forward(std::span<const Bags> bags, const PendingForward& pending) const {
  STRATA_CHECK(pending.payload.defined(), "ShardedEmbeddingBags::finish_forward: no forward was started");
  const std::vector<int64_t>& at = pending.at;
  Tensor out = empty({at[rank_ + 1] - at[rank_], width_}, {DType::f32});
  finish_pooling(bags, at, nullptr, out.data<float>());  // the tables whole here, before waiting
  // One rank: nothing sent or received.
  const Tensor received = pending.work.defined() ? pending.work.wait() : pending.payload;
  finish_pooling(bags, at, &received, out.data<float>());
  charge_slow_reads();
  return out;
}

// ---- backward ---------------------------------------------------------------------------------------

// The backward alltoallv: this rank's gradient columns of table t to every other holder of t,
// started; the ranks' parts arrive rank-major, then in table order.
dist::Work ShardedEmbeddingBags::start_gradient_exchange(const Tensor& grad, const std::vector<int64_t>& at,
                                                         Tensor& payload) {
  const int64_t mine = at[rank_ + 1] - at[rank_];
  std::vector<int64_t> send(static_cast<std::size_t>(plan_.ranks), 0), recv = send;
  for (int i = 0; i < plan_.ranks; ++i) {
    for (int t = 0; t < static_cast<int>(plan_.tables.size()) && i != rank_; ++t) {
      if (plan_.holds(i, t)) send[i] += mine * plan_.tables[t].dim;
      if (plan_.holds(rank_, t)) recv[i] += (at[i + 1] - at[i]) * plan_.tables[t].dim;
    }
  }
  int64_t total = 0;
  for (int64_t n : send) total += n;
  payload = empty({total}, {DType::f32});
  float* out = payload.data<float>();
  const float* g = grad.data<float>();
  for (int i = 0; i < plan_.ranks; ++i) {
    for (int t = 0; t < static_cast<int>(plan_.tables.size()) && i != rank_; ++t) {
      if (!plan_.holds(i, t)) continue;
      const int64_t d = plan_.tables[t].dim;
      for (int64_t k = 0; k < mine; ++k, out += d)
        std::memcpy(out, g + k * width_ + column_[t], static_cast<std::size_t>(d) * 4);
    }
  }
  return comm_->ialltoallv(payload, send, recv);
}

void ShardedEmbeddingBags::backward(std::span<const Bags> bags, const Tensor& grad, float lr,
                                    std::span<const int64_t> boundaries) {
  STRATA_CHECK(lr >= 0, "ShardedEmbeddingBags::backward: negative learning rate ", lr);
  finish_backward(bags, start_backward(bags, grad, boundaries), lr);
}

ShardedEmbeddingBags::PendingBackward ShardedEmbeddingBags::start_backward(std::span<const Bags> bags,
                                                                           const Tensor& grad,
                                                                           std::span<const int64_t> boundaries) {
  PendingBackward pending;
  pending.at = check_bags(bags, boundaries);
  const std::vector<int64_t>& at = pending.at;
  const int64_t mine = at[rank_ + 1] - at[rank_];
  STRATA_CHECK(
      grad.defined() && grad.dtype() == DType::f32 && grad.dim() == 2 && grad.size(0) == mine && grad.size(1) == width_,
      "ShardedEmbeddingBags::backward: rank ", rank_, " expects an f32 gradient of [", mine, ", ", width_,
      "] (its samples x the tables' dims), got ", grad.defined() ? grad.dtype() : DType::f32, " ",
      grad.defined() ? grad.sizes() : Dims{});
  pending.grad = grad.contiguous();
  if (plan_.ranks > 1) pending.work = start_gradient_exchange(pending.grad, at, pending.payload);
  return pending;
}

void ShardedEmbeddingBags::finish_backward(std::span<const Bags> bags, const PendingBackward& pending, float lr) {
  STRATA_CHECK(pending.grad.defined(), "ShardedEmbeddingBags::finish_backward: no backward was started");
  STRATA_CHECK(lr >= 0, "ShardedEmbeddingBags::backward: negative learning rate ", lr);
  const std::vector<int64_t>& at = pending.at;
  const int64_t batch = at.back();
  const Tensor& g = pending.grad;
  const Tensor received = pending.work.defined() ? pending.work.wait() : Tensor();
  // Where rank j's gradients of table t start in `received` (rank-major, then table order).
  std::vector<std::vector<int64_t>> base(static_cast<std::size_t>(plan_.ranks));
  int64_t offset = 0;
  for (int j = 0; j < plan_.ranks; ++j) {
    for (int t = 0; t < static_cast<int>(plan_.tables.size()); ++t) {
      base[j].push_back(offset);
      if (j != rank_ && plan_.holds(rank_, t)) offset += (at[j + 1] - at[j]) * plan_.tables[t].dim;
    }
  }
  // Each held table's gradient for the whole batch, slices in rank order (= global sample order).
  std::vector<float> full;
  for (int t = 0; t < static_cast<int>(plan_.tables.size()); ++t) {
    if (!plan_.holds(rank_, t)) continue;
    const int64_t d = plan_.tables[t].dim;
    full.resize(static_cast<std::size_t>(batch * d));
    for (int j = 0; j < plan_.ranks; ++j) {
      for (int64_t s = at[j]; s < at[j + 1]; ++s) {
        const float* src = j == rank_ ? g.data<float>() + (s - at[j]) * width_ + column_[t]
                                      : received.data<float>() + base[j][t] + (s - at[j]) * d;
        std::memcpy(full.data() + s * d, src, static_cast<std::size_t>(d) * 4);
      }
    }
    Shard& shard = *shards_[static_cast<std::size_t>(t)];
    if (shard.table == nullptr) continue;
    const ShardBags local(bags[t], shard.lo, shard.hi);
    SparseOptimizer step = optimizer_;
    step.lr = lr;
    update(*shard.table, local.view(), Pooling::Sum, {full.data(), d}, step, *shard.state, shard.workspace);
  }
  run_update_hooks();
}

}  // namespace strata::emb
