// strata-dlrm: trains the DLRM of facebookresearch/dlrm (dlrm_s_pytorch.py) with its embedding
// tables in tiered memory (embeddings/dlrm.h), with the reference script's flags and progress line
// plus presets and tier flags (embeddings/dlrm_config.h; `strata-dlrm --help`). With no arguments
// it runs the embedded default job: tables 4x the fast budget, the slow tier on the model.
//
// Output: the reference's progress and test lines (the loop is emb::DLRMTrainer, Note [DLRM
// training run] in embeddings/dlrm_trainer.h)
//   Finished training it {j}/{nb} of epoch {k}, {ms:.2f} ms/it, loss {loss:.6f}
//   Testing at - {j}/{nb} of epoch {k}, loss {loss:.6f}, accuracy {acc:.3f} %, best {best:.3f} %
// (ms/it is -1.00 without --print-time, as in the reference), then a summary: samples/s, the
// phase breakdown, the last test's accuracy and AUC, the cache hit rate, bytes moved per tier, and
// whether the slow tier was real or modeled. --json FILE writes the same figures (bench/bench_common.h
// conventions, atomically). Exit status: 0 on success, 2 for bad flags, 1 for errors while
// running (bad indices in the data, unreadable files), each with a message naming the flag or the
// table and row.
//
// `mpirun -np N strata-dlrm ... --dist-backend=mpi` trains DistributedDLRM on every rank with the
// same loop (Note [Distributed strata-dlrm] in embeddings/dist/dlrm_dist_run.h): rank 0 prints the
// plan, the progress and test lines and a `comm:` line after each progress line; --json adds every
// rank's figures; errors are printed by each rank that has them, prefixed with its rank.

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "bench/bench_common.h"
#include "core/error.h"
#include "core/factories.h"
#include "core/line_plot.h"
#include "core/pin_set.h"
#include "core/threading.h"
#include "dist/communicator.h"
#include "embeddings/dist/dist_dlrm.h"
#include "embeddings/dist/dlrm_dist_run.h"
#include "embeddings/dist/rank_agreement.h"
#include "embeddings/dlrm.h"
#include "embeddings/dlrm_config.h"
#include "embeddings/dlrm_trainer.h"
#include "memory/tiered_memory.h"

