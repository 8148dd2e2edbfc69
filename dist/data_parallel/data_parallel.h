#pragma once
/// @file
/// strata::dist::DataParallel: data-parallel training of any nn::Module over a Communicator, with
/// gradients bitwise equal at any rank count for the same global batch (Note [Data-parallel
/// chunks] in dist/data_parallel/data_parallel.cpp). A step reads as PyTorch's DDP step:
///
///     DataParallel ddp(model);                      // every rank, same model
///     auto [begin, end] = ddp.local_rows(B);        // this rank's rows of the global batch
///     Tensor out = ddp(x.narrow(0, begin, end - begin));   // the *global* batch's output
///     Tensor loss = cross_entropy(out, y);          // y: the global batch's targets (or ddp.gather)
///     loss.backward();                              // reduces the gradients into model's .grad
///     opt.step();
///
/// forward() splits the global batch into fixed chunks, runs this rank's chunks one by one (each
/// on its own fresh leaves aliasing the parameters, so each chunk's parameter gradients stay
/// apart), and returns every rank's output rows gathered in batch order; backward sends each chunk
/// its rows of the output gradient, and as soon as every local chunk produced the gradients of a
/// bucket, the bucket's per-chunk gradients are summed by the communicator's deterministic
/// allreduce over the global chunk list, overlapping the rest of the backward. When the last
/// bucket is reduced, each parameter's `.grad` gets the sum (accumulated, as backward does).

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "dist/communicator.h"
#include "models/module.h"

namespace strata::dist {

struct DataParallelOptions {
  /// The number of chunks C the global batch splits into, whatever the rank count (a batch of
  /// fewer than C rows splits into one chunk per row). At least the rank count.
  int64_t chunks = 8;
  /// Parameter bytes per gradient bucket: buckets take parameters in reverse registration order
  /// (the order backward produces them) until this many bytes; a larger parameter is a bucket alone.
  int64_t bucket_bytes = int64_t{1} << 20;
  /// When not empty: the number of parameters in each bucket, bucket 0 first, taking parameters in
  /// the same reverse registration order; overrides bucket_bytes (e.g. one layer per bucket). Every
  /// entry at least 1, summing to the number of parameters that require grad.
  std::vector<int64_t> bucket_sizes = {};
  /// Copy rank 0's parameters and buffers to every rank at construction (PyTorch's DDP does), so
  /// ranks that initialized differently start from one model.
  bool broadcast_state = true;
  /// Whether backward waits for the last bucket's reduction and writes every `.grad` before it
  /// returns (PyTorch's DDP does). false: backward only launches the reductions, and the caller
  /// calls wait_gradients() before using the gradients (the optimizer step), so that work placed
  /// between the two (e.g. DistributedDLRM's sparse update) overlaps the last buckets.
  bool wait_in_backward = true;
};

/// Rows [begin, end) of a batch.
struct RowRange {
  int64_t begin = 0;
  int64_t end = 0;
  int64_t size() const { return end - begin; }
  bool operator==(const RowRange&) const = default;
};

/// The fixed split of a batch of `batch` rows into min(`chunks`, `batch`) contiguous chunks, the
/// first ones one row larger. Throws strata::Error for batch < 1 or chunks < 1.
std::vector<RowRange> split_rows(int64_t batch, int64_t chunks);

class DataParallel {
 public:
  /// Wraps `module` (not null; every rank passes the same architecture). Collective: checks that
  /// every rank's parameters have the same count, shapes and dtypes (naming the first parameter
  /// and rank that differ) and, with options.broadcast_state, copies rank 0's parameters and
  /// buffers to every rank. Throws strata::Error for chunks < comm.size() or bucket_bytes < 1.
  explicit DataParallel(std::shared_ptr<nn::Module> module, Communicator& comm = Communicator::world(),
                        DataParallelOptions options = {});
  ~DataParallel();
  DataParallel(const DataParallel&) = delete;
  DataParallel& operator=(const DataParallel&) = delete;

  nn::Module& module() const { return *module_; }
  const std::shared_ptr<nn::Module>& module_ptr() const { return module_; }
  Communicator& communicator() const { return comm_; }
  const DataParallelOptions& options() const { return options_; }

  /// The rows of a global batch of `global_batch` rows this rank passes to forward(): those of
  /// its chunks (chunks go to ranks contiguously, the first ranks taking one more). Throws
  /// strata::Error when global_batch is smaller than the rank count.
  RowRange local_rows(int64_t global_batch) const;
  /// The chunks this rank runs for a global batch of `global_batch` rows (indices into split_rows).
  RowRange local_chunks(int64_t global_batch) const;
  /// Every rank's local_rows at once: size() + 1 boundaries, rank r's rows being [b[r], b[r + 1])
  /// (for a caller that splits other per-sample work the same way, as DistributedDLRM its
  /// embeddings). Throws as local_rows.
  std::vector<int64_t> row_boundaries(int64_t global_batch) const;

