#include "embeddings/index_source.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <numeric>
#include <sstream>

#include "core/error.h"
#include "core/file.h"
#include "core/text.h"

namespace strata::emb {

// ---- Batch ---------------------------------------------------------------------------------------

Bags Batch::bags(int64_t k) const {
  STRATA_CHECK(k >= 0 && k < num_tables(), "batch: table ", k, " does not exist; the batch has ", num_tables(),
               " tables");
  const BagStorage& s = tables[static_cast<std::size_t>(k)];
  return Bags{std::span<const int64_t>(s.indices), std::span<const int64_t>(s.offsets),
              std::span<const float>(s.weights)};
}

void Batch::reshape(int64_t batch_size, int64_t dense, int64_t num_tables) {
  batch = batch_size;
  num_dense = dense;
  this->dense.resize(static_cast<std::size_t>(batch_size * dense));
  targets.resize(static_cast<std::size_t>(batch_size));
  tables.resize(static_cast<std::size_t>(num_tables));
  for (BagStorage& t : tables) {
    t.offsets.resize(static_cast<std::size_t>(batch_size + 1));
    t.offsets[0] = 0;
  }
}

// ---- IndexSource ---------------------------------------------------------------------------------

IndexSource::IndexSource(std::vector<int64_t> rows, int64_t num_dense, int64_t batch_size, int64_t num_batches)
    : rows_(std::move(rows)), num_dense_(num_dense), batch_size_(batch_size), num_batches_(num_batches) {}

IndexSource::~IndexSource() = default;

EpochShape EpochShape::of(int64_t data_size, int64_t batch_size, int64_t num_batches) {
  STRATA_CHECK(batch_size > 0, "--mini-batch-size must be positive, got ", batch_size);
  STRATA_CHECK(num_batches >= 0, "--num-batches must be 0 (from --data-size) or positive, got ", num_batches);
  EpochShape e;
  if (num_batches > 0) {
    e.num_batches = num_batches;
    e.data_size = num_batches * batch_size;
  } else {
    STRATA_CHECK(data_size > 0, "--data-size must be positive, got ", data_size);
    e.data_size = data_size;
    e.num_batches = (data_size + batch_size - 1) / batch_size;
  }
  return e;
}

int64_t EpochShape::samples_in(int64_t j, int64_t batch_size) const {
  return std::min(batch_size, data_size - j * batch_size);
}

void check_rows(const std::vector<int64_t>& rows, const char* what) {
  STRATA_CHECK(!rows.empty(), what, ": no embedding tables; expected at least one row count");
  for (std::size_t k = 0; k < rows.size(); ++k) {
    STRATA_CHECK(rows[k] > 0, what, ": table ", k, " has ", rows[k], " rows; expected a positive count");
  }
}

namespace {

void fill_uniform(RandomStream& rng, std::vector<float>& out) {
  for (float& v : out) v = static_cast<float>(rng.uniform());
}

/// generate_random_output_batch: U[0, 1) as float32, rounded half to even with --round-targets.
void fill_targets(RandomStream& rng, bool round, std::vector<float>& out) {
  for (float& v : out) {
    v = static_cast<float>(rng.uniform());
    if (round) v = std::nearbyint(v);
  }
}

}  // namespace

int64_t variable_bag_size(RandomStream& rng, int64_t rows, int64_t max_size) {
  const double r = rng.uniform();
  return static_cast<int64_t>(std::nearbyint(std::max(1.0, r * static_cast<double>(std::min(rows, max_size)))));
}

// ---- RandomSource --------------------------------------------------------------------------------

RandomDist parse_random_dist(std::string_view text) {
  if (text == "uniform") return RandomDist::Uniform;
  if (text == "gaussian") return RandomDist::Gaussian;
  STRATA_FAIL("--rand-data-dist ", quote_field(text), " is not supported; expected uniform or gaussian");
}

namespace {
constexpr uint32_t kWeightStreamSalt = 0x5bd1e995u;
}

RandomSource::RandomSource(RandomConfig config)
    : IndexSource(config.rows, config.num_dense, config.batch_size, 0), config_(std::move(config)) {
  check_rows(config_.rows, "--arch-embedding-size");
  STRATA_CHECK(config_.num_dense >= 0, "random data: the number of dense features must not be negative, got ",
               config_.num_dense);
  STRATA_CHECK(config_.num_indices_per_lookup > 0, "--num-indices-per-lookup must be positive, got ",
               config_.num_indices_per_lookup);
  shape_ = EpochShape::of(config_.data_size, config_.batch_size, config_.num_batches);
  num_batches_ = shape_.num_batches;
  if (config_.dist == RandomDist::Gaussian) {
    STRATA_CHECK(std::isfinite(config_.rand_data_min) && std::isfinite(config_.rand_data_max) &&
                     config_.rand_data_min <= config_.rand_data_max,
                 "--rand-data-min ", config_.rand_data_min, " and --rand-data-max ", config_.rand_data_max,
                 " do not form a range");
    STRATA_CHECK(std::isfinite(config_.rand_data_sigma) && config_.rand_data_sigma >= 0.0,
                 "--rand-data-sigma must be non-negative, got ", config_.rand_data_sigma);
    STRATA_CHECK(std::isfinite(config_.rand_data_mu), "--rand-data-mu must be finite, got ", config_.rand_data_mu);
    const double lo = std::trunc(config_.rand_data_min);
    const double hi = std::trunc(config_.rand_data_max);
    for (std::size_t k = 0; k < config_.rows.size(); ++k) {
      STRATA_CHECK(lo >= 0.0 && hi < static_cast<double>(config_.rows[k]),
                   "--rand-data-dist gaussian: indices are clip(N(mu, sigma), --rand-data-min, --rand-data-max) "
                   "truncated to integers, so [",
                   config_.rand_data_min, ", ", config_.rand_data_max,
                   "] must lie within [0, rows) of every table; table ", k, " has ", config_.rows[k], " rows");
    }
  }
  const auto max_bag = static_cast<std::size_t>(
      std::min(config_.num_indices_per_lookup, *std::max_element(config_.rows.begin(), config_.rows.end())));
  scratch_.reserve(max_bag);
  group_.reserve(max_bag);
  reset();
}

void RandomSource::reset() {
  rng_.seed(config_.seed);
  weight_rng_.seed(config_.seed ^ kWeightStreamSalt);
  next_batch_ = 0;
}

std::string RandomSource::describe() const {
  return config_.dist == RandomDist::Uniform ? "random(uniform)" : "random(gaussian)";
}

bool RandomSource::next(Batch& batch) {
  if (next_batch_ >= shape_.num_batches) return false;
  const int64_t n = shape_.samples_in(next_batch_, config_.batch_size);
  const auto tables = static_cast<int64_t>(config_.rows.size());
  batch.reshape(n, config_.num_dense, tables);
  fill_uniform(rng_, batch.dense);

  const bool gaussian = config_.dist == RandomDist::Gaussian;
  const double mu =
      config_.rand_data_mu == -1.0 ? (config_.rand_data_max + config_.rand_data_min) / 2.0 : config_.rand_data_mu;
  for (int64_t t = 0; t < tables; ++t) {
    const int64_t size = config_.rows[static_cast<std::size_t>(t)];
    BagStorage& out = batch.tables[static_cast<std::size_t>(t)];
    out.indices.clear();
    out.weights.clear();
    out.indices.reserve(static_cast<std::size_t>(config_.batch_size * std::min(size, config_.num_indices_per_lookup)));
    for (int64_t b = 0; b < n; ++b) {
      const int64_t bag = config_.num_indices_per_lookup_fixed
                              ? config_.num_indices_per_lookup
                              : variable_bag_size(rng_, size, config_.num_indices_per_lookup);
      scratch_.resize(static_cast<std::size_t>(bag));
      if (gaussian) {
        // np.unique(np.clip(normal(mu, sigma, L), min, max)).astype(np.int64)
        for (double& v : scratch_) {
          v = std::clamp(rng_.normal(mu, config_.rand_data_sigma), config_.rand_data_min, config_.rand_data_max);
        }
        std::sort(scratch_.begin(), scratch_.end());
        scratch_.erase(std::unique(scratch_.begin(), scratch_.end()), scratch_.end());
        for (double v : scratch_) out.indices.push_back(static_cast<int64_t>(v));
      } else {
        // np.unique(np.round(U * (rows - 1)).astype(np.int64))
        group_.resize(static_cast<std::size_t>(bag));
        for (int64_t& v : group_) {
          v = static_cast<int64_t>(std::nearbyint(rng_.uniform() * static_cast<double>(size - 1)));
        }
        std::sort(group_.begin(), group_.end());
        group_.erase(std::unique(group_.begin(), group_.end()), group_.end());
        out.indices.insert(out.indices.end(), group_.begin(), group_.end());
      }
      out.offsets[static_cast<std::size_t>(b + 1)] = static_cast<int64_t>(out.indices.size());
    }
    if (config_.per_sample_weights) {
      out.weights.resize(out.indices.size());
      for (float& w : out.weights) w = static_cast<float>(weight_rng_.gauss());
    }
  }
  fill_targets(rng_, config_.round_targets, batch.targets);
  ++next_batch_;
  return true;
}

// ---- trace profiles ------------------------------------------------------------------------------

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

std::vector<std::string_view> split_entries(std::string_view line) {
  std::vector<std::string_view> out;
  if (trim(line).empty()) return out;
  std::size_t start = 0;
  for (;;) {
    const std::size_t comma = line.find(',', start);
    out.push_back(trim(line.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start)));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return out;
}

template <typename T>
T parse_entry(std::string_view text, const std::string& path, int line, std::size_t entry, const char* what) {
  T value{};
  const char* first = text.data();
  const char* last = text.data() + text.size();
  if (!text.empty() && text.front() == '+') ++first;
  const auto [ptr, ec] = std::from_chars(first, last, value);
  STRATA_CHECK(!text.empty() && ec == std::errc() && ptr == last, "trace file ", quote_path(path), " line ", line,
               ", entry ", entry + 1, ": ", quote_field(text), " is not ", what);
  return value;
}

}  // namespace

