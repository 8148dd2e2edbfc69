#include "embeddings/criteo.h"

#include <bit>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "core/file.h"
#include "core/text.h"

namespace strata::emb {

std::vector<int64_t> criteo_mlperf_rows() {
  return {40000000, 39060, 17295, 7424, 20265, 3,  7122,     1543,     63,       40000000, 3067956, 405282, 10,
          2209,     11938, 155,   4,    976,   14, 40000000, 40000000, 40000000, 590152,   12973,   108,    36};
}

namespace {

void check_criteo_config(const CriteoConfig& c, const char* what) {
  STRATA_CHECK(static_cast<int64_t>(c.rows.size()) == kCriteoSparse, what, ": expected ", kCriteoSparse,
               " table sizes (one per categorical feature C1..C26), got ", c.rows.size());
  for (std::size_t k = 0; k < c.rows.size(); ++k) {
    STRATA_CHECK(c.rows[k] > 0, what, ": table ", k, " (C", k + 1, ") has ", c.rows[k],
                 " rows; expected a positive count");
  }
  STRATA_CHECK(c.batch_size > 0, "--mini-batch-size must be positive, got ", c.batch_size);
  STRATA_CHECK(c.max_samples >= 0, what, ": max_samples must be 0 (whole file) or positive, got ", c.max_samples);
}

/// log(max(x, 0) + 1) in float32, the reference's dense transform.
float dense_transform(int64_t x) { return std::log(static_cast<float>(x < 0 ? 0 : x) + 1.0f); }

int64_t batches_for(int64_t samples, int64_t batch) { return (samples + batch - 1) / batch; }

const char* column_name(std::size_t field, char* buf, std::size_t n) {
  if (field == 0) {
    std::snprintf(buf, n, "label");
  } else if (field <= static_cast<std::size_t>(kCriteoDense)) {
    std::snprintf(buf, n, "I%zu", field);
  } else {
    std::snprintf(buf, n, "C%zu", field - static_cast<std::size_t>(kCriteoDense));
  }
  return buf;
}

}  // namespace

// ---- TSV ---------------------------------------------------------------------------------------

CriteoTsvSource::CriteoTsvSource(CriteoConfig config)
    : IndexSource(config.rows, kCriteoDense, config.batch_size, 0), config_(std::move(config)) {
  check_criteo_config(config_, "criteo tsv");
  file_ = open_file_for_reading(config_.path, "criteo tsv");
  // Count samples: lines, plus a last line without a newline.
  std::vector<char> buf(1 << 20);
  int64_t lines = 0;
  bool open_line = false;
  for (;;) {
    const std::size_t got = std::fread(buf.data(), 1, buf.size(), file_);
    if (got == 0) break;
    for (std::size_t i = 0; i < got; ++i) {
      if (buf[i] == '\n') {
        ++lines;
        open_line = false;
      } else {
        open_line = true;
      }
    }
  }
  if (open_line) ++lines;
  samples_ = config_.max_samples > 0 ? std::min(lines, config_.max_samples) : lines;
  if (samples_ <= 0) {
    std::fclose(file_);
    file_ = nullptr;
    STRATA_FAIL("criteo tsv: ", quote_path(config_.path), " holds no samples");
  }
  num_batches_ = batches_for(samples_, config_.batch_size);
  buffer_.resize(1 << 20);
  sparse_.resize(static_cast<std::size_t>(kCriteoSparse));
  reset();
}

CriteoTsvSource::~CriteoTsvSource() {
  if (file_ != nullptr) std::fclose(file_);
}

void CriteoTsvSource::reset() {
  std::rewind(file_);
  buf_pos_ = buf_len_ = 0;
  eof_ = false;
  line_no_ = 0;
  next_sample_ = 0;
}

std::string CriteoTsvSource::describe() const { return "criteo-tsv(" + config_.path + ")"; }

bool CriteoTsvSource::read_line(std::string& line) {
  line.clear();
  bool any = false;
  for (;;) {
    if (buf_pos_ == buf_len_) {
      if (eof_) return any;
      buf_len_ = std::fread(buffer_.data(), 1, buffer_.size(), file_);
      buf_pos_ = 0;
      if (buf_len_ == 0) {
        eof_ = true;
        return any;
      }
    }
    const char* start = buffer_.data() + buf_pos_;
    const auto* nl = static_cast<const char*>(std::memchr(start, '\n', buf_len_ - buf_pos_));
    if (nl != nullptr) {
      line.append(start, static_cast<std::size_t>(nl - start));
      buf_pos_ += static_cast<std::size_t>(nl - start) + 1;
      return true;
    }
    line.append(start, buf_len_ - buf_pos_);
    buf_pos_ = buf_len_;
    any = true;
  }
}

void CriteoTsvSource::parse_line(std::string_view line, const std::string& path, int64_t line_no,
                                 std::span<const int64_t> rows, float* dense, int64_t* sparse, float* label) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  std::size_t field = 0;
  std::size_t start = 0;
  char name[32];
  for (;;) {
    const std::size_t tab = line.find('\t', start);
    const std::string_view text =
        line.substr(start, tab == std::string_view::npos ? std::string_view::npos : tab - start);
    if (field < static_cast<std::size_t>(kCriteoFields)) {
      if (field <= static_cast<std::size_t>(kCriteoDense)) {
        int64_t v = 0;  // missing -> 0
        if (!text.empty()) {
          const char* first = text.data();
          const char* last = text.data() + text.size();
          const auto [ptr, ec] = std::from_chars(first, last, v);
          STRATA_CHECK(ec == std::errc() && ptr == last, "criteo tsv ", quote_path(path), " line ", line_no,
                       ", column ", column_name(field, name, sizeof name), ": ", quote_field(text),
                       " is not an integer");
        }
        if (field == 0) {
          STRATA_CHECK(v == 0 || v == 1, "criteo tsv ", quote_path(path), " line ", line_no,
                       ", column label: ", quote_field(text), " is not a 0/1 label");
          *label = static_cast<float>(v);
        } else {
          dense[field - 1] = dense_transform(v);
        }
      } else {
        uint64_t h = 0;  // missing -> 0
        if (!text.empty()) {
          const char* first = text.data();
          const char* last = text.data() + text.size();
          const auto [ptr, ec] = std::from_chars(first, last, h, 16);
          STRATA_CHECK(ec == std::errc() && ptr == last && text.front() != '-' && text.front() != '+', "criteo tsv ",
                       quote_path(path), " line ", line_no, ", column ", column_name(field, name, sizeof name), ": ",
                       quote_field(text), " is not a hexadecimal category (at most 16 hex digits)");
        }
        const std::size_t k = field - 1 - static_cast<std::size_t>(kCriteoDense);
        sparse[k] = static_cast<int64_t>(h % static_cast<uint64_t>(rows[k]));
      }
    }
    ++field;
    if (tab == std::string_view::npos) break;
    start = tab + 1;
  }
  STRATA_CHECK(field == static_cast<std::size_t>(kCriteoFields), "criteo tsv ", quote_path(path), " line ", line_no,
               ": expected ", kCriteoFields, " tab-separated fields (label, I1..I13, C1..C26), found ", field);
}

