#include "dist/data_parallel/data_parallel.h"

#include <algorithm>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <utility>

#include "autograd/accumulate.h"
#include "autograd/grad_mode.h"
#include "autograd/node.h"
#include "core/error.h"
#include "core/factories.h"
#include "dist/reduction.h"
#include "ops/shape_ops.h"

namespace strata::dist {

// Note [Data-parallel chunks]
// Why the gradients are bitwise the same at 1, 2, 4, ... ranks for one global batch of B rows:
//  - The decomposition does not depend on the rank count. The batch splits into C = min(chunks, B)
//    contiguous chunks (split_rows: the first B mod C one row larger); rank r runs a contiguous run
//    of them (the first C mod N ranks one chunk more). Each chunk's forward and backward run on its
//    own: every kernel sees the same shapes, hence (at one thread count) the same arithmetic,
//    whichever rank runs it.
//  - Each chunk's parameter gradients stay apart: the chunk runs on fresh leaves aliasing the
//    parameters (param.detach() with requires_grad, swapped into the module's registry for the
//    chunk's forward), so backward accumulates chunk c's gradient into chunk c's leaves only; a
//    hook on each leaf hands it over. (Recomputation sees the real parameters, which hold the same
//    bytes, so checkpointed segments and tape streaming save the same values.)
//  - The loss sees the whole batch. forward() returns every rank's output rows gathered in batch
//    order, so every rank computes the loss of the global batch exactly as one process would (a
//    mean over B, not over the rank's rows: no rescaling by rows per rank, whose rounding would
//    depend on the split). Its backward sends each local chunk its rows of the output gradient.
//  - The chunk gradients combine in one tree: the communicator's allreduce over a list of
//    contributions equals tree_sum over the global list (chunk 0's first) whichever ranks hold
//    which (Note [Deterministic reduction order]). At one rank the same chunks and the same tree
//    run in-process. The sum is the gradient of the global loss; no scaling is needed.
// Buckets: a bucket's per-chunk gradients are concatenated (element-wise sums do not care) and
// reduced with the non-blocking allreduce once every local chunk produced them, so communication
// overlaps the rest of the backward, as PyTorch's DDP buckets do. Buckets are launched in bucket
// order on every rank (a ready bucket waits for the earlier ones), since every rank must issue the
// collectives in one order. The engine runs the most recent chunk's graph first (Note [Engine
// order]), so buckets become ready during the first local chunk's backward, the last to run;
// forward_staged changes that order so that a bucket is ready once its stage finished in every
// chunk (Note [Staged chunks]). bucket_sizes sets the buckets by parameter count (e.g. one layer each).
// What it costs: C forward/backward passes per step on smaller matrices instead of N (the chunks of
// one rank run one after the other; GEMMs on B/C rows use the cores less well than on B/N rows),
// one gradient per local chunk and parameter until its bucket is reduced (C/N gradient copies at
// worst), the gather of the outputs (B rows of the output) and the loss computed on every rank.
// Batch norm normalizes with per-chunk statistics, as PyTorch's DDP normalizes with per-rank ones
// (chunks=1 at one rank gives the plain full-batch statistics). Its running statistics are updated
// chunk after chunk by each rank's own chunks only, so they are not bitwise the same across rank
// counts (PyTorch's DDP copies rank 0's, which does not equal one process either).

// Note [Staged chunks]
// forward_staged runs the module as a list of stages, stage s for every local chunk before stage
// s + 1 (each call with the chunk's own leaves swapped in), instead of each chunk's whole forward
// in turn. Every chunk's values come from the same ops on the same shapes and the same leaves, so
// outputs and gradients are bitwise forward()'s; only the order of ops across chunks changes. What
// it buys is overlap (Note [Distributed DLRM step]):
//  - Backward: the engine runs ready nodes by sequence number, highest first (Note [Engine
//    order]); the ops of stage s of every chunk were recorded after those of stage s - 1 of every
//    chunk, so the backward of the last stage runs for all chunks before that of the stage before.
//    A bucket holding one stage's parameters (DataParallelOptions::bucket_sizes) is complete, and
//    launched, as soon as that stage's backward finished, and its allreduce overlaps the backward
//    of every earlier stage of every chunk. Unstaged, a bucket waits for the first local chunk's
//    backward, which the engine runs last, so only that chunk's earlier layers overlap it.
//  - Forward: a stage that waits for communication (DistributedDLRM's interaction, which needs the
//    embedding exchange) runs after the earlier stages of every chunk, which all overlap it.
// What it costs: every chunk's stage outputs are alive together between stages, as they are
// anyway until backward (the graph keeps them).

namespace {

// "f32 [4, 3]" (for messages).
std::string describe(DType dtype, const Dims& sizes) {
  std::ostringstream os;
  os << dtype << " " << sizes;
  return os.str();
}

// This rank's signature of its parameters: count, then per parameter dtype, rank and sizes.
Tensor parameter_signature(const std::vector<Tensor>& params) {
  std::vector<int64_t> sig{static_cast<int64_t>(params.size())};
  for (const Tensor& p : params) {
    sig.push_back(static_cast<int64_t>(p.dtype()));
    sig.push_back(p.dim());
    for (int64_t s : p.sizes()) sig.push_back(s);
  }
  Tensor t = empty({static_cast<int64_t>(sig.size())}, {DType::i64});
  std::copy(sig.begin(), sig.end(), t.data<int64_t>());
  return t;
}

}  // namespace

std::vector<RowRange> split_rows(int64_t batch, int64_t chunks) {
  STRATA_CHECK(batch >= 1, "DataParallel: a batch of ", batch, " rows cannot be split (it needs at least one row)");
  STRATA_CHECK(chunks >= 1, "DataParallel: chunks=", chunks, " must be at least 1");
  const int64_t n = std::min(chunks, batch);
  std::vector<RowRange> out(n);
  int64_t begin = 0;
  for (int64_t c = 0; c < n; ++c) {
    const int64_t rows = batch / n + (c < batch % n ? 1 : 0);
    out[c] = {begin, begin + rows};
    begin += rows;
  }
  return out;
}

// ---- one step ----------------------------------------------------------------------------------

struct DataParallel::Step {
  Communicator* comm = nullptr;
  std::vector<Tensor> params;                 // the reduced parameters (indices as in buckets)
  std::vector<std::vector<int64_t>> buckets;  // positions in `params`
  std::vector<int64_t> bucket_of;             // param position -> bucket
  int64_t local_chunks = 0;
  std::mutex mutex;
  std::vector<std::vector<Tensor>> grads;  // [local chunk][param position]
  std::vector<int64_t> pending;            // gradients each bucket still waits for
  std::vector<Work> works;
  int64_t launched = 0;
  bool wait_in_backward = true;
  bool finished = false;

