#include "embeddings/criteo_dataset.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <mutex>

#include "core/error.h"
#include "core/file.h"
#include "core/npz.h"
#include "core/text.h"
#include "core/threading.h"
#include "embeddings/criteo.h"

namespace strata::emb {

// ---- reading -------------------------------------------------------------------------------------------

namespace {

/// Converts `n` elements of dtype `t` at `src` to int32, checking integrality and range.
void convert_to_int32(const unsigned char* src, npy::Dtype t, std::size_t n, int32_t* dst, const std::string& where,
                      int64_t first) {
  for (std::size_t i = 0; i < n; ++i) {
    const unsigned char* p = src + i * npy::itemsize(t);
    double v = 0;
    switch (t) {
      case npy::Dtype::I4: {
        int32_t x;
        std::memcpy(&x, p, 4);
        dst[i] = x;
        continue;
      }
      case npy::Dtype::I8: {
        int64_t x;
        std::memcpy(&x, p, 8);
        v = static_cast<double>(x);
        STRATA_CHECK(x >= INT32_MIN && x <= INT32_MAX, where, ": element ", first + static_cast<int64_t>(i), " (", x,
                     ") does not fit int32");
        dst[i] = static_cast<int32_t>(x);
        continue;
      }
      case npy::Dtype::U1:
      case npy::Dtype::B1: dst[i] = *p; continue;
      case npy::Dtype::F4: {
        float x;
        std::memcpy(&x, p, 4);
        v = x;
        break;
      }
      case npy::Dtype::F8: std::memcpy(&v, p, 8); break;
    }
    STRATA_CHECK(v == std::floor(v) && v >= INT32_MIN && v <= INT32_MAX, where, ": element ",
                 first + static_cast<int64_t>(i), " (", v, ") is not an int32 integer");
    dst[i] = static_cast<int32_t>(v);
  }
}

}  // namespace

CriteoData::~CriteoData() {
  if (map_ != nullptr) ::munmap(map_, map_bytes_);
}

void CriteoData::load_member(const std::string& name, int64_t cols, Matrix& out, bool memory_map) {
  const npy::NpzReader npz(path_);
  auto m = npz.open(name);
  const npy::Header& h = m->header();
  const std::string where = "criteo processed file " + quote_path(path_) + ", member " + quote_field(name);
  const bool vector = cols == 1 && name == "y";
  const bool ok = vector ? h.shape.size() == 1 : (h.shape.size() == 2 && h.shape[1] == cols);
  STRATA_CHECK(
      ok && h.shape[0] == rows_, where, ": shape ", h.shape_string(), ", expected ",
      vector ? "(" + std::to_string(rows_) + ",)" : "(" + std::to_string(rows_) + ", " + std::to_string(cols) + ")");
  const bool fortran = h.fortran_order && h.shape.size() == 2;
  out.row_stride = fortran ? 1 : cols;
  out.col_stride = fortran ? rows_ : 1;
  const auto n = static_cast<std::size_t>(rows_ * cols);
  if (memory_map && h.dtype == npy::Dtype::I4 && m->data_file_offset() >= 0 && map_ != nullptr) {
    out.base = static_cast<const unsigned char*>(map_) + m->data_file_offset();
    return;
  }
  out.owned.resize(n);
  if (h.dtype == npy::Dtype::I4) {
    m->read(out.owned.data(), n * 4);
  } else {
    std::vector<unsigned char> buf(std::size_t{1} << 22);
    const std::size_t per = buf.size() / npy::itemsize(h.dtype);
    for (std::size_t at = 0; at < n; at += per) {
      const std::size_t k = std::min(per, n - at);
      m->read(buf.data(), k * npy::itemsize(h.dtype));
      convert_to_int32(buf.data(), h.dtype, k, out.owned.data() + at, where, static_cast<int64_t>(at));
    }
  }
  m->finish();
  out.base = reinterpret_cast<const unsigned char*>(out.owned.data());
}

std::shared_ptr<const CriteoData> CriteoData::load(const std::string& processed, const std::string& day_count_file,
                                                   int64_t days, bool memory_map) {
  std::shared_ptr<CriteoData> d(new CriteoData());
  d->path_ = processed;
  const npy::NpzReader npz(processed);
  npy::Header yh;
  {
    auto m = npz.open("y");
    yh = m->header();
  }
  STRATA_CHECK(yh.shape.size() == 1, "criteo processed file ", quote_path(processed), ", member 'y': shape ",
               yh.shape_string(), ", expected one dimension");
  d->rows_ = yh.shape[0];
  npy::Header ch;
  d->counts_ = npy::read_integers(npz, "counts", &ch);
  STRATA_CHECK(ch.shape.size() == 1 && ch.shape[0] == kCriteoSparse, "criteo processed file ", quote_path(processed),
               ", member 'counts': shape ", ch.shape_string(), ", expected (26,)");
  const std::vector<int64_t> per_day = npy::read_integers(npy::NpzReader(day_count_file), "total_per_file");
  int64_t sum = 0;
  for (int64_t n : per_day) sum += n;
  STRATA_CHECK(static_cast<int64_t>(per_day.size()) == days && sum == d->rows_, "criteo day counts ",
               quote_path(day_count_file), ": ", per_day.size(), " days of ", sum, " samples, but the data set has ",
               days, " days and ", quote_path(processed), " holds ", d->rows_, " samples");
  d->day_offsets_.assign(1, 0);
  for (int64_t n : per_day) d->day_offsets_.push_back(d->day_offsets_.back() + n);
  if (memory_map) d->map_file();
  std::array<std::pair<const char*, int64_t>, 3> members = {
      {{"X_cat", kCriteoSparse}, {"X_int", kCriteoDense}, {"y", 1}}};
  std::array<Matrix*, 3> outs = {&d->x_cat_, &d->x_int_, &d->y_};
  parallel_for(3, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i)
      d->load_member(members[static_cast<std::size_t>(i)].first, members[static_cast<std::size_t>(i)].second,
                     *outs[static_cast<std::size_t>(i)], memory_map);
  });
  d->mapped_ = d->x_cat_.owned.empty() && d->rows_ > 0;
  return d;
}

}  // namespace strata::emb