namespace {

using namespace strata;
using namespace strata::emb;

constexpr const char* kProg = "strata-dlrm";

void print_test_summary(const DLRMTrainer& trainer) {
  if (trainer.history().tests.empty()) return;
  const DLRMTestRecord& t = trainer.history().tests.back();
  std::printf(
      "  test (last pass, %lld samples, %.1f samples/s): loss %.6f, log loss %.6f, accuracy %.3f %%, "
      "AUC %.4f; best accuracy %.3f %%, best AUC %.4f\n",
      static_cast<long long>(t.metrics.samples),
      t.seconds > 0 ? static_cast<double>(t.metrics.samples) / t.seconds : 0.0, t.metrics.loss, t.metrics.log_loss,
      100 * t.metrics.accuracy, t.metrics.auc, 100 * trainer.best_accuracy(), trainer.best_auc());
}

// What the summary and the JSON report about the tiers.
struct TierReport {
  bool has_slow, real, modeled;
  explicit TierReport(TieredDLRM& model)
      : has_slow(model.uses_slow_tier()),
        real(model.memory().slow_is_real_device()),
        modeled(has_slow && model.memory().throttle().enabled()) {}
};

void print_summary(const DLRMConfig& c, TieredDLRM& model, const DLRMTrainer& trainer) {
  const DLRMTrainStats& st = trainer.stats();
  const DLRMPhaseTimes& ph = model.times();
  const DLRMTierCounters cnt = model.counters();
  const double sps = st.seconds > 0 ? static_cast<double>(st.samples) / st.seconds : 0;
  const double it = static_cast<double>(std::max<int64_t>(1, ph.steps));
  std::printf("\nSummary: %lld iterations, %lld samples in %.2f s: %.1f samples/s (%d threads)\n",
              static_cast<long long>(st.iterations), static_cast<long long>(st.samples), st.seconds, sps,
              get_num_threads());
  std::printf(
      "  phases (ms/it): bottom MLP %.3f, lookup %.3f, interaction %.3f, top MLP %.3f, backward %.3f, "
      "update %.3f (policy hooks %.3f of lookup + update)\n",
      1e3 * ph.bottom_mlp / it, 1e3 * ph.lookup / it, 1e3 * ph.interaction / it, 1e3 * ph.top_mlp / it,
      1e3 * ph.backward / it, 1e3 * ph.update / it, 1e3 * ph.hooks / it);
  std::printf("  data: waited %.3f ms/it for batches (%.2f %% of the step time)\n",
              1e3 * st.data_seconds / static_cast<double>(std::max<int64_t>(1, st.iterations)),
              st.seconds > 0 ? 100.0 * st.data_seconds / st.seconds : 0.0);
  print_test_summary(trainer);
  if (cnt.cache_hit_rate >= 0)
    std::printf("  cache hit rate: %.1f%% of lookups served from DRAM\n", 100.0 * cnt.cache_hit_rate);
  else
    std::printf("  cache hit rate: n/a (no cached table under policy %s)\n", c.emb_policy.c_str());
  std::printf("  bytes moved: fast tier read %s, written %s; slow tier read %s, written %s\n",
              format_bytes(static_cast<double>(cnt.fast_bytes_read)).c_str(),
              format_bytes(static_cast<double>(cnt.fast_bytes_written)).c_str(),
              format_bytes(static_cast<double>(cnt.slow_bytes_read)).c_str(),
              format_bytes(static_cast<double>(cnt.slow_bytes_written)).c_str());
  const memory::MemoryStatsSnapshot mem = model.memory().manager().stats().snapshot();
  std::printf(
      "  fast tier (one per process: tables, caches and tensors): peak %s of %s; tensors evicted to the "
      "slow tier %s\n",
      format_bytes(static_cast<double>(mem.fast.peak_bytes)).c_str(),
      format_bytes(static_cast<double>(model.memory().fast_heap().capacity())).c_str(),
      format_bytes(static_cast<double>(mem.moved_to_slow.bytes)).c_str());
  const TierReport tier(model);
  std::printf("  slow tier: %s\n", !tier.has_slow ? "none (every table fits the fast budget)"
                                   : tier.modeled
                                       ? (model.memory().throttle().model().describe() + ", stalled " +
                                          std::to_string(static_cast<double>(cnt.throttle.stall_ns) * 1e-9) + " s")
                                             .c_str()
                                   : tier.real ? "real device"
                                               : "DRAM-backed, model off (not slowed)");
  std::fflush(stdout);
}

void json_architecture(bench::Json& j, const DLRMConfig& c) {
  j.kv("preset", c.preset).kv("policy", c.emb_policy).kv("batch", c.mini_batch_size);
  j.kv("tables", static_cast<long long>(c.arch_embedding_size.size()))
      .kv("table_bytes", static_cast<long long>(c.table_bytes()));
  j.kv("fast_budget", static_cast<long long>(c.fast_budget));
  // The architecture as run (after presets, --scale-rows), so a peer can build the same model.
  j.key("rows").begin_array();
  for (int64_t r : c.table_rows()) j.value(static_cast<long long>(r));
  j.end_array();
  j.kv("sparse_feature_size", static_cast<long long>(c.arch_sparse_feature_size));
  j.key("mlp_bot").begin_array();
  for (int64_t w : c.arch_mlp_bot) j.value(static_cast<long long>(w));
  j.end_array();
  j.key("mlp_top").begin_array();
  for (int64_t w : c.arch_mlp_top) j.value(static_cast<long long>(w));
  j.end_array();
  j.kv("loss_function", to_string(c.loss_function)).kv("learning_rate", c.learning_rate);
  j.kv("lookups", static_cast<long long>(c.num_indices_per_lookup)).kv("lookups_fixed", c.num_indices_per_lookup_fixed);
}

void json_test(bench::Json& j, const DLRMTrainer& trainer) {
  j.key("test");
  if (trainer.history().tests.empty()) {
    j.null();
    return;
  }
  const DLRMTestRecord& t = trainer.history().tests.back();
  j.begin_object();
  j.kv("samples", static_cast<long long>(t.metrics.samples)).kv("loss", t.metrics.loss);
  j.kv("log_loss", t.metrics.log_loss).kv("accuracy", t.metrics.accuracy).kv("auc", t.metrics.auc);
  j.kv("best_accuracy", trainer.best_accuracy()).kv("best_auc", trainer.best_auc());
  j.kv("samples_per_s", t.seconds > 0 ? static_cast<double>(t.metrics.samples) / t.seconds : 0.0);
  j.kv("passes", static_cast<long long>(trainer.history().tests.size()));
  j.end_object();
}

bool write_json(const DLRMConfig& c, TieredDLRM& model, const DLRMTrainer& trainer) {
  const DLRMTrainStats& st = trainer.stats();
  const DLRMPhaseTimes& ph = model.times();
  const DLRMTierCounters cnt = model.counters();
  const double it = static_cast<double>(std::max<int64_t>(1, ph.steps));
  bench::Json j;
  j.begin_object();
  j.kv("binary", kProg).kv("threads", get_num_threads()).kv("dtype", "f32").kv("library", "strata");
  json_architecture(j, c);
  j.kv("iterations", st.iterations);
  j.timed("step_ms", "ms", st.step_ms);
  j.kv("samples_per_s", st.seconds > 0 ? static_cast<double>(st.samples) / st.seconds : 0.0);
  j.kv("data_wait_s", st.data_seconds);
  j.key("phases_ms_per_it").begin_object();
  j.kv("bottom_mlp", 1e3 * ph.bottom_mlp / it).kv("lookup", 1e3 * ph.lookup / it);
  j.kv("interaction", 1e3 * ph.interaction / it).kv("top_mlp", 1e3 * ph.top_mlp / it);
  j.kv("backward", 1e3 * ph.backward / it).kv("update", 1e3 * ph.update / it).kv("policy_hooks", 1e3 * ph.hooks / it);
  j.end_object();
  if (cnt.cache_hit_rate >= 0)
    j.kv("cache_hit_rate", cnt.cache_hit_rate);
  else
    j.key("cache_hit_rate").null();
  j.key("bytes").begin_object();
  j.kv("fast_read", static_cast<long long>(cnt.fast_bytes_read))
      .kv("fast_written", static_cast<long long>(cnt.fast_bytes_written));
  j.kv("slow_read", static_cast<long long>(cnt.slow_bytes_read))
      .kv("slow_written", static_cast<long long>(cnt.slow_bytes_written));
  j.end_object();
  const TierReport tier(model);
  j.kv("slow_tier", !tier.has_slow ? "none" : tier.modeled ? "modeled" : tier.real ? "real" : "off");
  if (tier.modeled) j.kv("slow_tier_model", model.memory().throttle().model().describe());
  j.kv("loss_first", st.first_loss).kv("loss_last", st.last_loss);
  json_test(j, trainer);
  j.end_object();
  return bench::write_file_atomically(c.json, j.str(), kProg);
}

// The run's training and test data; `print`: the data line.
struct Sources {
  std::unique_ptr<IndexSource> train, test;
  Sources(const DLRMConfig& c, bool print) : train(make_index_source(c)) {
    const bool testing = c.inference_only || c.test_freq > 0 || has_test_split(c);
    if (testing) test = make_test_index_source(c);
    if (!print) return;
    std::printf("data: %s, %lld batches per epoch", train->describe().c_str(),
                static_cast<long long>(train->num_batches()));
    if (test)
      std::printf("; test: %lld batches of %lld", static_cast<long long>(test->num_batches()),
                  static_cast<long long>(test->batch_size()));
    std::printf("\n");
  }
};

int run(const DLRMConfig& flags) {
  if (flags.threads > 0) set_num_threads(static_cast<int>(flags.threads));
  check_output_paths(flags);                      // before hours of training, not after
  const DLRMConfig c = with_dataset_rows(flags);  // a dataset's rows are its counts (preprocessing it first)
  configure_process_memory(c);                    // before the first tensor
  std::printf("%s\n", describe(c).c_str());
  TieredDLRM model(c);
  std::printf("%s\n%s", model.describe_memory().c_str(),
              c.debug_mode || model.num_tables() <= 8 ? model.describe_tables().c_str() : "");
  const Sources data(c, true);
  DLRMTrainer trainer(model, c, *data.train, data.test.get());
  if (!c.load_model.empty()) trainer.load(c.load_model);
  std::printf("time/loss/accuracy (if enabled):\n");
  std::fflush(stdout);
  if (c.inference_only) {
    trainer.test(0, 0);
    return 0;
  }
  trainer.train();
  print_summary(c, model, trainer);
  if (!c.json.empty() && !write_json(c, model, trainer)) return 1;
  if (!c.plot.empty()) {
    write_line_plot_png(c.plot, "strata-dlrm" + (c.preset.empty() ? std::string() : " --preset " + c.preset),
                        training_plot_panels(trainer.curves()));
    std::printf("Plot written to %s\n", c.plot.c_str());
  }
  return 0;
}

// ---- the distributed run (Note [Distributed strata-dlrm] in embeddings/dist/dlrm_dist_run.h) ------

constexpr int64_t kOpFields = 5;  // per collective: calls, bytes sent, bytes received, busy s, exposed s
// Then the phases (DistStepTimes, seconds summed over the steps), in this order:
constexpr const char* kPhaseNames[] = {"lookup_remote", "lookup",        "bottom_mlp",      "interaction", "top_mlp",
                                       "backward",      "sparse_update", "dense_optimizer", "other",       "waited"};
constexpr int64_t kPhaseFields = std::size(kPhaseNames);
// Then train s, data wait s, the n step times (ms), and each phase's n per-step times (s).
constexpr int64_t kStepsAt = dist::kNumOps * kOpFields + kPhaseFields + 2;

// A phase of DistStepTimes by its kPhaseNames index.
double phase_at(const DistStepTimes& p, int64_t k) {
  const double all[] = {p.lookup_remote, p.lookup,        p.bottom_mlp,      p.interaction, p.top_mlp,
                        p.backward,      p.sparse_update, p.dense_optimizer, p.other,       p.waited};
  static_assert(std::size(all) == kPhaseFields);
  return all[k];
}

// This rank's figures of the training steps as one f64 row (the same length on every rank: every
// rank ran the same steps).
Tensor rank_figures(const DistributedTrainable& model, const DLRMTrainStats& st) {
  std::vector<double> v;
  for (const dist::OpStats& o : model.step_comm().ops)
    v.insert(v.end(), {static_cast<double>(o.calls), static_cast<double>(o.bytes_sent),
                       static_cast<double>(o.bytes_received), o.busy_seconds, o.wait_seconds});
  for (int64_t k = 0; k < kPhaseFields; ++k) v.push_back(phase_at(model.step_times(), k));
  v.push_back(st.seconds);
  v.push_back(st.data_seconds);
  v.insert(v.end(), st.step_ms.begin(), st.step_ms.end());
  STRATA_CHECK(model.step_log().size() == st.step_ms.size(), "strata-dlrm: ", model.step_log().size(),
               " steps timed by phase but ", st.step_ms.size(), " step times");
  for (int64_t k = 0; k < kPhaseFields; ++k)
    for (const DistStepTimes& step : model.step_log()) v.push_back(phase_at(step, k));
  Tensor t = empty({1, static_cast<int64_t>(v.size())}, {DType::f64});
  PinSet pins;
  pins.add(t, AccessMode::Write).acquire();
  std::memcpy(t.data_ptr(), v.data(), v.size() * sizeof(double));
  return t;
}

// Every rank's figures (rank_figures rows, gathered) under "ranks".
void json_ranks(bench::Json& j, const Tensor& all) {
  PinSet pins;
  pins.add(all, AccessMode::Read).acquire();
  const int64_t width = all.size(1);
  j.key("ranks").begin_array();
  for (int64_t r = 0; r < all.size(0); ++r) {
    const double* row = all.data<double>() + r * width;
    j.begin_object().kv("rank", static_cast<long long>(r)).key("collectives").begin_object();
    for (int op = 0; op < dist::kNumOps; ++op) {
      const double* o = row + op * kOpFields;
      j.key(dist::op_name(static_cast<dist::Op>(op))).begin_object();
      j.kv("calls", static_cast<long long>(o[0])).kv("bytes_sent", static_cast<long long>(o[1]));
      j.kv("bytes_received", static_cast<long long>(o[2])).kv("busy_s", o[3]).kv("exposed_s", o[4]).end_object();
    }
    j.end_object().key("phases_s").begin_object();  // summed over the training steps
    for (int64_t k = 0; k < kPhaseFields; ++k) j.kv(kPhaseNames[k], row[dist::kNumOps * kOpFields + k]);
    j.end_object().kv("train_s", row[kStepsAt - 2]).kv("data_wait_s", row[kStepsAt - 1]);
    const int64_t steps = (width - kStepsAt) / (1 + kPhaseFields);
    j.timed("step_ms", "ms", std::vector<double>(row + kStepsAt, row + kStepsAt + steps));
    j.key("phase_steps_s").begin_object();  // each step's phases, in step order
    for (int64_t k = 0; k < kPhaseFields; ++k) {
      j.key(kPhaseNames[k]).begin_array();
      for (int64_t i = 0; i < steps; ++i) j.value(row[kStepsAt + steps * (1 + k) + i]);
      j.end_array();
    }
    j.end_object().end_object();
  }
  j.end_array();
}

// A double written with 17 digits, so that equal files mean bitwise equal values.
void exact(bench::Json& j, double x) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", x);
  j.raw(buf);
}

