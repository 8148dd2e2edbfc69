#include "embeddings/dist/dlrm_dist_run.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <string_view>

#include "autograd/grad_mode.h"
#include "core/error.h"
#include "core/factories.h"
#include "core/file.h"
#include "core/pin_set.h"
#include "core/text.h"
#include "core/threading.h"
#include "embeddings/dist/dist_checkpoint.h"
#include "embeddings/dist/rank_agreement.h"
#include "embeddings/index_source.h"
#include "memory/tiered_memory.h"

namespace strata::emb {

namespace {

// One flag the distributed run refuses when `given`, with what to do instead.
void refuse_if(bool given, std::string_view flag, std::string_view why) {
  if (given) STRATA_FAIL(flag, ": not supported with --dist-backend yet (", why, ")");
}

}  // namespace

void check_distributed_flags(const DLRMConfig& c, int ranks) {
  refuse_if(c.md_flag, "--md-flag", "DistributedDLRM's tables all have dim --arch-sparse-feature-size");
  refuse_if(c.qr_flag, "--qr-flag", "DistributedDLRM has plain tables only");
  refuse_if(c.weighted_pooling != WeightedPooling::None, "--weighted-pooling", "the sharded bags have no weights");
  refuse_if(c.arch_interaction_itself, "--arch-interaction-itself",
            "DistributedDLRM's dot interaction has no diagonal");
  refuse_if(c.emb_dtype != ElemType::F32, "--emb-dtype", "the sharded tables are f32");
  // Note [Shard storage]: a rank's slow tier is DIR/rank-R/ of --slow-dir; without it shards live in DRAM.
  STRATA_CHECK(c.emb_policy == "auto" || !c.slow_dir.empty(), "--emb-policy ", c.emb_policy,
               ": places the shards in the slow tier, and a distributed run has one only with --slow-dir DIR "
               "(rank R's in DIR/rank-R/); give --slow-dir, or leave --emb-policy auto");
  STRATA_CHECK(c.cache_fraction < 0 || !c.slow_dir.empty(), "--cache-fraction ", c.cache_fraction,
               ": caches the slow tier's rows, and a distributed run has a slow tier only with --slow-dir DIR "
               "(rank R's in DIR/rank-R/); give --slow-dir");
  STRATA_CHECK(c.dist_chunks >= ranks, "--dist-chunks: ", c.dist_chunks, " chunks for ", ranks,
               " ranks; every rank needs a chunk (give at least ", ranks, ")");
  STRATA_CHECK(c.mini_batch_size >= ranks, "--mini-batch-size: ", c.mini_batch_size, " samples for ", ranks,
               " ranks; a batch needs at least one sample per rank");
  STRATA_CHECK(c.test_mini_batch_size <= 0 || c.test_mini_batch_size >= ranks,
               "--test-mini-batch-size: ", c.test_mini_batch_size, " samples for ", ranks,
               " ranks; a batch needs at least one sample per rank");
  // A generator's last batch holds the rest of --data-size (without --num-batches); each batch of a
  // distributed step needs a sample per rank. (The Criteo and click splits are checked per batch.)
  const bool generated = c.data_generation == DataGeneration::Random || c.data_generation == DataGeneration::Zipf;
  for (const int64_t batch :
       {c.mini_batch_size, c.test_mini_batch_size > 0 ? c.test_mini_batch_size : c.mini_batch_size}) {
    const int64_t last = c.data_size % batch;
    STRATA_CHECK(!generated || c.num_batches > 0 || last == 0 || last >= ranks, "--data-size: ", c.data_size,
                 " samples in batches of ", batch, " leave a last batch of ", last, ", fewer than the ", ranks,
                 " ranks (a batch needs at least one sample per rank); change --data-size or give --num-batches");
  }
  if (c.data_generation == DataGeneration::Dataset) {
    std::error_code ec;
    STRATA_CHECK(!c.processed_data_file.empty() && std::filesystem::exists(c.processed_data_file, ec),
                 "--processed-data-file: --dist-backend reads an existing processed file (every rank would "
                 "preprocess at once); preprocess first with one process (strata-dlrm --raw-data-file ... "
                 "--processed-data-file ... --num-batches 1)");
  }
}

DistributedDLRMConfig distributed_model_config(const DLRMConfig& c) {
  return {.bottom_mlp = c.arch_mlp_bot,
          .top_mlp = c.arch_mlp_top,
          .interaction = to_string(c.arch_interaction_op),
          .optimizer = c.optimizer,
          .learning_rate = c.learning_rate,
          .lr_schedule = lr_schedule(c),
          .loss_function = c.loss_function,
          .loss_weights = c.loss_weights,
          .loss_threshold = c.loss_threshold,
          .seed = static_cast<uint64_t>(c.numpy_rand_seed),
          .chunks = c.dist_chunks,
          .check_finite = c.check_finite};
}

ShardPlan plan_dlrm_shards(const DLRMConfig& c, int ranks, int64_t slow_budget_bytes) {
  std::vector<TableSpec> tables;
  const std::vector<int64_t> rows = c.table_rows();
  for (std::size_t k = 0; k < rows.size(); ++k)
    tables.push_back({"emb_l." + std::to_string(k), rows[k], c.arch_sparse_feature_size, 4});
  ShardPlanOptions o{
      .ranks = ranks, .fast_budget_bytes = static_cast<int64_t>(c.fast_budget), .slow_budget_bytes = slow_budget_bytes};
  try {
    return plan_shards(tables, o);
  } catch (const Error& e) {
    STRATA_FAIL("--fast-budget ", format_bytes(static_cast<double>(c.fast_budget)), " per rank (", ranks, " ranks; ",
                slow_budget_bytes > 0
                    ? "slow tier " + format_bytes(static_cast<double>(slow_budget_bytes)) + " per rank"
                    : std::string("no slow tier: --slow-dir gives each rank one"),
                "): ", e.what());
  }
}

std::string rank_slow_dir(const DLRMConfig& c, int rank) {
  if (c.slow_dir.empty()) return "";
  return (std::filesystem::path(c.slow_dir) / ("rank-" + std::to_string(rank))).string();
}

int64_t dist_slow_budget(dist::Communicator& comm, const DLRMConfig& c) {
  if (c.slow_dir.empty()) return 0;
  const auto mine = static_cast<double>(memory::tiered_memory().slow_heap().capacity());
  const Tensor all = comm.allgatherv(full({1}, mine, {DType::i64}));
  PinSet pins;
  pins.add(all, AccessMode::Read).acquire();
  return *std::min_element(all.data<int64_t>(), all.data<int64_t>() + comm.size());
}

ShardPlacementOptions dlrm_shard_placement(const DLRMConfig& c) {
  // Without a slow tier the plan kept each rank's rows within --fast-budget: every shard in DRAM.
  return {.policy = parse_embedding_policy(c.emb_policy),
          .fast_budget = c.slow_dir.empty() ? std::numeric_limits<std::size_t>::max() : c.fast_budget,
          .cache_fraction = c.cache_fraction};
}

ShardStorage dlrm_shard_storage(const DLRMConfig& c) {
  memory::TieredMemory& m = memory::tiered_memory();
  // As TieredDLRM::attach_memory: --slow-tier-model sets the process's model.
  if (c.slow_tier_model.mode != SlowTierModelSpec::Mode::Auto) m.set_slow_tier_model(m.model_for(c.slow_tier_model));
  const TableMemory slow = c.slow_dir.empty() ? TableMemory{} : TableMemory{&m.slow_heap(), &m.throttle()};
  return {{&m.fast_heap(), nullptr}, slow, dlrm_shard_placement(c)};
}

std::string describe_shard_storage(const ShardPlan& plan, const DLRMConfig& c) {
  const ShardPlacementOptions o = dlrm_shard_placement(c);
  std::string out;
  for (int r = 0; r < plan.ranks; ++r) {
    const TablePlacement p = place_rank_shards(plan, r, o);
    int held = 0;
    for (int t = 0; t < static_cast<int>(plan.tables.size()); ++t) held += plan.row_end(r, t) > plan.row_begin(r, t);
    const std::string dir = rank_slow_dir(c, r);
    out += "rank " + std::to_string(r) + " shards: " + std::to_string(held) + " tables, " +
           format_bytes(static_cast<double>(p.table_bytes)) + " of rows, " + p.describe();
    if (p.uses_slow()) out += ": rows in the slow tier " + quote_path(dir);
    out += ", DRAM " + format_bytes(static_cast<double>(p.fast_bytes)) + "\n";
  }
  return out;
}

RankFields canonical_dlrm_args(const std::vector<std::string>& args) {
  std::map<std::string, std::string> last;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    const std::size_t eq = a.rfind("--", 0) == 0 ? a.find('=') : std::string::npos;
    if (eq != std::string::npos)
      last[a.substr(0, eq)] = a.substr(eq + 1);
    else if (dlrm_flag_is_store_true(a))
      last[a] = "true";
    else
      last[a] = i + 1 < args.size() ? args[++i] : "";
  }
  return {last.begin(), last.end()};
}