namespace strata::emb {

void CriteoData::map_file() {
  std::FILE* f = open_file_for_reading(path_, "--processed-data-file");
  struct stat st{};
  const bool ok = ::fstat(::fileno(f), &st) == 0 && st.st_size > 0;
  if (ok) {
    map_bytes_ = static_cast<std::size_t>(st.st_size);
    void* p = ::mmap(nullptr, map_bytes_, PROT_READ, MAP_PRIVATE, ::fileno(f), 0);
    map_ = p == MAP_FAILED ? nullptr : p;
  }
  std::fclose(f);
  STRATA_CHECK(map_ != nullptr, "--memory-map: cannot map ", quote_path(path_), " (", std::strerror(errno), ")");
}

// ---- split ---------------------------------------------------------------------------------------------

CriteoSplit parse_criteo_split(std::string_view text, std::string_view what) {
  if (text == "train") return CriteoSplit::Train;
  if (text == "test") return CriteoSplit::Test;
  if (text == "val") return CriteoSplit::Val;
  if (text == "none") return CriteoSplit::None;
  STRATA_FAIL(what, ": expected train, test, val or none, got ", quote_field(text));
}

const char* to_string(CriteoSplit s) {
  switch (s) {
    case CriteoSplit::Train: return "train";
    case CriteoSplit::Test: return "test";
    case CriteoSplit::Val: return "val";
    case CriteoSplit::None: return "none";
  }
  return "?";
}

void numpy_shuffle(std::span<int64_t> values, RandomStream& rng) {
  for (std::size_t i = values.size(); i-- > 1;) {
    const auto j = static_cast<std::size_t>(rng.interval(i));
    std::swap(values[i], values[j]);
  }
}

std::vector<int64_t> criteo_split_indices(std::span<const int64_t> o, CriteoSplit split, std::string_view randomize,
                                          RandomStream& rng) {
  STRATA_CHECK(randomize == "total" || randomize == "day" || randomize == "none",
               "--data-randomize: expected total, day or none, got ", quote_field(randomize));
  STRATA_CHECK(o.size() >= 2, "criteo split: no days");
  const int64_t days = static_cast<int64_t>(o.size()) - 1;
  auto range = [](int64_t a, int64_t b) {
    std::vector<int64_t> v(static_cast<std::size_t>(b - a));
    for (int64_t i = a; i < b; ++i) v[static_cast<std::size_t>(i - a)] = i;
    return v;
  };
  if (split == CriteoSplit::None) {
    std::vector<int64_t> all = range(0, o.back());
    if (randomize != "total") return all;
    numpy_shuffle(all, rng);  // X[perm] = X: sample perm[k] is the old sample k
    std::vector<int64_t> order(all.size());
    for (std::size_t k = 0; k < all.size(); ++k) order[static_cast<std::size_t>(all[k])] = static_cast<int64_t>(k);
    return order;
  }
  std::vector<int64_t> train;
  train.reserve(static_cast<std::size_t>(o[static_cast<std::size_t>(days - 1)]));
  for (int64_t d = 0; d + 1 < days; ++d) {
    std::vector<int64_t> day = range(o[static_cast<std::size_t>(d)], o[static_cast<std::size_t>(d + 1)]);
    if (randomize == "day") numpy_shuffle(day, rng);
    train.insert(train.end(), day.begin(), day.end());
  }
  // np.array_split(last day, 2): the first half gets the extra sample.
  const int64_t last = o[static_cast<std::size_t>(days - 1)], n = o.back() - last;
  const int64_t test_n = (n + 1) / 2;
  if (randomize == "total") numpy_shuffle(train, rng);
  if (split == CriteoSplit::Train) return train;
  if (split == CriteoSplit::Test) return range(last, last + test_n);
  return range(last + test_n, o.back());
}

// ---- batches -------------------------------------------------------------------------------------------

CriteoDatasetSource::CriteoDatasetSource(std::shared_ptr<const CriteoData> data, std::vector<int64_t> order,
                                         CriteoSourceConfig config, std::string name)
    : IndexSource(config.rows, kCriteoDense, config.batch_size, 0),
      data_(std::move(data)),
      order_(std::move(order)),
      config_(std::move(config)),
      name_(std::move(name)) {
  STRATA_CHECK(static_cast<int64_t>(config_.rows.size()) == kCriteoSparse, name_, ": expected ", kCriteoSparse,
               " table sizes, got ", config_.rows.size());
  for (std::size_t k = 0; k < config_.rows.size(); ++k)
    STRATA_CHECK(config_.rows[k] > 0, name_, ": table ", k, " has ", config_.rows[k], " rows");
  STRATA_CHECK(config_.batch_size > 0, "--mini-batch-size must be positive, got ", config_.batch_size);
  if (config_.max_samples > 0 && config_.max_samples < num_samples())
    order_.resize(static_cast<std::size_t>(config_.max_samples));
  STRATA_CHECK(!order_.empty(), name_, ": the split holds no samples");
  num_batches_ = (num_samples() + config_.batch_size - 1) / config_.batch_size;
}

bool CriteoDatasetSource::next(Batch& batch) {
  if (next_ >= num_samples()) return false;
  const int64_t n = std::min(config_.batch_size, num_samples() - next_);
  batch.reshape(n, kCriteoDense, kCriteoSparse);
  for (BagStorage& t : batch.tables) {
    t.indices.resize(static_cast<std::size_t>(n));
    t.weights.clear();
    for (int64_t b = 0; b < n; ++b) t.offsets[static_cast<std::size_t>(b + 1)] = b + 1;
  }
  const CriteoData& d = *data_;
  for (int64_t b = 0; b < n; ++b) {
    const int64_t i = order_[static_cast<std::size_t>(next_ + b)];
    const int32_t label = d.label(i);
    STRATA_CHECK(label == 0 || label == 1, "criteo processed file ", quote_path(d.path()), ", member 'y': sample ", i,
                 " has label ", label, "; labels must be 0 or 1");
    batch.targets[static_cast<std::size_t>(b)] = static_cast<float>(label);
    float* dense = batch.dense.data() + b * kCriteoDense;
    for (int64_t j = 0; j < kCriteoDense; ++j)
      dense[j] = std::log(static_cast<float>(std::max(d.dense(i, j), 0)) + 1.0f);
    for (int64_t k = 0; k < kCriteoSparse; ++k) {
      int64_t id = d.category(i, k);
      if (config_.max_ind_range > 0) id %= config_.max_ind_range;
      const int64_t rows = config_.rows[static_cast<std::size_t>(k)];
      if (id >= rows && config_.wrap) id %= rows;
      STRATA_CHECK(id >= 0 && id < rows, "criteo processed file ", quote_path(d.path()), ": sample ", i, ", table ", k,
                   " (C", k + 1, "): id ", id, " is outside the table's ", rows, " rows");
      batch.tables[static_cast<std::size_t>(k)].indices[static_cast<std::size_t>(b)] = id;
    }
  }
  next_ += n;
  return true;
}

// ---- the data set --------------------------------------------------------------------------------------

namespace {

/// Draws preprocessing consumed per processed file written by this process (Note [Criteo split]).
std::mutex& draws_mutex() {
  static std::mutex m;
  return m;
}
std::map<std::string, uint64_t>& draws_by_file() {
  static std::map<std::string, uint64_t> m;
  return m;
}

std::string canonical_key(const std::string& path) {
  std::error_code ec;
  const auto p = std::filesystem::weakly_canonical(path, ec);
  return ec ? path : p.string();
}

/// Preprocesses unless the processed file exists; returns the draws consumed in this process.
uint64_t ensure_processed(const CriteoDatasetConfig& c, const std::string& processed) {
  const std::string key = canonical_key(processed);
  std::lock_guard<std::mutex> lock(draws_mutex());
  std::error_code ec;
  if (std::filesystem::exists(processed, ec)) {
    const auto it = draws_by_file().find(key);
    return it == draws_by_file().end() ? 0 : it->second;
  }
  STRATA_CHECK(!c.raw_data_file.empty(), "--processed-data-file: ", quote_path(processed),
               " does not exist; give --raw-data-file to create it");
  CriteoPreprocessConfig p;
  p.data_set = c.data_set;
  p.raw_data_file = c.raw_data_file;
  p.processed_data_file = processed;
  p.max_ind_range = c.max_ind_range;
  p.sub_sample_rate = c.sub_sample_rate;
  p.compress = !c.memory_map;
  p.progress = c.progress;
  RandomStream rng(c.seed);
  const CriteoPreprocessResult r = preprocess_criteo(p, rng);
  draws_by_file()[key] = r.uniform_draws;
  return r.uniform_draws;
}

}  // namespace

std::string criteo_processed_path(const CriteoDatasetConfig& c) {
  if (!c.processed_data_file.empty()) return c.processed_data_file;
  STRATA_CHECK(!c.raw_data_file.empty(), "--data-generation dataset: give --raw-data-file or --processed-data-file");
  return CriteoPaths::of(c.data_set, c.raw_data_file).default_processed;
}

CriteoDataset::CriteoDataset(const CriteoDatasetConfig& config) : config_(config) {
  processed_ = criteo_processed_path(config_);
  skip_draws_ = ensure_processed(config_, processed_);
  STRATA_CHECK(!config_.raw_data_file.empty(), "--raw-data-file: the day counts of ", quote_path(processed_),
               " are read from <raw directory>/<raw name>_day_count.npz (as the reference does); give the raw path "
               "the file was made from");
  const CriteoPaths paths = CriteoPaths::of(config_.data_set, config_.raw_data_file);
  data_ = CriteoData::load(processed_, paths.day_count, paths.days, config_.memory_map);
}

std::vector<int64_t> CriteoDataset::indices(CriteoSplit split) const {
  RandomStream rng(config_.seed);
  rng.discard_uniforms(skip_draws_);
  return criteo_split_indices(data_->day_offsets(), split, config_.randomize, rng);
}

std::unique_ptr<CriteoDatasetSource> CriteoDataset::source(CriteoSplit split, CriteoSourceConfig config) const {
  std::string name =
      std::string("criteo-") + to_string(split) + "(" + processed_ + ", randomize " + config_.randomize + ")";
  return std::make_unique<CriteoDatasetSource>(data_, indices(split), std::move(config), std::move(name));
}

std::vector<int64_t> criteo_counts(const CriteoDatasetConfig& config) {
  const std::string processed = criteo_processed_path(config);
  ensure_processed(config, processed);
  const npy::NpzReader npz(processed);
  npy::Header h;
  std::vector<int64_t> counts = npy::read_integers(npz, "counts", &h);
  STRATA_CHECK(counts.size() == static_cast<std::size_t>(kCriteoSparse), "criteo processed file ",
               quote_path(processed), ", member 'counts': shape ", h.shape_string(), ", expected (26,)");
  return counts;
}

}  // namespace strata::emb
