#include "dist/communicator.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <numeric>
#include <optional>
#include <sstream>

#include "core/config.h"
#include "core/factories.h"
#include "core/pin_set.h"
#include "dist/detail/transport.h"

namespace strata::dist {

namespace detail {

struct WorkState {
  Communicator* comm = nullptr;
  Op op = Op::allreduce;
  std::mutex mutex;
  std::condition_variable cv;
  bool done = false;
  Tensor result;
  // The collective's error message. Each waiter throws its own strata::Error from it: one
  // exception object rethrown on several threads would be shared (and freed by whichever thread
  // drops the last reference) across threads.
  std::optional<std::string> error;
};

}  // namespace detail

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// Note [Collective headers]
// -------------------------
// Every collective first exchanges a small header (kHeaderFixed + 2N int64 per rank, to every
// other rank) before any payload: the collective and its sequence number, whether the rank's input
// passed its local checks, the dtype, the shape, the number of contributions and up to two per-rank
// count vectors (alltoallv: rows sent to and expected from each rank; reduce_scatter: the row
// split). Every rank then runs the same checks on the same headers, so a mismatch (a different
// collective, dtype or row shape, an alltoallv pair whose counts disagree, a bad input on one rank)
// raises the same strata::Error on every rank, naming the ranks, instead of a hang or a silent
// misread; and receivers learn the sizes they need. The cost is one small all-to-all per call.
constexpr int kMaxDims = 8;
enum HeaderField : int {
  kOp = 0,
  kSeq,
  kStatus,
  kDType,
  kRows,
  kContribs,
  kHasRecv,
  kNDim,
  kDims,
  kHeaderFixed = kDims + kMaxDims
};

// Why a rank's own input failed its local checks; 0 is fine.
enum Status : int64_t { kOk = 0, kUndefined, kBadDType, kBadCounts, kBadShape };

const char* status_text(int64_t status) {
  switch (status) {
    case kUndefined: return "an undefined tensor";
    case kBadDType: return "an unsupported dtype";
    case kBadCounts: return "bad row counts";
    case kBadShape: return "a bad shape";
    default: return "bad input";
  }
}

// A rank's local verdict on its input: the status for the header and, when bad, the full message.
struct Local {
  int64_t status = kOk;
  std::string message;
  void fail(int64_t s, const std::string& m) {
    if (status != kOk) return;
    status = s;
    message = m;
  }
};

template <typename... Args>
std::string cat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}

std::string prefix(Op op, int64_t seq) { return cat("dist::", op_name(op), " #", seq, ": "); }

std::string dims_text(const int64_t* h, int from) {
  std::ostringstream os;
  os << "[";
  for (int d = from; d < h[kNDim]; ++d) os << (d > from ? ", " : "") << h[kDims + d];
  return os.str() + "]";
}

// The checks every collective makes of a tensor input on its own rank.
void check_tensor(Local& local, Op op, int64_t seq, const Tensor& t, bool rows) {
  if (!t.defined()) return local.fail(kUndefined, prefix(op, seq) + "the input tensor is undefined");
  if (!detail::reducible(t.dtype())) {
    return local.fail(kBadDType,
                      cat(prefix(op, seq), "input dtype ", t.dtype(), " is not supported (f32, f64 or i64)"));
  }
  if (rows && t.dim() == 0) {
    return local.fail(kBadShape, prefix(op, seq) + "the input is 0-dim; collectives move rows (dim 0)");
  }
  if (t.dim() > kMaxDims) {
    return local.fail(kBadShape, cat(prefix(op, seq), "the input has ", t.dim(), " dims (at most ", kMaxDims, ")"));
  }
}

void check_counts(Local& local, Op op, int64_t seq, const char* name, const std::vector<int64_t>& counts, int size,
                  int64_t rows) {
  if (static_cast<int>(counts.size()) != size) {
    return local.fail(kBadCounts, cat(prefix(op, seq), name, " has ", counts.size(), " entries for ", size, " ranks"));
  }
  for (std::size_t r = 0; r < counts.size(); ++r) {
    if (counts[r] < 0)
      return local.fail(kBadCounts, cat(prefix(op, seq), name, "[", r, "] = ", counts[r], " is negative"));
  }
  const int64_t sum = std::accumulate(counts.begin(), counts.end(), int64_t{0});
  if (rows >= 0 && sum != rows) {
    local.fail(kBadCounts, cat(prefix(op, seq), name, " sums to ", sum, " rows but the input has ", rows));
  }
}