namespace {

// Size and a hash of the first and last MiB of `path` (Note [Distributed strata-dlrm]).
std::string file_fingerprint(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return "missing";
  const auto size = static_cast<std::size_t>(std::filesystem::file_size(path, ec));
  constexpr std::size_t kSample = std::size_t{1} << 20;
  std::FILE* f = open_file_for_reading(path, "data file");
  std::string sample(std::min(size, kSample), '\0');
  std::size_t got = std::fread(sample.data(), 1, sample.size(), f);
  if (size > kSample) {
    const std::size_t tail = std::min(size - kSample, kSample);
    sample.resize(kSample + tail);
    std::fseek(f, static_cast<long>(size - tail), SEEK_SET);
    got += std::fread(sample.data() + kSample, 1, tail, f);
  }
  std::fclose(f);
  STRATA_CHECK(got == sample.size(), "data file ", quote_path(path), ": could not read its first and last MiB");
  char hash[32];
  std::snprintf(hash, sizeof hash, "%016zx", std::hash<std::string_view>{}(sample));
  return std::to_string(size) + " bytes, hash " + hash;
}

}  // namespace

RankFields dlrm_data_fingerprint(const DLRMConfig& c) {
  RankFields out;
  if (c.data_generation == DataGeneration::Dataset) {
    if (!c.raw_data_file.empty())
      out.emplace_back("--raw-data-file " + c.raw_data_file, file_fingerprint(c.raw_data_file));
    if (!c.processed_data_file.empty())
      out.emplace_back("--processed-data-file " + c.processed_data_file, file_fingerprint(c.processed_data_file));
  }
  if (c.data_generation == DataGeneration::Synthetic)
    for (std::size_t k = 0; k < c.arch_embedding_size.size(); ++k) {
      const std::string path = trace_file_for_table(c.data_trace_file, static_cast<int64_t>(k));
      out.emplace_back("--data-trace-file " + path, file_fingerprint(path));
    }
  std::sort(out.begin(), out.end());
  return out;
}

