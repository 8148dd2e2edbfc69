// TieredDLRM's checkpoints (Note [DLRM checkpoints] in dlrm.h) and DLRMTrainState.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "core/error.h"
#include "core/file.h"
#include "core/text.h"
#include "embeddings/dlrm.h"

namespace strata::emb {

namespace {

constexpr const char* kFormat = "strata-dlrm";
constexpr const char* kFormatVersion = "1";

std::string join(const std::vector<int64_t>& v) {
  std::ostringstream os;
  for (std::size_t i = 0; i < v.size(); ++i) os << (i ? "-" : "") << v[i];
  return os.str();
}

std::string sum_key(std::size_t k) { return "sparse." + std::to_string(k) + ".sum"; }
std::string pooling_sum_key(int64_t k) { return "sparse.v_W_l." + std::to_string(k) + ".sum"; }

/// Note [DLRM table kinds]: the table tricks in use (none: nothing, so older checkpoints load).
void add_table_kinds(CheckpointMetadata& m, const DLRMConfig& c) {
  if (c.qr_flag)
    m.emplace_back("qr", std::string(to_string(c.qr_operation)) + " threshold " + std::to_string(c.qr_threshold) +
                             " collisions " + std::to_string(c.qr_collisions));
  if (c.md_flag) m.emplace_back("md", "dims " + join(c.table_dims()));
  if (c.weighted_pooling == WeightedPooling::Learned) m.emplace_back("weighted_pooling", "learned");
}

CheckpointMetadata arch_metadata(const DLRMConfig& c, const std::vector<int64_t>& rows) {
  return {{"format", kFormat},
          {"format_version", kFormatVersion},
          {"arch_embedding_size", join(rows)},
          {"arch_sparse_feature_size", std::to_string(c.arch_sparse_feature_size)},
          {"arch_mlp_bot", join(c.arch_mlp_bot)},
          {"arch_mlp_top", join(c.arch_mlp_top)},
          {"arch_interaction_op", to_string(c.arch_interaction_op)},
          {"arch_interaction_itself", c.arch_interaction_itself ? "1" : "0"},
          {"optimizer", to_string(c.optimizer)},
          {"emb_dtype", elem_name(c.emb_dtype)}};
}

const std::string* meta_find(const CheckpointMetadata& m, std::string_view key) {
  for (const auto& [k, v] : m)
    if (k == key) return &v;
  return nullptr;
}

/// The whole of `text` as an integer, or nullopt.
std::optional<int64_t> parse_int(const std::string& text) {
  int64_t v = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || ptr != text.data() + text.size()) return std::nullopt;
  return v;
}

/// The whole of `text` as a double (inf and nan included), or nullopt.
std::optional<double> parse_double(const std::string& text) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size()) return std::nullopt;
  return v;
}

std::string exact(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

/// Calls fn(first_row, rows, buffer) for the consecutive chunks of `table`'s rows that fit
/// `chunk_bytes` of f32 (one row at least); `buffer` holds rows × featuresize floats.
template <typename Fn>
void for_each_row_chunk(const Table& table, std::size_t chunk_bytes, std::vector<float>& buffer, Fn&& fn) {
  const int64_t d = table.featuresize(), n = table.nvectors();
  const int64_t chunk_rows =
      std::max<int64_t>(1, static_cast<int64_t>(chunk_bytes / (static_cast<std::size_t>(d) * sizeof(float))));
  buffer.resize(static_cast<std::size_t>(std::min(n, chunk_rows) * d));
  for (int64_t r0 = 0; r0 < n; r0 += chunk_rows) fn(r0, std::min(chunk_rows, n - r0), buffer.data());
}

}  // namespace

void check_output_paths(const DLRMConfig& c) {
  // A distributed run's checkpoints are directories (check_distributed_checkpoint_paths).
  const bool file_checkpoints = c.dist_backend.empty();
  if (file_checkpoints && !c.save_model.empty()) check_writable_file_path(c.save_model, "--save-model");
  if (!c.json.empty()) check_writable_file_path(c.json, "--json");
  if (!c.plot.empty()) check_writable_file_path(c.plot, "--plot");
  if (file_checkpoints && !c.load_model.empty()) check_readable_file(c.load_model, "--load-model");
}

// ---- DLRMTrainState -----------------------------------------------------------------------------