std::vector<int64_t> prefix_sums(const std::vector<int64_t>& counts) {
  std::vector<int64_t> out(counts.size() + 1, 0);
  for (std::size_t i = 0; i < counts.size(); ++i) out[i + 1] = out[i] + counts[i];
  return out;
}

// Bytes of chunk j of a flat buffer split at `begin` (N + 1 element offsets).
std::size_t chunk_bytes(const std::vector<int64_t>& begin, int j, std::size_t isz) {
  return static_cast<std::size_t>(begin[static_cast<std::size_t>(j) + 1] - begin[static_cast<std::size_t>(j)]) * isz;
}

std::vector<int64_t> split_evenly(int64_t total, int parts) {
  std::vector<int64_t> out(static_cast<std::size_t>(parts), total / parts);
  for (int64_t r = 0; r < total % parts; ++r) out[static_cast<std::size_t>(r)] += 1;
  return out;
}

// All ranks' headers, rank r's at all[r * width].
struct Headers {
  int size = 1;
  int width = kHeaderFixed;
  std::vector<int64_t> all;
  const int64_t* of(int r) const { return all.data() + static_cast<std::ptrdiff_t>(r) * width; }
  const int64_t* counts_a(int r) const { return of(r) + kHeaderFixed; }
  const int64_t* counts_b(int r) const { return of(r) + kHeaderFixed + size; }
};

// This rank's header for `t` (may be undefined or bad: then only op, seq and status matter).
std::vector<int64_t> make_header(int size, Op op, int64_t seq, const Local& local, const Tensor& t) {
  std::vector<int64_t> h(static_cast<std::size_t>(kHeaderFixed + 2 * size), 0);
  h[kOp] = static_cast<int64_t>(op);
  h[kSeq] = seq;
  h[kStatus] = local.status;
  h[kNDim] = -1;
  if (local.status != kOk || !t.defined()) return h;
  h[kDType] = static_cast<int64_t>(t.dtype());
  h[kRows] = t.dim() > 0 ? t.size(0) : t.numel();
  h[kNDim] = t.dim();
  for (int64_t d = 0; d < t.dim(); ++d) h[kDims + d] = t.size(d);
  return h;
}

void fill_counts(std::vector<int64_t>& h, int size, const std::vector<int64_t>& a, const std::vector<int64_t>* b) {
  for (int r = 0; r < size && r < static_cast<int>(a.size()); ++r) h[kHeaderFixed + r] = a[static_cast<std::size_t>(r)];
  if (b == nullptr) return;
  h[kHasRecv] = 1;
  for (int r = 0; r < size && r < static_cast<int>(b->size()); ++r) {
    h[kHeaderFixed + size + r] = (*b)[static_cast<std::size_t>(r)];
  }
}

// The checks of Note [Collective headers] common to every collective: same call, inputs fine.
void check_calls(const Headers& hs, Op op, int64_t seq, int rank, const Local& local) {
  for (int r = 1; r < hs.size; ++r) {
    const int64_t* h = hs.of(r);
    STRATA_CHECK(h[kOp] == hs.of(0)[kOp] && h[kSeq] == hs.of(0)[kSeq], prefix(op, seq), "rank 0 called ",
                 op_name(static_cast<Op>(hs.of(0)[kOp])), " (collective #", hs.of(0)[kSeq], ") but rank ", r,
                 " called ", op_name(static_cast<Op>(h[kOp])), " (collective #", h[kSeq],
                 "); every rank must issue the same collectives in the same order");
  }
  for (int r = 0; r < hs.size; ++r) {
    const int64_t status = hs.of(r)[kStatus];
    if (status == kOk) continue;
    if (r == rank) throw Error(local.message);
    throw Error(cat(prefix(op, seq), "rank ", r, " passed ", status_text(status), " (its own error says which)"));
  }
}