namespace {

// `fields` as bytes: name, NUL, value, NUL, ...
std::string encode_fields(const RankFields& fields) {
  std::string bytes;
  for (const auto& [name, value] : fields) {
    bytes += name;
    bytes += '\0';
    bytes += value;
    bytes += '\0';
  }
  return bytes;
}

std::map<std::string, std::string> decode_fields(std::string_view bytes) {
  std::vector<std::string> parts(1);
  for (const char c : bytes) {
    if (c == '\0')
      parts.emplace_back();
    else
      parts.back() += c;
  }
  std::map<std::string, std::string> out;
  for (std::size_t i = 0; i + 1 < parts.size(); i += 2) out[parts[i]] = parts[i + 1];
  return out;
}

std::string shown(const std::map<std::string, std::string>& m, const std::string& key) {
  const auto it = m.find(key);
  return it == m.end() ? "(not given)" : quote_field(it->second);
}

// Collective: every rank's `fields`, in rank order.
std::vector<std::map<std::string, std::string>> gather_fields(dist::Communicator& comm, const RankFields& fields) {
  std::vector<std::map<std::string, std::string>> per_rank;
  for (const std::string& bytes : allgather_bytes(comm, encode_fields(fields)))
    per_rank.push_back(decode_fields(bytes));
  return per_rank;
}

}  // namespace

