// DistributedDLRM::save and ::load, and the manifest reader (Note [Resharding checkpoints] in
// dist_checkpoint.h).
#include "embeddings/dist/dist_checkpoint.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <utility>

#include "core/error.h"
#include "core/factories.h"
#include "core/text.h"
#include "embeddings/dist/detail/agree.h"
#include "embeddings/dist/dist_dlrm.h"

namespace strata::emb {

namespace {

namespace fs = std::filesystem;

constexpr const char* kFormat = "strata-dist-dlrm";
constexpr const char* kShardFormat = "strata-dist-dlrm-shard";
constexpr const char* kFormatVersion = "1";
constexpr const char* kRangesKey = "manifest.ranges";

std::string weight_key(int64_t t) { return "emb_l." + std::to_string(t) + ".weight"; }
std::string sum_key(int64_t t) { return "sparse." + std::to_string(t) + ".sum"; }

/// "5-8-4".
std::string dashed(const std::vector<int64_t>& widths) {
  std::string out;
  for (int64_t w : widths) {
    if (!out.empty()) out += '-';
    out += std::to_string(w);
  }
  return out;
}

const std::string* find_key(const CheckpointMetadata& meta, std::string_view key) {
  const auto it = std::find_if(meta.begin(), meta.end(), [&](const auto& kv) { return kv.first == key; });
  return it == meta.end() ? nullptr : &it->second;
}

/// Metadata `key` of `meta`, which must be there.
const std::string& required_key(const CheckpointMetadata& meta, const std::string& key, const std::string& where) {
  const std::string* v = find_key(meta, key);
  STRATA_CHECK(v != nullptr, where, ": the key ", quote_field(key), " is missing");
  return *v;
}

/// Metadata `key` as an integer in [lo, hi].
int64_t integer_key(const CheckpointMetadata& meta, const std::string& key, int64_t lo, int64_t hi,
                    const std::string& where) {
  const std::string& text = required_key(meta, key, where);
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  STRATA_CHECK(ec == std::errc() && end == text.data() + text.size() && v >= lo && v <= hi, where, ": ", key, " is ",
               quote_field(text), ", expected an integer in [", lo, ", ", hi, "]");
  return v;
}

/// The optimizer state floats per row: 0 (SGD), 1 (row-wise Adagrad), dim (Adagrad).
int64_t state_per_row(SparseOptimizer::Kind kind, int64_t dim) {
  return kind == SparseOptimizer::Kind::SGD ? 0 : kind == SparseOptimizer::Kind::RowWiseAdagrad ? 1 : dim;
}

Dims state_sizes(SparseOptimizer::Kind kind, int64_t rows, int64_t dim) {
  return kind == SparseOptimizer::Kind::Adagrad ? Dims{rows, dim} : Dims{rows};
}

constexpr int64_t kMaxCount = int64_t{1} << 40;

using detail::agree;  // embeddings/dist/detail/agree.h

/// Rank 0's `value` on every rank.
int64_t from_rank0(dist::Communicator& comm, int64_t value) {
  const Tensor all = comm.allgatherv(full({comm.rank() == 0 ? 1 : 0}, static_cast<double>(value), {DType::i64}));
  return all.data<int64_t>()[0];
}

// ---- layout ---------------------------------------------------------------------------------------

/// The generation G of a checkpoint file name "g<G>-..." or of its temporary ".g<G>-...", or nullopt.
std::optional<int64_t> generation_of(std::string_view name) {
  if (name.starts_with('.')) name.remove_prefix(1);
  const bool ours = name.starts_with('g') && (name.find("-rank") != std::string_view::npos ||
                                              name.find("-replicated") != std::string_view::npos);
  if (!ours || name.find(".ckpt") == std::string_view::npos) return std::nullopt;
  int64_t g = 0;
  const auto [end, ec] = std::from_chars(name.data() + 1, name.data() + name.size(), g);
  if (ec != std::errc() || end == name.data() + 1 || *end != '-') return std::nullopt;
  return g;
}

/// What a save writes: the files (rank r's is file r; the replicated tables' is file N) and the ranges.
struct Layout {
  std::vector<std::string> files;
  std::vector<DistCheckpointRange> ranges;
};

Layout layout_of(const ShardPlan& plan, int64_t generation) {
  Layout l;
  const std::string g = "g" + std::to_string(generation);
  for (int r = 0; r < plan.ranks; ++r)
    l.files.push_back(g + "-rank" + std::to_string(r) + "-of" + std::to_string(plan.ranks) + ".ckpt");
  bool replicated = false;
  for (int t = 0; t < static_cast<int>(plan.tables.size()); ++t) {
    if (plan.shards[t].kind == ShardKind::data_parallel) {
      l.ranges.push_back({t, 0, plan.tables[t].rows, plan.ranks});
      replicated = true;
      continue;
    }
    for (int r = 0; r < plan.ranks; ++r)
      if (plan.row_end(r, t) > plan.row_begin(r, t))
        l.ranges.push_back({t, plan.row_begin(r, t), plan.row_end(r, t), r});
  }
  if (replicated) l.files.push_back(g + "-replicated.ckpt");
  return l;
}

/// The model as the manifest describes it; load() compares these keys (but the names).
CheckpointMetadata model_metadata(const DistributedDLRMConfig& c, const ShardPlan& plan) {
  CheckpointMetadata m{{"bottom_mlp", dashed(c.bottom_mlp)},
                       {"top_mlp", dashed(c.top_mlp)},
                       {"interaction", c.interaction},
                       {"optimizer", to_string(c.optimizer)},
                       {"tables", std::to_string(plan.tables.size())}};
  for (std::size_t t = 0; t < plan.tables.size(); ++t) {
    const std::string key = "table." + std::to_string(t) + ".";
    m.emplace_back(key + "name", plan.tables[t].name);
    m.emplace_back(key + "rows", std::to_string(plan.tables[t].rows));
    m.emplace_back(key + "dim", std::to_string(plan.tables[t].dim));
  }
  return m;
}

/// The manifest's metadata: format, generation, rank count, steps, the model, the settings, the
/// files and `extra` (a key the manifest uses itself is refused).
CheckpointMetadata manifest_metadata(const DistributedDLRM& model, const Layout& layout, int64_t generation,
                                     const CheckpointMetadata& extra) {
  const DistributedDLRMConfig& c = model.config();
  const ShardPlan& plan = model.tables().plan();
  char lr[32];
  std::snprintf(lr, sizeof lr, "%.9g", static_cast<double>(c.learning_rate));
  CheckpointMetadata m{{"format", kFormat},
                       {"format_version", kFormatVersion},
                       {"generation", std::to_string(generation)},
                       {"ranks", std::to_string(plan.ranks)},
                       {"steps", std::to_string(model.steps())}};
  for (auto& kv : model_metadata(c, plan)) m.push_back(std::move(kv));
  const CheckpointMetadata settings{{"learning_rate", lr},
                                    {"seed", std::to_string(c.seed)},
                                    {"chunks", std::to_string(c.chunks)},
                                    {"row_blocks", std::to_string(plan.row_blocks)},
                                    {"plan", plan.to_json()},
                                    {"files", std::to_string(layout.files.size())}};
  m.insert(m.end(), settings.begin(), settings.end());
  for (std::size_t i = 0; i < layout.files.size(); ++i) m.emplace_back("file." + std::to_string(i), layout.files[i]);
  for (const auto& [k, v] : extra) {
    const bool reserved = find_key(m, k) != nullptr || k.starts_with("file.") || k.starts_with("table.");
    STRATA_CHECK(!reserved, "the extra metadata key ", quote_field(k), " is reserved (the checkpoint stores its own ",
                 k, ")");
    m.emplace_back(k, v);
  }
  return m;
}

// ---- save -------------------------------------------------------------------------------------------

/// Rank 0: creates the directory and returns the next generation (1 + the largest of the regular
/// files there).
int64_t prepare_directory(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  STRATA_CHECK(fs::is_directory(dir), "cannot create the checkpoint directory ", quote_path(dir),
               ec ? " (" + ec.message() + ")" : std::string(" (a file of that name is in the way)"));
  int64_t last = 0;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code type_ec;
    if (it->is_regular_file(type_ec)) last = std::max(last, generation_of(it->path().filename().string()).value_or(0));
  }
  STRATA_CHECK(!ec, "cannot list the checkpoint directory ", quote_path(dir), " (", ec.message(), ")");
  return last + 1;
}

/// Writes file `file` of `layout`: its ranges' rows and optimizer state, streamed in chunks.
void write_rows_file(const ShardedEmbeddingBags& tables, const std::string& dir, const Layout& layout, int64_t file,
                     int64_t generation, std::size_t chunk_bytes) {
  const SparseOptimizer::Kind kind = tables.optimizer();
  std::vector<const DistCheckpointRange*> mine;
  for (const DistCheckpointRange& r : layout.ranges)
    if (r.file == file) mine.push_back(&r);
  const CheckpointMetadata meta{
      {"format", kShardFormat}, {"format_version", kFormatVersion}, {"generation", std::to_string(generation)}};
  const uint64_t per_range = kind == SparseOptimizer::Kind::SGD ? 1 : 2;
  CheckpointWriter w((fs::path(dir) / layout.files[file]).string(), meta, mine.size() * per_range);
  std::vector<float> buf;
  for (const DistCheckpointRange* r : mine) {
    const int t = static_cast<int>(r->table);
    const int64_t d = tables.plan().tables[t].dim, rows = r->row_end - r->row_begin;
    const int64_t chunk = std::max<int64_t>(1, static_cast<int64_t>(chunk_bytes / (d * sizeof(float))));
    w.begin(CheckpointSection::Model, weight_key(t), DType::f32, {rows, d});
    for (int64_t a = r->row_begin; a < r->row_end; a += chunk) {
      const int64_t n = std::min(chunk, r->row_end - a);
      buf.resize(static_cast<std::size_t>(n * d));
      for (int64_t i = 0; i < n; ++i) tables.read_row(t, a + i, buf.data() + i * d);
      w.write(buf.data(), buf.size() * sizeof(float));
    }
    if (kind == SparseOptimizer::Kind::SGD) continue;
    const int64_t per_row = state_per_row(kind, d);
    const float* state = tables.accumulators(t).data();
    w.begin(CheckpointSection::Optimizer, sum_key(t), DType::f32, state_sizes(kind, rows, d));
    w.write(state + (r->row_begin - tables.row_begin(t)) * per_row,
            static_cast<std::size_t>(rows * per_row) * sizeof(float));
  }
  w.finish();
}

/// Rank 0: the manifest, last (the commit point).
void write_manifest(const std::string& dir, const CheckpointMetadata& meta, const Layout& layout,
                    const StateDict& dense, const StateDict& dense_opt) {
  Tensor ranges = empty({static_cast<int64_t>(layout.ranges.size()), 4}, {DType::i64});
  int64_t* out = ranges.data<int64_t>();
  for (const DistCheckpointRange& r : layout.ranges) {
    *out++ = r.table;
    *out++ = r.row_begin;
    *out++ = r.row_end;
    *out++ = r.file;
  }
  CheckpointWriter w(dist_manifest_path(dir), meta, 1 + dense.size() + dense_opt.size());
  w.add(CheckpointSection::Model, kRangesKey, ranges);
  for (const auto& [k, v] : dense) w.add(CheckpointSection::Model, k, v);
  for (const auto& [k, v] : dense_opt) w.add(CheckpointSection::Optimizer, "dense." + k, v);
  w.finish();
}

/// Rank 0, after the commit: the files and temporaries of other generations go (regular files only).
void remove_other_generations(const std::string& dir, int64_t generation) {
  std::error_code ec;
  std::vector<fs::path> stale;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::optional<int64_t> g = generation_of(it->path().filename().string());
    std::error_code type_ec;
    if (g && *g != generation && it->is_regular_file(type_ec)) stale.push_back(it->path());
  }
  for (const fs::path& p : stale) fs::remove(p, ec);  // best effort: a leftover is removed next time
}