// Same dtype on every rank that has an input, and the same shape from dim `from` on.
void check_like(const Headers& hs, Op op, int64_t seq, int from) {
  int first = -1;
  for (int r = 0; r < hs.size; ++r) {
    const int64_t* h = hs.of(r);
    if (h[kNDim] < 0) continue;
    if (first < 0) {
      first = r;
      continue;
    }
    const int64_t* f = hs.of(first);
    STRATA_CHECK(h[kDType] == f[kDType], prefix(op, seq), "rank ", first, " passes ", static_cast<DType>(f[kDType]),
                 " but rank ", r, " passes ", static_cast<DType>(h[kDType]));
    bool same = h[kNDim] == f[kNDim];
    for (int d = from; same && d < h[kNDim]; ++d) same = h[kDims + d] == f[kDims + d];
    STRATA_CHECK(same, prefix(op, seq), "rank ", first, "'s input has ", from == 0 ? "shape " : "rows of shape ",
                 dims_text(f, from), " but rank ", r, "'s ", dims_text(h, from));
  }
}

// Every rank's header, checked by Note [Collective headers]'s common checks: the same call, every
// input fine, the same dtype and the same shape from dim `from` on.
Headers agree(std::vector<int64_t> all, int size, int rank, Op op, int64_t seq, const Local& local, int from) {
  Headers hs{size, kHeaderFixed + 2 * size, std::move(all)};
  check_calls(hs, op, seq, rank, local);
  check_like(hs, op, seq, from);
  return hs;
}

// alltoallv: what rank i sends to rank j must be what rank j expects from rank i.
void check_pairs(const Headers& hs, int64_t seq) {
  for (int i = 0; i < hs.size; ++i) {
    for (int j = 0; j < hs.size; ++j) {
      if (hs.of(j)[kHasRecv] == 0) continue;
      const int64_t sent = hs.counts_a(i)[j];
      const int64_t expected = hs.counts_b(j)[i];
      STRATA_CHECK(sent == expected, prefix(Op::alltoallv, seq), "rank ", i, " sends ", sent, " rows to rank ", j,
                   " but rank ", j, " expects ", expected, " rows from rank ", i,
                   " (send_rows and recv_rows disagree)");
    }
  }
}

// Output shape: `rows` rows shaped like the header's trailing dims (or its whole shape).
Dims shape_from(const int64_t* h, int64_t rows) {
  Dims out;
  out.push_back(rows);
  for (int d = 1; d < h[kNDim]; ++d) out.push_back(h[kDims + d]);
  return out;
}

double timeout_from_env(double fallback) { return environment::dist_timeout_seconds().value_or(fallback); }

}  // namespace

std::string_view op_name(Op op) {
  switch (op) {
    case Op::alltoallv: return "alltoallv";
    case Op::allgatherv: return "allgatherv";
    case Op::reduce_scatter: return "reduce_scatter";
    case Op::allreduce: return "allreduce";
  }
  return "unknown collective";
}

OpStats CommStats::total() const {
  OpStats t;
  for (const OpStats& s : ops) {
    t.calls += s.calls;
    t.bytes_sent += s.bytes_sent;
    t.bytes_received += s.bytes_received;
    t.header_bytes_sent += s.header_bytes_sent;
    t.busy_seconds += s.busy_seconds;
    t.wait_seconds += s.wait_seconds;
  }
  return t;
}

// ---- Work -----------------------------------------------------------------------------------------

bool Work::ready() const {
  STRATA_CHECK(state_ != nullptr, "dist::Work::ready: the handle is empty (default-constructed)");
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->done;
}

Tensor Work::wait() const {
  STRATA_CHECK(state_ != nullptr, "dist::Work::wait: the handle is empty (default-constructed)");
  const auto start = Clock::now();
  Tensor result;
  std::optional<std::string> error;
  {
    std::unique_lock<std::mutex> lock(state_->mutex);
    state_->cv.wait(lock, [&] { return state_->done; });
    result = state_->result;
    error = state_->error;
  }
  state_->comm->add_wait(state_->op, seconds_since(start));
  if (error) throw Error(*error);
  return result;
}

// ---- Communicator: life cycle and the worker --------------------------------------------------------

Communicator& Communicator::world(const Options& options) {
  static Communicator instance(options);
  return instance;
}