  void on_gradient(int64_t chunk, int64_t param, const Tensor& g);
  void launch(int64_t bucket);
  void finish();
};

void DataParallel::Step::on_gradient(int64_t chunk, int64_t param, const Tensor& g) {
  std::lock_guard<std::mutex> lock(mutex);
  STRATA_ASSERT(!grads[chunk][param].defined(), "DataParallel: a chunk gradient arrived twice");
  grads[chunk][param] = g;
  const int64_t b = bucket_of[param];
  if (--pending[b] > 0) return;
  // Launch in bucket order: every rank must issue the collectives in one order.
  while (launched < static_cast<int64_t>(buckets.size()) && pending[launched] == 0) launch(launched++);
  if (launched == static_cast<int64_t>(buckets.size()) && wait_in_backward) finish();
}

void DataParallel::Step::launch(int64_t bucket) {
  std::vector<Tensor> contributions;
  contributions.reserve(local_chunks);
  for (int64_t c = 0; c < local_chunks; ++c) {
    std::vector<Tensor> parts;
    for (int64_t p : buckets[bucket]) {
      parts.push_back(grads[c][p].contiguous().reshape({-1}));
      grads[c][p] = Tensor();
    }
    contributions.push_back(parts.size() == 1 ? parts[0] : cat(parts, 0));
  }
  works[bucket] = comm->iallreduce(contributions);
}

// Waits for every bucket and accumulates each parameter's slice of its bucket's sum into `.grad`.
void DataParallel::Step::finish() {
  autograd::NoGradGuard no_grad;
  for (std::size_t b = 0; b < buckets.size(); ++b) {
    const Tensor sum = works[b].wait();
    int64_t offset = 0;
    for (int64_t p : buckets[b]) {
      Tensor& param = params[p];
      Tensor g = sum.narrow(0, offset, param.numel()).view(param.sizes());
      offset += param.numel();
      if (param.grad().defined()) {
        autograd::detail::accumulate_into(param.grad(), g);
      } else {
        param.set_grad(g);
      }
    }
  }
  finished = true;
}

// ---- construction --------------------------------------------------------------------------------

struct DataParallel::ParamSlot {
  nn::Module* module = nullptr;
  std::string name;
  int64_t position = 0;  // index into reduced_
};

DataParallel::DataParallel(std::shared_ptr<nn::Module> module, Communicator& comm, DataParallelOptions options)
    : module_(std::move(module)), comm_(comm), options_(options) {
  STRATA_CHECK(module_ != nullptr, "DataParallel: the module is null");
  STRATA_CHECK(options_.chunks >= comm_.size(), "DataParallel: chunks=", options_.chunks, " is fewer than the ",
               comm_.size(), " ranks (every rank runs at least one chunk)");
  STRATA_CHECK(options_.bucket_bytes >= 1, "DataParallel: bucket_bytes=", options_.bucket_bytes, " must be at least 1");
  for (std::size_t b = 0; b < options_.bucket_sizes.size(); ++b) {
    STRATA_CHECK(options_.bucket_sizes[b] >= 1, "DataParallel: bucket_sizes[", b, "]=", options_.bucket_sizes[b],
                 " must be at least 1 (a bucket holds at least one parameter)");
  }
  collect_parameters();
  check_parameters_agree();
  if (options_.broadcast_state) broadcast_state();
  make_buckets();
}

DataParallel::~DataParallel() = default;

void DataParallel::collect_parameters() {
  for (auto& [name, p] : module_->named_parameters()) {
    const int64_t index = static_cast<int64_t>(params_.size());
    params_.push_back(p);
    param_names_.push_back(name);
    if (!p.requires_grad()) continue;
    STRATA_CHECK(p.dtype() == DType::f32 || p.dtype() == DType::f64, "DataParallel: parameter '", name, "' is ",
                 p.dtype(), "; DataParallel reduces f32 and f64 gradients");
    reduced_.push_back(index);
  }
  // Every registry entry holding a reduced parameter (a tied parameter sits in several modules).
  for (const auto& m : module_->modules()) {
    for (auto& [name, p] : m->named_parameters("", /*recurse=*/false)) {
      for (std::size_t i = 0; i < reduced_.size(); ++i) {
        if (params_[reduced_[i]].is_same(p)) slots_.push_back({m.get(), name, static_cast<int64_t>(i)});
      }
    }
  }
}

// Every rank's parameter signature against rank 0's; the same error on every rank.
void DataParallel::check_parameters_agree() {
  const Tensor mine = parameter_signature(params_);
  const Tensor lengths = comm_.allgatherv(full({1}, static_cast<double>(mine.numel()), {DType::i64}));
  const Tensor all = comm_.allgatherv(mine);
  const int64_t* len = lengths.data<int64_t>();
  const int64_t* base = all.data<int64_t>();
  const int64_t* root = base;
  const int64_t* other = base;
  for (int r = 1; r < comm_.size(); ++r) {
    other += len[r - 1];
    STRATA_CHECK(other[0] == root[0], "DataParallel: rank 0's module has ", root[0], " parameters but rank ", r,
                 "'s has ", other[0]);
    const int64_t* a = root + 1;
    const int64_t* b = other + 1;
    for (int64_t i = 0; i < root[0]; ++i) {
      const Dims sa(a + 2, a + 2 + a[1]), sb(b + 2, b + 2 + b[1]);
      STRATA_CHECK(a[0] == b[0] && sa == sb, "DataParallel: parameter '", param_names_[i], "' (parameter ", i, ") is ",
                   describe(static_cast<DType>(a[0]), sa), " on rank 0 but ", describe(static_cast<DType>(b[0]), sb),
                   " on rank ", r);
      a += 2 + a[1];
      b += 2 + b[1];
    }
  }
}

// Rank 0's parameters and buffers to every rank: an allreduce to which only rank 0 contributes is
// its tensor (a tree over one contribution).
void DataParallel::broadcast_state() {
  autograd::NoGradGuard no_grad;
  std::vector<Tensor> state = params_;
  for (const Tensor& b : module_->buffers()) state.push_back(b);
  for (Tensor& t : state) {
    if (t.numel() == 0) continue;
    const bool native = detail::reducible(t.dtype());
    std::vector<Tensor> contribution;
    if (comm_.rank() == 0) contribution.push_back((native ? t : t.to(DType::f64)).reshape({-1}));
    const Tensor value = comm_.allreduce(contribution);
    if (comm_.rank() != 0) t.copy_(value.view(t.sizes()));
  }
}

void DataParallel::make_buckets() {
  if (!options_.bucket_sizes.empty()) {
    int64_t total = 0;
    for (int64_t n : options_.bucket_sizes) total += n;
    const auto params = static_cast<int64_t>(reduced_.size());
    STRATA_CHECK(total == params, "DataParallel: bucket_sizes sum to ", total, " parameters but the module has ",
                 params, " parameters that require grad");
    int64_t next = params - 1;  // reverse registration order
    for (int64_t n : options_.bucket_sizes) {
      buckets_.emplace_back();
      for (int64_t i = 0; i < n; ++i) buckets_.back().push_back(next--);
    }
    return;
  }
  int64_t bytes = 0;
  for (auto it = reduced_.rbegin(); it != reduced_.rend(); ++it) {
    const int64_t position = it - reduced_.rbegin();
    const int64_t size = params_[*it].nbytes();
    if (buckets_.empty() || (bytes > 0 && bytes + size > options_.bucket_bytes)) {
      buckets_.emplace_back();
      bytes = 0;
    }
    buckets_.back().push_back(static_cast<int64_t>(reduced_.size()) - 1 - position);
    bytes += size;
  }
}

// ---- forward -----------------------------------------------------------------------------------

RowRange DataParallel::local_chunks(int64_t global_batch) const {
  STRATA_CHECK(global_batch >= comm_.size(), "DataParallel: a global batch of ", global_batch,
               " rows is smaller than the ", comm_.size(), " ranks (every rank needs at least one row)");
  const int64_t chunks = std::min(options_.chunks, global_batch);
  return split_rows(chunks, comm_.size())[comm_.rank()];
}

RowRange DataParallel::local_rows(int64_t global_batch) const {
  const std::vector<int64_t> at = row_boundaries(global_batch);
  return {at[comm_.rank()], at[comm_.rank() + 1]};
}

std::vector<int64_t> DataParallel::row_boundaries(int64_t global_batch) const {
  STRATA_CHECK(global_batch >= comm_.size(), "DataParallel: a global batch of ", global_batch,
               " rows is smaller than the ", comm_.size(), " ranks (every rank needs at least one row)");
  const std::vector<RowRange> chunks = split_rows(global_batch, options_.chunks);
  const std::vector<RowRange> shares = split_rows(static_cast<int64_t>(chunks.size()), comm_.size());
  std::vector<int64_t> at{0};
  for (const RowRange& share : shares) at.push_back(chunks[share.end - 1].end);
  return at;
}

void DataParallel::wait_gradients() {
  if (step_ == nullptr || step_->finished) return;
  bool all_launched = false;
  {
    std::lock_guard<std::mutex> lock(step_->mutex);
    all_launched = step_->launched == static_cast<int64_t>(step_->buckets.size());
  }
  if (!all_launched) check_previous_step(*step_);
  step_->finish();
}

void DataParallel::discard_step() {
  if (step_ == nullptr) return;
  {
    std::lock_guard<std::mutex> lock(step_->mutex);
    STRATA_CHECK(step_->launched == 0, "DataParallel: discard_step after backward launched ", step_->launched,
                 " bucket reductions (every rank takes part in them: call wait_gradients)");
  }
  step_.reset();
}

int64_t DataParallel::buckets_reduced() const {
  if (step_ == nullptr) return 0;
  std::lock_guard<std::mutex> lock(step_->mutex);
  return step_->launched;
}

// Names the first parameter the unfinished `step` got no gradient for (always throws).
void DataParallel::check_previous_step(Step& step) const {
  std::lock_guard<std::mutex> lock(step.mutex);
  STRATA_CHECK(step.launched < static_cast<int64_t>(step.buckets.size()), "DataParallel: the previous backward's ",
               "reductions were never waited for (wait_in_backward is off: call wait_gradients() before the ",
               "optimizer step)");
  for (int64_t c = 0; c < step.local_chunks; ++c) {
    for (std::size_t i = 0; i < reduced_.size(); ++i) {
      const bool reduced = step.pending[step.bucket_of[i]] == 0;
      STRATA_CHECK(reduced || step.grads[c][i].defined(), "DataParallel: the previous forward's gradients were ",
                   "never reduced: parameter '", param_names_[reduced_[i]], "' got no gradient in local chunk ", c,
                   " (run backward after each forward with grad mode on, from a loss every parameter takes part ",
                   "in; use grad mode off for forwards without backward)");
    }
  }
  STRATA_FAIL("DataParallel: the previous forward's gradients were never reduced");
}

// Every rank's row count (or problem code), rank 0's first.
std::vector<int64_t> DataParallel::exchange_rows(int64_t local) {
  Tensor mine = empty({1}, {DType::i64});
  mine.data<int64_t>()[0] = local;
  const Tensor all = comm_.allgatherv(mine);
  return {all.data<int64_t>(), all.data<int64_t>() + all.numel()};
}

// Row counts below zero stand for a rank's local problem, so that every rank raises the error.
enum : int64_t { kUndefinedInput = -1, kUnfinishedStep = -2, kScalarInput = -3 };

Tensor DataParallel::forward(const Tensor& local_input) {
  std::shared_ptr<Step> previous = std::exchange(step_, nullptr);
  const bool unfinished = previous != nullptr && !previous->finished;
  const std::vector<int64_t> rows = exchange_rows(!local_input.defined()   ? kUndefinedInput
                                                  : local_input.dim() == 0 ? kScalarInput
                                                  : unfinished             ? kUnfinishedStep
                                                                           : local_input.size(0));
  if (unfinished) check_previous_step(*previous);
  for (int r = 0; r < comm_.size(); ++r) {
    STRATA_CHECK(rows[r] != kUnfinishedStep, "DataParallel: rank ", r,
                 " never reduced the previous forward's gradients");
    STRATA_CHECK(rows[r] != kUndefinedInput && rows[r] != kScalarInput, "DataParallel: rank ", r, " passed ",
                 rows[r] == kUndefinedInput ? "an undefined input" : "a 0-dim input",
                 " (forward takes the rank's rows of the global batch along dim 0)");
  }
  int64_t batch = 0;
  for (int64_t n : rows) batch += n;
  STRATA_CHECK(batch >= comm_.size(), "DataParallel: a global batch of ", batch, " rows is smaller than the ",
               comm_.size(), " ranks (every rank needs at least one row)");
  const std::vector<int64_t> at = row_boundaries(batch);
  for (int r = 0; r < comm_.size(); ++r) {
    STRATA_CHECK(rows[r] == at[r + 1] - at[r], "DataParallel: rank ", r, " passed ", rows[r],
                 " rows but its share of the global batch of ", batch, " rows is rows [", at[r], ", ", at[r + 1], ") (",
                 at[r + 1] - at[r], " rows; see local_rows)");
  }
  return run_step(local_input, batch, {});
}

// forward_agreed's local checks (this rank's input against its share of `global_batch`).
void DataParallel::check_local_input(const Tensor& local_input, int64_t global_batch) {
  std::shared_ptr<Step> previous = std::exchange(step_, nullptr);
  if (previous != nullptr && !previous->finished) check_previous_step(*previous);
  STRATA_CHECK(local_input.defined() && local_input.dim() >= 1, "DataParallel: rank ", comm_.rank(), " passed ",
               local_input.defined() ? "a 0-dim input" : "an undefined input",
               " (forward takes the rank's rows of the global batch along dim 0)");
  const RowRange rows = local_rows(global_batch);
  STRATA_CHECK(local_input.size(0) == rows.size(), "DataParallel: rank ", comm_.rank(), " passed ", local_input.size(0),
               " rows but its share of the global batch of ", global_batch, " rows is rows [", rows.begin, ", ",
               rows.end, ") (", rows.size(), " rows; see local_rows)");
}

Tensor DataParallel::forward_agreed(const Tensor& local_input, int64_t global_batch) {
  check_local_input(local_input, global_batch);
  return run_step(local_input, global_batch, {});
}

Tensor DataParallel::forward_staged(const Tensor& local_input, int64_t global_batch, const std::vector<Stage>& stages) {
  STRATA_CHECK(!stages.empty(), "DataParallel: forward_staged needs at least one stage");
  check_local_input(local_input, global_batch);
  return run_step(local_input, global_batch, stages);
}

// Runs this rank's chunks of a global batch of `batch` rows (checked) through `stages` (none: the
// module's forward) and gathers the outputs.
Tensor DataParallel::run_step(const Tensor& local_input, int64_t batch, const std::vector<Stage>& stages) {
  const std::vector<RowRange> chunks = split_rows(batch, options_.chunks);
  const RowRange mine = local_chunks(batch);
  std::vector<Tensor> outputs;
  step_ = autograd::GradMode::is_enabled() && !reduced_.empty() ? new_step(mine.size()) : nullptr;
  Tensor local;
  try {
    local = run_chunks(local_input, chunks, mine, chunks[mine.begin].begin, stages, outputs);
  } catch (...) {
    step_.reset();  // a failed forward leaves nothing to reduce
    throw;
  }
  Tensor global = comm_.allgatherv(local);
  if (autograd::needs_grad(outputs)) {
    // Backward sends each local chunk its rows of the global output's gradient.
    std::vector<RowRange> spans(chunks.begin() + mine.begin, chunks.begin() + mine.end);
    auto node = autograd::make_node("DataParallelGatherBackward", outputs,
                                    [spans](autograd::Node&, const autograd::TensorList& g) {
                                      autograd::TensorList out;
                                      for (const RowRange& s : spans)
                                        out.push_back(g[0].narrow(0, s.begin, s.size()).contiguous());
                                      return out;
                                    });
    autograd::set_history({&global}, node);
  }
  return global;
}

std::shared_ptr<DataParallel::Step> DataParallel::new_step(int64_t local_chunks) const {
  auto step = std::make_shared<Step>();
  step->comm = &comm_;
  for (int64_t index : reduced_) step->params.push_back(params_[index]);
  step->buckets = buckets_;
  step->bucket_of.resize(reduced_.size());
  step->pending.resize(buckets_.size());
  for (std::size_t b = 0; b < buckets_.size(); ++b) {
    for (int64_t p : buckets_[b]) step->bucket_of[p] = static_cast<int64_t>(b);
    step->pending[b] = local_chunks * static_cast<int64_t>(buckets_[b].size());
  }
  step->local_chunks = local_chunks;
  step->grads.assign(local_chunks, std::vector<Tensor>(reduced_.size()));
  step->works.resize(buckets_.size());
  step->wait_in_backward = options_.wait_in_backward;
  return step;
}

// The module's registry entries pointing at a chunk's leaves for the chunk's forward, put back
// to the parameters afterwards (also when the forward throws).
class DataParallel::LeafSwap {
 public:
  LeafSwap(const DataParallel& dp, const std::vector<Tensor>& leaves) : dp_(dp) {
    for (const ParamSlot& s : dp_.slots_) s.module->parameter(s.name) = leaves[s.position];
  }
  ~LeafSwap() {
    for (const ParamSlot& s : dp_.slots_) s.module->parameter(s.name) = dp_.params_[dp_.reduced_[s.position]];
  }
  LeafSwap(const LeafSwap&) = delete;
  LeafSwap& operator=(const LeafSwap&) = delete;

