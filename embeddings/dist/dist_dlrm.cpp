#include "embeddings/dist/dist_dlrm.h"

#include <chrono>
#include <cstring>
#include <exception>
#include <optional>
#include <utility>

#include "autograd/grad_mode.h"
#include "core/error.h"
#include "core/factories.h"
#include "core/pin_set.h"
#include "core/rng.h"
#include "core/text.h"
#include "embeddings/dlrm.h"
#include "ops/shape_ops.h"

namespace strata::emb {

// Note [Distributed DLRM step]
// DistributedDLRM::train_step on a global batch of B samples (every rank passes the same):
// 1. Check. Every rank checks the batch locally (sizes, B >= ranks, the bags as
//    ShardedEmbeddingBags::check_bags) and the ranks exchange B, or -1 for a bad batch, and a
//    64-bit fingerprint of the batch's values (one allgatherv of two i64), so a batch that is bad on
//    one rank, or whose size or contents differ between ranks (ranks reading different data),
//    raises an error on every rank naming the rank before any other collective or update.
// 2. Slices. The batch splits into C fixed chunks (dist::split_rows; C = config.chunks, never the
//    rank count) and rank r runs a contiguous run of them (DataParallel::row_boundaries). The rank's
//    sample slice of the embeddings is the same rows: ShardedEmbeddingBags takes the boundaries
//    from the caller (its Note [Rank-count-independent pooling] holds for any contiguous slices in
//    rank order; shard_volume.h's formulas take them too).
// 3. Embedding exchange, started first: start_forward computes this rank's pooled nodes for every
//    other rank's samples and starts the non-blocking alltoallv.
// 4. Dense part, data-parallel: the MLPs are one nn::zoo::DLRM (external tables) wrapped in a
//    DataParallel (Note [Data-parallel chunks]), run as stages (forward_staged, Note [Staged
//    chunks]): each bottom-MLP layer, the interaction, each top-MLP layer, every stage for every
//    local chunk (on the chunk's own parameter leaves) before the next stage. The interaction stage
//    takes the chunk's pooled rows (the first chunk finishes the exchange: it pools the tables whole
//    on this rank, then waits, then finishes the others), each chunk's rows a fresh leaf requiring
//    grad. A stage per layer runs the layer as the whole FusedMLP does with grad mode on (layer by
//    layer), so the bits are the unstaged forward's. DataParallel returns the probabilities of the
//    whole batch [B, 1] on every rank; the loss (config.loss_function, after the --loss-threshold
//    clamp: Note [DLRM loss], the one-process run's function) is the mean over the global batch,
//    computed identically on every rank. Overlap: forward_staged(x, B, stages) takes the B
//    agreed in step 1, so no collective is queued behind the alltoallv before the chunks run (the
//    communicator's worker runs collectives in call order); the whole bottom MLP of every local
//    chunk and the pooling of the tables whole here run before the first wait for the exchange.
// 5. Backward: loss.backward() gives each chunk its rows of dL/dz; DataParallel sums each
//    parameter's per-chunk gradients in the deterministic allreduce over the global chunk list,
//    one bucket per layer (bucket_sizes), the top MLP's last layer first. The stages make backward
//    run each layer for every chunk before the layer below it, so a layer's bucket is reduced on
//    the worker while the layers below run backward: the top MLP's big layers overlap the rest of
//    the top MLP, the interaction and the bottom MLP. The chunks' pooled-row leaves get
//    dL/d(pooled) of this rank's samples; a hook on each collects them, and the last one starts
//    the embedding gradients' alltoallv (ShardedEmbeddingBags::start_backward), so it travels
//    while the bottom MLP runs backward. Its place among the collectives is the same on every
//    rank: the engine runs a leaf's AccumulateGrad (and so its hook) as soon as it is ready, and
//    the staged graph makes every chunk's interaction backward run before any bottom-MLP layer's,
//    so the exchange is issued after the top MLP's buckets and before the bottom MLP's. Backward
//    returns without waiting for the buckets (DataParallelOptions::wait_in_backward off).
// 6. Update: ShardedEmbeddingBags::finish_backward waits for the gradients and steps the held rows
//    (SGD or an Adagrad, each row's state beside it) while the bottom MLP's buckets reduce; then
//    DataParallel::wait_gradients and the dense optimizer (SGD or element-wise Adagrad) steps the
//    MLPs (the same sums on every rank, so the replicas stay identical without a broadcast), both
//    at the step's learning rate (config.lr_schedule at the step count, set before the step: the
//    same number on every rank).
// Why it is bitwise the same at 1, 2, 4 ranks: the pooled rows are (Note [Rank-count-independent
// pooling]); every chunk's forward and backward have the same shapes wherever it runs (one thread
// per rank, or the same thread count everywhere); the MLP gradients are one tree over the C chunk
// gradients (Note [Deterministic reduction order]); the loss and dL/dz are computed from the same
// [B, 1] on every rank; each table row's gradient is summed in global (sample, position) order.
// The MLPs are drawn from Generator(seed) and the tables from initial_value(seed, table, row, col),
// never by rank. What the split costs: C small GEMM passes per step instead of one per rank, the
// gather of B probabilities, the loss on every rank (see Note [Data-parallel chunks]).

// Note [Distributed step phases]
// DistStepTimes splits each training step into laps of one steady_clock (PhaseClock): each lap
// ends at a mark in train_step or in a stage (make_stages) and goes to that mark's phase, less the
// time the rank was blocked in collectives during the lap (the communicator's wait_seconds, read at
// each mark), which goes to `waited`. So the phases are this rank's compute as it ran — on a
// machine whose cores are shared (ranks, communicator workers, other jobs), slowed by that sharing —
// and their sum plus `waited` is the step's wall time. Stage calls lap what ran since the previous
// mark (leaf swaps, DataParallel's set-up) into `other` first. The interaction stage's first call
// finishes the embedding exchange: its pooling goes to `lookup`, its wait to `waited`. Marks cost
// two clock reads and a copy of the counters under their mutex: microseconds a step.

/// Laps of one step into DistStepTimes (Note [Distributed step phases]).
class DistributedDLRM::PhaseClock {
 public:
  PhaseClock(const dist::Communicator& comm, DistStepTimes& times) : comm_(comm), times_(times) {}
  void start() {
    last_ = Clock::now();
    last_wait_ = comm_.stats().total().wait_seconds;
  }
  // The time since the previous mark, less the time blocked meanwhile, to `phase`.
  void lap(double DistStepTimes::* phase) {
    const Clock::time_point now = Clock::now();
    const double wait = comm_.stats().total().wait_seconds;
    const double blocked = wait - last_wait_;
    times_.*phase += std::chrono::duration<double>(now - last_).count() - blocked;
    times_.waited += blocked;
    last_ = now;
    last_wait_ = wait;
  }