bool write_dist_json(const DLRMConfig& c, const dist::Communicator& comm, const ShardPlan& plan,
                     const DLRMTrainer& trainer, const Tensor& ranks) {
  const DLRMTrainStats& st = trainer.stats();
  bench::Json j;
  j.begin_object();
  j.kv("binary", kProg).kv("threads", get_num_threads()).kv("dtype", "f32").kv("library", "strata");
  j.kv("dist_backend", c.dist_backend).kv("world_size", comm.size()).kv("mpi", comm.implementation());
  j.kv("chunks", static_cast<long long>(c.dist_chunks)).key("plan").raw(plan.to_json());
  j.kv("interaction", to_string(c.arch_interaction_op));
  json_architecture(j, c);
  j.kv("iterations", st.iterations);
  j.timed("step_ms", "ms", st.step_ms);
  j.kv("samples_per_s", st.seconds > 0 ? static_cast<double>(st.samples) / st.seconds : 0.0);
  j.kv("loss_first", st.first_loss).kv("loss_last", st.last_loss);
  j.key("train_loss").begin_array();  // at every progress line, exact
  for (double x : trainer.history().train_loss) exact(j, x);
  j.end_array();
  json_test(j, trainer);
  if (!trainer.history().tests.empty()) {
    const metrics::BinaryMetrics& m = trainer.history().tests.back().metrics;
    j.key("test_exact").begin_object();
    exact(j.key("loss"), m.loss);
    exact(j.key("accuracy"), m.accuracy);
    exact(j.key("auc"), m.auc);
    j.end_object();
  }
  json_ranks(j, ranks);
  j.end_object();
  return bench::write_file_atomically(c.json, j.str(), kProg);
}