bool Communicator::built_with_mpi() {
#ifdef STRATA_HAVE_MPI
  return true;
#else
  return false;
#endif
}

Communicator::Communicator(const Options& options) : timeout_seconds_(timeout_from_env(options.timeout_seconds)) {
  transport_ = detail::make_transport(timeout_seconds_);
  rank_ = transport_->rank();
  size_ = transport_->size();
  implementation_ = transport_->implementation();
  detail::check_launcher_environment(rank_, size_, implementation_);
  worker_ = std::thread([this] { worker_loop(); });
}

Communicator::~Communicator() {
  {
    std::lock_guard<std::mutex> lock(queue_mutex_);
    stopping_ = true;
  }
  queue_cv_.notify_all();
  if (worker_.joinable()) worker_.join();
  transport_.reset();
}

void Communicator::worker_loop() {
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock<std::mutex> lock(queue_mutex_);
      queue_cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    task();
  }
}

Work Communicator::submit(Op op, std::function<Tensor(int64_t seq)> run) {
  auto state = std::make_shared<detail::WorkState>();
  state->comm = this;
  state->op = op;
  {
    std::lock_guard<std::mutex> lock(queue_mutex_);
    const int64_t seq = next_seq_++;
    queue_.push_back([this, state, seq, op, run = std::move(run)] {
      const auto start = Clock::now();
      Tensor result;
      std::optional<std::string> error;
      try {
        result = run(seq);
      } catch (const std::exception& e) {
        error = e.what();
      } catch (...) {
        error = prefix(op, seq) + "failed with an exception that is not a std::exception";
      }
      {
        std::lock_guard<std::mutex> stats_lock(stats_mutex_);
        OpStats& s = stats_.ops[static_cast<std::size_t>(op)];
        s.calls += 1;
        s.busy_seconds += seconds_since(start);
      }
      {
        std::lock_guard<std::mutex> work_lock(state->mutex);
        state->result = std::move(result);
        state->error = std::move(error);
        state->done = true;
      }
      state->cv.notify_all();
    });
  }
  queue_cv_.notify_one();
  return Work(state);
}

void Communicator::add_wait(Op op, double seconds) {
  std::lock_guard<std::mutex> lock(stats_mutex_);
  stats_.ops[static_cast<std::size_t>(op)].wait_seconds += seconds;
}

CommStats Communicator::stats() const {
  std::lock_guard<std::mutex> lock(stats_mutex_);
  return stats_;
}

void Communicator::reset_stats() {
  std::lock_guard<std::mutex> lock(stats_mutex_);
  stats_ = CommStats{};
}

// ---- public calls ------------------------------------------------------------------------------------

namespace {
Tensor dense(const Tensor& t) { return t.defined() ? t.contiguous() : t; }
}  // namespace

Work Communicator::ialltoallv(const Tensor& input, const std::vector<int64_t>& send_rows,
                              const std::vector<int64_t>& recv_rows) {
  return submit(Op::alltoallv, [this, in = dense(input), send_rows, recv_rows](int64_t seq) {
    return run_alltoallv(seq, in, send_rows, &recv_rows);
  });
}
Work Communicator::ialltoallv(const Tensor& input, const std::vector<int64_t>& send_rows) {
  return submit(Op::alltoallv, [this, in = dense(input), send_rows](int64_t seq) {
    return run_alltoallv(seq, in, send_rows, nullptr);
  });
}
Work Communicator::iallgatherv(const Tensor& input) {
  return submit(Op::allgatherv, [this, in = dense(input)](int64_t seq) { return run_allgatherv(seq, in); });
}
Work Communicator::ireduce_scatter(const Tensor& input, const std::vector<int64_t>& rows_per_rank) {
  return submit(Op::reduce_scatter, [this, in = dense(input), rows_per_rank](int64_t seq) {
    return run_reduce_scatter(seq, in, rows_per_rank);
  });
}
Work Communicator::iallreduce(const Tensor& input, ReduceMode mode) {
  if (mode == ReduceMode::fast) {
    return submit(Op::allreduce, [this, in = dense(input)](int64_t seq) { return run_allreduce_fast(seq, in); });
  }
  return iallreduce(std::vector<Tensor>{input});
}
Work Communicator::iallreduce(const std::vector<Tensor>& contributions) {
  std::vector<Tensor> in;
  for (const Tensor& t : contributions) in.push_back(dense(t));
  return submit(Op::allreduce,
                [this, in = std::move(in)](int64_t seq) { return run_allreduce(seq, Op::allreduce, in); });
}