// ---- manifest -------------------------------------------------------------------------------------

/// Reads "manifest.ranges" and checks that they cover every table's rows exactly once, in order.
std::vector<DistCheckpointRange> read_ranges(const CheckpointReader& r, const DistCheckpointManifest& m,
                                             const std::string& where) {
  const CheckpointEntry* e = r.find(CheckpointSection::Model, kRangesKey);
  STRATA_CHECK(e != nullptr, where, ": the entry ", quote_field(kRangesKey), " is missing");
  STRATA_CHECK(e->dtype == DType::i64 && e->sizes.size() == 2 && e->sizes[1] == 4, where, ": ", kRangesKey, " is ",
               dtype_name(e->dtype), " ", e->sizes, ", expected i64 [ranges, 4]");
  const Tensor t = r.tensor(*e);
  const int64_t* v = t.data<int64_t>();
  std::vector<DistCheckpointRange> out;
  std::vector<int64_t> next(m.table_rows.size(), 0);  // each table's next uncovered row
  for (int64_t i = 0; i < e->sizes[0]; ++i, v += 4) {
    const DistCheckpointRange range{v[0], v[1], v[2], v[3]};
    const auto tables = static_cast<int64_t>(m.table_rows.size());
    const bool table_ok = range.table >= 0 && range.table < tables && (i == 0 || range.table >= out.back().table);
    STRATA_CHECK(table_ok && range.row_begin == next[range.table] && range.row_end > range.row_begin &&
                     range.row_end <= m.table_rows[range.table] && range.file >= 0 &&
                     range.file < static_cast<int64_t>(m.files.size()),
                 where, ": range ", i, " (table ", range.table, ", rows [", range.row_begin, ", ", range.row_end,
                 "), file ", range.file, ") does not continue the ranges before it");
    next[range.table] = range.row_end;
    out.push_back(range);
  }
  for (std::size_t t = 0; t < next.size(); ++t)
    STRATA_CHECK(next[t] == m.table_rows[t], where, ": the ranges cover rows [0, ", next[t], ") of table ", t,
                 ", which has ", m.table_rows[t]);
  return out;
}