TraceProfile TraceProfile::parse(std::string_view text, const std::string& path) {
  std::vector<std::string_view> lines;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t nl = text.find('\n', start);
    lines.push_back(text.substr(start, nl == std::string_view::npos ? std::string_view::npos : nl - start));
    if (nl == std::string_view::npos) break;
    start = nl + 1;
  }
  while (!lines.empty() && trim(lines.back()).empty()) lines.pop_back();
  STRATA_CHECK(lines.size() >= 3, "trace file ", quote_path(path),
               ": expected 3 lines (unique accesses, stack distances, cumulative probabilities), found ", lines.size());

  TraceProfile p;
  p.path = path;
  const auto e1 = split_entries(lines[0]);
  const auto e2 = split_entries(lines[1]);
  const auto e3 = split_entries(lines[2]);
  STRATA_CHECK(!e1.empty(), "trace file ", quote_path(path), " line 1: no unique accesses");
  STRATA_CHECK(!e2.empty(), "trace file ", quote_path(path), " line 2: no stack distances");
  STRATA_CHECK(e2.size() == e3.size(), "trace file ", quote_path(path), ": line 2 has ", e2.size(),
               " stack distances but line 3 has ", e3.size(), " cumulative probabilities");
  for (std::size_t i = 0; i < e1.size(); ++i) {
    p.unique_accesses.push_back(parse_entry<int64_t>(e1[i], path, 1, i, "an integer"));
  }
  for (std::size_t i = 0; i < e2.size(); ++i) {
    const auto sd = parse_entry<int64_t>(e2[i], path, 2, i, "an integer");
    STRATA_CHECK(sd >= 0, "trace file ", quote_path(path), " line 2, entry ", i + 1, ": stack distance ", sd,
                 " is negative");
    STRATA_CHECK(p.stack_distances.empty() || sd > p.stack_distances.back(), "trace file ", quote_path(path),
                 " line 2, entry ", i + 1, ": stack distances must be strictly increasing, but ", sd, " follows ",
                 p.stack_distances.back());
    STRATA_CHECK(sd <= static_cast<int64_t>(p.unique_accesses.size()), "trace file ", quote_path(path),
                 " line 2, entry ", i + 1, ": stack distance ", sd, " exceeds the ", p.unique_accesses.size(),
                 " unique accesses of line 1");
    p.stack_distances.push_back(sd);
  }
  for (std::size_t i = 0; i < e3.size(); ++i) {
    const auto c = parse_entry<double>(e3[i], path, 3, i, "a number");
    STRATA_CHECK(c >= 0.0 && c <= 1.0 + 1e-9, "trace file ", quote_path(path), " line 3, entry ", i + 1,
                 ": probability ", c, " is outside [0, 1]");
    STRATA_CHECK(p.cumulative.empty() || c >= p.cumulative.back(), "trace file ", quote_path(path), " line 3, entry ",
                 i + 1, ": cumulative probabilities must not decrease, but ", c, " follows ", p.cumulative.back());
    p.cumulative.push_back(c);
  }
  return p;
}