Tensor Communicator::alltoallv(const Tensor& input, const std::vector<int64_t>& send_rows,
                               const std::vector<int64_t>& recv_rows) {
  return ialltoallv(input, send_rows, recv_rows).wait();
}
Tensor Communicator::alltoallv(const Tensor& input, const std::vector<int64_t>& send_rows) {
  return ialltoallv(input, send_rows).wait();
}
Tensor Communicator::allgatherv(const Tensor& input) { return iallgatherv(input).wait(); }
Tensor Communicator::reduce_scatter(const Tensor& input, const std::vector<int64_t>& rows_per_rank) {
  return ireduce_scatter(input, rows_per_rank).wait();
}
Tensor Communicator::allreduce(const Tensor& input, ReduceMode mode) { return iallreduce(input, mode).wait(); }
Tensor Communicator::allreduce(const std::vector<Tensor>& contributions) { return iallreduce(contributions).wait(); }

}  // namespace strata::dist

// ---- phases shared by the collectives ----------------------------------------------------------------

namespace strata::dist {

// Sends `mine` to every other rank and returns every rank's header (Note [Collective headers]).
std::vector<int64_t> Communicator::exchange_headers(Op op, int64_t seq, std::vector<int64_t> mine) {
  const std::size_t width = mine.size();
  std::vector<int64_t> all(width * static_cast<std::size_t>(size_));
  std::copy(mine.begin(), mine.end(), all.begin() + static_cast<std::ptrdiff_t>(width) * rank_);
  std::vector<detail::Message> sends, recvs;
  const std::size_t bytes = width * sizeof(int64_t);
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    sends.push_back({r, mine.data(), bytes});
    recvs.push_back({r, all.data() + width * static_cast<std::size_t>(r), bytes});
  }
  transport_->exchange(sends, recvs, {op_name(op).data(), seq, "header"});
  std::lock_guard<std::mutex> lock(stats_mutex_);
  stats_.ops[static_cast<std::size_t>(op)].header_bytes_sent += static_cast<int64_t>(bytes * sends.size());
  return all;
}

// Moves payload messages and counts their bytes (zero-byte messages are dropped on both sides).
void Communicator::move(Op op, int64_t seq, const char* phase, const std::vector<detail::Message>& sends,
                        const std::vector<detail::Message>& recvs) {
  std::vector<detail::Message> s, r;
  int64_t sent = 0, received = 0;
  for (const auto& m : sends) {
    if (m.bytes > 0) s.push_back(m), sent += static_cast<int64_t>(m.bytes);
  }
  for (const auto& m : recvs) {
    if (m.bytes > 0) r.push_back(m), received += static_cast<int64_t>(m.bytes);
  }
  transport_->exchange(s, r, {op_name(op).data(), seq, phase});
  std::lock_guard<std::mutex> lock(stats_mutex_);
  OpStats& st = stats_.ops[static_cast<std::size_t>(op)];
  st.bytes_sent += sent;
  st.bytes_received += received;
}

