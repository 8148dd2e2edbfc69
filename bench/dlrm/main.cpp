// strata-dlrm: trains the DLRM of facebookresearch/dlrm (dlrm_s_pytorch.py) with its embedding
// tables in tiered memory (embeddings/dlrm.h), with the reference script's flags and progress line
// plus presets and tier flags (embeddings/dlrm_config.h; `strata-dlrm --help`). With no arguments
// it runs the embedded default job: tables 4x the fast budget, the slow tier on the model.
//
// Output: the reference's progress line
//   Finished training it {j}/{nb} of epoch {k}, {ms:.2f} ms/it, loss {loss:.6f}
// every --print-freq iterations (ms/it is -1.00 without --print-time, as in the reference), then a
// summary: samples/s, the phase breakdown, the cache hit rate, bytes moved per tier, and whether
// the slow tier was real or modeled. --json FILE writes the same figures (bench/bench_common.h
// conventions, atomically). Exit status: 0 on success, 2 for bad flags, 1 for errors while
// running (bad indices in the data, unreadable files), each with a message naming the flag or the
// table and row.

#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <exception>
#include <string>
#include <vector>

#include "bench/bench_common.h"
#include "core/error.h"
#include "core/threading.h"
#include "embeddings/dlrm.h"
#include "embeddings/dlrm_config.h"