  /// Collective. Runs the module on this rank's chunks of the global batch (`local_input`: the
  /// rows local_rows(B) of it, B being the sum over ranks) and returns the output rows of the
  /// whole global batch, rank 0's first. With grad mode on, backward from anything computed
  /// from the result reduces the parameters' gradients (Note [Data-parallel chunks]). Throws
  /// strata::Error (on every rank, naming the rank) when a rank's row count is not its share of
  /// B, when B is smaller than the rank count, or when the module's output has not one row per
  /// input row; and when the previous forward's gradients were never reduced (its backward was
  /// not run, or left a parameter without a gradient).
  Tensor forward(const Tensor& local_input);
  Tensor operator()(const Tensor& local_input) { return forward(local_input); }
  /// forward() for a caller that already agreed the global batch `global_batch` with every rank
  /// (DistributedDLRM exchanges it with its own checks): no collective runs before the chunks, so a
  /// non-blocking collective started before overlaps them (the worker runs collectives in call
  /// order, and forward()'s row exchange would wait behind it). Checks this rank's input only
  /// (defined, its share of the batch) and throws on this rank alone; a rank whose rows disagree
  /// with the others' then fails the output gather instead (Note [Communicator faults]).
  Tensor forward_agreed(const Tensor& local_input, int64_t global_batch);

  /// One stage of a staged forward: a chunk's values in, the chunk's next values out (the last
  /// stage's: one output row per chunk row). Runs with the chunk's parameter leaves swapped in.
  using Stage = std::function<Tensor(const Tensor&)>;
  /// forward_agreed() with the module's forward given as `stages` (their composition must be the
  /// module's forward): stage s runs for every local chunk, in chunk order, before stage s + 1
  /// (Note [Staged chunks]). Each chunk's values are bitwise forward_agreed()'s; backward then runs
  /// the last stage of every chunk before the stage before it, so a bucket holding one stage's
  /// parameters is reduced while the earlier stages' backward runs. Throws as forward_agreed, and
  /// when `stages` is empty or a stage returns an undefined tensor.
  Tensor forward_staged(const Tensor& local_input, int64_t global_batch, const std::vector<Stage>& stages);

  /// Collective: every rank's `local` rows (e.g. its targets) concatenated in rank order.
  Tensor gather(const Tensor& local);

  /// The gradient buckets: positions among the module's parameters that require grad (in
  /// parameters() order), bucket 0 first (the first reduced).
  const std::vector<std::vector<int64_t>>& buckets() const { return buckets_; }
  /// Buckets reduced by the last backward so far (all of them once it finished).
  int64_t buckets_reduced() const;
  /// With options().wait_in_backward false: waits for the reductions the last backward launched and
  /// accumulates each parameter's sum into its `.grad` (a no-op when that was done, or when the
  /// last forward ran without grad mode). Throws strata::Error naming a parameter when the last
  /// backward did not produce every gradient.
  void wait_gradients();
  /// Drops the last forward's step before its backward ran, for a caller that abandons a training
  /// step (DistributedDLRM's --check-finite stopping at the output): nothing is reduced and the
  /// next forward starts clean. Local. Throws strata::Error once backward launched a reduction
  /// (the other ranks take part in it: wait_gradients() instead).
  void discard_step();

  struct Step;  // one forward's chunks, leaves and pending reductions (data_parallel.cpp)

 private:
  struct ParamSlot;
  class LeafSwap;
  std::shared_ptr<Step> new_step(int64_t local_chunks) const;
  std::vector<Tensor> chunk_leaves(int64_t chunk) const;
  void collect_parameters();
  void check_parameters_agree();
  void broadcast_state();
  void make_buckets();
  [[noreturn]] void check_previous_step(Step& step) const;
  std::vector<int64_t> exchange_rows(int64_t local);
  void check_local_input(const Tensor& local_input, int64_t global_batch);
  Tensor run_step(const Tensor& local_input, int64_t batch, const std::vector<Stage>& stages);
  Tensor run_chunks(const Tensor& local_input, const std::vector<RowRange>& chunks, RowRange mine, int64_t begin,
                    const std::vector<Stage>& stages, std::vector<Tensor>& outputs);

  std::shared_ptr<nn::Module> module_;
  Communicator& comm_;
  DataParallelOptions options_;
  std::vector<Tensor> params_;  // every parameter of module(), in order
  std::vector<std::string> param_names_;
  std::vector<int64_t> reduced_;  // indices into params_ of those that require grad
  std::vector<ParamSlot> slots_;  // every (module, name) that holds a parameter
  std::vector<std::vector<int64_t>> buckets_;
  std::shared_ptr<Step> step_;  // the last forward with grad mode on
};

}  // namespace strata::dist
