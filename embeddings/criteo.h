#pragma once
/// @file
/// Readers for the Criteo click logs (Kaggle Display Advertising Challenge, Terabyte), producing
/// Batches of 13 dense features, 26 one-index bags and a 0/1 target per sample.
///
/// Note [Criteo formats]
/// - Raw TSV (`train.txt`, `day_N`): one sample per line, `label \t I1..I13 \t C1..C26`; I are
///   integers (may be negative), C are 32-bit hashes in hex; any field may be empty (missing),
///   which the reference reads as 0. Dense features become log(max(x, 0) + 1) (the reference
///   clamps negatives to 0 in preprocessing and applies log(x + 1) in its collate function).
///   The reference maps each column's hashes to dense ids with a dictionary built in a separate
///   preprocessing pass; a streaming reader cannot, so C_k becomes hash mod rows[k] (what the
///   reference does with --max-ind-range).
/// - MLPerf binary (`*_data.bin`, `numpy_to_binary`): 40 little-endian int32 per sample: label,
///   13 dense (already clamped), 26 categorical ids (already dictionary-mapped); dense features
///   get the same log(x + 1). Ids >= rows[k] wrap mod rows[k] (--max-ind-range) unless `wrap` is
///   off, when they are an error; negative ids are always an error.
/// Both read sequentially in file order (the reference's --data-randomize shuffles in its
/// preprocessing, which these readers do not do); the last batch of an epoch may be short.

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "embeddings/index_source.h"

namespace strata::emb {

/// Criteo's layout.
inline constexpr int64_t kCriteoDense = 13;
inline constexpr int64_t kCriteoSparse = 26;
/// Fields of a TSV line and int32 words of a binary record: label + 13 + 26.
inline constexpr int64_t kCriteoFields = 1 + kCriteoDense + kCriteoSparse;

/// The 26 tables' row counts of the MLPerf configuration (REFERENCE.md §1, capped at 40M).
std::vector<int64_t> criteo_mlperf_rows();

struct CriteoConfig {
  std::string path;           ///< the file (--raw-data-file / --processed-data-file)
  std::vector<int64_t> rows;  ///< rows of the 26 tables (e.g. 26 x --max-ind-range)
  int64_t batch_size = 128;   ///< --mini-batch-size
  /// Binary only: ids >= rows wrap modulo rows (--max-ind-range); false: they are an error.
  bool wrap = true;
  /// Read at most this many samples per epoch (0: the whole file).
  int64_t max_samples = 0;
};

/// The raw TSV reader.
class CriteoTsvSource final : public IndexSource {
 public:
  /// Opens the file and counts its samples (one pass). Throws strata::Error naming the file when
  /// it cannot be opened, or the setting for rows that are not 26 positive counts.
  explicit CriteoTsvSource(CriteoConfig config);
  ~CriteoTsvSource() override;
  /// Throws strata::Error naming the file, line and column for a line without 40 fields, a label
  /// or dense value that is not an integer, or a categorical value that is not hex.
  bool next(Batch& batch) override;
  void reset() override;
  std::string describe() const override;
  /// Samples per epoch.
  int64_t num_samples() const { return samples_; }

  /// Parses one line into `dense` (13), `sparse` (26, already mod rows) and `label`; `line_no`
  /// (1-based) and the path name errors. Exposed for tests.
  static void parse_line(std::string_view line, const std::string& path, int64_t line_no, std::span<const int64_t> rows,
                         float* dense, int64_t* sparse, float* label);

 private:
  bool read_line(std::string& line);
  CriteoConfig config_;
  std::FILE* file_ = nullptr;
  int64_t samples_ = 0;
  int64_t line_no_ = 0;
  int64_t next_sample_ = 0;
  std::string line_;
  std::vector<char> buffer_;
  std::size_t buf_pos_ = 0;
  std::size_t buf_len_ = 0;
  bool eof_ = false;
  std::vector<int64_t> sparse_;
};

/// The MLPerf binary reader. It streams: each batch is one read of its records (as the
/// reference's CriteoBinDataset reads), so the file is never loaded whole, and — unlike a mapping,
/// which faults with SIGBUS — a file truncated under the reader ends in an error naming the record.
class CriteoBinarySource final : public IndexSource {
 public:
  /// Throws strata::Error naming the file when it cannot be opened, when its size is not a whole
  /// number of 160-byte records (naming the truncated record and its bytes), or the setting for
  /// rows that are not 26 positive counts.
  explicit CriteoBinarySource(CriteoConfig config);
  ~CriteoBinarySource() override;
  /// Throws strata::Error naming the file, record and column for a negative id, an id >= rows
  /// without wrap, or a short read.
  bool next(Batch& batch) override;
  void reset() override;
  std::string describe() const override;
  int64_t num_samples() const { return samples_; }

  /// Writes records in this format (label, 13 dense, 26 sparse per sample), for tests and tools.
  static void write(const std::string& path, const std::vector<int32_t>& records);

 private:
  CriteoConfig config_;
  std::FILE* file_ = nullptr;
  int64_t samples_ = 0;
  int64_t next_sample_ = 0;
  std::vector<int32_t> records_;
};

}  // namespace strata::emb