CheckpointMetadata DLRMTrainState::to_metadata() const {
  return {{"epoch", std::to_string(epoch)},           {"iter", std::to_string(iter)},
          {"nbatches", std::to_string(nbatches)},     {"total_loss", exact(total_loss)},
          {"total_iter", std::to_string(total_iter)}, {"total_samp", std::to_string(total_samp)},
          {"best_acc_test", exact(best_acc_test)},    {"best_auc_test", exact(best_auc_test)}};
}

std::optional<DLRMTrainState> DLRMTrainState::from_metadata(const CheckpointMetadata& meta, const std::string& path) {
  DLRMTrainState s;
  const std::vector<std::pair<const char*, int64_t*>> ints = {{"epoch", &s.epoch},
                                                              {"iter", &s.iter},
                                                              {"nbatches", &s.nbatches},
                                                              {"total_iter", &s.total_iter},
                                                              {"total_samp", &s.total_samp}};
  const std::vector<std::pair<const char*, double*>> doubles = {
      {"total_loss", &s.total_loss}, {"best_acc_test", &s.best_acc_test}, {"best_auc_test", &s.best_auc_test}};
  std::size_t found = 0;
  std::string missing;
  const auto value = [&](const char* key) {
    const std::string* v = meta_find(meta, key);
    if (v == nullptr) missing = key;
    found += v != nullptr;
    return v;
  };
  for (const auto& [key, field] : ints) {
    const std::string* v = value(key);
    if (v == nullptr) continue;
    const auto x = parse_int(*v);
    STRATA_CHECK(x && *x >= 0, "DLRM checkpoint ", quote_path(path), ": the train state's ", key, " is ",
                 quote_field(*v), ", expected a non-negative integer");
    *field = *x;
  }
  for (const auto& [key, field] : doubles) {
    const std::string* v = value(key);
    if (v == nullptr) continue;
    const auto x = parse_double(*v);
    STRATA_CHECK(x.has_value(), "DLRM checkpoint ", quote_path(path), ": the train state's ", key, " is ",
                 quote_field(*v), ", expected a number");
    *field = *x;
  }
  if (found == 0) return std::nullopt;
  STRATA_CHECK(missing.empty(), "DLRM checkpoint ", quote_path(path), ": the train state lacks the key ",
               quote_field(missing), " (it has ", found, " of its ", ints.size() + doubles.size(), " keys)");
  return s;
}

// ---- save ---------------------------------------------------------------------------------------

CheckpointMetadata TieredDLRM::checkpoint_metadata() const {
  std::vector<int64_t> rows;
  for (const Table* t : tables_) rows.push_back(t->nvectors());
  CheckpointMetadata meta = arch_metadata(config_, rows);
  add_table_kinds(meta, config_);
  meta.emplace_back("steps", std::to_string(steps_));
  return meta;
}

void TieredDLRM::save_tables(CheckpointWriter& w, std::size_t chunk_bytes) {
  std::vector<float> buf;
  for (std::size_t k = 0; k < tables_.size(); ++k) {
    Table& t = *tables_[k];
    const int64_t d = t.featuresize();
    w.begin(CheckpointSection::Model, stored_table_key(static_cast<int64_t>(k)), DType::f32, {t.nvectors(), d});
    for_each_row_chunk(t, chunk_bytes, buf, [&](int64_t r0, int64_t rows, float* out) {
      for (int64_t r = 0; r < rows; ++r) t.read_row(r0 + r, out + r * d);  // AccessContext::Read
      w.write(out, static_cast<std::size_t>(rows * d) * sizeof(float));
    });
  }
}