void check_same_on_every_rank(dist::Communicator& comm, const RankFields& fields, std::string_view what) {
  const std::vector<std::map<std::string, std::string>> per_rank = gather_fields(comm, fields);
  for (int r = 1; r < comm.size(); ++r) {
    std::map<std::string, std::string> keys = per_rank[0];
    keys.insert(per_rank[r].begin(), per_rank[r].end());
    for (const auto& [key, unused] : keys) {
      if (shown(per_rank[0], key) == shown(per_rank[r], key)) continue;
      STRATA_FAIL(what, " ", key, " differs across ranks: rank 0 has ", shown(per_rank[0], key), ", rank ", r, " has ",
                  shown(per_rank[r], key), " (every rank must run the same command on the same data)");
    }
  }
}

std::string gather_slow_tiers(dist::Communicator& comm) {
  const memory::Heap& slow = memory::tiered_memory().slow_heap();
  const std::vector<std::map<std::string, std::string>> per_rank =
      gather_fields(comm, {{"tier", slow.name() + ", " + format_bytes(static_cast<double>(slow.used()))}});
  std::string out;
  for (int r = 0; r < comm.size(); ++r)
    out +=
        "rank " + std::to_string(r) + " slow tier: " + per_rank[static_cast<std::size_t>(r)].at("tier") + " in use\n";
  return out;
}

// ---- DistributedTrainable ------------------------------------------------------------------------

void add_comm_delta(dist::CommStats& a, const dist::CommStats& before, const dist::CommStats& after) {
  for (std::size_t i = 0; i < a.ops.size(); ++i) {
    dist::OpStats& o = a.ops[i];
    const dist::OpStats& b = before.ops[i];
    const dist::OpStats& e = after.ops[i];
    o.calls += e.calls - b.calls;
    o.bytes_sent += e.bytes_sent - b.bytes_sent;
    o.bytes_received += e.bytes_received - b.bytes_received;
    o.header_bytes_sent += e.header_bytes_sent - b.header_bytes_sent;
    o.busy_seconds += e.busy_seconds - b.busy_seconds;
    o.wait_seconds += e.wait_seconds - b.wait_seconds;
  }
}

std::string comm_line(const dist::CommStats& s, int64_t steps, int rank) {
  const double n = static_cast<double>(std::max<int64_t>(1, steps));
  const auto mb = [&](dist::Op op) { return static_cast<double>(s[op].bytes_sent) * 1e-6 / n; };
  const dist::OpStats t = s.total();
  char line[320];
  std::snprintf(line, sizeof line,
                "comm: rank %d sent per step: alltoallv (forward + backward) %.4g MB, allreduce %.4g MB, "
                "allgatherv %.4g MB, reduce_scatter %.4g MB; in collectives %.3f ms/it, exposed %.3f ms/it "
                "(%.1f %%)\n",
                rank, mb(dist::Op::alltoallv), mb(dist::Op::allreduce), mb(dist::Op::allgatherv),
                mb(dist::Op::reduce_scatter), 1e3 * t.busy_seconds / n, 1e3 * t.wait_seconds / n,
                t.busy_seconds > 0 ? 100.0 * t.wait_seconds / t.busy_seconds : 0.0);
  return line;
}

