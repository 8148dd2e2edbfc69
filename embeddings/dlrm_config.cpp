#include "embeddings/dlrm_config.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <sstream>

#include "core/error.h"
#include "core/file.h"
#include "core/text.h"
#include "core/threading.h"
#include "embeddings/criteo.h"
#include "embeddings/index_source.h"
#include "memory/heap.h"
#include "memory/tiered_memory.h"
#include "models/zoo/dlrm.h"

namespace strata::emb {

namespace {

// ---- value parsers: every message names the flag ---------------------------------------------------

int64_t parse_int(const std::string& flag, const std::string& v, int64_t lo, int64_t hi) {
  char* end = nullptr;
  errno = 0;
  const long long x = v.empty() ? 0 : std::strtoll(v.c_str(), &end, 10);
  STRATA_CHECK(!v.empty() && end != nullptr && *end == '\0' && errno == 0 && x >= lo && x <= hi, flag,
               ": expected an integer in [", lo, ", ", hi, "], got ", quote_field(v));
  return x;
}

double parse_real(const std::string& flag, const std::string& v) {
  char* end = nullptr;
  errno = 0;
  const double x = v.empty() ? 0 : std::strtod(v.c_str(), &end);
  STRATA_CHECK(!v.empty() && end != nullptr && *end == '\0' && errno == 0 && std::isfinite(x), flag,
               ": expected a number, got ", quote_field(v));
  return x;
}

bool parse_bool(const std::string& flag, const std::string& v) {
  std::string s = v;
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  if (s == "true" || s == "1" || s == "yes") return true;
  if (s == "false" || s == "0" || s == "no") return false;
  STRATA_FAIL(flag, ": expected True or False (or 1/0), got ", quote_field(v));
}

std::string parse_choice(const std::string& flag, const std::string& v, std::initializer_list<const char*> choices) {
  std::string list;
  for (const char* c : choices) {
    if (v == c) return v;
    list += list.empty() ? "" : ", ";
    list += c;
  }
  STRATA_FAIL(flag, ": expected one of ", list, ", got ", quote_field(v));
}

/// The reference's dash_separated_floats ("1.0-1.0").
std::vector<double> parse_floats(const std::string& flag, const std::string& v) {
  std::vector<double> out;
  std::size_t start = 0;
  while (true) {
    const std::size_t dash = v.find('-', start);
    const std::string part = v.substr(start, dash == std::string::npos ? std::string::npos : dash - start);
    char* end = nullptr;
    const double x = part.empty() ? 0 : std::strtod(part.c_str(), &end);
    STRATA_CHECK(!part.empty() && end != nullptr && *end == '\0' && std::isfinite(x), flag, ": ", quote_field(v),
                 " is not a dash-separated list of numbers (bad element ", quote_field(part), ")");
    out.push_back(x);
    if (dash == std::string::npos) break;
    start = dash + 1;
  }
  return out;
}

// ---- the flag table ---------------------------------------------------------------------------------

using Setter = std::function<void(DLRMConfig&, const std::string& flag, const std::string& value)>;

struct Flag {
  enum class Kind { Value, StoreTrue, Refused } kind;
  Setter set;           // Value: parses the value; StoreTrue: called with ""
  std::string refusal;  // Refused: why
};

Flag value(Setter s) { return {Flag::Kind::Value, std::move(s), {}}; }
Flag store_true(std::function<void(DLRMConfig&)> s) {
  return {Flag::Kind::StoreTrue, [s](DLRMConfig& c, const std::string&, const std::string&) { s(c); }, {}};
}
Flag refused(std::string why) { return {Flag::Kind::Refused, {}, std::move(why)}; }

#define STRATA_INT_FLAG(field, lo, hi) \
  value([](DLRMConfig& c, const std::string& f, const std::string& v) { c.field = parse_int(f, v, lo, hi); })
#define STRATA_REAL_FLAG(field) \
  value([](DLRMConfig& c, const std::string& f, const std::string& v) { c.field = parse_real(f, v); })
#define STRATA_BOOL_FLAG(field) \
  value([](DLRMConfig& c, const std::string& f, const std::string& v) { c.field = parse_bool(f, v); })
#define STRATA_STRING_FLAG(field) value([](DLRMConfig& c, const std::string&, const std::string& v) { c.field = v; })
#define STRATA_TRUE_FLAG(field) store_true([](DLRMConfig& c) { c.field = true; })

constexpr int64_t kBig = int64_t{1} << 62;

using FlagTable = std::map<std::string, Flag>;

// Architecture flags.
void add_architecture_flags(FlagTable& t) {
  t["--arch-sparse-feature-size"] = STRATA_INT_FLAG(arch_sparse_feature_size, 1, 1 << 20);
  t["--arch-embedding-size"] = value([](DLRMConfig& c, const std::string& f, const std::string& v) {
    c.arch_embedding_size = nn::zoo::parse_arch(v, f);
    c.arch_embedding_size_given = true;
  });
  t["--arch-mlp-bot"] = value(
      [](DLRMConfig& c, const std::string& f, const std::string& v) { c.arch_mlp_bot = nn::zoo::parse_arch(v, f); });
  t["--arch-mlp-top"] = value(
      [](DLRMConfig& c, const std::string& f, const std::string& v) { c.arch_mlp_top = nn::zoo::parse_arch(v, f); });
  t["--arch-interaction-op"] = value([](DLRMConfig& c, const std::string& f, const std::string& v) {
    c.arch_interaction_op = parse_choice(f, v, {"dot", "cat"}) == "dot" ? InteractionOp::Dot : InteractionOp::Cat;
  });
  t["--arch-interaction-itself"] = STRATA_TRUE_FLAG(arch_interaction_itself);
  t["--weighted-pooling"] = value([](DLRMConfig& c, const std::string& f, const std::string& v) {
    const std::string w = parse_choice(f, v, {"fixed", "learned", "none"});
    c.weighted_pooling = w == "fixed"     ? WeightedPooling::Fixed
                         : w == "learned" ? WeightedPooling::Learned
                                          : WeightedPooling::None;
  });
}

// Embedding table tricks flags.
void add_table_trick_flags(FlagTable& t) {
  t["--md-flag"] = STRATA_TRUE_FLAG(md_flag);
  t["--md-threshold"] = STRATA_INT_FLAG(md_threshold, 0, int64_t{1} << 40);
  t["--md-temperature"] = STRATA_REAL_FLAG(md_temperature);
  t["--md-round-dims"] = STRATA_TRUE_FLAG(md_round_dims);
  t["--qr-flag"] = STRATA_TRUE_FLAG(qr_flag);
  t["--qr-threshold"] = STRATA_INT_FLAG(qr_threshold, 0, int64_t{1} << 40);
  t["--qr-operation"] = value([](DLRMConfig& c, const std::string& f, const std::string& v) {
    const std::string op = parse_choice(f, v, {"mult", "add", "concat"});
    c.qr_operation = op == "mult" ? QROperation::Mult : op == "add" ? QROperation::Add : QROperation::Concat;
  });
  t["--qr-collisions"] = STRATA_INT_FLAG(qr_collisions, 1, int64_t{1} << 40);
  t["--activation-function"] = value([](DLRMConfig& c, const std::string& f, const std::string& v) {
    c.activation_function = parse_choice(f, v, {"relu"});
  });
}

// Loss flags.
void add_loss_flags(FlagTable& t) {
  t["--loss-function"] = value([](DLRMConfig& c, const std::string& f, const std::string& v) {
    const std::string s = parse_choice(f, v, {"mse", "bce", "wbce"});
    c.loss_function = s == "mse" ? LossFunction::MSE : s == "bce" ? LossFunction::BCE : LossFunction::WBCE;
  });
  t["--loss-weights"] =
      value([](DLRMConfig& c, const std::string& f, const std::string& v) { c.loss_weights = parse_floats(f, v); });
  t["--loss-threshold"] = STRATA_REAL_FLAG(loss_threshold);
  t["--round-targets"] = STRATA_BOOL_FLAG(round_targets);
}

// Data flags.
void add_data_flags(FlagTable& t) {
  t["--data-size"] = STRATA_INT_FLAG(data_size, 1, kBig);
  t["--num-batches"] = STRATA_INT_FLAG(num_batches, 0, kBig);
  t["--data-generation"] = value([](DLRMConfig& c, const std::string& f, const std::string& v) {
    const std::string s = parse_choice(f, v, {"random", "synthetic", "dataset", "zipf", "click"});
    c.data_generation = s == "random"      ? DataGeneration::Random
                        : s == "synthetic" ? DataGeneration::Synthetic
                        : s == "dataset"   ? DataGeneration::Dataset
                        : s == "zipf"      ? DataGeneration::Zipf
                                           : DataGeneration::Click;
  });
  t["--rand-data-dist"] = value([](DLRMConfig& c, const std::string& f, const std::string& v) {
    c.rand_data_dist = parse_choice(f, v, {"uniform", "gaussian"});
  });
  t["--rand-data-min"] = STRATA_REAL_FLAG(rand_data_min);
  t["--rand-data-max"] = STRATA_REAL_FLAG(rand_data_max);
  t["--rand-data-mu"] = STRATA_REAL_FLAG(rand_data_mu);
  t["--rand-data-sigma"] = STRATA_REAL_FLAG(rand_data_sigma);
  t["--data-trace-file"] = STRATA_STRING_FLAG(data_trace_file);
  t["--data-trace-enable-padding"] = STRATA_BOOL_FLAG(data_trace_enable_padding);
  t["--data-set"] = value([](DLRMConfig& c, const std::string& f, const std::string& v) {
    c.data_set = parse_choice(f, v, {"kaggle", "terabyte"});
  });
  t["--raw-data-file"] = STRATA_STRING_FLAG(raw_data_file);
  t["--processed-data-file"] = STRATA_STRING_FLAG(processed_data_file);
  t["--data-randomize"] = value([](DLRMConfig& c, const std::string& f, const std::string& v) {
    c.data_randomize = parse_choice(f, v, {"total", "day", "none"});
  });
  t["--max-ind-range"] = STRATA_INT_FLAG(max_ind_range, -1, kBig);
  t["--data-sub-sample-rate"] = value([](DLRMConfig& c, const std::string& f, const std::string& v) {
    const double x = parse_real(f, v);
    STRATA_CHECK(x >= 0 && x <= 1, f, ": expected a fraction in [0, 1] (the share of label-0 lines dropped), got ",
                 quote_field(v));
    c.data_sub_sample_rate = x;
  });
  t["--num-indices-per-lookup"] = STRATA_INT_FLAG(num_indices_per_lookup, 1, 1 << 24);
  t["--num-indices-per-lookup-fixed"] = STRATA_BOOL_FLAG(num_indices_per_lookup_fixed);
  t["--num-workers"] = STRATA_INT_FLAG(num_workers, 0, 1 << 16);
  t["--memory-map"] = STRATA_TRUE_FLAG(memory_map);
  t["--dataset-multiprocessing"] = STRATA_TRUE_FLAG(dataset_multiprocessing);
  t["--mlperf-bin-loader"] = STRATA_TRUE_FLAG(mlperf_bin_loader);
}

// Training flags.
void add_training_flags(FlagTable& t) {
  t["--mini-batch-size"] = STRATA_INT_FLAG(mini_batch_size, 1, int64_t{1} << 26);
  t["--nepochs"] = STRATA_INT_FLAG(nepochs, 0, kBig);
  t["--learning-rate"] = STRATA_REAL_FLAG(learning_rate);
  t["--optimizer"] = value([](DLRMConfig& c, const std::string& f, const std::string& v) {
    const std::string s = parse_choice(f, v, {"sgd", "adagrad", "rwsadagrad"});
    c.optimizer = s == "sgd"       ? OptimizerKind::SGD
                  : s == "adagrad" ? OptimizerKind::Adagrad
                                   : OptimizerKind::RowWiseAdagrad;
  });
  t["--print-precision"] = STRATA_INT_FLAG(print_precision, 0, 64);
  t["--numpy-rand-seed"] = STRATA_INT_FLAG(numpy_rand_seed, 0, (int64_t{1} << 32) - 1);
  t["--sync-dense-params"] = STRATA_BOOL_FLAG(sync_dense_params);
  t["--inference-only"] = STRATA_TRUE_FLAG(inference_only);
  t["--lr-num-warmup-steps"] = STRATA_INT_FLAG(lr_num_warmup_steps, 0, kBig);
  t["--lr-decay-start-step"] = STRATA_INT_FLAG(lr_decay_start_step, 0, kBig);
  t["--lr-num-decay-steps"] = STRATA_INT_FLAG(lr_num_decay_steps, 0, kBig);
}

// Reporting flags.
void add_reporting_flags(FlagTable& t) {
  t["--print-freq"] = STRATA_INT_FLAG(print_freq, 1, kBig);
  t["--test-freq"] = STRATA_INT_FLAG(test_freq, -1, kBig);
  t["--test-mini-batch-size"] = STRATA_INT_FLAG(test_mini_batch_size, -1, int64_t{1} << 26);
  t["--test-num-workers"] = STRATA_INT_FLAG(test_num_workers, -1, 1 << 16);
  t["--print-time"] = STRATA_TRUE_FLAG(print_time);
  t["--print-wall-time"] = STRATA_TRUE_FLAG(print_wall_time);
  t["--debug-mode"] = STRATA_TRUE_FLAG(debug_mode);
  t["--enable-profiling"] = STRATA_TRUE_FLAG(enable_profiling);
  t["--save-model"] = STRATA_STRING_FLAG(save_model);
  t["--load-model"] = STRATA_STRING_FLAG(load_model);
  t["--mlperf-logging"] = STRATA_TRUE_FLAG(mlperf_logging);
  t["--mlperf-acc-threshold"] = STRATA_REAL_FLAG(mlperf_acc_threshold);
  t["--mlperf-auc-threshold"] = STRATA_REAL_FLAG(mlperf_auc_threshold);
}

// Refused flags.
void add_refused_flags(FlagTable& t) {
  const std::string no = " is not supported by strata-dlrm";
  t["--use-gpu"] = refused(no + " (CPU only)");
  for (const char* f : {"--quantize-mlp-with-bit", "--quantize-emb-with-bit"}) t[f] = refused(no + " (quantization)");
  for (const char* f : {"--mlperf-bin-shuffle", "--mlperf-grad-accum-iter"})
    t[f] = refused(no + " (MLPerf shuffling and gradient accumulation)");
  t["--save-onnx"] = refused(no + " (ONNX export)");
  t["--plot-compute-graph"] = refused(no + " (graph plotting)");
  t["--local_rank"] = refused(no + ": mpirun sets the ranks (launch with mpirun -np N ... --dist-backend=mpi)");
}

// Distributed flags (Note [Distributed strata-dlrm] in embeddings/dist/dlrm_dist_run.h).
void add_distributed_flags(FlagTable& t) {
  t["--dist-backend"] = value([](DLRMConfig& c, const std::string& f, const std::string& v) {
    STRATA_CHECK(v != "gloo" && v != "ccl" && v != "nccl", f, ": backend ", quote_field(v),
                 " is not supported: Strata's only backend is mpi (launch with mpirun -np N strata-dlrm ... ", f,
                 "=mpi)");
    c.dist_backend = parse_choice(f, v, {"mpi"});
  });
  t["--dist-chunks"] = STRATA_INT_FLAG(dist_chunks, 1, int64_t{1} << 20);
}

// Strata flags.
void add_strata_flags(FlagTable& t) {
  t["--preset"] = value([](DLRMConfig&, const std::string&, const std::string&) {});  // applied first
  t["--scale-rows"] = STRATA_REAL_FLAG(scale_rows);
  t["--fast-budget"] =
      value([](DLRMConfig& c, const std::string& f, const std::string& v) { c.fast_budget = parse_bytes(v, f); });
  t["--slow-dir"] = STRATA_STRING_FLAG(slow_dir);
  t["--emb-policy"] = value([](DLRMConfig& c, const std::string& f, const std::string& v) {
    c.emb_policy = parse_choice(f, v, {"simple", "static", "dynamic", "auto"});
  });
  t["--cache-fraction"] = STRATA_REAL_FLAG(cache_fraction);
  t["--slow-tier-model"] = value([](DLRMConfig& c, const std::string& f, const std::string& v) {
    c.slow_tier_model = parse_slow_tier_model(v, f);
  });
  t["--threads"] = value([](DLRMConfig& c, const std::string& f, const std::string& v) {
    c.threads = v == "0" ? 0 : parse_num_threads(v, f);  // 0: all hardware threads
  });
  t["--zipf-alpha"] = STRATA_REAL_FLAG(zipf_alpha);
  t["--reuse"] = STRATA_REAL_FLAG(reuse);
  t["--test-data-size"] = STRATA_INT_FLAG(test_data_size, 0, kBig);
  t["--emb-dtype"] = value([](DLRMConfig& c, const std::string& f, const std::string& v) {
    try {
      c.emb_dtype = parse_elem_type(v);
    } catch (const Error&) {
      STRATA_FAIL(f, ": expected f32 or bf16, got ", quote_field(v));
    }
  });
  t["--check-finite"] = STRATA_TRUE_FLAG(check_finite);
  t["--json"] = STRATA_STRING_FLAG(json);
  t["--plot"] = STRATA_STRING_FLAG(plot);
  t["--help"] = STRATA_TRUE_FLAG(help);
  t["-h"] = STRATA_TRUE_FLAG(help);
}

const FlagTable& flag_table() {
  static const FlagTable table = [] {
    FlagTable t;
    add_architecture_flags(t);
    add_table_trick_flags(t);
    add_loss_flags(t);
    add_data_flags(t);
    add_training_flags(t);
    add_reporting_flags(t);
    add_refused_flags(t);
    add_distributed_flags(t);
    add_strata_flags(t);
    return t;
  }();
  return table;
}

#undef STRATA_INT_FLAG
#undef STRATA_REAL_FLAG
#undef STRATA_BOOL_FLAG
#undef STRATA_STRING_FLAG
#undef STRATA_TRUE_FLAG

const std::vector<int64_t> kKaggleRows = {1460,  583,  10131227, 2202608, 305, 24,     12517,   633,   3,
                                          93145, 5683, 8351593,  3194,    27,  14992,  5461306, 10,    5652,
                                          2173,  4,    7046547,  18,      15,  286181, 105,     142572};

/// The flag name and inline value of argument `a` ("--x=1" -> "--x", "1", true).
void split_flag(const std::string& a, std::string& name, std::string& inline_value, bool& has_inline) {
  const std::size_t eq = a.find('=');
  has_inline = a.rfind("--", 0) == 0 && eq != std::string::npos;
  name = has_inline ? a.substr(0, eq) : a;
  inline_value = has_inline ? a.substr(eq + 1) : std::string();
}

std::string join(const std::vector<int64_t>& v) {
  std::ostringstream os;
  for (std::size_t i = 0; i < v.size(); ++i) os << (i ? "-" : "") << v[i];
  return os.str();
}

}  // namespace

const char* to_string(DataGeneration g) {
  switch (g) {
    case DataGeneration::Random: return "random";
    case DataGeneration::Synthetic: return "synthetic";
    case DataGeneration::Dataset: return "dataset";
    case DataGeneration::Zipf: return "zipf";
    case DataGeneration::Click: return "click";
  }
  return "?";
}
const char* to_string(LossFunction l) {
  return l == LossFunction::MSE ? "mse" : l == LossFunction::BCE ? "bce" : "wbce";
}
const char* to_string(OptimizerKind o) {
  return o == OptimizerKind::SGD ? "sgd" : o == OptimizerKind::Adagrad ? "adagrad" : "rwsadagrad";
}
const char* to_string(InteractionOp op) { return op == InteractionOp::Dot ? "dot" : "cat"; }
const char* to_string(QROperation op) {
  return op == QROperation::Mult ? "mult" : op == QROperation::Add ? "add" : "concat";
}
const char* to_string(WeightedPooling w) {
  return w == WeightedPooling::Fixed ? "fixed" : w == WeightedPooling::Learned ? "learned" : "none";
}

namespace {

/// The reference's md_solver(n, alpha, d0, round_dim) with k = 1 (tricks/md_embedding_bag.py), in
/// float32 as torch computes it: with the rows sorted ascending, lambda = d0 · n_0^alpha, the
/// smallest table gets d0 and table i round(max(1, lambda · n_i^-alpha)) (half to even); with
/// round_dim each becomes 2^round(log2(d)).
std::vector<int64_t> md_solver(const std::vector<int64_t>& rows, double alpha, int64_t d0, bool round_dim) {
  std::vector<std::size_t> order(rows.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return rows[a] < rows[b]; });
  const auto a = static_cast<float>(alpha);
  const float lambda = static_cast<float>(d0) * std::pow(static_cast<float>(rows[order[0]]), a);
  std::vector<int64_t> dims(rows.size());
  for (std::size_t s = 0; s < order.size(); ++s) {
    float d = static_cast<float>(d0);
    if (s > 0) d = std::max(1.0f, lambda * std::pow(static_cast<float>(rows[order[s]]), -a));
    d = std::nearbyint(d);
    if (round_dim) d = std::exp2(std::nearbyint(std::log2(d)));
    dims[order[s]] = static_cast<int64_t>(d);
  }
  return dims;
}

}  // namespace