namespace {

using Clock = std::chrono::steady_clock;
using namespace strata;
using namespace strata::emb;

constexpr const char* kProg = "strata-dlrm";


std::string wall_clock() {
  const std::time_t t = std::time(nullptr);
  char buf[16];
  std::strftime(buf, sizeof buf, "%H:%M", std::localtime(&t));
  return buf;
}

int run(const DLRMConfig& flags) {
  if (flags.threads > 0) set_num_threads(static_cast<int>(flags.threads));
  const DLRMConfig c = with_dataset_rows(flags);  // a dataset's rows are its counts (preprocessing it first)
  configure_process_memory(c);  // before the first tensor
  std::printf("%s\n", describe(c).c_str());
  const bool training = !c.inference_only;
  TieredDLRM model(c);
  std::printf("%s\n%s", model.tiers().describe().c_str(), c.debug_mode || model.num_tables() <= 8 ? model.describe_tables().c_str() : "");
  if (!c.load_model.empty()) {
    model.load(c.load_model);
    std::printf("Loaded model from %s (%lld optimizer steps)\n", c.load_model.c_str(), static_cast<long long>(model.steps()));
  }
  std::unique_ptr<IndexSource> source = make_index_source(c);
  std::printf("data: %s, %lld batches per epoch\n", source->describe().c_str(),
              static_cast<long long>(source->num_batches()));
  const int64_t nb = source->num_batches();
  const int64_t batch = c.mini_batch_size;
  Batch data;
  std::vector<Bags> bags(static_cast<std::size_t>(model.num_tables()));
  std::printf("time/loss/accuracy (if enabled):\n");
  std::fflush(stdout);

  double total_time = 0, total_loss = 0, run_time = 0;
  int64_t total_iter = 0, total_samp = 0, run_iters = 0, run_samples = 0;
  double first_loss = NAN, last_loss = NAN;
  std::vector<double> step_ms;
  model.reset_stats();
  DLRMPhaseTimes last_phases;  // at the previous progress line (--enable-profiling)
  for (int64_t k = 0; k < c.nepochs; ++k) {
    if (k > 0) source->reset();  // generators replay the epoch, as the reference's do
    for (int64_t j = 0; j < nb; ++j) {
      float loss;
      int64_t b = 0;
      Clock::time_point t0;
      try {
        if (!source->next(data)) break;
        b = data.batch;
        for (std::size_t t = 0; t < bags.size(); ++t) bags[t] = data.bags(static_cast<int64_t>(t));
        t0 = Clock::now();
        loss = training ? model.train_step(data.dense, bags, data.targets) : model.evaluate(data.dense, bags, data.targets);
      } catch (const Error& e) {
        STRATA_CHECK(false, "batch ", j + 1, " of epoch ", k, ": ", e.what());
      }
      const double dt = std::chrono::duration<double>(Clock::now() - t0).count();
      step_ms.push_back(dt * 1e3);
      total_time += dt;
      run_time += dt;
      total_loss += static_cast<double>(loss) * static_cast<double>(b);
      total_samp += b;
      run_samples += b;
      ++total_iter;
      ++run_iters;
      if (std::isnan(first_loss)) first_loss = loss;
      last_loss = loss;
      if ((j + 1) % c.print_freq == 0 || j + 1 == nb) {
        const double gT = c.print_time ? 1000.0 * total_time / static_cast<double>(total_iter) : -1.0;
        std::printf("Finished %s it %lld/%lld of epoch %lld, %.2f ms/it, loss %.6f%s\n",
                    training ? "training" : "inference", static_cast<long long>(j + 1), static_cast<long long>(nb),
                    static_cast<long long>(k), gT, total_loss / static_cast<double>(total_samp),
                    c.print_wall_time ? (" (" + wall_clock() + ")").c_str() : "");
        if (c.enable_profiling) {
          const DLRMPhaseTimes& p = model.times();
          const double n = static_cast<double>(std::max<int64_t>(1, p.steps - last_phases.steps));
          std::printf("  phases (ms/it): bottom MLP %.3f, lookup %.3f, interaction %.3f, top MLP %.3f, backward %.3f, "
                      "update %.3f\n",
                      1e3 * (p.bottom_mlp - last_phases.bottom_mlp) / n, 1e3 * (p.lookup - last_phases.lookup) / n,
                      1e3 * (p.interaction - last_phases.interaction) / n, 1e3 * (p.top_mlp - last_phases.top_mlp) / n,
                      1e3 * (p.backward - last_phases.backward) / n, 1e3 * (p.update - last_phases.update) / n);
          last_phases = p;
        }
        std::fflush(stdout);
        total_time = 0;
        total_loss = 0;
        total_iter = 0;
        total_samp = 0;
      }
    }
  }
  if (!c.save_model.empty() && training) {
    model.save(c.save_model, {{"nepochs", std::to_string(c.nepochs)}, {"num_batches", std::to_string(nb)}});
    std::printf("Saved model to %s\n", c.save_model.c_str());
  }

  // ---- summary ----
  const DLRMPhaseTimes& ph = model.times();
  const DLRMTierCounters cnt = model.counters();
  const double samples = static_cast<double>(run_samples);
  const double sps = run_time > 0 ? samples / run_time : 0;
  const double it = static_cast<double>(std::max<int64_t>(1, ph.steps));
  std::printf("\nSummary: %lld iterations, %.0f samples in %.2f s: %.1f samples/s (%d threads)\n",
              static_cast<long long>(run_iters), samples, run_time, sps, get_num_threads());
  std::printf("  phases (ms/it): bottom MLP %.3f, lookup %.3f, interaction %.3f, top MLP %.3f, backward %.3f, "
              "update %.3f (policy hooks %.3f of lookup + update)\n",
              1e3 * ph.bottom_mlp / it, 1e3 * ph.lookup / it, 1e3 * ph.interaction / it, 1e3 * ph.top_mlp / it,
              1e3 * ph.backward / it, 1e3 * ph.update / it, 1e3 * ph.hooks / it);
  if (cnt.cache_hit_rate >= 0)
    std::printf("  cache hit rate: %.1f%% of lookups served from DRAM\n", 100.0 * cnt.cache_hit_rate);
  else
    std::printf("  cache hit rate: n/a (no cached table under policy %s)\n", c.emb_policy.c_str());
  std::printf("  bytes moved: fast tier read %s, written %s; slow tier read %s, written %s\n",
              format_bytes(static_cast<double>(cnt.fast_bytes_read)).c_str(),
              format_bytes(static_cast<double>(cnt.fast_bytes_written)).c_str(),
              format_bytes(static_cast<double>(cnt.slow_bytes_read)).c_str(),
              format_bytes(static_cast<double>(cnt.slow_bytes_written)).c_str());
  const bool has_slow = model.tiers().slow() != nullptr;
  const bool real = model.tiers().slow_is_real_device();
  const bool modeled = has_slow && !real && model.tiers().throttle().enabled();
  std::printf("  slow tier: %s\n",
              !has_slow ? "none (every table fits the fast budget)"
              : real    ? "real device"
              : modeled ? (model.tiers().throttle().model().describe() + ", stalled " +
                           std::to_string(static_cast<double>(cnt.throttle.stall_ns) * 1e-9) + " s")
                              .c_str()
                        : "DRAM-backed, model off (not slowed)");
  std::fflush(stdout);

  if (!c.json.empty()) {
    bench::Json j;
    j.begin_object();
    j.kv("binary", kProg).kv("threads", get_num_threads()).kv("dtype", "f32").kv("library", "strata");
    j.kv("preset", c.preset).kv("policy", c.emb_policy).kv("batch", batch).kv("iterations", run_iters);
    j.kv("tables", model.num_tables()).kv("table_bytes", static_cast<long long>(c.table_bytes()));
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
    j.timed("step_ms", "ms", step_ms);
    j.kv("samples_per_s", sps);
    j.key("phases_ms_per_it").begin_object();
    j.kv("bottom_mlp", 1e3 * ph.bottom_mlp / it).kv("lookup", 1e3 * ph.lookup / it);
    j.kv("interaction", 1e3 * ph.interaction / it).kv("top_mlp", 1e3 * ph.top_mlp / it);
    j.kv("backward", 1e3 * ph.backward / it).kv("update", 1e3 * ph.update / it).kv("policy_hooks", 1e3 * ph.hooks / it);
    j.end_object();
    if (cnt.cache_hit_rate >= 0) j.kv("cache_hit_rate", cnt.cache_hit_rate);
    else j.key("cache_hit_rate").null();
    j.key("bytes").begin_object();
    j.kv("fast_read", static_cast<long long>(cnt.fast_bytes_read)).kv("fast_written", static_cast<long long>(cnt.fast_bytes_written));
    j.kv("slow_read", static_cast<long long>(cnt.slow_bytes_read)).kv("slow_written", static_cast<long long>(cnt.slow_bytes_written));
    j.end_object();
    j.kv("slow_tier", !has_slow ? "none" : real ? "real" : modeled ? "modeled" : "off");
    if (modeled) j.kv("slow_tier_model", model.tiers().throttle().model().describe());
    j.kv("loss_first", first_loss).kv("loss_last", last_loss);
    j.end_object();
    if (!bench::write_file_atomically(c.json, j.str(), kProg)) return 1;
  }
  return 0;
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
    return run(config);
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "%s: error: %s\n", kProg, e.what());
    return 1;
  }
}