DistCheckpointManifest parse_manifest(const CheckpointReader& r, const std::string& dir) {
  const std::string where = "DistributedDLRM checkpoint manifest " + quote_path(r.path());
  DistCheckpointManifest m;
  m.dir = dir;
  m.metadata = r.metadata();
  const std::string& format = required_key(m.metadata, "format", where);
  STRATA_CHECK(format == kFormat, where, ": the format is ", quote_field(format), ", expected ", quote_field(kFormat));
  const std::string& version = required_key(m.metadata, "format_version", where);
  STRATA_CHECK(version == kFormatVersion, where, ": format version ", quote_field(version),
               " is not supported (this build reads version ", kFormatVersion, ")");
  m.generation = integer_key(m.metadata, "generation", 1, std::numeric_limits<int64_t>::max(), where);
  m.ranks = integer_key(m.metadata, "ranks", 1, kMaxCount, where);
  m.steps = integer_key(m.metadata, "steps", 0, std::numeric_limits<int64_t>::max(), where);
  const int64_t tables = integer_key(m.metadata, "tables", 1, kMaxCount, where);
  for (int64_t t = 0; t < tables; ++t) {
    const std::string key = "table." + std::to_string(t) + ".";
    m.table_rows.push_back(integer_key(m.metadata, key + "rows", 1, std::numeric_limits<int64_t>::max(), where));
    m.table_dims.push_back(integer_key(m.metadata, key + "dim", 1, kMaxCount, where));
  }
  const int64_t files = integer_key(m.metadata, "files", 1, kMaxCount, where);
  for (int64_t i = 0; i < files; ++i) {
    const std::string& name = required_key(m.metadata, "file." + std::to_string(i), where);
    STRATA_CHECK(!name.empty() && name.find('/') == std::string::npos && name != "." && name != "..", where, ": file.",
                 i, " is ", quote_field(name), ", expected a file name in the checkpoint directory");
    m.files.push_back(name);
  }
  m.ranges = read_ranges(r, m, where);
  return m;
}

}  // namespace