int64_t DLRMConfig::feature_width() const {
  return qr_flag && qr_operation == QROperation::Concat ? 2 * arch_sparse_feature_size : arch_sparse_feature_size;
}

std::vector<int64_t> DLRMConfig::table_dims() const {
  const std::vector<int64_t> rows = table_rows();
  std::vector<int64_t> dims(rows.size(), arch_sparse_feature_size);
  if (!md_flag) return dims;
  const std::vector<int64_t> md = md_solver(rows, md_temperature, arch_sparse_feature_size, md_round_dims);
  for (std::size_t k = 0; k < rows.size(); ++k)
    if (is_md_table(rows[k])) dims[k] = md[k];
  return dims;
}

std::vector<int64_t> DLRMConfig::table_rows() const {
  std::vector<int64_t> rows;
  for (int64_t n : arch_embedding_size) {
    int64_t r = n;
    if (data_generation == DataGeneration::Dataset && max_ind_range > 0) r = std::min(r, max_ind_range);
    if (scale_rows != 1.0) r = std::max<int64_t>(1, std::llround(static_cast<double>(r) * scale_rows));
    rows.push_back(r);
  }
  return rows;
}

int64_t DLRMConfig::interaction_width() const {
  return nn::zoo::interaction_width(static_cast<int64_t>(arch_embedding_size.size()), feature_width(),
                                    to_string(arch_interaction_op), arch_interaction_itself);
}