 private:
  using Clock = std::chrono::steady_clock;
  const dist::Communicator& comm_;
  DistStepTimes& times_;
  Clock::time_point last_;
  double last_wait_ = 0;
};

DLRMPhaseTimes DistStepTimes::as_phases() const {
  DLRMPhaseTimes p;
  p.bottom_mlp = bottom_mlp;
  p.lookup = lookup + lookup_remote;
  p.interaction = interaction;
  p.top_mlp = top_mlp;
  p.backward = backward;
  p.update = sparse_update + dense_optimizer;
  p.steps = steps;
  return p;
}

DistStepTimes DistStepTimes::since(const DistStepTimes& e) const {
  return {lookup_remote - e.lookup_remote,
          lookup - e.lookup,
          bottom_mlp - e.bottom_mlp,
          interaction - e.interaction,
          top_mlp - e.top_mlp,
          backward - e.backward,
          sparse_update - e.sparse_update,
          dense_optimizer - e.dense_optimizer,
          other - e.other,
          waited - e.waited,
          steps - e.steps};
}

/// The pooled rows of the current forward, handed to the chunks in order; in training, their
/// gradients collected as backward produces them, and the embedding backward started with the last
/// (Note [Distributed DLRM step] 5).
struct DistributedDLRM::Feed {
  ShardedEmbeddingBags* tables = nullptr;
  std::span<const Bags> bags;
  ShardedEmbeddingBags::PendingForward pending;
  Tensor pooled;                  // [B_r, width] once the exchange finished
  int64_t next_row = 0;           // the next chunk's first row in `pooled`
  std::vector<Tensor> leaves;     // with grad mode: each chunk's rows, a leaf
  std::vector<Tensor> gradients;  // each leaf's gradient, as backward delivers it
  int64_t arrived = 0;
  uint64_t generation = 0;                                        // which step's leaves the hooks belong to
  std::optional<ShardedEmbeddingBags::PendingBackward> backward;  // once started