// This rank's memory: the slow tier in --slow-dir/rank-R/ (created).
void configure_rank_memory(const DLRMConfig& c, int rank) {
  DLRMConfig mine = c;
  if (!c.slow_dir.empty()) {
    mine.slow_dir = rank_slow_dir(c, rank);
    std::error_code ec;
    std::filesystem::create_directories(mine.slow_dir, ec);
    STRATA_CHECK(!ec, "--slow-dir: cannot create ", quote_path(mine.slow_dir), ": ", ec.message());
  }
  configure_process_memory(mine);
}

// Collective start-up checks (item 7), each agreed by every rank at once (Note [Agreed failures] in
// embeddings/dist/rank_agreement.h). This rank's memory comes first, before its first tensor (the
// checks' exchanges are tensors; Note [Shard storage]); a failure there is named by the first
// agreed check, on every rank.
DLRMConfig start_distributed(const DLRMConfig& flags, const std::vector<std::string>& args, dist::Communicator& comm) {
  if (flags.threads > 0) set_num_threads(static_cast<int>(flags.threads));
  std::exception_ptr memory_problem;
  try {
    configure_rank_memory(flags, comm.rank());
  } catch (const Error&) {
    memory_problem = std::current_exception();
  }
  RankFields fields = canonical_dlrm_args(args);
  fields.emplace_back("threads (effective)", std::to_string(get_num_threads()));
  check_same_on_every_rank(comm, fields, "flag");
  DLRMConfig c;
  agree_on_every_rank(comm, "the start-up check", [&] {
    if (memory_problem) std::rethrow_exception(memory_problem);
    check_distributed_flags(flags, comm.size());
    if (comm.rank() == 0) check_output_paths(flags);  // --json and --plot: rank 0 writes them
    check_distributed_checkpoint_paths(flags);        // every rank writes and reads its rows there
    c = with_dataset_rows(flags);
  });
  check_same_on_every_rank(comm, dlrm_data_fingerprint(c), "data file");
  return c;
}