std::vector<DLRMConfig::StoredTable> DLRMConfig::stored_tables() const {
  const std::vector<int64_t> rows = table_rows();
  const std::vector<int64_t> dims = table_dims();
  std::vector<StoredTable> out;
  for (std::size_t k = 0; k < rows.size(); ++k) {
    const auto f = static_cast<int64_t>(k);
    if (is_qr_table(rows[k])) {
      out.push_back({f, 0, (rows[k] + qr_collisions - 1) / qr_collisions, arch_sparse_feature_size});
      out.push_back({f, 1, qr_collisions, arch_sparse_feature_size});
    } else {
      out.push_back({f, 0, rows[k], dims[k]});
    }
  }
  return out;
}

std::size_t DLRMConfig::table_bytes() const {
  std::size_t total = 0;
  for (const StoredTable& t : stored_tables())
    total += static_cast<std::size_t>(t.rows) * static_cast<std::size_t>(t.dim) * elem_size(emb_dtype);
  return total;
}

int64_t DLRMConfig::batches_per_epoch() const {
  if (num_batches > 0) return num_batches;
  return (data_size + mini_batch_size - 1) / mini_batch_size;
}

std::vector<std::string> dlrm_flag_names() {
  std::vector<std::string> names;
  for (const auto& [name, flag] : flag_table()) names.push_back(name);
  return names;
}