TraceProfile TraceProfile::read(const std::string& path) {
  return parse(read_file(path, "trace file"), path);  // Note [Opening files named by the user]
}

std::string trace_file_for_table(std::string_view pattern, int64_t table) {
  const std::string number = std::to_string(table);
  std::string out(pattern);
  if (out.find("{j}") != std::string::npos) {
    for (std::size_t pos = out.find("{j}"); pos != std::string::npos; pos = out.find("{j}", pos + number.size())) {
      out.replace(pos, 3, number);
    }
    return out;
  }
  const std::size_t slash = out.rfind('/');
  const std::size_t name = slash == std::string::npos ? 0 : slash + 1;
  std::string result = out.substr(0, name);
  for (std::size_t i = name; i < out.size(); ++i) {
    if (out[i] == 'j') {
      result += number;
    } else {
      result += out[i];
    }
  }
  return result;
}

// ---- SyntheticTraceSource ------------------------------------------------------------------------

namespace {

std::vector<TraceProfile> read_profiles(const SyntheticConfig& config) {
  std::vector<TraceProfile> profiles;
  for (std::size_t t = 0; t < config.rows.size(); ++t) {
    const std::string path = trace_file_for_table(config.trace_file, static_cast<int64_t>(t));
    try {
      profiles.push_back(TraceProfile::read(path));
    } catch (const Error& e) {
      STRATA_FAIL("--data-trace-file (table ", t, "): ", e.what());
    }
  }
  return profiles;
}

}  // namespace