bool CriteoTsvSource::next(Batch& batch) {
  if (next_sample_ >= samples_) return false;
  const int64_t n = std::min(config_.batch_size, samples_ - next_sample_);
  batch.reshape(n, kCriteoDense, kCriteoSparse);
  for (BagStorage& t : batch.tables) {
    t.indices.resize(static_cast<std::size_t>(n));
    t.weights.clear();
    for (int64_t b = 0; b < n; ++b) t.offsets[static_cast<std::size_t>(b + 1)] = b + 1;
  }
  for (int64_t b = 0; b < n; ++b) {
    const bool got = read_line(line_);
    ++line_no_;
    STRATA_CHECK(got, "criteo tsv ", quote_path(config_.path), ": the file ended at line ", line_no_,
                 " (it changed while read)");
    parse_line(line_, config_.path, line_no_, rows_, batch.dense.data() + b * kCriteoDense, sparse_.data(),
               batch.targets.data() + b);
    for (std::size_t k = 0; k < sparse_.size(); ++k) batch.tables[k].indices[static_cast<std::size_t>(b)] = sparse_[k];
  }
  next_sample_ += n;
  return true;
}

// ---- binary ------------------------------------------------------------------------------------

namespace {

constexpr std::size_t kRecordBytes = static_cast<std::size_t>(kCriteoFields) * sizeof(int32_t);

int32_t from_little(int32_t v) {
  if constexpr (std::endian::native == std::endian::little) {
    return v;
  } else {
    const auto u = static_cast<uint32_t>(v);
    return static_cast<int32_t>((u >> 24) | ((u >> 8) & 0xff00u) | ((u << 8) & 0xff0000u) | (u << 24));
  }
}

}  // namespace