bool dlrm_flag_is_store_true(const std::string& flag) {
  const auto it = flag_table().find(flag);
  return it != flag_table().end() && it->second.kind == Flag::Kind::StoreTrue;
}

std::vector<std::string> dlrm_preset_names() { return {"tiny", "random-bench", "kaggle", "mlperf40M", "default"}; }

void apply_dlrm_preset(DLRMConfig& c, std::string_view name) {
  if (name == "tiny") {
    // The reference's defaults.
  } else if (name == "random-bench") {
    // facebookresearch/dlrm bench/dlrm_s_benchmark.sh.
    c.arch_embedding_size.assign(8, 1000000);
    c.arch_sparse_feature_size = 64;
    c.arch_mlp_bot = {512, 512, 64};
    c.arch_mlp_top = {1024, 1024, 1024, 1};
    c.num_indices_per_lookup = 100;
    c.mini_batch_size = 2048;
    c.num_batches = 1000;
    c.numpy_rand_seed = 727;
    c.print_freq = 100;
    c.print_time = true;
  } else if (name == "kaggle") {
    // bench/dlrm_s_criteo_kaggle.sh on the Kaggle tables (33.76M rows); random indices, one per
    // table and sample, unless --data-generation dataset reads the real files.
    c.arch_embedding_size = kKaggleRows;
    c.arch_sparse_feature_size = 16;
    c.arch_mlp_bot = {13, 512, 256, 64, 16};
    c.arch_mlp_top = {512, 256, 1};
    c.data_set = "kaggle";
    c.loss_function = LossFunction::BCE;
    c.round_targets = true;
    c.learning_rate = 0.1;
    c.mini_batch_size = 128;
    c.num_indices_per_lookup = 1;
    c.num_indices_per_lookup_fixed = true;
    c.num_batches = 1000;
    c.print_freq = 100;
    c.print_time = true;
  } else if (name == "mlperf40M") {
    // bench/run_and_time.sh (MLPerf, Terabyte tables capped at 40M rows: 204.18M rows, 104.5 GB).
    c.arch_embedding_size = criteo_mlperf_rows();
    c.arch_sparse_feature_size = 128;
    c.arch_mlp_bot = {13, 512, 256, 128};
    c.arch_mlp_top = {1024, 1024, 512, 256, 1};
    c.max_ind_range = 40000000;
    c.data_set = "terabyte";
    c.loss_function = LossFunction::BCE;
    c.round_targets = true;
    c.learning_rate = 1.0;
    c.mini_batch_size = 2048;
    c.num_indices_per_lookup = 1;
    c.num_indices_per_lookup_fixed = true;
    c.num_batches = 100;
    c.print_freq = 10;
    c.print_time = true;
  } else if (name == "default") {
    // The README's main job: tables 4x the fast budget, the slow tier on the model, click data
    // (Note [Click data]: Zipf ids, so the DRAM cache matters, and labels a model can learn), one
    // id per table and sample like Criteo; rwsadagrad at 0.03 reached test AUC 0.75 in 200-400
    // steps for seeds 1, 7, 42, 123 (0.07 diverges; sgd needs ~800 steps at lr 0.5-1.0).
    c.arch_embedding_size.assign(8, 131072);  // 256-byte rows, 256 MiB in all
    c.arch_sparse_feature_size = 64;
    c.arch_mlp_bot = {16, 128, 64};
    c.arch_mlp_top = {256, 64, 1};
    c.data_generation = DataGeneration::Click;
    c.zipf_alpha = 1.05;
    c.num_indices_per_lookup = 1;
    c.num_indices_per_lookup_fixed = true;
    c.mini_batch_size = 512;
    c.num_batches = 1500;
    c.test_data_size = 32768;
    c.test_freq = 300;  // five test passes: the AUC rising over the run
    c.optimizer = OptimizerKind::RowWiseAdagrad;
    c.learning_rate = 0.03;
    c.loss_function = LossFunction::BCE;
    c.round_targets = true;
    c.print_freq = 50;
    c.print_time = true;
    c.fast_budget = std::size_t{64} << 20;  // the tables are 256 MiB
    c.emb_policy = "auto";
  } else {
    std::string names;
    for (const auto& n : dlrm_preset_names()) names += (names.empty() ? "" : ", ") + n;
    STRATA_FAIL("--preset: unknown preset ", quote_field(name), " (expected one of ", names, ")");
  }
  c.preset = std::string(name);
}