  void start(ShardedEmbeddingBags& t, std::span<const Bags> b, ShardedEmbeddingBags::PendingForward p) {
    tables = &t;
    bags = b;
    pending = std::move(p);
    pooled = Tensor();
    next_row = 0;
    leaves.clear();
    gradients.clear();
    arrived = 0;
    backward.reset();
    ++generation;
  }

  // The next chunk's `rows` pooled rows (waiting for the exchange on the first call).
  Tensor next(int64_t rows) {
    STRATA_CHECK(tables != nullptr, "DistributedDLRM: the dense module ran outside a step (no pooled rows)");
    if (!pooled.defined()) pooled = tables->finish_forward(bags, pending);
    STRATA_ASSERT(next_row + rows <= pooled.size(0), "DistributedDLRM: the chunks ask more rows than the rank has");
    Tensor e = pooled.narrow(0, next_row, rows);
    next_row += rows;
    if (!autograd::GradMode::is_enabled()) return e;
    e = e.detach();
    e.set_requires_grad(true);
    const std::size_t index = leaves.size();
    e.register_hook([this, index, step = generation](const Tensor& g) {
      if (step == generation && tables != nullptr) on_gradient(index, g);  // not an old step's graph
      return Tensor();
    });
    leaves.push_back(e);
    gradients.emplace_back();
    return e;
  }

  // A leaf's gradient arrived (summed over its uses); with the last, the exchange of dL/d(pooled)
  // starts, while backward goes on with the bottom MLP.
  void on_gradient(std::size_t index, const Tensor& g) {
    STRATA_ASSERT(!gradients[index].defined(), "DistributedDLRM: a chunk's pooled rows got two gradients");
    gradients[index] = g;
    if (++arrived == static_cast<int64_t>(leaves.size())) start_backward();
  }

  // dL/d(pooled) of this rank's samples, [B_r, width] (zeros for rows backward did not reach),
  // handed to the tables' backward exchange.
  void start_backward() {
    std::vector<Tensor> parts;
    for (std::size_t i = 0; i < leaves.size(); ++i)
      parts.push_back(gradients[i].defined() ? gradients[i] : zeros(leaves[i].sizes(), {DType::f32}));
    autograd::NoGradGuard no_grad;
    const Tensor grad = parts.size() == 1 ? parts[0] : cat(parts, 0);
    backward = tables->start_backward(bags, grad, pending.at);
  }

  // After backward: the started embedding backward (started now if some rows got no gradient).
  ShardedEmbeddingBags::PendingBackward take_backward() {
    if (!backward) start_backward();
    ShardedEmbeddingBags::PendingBackward out = std::move(*backward);
    backward.reset();
    return out;
  }

  // Ends the step: the pooled rows and leaves are released; the module refuses to run until start.
  void finish() {
    tables = nullptr;
    bags = {};
    pending = {};
    pooled = Tensor();
    leaves.clear();
    gradients.clear();
    backward.reset();
    ++generation;
  }
};

/// The MLPs and the interaction on one chunk: dense rows in, probabilities out; the chunk's pooled
/// rows come from the feed (a rank's chunks call it in chunk order). The no-grad forward runs it
/// whole; training runs the same ops as stages (make_stages).
class DistributedDLRM::ChunkedDLRM : public nn::zoo::DLRM {
 public:
  ChunkedDLRM(const nn::zoo::DLRMOptions& options, Generator* gen, Feed* feed)
      : nn::zoo::DLRM(options, gen), feed_(feed) {}

  Tensor forward(const Tensor& dense) override {
    const Tensor x = bottom_mlp()(dense);
    const Tensor e = feed_->next(dense.size(0));
    return top_mlp()(interact(x, split(e, options().sparse_feature_size, 1)));
  }