SyntheticTraceSource::SyntheticTraceSource(SyntheticConfig config)
    : SyntheticTraceSource(config, (check_rows(config.rows, "--arch-embedding-size"), read_profiles(config))) {}

SyntheticTraceSource::SyntheticTraceSource(SyntheticConfig config, std::vector<TraceProfile> profiles)
    : IndexSource(config.rows, config.num_dense, config.batch_size, 0),
      config_(std::move(config)),
      profiles_(std::move(profiles)) {
  check_rows(config_.rows, "--arch-embedding-size");
  STRATA_CHECK(config_.num_dense >= 0, "synthetic data: the number of dense features must not be negative, got ",
               config_.num_dense);
  STRATA_CHECK(config_.num_indices_per_lookup > 0, "--num-indices-per-lookup must be positive, got ",
               config_.num_indices_per_lookup);
  STRATA_CHECK(profiles_.size() == config_.rows.size(), "synthetic data: ", profiles_.size(), " trace profiles for ",
               config_.rows.size(), " tables");
  shape_ = EpochShape::of(config_.data_size, config_.batch_size, config_.num_batches);
  num_batches_ = shape_.num_batches;
  const auto max_bag = static_cast<std::size_t>(
      std::min(config_.num_indices_per_lookup, *std::max_element(config_.rows.begin(), config_.rows.end())));
  trace_.reserve(max_bag);
  scratch_.moved.reserve(max_bag);
  scratch_.removed.reserve(max_bag);
  reset();
}

void SyntheticTraceSource::reset() {
  rng_.seed(config_.seed);
  next_batch_ = 0;
}

std::string SyntheticTraceSource::describe() const { return "synthetic(" + config_.trace_file + ")"; }