 private:
  const DataParallel& dp_;
};

// Fresh leaves aliasing the reduced parameters for local chunk `chunk`, each handing its gradient
// to the step (Note [Data-parallel chunks]).
std::vector<Tensor> DataParallel::chunk_leaves(int64_t chunk) const {
  std::vector<Tensor> leaves;
  leaves.reserve(reduced_.size());
  std::weak_ptr<Step> weak = step_;
  for (std::size_t i = 0; i < reduced_.size(); ++i) {
    Tensor leaf = params_[reduced_[i]].detach();
    leaf.set_requires_grad(true);
    const auto position = static_cast<int64_t>(i);
    leaf.register_hook([weak, chunk, position](const Tensor& g) {
      if (auto step = weak.lock()) step->on_gradient(chunk, position, g);
      return Tensor();
    });
    leaves.push_back(std::move(leaf));
  }
  return leaves;
}

// Runs the local chunks (rows `chunks[mine]` of the batch; `local_input` starts at row `begin`)
// stage by stage (Note [Staged chunks]; no stages: the module's forward as one stage) into
// `outputs` and returns their concatenation, detached.
Tensor DataParallel::run_chunks(const Tensor& local_input, const std::vector<RowRange>& chunks, RowRange mine,
                                int64_t begin, const std::vector<Stage>& stages, std::vector<Tensor>& outputs) {
  const int64_t n = mine.size();
  std::vector<Tensor> values;
  std::vector<std::vector<Tensor>> leaves(n);
  for (int64_t c = 0; c < n; ++c) {
    values.push_back(local_input.narrow(0, chunks[mine.begin + c].begin - begin, chunks[mine.begin + c].size()));
    if (step_ != nullptr) leaves[c] = chunk_leaves(c);
  }
  const auto num_stages = static_cast<int64_t>(std::max<std::size_t>(1, stages.size()));
  for (int64_t s = 0; s < num_stages; ++s) {
    for (int64_t c = 0; c < n; ++c) {
      std::optional<LeafSwap> swap;
      if (step_ != nullptr) swap.emplace(*this, leaves[c]);
      values[c] = stages.empty() ? (*module_)(values[c]) : stages[s](values[c]);
      STRATA_CHECK(values[c].defined(),
                   "DataParallel: ", stages.empty() ? std::string("the module") : "stage " + std::to_string(s),
                   " returned an undefined tensor for a chunk of ", chunks[mine.begin + c].size(), " rows");
    }
  }
  for (int64_t c = 0; c < n; ++c) {
    const Tensor& y = values[c];
    const int64_t rows = chunks[mine.begin + c].size();
    STRATA_CHECK(y.dim() >= 1 && y.size(0) == rows, "DataParallel: the module returned ", y.describe(),
                 " for a chunk of ", rows, " rows (DataParallel needs one output row per input row)");
    outputs.push_back(y);
  }
  std::vector<Tensor> detached;
  for (const Tensor& y : outputs) detached.push_back(y.detach());
  autograd::NoGradGuard no_grad;
  return detached.size() == 1 ? detached[0].contiguous() : cat(detached, 0);
}

Tensor DataParallel::gather(const Tensor& local) { return comm_.allgatherv(local); }

}  // namespace strata::dist