std::string dist_manifest_path(const std::string& dir) { return (fs::path(dir) / "manifest").string(); }

DistCheckpointManifest read_dist_manifest(const std::string& dir) {
  const CheckpointReader r(dist_manifest_path(dir));
  return parse_manifest(r, dir);
}

void DistributedDLRM::save(const std::string& path, const CheckpointMetadata& extra, std::size_t chunk_bytes) {
  const std::string where = "DistributedDLRM::save(" + quote_path(path) + ")";
  const ShardPlan& plan = tables_->plan();
  int64_t generation = 0;
  agree(comm_, where, [&] {
    manifest_metadata(*this, layout_of(plan, 0), 0, extra);  // refuses reserved extra keys early
    if (comm_.rank() == 0) generation = prepare_directory(path);
  });
  generation = from_rank0(comm_, generation);
  const Layout layout = layout_of(plan, generation);
  agree(comm_, where, [&] {
    write_rows_file(*tables_, path, layout, comm_.rank(), generation, chunk_bytes);
    if (comm_.rank() == 0 && static_cast<int64_t>(layout.files.size()) > plan.ranks)
      write_rows_file(*tables_, path, layout, plan.ranks, generation, chunk_bytes);
  });
  agree(comm_, where, [&] {
    if (comm_.rank() != 0) return;
    write_manifest(path, manifest_metadata(*this, layout, generation, extra), layout, dense_module().state_dict(),
                   opt_->state_dict());
  });
  if (comm_.rank() == 0) remove_other_generations(path, generation);
}