void SyntheticTraceSource::generate_lru(const TraceProfile& profile, int64_t length, bool enable_padding,
                                        RandomStream& rng, std::vector<int64_t>& out, LruScratch& scratch) {
  const auto& lines = profile.unique_accesses;
  const auto& sds = profile.stack_distances;
  const auto& cum = profile.cumulative;
  const auto l = static_cast<int64_t>(lines.size());
  const int64_t max_sd = sds.back();
  // The LRU list (least recent first) is lines[] minus the positions in `removed`, followed by
  // `moved` (most recent last): only lines a bag touched are ever materialized.
  scratch.moved.clear();
  scratch.removed.clear();
  int64_t new_refs = 0;
  for (int64_t step = 0; step < length; ++step) {
    // generate_stack_distance
    double u = rng.uniform();
    if (new_refs < max_sd) {
      // Only distances up to the number of new references so far: bisect(sds, new_refs) - 1
      // (Python's index -1, the last entry, when there is none).
      const auto j = std::upper_bound(sds.begin(), sds.end(), new_refs) - sds.begin() - 1;
      u *= j >= 0 ? cum[static_cast<std::size_t>(j)] : cum.back();
    } else if (enable_padding) {
      const double f0 = cum.front();
      u = (1.0 - f0) * u + f0;
    }
    int64_t sd = sds.back();  // u above every cumulative value (they sum to just under 1)
    for (std::size_t j = 0; j < cum.size(); ++j) {
      if (u <= cum[j]) {
        sd = sds[j];
        break;
      }
    }
    // trace_generate_lru: take line l - sd (0 for a new reference) and make it the most recent.
    const int64_t q = sd == 0 ? 0 : l - sd;
    const auto in_lines = l - static_cast<int64_t>(scratch.moved.size());
    int64_t line = 0;
    if (q >= in_lines) {
      const auto it = scratch.moved.begin() + (q - in_lines);
      line = *it;
      scratch.moved.erase(it);
    } else {
      int64_t p = q;  // the q-th position of lines[] not removed yet
      auto it = scratch.removed.begin();
      for (; it != scratch.removed.end() && *it <= p; ++it) ++p;
      scratch.removed.insert(it, p);
      line = lines[static_cast<std::size_t>(p)];
    }
    scratch.moved.push_back(line);
    if (sd == 0) ++new_refs;
    out.push_back(line);
  }
}

bool SyntheticTraceSource::next(Batch& batch) {
  if (next_batch_ >= shape_.num_batches) return false;
  const int64_t n = shape_.samples_in(next_batch_, config_.batch_size);
  const auto tables = static_cast<int64_t>(config_.rows.size());
  batch.reshape(n, config_.num_dense, tables);
  fill_uniform(rng_, batch.dense);
  for (int64_t t = 0; t < tables; ++t) {
    const int64_t size = config_.rows[static_cast<std::size_t>(t)];
    const TraceProfile& profile = profiles_[static_cast<std::size_t>(t)];
    BagStorage& out = batch.tables[static_cast<std::size_t>(t)];
    out.indices.clear();
    out.weights.clear();
    out.indices.reserve(static_cast<std::size_t>(config_.batch_size * std::min(size, config_.num_indices_per_lookup)));
    for (int64_t b = 0; b < n; ++b) {
      const int64_t bag = config_.num_indices_per_lookup_fixed
                              ? config_.num_indices_per_lookup
                              : variable_bag_size(rng_, size, config_.num_indices_per_lookup);
      trace_.clear();
      generate_lru(profile, bag, config_.enable_padding, rng_, trace_, scratch_);
      // np.unique on the uint64 references, then np.mod(·, rows) as int64.
      std::sort(trace_.begin(), trace_.end(),
                [](int64_t a, int64_t c) { return static_cast<uint64_t>(a) < static_cast<uint64_t>(c); });
      trace_.erase(std::unique(trace_.begin(), trace_.end()), trace_.end());
      for (int64_t v : trace_) out.indices.push_back(((v % size) + size) % size);
      out.offsets[static_cast<std::size_t>(b + 1)] = static_cast<int64_t>(out.indices.size());
    }
  }
  fill_targets(rng_, config_.round_targets, batch.targets);
  ++next_batch_;
  return true;
}

// ---- ZipfSource ----------------------------------------------------------------------------------

Scramble parse_scramble(std::string_view text) {
  if (text == "none") return Scramble::None;
  if (text == "permutation") return Scramble::Permutation;
  if (text == "lfsr") return Scramble::Lfsr;
  STRATA_FAIL("scramble ", quote_field(text), " is not supported; expected none, permutation or lfsr");
}