DLRMConfig parse_dlrm_args(const std::vector<std::string>& args) {
  DLRMConfig c;
  const auto& table = flag_table();
  // Presets first, wherever they stand (Note [DLRM command line]).
  std::string preset = args.empty() ? "default" : "";
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string name, inline_value;
    bool has_inline = false;
    split_flag(args[i], name, inline_value, has_inline);
    if (name != "--preset") continue;
    if (has_inline) {
      preset = inline_value;
    } else {
      STRATA_CHECK(i + 1 < args.size(), "--preset: missing value (expected one of tiny, random-bench, kaggle, ",
                   "mlperf40M, default)");
      preset = args[++i];
    }
  }
  if (!preset.empty()) apply_dlrm_preset(c, preset);

  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    std::string name, inline_value;
    bool has_inline = false;
    split_flag(a, name, inline_value, has_inline);
    STRATA_CHECK(name.rfind("-", 0) == 0, "unexpected argument ", quote_field(a), " (flags start with --; see --help)");
    const auto it = table.find(name);
    STRATA_CHECK(it != table.end(), "unknown flag ", quote_field(name), " (see --help)");
    const Flag& flag = it->second;
    if (flag.kind == Flag::Kind::Refused) STRATA_FAIL(name, flag.refusal);
    if (flag.kind == Flag::Kind::StoreTrue) {
      STRATA_CHECK(!has_inline, name, ": takes no value (got ", quote_field(inline_value), ")");
      flag.set(c, name, "");
      continue;
    }
    std::string v;
    if (has_inline) {
      v = inline_value;
    } else {
      STRATA_CHECK(i + 1 < args.size(), name, ": missing value");
      v = args[++i];
    }
    flag.set(c, name, v);
  }
  if (!c.help) validate(c);
  return c;
}