// ---- load -------------------------------------------------------------------------------------------

namespace {

/// The rows [first, end) of `table` this rank loads from one stored range.
struct Piece {
  int table = 0;
  int64_t first = 0, end = 0;
  DistCheckpointRange range;
  const CheckpointReader* file = nullptr;
  const CheckpointEntry* weight = nullptr;
  const CheckpointEntry* sum = nullptr;  // null for SGD
};

/// Everything load() checked before writing anything.
struct DistLoad {
  DistCheckpointManifest manifest;
  StateDict dense, dense_opt;
  std::map<int64_t, std::unique_ptr<CheckpointReader>> files;  // by file index: only those needed here
  std::vector<Piece> pieces;
};

/// The f32 entry `key` of `section` of shape `sizes`.
const CheckpointEntry* rows_entry(const CheckpointReader& r, CheckpointSection section, const std::string& key,
                                  const Dims& sizes) {
  const CheckpointEntry* e = r.find(section, key);
  STRATA_CHECK(e != nullptr, r.where(), ": the entry ", quote_field(key), " is missing");
  STRATA_CHECK(e->dtype == DType::f32 && e->sizes == sizes, r.where(), ": the entry ", quote_field(key), " is ",
               dtype_name(e->dtype), " ", e->sizes, ", expected f32 ", sizes, " (the manifest's range)");
  return e;
}

/// Opens file `index` of the manifest (once) and checks its format and generation.
const CheckpointReader& open_file(DistLoad& load, int64_t index) {
  std::unique_ptr<CheckpointReader>& slot = load.files[index];
  if (slot != nullptr) return *slot;
  const std::string path = (fs::path(load.manifest.dir) / load.manifest.files[index]).string();
  auto r = std::make_unique<CheckpointReader>(path);
  const std::string* format = find_key(r->metadata(), "format");
  STRATA_CHECK(format != nullptr && *format == kShardFormat, r->where(), ": not a DistributedDLRM shard file (format ",
               format != nullptr ? quote_field(*format) : std::string("missing"), ")");
  const std::string want = std::to_string(load.manifest.generation);
  const std::string* generation = find_key(r->metadata(), "generation");
  STRATA_CHECK(generation != nullptr && *generation == want, r->where(), ": the file is of generation ",
               generation != nullptr ? quote_field(*generation) : std::string("none"), " but the manifest is of ", want,
               " (a file of another save)");
  slot = std::move(r);
  return *slot;
}

/// The pieces of every table this rank holds rows of, their files opened and entries checked.
void plan_pieces(DistLoad& load, const ShardedEmbeddingBags& tables) {
  const SparseOptimizer::Kind kind = tables.optimizer();
  for (const DistCheckpointRange& range : load.manifest.ranges) {
    const int t = static_cast<int>(range.table);
    const int64_t first = std::max(range.row_begin, tables.row_begin(t));
    const int64_t end = std::min(range.row_end, tables.row_end(t));
    if (first >= end) continue;
    const CheckpointReader& file = open_file(load, range.file);
    const int64_t rows = range.row_end - range.row_begin, d = load.manifest.table_dims[t];
    Piece p{t, first, end, range, &file, rows_entry(file, CheckpointSection::Model, weight_key(t), {rows, d})};
    if (kind != SparseOptimizer::Kind::SGD)
      p.sum = rows_entry(file, CheckpointSection::Optimizer, sum_key(t), state_sizes(kind, rows, d));
    load.pieces.push_back(p);
  }
}

/// Compares the model keys of the manifest with this model's (all but the table names).
void check_model(const DistCheckpointManifest& m, const CheckpointMetadata& want, const std::string& where) {
  for (const auto& [key, value] : want) {
    if (key.ends_with(".name")) continue;
    const std::string* got = find_key(m.metadata, key);
    STRATA_CHECK(got != nullptr && *got == value, where, ": the checkpoint's ", key, " is ",
                 got != nullptr ? quote_field(*got) : std::string("missing"), " but this model's is ",
                 quote_field(value), " (a checkpoint of another model)");
  }
}

/// The manifest's MLP parameters and dense optimizer state ("dense.<key>").
void read_dense(DistLoad& load, const CheckpointReader& r) {
  for (const CheckpointEntry& e : r.entries()) {
    if (e.section == CheckpointSection::Model) {
      if (e.key != kRangesKey) load.dense.emplace_back(e.key, r.tensor(e));
      continue;
    }
    STRATA_CHECK(e.key.starts_with("dense."), r.where(), ": unexpected optimizer entry ", quote_field(e.key),
                 " (expected 'dense.*')");
    load.dense_opt.emplace_back(e.key.substr(6), r.tensor(e));
  }
}

/// Copies one piece's rows and optimizer state into the shards, `chunk_bytes` at a time.
void load_piece(const Piece& p, ShardedEmbeddingBags& tables, std::size_t chunk_bytes) {
  const int64_t d = tables.plan().tables[p.table].dim;
  const int64_t chunk = std::max<int64_t>(1, static_cast<int64_t>(chunk_bytes / (d * sizeof(float))));
  const auto row_bytes = static_cast<uint64_t>(d) * sizeof(float);
  std::vector<float> buf;
  for (int64_t a = p.first; a < p.end; a += chunk) {
    const int64_t n = std::min(chunk, p.end - a);
    buf.resize(static_cast<std::size_t>(n * d));
    p.file->read(*p.weight, static_cast<uint64_t>(a - p.range.row_begin) * row_bytes, buf.data(), n * row_bytes);
    for (int64_t i = 0; i < n; ++i) tables.write_row(p.table, a + i, buf.data() + i * d);
  }
  if (p.sum == nullptr) return;
  const int64_t per_row = state_per_row(tables.optimizer(), d);
  float* state = tables.accumulators(p.table).data() + (p.first - tables.row_begin(p.table)) * per_row;
  p.file->read(*p.sum, static_cast<uint64_t>((p.first - p.range.row_begin) * per_row) * sizeof(float), state,
               static_cast<std::size_t>((p.end - p.first) * per_row) * sizeof(float));
}

}  // namespace