std::string dist_phase_line(const DistStepTimes& t) {
  const double n = static_cast<double>(std::max<int64_t>(1, t.steps));
  char line[256];
  std::snprintf(line, sizeof line,
                "  distributed phases (ms/it): lookups for other ranks %.3f (of lookup), sparse update %.3f, "
                "dense optimizer %.3f (update), other %.3f, blocked in collectives %.3f\n",
                1e3 * t.lookup_remote / n, 1e3 * t.sparse_update / n, 1e3 * t.dense_optimizer / n, 1e3 * t.other / n,
                1e3 * t.waited / n);
  return line;
}

DistributedTrainable::DistributedTrainable(DistributedDLRM& model, int64_t num_tables, bool profile)
    : model_(model), num_tables_(num_tables), profile_(profile) {}

float DistributedTrainable::train_step(std::span<const float> dense, std::span<const Bags> bags,
                                       std::span<const float> targets) {
  const dist::CommStats before = model_.communicator().stats();
  const DistStepTimes times = model_.step_times();
  const float loss = model_.train_step(dense, bags, targets);
  step_log_.push_back(model_.step_times().since(times));
  const dist::CommStats after = model_.communicator().stats();
  add_comm_delta(total_, before, after);
  add_comm_delta(since_line_, before, after);
  ++steps_since_line_;
  return loss;
}

float DistributedTrainable::score(std::span<const float> dense, std::span<const Bags> bags,
                                  std::span<const float> targets, std::vector<float>& scores) {
  autograd::NoGradGuard no_grad;
  const Tensor z = model_.score(dense, bags).contiguous();  // clamped with loss_threshold already
  const auto batch = static_cast<int64_t>(targets.size());
  STRATA_CHECK(z.size(0) == batch, "DistributedDLRM: expected ", batch, " targets, got ", z.size(0), " samples");
  {
    PinSet pins;
    pins.add(z, AccessMode::Read).acquire();
    scores.assign(z.data<float>(), z.data<float>() + z.numel());
  }
  const DistributedDLRMConfig& c = model_.config();
  return dlrm_loss(z, targets, c.loss_function, c.loss_weights).item<float>();
}

void DistributedTrainable::reset_stats() {
  total_ = {};
  since_line_ = {};
  steps_since_line_ = 0;
  times_at_reset_ = times_at_line_ = model_.step_times();
  step_log_.clear();
}

std::string DistributedTrainable::progress_detail() {
  std::string line = comm_line(since_line_, steps_since_line_, model_.communicator().rank());
  since_line_ = {};
  steps_since_line_ = 0;
  if (profile_) {
    const DistStepTimes steps = model_.step_times().since(times_at_line_);
    line += phase_line(steps.as_phases()) + dist_phase_line(steps);
  }
  times_at_line_ = model_.step_times();
  return line;
}

void DistributedTrainable::save(const std::string& path, const CheckpointMetadata& extra) { model_.save(path, extra); }

CheckpointMetadata DistributedTrainable::load(const std::string& path) { return model_.load(path); }

void check_distributed_checkpoint_paths(const DLRMConfig& c) {
  if (!c.save_model.empty()) {
    std::error_code ec;
    const bool is_dir = std::filesystem::is_directory(c.save_model, ec);
    STRATA_CHECK(is_dir || !std::filesystem::exists(c.save_model, ec), "--save-model: ", quote_path(c.save_model),
                 " is a file; a distributed checkpoint is a directory (Note [Resharding checkpoints])");
    // A new directory's parent, or an existing directory, must take new files.
    check_writable_file_path(is_dir ? (std::filesystem::path(c.save_model) / "manifest").string() : c.save_model,
                             "--save-model");
  }
  if (!c.load_model.empty()) check_readable_file(dist_manifest_path(c.load_model), "--load-model");
}

}  // namespace strata::emb