CriteoBinarySource::CriteoBinarySource(CriteoConfig config)
    : IndexSource(config.rows, kCriteoDense, config.batch_size, 0), config_(std::move(config)) {
  check_criteo_config(config_, "criteo binary");
  file_ = open_file_for_reading(config_.path, "criteo binary");
  std::fseek(file_, 0, SEEK_END);
  const long size = std::ftell(file_);
  STRATA_CHECK(size >= 0, "criteo binary: cannot determine the size of ", quote_path(config_.path));
  const auto bytes = static_cast<uint64_t>(size);
  const uint64_t whole = bytes / kRecordBytes;
  const uint64_t rest = bytes % kRecordBytes;
  if (rest != 0) {
    std::fclose(file_);
    file_ = nullptr;
    STRATA_FAIL("criteo binary ", quote_path(config_.path), ": record ", whole + 1, " is truncated (", rest, " of ",
                kRecordBytes, " bytes; a record is ", kCriteoFields, " int32: label, 13 dense, 26 categorical)");
  }
  const auto records = static_cast<int64_t>(whole);
  samples_ = config_.max_samples > 0 ? std::min(records, config_.max_samples) : records;
  if (samples_ <= 0) {
    std::fclose(file_);
    file_ = nullptr;
    STRATA_FAIL("criteo binary: ", quote_path(config_.path), " holds no samples");
  }
  num_batches_ = batches_for(samples_, config_.batch_size);
  reset();
}

CriteoBinarySource::~CriteoBinarySource() {
  if (file_ != nullptr) std::fclose(file_);
}

void CriteoBinarySource::reset() {
  std::rewind(file_);
  next_sample_ = 0;
}

std::string CriteoBinarySource::describe() const { return "criteo-binary(" + config_.path + ")"; }

bool CriteoBinarySource::next(Batch& batch) {
  if (next_sample_ >= samples_) return false;
  const int64_t n = std::min(config_.batch_size, samples_ - next_sample_);
  records_.resize(static_cast<std::size_t>(n * kCriteoFields));
  const std::size_t got = std::fread(records_.data(), kRecordBytes, static_cast<std::size_t>(n), file_);
  STRATA_CHECK(got == static_cast<std::size_t>(n), "criteo binary ", quote_path(config_.path), ": record ",
               next_sample_ + static_cast<int64_t>(got) + 1,
               " could not be read (the file is shorter than when opened)");
  batch.reshape(n, kCriteoDense, kCriteoSparse);
  for (BagStorage& t : batch.tables) {
    t.indices.resize(static_cast<std::size_t>(n));
    t.weights.clear();
    for (int64_t b = 0; b < n; ++b) t.offsets[static_cast<std::size_t>(b + 1)] = b + 1;
  }
  char name[32];
  for (int64_t b = 0; b < n; ++b) {
    const int32_t* rec = records_.data() + b * kCriteoFields;
    const int32_t label = from_little(rec[0]);
    STRATA_CHECK(label == 0 || label == 1, "criteo binary ", quote_path(config_.path), ": record ",
                 next_sample_ + b + 1, ", column label: ", label, " is not a 0/1 label");
    batch.targets[static_cast<std::size_t>(b)] = static_cast<float>(label);
    for (int64_t i = 0; i < kCriteoDense; ++i) {
      batch.dense[static_cast<std::size_t>(b * kCriteoDense + i)] = dense_transform(from_little(rec[1 + i]));
    }
    for (int64_t k = 0; k < kCriteoSparse; ++k) {
      const int64_t id = from_little(rec[1 + kCriteoDense + k]);
      const int64_t rows = rows_[static_cast<std::size_t>(k)];
      const std::size_t field = static_cast<std::size_t>(1 + kCriteoDense + k);
      STRATA_CHECK(id >= 0, "criteo binary ", quote_path(config_.path), " record ", next_sample_ + b + 1, ", column ",
                   column_name(field, name, sizeof name), ": id ", id, " is negative");
      STRATA_CHECK(id < rows || config_.wrap, "criteo binary ", quote_path(config_.path), " record ",
                   next_sample_ + b + 1, ", column ", column_name(field, name, sizeof name), ": id ", id,
                   " is out of range [0, ", rows, ") of table ", k);
      batch.tables[static_cast<std::size_t>(k)].indices[static_cast<std::size_t>(b)] = id % rows;
    }
  }
  next_sample_ += n;
  return true;
}

void CriteoBinarySource::write(const std::string& path, const std::vector<int32_t>& records) {
  STRATA_CHECK(records.size() % static_cast<std::size_t>(kCriteoFields) == 0, "criteo binary: ", records.size(),
               " values are not a whole number of ", kCriteoFields, "-value records");
  AtomicFile f(path, "criteo binary");  // Note [Atomic file writes]
  for (int32_t v : records) {
    const int32_t le = from_little(v);  // the swap is its own inverse
    f.write(&le, sizeof le);
  }
  f.commit();
}

}  // namespace strata::emb