// The reduce-scatter of Note [Deterministic reduction order]: `counts[r]` contributions on rank r;
// rank j owns elements [chunk_begin[j], chunk_begin[j + 1]). Writes this rank's chunk of the tree
// sum to `out`.
void Communicator::reduce_chunks(Op op, int64_t seq, const std::vector<Tensor>& contributions,
                                 const std::vector<int64_t>& counts, const std::vector<int64_t>& chunk_begin,
                                 DType dtype, void* out) {
  const std::vector<int64_t> first = prefix_sums(counts);
  const int64_t total = first.back();
  const std::size_t isz = itemsize(dtype);
  const int64_t numel = chunk_begin.back();
  // 1. This rank's maximal subtrees, added up locally over all elements (leaves used in place).
  auto leaf = [&](TreeNode n) -> const void* {
    return n.hi - n.lo == 1 ? contributions[static_cast<std::size_t>(n.lo - first[rank_])].data_ptr() : nullptr;
  };
  std::map<std::pair<int64_t, int64_t>, const char*> known;  // node -> its values for this rank's chunk
  std::vector<std::unique_ptr<char[]>> storage;              // uninitialized: every byte is written before it is read
  std::vector<detail::Message> sends, recvs;
  for (TreeNode node : tree_cover(total, first[rank_], first[rank_ + 1])) {
    const char* values = static_cast<const char*>(leaf(node));
    if (values == nullptr) {
      storage.emplace_back(new char[static_cast<std::size_t>(numel) * isz]);
      detail::tree_eval(node, leaf, dtype, numel, storage.back().get());
      values = storage.back().get();
    }
    for (int j = 0; j < size_; ++j) {
      const char* chunk = values + chunk_begin[j] * isz;
      if (j == rank_)
        known[{node.lo, node.hi}] = chunk;
      else
        sends.push_back({j, const_cast<char*>(chunk), chunk_bytes(chunk_begin, j, isz)});
    }
  }
  // 2. The other ranks' subtrees, for this rank's chunk only.
  const int64_t mine = chunk_begin[rank_ + 1] - chunk_begin[rank_];
  for (int i = 0; i < size_; ++i) {
    if (i == rank_) continue;
    for (TreeNode node : tree_cover(total, first[i], first[i + 1])) {
      storage.emplace_back(new char[static_cast<std::size_t>(mine) * isz]);
      known[{node.lo, node.hi}] = storage.back().get();
      recvs.push_back({i, storage.back().get(), static_cast<std::size_t>(mine) * isz});
    }
  }
  move(op, seq, "reduce-scatter", sends, recvs);
  // 3. The rest of the tree, for this rank's chunk.
  detail::tree_eval(
      {0, total},
      [&](TreeNode n) -> const void* {
        auto it = known.find({n.lo, n.hi});
        return it == known.end() ? nullptr : it->second;
      },
      dtype, mine, out);
}

// Every rank's chunk of a flat tensor, concatenated: the allgather phase of allreduce.
Tensor Communicator::gather_chunks(Op op, int64_t seq, Tensor chunks, const std::vector<int64_t>& chunk_begin) {
  const std::size_t isz = chunks.itemsize();
  auto* base = static_cast<char*>(chunks.data_ptr());
  std::vector<detail::Message> sends, recvs;
  char* mine = base + chunk_begin[rank_] * isz;
  const std::size_t my_bytes = chunk_bytes(chunk_begin, rank_, isz);
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    sends.push_back({r, mine, my_bytes});
    recvs.push_back({r, base + chunk_begin[r] * isz, chunk_bytes(chunk_begin, r, isz)});
  }
  move(op, seq, "allgather", sends, recvs);
  return chunks;
}

// ---- the collectives ---------------------------------------------------------------------------------

namespace {
// Pins the collective's operands for its whole duration (Note [Pinning kernel operands]): the rows
// are read and written through data_ptr() while messages are in flight. Outputs are allocated
// before, so that one PinSet covers all.
void pin_operands(PinSet& pins, const std::vector<Tensor>& reads, const Tensor& written) {
  for (const Tensor& t : reads) {
    if (t.nbytes() > 0) pins.add(t, AccessMode::Read);
  }
  if (written.nbytes() > 0) pins.add(written, AccessMode::Write);
  pins.acquire();
}

// Elements per row of a tensor with dims (0 for no rows).
int64_t row_elems(const Tensor& t) { return t.dim() > 0 && t.size(0) > 0 ? t.numel() / t.size(0) : 0; }
// Bytes per row of the input a header describes.
std::size_t row_bytes_of(const int64_t* h) {
  int64_t n = 1;
  for (int d = 1; d < h[kNDim]; ++d) n *= h[kDims + d];
  return static_cast<std::size_t>(n) * itemsize(static_cast<DType>(h[kDType]));
}
}  // namespace