ZipfSource::ZipfSource(ZipfConfig config)
    : IndexSource(config.rows, config.num_dense, config.batch_size, config.num_batches), config_(std::move(config)) {
  check_rows(config_.rows, "zipf source");
  STRATA_CHECK(config_.num_dense >= 0, "zipf source: num_dense must not be negative, got ", config_.num_dense);
  STRATA_CHECK(config_.batch_size > 0, "zipf source: batch_size must be positive, got ", config_.batch_size);
  STRATA_CHECK(config_.num_batches > 0, "zipf source: num_batches must be positive, got ", config_.num_batches);
  STRATA_CHECK(config_.bag_size >= 0, "zipf source: bag_size must not be negative, got ", config_.bag_size);
  STRATA_CHECK(!config_.variable_bag_size || config_.bag_size > 0,
               "zipf source: a variable bag size needs a positive maximum bag_size, got ", config_.bag_size);
  STRATA_CHECK(config_.alpha > 0.0 && std::isfinite(config_.alpha), "zipf source: alpha must be positive, got ",
               config_.alpha);
  STRATA_CHECK(config_.reuse >= 0.0 && config_.reuse <= 1.0, "zipf source: reuse must be in [0, 1], got ",
               config_.reuse);
  STRATA_CHECK(config_.support >= 0, "zipf source: support must be 0 (the table's rows) or positive, got ",
               config_.support);
  zipf_ = config_.alpha > 1.0 || !config_.uniform_at_or_below_one;
  if (zipf_) {
    for (std::size_t t = 0; t < config_.rows.size(); ++t) {
      const int64_t rows = config_.rows[t];
      const int64_t support = config_.support > 0 ? config_.support : rows;
      const int64_t distinct = std::min(rows, support);
      STRATA_CHECK(config_.bag_size <= distinct, "zipf source: bag size ", config_.bag_size, " exceeds the ", distinct,
                   " distinct indices table ", t, " can produce (", rows, " rows, support ", support,
                   "); Zipf bags hold distinct indices");
      samplers_.emplace_back(support, config_.alpha);
      switch (config_.scramble) {
        case Scramble::None: break;
        case Scramble::Lfsr: lfsrs_.emplace_back(rows, hash_mix(config_.seed, t)); break;
        case Scramble::Permutation: {
          STRATA_CHECK(rows <= config_.max_permutation_rows && rows <= int64_t{0xffffffff}, "zipf source: table ", t,
                       " has ", rows, " rows; a permutation of more than ", config_.max_permutation_rows,
                       " rows is not built (4 bytes per row): use lfsr scrambling");
          std::vector<uint32_t> perm(static_cast<std::size_t>(rows));
          std::iota(perm.begin(), perm.end(), 0u);
          RandomStream prng(static_cast<uint32_t>(hash_mix(config_.seed, t)));
          for (std::size_t i = perm.size(); i > 1; --i) std::swap(perm[i - 1], perm[prng.below(i)]);
          permutations_.push_back(std::move(perm));
          break;
        }
      }
    }
  }
  previous_.resize(config_.rows.size());
  reset();
}

void ZipfSource::reset() {
  rng_.seed(config_.seed);
  weight_rng_.seed(config_.seed ^ kWeightStreamSalt);
  for (auto& p : previous_) p.clear();
  next_batch_ = 0;
}

std::string ZipfSource::describe() const {
  std::ostringstream os;
  if (zipf_) {
    const char* scramble = config_.scramble == Scramble::Lfsr          ? "lfsr"
                           : config_.scramble == Scramble::Permutation ? "permutation"
                                                                       : "none";
    os << "zipf(alpha=" << config_.alpha << ", " << scramble;
  } else {
    os << "uniform(";
  }
  os << (zipf_ ? ", " : "") << "L=" << config_.bag_size << (config_.variable_bag_size ? " variable" : "")
     << ", reuse=" << config_.reuse << ")";
  return os.str();
}

int64_t ZipfSource::row_of_rank(int64_t table, int64_t rank) const {
  STRATA_CHECK(table >= 0 && table < num_tables(), "zipf source: table ", table, " does not exist");
  const int64_t rows = rows_[static_cast<std::size_t>(table)];
  STRATA_CHECK(rank >= 0 && rank < rows, "zipf source: rank ", rank, " is out of range [0, ", rows, ")");
  if (!zipf_) return rank;
  switch (config_.scramble) {
    case Scramble::None: return rank;
    case Scramble::Lfsr: return lfsrs_[static_cast<std::size_t>(table)](rank);
    case Scramble::Permutation: return permutations_[static_cast<std::size_t>(table)][static_cast<std::size_t>(rank)];
  }
  return rank;
}