CheckpointMetadata DistributedDLRM::load(const std::string& path, std::size_t chunk_bytes) {
  const std::string where = "DistributedDLRM::load(" + quote_path(path) + ")";
  DistLoad load;
  agree(comm_, where, [&] {
    const CheckpointReader manifest(dist_manifest_path(path));
    load.manifest = parse_manifest(manifest, path);
    const std::string about = "the checkpoint manifest " + quote_path(manifest.path());
    check_model(load.manifest, model_metadata(config_, tables_->plan()), about);
    read_dense(load, manifest);
    try {
      dense_module().check_state_dict(load.dense, true);
      opt_->check_state_dict(load.dense_opt);
    } catch (const Error& e) {
      STRATA_FAIL(about, ": the MLPs or the dense optimizer's state ('dense.*') do not fit this model: ", e.what());
    }
    plan_pieces(load, *tables_);
  });
  // Everything was checked on every rank; from here on only an I/O error can stop the load.
  agree(comm_, where + " (the model is now partly loaded: load a checkpoint again or rebuild it)", [&] {
    dense_module().load_state_dict(load.dense, true);
    opt_->load_state_dict(load.dense_opt);
    // This model's learning rate, as the tables': not the one stored with the dense state.
    for (optim::ParamGroup& g : opt_->param_groups()) g.options["lr"] = static_cast<double>(config_.learning_rate);
    steps_ = load.manifest.steps;
    tables_->set_optimizer_steps(steps_);
    for (const Piece& p : load.pieces) load_piece(p, *tables_, chunk_bytes);
  });
  return load.manifest.metadata;
}

}  // namespace strata::emb