Tensor Communicator::run_alltoallv(int64_t seq, const Tensor& input, const std::vector<int64_t>& send_rows,
                                   const std::vector<int64_t>* recv_rows) {
  Local local;
  check_tensor(local, Op::alltoallv, seq, input, /*rows=*/true);
  if (local.status == kOk) check_counts(local, Op::alltoallv, seq, "send_rows", send_rows, size_, input.size(0));
  if (local.status == kOk && recv_rows != nullptr) {
    check_counts(local, Op::alltoallv, seq, "recv_rows", *recv_rows, size_, /*rows=*/-1);
  }
  std::vector<int64_t> header = make_header(size_, Op::alltoallv, seq, local, input);
  fill_counts(header, size_, send_rows, recv_rows);
  const Headers hs =
      agree(exchange_headers(Op::alltoallv, seq, std::move(header)), size_, rank_, Op::alltoallv, seq, local, 1);
  check_pairs(hs, seq);
  // Payload: rows_from[i] rows from rank i, in rank order.
  std::vector<int64_t> rows_from(static_cast<std::size_t>(size_));
  for (int i = 0; i < size_; ++i) rows_from[static_cast<std::size_t>(i)] = hs.counts_a(i)[rank_];
  const std::vector<int64_t> in_at = prefix_sums(send_rows), out_at = prefix_sums(rows_from);
  Tensor out = empty(shape_from(hs.of(rank_), out_at.back()), {input.dtype()});
  PinSet pins;
  pin_operands(pins, {input}, out);
  const std::size_t rb = row_bytes_of(hs.of(rank_));
  auto* src = static_cast<char*>(input.data_ptr());
  auto* dst = static_cast<char*>(out.data_ptr());
  std::vector<detail::Message> sends, recvs;
  for (int j = 0; j < size_; ++j) {
    const std::size_t in_bytes = static_cast<std::size_t>(send_rows[static_cast<std::size_t>(j)]) * rb;
    if (j == rank_) {
      if (in_bytes > 0) std::memcpy(dst + out_at[j] * rb, src + in_at[j] * rb, in_bytes);
      continue;
    }
    sends.push_back({j, src + in_at[j] * rb, in_bytes});
    recvs.push_back({j, dst + out_at[j] * rb, static_cast<std::size_t>(rows_from[static_cast<std::size_t>(j)]) * rb});
  }
  move(Op::alltoallv, seq, "rows", sends, recvs);
  return out;
}

Tensor Communicator::run_allgatherv(int64_t seq, const Tensor& input) {
  Local local;
  check_tensor(local, Op::allgatherv, seq, input, /*rows=*/true);
  std::vector<int64_t> header = make_header(size_, Op::allgatherv, seq, local, input);
  const Headers hs =
      agree(exchange_headers(Op::allgatherv, seq, std::move(header)), size_, rank_, Op::allgatherv, seq, local, 1);
  std::vector<int64_t> rows(static_cast<std::size_t>(size_));
  for (int r = 0; r < size_; ++r) rows[static_cast<std::size_t>(r)] = hs.of(r)[kRows];
  const std::vector<int64_t> at = prefix_sums(rows);
  Tensor out = empty(shape_from(hs.of(rank_), at.back()), {input.dtype()});
  PinSet pins;
  pin_operands(pins, {input}, out);
  const std::size_t rb = row_bytes_of(hs.of(rank_));
  auto* dst = static_cast<char*>(out.data_ptr());
  const std::size_t my_bytes = static_cast<std::size_t>(input.size(0)) * rb;
  if (my_bytes > 0) std::memcpy(dst + at[rank_] * rb, input.data_ptr(), my_bytes);
  std::vector<detail::Message> sends, recvs;
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    sends.push_back({r, input.data_ptr(), my_bytes});
    recvs.push_back({r, dst + at[r] * rb, static_cast<std::size_t>(rows[static_cast<std::size_t>(r)]) * rb});
  }
  move(Op::allgatherv, seq, "rows", sends, recvs);
  return out;
}