namespace {

/// --data-generation dataset: the files that must exist, and the row counts when they are given
/// (Note [Criteo preprocessing] in embeddings/criteo_dataset.h).
void validate_dataset_flags(const DLRMConfig& c) {
  STRATA_CHECK(!c.raw_data_file.empty() || !c.processed_data_file.empty(),
               "--data-generation dataset: give --raw-data-file (Criteo's raw text: kaggle's train.txt, or the ",
               "terabyte day_0..day_23 prefix) or --processed-data-file (the processed .npz)");
  std::error_code ec;
  if (!c.raw_data_file.empty()) {
    // Terabyte's raw path is the prefix of day files <raw>_0 .. <raw>_23.
    const std::string first = c.data_set == "terabyte" ? c.raw_data_file + "_0" : c.raw_data_file;
    const bool needed = c.processed_data_file.empty() || !std::filesystem::exists(c.processed_data_file, ec);
    if (needed) check_readable_file(first, "--raw-data-file");  // Note [Opening files named by the user]
  }
  if (!c.processed_data_file.empty() && !c.mlperf_bin_loader &&
      (c.raw_data_file.empty() || std::filesystem::exists(c.processed_data_file, ec)))
    check_readable_file(c.processed_data_file, "--processed-data-file");
  if (c.arch_embedding_size_given)
    STRATA_CHECK(static_cast<int64_t>(c.arch_embedding_size.size()) == kCriteoSparse,
                 "--arch-embedding-size: --data-generation dataset reads Criteo's ", kCriteoSparse,
                 " categorical features: give ", kCriteoSparse, " row counts (or leave it out: the rows are the ",
                 "data's counts), got ", c.arch_embedding_size.size());
}

/// --qr-*, --md-* and --weighted-pooling learned (Note [DLRM table kinds] in dlrm.h).
void validate_table_tricks(const DLRMConfig& c) {
  // The reference refuses these combinations too (dlrm_s_pytorch.py run()).
  if (c.weighted_pooling != WeightedPooling::None) {
    STRATA_CHECK(!c.qr_flag, "--qr-flag: quotient-remainder embeddings with --weighted-pooling ",
                 to_string(c.weighted_pooling), " are not supported (as in the reference)");
    STRATA_CHECK(!c.md_flag, "--md-flag: mixed-dimension embeddings with --weighted-pooling ",
                 to_string(c.weighted_pooling), " are not supported (as in the reference)");
  }
  STRATA_CHECK(!(c.qr_flag && c.md_flag), "--qr-flag and --md-flag: choose one (a table is either a quotient-",
               "remainder or a mixed-dimension table)");
  const std::vector<int64_t> rows = c.table_rows();
  if (c.qr_flag && c.qr_operation == QROperation::Concat)
    for (std::size_t k = 0; k < rows.size(); ++k)
      STRATA_CHECK(c.is_qr_table(rows[k]), "--qr-threshold ", c.qr_threshold, ": with --qr-operation concat every ",
                   "table must be a quotient-remainder table (its feature is 2d wide), but table ", k, " has only ",
                   rows[k], " rows");
  if (c.md_flag) {
    STRATA_CHECK(c.md_temperature >= 0 && std::isfinite(c.md_temperature),
                 "--md-temperature: must be a non-negative number, got ", c.md_temperature);
    const std::vector<int64_t> dims = c.table_dims();
    for (std::size_t k = 0; k < dims.size(); ++k)
      STRATA_CHECK(dims[k] <= c.arch_sparse_feature_size, "--md-round-dims: table ", k, " would get dimension ",
                   dims[k], ", more than --arch-sparse-feature-size ", c.arch_sparse_feature_size,
                   " (rounding d to a power of 2 rounded it up); use a power of 2 for d or drop --md-round-dims");
  }
}

}  // namespace

void validate(const DLRMConfig& c) {
  const int64_t d = c.arch_sparse_feature_size;
  STRATA_CHECK(d >= 1, "--arch-sparse-feature-size: must be positive, got ", d);
  STRATA_CHECK(!c.arch_embedding_size.empty(), "--arch-embedding-size: at least one table is needed");
  STRATA_CHECK(c.arch_mlp_bot.size() >= 2, "--arch-mlp-bot: \"", join(c.arch_mlp_bot),
               "\" needs at least two widths (the dense features and the bottom MLP's output)");
  if (c.qr_flag && c.qr_operation == QROperation::Concat)
    STRATA_CHECK(c.arch_mlp_bot.back() == 2 * d, "--arch-mlp-bot: the last width (", c.arch_mlp_bot.back(),
                 ") must be 2 x --arch-sparse-feature-size (", 2 * d, ") with --qr-operation concat: each ",
                 "quotient-remainder feature is its two d-wide lookups side by side");
  else
    STRATA_CHECK(c.arch_mlp_bot.back() == d, "--arch-mlp-bot: the last width (", c.arch_mlp_bot.back(),
                 ") must equal --arch-sparse-feature-size (", d, "): the bottom MLP's output is the dense feature ",
                 "vector the interaction combines with the embeddings");
  validate_table_tricks(c);
  if (c.data_generation == DataGeneration::Dataset)
    STRATA_CHECK(c.arch_mlp_bot.front() == 13, "--arch-mlp-bot: the first width (", c.arch_mlp_bot.front(),
                 ") must equal the dataset's 13 dense features (--data-generation dataset)");
  STRATA_CHECK(c.arch_mlp_top.back() == 1, "--arch-mlp-top: the last width (", c.arch_mlp_top.back(),
               ") must be 1: the top MLP outputs one click probability per sample");
  STRATA_CHECK(c.learning_rate >= 0, "--learning-rate: must be non-negative, got ", c.learning_rate);
  STRATA_CHECK(c.loss_threshold >= 0 && c.loss_threshold < 1, "--loss-threshold: must lie in [0, 1), got ",
               c.loss_threshold);
  if (c.loss_function == LossFunction::WBCE) {
    STRATA_CHECK(c.loss_weights.size() >= 2, "--loss-weights: wbce needs a weight for targets 0 and 1 (\"w0-w1\"), ",
                 "got ", c.loss_weights.size(), " value(s)");
    for (double w : c.loss_weights) STRATA_CHECK(w >= 0, "--loss-weights: weights must be non-negative, got ", w);
  }
  if (c.rand_data_dist == "uniform")
    STRATA_CHECK(c.rand_data_min <= c.rand_data_max, "--rand-data-min (", c.rand_data_min,
                 ") must not exceed --rand-data-max (", c.rand_data_max, ")");
  else
    STRATA_CHECK(c.rand_data_sigma > 0, "--rand-data-sigma: must be positive, got ", c.rand_data_sigma);
  if (c.lr_num_decay_steps > 0)
    STRATA_CHECK(c.lr_decay_start_step >= c.lr_num_warmup_steps, "--lr-decay-start-step (", c.lr_decay_start_step,
                 "): learning rate warmup (--lr-num-warmup-steps ", c.lr_num_warmup_steps,
                 ") must finish before the decay starts");
  STRATA_CHECK(c.scale_rows > 0 && c.scale_rows <= 1, "--scale-rows: expected a fraction in (0, 1], got ",
               c.scale_rows);
  STRATA_CHECK(c.fast_budget > 0, "--fast-budget: must be positive");
  STRATA_CHECK(!c.dist_backend.empty() || c.dist_chunks == DLRMConfig{}.dist_chunks,
               "--dist-chunks: applies only to a distributed run (--dist-backend=mpi)");
  STRATA_CHECK(c.cache_fraction < 0 || (c.cache_fraction > 0 && c.cache_fraction <= 1),
               "--cache-fraction: expected a fraction in (0, 1], got ", c.cache_fraction);
  STRATA_CHECK(c.zipf_alpha > 0, "--zipf-alpha: must be positive, got ", c.zipf_alpha);
  STRATA_CHECK(c.reuse >= 0 && c.reuse < 1, "--reuse: expected a fraction in [0, 1), got ", c.reuse);
  if (c.data_generation == DataGeneration::Dataset) validate_dataset_flags(c);
  if (c.data_generation == DataGeneration::Synthetic)
    for (std::size_t k = 0; k < c.arch_embedding_size.size(); ++k) {
      const std::string path = trace_file_for_table(c.data_trace_file, static_cast<int64_t>(k));
      const std::string why = file_unreadable_reason(path);
      STRATA_CHECK(why.empty(), "--data-trace-file: table ", k, ": cannot open ", quote_path(path), " (", why,
                   "; 'j' in the file name stands for the table number)");
    }
  std::error_code ec;
  // One process's checkpoint is a file; a distributed run's is a directory, which that run checks
  // (check_distributed_checkpoint_paths, embeddings/dist/dlrm_dist_run.h).
  if (!c.save_model.empty() && c.dist_backend.empty())
    STRATA_CHECK(!std::filesystem::is_directory(c.save_model, ec), "--save-model: ", quote_path(c.save_model),
                 " is a directory (expected a file name)");
  if (!c.load_model.empty() && c.dist_backend.empty()) check_readable_file(c.load_model, "--load-model");
  STRATA_CHECK(c.slow_dir.empty() || std::filesystem::is_directory(c.slow_dir, ec),
               "--slow-dir: ", quote_path(c.slow_dir), " is not a directory");
}