void TieredDLRM::save(const std::string& path, const CheckpointMetadata& extra, std::size_t chunk_bytes) {
  CheckpointMetadata meta = checkpoint_metadata();
  for (const auto& [k, v] : extra)
    STRATA_CHECK(meta_find(meta, k) == nullptr, "DLRM save ", quote_path(path), ": the extra metadata key ",
                 quote_field(k), " is reserved (the checkpoint stores its own ", k, ")");
  meta.insert(meta.end(), extra.begin(), extra.end());
  const StateDict dense = state_dict();
  const StateDict dense_opt = dense_opt_->state_dict();
  const bool has_sums = config_.optimizer != OptimizerKind::SGD;
  std::vector<int64_t> pooling;  // tables with learned pooling weights and their Adagrad state
  for (int64_t k = 0; has_sums && k < num_tables(); ++k)
    if (stage_->learned(k) != nullptr) pooling.push_back(k);
  const std::size_t n_entries =
      dense.size() + tables_.size() + dense_opt.size() + (has_sums ? tables_.size() : 0) + pooling.size();
  CheckpointWriter w(path, meta, n_entries);
  for (const auto& [k, v] : dense) w.add(CheckpointSection::Model, k, v);
  save_tables(w, chunk_bytes);
  for (const auto& [k, v] : dense_opt) w.add(CheckpointSection::Optimizer, "dense." + k, v);
  for (std::size_t k = 0; has_sums && k < tables_.size(); ++k) {
    const std::span<float> s = sparse_state(static_cast<int64_t>(k));
    const Dims sizes = config_.optimizer == OptimizerKind::Adagrad
                           ? Dims{tables_[k]->nvectors(), tables_[k]->featuresize()}
                           : Dims{tables_[k]->nvectors()};
    w.begin(CheckpointSection::Optimizer, sum_key(k), DType::f32, sizes);
    w.write(s.data(), s.size_bytes());  // already in memory: written straight from it
  }
  for (const int64_t k : pooling) {
    const std::vector<float>& s = stage_->learned(k)->sum;
    w.begin(CheckpointSection::Optimizer, pooling_sum_key(k), DType::f32, {static_cast<int64_t>(s.size())});
    w.write(s.data(), s.size() * sizeof(float));
  }
  w.finish();
}

// ---- load ---------------------------------------------------------------------------------------

struct TieredDLRM::LoadPlan {
  std::unique_ptr<CheckpointReader> reader;
  StateDict dense_model, dense_opt;
  std::vector<const CheckpointEntry*> weights, sums;  // per table
  std::vector<const CheckpointEntry*> pooling_sums;   // per table with learned pooling weights (Adagrad)
  int64_t steps = 0;
  CheckpointMetadata metadata;
};

namespace {

/// Throws unless the checkpoint's format, version and architecture are this model's.
void check_architecture(const CheckpointMetadata& got_meta, const CheckpointMetadata& want_meta,
                        const std::string& where) {
  const std::string* fmt = meta_find(got_meta, "format");
  STRATA_CHECK(fmt != nullptr && *fmt == kFormat, where, ": not a strata-dlrm checkpoint (format ",
               fmt ? quote_field(*fmt) : std::string("none"), ")");
  const std::string* ver = meta_find(got_meta, "format_version");
  STRATA_CHECK(ver != nullptr && *ver == kFormatVersion, where, ": format version ",
               ver ? quote_field(*ver) : std::string("none"), " is not supported (this build reads version ",
               kFormatVersion, ")");
  for (const auto& [key, want] : want_meta) {
    if (key == "emb_dtype" || key == "steps") continue;  // tables are stored in f32 and converted
    const std::string* got = meta_find(got_meta, key);
    STRATA_CHECK(got != nullptr && *got == want, where, ": the checkpoint's ", key, " is ",
                 got ? quote_field(*got) : std::string("missing"), " but this model's is ", quote_field(want));
  }
  // Table tricks this model does not use (Note [DLRM table kinds]).
  for (const char* key : {"qr", "md", "weighted_pooling"}) {
    const std::string* got = meta_find(got_meta, key);
    STRATA_CHECK(got == nullptr || meta_find(want_meta, key) != nullptr, where, ": the checkpoint's ", key, " is ",
                 got ? quote_field(*got) : std::string(), " but this model has none");
  }
}

/// The entry `key` of `section`, f32 of `sizes`; throws naming the key otherwise.
const CheckpointEntry* expect_entry(const CheckpointReader& r, CheckpointSection section, const std::string& key,
                                    const Dims& sizes, const std::string& where) {
  const CheckpointEntry* e = r.find(section, key);
  STRATA_CHECK(e != nullptr, where, ": the checkpoint lacks the entry ", quote_field(key));
  STRATA_CHECK(e->dtype == DType::f32 && e->sizes == sizes, where, ": ", key, " is ", dtype_name(e->dtype), " ",
               e->sizes, ", expected f32 ", sizes);
  return e;
}

/// Runs `fn`, prefixing a strata::Error's message with `where: `.
template <typename Fn>
void in_context(const std::string& where, Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    throw Error(where + ": " + e.what());
  }
}

}  // namespace