Tensor Communicator::run_reduce_scatter(int64_t seq, const Tensor& input, const std::vector<int64_t>& rows_per_rank) {
  Local local;
  check_tensor(local, Op::reduce_scatter, seq, input, /*rows=*/true);
  std::vector<int64_t> split = rows_per_rank;
  if (local.status == kOk && split.empty()) split = split_evenly(input.size(0), size_);
  if (local.status == kOk) check_counts(local, Op::reduce_scatter, seq, "rows_per_rank", split, size_, input.size(0));
  std::vector<int64_t> header = make_header(size_, Op::reduce_scatter, seq, local, input);
  fill_counts(header, size_, split, nullptr);
  const Headers hs = agree(exchange_headers(Op::reduce_scatter, seq, std::move(header)), size_, rank_,
                           Op::reduce_scatter, seq, local, 0);
  for (int r = 1; r < size_; ++r) {
    STRATA_CHECK(std::equal(hs.counts_a(r), hs.counts_a(r) + size_, hs.counts_a(0)), prefix(Op::reduce_scatter, seq),
                 "rank 0 and rank ", r, " split the rows differently (rows_per_rank must be the same on every rank)");
  }
  std::vector<int64_t> chunk_begin = prefix_sums(split);
  for (int64_t& b : chunk_begin) b *= row_elems(input);
  Tensor out = empty(shape_from(hs.of(rank_), split[static_cast<std::size_t>(rank_)]), {input.dtype()});
  PinSet pins;
  pin_operands(pins, {input}, out);
  reduce_chunks(Op::reduce_scatter, seq, {input}, std::vector<int64_t>(static_cast<std::size_t>(size_), 1), chunk_begin,
                input.dtype(), out.data_ptr());
  return out;
}

Tensor Communicator::run_allreduce(int64_t seq, Op op, const std::vector<Tensor>& contributions) {
  Local local;
  for (std::size_t i = 0; i < contributions.size() && local.status == kOk; ++i) {
    check_tensor(local, op, seq, contributions[i], /*rows=*/false);
    if (local.status == kOk && (contributions[i].dtype() != contributions[0].dtype() ||
                                contributions[i].sizes() != contributions[0].sizes())) {
      local.fail(kBadShape, cat(prefix(op, seq), "local contribution ", i, " is ", contributions[i].dtype(), " ",
                                contributions[i].sizes(), " but contribution 0 is ", contributions[0].dtype(), " ",
                                contributions[0].sizes()));
    }
  }
  const Tensor like = contributions.empty() ? Tensor() : contributions[0];
  std::vector<int64_t> header = make_header(size_, op, seq, local, like);
  header[kContribs] = static_cast<int64_t>(contributions.size());
  const Headers hs = agree(exchange_headers(op, seq, std::move(header)), size_, rank_, op, seq, local, 0);
  std::vector<int64_t> counts(static_cast<std::size_t>(size_));
  int shaped = -1;
  for (int r = 0; r < size_; ++r) {
    counts[static_cast<std::size_t>(r)] = hs.of(r)[kContribs];
    if (shaped < 0 && counts[static_cast<std::size_t>(r)] > 0) shaped = r;
  }
  STRATA_CHECK(shaped >= 0, prefix(op, seq), "no rank passed a contribution (the job must pass at least one)");
  const int64_t* h = hs.of(shaped);
  Dims shape(h + kDims, h + kDims + h[kNDim]);
  Tensor out = empty(shape, {static_cast<DType>(h[kDType])});
  PinSet pins;
  pin_operands(pins, contributions, out);
  std::vector<int64_t> chunk_begin = prefix_sums(split_evenly(out.numel(), size_));
  auto* mine = static_cast<char*>(out.data_ptr()) + chunk_begin[rank_] * out.itemsize();
  reduce_chunks(op, seq, contributions, counts, chunk_begin, out.dtype(), mine);
  return gather_chunks(op, seq, out, chunk_begin);
}

Tensor Communicator::run_allreduce_fast(int64_t seq, const Tensor& input) {
  Local local;
  check_tensor(local, Op::allreduce, seq, input, /*rows=*/false);
  std::vector<int64_t> header = make_header(size_, Op::allreduce, seq, local, input);
  const Headers hs =
      agree(exchange_headers(Op::allreduce, seq, std::move(header)), size_, rank_, Op::allreduce, seq, local, 0);
  Tensor out = input.clone();
  PinSet pins;
  pin_operands(pins, {}, out);
  // The library's own algorithm: its bytes are not counted (OpStats counts Strata's messages).
  transport_->allreduce_sum_fast(out.data_ptr(), out.numel(), out.dtype(), {"allreduce(fast)", seq, "MPI_Allreduce"});
  return out;
}

}  // namespace strata::dist