std::string dlrm_usage() {
  return R"(usage: strata-dlrm [--preset NAME] [flags of dlrm_s_pytorch.py] [Strata flags]

Trains the DLRM of facebookresearch/dlrm (dlrm_s_pytorch.py) with its embedding tables in tiered
memory. Flags take '--flag value' or '--flag=value'. With no arguments, runs the embedded default
job (--preset default). Presets apply first; later flags override them.

Architecture (reference defaults):
  --arch-sparse-feature-size N  (2)        embedding dimension d
  --arch-embedding-size R1-R2-...  (4-3-2) rows per table
  --arch-mlp-bot W0-...-d  (4-3-2)         bottom MLP; the last width must equal d
  --arch-mlp-top W-...-1  (4-2-1)          top MLP after the interaction (its input width is added)
  --arch-interaction-op dot|cat  (dot)
  --arch-interaction-itself                keep the diagonal of the dot interaction
  --weighted-pooling fixed|learned         per-sample weights of one, or trainable per-row weights
Embedding tables (the reference's tricks; not with --weighted-pooling):
  --qr-flag  --qr-threshold N (200)  --qr-operation mult|add|concat (mult)  --qr-collisions C (4)
                                         tables of more than N rows: quotient (ceil(rows/C) rows) and
                                         remainder (C rows) tables, combined; concat: --arch-mlp-bot
                                         must end in 2d
  --md-flag  --md-threshold N (200)  --md-temperature A (0.3)  --md-round-dims
                                         tables of more than N rows: the md_solver dimension and a
                                         bias-free projection to d
  --activation-function relu  (relu)
Loss and optimizer:
  --loss-function mse|bce|wbce  (mse)     --loss-weights W0-W1 (1.0-1.0, wbce)
  --loss-threshold T  (0.0)               clamp the output into [T, 1-T] when 0 < T < 1
  --round-targets True|False  (False)
  --optimizer sgd|adagrad|rwsadagrad  (sgd)  applied as the reference does: one optimizer for all
                                         parameters; rwsadagrad is row-wise on the tables and
                                         element-wise Adagrad on the MLPs
  --learning-rate LR  (0.01)   --lr-num-warmup-steps, --lr-decay-start-step, --lr-num-decay-steps (0)
Data:
  --data-generation random|synthetic|dataset|zipf|click  (random; click: Zipf ids with labels from a
                                         hidden model, a train and a test split)
  --data-size N  (1)   --num-batches N  (0: ceil(data-size / mini-batch-size))   --nepochs N  (1)
  --mini-batch-size B  (1)   --num-indices-per-lookup L  (10)   --num-indices-per-lookup-fixed True|False
  --rand-data-dist uniform|gaussian  (uniform)  --rand-data-min/-max (0/1)  --rand-data-mu/-sigma (-1/1)
  --data-trace-file PATH  (./input/dist_emb_j.log; 'j' is the table number)  --data-trace-enable-padding
  --data-set kaggle|terabyte  (kaggle)
  --raw-data-file PATH         Criteo raw text (kaggle: train.txt; terabyte: PATH_0..PATH_23),
                               preprocessed as the reference's data_utils when the processed file
                               is missing (its day and feature counts are written beside it)
  --processed-data-file NPZ    (<raw dir>/kaggleAdDisplayChallenge_processed.npz) the processed
                               arrays; table rows are its counts unless --arch-embedding-size is given
                               (a 40 x int32 binary here is read as is, with --arch-embedding-size)
  --max-ind-range N  (-1)      hashes mod N before the dictionaries; rows capped at N
  --data-sub-sample-rate R  (0)  drop label-0 lines with probability R while preprocessing
  --data-randomize total|day|none  (total)  the train split's shuffle (the reference's numpy draws)
  --memory-map                 map the processed arrays instead of reading them (written uncompressed)
  --mlperf-bin-loader          read <processed stem>_train.bin / _test.bin (40 x int32), written from
                               the split when missing; counts from <raw>_fea_count.npz
  --test-mini-batch-size B  (-1: --mini-batch-size)  batches of the test split
  --numpy-rand-seed S  (123)
  Accepted with no effect in one process: --num-workers, --dataset-multiprocessing (preprocessing is
  parallel anyway), --sync-dense-params, --test-num-workers, --print-precision.
Reporting:
  --print-freq N  (1)   --print-time   --print-wall-time   --debug-mode   --enable-profiling
  --test-freq N  (-1)   test every N iterations (and at the end of every epoch); without it, data
                        with a test split (dataset, click) is tested at the end of every epoch
  --test-mini-batch-size B  (-1: --mini-batch-size)
  --mlperf-logging      also print AUC in the test lines (the reference's sklearn metrics)
  --mlperf-acc-threshold A, --mlperf-auc-threshold X  (0)  with --mlperf-logging: stop training
                        once the best test accuracy (fraction) or AUC exceeds it
  --inference-only      one test pass (with --load-model: of the saved model)
  --save-model FILE     save when the test accuracy (AUC with --mlperf-logging) improves, and at
                        the end of a run without testing   --load-model FILE  resume from FILE
Refused: --use-gpu, --quantize-*, --mlperf-bin-shuffle, --mlperf-grad-accum-iter,
  --save-onnx, --plot-compute-graph, --local_rank (mpirun sets the ranks).

Distributed (mpirun -np N strata-dlrm ... --dist-backend=mpi; README "Distributed training"):
  --dist-backend mpi    hybrid-parallel training over every rank: tables sharded by the planner
                        (each rank holds at most --fast-budget of rows, all in DRAM), MLPs data-
                        parallel; every rank reads the same global batches; rank 0 prints. Losses
                        and metrics are bitwise the same at any rank count. gloo/ccl/nccl refused.
                        --save-model/--load-model take a directory that reshards (saved at N
                        ranks, resumed at any M). The --loss-* flags and the --lr-* schedule
                        act as in one process. Not supported yet (refused): --md-flag,
                        --qr-flag, --weighted-pooling, --arch-interaction-itself, --emb-dtype
                        bf16, --emb-policy (but auto), --cache-fraction, --check-finite,
                        --enable-profiling. --slow-dir DIR gives rank R the slow tier DIR/rank-R/
                        (created) for evicted tensors; the tables never go there.
  --dist-chunks C  (8)  the global batch's fixed chunks (at least the rank count)

Strata:
  --preset tiny|random-bench|kaggle|mlperf40M|default
  --scale-rows F  (1)          multiply every table's rows by F in (0, 1] (large presets)
  --fast-budget BYTES  (1G; K/M/G suffixes)  DRAM for embedding rows (tables and caches); the
                               process's fast tier is this plus the dense layers' working set
  --slow-dir DIR  (STRATA_SLOW_DIR, else /tmp)  directory of the process's file-backed slow tier
  --emb-policy simple|static|dynamic|auto  (auto)
  --cache-fraction F           rows each cached table may hold (default: from the fast budget)
  --slow-tier-model auto|off|default|R,W,L  (auto: STRATA_SLOW_MODEL, else Optane ratios to this
                               machine's DRAM bandwidth unless the slow tier is a real device)
  --emb-dtype f32|bf16  (f32)  --threads N  (all)  --zipf-alpha A  (1.05)  --reuse F  (0)
  --test-data-size N  (0: a tenth of the training samples)  samples of the click data's test split
  --check-finite               after every step check the loss, the MLP parameters and the rows
                               the step updated for NaN/inf; stop at the first (exit status 1)
  --json FILE                  write the summary as JSON (atomically)
  --plot FILE.png              draw the train loss and the test accuracy and AUC over iterations
)";
}

std::string describe(const DLRMConfig& c) {
  std::ostringstream os;
  const auto rows = c.table_rows();
  int64_t total_rows = 0;
  for (int64_t r : rows) total_rows += r;
  os << "DLRM" << (c.preset.empty() ? "" : " (preset " + c.preset + ")") << ": " << rows.size() << " tables, "
     << total_rows << " rows of d=" << c.arch_sparse_feature_size << " " << elem_name(c.emb_dtype) << " ("
     << format_bytes(static_cast<double>(c.table_bytes())) << "), bottom MLP " << join(c.arch_mlp_bot) << ", top MLP "
     << c.interaction_width() << "-" << join(c.arch_mlp_top) << ", " << to_string(c.arch_interaction_op)
     << " interaction; data " << to_string(c.data_generation);
  if (c.data_generation == DataGeneration::Zipf) os << "(alpha " << c.zipf_alpha << ", reuse " << c.reuse << ")";
  if (c.data_generation == DataGeneration::Click) os << "(alpha " << c.zipf_alpha << ")";
  os << ", batch " << c.mini_batch_size << ", " << c.num_indices_per_lookup
     << (c.num_indices_per_lookup_fixed ? "" : " max") << " lookups per table; loss " << to_string(c.loss_function)
     << ", optimizer " << to_string(c.optimizer) << " lr " << c.learning_rate << "; embeddings: policy " << c.emb_policy
     << ", fast budget " << format_bytes(static_cast<double>(c.fast_budget));
  // Note [DLRM table kinds]
  if (c.qr_flag)
    os << "; quotient-remainder tables above " << c.qr_threshold << " rows (" << to_string(c.qr_operation) << ", "
       << c.qr_collisions << " collisions)";
  if (c.md_flag) os << "; mixed dimensions " << join(c.table_dims()) << " (tables above " << c.md_threshold << " rows)";
  if (c.weighted_pooling != WeightedPooling::None) os << "; " << to_string(c.weighted_pooling) << " pooling weights";
  return os.str();
}

}  // namespace strata::emb