void print_dist_summary(const DLRMConfig& c, const DLRMTrainer& trainer, const DistributedTrainable& model,
                        const dist::Communicator& comm) {
  const DLRMTrainStats& st = trainer.stats();
  std::printf("\nSummary: %lld iterations, %lld samples in %.2f s: %.1f samples/s (%d ranks x %d threads)\n",
              static_cast<long long>(st.iterations), static_cast<long long>(st.samples), st.seconds,
              st.seconds > 0 ? static_cast<double>(st.samples) / st.seconds : 0.0, comm.size(), get_num_threads());
  std::printf("  %s", comm_line(model.step_comm(), st.iterations, comm.rank()).c_str());
  if (c.enable_profiling) {
    const DistStepTimes t = model.step_times();
    std::printf("%s%s", phase_line(t.as_phases()).c_str(), dist_phase_line(t).c_str());
  }
  print_test_summary(trainer);
  std::fflush(stdout);
}

int train_distributed(const DLRMConfig& flags, const std::vector<std::string>& args, dist::Communicator& comm) {
  const DLRMConfig c = start_distributed(flags, args, comm);
  const bool root = comm.rank() == 0;
  const ShardPlan plan = plan_dlrm_shards(c, comm.size(), dist_slow_budget(comm, c));
  const std::string storage = describe_shard_storage(plan, c);  // throws alike on every rank
  if (root)
    std::printf("Running on %d ranks using %s backend (%s)\n%s\n%s%s", comm.size(), c.dist_backend.c_str(),
                comm.implementation().c_str(), describe(c).c_str(), plan.to_string().c_str(), storage.c_str());
  DistributedDLRM model(distributed_model_config(c), plan, dlrm_shard_storage(c), comm);
  if (!c.slow_dir.empty()) {
    const std::string tiers = gather_slow_tiers(comm);
    if (root) std::printf("%s", tiers.c_str());
  }
  DistributedTrainable trainable(model, static_cast<int64_t>(c.arch_embedding_size.size()), c.enable_profiling);
  std::unique_ptr<const Sources> data;  // a file one rank cannot read ends every rank
  agree_on_every_rank(comm, "reading the data", [&] { data = std::make_unique<const Sources>(c, root); });
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> quiet(root ? nullptr : std::fopen("/dev/null", "w"), &std::fclose);
  STRATA_CHECK(root || quiet != nullptr, "cannot open /dev/null for rank ", comm.rank(), "'s progress lines");
  DLRMTrainer trainer(trainable, c, *data->train, data->test.get(), root ? stdout : quiet.get());
  if (!c.load_model.empty()) trainer.load(c.load_model);
  if (root) std::printf("time/loss/accuracy (if enabled):\n");
  std::fflush(stdout);
  if (c.inference_only) {
    trainer.test(0, 0);
    return 0;
  }
  trainer.train();
  const Tensor ranks = comm.allgatherv(rank_figures(trainable, trainer.stats()));
  if (!root) return 0;
  print_dist_summary(c, trainer, trainable, comm);
  if (!c.json.empty() && !write_dist_json(c, comm, plan, trainer, ranks)) return 1;
  if (!c.plot.empty()) {
    write_line_plot_png(c.plot, "strata-dlrm --dist-backend " + c.dist_backend, training_plot_panels(trainer.curves()));
    std::printf("Plot written to %s\n", c.plot.c_str());
  }
  return 0;
}

// Errors name the rank: a rank's own problem (a file it cannot read) reaches only its stderr.
int run_distributed(const DLRMConfig& flags, const std::vector<std::string>& args) {
  dist::Communicator& comm = dist::Communicator::world();
  try {
    return train_distributed(flags, args, comm);
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "%s: rank %d: error: %s\n", kProg, comm.rank(), e.what());
    return 1;
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  DLRMConfig config;
  try {
    config = parse_dlrm_args(args);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n(see %s --help)\n", kProg, e.what(), kProg);
    return 2;
  }
  if (config.help) {
    std::printf("%s", dlrm_usage().c_str());
    return 0;
  }
  try {
    if (!config.dist_backend.empty()) return run_distributed(config, args);
    return run(config);
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "%s: error: %s\n", kProg, e.what());
    return 1;
  }
}