void ZipfSource::generate_table(int64_t t, int64_t batch, BagStorage& out) {
  const int64_t rows = rows_[static_cast<std::size_t>(t)];
  out.indices.clear();
  out.weights.clear();
  out.indices.reserve(static_cast<std::size_t>(config_.batch_size * config_.bag_size));
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t bag = config_.variable_bag_size ? variable_bag_size(rng_, rows, config_.bag_size) : config_.bag_size;
    const auto begin = static_cast<int64_t>(out.indices.size());
    if (!zipf_) {
      // generate_indices_uniform: L uniform rows, sorted within the bag (repeats possible).
      for (int64_t i = 0; i < bag; ++i) {
        out.indices.push_back(static_cast<int64_t>(rng_.below(static_cast<uint64_t>(rows))));
      }
      std::sort(out.indices.begin() + begin, out.indices.end());
    } else if (bag > 0) {
      // generate_indices_zipf: ranks (x - 1) mod rows, the first L distinct ones in draw order.
      const ZipfSampler& sampler = samplers_[static_cast<std::size_t>(t)];
      std::size_t cap = 16;
      while (cap < static_cast<std::size_t>(2 * bag)) cap <<= 1;
      if (seen_keys_.size() < cap) {
        seen_keys_.assign(cap, 0);
        seen_stamp_.assign(cap, 0);
        stamp_ = 0;
      }
      if (++stamp_ == 0) {  // wrapped: forget every old stamp
        std::fill(seen_stamp_.begin(), seen_stamp_.end(), 0u);
        stamp_ = 1;
      }
      const std::size_t mask = cap - 1;
      const int64_t max_draws = 64 * bag + 1024;
      int64_t found = 0;
      int64_t draws = 0;
      while (found < bag) {
        STRATA_CHECK(draws < max_draws, "zipf source: Zipf(", config_.alpha, ") over table ", t, " (", rows,
                     " rows) gave only ", found, " distinct indices for a bag of ", bag, " in ", draws,
                     " draws; lower the bag size or alpha");
        ++draws;
        const int64_t r = (sampler(rng_) - 1) % rows;
        std::size_t h = static_cast<std::size_t>(hash_mix(static_cast<uint64_t>(r), 0)) & mask;
        bool dup = false;
        while (seen_stamp_[h] == stamp_) {
          if (seen_keys_[h] == r) {
            dup = true;
            break;
          }
          h = (h + 1) & mask;
        }
        if (dup) continue;
        seen_stamp_[h] = stamp_;
        seen_keys_[h] = r;
        out.indices.push_back(r);
        ++found;
      }
      if (config_.scramble != Scramble::None) {
        for (auto it = out.indices.begin() + begin; it != out.indices.end(); ++it) *it = row_of_rank(t, *it);
      }
    }
    out.offsets[static_cast<std::size_t>(b + 1)] = static_cast<int64_t>(out.indices.size());
  }
}

void ZipfSource::apply_reuse(int64_t t, BagStorage& out) {
  // update_indices_with_random_reuse: floor(slots · reuse) random slots take the previous batch's
  // index in the same slot.
  const std::vector<int64_t>& prev = previous_[static_cast<std::size_t>(t)];
  const std::size_t slots = std::min(prev.size(), out.indices.size());
  const auto m = static_cast<std::size_t>(std::floor(static_cast<double>(slots) * config_.reuse));
  if (m == 0) return;
  slots_.resize(slots);
  std::iota(slots_.begin(), slots_.end(), 0u);
  for (std::size_t i = 0; i < m; ++i) {
    const std::size_t j = i + static_cast<std::size_t>(rng_.below(slots - i));
    std::swap(slots_[i], slots_[j]);
    out.indices[slots_[i]] = prev[slots_[i]];
  }
}

bool ZipfSource::next(Batch& batch) {
  if (next_batch_ >= num_batches_) return false;
  const int64_t n = config_.batch_size;
  const auto tables = num_tables();
  batch.reshape(n, config_.num_dense, tables);
  fill_uniform(rng_, batch.dense);
  for (int64_t t = 0; t < tables; ++t) {
    BagStorage& out = batch.tables[static_cast<std::size_t>(t)];
    generate_table(t, n, out);
    if (config_.reuse > 0.0) {
      if (next_batch_ > 0) apply_reuse(t, out);
      previous_[static_cast<std::size_t>(t)].assign(out.indices.begin(), out.indices.end());
    }
    if (config_.per_sample_weights) {
      out.weights.resize(out.indices.size());
      for (float& w : out.weights) w = static_cast<float>(weight_rng_.gauss());
    }
  }
  fill_targets(rng_, config_.round_targets, batch.targets);
  ++next_batch_;
  return true;
}

}  // namespace strata::emb