TieredDLRM::LoadPlan TieredDLRM::plan_load(const std::string& path) const {
  LoadPlan plan;
  plan.reader = std::make_unique<CheckpointReader>(path);
  const CheckpointReader& r = *plan.reader;
  const std::string where = "DLRM load " + quote_path(path);
  plan.metadata = r.metadata();
  check_architecture(plan.metadata, checkpoint_metadata(), where);
  const std::string* steps = meta_find(plan.metadata, "steps");
  const auto parsed = steps ? parse_int(*steps) : std::nullopt;
  STRATA_CHECK(parsed && *parsed >= 0, where, ": the checkpoint's steps is ",
               steps ? quote_field(*steps) : std::string("missing"), ", expected a non-negative integer");
  plan.steps = *parsed;

  // Tables and sparse states: keys, dtypes and shapes.
  for (std::size_t k = 0; k < tables_.size(); ++k) {
    const int64_t n = tables_[k]->nvectors(), d = tables_[k]->featuresize();
    plan.weights.push_back(
        expect_entry(r, CheckpointSection::Model, stored_table_key(static_cast<int64_t>(k)), {n, d}, where));
    if (config_.optimizer == OptimizerKind::SGD) continue;
    const Dims want = config_.optimizer == OptimizerKind::Adagrad ? Dims{n, d} : Dims{n};
    plan.sums.push_back(expect_entry(r, CheckpointSection::Optimizer, sum_key(k), want, where));
  }
  for (int64_t k = 0; config_.optimizer != OptimizerKind::SGD && k < num_tables(); ++k)
    if (const LearnedPoolingWeights* lw = stage_->learned(k))
      plan.pooling_sums.push_back(expect_entry(r, CheckpointSection::Optimizer, pooling_sum_key(k),
                                               {static_cast<int64_t>(lw->sum.size())}, where));
  // Everything else is the dense model's (with v_W_l.<k>) or the dense optimizer's, checked by them.
  for (const CheckpointEntry& e : r.entries()) {
    const auto among = [&e](const std::vector<const CheckpointEntry*>& v) {
      return std::find(v.begin(), v.end(), &e) != v.end();
    };
    const bool table_entry = among(plan.weights) || among(plan.sums) || among(plan.pooling_sums);
    if (table_entry) continue;
    if (e.section == CheckpointSection::Model) {
      plan.dense_model.emplace_back(e.key, r.tensor(e));
    } else {
      STRATA_CHECK(e.key.starts_with("dense."), where, ": unexpected optimizer entry ", quote_field(e.key),
                   " (expected 'dense.*' and 'sparse.<k>.sum')");
      plan.dense_opt.emplace_back(e.key.substr(6), r.tensor(e));
    }
  }
  in_context(where, [&] {
    std::vector<const Tensor*> pooling;
    dense_->check_state_dict(split_pooling(plan.dense_model, pooling), true);
  });
  in_context(where + ": the dense optimizer's state ('dense.*')",
             [&] { dense_opt_->check_state_dict(plan.dense_opt); });
  return plan;
}

void TieredDLRM::load_tables(const LoadPlan& plan, std::size_t chunk_bytes) {
  const CheckpointReader& r = *plan.reader;
  std::vector<float> buf;
  for (std::size_t k = 0; k < tables_.size(); ++k) {
    Table& t = *tables_[k];
    const std::size_t row_bytes = static_cast<std::size_t>(t.featuresize()) * sizeof(float);
    for_each_row_chunk(t, chunk_bytes, buf, [&](int64_t r0, int64_t rows, float* in) {
      r.read(*plan.weights[k], static_cast<uint64_t>(r0) * row_bytes, in, static_cast<std::size_t>(rows) * row_bytes);
      for (int64_t i = 0; i < rows; ++i) t.write_row(r0 + i, in + i * t.featuresize());
    });
    if (!plan.sums.empty()) {
      const std::span<float> s = sparse_state(static_cast<int64_t>(k));
      r.read(*plan.sums[k], 0, s.data(), s.size_bytes());
    }
  }
}

CheckpointMetadata TieredDLRM::load(const std::string& path, std::size_t chunk_bytes) {
  LoadPlan plan = plan_load(path);
  // Nothing has changed so far; from here on only an I/O error can stop the load.
  load_state_dict(plan.dense_model);
  std::size_t next = 0;
  for (int64_t k = 0; !plan.pooling_sums.empty() && k < num_tables(); ++k)
    if (LearnedPoolingWeights* lw = stage_->learned(k))
      plan.reader->read(*plan.pooling_sums[next++], 0, lw->sum.data(), lw->sum.size() * sizeof(float));
  dense_opt_->load_state_dict(plan.dense_opt);
  set_steps(plan.steps);
  in_context(
      "DLRM load " + quote_path(path) + " (the model is now partly loaded: load a checkpoint again or rebuild it)",
      [&] { load_tables(plan, chunk_bytes); });
  return plan.metadata;
}

}  // namespace strata::emb