 private:
  Feed* feed_;
};

namespace {

// The schedule and the loss (the checks validate() makes of their flags).
void check_rules(const DistributedDLRMConfig& c) {
  const LRSchedule& s = c.lr_schedule;
  STRATA_CHECK(s.warmup_steps >= 0 && s.decay_start_step >= 0 && s.decay_steps >= 0,
               "DistributedDLRM: negative lr_schedule step count (warmup_steps ", s.warmup_steps, ", decay_start_step ",
               s.decay_start_step, ", decay_steps ", s.decay_steps, ")");
  STRATA_CHECK(s.decay_steps == 0 || s.decay_start_step >= s.warmup_steps, "DistributedDLRM: lr_schedule ",
               "decay_start_step ", s.decay_start_step, " comes before the warm-up's ", s.warmup_steps,
               " steps end (the warm-up must finish before the decay starts)");
  STRATA_CHECK(c.loss_threshold >= 0 && c.loss_threshold < 1, "DistributedDLRM: loss_threshold must lie in [0, 1), ",
               "got ", c.loss_threshold);
  if (c.loss_function != LossFunction::WBCE) return;
  STRATA_CHECK(c.loss_weights.size() >= 2, "DistributedDLRM: wbce needs loss_weights for targets 0 and 1, got ",
               c.loss_weights.size(), " weight(s)");
  for (const double w : c.loss_weights)
    STRATA_CHECK(w >= 0, "DistributedDLRM: loss_weights must be non-negative, got ", w);
}

void check_config(const DistributedDLRMConfig& c, const ShardPlan& plan) {
  STRATA_CHECK(c.bottom_mlp.size() >= 2, "DistributedDLRM: bottom_mlp needs at least 2 widths (input and d), got ",
               c.bottom_mlp.size());
  STRATA_CHECK(!c.top_mlp.empty() && c.top_mlp.back() == 1,
               "DistributedDLRM: top_mlp must end in width 1 (the click probability)");
  STRATA_CHECK(c.learning_rate >= 0, "DistributedDLRM: negative learning_rate ", c.learning_rate);
  check_rules(c);
  STRATA_CHECK(!plan.tables.empty(), "DistributedDLRM: the plan has no tables");
  for (std::size_t t = 0; t < plan.tables.size(); ++t) {
    STRATA_CHECK(plan.tables[t].dim == c.bottom_mlp.back(), "DistributedDLRM: table ", t, " ",
                 quote_field(plan.tables[t].name), " has dim ", plan.tables[t].dim,
                 " but the bottom MLP's last width (the interaction's d) is ", c.bottom_mlp.back());
  }
}

// The layers of `mlp` as FusedMLPs of their own: each child with parameters (a Linear) with the
// parameterless children after it (its activation). Each runs as the whole MLP runs that layer
// with grad mode on (linear_stack goes layer by layer then), so a stage per layer gives its bits.
std::vector<std::shared_ptr<nn::zoo::FusedMLP>> mlp_layers(nn::Sequential& mlp) {
  std::vector<std::shared_ptr<nn::zoo::FusedMLP>> layers;
  for (std::size_t i = 0; i < mlp.size(); ++i) {
    const std::shared_ptr<nn::Module> child = mlp[static_cast<int64_t>(i)];
    if (layers.empty() || !child->parameters().empty()) layers.push_back(std::make_shared<nn::zoo::FusedMLP>());
    layers.back()->push_back(child);
  }
  return layers;
}

// One gradient bucket per layer, the last layer's first (DataParallelOptions::bucket_sizes: the
// parameters in reverse registration order, bottom MLP then top MLP).
std::vector<int64_t> layer_bucket_sizes(nn::zoo::DLRM& model) {
  std::vector<int64_t> sizes;
  for (nn::Sequential* mlp : {&model.top_mlp(), &model.bottom_mlp()}) {
    const std::vector<std::shared_ptr<nn::zoo::FusedMLP>> layers = mlp_layers(*mlp);
    for (auto it = layers.rbegin(); it != layers.rend(); ++it) {
      int64_t n = 0;
      for (const Tensor& p : (*it)->parameters()) n += p.requires_grad() ? 1 : 0;
      if (n > 0) sizes.push_back(n);
    }
  }
  return sizes;
}

// `count` floats of `values` from `first` as an f32 tensor of `sizes`.
Tensor tensor_of(std::span<const float> values, int64_t first, int64_t count, Dims sizes) {
  Tensor t = empty(std::move(sizes), {DType::f32});
  PinSet pins;
  pins.add(t, AccessMode::Write).acquire();
  std::memcpy(t.data_ptr(), values.data() + first, static_cast<std::size_t>(count) * sizeof(float));
  return t;
}

}  // namespace

DistributedDLRM::DistributedDLRM(const DistributedDLRMConfig& config, ShardPlan plan, const ShardStorage& storage,
                                 dist::Communicator& comm)
    : config_(config),
      comm_(comm),
      feed_(std::make_unique<Feed>()),
      learning_rate_(config.learning_rate),
      clock_(std::make_unique<PhaseClock>(comm, times_)) {
  check_config(config_, plan);
  nn::zoo::DLRMOptions o;
  o.sparse_feature_size = config_.bottom_mlp.back();
  o.embedding_sizes.clear();
  for (const TableSpec& t : plan.tables) o.embedding_sizes.push_back(t.rows);
  o.bottom_mlp = config_.bottom_mlp;
  o.top_mlp = config_.top_mlp;
  o.interaction = config_.interaction;
  o.external_tables = true;
  tables_ = std::make_unique<ShardedEmbeddingBags>(std::move(plan), comm_.rank(), storage, config_.seed, &comm_,
                                                   sparse_optimizer(config_.optimizer, 0.0f).kind);
  Generator gen(config_.seed);
  dense_ = std::make_shared<ChunkedDLRM>(o, &gen, feed_.get());
  // Every rank drew the same MLPs from the seed: no broadcast (DataParallel still checks shapes).
  ddp_ = std::make_unique<dist::DataParallel>(dense_, comm_,
                                              dist::DataParallelOptions{.chunks = config_.chunks,
                                                                        .bucket_sizes = layer_bucket_sizes(*dense_),
                                                                        .broadcast_state = false,
                                                                        .wait_in_backward = false});
  opt_ = dense_optimizer(config_.optimizer, dense_->parameters(), config_.learning_rate);
  make_stages();
}

// Note [Distributed DLRM step] 4: a stage per bottom-MLP layer, the interaction, one per top-MLP layer.
// Each stage laps its phase (Note [Distributed step phases]).
void DistributedDLRM::make_stages() {
  PhaseClock* clock = clock_.get();
  const auto timed = [clock](std::shared_ptr<nn::zoo::FusedMLP> layer, double DistStepTimes::* phase) {
    return [clock, layer, phase](const Tensor& x) {
      clock->lap(&DistStepTimes::other);
      Tensor y = (*layer)(x);
      clock->lap(phase);
      return y;
    };
  };
  for (const auto& layer : mlp_layers(dense_->bottom_mlp()))
    stages_.push_back(timed(layer, &DistStepTimes::bottom_mlp));
  stages_.push_back([this](const Tensor& x) {
    clock_->lap(&DistStepTimes::other);
    const Tensor e = feed_->next(x.size(0));
    clock_->lap(&DistStepTimes::lookup);
    Tensor y = dense_->interact(x, split(e, dense_->options().sparse_feature_size, 1));
    clock_->lap(&DistStepTimes::interaction);
    return y;
  });
  for (const auto& layer : mlp_layers(dense_->top_mlp())) stages_.push_back(timed(layer, &DistStepTimes::top_mlp));
}

DistributedDLRM::~DistributedDLRM() = default;

double DistributedDLRM::next_learning_rate() const {
  return config_.lr_schedule.rate(config_.learning_rate, steps_ + 1);
}

void DistributedDLRM::set_learning_rate(double lr) {
  learning_rate_ = lr;
  for (optim::ParamGroup& g : opt_->param_groups()) g.options["lr"] = lr;
}

Tensor DistributedDLRM::compute_loss(const Tensor& z, std::span<const float> targets) const {
  return dlrm_loss(clamp_probabilities(z, config_.loss_threshold), targets, config_.loss_function,
                   config_.loss_weights);
}

nn::zoo::DLRM& DistributedDLRM::dense_module() { return *dense_; }

// Note [Distributed DLRM step] 1: the local checks, then B (or -1) from every rank.
namespace {

// A 64-bit fingerprint of `bytes` (four multiply-xor lanes over 8-byte words, the tail zero-padded),
// mixed into `h`: cheap next to a step (about 0.1 ms per MB), and different for different batches
// but for a 2^-64 chance.
uint64_t fingerprint(uint64_t h, std::span<const std::byte> bytes) {
  constexpr uint64_t kMul = 0x9E3779B97F4A7C15ull;
  uint64_t lane[4] = {h, h ^ 0x1, h ^ 0x2, h ^ 0x3};
  const std::size_t words = bytes.size() / 8;
  for (std::size_t i = 0; i < words; ++i) {
    uint64_t w;
    std::memcpy(&w, bytes.data() + i * 8, 8);
    uint64_t& l = lane[i & 3];
    l = (l ^ w) * kMul;
    l ^= l >> 29;
  }
  uint64_t tail = 0;
  std::memcpy(&tail, bytes.data() + words * 8, bytes.size() - words * 8);
  uint64_t out = (bytes.size() ^ tail) * kMul;
  for (uint64_t l : lane) out = (out ^ l) * kMul, out ^= out >> 31;
  return out;
}

template <typename T>
uint64_t fingerprint(uint64_t h, std::span<const T> values) {
  return fingerprint(h, std::as_bytes(values));
}

// The fingerprint of a whole global batch: dense features, every table's offsets and indices, targets.
int64_t batch_fingerprint(std::span<const float> dense, std::span<const Bags> bags,
                          const std::span<const float>* targets) {
  uint64_t h = fingerprint(0, dense);
  for (const Bags& b : bags) h = fingerprint(fingerprint(h, b.offsets), b.indices);
  if (targets != nullptr) h = fingerprint(h, *targets);
  return static_cast<int64_t>(h);
}

}  // namespace

int64_t DistributedDLRM::check_batch(std::span<const float> dense, std::span<const Bags> bags,
                                     const std::span<const float>* targets) {
  std::exception_ptr problem;
  int64_t batch = -1, print = 0;
  try {
    tables_->check_bags(bags);
    batch = bags[0].batch();
    const int64_t width = config_.bottom_mlp.front();
    STRATA_CHECK(static_cast<int64_t>(dense.size()) == batch * width, "DistributedDLRM: expected dense features [",
                 batch, ", ", width, "] (", batch * width, " floats) for the ", batch, " bags, got ", dense.size(),
                 " floats");
    STRATA_CHECK(targets == nullptr || static_cast<int64_t>(targets->size()) == batch, "DistributedDLRM: expected ",
                 batch, " targets (one per bag), got ", targets == nullptr ? 0 : targets->size());
    if (comm_.size() > 1) print = batch_fingerprint(dense, bags, targets);
    if (targets != nullptr) check_loss_targets(*targets, config_.loss_function, config_.loss_weights);
  } catch (const Error&) {
    problem = std::current_exception();
    batch = -1;
  }
  Tensor mine = empty({2}, {DType::i64});
  mine.data<int64_t>()[0] = batch;
  mine.data<int64_t>()[1] = print;
  const Tensor all = comm_.allgatherv(mine);
  const int64_t* b = all.data<int64_t>();  // rank r: b[2r] the batch size, b[2r + 1] its fingerprint
  if (problem) std::rethrow_exception(problem);
  for (int r = 0; r < comm_.size(); ++r) {
    STRATA_CHECK(b[2 * r] >= 0, "DistributedDLRM: rank ", r, " passed an invalid batch (rank ", r,
                 "'s error names the input)");
  }
  for (int r = 1; r < comm_.size(); ++r) {
    STRATA_CHECK(b[2 * r] == b[0], "DistributedDLRM: rank 0 passed a global batch of ", b[0], " samples but rank ", r,
                 " passed ", b[2 * r], " (every rank passes the same global batch)");
    STRATA_CHECK(b[2 * r + 1] == b[1], "DistributedDLRM: rank ", r, "'s global batch of ", b[0],
                 " samples differs from rank 0's (the same sizes, other values: the ranks read different data; ",
                 "every rank passes the same global batch)");
  }
  return batch;
}

Tensor DistributedDLRM::local_dense(std::span<const float> dense, dist::RowRange rows) const {
  const int64_t width = config_.bottom_mlp.front();
  return tensor_of(dense, rows.begin * width, rows.size() * width, {rows.size(), width});
}

float DistributedDLRM::train_step(std::span<const float> dense, std::span<const Bags> bags,
                                  std::span<const float> targets) {
  clock_->start();  // Note [Distributed step phases]
  const int64_t batch = check_batch(dense, bags, &targets);
  set_learning_rate(next_learning_rate());
  const std::vector<int64_t> at = ddp_->row_boundaries(batch);
  const dist::RowRange rows{at[comm_.rank()], at[comm_.rank() + 1]};
  if (config_.check_finite) check_finite_inputs(dense, targets, rows);
  clock_->lap(&DistStepTimes::other);
  feed_->start(*tables_, bags, tables_->start_forward(bags, at));
  clock_->lap(&DistStepTimes::lookup_remote);
  // B was agreed: no exchange before the chunks; the stages let the bottom MLP of every chunk run
  // before the first chunk waits for the exchange.
  const Tensor z = ddp_->forward_staged(local_dense(dense, rows), batch, stages_);
  clock_->lap(&DistStepTimes::other);
  if (config_.check_finite) {
    try {
      check_finite_output(z);
    } catch (const Error&) {
      abandon_step();  // Note [Distributed finite check]: no backward; the next step starts clean
      throw;
    }
  }
  const Tensor loss = compute_loss(z, targets);
  clock_->lap(&DistStepTimes::top_mlp);
  loss.backward();  // starts the embedding gradients' exchange and launches every bucket
  const ShardedEmbeddingBags::PendingBackward embedding = feed_->take_backward();
  feed_->finish();
  if (config_.check_finite) check_finite_gradients(loss.item<float>(), rows, embedding);  // before any update
  clock_->lap(&DistStepTimes::backward);
  tables_->finish_backward(bags, embedding, static_cast<float>(learning_rate_));  // while the last buckets reduce
  clock_->lap(&DistStepTimes::sparse_update);
  ddp_->wait_gradients();
  opt_->step();
  opt_->zero_grad();
  clock_->lap(&DistStepTimes::dense_optimizer);
  ++times_.steps;
  ++steps_;
  return loss.item<float>();
}

void DistributedDLRM::abandon_step() {
  feed_->finish();
  ddp_->discard_step();
}

Tensor DistributedDLRM::run_local(std::span<const float> dense, std::span<const Bags> bags, int64_t batch) {
  autograd::NoGradGuard no_grad;
  const std::vector<int64_t> at = ddp_->row_boundaries(batch);
  const dist::RowRange rows{at[comm_.rank()], at[comm_.rank() + 1]};
  feed_->start(*tables_, bags, tables_->start_forward(bags, at));
  const Tensor x = local_dense(dense, rows);
  // The training forward's chunks (the same shapes at any rank count), without DataParallel's gather.
  const std::vector<dist::RowRange> chunks = dist::split_rows(batch, config_.chunks);
  const dist::RowRange mine = ddp_->local_chunks(batch);
  std::vector<Tensor> out;
  for (int64_t c = mine.begin; c < mine.end; ++c)
    out.push_back((*dense_)(x.narrow(0, chunks[c].begin - rows.begin, chunks[c].size())));
  feed_->finish();
  return clamp_probabilities(out.size() == 1 ? out[0].contiguous() : cat(out, 0), config_.loss_threshold);
}

Tensor DistributedDLRM::forward(std::span<const float> dense, std::span<const Bags> bags) {
  return run_local(dense, bags, check_batch(dense, bags, nullptr));
}

Tensor DistributedDLRM::score(std::span<const float> dense, std::span<const Bags> bags) {
  return comm_.allgatherv(forward(dense, bags));
}

}  // namespace strata::emb
